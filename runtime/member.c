/* member.c — membership of a cluster, on the I/O thread, and the main-thread calls that
 * wait for it: joining (a barrier), leaving, heartbeats and dead peers, and the cluster's
 * health.
 *
 * Joining: every rank r > 0 dials rank 0 (the coordinator) and sends JOIN with its
 * listen address; once all have joined, rank 0 sends PEERS; rank r dials every rank
 * 0 < j < r and accepts the ranks above it; a node whose mesh is complete sends READY;
 * when all are ready rank 0 sends GO, which ends the barrier. Leaving: BYE to every peer,
 * then each connection closes once the peer's BYE is in and our queue is written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/addr.h"
#include "runtime/cluster.h"
#include "runtime/rt.h"

#define TICK_MS          50
#define LEAVE_TIMEOUT_MS 10000

/* --- health ------------------------------------------------------------------------- */

void member_fail(net_t *net, int error, const char *msg)
{
  pthread_mutex_lock(&net->mu);
  if (!net->error) {
    net->error = error;
    atomic_store(&net->broken, 1);
    size_t n = strlen(msg) < sizeof(net->error_msg) ? strlen(msg) : sizeof(net->error_msg) - 1;
    memcpy(net->error_msg, msg, n);
    net->error_msg[n] = '\0';
  }
  net_wake_main(net);
  pthread_mutex_unlock(&net->mu);
  au_runtime_stop(net->rt);
}

void member_lost(net_t *net, int peer, const char *why)
{
  if (net->member.state == NET_LEAVING || net->member.state == NET_LEFT) {
    net_log(net, AU_LOG_WARN, "node %d went away while this node was leaving: %s", peer, why);
    return;
  }
  char msg[320];
  snprintf(msg, sizeof(msg), "lost node %d: %s", peer, why);
  net_log(net, AU_LOG_ERROR, "%s", msg);
  member_fail(net, AU_ENODE, msg);
}

int member_wait(net_t *net, int (*done)(net_t *, uint64_t), uint64_t arg, int timeout_ms)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  if (timeout_ms > 0) {
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  }
  while (!done(net, arg) && !net->error) {
    if (timeout_ms <= 0) {
      pthread_cond_wait(&net->cv, &net->mu);
    } else if (pthread_cond_timedwait(&net->cv, &net->mu, &until) == ETIMEDOUT) {
      return done(net, arg) ? 0 : AU_ETIMEDOUT;
    }
  }
  return done(net, arg) ? 0 : net->error;
}

/* --- joining ------------------------------------------------------------------------ */

int member_init(net_t *net)
{
  member_t *m = &net->member;
  size_t n = (size_t)net->nodes;
  m->addrs = calloc(n, sizeof(*m->addrs));
  m->joined = calloc(n, sizeof(int));
  m->ready = calloc(n, sizeof(int));
  m->redial_at = calloc(n, sizeof(uint64_t));
  m->why = calloc(n, sizeof(*m->why));
  m->state = NET_JOINING;
  m->deadline_ns = au_now_ns() + (uint64_t)net->opts.timeout_ms * 1000000ull;
  return m->addrs && m->joined && m->ready && m->redial_at && m->why ? 0 : AU_ENOMEM;
}

void member_free(net_t *net)
{
  member_t *m = &net->member;
  free(m->addrs);
  free(m->joined);
  free(m->ready);
  free(m->redial_at);
  free(m->why);
}

static int mesh_complete(net_t *net)
{
  for (int r = 0; r < net->nodes; r++)
    if (r != net->rank && !net->conns[r]) return 0;
  return 1;
}

/* The cluster is up. A peer's silence counts from now: the mesh's links may have been
 * quiet since their handshakes while the last ranks dialled, and on 80 nodes under a
 * sanitizer that took longer than dead_ms (cluster_replicate saw "lost node" at GO). */
