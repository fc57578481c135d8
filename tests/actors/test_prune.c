/* test_prune.c — au_checkpoint_prune: real checkpoints of one node (full at clocks 1, 4
 * and 7, incremental between), then pruning keeps the last `keep` full ones and what
 * follows them, leaves what is not a checkpoint alone (a link to a directory outside, a
 * file, a name with a leading zero), and a restore still reads the latest; a new run into
 * a directory of an older run's higher clocks keeps LATEST's chain; bad arguments are
 * refused. */
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

/* A node of one thread with a float table "t" of keys x dim, values normal(0, sd). */
static au_node_t *node_with_table(uint64_t keys, uint32_t dim, double sd, au_table_t **t)
{
  au_node_t *node;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &node), 0);
  assert_int_equal(au_table_create(node,
                                   &(au_table_opts_t){.keys = keys,
                                                      .dim = dim,
                                                      .type = AU_F32,
                                                      .init = AU_INIT_NORMAL,
                                                      .init_b = sd,
                                                      .name = "t"},
                                   t),
                   0);
  return node;
}

/* DIR restores on a fresh node to clock `clock`, and every step-th key of it reads as it
 * does in t (keys x dim floats). */
static void assert_restores(au_table_t *t, uint64_t keys, uint32_t dim, uint64_t step,
                            uint64_t clock)
{
  au_table_t *t2;
  au_node_t *fresh = node_with_table(keys, dim, 0, &t2);
  uint64_t got = 0;
  char err[512] = "";
  assert_int_equal(au_restore(fresh, dir, &got, err, sizeof(err)), 0);
  assert_int_equal(got, clock);
  float a[16], b[16];
  assert_true(dim <= 16);
  for (au_key_t k = 0; k < keys; k += step) {
    assert_int_equal(au_table_read(t, &k, 1, a), 0);
    assert_int_equal(au_table_read(t2, &k, 1, b), 0);
    assert_memory_equal(a, b, dim * sizeof(float));
  }
  au_node_destroy(fresh);
}

static void test_prune(void **state)
{
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/augur-test-prune-%d", (int)getpid());
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s-outside'", dir, dir);
  assert_int_equal(system(cmd), 0);
  au_table_t *t;
  au_node_t *node = node_with_table(1000, 4, 0.1, &t);
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
  assert_restores(t, 1000, 4, 97, 7);

  /* what looks like a checkpoint but is not one is left: a link to a directory outside
   * (and what is in it), a file, a name with a leading zero */
  char out[300];
  snprintf(out, sizeof(out), "%s-outside", dir);
  assert_int_equal(mkdir(out, 0777), 0);
  snprintf(p, sizeof(p), "%s/keep.txt", out);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(p, sizeof(p), "%s/ckpt-3", dir);
  assert_int_equal(symlink(out, p), 0);
  touch("ckpt-2");
  snprintf(p, sizeof(p), "%s/ckpt-003", dir);
  assert_int_equal(mkdir(p, 0777), 0);
  touch("ckpt-003/part-0.bin");

  assert_int_equal(au_checkpoint_prune(dir, 1, &removed, err, sizeof(err)), 0);
  assert_int_equal(removed, 3); /* 4, 5, 6 */
  assert_true(exists("ckpt-7/manifest.txt") && !exists("ckpt-6") && !exists("ckpt-4"));
  snprintf(p, sizeof(p), "%s/keep.txt", out);
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  assert_true(exists("ckpt-3") && exists("ckpt-2") && exists("ckpt-003/part-0.bin"));

  /* bad arguments */
  assert_int_equal(au_checkpoint_prune(dir, -1, &removed, err, sizeof(err)), AU_EINVAL);
  assert_int_equal(au_checkpoint_prune(NULL, 1, &removed, err, sizeof(err)), AU_EINVAL);
  err[0] = '\0';
  assert_int_equal(au_checkpoint_prune("/nonexistent/augur-prune", 1, &removed, err, sizeof(err)),
                   AU_EINVAL);
  assert_non_null(strstr(err, "/nonexistent/augur-prune"));

  au_node_destroy(node);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s-outside'", dir, dir);
  assert_int_equal(system(cmd), 0);
}

/* A new run into a DIR that holds an older run's checkpoints of higher clocks: LATEST's
 * chain stays, whatever the clocks say. */
static void test_prune_keeps_latest_chain(void **state)
{
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/augur-test-prune2-%d", (int)getpid());
  char cmd[600], err[512] = "";
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  au_table_t *t;
  au_node_t *old = node_with_table(100, 2, 0.1, &t);
  for (uint64_t c = 1; c <= 21; c++)
    assert_int_equal(au_checkpoint(old, dir, c, c % 10 == 1, err, sizeof(err)), 0);
  au_node_destroy(old);
  au_node_t *now = node_with_table(100, 2, 0.5, &t); /* other values */
  assert_int_equal(au_checkpoint(now, dir, 1, 1, err, sizeof(err)), 0);
  assert_int_equal(au_checkpoint(now, dir, 2, 0, err, sizeof(err)), 0); /* on ckpt-1 */
  int removed = -1;
  assert_int_equal(au_checkpoint_prune(dir, 2, &removed, err, sizeof(err)), 0);
  assert_int_equal(removed, 8); /* 3..10: the older run's, below its full one at 11 */
  assert_true(exists("ckpt-1/manifest.txt") && exists("ckpt-2/manifest.txt"));
  assert_false(exists("ckpt-3") || exists("ckpt-10"));
  assert_restores(t, 100, 2, 7, 2);
  au_node_destroy(now);
  assert_int_equal(system(cmd), 0);
}

