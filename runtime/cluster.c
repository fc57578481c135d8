/* cluster.c — joining a cluster: au_runtime_join builds the node's network and wires its
 * modules together. The connections (conn.c) hand what they bring to the handlers here,
 * which pass it on by frame type and control kind to the data plane (data.c), membership
 * (member.c) or termination (term.c); the I/O thread's extension (io_extend) passes the
 * network's commands the same way. The modules never call each other upward: this file
 * is the only one that knows them all.
 *
 * The invariant: the network exists (rt->net) from au_runtime_join until net_free, after
 * the I/O thread has stopped; while it exists the runtime counts it as a source of
 * messages (io_pending), so a run in a cluster ends by the termination protocol, never
 * by quiescence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cluster.h"
#include "runtime/rt.h"

/* --- what the connections bring ------------------------------------------------------ */

static void on_frame(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  switch (h->type) {
  case FT_DATA:
    data_deliver(net, c, h, p, n);
    return;
  case FT_BYE:
    member_on_bye(net, c);
    return;
  }
  /* FT_CTRL */
  if (h->nextra < 1) {
    conn_fail(c, "control frame without a kind");
    return;
  }
  switch (h->extra[0]) {
  case CTRL_JOIN:
  case CTRL_PEERS:
  case CTRL_READY:
  case CTRL_GO:
    member_on_ctrl(net, c, h, p, n);
    break;
  case CTRL_STATUS:
  case CTRL_POLL:
  case CTRL_RUN_DONE:
  case CTRL_REDUCE:
  case CTRL_REDUCED:
    term_on_ctrl(net, c, h, p, n);
    break;
  default:
    conn_fail(c, "unknown control kind");
    break;
  }
}

static const conn_handlers_t handlers = {
    .up = member_on_up,
    .frame = on_frame,
    .read_done = data_flush,
    .written = data_written,
    .lost = member_lost,
    .dial_failed = member_on_dial_failed,
    .refused = member_on_refused,
    .closed = member_on_closed,
};

/* --- the I/O thread's extension ------------------------------------------------------ */

static void on_cmd(au_runtime_t *rt, au_msg_t *m)
{
  net_t *net = rt->net;
  switch (m->type) {
  case NET_CMD_START:
    netdelay_attach(net->data.delay, &rt->io.loop);
    member_start(net);
    break;
  case NET_CMD_SEND:
    data_on_send(net, m);
    return; /* takes m */
  case NET_CMD_IDLE:
    term_on_idle(net);
    break;
  case NET_CMD_REDUCE:
    term_on_reduce(net, m);
    break;
  case NET_CMD_LEAVE:
    member_leave(net);
    break;
  case NET_CMD_DELAY_STOP:
    netdelay_on_stop(net->data.delay);
    break;
  }
  pool_free(&rt->pool, net->cache, m);
}

/* after a batch of commands: one write per connection for everything it queued */
static void after_batch(au_runtime_t *rt)
{
  if (rt->net) conn_flush_all(rt->net);
}

static void on_quit(au_runtime_t *rt)
{
  if (!rt->net) return;
  conn_close_all(rt->net);
  member_close(rt->net);
}

static const io_ext_t io_ext = {on_cmd, after_batch, on_quit};

/* --- joining and freeing ------------------------------------------------------------- */

void net_free(au_runtime_t *rt)
{
  net_t *net = rt->net;
  if (!net) return;
  data_free(net);
  term_free(net);
  member_free(net);
  free(net->conns);
  pthread_mutex_destroy(&net->mu);
  pthread_cond_destroy(&net->cv);
  free(net);
  rt->net = NULL;
}

static int net_join(au_runtime_t *rt, const au_cluster_opts_t *o, char *err, size_t errlen)
{
  net_t *net = calloc(1, sizeof(*net));
  if (!net) return AU_ENOMEM;
  net->rt = rt;
  net->cache = &rt->pool.caches[rt->nthreads];
  net->handlers = &handlers;
  net->opts = *o;
  if (!net->opts.timeout_ms) net->opts.timeout_ms = 30000;
  if (!net->opts.heartbeat_ms) net->opts.heartbeat_ms = 500;
  if (!net->opts.dead_ms) net->opts.dead_ms = 5000;
  if (net->opts.queue_bytes <= 0) net->opts.queue_bytes = NET_OUT_HIGH;
  net->rank = o->rank;
  net->nodes = o->nodes;
  net->conns = calloc((size_t)o->nodes, sizeof(*net->conns));
  pthread_mutex_init(&net->mu, NULL);
  pthread_cond_init(&net->cv, NULL);
  atomic_init(&net->broken, 0);
  rt->net = net;
  int rc = !net->conns ? AU_ENOMEM : member_init(net);
  if (rc == 0) rc = term_init(net);
  if (rc != 0) {
    net_free(rt);
    return rc;
  }
  rt->rank = o->rank;
  rt->nodes = o->nodes;
  /* the network is a source of messages: the runtime is never quiescent while in a
   * cluster; runs end by the cluster's termination protocol instead (net_leave undoes it) */
  atomic_fetch_add(&rt->io_pending, 1);
  if ((rc = data_init(net, err, errlen)) != 0) return rc;
  if ((rc = io_extend(rt, &io_ext)) != 0) {
    snprintf(err, errlen, "the runtime's I/O thread is extended by something else");
    return rc;
  }
  return member_join(net, err, errlen);
}

void net_leave(au_runtime_t *rt)
{
  net_t *net = rt->net;
  if (!net) return;
  data_stop_delay(net); /* frames still waiting go out before BYE */
  member_leave_wait(net);
  /* the network stops being a source of messages (counted by net_join) */
  atomic_fetch_sub(&rt->io_pending, 1);
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
