/* sampler.h — the topic sampler of augur-lda: AliasLDA (Li, Ahmed, Ravi & Smola, KDD
 * 2014), which splits the collapsed Gibbs conditional into SparseLDA's buckets and draws
 * the dense ones from alias tables, correcting with Metropolis-Hastings:
 *
 *   p(k) ∝ (n_dk + alpha) (n_wk + beta) / (n_k + V beta)       counts without the token
 *
 *   proposal q(k) = n_dk (n_wk + beta) inv_k      document bucket: exact, over the K_d
 *                                                 topics present in the document
 *                 + alpha n'_wk inv'_k            word bucket: alias table of a snapshot
 *                                                 n' of the word's nonzero counts
 *                 + alpha beta inv''_k            smoothing bucket: alias table over all K
 *   with inv_k = 1 / (n_k + V beta), primes marking snapshots.
 *
 * With fresh snapshots q = p and every proposal is accepted; stale ones only lower the
 * acceptance rate, never the exactness: the MH test evaluates q exactly, looking the
 * snapshot up. A draw costs O(K_d): it does not grow with K once documents hold
 * fewer topics than K. Per visit of a word there is one O(K) read of its row, 16 counts
 * at a time, and writes at its nonzero counts only (lda_word_build_sparse: the factors and
 * the table; a rebuild after K draws is a dense pass), reused for all of the word's draws.
 * Counts read from shared rows may be transiently stale or negative; they are clamped at
 * 0 here and never written.
 */
#ifndef AUGUR_DEMOS_LDA_SAMPLER_H
#define AUGUR_DEMOS_LDA_SAMPLER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <augur.h> /* AU__TSAN */

#include "rng.h"

#define LDA_MAX_TOPICS 65535 /* topics are uint16_t everywhere */

/* A count in a row that other threads may be updating (through the table's atomic
 * kernel): a relaxed atomic load, because a plain load racing with them would be a data
 * race in C11; the value may be a little stale, which the sampler tolerates. */
static inline int32_t lda_count(const int32_t *row, uint32_t k)
{
  return atomic_load_explicit((_Atomic int32_t *)&row[k], memory_order_relaxed);
}

/* n zeroed items of size bytes, 64-byte aligned, on whole cache lines of their own (free()
 * frees them): what a worker writes at every token, its shard and scratch, shares no line
 * with another worker's (calloc put the end of one worker's array and the start of the
 * next one's on one line); the documents' blocks start on a line. */
