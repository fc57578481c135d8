/* psmsg.c — the parameter server's messages (see psmsg.h): layouts, encoders and
 * validating decoders.
 */
#include "actors/psmsg.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <stdarg.h>
#include <stdio.h>

static uint32_t get_u32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

static uint64_t get_u64(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
  memcpy(p, &v, sizeof(v));
}

static void put_u64(uint8_t *p, uint64_t v)
{
  memcpy(p, &v, sizeof(v));
}

static void say(psm_why_t *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(psm_why_t *why, const char *fmt, ...)
{
  if (!why) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why->text, sizeof(why->text), fmt, ap);
  va_end(ap);
}

au_table_t *psm_table(const au_node_t *n, uint32_t tid, psm_why_t *why)
{
  if (tid >= IDS_TID) {
    if (tid - IDS_TID < (uint32_t)n->nids) return n->ids_by_id[tid - IDS_TID];
    say(why, "no id table %u (this node has %d)", tid - IDS_TID, n->nids);
    return NULL;
  }
  if (tid >= (uint32_t)n->ntables) {
    say(why, "no table %u (this node has %d)", tid, n->ntables);
    return NULL;
  }
  return n->table_by_id[tid];
}

au_table_t *psm_actor(const au_node_t *n, uint32_t tid, uint64_t actor, psm_why_t *why)
{
  au_table_t *t = psm_table(n, tid, why);
  if (t && actor >= t->nactors) {
    say(why, "actor %llu is outside table %u (%llu actors)", (unsigned long long)actor, tid,
        (unsigned long long)t->nactors);
    return NULL;
  }
  return t;
}

/* Reserved bytes must be zero: a message that sets them is from another protocol. */
static int check_zero(const uint8_t *p, size_t len, const char *what, psm_why_t *why)
{
  for (size_t i = 0; i < len; i++)
    if (p[i]) {
      say(why, "reserved bytes of %s are not zero", what);
      return AU_EPROTO;
    }
  return 0;
}

static int check_node(const au_node_t *n, uint32_t node, const char *what, psm_why_t *why)
{
  if (node < (uint32_t)n->nodes) return 0;
  say(why, "%s %u is not a node (the cluster has %d)", what, node, n->nodes);
  return AU_EPROTO;
}

/* --- the batch builder ---------------------------------------------------------------- */

uint8_t *psm_batch_add(obuf_t *b, const void *head, size_t head_len, size_t count_at,
                       size_t entry_len)
{
  size_t before = b->len;
  if (b->len == 0 && obuf_put(b, head, head_len) != 0) return NULL;
  if (obuf_reserve(b, entry_len) != 0) {
    b->len = before;
    return NULL;
  }
  uint8_t *e = b->p + b->len;
  b->len += entry_len;
  put_u32(b->p + count_at, get_u32(b->p + count_at) + 1);
  return e;
}

uint32_t psm_batch_count(const obuf_t *b, size_t count_at)
{
  return b->len ? get_u32(b->p + count_at) : 0;
}

/* --- rows by key -----------------------------------------------------------------------
 * PS_REQ, PS_FWD_REQ: u32 table, u32 n, u32 reply node, u16 reply port, u16 form, u64 keys[n].
 * PS_PUSH, PS_FWD_PUSH: the same head, then n x (u64 key, update of t->update_bytes) in form 0;
 *   in form 1 (sparse) n x (u64 key, u32 c, then c pairs (u32 word index, u32 word) of the
 *   update's words that are not 0, indices ascending), or c = SPARSE_WHOLE and the whole update.
 * PS_ROWS: the request's head and keys, then n rows of t->row_bytes in form 0; in form 1 n x
 *   (u32 c, then c pairs or, c = SPARSE_WHOLE, the whole row).
 * Form 0 but for the pushes and answers of a table whose updates (rows) are at least 64
 * words (a topic model's: a step's delta row changes a few of K counts, and a word's row
 * holds a few of K topics; dense, each carried K words at K = 1000). An id table's (table IDS_TID +
 * i) head has a u64 clock after the reply port, and its keys are ids: any 64-bit value. */

#define ROWS_HEAD    16
#define IDS_HEAD     (ROWS_HEAD + 8)
#define FORM_SPARSE  1u
#define SPARSE_WHOLE 0xffffffffu

static size_t rows_head_len(const au_table_t *t)
{
  return t->ids ? IDS_HEAD : ROWS_HEAD;
}

/* The form of t's messages of a type: sparse for pushes of updates, and answers of rows, of 64
 * words or more. */
static uint32_t rows_form(const au_table_t *t, uint32_t type)
{
  const int push = type == PS_PUSH || type == PS_FWD_PUSH;
  const size_t bytes = push ? t->update_bytes : type == PS_ROWS ? t->row_bytes : 0;
  return !t->ids && bytes >= 256 && bytes % 4 == 0 ? FORM_SPARSE : 0;
}

/* Checks n sparse entries in p[0..len) (each: `key` bytes, u32 count, pairs or `words`
 * words): their lengths, counts and word indices. */
