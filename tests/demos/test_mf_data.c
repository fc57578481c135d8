/* test_mf_data.c — mfdata: every loader on small files in a temp dir (exact contents,
 * then malformed inputs whose messages must name the file and line), id maps, the
 * generator (determinism, coverage, skew), split and shuffle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"

static char dir[64];

static int make_dir(void **state)
{
  (void)state;
  strcpy(dir, "/tmp/test_mf_data.XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
  (void)state;
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *e;
  char path[512];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  return rmdir(dir);
}

/* Writes content to dir/name; returns the path (static: use before the next call). */
static const char *write_file(const char *name, const char *content)
{
  static char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(content, 1, strlen(content), f), strlen(content));
  assert_int_equal(fclose(f), 0);
  return path;
}

typedef struct {
  mf_idmap_t rows, cols;
  mf_ratings_t r;
  size_t skipped;
  char err[256];
} loaded_t;

static int load(loaded_t *l, const char *name, const char *content, mf_format_t fmt)
{
  memset(l, 0, sizeof(*l));
  return mf_load(write_file(name, content), fmt, &l->rows, &l->cols, 1, &l->r, &l->skipped, l->err,
                 sizeof(l->err));
}

static void loaded_free(loaded_t *l)
{
  mf_idmap_free(&l->rows);
  mf_idmap_free(&l->cols);
  mf_ratings_free(&l->r);
}

static void assert_rating(const loaded_t *l, size_t i, uint64_t row_id, uint64_t col_id,
                          float value)
{
  assert_true(i < l->r.n);
  const mf_rating_t *x = &l->r.r[i];
  assert_true(x->row < l->rows.n && x->col < l->cols.n);
  assert_int_equal(l->rows.ids[x->row], row_id);
  assert_int_equal(l->cols.ids[x->col], col_id);
  assert_true(x->value == value);
}

static void assert_ids(const mf_idmap_t *m, const uint64_t *ids, size_t n)
{
  assert_int_equal(m->n, n);
  for (size_t i = 0; i < n; i++) assert_int_equal(m->ids[i], ids[i]);
}

/* ---- formats, exact contents ------------------------------------------------------- */

static void test_csv(void **state)
{
  (void)state;
  loaded_t l;
  /* Header, blank line, a line without timestamp, no final newline. */
  assert_int_equal(load(&l, "a.csv",
                        "userId,movieId,rating,timestamp\n10,200,4.5,999\n\n7,200,3,1\n"
                        "10,300,2.5",
                        MF_FMT_CSV),
                   0);
  assert_int_equal(l.r.n, 3);
  assert_ids(&l.rows, (uint64_t[]){10, 7}, 2);
  assert_ids(&l.cols, (uint64_t[]){200, 300}, 2);
  assert_int_equal(l.r.r[0].row, 0);
  assert_int_equal(l.r.r[1].row, 1);
  assert_int_equal(l.r.r[2].col, 1);
  assert_rating(&l, 0, 10, 200, 4.5f);
  assert_rating(&l, 1, 7, 200, 3.0f);
  assert_rating(&l, 2, 10, 300, 2.5f);
  assert_int_equal(l.skipped, 0);
  loaded_free(&l);
  /* a UTF-8 byte-order mark: not part of the first id (its rating was taken for a header),
     nor of a header */
  assert_int_equal(load(&l, "bom.csv",
                        "\xef\xbb\xbf"
                        "10,200,4.5\n7,200,3\n",
                        MF_FMT_CSV),
                   0);
  assert_int_equal(l.r.n, 2);
  assert_rating(&l, 0, 10, 200, 4.5f);
  loaded_free(&l);
  assert_int_equal(load(&l, "bomh.csv",
                        "\xef\xbb\xbf"
                        "userId,movieId,rating\n7,200,3\n",
                        MF_FMT_CSV),
                   0);
  assert_int_equal(l.r.n, 1);
  loaded_free(&l);
}

static void test_udata(void **state)
{
  (void)state;
  loaded_t l;
  assert_int_equal(load(&l, "u.data",
                        "196\t242\t3\t881250949\n186\t302\t3\t891717742\n"
                        "196\t302\t1\t1\n",
                        MF_FMT_UDATA),
                   0);
  assert_int_equal(l.r.n, 3);
  assert_ids(&l.rows, (uint64_t[]){196, 186}, 2);
  assert_ids(&l.cols, (uint64_t[]){242, 302}, 2);
  assert_rating(&l, 0, 196, 242, 3);
  assert_rating(&l, 1, 186, 302, 3);
  assert_rating(&l, 2, 196, 302, 1);
  loaded_free(&l);
}