static inline void *lda_lines(size_t n, size_t size)
{
  if (size && n > (SIZE_MAX - 63) / size) return NULL; /* (as calloc would) */
  const size_t want = n * size, bytes = want ? (want + 63) & ~(size_t)63 : 64; /* none: a line */
  void *p = aligned_alloc(64, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

/* ---- alias tables ---------------------------------------------------------------------- */

/* One bin of an alias table: topic with probability prob, else alias. */
typedef struct lda_bin {
  float prob;
  uint16_t topic, alias;
} lda_bin_t;

static inline uint32_t lda_alias_draw(const lda_bin_t *bins, uint32_t n, lda_rng_t *r)
{
  uint64_t y = (lda_rng_next(r) >> 32) * n;
  const lda_bin_t *b = &bins[y >> 32];
  return (float)(uint32_t)y * (1.0f / 4294967296.0f) < b->prob ? b->topic : b->alias;
}

/* An alias table over some topics, with the weights it was built from: weight[i] of
 * topic key[i], keys ascending (word tables only; NULL for the smoothing table). */
typedef struct lda_alias {
  lda_bin_t *bins;
  uint16_t *key;
  float *weight;
  uint32_t n, cap; /* topics, room */
  double mass;     /* total weight */
  uint32_t stamp;  /* the caller's mark of when it was built (0: never) */
  uint32_t draws;  /* draws since the build */
} lda_alias_t;

/* The weight of topic k in a word table: binary search, O(log n) (draws read the dense
 * weights lda_word_build writes instead; tests and LDA_CHECK_FACTORS use this). */
static inline double lda_alias_weight(const lda_alias_t *a, uint32_t k)
{
  uint32_t lo = 0, hi = a->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (a->key[mid] < k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < a->n && a->key[lo] == k ? (double)a->weight[lo] : 0.0;
}

/* Work space for building alias tables over K topics (no allocation per build). */
typedef struct lda_build_scratch {
  uint16_t *topic;
  double *w;
  uint32_t *small, *large;
} lda_build_scratch_t;

int lda_build_scratch_init(lda_build_scratch_t *s, uint32_t K);
void lda_build_scratch_free(lda_build_scratch_t *s);
void lda_alias_free(lda_alias_t *a);

/* The word bucket of a word, in one pass over its row: with n_k = row[k] + delta[k]
 * clamped at 0 (delta may be NULL), writes wq[k] = alpha n_k inv[k] for every k
 * (0 where n_k is 0: the word table's weights, dense, so that the MH test reads q(k) with
 * one load) and, when f is not NULL, the word's factors f[k] = lda_base(n_k, beta, inv[k]);
 * then builds a over the positive wq, with exactly those weights. The arithmetic is
 * vectorized with the widest instructions the CPU has (chosen at run time). 0 or -1 (out
 * of memory: a is left empty, mass 0). Other threads may be adding to row meanwhile:
 * outside ThreadSanitizer builds the row is read with plain loads, so that the pass
 * vectorizes (as augur's Hogwild kernel, api/augur.h; a value read is at worst a little
 * stale), and with relaxed atomic loads under it. */
int lda_word_build(lda_alias_t *a, float *f, float *wq, const int32_t *row, const int32_t *delta,
                   const float *inv, float alpha, float beta, uint32_t K, lda_build_scratch_t *s);
/* lda_word_build without a delta, in O(nonzero counts) writes: f and wq must hold
 * beta inv[k] and 0 for every topic (the state between words, lda.c); the pass finds the
 * row's nonzero counts 16 at a time and writes f, wq and the table at the positive ones
 * only, the values lda_word_build writes there. The caller puts them back (the table's
 * keys) when the word is done. 0 or -1 (out of memory: f and wq as they were). */
int lda_word_build_sparse(lda_alias_t *a, float *f, float *wq, const int32_t *row, const float *inv,
                          float alpha, float beta, uint32_t K, lda_build_scratch_t *s);
/* The smoothing bucket: weights alpha beta inv[k] over all K topics. 0 or -1. */
int lda_alias_build_smooth(lda_alias_t *a, const float *inv, double alpha, double beta, uint32_t K,
                           lda_build_scratch_t *s);

/* ---- documents ------------------------------------------------------------------------- */

/* A document's topics present, unordered: its sparse n_dk, in groups of 8 entries (the 8
 * topics, then their 8 counts), so that the entries of a document with up to 8 topics
 * share one cache line with its header. Entry i is g[i / 8] lane i % 8, for i < n; the
 * lanes from n up to the next multiple of 8 are padding (topic 0, count 0), so that a
 * search compares whole groups and the document bucket sums them as zero. A document
 * lives in a block of LDA_DOC_BYTES(room) bytes, 64-byte aligned. */
typedef struct lda_group {
  uint16_t topic[8];
  float count[8]; /* whole numbers, exact in a float up to 2^24 tokens per document */
} lda_group_t;

typedef struct lda_doc {
  uint32_t n;      /* topics present */
  uint32_t len;    /* tokens */
  uint32_t room;   /* entries there is room for: a multiple of 8, at least min(len, K) */
  uint32_t unused; /* (the groups start 16 bytes in) */
  lda_group_t g[];
} lda_doc_t;

#define LDA_DOC_ROOM(len, K) (((uint32_t)((len) < (K) ? (len) : (K)) + 7u) & ~7u)
#define LDA_DOC_BYTES(room)                                                                        \
  ((sizeof(lda_doc_t) + (room) / 8 * sizeof(lda_group_t) + 63) & ~(size_t)63)

static inline uint32_t lda_doc_topic(const lda_doc_t *d, uint32_t i)
{
  return d->g[i >> 3].topic[i & 7];
}

static inline float lda_doc_count(const lda_doc_t *d, uint32_t i)
{
  return d->g[i >> 3].count[i & 7];
}

/* An empty document of len tokens in a zeroed block with room for room entries. */
static inline void lda_doc_init(lda_doc_t *d, uint32_t len, uint32_t room)
{
  d->n = 0;
  d->len = len;
  d->room = room;
}

/* The index of topic k, or d->n if it is absent. Eight topics per compare with SSE2. */
static inline uint32_t lda_doc_find(const lda_doc_t *d, uint32_t k)
{
  const uint32_t n = d->n;
#ifdef __SSE2__
  const __m128i key = _mm_set1_epi16((short)k);
  for (uint32_t g = 0; 8 * g < n; g++) {
    __m128i v = _mm_loadu_si128((const __m128i *)d->g[g].topic);
    unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(v, key));
    if (m) {
      uint32_t at = 8 * g + (uint32_t)__builtin_ctz(m) / 2;
      return at < n ? at : n; /* a match in the padding is no match */
    }
  }
  return n;
#else
  uint32_t i = 0;
  while (i < n && lda_doc_topic(d, i) != k) i++;
  return i;
#endif
}

/* One token less at entry i; an entry that reaches 0 is replaced by the last one. */
static inline void lda_doc_remove_at(lda_doc_t *d, uint32_t i)
{
  lda_group_t *g = &d->g[i >> 3];
  if (--g->count[i & 7] == 0.0f) {
    uint32_t last = --d->n;
    lda_group_t *l = &d->g[last >> 3];
    g->topic[i & 7] = l->topic[last & 7];
    g->count[i & 7] = l->count[last & 7];
    l->topic[last & 7] = 0;
    l->count[last & 7] = 0;
  }
}

/* One token more of topic k, whose entry is i (d->n: absent). */
static inline void lda_doc_add_at(lda_doc_t *d, uint32_t k, uint32_t i)
{
  if (i == d->n) {
    d->g[i >> 3].topic[i & 7] = (uint16_t)k;
    d->n++;
  }
  d->g[i >> 3].count[i & 7]++;
}

/* One token more of topic k. */
static inline void lda_doc_add(lda_doc_t *d, uint32_t k)
{
  lda_doc_add_at(d, k, lda_doc_find(d, k));
}

/* ---- one token ------------------------------------------------------------------------- */

/* The model's constants. */
typedef struct lda_params {
  uint32_t K;
  double alpha, beta, vbeta, kalpha; /* vbeta = V beta, kalpha = K alpha */
} lda_params_t;

/* What a worker's draws share: the smoothing table and the inv[k] = 1 / (n_k + V beta)
 * it was built from; room for the document bucket's weights
 * (K + 8) and their sums by groups of 8 (K / 8 + 2). Single precision: the weights only
 * need to be consistent, and floats halve what the inner loop reads. */
typedef struct lda_draw_ctx {
  lda_params_t p;
  const lda_alias_t *smooth;
  const float *smooth_inv;
  float *w, *block;
  int mh; /* MH steps per token */
} lda_draw_ctx_t;

/* (n_wk + beta) inv_k: the word and totals factors of topic k, from the word's count n
 * (clamped at 0) and inv_k. */
static inline float lda_base(int32_t n, float beta, float inv_k)
{
  const float c = (float)n; /* clamped as a float: a select the compiler vectorizes */
  return ((c > 0.0f ? c : 0.0f) + beta) * inv_k;
}

/* The lane of 8 weights w8 (the first valid of them positive) where the running sum
 * first exceeds u: the number of prefix sums at most u (they rise, so those lanes come
 * first), at most valid - 1. Without branches: which lane it is, is random. */
static inline uint32_t lda_lane_pick(const float *w8, float u, uint32_t valid)
{
#ifdef __SSE2__
  __m128 a = _mm_loadu_ps(w8), b = _mm_loadu_ps(w8 + 4);
  a = _mm_add_ps(a, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(a), 4)));
  b = _mm_add_ps(b, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(b), 4)));
  a = _mm_add_ps(a, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(a), 8)));
  b = _mm_add_ps(b, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(b), 8)));
  b = _mm_add_ps(b, _mm_shuffle_ps(a, a, _MM_SHUFFLE(3, 3, 3, 3)));
  const __m128 uu = _mm_set1_ps(u);
  unsigned m = (unsigned)_mm_movemask_ps(_mm_cmple_ps(a, uu)) |
               (unsigned)_mm_movemask_ps(_mm_cmple_ps(b, uu)) << 4;
  uint32_t i = (uint32_t)__builtin_ctz(~m); /* m is a run of low bits */