static int check_sparse(const au_table_t *t, uint32_t n, const uint8_t *p, size_t len, size_t key,
                        size_t words, const char *what, psm_why_t *why)
{
  size_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (len - off < key + 4) {
      say(why, "%zu bytes do not hold %u sparse %s of table %u", len, n, what, (unsigned)t->id);
      return AU_EPROTO;
    }
    const uint64_t c = get_u32(p + off + key);
    const size_t body = c == SPARSE_WHOLE ? 4 * words : c <= words ? 8 * c : SIZE_MAX;
    if (body == SIZE_MAX || len - off - key - 4 < body) {
      say(why, "sparse %s %u of table %u: %llu words in %zu bytes (rows of %zu words)", what, i,
          (unsigned)t->id, (unsigned long long)c, len - off - key - 4, words);
      return AU_EPROTO;
    }
    for (uint64_t j = 0, last = 0; c != SPARSE_WHOLE && j < c; j++) {
      uint64_t at = get_u32(p + off + key + 4 + 8 * j);
      if (at >= words || (j && at <= last)) {
        say(why, "sparse %s %u: word %llu (pair %llu) is out of order or past the %zu words", what,
            i, (unsigned long long)at, (unsigned long long)j, words);
        return AU_EPROTO;
      }
      last = at;
    }
    off += key + 4 + body;
  }
  if (off != len) {
    say(why, "%zu bytes after %u sparse %s of table %u", len - off, n, what, (unsigned)t->id);
    return AU_EPROTO;
  }
  return 0;
}

/* The words of n pairs into w, whose other words the caller zeroed. */
static void scatter_pairs(uint32_t *w, const uint8_t *pairs, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    memcpy(&w[get_u32(pairs + 8 * (size_t)i)], pairs + 8 * (size_t)i + 4, 4);
}

int psm_rows_decode(const au_node_t *n, uint32_t type, const uint8_t *p, size_t len,
                    psm_rows_t *out, psm_why_t *why)
{
  if (len < ROWS_HEAD) {
    say(why, "a message of %zu bytes is too short for its head", len);
    return AU_EPROTO;
  }
  au_table_t *t = psm_table(n, get_u32(p), why);
  if (!t) return AU_EPROTO;
  const size_t head = rows_head_len(t);
  if (len < head) {
    say(why, "a message of %zu bytes is too short for an id table's head", len);
    return AU_EPROTO;
  }
  const int push = type == PS_PUSH || type == PS_FWD_PUSH;
  const uint32_t form = get_u32(p + 12) >> 16;
  *out = (psm_rows_t){.t = t,
                      .n = get_u32(p + 4),
                      .reply_node = get_u32(p + 8),
                      .reply_port = (au_port_t)(get_u32(p + 12) & 0xffff),
                      .push = push,
                      .sparse = form == FORM_SPARSE,
                      .entries = p + head,
                      .entries_len = len - head,
                      .clock = t->ids ? get_u64(p + ROWS_HEAD) : 0};
  if (form != 0 && form != rows_form(t, type)) {
    say(why, "form %u is not a form of table %u's %s", form, (unsigned)t->id,
        push              ? "pushes"
        : type == PS_ROWS ? "answers"
                          : "requests");
    return AU_EPROTO;
  }
  if (check_node(n, out->reply_node, "reply node", why)) return AU_EPROTO;
  if (out->sparse && type == PS_ROWS) {
    out->each = sizeof(uint64_t);
    out->entries_len = (size_t)out->n * sizeof(uint64_t);
    if ((len - head) / sizeof(uint64_t) < out->n) {
      say(why, "%zu bytes do not hold %u keys of table %u", len, out->n, (unsigned)t->id);
      return AU_EPROTO;
    }
    out->rows = out->entries + out->entries_len;
    out->rows_len = len - head - out->entries_len;
    if (check_sparse(t, out->n, out->rows, out->rows_len, 0, t->row_bytes / 4, "rows", why))
      return AU_EPROTO;
  } else if (out->sparse) {
    if (check_sparse(t, out->n, out->entries, out->entries_len, 8, t->update_bytes / 4, "updates",
                     why))
      return AU_EPROTO;
  } else {
    out->each = sizeof(uint64_t) + (push ? t->update_bytes : 0);
    size_t body = type == PS_ROWS ? sizeof(uint64_t) + t->row_bytes : out->each;
    if ((len - head) / body < out->n || len != head + (size_t)out->n * body) {
      say(why, "%zu bytes do not hold %u keys of table %u", len, out->n, (unsigned)t->id);
      return AU_EPROTO;
    }
    if (type == PS_ROWS) out->rows = out->entries + (size_t)out->n * sizeof(uint64_t);
    out->entries_len = (size_t)out->n * out->each;
    out->rows_len = len - head - out->entries_len;
  }
  psm_rows_entry_t e;
  for (size_t off = 0; !t->ids && psm_rows_next(out, &off, &e);)
    if (e.key >= t->keys) {
      say(why, "key %llu is outside table %u", (unsigned long long)e.key, (unsigned)t->id);
      return AU_EPROTO;
    }
  return 0;
}

