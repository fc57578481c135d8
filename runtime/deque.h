/* deque.h — Chase–Lev work-stealing deque of pointers, the C11 formulation of
 * Lê, Pop, Cohen and Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak
 * Memory Models", PPoPP 2013.
 *
 * One owner thread pushes and pops at the bottom (LIFO); any thread steals from the
 * top (FIFO). The invariant: every pushed item is returned exactly once, by one pop
 * or one successful steal. The buffer grows by doubling; old buffers are kept until
 * deque_destroy because a thief may still be reading one.
 */
#ifndef AUGUR_RUNTIME_DEQUE_H
#define AUGUR_RUNTIME_DEQUE_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct deque_buf {
  size_t mask;            /* capacity - 1; capacity is a power of two */
  struct deque_buf *prev; /* older, smaller buffer; freed at destroy */
  _Atomic(void *) slot[];
} deque_buf_t;

typedef struct deque {
  _Alignas(64) atomic_long top;
  _Alignas(64) atomic_long bottom;
  _Atomic(deque_buf_t *) buf;
} deque_t;

/* DEQUE_ABORT: a steal lost a race with another thief or the owner; try again. */
#define DEQUE_ABORT ((void *)1)

int deque_init(deque_t *d, size_t capacity_log2);
void deque_destroy(deque_t *d);

/* Owner only. Returns how many items the deque held before (a hint: thieves may be
 * taking some), or AU_ENOMEM if the buffer could not grow. */
int deque_push(deque_t *d, void *item);
/* Owner only. NULL when empty. */
void *deque_pop(deque_t *d);
/* Any thread. NULL when empty, DEQUE_ABORT on a lost race. */
void *deque_steal(deque_t *d);
/* Any thread: a racy hint, exact only when no one else touches the deque. */
int deque_empty(deque_t *d);

#endif
