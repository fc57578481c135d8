/* clocks_node.c — one node of the consistency-model property test (test_cluster.sh clocks),
 * started by augur run:
 *
 *   clocks_node MODEL PLACE CLOCKS [RUNS]   MODEL: async, ssp:S or bsp; PLACE: a placement;
 *                                           RUNS: the clocks cut into that many runs
 *                                           (au_node_run calls; the workers pause between)
 *
 * Every worker of every node, at each clock c of CLOCKS: reads (au_worker_pull) a few rows
 * of the half of the keys that clock c reads, then pushes +1 (exact int32) to a few rows of
 * the other half, in the column that is its own (the table's dim is the cluster's worker
 * count), and announces the next clock's rows. Which rows are a function of (worker,
 * clock), so every worker knows every other's pushes. Each value read is checked: under
 * ssp:S it must hold at least every push its writer made at clocks <= c - S - 1 and no
 * push made after clock c + S (a writer that far ahead would have read past the bound);
 * under bsp (S = 0, and a clock's reads and writes touch different halves) it must equal
 * exactly the pushes made at clocks < c, the serial clock-by-clock result. Under async it
 * only counts what a bound would have refused. Each node runs with its own
 * AU_NET_DELAY_US, picked from CLOCKS_SEED and its rank (up to 400 us, plus up to 300 us of
 * jitter per frame), unless AU_NET_DELAY_US is set.
 *
 * Prints one key=value line per node and exits 0 only if every check held on it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <augur.h>

enum { WORKERS = 2, KEYS = 64, READS = 6, PUSHES = 6 };

static uint64_t mix(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Row i of clock c for worker g: reads from half c % 2, pushes to half (c + 1) % 2. */
static au_key_t row_of(int g, int64_t c, int i, int push)
{
  const uint64_t half = (uint64_t)((c + push) & 1);
  const uint64_t x =
      mix((uint64_t)g * 1000003u + (uint64_t)c * 7919u + (uint64_t)i * 31u + (uint64_t)push);
  return half * (KEYS / 2) + x % (KEYS / 2);
}

typedef struct ctx {
  au_table_t *t;
  int nworkers; /* in the cluster */
  int64_t clocks;
  int staleness, exact;
  int64_t per_run; /* clocks per au_node_run */
  /* pushes[g][c][k]: how many pushes worker g makes to key k at clock c (0..PUSHES) */
  uint8_t *pushes;
} ctx_t;

typedef struct tester {
  ctx_t *c;
  int g; /* global worker id: rank * WORKERS + local */
  uint64_t reads, values, low, high, inexact;
  int64_t paused_at;
} tester_t;

static uint8_t pushes_at(const ctx_t *c, int g, int64_t clock, au_key_t k)
{
  return c->pushes[((size_t)g * (size_t)c->clocks + (size_t)clock) * KEYS + k];
}

static int step(au_worker_t *w, void *arg)
{
  tester_t *s = arg;
  ctx_t *c = s->c;
  const int64_t now = au_worker_clock(w);
  if (now >= c->clocks) return AU_DONE;
  if (now > 0 && now % c->per_run == 0 && s->paused_at != now) {
    s->paused_at = now; /* the next run goes on from here */
    return AU_PAUSE;
  }
  if (now + 1 < c->clocks) { /* the next clock's rows, for the placements that listen */
    au_key_t next[READS + PUSHES];
    for (int i = 0; i < READS; i++) next[i] = row_of(s->g, now + 1, i, 0);
    for (int i = 0; i < PUSHES; i++) next[READS + i] = row_of(s->g, now + 1, i, 1);
    if (au_worker_intent(w, c->t, next, READS + PUSHES, now + 1, now + 2) != 0) return AU_EINVAL;
  }
  au_key_t keys[READS];
  int32_t got[READS * 64]; /* READS rows of nworkers values */
  for (int i = 0; i < READS; i++) keys[i] = row_of(s->g, now, i, 0);
  int rc = au_worker_pull(w, c->t, keys, READS, got);
  if (rc == AU_EAGAIN) return AU_WAIT;
  if (rc != 0) return rc;
  s->reads++;
  for (int i = 0; i < READS; i++)
    for (int g = 0; g < c->nworkers; g++) {
      /* what writer g pushed to this row by clock t, for the bounds */
      int64_t below = 0, upto = 0, before = 0;
      for (int64_t t = 0; t < c->clocks; t++) {
        const int64_t p = pushes_at(c, g, t, keys[i]);
        if (t <= now - c->staleness - 1) below += p;
        if (t <= now + c->staleness) upto += p;
        if (t < now) before += p;
      }
      const int64_t v = got[i * c->nworkers + g];
      s->values++;
      if (v < below) {
        if (s->low++ < 4)
          fprintf(stderr,
                  "worker %d clock %lld: key %llu column %d is %lld, short of the %lld "
                  "pushes made by clock %lld\n",
                  s->g, (long long)now, (unsigned long long)keys[i], g, (long long)v,
                  (long long)below, (long long)(now - c->staleness - 1));
      }
      if (v > upto) s->high++;
      if (c->exact && v != before) s->inexact++;
    }
  au_key_t pk[PUSHES];
  int32_t d[PUSHES * 64];
  memset(d, 0, sizeof(d));
  for (int i = 0; i < PUSHES; i++) pk[i] = row_of(s->g, now, i, 1), d[i * c->nworkers + s->g] = 1;
  if ((rc = au_worker_push(w, c->t, pk, PUSHES, d)) != 0) return rc;
  au_worker_advance(w);
  return AU_CONTINUE;
}

