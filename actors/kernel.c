/* kernel.c — the update kernels that apply a delta row to a parameter row in place,
 * with no lock.
 *
 * Exact kernels make every value's update atomic (int32 fetch_add, float CAS on the bit
 * pattern), so concurrent pushes to one row sum exactly. Relaxed order is enough for
 * them: only atomicity per value matters; whoever reads the sums later is ordered after
 * the updates by the runtime (a message, a barrier, a thread join).
 *
 * The Hogwild kernel is a plain `row[j] += delta[j]` loop that the compiler vectorizes.
 * Two threads updating the same value at once may lose one update (that is Hogwild!'s
 * bargain for SGD); an aligned 32-bit value is never torn on the machines we target.
 * In C11 terms it is a data race, so under ThreadSanitizer (AU__TSAN, augur.h) it is built as
 * relaxed atomic loads and stores with the same semantics, and TSan checks the rest.
 */
#include <string.h>

#include "actors/ps.h"

void kernel_add_f32(void *row, const void *delta, uint32_t dim, void *arg)
{
  (void)arg;
  _Atomic uint32_t *r = row;
  const float *d = delta;
  for (uint32_t j = 0; j < dim; j++) {
    if (d[j] == 0.0f) continue;
    uint32_t old = atomic_load_explicit(&r[j], memory_order_relaxed), upd;
    do {
      float f;
      memcpy(&f, &old, sizeof(f));
      f += d[j];
      memcpy(&upd, &f, sizeof(upd));
    } while (!atomic_compare_exchange_weak_explicit(&r[j], &old, upd, memory_order_relaxed,
                                                    memory_order_relaxed));
  }
}

void kernel_add_i32(void *row, const void *delta, uint32_t dim, void *arg)
{
  (void)arg;
  _Atomic int32_t *r = row;
  const int32_t *d = delta;
  uint32_t j = 0;
  /* sparse deltas (a few changed counts in a wide row) skip zeros 16 at a time */
  for (; j + 16 <= dim; j += 16) {
    uint64_t v[8], any = 0;
    memcpy(v, &d[j], sizeof(v));
    for (int i = 0; i < 8; i++) any |= v[i];
    if (!any) continue;
    for (uint32_t i = j; i < j + 16; i++)
      if (d[i]) atomic_fetch_add_explicit(&r[i], d[i], memory_order_relaxed);
  }
  for (; j < dim; j++)
    if (d[j]) atomic_fetch_add_explicit(&r[j], d[j], memory_order_relaxed);
}

#ifdef AU__TSAN
void kernel_hogwild_f32(void *row, const void *delta, uint32_t dim, void *arg)
{
  (void)arg;
  _Atomic float *r = row;
  const float *d = delta;
  for (uint32_t j = 0; j < dim; j++)
    atomic_store_explicit(&r[j], atomic_load_explicit(&r[j], memory_order_relaxed) + d[j],
                          memory_order_relaxed);
}

void kernel_hogwild_i32(void *row, const void *delta, uint32_t dim, void *arg)
{
  (void)arg;
  _Atomic uint32_t *r = row;
  const int32_t *d = delta;
  for (uint32_t j = 0; j < dim; j++)
    atomic_store_explicit(&r[j], atomic_load_explicit(&r[j], memory_order_relaxed) + (uint32_t)d[j],
                          memory_order_relaxed);
}
#else
void kernel_hogwild_f32(void *row, const void *delta, uint32_t dim, void *arg)
{
  (void)arg;
  float *restrict r = row;
  const float *restrict d = delta;
  for (uint32_t j = 0; j < dim; j++) r[j] += d[j];
}

void kernel_hogwild_i32(void *row, const void *delta, uint32_t dim, void *arg)
{
  (void)arg;
  int32_t *restrict r = row;
  const int32_t *restrict d = delta;
  /* unsigned arithmetic: wraps like fetch_add instead of overflowing (UB) */
  for (uint32_t j = 0; j < dim; j++) r[j] = (int32_t)((uint32_t)r[j] + (uint32_t)d[j]);
}
#endif

void kernel_copy_row(void *dst, const void *row, uint32_t dim)
{
  _Atomic uint32_t *r = (_Atomic uint32_t *)row;
  uint32_t *o = dst;
  for (uint32_t j = 0; j < dim; j++) o[j] = atomic_load_explicit(&r[j], memory_order_relaxed);
}

kernel_fn_t kernel_for(au_type_t type, au_kernel_t kernel)
{
  switch (kernel) {
  case AU_KERNEL_ADD:
    return type == AU_F32 ? kernel_add_f32 : kernel_add_i32;
  case AU_KERNEL_HOGWILD:
    return type == AU_F32 ? kernel_hogwild_f32 : kernel_hogwild_i32;
  default:
    return NULL;
  }
}
