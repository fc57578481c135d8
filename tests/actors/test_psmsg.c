/* test_psmsg.c — the parameter-server protocol: every message type round-trips through
 * its encoder and decoder, and every decoder refuses what is malformed (short, long,
 * a count that does not match, a table, actor, key or node that does not exist) with a
 * reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "actors/psmsg.h"
#include "actors/remote.h"
#include "augur.h"

static au_node_t *node;
static au_table_t *ti, *tf; /* int32 dim 5 group 4; float32 dim 3 with adagrad, group 2 */
static au_table_t *tb;      /* int32 dim 37 group 4: 148 words an actor, chunks and a tail */
static au_table_t *ts;      /* int32 dim 100 group 2: pushes in the sparse form */
static au_ids_t *ids;       /* an id table: float32 dim 4 with adagrad */

static int never(au_worker_t *w, void *arg)
{
  (void)w, (void)arg;
  return AU_DONE;
}

static int setup(void **state)
{
  (void)state;
  if (au_node_create(&(au_node_opts_t){.threads = 1}, &node) != 0) return -1;
  if (au_table_create(node, &(au_table_opts_t){.keys = 40, .dim = 5, .type = AU_I32, .group = 4},
                      &ti) != 0)
    return -1;
  if (au_table_create(node,
                      &(au_table_opts_t){.keys = 10,
                                         .dim = 3,
                                         .type = AU_F32,
                                         .group = 2,
                                         .optim = AU_OPTIM_ADAGRAD,
                                         .lr = 0.1f},
                      &tf) != 0)
    return -1;
  if (au_table_create(node, &(au_table_opts_t){.keys = 8, .dim = 37, .type = AU_I32, .group = 4},
                      &tb) != 0)
    return -1;
  if (au_table_create(node, &(au_table_opts_t){.keys = 6, .dim = 100, .type = AU_I32, .group = 2},
                      &ts) != 0)
    return -1;
  au_ids_opts_t io = {.row = {.dim = 4, .type = AU_F32, .optim = AU_OPTIM_ADAGRAD, .lr = 0.1f},
                      .budget = 1 << 20};
  if (au_ids_create(node, &io, &ids) != 0) return -1;
  return au_worker_spawn(node, &(au_worker_opts_t){never, NULL}, NULL);
}

static int teardown(void **state)
{
  (void)state;
  au_node_destroy(node);
  return 0;
}

/* The decoder refuses every prefix of a valid message and the message with a byte more. */
typedef int (*decode_fn)(const uint8_t *p, size_t len);

static void refuses_other_lengths(decode_fn dec, const uint8_t *p, size_t len)
{
  uint8_t *copy = malloc(len + 1);
  memcpy(copy, p, len);
  copy[len] = 0;
  for (size_t l = 0; l < len; l++) assert_int_not_equal(dec(copy, l), 0);
  assert_int_not_equal(dec(copy, len + 1), 0);
  assert_int_equal(dec(copy, len), 0);
  free(copy);
}

static uint32_t rows_type;
static int dec_rows(const uint8_t *p, size_t len)
{
  psm_rows_t m;
  return psm_rows_decode(node, rows_type, p, len, &m, NULL);
}