static void joined_up(net_t *net)
{
  uint64_t now = au_now_ns();
  for (int r = 0; r < net->nodes; r++)
    if (net->conns[r]) net->conns[r]->last_rx = now;
  pthread_mutex_lock(&net->mu);
  if (net->member.state == NET_JOINING) net->member.state = NET_UP;
  net_wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

/* rank 0: everyone ready and connected: end the barrier */
static void maybe_go(net_t *net)
{
  member_t *m = &net->member;
  if (m->state != NET_JOINING || m->nready < net->nodes - 1 || !mesh_complete(net)) return;
  for (int r = 1; r < net->nodes; r++) conn_ctrl(net, r, CTRL_GO, NULL, 0, NULL, 0);
  joined_up(net);
}

static void maybe_ready(net_t *net)
{
  member_t *m = &net->member;
  if (net->rank == 0 || !m->peers_known || m->ready[net->rank] || !mesh_complete(net)) return;
  m->ready[net->rank] = 1;
  conn_ctrl(net, 0, CTRL_READY, NULL, 0, NULL, 0);
}

static void dial(net_t *net, int peer)
{
  struct sockaddr_storage ss;
  char why[200];
  if (addr_resolve(net->member.addrs[peer], &ss, why, sizeof(why)) != 0) {
    char msg[400];
    snprintf(msg, sizeof(msg), "node %d's address: %s", peer, why);
    member_fail(net, AU_EPROTO, msg);
    return;
  }
  if (conn_dial(net, peer, (struct sockaddr *)&ss) != 0)
    member_fail(net, AU_ENOMEM, "out of memory");
}

void member_on_up(net_t *net, conn_t *c)
{
  if (net->rank != 0 && c->peer == 0)
    conn_ctrl(net, 0, CTRL_JOIN, NULL, 0, net->listen_name, strlen(net->listen_name));
  maybe_ready(net);
  if (net->rank == 0) maybe_go(net);
}

void member_on_dial_failed(net_t *net, int peer, const char *why)
{
  if (net->member.state != NET_JOINING) return;
  /* The peer may not be listening yet (rank 0 starts last, say): dial again until the
   * deadline. A refusal after the handshake is final. */
  if (strncmp(why, "refused", 7) != 0) {
    net->member.redial_at[peer] = au_now_ns() + 100 * 1000000ull;
    snprintf(net->member.why[peer], sizeof(net->member.why[peer]), "%s", why);
    return;
  }
  char msg[400];
  snprintf(msg, sizeof(msg), "node %d at %s %s", peer, net->member.addrs[peer], why);
  net_log(net, AU_LOG_ERROR, "%s", msg);
  member_fail(net, AU_EPROTO, msg);
}

void member_on_refused(net_t *net, int peer, const char *why)
{
  if (net->member.state != NET_JOINING || peer == net->rank) return;
  snprintf(net->member.why[peer], sizeof(net->member.why[peer]),
           "its connection was refused here: %s", why);
}

static void on_join(net_t *net, conn_t *c, const uint8_t *p, size_t n)
{
  member_t *m = &net->member;
  if (net->rank != 0 || n == 0 || n >= sizeof(m->addrs[0]) || m->joined[c->peer]) {
    conn_fail(c, "unexpected JOIN");
    return;
  }
  memcpy(m->addrs[c->peer], p, n);
  m->addrs[c->peer][n] = '\0';
  m->joined[c->peer] = 1;
  if (++m->njoined < net->nodes - 1) return;
  /* everyone is here: tell them who is where */
  size_t cap = (size_t)net->nodes * sizeof(m->addrs[0]), len = 0;
  char *list = malloc(cap);
  if (!list) {
    member_fail(net, AU_ENOMEM, "out of memory");
    return;
  }
  for (int r = 0; r < net->nodes; r++)
    len += (size_t)snprintf(list + len, cap - len, "%s\n", m->addrs[r]);
  for (int r = 1; r < net->nodes; r++) conn_ctrl(net, r, CTRL_PEERS, NULL, 0, list, len);
  free(list);
  m->peers_known = 1;
}

static void on_peers(net_t *net, conn_t *c, const uint8_t *p, size_t n)
{
  member_t *m = &net->member;
  if (net->rank == 0 || m->peers_known) {
    conn_fail(c, "unexpected PEERS");
    return;
  }
  int r = 0;
  size_t start = 0;
  for (size_t i = 0; i < n && r < net->nodes; i++) {
    if (p[i] != '\n') continue;
    size_t len = i - start;
    if (len == 0 || len >= sizeof(m->addrs[0])) break;
    memcpy(m->addrs[r], p + start, len);
    m->addrs[r][len] = '\0';
    r++;
    start = i + 1;
  }
  if (r != net->nodes) {
    conn_fail(c, "malformed PEERS");
    return;
  }
  m->peers_known = 1;
  for (int j = 1; j < net->rank; j++) dial(net, j);
  maybe_ready(net);
}

void member_on_ctrl(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  member_t *m = &net->member;
  switch (h->extra[0]) {
  case CTRL_JOIN:
    on_join(net, c, p, n);
    break;
  case CTRL_PEERS:
    on_peers(net, c, p, n);
    break;
  case CTRL_READY:
    if (net->rank != 0 || m->ready[c->peer]) {
      conn_fail(c, "unexpected READY");
      return;
    }
    m->ready[c->peer] = 1;
    m->nready++;
    maybe_go(net);
    break;
  case CTRL_GO:
    joined_up(net);
    break;
  }
}

static int is_up(net_t *net, uint64_t arg)
{
  (void)arg;
  return net->member.state == NET_UP;
}

int member_join(net_t *net, char *err, size_t errlen)
{
  int rc = io_post(net->rt, NET_CMD_START, NULL, 0);
  pthread_mutex_lock(&net->mu);
  /* the I/O thread enforces the deadline itself; the margin here only guards a wedged
   * I/O thread */
  if (rc == 0) rc = member_wait(net, is_up, 0, net->opts.timeout_ms + 5000);
  if (rc != 0) snprintf(err, errlen, "%s", net->error ? net->error_msg : au_strerror(rc));
  pthread_mutex_unlock(&net->mu);
  return rc;
}

/* --- the timer: deadlines, redials, heartbeats, dead peers --------------------------- */

static void on_tick(uv_timer_t *t)
{
  net_t *net = t->data;
  member_t *m = &net->member;
  uint64_t now = au_now_ns();
  if (m->state == NET_JOINING) {
    for (int r = 0; r < net->nodes; r++)
      if (m->redial_at[r] && now >= m->redial_at[r]) {
        m->redial_at[r] = 0;
        dial(net, r);
      }
    if (now > m->deadline_ns && !net->error) {
      char missing[200] = "";
      size_t len = 0;
      for (int r = 0; r < net->nodes && len < sizeof(missing) - 8; r++)
        if (r != net->rank && !net->conns[r])
          len += (size_t)snprintf(missing + len, sizeof(missing) - len, "%s%d", len ? "," : "", r);
      char msg[320];
      snprintf(msg, sizeof(msg),
               "timed out after %d s forming a cluster of %d nodes (not connected: %s)",
               net->opts.timeout_ms / 1000, net->nodes, len ? missing : "none; waiting for GO");
      net_log(net, AU_LOG_ERROR, "%s", msg);
      /* per missing peer: where this node tried and what happened, and the likely fix */
      for (int r = 0; r < net->nodes; r++) {
        if (r == net->rank || net->conns[r]) continue;
        if (net->rank == 0 && !m->joined[r] && m->why[r][0])
          net_log(net, AU_LOG_ERROR, "node %d never joined: %s", r, m->why[r]);
        else if (net->rank == 0 && !m->joined[r])
          net_log(net, AU_LOG_ERROR,
                  "node %d never joined: it dials AU_COORD=%s, which must be an address of this "
                  "host that node %d's host reaches (a firewall, or a name that resolves to "
                  "127.0.1.1 there?)",
                  r, net->opts.coord, r);
        else if (r == 0)
          net_log(net, AU_LOG_ERROR,
                  "the coordinator (node 0, AU_COORD=%s, at %s) did not answer: %s (is it "
                  "running, and is that address reachable from this host?)",
                  net->opts.coord, m->addrs[0], m->why[0][0] ? m->why[0] : "no connection");
        else if (m->addrs[r][0] && r < net->rank)
          net_log(net, AU_LOG_ERROR,
                  "node %d at %s: %s (it listens on the address from which its host reaches "
                  "the coordinator; AU_BIND=ADDRESS or an interface name on its host names "
                  "another)",
                  r, m->addrs[r], m->why[r][0] ? m->why[r] : "no connection yet");
        else if (m->addrs[r][0])
          net_log(net, AU_LOG_ERROR,
                  "node %d at %s did not connect to this node, which listens on %s (can it "
                  "reach that address?)",
                  r, m->addrs[r], net->listen_name);
        else
          net_log(net, AU_LOG_ERROR,
                  "node %d: its address never came (the coordinator waits for every node)", r);
      }
      member_fail(net, AU_ETIMEDOUT, msg);
    }
  }
  /* Heartbeats from the first handshake on, so that a peer still joining is heard from;
   * silence is judged once the cluster is up (joined_up restarts its clock). */
  if (m->state != NET_LEFT) {
    uint64_t beat = (uint64_t)net->opts.heartbeat_ms * 1000000ull;
    uint64_t dead = (uint64_t)net->opts.dead_ms * 1000000ull;
    for (int r = 0; r < net->nodes; r++) {
      conn_t *c = net->conns[r];
      if (!c || c->state != C_UP) continue;
      if (m->state != NET_JOINING && now - c->last_rx > dead && !c->bye_rx) {
        char why[64];
        snprintf(why, sizeof(why), "no frame for %.1f s", (double)(now - c->last_rx) / 1e9);
        conn_fail(c, why);
        continue;
      }
      if (now - c->last_tx > beat && !c->q_head) conn_queue_ctrl(c, FT_HEARTBEAT, NULL, 0, NULL, 0);
    }
  }
}

/* Where this node listens: AU_BIND's address or interface when set; rank 0 on the
 * coordinator's address (on the wildcard address when that resolves to loopback here but
 * is not a loopback name, as Debian maps the host's own name to 127.0.1.1), the others on
 * the address from which this host reaches the coordinator. The port: rank 0 the
 * coordinator's, the others any. 0, or -1 with err. */
static int listen_addr(net_t *net, const struct sockaddr_storage *coord,
                       struct sockaddr_storage *ss, char *err, size_t errlen)
{
  if (net->opts.bind[0]) {
    if (addr_bind_spec(net->opts.bind, coord->ss_family, ss, err, errlen) != 0) return -1;
  } else if (net->rank == 0) {
    char host[256];
    int port;
    *ss = *coord;
    if (addr_is_loopback(coord) && addr_split(net->opts.coord, 0, host, sizeof(host), &port) == 0 &&
        strcmp(host, "localhost") != 0 && !addr_is_numeric(host))
      addr_any(coord, ss);
  } else if (addr_toward(coord, ss, err, errlen) != 0) {
    return -1;
  }
  addr_set_port(ss, net->rank == 0 ? addr_port(coord) : 0);
  return 0; /* (AU_PORTS: conn_listen takes a port of the range) */
}

void member_start(net_t *net)
{
  member_t *m = &net->member;
  char err[320];
  struct sockaddr_storage coord, ss;
  if (addr_resolve(net->opts.coord, &coord, err, sizeof(err)) != 0) {
    char msg[400];
    snprintf(msg, sizeof(msg), "AU_COORD: %s", err);
    net_log(net, AU_LOG_ERROR, "%s", msg);
    member_fail(net, AU_EINVAL, msg);
    return;
  }
  if (listen_addr(net, &coord, &ss, err, sizeof(err)) != 0) {
    net_log(net, AU_LOG_ERROR, "%s", err);
    member_fail(net, AU_EINVAL, err);
    return;
  }
  addr_name(&ss, net->listen_name, sizeof(net->listen_name));
  /* secure by default: off loopback, anyone who reaches the port could join */
  if (!addr_is_loopback(&ss) && !net->opts.secret[0] && !net->opts.insecure) {
    char msg[480];
    snprintf(msg, sizeof(msg),
             "refusing to listen on %s without a secret: set AU_SECRET to the same value on "
             "every node (augur run makes one), or AU_INSECURE=1 on a trusted network",
             net->listen_name);
    net_log(net, AU_LOG_ERROR, "%s", msg);
    member_fail(net, AU_EINVAL, msg);
    return;
  }
  const int lo = net->rank == 0 ? 0 : net->opts.port_lo;
  const int lrc = conn_listen(net, &ss, lo, net->opts.port_hi, err, sizeof(err));
  if (lrc != 0) {
    if (net->rank == 0)
      snprintf(err + strlen(err), sizeof(err) - strlen(err),
               " (the coordinator address; set AU_COORD to a free host:port)");
    net_log(net, AU_LOG_ERROR, "%s", err);
    member_fail(net, lrc, err);
    return;
  }
  uv_timer_init(&net->rt->io.loop, &m->timer);
  m->timer.data = net;
  m->timer_on = 1;
  uv_timer_start(&m->timer, on_tick, TICK_MS, TICK_MS);
  addr_name(&coord, m->addrs[0], sizeof(m->addrs[0])); /* resolved once */
  if (net->rank == 0)
    m->joined[0] = 1;
  else
    dial(net, 0);
}

void member_close(net_t *net)
{
  member_t *m = &net->member;
  if (m->timer_on && !uv_is_closing((uv_handle_t *)&m->timer))
    uv_close((uv_handle_t *)&m->timer, NULL);
}

/* --- leaving ------------------------------------------------------------------------ */

static void check_left(net_t *net)
{
  if (net->member.state != NET_LEAVING) return;
  for (int r = 0; r < net->nodes; r++)
    if (net->conns[r] && !net->conns[r]->bye_rx) return;
  /* every peer said BYE and ours are queued behind everything we sent: close after the
   * last write */
  for (conn_t *c = net->all; c; c = c->next_all) {
    if (c->state == C_CLOSING) continue;
    if (!c->writing && !c->q_head)
      conn_close(c);
    else
      c->closing_after_write = 1;
  }
  member_on_closed(net);
}

void member_on_bye(net_t *net, conn_t *c)
{
  c->bye_rx = 1;
  check_left(net);
}

void member_on_closed(net_t *net)
{
  if (net->member.state != NET_LEAVING) return;
  for (conn_t *c = net->all; c; c = c->next_all)
    if (c->state != C_CLOSING) return;
  if (net->all) return; /* close callbacks still pending */
  pthread_mutex_lock(&net->mu);
  net->member.state = NET_LEFT;
  net_wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

void member_leave(net_t *net)
{
  if (net->member.state == NET_LEFT) return;
  /* state is written by this thread only, under mu for the main thread's reads */
  pthread_mutex_lock(&net->mu);
  net->member.state = NET_LEAVING;
  pthread_mutex_unlock(&net->mu);
  for (int r = 0; r < net->nodes; r++)
    if (net->conns[r]) conn_queue_ctrl(net->conns[r], FT_BYE, NULL, 0, NULL, 0);
  check_left(net);
  member_on_closed(net);
}

static int is_left(net_t *net, uint64_t arg)
{
  (void)arg;
  return net->member.state == NET_LEFT;
}

void member_leave_wait(net_t *net)
{
  if (io_post(net->rt, NET_CMD_LEAVE, NULL, 0) != 0) return;
  pthread_mutex_lock(&net->mu);
  int rc = member_wait(net, is_left, 0, LEAVE_TIMEOUT_MS);
  pthread_mutex_unlock(&net->mu);
  if (rc == AU_ETIMEDOUT)
    net_log(net, AU_LOG_WARN, "leaving: peers did not say BYE within %d s; closing",
            LEAVE_TIMEOUT_MS / 1000);
}
