/* bench_mf.c — augur-bench-mf: augur-mf's training loop against a plain serial C loop
 * with the same arithmetic (demos/mf/kernel.h, the same vector loop) over the same blocks
 * in the same order, in one binary and one run, for 1..T threads; then the test RMSE that
 * each optimizer reaches at augur-mf's defaults. Prints key=value lines; the ratio is what
 * to compare across machines.
 *
 * Two shapes: "default", augur-mf's own generated default (20,000 x 5,000, column factors
 * in L2), and "realistic", 200,000 x 20,000 with zipf-skewed rows and columns (skew 1.1:
 * the most popular column holds about 14% of the ratings), where row factors do not fit
 * in any cache and a few blocks would hold most of the work without balancing.
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
#include "grid.h"
#include "kernel.h"
#include "mf.h"

static void usage(void)
{
  printf("usage: augur-bench-mf [--shape default|realistic|all] [--epochs E] [--quality-epochs Q]\n"
         "                      [--max-threads T] [--rank K]\n"
         "  Trains each shape's generated problem (default: realistic, 200000 x 20000,\n"
         "  5000000 ratings, skew 1.1, rank 40) with augur-mf's loop on 1..T threads\n"
         "  (default T=2) and with a serial baseline over the same blocks, E epochs each\n"
         "  (default 5), and prints the median epoch rates and their ratio; then trains\n"
         "  Q epochs (default 20, 0 = skip) with sgd and with adagrad at augur-mf's\n"
         "  defaults on T threads and prints the test RMSE.\n");
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

typedef struct shape {
  const char *name;
  mf_gen_opts_t gen;
} shape_t;

static int copy_ratings(const mf_ratings_t *from, mf_ratings_t *to)
{
  *to = (mf_ratings_t){0};
  if (mf_ratings_reserve(to, from->n ? from->n : 1) != 0) return -1;
  memcpy(to->r, from->r, from->n * sizeof(mf_rating_t));
  to->n = from->n;
  return 0;
}

/* The baseline: what a careful programmer writes without a framework, one thread walking
 * the model's blocks in order with the same vector loop, column factors in a plain array
 * (same row layout as the table's) updated in place. Returns updates/s; *rmse the
 * epoch's training RMSE. */
static double baseline_epoch(const mf_info_t *in, const mf_opts_t *o, float *P, float *Q,
                             double *rmse)
{
  const mf_grid_t *g = in->grid;
  void **rows = malloc((g->cb_cols ? g->cb_cols : 1) * sizeof(void *));
  double sse = 0;
  uint64_t t0 = au_now_ns();
  for (size_t b = 0; b < mf_grid_blocks(g); b++) {
    for (size_t i = g->koff[b]; i < g->koff[b + 1]; i++)
      rows[i - g->koff[b]] = Q + g->keys[i] * in->qstride;
    mf_kargs_t a = {.P = P + (size_t)(b % g->nrb) * g->rb_rows * in->pstride,
                    .pstride = in->pstride,
                    .Q = rows,
                    .k = o->rank,
                    .biases = o->biases,
                    .mean = in->mean,
                    .lr = o->lr,
                    .reg = o->reg,
                    .optim = o->optim,
                    .qmode = MF_Q_INPLACE};
    sse += mf_kernel_run(in->isa, &a, g->cells + g->start[b], g->start[b + 1] - g->start[b]);
  }
  double s = (double)(au_now_ns() - t0) / 1e9;
  free(rows);
  *rmse = sqrt(sse / (double)g->n);
  return (double)g->n / s;
}

/* Random factors in the model's layout: values in [-0.05, 0.05), accumulators 1. */
static void fill(float *v, size_t rows, size_t stride, uint32_t dim, int acc, uint64_t seed)
{
  mf_rng_t rng;
  mf_rng_seed(&rng, seed);
  for (size_t r = 0; r < rows; r++)
    for (size_t j = 0; j < stride; j++)
      v[r * stride + j] = j < dim
                              ? 0.1f * ((float)(mf_rng_next(&rng) >> 40) / (float)(1 << 24) - 0.5f)
                          : j == dim && acc ? 1.0f
                                            : 0.0f;
}

