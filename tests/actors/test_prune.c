/* test_prune.c — au_checkpoint_prune: real checkpoints of one node (full at clocks 1, 4
 * and 7, incremental between), then pruning keeps the last `keep` full ones and what
 * follows them, leaves what is not a checkpoint alone, and a restore still reads the
 * latest; bad arguments are refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "augur.h"

static char dir[128];

static int exists(const char *name)
{
  char p[1024];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  struct stat st;
  return stat(p, &st) == 0;
}

static void touch(const char *name)
{
  char p[1024];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs("x\n", f);
  fclose(f);
}

static void test_prune(void **state)
{
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/augur-test-prune-%d", (int)getpid());
  au_node_t *node;
  au_table_t *t;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &node), 0);
  assert_int_equal(au_table_create(node,
                                   &(au_table_opts_t){.keys = 1000,
                                                      .dim = 4,
                                                      .type = AU_F32,
                                                      .init = AU_INIT_NORMAL,
                                                      .init_b = 0.1,
                                                      .name = "t"},
                                   &t),
                   0);
  char err[512] = "";
  for (uint64_t c = 1; c <= 7; c++)
    assert_int_equal(au_checkpoint(node, dir, c, c == 1 || c == 4 || c == 7, err, sizeof(err)), 0);
  /* not checkpoints: left alone */
  char p[512];
  snprintf(p, sizeof(p), "%s/ckpt-x", dir);
  assert_int_equal(mkdir(p, 0777), 0);
  touch("notes.txt");
  touch("ckpt-12a");
  /* an unfinished one (no manifest), older than everything kept: it goes too */
  snprintf(p, sizeof(p), "%s/ckpt-0", dir);
  assert_int_equal(mkdir(p, 0777), 0);
  touch("ckpt-0/part-0.bin.tmp");

  int removed = -1;
  assert_int_equal(au_checkpoint_prune(dir, 0, &removed, err, sizeof(err)), 0); /* keep all */
  assert_int_equal(removed, 0);
  assert_true(exists("ckpt-1") && exists("ckpt-0"));

  assert_int_equal(au_checkpoint_prune(dir, 2, &removed, err, sizeof(err)), 0);
  assert_int_equal(removed, 4); /* 0, 1, 2, 3: older than the full one at 4 */
  for (int c = 0; c <= 3; c++) {
    snprintf(p, sizeof(p), "ckpt-%d", c);
    assert_false(exists(p));
  }
  for (int c = 4; c <= 7; c++) {
    snprintf(p, sizeof(p), "ckpt-%d/manifest.txt", c);
    assert_true(exists(p));
  }
  assert_true(exists("ckpt-x") && exists("notes.txt") && exists("ckpt-12a") && exists("LATEST"));
  assert_int_equal(au_checkpoint_prune(dir, 2, &removed, err, sizeof(err)), 0); /* again */
  assert_int_equal(removed, 0);
  assert_int_equal(au_checkpoint_prune(dir, 5, &removed, err, sizeof(err)), 0); /* 2 fulls */
  assert_int_equal(removed, 0);

  /* the latest still restores, on a fresh node */
  au_node_t *n2;
  au_table_t *t2;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &n2), 0);
  assert_int_equal(
      au_table_create(
          n2,
          &(au_table_opts_t){
              .keys = 1000, .dim = 4, .type = AU_F32, .init = AU_INIT_ZERO, .name = "t"},
          &t2),
      0);
  uint64_t clock = 0;
  assert_int_equal(au_restore(n2, dir, &clock, err, sizeof(err)), 0);
  assert_int_equal(clock, 7);
  float a[4], b[4];
  for (au_key_t k = 0; k < 1000; k += 97) {
    assert_int_equal(au_table_read(t, &k, 1, a), 0);
    assert_int_equal(au_table_read(t2, &k, 1, b), 0);
    assert_memory_equal(a, b, sizeof(a));
  }
  au_node_destroy(n2);

  assert_int_equal(au_checkpoint_prune(dir, 1, &removed, err, sizeof(err)), 0);
  assert_int_equal(removed, 3); /* 4, 5, 6 */
  assert_true(exists("ckpt-7/manifest.txt") && !exists("ckpt-6") && !exists("ckpt-4"));

  /* bad arguments */
  assert_int_equal(au_checkpoint_prune(dir, -1, &removed, err, sizeof(err)), AU_EINVAL);
  assert_int_equal(au_checkpoint_prune(NULL, 1, &removed, err, sizeof(err)), AU_EINVAL);
  err[0] = '\0';
  assert_int_equal(au_checkpoint_prune("/nonexistent/augur-prune", 1, &removed, err, sizeof(err)),
                   AU_EINVAL);
  assert_non_null(strstr(err, "/nonexistent/augur-prune"));

  au_node_destroy(node);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_prune)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