static void test_dat(void **state)
{
  (void)state;
  loaded_t l;
  assert_int_equal(load(&l, "ratings.dat",
                        "1::1193::5::978300760\n1::661::3::978302109\n2::1193::4.5::1\n",
                        MF_FMT_DAT),
                   0);
  assert_int_equal(l.r.n, 3);
  assert_ids(&l.rows, (uint64_t[]){1, 2}, 2);
  assert_ids(&l.cols, (uint64_t[]){1193, 661}, 2);
  assert_rating(&l, 0, 1, 1193, 5);
  assert_rating(&l, 1, 1, 661, 3);
  assert_rating(&l, 2, 2, 1193, 4.5f);
  loaded_free(&l);
}

static void test_triples(void **state)
{
  (void)state;
  loaded_t l;
  assert_int_equal(load(&l, "t.txt",
                        "# row col value\n5 0 1.5\n   \n3\t1   -2e-1\n5 1 7\n"
                        "18446744073709551614 0 0.125\n", /* the largest id (the next: none) */
                        MF_FMT_TRIPLES),
                   0);
  assert_int_equal(l.r.n, 4);
  assert_ids(&l.rows, (uint64_t[]){5, 3, UINT64_MAX - 1}, 3);
  assert_ids(&l.cols, (uint64_t[]){0, 1}, 2);
  assert_rating(&l, 0, 5, 0, 1.5f);
  assert_rating(&l, 1, 3, 1, -0.2f);
  assert_rating(&l, 2, 5, 1, 7);
  assert_rating(&l, 3, UINT64_MAX - 1, 0, 0.125f);
  loaded_free(&l);
}

static void test_mm(void **state)
{
  (void)state;
  loaded_t l;
  assert_int_equal(load(&l, "g.mtx",
                        "%%MatrixMarket matrix coordinate real general\n% a comment\n%\n"
                        "3 4 3\n2 4 1.25\n1 1 -3\n2 1 1e2\n",
                        MF_FMT_MM),
                   0);
  assert_int_equal(l.r.n, 3);
  assert_ids(&l.rows, (uint64_t[]){2, 1}, 2);
  assert_ids(&l.cols, (uint64_t[]){4, 1}, 2);
  assert_rating(&l, 0, 2, 4, 1.25f);
  assert_rating(&l, 1, 1, 1, -3);
  assert_rating(&l, 2, 2, 1, 100);
  loaded_free(&l);

  /* integer field, case-insensitive banner, symmetric: off-diagonal entries mirrored. */
  assert_int_equal(load(&l, "s.mtx",
                        "%%MatrixMarket MATRIX coordinate integer symmetric\n3 3 3\n1 1 5\n"
                        "3 1 2\n3 2 7\n",
                        MF_FMT_MM),
                   0);
  assert_int_equal(l.r.n, 5);
  assert_rating(&l, 0, 1, 1, 5);
  assert_rating(&l, 1, 3, 1, 2);
  assert_rating(&l, 2, 1, 3, 2);
  assert_rating(&l, 3, 3, 2, 7);
  assert_rating(&l, 4, 2, 3, 7);
  loaded_free(&l);

  /* An empty coordinate matrix is valid. */
  assert_int_equal(
      load(&l, "e.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 0\n", MF_FMT_MM), 0);
  assert_int_equal(l.r.n, 0);
  loaded_free(&l);
}

static void test_crlf(void **state)
{
  (void)state;
  loaded_t l;
  assert_int_equal(
      load(&l, "crlf.csv", "userId,movieId,rating\r\n1,2,3.5\r\n\r\n4,2,1\r\n", MF_FMT_CSV), 0);
  assert_int_equal(l.r.n, 2);
  assert_rating(&l, 0, 1, 2, 3.5f);
  assert_rating(&l, 1, 4, 2, 1);
  loaded_free(&l);
  assert_int_equal(load(&l, "crlf.dat", "1::2::3::4\r\n5::6::7\r\n", MF_FMT_DAT), 0);
  assert_int_equal(l.r.n, 2);
  assert_rating(&l, 1, 5, 6, 7);
  loaded_free(&l);
  assert_int_equal(load(&l, "crlf.mtx",
                        "%%MatrixMarket matrix coordinate real general\r\n2 2 1\r\n2 1 0.5\r\n",
                        MF_FMT_MM),
                   0);
  assert_int_equal(l.r.n, 1);
  assert_rating(&l, 0, 2, 1, 0.5f);
  loaded_free(&l);
}

/* ---- malformed input --------------------------------------------------------------- */

typedef struct {
  mf_format_t fmt;
  const char *content;
  const char *at;   /* ":LINE:" expected right after the path */
  const char *also; /* another substring the message must hold */
} bad_case_t;