int psm_rows_next(const psm_rows_t *m, size_t *off, psm_rows_entry_t *e)
{
  if (*off >= m->entries_len) return 0;
  const uint8_t *p = m->entries + *off;
  *e = (psm_rows_entry_t){.key = get_u64(p), .at = p, .len = m->each};
  if (!m->sparse || !m->push) {
    if (m->push) e->update = p + sizeof(uint64_t);
  } else {
    const uint32_t c = get_u32(p + 8);
    if (c == SPARSE_WHOLE) {
      e->update = p + 12;
      e->len = 12 + m->t->update_bytes;
    } else {
      e->pairs = p + 12;
      e->npairs = c;
      e->len = 12 + 8 * (size_t)c;
    }
  }
  *off += e->len;
  return 1;
}

void psm_rows_update_copy(const psm_rows_t *m, const psm_rows_entry_t *e, void *dst)
{
  if (e->update) {
    memcpy(dst, e->update, m->t->update_bytes);
    return;
  }
  memset(dst, 0, m->t->update_bytes);
  scatter_pairs(dst, e->pairs, e->npairs);
}

int psm_rows_reply(const au_node_t *n, const uint8_t *p, size_t len, uint32_t *node,
                   au_port_t *port)
{
  if (len < ROWS_HEAD || get_u32(p + 8) >= (uint32_t)n->nodes) return 0;
  *node = get_u32(p + 8);
  *port = (au_port_t)(get_u32(p + 12) & 0xffff);
  return 1;
}

/* The head for table t (rows_head_len(t) bytes). */
static void rows_head(uint8_t head[IDS_HEAD], const au_table_t *t, uint32_t reply_node,
                      au_port_t reply_port, uint32_t form, uint64_t clock)
{
  put_u32(head, (uint32_t)t->id);
  put_u32(head + 4, 0);
  put_u32(head + 8, reply_node);
  put_u32(head + 12, (uint32_t)reply_port | form << 16);
  if (t->ids) put_u64(head + ROWS_HEAD, clock);
}

/* The words of w[0..16) that are not 0, bit i for word i: a topic model's rows are mostly
 * zero counts, and a chunk's nonzero words are visited by their bits. */
static unsigned nonzero_bits(const uint32_t *w)
{
#ifdef __SSE2__
  const __m128i z = _mm_setzero_si128();
  const __m128i a = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)w), z),
                b = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(w + 4)), z),
                c = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(w + 8)), z),
                d = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(w + 12)), z);
  /* lanes of all ones or zeros, narrowed in order to a byte each */
  const __m128i bytes = _mm_packs_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
  return ~(unsigned)_mm_movemask_epi8(bytes) & 0xffffu;
#else
  unsigned m = 0;
  for (unsigned i = 0; i < 16; i++) m |= (unsigned)(w[i] != 0) << i;
  return m;
#endif
}

/* The pairs (u32 index, u32 word) of the words of w[0..words) that are not 0, at q, while
 * they end before `end` (q + 8 bytes may be written past it); their end, or NULL when they
 * would not end before `end`. */
static uint8_t *write_pairs(uint8_t *q, const uint8_t *end, const uint32_t *w, size_t words)
{
  size_t i = 0;
  for (; i + 16 <= words; i += 16)
    for (unsigned m = nonzero_bits(w + i); m; m &= m - 1) {
      if (q >= end) return NULL;
      const size_t j = i + (size_t)__builtin_ctz(m);
      put_u32(q, (uint32_t)j);
      memcpy(q + 4, &w[j], 4); /* the word as it is, like the dense form */
      q += 8;
    }
  for (; i < words; i++)
    if (w[i]) {
      if (q >= end) return NULL;
      put_u32(q, (uint32_t)i);
      memcpy(q + 4, &w[i], 4);
      q += 8;
    }
  return q < end ? q : NULL;
}

/* One sparse body at e: u32 c and the c pairs of w's nonzero words, or, where those would
 * be no shorter, SPARSE_WHOLE and w's `bytes` whole. e has room for 12 + bytes bytes.
 * Returns its length. */
static size_t write_sparse(uint8_t *e, const void *w, size_t bytes)
{
  uint8_t *end = write_pairs(e + 4, e + 4 + bytes, w, bytes / 4);
  if (!end) {
    put_u32(e, SPARSE_WHOLE);
    memcpy(e + 4, w, bytes);
    return 4 + bytes;
  }
  put_u32(e, (uint32_t)((size_t)(end - e - 4) / 8));
  return (size_t)(end - e);
}

