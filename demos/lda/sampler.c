/* sampler.c — alias tables for the word and smoothing buckets, and the log-likelihood of
 * an LDA state (see sampler.h). The draw itself is inline in sampler.h: it runs once per
 * token.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int lda_build_scratch_init(lda_build_scratch_t *s, uint32_t K)
{
  s->topic = lda_lines(K, sizeof(*s->topic));
  s->w = lda_lines(K, sizeof(*s->w));
  s->small = lda_lines(K, sizeof(*s->small));
  s->large = lda_lines(K, sizeof(*s->large));
  if (s->topic && s->w && s->small && s->large) return 0;
  lda_build_scratch_free(s);
  return -1;
}

void lda_build_scratch_free(lda_build_scratch_t *s)
{
  free(s->topic);
  free(s->w);
  free(s->small);
  free(s->large);
  memset(s, 0, sizeof(*s));
}

void lda_alias_free(lda_alias_t *a)
{
  free(a->bins);
  free(a->key);
  free(a->weight);
  memset(a, 0, sizeof(*a));
}

/* Vose's method over the n weights s->w[] of topics s->topic[] (sum mass > 0): weights
 * scaled to mean 1; a bin below 1 is topped up from one above, which then holds less.
 * With keep, the weights are kept too (key, weight). */
static int build(lda_alias_t *a, uint32_t n, double mass, uint32_t K, lda_build_scratch_t *s,
                 int keep)
{
  a->draws = 0;
  a->n = 0;
  a->mass = 0;
  if (n == 0 || !(mass > 0)) return 0;
  if (n > a->cap) {
    uint32_t cap = a->cap ? a->cap : 4;
    while (cap < n) cap *= 2;
    if (cap > K) cap = K;
    lda_bin_t *b = realloc(a->bins, (size_t)cap * sizeof(*b));
    if (b) a->bins = b;
    uint16_t *key = keep ? realloc(a->key, (size_t)cap * sizeof(*key)) : NULL;
    if (key) a->key = key;
    float *weight = keep ? realloc(a->weight, (size_t)cap * sizeof(*weight)) : NULL;
    if (weight) a->weight = weight;
    if (!b || (keep && (!key || !weight))) return -1;
    a->cap = cap;
  }
  if (keep) {
    mass = 0;
    for (uint32_t i = 0; i < n; i++) {
      a->key[i] = s->topic[i];
      a->weight[i] = (float)s->w[i];
      mass += s->w[i] = a->weight[i]; /* the weights as kept, so that q is exact */
    }
  }
  uint32_t ns = 0, nl = 0;
  const double scale = (double)n / mass;
  for (uint32_t i = 0; i < n; i++) {
    s->w[i] *= scale;
    if (s->w[i] < 1)
      s->small[ns++] = i;
    else
      s->large[nl++] = i;
  }
  lda_bin_t *b = a->bins;
  while (ns && nl) {
    uint32_t sm = s->small[--ns], l = s->large[nl - 1];
    b[sm] = (lda_bin_t){(float)s->w[sm], s->topic[sm], s->topic[l]};
    s->w[l] -= 1 - s->w[sm];
    if (s->w[l] < 1) {
      nl--;
      s->small[ns++] = l;
    }
  }
  /* what is left is 1 up to rounding */
  while (nl) {
    uint32_t l = s->large[--nl];
    b[l] = (lda_bin_t){1.0f, s->topic[l], s->topic[l]};
  }
  while (ns) {
    uint32_t sm = s->small[--ns];
    b[sm] = (lda_bin_t){1.0f, s->topic[sm], s->topic[sm]};
  }
  a->n = n;
  a->mass = mass;
  return 0;
}

/* The vector part of lda_word_build: wq and f over all K topics, in one pass that the
 * compiler vectorizes, cloned for AVX-512 and AVX2 (the loader picks the widest the CPU
 * has) with a baseline SSE2 default. ThreadSanitizer builds read the row with relaxed
 * atomic loads, one at a time. */
#if defined(__x86_64__) && !defined(AU__TSAN) && !defined(__clang_analyzer__)
#define WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WIDEST
#endif

WIDEST static void word_pass(float *restrict f, float *restrict wq, const int32_t *restrict row,
                             const int32_t *restrict delta, const float *restrict inv, float alpha,
                             float beta, uint32_t K)
{
  for (uint32_t k = 0; k < K; k++) {
#ifdef AU__TSAN
    float c = (float)(lda_count(row, k) + (delta ? delta[k] : 0));
#else
    float c = (float)(row[k] + (delta ? delta[k] : 0));
#endif
    c = c > 0.0f ? c : 0.0f;
    wq[k] = alpha * c * inv[k];
    if (f) f[k] = (c + beta) * inv[k];
  }
}

int lda_word_build(lda_alias_t *a, float *f, float *wq, const int32_t *row, const int32_t *delta,
                   const float *inv, float alpha, float beta, uint32_t K, lda_build_scratch_t *s)
{
  word_pass(f, wq, row, delta, inv, alpha, beta, K);
  /* the positive weights, in topic order */
  uint32_t n = 0, k = 0;
  double mass = 0;
#ifdef __SSE2__
  const __m128 zero = _mm_setzero_ps();
  for (; k + 4 <= K; k += 4) {
    unsigned m = (unsigned)_mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(&wq[k]), zero));
    for (; m; m &= m - 1) {
      uint32_t j = k + (uint32_t)__builtin_ctz(m);
      s->topic[n] = (uint16_t)j;
      mass += s->w[n++] = wq[j];
    }
  }
