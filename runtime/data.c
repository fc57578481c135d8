/* data.c — the data plane of a cluster: frames for ports on other nodes, from any thread
 * to the I/O thread and onto the peer's connection; data frames in, delivered to the
 * port's actor; and the per-peer queue accounting behind au_link_wait.
 *
 * The invariant: a data frame is counted in its peer's out_bytes from data_send_finish
 * until it has been written (data_written) or dropped with a lost peer, so a sender that
 * asks au_link_wait sees what it queued; whoever is told to wait is woken, once, when the
 * queue drains below a quarter of the limit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cluster.h"
#include "runtime/ext.h"
#include "runtime/rt.h"

int data_init(net_t *net, char *err, size_t errlen)
{
  data_t *d = &net->data;
  size_t n = (size_t)net->nodes;
  d->out_bytes = calloc(n, sizeof(atomic_size_t));
  d->waiters = calloc(n, sizeof(waiter_t *));
  pthread_mutex_init(&d->wait_mu, NULL);
  if (!d->out_bytes || !d->waiters) return AU_ENOMEM;
  for (size_t i = 0; i < n; i++) atomic_init(&d->out_bytes[i], 0);
  atomic_init(&d->sent, 0);
  atomic_init(&d->sent_bytes, 0);
  for (int i = 0; i < AU__BYTES_TYPES; i++)
    atomic_init(&d->sent_by[i], 0), atomic_init(&d->type_of[i], 0);
  atomic_init(&d->sent_other, 0);

  /* testing only: an added delay on data frames (docs/cluster.md) */
  const char *dv = getenv("AU_NET_DELAY_US");
  if (dv && *dv) {
    /* D, or D:J: D microseconds and up to J more at random for each frame */
    char *end;
    errno = 0;
    unsigned long long us = strtoull(dv, &end, 10), jitter = 0;
    int bad = errno || us > 1000000 || *dv == '-';
    if (!bad && *end == ':') {
      const char *j = end + 1;
      jitter = strtoull(j, &end, 10);
      bad = errno || jitter > 1000000 || *j == '-' || *j == '\0';
    }
    if (bad || *end) {
      snprintf(err, errlen,
               "AU_NET_DELAY_US: expected microseconds from 0 to 1000000 (D, or D:J with up to "
               "J more at random), got '%s'",
               dv);
      return AU_EINVAL;
    }
    if ((us || jitter) && netdelay_start(net->rt, us * 1000, jitter * 1000, &d->delay) != 0) {
      snprintf(err, errlen, "AU_NET_DELAY_US: cannot start the delay: %s", strerror(errno));
      return AU_ENOMEM;
    }
  }
  return 0;
}

void data_stop_delay(net_t *net)
{
  netdelay_stop(net->data.delay); /* kept until data_free: the I/O thread still uses it */
}

void data_free(net_t *net)
{
  data_t *d = &net->data;
  if (!d->out_bytes && !d->waiters) return; /* data_init never ran */
  netdelay_free(d->delay);
  d->delay = NULL;
  waiter_t *w;
  for (int r = 0; d->waiters && r < net->nodes; r++)
    while ((w = d->waiters[r]) != NULL) {
      d->waiters[r] = w->next;
      free(w);
    }
  free(d->waiters);
  free(d->out_bytes);
  pthread_mutex_destroy(&d->wait_mu);
}

/* --- out ------------------------------------------------------------------------------ */

