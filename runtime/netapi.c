/* netapi.c — the calls other threads make into the cluster transport: joining and
 * leaving, sending to a port on another node, backpressure, collective runs and
 * reductions. They post commands to the I/O thread and, where the call is collective,
 * wait on net->cv for its answer, always bounded by an error or a deadline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/cluster.h"
#include "runtime/ext.h"
#include "runtime/rt.h"

#define LEAVE_TIMEOUT_MS 10000

static int post_cmd(au_runtime_t *rt, uint32_t type, const void *data, size_t len)
{
  au_msg_t *m = pool_alloc(&rt->pool, rt_cache(rt), len);
  if (!m) return AU_ENOMEM;
  m->type = type;
  if (len) memcpy(m->data, data, len);
  io_post_msg(rt, m);
  return 0;
}

/* Waits on cv until done(net) or an error; with mu held. 0, the error, or AU_ETIMEDOUT
 * when timeout_ms (> 0) passed. */
static int wait_for(net_t *net, int (*done)(net_t *, uint64_t), uint64_t arg, int timeout_ms)
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

static int is_up(net_t *net, uint64_t arg)
{
  (void)arg;
  return net->state == NET_UP;
}

static int is_left(net_t *net, uint64_t arg)
{
  (void)arg;
  return net->state == NET_LEFT;
}

static int run_is_done(net_t *net, uint64_t run)
{
  return net->run_done >= run;
}

static int reduce_is_done(net_t *net, uint64_t seq)
{
  return net->reduced_seq >= seq;
}

void net_free(au_runtime_t *rt)
{
  net_t *net = rt->net;
  if (!net) return;
  waiter_t *w;
  for (int r = 0; r < net->nodes; r++)
    while ((w = net->waiters[r]) != NULL) {
      net->waiters[r] = w->next;
      free(w);
    }
  free(net->waiters);
  free(net->out_bytes);
  free(net->conns);
  free(net->addrs);
  free(net->joined);
  free(net->ready);
  free(net->redial_at);
  free(net->status);
  free(net->acc);
  free(net->acc_have);
  free(net->reduced);
  pthread_mutex_destroy(&net->wait_mu);
  pthread_mutex_destroy(&net->mu);
  pthread_cond_destroy(&net->cv);
  free(net);
  rt->net = NULL;
}

static const io_ext_t net_io_ext = {net_handle_cmd, net_flush, net_close_all};

int net_join(au_runtime_t *rt, const au_cluster_opts_t *o, char *err, size_t errlen)
{
  net_t *net = calloc(1, sizeof(*net));
  if (!net) return AU_ENOMEM;
  size_t n = (size_t)o->nodes;
  net->rt = rt;
  net->cache = &rt->pool.caches[rt->nthreads];
  net->opts = *o;
  if (!net->opts.timeout_ms) net->opts.timeout_ms = 30000;
  if (!net->opts.heartbeat_ms) net->opts.heartbeat_ms = 500;
  if (!net->opts.dead_ms) net->opts.dead_ms = 5000;
  if (net->opts.queue_bytes <= 0) net->opts.queue_bytes = NET_OUT_HIGH;
  net->rank = o->rank;
  net->nodes = o->nodes;
  net->conns = calloc(n, sizeof(*net->conns));
  net->addrs = calloc(n, sizeof(*net->addrs));
  net->joined = calloc(n, sizeof(int));
  net->ready = calloc(n, sizeof(int));
  net->redial_at = calloc(n, sizeof(uint64_t));
  net->status = calloc(n, sizeof(node_status_t));
  net->out_bytes = calloc(n, sizeof(atomic_size_t));
  net->waiters = calloc(n, sizeof(waiter_t *));
  pthread_mutex_init(&net->wait_mu, NULL);
  pthread_mutex_init(&net->mu, NULL);
  pthread_cond_init(&net->cv, NULL);
  rt->net = net;
  if (!net->conns || !net->addrs || !net->joined || !net->ready || !net->redial_at ||
      !net->status || !net->out_bytes || !net->waiters) {
    net_free(rt);
    return AU_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) atomic_init(&net->out_bytes[i], 0);
  atomic_init(&net->sent, 0);
  atomic_init(&net->sent_bytes, 0);
  atomic_init(&net->broken, 0);
  atomic_init(&net->idle, 1);
  net->state = NET_JOINING;
  net->deadline_ns = au_now_ns() + (uint64_t)net->opts.timeout_ms * 1000000ull;
  rt->rank = o->rank;
  rt->nodes = o->nodes;
  /* the network is a source of messages: the runtime is never quiescent while in a
   * cluster; runs end by the cluster's termination protocol instead */
  atomic_fetch_add(&rt->io_pending, 1);

  /* testing only: an added delay on data frames (docs/cluster.md) */
  const char *dv = getenv("AU_NET_DELAY_US");
  if (dv && *dv) {
    char *end;
    errno = 0;
    unsigned long long us = strtoull(dv, &end, 10);
    if (errno || *end || us > 1000000 || *dv == '-') {
      snprintf(err, errlen, "AU_NET_DELAY_US: expected microseconds from 0 to 1000000, got '%s'",
               dv);
      return AU_EINVAL;
    }
    if (us && netdelay_start(rt, us * 1000, &net->delay) != 0) {
      snprintf(err, errlen, "AU_NET_DELAY_US: cannot start the delay thread");
      return AU_ENOMEM;
    }
  }
  int rc = io_extend(rt, &net_io_ext);
  if (rc != 0) {
    snprintf(err, errlen, "the runtime's I/O thread is extended by something else");
    return rc;
  }
  rc = post_cmd(rt, NET_CMD_START, NULL, 0);
  pthread_mutex_lock(&net->mu);
  /* the I/O thread enforces the deadline itself; the margin here only guards a wedged
   * I/O thread */
  if (rc == 0) rc = wait_for(net, is_up, 0, net->opts.timeout_ms + 5000);
  if (rc != 0) snprintf(err, errlen, "%s", net->error ? net->error_msg : au_strerror(rc));
  pthread_mutex_unlock(&net->mu);
  return rc;
}

