/* generate.c — see data.h: the synthetic low-rank generator, which samples rows and
 * columns from Vose alias tables (O(1) per rating), and the seeded split and shuffle.
 * Everything random is a pure function of its seed. */
#include "data.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PRNG: splitmix64 to seed xoshiro256** ------------------------------------------ */

typedef mf_rng_t rng_t;

static uint64_t splitmix64(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t mf_hash64(uint64_t x)
{
  return splitmix64(&x);
}

void mf_rng_seed(mf_rng_t *r, uint64_t seed)
{
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
  r->has_spare = 0;
}

static inline uint64_t rotl(uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(rng_t *r)
{
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
  s[2] ^= t, s[3] = rotl(s[3], 45);
  return out;
}

uint64_t mf_rng_next(mf_rng_t *r)
{
  return rng_next(r);
}

/* Uniform in [0, n). Multiply-shift for n < 2^32 (bias below n / 2^32, irrelevant
 * here); modulo beyond. */
static inline uint64_t rng_below(rng_t *r, uint64_t n)
{
  uint64_t x = rng_next(r);
  if (n <= UINT32_MAX) return ((x >> 32) * n) >> 32;
  return x % n;
}

static inline double rng_uniform(rng_t *r)
{
  return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Standard normal by Box-Muller; each pair of uniforms gives two normals. */
double mf_rng_normal(mf_rng_t *r)
{
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r); /* u1 in (0, 1]: log is finite */
  double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
  r->spare = rad * sin(th);
  r->has_spare = 1;
  return rad * cos(th);
}

/* ---- generator ---------------------------------------------------------------------- */

void mf_gen_opts_default(mf_gen_opts_t *o)
{
  *o = (mf_gen_opts_t){.rows = 20000,
                       .cols = 5000,
                       .nnz = 5000000,
                       .rank = 8,
                       .sigma = 0.1,
                       .row_skew = 0.8,
                       .col_skew = 0.8,
                       .min_per = MF_GEN_MIN_PER_AUTO,
                       .seed = 1};
}

enum { MAX_RANK = 4096 };

int mf_gen_opts_check(const mf_gen_opts_t *o, char *err, size_t errlen)
{
  const char *msg = NULL;
  if (o->rows == 0 || o->cols == 0)
    msg = "rows and cols must be at least 1";
  else if (o->rank == 0 || o->rank > MAX_RANK)
    msg = "rank must be in 1..4096";
  else if (o->nnz == 0)
    msg = "nnz must be at least 1";
  else if (!isfinite(o->sigma) || o->sigma < 0)
    msg = "sigma must be a finite number >= 0";
  else if (!isfinite(o->row_skew) || o->row_skew < 0 || !isfinite(o->col_skew) || o->col_skew < 0)
    msg = "row and column skew must be finite numbers >= 0";
  else if (o->min_per != 0 && o->nnz < (size_t)o->rows + o->cols)
    msg = "nnz must be at least rows + cols so that every row and column gets a rating "
          "(or set min_per to 0)";
  if (!msg) return 0;
  mf__set_err(err, errlen, "%s (rows %u, cols %u, nnz %zu, rank %u)", msg, o->rows, o->cols, o->nnz,
              o->rank);
  return MF_EINVAL;
}

/* Vose alias table over 0..n-1: one uniform index, one 32-bit coin, no search. */
typedef struct {
  uint32_t *thresh; /* keep index k when the coin is below thresh[k] */
  uint32_t *alias;  /* else take alias[k] */
  uint32_t n;
} alias_t;

static void alias_free(alias_t *a)
{
  free(a->thresh);
  free(a->alias);
}

/* Popularity table for n ids: a random permutation gives each id a popularity rank k,
 * and the id is drawn with weight 1/(k+1)^skew. */
static int alias_build_zipf(alias_t *a, uint32_t n, double skew, rng_t *rng)
{
  double *prob = malloc((size_t)n * sizeof(*prob));
  uint32_t *work = malloc((size_t)n * sizeof(*work));
  a->thresh = malloc((size_t)n * sizeof(*a->thresh));
  a->alias = malloc((size_t)n * sizeof(*a->alias));
  a->n = n;
  if (!prob || !work || !a->thresh || !a->alias) {
    free(prob);
    free(work);
    alias_free(a);
    return MF_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) work[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) {
    uint32_t j = (uint32_t)rng_below(rng, (uint64_t)i + 1), t = work[i];
    work[i] = work[j], work[j] = t;
  }
  double sum = 0;
  for (uint32_t k = 0; k < n; k++) sum += prob[work[k]] = pow((double)k + 1, -skew);
  for (uint32_t i = 0; i < n; i++) prob[i] *= n / sum;
  /* Vose: small ids (prob < 1) stack from the front of work, large from the back. */
  size_t ns = 0, nl = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (prob[i] < 1.0)
      work[ns++] = i;
    else
      work[n - 1 - nl++] = i;
  }
  while (ns && nl) {
    uint32_t s = work[--ns], l = work[n - nl];
    nl--;
    a->thresh[s] = prob[s] > 0 ? (uint32_t)(prob[s] * 4294967296.0) : 0;
    a->alias[s] = l;
    prob[l] -= 1.0 - prob[s];
    if (prob[l] < 1.0)
      work[ns++] = l;
    else
      work[n - 1 - nl++] = l;
  }
  /* What remains has probability 1 up to rounding: always keep it. */
  while (ns + nl) {
    uint32_t i = ns ? work[--ns] : work[n - nl--];
    a->thresh[i] = UINT32_MAX;
    a->alias[i] = i;
  }
  free(prob);
  free(work);
  return 0;
}

static inline uint32_t alias_draw(const alias_t *a, rng_t *rng)
{
  uint64_t x = rng_next(rng);
  uint32_t k = (uint32_t)(((x >> 32) * a->n) >> 32);
  return (uint32_t)x < a->thresh[k] ? k : a->alias[k];
}

static void shuffle(mf_rating_t *a, size_t n, rng_t *rng)
{
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)rng_below(rng, i);
    mf_rating_t t = a[i - 1];
    a[i - 1] = a[j], a[j] = t;
  }
}