int psm_rows_add(obuf_t *b, const au_table_t *t, uint32_t reply_node, au_port_t reply_port,
                 uint64_t key, const void *update, uint64_t clock)
{
  uint8_t head[IDS_HEAD];
  const uint32_t form = rows_form(t, update ? PS_PUSH : PS_REQ);
  rows_head(head, t, reply_node, reply_port, form, clock);
  size_t each = sizeof(key) + (update ? t->update_bytes : 0) + (form ? 4 : 0);
  /* a sparse entry's pairs may run 8 bytes past the dense one before they are dropped */
  uint8_t *e = psm_batch_add(b, head, rows_head_len(t), 4, each + (form ? 8 : 0));
  if (!e) return AU_ENOMEM;
  put_u64(e, key);
  if (update && form)
    b->len -= each - write_sparse(e + 8, update, t->update_bytes);
  else if (update)
    memcpy(e + sizeof(key), update, t->update_bytes);
  return 0;
}

int psm_rows_add_entry(obuf_t *b, const psm_rows_t *m, const psm_rows_entry_t *e)
{
  uint8_t head[IDS_HEAD];
  rows_head(head, m->t, m->reply_node, m->reply_port, m->sparse ? FORM_SPARSE : 0, m->clock);
  uint8_t *to = psm_batch_add(b, head, rows_head_len(m->t), 4, e->len);
  if (!to) return AU_ENOMEM;
  memcpy(to, e->at, e->len);
  return 0;
}

uint32_t psm_rows_count(const obuf_t *b)
{
  return psm_batch_count(b, 4);
}

size_t psm_rows_answer_len(const psm_rows_t *m)
{
  return rows_head_len(m->t) + (size_t)m->n * (sizeof(uint64_t) + m->t->row_bytes);
}

uint8_t *psm_rows_answer(uint8_t *out, const psm_rows_t *m)
{
  const size_t head = rows_head_len(m->t);
  rows_head(out, m->t, m->reply_node, m->reply_port, 0, m->clock);
  put_u32(out + 4, m->n);
  memcpy(out + head, m->entries, (size_t)m->n * sizeof(uint64_t));
  return out + head + (size_t)m->n * sizeof(uint64_t);
}

int psm_rows_answer_sparse(const psm_rows_t *m)
{
  return rows_form(m->t, PS_ROWS) == FORM_SPARSE;
}

int psm_rows_answer_begin(obuf_t *b, const psm_rows_t *m)
{
  const size_t head = rows_head_len(m->t), keys = (size_t)m->n * sizeof(uint64_t);
  b->len = 0;
  if (obuf_reserve(b, head + keys) != 0) return AU_ENOMEM;
  rows_head(b->p, m->t, m->reply_node, m->reply_port, FORM_SPARSE, m->clock);
  put_u32(b->p + 4, m->n);
  memcpy(b->p + head, m->entries, keys);
  b->len = head + keys;
  return 0;
}

int psm_rows_answer_row(obuf_t *b, const au_table_t *t, const void *row)
{
  if (obuf_reserve(b, 12 + t->row_bytes) != 0) return AU_ENOMEM;
  b->len += write_sparse(b->p + b->len, row, t->row_bytes);
  return 0;
}

void psm_rows_row_next(const psm_rows_t *m, size_t *off, void *dst)
{
  const size_t bytes = m->t->row_bytes;
  const uint8_t *p = m->rows + *off;
  if (!m->sparse) {
    if (dst) memcpy(dst, p, bytes);
    *off += bytes;
    return;
  }
  const uint32_t c = get_u32(p);
  if (c == SPARSE_WHOLE) {
    if (dst) memcpy(dst, p + 4, bytes);
    *off += 4 + bytes;
    return;
  }
  *off += 4 + 8 * (size_t)c;
  if (!dst) return;
  memset(dst, 0, bytes);
  scatter_pairs(dst, p + 4, c);
}

/* --- an actor's rows: PS_MOVE_DATA, PS_REP_DATA ------------------------------------------
 * u32 table, u16 version, u8 hold exponent, u8 form (version and hold 0 for a replica), u64
 * actor, then the group * row_bytes of rows (an id table's actor: its blob, ids.c): form 0 as they
 * are; form 1, sparse: u32 n, then n pairs (u32 word index, u32 word) of the words that are not 0,
 * indices ascending, the other words 0. The sender takes the shorter: a topic model's word rows at
 * K = 1000 are mostly zero counts, and moving them whole shipped 1.2-1.4 GB a sweep on 4 nodes. */

#define VALUES_HEAD   16
#define VALUES_SPARSE 1

size_t psm_values_len(const au_table_t *t)
{
  return VALUES_HEAD + table_actor_bytes(t);
}

uint8_t *psm_values_encode(uint8_t *out, const au_table_t *t, uint64_t actor, uint16_t version,
                           uint8_t hold_exp)
{
  put_u32(out, (uint32_t)t->id);
  memcpy(out + 4, &version, 2);
  out[6] = hold_exp;
  out[7] = 0;
  put_u64(out + 8, actor);
  return out + VALUES_HEAD;
}

/* 32-bit words of an actor's rows (row_bytes is a multiple of 4). */
static size_t actor_words(const au_table_t *t)
{
  return table_actor_bytes(t) / 4;
}

