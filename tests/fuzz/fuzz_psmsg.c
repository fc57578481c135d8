/* fuzz_psmsg.c — libFuzzer target for the parameter-server message decoders
 * (actors/psmsg.c): these payloads are network input.
 *
 * Input: one byte that picks the message type, then the payload. The decoders run
 * against a node of 4 ranks with 3 workers and two tables (int32 dim 5 in actors of 4
 * keys; float32 dim 3 with 3 optimizer slots, rows padded to 16 bytes, actors of 2; int32
 * dim 64 in actors of 2, whose pushes are sparse) and an id table (float32 dim 2: any 64-bit key, a
 * clock in the rows head). A message that decodes is walked whole (every key, update, row, actor,
 * claim, entry is read and checked against the table), then encoded again and decoded again to the
 * same fields: any difference aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/psmsg.h"

static au_node_t node;
static au_table_t tables[4];
static au_table_t *by_id[3], *ids_by_id[1];
static char ids_dummy; /* the id table's au_ids_t: psmsg never looks into it */

static void setup(void)
{
  static int done;
  if (done) return;
  done = 1;
  tables[0] = (au_table_t){.id = 0,
                           .keys = 40,
                           .dim = 5,
                           .type = AU_I32,
                           .group = 4,
                           .group_shift = 2,
                           .width = 5,
                           .row_bytes = 20,
                           .update_bytes = 20,
                           .nactors = 10};
  tables[1] = (au_table_t){.id = 1,
                           .keys = 9,
                           .dim = 3,
                           .type = AU_F32,
                           .group = 2,
                           .group_shift = 1,
                           .nslots = 3,
                           .width = 6,
                           .row_bytes = 32,
                           .update_bytes = 12,
                           .nactors = 5};
  tables[3] = (au_table_t){.id = 2,
                           .keys = 6,
                           .dim = 64,
                           .type = AU_I32,
                           .group = 2,
                           .group_shift = 1,
                           .width = 64,
                           .row_bytes = 256,
                           .update_bytes = 256,
                           .nactors = 3};
  tables[2] = (au_table_t){.id = (int)IDS_TID,
                           .keys = UINT64_MAX,
                           .dim = 2,
                           .type = AU_F32,
                           .width = 2,
                           .row_bytes = 8,
                           .update_bytes = 8,
                           .ids = (struct au_ids *)(void *)&ids_dummy};
  by_id[0] = &tables[0];
  by_id[1] = &tables[1];
  by_id[2] = &tables[3];
  ids_by_id[0] = &tables[2];
  node = (au_node_t){.rank = 1,
                     .nodes = 4,
                     .table_by_id = by_id,
                     .ntables = 3,
                     .ids_by_id = ids_by_id,
                     .nids = 1,
                     .nworkers = 3};
}

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "fuzz_psmsg: %s:%d: %s\n", __FILE__, __LINE__, #c);                          \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static uint64_t sink;

static void rows(uint32_t type, const uint8_t *p, size_t len)
{
  psm_rows_t m;
  psm_why_t why;
  if (psm_rows_decode(&node, type, p, len, &m, &why) != 0) return;
  obuf_t again = {0};
  psm_rows_entry_t e;
  uint32_t i = 0;
  uint8_t *update = malloc(m.t->update_bytes), *row = malloc(m.t->row_bytes);
  CHECK(update && row);
  size_t roff = 0;
  for (size_t off = 0; psm_rows_next(&m, &off, &e); i++) {
    CHECK(i < m.n && (m.t->ids || e.key < m.t->keys));
    if (m.push) psm_rows_update_copy(&m, &e, update), sink += update[m.t->update_bytes - 1];
    if (m.rows) psm_rows_row_next(&m, &roff, row), sink += row[m.t->row_bytes - 1];
    CHECK(psm_rows_add_entry(&again, &m, &e) == 0);
  }
  CHECK(i == m.n && (!m.rows || roff == m.rows_len));
  free(update);
  if (type != PS_ROWS && m.n) { /* the same message again, entry by entry */
    CHECK(again.len == len && memcmp(again.p, p, len) == 0);
    psm_rows_t a;
    CHECK(psm_rows_decode(&node, type, again.p, again.len, &a, &why) == 0);
    CHECK(a.t == m.t && a.n == m.n && a.reply_node == m.reply_node &&
          a.reply_port == m.reply_port && a.clock == m.clock);
  }
  if (type == PS_REQ && m.n) {
    uint8_t *ans = malloc(psm_rows_answer_len(&m));
    CHECK(ans);
    memset(psm_rows_answer(ans, &m), 7, (size_t)m.n * m.t->row_bytes);
    psm_rows_t a;
    CHECK(psm_rows_decode(&node, PS_ROWS, ans, psm_rows_answer_len(&m), &a, &why) == 0);
    CHECK(a.n == m.n && psm_rows_key(&a, m.n - 1) == psm_rows_key(&m, m.n - 1));
    free(ans);
  }
  if (type == PS_REQ && m.n && psm_rows_answer_sparse(&m)) { /* sparse rows come back whole */
    obuf_t b = {0};
    uint32_t *w = (uint32_t *)(void *)row;
    const size_t words = m.t->row_bytes / 4;
    CHECK(psm_rows_answer_begin(&b, &m) == 0);
    for (uint32_t k = 0; k < m.n; k++) {
      for (size_t j = 0; j < words; j++) w[j] = (k + j) % (k % 5 + 1) ? 0 : (uint32_t)(j + k);
      CHECK(psm_rows_answer_row(&b, m.t, row) == 0);
    }
    psm_rows_t a;
    CHECK(psm_rows_decode(&node, PS_ROWS, b.p, b.len, &a, &why) == 0 && a.n == m.n);
    size_t off = 0;
    for (uint32_t k = 0; k < m.n; k++) {
      psm_rows_row_next(&a, &off, row);
      for (size_t j = 0; j < words; j++)
        CHECK(w[j] == ((k + j) % (k % 5 + 1) ? 0 : (uint32_t)(j + k)));
    }
    CHECK(off == a.rows_len);
    free(b.p);
  }
  free(row);
  free(again.p);
}

