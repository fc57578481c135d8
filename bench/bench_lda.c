/* bench_lda.c — augur-bench-lda: augur-lda's training loop (SparseLDA buckets with alias
 * tables, O(K_d) per token, on worker actors) against a plain serial dense collapsed
 * Gibbs sampler (O(K) per token), in one binary and one run, on the same generated corpus
 * (by default shaped like natural text: Zipf's law over 50,000 words, log-normal document
 * lengths, 2.4 million tokens), for K = 100 and K = 1000. Prints key=value lines: the
 * tokens/s of each and their ratio, the log-likelihood per token each reached after the
 * same number of iterations, and the seconds each needed to reach a fixed log-likelihood
 * (the dense sampler's after those iterations) and their ratio.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <augur.h>

#include "corpus.h"
#include "lda.h"
#include "rng.h"
#include "sampler.h"

static void usage(void)
{
  printf(
      "usage: augur-bench-lda [--docs N] [--doc-length N] [--vocab-size N] [--planted-topics N]\n"
      "                       [--zipf S] [--length-sigma X] [--iterations N]\n"
      "                       [--topics K[,K...]] [--max-threads T] [--batch N] [--mh-steps N]\n"
      "                       [--write-uci FILE]\n"
      "  Samples the same generated corpus (default 120000 documents of log-normal length,\n"
      "  mean 20 tokens and sigma 1.2, over 50000 words in Zipf's law of exponent 1, from\n"
      "  100 planted topics; --zipf 0 --length-sigma 0 for sparse planted topics and\n"
      "  uniform lengths) for N iterations (default 10) with a serial dense Gibbs sampler,\n"
      "  then with augur-lda's loop on 1..T threads (default T=2) until it reaches the\n"
      "  dense sampler's log-likelihood (at most 3N iterations), for each K (default\n"
      "  100,1000); prints tokens/s of both over N iterations and their ratio, the\n"
      "  log-likelihood per token each reached, and the seconds each took to the dense\n"
      "  sampler's log-likelihood and their ratio.\n"
      "  --write-uci FILE writes the corpus as a UCI bag-of-words file instead (to run\n"
      "  augur-lda or other tools on the same documents) and exits.\n");
}

/* ---- the baseline: what a careful programmer writes without a framework ---------------- */

typedef struct dense {
  uint32_t K, V;
  double alpha, beta;
  int32_t *nwk, *nk, *nd; /* V x K, K, K (the current document) */
  float *inv;             /* 1 / (n_k + V beta) */
  float *cum;             /* K: cumulative weights of the current token */
  uint16_t *z;
  lda_rng_t rng;
} dense_t;

static int dense_init(dense_t *s, const lda_corpus_t *c, uint32_t K, double alpha, double beta,
                      uint64_t seed)
{
  *s = (dense_t){.K = K, .V = c->nwords, .alpha = alpha, .beta = beta};
  s->nwk = calloc((size_t)c->nwords * K, sizeof(int32_t));
  s->nk = calloc(K, sizeof(int32_t));
  s->nd = calloc(K, sizeof(int32_t));
  s->inv = malloc(K * sizeof(float));
  s->cum = malloc(K * sizeof(float));
  s->z = malloc(c->ntokens * sizeof(uint16_t));
  if (!s->nwk || !s->nk || !s->nd || !s->inv || !s->cum || !s->z) return -1;
  lda_rng_seed(&s->rng, seed, 7);
  for (size_t i = 0; i < c->ntokens; i++) {
    uint32_t t = lda_rng_below(&s->rng, K);
    s->z[i] = (uint16_t)t;
    s->nwk[(size_t)c->words[i] * K + t]++;
    s->nk[t]++;
  }
  for (uint32_t k = 0; k < K; k++) s->inv[k] = (float)(1.0 / (s->nk[k] + beta * s->V));
  return 0;
}

static void dense_free(dense_t *s)
{
  free(s->nwk);
  free(s->nk);
  free(s->nd);
  free(s->inv);
  free(s->cum);
  free(s->z);
}