size_t psm_values_write_sparse(uint8_t *out, const au_table_t *t, uint64_t actor, uint16_t version,
                               uint8_t hold_exp, const void *values)
{
  uint8_t *body = psm_values_encode(out, t, actor, version, hold_exp);
  out[7] = VALUES_SPARSE;
  /* a pair per nonzero word while the form is shorter than the dense one (the buffer has
   * room for one pair past the dense form's end) */
  uint8_t *q = write_pairs(body + 4, out + psm_values_len(t), values, actor_words(t));
  if (!q) return 0; /* the dense form is no longer */
  put_u32(body, (uint32_t)((size_t)(q - body - 4) / 8));
  return (size_t)(q - out);
}

void psm_values_zero_sparse(const uint8_t *msg, void *values)
{
  const uint8_t *body = msg + VALUES_HEAD;
  const uint32_t np = get_u32(body);
  uint32_t *w = values;
  for (uint32_t i = 0; i < np; i++) w[get_u32(body + 4 + 8 * (size_t)i)] = 0;
}

void psm_values_write(uint8_t *out, const au_table_t *t, uint64_t actor, uint16_t version,
                      uint8_t hold_exp, const void *values)
{
  memcpy(psm_values_encode(out, t, actor, version, hold_exp), values, table_actor_bytes(t));
}

void psm_values_copy(const psm_values_t *v, void *dst, int zero)
{
  const size_t bytes = table_actor_bytes(v->t);
  if (!v->sparse) {
    memcpy(dst, v->values, bytes);
    return;
  }
  if (!zero) memset(dst, 0, bytes);
  scatter_pairs(dst, v->values, v->npairs);
}

int psm_values_decode(const au_node_t *n, const uint8_t *p, size_t len, psm_values_t *out,
                      psm_why_t *why)
{
  if (len < VALUES_HEAD) {
    say(why, "actor rows of %zu bytes are too short for their head", len);
    return AU_EPROTO;
  }
  au_table_t *t = psm_actor(n, get_u32(p), get_u64(p + 8), why);
  if (!t) return AU_EPROTO;
  *out =
      (psm_values_t){.t = t, .actor = get_u64(p + 8), .hold_exp = p[6], .values = p + VALUES_HEAD};
  memcpy(&out->version, p + 4, 2);
  if (p[7] == VALUES_SPARSE) {
    const size_t words = actor_words(t);
    uint64_t np = len >= VALUES_HEAD + 4 ? get_u32(p + VALUES_HEAD) : 0;
    if (len < VALUES_HEAD + 4 || len != VALUES_HEAD + 4 + 8 * np || np > words) {
      say(why, "sparse actor rows of %zu bytes: not a count and that many pairs of table %u's", len,
          (unsigned)t->id);
      return AU_EPROTO;
    }
    const uint8_t *q = p + VALUES_HEAD + 4;
    for (uint64_t i = 0, last = 0; i < np; i++) {
      uint64_t at = get_u32(q + 8 * i);
      if (at >= words || (i && at <= last)) {
        say(why, "sparse actor rows: word %llu (pair %llu) is out of order or past the %zu words",
            (unsigned long long)at, (unsigned long long)i, words);
        return AU_EPROTO;
      }
      last = at;
    }
    out->sparse = 1;
    out->npairs = (uint32_t)np;
    out->values = q;
    return 0;
  }
  if (len != psm_values_len(t)) {
    say(why, "actor rows of %zu bytes, table %u's are %zu", len, (unsigned)t->id,
        psm_values_len(t));
    return AU_EPROTO;
  }
  if (check_zero(p + 7, 1, "actor rows", why)) return AU_EPROTO;
  return 0;
}

/* --- one actor ---------------------------------------------------------------------------
 * PS_MOVE_REQ: u32 table, u32 to, u64 actor, u32 hops, u32 0          (24 bytes)
 * PS_OWNER:    u32 table, u32 owner, u64 actor, u16 version, u8 hold exponent, u8 0
 *                                                                       (20 bytes)
 * PS_REP_REQ:  u32 table, u32 to, u64 actor                            (16 bytes)
 * PS_REP_DROP, PS_REP_GONE: u32 table, u32 0, u64 actor                (16 bytes) */

static size_t actor_len(uint32_t type)
{
  return type == PS_MOVE_REQ ? 24 : type == PS_OWNER ? 20 : 16;
}

size_t psm_actor_encode(uint8_t out[PSM_ACTOR_MAX], uint32_t type, const psm_actor_msg_t *m)
{
  size_t len = actor_len(type);
  memset(out, 0, len);
  put_u32(out, (uint32_t)m->t->id);
  put_u32(out + 4, type == PS_REP_DROP || type == PS_REP_GONE ? 0 : m->node);
  put_u64(out + 8, m->actor);
  if (type == PS_MOVE_REQ) put_u32(out + 16, m->hops);
  if (type == PS_OWNER) {
    memcpy(out + 16, &m->version, 2);
    out[18] = m->hold_exp;
  }
  return len;
}