/* Speed: augur on t threads against the baseline, epochs adjacent in time. */
static int speed(const shape_t *sh, const mf_ratings_t *data, uint32_t rank, int epochs, int t)
{
  mf_opts_t o;
  mf_opts_default(&o);
  o.rank = rank;
  o.decay = 0; /* the same learning rate in every epoch, as the baseline */
  au_node_t *node;
  mf_t *m;
  char err[256];
  mf_ratings_t train;
  if (copy_ratings(data, &train) != 0 ||
      au_node_create(&(au_node_opts_t){.threads = t}, &node) != 0)
    return -1;
  if (mf_create(node, &o, sh->gen.rows, sh->gen.cols, &train, NULL, &m, err, sizeof(err)) != 0) {
    fprintf(stderr, "augur-bench-mf: %s\n", err);
    return -1;
  }
  mf_info_t in;
  mf_info(m, &in);
  const uint32_t dim = rank;
  float *P = malloc((size_t)sh->gen.rows * in.pstride * sizeof(float));
  float *Q = malloc((size_t)sh->gen.cols * in.qstride * sizeof(float));
  if (!P || !Q) return -1;
  fill(P, sh->gen.rows, in.pstride, dim, o.optim == MF_ADAGRAD, 1);
  fill(Q, sh->gen.cols, in.qstride, dim, o.optim == MF_ADAGRAD, 2);
  double base[1000], aug[1000], brmse = 0, armse = 0;
  for (int e = 0; e < epochs; e++) base[e] = baseline_epoch(&in, &o, P, Q, &brmse);
  for (int e = 0; e < epochs; e++) {
    mf_epoch_t st;
    if (mf_epoch(m, e, &st) != 0) return -1;
    aug[e] = st.updates_per_s;
    armse = st.train_rmse;
  }
  au_node_destroy(node);
  mf_free(m);
  free(P);
  free(Q);
  double b = median(base, epochs), a = median(aug, epochs);
  printf("shape=%s threads=%d augur_updates_per_s=%.4g baseline_updates_per_s=%.4g ratio=%.3f "
         "augur_train_rmse=%.4f baseline_train_rmse=%.4f\n",
         sh->name, t, a, b, a / b, armse, brmse);
  fflush(stdout);
  /* both must have learned: a broken loop that skips work would look fast */
  return armse < 0.9 * sqrt(sh->gen.sigma * sh->gen.sigma + 1.0) && brmse < 1.0 ? 0 : 1;
}

