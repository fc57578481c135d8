/* bootstrap.c — where a node learns its place in a cluster: rank, node count and the
 * coordinator's address, from augur's own variables or from the launcher that started
 * it (OpenMPI, PMI, Slurm). Pure functions of the environment; no I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augur.h"
#include "runtime/addr.h"

/* 20000..31999: below Linux's ephemeral ports (32768..), which outgoing connections take */
#define DEFAULT_PORT_BASE  20000
#define DEFAULT_PORT_RANGE 12000

/* Parses a decimal integer in [min, max] from variable `name`; 1 if set and valid, 0 if
 * unset, AU_EINVAL with a message if set but not valid. */
static int env_int(const char *name, long min, long max, long *out, char *err, size_t errlen)
{
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x < min || x > max) {
    snprintf(err, errlen, "%s='%s': expected a whole number in [%ld, %ld]", name, v, min, max);
    return AU_EINVAL;
  }
  *out = x;
  return 1;
}

static uint64_t fnv1a(const char *s)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}

int au_cluster_opts_from_env(au_cluster_opts_t *o, char *err, size_t errlen)
{
  memset(o, 0, sizeof(*o));
  o->nodes = 1;
  long rank = 0, nodes = 1;
  int rc, found = 0;
  const char *job = NULL, *source = NULL;

  /* augur's own variables first, then the launchers' */
  static const struct {
    const char *rank, *size, *job, *local_size;
  } launchers[] = {
      {"AU_RANK", "AU_NODES", "AU_CLUSTER", NULL},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_MCA_ess_base_jobid",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"PMI_RANK", "PMI_SIZE", "PMI_JOBID", NULL},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", NULL},
  };
  for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]) && !found; i++) {
    if ((rc = env_int(launchers[i].size, 1, 65535, &nodes, err, errlen)) < 0) return rc;
    if (rc == 0) continue;
    if ((rc = env_int(launchers[i].rank, 0, nodes - 1, &rank, err, errlen)) < 0) return rc;
    if (rc == 0) {
      snprintf(err, errlen, "%s is set but %s is not", launchers[i].size, launchers[i].rank);
      return AU_EINVAL;
    }
    found = 1;
    source = launchers[i].size;
    job = getenv(launchers[i].job);
    long local = 0;
    if (launchers[i].local_size &&
        env_int(launchers[i].local_size, 1, 65535, &local, err, errlen) == 1 && local != nodes &&
        !getenv("AU_COORD")) {
      snprintf(err, errlen,
               "%s=%ld nodes run on several hosts: set AU_COORD=host:port to an address of "
               "rank 0's host (e.g. mpirun -x AU_COORD=...)",
               launchers[i].size, nodes);
      return AU_EINVAL;
    }
  }
  o->rank = (int)rank;
  o->nodes = (int)nodes;

  long t = 0;
  if ((rc = env_int("AU_TIMEOUT", 1, 86400, &t, err, errlen)) < 0) return rc;
  o->timeout_ms = rc ? (int)(t * 1000) : 30000;
  /* AU_DEAD_MS: how long a silent peer counts as alive; heartbeats go out at a tenth of
   * it, at most every 500 ms */
  long dead = 5000;
  if ((rc = env_int("AU_DEAD_MS", 100, 86400000, &dead, err, errlen)) < 0) return rc;
  o->dead_ms = (int)dead;
  o->heartbeat_ms = dead / 10 < 500 ? (int)(dead / 10) : 500;
  long q = 0;
  if ((rc = env_int("AU_QUEUE_BYTES", 4096, 1L << 40, &q, err, errlen)) < 0) return rc;
  o->queue_bytes = rc ? q : 0;

  const char *secret = getenv("AU_SECRET");
  if (secret && strlen(secret) >= sizeof(o->secret)) {
    snprintf(err, errlen, "AU_SECRET is longer than %zu bytes", sizeof(o->secret) - 1);
    return AU_EINVAL;
  }
  if (secret) snprintf(o->secret, sizeof(o->secret), "%s", secret);
  const char *insecure = getenv("AU_INSECURE");
  if (insecure && strcmp(insecure, "0") != 0 && strcmp(insecure, "1") != 0) {
    snprintf(err, errlen, "AU_INSECURE='%s': expected 0 or 1", insecure);
    return AU_EINVAL;
  }
  o->insecure = insecure && strcmp(insecure, "1") == 0;
  const char *ports = getenv("AU_PORTS");
  if (ports) {
    char *end;
    errno = 0;
    long lo = strtol(ports, &end, 10), hi = -1;
    if (!errno && end != ports && *end == '-') {
      const char *h = end + 1;
      hi = strtol(h, &end, 10);
      if (errno || end == h || *end) hi = -1;
    }
    if (lo < 1 || hi < lo || hi > 65535) {
      snprintf(err, errlen, "AU_PORTS='%s': expected LO-HI with 1 <= LO <= HI <= 65535", ports);
      return AU_EINVAL;
    }
    o->port_lo = (int)lo;
    o->port_hi = (int)hi;
  }

  const char *cluster = getenv("AU_CLUSTER");
  if (cluster && (strlen(cluster) == 0 || strlen(cluster) >= sizeof(o->cluster))) {
    snprintf(err, errlen, "AU_CLUSTER='%s': expected 1 to %zu characters", cluster,
             sizeof(o->cluster) - 1);
    return AU_EINVAL;
  }
  snprintf(o->cluster, sizeof(o->cluster), "%s", cluster ? cluster : job ? job : "augur");

  const char *coord = getenv("AU_COORD");
  char host[256];
  int port;
  if (coord) {
    if (strlen(coord) >= sizeof(o->coord) || addr_split(coord, 0, host, sizeof(host), &port) != 0) {
      snprintf(err, errlen,
               "AU_COORD='%s': expected host:port with a port in 1..65535 ([addr]:port for IPv6)",
               coord);
      return AU_EINVAL;
    }
    snprintf(o->coord, sizeof(o->coord), "%s", coord);
  } else if (found && nodes > 1) {
    if (!strcmp(source, "AU_NODES")) {
      snprintf(err, errlen, "AU_NODES=%ld but AU_COORD (host:port of rank 0) is not set", nodes);
      return AU_EINVAL;
    }
    /* Started by mpirun/srun on one host: every rank derives the same port from the
     * job id. A port in use makes rank 0 fail with a message that points to AU_COORD. */
    port = DEFAULT_PORT_BASE + (int)(fnv1a(job ? job : "augur") % DEFAULT_PORT_RANGE);
    snprintf(o->coord, sizeof(o->coord), "127.0.0.1:%d", port);
  } else {
    snprintf(o->coord, sizeof(o->coord), "127.0.0.1:%d", DEFAULT_PORT_BASE);
  }

  /* Without AU_BIND the node decides when it joins (member.c): rank 0 listens on the
   * coordinator's address, the others on the address from which they reach it. */
  const char *bind = getenv("AU_BIND");
  if (bind && (!*bind || strlen(bind) >= sizeof(o->bind))) {
    snprintf(err, errlen,
             "AU_BIND='%s': expected an address, a host name or an interface "
             "of at most %zu bytes",
             bind, sizeof(o->bind) - 1);
    return AU_EINVAL;
  }
  if (bind) memcpy(o->bind, bind, strlen(bind) + 1);
  return o->nodes > 1;
}
