/* test_mf.c — the MF training loop on augur learns: on generated data with known rank
 * and noise sigma, held-out RMSE falls and reaches the noise floor: adagrad at augur-mf's
 * defaults within 1.05 sigma in 20 epochs; sgd within 1.1 sigma with 2 threads of Hogwild
 * updates and with exact updates. The factors it saves can be read back. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <augur.h>

#include "data.h"
#include "mf.h"

static void train_and_check(mf_optim_t optim, au_kernel_t kernel, int threads, const char *save)
{
  mf_gen_opts_t g;
  mf_gen_opts_default(&g);
  g.rows = 3000;
  g.cols = 1000;
  g.nnz = 600000;
  g.rank = 4;
  g.sigma = 0.1;
  g.seed = 11;
  if (optim == MF_ADAGRAD) {
    /* The defaults' regularization (0.05 per update, for real ratings) shrinks every
     * prediction by ~15% whatever the data size: against noise sigma = 0.1 that alone
     * would be 1.5 sigma. Real ratings are noisy (MovieLens: ~0.85 left over), so the
     * floor is tested at the noise of real data, sigma = 1 (signal variance 1), with
     * twice the ratings so that estimation error stays small. */
    g.sigma = 1.0;
    g.nnz = 1200000;
  }
  mf_ratings_t all = {0}, train = {0}, test = {0};
  uint32_t nrows, ncols;
  assert_int_equal(mf_generate(&g, &all, &nrows, &ncols), 0);
  assert_int_equal(mf_split(&all, 0.1, 3, &train, &test), 0);
  mf_shuffle(&train, 5);

  au_node_t *node;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = threads}, &node), 0);
  mf_opts_t o;
  mf_opts_default(&o);
  if (optim == MF_SGD) {
    mf_opts_optimizer(&o, MF_SGD);
    o.rank = 8; /* more than the truth's 4: regularization must cope */
    o.reg = 0.005f;
    o.decay = 0.05f;
  }
  o.kernel = kernel;
  mf_t *m;
  char err[256];
  const size_t ntrain = train.n;
  mf_ratings_t kept = {0}; /* the test ratings, for the saved model's predictions */
  for (size_t i = 0; i < test.n; i++)
    assert_int_equal(mf_ratings_push(&kept, test.r[i].row, test.r[i].col, test.r[i].value), 0);
  assert_int_equal(mf_create(node, &o, nrows, ncols, &train, &test, &m, err, sizeof(err)), 0);
  assert_int_equal(train.n, 0); /* taken */

  double first;
  assert_int_equal(mf_evaluate(m, &first), 0);
  double prev = first, last = first;
  for (int e = 0; e < 20; e++) {
    mf_epoch_t st;
    assert_int_equal(mf_epoch(m, e, &st), 0);
    assert_int_equal(st.updates, ntrain);
    assert_true(st.local == 1.0);
    assert_true(st.intents > 0);
    last = st.test_rmse;
    if (prev > 1.1 * g.sigma) assert_true(last < prev); /* falls while far from sigma */
    prev = last;
  }
  print_message("mf: %s kernel=%s threads=%d test_rmse %.4f -> %.4f (sigma %.2f)\n",
                optim == MF_ADAGRAD ? "adagrad" : "sgd",
                kernel == AU_KERNEL_ADD ? "exact" : "hogwild", threads, first, last, g.sigma);
  assert_true(first > g.sigma + 0.4); /* the floor is far from where training starts */
  assert_true(last <= (optim == MF_ADAGRAD ? 1.05 : 1.1) * g.sigma);

  if (save) {
    /* the model as it leaves the run: written, read back, the same predictions */
    mf_model_t md, back;
    assert_int_equal(mf_model_gather(m, NULL, NULL, &md), 0);
    assert_int_equal(md.nrows, nrows);
    assert_int_equal(md.ncols, ncols);
    assert_int_equal(mf_model_save(&md, save, err, sizeof(err)), 0);
    assert_int_equal(mf_model_load(save, &back, err, sizeof(err)), 0);
    assert_int_equal(back.rank, md.rank);
    assert_memory_equal(back.P, md.P, (size_t)nrows * md.rank * sizeof(float));
    assert_memory_equal(back.Q, md.Q, (size_t)ncols * md.rank * sizeof(float));
    assert_true(back.mean == md.mean);
    double sse = 0;
    for (size_t i = 0; i < kept.n; i++) {
      const mf_rating_t *x = &kept.r[i];
      const double d = mf_model_predict(&back, x->row, x->col) - x->value;
      sse += d * d;
    }
    const double rmse = sqrt(sse / (double)kept.n);
    print_message("saved model: test_rmse %.6f, the run's %.6f\n", rmse, last);
    assert_true(fabs(rmse - last) <= 1e-4 * last);
    /* P.txt: one line of rank numbers per row */
    char path[512], line[4096];
    snprintf(path, sizeof(path), "%s/P.txt", save);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    uint32_t lines = 0;
    while (fgets(line, sizeof(line), f)) {
      uint32_t fields = 0;
      for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n")) fields++;
      assert_int_equal(fields, md.rank);
      lines++;
    }
    fclose(f);
    assert_int_equal(lines, nrows);
    mf_model_free(&back);
    /* a cut .npy file is named */
    snprintf(path, sizeof(path), "%s/Q.npy", save);
    assert_int_equal(truncate(path, 200), 0);
    assert_int_equal(mf_model_load(save, &back, err, sizeof(err)), MF_EPARSE);
    assert_non_null(strstr(err, "Q.npy: expected"));
    assert_int_not_equal(mf_model_save(&md, "/nonexistent-dir/x", err, sizeof(err)), 0);
    assert_non_null(strstr(err, "/nonexistent-dir/x"));
    mf_model_free(&md);
  }
  au_node_destroy(node);
  mf_free(m);
  mf_ratings_free(&all);
  mf_ratings_free(&train);
  mf_ratings_free(&test);
  mf_ratings_free(&kept);
}

static void test_hogwild_two_threads_reaches_noise(void **state)
{
  (void)state;
  char path[] = "/tmp/augur-mf-model-XXXXXX";
  assert_non_null(mkdtemp(path));
  train_and_check(MF_SGD, AU_KERNEL_HOGWILD, 2, path);
  static const char *const files[] = {"model.txt",   "P.txt",       "Q.txt",
                                      "P.npy",       "Q.npy",       "row_ids.txt",
                                      "col_ids.txt", "row_ids.npy", "col_ids.npy"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char f[512];
    snprintf(f, sizeof(f), "%s/%s", path, files[i]);
    assert_int_equal(unlink(f), 0); /* each was written */
  }
  assert_int_equal(rmdir(path), 0); /* and nothing else (no temporary left) */
}

static void test_exact_reaches_noise(void **state)
{
  (void)state;
  train_and_check(MF_SGD, AU_KERNEL_ADD, 2, NULL);
}

static void test_adagrad_defaults_reach_noise(void **state)
{
  (void)state;
  train_and_check(MF_ADAGRAD, AU_KERNEL_HOGWILD, 2, NULL);
}

static void test_adagrad_exact(void **state)
{
  (void)state;
  train_and_check(MF_ADAGRAD, AU_KERNEL_ADD, 2, NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hogwild_two_threads_reaches_noise),
      cmocka_unit_test(test_exact_reaches_noise),
      cmocka_unit_test(test_adagrad_defaults_reach_noise),
      cmocka_unit_test(test_adagrad_exact),
  };
  return cmocka_run_group_tests_name("mf", tests, NULL, NULL);
}
