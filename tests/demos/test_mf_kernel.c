/* test_mf_kernel.c — every vector loop of augur-mf (kernel.h) computes what the plain C
 * loop computes: on the same cells in the same order, from the same factors, each
 * supported ISA's rows end within float tolerance of the scalar loop's, for both
 * optimizers, with and without biases, at factor lengths with and without vector tails.
 * An ISA this CPU (or build) lacks is skipped, saying so. The whole model agrees too:
 * augur-mf on one worker ends at the same test RMSE whatever AUGUR_MF_ISA forces. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <augur.h>

#include "data.h"
#include "grid.h"
#include "kernel.h"
#include "mf.h"

enum { ROWS = 300, COLS = 200, CELLS = 20000 };

typedef struct rows {
  float *P, *Q;
  size_t stride;
} rows_t;

static void init_rows(rows_t *r, uint32_t dim, int ada, uint64_t seed)
{
  r->stride = (dim + 1 + 15) / 16 * 16;
  r->P = aligned_alloc(64, ROWS * r->stride * sizeof(float));
  r->Q = aligned_alloc(64, COLS * r->stride * sizeof(float));
  mf_rng_t rng;
  mf_rng_seed(&rng, seed);
  for (int m = 0; m < 2; m++) {
    float *v = m ? r->Q : r->P;
    const size_t n = m ? COLS : ROWS;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < r->stride; j++)
        v[i * r->stride + j] = j < dim           ? (float)(0.3 * mf_rng_normal(&rng))
                               : j == dim && ada ? 1.0f
                                                 : -7.0f;
  }
}

/* Three epochs over the cells with the given ISA; the rows' values and accumulators
 * (and the padding, which must stay untouched) end in r. Returns the last epoch's SSE. */
static double train(mf_isa_t isa, rows_t *r, const mf_cell_t *cells, uint32_t k, int biases,
                    mf_optim_t optim)
{
  void *qrows[COLS];
  for (int c = 0; c < COLS; c++) qrows[c] = r->Q + (size_t)c * r->stride;
  mf_kargs_t a = {.P = r->P,
                  .pstride = r->stride,
                  .Q = qrows,
                  .k = k,
                  .biases = biases,
                  .mean = 0.25f,
                  .lr = optim == MF_ADAGRAD ? 0.1f : 0.02f,
                  .reg = 0.03f,
                  .optim = optim,
                  .qmode = MF_Q_INPLACE};
  double sse = 0;
  for (int e = 0; e < 3; e++) sse = mf_kernel_run(isa, &a, cells, CELLS);
  return sse;
}

static void compare(uint32_t k, int biases, mf_optim_t optim, const mf_cell_t *cells)
{
  const uint32_t dim = k + (biases ? 1 : 0);
  const int ada = optim == MF_ADAGRAD;
  rows_t ref;
  init_rows(&ref, dim, ada, 5);
  const double ref_sse = train(MF_ISA_SCALAR, &ref, cells, k, biases, optim);
  for (int isa = MF_ISA_SSE2; isa < MF_ISA_COUNT; isa++) {
    if (!mf_isa_supported((mf_isa_t)isa)) {
      print_message("kernel: %s skipped: this CPU or build lacks it\n", mf_isa_name((mf_isa_t)isa));
      continue;
    }
    rows_t r;
    init_rows(&r, dim, ada, 5);
    const double sse = train((mf_isa_t)isa, &r, cells, k, biases, optim);
    double worst = 0;
    for (int m = 0; m < 2; m++) {
      const float *x = m ? r.Q : r.P, *y = m ? ref.Q : ref.P;
      const size_t n = (m ? COLS : ROWS) * r.stride;
      for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)x[i] - y[i]) / (1.0 + fabs((double)y[i]));
        if (d > worst) worst = d;
      }
    }
    print_message("kernel: k=%u biases=%d %s %s: largest difference %.2e, sse %.6g vs %.6g\n", k,
                  biases, ada ? "adagrad" : "sgd", mf_isa_name((mf_isa_t)isa), worst, sse, ref_sse);
    assert_true(worst < 1e-4); /* float rounding of differently ordered sums */
    assert_true(fabs(sse - ref_sse) <= 1e-4 * ref_sse);
    free(r.P);
    free(r.Q);
  }
  free(ref.P);
  free(ref.Q);
}

static void make_cells(mf_cell_t *cells)
{
  mf_rng_t rng;
  mf_rng_seed(&rng, 17);
  for (int i = 0; i < CELLS; i++) {
    uint64_t x = mf_rng_next(&rng);
    cells[i] = (mf_cell_t){(uint16_t)(x % ROWS), (uint16_t)((x >> 20) % COLS),
                           (float)((x >> 40) % 5) * 0.5f - 1.0f};
  }
}

static void test_isas_agree(void **state)
{
  (void)state;
  mf_cell_t *cells = malloc(CELLS * sizeof(mf_cell_t));
  make_cells(cells);
  const uint32_t ks[] = {1, 7, 16, 40, 53};
  for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
    for (int biases = 0; biases < 2; biases++) {
      compare(ks[i], biases, MF_SGD, cells);
      compare(ks[i], biases, MF_ADAGRAD, cells);
    }
  free(cells);
}

