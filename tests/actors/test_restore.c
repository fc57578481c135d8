/* test_restore.c — au_restore refuses what it cannot use without changing the node: a
 * chain (a full checkpoint and an incremental one on it, both with a dense table and an
 * id table) with a byte of either part flipped is refused and the restoring node's rows,
 * dense and id, are as they were; a manifest whose lines do not match its sum=, or
 * (format 2, without one) whose clock is not its directory's, whose base is not of an
 * earlier clock (one that names itself), with a second nodes= line, nodes=0 or without
 * a table's line is refused, naming it; a part changed between the check and the copy
 * says the tables are partly restored; checkpoints into one directory go forward (the same clock
 * again, or an earlier one, is refused and writes nothing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "augur.h"

enum { KEYS = 300, DIM = 4 };
static char dir[128], other[160];

typedef struct model {
  au_node_t *node;
  au_table_t *t;
  au_ids_t *ids;
} model_t;

/* A node with a float table "t" (KEYS x DIM, normal values from `seed`) and an int id
 * table "emb" (DIM), holding ids from..from+n-1 pushed with id-dependent deltas. */
static model_t make(uint64_t seed, uint64_t from, uint64_t n)
{
  model_t m;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &m.node), 0);
  assert_int_equal(au_table_create(m.node,
                                   &(au_table_opts_t){.keys = KEYS,
                                                      .dim = DIM,
                                                      .type = AU_F32,
                                                      .init = AU_INIT_NORMAL,
                                                      .init_b = 0.5,
                                                      .seed = seed,
                                                      .name = "t"},
                                   &m.t),
                   0);
  au_ids_opts_t io = {.row = {.dim = DIM, .type = AU_I32, .name = "emb"}, .budget = 1 << 20};
  assert_int_equal(au_ids_create(m.node, &io, &m.ids), 0);
  for (uint64_t id = from; id < from + n; id++) {
    int32_t d[DIM] = {(int32_t)id, 1, -2, (int32_t)(id * 7)};
    assert_int_equal(au_ids_push(m.ids, &id, 1, d, id), 0);
  }
  return m;
}

typedef struct snap {
  float dense[KEYS * DIM];
  int32_t rows[64][DIM];
  int has[64];
} snap_t;

/* The dense rows, and the id rows of ids from..from+63. */
static void snap(const model_t *m, uint64_t from, snap_t *s)
{
  for (au_key_t k = 0; k < KEYS; k++)
    assert_int_equal(au_table_read(m->t, &k, 1, &s->dense[k * DIM]), 0);
  for (uint64_t i = 0; i < 64; i++) {
    uint64_t id = from + i;
    s->has[i] = au_ids_contains(m->ids, id);
    assert_int_equal(au_ids_read(m->ids, &id, 1, s->rows[i]), 0);
  }
}

static void flip_byte(const char *path, long at)
{
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, at, SEEK_SET), 0);
  int c = fgetc(f);
  assert_true(c != EOF);
  assert_int_equal(fseek(f, at, SEEK_SET), 0);
  fputc(c ^ 0x20, f);
  fclose(f);
}

static void run(const char *cmd)
{
  assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/augur-test-restore-%d", (int)getpid());
  snprintf(other, sizeof(other), "%s-other", dir);
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, other);
  return system(cmd) != 0;
}

/* dir: ckpt-5 (full) and ckpt-6 (incremental on it, other values: a restore of another
 * node's checkpoint between them), written by one node. */
static void write_chain(void)
{
  char cmd[400], err[512] = "";
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, other);
  run(cmd);
  model_t a = make(1, 1, 50), b = make(2, 100, 40);
  assert_int_equal(au_checkpoint(a.node, dir, 5, 1, err, sizeof(err)), 0);
  assert_int_equal(au_checkpoint(b.node, other, 1, 1, err, sizeof(err)), 0);
  assert_int_equal(au_restore(a.node, other, NULL, err, sizeof(err)), 0);
  assert_int_equal(au_checkpoint(a.node, dir, 6, 0, err, sizeof(err)), 0);
  char path[300];
  snprintf(path, sizeof(path), "%s/ckpt-6/manifest.txt", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[256];
  int incremental = 0;
  while (fgets(line, sizeof(line), f)) incremental |= !strcmp(line, "base=ckpt-5\n");
  fclose(f);
  assert_true(incremental);
  au_node_destroy(a.node);
  au_node_destroy(b.node);
}

