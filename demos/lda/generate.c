/* generate.c — corpora drawn from the LDA generative process with planted topics (see
 * corpus.h). Dirichlet draws are normalized Gamma variates (Marsaglia–Tsang), computed
 * in log space so that shapes far below 1 do not underflow to all-zero topics; words are
 * drawn from each topic through an alias table, in O(1) per token.
 *
 * The invariant: the corpus is a pure function of the options (seed included).
 */
#include "corpus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define MAX_CELLS (1u << 26) /* planted topics x vocabulary */

void lda_gen_opts_default(lda_gen_opts_t *o)
{
  *o = (lda_gen_opts_t){.docs = 10000,
                        .vocab = 10000,
                        .doc_length = 100,
                        .topics = 20,
                        .alpha = 0.1,
                        .beta = 0.01,
                        .zipf = 0,
                        .length_sigma = 0,
                        .seed = 1};
}

/* The longest document the options allow. */
static uint64_t longest_doc(const lda_gen_opts_t *o)
{
  return o->length_sigma > 0 ? 64 * (uint64_t)o->doc_length
                             : (uint64_t)o->doc_length + o->doc_length / 2;
}

int lda_gen_opts_check(const lda_gen_opts_t *o, char *err, size_t errlen)
{
  uint64_t longest = longest_doc(o);
  if (o->docs < 1 || o->docs > 0xfffffffeu)
    lda__set_err(err, errlen, "--docs must be in [1, 4294967294], got %u", o->docs);
  else if (o->vocab < 1 || o->vocab > LDA_MAX_WORDS)
    lda__set_err(err, errlen, "--vocab-size must be in [1, %u], got %u", LDA_MAX_WORDS, o->vocab);
  else if (o->doc_length < 1)
    lda__set_err(err, errlen, "--doc-length must be at least 1");
  else if (o->topics < 1)
    lda__set_err(err, errlen, "--planted-topics must be at least 1");
  else if ((uint64_t)o->topics * o->vocab > MAX_CELLS)
    lda__set_err(err, errlen,
                 "planted topics x vocabulary size must be at most %u, got %u x %u: use fewer "
                 "planted topics or a smaller --vocab-size",
                 MAX_CELLS, o->topics, o->vocab);
  else if ((uint64_t)o->docs * longest > LDA_MAX_TOKENS)
    lda__set_err(err, errlen,
                 "--docs x --doc-length may reach %llu tokens, more than the %u a corpus holds",
                 (unsigned long long)((uint64_t)o->docs * longest), LDA_MAX_TOKENS);
  else if (!(o->alpha > 0) || !isfinite(o->alpha) || !(o->beta > 0) || !isfinite(o->beta))
    lda__set_err(err, errlen, "the Dirichlet parameters must be positive, got alpha %g beta %g",
                 o->alpha, o->beta);
  else if (!(o->zipf >= 0 && o->zipf <= 10))
    lda__set_err(err, errlen, "--zipf must be in [0, 10], got %g", o->zipf);
  else if (!(o->length_sigma >= 0 && o->length_sigma <= 3))
    lda__set_err(err, errlen, "--length-sigma must be in [0, 3], got %g", o->length_sigma);
  else
    return 0;
  return LDA_EINVAL;
}