#endif
  for (; k < K; k++)
    if (wq[k] > 0.0f) {
      s->topic[n] = (uint16_t)k;
      mass += s->w[n++] = wq[k];
    }
  return build(a, n, mass, K, s, 1);
}

/* The words of row[0..16) that are not 0, bit i for word i (plain loads outside
 * ThreadSanitizer builds, as word_pass reads the row). */
static unsigned nonzero16(const int32_t *row)
{
#if defined(__SSE2__) && !defined(AU__TSAN)
  const __m128i z = _mm_setzero_si128();
  const __m128i a = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)row), z),
                b = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(row + 4)), z),
                c = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(row + 8)), z),
                d = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(row + 12)), z);
  const __m128i bytes = _mm_packs_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
  return ~(unsigned)_mm_movemask_epi8(bytes) & 0xffffu;
#else
  unsigned m = 0;
  for (unsigned i = 0; i < 16; i++) m |= (unsigned)(lda_count(row, i) != 0) << i;
  return m;
#endif
}

int lda_word_build_sparse(lda_alias_t *a, float *f, float *wq, const int32_t *row, const float *inv,
                          float alpha, float beta, uint32_t K, lda_build_scratch_t *s)
{
  uint32_t n = 0;
  double mass = 0;
  for (uint32_t k = 0; k < K; k += 16) {
    unsigned m = 0;
    if (k + 16 <= K)
      m = nonzero16(row + k);
    else /* the last, short run */
      for (uint32_t j = k; j < K; j++) m |= (unsigned)(lda_count(row, j) != 0) << (j - k);
    for (; m; m &= m - 1) {
      const uint32_t j = k + (uint32_t)__builtin_ctz(m);
      const int32_t c = lda_count(row, j);
      if (c <= 0) continue; /* a stale negative count: as 0 */
      f[j] = ((float)c + beta) * inv[j];
      wq[j] = alpha * (float)c * inv[j];
      s->topic[n] = (uint16_t)j;
      mass += s->w[n++] = wq[j];
    }
  }
  if (build(a, n, mass, K, s, 1) == 0) return 0;
  for (uint32_t i = 0; i < n; i++) { /* as it found them */
    f[s->topic[i]] = beta * inv[s->topic[i]];
    wq[s->topic[i]] = 0;
  }
  return -1;
}

int lda_alias_build_smooth(lda_alias_t *a, const float *inv, double alpha, double beta, uint32_t K,
                           lda_build_scratch_t *s)
{
  double mass = 0;
  for (uint32_t k = 0; k < K; k++) {
    s->topic[k] = (uint16_t)k;
    mass += s->w[k] = (double)((float)alpha * (float)beta * inv[k]);
  }
  return build(a, K, mass, K, s, 0);
}

/* ---- log-likelihood ------------------------------------------------------------------- */

int lda_lgamma_init(lda_lgamma_t *t, double shift, uint32_t n)
{
  t->shift = shift;
  t->base = lgamma(shift);
  t->n = n;
  t->v = malloc((size_t)n * sizeof(double));
  if (!t->v) return -1;
  for (uint32_t c = 0; c < n; c++) t->v[c] = lgamma(c + shift) - t->base;
  return 0;
}

void lda_lgamma_free(lda_lgamma_t *t)
{
  free(t->v);
  t->v = NULL;
}

double lda_lgamma_delta(const lda_lgamma_t *t, uint64_t c)
{
  return c < t->n ? t->v[c] : lgamma((double)c + t->shift) - t->base;
}

double lda_llh_counts(const int32_t *c, size_t n, const lda_lgamma_t *lgb, uint64_t *negative)
{
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (c[i] > 0)
      sum += lda_lgamma_delta(lgb, (uint64_t)c[i]);
    else if (c[i] < 0)
      ++*negative;
  }
  return sum;
}

double lda_llh_totals(const int32_t *nk, uint32_t K, double vbeta, uint64_t *negative)
{
  double sum = K * lgamma(vbeta);
  for (uint32_t k = 0; k < K; k++) {
    if (nk[k] < 0) ++*negative;
    sum -= lgamma((nk[k] > 0 ? nk[k] : 0) + vbeta);
  }
  return sum;
}

double lda_llh_doc(const uint16_t *z, uint32_t len, double kalpha, const lda_lgamma_t *lga,
                   int32_t *scratch)
{
  if (len == 0) return 0;
  for (uint32_t i = 0; i < len; i++) scratch[z[i]]++;
  double sum = lgamma(kalpha) - lgamma(len + kalpha);
  for (uint32_t i = 0; i < len; i++) {
    if (scratch[z[i]] == 0) continue; /* counted already */
    sum += lda_lgamma_delta(lga, (uint64_t)scratch[z[i]]);
    scratch[z[i]] = 0;
  }
  return sum;
}

double lda_llh_doc_entries(const lda_doc_t *d, double kalpha, const lda_lgamma_t *lga)
{
  if (d->len == 0) return 0;
  double sum = lgamma(kalpha) - lgamma(d->len + kalpha);
  for (uint32_t i = 0; i < d->n; i++) sum += lda_lgamma_delta(lga, (uint64_t)lda_doc_count(d, i));
  return sum;
}
