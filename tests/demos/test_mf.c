/* test_mf.c — the MF training loop on augur learns: on generated data with known rank
 * and noise sigma, held-out RMSE falls and reaches <= 1.1 sigma, with 2 threads of
 * Hogwild updates and with exact updates; the factors it saves can be read back. */
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

static void train_and_check(au_kernel_t kernel, int threads, const char *save)
{
  mf_gen_opts_t g;
  mf_gen_opts_default(&g);
  g.rows = 3000;
  g.cols = 1000;
  g.nnz = 600000;
  g.rank = 4;
  g.sigma = 0.1;
  g.seed = 11;
  mf_ratings_t all = {0}, train = {0}, test = {0};
  uint32_t nrows, ncols;
  assert_int_equal(mf_generate(&g, &all, &nrows, &ncols), 0);
  assert_int_equal(mf_split(&all, 0.1, 3, &train, &test), 0);
  mf_shuffle(&train, 5);

  au_node_t *node;
  assert_int_equal(au_node_start(&node, &(au_node_opts_t){.threads = threads}), 0);
  mf_opts_t o;
  mf_opts_default(&o);
  o.rank = 8; /* more than the truth's 4: regularization must cope */
  o.reg = 0.01f;
  o.decay = 0.05f;
  o.kernel = kernel;
  mf_t *m;
  char err[256];
  const size_t ntrain = train.n;
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
    if (e < 5) assert_true(last < prev); /* falls epoch by epoch while far from sigma */
    prev = last;
  }
  print_message("mf: kernel=%s threads=%d test_rmse %.4f -> %.4f (sigma %.2f)\n",
                kernel == AU_KERNEL_ADD ? "exact" : "hogwild", threads, first, last, g.sigma);
  assert_true(first > 0.5);
  assert_true(last <= 1.1 * g.sigma);

  if (save) {
    assert_int_equal(mf_save(m, save, NULL, NULL, err, sizeof(err)), 0);
    FILE *f = fopen(save, "r");
    assert_non_null(f);
    char line[4096];
    int rows = 0, cols = 0, header = 0;
    while (fgets(line, sizeof(line), f)) {
      if (line[0] == '#')
        header++;
      else if (!strncmp(line, "row ", 4))
        rows++;
      else if (!strncmp(line, "col ", 4))
        cols++;
    }
    fclose(f);
    assert_true(header >= 1);
    assert_int_equal(rows, nrows);
    assert_int_equal(cols, ncols);
    assert_int_not_equal(mf_save(m, "/nonexistent-dir/x", NULL, NULL, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "/nonexistent-dir/x"));
  }
  au_node_stop(node);
  mf_free(m);
  mf_ratings_free(&all);
  mf_ratings_free(&train);
  mf_ratings_free(&test);
}

static void test_hogwild_two_threads_reaches_noise(void **state)
{
  (void)state;
  char path[] = "/tmp/augur-mf-factors-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  train_and_check(AU_KERNEL_HOGWILD, 2, path);
  unlink(path);
}

static void test_exact_reaches_noise(void **state)
{
  (void)state;
  train_and_check(AU_KERNEL_ADD, 2, NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hogwild_two_threads_reaches_noise),
      cmocka_unit_test(test_exact_reaches_noise),
  };
  return cmocka_run_group_tests_name("mf", tests, NULL, NULL);
}
