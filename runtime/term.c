/* term.c — termination of collective runs and reductions, on the I/O thread, and the
 * main-thread calls that wait for them (au__cluster_run, au_allreduce_sum).
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
#include "runtime/ext.h"
#include "runtime/rt.h"

int term_init(net_t *net)
{
  term_t *t = &net->term;
  t->status = calloc((size_t)net->nodes, sizeof(node_status_t));
  atomic_init(&t->idle, 1);
  return t->status ? 0 : AU_ENOMEM;
}

void term_free(net_t *net)
{
  term_t *t = &net->term;
  free(t->status);
  free(t->acc);
  free(t->acc_have);
  free(t->reduced);
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
  *sent = s + atomic_load(&net->data.sent);
  *processed = p;
}

/* --- runs --------------------------------------------------------------------------- */

static void send_status(net_t *net, uint64_t round)
{
  term_t *t = &net->term;
  pthread_mutex_lock(&net->mu);
  uint64_t run = t->run;
  pthread_mutex_unlock(&net->mu);
  node_status_t st = {.run = run, .round = round, .idle = atomic_load(&t->idle)};
  node_counts(net, &st.sent, &st.processed);
  if (net->rank == 0) {
    t->status[0] = st;
    return;
  }
  uint64_t x[3] = {st.run, st.round, (uint64_t)st.idle};
  uint64_t counts[2] = {st.sent, st.processed};
  conn_ctrl(net, 0, CTRL_STATUS, x, 3, counts, sizeof(counts));
}

static void run_done(net_t *net, uint64_t run)
{
  pthread_mutex_lock(&net->mu);
  if (run > net->term.run_done) net->term.run_done = run;
  net_wake_main(net);
  pthread_mutex_unlock(&net->mu);
  au_runtime_stop(net->rt);
}

/* rank 0: a poll round's replies are all in, or a node's idleness changed */
static void check_termination(net_t *net)
{
  term_t *t = &net->term;
  pthread_mutex_lock(&net->mu);
  uint64_t run = t->run;
  int done_already = t->run_done >= run;
  pthread_mutex_unlock(&net->mu);
  if (done_already || run == 0) return;
  if (t->polls_out > 0) return;
  int all_idle = 1, all_answered = 1;
  uint64_t sent = 0, processed = 0;
  for (int r = 0; r < net->nodes; r++) {
    node_status_t *st = &t->status[r];
    if (st->run != run || !st->idle) all_idle = 0;
    if (st->round != t->poll_round) all_answered = 0;
    sent += st->sent;
    processed += st->processed;
  }
  if (!all_idle) {
    t->last_balanced = 0;
    return;
  }
  if (all_answered && t->poll_round > 0) {
    int balanced = sent == processed;
    if (balanced && t->last_balanced && sent == t->last_sent && processed == t->last_processed) {
      for (int r = 1; r < net->nodes; r++) conn_ctrl(net, r, CTRL_RUN_DONE, &run, 1, NULL, 0);
      t->last_balanced = 0;
      run_done(net, run);
      return;
    }
    t->last_balanced = balanced;
    t->last_sent = sent;
    t->last_processed = processed;
  }
  /* poll everyone (again) */
  t->poll_round++;
  t->polls_out = net->nodes - 1;
  uint64_t x[2] = {run, t->poll_round};
  for (int r = 1; r < net->nodes; r++) conn_ctrl(net, r, CTRL_POLL, x, 2, NULL, 0);
  send_status(net, t->poll_round);
  if (t->polls_out == 0) check_termination(net);
}

static void on_status(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  term_t *t = &net->term;
  if (net->rank != 0 || h->nextra < 4 || n != 2 * sizeof(uint64_t)) {
    conn_fail(c, "malformed STATUS");
    return;
  }
  node_status_t *st = &t->status[c->peer];
  st->run = h->extra[1];
  st->round = h->extra[2];
  st->idle = h->extra[3] != 0;
  memcpy(&st->sent, p, sizeof(uint64_t));
  memcpy(&st->processed, p + sizeof(uint64_t), sizeof(uint64_t));
  if (st->round == t->poll_round && st->round > 0 && t->polls_out > 0) t->polls_out--;
  check_termination(net);
}

void term_on_idle(net_t *net)
{
  if (net->rank == 0) {
    send_status(net, net->term.status[0].round);
    check_termination(net);
  } else {
    send_status(net, 0);
  }
}

/* --- reductions --------------------------------------------------------------------- */