#else
  uint32_t i = 0;
  float sum = 0;
  for (uint32_t l = 0; l < 8; l++) i += (sum += w8[l]) <= u;
#endif
  return i < valid ? i : valid - 1;
}

/* Redraws the topic of a token of a word in a document: f[k] = lda_base(n_wk, beta,
 * inv_k) for every topic with the word's and totals' counts without the token (the
 * caller keeps f current as counts change), and doc's counts with it: the token's topic
 * s is present in doc, and the sampler takes the token out of n_ds itself, so that a
 * token that keeps its topic costs no change to its document. word is the word's table
 * and wq its weights over all K topics (lda_word_build). Runs c->mh Metropolis-Hastings
 * steps from s with the proposal of the file comment; returns the topic, sets *at_s to
 * s's entry in doc and *at to the new topic's (doc->n if absent). */
static inline uint32_t lda_sample(const lda_draw_ctx_t *c, const float *f, const lda_doc_t *doc,
                                  lda_alias_t *word, const float *wq, uint32_t s,
                                  uint32_t *at_s_out, uint32_t *at, lda_rng_t *r)
{
  const float alpha = (float)c->p.alpha, ab = alpha * (float)c->p.beta;
  const float *sinv = c->smooth_inv;
  float *w = c->w, *block = c->block;
  float dsum = 0;
  const uint32_t n = doc->n, nb = (n + 7) / 8;
  uint32_t at_s = UINT32_MAX;
  /* the document bucket, by groups of 8 whose sums are independent chains (padding
   * entries weigh 0), and s's entry found on the way */
#ifdef __SSE2__
  const __m128i key = _mm_set1_epi16((short)s);
#endif
  for (uint32_t b = 0; b < nb; b++) {
    const lda_group_t *g = &doc->g[b];
#ifdef __SSE2__
    const uint16_t *t = g->topic;
    unsigned m = (unsigned)_mm_movemask_epi8(
        _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)g->topic), key));
    uint32_t here = 8 * b + (uint32_t)__builtin_ctz(m | 0x10000u) / 2;
    here = m ? here : UINT32_MAX; /* the first match: padding (topic 0) only follows */
    at_s = here < at_s ? here : at_s;
    __m128 x0 = _mm_mul_ps(_mm_loadu_ps(g->count), _mm_setr_ps(f[t[0]], f[t[1]], f[t[2]], f[t[3]]));
    __m128 x1 =
        _mm_mul_ps(_mm_loadu_ps(g->count + 4), _mm_setr_ps(f[t[4]], f[t[5]], f[t[6]], f[t[7]]));
    _mm_storeu_ps(&w[8 * b], x0);
    _mm_storeu_ps(&w[8 * b + 4], x1);
    __m128 sum = _mm_add_ps(x0, x1);
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_shuffle_ps(sum, sum, 1));
    const float sb = _mm_cvtss_f32(sum);