static void test_rows_requests_and_pushes(void **state)
{
  (void)state;
  obuf_t b = {0};
  for (uint64_t k = 7; k < 10; k++)
    assert_int_equal(psm_rows_add(&b, ti, 0, 0xc123, k, NULL, 0), 0);
  assert_int_equal(psm_rows_count(&b), 3);
  psm_rows_t m;
  psm_why_t why;
  assert_int_equal(psm_rows_decode(node, PS_REQ, b.p, b.len, &m, &why), 0);
  assert_ptr_equal(m.t, ti);
  assert_int_equal(m.n, 3);
  assert_int_equal(m.reply_node, 0);
  assert_int_equal(m.reply_port, 0xc123);
  assert_false(m.push);
  for (uint32_t i = 0; i < 3; i++) assert_int_equal(psm_rows_key(&m, i), 7 + i);
  rows_type = PS_REQ;
  refuses_other_lengths(dec_rows, b.p, b.len);

  /* the answer: head and keys copied, rows after them */
  uint8_t *ans = malloc(psm_rows_answer_len(&m));
  uint8_t *rows = psm_rows_answer(ans, &m);
  for (uint32_t i = 0; i < 3; i++) memset(rows + i * ti->row_bytes, (int)i + 1, ti->row_bytes);
  psm_rows_t a;
  assert_int_equal(psm_rows_decode(node, PS_ROWS, ans, psm_rows_answer_len(&m), &a, &why), 0);
  assert_int_equal(a.n, 3);
  assert_int_equal(psm_rows_key(&a, 2), 9);
  assert_int_equal(a.rows[2 * ti->row_bytes], 3);
  rows_type = PS_ROWS;
  refuses_other_lengths(dec_rows, ans, psm_rows_answer_len(&m));
  free(ans);

  /* a key outside the table, a table that does not exist, a reply node that is not one */
  obuf_t bad = {0};
  assert_int_equal(psm_rows_add(&bad, ti, 0, 1, 40, NULL, 0), 0);
  assert_int_not_equal(psm_rows_decode(node, PS_REQ, bad.p, bad.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "key 40"));
  memcpy(b.p, &(uint32_t){9}, 4);
  assert_int_not_equal(psm_rows_decode(node, PS_REQ, b.p, b.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "no table 9"));
  memcpy(b.p, &(uint32_t){0}, 4);
  memcpy(b.p + 8, &(uint32_t){1}, 4);
  assert_int_not_equal(psm_rows_decode(node, PS_REQ, b.p, b.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "reply node 1"));
  uint32_t node_out;
  au_port_t port_out;
  assert_int_equal(psm_rows_reply(node, b.p, b.len, &node_out, &port_out), 0);

  /* pushes carry an update per key; entries split into another batch keep both */
  obuf_t p = {0};
  float g[3] = {1.5f, -2, 0.25f};
  assert_int_equal(psm_rows_add(&p, tf, 0, 5, 3, g, 0), 0);
  g[0] = 9;
  assert_int_equal(psm_rows_add(&p, tf, 0, 5, 8, g, 0), 0);
  assert_int_equal(psm_rows_decode(node, PS_PUSH, p.p, p.len, &m, &why), 0);
  assert_true(m.push);
  assert_int_equal(m.n, 2);
  assert_false(m.sparse); /* rows of 3 words: dense */
  psm_rows_entry_t e;
  size_t off = 0;
  assert_true(psm_rows_next(&m, &off, &e) && e.key == 3);
  assert_true(psm_rows_next(&m, &off, &e) && e.key == 8);
  assert_false(psm_rows_next(&m, &off, &(psm_rows_entry_t){0}));
  float back[3];
  psm_rows_update_copy(&m, &e, back);
  assert_true(back[0] == 9 && back[1] == -2 && back[2] == 0.25f);
  obuf_t one = {0};
  assert_int_equal(psm_rows_add_entry(&one, &m, &e), 0);
  psm_rows_t o;
  assert_int_equal(psm_rows_decode(node, PS_FWD_PUSH, one.p, one.len, &o, &why), 0);
  assert_int_equal(o.n, 1);
  assert_int_equal(psm_rows_key(&o, 0), 8);
  assert_int_equal(o.reply_port, 5);
  psm_rows_entry_t oe;
  off = 0;
  assert_true(psm_rows_next(&o, &off, &oe));
  assert_memory_equal(oe.update, e.update, tf->update_bytes);
  /* read as a request, a push's length is wrong */
  assert_int_not_equal(psm_rows_decode(node, PS_REQ, p.p, p.len, &m, &why), 0);
  rows_type = PS_PUSH;
  refuses_other_lengths(dec_rows, p.p, p.len);
  free(b.p), free(bad.p), free(p.p), free(one.p);
}

/* Pushes of wide rows go sparse: the nonzero words of each update, or the whole update
 * where pairs would be no shorter; decoded, each is the update that was pushed. */