/* Quality: test RMSE after `epochs` at augur-mf's defaults (rank aside) with optimizer. */
static int quality(const shape_t *sh, const mf_ratings_t *data, uint32_t rank, int epochs, int t,
                   mf_optim_t optim)
{
  mf_opts_t o;
  mf_opts_default(&o);
  mf_opts_optimizer(&o, optim);
  o.rank = rank;
  mf_ratings_t all, test = {0};
  if (copy_ratings(data, &all) != 0 || mf_split_inplace(&all, 0.1, sh->gen.seed, &test) != 0)
    return -1;
  au_node_t *node;
  mf_t *m;
  char err[256];
  if (au_node_create(&(au_node_opts_t){.threads = t}, &node) != 0) return -1;
  if (mf_create(node, &o, sh->gen.rows, sh->gen.cols, &all, &test, &m, err, sizeof(err)) != 0) {
    fprintf(stderr, "augur-bench-mf: %s\n", err);
    au_node_destroy(node);
    return -1;
  }
  mf_epoch_t st = {0};
  double seconds = 0;
  for (int e = 0; e < epochs; e++) {
    if (mf_epoch(m, e, &st) != 0) return -1;
    seconds += st.seconds;
  }
  au_node_destroy(node);
  mf_free(m);
  printf("shape=%s threads=%d optimizer=%s epochs=%d lr=%g reg=%g test_rmse=%.4f "
         "train_seconds=%.2f\n",
         sh->name, t, optim == MF_ADAGRAD ? "adagrad" : "sgd", epochs, o.lr, o.reg, st.test_rmse,
         seconds);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv)
{
  const char *which = "realistic";
  uint32_t rank = 40;
  int epochs = 5, qepochs = 20, max_threads = 2;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help")) {
      usage();
      return 0;
    } else if (!strcmp(argv[i], "--shape") && v) {
      which = v, i++;
    } else if (!strcmp(argv[i], "--rank") && v) {
      rank = (uint32_t)strtoul(v, NULL, 10), i++;
    } else if (!strcmp(argv[i], "--epochs") && v) {
      epochs = atoi(v), i++;
    } else if (!strcmp(argv[i], "--quality-epochs") && v) {
      qepochs = atoi(v), i++;
    } else if (!strcmp(argv[i], "--max-threads") && v) {
      max_threads = atoi(v), i++;
    } else {
      fprintf(stderr, "augur-bench-mf: unknown or incomplete flag '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (strcmp(which, "default") && strcmp(which, "realistic") && strcmp(which, "all")) {
    fprintf(stderr, "augur-bench-mf: --shape: expected default, realistic or all, got '%s'\n",
            which);
    return 2;
  }
  if (rank == 0 || rank > 1024 || epochs < 1 || epochs > 1000 || qepochs < 0 || qepochs > 1000 ||
      max_threads < 1 || max_threads > 256) {
    fprintf(stderr, "augur-bench-mf: --rank (1..1024), --epochs (1..1000), --quality-epochs "
                    "(0..1000) and --max-threads (1..256) out of range\n");
    return 2;
  }
  char err[256];
  mf_isa_t isa;
  if (mf_isa_from_env(&isa, err, sizeof(err)) != 0) {
    fprintf(stderr, "augur-bench-mf: %s\n", err);
    return 2;
  }

  /* the baseline runs on this thread: flush subnormals as augur's scheduler threads do,
   * so that both run the same arithmetic at the same speed */
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
  shape_t shapes[2];
  mf_gen_opts_default(&shapes[0].gen);
  shapes[0].name = "default";
  mf_gen_opts_default(&shapes[1].gen);
  shapes[1].name = "realistic";
  shapes[1].gen.rows = 200000;
  shapes[1].gen.cols = 20000;
  shapes[1].gen.row_skew = shapes[1].gen.col_skew = 1.1;
  int status = 0;
  for (int s = 0; s < 2 && status == 0; s++) {
    const shape_t *sh = &shapes[s];
    if (strcmp(which, "all") && strcmp(which, sh->name)) continue;
    mf_ratings_t data = {0};
    if (mf_generate(&sh->gen, &data, NULL, NULL) != 0) {
      fprintf(stderr, "augur-bench-mf: generating data failed\n");
      return 1;
    }
    mf_shuffle(&data, 7);
    uint32_t *cc = calloc(sh->gen.cols, sizeof(uint32_t)), top = 0;
    for (size_t i = 0; cc && i < data.n; i++)
      if (++cc[data.r[i].col] > top) top = cc[data.r[i].col];
    free(cc);
    printf("shape=%s rows=%u cols=%u ratings=%zu skew=%g top_col_share=%.3f rank=%u isa=%s "
           "epochs=%d\n",
           sh->name, sh->gen.rows, sh->gen.cols, data.n, sh->gen.col_skew,
           (double)top / (double)data.n, rank, mf_isa_name(isa), epochs);
    fflush(stdout);
    for (int t = 1; t <= max_threads && status == 0; t++) {
      int rc = speed(sh, &data, rank, epochs, t);
      if (rc < 0) {
        fprintf(stderr, "augur-bench-mf: the run on %d threads failed\n", t);
        return 1;
      }
      status |= rc;
    }
    for (int q = 0; qepochs > 0 && q < 2 && status == 0; q++)
      if (quality(sh, &data, rank, qepochs, max_threads, q ? MF_ADAGRAD : MF_SGD) != 0) {
        fprintf(stderr, "augur-bench-mf: the quality run failed\n");
        return 1;
      }
    mf_ratings_free(&data);
  }
  return status;
}