int psm_actor_decode(const au_node_t *n, uint32_t type, const uint8_t *p, size_t len,
                     psm_actor_msg_t *out, psm_why_t *why)
{
  if (len != actor_len(type)) {
    say(why, "a message of %zu bytes, not %zu", len, actor_len(type));
    return AU_EPROTO;
  }
  au_table_t *t = psm_actor(n, get_u32(p), get_u64(p + 8), why);
  if (!t) return AU_EPROTO;
  *out = (psm_actor_msg_t){.t = t, .actor = get_u64(p + 8), .node = get_u32(p + 4)};
  if (type == PS_MOVE_REQ && check_zero(p + 20, 4, "a move request", why)) return AU_EPROTO;
  if ((type == PS_REP_DROP || type == PS_REP_GONE) &&
      check_zero(p + 4, 4, "a replica message", why))
    return AU_EPROTO;
  if (type == PS_MOVE_REQ) out->hops = get_u32(p + 16);
  if (type == PS_OWNER) {
    if (check_zero(p + 19, 1, "owner news", why)) return AU_EPROTO;
    memcpy(&out->version, p + 16, 2);
    out->hold_exp = p[18];
  }
  if (type == PS_REP_DROP || type == PS_REP_GONE) return 0;
  return check_node(n, out->node, type == PS_OWNER ? "owner" : "node", why);
}

/* --- PS_WANT, PS_HINT: u32 table, u32 n, u64 actors[n] ------------------------------------- */

int psm_want_add(obuf_t *b, const au_table_t *t, uint64_t actor)
{
  uint8_t head[8];
  put_u32(head, (uint32_t)t->id);
  put_u32(head + 4, 0);
  uint8_t *e = psm_batch_add(b, head, sizeof(head), 4, 8);
  if (!e) return AU_ENOMEM;
  put_u64(e, actor);
  return 0;
}

/* Checks n u64 actors of t at p. */
static int check_actors(const au_table_t *t, const uint8_t *p, uint32_t n, psm_why_t *why)
{
  for (uint32_t i = 0; i < n; i++) {
    const uint64_t a = psm_u64_at(p, i);
    if (a >= t->nactors) {
      say(why, "actor %llu is outside table %u", (unsigned long long)a, (unsigned)t->id);
      return AU_EPROTO;
    }
  }
  return 0;
}

int psm_want_decode(const au_node_t *n, const uint8_t *p, size_t len, psm_want_t *out,
                    psm_why_t *why)
{
  if (len < 8) {
    say(why, "a want of %zu bytes is too short", len);
    return AU_EPROTO;
  }
  au_table_t *t = psm_table(n, get_u32(p), why);
  if (!t) return AU_EPROTO;
  *out = (psm_want_t){.t = t, .n = get_u32(p + 4), .actors = p + 8};
  if ((len - 8) / 8 != out->n || (len - 8) % 8) {
    say(why, "%zu bytes do not hold %u actors", len, out->n);
    return AU_EPROTO;
  }
  return check_actors(t, out->actors, out->n, why);
}

/* --- PS_INTENT -----------------------------------------------------------------------------
 * u32 table, u32 n, u64 from, u64 until (ns from now), u32 worker, f32 its ns per tick,
 * u64 start clock, u64 end clock (48 bytes); then u64 actors[n]. */

#define INTENT_HEAD 48

int psm_intent_add(obuf_t *b, const psm_intent_t *h, uint64_t actor)
{
  uint8_t head[INTENT_HEAD];
  put_u32(head, (uint32_t)h->t->id);
  put_u32(head + 4, 0);
  put_u64(head + 8, h->from_ns);
  put_u64(head + 16, h->until_ns);
  put_u32(head + 24, h->worker);
  memcpy(head + 28, &h->tick_ns, 4);
  put_u64(head + 32, h->start_clock);
  put_u64(head + 40, h->end_clock);
  uint8_t *e = psm_batch_add(b, head, INTENT_HEAD, 4, 8);
  if (!e) return AU_ENOMEM;
  put_u64(e, actor);
  return 0;
}

int psm_intent_decode(const au_node_t *n, const uint8_t *p, size_t len, psm_intent_t *out,
                      psm_why_t *why)
{
  if (len < INTENT_HEAD) {
    say(why, "an intent of %zu bytes is too short", len);
    return AU_EPROTO;
  }
  au_table_t *t = psm_table(n, get_u32(p), why);
  if (!t) return AU_EPROTO;
  *out = (psm_intent_t){.t = t,
                        .n = get_u32(p + 4),
                        .from_ns = get_u64(p + 8),
                        .until_ns = get_u64(p + 16),
                        .worker = get_u32(p + 24),
                        .start_clock = get_u64(p + 32),
                        .end_clock = get_u64(p + 40),
                        .actors = p + INTENT_HEAD};
  memcpy(&out->tick_ns, p + 28, 4);
  if ((len - INTENT_HEAD) / 8 != out->n || (len - INTENT_HEAD) % 8) {
    say(why, "%zu bytes do not hold %u actors", len, out->n);
    return AU_EPROTO;
  }
  if (out->worker >= (uint32_t)n->nworkers) {
    say(why, "worker %u is not one of this node's %d", out->worker, n->nworkers);
    return AU_EPROTO;
  }
  if (!(out->tick_ns >= 0) || out->tick_ns > 1e18f) {
    say(why, "a clock speed of %g ns per tick", (double)out->tick_ns);
    return AU_EPROTO;
  }
  return check_actors(t, out->actors, out->n, why);
}

