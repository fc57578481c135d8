/* injectq.c — Vyukov intrusive MPSC queue + consumer try-lock (see injectq.h). */
#include "runtime/injectq.h"

#include <stddef.h>

void injectq_init(injectq_t *q)
{
  atomic_init(&q->stub.next, NULL);
  atomic_init(&q->head, &q->stub);
  q->tail = &q->stub;
  atomic_flag_clear(&q->busy);
  atomic_init(&q->count, 0);
}

static void link_in(injectq_t *q, injectq_node_t *n)
{
  atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
  /* acq_rel: orders this node after earlier pushes (release for the consumer). */
  injectq_node_t *prev = atomic_exchange_explicit(&q->head, n, memory_order_acq_rel);
  /* release: the consumer that reads the link sees the node (and the actor) published. */
  atomic_store_explicit(&prev->next, n, memory_order_release);
}

long injectq_push(injectq_t *q, injectq_node_t *n)
{
  /* seq_cst: a thread about to park reads count after announcing itself as sleeping;
   * the pusher reads the sleeper count after this (see sched.c). */
  long before = atomic_fetch_add_explicit(&q->count, 1, memory_order_seq_cst);
  link_in(q, n);
  return before;
}

/* Single-consumer pop, called with `busy` held. */
static injectq_node_t *pop_locked(injectq_t *q)
{
  injectq_node_t *tail = q->tail;
  injectq_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (tail == &q->stub) {
    if (!next) return NULL;
    q->tail = next;
    tail = next;
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
  }
  if (next) {
    q->tail = next;
    return tail;
  }
  injectq_node_t *head = atomic_load_explicit(&q->head, memory_order_acquire);
  if (tail != head) return NULL; /* a push is linking in: look again later */
  /* tail is the last node: put the stub behind it so tail can be handed out. */
  link_in(q, &q->stub);
  next = atomic_load_explicit(&tail->next, memory_order_acquire);
  if (next) {
    q->tail = next;
    return tail;
  }
  return NULL;
}

injectq_node_t *injectq_pop(injectq_t *q)
{
  /* acquire: the previous consumer's updates of tail are visible to us. */
  if (atomic_flag_test_and_set_explicit(&q->busy, memory_order_acquire)) return NULL;
  injectq_node_t *n = pop_locked(q);
  if (n) atomic_fetch_sub_explicit(&q->count, 1, memory_order_relaxed);
  /* release: hands tail over to the next consumer. */
  atomic_flag_clear_explicit(&q->busy, memory_order_release);
  return n;
}

size_t injectq_pop_many(injectq_t *q, injectq_node_t **out, size_t max)
{
  /* acquire, release: as injectq_pop */
  if (atomic_flag_test_and_set_explicit(&q->busy, memory_order_acquire)) return 0;
  size_t n = 0;
  while (n < max && (out[n] = pop_locked(q)) != NULL) n++;
  if (n) atomic_fetch_sub_explicit(&q->count, (long)n, memory_order_relaxed);
  atomic_flag_clear_explicit(&q->busy, memory_order_release);
  return n;
}

bool injectq_nonempty(injectq_t *q)
{
  return atomic_load_explicit(&q->count, memory_order_seq_cst) > 0;
}