/* A node with its own rows restores dir and is refused with a message holding `want`;
 * its rows are as they were. */
static void refused_unchanged(const char *want)
{
  model_t c = make(3, 200, 30);
  snap_t before, after;
  snap(&c, 200, &before);
  char err[512] = "";
  assert_int_not_equal(au_restore(c.node, dir, NULL, err, sizeof(err)), 0);
  if (!strstr(err, want)) fail_msg("restore said '%s', not '%s'", err, want);
  snap(&c, 200, &after);
  assert_memory_equal(before.dense, after.dense, sizeof(before.dense));
  assert_memory_equal(before.has, after.has, sizeof(before.has));
  assert_memory_equal(before.rows, after.rows, sizeof(before.rows));
  for (uint64_t id = 1; id < 140; id++) assert_false(au_ids_contains(c.ids, id));
  au_node_destroy(c.node);
}

static void test_refused_restore_changes_nothing(void **state)
{
  (void)state;
  char path[300];
  /* the chain restores (the check that it is a chain that works) */
  write_chain();
  model_t c = make(3, 200, 30);
  uint64_t clock = 0;
  char err[512] = "";
  assert_int_equal(au_restore(c.node, dir, &clock, err, sizeof(err)), 0);
  assert_int_equal(clock, 6);
  assert_true(au_ids_contains(c.ids, 100) && !au_ids_contains(c.ids, 1));
  char sub[300]; /* the incremental one named directly, with a trailing slash: its base beside */
  snprintf(sub, sizeof(sub), "%s/ckpt-6/", dir);
  assert_int_equal(au_restore(c.node, sub, &clock, err, sizeof(err)), 0);
  assert_int_equal(clock, 6);
  assert_false(au_ids_contains(c.ids, 200)); /* emptied first: the checkpoint's rows only */
  au_node_destroy(c.node);
  /* the newest part damaged */
  snprintf(path, sizeof(path), "%s/ckpt-6/part-0.bin", dir);
  flip_byte(path, 40);
  refused_unchanged("ckpt-6/part-0.bin: not the part the manifest names");
  /* the base's part damaged (applied first before: the dense rows were ckpt-5's then) */
  write_chain();
  snprintf(path, sizeof(path), "%s/ckpt-5/part-0.bin", dir);
  flip_byte(path, 100);
  refused_unchanged("ckpt-5/part-0.bin: not the part the manifest names");
}

/* The identity, which on its first call (the base's rows being copied in) damages the
 * newest part: a file changed between the check and the copy. */
static au_key_t damage_newest(void *arg, const au_table_t *t, au_key_t written)
{
  (void)t;
  int *calls = arg;
  if ((*calls)++ == 0) {
    char path[300];
    snprintf(path, sizeof(path), "%s/ckpt-6/part-0.bin", dir);
    flip_byte(path, 40);
  }
  return written;
}

/* A part that changes after every part was checked fails the restore, which says that the
 * tables are partly restored (the base's rows are in): the one failure the two passes
 * leave (the buffer for the parts is allocated before the check). */
static void test_changed_between_passes(void **state)
{
  (void)state;
  write_chain();
  model_t c = make(3, 200, 30);
  char err[512] = "";
  int calls = 0;
  assert_int_equal(au_restore_map(c.node, dir, damage_newest, &calls, NULL, err, sizeof(err)),
                   AU_EIO);
  assert_true(calls > 0);
  assert_non_null(strstr(err, "ckpt-6/part-0.bin: not the part the manifest names"));
  assert_non_null(strstr(err, "partly restored"));
  au_node_destroy(c.node);
}

/* A manifest edited as its checks want it: format 2 (the last without sum=), its sum=
 * line gone, then sed's expression applied. */
static void edit_manifest(const char *sed)
{
  char cmd[800];
  snprintf(cmd, sizeof(cmd),
           "sed -i -e '/^sum=/d' -e 's/^format=3$/format=2/' -e '%s' '%s/ckpt-6/manifest.txt'", sed,
           dir);
  run(cmd);
}