static void values(const uint8_t *p, size_t len)
{
  psm_values_t v;
  if (psm_values_decode(&node, p, len, &v, NULL) != 0) return;
  CHECK(v.actor < v.t->nactors && (v.sparse || len == psm_values_len(v.t)));
  /* the rows, written again in the shorter form, decode to the same rows */
  const size_t bytes = (size_t)v.t->group * v.t->row_bytes;
  uint8_t *rows = malloc(bytes), *rows2 = malloc(bytes);
  CHECK(rows && rows2);
  psm_values_copy(&v, rows, 0);
  uint8_t *again = malloc(psm_values_len(v.t) + 8);
  CHECK(again);
  size_t len2 = psm_values_write_sparse(again, v.t, v.actor, v.version, v.hold_exp, rows);
  if (!len2) {
    psm_values_write(again, v.t, v.actor, v.version, v.hold_exp, rows);
    len2 = psm_values_len(v.t);
  }
  CHECK(len2 <= psm_values_len(v.t));
  psm_values_t w;
  CHECK(psm_values_decode(&node, again, len2, &w, NULL) == 0);
  memset(rows2, 0, bytes);
  psm_values_copy(&w, rows2, 1);
  CHECK(memcmp(rows, rows2, bytes) == 0 && w.actor == v.actor && w.version == v.version);
  if (!v.sparse) CHECK(len2 < len || memcmp(again, p, len) == 0);
  free(again), free(rows), free(rows2);
}

static void actor(uint32_t type, const uint8_t *p, size_t len)
{
  psm_actor_msg_t a, b;
  if (psm_actor_decode(&node, type, p, len, &a, NULL) != 0) return;
  CHECK(a.actor < a.t->nactors);
  uint8_t msg[PSM_ACTOR_MAX];
  size_t l = psm_actor_encode(msg, type, &a);
  CHECK(l == len);
  CHECK(psm_actor_decode(&node, type, msg, l, &b, NULL) == 0);
  CHECK(b.t == a.t && b.actor == a.actor && b.hops == a.hops && b.version == a.version &&
        b.hold_exp == a.hold_exp);
  if (type != PS_REP_DROP && type != PS_REP_GONE) CHECK(b.node == a.node && a.node < 4);
}

static void want(const uint8_t *p, size_t len)
{
  psm_want_t w;
  if (psm_want_decode(&node, p, len, &w, NULL) != 0) return;
  obuf_t again = {0};
  for (uint32_t i = 0; i < w.n; i++) {
    CHECK(psm_want_actor(&w, i) < w.t->nactors);
    CHECK(psm_want_add(&again, w.t, psm_want_actor(&w, i)) == 0);
  }
  if (w.n) CHECK(again.len == len && memcmp(again.p, p, len) == 0);
  free(again.p);
}

static void intent(const uint8_t *p, size_t len)
{
  psm_intent_t in;
  if (psm_intent_decode(&node, p, len, &in, NULL) != 0) return;
  CHECK(in.worker < 3 && in.tick_ns >= 0);
  obuf_t again = {0};
  for (uint32_t i = 0; i < in.n; i++) {
    CHECK(psm_intent_actor(&in, i) < in.t->nactors);
    CHECK(psm_intent_add(&again, &in, psm_intent_actor(&in, i)) == 0);
  }
  if (in.n) CHECK(again.len == len && memcmp(again.p, p, len) == 0);
  free(again.p);
}