static double normal(lda_rng_t *r)
{
  double u1 = ((double)(lda_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double u2 = lda_rng_double(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* log of a Gamma(a, 1) variate. For a < 1: Gamma(a) = Gamma(a + 1) * U^(1/a), whose log
 * stays finite where the variate itself would underflow. */
static double log_gamma_variate(lda_rng_t *r, double a)
{
  double boost = 0;
  if (a < 1) {
    double u = ((double)(lda_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    boost = log(u) / a;
    a += 1;
  }
  double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
  for (;;) {
    double x = normal(r), v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = ((double)(lda_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return log(d * v) + boost;
  }
}

/* p[0..n) ~ Dirichlet(a, ..., a). */
static void dirichlet(lda_rng_t *r, double a, double *p, uint32_t n)
{
  double m = -INFINITY, sum = 0;
  for (uint32_t i = 0; i < n; i++) {
    p[i] = log_gamma_variate(r, a);
    if (p[i] > m) m = p[i];
  }
  for (uint32_t i = 0; i < n; i++) sum += (p[i] = exp(p[i] - m));
  for (uint32_t i = 0; i < n; i++) p[i] /= sum;
}

/* Vose's alias table for p[0..n) (sums to 1; overwritten): prob and alias per bin.
 * work: 2n uint32. */
static void alias_build(double *p, uint32_t n, float *prob, uint32_t *alias, uint32_t *work)
{
  uint32_t *small = work, *large = work + n, ns = 0, nl = 0;
  for (uint32_t i = 0; i < n; i++) {
    p[i] *= n;
    if (p[i] < 1)
      small[ns++] = i;
    else
      large[nl++] = i;
  }
  while (ns && nl) {
    uint32_t s = small[--ns], l = large[nl - 1];
    prob[s] = (float)p[s];
    alias[s] = l;
    p[l] -= 1 - p[s];
    if (p[l] < 1) {
      nl--;
      small[ns++] = l;
    }
  }
  while (nl) prob[large[--nl]] = 1, alias[large[nl]] = large[nl];
  while (ns) prob[small[--ns]] = 1, alias[small[ns]] = small[ns]; /* rounding leftovers */
}

int lda_generate(const lda_gen_opts_t *o, lda_corpus_t *out, float **phi_out)
{
  memset(out, 0, sizeof(*out));
  if (phi_out) *phi_out = NULL;
  if (lda_gen_opts_check(o, NULL, 0) != 0) return LDA_EINVAL;
  const uint32_t K = o->topics, V = o->vocab, D = o->docs;
  const uint32_t lo = (o->doc_length + 1) / 2, hi = o->doc_length + o->doc_length / 2;
  size_t cells = (size_t)K * V;
  float *prob = malloc(cells * sizeof(float)), *phi = NULL;
  uint32_t *alias = malloc(cells * sizeof(uint32_t));
  uint32_t *work = malloc(2 * (size_t)(V > K ? V : K) * sizeof(uint32_t));
  double *p = malloc((size_t)(V > K ? V : K) * sizeof(double));
  double *cum = malloc((size_t)K * sizeof(double));
  uint32_t *len = malloc((size_t)D * sizeof(uint32_t));
  out->doc_start = malloc(((size_t)D + 1) * sizeof(size_t));
  if (phi_out) phi = malloc(cells * sizeof(float));
  int rc = LDA_ENOMEM;
  if (!prob || !alias || !work || !p || !cum || !len || !out->doc_start || (phi_out && !phi))
    goto done;

  /* planted topics: stream 0 (Zipf: stream 3) */
  lda_rng_t r;
  if (o->zipf > 0) {
    /* each word's weight spread over the topics, unnormalized phi in prob */
    lda_rng_seed(&r, o->seed, 3);
    for (uint32_t v = 0; v < V; v++) {
      dirichlet(&r, o->beta, p, K);
      double weight = pow((double)v + 1, -o->zipf);
      for (uint32_t k = 0; k < K; k++) prob[(size_t)k * V + v] = (float)(weight * p[k]);
    }
  } else {
    lda_rng_seed(&r, o->seed, 0);
  }
  for (uint32_t k = 0; k < K; k++) {
    if (o->zipf > 0) {
      double sum = 0;
      for (uint32_t v = 0; v < V; v++) sum += prob[(size_t)k * V + v];
      for (uint32_t v = 0; v < V; v++) p[v] = sum > 0 ? prob[(size_t)k * V + v] / sum : 1.0 / V;
    } else {
      dirichlet(&r, o->beta, p, V);
    }
    if (phi)
      for (uint32_t v = 0; v < V; v++) phi[(size_t)k * V + v] = (float)p[v];
    alias_build(p, V, &prob[(size_t)k * V], &alias[(size_t)k * V], work);
  }
  /* document lengths: stream 1 */
  lda_rng_seed(&r, o->seed, 1);
  out->doc_start[0] = 0;
  const double sigma = o->length_sigma, mu = log((double)o->doc_length) - sigma * sigma / 2;
  const double longest = (double)longest_doc(o);
  for (uint32_t d = 0; d < D; d++) {
    if (sigma > 0) {
      double l = floor(exp(mu + sigma * normal(&r)) + 0.5);
      len[d] = (uint32_t)(l < 1 ? 1 : l > longest ? longest : l);
    } else {
      len[d] = lo + lda_rng_below(&r, hi - lo + 1);
    }
    out->doc_start[d + 1] = out->doc_start[d] + len[d];
  }
  out->ntokens = out->doc_start[D];
  out->words = malloc((out->ntokens ? out->ntokens : 1) * sizeof(uint32_t));
  if (!out->words) goto done;
  /* documents: stream 2 */
  lda_rng_seed(&r, o->seed, 2);
  for (uint32_t d = 0; d < D; d++) {
    dirichlet(&r, o->alpha, p, K);
    double c = 0;
    for (uint32_t k = 0; k < K; k++) cum[k] = (c += p[k]);
    uint32_t *w = &out->words[out->doc_start[d]];
    for (uint32_t i = 0; i < len[d]; i++) {
      /* topic: binary search of the cumulative theta_d; word: the topic's alias table */
      double u = lda_rng_double(&r) * c;
      uint32_t a = 0, b = K - 1;
      while (a < b) {
        uint32_t m = (a + b) / 2;
        if (cum[m] > u)
          b = m;
        else
          a = m + 1;
      }
      size_t base = (size_t)a * V;
      uint32_t bin = lda_rng_below(&r, V);
      float f = (float)(lda_rng_next(&r) >> 40) * (1.0f / 16777216.0f);
      w[i] = f < prob[base + bin] ? bin : alias[base + bin];
    }
  }
  out->ndocs = D;
  out->nwords = V;
  if (phi_out) *phi_out = phi, phi = NULL;
  rc = 0;
done:
  free(prob);
  free(alias);
  free(work);
  free(p);
  free(cum);
  free(len);
  free(phi);
  if (rc) lda_corpus_free(out);
  return rc;
}