static void test_malformed(void **state)
{
  (void)state;
  static const bad_case_t cases[] = {
      {MF_FMT_CSV, "1,2,3\n4,5,6\nabc,3\n",
       ":3:", "expected 'user,item,rating[,timestamp]', got 'abc,3'"},
      {MF_FMT_CSV, "abc,3\n", ":1:", "got 'abc,3'"},
      {MF_FMT_CSV, "1,2,3\n1,2\n", ":2:", "got '1,2'"},
      {MF_FMT_CSV, "1,2,3,4,5\n", ":1:", "expected"},
      {MF_FMT_CSV, "1,2,3\n\n1,3,nan\n", ":3:", "within +-1e9"},
      {MF_FMT_CSV, "1,2,3,noon\n", ":1:", "noon"},
      {MF_FMT_CSV, "1,2,3\nuserId,movieId,rating\n", ":2:", "userId"},
      {MF_FMT_CSV, "1,2,3x\n", ":1:", "3x"},
      {MF_FMT_CSV, "1,2,0x10\n", ":1:", "0x10"},            /* decimal only */
      {MF_FMT_CSV, "1,2,3\r\n1,2\r\n", ":2:", "got '1,2'"}, /* CR not shown */
      {MF_FMT_UDATA, "1\t2\t3\t4\n5\t6\n", ":2:", "expected 'user<TAB>item"},
      {MF_FMT_UDATA, "1\t2\tx\t4\n", ":1:", "got '1\t2\tx\t4'"},
      {MF_FMT_DAT, "1::2::3::4\n1::2:3::4\n", ":2:", "expected 'user::item::rating"},
      {MF_FMT_DAT, "1::2::inf\n", ":1:", "within +-1e9"},
      {MF_FMT_TRIPLES, "0 0 1\n# c\n0 1\n", ":3:", "expected 'row col value', got '0 1'"},
      {MF_FMT_TRIPLES, "0 0 1 5\n", ":1:", "got '0 0 1 5'"},
      {MF_FMT_TRIPLES, "-1 0 1\n", ":1:", "-1"},
      {MF_FMT_TRIPLES, "18446744073709551616 0 1\n", ":1:", "expected"},
      {MF_FMT_TRIPLES, "0 0 1\n18446744073709551615 0 1\n",
       ":2:", "expected ids below 18446744073709551615"},
      {MF_FMT_CSV, "-1,10,4\n", ":1:", "got '-1,10,4'"}, /* not a header: a bad first line */
      {MF_FMT_CSV, "1.5,10,4\n", ":1:", "got '1.5,10,4'"},
      {MF_FMT_TRIPLES, "0 0 1\n0 1 1e999\n", ":2:", "within +-1e9"},
      {MF_FMT_TRIPLES, "0 0 1\n0 1 1e38\n", ":2:", "within +-1e9"},      /* float range, */
      {MF_FMT_TRIPLES, "0 0 1\n0 1 -1000000001\n", ":2:", "within +-1e9"}, /* or past 1e9 */
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n2 2 2\n",
       ":4:", "expected 3 entries"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 2\n",
       ":4:", "got '2 2 2'"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n",
       ":3:", "row in 1..2"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 0 1.0\n",
       ":3:", "col in 1..2"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real general\n%\n2 2 1\n1 1 nan\n",
       ":4:", "within +-1e9"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real general\n2 2\n", ":2:", "size line"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real general\n% only comments\n",
       ":2:", "end of the file"},
      {MF_FMT_MM, "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", ":1:", "array"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
       ":1:", "'complex' and 'pattern' matrices are not supported"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate pattern general\n1 1 1\n1 1\n",
       ":1:", "'complex' and 'pattern' matrices are not supported"},
      {MF_FMT_MM, "%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n", ":2:", "square"},
      {MF_FMT_MM, "2 2 1\n1 1 1\n", ":1:", "%%MatrixMarket"},
      {MF_FMT_MM, "", ":1:", "empty file"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const bad_case_t *c = &cases[i];
    char name[32], want[600];
    snprintf(name, sizeof(name), "bad%zu.txt", i);
    loaded_t l;
    int rc = load(&l, name, c->content, c->fmt);
    snprintf(want, sizeof(want), "%s/%s%s", dir, name, c->at);
    if (rc != MF_EPARSE || strncmp(l.err, want, strlen(want)) || !strstr(l.err, c->also))
      fail_msg("case %zu (%s): rc %d, err '%s'; want '%s...' holding '%s'", i,
               mf_format_name(c->fmt), rc, l.err, want, c->also);
    assert_int_equal(l.r.n, 0); /* rolled back */
    loaded_free(&l);
  }
}