static void claims(const uint8_t *p, size_t len)
{
  uint32_t n;
  if (psm_claims_decode(&node, p, len, &n, NULL) != 0) return;
  obuf_t again = {0};
  for (uint32_t i = 0; i < n; i++) {
    psm_claim_t c;
    psm_claim_at(&node, p, i, &c);
    CHECK(c.actor < c.t->nactors && c.node < 4);
    CHECK(psm_claim_add(&again, &c) == 0);
  }
  uint32_t m;
  if (n) CHECK(psm_claims_decode(&node, again.p, again.len, &m, NULL) == 0 && m == n);
  free(again.p);
}

static void entries(const uint8_t *p, size_t len)
{
  psm_entries_t it;
  psm_entry_t e;
  if (psm_entries_begin(p, len, &it, NULL) != 0) return;
  obuf_t again = {0};
  uint32_t words[128], changed[128], entries_read = 0;
  int rc;
  while ((rc = psm_entry_next(&node, &it, &e, NULL)) == 1) {
    entries_read++;
    CHECK(e.actor < e.t->nactors);
    const uint32_t all = (uint32_t)((size_t)e.t->group * e.t->row_bytes / 4);
    CHECK(all <= 128);
    uint32_t k = 0;
    if (e.npairs) {
      for (uint32_t i = 0; i < e.npairs; i++) {
        uint32_t x = psm_entry_index(&e, i);
        CHECK(x < all && (i == 0 || x > psm_entry_index(&e, i - 1)));
        words[k] = psm_entry_word(&e, i);
        changed[k++] = x;
      }
    } else {
      memcpy(words, e.words, (size_t)all * 4);
      for (uint32_t i = 0; i < all; i++) changed[k++] = i;
    }
    CHECK(psm_entry_add(&again, e.t, e.actor, changed, words, k, NULL, e.npairs > 0) == 0);
  }
  if (rc == 0 && entries_read) { /* what the builder made decodes to as many entries */
    psm_entries_t it2;
    uint32_t count = 0;
    CHECK(psm_entries_begin(again.p, again.len, &it2, NULL) == 0);
    while ((rc = psm_entry_next(&node, &it2, &e, NULL)) == 1) count++;
    CHECK(rc == 0 && count == entries_read);
  }
  free(again.p);
}

/* A clock message decodes only at its one length, and encodes back to the same bytes. */
static void clk(const uint8_t *p, size_t len)
{
  psm_clk_t c;
  psm_why_t why;
  if (psm_clk_decode(p, len, &c, &why) != 0) {
    CHECK(len != PSM_CLK_LEN);
    return;
  }
  uint8_t again[PSM_CLK_LEN];
  CHECK(psm_clk_encode(again, &c) == len && memcmp(again, p, len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  setup();
  if (size < 1) return 0;
  static const uint32_t types[] = {PS_REQ,       PS_ROWS,     PS_PUSH,     PS_FWD_REQ, PS_FWD_PUSH,
                                   PS_MOVE_DATA, PS_REP_DATA, PS_MOVE_REQ, PS_OWNER,   PS_REP_REQ,
                                   PS_REP_DROP,  PS_REP_GONE, PS_WANT,     PS_INTENT,  PS_CLAIM,
                                   PS_SYNC,      PS_CLK_FLUSH};
  uint32_t type = types[data[0] % (sizeof(types) / sizeof(types[0]))];
  const uint8_t *p = data + 1;
  size_t len = size - 1;
  /* a copy of exactly len bytes, so that ASan sees any read past the message */
  uint8_t *m = malloc(len ? len : 1);
  if (!m) return 0;
  memcpy(m, p, len);
  switch (type) {
  case PS_REQ:
  case PS_ROWS:
  case PS_PUSH:
  case PS_FWD_REQ:
  case PS_FWD_PUSH:
    rows(type, m, len);
    break;
  case PS_MOVE_DATA:
  case PS_REP_DATA:
    values(m, len);
    break;
  case PS_WANT:
    want(m, len);
    break;
  case PS_INTENT:
    intent(m, len);
    break;
  case PS_CLAIM:
    claims(m, len);
    break;
  case PS_SYNC:
    entries(m, len);
    break;
  case PS_CLK_FLUSH:
    clk(m, len);
    break;
  default:
    actor(type, m, len);
    break;
  }
  free(m);
  return 0;
}