au_msg_t *data_send_start(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type,
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

void *data_payload(au_msg_t *m)
{
  return frame_payload(m);
}

void data_send_finish(au_runtime_t *rt, au_msg_t *m)
{
  net_t *net = rt->net;
  data_t *d = &net->data;
  frame_meta_t *fm = frame_meta(m);
  atomic_fetch_add(&d->out_bytes[fm->node], fm->len);
  atomic_fetch_add(&d->sent, 1);
  atomic_fetch_add_explicit(&d->sent_bytes, fm->len, memory_order_relaxed);
  /* by type: the slot's first type owns it (data.h) */
  const unsigned type = (unsigned)fm->extra[0], slot = type % AU__BYTES_TYPES;
  unsigned owner = atomic_load_explicit(&d->type_of[slot], memory_order_relaxed);
  if (owner == 0 && type != 0) {
    unsigned expected = 0;
    owner = atomic_compare_exchange_strong_explicit(&d->type_of[slot], &expected, type,
                                                    memory_order_relaxed, memory_order_relaxed)
                ? type
                : expected; /* another sender's type took it first */
  }
  atomic_fetch_add_explicit(owner == type && type != 0 ? &d->sent_by[slot] : &d->sent_other,
                            fm->len, memory_order_relaxed);
  m->type = NET_CMD_SEND;
  /* posted now, not at the end of the turn: see io_post_msg */
  if (!d->delay || netdelay_push(d->delay, m) != 0) io_post_msg(rt, m);
}

void data_on_send(net_t *net, au_msg_t *m)
{
  frame_meta_t *fm = frame_meta(m);
  conn_t *c = fm->node < (uint32_t)net->nodes ? net->conns[fm->node] : NULL;
  if (!c || c->state != C_UP) {
    /* the peer is gone: the cluster is broken and says so elsewhere */
    data_written(net, (int)fm->node, fm->len);
    pool_free(&net->rt->pool, net->cache, m);
    return;
  }
  conn_queue(c, m); /* the connection owns it now */
}

/* --- backpressure --------------------------------------------------------------------- */

void data_written(net_t *net, int peer, size_t bytes)
{
  data_t *d = &net->data;
  if (peer < 0 || peer >= net->nodes) return;
  pthread_mutex_lock(&d->wait_mu);
  atomic_fetch_sub(&d->out_bytes[peer], bytes);
  waiter_t *w = NULL;
  if (d->waiters[peer] && atomic_load(&d->out_bytes[peer]) < (size_t)net->opts.queue_bytes / 4) {
    w = d->waiters[peer];
    d->waiters[peer] = NULL;
  }
  pthread_mutex_unlock(&d->wait_mu);
  while (w) {
    waiter_t *next = w->next;
    au_send(w->who, w->type, NULL, 0);
    free(w);
    w = next;
  }
}

int au_link_wait(au_actor_t *self, uint32_t node, uint32_t type)
{
  net_t *net = au_actor_runtime(self)->net;
  if (!net || node >= (uint32_t)net->nodes) return 0;
  data_t *d = &net->data;
  /* relaxed: the common answer, "go on", needs no lock; a sender that misses a byte
   * written this instant sends one more message, no more. Only a sender that must wait
   * takes the lock, under which data_written's check and this one are ordered. */
  if (atomic_load_explicit(&d->out_bytes[node], memory_order_relaxed) <=
      (size_t)net->opts.queue_bytes)
    return 0;
  int wait = 0;
  pthread_mutex_lock(&d->wait_mu);
  if (atomic_load(&d->out_bytes[node]) > (size_t)net->opts.queue_bytes) {
    waiter_t *w = malloc(sizeof(*w));
    if (w) {
      w->who = self;
      w->type = type;
      w->next = d->waiters[node];
      d->waiters[node] = w;
      wait = 1;
    }
  }
  pthread_mutex_unlock(&d->wait_mu);
  return wait;
}

uint64_t au__bytes_sent(const au_runtime_t *rt)
{
  return rt->net ? atomic_load_explicit(&rt->net->data.sent_bytes, memory_order_relaxed) : 0;
}

uint64_t au__bytes_sent_type(const au_runtime_t *rt, uint32_t type)
{
  if (!rt->net || type == 0) return 0;
  const data_t *d = &rt->net->data;
  const unsigned slot = type % AU__BYTES_TYPES;
  return atomic_load_explicit(&d->type_of[slot], memory_order_relaxed) == type
             ? atomic_load_explicit(&d->sent_by[slot], memory_order_relaxed)
             : 0;
}

/* --- in ------------------------------------------------------------------------------- */

void data_deliver(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *payload, size_t plen)
{
  au_runtime_t *rt = net->rt;
  au_actor_t *to = rt_port_actor(rt, (au_port_t)h->dst);
  if (!to || h->dst > 0xfffe || h->nextra < 2 || h->extra[1] > 0xffff) {
    char why[96];
    snprintf(why, sizeof(why), "data frame for port %u, where no actor is registered",
             (unsigned)h->dst);
    conn_fail(c, why);
    return;
  }
  au_msg_t *m = pool_alloc(&rt->pool, net->cache, plen);
  if (!m) {
    conn_fail(c, "out of memory receiving a data frame");
    return;
  }
  m->type = (uint32_t)h->extra[0];
  m->from_node = (uint32_t)c->peer;
  m->from_port = (au_port_t)h->extra[1];
  if (plen) memcpy(m->data, payload, plen);
  /* Gathered: one read brings tens of frames, mostly for one actor; they go into its
   * mailbox with one push and at most one wake-up. Order holds: a run is delivered
   * before a frame for another actor is gathered, and every run before the read ends. */
  data_t *d = &net->data;
  if (d->run_to != to) data_flush(net, c);
  m->au__next = NULL;
  if (d->run_last)
    d->run_last->au__next = m;
  else
    d->run_first = m;
  d->run_last = m;
  d->run_to = to;
}

void data_flush(net_t *net, conn_t *c)
{
  (void)c;
  data_t *d = &net->data;
  if (!d->run_first) return;
  actor_deliver_chain(d->run_to, d->run_first, d->run_last);
  d->run_to = NULL;
  d->run_first = d->run_last = NULL;
}