typedef struct {
  const mf_gen_opts_t *o;
  const float *p, *q;
  rng_t *rng;
  mf_ratings_t *out;
} emitter_t;

static inline void emit(emitter_t *g, uint32_t r, uint32_t c)
{
  uint32_t k = g->o->rank;
  const float *pr = g->p + (size_t)r * k, *qc = g->q + (size_t)c * k;
  double dot = 0;
  for (uint32_t i = 0; i < k; i++) dot += (double)pr[i] * qc[i];
  double v = dot + g->o->sigma * mf_rng_normal(g->rng);
  g->out->r[g->out->n++] = (mf_rating_t){r, c, (float)v};
}

int mf_generate(const mf_gen_opts_t *o, mf_ratings_t *out, uint32_t *nrows, uint32_t *ncols)
{
  int rc = mf_gen_opts_check(o, NULL, 0);
  if (rc) return rc;
  if (o->nnz > SIZE_MAX - out->n || mf_ratings_reserve(out, out->n + o->nnz)) return MF_ENOMEM;
  rng_t rng;
  mf_rng_seed(&rng, o->seed);
  size_t k = o->rank;
  float *p = malloc((size_t)o->rows * k * sizeof(*p));
  float *q = malloc((size_t)o->cols * k * sizeof(*q));
  alias_t ar = {0}, ac = {0};
  rc = MF_ENOMEM;
  if (!p || !q) goto done;
  /* Entries with variance 1/sqrt(rank): p·q sums rank products of variance 1/rank. */
  double sd = pow((double)k, -0.25);
  for (size_t i = 0; i < (size_t)o->rows * k; i++) p[i] = (float)(sd * mf_rng_normal(&rng));
  for (size_t i = 0; i < (size_t)o->cols * k; i++) q[i] = (float)(sd * mf_rng_normal(&rng));
  if (alias_build_zipf(&ar, o->rows, o->row_skew, &rng)) goto done;
  if (alias_build_zipf(&ac, o->cols, o->col_skew, &rng)) goto done;

  size_t per_sum = (size_t)o->rows + o->cols;
  size_t min_per = o->min_per == MF_GEN_MIN_PER_AUTO ? 2 * k : o->min_per;
  if (min_per > o->nnz / per_sum) min_per = o->nnz / per_sum;
  size_t base = out->n, end = base + o->nnz;
  emitter_t g = {o, p, q, &rng, out};
  /* Floor first, so that rare rows and columns still have enough ratings to learn. */
  for (uint32_t r = 0; r < o->rows; r++)
    for (size_t t = 0; t < min_per; t++) emit(&g, r, alias_draw(&ac, &rng));
  for (uint32_t c = 0; c < o->cols; c++)
    for (size_t t = 0; t < min_per; t++) emit(&g, alias_draw(&ar, &rng), c);
  while (out->n < end) emit(&g, alias_draw(&ar, &rng), alias_draw(&ac, &rng));
  shuffle(out->r + base, o->nnz, &rng); /* the floor came out sorted by row, then col */
  if (nrows) *nrows = o->rows;
  if (ncols) *ncols = o->cols;
  rc = 0;
done:
  free(p);
  free(q);
  alias_free(&ar);
  alias_free(&ac);
  return rc;
}