static void test_long_line_truncated(void **state)
{
  (void)state;
  char content[400];
  memset(content, 'x', 300);
  strcpy(content + 300, "\n");
  loaded_t l;
  assert_int_equal(load(&l, "long.txt", content, MF_FMT_TRIPLES), MF_EPARSE);
  assert_non_null(strstr(l.err, ":1:"));
  assert_non_null(strstr(l.err, "xxx...'"));
  assert_true(strlen(l.err) < 200);
  loaded_free(&l);
}

static void test_missing_file(void **state)
{
  (void)state;
  char path[128], err[256] = "", want[300];
  snprintf(path, sizeof(path), "%s/no-such-file.csv", dir);
  mf_idmap_t rows = {0}, cols = {0};
  mf_ratings_t r = {0};
  assert_int_equal(mf_load(path, MF_FMT_AUTO, &rows, &cols, 1, &r, NULL, err, sizeof(err)), MF_EIO);
  snprintf(want, sizeof(want), "%s: No such file or directory", path);
  assert_string_equal(err, want);
  assert_int_equal(r.n, 0);
}

static void test_unknown_ids_skipped(void **state)
{
  (void)state;
  loaded_t l;
  assert_int_equal(load(&l, "train.csv", "1,10,1\n2,20,2\n", MF_FMT_CSV), 0);
  const char *path = write_file("test.csv", "1,20,5\n3,10,4\n2,30,3\n2,10,1\n9,99,0\n");
  size_t before = l.r.n;
  assert_int_equal(
      mf_load(path, MF_FMT_CSV, &l.rows, &l.cols, 0, &l.r, &l.skipped, l.err, sizeof(l.err)), 0);
  assert_int_equal(l.skipped, 3);
  assert_int_equal(l.r.n, before + 2);
  assert_int_equal(l.rows.n, 2); /* maps unchanged */
  assert_int_equal(l.cols.n, 2);
  assert_rating(&l, before, 1, 20, 5);
  assert_rating(&l, before + 1, 2, 10, 1);
  loaded_free(&l);
}

/* ---- formats by name --------------------------------------------------------------- */

static void test_detect(void **state)
{
  (void)state;
  static const struct {
    const char *name, *content;
    mf_format_t want;
  } cases[] = {
      {"ratings.csv", "", MF_FMT_CSV},
      {"u.data", "", MF_FMT_UDATA},
      {"u1.base.data", "", MF_FMT_UDATA},
      {"ratings.dat", "", MF_FMT_DAT},
      {"m.mtx", "", MF_FMT_MM},
      {"m.MM", "", MF_FMT_MM},
      {"noext", "%%MatrixMarket matrix coordinate real general\n1 1 0\n", MF_FMT_MM},
      {"a.txt", "\n1::2::3::4\n", MF_FMT_DAT},
      {"b.txt", "userId,movieId,rating\n", MF_FMT_CSV},
      {"c.txt", "1\t2\t3\t4\n", MF_FMT_UDATA},
      {"d.txt", "# a, b\n0 1 2.5\n", MF_FMT_TRIPLES},
      {"e.txt", "", MF_FMT_TRIPLES},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    mf_format_t got = mf_format_detect(write_file(cases[i].name, cases[i].content));
    if (got != cases[i].want)
      fail_msg("%s: detected %s, want %s", cases[i].name, mf_format_name(got),
               mf_format_name(cases[i].want));
  }
  /* MF_FMT_AUTO in mf_load uses it. */
  loaded_t l;
  assert_int_equal(load(&l, "auto.dat", "7::8::2.5::0\n", MF_FMT_AUTO), 0);
  assert_int_equal(l.r.n, 1);
  assert_rating(&l, 0, 7, 8, 2.5f);
  loaded_free(&l);

  static const char *const names[] = {"auto", "csv", "udata", "dat", "triples", "mm"};
  static const mf_format_t fmts[] = {MF_FMT_AUTO, MF_FMT_CSV,     MF_FMT_UDATA,
                                     MF_FMT_DAT,  MF_FMT_TRIPLES, MF_FMT_MM};
  for (int i = 0; i < 6; i++) {
    mf_format_t f = MF_FMT_MM + 1;
    assert_int_equal(mf_format_parse(names[i], &f), 0);
    assert_int_equal(f, fmts[i]);
    assert_string_equal(mf_format_name(f), names[i]);
  }
  mf_format_t f;
  assert_int_equal(mf_format_parse("libsvm", &f), MF_EINVAL);
  assert_int_equal(mf_format_parse("CSV", &f), MF_EINVAL);
}

/* ---- id maps ----------------------------------------------------------------------- */