static void test_manifest_refusals(void **state)
{
  (void)state;
  char cmd[600];
  write_chain(); /* any line changed: its checksum no longer matches */
  snprintf(cmd, sizeof(cmd), "sed -i 's/^clock=6$/clock=7/' '%s/ckpt-6/manifest.txt'", dir);
  run(cmd);
  refused_unchanged("its lines do not match their checksum (sum=)");
  write_chain(); /* format 3 without its sum= line */
  snprintf(cmd, sizeof(cmd), "sed -i '/^sum=/d' '%s/ckpt-6/manifest.txt'", dir);
  run(cmd);
  refused_unchanged("no checksum line (sum=)");
  write_chain(); /* (format 2, no checksum:) a clock that is not its directory's */
  edit_manifest("s/^clock=6$/clock=7/");
  refused_unchanged("clock=7, but its directory is ckpt-6");
  write_chain(); /* ckpt-6 names itself as its base: a loop */
  edit_manifest("s/^base=ckpt-5$/base=ckpt-6/");
  refused_unchanged("its base ckpt-6 is not of an earlier clock");
  write_chain(); /* a second nodes= line */
  edit_manifest("s/^nodes=1$/nodes=1\\nnodes=1/");
  refused_unchanged("nodes= twice");
  write_chain(); /* no node */
  edit_manifest("s/^nodes=1$/nodes=0/");
  refused_unchanged("nodes=0, expected 1..65536");
  write_chain(); /* the dense table's line gone */
  edit_manifest("/^table=0 /d");
  refused_unchanged("0 table= and 1 idtable= lines, for 1 and 1 tables");
}

static void test_checkpoints_go_forward(void **state)
{
  (void)state;
  char cmd[400], err[512] = "";
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  run(cmd);
  model_t a = make(1, 1, 20);
  assert_int_equal(au_checkpoint(a.node, dir, 5, 1, err, sizeof(err)), 0);
  for (int full = 0; full < 2; full++) { /* the same clock again, or an earlier one */
    err[0] = 0;
    assert_int_equal(au_checkpoint(a.node, dir, 5, full, err, sizeof(err)), AU_EINVAL);
    assert_non_null(strstr(err, "clock 5 is not after this node's last checkpoint"));
    assert_int_equal(au_checkpoint(a.node, dir, 4, full, err, sizeof(err)), AU_EINVAL);
  }
  char path[300];
  snprintf(path, sizeof(path), "%s/ckpt-4", dir);
  assert_int_not_equal(access(path, F_OK), 0); /* nothing written */
  assert_int_equal(au_checkpoint(a.node, dir, 6, 0, err, sizeof(err)), 0);
  model_t c = make(3, 200, 5);
  uint64_t clock = 0;
  assert_int_equal(au_restore(c.node, dir, &clock, err, sizeof(err)), 0);
  assert_int_equal(clock, 6);
  au_node_destroy(c.node);
  au_node_destroy(a.node);
}

/* A directory whose path would not fit the files' paths is refused by name, not cut
 * short into another directory: checkpoint, restore, find and prune. */
static void test_directory_too_long(void **state)
{
  (void)state;
  char err[512] = "", *longdir = malloc(4200), found[64];
  memset(longdir, 'a', 4100);
  memcpy(longdir, "/tmp/", 5);
  longdir[4100] = '\0';
  model_t a = make(1, 1, 20);
  assert_int_equal(au_checkpoint(a.node, longdir, 1, 1, err, sizeof(err)), AU_EINVAL);
  assert_non_null(strstr(err, "checkpoint: the directory's path is 4100 bytes long, at most 4000"));
  err[0] = 0;
  uint64_t clock = 0;
  assert_int_equal(au_restore(a.node, longdir, &clock, err, sizeof(err)), AU_EINVAL);
  assert_non_null(strstr(err, "restore: the directory's path is 4100 bytes long"));
  int nodes = 0, removed = 0;
  assert_int_equal(au_checkpoint_find(longdir, found, sizeof(found), &nodes), AU_EINVAL);
  assert_int_equal(au_checkpoint_prune(longdir, 1, &removed, err, sizeof(err)), AU_EINVAL);
  assert_non_null(strstr(err, "checkpoint prune: the directory's path"));
  longdir[4000] = '\0'; /* at the limit: not refused for its length (the file system refuses a name
                           of 3995 bytes) */
  err[0] = 0;
  assert_int_not_equal(au_checkpoint(a.node, longdir, 1, 1, err, sizeof(err)), AU_EINVAL);
  assert_null(strstr(err, "bytes long"));
  au_node_destroy(a.node);
  free(longdir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused_restore_changes_nothing),
      cmocka_unit_test(test_manifest_refusals),
      cmocka_unit_test(test_changed_between_passes),
      cmocka_unit_test(test_checkpoints_go_forward),
      cmocka_unit_test(test_directory_too_long),
  };
  return cmocka_run_group_tests_name("restore", tests, setup, teardown);
}
