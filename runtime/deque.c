/* deque.c — Chase–Lev work-stealing deque (see deque.h). Memory orders follow Lê et
 * al. (PPoPP 2013, fig. 1), with two strengthenings that cost nothing on x86 and let
 * ThreadSanitizer, which does not model standalone fences, see the synchronisation:
 * push publishes `bottom` with a release store instead of fence + relaxed store, and
 * steal reads `bottom` with acquire.
 */
#include "runtime/deque.h"

#include <limits.h>
#include <stdlib.h>

#include "augur.h"

static deque_buf_t *buf_new(size_t cap)
{
  deque_buf_t *b = malloc(sizeof(*b) + cap * sizeof(b->slot[0]));
  if (!b) return NULL;
  b->mask = cap - 1;
  b->prev = NULL;
  for (size_t i = 0; i < cap; i++) atomic_init(&b->slot[i], NULL);
  return b;
}

int deque_init(deque_t *d, size_t capacity_log2)
{
  deque_buf_t *b = buf_new((size_t)1 << capacity_log2);
  if (!b) return AU_ENOMEM;
  atomic_init(&d->top, 0);
  atomic_init(&d->bottom, 0);
  atomic_init(&d->buf, b);
  return 0;
}

void deque_destroy(deque_t *d)
{
  deque_buf_t *b = atomic_load_explicit(&d->buf, memory_order_relaxed);
  while (b) {
    deque_buf_t *prev = b->prev;
    free(b);
    b = prev;
  }
  atomic_store_explicit(&d->buf, NULL, memory_order_relaxed);
}

/* Owner only: copies the live range [t, b) into a buffer twice the size. The old one
 * stays reachable through ->prev so that a thief that loaded it may finish reading. */
static deque_buf_t *grow(deque_t *d, deque_buf_t *old, long t, long b)
{
  deque_buf_t *n = buf_new((old->mask + 1) * 2);
  if (!n) return NULL;
  for (long i = t; i < b; i++) {
    void *x = atomic_load_explicit(&old->slot[i & old->mask], memory_order_relaxed);
    atomic_store_explicit(&n->slot[i & n->mask], x, memory_order_relaxed);
  }
  n->prev = old;
  /* release: a thief that acquires the new buffer sees the copied slots. */
  atomic_store_explicit(&d->buf, n, memory_order_release);
  return n;
}

int deque_push(deque_t *d, void *item)
{
  /* relaxed: only the owner writes bottom. */
  long b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
  /* acquire: pairs with the thieves' CAS on top, so the slot we overwrite was read. */
  long t = atomic_load_explicit(&d->top, memory_order_acquire);
  deque_buf_t *a = atomic_load_explicit(&d->buf, memory_order_relaxed);
  if (b - t > (long)a->mask) {
    a = grow(d, a, t, b);
    if (!a) return AU_ENOMEM;
  }
  atomic_store_explicit(&a->slot[b & a->mask], item, memory_order_relaxed);
  /* release: a thief that reads the new bottom also sees the slot and the item. */
  atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
  return b - t > 0 ? (int)(b - t < INT_MAX ? b - t : INT_MAX) : 0;
}

void *deque_pop(deque_t *d)
{
  long b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
  deque_buf_t *a = atomic_load_explicit(&d->buf, memory_order_relaxed);
  atomic_store_explicit(&d->bottom, b, memory_order_relaxed);
  /* seq_cst fence: the store to bottom must be ordered before the load of top, or the
   * owner and a thief could both take the last item. */
  atomic_thread_fence(memory_order_seq_cst);
  long t = atomic_load_explicit(&d->top, memory_order_relaxed);
  void *x = NULL;
  if (t <= b) {
    x = atomic_load_explicit(&a->slot[b & a->mask], memory_order_relaxed);
    if (t == b) {
      /* Last item: race the thieves for it through top. */
      if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                   memory_order_relaxed))
        x = NULL;
      atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
    }
  } else {
    atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
  }
  return x;
}

void *deque_steal(deque_t *d)
{
  long t = atomic_load_explicit(&d->top, memory_order_acquire);
  /* seq_cst fence: pairs with the one in deque_pop (the top/bottom Dekker race). */
  atomic_thread_fence(memory_order_seq_cst);
  long b = atomic_load_explicit(&d->bottom, memory_order_acquire);
  if (t >= b) return NULL;
  /* acquire (the paper's consume): the slots of a grown buffer are visible. */
  deque_buf_t *a = atomic_load_explicit(&d->buf, memory_order_acquire);
  void *x = atomic_load_explicit(&a->slot[t & a->mask], memory_order_relaxed);
  if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                               memory_order_relaxed))
    return DEQUE_ABORT;
  return x;
}

int deque_empty(deque_t *d)
{
  long t = atomic_load_explicit(&d->top, memory_order_seq_cst);
  long b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
  return b <= t;
}