static void test_rows_sparse_pushes(void **state)
{
  (void)state;
  int32_t u[3][100] = {{0}};
  u[0][0] = 5, u[0][17] = -1, u[0][99] = 3;      /* 3 pairs */
  for (int j = 0; j < 100; j++) u[1][j] = j + 1; /* every word: dense */
  /* u[2]: none */
  obuf_t b = {0};
  for (int i = 0; i < 3; i++)
    assert_int_equal(psm_rows_add(&b, ts, 0, 0x4321, 2 * i + 1, u[i], 0), 0);
  assert_int_equal(b.len, 16 + (12 + 3 * 8) + (12 + 400) + 12);
  psm_rows_t m;
  psm_why_t why;
  assert_int_equal(psm_rows_decode(node, PS_PUSH, b.p, b.len, &m, &why), 0);
  assert_true(m.sparse && m.push && m.n == 3 && m.reply_port == 0x4321);
  psm_rows_entry_t e;
  int32_t back[100];
  obuf_t again = {0};
  int i = 0;
  for (size_t off = 0; psm_rows_next(&m, &off, &e); i++) {
    assert_int_equal(e.key, 2 * i + 1);
    assert_int_equal(e.npairs, i == 0 ? 3 : 0);
    assert_true((e.update != NULL) == (i == 1));
    memset(back, 0x55, sizeof(back));
    psm_rows_update_copy(&m, &e, back);
    assert_memory_equal(back, u[i], sizeof(back));
    assert_int_equal(psm_rows_add_entry(&again, &m, &e), 0);
  }
  assert_int_equal(i, 3);
  assert_int_equal(again.len, b.len); /* entry by entry, the same message */
  assert_memory_equal(again.p, b.p, b.len);
  uint32_t node_out;
  au_port_t port_out;
  assert_int_equal(psm_rows_reply(node, b.p, b.len, &node_out, &port_out), 1);
  assert_int_equal(port_out, 0x4321);
  rows_type = PS_PUSH;
  refuses_other_lengths(dec_rows, b.p, b.len);
  rows_type = PS_FWD_PUSH;
  refuses_other_lengths(dec_rows, b.p, b.len);
  /* requests of the same table stay dense (form 0) */
  obuf_t r = {0};
  assert_int_equal(psm_rows_add(&r, ts, 0, 1, 4, NULL, 0), 0);
  assert_int_equal(r.len, 16 + 8);
  assert_int_equal(psm_rows_decode(node, PS_REQ, r.p, r.len, &m, &why), 0);
  assert_false(m.sparse);
  /* its answer: rows sparse where shorter, each back whole */
  assert_true(psm_rows_answer_sparse(&m));
  obuf_t a = {0};
  assert_int_equal(psm_rows_add(&r, ts, 0, 1, 5, NULL, 0), 0);
  assert_int_equal(psm_rows_decode(node, PS_REQ, r.p, r.len, &m, &why), 0);
  int32_t rows2[2][100] = {{0}};
  rows2[0][3] = 7, rows2[0][90] = -4;
  for (int j = 0; j < 100; j++) rows2[1][j] = j - 50;
  assert_int_equal(psm_rows_answer_begin(&a, &m), 0);
  for (int k = 0; k < 2; k++) assert_int_equal(psm_rows_answer_row(&a, ts, rows2[k]), 0);
  assert_int_equal(a.len, 16 + 16 + (4 + 16) + (4 + 400));
  psm_rows_t ra;
  assert_int_equal(psm_rows_decode(node, PS_ROWS, a.p, a.len, &ra, &why), 0);
  assert_true(ra.sparse && ra.n == 2 && psm_rows_key(&ra, 1) == 5);
  size_t off = 0;
  for (int k = 0; k < 2; k++) {
    int32_t got[100];
    psm_rows_row_next(&ra, &off, got);
    assert_memory_equal(got, rows2[k], sizeof(got));
  }
  assert_int_equal(off, ra.rows_len);
  rows_type = PS_ROWS;
  refuses_other_lengths(dec_rows, a.p, a.len);
  free(a.p);
  /* bad pairs are refused, by name */
  uint8_t *c = malloc(b.len);
  const size_t pair0 = 16 + 12;
  memcpy(c, b.p, b.len);
  memcpy(c + pair0 + 8, &(uint32_t){0}, 4); /* pair 1's index 17 -> 0: out of order */
  assert_int_not_equal(psm_rows_decode(node, PS_PUSH, c, b.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "out of order"));
  memcpy(c, b.p, b.len);
  memcpy(c + pair0 + 16, &(uint32_t){100}, 4); /* pair 2's index 99 -> 100: past the row */
  assert_int_not_equal(psm_rows_decode(node, PS_PUSH, c, b.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "past the 100 words"));
  memcpy(c, b.p, b.len);
  memcpy(c + 16 + 8, &(uint32_t){101}, 4); /* more pairs than words */
  assert_int_not_equal(psm_rows_decode(node, PS_PUSH, c, b.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "101 words"));
  memcpy(c, b.p, b.len);
  memcpy(c + 16 + 8, &(uint32_t){4}, 4); /* 4 pairs where 3 are: lengths no longer add up */
  assert_int_not_equal(psm_rows_decode(node, PS_PUSH, c, b.len, &m, &why), 0);
  memcpy(c, b.p, b.len);
  c[14] = 2; /* form 2 */
  assert_int_not_equal(psm_rows_decode(node, PS_PUSH, c, b.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "form 2"));
  /* form 1 is a push's, of a table of wide rows */
  memcpy(c, b.p, b.len);
  assert_int_not_equal(psm_rows_decode(node, PS_REQ, c, b.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "form 1"));
  obuf_t p = {0};
  float g[3] = {1, 2, 3};
  assert_int_equal(psm_rows_add(&p, tf, 0, 5, 3, g, 0), 0);
  p.p[14] = 1;
  assert_int_not_equal(psm_rows_decode(node, PS_PUSH, p.p, p.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "form 1"));
  free(c), free(b.p), free(again.p), free(r.p), free(p.p);
}

/* An id table's rows messages: any 64-bit key, the sender's clock in the head. */
static int routed;
static void count_routed(void *arg, au_table_t *t, uint64_t actor, const au_msg_t *m, uint32_t type,
                         const uint8_t *one, uint32_t len)
{
  (void)arg, (void)t, (void)actor, (void)m, (void)type, (void)one, (void)len;
  routed++;
}

