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
 *
 * Optimizers (table_apply) turn a gradient into the row's change with the row's own
 * state (its slots, after the values). Exact tables make each value's change and each
 * accumulator's an atomic add; the rate is read from the accumulator as it is, so two
 * racing updates of one row both land, each with a rate that saw one or both. Hogwild
 * tables use plain loads and stores, as their kernel does.
 */
#include <math.h>
#include <string.h>

#include "actors/ps.h"

/* *v += d with a CAS on the bit pattern; returns the sum it stored. */
static float cas_add_f32(_Atomic uint32_t *v, float d)
{
  uint32_t old = atomic_load_explicit(v, memory_order_relaxed), upd;
  float f;
  do {
    memcpy(&f, &old, sizeof(f));
    f += d;
    memcpy(&upd, &f, sizeof(upd));
  } while (!atomic_compare_exchange_weak_explicit(v, &old, upd, memory_order_relaxed,
                                                  memory_order_relaxed));
  return f;
}

static float load_f32(_Atomic uint32_t *v)
{
  uint32_t bits = atomic_load_explicit(v, memory_order_relaxed);
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

#ifdef AU__TSAN /* (optim_hogwild's atomic form only) */
static void store_f32(_Atomic uint32_t *v, float f)
{
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  atomic_store_explicit(v, bits, memory_order_relaxed);
}
#endif

void kernel_add_f32(void *row, const void *delta, uint32_t dim, void *arg)
{
  (void)arg;
  _Atomic uint32_t *r = row;
  const float *d = delta;
  for (uint32_t j = 0; j < dim; j++)
    if (d[j] != 0.0f) cas_add_f32(&r[j], d[j]);
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

/* The mean of g's squares, summed in the order au_view_update's inline loop sums them
 * (eight partial sums), so that inline and called updates agree to the bit. */
static float mean_square(const float *g, uint32_t dim)
{
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t j = 0;
  for (; j + 8 <= dim; j += 8)
    for (uint32_t l = 0; l < 8; l++) s[l] += g[j + l] * g[j + l];
  for (; j < dim; j++) s[0] += g[j] * g[j];
  return (((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))) / (float)dim;
}

static void optim_exact(const au_table_t *t, _Atomic uint32_t *r, const float *g)
{
  const uint32_t dim = t->dim;
  switch (t->optim) {
  case AU_OPTIM_SGD:
    for (uint32_t j = 0; j < dim; j++)
      if (g[j] != 0.0f) cas_add_f32(&r[j], -t->lr * g[j]);
    break;
  case AU_OPTIM_ADAGRAD_ROW: {
    const float eta = t->lr / sqrtf(load_f32(&r[dim]));
    for (uint32_t j = 0; j < dim; j++)
      if (g[j] != 0.0f) cas_add_f32(&r[j], -eta * g[j]);
    cas_add_f32(&r[dim], mean_square(g, dim));
    break;
  }
  case AU_OPTIM_ADAGRAD:
    for (uint32_t j = 0; j < dim; j++) {
      if (g[j] == 0.0f) continue;
      const float G = cas_add_f32(&r[dim + j], g[j] * g[j]);
      cas_add_f32(&r[j], -t->lr * g[j] / sqrtf(G));
    }
    break;
  default:
    break;
  }
}

/* Hogwild: the inline loops of au_view_update, called (relaxed atomics under TSan). The
 * plain loops vectorize (kernel.c is built with -fno-math-errno, so sqrtf does too) and
 * give the same values as the scalar ones, to the bit: only elementwise IEEE operations.
 * Id tables apply every push this way, under the bucket's lock (ids.c). */
static void optim_hogwild(const au_table_t *t, _Atomic uint32_t *ra, const float *restrict g)
{
  const uint32_t dim = t->dim;
#ifndef AU__TSAN
  float *restrict r = (float *)(void *)ra;
  const float lr = t->lr;
  switch (t->optim) {
  case AU_OPTIM_SGD:
    for (uint32_t j = 0; j < dim; j++) r[j] -= lr * g[j];
    return;
  case AU_OPTIM_ADAGRAD_ROW: {
    const float eta = lr / sqrtf(r[dim]);
    const float ms = mean_square(g, dim);
    for (uint32_t j = 0; j < dim; j++) r[j] -= eta * g[j];
    r[dim] += ms;
    return;
  }
  case AU_OPTIM_ADAGRAD: {
    float *restrict acc = r + dim; /* (disjoint from r[0, dim): both restrict, so it vectorizes) */
    for (uint32_t j = 0; j < dim; j++) {
      const float G = acc[j] + g[j] * g[j];
      acc[j] = G;
      r[j] -= lr * g[j] / sqrtf(G);
    }
    return;
  }
  default:
    return;
  }
#else
  _Atomic uint32_t *r = ra;
  switch (t->optim) {
  case AU_OPTIM_SGD:
    for (uint32_t j = 0; j < dim; j++) store_f32(&r[j], load_f32(&r[j]) - t->lr * g[j]);
    break;
  case AU_OPTIM_ADAGRAD_ROW: {
    const float eta = t->lr / sqrtf(load_f32(&r[dim]));
    for (uint32_t j = 0; j < dim; j++) store_f32(&r[j], load_f32(&r[j]) - eta * g[j]);
    store_f32(&r[dim], load_f32(&r[dim]) + mean_square(g, dim));
    break;
  }
  case AU_OPTIM_ADAGRAD:
    for (uint32_t j = 0; j < dim; j++) {
      const float G = load_f32(&r[dim + j]) + g[j] * g[j];
      store_f32(&r[dim + j], G);
      store_f32(&r[j], load_f32(&r[j]) - t->lr * g[j] / sqrtf(G));
    }
    break;
  default:
    break;
  }
#endif
}

void table_apply(const au_table_t *t, void *row, const void *update)
{
  if (t->optim == AU_OPTIM_NONE)
    t->kernel(row, update, t->dim, t->kernel_arg);
  else if (t->hogwild)
    optim_hogwild(t, row, update);
  else
    optim_exact(t, row, update);
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