int main(int argc, char **argv)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: clocks_node MODEL PLACE CLOCKS [RUNS]\n");
    return 2;
  }
  au_consistency_t model;
  int staleness;
  au_place_t place;
  const int64_t clocks = atoll(argv[3]), runs = argc == 5 ? atoll(argv[4]) : 1;
  if (au_consistency_parse(argv[1], &model, &staleness) != 0 ||
      au_place_parse(argv[2], &place) != 0 || clocks <= 0 || runs <= 0 || runs > clocks) {
    fprintf(stderr, "clocks_node: bad model, placement or clock count\n");
    return 2;
  }
  const char *rank_s = getenv("AU_RANK"), *seed_s = getenv("CLOCKS_SEED");
  if (!getenv("AU_NET_DELAY_US")) { /* this node's own delay and jitter */
    uint64_t x = mix((seed_s ? strtoull(seed_s, NULL, 10) : 1) * 977 + (rank_s ? atoi(rank_s) : 0));
    char v[32];
    snprintf(v, sizeof(v), "%llu:300", (unsigned long long)(x % 400));
    setenv("AU_NET_DELAY_US", v, 1);
  }
  /* CLOCKS_MIXED=1: rank 1 runs async while the others are bounded, which every node must
   * refuse when it starts */
  if (getenv("CLOCKS_MIXED") && rank_s && atoi(rank_s) == 1) model = AU_ASYNC, staleness = 0;
  au_node_t *node;
  if (au_node_create(&(au_node_opts_t){.threads = 2, .consistency = model, .staleness = staleness},
                     &node) != 0)
    return 1;
  const int rank = au_node_rank(node), nodes = au_node_nodes(node);
  ctx_t c = {.nworkers = nodes * WORKERS,
             .clocks = clocks,
             .staleness = model == AU_ASYNC ? 0 : staleness,
             .exact = model == AU_BSP,
             .per_run = (clocks + runs - 1) / runs};
  if (c.nworkers > 64) return 2;
  c.pushes = calloc((size_t)c.nworkers * (size_t)clocks * KEYS, 1);
  for (int g = 0; g < c.nworkers; g++)
    for (int64_t t = 0; t < clocks; t++)
      for (int i = 0; i < PUSHES; i++)
        c.pushes[((size_t)g * (size_t)clocks + (size_t)t) * KEYS + row_of(g, t, i, 1)]++;
  int rc = au_table_create(node,
                           &(au_table_opts_t){.keys = KEYS,
                                              .dim = (uint32_t)c.nworkers,
                                              .type = AU_I32,
                                              .group = 4,
                                              .kernel = AU_KERNEL_ADD,
                                              .place = place,
                                              .name = "stamps"},
                           &c.t);
  if (rc != 0) return 1;
  tester_t ts[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    ts[i] = (tester_t){.c = &c, .g = rank * WORKERS + i};
    au_worker_spawn(node, &(au_worker_opts_t){step, &ts[i]}, NULL);
  }
  int nrun = 0;
  do rc = au_node_run(node);
  while (rc == 0 && ++nrun < runs);
  uint64_t reads = 0, values = 0, low = 0, high = 0, inexact = 0;
  for (int i = 0; i < WORKERS; i++)
    reads += ts[i].reads, values += ts[i].values, low += ts[i].low, high += ts[i].high,
        inexact += ts[i].inexact;
  au_node_stats_t st;
  au_node_stats(node, &st);
  /* the bound held: nothing short, nothing from too far ahead, bsp exact; and every
   * clock's reads were made */
  const int bounded = model != AU_ASYNC;
  const int ok = rc == 0 && reads == (uint64_t)(WORKERS * clocks) &&
                 (!bounded || (low == 0 && high == 0 && inexact == 0));
  char name[24];
  printf("rank=%d model=%s place=%s runs=%d run=%d reads=%llu values=%llu short=%llu ahead=%llu "
         "inexact=%llu reads_waited=%llu wait_ms=%.1f replicas_made=%llu moves_in=%llu "
         "remote_rows=%llu %s\n",
         rank, au_consistency_name(model, staleness, name, sizeof(name)), argv[2], nrun, rc,
         (unsigned long long)reads, (unsigned long long)values, (unsigned long long)low,
         (unsigned long long)high, (unsigned long long)inexact, (unsigned long long)st.reads_waited,
         (double)st.wait_ns / 1e6, (unsigned long long)st.replicas_made,
         (unsigned long long)st.moves_in, (unsigned long long)st.rows_remote, ok ? "ok" : "FAILED");
  au_node_destroy(node);
  free(c.pushes);
  return ok ? 0 : 1;
}