static void test_rows_of_id_tables(void **state)
{
  (void)state;
  au_table_t *t = ids_table(ids);
  obuf_t b = {0};
  float g[4] = {1, 2, 3, 4};
  assert_int_equal(psm_rows_add(&b, t, 0, 7, UINT64_MAX, g, 123456789012ULL), 0);
  assert_int_equal(psm_rows_add(&b, t, 0, 7, 5, g, 123456789012ULL), 0);
  psm_rows_t m;
  psm_why_t why;
  assert_int_equal(psm_rows_decode(node, PS_PUSH, b.p, b.len, &m, &why), 0);
  assert_ptr_equal(m.t, t);
  assert_int_equal(m.n, 2);
  assert_true(m.clock == 123456789012ULL);
  assert_true(psm_rows_key(&m, 0) == UINT64_MAX);
  psm_rows_entry_t e;
  size_t off = 0;
  assert_true(psm_rows_next(&m, &off, &e) && psm_rows_next(&m, &off, &e));
  assert_false(m.sparse); /* an id table's pushes are dense */
  assert_memory_equal(e.update, g, sizeof(g));
  rows_type = PS_PUSH;
  refuses_other_lengths(dec_rows, b.p, b.len);
  obuf_t one = {0};
  assert_int_equal(psm_rows_add_entry(&one, &m, &e), 0);
  psm_rows_t o;
  assert_int_equal(psm_rows_decode(node, PS_PUSH, one.p, one.len, &o, &why), 0);
  assert_true(o.clock == m.clock && psm_rows_key(&o, 0) == 5);
  /* a request and its answer keep the clock; rows are whole (values and slots) */
  obuf_t r = {0};
  assert_int_equal(psm_rows_add(&r, t, 0, 7, 1ULL << 63, NULL, 42), 0);
  assert_int_equal(psm_rows_decode(node, PS_REQ, r.p, r.len, &m, &why), 0);
  size_t len = psm_rows_answer_len(&m);
  assert_int_equal(len, 24 + 8 + t->row_bytes);
  uint8_t *ans = malloc(len);
  memset(psm_rows_answer(ans, &m), 9, t->row_bytes);
  psm_rows_t a;
  assert_int_equal(psm_rows_decode(node, PS_ROWS, ans, len, &a, &why), 0);
  assert_true(a.clock == 42 && psm_rows_key(&a, 0) == 1ULL << 63 && a.rows[0] == 9);
  rows_type = PS_ROWS;
  refuses_other_lengths(dec_rows, ans, len);
  /* an id table that does not exist */
  memcpy(r.p, &(uint32_t){IDS_TID + 1}, 4);
  assert_int_not_equal(psm_rows_decode(node, PS_REQ, r.p, r.len, &m, &why), 0);
  assert_non_null(strstr(why.text, "no id table 1"));
  /* a forward naming a classic table (an id table on one node: no server sends one) is
     refused, not routed */
  memcpy(r.p, &(uint32_t){IDS_TID}, 4);
  au_msg_t *fwd = calloc(1, sizeof(au_msg_t) + r.len);
  memcpy(fwd->data, r.p, r.len);
  fwd->len = (uint32_t)r.len;
  fwd->type = PS_FWD_REQ;
  routed = 0;
  remote_split(node, fwd, PS_REQ, count_routed, NULL);
  assert_int_equal(routed, 0);
  free(fwd);
  free(ans), free(b.p), free(one.p), free(r.p);
}

static int dec_values(const uint8_t *p, size_t len)
{
  psm_values_t v;
  return psm_values_decode(node, p, len, &v, NULL);
}