static void dense_sweep(dense_t *s, const lda_corpus_t *c)
{
  const uint32_t K = s->K;
  const float alpha = (float)s->alpha, beta = (float)s->beta, vbeta = (float)(s->beta * s->V);
  int32_t *nd = s->nd, *nk = s->nk;
  float *inv = s->inv, *cum = s->cum;
  for (uint32_t d = 0; d < c->ndocs; d++) {
    uint16_t *z = &s->z[c->doc_start[d]];
    const uint32_t *w = &c->words[c->doc_start[d]];
    size_t len = c->doc_start[d + 1] - c->doc_start[d];
    for (size_t i = 0; i < len; i++) nd[z[i]]++;
    for (size_t i = 0; i < len; i++) {
      int32_t *row = &s->nwk[(size_t)w[i] * K];
      uint32_t t = z[i];
      nd[t]--, row[t]--, nk[t]--;
      inv[t] = 1.0f / ((float)nk[t] + vbeta);
      float sum = 0;
      for (uint32_t k = 0; k < K; k++) {
        sum += ((float)nd[k] + alpha) * ((float)row[k] + beta) * inv[k];
        cum[k] = sum;
      }
      float u = (float)(lda_rng_next(&s->rng) >> 40) * (1.0f / 16777216.0f) * sum;
      t = 0;
      while (t < K - 1 && cum[t] <= u) t++;
      z[i] = (uint16_t)t;
      nd[t]++, row[t]++, nk[t]++;
      inv[t] = 1.0f / ((float)nk[t] + vbeta);
    }
    for (size_t i = 0; i < len; i++) nd[z[i]] = 0;
  }
}

/* The same formula as lda_llh, over the baseline's counts. */
static double dense_llh(dense_t *s, const lda_corpus_t *c)
{
  lda_lgamma_t lga, lgb;
  if (lda_lgamma_init(&lga, s->alpha, 1u << 12) != 0 || lda_lgamma_init(&lgb, s->beta, 1u << 16))
    return NAN;
  uint64_t neg = 0;
  double sum = lda_llh_counts(s->nwk, (size_t)s->V * s->K, &lgb, &neg) +
               lda_llh_totals(s->nk, s->K, s->beta * s->V, &neg);
  for (uint32_t d = 0; d < c->ndocs; d++)
    sum += lda_llh_doc(&s->z[c->doc_start[d]], (uint32_t)(c->doc_start[d + 1] - c->doc_start[d]),
                       s->alpha * s->K, &lga, s->nd);
  lda_lgamma_free(&lga);
  lda_lgamma_free(&lgb);
  return neg ? NAN : sum / (double)c->ntokens;
}