void net_leave(au_runtime_t *rt)
{
  net_t *net = rt->net;
  if (!net) return;
  netdelay_stop(net->delay); /* frames still waiting go out before BYE */
  net->delay = NULL;
  if (post_cmd(rt, NET_CMD_LEAVE, NULL, 0) == 0) {
    pthread_mutex_lock(&net->mu);
    int rc = wait_for(net, is_left, 0, LEAVE_TIMEOUT_MS);
    pthread_mutex_unlock(&net->mu);
    if (rc == AU_ETIMEDOUT)
      net_log(net, AU_LOG_WARN, "leaving: peers did not say BYE within %d s; closing",
              LEAVE_TIMEOUT_MS / 1000);
  }
  atomic_fetch_sub(&rt->io_pending, 1);
}

au_msg_t *net_send_start(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type,
                         au_port_t from_port, size_t len, int *rc)
{
  net_t *net = rt->net;
  *rc = 0;
  if (!net || node >= (uint32_t)net->nodes || (int)node == net->rank ||
      len > WIRE_MAX_FRAME - WIRE_HEADER_MAX) {
    *rc = AU_EINVAL;
    return NULL;
  }
  /* relaxed: a hint; a frame queued just as the cluster breaks is dropped with it */
  if (atomic_load_explicit(&net->broken, memory_order_relaxed)) {
    *rc = AU_ENODE;
    return NULL;
  }
  au_msg_t *m = frame_alloc(rt, rt_cache(rt), len);
  if (!m) {
    *rc = AU_ENOMEM;
    return NULL;
  }
  frame_meta_t *fm = frame_meta(m);
  fm->ftype = FT_DATA;
  fm->node = node;
  fm->port = port;
  fm->nextra = 2;
  fm->extra[0] = type;
  fm->extra[1] = from_port;
  fm->counted = 1;
  return m;
}

void *net_frame_payload(au_msg_t *m)
{
  return frame_payload(m);
}

void net_send_finish(au_runtime_t *rt, au_msg_t *m)
{
  net_t *net = rt->net;
  frame_meta_t *fm = frame_meta(m);
  atomic_fetch_add(&net->out_bytes[fm->node], fm->len);
  atomic_fetch_add(&net->sent, 1);
  atomic_fetch_add_explicit(&net->sent_bytes, fm->len, memory_order_relaxed);
  m->type = NET_CMD_SEND;
  if (!net->delay || netdelay_push(net->delay, m) != 0) io_post_msg(rt, m);
}

int net_send(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type, au_port_t from_port,
             const void *data, size_t len)
{
  int rc;
  if (len && !data) return AU_EINVAL;
  au_msg_t *m = net_send_start(rt, node, port, type, from_port, len, &rc);
  if (!m) return rc;
  if (len) memcpy(frame_payload(m), data, len);
  net_send_finish(rt, m);
  return 0;
}