static void test_values(void **state)
{
  (void)state;
  size_t len = psm_values_len(tf);
  assert_int_equal(len, 16 + 2 * tf->row_bytes);
  uint8_t *msg = malloc(len);
  uint8_t *vals = psm_values_encode(msg, tf, 4, 77, 3);
  for (size_t i = 0; i < 2 * tf->row_bytes; i++) vals[i] = (uint8_t)i;
  psm_values_t v;
  psm_why_t why;
  assert_int_equal(psm_values_decode(node, msg, len, &v, &why), 0);
  assert_ptr_equal(v.t, tf);
  assert_int_equal(v.actor, 4);
  assert_int_equal(v.version, 77);
  assert_int_equal(v.hold_exp, 3);
  assert_int_equal(v.values[5], 5);
  refuses_other_lengths(dec_values, msg, len);
  psm_values_encode(msg, tf, 5, 0, 0); /* tf has 5 actors: 0..4 */
  assert_int_not_equal(psm_values_decode(node, msg, len, &v, &why), 0);
  assert_non_null(strstr(why.text, "actor 5"));
  /* rows mostly zero go sparse, and come back word for word; full rows stay dense */
  const size_t words = 2 * tf->row_bytes / 4;
  uint32_t *rows = calloc(words, 4), *back = malloc(words * 4);
  rows[1] = 7, rows[words - 1] = 0x80000000u; /* -0.0f is not a zero word */
  uint8_t *sm = malloc(psm_values_len(tf) + 8);
  size_t sl = psm_values_write_sparse(sm, tf, 3, 9, 2, rows);
  assert_int_equal(sl, 16 + 4 + 2 * 8);
  assert_int_equal(psm_values_decode(node, sm, sl, &v, &why), 0);
  assert_true(v.sparse && v.npairs == 2 && v.actor == 3 && v.version == 9 && v.hold_exp == 2);
  psm_values_copy(&v, back, 0);
  assert_memory_equal(back, rows, words * 4);
  refuses_other_lengths(dec_values, sm, sl);
  memcpy(sm + 16 + 4 + 8, sm + 16 + 4, 4); /* the second pair at the first's index */
  assert_int_not_equal(psm_values_decode(node, sm, sl, &v, &why), 0);
  assert_non_null(strstr(why.text, "out of order"));
  for (size_t i = 0; i < words; i++) rows[i] = (uint32_t)i + 1;
  assert_int_equal(psm_values_write_sparse(sm, tf, 3, 9, 2, rows), 0);
  free(sm), free(rows), free(back);
  free(msg);
}

/* The sparse form skips zero runs a 16-word chunk at a time and writes without a branch
 * per word, stopping where it would be no shorter than the dense one: every pattern of
 * zeros (none, all, runs across chunk borders, the tail past the last whole chunk) comes
 * back word for word, in the form a plain count says is shorter. */
static void test_values_sparse_patterns(void **state)
{
  (void)state;
  const size_t words = 4 * tb->row_bytes / 4;
  assert_int_equal(words, 148);
  uint32_t *rows = malloc(words * 4), *back = malloc(words * 4);
  uint8_t *msg = malloc(psm_values_len(tb) + 8);
  uint64_t x = 88172645463325252ull; /* xorshift */
  for (int trial = 0; trial < 400; trial++) {
    const int density = trial % 8; /* out of 8 */
    size_t nz = 0;
    for (size_t i = 0; i < words; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      rows[i] = (int)(x % 8) < density ? (uint32_t)(x >> 32) | 1u : 0;
      if (trial % 50 == 1) rows[i] = i == words - 1 || i == 16 || i == 143; /* borders */
      nz += rows[i] != 0;
    }
    const size_t dense = psm_values_len(tb), sparse = 16 + 4 + 8 * nz;
    size_t len = psm_values_write_sparse(msg, tb, 1, 1, 0, rows);
    if (!len) {
      psm_values_write(msg, tb, 1, 1, 0, rows);
      len = dense;
    }
    assert_int_equal(len, sparse < dense ? sparse : dense);
    psm_values_t v;
    psm_why_t why;
    assert_int_equal(psm_values_decode(node, msg, len, &v, &why), 0);
    assert_int_equal(v.sparse, len < dense);
    if (v.sparse) assert_int_equal(v.npairs, nz);
    memset(back, 0xab, words * 4);
    psm_values_copy(&v, back, 0);
    assert_memory_equal(back, rows, words * 4);
    if (!v.sparse) continue;
    /* a block the pairs cleared is all zero, and takes the next actor's pairs alone */
    psm_values_zero_sparse(msg, back);
    for (size_t i = 0; i < words; i++) assert_int_equal(back[i], 0);
    psm_values_copy(&v, back, 1);
    assert_memory_equal(back, rows, words * 4);
  }
  free(rows), free(back), free(msg);
}

/* An id actor's blob is checked before it replaces any bucket: whole, it goes back in;
 * two buckets swapped (each head true to its block, but the ids another bucket's), or an
 * unused bucket's block not empty, are refused and leave the rows as they were. On one
 * node actor 0 is the whole table. */