#else
    float sb = 0;
    for (uint32_t l = 0; l < 8; l++) {
      float x = g->count[l] * f[g->topic[l]];
      w[8 * b + l] = x;
      sb += x;
      if (g->topic[l] == s && 8 * b + l < at_s) at_s = 8 * b + l;
    }
#endif
    block[b] = sb;
    dsum += sb;
  }
  *at_s_out = at_s;
  /* the token out of its own entry: one count less of s */
  float base = f[s];
  w[at_s] -= base; /* exactly 0 when its count was 1: that lane cannot be drawn */
  block[at_s / 8] -= base;
  dsum -= base;
  const float wmass = (float)word->mass, total = dsum + wmass + (float)c->smooth->mass;
  /* p(k) = (n_dk + alpha) base_k and q(k) = n_dk base_k + word(k) + smoothing(k) */
  float cnt = lda_doc_count(doc, at_s) - 1.0f;
  uint32_t here = at_s;
  float ps = (cnt + alpha) * base;
  float qs = cnt * base + wq[s] + ab * sinv[s];
  for (int step = 0; step < c->mh; step++) {
    float u = lda_rng_float(r) * total;
    uint32_t k, i;
    if (u < dsum) {
      uint32_t b = 0;
      while (b + 1 < nb && u >= block[b]) u -= block[b++];
      i = 8 * b + lda_lane_pick(&w[8 * b], u, (8 * b + 8 < n ? 8 : n - 8 * b));
      k = lda_doc_topic(doc, i);
    } else {
      if (u - dsum < wmass && word->n) {
        word->draws++;
        k = lda_alias_draw(word->bins, word->n, r);
      } else {
        k = lda_alias_draw(c->smooth->bins, c->smooth->n, r);
      }
      i = lda_doc_find(doc, k);
    }
    if (k == s) continue;
    cnt = i < n ? lda_doc_count(doc, i) : 0.0f; /* k is not s: no token to take out */
    base = f[k];
    float pk = (cnt + alpha) * base;
    float qk = cnt * base + wq[k] + ab * sinv[k];
    /* accept with min(1, p(k) q(s) / (p(s) q(k))) */
    if (lda_rng_float(r) * ps * qk < pk * qs) s = k, ps = pk, qs = qk, here = i;
  }
  *at = here;
  return s;
}

