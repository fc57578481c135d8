/* bench_mf.c — augur-bench-mf: augur-mf's training loop against a plain serial C SGD
 * loop with the same arithmetic (demos/mf/sgd.h) and the same cache-aware walking order,
 * in one binary and one run, for 1 and 2 threads. Prints key=value lines; the ratio is
 * what to compare across machines.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <augur.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "data.h"
#include "mf.h"
#include "sgd.h"

static void usage(void)
{
  printf("usage: augur-bench-mf [--ratings N] [--rank K] [--epochs E] [--max-threads T]\n"
         "  Trains the same generated problem (default 5000000 ratings, 20000 x 5000, rank 40)\n"
         "  with augur-mf's loop on 1..T threads (default T=2) and with a serial baseline;\n"
         "  prints the median epoch rate of each and their ratio.\n");
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t splitmix64(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void fill(float *v, size_t n, uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    v[i] = 0.1f * ((float)(splitmix64(&seed) >> 40) / (float)(1 << 24) - 0.5f);
}

/* The baseline: what a careful programmer writes without a framework. */
static double baseline_epoch(const mf_ratings_t *r, float *P, float *Q, uint32_t k, float mean,
                             float lr, float reg, double *rmse)
{
  float dq[k];
  double sse = 0;
  uint64_t t0 = au_now_ns();
  for (size_t i = 0; i < r->n; i++) {
    float *p = &P[(size_t)r->r[i].row * k], *q = &Q[(size_t)r->r[i].col * k];
    float err = mf_sgd(p, q, dq, k, 0, mean, r->r[i].value, lr, reg);
    for (uint32_t j = 0; j < k; j++) q[j] += dq[j];
    sse += (double)err * err;
  }
  double s = (double)(au_now_ns() - t0) / 1e9;
  *rmse = sqrt(sse / (double)r->n);
  return (double)r->n / s;
}

int main(int argc, char **argv)
{
  mf_gen_opts_t g;
  mf_gen_opts_default(&g);
  uint32_t rank = 40;
  int epochs = 5, max_threads = 2;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help")) {
      usage();
      return 0;
    } else if (!strcmp(argv[i], "--ratings") && v) {
      g.nnz = strtoull(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--rank") && v) {
      rank = (uint32_t)strtoul(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--epochs") && v) {
      epochs = atoi(v), i++;
    } else if (!strcmp(argv[i], "--max-threads") && v) {
      max_threads = atoi(v), i++;
    } else {
      fprintf(stderr, "augur-bench-mf: unknown or incomplete flag '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (g.nnz == 0 || rank == 0 || rank > 1024 || epochs < 1 || epochs > 1000 || max_threads < 1 ||
      max_threads > 256) {
    fprintf(stderr, "augur-bench-mf: --ratings, --rank (<= 1024), --epochs (1..1000) and "
                    "--max-threads (1..256) must be positive\n");
    return 2;
  }

  /* the baseline runs on this thread: flush subnormals as augur's scheduler threads do,
   * so that both run the same arithmetic at the same speed */
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
  mf_ratings_t data = {0};
  uint32_t nrows, ncols;
  if (mf_generate(&g, &data, &nrows, &ncols) != 0) {
    fprintf(stderr, "augur-bench-mf: generating data failed\n");
    return 1;
  }
  mf_shuffle(&data, 7);
  double sum = 0;
  for (size_t i = 0; i < data.n; i++) sum += data.r[i].value;
  float mean = (float)(sum / (double)data.n);
  printf("ratings=%zu rows=%u cols=%u rank=%u epochs=%d\n", data.n, nrows, ncols, rank, epochs);

  mf_opts_t o;
  mf_opts_default(&o);
  o.rank = rank;
  o.decay = 0; /* same learning rate in every epoch, as the baseline */

  /* baseline order: the same blocking, as one worker would walk all rows */
  mf_ratings_t ordered = {0};
  mf_ratings_reserve(&ordered, data.n);
  memcpy(ordered.r, data.r, data.n * sizeof(mf_rating_t));
  ordered.n = data.n;
  mf_block_order(&ordered, nrows, ncols, rank, 0, 1, 0, NULL, NULL);
  float *P = malloc((size_t)nrows * rank * sizeof(float));
  float *Q = malloc((size_t)ncols * rank * sizeof(float));

  int status = 0;
  for (int t = 1; t <= max_threads; t++) {
    /* baseline epochs, then augur epochs, adjacent in time so that both see the same
     * machine */
    double base[1000], aug[1000], brmse = 0, armse = 0;
    fill(P, (size_t)nrows * rank, 1);
    fill(Q, (size_t)ncols * rank, 2);
    for (int e = 0; e < epochs; e++)
      base[e] = baseline_epoch(&ordered, P, Q, rank, mean, o.lr, o.reg, &brmse);

    au_node_t *node;
    mf_t *m;
    char err[256];
    if (au_node_start(&node, &(au_node_opts_t){.threads = t}) != 0 ||
        mf_create(node, &o, nrows, ncols, &data, NULL, &m, err, sizeof(err)) != 0) {
      fprintf(stderr, "augur-bench-mf: setting up augur with %d threads failed\n", t);
      return 1;
    }
    for (int e = 0; e < epochs; e++) {
      mf_epoch_t st;
      if (mf_epoch(m, e, &st) != 0) {
        fprintf(stderr, "augur-bench-mf: epoch failed\n");
        return 1;
      }
      aug[e] = st.updates_per_s;
      armse = st.train_rmse;
    }
    au_node_stop(node);
    mf_free(m);
    double b = median(base, epochs), a = median(aug, epochs);
    printf("threads=%d augur_updates_per_s=%.4g baseline_updates_per_s=%.4g ratio=%.3f "
           "augur_train_rmse=%.4f baseline_train_rmse=%.4f\n",
           t, a, b, a / b, armse, brmse);
    /* both must have learned: a broken loop that skips work would look fast */
    if (!(armse < 0.9 * sqrt((double)g.sigma * g.sigma + 1.0)) || !(brmse < 1.0)) status = 1;
  }
  free(P);
  free(Q);
  mf_ratings_free(&ordered);
  mf_ratings_free(&data);
  return status;
}