/* --- PS_CLAIM --------------------------------------------------------------------------------
 * u32 n, u32 0, then n claims: u32 table, u16 hops, u8 flags, u8 0, u64 actor, u32 node,
 * u32 0, u64 from (ns from now), u64 until (ns from now). */

#define CLAIMS_HEAD 8
#define CLAIM_BYTES 40

int psm_claim_add(obuf_t *b, const psm_claim_t *c)
{
  uint8_t head[CLAIMS_HEAD] = {0};
  uint8_t *e = psm_batch_add(b, head, CLAIMS_HEAD, 0, CLAIM_BYTES);
  if (!e) return AU_ENOMEM;
  memset(e, 0, CLAIM_BYTES);
  put_u32(e, (uint32_t)c->t->id);
  memcpy(e + 4, &c->hops, 2);
  e[6] = c->flags;
  put_u64(e + 8, c->actor);
  put_u32(e + 16, c->node);
  put_u64(e + 24, c->from_ns);
  put_u64(e + 32, c->until_ns);
  return 0;
}

int psm_claims_decode(const au_node_t *n, const uint8_t *p, size_t len, uint32_t *count,
                      psm_why_t *why)
{
  if (len < CLAIMS_HEAD) {
    say(why, "claims of %zu bytes are too short", len);
    return AU_EPROTO;
  }
  *count = get_u32(p);
  if (check_zero(p + 4, 4, "a claims head", why)) return AU_EPROTO;
  if ((len - CLAIMS_HEAD) / CLAIM_BYTES != *count || (len - CLAIMS_HEAD) % CLAIM_BYTES) {
    say(why, "%zu bytes do not hold %u claims", len, *count);
    return AU_EPROTO;
  }
  for (uint32_t i = 0; i < *count; i++) {
    const uint8_t *e = p + CLAIMS_HEAD + (size_t)i * CLAIM_BYTES;
    if (!psm_actor(n, get_u32(e), get_u64(e + 8), why)) return AU_EPROTO;
    if (check_node(n, get_u32(e + 16), "claimant", why)) return AU_EPROTO;
    if (check_zero(e + 7, 1, "a claim", why) || check_zero(e + 20, 4, "a claim", why))
      return AU_EPROTO;
    if (e[6] & ~(PSM_CLAIM_HOT | PSM_CLAIM_RELEASE)) {
      say(why, "claim flags 0x%x", e[6]);
      return AU_EPROTO;
    }
  }
  return 0;
}

void psm_claim_at(const au_node_t *n, const uint8_t *p, uint32_t i, psm_claim_t *out)
{
  const uint8_t *e = p + CLAIMS_HEAD + (size_t)i * CLAIM_BYTES;
  *out = (psm_claim_t){.t = psm_table(n, get_u32(e), NULL), /* (checked: a dense or id table) */
                       .actor = get_u64(e + 8),
                       .node = get_u32(e + 16),
                       .flags = e[6],
                       .from_ns = get_u64(e + 24),
                       .until_ns = get_u64(e + 32)};
  memcpy(&out->hops, e + 4, 2);
}

/* --- PS_SYNC, PS_FRESH -------------------------------------------------------------------
 * u32 n, u32 0, then n entries: u32 table, u32 pairs, u64 actor, then either (pairs = 0)
 * group * row_bytes, or pairs x (u32 word index, u32 word), indices ascending. */

#define ENTRIES_HEAD 8
#define ENTRY_HEAD   16

/* (an id table's actor: its blob, ids.c) */
static uint32_t group_words(const au_table_t *t)
{
  return (uint32_t)actor_words(t);
}

int psm_entry_add(obuf_t *b, const au_table_t *t, uint64_t actor, const uint32_t *changed,
                  const uint32_t *vals, uint32_t nchanged, const uint32_t *every, int sparse)
{
  const uint32_t all = group_words(t);
  const int pairs = sparse && nchanged > 0 && (size_t)nchanged * 2 < all;
  const size_t len = ENTRY_HEAD + (pairs ? (size_t)nchanged * 8 : (size_t)all * 4);
  uint8_t head[ENTRIES_HEAD] = {0};
  uint8_t *e = psm_batch_add(b, head, ENTRIES_HEAD, 0, len);
  if (!e) return AU_ENOMEM;
  put_u32(e, (uint32_t)t->id);
  put_u32(e + 4, pairs ? nchanged : 0);
  put_u64(e + 8, actor);
  uint8_t *w = e + ENTRY_HEAD;
  if (!pairs) {
    if (every)
      memcpy(w, every, (size_t)all * 4);
    else
      memset(w, 0, (size_t)all * 4);
    for (uint32_t i = 0; i < nchanged; i++) put_u32(w + (size_t)changed[i] * 4, vals[i]);
    return 0;
  }
  for (uint32_t i = 0; i < nchanged; i++) {
    put_u32(w + (size_t)i * 8, changed[i]);
    put_u32(w + (size_t)i * 8 + 4, vals[i]);
  }
  return 0;
}