static void reduce_add(net_t *net, int from, uint64_t seq, const double *v, int n)
{
  term_t *t = &net->term;
  if (t->acc_seq != seq || !t->acc) {
    free(t->acc);
    free(t->acc_have);
    t->acc = calloc((size_t)net->nodes * (size_t)(n ? n : 1), sizeof(double));
    t->acc_have = calloc((size_t)net->nodes, sizeof(int));
    if (!t->acc || !t->acc_have) {
      member_fail(net, AU_ENOMEM, "out of memory in a reduction");
      return;
    }
    t->acc_seq = seq;
    t->acc_n = n;
    t->acc_count = 0;
  }
  if (n != t->acc_n || t->acc_have[from]) {
    char msg[128];
    snprintf(msg, sizeof(msg), "node %d contributed %d values to reduction %llu, expected %d", from,
             n, (unsigned long long)seq, t->acc_n);
    member_fail(net, AU_EPROTO, msg);
    return;
  }
  memcpy(&t->acc[(size_t)from * (size_t)n], v, (size_t)n * sizeof(double));
  t->acc_have[from] = 1;
  if (++t->acc_count < net->nodes) return;
  /* all in: sum in rank order, so every run gives the same bits */
  double *sum = calloc((size_t)(n ? n : 1), sizeof(double));
  if (!sum) {
    member_fail(net, AU_ENOMEM, "out of memory in a reduction");
    return;
  }
  for (int r = 0; r < net->nodes; r++)
    for (int i = 0; i < n; i++) sum[i] += t->acc[(size_t)r * (size_t)n + (size_t)i];
  uint64_t x[2] = {seq, (uint64_t)n};
  for (int r = 1; r < net->nodes; r++)
    conn_ctrl(net, r, CTRL_REDUCED, x, 2, sum, (size_t)n * sizeof(double));
  pthread_mutex_lock(&net->mu);
  free(t->reduced);
  t->reduced = sum;
  t->reduced_n = n;
  t->reduced_seq = seq;
  net_wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

/* A reduction's values, copied out of a frame (aligned, and outliving it). */
static double *copy_values(net_t *net, const uint8_t *p, size_t n)
{
  double *v = malloc(n ? n : 1);
  if (!v)
    member_fail(net, AU_ENOMEM, "out of memory in a reduction");
  else
    memcpy(v, p, n);
  return v;
}

static void on_reduced(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  term_t *t = &net->term;
  if (h->nextra < 3 || n != h->extra[2] * sizeof(double) || h->extra[2] > (1u << 20)) {
    conn_fail(c, "malformed REDUCED");
    return;
  }
  double *v = copy_values(net, p, n);
  if (!v) return;
  pthread_mutex_lock(&net->mu);
  free(t->reduced);
  t->reduced = v;
  t->reduced_n = (int)h->extra[2];
  t->reduced_seq = h->extra[1];
  net_wake_main(net);
  pthread_mutex_unlock(&net->mu);
}

void term_on_reduce(net_t *net, const au_msg_t *m)
{
  uint64_t seq;
  int n;
  memcpy(&seq, m->data, sizeof(seq));
  memcpy(&n, m->data + sizeof(seq), sizeof(n));
  const double *v = (const double *)(const void *)(m->data + 16);
  if (net->rank == 0) {
    reduce_add(net, 0, seq, v, n);
  } else {
    uint64_t x[2] = {seq, (uint64_t)n};
    conn_ctrl(net, 0, CTRL_REDUCE, x, 2, v, (size_t)n * sizeof(double));
  }
}

/* --- control frames ----------------------------------------------------------------- */

void term_on_ctrl(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  switch (h->extra[0]) {
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
  }
}

/* --- the main thread's calls --------------------------------------------------------- */

static int run_is_done(net_t *net, uint64_t run)
{
  return net->term.run_done >= run;
}

static int reduce_is_done(net_t *net, uint64_t seq)
{
  return net->term.reduced_seq >= seq;
}

void au__cluster_idle(au_runtime_t *rt, int idle)
{
  net_t *net = rt->net;
  if (!net) return;
  atomic_store(&net->term.idle, idle);
  if (idle) io_post(rt, NET_CMD_IDLE, NULL, 0);
}

int au__cluster_run(au_runtime_t *rt)
{
  net_t *net = rt->net;
  pthread_mutex_lock(&net->mu);
  uint64_t run = ++net->term.run;
  int rc = net->error;
  pthread_mutex_unlock(&net->mu);
  if (rc) return rc;
  /* idle may already be 1 (no workers): tell rank 0 under the new run number */
  if (atomic_load(&net->term.idle)) io_post(rt, NET_CMD_IDLE, NULL, 0);
  for (;;) {
    rc = sched_run(rt);
    if (rc != 0) return rc;
    pthread_mutex_lock(&net->mu);
    int done = run_is_done(net, run);
    rc = net->error;
    pthread_mutex_unlock(&net->mu);
    if (rc) return rc;
    if (done) return 0;
    /* stopped for another reason (au_runtime_stop by the program): go on */
  }
}

#define REDUCE_MAX (1 << 20) /* values per reduction message (8 MiB) */

static int allreduce_chunk(au_runtime_t *rt, double *v, int n);

int au_allreduce_sum(au_runtime_t *rt, double *v, size_t n)
{
  if (!rt || (n && !v)) return AU_EINVAL;
  if (!rt->net) return 0;
  /* one reduction per chunk (at least one: n = 0 is a barrier); every node cuts the same
   * n the same way */
  size_t at = 0;
  do {
    size_t k = n - at < REDUCE_MAX ? n - at : REDUCE_MAX;
    int rc = allreduce_chunk(rt, k ? v + at : v, (int)k);
    if (rc) return rc;
    at += k;
  } while (at < n);
  return 0;
}

static int allreduce_chunk(au_runtime_t *rt, double *v, int n)
{
  net_t *net = rt->net;
  pthread_mutex_lock(&net->mu);
  uint64_t seq = ++net->term.reduce_seq;
  int rc = net->error;
  pthread_mutex_unlock(&net->mu);
  if (rc) return rc;
  size_t len = 16 + (size_t)n * sizeof(double);
  uint8_t *buf = malloc(len);
  if (!buf) return AU_ENOMEM;
  memcpy(buf, &seq, sizeof(seq));
  memcpy(buf + sizeof(seq), &n, sizeof(n));
  if (n) memcpy(buf + 16, v, (size_t)n * sizeof(double));
  rc = io_post(rt, NET_CMD_REDUCE, buf, len);
  free(buf);
  if (rc) return rc;
  pthread_mutex_lock(&net->mu);
  rc = member_wait(net, reduce_is_done, seq, 0);
  if (rc == 0 && net->term.reduced_n == n && n)
    memcpy(v, net->term.reduced, (size_t)n * sizeof(double));
  pthread_mutex_unlock(&net->mu);
  return rc;
}