static void test_ids_blob_checked(void **state)
{
  (void)state;
  au_ids_t *t;
  au_ids_opts_t io = {.row = {.dim = 4, .type = AU_I32}, .bucket = 8, .budget = 8192};
  assert_int_equal(au_ids_create(node, &io, &t), 0);
  au_ids_stats_t st;
  au_ids_stats(t, &st);
  const uint64_t nb = st.capacity / 8;
  assert_true(nb >= 3);
  const int32_t one[4] = {1, 2, 3, 4};
  uint64_t id = 0;
  /* rows in most buckets, not all: at least one unused */
  for (int i = 0; i < (int)nb; i++) {
    id = (uint64_t)i * 7919 + 1;
    assert_int_equal(au_ids_push(t, &id, 1, one, 0), 0);
  }
  au_ids_stats(t, &st);
  const uint64_t rows = st.rows;
  const size_t bytes = ids_actor_bytes(t), stride = bytes / nb;
  char *blob = ids_actor_pack(t, ids_home_buckets(t, 0)), why[300];
  assert_non_null(blob);
  /* the buckets in use (a record's first word), and one that is not */
  int used[2] = {-1, -1}, unused = -1;
  for (uint64_t b = 0; b < nb; b++) {
    uint32_t flag;
    memcpy(&flag, blob + b * stride, 4);
    if (flag && used[0] < 0)
      used[0] = (int)b;
    else if (flag && used[1] < 0)
      used[1] = (int)b;
    else if (!flag && unused < 0)
      unused = (int)b;
  }
  assert_true(used[1] >= 0 && unused >= 0);
  char *bad = malloc(bytes), *rec = malloc(stride);
  memcpy(bad, blob, bytes);
  memcpy(rec, bad + used[0] * stride, stride);
  memcpy(bad + used[0] * stride, bad + used[1] * stride, stride);
  memcpy(bad + used[1] * stride, rec, stride);
  assert_null(ids_actor_unpack(t, 0, bad, why, sizeof(why)));
  assert_non_null(strstr(why, "another bucket"));
  memcpy(bad, blob, bytes);
  bad[unused * stride + stride - 1] = 1; /* the last byte of its block */
  assert_null(ids_actor_unpack(t, 0, bad, why, sizeof(why)));
  assert_non_null(strstr(why, "not in use that is not empty"));
  au_ids_stats(t, &st);
  assert_int_equal(st.rows, rows);
  int32_t v[4];
  assert_int_equal(au_ids_read(t, &id, 1, v), 0);
  assert_memory_equal(v, one, sizeof(one));
  assert_non_null(ids_actor_unpack(t, 0, blob, why, sizeof(why)));
  au_ids_stats(t, &st);
  assert_int_equal(st.rows, rows);
  assert_true(au_ids_contains(t, id));
  free(bad), free(rec), free(blob);
}

static uint32_t actor_type;
static int dec_actor(const uint8_t *p, size_t len)
{
  psm_actor_msg_t a;
  return psm_actor_decode(node, actor_type, p, len, &a, NULL);
}

static void test_actor_messages(void **state)
{
  (void)state;
  const uint32_t types[] = {PS_MOVE_REQ, PS_OWNER, PS_REP_REQ, PS_REP_DROP, PS_REP_GONE};
  for (int i = 0; i < 5; i++) {
    uint8_t msg[PSM_ACTOR_MAX];
    psm_actor_msg_t in = {.t = ti, .actor = 9, .node = 0, .hops = 3, .version = 65535}, out;
    size_t len = psm_actor_encode(msg, types[i], &in);
    psm_why_t why;
    assert_int_equal(psm_actor_decode(node, types[i], msg, len, &out, &why), 0);
    assert_ptr_equal(out.t, ti);
    assert_int_equal(out.actor, 9);
    assert_int_equal(out.hops, types[i] == PS_MOVE_REQ ? 3 : 0);
    assert_int_equal(out.version, types[i] == PS_OWNER ? 65535 : 0);
    actor_type = types[i];
    refuses_other_lengths(dec_actor, msg, len);
    in.actor = 10; /* ti has 10 actors */
    psm_actor_encode(msg, types[i], &in);
    assert_int_not_equal(psm_actor_decode(node, types[i], msg, len, &out, &why), 0);
    in.actor = 0;
    in.node = 1; /* not a node of this one-node cluster; ignored where the type has none */
    psm_actor_encode(msg, types[i], &in);
    int rc = psm_actor_decode(node, types[i], msg, len, &out, &why);
    if (types[i] == PS_REP_DROP || types[i] == PS_REP_GONE)
      assert_int_equal(rc, 0);
    else
      assert_int_not_equal(rc, 0);
  }
  uint8_t msg[PSM_ACTOR_MAX];
  psm_actor_msg_t o;
  size_t len =
      psm_actor_encode(msg, PS_OWNER, &(psm_actor_msg_t){.t = ti, .actor = 1, .hold_exp = 5});
  psm_why_t why;
  assert_int_equal(psm_actor_decode(node, PS_OWNER, msg, len, &o, &why), 0);
  assert_int_equal(o.hold_exp, 5);
  msg[19] = 1; /* reserved */
  assert_int_not_equal(psm_actor_decode(node, PS_OWNER, msg, len, &o, &why), 0);
  assert_non_null(strstr(why.text, "reserved"));
}

static int dec_want(const uint8_t *p, size_t len)
{
  psm_want_t w;
  return psm_want_decode(node, p, len, &w, NULL);
}