/* ---- log-likelihood -------------------------------------------------------------------- */

/* lgamma(c + shift) - lgamma(shift), tabulated for small counts c. */
typedef struct lda_lgamma {
  double *v;
  uint32_t n;
  double shift, base;
} lda_lgamma_t;

int lda_lgamma_init(lda_lgamma_t *t, double shift, uint32_t n);
void lda_lgamma_free(lda_lgamma_t *t);
double lda_lgamma_delta(const lda_lgamma_t *t, uint64_t c);

/* Griffiths & Steyvers' log p(w, z) in parts that can be summed over any partition of
 * the rows and documents:
 *   words:  sum over the word-topic counts c of lgamma(c + beta) - lgamma(beta)
 *   totals: K lgamma(V beta) - sum_k lgamma(n_k + V beta)
 *   docs:   sum over documents d of
 *           sum_k [lgamma(n_dk + alpha) - lgamma(alpha)] + lgamma(K alpha) - lgamma(n_d + K alpha)
 * Negative counts (which a correct run never has) are counted in *negative, taken as 0. */
double lda_llh_counts(const int32_t *c, size_t n, const lda_lgamma_t *lgb, uint64_t *negative);
double lda_llh_totals(const int32_t *nk, uint32_t K, double vbeta, uint64_t *negative);
/* One document with topics z[0..len); scratch: K zeroed ints, left zeroed. */
double lda_llh_doc(const uint16_t *z, uint32_t len, double kalpha, const lda_lgamma_t *lga,
                   int32_t *scratch);
/* The same from a document's entries. */
double lda_llh_doc_entries(const lda_doc_t *d, double kalpha, const lda_lgamma_t *lga);

#endif
