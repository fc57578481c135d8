/* cluster.c — the control protocol of a cluster, on the I/O thread, and the main-thread
 * calls that wait for it: joining (a barrier), collective runs that end when every node
 * is idle and no data message is in flight, reductions, and leaving.
 *
 * Joining: every rank r > 0 dials rank 0 (the coordinator) and sends JOIN with its
 * listen address; once all have joined, rank 0 sends PEERS; rank r dials every rank
 * 0 < j < r and accepts the ranks above it; a node whose mesh is complete sends READY;
 * when all are ready rank 0 sends GO, which ends the barrier.
 *
 * The invariant of runs (termination detection, Mattern's counting method): rank 0
 * declares a run done only after two consecutive polls in which every node reported
 * itself idle in that run and the total of messages sent equalled the total
 * processed, with the same totals both times; a message in flight, or one that
 * triggered another, shows up as a difference in one of the two polls. The totals
 * count data frames between nodes and local messages that behaviours send (a server
 * forwarding to the placer, a worker's push to its own node): local work in flight
 * keeps a run going exactly as a frame on the wire does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cluster.h"
#include "runtime/counter.h"
#include "runtime/rt.h"

#define TICK_MS 50

/* --- helpers ------------------------------------------------------------------------ */

static void wake_main(net_t *net)
{
  pthread_cond_broadcast(&net->cv);
}

/* Fails joining or breaks the cluster; called on the I/O thread, with mu not held. */
static void net_fail(net_t *net, int error, const char *msg)
{
  pthread_mutex_lock(&net->mu);
  if (!net->error) {
    net->error = error;
    atomic_store(&net->broken, 1);
    size_t n = strlen(msg) < sizeof(net->error_msg) ? strlen(msg) : sizeof(net->error_msg) - 1;
    memcpy(net->error_msg, msg, n);
    net->error_msg[n] = '\0';
  }
  wake_main(net);
  pthread_mutex_unlock(&net->mu);
  au_runtime_stop(net->rt);
}

void net_lost(net_t *net, int peer, const char *why)
{
  if (net->state == NET_LEAVING || net->state == NET_LEFT) {
    net_log(net, AU_LOG_WARN, "node %d went away while this node was leaving: %s", peer, why);
    return;
  }
  char msg[320];
  snprintf(msg, sizeof(msg), "lost node %d: %s", peer, why);
  net_log(net, AU_LOG_ERROR, "%s", msg);
  net_fail(net, AU_ENODE, msg);
}

static int parse_addr(const char *addr, struct sockaddr_storage *ss)
{
  char host[256];
  const char *colon = strrchr(addr, ':');
  if (!colon || (size_t)(colon - addr) >= sizeof(host)) return -1;
  memcpy(host, addr, (size_t)(colon - addr));
  host[colon - addr] = '\0';
  int port = atoi(colon + 1);
  if (strcmp(host, "localhost") == 0) snprintf(host, sizeof(host), "127.0.0.1");
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0) return 0;
  if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0) return 0;
  return -1;
}

static void send_ctrl(net_t *net, int to, int kind, const uint64_t *extra, int nextra,
                      const void *data, size_t len)
{
  conn_t *c = net->conns[to];
  if (!c) return;
  uint64_t x[4] = {(uint64_t)kind, 0, 0, 0};
  for (int i = 0; i < nextra && i < 3; i++) x[i + 1] = extra[i];
  conn_queue_ctrl(c, FT_CTRL, x, nextra + 1, data, len);
}

/* This node's counts for the end-of-run detection: data frames sent to other nodes
 * plus local messages sent by behaviours, and the two kinds handled. The handled counts
 * are read first, with acquire: a message seen handled has its sending counted too, so
 * a snapshot never shows local work done that was not sent. */
