/* injectq.h — the scheduler's inject queue: runnable actors handed over by threads that
 * own no deque (the I/O thread, the main thread). An intrusive Vyukov MPSC queue with a
 * permanent stub node; consumers take turns through a try-lock, so any scheduler thread
 * may pop (MPMC) without ever blocking: a thread that loses the try-lock simply looks
 * elsewhere for work.
 *
 * The invariant: every pushed node is popped exactly once, in push order per producer.
 */
#ifndef AUGUR_RUNTIME_INJECTQ_H
#define AUGUR_RUNTIME_INJECTQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct injectq_node {
  _Atomic(struct injectq_node *) next;
} injectq_node_t;

typedef struct injectq {
  _Alignas(64) _Atomic(injectq_node_t *) head; /* producers */
  _Alignas(64) injectq_node_t *tail;           /* the consumer holding `busy` */
  atomic_flag busy;
  _Alignas(64) atomic_long count; /* pushed and not yet popped: for the parking check */
  injectq_node_t stub;
} injectq_t;

void injectq_init(injectq_t *q);
/* Any thread. Returns how many nodes were queued before this one. */
long injectq_push(injectq_t *q, injectq_node_t *n);
/* Nodes pushed and not yet popped (a push counts before it is linked in). */
static inline long injectq_count(injectq_t *q)
{
  return atomic_load_explicit(&q->count, memory_order_seq_cst);
}
/* Any thread. NULL when empty, when another consumer holds the queue, or when a push is
 * half done (the caller will be woken or will look again). */
injectq_node_t *injectq_pop(injectq_t *q);
/* Any thread: up to max nodes into out, in order, under one turn of the try-lock. 0 as
 * injectq_pop returns NULL. */
size_t injectq_pop_many(injectq_t *q, injectq_node_t **out, size_t max);
/* Any thread: true if something may be queued (a hint for parking decisions). */
bool injectq_nonempty(injectq_t *q);

#endif