int net_link_wait(au_runtime_t *rt, uint32_t node, au_actor_t *who, uint32_t type)
{
  net_t *net = rt->net;
  if (!net || node >= (uint32_t)net->nodes) return 0;
  int wait = 0;
  pthread_mutex_lock(&net->wait_mu);
  if (atomic_load(&net->out_bytes[node]) > (size_t)net->opts.queue_bytes) {
    waiter_t *w = malloc(sizeof(*w));
    if (w) {
      w->who = who;
      w->type = type;
      w->next = net->waiters[node];
      net->waiters[node] = w;
      wait = 1;
    }
  }
  pthread_mutex_unlock(&net->wait_mu);
  return wait;
}

void au__cluster_idle(au_runtime_t *rt, int idle)
{
  net_t *net = rt->net;
  if (!net) return;
  atomic_store(&net->idle, idle);
  if (idle) post_cmd(rt, NET_CMD_IDLE, NULL, 0);
}

int au__cluster_run(au_runtime_t *rt)
{
  net_t *net = rt->net;
  pthread_mutex_lock(&net->mu);
  uint64_t run = ++net->run;
  int rc = net->error;
  pthread_mutex_unlock(&net->mu);
  if (rc) return rc;
  /* idle may already be 1 (no workers): tell rank 0 under the new run number */
  if (atomic_load(&net->idle)) post_cmd(rt, NET_CMD_IDLE, NULL, 0);
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

int net_allreduce(au_runtime_t *rt, double *v, int n)
{
  net_t *net = rt->net;
  if (n < 0 || n > (1 << 20)) return AU_EINVAL;
  pthread_mutex_lock(&net->mu);
  uint64_t seq = ++net->reduce_seq;
  int rc = net->error;
  pthread_mutex_unlock(&net->mu);
  if (rc) return rc;
  size_t len = 16 + (size_t)n * sizeof(double);
  uint8_t *buf = malloc(len);
  if (!buf) return AU_ENOMEM;
  memcpy(buf, &seq, sizeof(seq));
  memcpy(buf + sizeof(seq), &n, sizeof(n));
  if (n) memcpy(buf + 16, v, (size_t)n * sizeof(double));
  rc = post_cmd(rt, NET_CMD_REDUCE, buf, len);
  free(buf);
  if (rc) return rc;
  pthread_mutex_lock(&net->mu);
  rc = wait_for(net, reduce_is_done, seq, 0);
  if (rc == 0 && net->reduced_n == n && n) memcpy(v, net->reduced, (size_t)n * sizeof(double));
  pthread_mutex_unlock(&net->mu);
  return rc;
}

int net_error(au_runtime_t *rt)
{
  net_t *net = rt->net;
  if (!net) return 0;
  pthread_mutex_lock(&net->mu);
  int rc = net->error;
  pthread_mutex_unlock(&net->mu);
  return rc;
}

/* --- the public calls --------------------------------------------------------------- */

int au_runtime_join(au_runtime_t *rt, const au_cluster_opts_t *o, char *err, size_t errlen)
{
  if (!rt || !o || o->nodes < 1 || o->rank < 0 || o->rank >= o->nodes || rt->net) {
    snprintf(err, errlen, "invalid cluster options (rank %d of %d nodes)", o ? o->rank : -1,
             o ? o->nodes : 0);
    return AU_EINVAL;
  }
  if (o->nodes == 1) return 0;
  return net_join(rt, o, err, errlen);
}

int au_runtime_rank(const au_runtime_t *rt)
{
  return rt->rank;
}

int au_runtime_nodes(const au_runtime_t *rt)
{
  return rt->nodes;
}

int au_link_wait(au_actor_t *self, uint32_t node, uint32_t type)
{
  return net_link_wait(au_actor_runtime(self), node, self, type);
}

int au_allreduce_sum(au_runtime_t *rt, double *v, int n)
{
  if (!rt || (n && !v) || n < 0) return AU_EINVAL;
  if (!rt->net) return 0;
  return net_allreduce(rt, v, n);
}

uint64_t au__bytes_sent(const au_runtime_t *rt)
{
  return rt->net ? atomic_load_explicit(&rt->net->sent_bytes, memory_order_relaxed) : 0;
}