/* ---- split and shuffle -------------------------------------------------------------- */

/* The split of mf_split; with `inplace` (== all) train is all itself, compacted. */
static int split(const mf_ratings_t *all, double test_ratio, uint64_t seed, mf_ratings_t *train,
                 mf_ratings_t *test, mf_ratings_t *inplace)
{
  size_t n = all->n;
  if (!(test_ratio > 0)) test_ratio = 0; /* also NaN */
  if (test_ratio > 1) test_ratio = 1;
  size_t want = (size_t)((double)n * test_ratio + 0.5);
  if (want > n) want = n;
  uint32_t maxr = 0, maxc = 0;
  for (size_t i = 0; i < n; i++) {
    if (all->r[i].row > maxr) maxr = all->r[i].row;
    if (all->r[i].col > maxc) maxc = all->r[i].col;
  }
  /* Ratings per row and column still in train; saturating, so never falsely 1. */
  uint32_t *rc = calloc((size_t)maxr + 1, sizeof(*rc));
  uint32_t *cc = calloc((size_t)maxc + 1, sizeof(*cc));
  if (!rc || !cc || (!inplace && mf_ratings_reserve(train, train->n + (n - want))) ||
      mf_ratings_reserve(test, test->n + want)) {
    free(rc);
    free(cc);
    return MF_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    const mf_rating_t *x = &all->r[i];
    if (rc[x->row] != UINT32_MAX) rc[x->row]++;
    if (cc[x->col] != UINT32_MAX) cc[x->col]++;
  }
  rng_t rng;
  mf_rng_seed(&rng, seed);
  int err = 0;
  size_t kept = 0;
  /* Selection sampling (Knuth's algorithm S): pick each rating with probability
   * still-wanted / still-remaining, which yields exactly `want` in one ordered pass. */
  for (size_t i = 0, need = want; i < n && !err; i++) {
    const mf_rating_t x = all->r[i];
    int pick = need && rng_below(&rng, n - i) < need;
    if (pick && rc[x.row] > 1 && cc[x.col] > 1) {
      rc[x.row]--, cc[x.col]--, need--;
      err = mf_ratings_push(test, x.row, x.col, x.value);
    } else if (inplace) {
      inplace->r[kept++] = x; /* kept <= i: never ahead of the reading */
    } else {
      err = mf_ratings_push(train, x.row, x.col, x.value);
    }
  }
  free(rc);
  free(cc);
  if (inplace && !err) {
    inplace->n = kept;
    mf_rating_t *r = realloc(inplace->r, (kept ? kept : 1) * sizeof(mf_rating_t));
    if (r) inplace->r = r, inplace->cap = kept ? kept : 1;
  }
  return err;
}

int mf_split(const mf_ratings_t *all, double test_ratio, uint64_t seed, mf_ratings_t *train,
             mf_ratings_t *test)
{
  return split(all, test_ratio, seed, train, test, NULL);
}

int mf_split_inplace(mf_ratings_t *all, double test_ratio, uint64_t seed, mf_ratings_t *test)
{
  return split(all, test_ratio, seed, NULL, test, all);
}

void mf_shuffle(mf_ratings_t *r, uint64_t seed)
{
  rng_t rng;
  mf_rng_seed(&rng, seed);
  shuffle(r->r, r->n, &rng);
}