static void test_idmap(void **state)
{
  (void)state;
  enum { N = 100000 };
  mf_idmap_t m = {0};
  uint32_t idx;
  assert_int_equal(mf_idmap_find(&m, 5, &idx), 0);
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int round = 0; round < 2; round++) {
    uint64_t y = x;
    for (uint32_t i = 0; i < N; i++) {
      y ^= y << 13, y ^= y >> 7, y ^= y << 17;
      assert_int_equal(mf_idmap_insert(&m, y, &idx), 0);
      assert_int_equal(idx, i); /* first-seen order; the second round finds the same */
    }
  }
  assert_int_equal(m.n, N);
  uint64_t y = x;
  for (uint32_t i = 0; i < N; i++) {
    y ^= y << 13, y ^= y >> 7, y ^= y << 17;
    assert_int_equal(m.ids[i], y);
    assert_int_equal(mf_idmap_find(&m, y, &idx), 1);
    assert_int_equal(idx, i);
  }
  assert_int_equal(mf_idmap_find(&m, 0, &idx), 0);
  mf_idmap_free(&m);

  /* Ids too large for the direct array at first go to the table; once the map has
   * grown, the direct array covers them and must take them over. */
  for (uint32_t i = 0; i < 1000; i++) {
    assert_int_equal(mf_idmap_insert(&m, 250000 + i, &idx), 0);
    assert_int_equal(idx, i);
  }
  for (uint32_t i = 0; i < 200000; i++) {
    assert_int_equal(mf_idmap_insert(&m, i, &idx), 0);
    assert_int_equal(idx, 1000 + i);
  }
  assert_true(m.ndirect > 251000); /* the takeover happened */
  for (uint32_t i = 0; i < 1000; i++) {
    assert_int_equal(mf_idmap_find(&m, 250000 + i, &idx), 1);
    assert_int_equal(idx, i);
  }
  for (uint32_t i = 0; i < 200000; i++) {
    assert_int_equal(mf_idmap_find(&m, i, &idx), 1);
    assert_int_equal(idx, 1000 + i);
  }
  assert_int_equal(mf_idmap_find(&m, 251000, &idx), 0);
  assert_int_equal(mf_idmap_find(&m, UINT64_MAX, &idx), 0);
  assert_int_equal(m.n, 201000);
  assert_int_equal(mf_idmap_init_identity(&m, 5000), 0);
  assert_int_equal(m.n, 5000);
  assert_int_equal(mf_idmap_find(&m, 4999, &idx), 1);
  assert_int_equal(idx, 4999);
  assert_int_equal(mf_idmap_find(&m, 5000, &idx), 0);
  assert_int_equal(mf_idmap_insert(&m, 77777, &idx), 0);
  assert_int_equal(idx, 5000);
  mf_idmap_free(&m);
  assert_int_equal(m.n, 0);
  assert_null(m.ids);
}

/* ---- generator --------------------------------------------------------------------- */

static mf_gen_opts_t small_opts(uint64_t seed)
{
  mf_gen_opts_t o;
  mf_gen_opts_default(&o);
  o.rows = 2000; /* sparse enough that, without the floor, rare rows get few ratings */
  o.cols = 1000;
  o.nnz = 40000;
  o.rank = 4;
  o.seed = seed;
  return o;
}

static int cmp_u32_desc(const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x < y) - (x > y);
}

static void test_generate(void **state)
{
  (void)state;
  mf_gen_opts_t o = small_opts(42);
  mf_ratings_t a = {0}, b = {0}, c = {0};
  uint32_t nr = 0, nc = 0;
  assert_int_equal(mf_generate(&o, &a, &nr, &nc), 0);
  assert_int_equal(nr, o.rows);
  assert_int_equal(nc, o.cols);
  assert_int_equal(a.n, o.nnz);
  assert_int_equal(mf_generate(&o, &b, NULL, NULL), 0);
  assert_int_equal(b.n, a.n);
  assert_memory_equal(a.r, b.r, a.n * sizeof(*a.r));
  o.seed = 43;
  assert_int_equal(mf_generate(&o, &c, NULL, NULL), 0);
  assert_int_equal(c.n, a.n);
  assert_true(memcmp(a.r, c.r, a.n * sizeof(*a.r)) != 0);

  /* Every row and column gets its floor of 2 * rank; columns are skewed. */
  uint32_t *rows = calloc(o.rows, sizeof(*rows)), *cols = calloc(o.cols, sizeof(*cols));
  double sum = 0, sq = 0;
  for (size_t i = 0; i < a.n; i++) {
    assert_true(a.r[i].row < o.rows && a.r[i].col < o.cols);
    rows[a.r[i].row]++, cols[a.r[i].col]++;
    sum += a.r[i].value, sq += (double)a.r[i].value * a.r[i].value;
  }
  for (uint32_t i = 0; i < o.rows; i++) assert_true(rows[i] >= 2 * o.rank);
  for (uint32_t i = 0; i < o.cols; i++) assert_true(cols[i] >= 2 * o.rank);
  qsort(cols, o.cols, sizeof(*cols), cmp_u32_desc);
  assert_true(cols[0] > 5 * cols[o.cols / 2]);
  /* Popularity ranks are shuffled over ids: the busiest column is not simply 0. */
  uint32_t col0 = 0;
  for (size_t i = 0; i < a.n; i++) col0 += a.r[i].col == 0;
  assert_true(col0 < cols[0]);
  /* Output order is random, not the floor's row-by-row order. */
  size_t descents = 0;
  for (size_t i = 1; i < a.n; i++) descents += a.r[i].row < a.r[i - 1].row;
  assert_true(descents > a.n / 3);
  /* value = p·q + noise with var(p·q) ~ 1: mean near 0, variance near 1 + sigma². */
  double mean = sum / (double)a.n, var = sq / (double)a.n - mean * mean;
  assert_true(fabs(mean) < 0.2);
  assert_true(var > 0.5 && var < 2.0);
  free(rows);
  free(cols);

  /* Uniform (skew 0) and no floor: still the right size; min_per 0 accepted. */
  mf_ratings_free(&c);
  o.row_skew = o.col_skew = 0;
  o.min_per = 0;
  o.nnz = 100;
  assert_int_equal(mf_generate(&o, &c, NULL, NULL), 0);
  assert_int_equal(c.n, 100);
  mf_ratings_free(&a);
  mf_ratings_free(&b);
  mf_ratings_free(&c);
}