static void test_want(void **state)
{
  (void)state;
  obuf_t b = {0};
  for (uint64_t a = 0; a < 4; a++) assert_int_equal(psm_want_add(&b, ti, a * 3), 0);
  psm_want_t w;
  assert_int_equal(psm_want_decode(node, b.p, b.len, &w, NULL), 0);
  assert_int_equal(w.n, 4);
  assert_int_equal(psm_want_actor(&w, 3), 9);
  refuses_other_lengths(dec_want, b.p, b.len);
  assert_int_equal(psm_want_add(&b, ti, 10), 0); /* outside */
  assert_int_not_equal(psm_want_decode(node, b.p, b.len, &w, NULL), 0);
  free(b.p);
}

static int dec_intent(const uint8_t *p, size_t len)
{
  psm_intent_t in;
  return psm_intent_decode(node, p, len, &in, NULL);
}

static void test_intent(void **state)
{
  (void)state;
  psm_intent_t h = {.t = tf,
                    .from_ns = 100,
                    .until_ns = 5000,
                    .worker = 0,
                    .tick_ns = 12.5f,
                    .start_clock = 7,
                    .end_clock = 9};
  obuf_t b = {0};
  assert_int_equal(psm_intent_add(&b, &h, 2), 0);
  assert_int_equal(psm_intent_add(&b, &h, 4), 0);
  psm_intent_t out;
  psm_why_t why;
  assert_int_equal(psm_intent_decode(node, b.p, b.len, &out, &why), 0);
  assert_ptr_equal(out.t, tf);
  assert_int_equal(out.n, 2);
  assert_int_equal(out.from_ns, 100);
  assert_int_equal(out.until_ns, 5000);
  assert_true(out.tick_ns == 12.5f);
  assert_int_equal(out.start_clock, 7);
  assert_int_equal(out.end_clock, 9);
  assert_int_equal(psm_intent_actor(&out, 1), 4);
  refuses_other_lengths(dec_intent, b.p, b.len);
  obuf_t bad = {0};
  h.worker = 1; /* this node has one worker */
  psm_intent_add(&bad, &h, 0);
  assert_int_not_equal(psm_intent_decode(node, bad.p, bad.len, &out, &why), 0);
  bad.len = 0;
  h.worker = 0;
  h.tick_ns = -1;
  psm_intent_add(&bad, &h, 0);
  assert_int_not_equal(psm_intent_decode(node, bad.p, bad.len, &out, &why), 0);
  free(b.p), free(bad.p);
}

static int dec_claims(const uint8_t *p, size_t len)
{
  uint32_t n;
  return psm_claims_decode(node, p, len, &n, NULL);
}

static void test_claims(void **state)
{
  (void)state;
  obuf_t b = {0};
  psm_claim_t c = {.t = ti,
                   .actor = 6,
                   .node = 0,
                   .hops = 2,
                   .flags = PSM_CLAIM_HOT,
                   .from_ns = 10,
                   .until_ns = 1ull << 40};
  assert_int_equal(psm_claim_add(&b, &c), 0);
  c.t = tf, c.actor = 1, c.flags = PSM_CLAIM_RELEASE;
  assert_int_equal(psm_claim_add(&b, &c), 0);
  uint32_t n;
  psm_why_t why;
  assert_int_equal(psm_claims_decode(node, b.p, b.len, &n, &why), 0);
  assert_int_equal(n, 2);
  psm_claim_t o;
  psm_claim_at(node, b.p, 0, &o);
  assert_ptr_equal(o.t, ti);
  assert_int_equal(o.actor, 6);
  assert_int_equal(o.hops, 2);
  assert_int_equal(o.flags, PSM_CLAIM_HOT);
  assert_int_equal(o.until_ns, 1ull << 40);
  psm_claim_at(node, b.p, 1, &o);
  assert_ptr_equal(o.t, tf);
  assert_int_equal(o.flags, PSM_CLAIM_RELEASE);
  refuses_other_lengths(dec_claims, b.p, b.len);
  b.p[8 + 6] = 0x80; /* an unknown flag */
  assert_int_not_equal(psm_claims_decode(node, b.p, b.len, &n, &why), 0);
  b.p[8 + 6] = 0;
  memcpy(b.p + 8 + 16, &(uint32_t){3}, 4); /* no node 3 */
  assert_int_not_equal(psm_claims_decode(node, b.p, b.len, &n, &why), 0);
  free(b.p);
}

static int dec_entries(const uint8_t *p, size_t len)
{
  psm_entries_t it;
  psm_entry_t e;
  if (psm_entries_begin(p, len, &it, NULL) != 0) return -1;
  int rc;
  while ((rc = psm_entry_next(node, &it, &e, NULL)) == 1) continue;
  return rc;
}

