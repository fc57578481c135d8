/* counter.h — statistics counters that exactly one thread writes and any thread may
 * read. The writer adds with a relaxed load and store, no locked instruction, so a
 * counter costs about as much as a plain increment on the hot path; a reader on another
 * thread sees a recent value, and the exact one once it is ordered after the writer
 * (a thread join, a message).
 */
#ifndef AUGUR_RUNTIME_COUNTER_H
#define AUGUR_RUNTIME_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

static inline void counter_add(atomic_ullong *c, uint64_t n)
{
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* As counter_add, and everything the writer did before is visible to a reader that
 * loads the new value with counter_get_acquire. */
static inline void counter_add_release(atomic_ullong *c, uint64_t n)
{
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_release);
}

static inline uint64_t counter_get_acquire(const atomic_ullong *c)
{
  return atomic_load_explicit((atomic_ullong *)c, memory_order_acquire);
}

static inline uint64_t counter_get(const atomic_ullong *c)
{
  return atomic_load_explicit((atomic_ullong *)c, memory_order_relaxed);
}

#endif