static void test_generate_noise(void **state)
{
  (void)state;
  /* One row, one column: every rating is p0·q0 + noise, so the spread is sigma. */
  mf_gen_opts_t o = small_opts(7);
  o.rows = o.cols = 1;
  o.nnz = 20000;
  o.sigma = 0.5;
  mf_ratings_t a = {0};
  assert_int_equal(mf_generate(&o, &a, NULL, NULL), 0);
  double sum = 0, sq = 0;
  for (size_t i = 0; i < a.n; i++) sum += a.r[i].value, sq += (double)a.r[i].value * a.r[i].value;
  double mean = sum / (double)a.n, sd = sqrt(sq / (double)a.n - mean * mean);
  assert_true(fabs(sd - 0.5) < 0.02);
  mf_ratings_free(&a);
  o.sigma = 0;
  assert_int_equal(mf_generate(&o, &a, NULL, NULL), 0);
  for (size_t i = 1; i < a.n; i++) assert_true(a.r[i].value == a.r[0].value);
  mf_ratings_free(&a);
}

static void test_generate_bad_opts(void **state)
{
  (void)state;
  mf_gen_opts_t o = small_opts(1);
  mf_ratings_t r = {0};
  char err[256] = "";
  o.rank = 0;
  assert_int_equal(mf_gen_opts_check(&o, err, sizeof(err)), MF_EINVAL);
  assert_non_null(strstr(err, "rank"));
  assert_int_equal(mf_generate(&o, &r, NULL, NULL), MF_EINVAL);
  o = small_opts(1);
  o.nnz = o.rows + o.cols - 1;
  assert_int_equal(mf_gen_opts_check(&o, err, sizeof(err)), MF_EINVAL);
  assert_non_null(strstr(err, "nnz"));
  o.sigma = NAN;
  o.nnz = 100000;
  assert_int_equal(mf_gen_opts_check(&o, err, sizeof(err)), MF_EINVAL);
  assert_non_null(strstr(err, "sigma"));
  o = small_opts(1);
  assert_int_equal(mf_gen_opts_check(&o, err, sizeof(err)), 0);
  assert_int_equal(r.n, 0);
  assert_string_equal(mf_strerror(MF_EINVAL), "invalid argument");
}

/* ---- split and shuffle ------------------------------------------------------------- */

static int cmp_rating(const void *a, const void *b)
{
  const mf_rating_t *x = a, *y = b;
  if (x->row != y->row) return x->row < y->row ? -1 : 1;
  if (x->col != y->col) return x->col < y->col ? -1 : 1;
  return (x->value > y->value) - (x->value < y->value);
}

static void assert_same_multiset(const mf_rating_t *a, size_t n, const mf_rating_t *b)
{
  mf_rating_t *x = malloc(n * sizeof(*x)), *y = malloc(n * sizeof(*y));
  memcpy(x, a, n * sizeof(*x));
  memcpy(y, b, n * sizeof(*y));
  qsort(x, n, sizeof(*x), cmp_rating);
  qsort(y, n, sizeof(*y), cmp_rating);
  assert_memory_equal(x, y, n * sizeof(*x));
  free(x);
  free(y);
}