static int cmp_u32(const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The corpus as a UCI bag-of-words file: D, W, NNZ, then "doc word count" lines (1-based),
 * a document's words ascending. 0, or -1 (errno says why). */
static int write_uci(const lda_corpus_t *c, const char *path)
{
  FILE *f = fopen(path, "w");
  uint32_t *cnt = calloc(c->nwords, sizeof(uint32_t)), *ws = malloc(c->ntokens * sizeof(uint32_t));
  int rc = f && cnt && ws ? 0 : -1;
  size_t nnz = 0;
  for (int pass = 0; pass < 2 && rc == 0; pass++) {
    if (pass) fprintf(f, "%u\n%u\n%zu\n", c->ndocs, c->nwords, nnz);
    for (uint32_t d = 0; d < c->ndocs; d++) {
      size_t n = 0;
      for (size_t j = c->doc_start[d]; j < c->doc_start[d + 1]; j++)
        if (cnt[c->words[j]]++ == 0) ws[n++] = c->words[j];
      nnz += n;
      if (pass) qsort(ws, n, sizeof(uint32_t), cmp_u32);
      for (size_t i = 0; i < n; i++) {
        if (pass) fprintf(f, "%u %u %u\n", d + 1, ws[i] + 1, cnt[ws[i]]);
        cnt[ws[i]] = 0;
      }
    }
  }
  if (f && (ferror(f) | fclose(f))) rc = -1;
  free(cnt);
  free(ws);
  return rc;
}

/* ---- one K ---------------------------------------------------------------------------- */

typedef struct result {
  double tokens_per_s, llh, seconds; /* over the first `iterations` sweeps */
  double to_target;                  /* sweep seconds until the log-likelihood reached it */
  int sweeps_to_target;              /* 0: not within 3 x iterations */
} result_t;

/* The baseline with the same priors (lda_opts_default's alpha 0.1, beta 0.01). */
static int run_dense(const lda_corpus_t *c, uint32_t K, int iterations, result_t *r)
{
  dense_t s;
  if (dense_init(&s, c, K, 0.1, 0.01, 1) != 0) {
    dense_free(&s);
    return -1;
  }
  double seconds = 0;
  for (int it = 0; it < iterations; it++) {
    uint64_t t0 = au_now_ns();
    dense_sweep(&s, c);
    seconds += (double)(au_now_ns() - t0) / 1e9;
  }
  r->seconds = r->to_target = seconds;
  r->sweeps_to_target = iterations;
  r->tokens_per_s = (double)c->ntokens * iterations / seconds;
  r->llh = dense_llh(&s, c);
  dense_free(&s);
  return 0;
}

/* augur-lda's training loop as augur-lda runs it, timed per sweep (not the evaluations
 * between sweeps): tokens/s and the log-likelihood after `iterations` sweeps, and the
 * sweep seconds until the log-likelihood reaches target (at most 3 x iterations). */
static int run_augur(const lda_corpus_t *c, const lda_opts_t *opts, uint32_t K, int iterations,
                     int threads, double target, result_t *r)
{
  au_node_t *node;
  lda_t *m;
  lda_opts_t o = *opts;
  char err[256];
  o.topics = K;
  if (au_node_create(&(au_node_opts_t){.threads = threads}, &node) != 0) return -1;
  if (lda_create(node, &o, c, &m, err, sizeof(err)) != 0) {
    fprintf(stderr, "augur-bench-lda: %s\n", err);
    au_node_destroy(node);
    return -1;
  }
  double seconds = 0, llh = -INFINITY;
  int rc = 0;
  r->sweeps_to_target = 0;
  r->to_target = INFINITY;
  for (int it = 1; it <= 3 * iterations && rc == 0; it++) {
    lda_iter_t st;
    rc = lda_iterate(m, &st);
    seconds += st.seconds;
    if (rc == 0) rc = lda_llh(m, &llh); /* the loop ends once past iterations and on target */
    if (rc == 0 && it == iterations) {
      r->seconds = seconds;
      r->llh = llh;
    }
    if (rc == 0 && !r->sweeps_to_target && llh >= target) {
      r->sweeps_to_target = it;
      r->to_target = seconds;
    }
    if (it >= iterations && r->sweeps_to_target) break;
  }
  au_node_destroy(node);
  lda_free(m);
  r->tokens_per_s = (double)c->ntokens * iterations / r->seconds;
  return rc;
}

int main(int argc, char **argv)
{
  lda_gen_opts_t g;
  lda_gen_opts_default(&g);
  g.docs = 120000, g.vocab = 50000, g.doc_length = 20, g.topics = 100;
  g.zipf = 1.0, g.length_sigma = 1.2, g.beta = 0.1;
  int iterations = 10, max_threads = 2, nks = 2;
  const char *write_path = NULL;
  lda_opts_t o;
  lda_opts_default(&o);
  uint32_t ks[16] = {100, 1000};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help")) {
      usage();
      return 0;
    } else if (!strcmp(argv[i], "--docs") && v) {
      g.docs = (uint32_t)strtoul(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--doc-length") && v) {
      g.doc_length = (uint32_t)strtoul(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--vocab-size") && v) {
      g.vocab = (uint32_t)strtoul(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--planted-topics") && v) {
      g.topics = (uint32_t)strtoul(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--zipf") && v) {
      g.zipf = strtod(v, NULL), i++;
    } else if (!strcmp(argv[i], "--length-sigma") && v) {
      g.length_sigma = strtod(v, NULL), i++;
    } else if (!strcmp(argv[i], "--iterations") && v) {
      iterations = atoi(v), i++;
    } else if (!strcmp(argv[i], "--mh-steps") && v) {
      o.mh_steps = atoi(v), i++;
    } else if (!strcmp(argv[i], "--batch") && v) {
      o.batch = (uint32_t)strtoul(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--max-threads") && v) {
      max_threads = atoi(v), i++;
    } else if (!strcmp(argv[i], "--write-uci") && v) {
      write_path = v, i++;
    } else if (!strcmp(argv[i], "--topics") && v) {
      char *p = (char *)v, *end;
      for (nks = 0; nks < 16 && *p; p = *end ? end + 1 : end) {
        ks[nks++] = (uint32_t)strtoul(p, &end, 10);
        if (end == p) break;
      }
      i++;
    } else {
      fprintf(stderr, "augur-bench-lda: unknown or incomplete flag '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  char err[256];
  if (lda_gen_opts_check(&g, err, sizeof(err)) != 0) {
    fprintf(stderr, "augur-bench-lda: %s\n", err);
    return 2;
  }
  if (iterations < 1 || iterations > 10000 || max_threads < 1 || max_threads > 256 || nks < 1 ||
      o.batch < 1 || o.mh_steps < 1) {
    fprintf(stderr, "augur-bench-lda: --iterations (1..10000), --max-threads (1..256), --topics, "
                    "--batch and --mh-steps must be positive\n");
    return 2;
  }
  for (int i = 0; i < nks; i++)
    if (ks[i] < 2 || ks[i] > LDA_MAX_TOPICS) {
      fprintf(stderr, "augur-bench-lda: --topics values must be in [2, %d]\n", LDA_MAX_TOPICS);
      return 2;
    }
  lda_corpus_t c;
  if (lda_generate(&g, &c, NULL) != 0) {
    fprintf(stderr, "augur-bench-lda: generating the corpus failed\n");
    return 1;
  }
  if (write_path) {
    int rc = write_uci(&c, write_path);
    if (rc != 0) fprintf(stderr, "augur-bench-lda: %s: %s\n", write_path, strerror(errno));
    lda_corpus_free(&c);
    return rc ? 1 : 0;
  }
  printf("docs=%u vocab=%u tokens=%zu planted_topics=%u zipf=%g length_sigma=%g iterations=%d "
         "alpha=%g beta=%g batch=%u mh_steps=%d\n",
         c.ndocs, c.nwords, c.ntokens, g.topics, g.zipf, g.length_sigma, iterations, o.alpha,
         o.beta, o.batch, o.mh_steps);
  fflush(stdout);
  int status = 0;
  for (int i = 0; i < nks && status == 0; i++) {
    result_t d;
    if (run_dense(&c, ks[i], iterations, &d) != 0) {
      fprintf(stderr, "augur-bench-lda: the dense sampler failed at K=%u\n", ks[i]);
      status = 1;
      break;
    }
    for (int t = 1; t <= max_threads; t++) {
      result_t a;
      if (run_augur(&c, &o, ks[i], iterations, t, d.llh, &a) != 0) {
        fprintf(stderr, "augur-bench-lda: augur-lda failed at K=%u on %d threads\n", ks[i], t);
        status = 1;
        break;
      }
      printf("topics=%u threads=%d augur_tokens_per_s=%.4g dense_tokens_per_s=%.4g ratio=%.2f "
             "augur_llh_per_token=%.4f dense_llh_per_token=%.4f llh_gap=%+.4f augur_seconds=%.2f "
             "dense_seconds=%.2f target_llh=%.4f augur_seconds_to_target=%.2f "
             "augur_sweeps_to_target=%d dense_seconds_to_target=%.2f time_ratio=%.2f\n",
             ks[i], t, a.tokens_per_s, d.tokens_per_s, a.tokens_per_s / d.tokens_per_s, a.llh,
             d.llh, (a.llh - d.llh) / fabs(d.llh), a.seconds, d.seconds, d.llh, a.to_target,
             a.sweeps_to_target, d.to_target, d.to_target / a.to_target);
      fflush(stdout);
      /* both must have learned: a loop that skips work would look fast */
      if (!(a.llh > d.llh - 0.1 * fabs(d.llh)) || !(d.llh > -20)) status = 1;
    }
  }
  lda_corpus_free(&c);
  return status;
}
