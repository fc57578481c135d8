/* actor.c — spawning, sending to, running and stopping actors.
 *
 * The invariant: an actor's behaviour runs on one thread at a time, because only the
 * push that finds the mailbox empty schedules it and a turn ends either by marking the
 * mailbox empty or by putting the actor back in a run queue — never both.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/counter.h"
#include "runtime/rt.h"

static void list_add(au_runtime_t *rt, au_actor_t *a, int list)
{
  actor_list_t *l = &rt->lists[list];
  a->list = list;
  a->prev = NULL;
  pthread_mutex_lock(&l->mu);
  a->next = l->head;
  if (l->head) l->head->prev = a;
  l->head = a;
  pthread_mutex_unlock(&l->mu);
}

static void list_remove(au_runtime_t *rt, au_actor_t *a)
{
  actor_list_t *l = &rt->lists[a->list];
  pthread_mutex_lock(&l->mu);
  if (a->prev)
    a->prev->next = a->next;
  else
    l->head = a->next;
  if (a->next) a->next->prev = a->prev;
  pthread_mutex_unlock(&l->mu);
}

int au_actor_spawn(au_runtime_t *rt, au_behaviour_t fn, size_t state_size, au_actor_t **out)
{
  if (!rt || !out || !fn || state_size > ((size_t)1 << 40)) return AU_EINVAL;
  size_t size = (sizeof(au_actor_t) + state_size + 63) & ~(size_t)63;
  au_actor_t *a = aligned_alloc(64, size);
  if (!a) return AU_ENOMEM;
  memset(a, 0, size);
  rt_ctx_t *c = rt_ctx(rt);
  au_msg_t *stub = pool_alloc(&rt->pool, c ? c->cache : NULL, 0);
  if (!stub) {
    free(a);
    return AU_ENOMEM;
  }
  mailbox_init(&a->mq, stub);
  a->fn = fn;
  a->rt = rt;
  a->port = AU_NO_PORT;
  list_add(rt, a, c ? c->list : rt->nthreads + 1);
  *out = a;
  return 0;
}

void *au_actor_state(au_actor_t *a)
{
  return a->state;
}

au_runtime_t *au_actor_runtime(au_actor_t *a)
{
  return a->rt;
}

void au_actor_stop(au_actor_t *self)
{
  self->stopping = 1;
}

au_msg_t *au_msg_alloc(au_runtime_t *rt, uint32_t type, size_t len)
{
  au_msg_t *m = pool_alloc(&rt->pool, rt_cache(rt), len);
  if (m) m->type = type;
  return m;
}

void actor_deliver(au_actor_t *to, au_msg_t *m)
{
  if (mailbox_push(&to->mq, m)) sched_schedule(to->rt, to);
}

void actor_deliver_chain(au_actor_t *to, au_msg_t *first, au_msg_t *last)
{
  if (mailbox_push_chain(&to->mq, first, last)) sched_schedule(to->rt, to);
}

void au_msg_send(au_actor_t *to, au_msg_t *msg)
{
  au_runtime_t *rt = to->rt;
  rt_ctx_t *c = rt_ctx(rt);
  au_actor_t *self = c ? c->current : NULL;
  msg->sender = self;
  msg->from_node = (uint32_t)rt->rank;
  msg->from_port = self ? self->port : AU_NO_PORT;
  if (self == to) to->yield = 1; /* safe: `to` is running on this thread */
  /* Counted before the push, so that whoever sees it handled also sees it sent. A
   * message from outside any behaviour (main thread, timers) is not counted: such
   * sources are covered by the node's idle flag and armed timers. */
  if (self) counter_add(&c->sched->local_sent, 1);
  actor_deliver(to, msg);
}

int au_send(au_actor_t *to, uint32_t type, const void *data, size_t len)
{
  if (!to || (len && !data)) return AU_EINVAL;
  au_msg_t *m = au_msg_alloc(to->rt, type, len);
  if (!m) return AU_ENOMEM;
  if (len) memcpy(m->data, data, len);
  au_msg_send(to, m);
  return 0;
}

/* Frees a stopped actor: what is left in its mailbox, its stub, its memory. */
static void actor_free(au_runtime_t *rt, pool_cache_t *cache, au_actor_t *a)
{
  au_msg_t *m, *rel;
  while ((m = mailbox_pop(&a->mq, &rel)) != NULL) {
    if (m->sender || m->from_node != (uint32_t)rt->rank) atomic_fetch_add(&rt->dropped, 1);
    pool_free(&rt->pool, cache, rel);
  }
  pool_free(&rt->pool, cache, mailbox_stub(&a->mq));
  list_remove(rt, a);
  free(a);
}

void actor_run(rt_ctx_t *ctx, au_actor_t *a)
{
  au_runtime_t *rt = ctx->rt;
  unsigned n = 0, batch = (unsigned)rt->batch;
  uint64_t handled = 0;
  ctx->current = a;
  a->yield = 0;
  while (n < batch) {
    au_msg_t *rel;
    au_msg_t *m = mailbox_pop(&a->mq, &rel);
    if (rel) pool_free(&rt->pool, ctx->cache, rel);
    if (!m) break;
    /* from another node, or from a behaviour here: counted as sent (see au_msg_send) */
    handled += m->from_node != (uint32_t)rt->rank || m->sender != NULL;
    a->fn(a, a->state, m);
    n++;
    /* A message to itself is a loop: end the turn, so that what it woke runs first. */
    if (a->stopping || a->yield) break;
  }
  ctx->current = NULL;
  /* after the handlers, with release: a reader that sees these handled also sees what
   * they sent (runtime/cluster.c) */
  if (handled) counter_add_release(&ctx->sched->handled, handled);
  sched_count_turn(ctx->sched, n);

  if (a->stopping) {
    actor_free(rt, ctx->cache, a);
    return;
  }
  /* Still runnable: its turn ended early or at a full batch, or its mailbox looks empty
   * but cannot be marked so because a push is still linking in. */
  if (a->yield || n == batch || !mailbox_mark_empty(&a->mq)) sched_defer(ctx, a);
}

void actor_free_all(au_runtime_t *rt)
{
  for (int i = 0; i < rt->nthreads + 2; i++) {
    au_actor_t *a;
    while ((a = rt->lists[i].head) != NULL) actor_free(rt, NULL, a);
  }
}