static void test_split(void **state)
{
  (void)state;
  mf_gen_opts_t o = small_opts(5);
  mf_ratings_t all = {0}, tr = {0}, te = {0}, tr2 = {0}, te2 = {0}, tr3 = {0}, te3 = {0};
  assert_int_equal(mf_generate(&o, &all, NULL, NULL), 0);
  assert_int_equal(mf_split(&all, 0.2, 9, &tr, &te), 0);
  assert_int_equal(te.n, all.n / 5); /* exact: every row has >= 8 ratings, guard idle */
  assert_int_equal(tr.n + te.n, all.n);
  mf_rating_t *both = malloc(all.n * sizeof(*both));
  memcpy(both, tr.r, tr.n * sizeof(*both));
  memcpy(both + tr.n, te.r, te.n * sizeof(*both));
  assert_same_multiset(all.r, all.n, both);
  free(both);

  assert_int_equal(mf_split(&all, 0.2, 9, &tr2, &te2), 0);
  assert_int_equal(te2.n, te.n);
  assert_memory_equal(te.r, te2.r, te.n * sizeof(*te.r));
  assert_memory_equal(tr.r, tr2.r, tr.n * sizeof(*tr.r));
  assert_int_equal(mf_split(&all, 0.2, 10, &tr3, &te3), 0);
  assert_int_equal(te3.n, te.n);
  assert_true(memcmp(te.r, te3.r, te.n * sizeof(*te.r)) != 0);
  mf_ratings_free(&all);
  mf_ratings_free(&tr), mf_ratings_free(&te);
  mf_ratings_free(&tr2), mf_ratings_free(&te2);
  mf_ratings_free(&tr3), mf_ratings_free(&te3);

  /* Everything to test, but each row and column keeps one training rating. */
  for (uint32_t r = 0; r < 3; r++)
    for (uint32_t c = 0; c < 4; c++) assert_int_equal(mf_ratings_push(&all, r, c, 1), 0);
  assert_int_equal(mf_split(&all, 1.0, 3, &tr, &te), 0);
  assert_int_equal(tr.n + te.n, 12);
  assert_true(te.n >= 6);
  int rseen[3] = {0}, cseen[4] = {0};
  for (size_t i = 0; i < tr.n; i++) rseen[tr.r[i].row] = cseen[tr.r[i].col] = 1;
  for (int i = 0; i < 3; i++) assert_true(rseen[i]);
  for (int i = 0; i < 4; i++) assert_true(cseen[i]);
  mf_ratings_free(&tr), mf_ratings_free(&te);
  /* Ratio 0: all train. */
  assert_int_equal(mf_split(&all, 0, 3, &tr, &te), 0);
  assert_int_equal(tr.n, 12);
  assert_int_equal(te.n, 0);
  mf_ratings_free(&tr), mf_ratings_free(&te);
  mf_ratings_free(&all);
}

static void test_shuffle(void **state)
{
  (void)state;
  enum { N = 1000 };
  mf_ratings_t a = {0}, b = {0};
  for (uint32_t i = 0; i < N; i++) {
    assert_int_equal(mf_ratings_push(&a, i, i % 7, (float)i), 0);
    assert_int_equal(mf_ratings_push(&b, i, i % 7, (float)i), 0);
  }
  mf_shuffle(&a, 11);
  int moved = 0, seen[N] = {0};
  for (uint32_t i = 0; i < N; i++) {
    uint32_t v = a.r[i].row;
    assert_true(v < N);
    assert_int_equal(seen[v], 0);
    seen[v] = 1;
    assert_int_equal(a.r[i].col, v % 7); /* records move whole */
    assert_true(a.r[i].value == (float)v);
    moved += v != i;
  }
  assert_true(moved > N / 2);
  mf_shuffle(&b, 11);
  assert_memory_equal(a.r, b.r, N * sizeof(*a.r));
  for (uint32_t i = 0; i < N; i++) b.r[i] = (mf_rating_t){i, i % 7, (float)i};
  mf_shuffle(&b, 12);
  assert_true(memcmp(a.r, b.r, N * sizeof(*a.r)) != 0);
  mf_ratings_free(&a);
  mf_ratings_free(&b);
  mf_shuffle(&a, 1); /* empty: no-op */
}

/* mf_load_part: the parts of a file together hand over every rating once, in any number
 * of parts (more parts than lines too), with or without a last newline; the CSV header is
 * the first part's; a bad line names the part's line and byte; Matrix Market is refused. */
typedef struct part_sum {
  size_t n;
  double ids, values;
} part_sum_t;

static int part_cb(void *arg, uint64_t row, uint64_t col, float v)
{
  part_sum_t *p = arg;
  p->n++;
  p->ids += (double)row * 1000.0 + (double)col;
  p->values += v;
  return 0;
}