int psm_entries_begin(const uint8_t *p, size_t len, psm_entries_t *it, psm_why_t *why)
{
  if (len < ENTRIES_HEAD) {
    say(why, "entries of %zu bytes are too short", len);
    return AU_EPROTO;
  }
  if (check_zero(p + 4, 4, "an entries head", why)) return AU_EPROTO;
  *it = (psm_entries_t){.p = p, .len = len, .off = ENTRIES_HEAD, .left = get_u32(p)};
  return 0;
}

int psm_entry_next(const au_node_t *n, psm_entries_t *it, psm_entry_t *out, psm_why_t *why)
{
  if (it->off == it->len || it->left == 0) {
    if (it->off == it->len && it->left == 0) return 0;
    say(why, "%u entries announced, %zu bytes left at the end", it->left, it->len - it->off);
    return -1;
  }
  if (it->len - it->off < ENTRY_HEAD) {
    say(why, "an entry cut short at byte %zu of %zu", it->off, it->len);
    return -1;
  }
  const uint8_t *e = it->p + it->off;
  au_table_t *t = psm_actor(n, get_u32(e), get_u64(e + 8), why);
  if (!t) return -1;
  const uint32_t pairs = get_u32(e + 4), all = group_words(t);
  if (pairs > all) {
    say(why, "%u changed words in actors of %u words", pairs, all);
    return -1;
  }
  const size_t len = ENTRY_HEAD + (pairs ? (size_t)pairs * 8 : (size_t)all * 4);
  if (it->len - it->off < len) {
    say(why, "an entry of table %u cut short at byte %zu of %zu", (unsigned)t->id, it->off,
        it->len);
    return -1;
  }
  *out = (psm_entry_t){.t = t, .actor = get_u64(e + 8), .npairs = pairs, .words = e + ENTRY_HEAD};
  for (uint32_t i = 0; i < pairs; i++) {
    uint32_t k = psm_entry_index(out, i);
    if (k >= all || (i > 0 && k <= psm_entry_index(out, i - 1))) {
      say(why, "changed word %u (pair %u) is outside the actor or out of order", k, i);
      return -1;
    }
  }
  it->off += len;
  it->left--;
  return 1;
}

/* --- the placer's messages to itself: u64 key ------------------------------------------- */

size_t psm_key_encode(uint8_t out[8], uint64_t key)
{
  put_u64(out, key);
  return 8;
}

int psm_key_decode(const uint8_t *p, size_t len, uint64_t *key)
{
  if (len != 8) return AU_EPROTO;
  *key = get_u64(p);
  return 0;
}

/* --- barriers: u64 generation, u32 count, u32 0 ---------------------------------------------- */

size_t psm_bar_encode(uint8_t out[PSM_BAR_LEN], const psm_bar_t *m)
{
  put_u64(out, m->gen);
  put_u32(out + 8, m->count);
  put_u32(out + 12, 0);
  return PSM_BAR_LEN;
}

int psm_bar_decode(const uint8_t *p, size_t len, psm_bar_t *out, psm_why_t *why)
{
  if (len != PSM_BAR_LEN) {
    say(why, "a barrier message of %zu bytes, not %d", len, PSM_BAR_LEN);
    return AU_EPROTO;
  }
  if (check_zero(p + 12, 4, "a barrier message", why)) return AU_EPROTO;
  *out = (psm_bar_t){.gen = get_u64(p), .count = get_u32(p + 8)};
  return 0;
}

/* --- clocks: u64 run, i64 clock, u64 pushes ------------------------------------------------ */

size_t psm_clk_encode(uint8_t out[PSM_CLK_LEN], const psm_clk_t *m)
{
  put_u64(out, m->run);
  put_u64(out + 8, (uint64_t)m->clock);
  put_u64(out + 16, m->pushes);
  return PSM_CLK_LEN;
}

int psm_clk_decode(const uint8_t *p, size_t len, psm_clk_t *out, psm_why_t *why)
{
  if (len != PSM_CLK_LEN) {
    say(why, "a clock message of %zu bytes, not %d", len, PSM_CLK_LEN);
    return AU_EPROTO;
  }
  *out =
      (psm_clk_t){.run = get_u64(p), .clock = (int64_t)get_u64(p + 8), .pushes = get_u64(p + 16)};
  return 0;
}