/* The padding after a row's values and accumulator is never written. */
static void test_padding_untouched(void **state)
{
  (void)state;
  mf_cell_t *cells = malloc(CELLS * sizeof(mf_cell_t));
  make_cells(cells);
  const mf_isa_t best = mf_isa_best();
  rows_t r;
  init_rows(&r, 40, 1, 3);
  train(best, &r, cells, 40, 0, MF_ADAGRAD);
  for (size_t i = 0; i < ROWS; i++)
    for (size_t j = 41; j < r.stride; j++) assert_true(r.P[i * r.stride + j] == -7.0f);
  for (size_t i = 0; i < COLS; i++)
    for (size_t j = 41; j < r.stride; j++) assert_true(r.Q[i * r.stride + j] == -7.0f);
  free(r.P);
  free(r.Q);
  free(cells);
}

static void test_isa_names_and_env(void **state)
{
  (void)state;
  mf_isa_t isa;
  char err[256];
  assert_int_equal(mf_isa_parse("avx2", &isa), 0);
  assert_int_equal(isa, MF_ISA_AVX2);
  assert_int_equal(mf_isa_parse("avx3", &isa), -1);
  assert_true(mf_isa_supported(MF_ISA_SCALAR));
  setenv("AUGUR_MF_ISA", "scalar", 1);
  assert_int_equal(mf_isa_from_env(&isa, err, sizeof(err)), 0);
  assert_int_equal(isa, MF_ISA_SCALAR);
  setenv("AUGUR_MF_ISA", "neon", 1);
  assert_int_equal(mf_isa_from_env(&isa, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "AUGUR_MF_ISA=neon"));
  unsetenv("AUGUR_MF_ISA");
  assert_int_equal(mf_isa_from_env(&isa, err, sizeof(err)), 0);
  assert_int_equal(isa, mf_isa_best());
}

/* The whole model, one worker (a fixed order), each ISA forced through the environment:
 * the same test RMSE to float rounding. */
static double model_rmse(const char *isa, mf_optim_t optim, au_kernel_t kernel)
{
  mf_gen_opts_t g;
  mf_gen_opts_default(&g);
  g.rows = 2000, g.cols = 500, g.nnz = 60000, g.seed = 4;
  mf_ratings_t all = {0}, test = {0};
  uint32_t nrows, ncols;
  assert_int_equal(mf_generate(&g, &all, &nrows, &ncols), 0);
  assert_int_equal(mf_split_inplace(&all, 0.1, 3, &test), 0);
  setenv("AUGUR_MF_ISA", isa, 1);
  au_node_t *node;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &node), 0);
  mf_opts_t o;
  mf_opts_default(&o);
  mf_opts_optimizer(&o, optim);
  o.rank = 20; /* a tail for every vector width */
  o.workers = 1;
  o.kernel = kernel;
  mf_t *m;
  char err[256];
  assert_int_equal(mf_create(node, &o, nrows, ncols, &all, &test, &m, err, sizeof(err)), 0);
  unsetenv("AUGUR_MF_ISA");
  mf_info_t info;
  mf_info(m, &info);
  assert_string_equal(mf_isa_name(info.isa), isa);
  mf_epoch_t st;
  for (int e = 0; e < 4; e++) assert_int_equal(mf_epoch(m, e, &st), 0);
  au_node_destroy(node);
  mf_free(m);
  return st.test_rmse;
}

static void test_model_agrees_across_isas(void **state)
{
  (void)state;
  for (int o = 0; o < 2; o++) {
    const mf_optim_t optim = o ? MF_ADAGRAD : MF_SGD;
    const double ref = model_rmse("scalar", optim, AU_KERNEL_HOGWILD);
    assert_true(ref < 0.9); /* it learned */
    for (int isa = MF_ISA_SSE2; isa < MF_ISA_COUNT; isa++) {
      if (!mf_isa_supported((mf_isa_t)isa)) {
        print_message("model: %s skipped: this CPU or build lacks it\n",
                      mf_isa_name((mf_isa_t)isa));
        continue;
      }
      const double r = model_rmse(mf_isa_name((mf_isa_t)isa), optim, AU_KERNEL_HOGWILD);
      print_message("model: %s %s test_rmse %.6f (scalar %.6f)\n", o ? "adagrad" : "sgd",
                    mf_isa_name((mf_isa_t)isa), r, ref);
      assert_true(fabs(r - ref) <= 1e-4 * ref);
    }
  }
}

/* On this node the loop updates the column rows in place with the table's optimizer
 * math (mf.c, qmode_of); with the exact kernel every update goes through the table's own
 * optimizer instead. One worker, one order: both must end at the same model. */
static void test_inplace_matches_table_optimizer(void **state)
{
  (void)state;
  for (int o = 0; o < 2; o++) {
    const mf_optim_t optim = o ? MF_ADAGRAD : MF_SGD;
    const double inplace = model_rmse("scalar", optim, AU_KERNEL_HOGWILD);
    const double table = model_rmse("scalar", optim, AU_KERNEL_ADD);
    print_message("model: %s in place %.6f, through the table %.6f\n", o ? "adagrad" : "sgd",
                  inplace, table);
    assert_true(fabs(inplace - table) <= 1e-4 * table);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_isa_names_and_env),
      cmocka_unit_test(test_isas_agree),
      cmocka_unit_test(test_padding_untouched),
      cmocka_unit_test(test_model_agrees_across_isas),
      cmocka_unit_test(test_inplace_matches_table_optimizer),
  };
  return cmocka_run_group_tests_name("mf_kernel", tests, NULL, NULL);
}