/* An incremental checkpoint sees a row change that keeps its sum: -1 in one count and +1
 * in another 4096 counts further (words 0 and 2048 of a wide row: a checksum whose word
 * constants repeated every 2048 words missed it). */
enum { WIDE = 8192 };

typedef struct pusher {
  au_table_t *t;
  int32_t a, b; /* added to counts 0 and 4096 of row 5, once */
  int done;
} pusher_t;

static int push_move(au_worker_t *w, void *arg)
{
  pusher_t *p = arg;
  if (p->done) return AU_DONE;
  static int32_t d[WIDE];
  d[0] = p->a, d[4096] = p->b;
  au_key_t k = 5;
  p->done = 1;
  int rc = au_worker_push(w, p->t, &k, 1, d);
  return rc ? rc : AU_CONTINUE;
}

static void test_incremental_wide_rows(void **state)
{
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/augur-test-prune3-%d", (int)getpid());
  char cmd[600], err[512] = "";
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  au_node_t *node, *fresh;
  au_table_t *t, *t2;
  const au_table_opts_t o = {.keys = 16, .dim = WIDE, .type = AU_I32, .name = "counts"};
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &node), 0);
  assert_int_equal(au_table_create(node, &o, &t), 0);
  pusher_t p = {.t = t, .a = 5, .b = 5}; /* counts of 5, then one moved from 0 to 4096 */
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){push_move, &p}, NULL), 0);
  assert_int_equal(au_node_run(node), 0);
  assert_int_equal(au_checkpoint(node, dir, 1, 1, err, sizeof(err)), 0);
  pusher_t q = {.t = t, .a = -1, .b = 1};
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){push_move, &q}, NULL), 0);
  assert_int_equal(au_node_run(node), 0);
  assert_int_equal(au_checkpoint(node, dir, 2, 0, err, sizeof(err)), 0); /* incremental */
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &fresh), 0);
  assert_int_equal(au_table_create(fresh, &o, &t2), 0);
  assert_int_equal(au_restore(fresh, dir, NULL, err, sizeof(err)), 0);
  static int32_t row[WIDE];
  au_key_t k = 5;
  assert_int_equal(au_table_read(t2, &k, 1, row), 0);
  assert_int_equal(row[0], 4);
  assert_int_equal(row[4096], 6);
  au_node_destroy(fresh);
  au_node_destroy(node);
  assert_int_equal(system(cmd), 0);
}

/* An incremental checkpoint sees a row whose change moved only the top bit of two 64-bit
 * words: floats 1 and 3 of [1, 2, 3, 4] negated (2^63 added to words 0 and 1). Summed
 * times odd constants, the two changes cancelled and the row was left out (until
 * 2026-12-07). */
typedef struct fpusher {
  au_table_t *t;
  float d[4];
  int done;
} fpusher_t;

static int push_floats(au_worker_t *w, void *arg)
{
  fpusher_t *p = arg;
  if (p->done) return AU_DONE;
  au_key_t k = 0;
  p->done = 1;
  int rc = au_worker_push(w, p->t, &k, 1, p->d);
  return rc ? rc : AU_CONTINUE;
}

static void test_incremental_sign_flips(void **state)
{
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/augur-test-prune4-%d", (int)getpid());
  char cmd[600], err[512] = "";
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  au_node_t *node, *fresh;
  au_table_t *t, *t2;
  const au_table_opts_t o = {.keys = 1, .dim = 4, .type = AU_F32, .name = "t"};
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &node), 0);
  assert_int_equal(au_table_create(node, &o, &t), 0);
  fpusher_t p = {.t = t, .d = {1, 2, 3, 4}};
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){push_floats, &p}, NULL), 0);
  assert_int_equal(au_node_run(node), 0);
  assert_int_equal(au_checkpoint(node, dir, 1, 1, err, sizeof(err)), 0);
  fpusher_t q = {.t = t, .d = {0, -4, 0, -8}}; /* 2 -> -2, 4 -> -4 */
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){push_floats, &q}, NULL), 0);
  assert_int_equal(au_node_run(node), 0);
  assert_int_equal(au_checkpoint(node, dir, 2, 0, err, sizeof(err)), 0); /* incremental */
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &fresh), 0);
  assert_int_equal(au_table_create(fresh, &o, &t2), 0);
  assert_int_equal(au_restore(fresh, dir, NULL, err, sizeof(err)), 0);
  float row[4], want[4] = {1, -2, 3, -4};
  au_key_t k = 0;
  assert_int_equal(au_table_read(t2, &k, 1, row), 0);
  assert_memory_equal(row, want, sizeof(row));
  au_node_destroy(fresh);
  au_node_destroy(node);
  assert_int_equal(system(cmd), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prune), cmocka_unit_test(test_prune_keeps_latest_chain),
      cmocka_unit_test(test_incremental_wide_rows), cmocka_unit_test(test_incremental_sign_flips)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