static void test_load_part(void **state)
{
  (void)state;
  char buf[8192];
  size_t len = (size_t)snprintf(buf, sizeof(buf), "userId,movieId,rating,timestamp\n");
  for (int i = 0; i < 97; i++)
    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%d,%d,%d.5,1700000000\n", i * 3, i % 11,
                            i % 5);
  const char *path = write_file("parts.csv", buf);
  buf[len - 1] = '\0'; /* the same without the last newline */
  const char *path2 = write_file("parts2.csv", buf);
  const int counts[] = {1, 2, 3, 7, 50, 200};
  char err[256];
  for (int f = 0; f < 2; f++)
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
      part_sum_t sum = {0};
      for (int k = 0; k < counts[c]; k++)
        assert_int_equal(mf_load_part(f ? path2 : path, MF_FMT_AUTO, k, counts[c], part_cb, &sum,
                                      NULL, NULL, err, sizeof(err)),
                         0);
      assert_int_equal(sum.n, 97);
      double ids = 0, values = 0;
      for (int i = 0; i < 97; i++)
        ids += (double)(i * 3) * 1000.0 + (i % 11), values += i % 5 + 0.5;
      assert_true(sum.ids == ids);
      assert_true(sum.values == values);
    }
  /* a bad line in the second of two parts: named by the part's line and start byte */
  const char *bad = write_file("partsbad.csv", "1,2,3\n4,5,6\n7,8,9\n10,x,12\n");
  part_sum_t sum = {0};
  assert_int_equal(mf_load_part(bad, MF_FMT_CSV, 0, 2, part_cb, &sum, NULL, NULL, err, sizeof(err)),
                   0);
  assert_int_equal(mf_load_part(bad, MF_FMT_CSV, 1, 2, part_cb, &sum, NULL, NULL, err, sizeof(err)),
                   MF_EPARSE);
  assert_non_null(strstr(err, "the line at byte 18: expected")); /* "10,x,12" starts there */
  /* Matrix Market: every part reads the header, the entries are cut; a symmetric entry off
   * the diagonal is two ratings; each part says how many entries it read */
  len = (size_t)snprintf(buf, sizeof(buf),
                         "%%%%MatrixMarket matrix coordinate real symmetric\n"
                         "%% a comment\n%%\n40 40 61\n");
  for (int i = 0; i < 61; i++)
    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%d %d %d.5\n", 1 + i % 40,
                            1 + (i * 7) % 40 < 1 + i % 40 ? 1 + (i * 7) % 40 : 1 + i % 40, i % 5);
  const char *mm = write_file("parts.mtx", buf);
  mf_ratings_t whole = {0};
  mf_idmap_t rows = {0}, cols = {0};
  assert_int_equal(mf_load(mm, MF_FMT_AUTO, &rows, &cols, 1, &whole, NULL, err, sizeof(err)), 0);
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    part_sum_t s = {0};
    uint64_t entries = 0;
    for (int k = 0; k < counts[c]; k++) {
      uint64_t e, nnz;
      assert_int_equal(
          mf_load_part(mm, MF_FMT_AUTO, k, counts[c], part_cb, &s, &e, &nnz, err, sizeof(err)), 0);
      assert_int_equal(nnz, 61);
      entries += e;
    }
    assert_int_equal(entries, 61);
    assert_int_equal(s.n, whole.n);
  }
  mf_ratings_free(&whole);
  mf_idmap_free(&rows);
  mf_idmap_free(&cols);
  /* a bad entry in the second part is named by its byte; the first part's by its line */
  mm = write_file("partsbad.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 4\n"
                                  "1 1 3\n2 2 4\n3 x 1\n3 3 2\n");
  assert_int_equal(mf_load_part(mm, MF_FMT_AUTO, 1, 2, part_cb, &sum, NULL, NULL, err, sizeof(err)),
                   MF_EPARSE);
  assert_non_null(strstr(err, "partsbad.mtx: the line at byte 64: expected 'row col value'"));
  assert_int_equal(mf_load_part(mm, MF_FMT_AUTO, 0, 1, part_cb, &sum, NULL, NULL, err, sizeof(err)),
                   MF_EPARSE);
  assert_non_null(strstr(err, "partsbad.mtx:5: expected 'row col value'"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_csv),
      cmocka_unit_test(test_load_part),
      cmocka_unit_test(test_udata),
      cmocka_unit_test(test_dat),
      cmocka_unit_test(test_triples),
      cmocka_unit_test(test_mm),
      cmocka_unit_test(test_crlf),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_long_line_truncated),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_unknown_ids_skipped),
      cmocka_unit_test(test_detect),
      cmocka_unit_test(test_idmap),
      cmocka_unit_test(test_generate),
      cmocka_unit_test(test_generate_noise),
      cmocka_unit_test(test_generate_bad_opts),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_shuffle),
  };
  return cmocka_run_group_tests_name("mf_data", tests, make_dir, remove_dir);
}