static void node_counts(net_t *net, uint64_t *sent, uint64_t *processed)
{
  au_runtime_t *rt = net->rt;
  uint64_t p = atomic_load(&rt->dropped), s = 0;
  for (int i = 0; i < rt->nthreads; i++) p += counter_get_acquire(&rt->threads[i].handled);
  for (int i = 0; i < rt->nthreads; i++) s += counter_get(&rt->threads[i].local_sent);
  *sent = s + atomic_load(&net->sent);
  *processed = p;
}

/* --- joining ------------------------------------------------------------------------ */

static int mesh_complete(net_t *net)
{
  for (int r = 0; r < net->nodes; r++)
    if (r != net->rank && !net->conns[r]) return 0;
  return 1;
}

static void joined_up(net_t *net)
{
  pthread_mutex_lock(&net->mu);
  if (net->state == NET_JOINING) net->state = NET_UP;
  wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

/* rank 0: everyone ready and connected: end the barrier */
static void maybe_go(net_t *net)
{
  if (net->state != NET_JOINING || net->nready < net->nodes - 1 || !mesh_complete(net)) return;
  for (int r = 1; r < net->nodes; r++) send_ctrl(net, r, CTRL_GO, NULL, 0, NULL, 0);
  joined_up(net);
}

static void maybe_ready(net_t *net)
{
  if (net->rank == 0 || !net->peers_known || net->ready[net->rank] || !mesh_complete(net)) return;
  net->ready[net->rank] = 1;
  send_ctrl(net, 0, CTRL_READY, NULL, 0, NULL, 0);
}

static void dial(net_t *net, int peer)
{
  struct sockaddr_storage ss;
  if (parse_addr(net->addrs[peer], &ss) != 0) {
    char msg[400];
    snprintf(msg, sizeof(msg), "node %d's address '%s' is not host:port", peer, net->addrs[peer]);
    net_fail(net, AU_EPROTO, msg);
    return;
  }
  if (net_dial(net, peer, (struct sockaddr *)&ss) != 0) net_fail(net, AU_ENOMEM, "out of memory");
}

void cluster_on_conn_up(net_t *net, conn_t *c)
{
  if (net->rank != 0 && c->peer == 0)
    send_ctrl(net, 0, CTRL_JOIN, NULL, 0, net->listen_name, strlen(net->listen_name));
  maybe_ready(net);
  if (net->rank == 0) maybe_go(net);
}

void cluster_on_dial_failed(net_t *net, int peer, const char *why)
{
  if (net->state != NET_JOINING) return;
  /* The peer may not be listening yet (rank 0 starts last, say): dial again until the
   * deadline. A refusal after the handshake is final. */
  if (strncmp(why, "refused", 7) != 0) {
    net->redial_at[peer] = au_now_ns() + 100 * 1000000ull;
    return;
  }
  char msg[400];
  snprintf(msg, sizeof(msg), "node %d at %s %s", peer, net->addrs[peer], why);
  net_log(net, AU_LOG_ERROR, "%s", msg);
  net_fail(net, AU_EPROTO, msg);
}

static void on_join(net_t *net, conn_t *c, const uint8_t *p, size_t n)
{
  if (net->rank != 0 || n == 0 || n >= sizeof(net->addrs[0]) || net->joined[c->peer]) {
    conn_fail(c, "unexpected JOIN");
    return;
  }
  memcpy(net->addrs[c->peer], p, n);
  net->addrs[c->peer][n] = '\0';
  net->joined[c->peer] = 1;
  if (++net->njoined < net->nodes - 1) return;
  /* everyone is here: tell them who is where */
  size_t cap = (size_t)net->nodes * sizeof(net->addrs[0]), len = 0;
  char *list = malloc(cap);
  if (!list) {
    net_fail(net, AU_ENOMEM, "out of memory");
    return;
  }
  for (int r = 0; r < net->nodes; r++)
    len += (size_t)snprintf(list + len, cap - len, "%s\n", net->addrs[r]);
  for (int r = 1; r < net->nodes; r++) send_ctrl(net, r, CTRL_PEERS, NULL, 0, list, len);
  free(list);
  net->peers_known = 1;
}

static void on_peers(net_t *net, conn_t *c, const uint8_t *p, size_t n)
{
  if (net->rank == 0 || net->peers_known) {
    conn_fail(c, "unexpected PEERS");
    return;
  }
  int r = 0;
  size_t start = 0;
  for (size_t i = 0; i < n && r < net->nodes; i++) {
    if (p[i] != '\n') continue;
    size_t len = i - start;
    if (len == 0 || len >= sizeof(net->addrs[0])) break;
    memcpy(net->addrs[r], p + start, len);
    net->addrs[r][len] = '\0';
    r++;
    start = i + 1;
  }
  if (r != net->nodes) {
    conn_fail(c, "malformed PEERS");
    return;
  }
  net->peers_known = 1;
  for (int j = 1; j < net->rank; j++) dial(net, j);
  maybe_ready(net);
}

/* --- runs --------------------------------------------------------------------------- */

static void send_status(net_t *net, uint64_t round)
{
  pthread_mutex_lock(&net->mu);
  uint64_t run = net->run;
  pthread_mutex_unlock(&net->mu);
  node_status_t st = {.run = run, .round = round, .idle = atomic_load(&net->idle)};
  node_counts(net, &st.sent, &st.processed);
  if (net->rank == 0) {
    net->status[0] = st;
    return;
  }
  uint64_t x[3] = {st.run, st.round, (uint64_t)st.idle};
  uint64_t counts[2] = {st.sent, st.processed};
  send_ctrl(net, 0, CTRL_STATUS, x, 3, counts, sizeof(counts));
}

static void run_done(net_t *net, uint64_t run)
{
  pthread_mutex_lock(&net->mu);
  if (run > net->run_done) net->run_done = run;
  wake_main(net);
  pthread_mutex_unlock(&net->mu);
  au_runtime_stop(net->rt);
}

/* rank 0: a poll round's replies are all in, or a node's idleness changed */
static void check_termination(net_t *net)
{
  pthread_mutex_lock(&net->mu);
  uint64_t run = net->run;
  int done_already = net->run_done >= run;
  pthread_mutex_unlock(&net->mu);
  if (done_already || run == 0) return;
  if (net->polls_out > 0) return;
  int all_idle = 1, all_answered = 1;
  uint64_t sent = 0, processed = 0;
  for (int r = 0; r < net->nodes; r++) {
    node_status_t *st = &net->status[r];
    if (st->run != run || !st->idle) all_idle = 0;
    if (st->round != net->poll_round) all_answered = 0;
    sent += st->sent;
    processed += st->processed;
  }
  if (!all_idle) {
    net->last_balanced = 0;
    return;
  }
  if (all_answered && net->poll_round > 0) {
    int balanced = sent == processed;
    if (balanced && net->last_balanced && sent == net->last_sent &&
        processed == net->last_processed) {
      for (int r = 1; r < net->nodes; r++) send_ctrl(net, r, CTRL_RUN_DONE, &run, 1, NULL, 0);
      net->last_balanced = 0;
      run_done(net, run);
      return;
    }
    net->last_balanced = balanced;
    net->last_sent = sent;
    net->last_processed = processed;
  }
  /* poll everyone (again) */
  net->poll_round++;
  net->polls_out = net->nodes - 1;
  uint64_t x[2] = {run, net->poll_round};
  for (int r = 1; r < net->nodes; r++) send_ctrl(net, r, CTRL_POLL, x, 2, NULL, 0);
  send_status(net, net->poll_round);
  if (net->polls_out == 0) check_termination(net);
}

static void on_status(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  if (net->rank != 0 || h->nextra < 4 || n != 2 * sizeof(uint64_t)) {
    conn_fail(c, "malformed STATUS");
    return;
  }
  node_status_t *st = &net->status[c->peer];
  st->run = h->extra[1];
  st->round = h->extra[2];
  st->idle = h->extra[3] != 0;
  memcpy(&st->sent, p, sizeof(uint64_t));
  memcpy(&st->processed, p + sizeof(uint64_t), sizeof(uint64_t));
  if (st->round == net->poll_round && st->round > 0 && net->polls_out > 0) net->polls_out--;
  check_termination(net);
}

/* --- reductions --------------------------------------------------------------------- */

static void reduce_add(net_t *net, int from, uint64_t seq, const double *v, int n)
{
  if (net->acc_seq != seq || !net->acc) {
    free(net->acc);
    free(net->acc_have);
    net->acc = calloc((size_t)net->nodes * (size_t)(n ? n : 1), sizeof(double));
    net->acc_have = calloc((size_t)net->nodes, sizeof(int));
    if (!net->acc || !net->acc_have) {
      net_fail(net, AU_ENOMEM, "out of memory in a reduction");
      return;
    }
    net->acc_seq = seq;
    net->acc_n = n;
    net->acc_count = 0;
  }
  if (n != net->acc_n || net->acc_have[from]) {
    char msg[128];
    snprintf(msg, sizeof(msg), "node %d contributed %d values to reduction %llu, expected %d", from,
             n, (unsigned long long)seq, net->acc_n);
    net_fail(net, AU_EPROTO, msg);
    return;
  }
  memcpy(&net->acc[(size_t)from * (size_t)n], v, (size_t)n * sizeof(double));
  net->acc_have[from] = 1;
  if (++net->acc_count < net->nodes) return;
  /* all in: sum in rank order, so every run gives the same bits */
  double *sum = calloc((size_t)(n ? n : 1), sizeof(double));
  if (!sum) {
    net_fail(net, AU_ENOMEM, "out of memory in a reduction");
    return;
  }
  for (int r = 0; r < net->nodes; r++)
    for (int i = 0; i < n; i++) sum[i] += net->acc[(size_t)r * (size_t)n + (size_t)i];
  uint64_t x[2] = {seq, (uint64_t)n};
  for (int r = 1; r < net->nodes; r++)
    send_ctrl(net, r, CTRL_REDUCED, x, 2, sum, (size_t)n * sizeof(double));
  pthread_mutex_lock(&net->mu);
  free(net->reduced);
  net->reduced = sum;
  net->reduced_n = n;
  net->reduced_seq = seq;
  wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

/* A reduction's values, copied out of a frame (aligned, and outliving it). */
static double *copy_values(net_t *net, const uint8_t *p, size_t n)
{
  double *v = malloc(n ? n : 1);
  if (!v)
    net_fail(net, AU_ENOMEM, "out of memory in a reduction");
  else
    memcpy(v, p, n);
  return v;
}

static void on_reduced(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  if (h->nextra < 3 || n != h->extra[2] * sizeof(double) || h->extra[2] > (1u << 20)) {
    conn_fail(c, "malformed REDUCED");
    return;
  }
  double *v = copy_values(net, p, n);
  if (!v) return;
  pthread_mutex_lock(&net->mu);
  free(net->reduced);
  net->reduced = v;
  net->reduced_n = (int)h->extra[2];
  net->reduced_seq = h->extra[1];
  wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

/* --- control frames ----------------------------------------------------------------- */

void cluster_on_ctrl(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  if (h->nextra < 1) {
    conn_fail(c, "control frame without a kind");
    return;
  }
  switch (h->extra[0]) {
  case CTRL_JOIN:
    on_join(net, c, p, n);
    break;
  case CTRL_PEERS:
    on_peers(net, c, p, n);
    break;
  case CTRL_READY:
    if (net->rank != 0 || net->ready[c->peer]) {
      conn_fail(c, "unexpected READY");
      return;
    }
    net->ready[c->peer] = 1;
    net->nready++;
    maybe_go(net);
    break;
  case CTRL_GO:
    joined_up(net);
    break;
  case CTRL_STATUS:
    on_status(net, c, h, p, n);
    break;
  case CTRL_POLL:
    if (h->nextra < 3) {
      conn_fail(c, "malformed POLL");
      return;
    }
    send_status(net, h->extra[2]);
    break;
  case CTRL_RUN_DONE:
    if (h->nextra < 2) {
      conn_fail(c, "malformed RUN_DONE");
      return;
    }
    run_done(net, h->extra[1]);
    break;
  case CTRL_REDUCE: {
    uint64_t count = h->nextra >= 3 ? h->extra[2] : UINT64_MAX;
    if (net->rank != 0 || count > (1u << 20) || n != count * sizeof(double)) {
      conn_fail(c, "malformed REDUCE");
      return;
    }
    double *v = copy_values(net, p, n);
    if (!v) return;
    reduce_add(net, c->peer, h->extra[1], v, (int)count);
    free(v);
    break;
  }
  case CTRL_REDUCED:
    on_reduced(net, c, h, p, n);
    break;
  default:
    conn_fail(c, "unknown control kind");
    break;
  }
}

/* --- leaving ------------------------------------------------------------------------ */

static void check_left(net_t *net)
{
  if (net->state != NET_LEAVING) return;
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
  cluster_on_closed(net);
}

void cluster_on_bye(net_t *net, conn_t *c)
{
  c->bye_rx = 1;
  check_left(net);
}

void cluster_on_closed(net_t *net)
{
  if (net->state != NET_LEAVING) return;
  for (conn_t *c = net->all; c; c = c->next_all)
    if (c->state != C_CLOSING) return;
  if (net->all) return; /* close callbacks still pending */
  pthread_mutex_lock(&net->mu);
  net->state = NET_LEFT;
  wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

/* --- the timer: deadlines, redials, heartbeats, dead peers --------------------------- */

static void on_tick(uv_timer_t *t)
{
  net_t *net = t->data;
  uint64_t now = au_now_ns();
  if (net->state == NET_JOINING) {
    for (int r = 0; r < net->nodes; r++)
      if (net->redial_at[r] && now >= net->redial_at[r]) {
        net->redial_at[r] = 0;
        dial(net, r);
      }
    if (now > net->deadline_ns && !net->error) {
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
      net_fail(net, AU_ETIMEDOUT, msg);
    }
  }
  if (net->state == NET_UP || net->state == NET_LEAVING) {
    uint64_t beat = (uint64_t)net->opts.heartbeat_ms * 1000000ull;
    uint64_t dead = (uint64_t)net->opts.dead_ms * 1000000ull;
    for (int r = 0; r < net->nodes; r++) {
      conn_t *c = net->conns[r];
      if (!c || c->state != C_UP) continue;
      if (now - c->last_rx > dead && !c->bye_rx) {
        char why[64];
        snprintf(why, sizeof(why), "no frame for %.1f s", (double)(now - c->last_rx) / 1e9);
        conn_fail(c, why);
        continue;
      }
      if (now - c->last_tx > beat && !c->q_head) conn_queue_ctrl(c, FT_HEARTBEAT, NULL, 0, NULL, 0);
    }
  }
}

/* --- commands from other threads ---------------------------------------------------- */

static void start(net_t *net)
{
  char err[320];
  struct sockaddr_storage ss;
  char bind_addr[96];
  int port = 0;
  if (net->rank == 0) {
    const char *colon = strrchr(net->opts.coord, ':');
    port = colon ? atoi(colon + 1) : 0;
  }
  snprintf(bind_addr, sizeof(bind_addr), "%s:%d", net->opts.bind, port);
  snprintf(net->listen_name, sizeof(net->listen_name), "%s", bind_addr);
  if (parse_addr(bind_addr, &ss) != 0) {
    snprintf(err, sizeof(err), "cannot listen on '%s': not an IP address (AU_BIND)", bind_addr);
    net_fail(net, AU_EINVAL, err);
    return;
  }
  if (net_listen(net, (struct sockaddr *)&ss, err, sizeof(err)) != 0) {
    if (net->rank == 0)
      snprintf(err + strlen(err), sizeof(err) - strlen(err),
               " (the coordinator address; set AU_COORD to a free host:port)");
    net_log(net, AU_LOG_ERROR, "%s", err);
    net_fail(net, AU_EPROTO, err);
    return;
  }
  uv_timer_init(&net->rt->io.loop, &net->timer);
  net->timer.data = net;
  net->timer_on = 1;
  uv_timer_start(&net->timer, on_tick, TICK_MS, TICK_MS);
  if (net->rank == 0) {
    snprintf(net->addrs[0], sizeof(net->addrs[0]), "%s", net->opts.coord);
    net->joined[0] = 1;
  } else {
    snprintf(net->addrs[0], sizeof(net->addrs[0]), "%s", net->opts.coord);
    dial(net, 0);
  }
}

static void leave(net_t *net)
{
  if (net->state == NET_LEFT) return;
  /* state is written by this thread only, under mu for the main thread's reads */
  pthread_mutex_lock(&net->mu);
  net->state = NET_LEAVING;
  pthread_mutex_unlock(&net->mu);
  for (int r = 0; r < net->nodes; r++)
    if (net->conns[r]) conn_queue_ctrl(net->conns[r], FT_BYE, NULL, 0, NULL, 0);
  check_left(net);
  cluster_on_closed(net);
}

void net_handle_cmd(au_runtime_t *rt, au_msg_t *m)
{
  net_t *net = rt->net;
  switch (m->type) {
  case NET_CMD_START:
    start(net);
    break;
  case NET_CMD_SEND: {
    frame_meta_t *fm = frame_meta(m);
    conn_t *c = fm->node < (uint32_t)net->nodes ? net->conns[fm->node] : NULL;
    if (!c || c->state != C_UP) {
      /* the peer is gone: the cluster is broken and says so elsewhere */
      net_unqueue_bytes(net, (int)fm->node, fm->len);
      pool_free(&rt->pool, net->cache, m);
      return;
    }
    conn_queue(c, m);
    return; /* the connection owns it now */
  }
  case NET_CMD_IDLE:
    if (net->rank == 0) {
      send_status(net, net->status[0].round);
      check_termination(net);
    } else {
      send_status(net, 0);
    }
    break;
  case NET_CMD_REDUCE: {
    uint64_t seq;
    int n;
    memcpy(&seq, m->data, sizeof(seq));
    memcpy(&n, m->data + sizeof(seq), sizeof(n));
    const double *v = (const double *)(void *)(m->data + 16);
    if (net->rank == 0) {
      reduce_add(net, 0, seq, v, n);
    } else {
      uint64_t x[2] = {seq, (uint64_t)n};
      send_ctrl(net, 0, CTRL_REDUCE, x, 2, v, (size_t)n * sizeof(double));
    }
    break;
  }
  case NET_CMD_LEAVE:
    leave(net);
    break;
  }
  pool_free(&rt->pool, net->cache, m);
}

void net_unqueue_bytes(net_t *net, int peer, size_t bytes)
{
  if (peer < 0 || peer >= net->nodes) return;
  pthread_mutex_lock(&net->wait_mu);
  atomic_fetch_sub(&net->out_bytes[peer], bytes);
  waiter_t *w = NULL;
  if (net->waiters[peer] &&
      atomic_load(&net->out_bytes[peer]) < (size_t)net->opts.queue_bytes / 4) {
    w = net->waiters[peer];
    net->waiters[peer] = NULL;
  }
  pthread_mutex_unlock(&net->wait_mu);
  while (w) {
    waiter_t *next = w->next;
    au_send(w->who, w->type, NULL, 0);
    free(w);
    w = next;
  }
}