static void test_entries(void **state)
{
  (void)state;
  /* ti: 4 rows of 5 int32 words; tf: 2 rows of 8 words (3 values, 3 slots, padding) */
  const uint32_t wi = 4 * ti->row_bytes / 4, wf = 2 * tf->row_bytes / 4;
  uint32_t words[64], changed[64];
  for (uint32_t i = 0; i < 64; i++) words[i] = 1000 + i, changed[i] = i;
  obuf_t b = {0};
  /* every word changed: dense; two of tf's 12 words: pairs; sparse refused: dense */
  assert_int_equal(psm_entry_add(&b, ti, 3, changed, words, wi, NULL, 1), 0);
  const uint32_t two[] = {1, 7}, twov[] = {1001, 1007};
  assert_int_equal(psm_entry_add(&b, tf, 4, two, twov, 2, NULL, 1), 0);
  assert_int_equal(psm_entry_add(&b, tf, 0, two, twov, 2, NULL, 0), 0);
  assert_int_equal(b.len, 8 + (16 + wi * 4) + (16 + 2 * 8) + (16 + wf * 4));
  psm_entries_t it;
  psm_entry_t e;
  assert_int_equal(psm_entries_begin(b.p, b.len, &it, NULL), 0);
  assert_int_equal(psm_entry_next(node, &it, &e, NULL), 1);
  assert_ptr_equal(e.t, ti);
  assert_int_equal(e.actor, 3);
  assert_int_equal(e.npairs, 0);
  assert_memory_equal(e.words, words, wi * 4);
  assert_int_equal(psm_entry_next(node, &it, &e, NULL), 1);
  assert_ptr_equal(e.t, tf);
  assert_int_equal(e.npairs, 2);
  assert_int_equal(psm_entry_index(&e, 1), 7);
  assert_int_equal(psm_entry_word(&e, 1), 1007);
  assert_int_equal(psm_entry_next(node, &it, &e, NULL), 1);
  assert_int_equal(e.npairs, 0); /* dense: the two words, zeros elsewhere */
  uint32_t dense[16];
  memcpy(dense, e.words, wf * 4);
  for (uint32_t i = 0; i < wf; i++) assert_int_equal(dense[i], i == 1 ? 1001 : i == 7 ? 1007 : 0);
  assert_int_equal(psm_entry_next(node, &it, &e, NULL), 0);
  /* dense values: every word from `all`, the changed ones from vals */
  obuf_t v = {0};
  assert_int_equal(psm_entry_add(&v, tf, 2, two, twov, 2, changed, 0), 0);
  assert_int_equal(psm_entries_begin(v.p, v.len, &it, NULL), 0);
  assert_int_equal(psm_entry_next(node, &it, &e, NULL), 1);
  memcpy(dense, e.words, wf * 4);
  for (uint32_t i = 0; i < wf; i++) assert_int_equal(dense[i], i == 1 ? 1001 : i == 7 ? 1007 : i);
  free(v.p);
  refuses_other_lengths(dec_entries, b.p, b.len);
  memcpy(b.p, &(uint32_t){4}, 4); /* four announced, three there */
  assert_int_not_equal(dec_entries(b.p, b.len), 0);
  memcpy(b.p, &(uint32_t){2}, 4); /* two announced, three there */
  assert_int_not_equal(dec_entries(b.p, b.len), 0);
  memcpy(b.p, &(uint32_t){3}, 4);
  /* pairs out of order, or past the actor's words */
  uint8_t *pairs = b.p + 8 + 16 + wi * 4 + 16;
  memcpy(pairs + 8, &(uint32_t){1}, 4);
  assert_int_not_equal(dec_entries(b.p, b.len), 0);
  memcpy(pairs + 8, &wf, 4);
  assert_int_not_equal(dec_entries(b.p, b.len), 0);
  memcpy(pairs + 8, &(uint32_t){7}, 4);
  assert_int_equal(dec_entries(b.p, b.len), 0);
  free(b.p);
}

static void test_lookup(void **state)
{
  (void)state;
  psm_why_t why;
  assert_ptr_equal(psm_table(node, 1, &why), tf);
  assert_null(psm_table(node, 4, &why));
  assert_non_null(strstr(why.text, "no table 4 (this node has 4)"));
  assert_ptr_equal(psm_actor(node, 0, 9, &why), ti);
  assert_null(psm_actor(node, 0, 10, &why));
  assert_non_null(strstr(why.text, "actor 10 is outside table 0"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lookup),
      cmocka_unit_test(test_rows_requests_and_pushes),
      cmocka_unit_test(test_rows_sparse_pushes),
      cmocka_unit_test(test_rows_of_id_tables),
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_values_sparse_patterns),
      cmocka_unit_test(test_ids_blob_checked),
      cmocka_unit_test(test_actor_messages),
      cmocka_unit_test(test_want),
      cmocka_unit_test(test_intent),
      cmocka_unit_test(test_claims),
      cmocka_unit_test(test_entries),
  };
  return cmocka_run_group_tests_name("psmsg", tests, setup, teardown);
}
