/* data.c — see data.h: ratings, id maps and file loaders. Loaders read a line at a time
 * with getline and parse fields in place (end pointers checked, strtod only off the fast
 * path). The generator, split and shuffle are in generate.c. */
#include "data.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <sys/types.h>

const char *mf_strerror(int err)
{
  static const char *const msg[] = {"success",       "input/output error", "malformed input",
                                    "out of memory", "invalid argument",   "too many distinct ids"};
  return err <= 0 && err >= MF_ERANGE ? msg[-err] : "unknown error";
}

void mf__set_err(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---- ratings ------------------------------------------------------------------------ */

int mf_ratings_reserve(mf_ratings_t *r, size_t cap)
{
  if (cap <= r->cap) return 0;
  if (cap > SIZE_MAX / sizeof(*r->r)) return MF_ENOMEM;
  mf_rating_t *p = realloc(r->r, cap * sizeof(*p));
  if (!p) return MF_ENOMEM;
  r->r = p;
  r->cap = cap;
  return 0;
}

static inline int push(mf_ratings_t *r, uint32_t row, uint32_t col, float value)
{
  if (r->n == r->cap && mf_ratings_reserve(r, r->cap ? r->cap * 2 : 1024)) return MF_ENOMEM;
  r->r[r->n++] = (mf_rating_t){row, col, value};
  return 0;
}

int mf_ratings_push(mf_ratings_t *r, uint32_t row, uint32_t col, float value)
{
  return push(r, row, col, value);
}

void mf_ratings_free(mf_ratings_t *r)
{
  free(r->r);
  r->r = NULL;
  r->n = r->cap = 0;
}

/* ---- id maps ------------------------------------------------------------------------ */

static inline size_t idhash(uint64_t k)
{
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return (size_t)k;
}

int mf_idmap_find(const mf_idmap_t *m, uint64_t id, uint32_t *index)
{
  if (id < m->ndirect) {
    uint32_t v = m->direct[id];
    if (!v) return 0;
    *index = v - 1;
    return 1;
  }
  if (!m->slots) return 0;
  for (size_t i = idhash(id) & m->mask;; i = (i + 1) & m->mask) {
    const mf_idmap_slot_t *s = &m->slots[i];
    if (!s->index1) return 0;
    if (s->id == id) {
      *index = s->index1 - 1;
      return 1;
    }
  }
}

/* Rebuilds the table with nslots slots from the ids in ids[0..n) at or above nd (the
 * ids array stays the truth). Changes nothing when out of memory. */
static int rehash(mf_idmap_t *m, size_t nslots, size_t nd)
{
  mf_idmap_slot_t *slots = calloc(nslots, sizeof(*slots));
  if (!slots) return MF_ENOMEM;
  size_t mask = nslots - 1, nhashed = 0;
  for (size_t k = 0; k < m->n; k++) {
    if (m->ids[k] < nd) continue;
    size_t i = idhash(m->ids[k]) & mask;
    while (slots[i].index1) i = (i + 1) & mask;
    slots[i] = (mf_idmap_slot_t){m->ids[k], (uint32_t)k + 1};
    nhashed++;
  }
  free(m->slots);
  m->slots = slots;
  m->mask = mask;
  m->nhashed = nhashed;
  return 0;
}

/* Extends the direct array to nd entries, moving ids below nd out of the table. */
static int grow_direct(mf_idmap_t *m, size_t nd)
{
  uint32_t *d = realloc(m->direct, nd * sizeof(*d));
  if (!d) return MF_ENOMEM;
  m->direct = d;
  memset(d + m->ndirect, 0, (nd - m->ndirect) * sizeof(*d));
  int rc = m->slots ? rehash(m, m->mask + 1, nd) : 0;
  if (rc) return rc;
  for (size_t k = 0; k < m->n; k++)
    if (m->ids[k] >= m->ndirect && m->ids[k] < nd) d[m->ids[k]] = (uint32_t)k + 1;
  m->ndirect = nd;
  return 0;
}

int mf_idmap_insert(mf_idmap_t *m, uint64_t id, uint32_t *index)
{
  if (mf_idmap_find(m, id, index)) return 0;
  if (m->n >= MF_IDMAP_MAX) return MF_ERANGE;
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *ids = realloc(m->ids, cap * sizeof(*ids));
    if (!ids) return MF_ENOMEM;
    m->ids = ids;
    m->cap = cap;
  }
  /* Direct array while it costs at most 32 bytes per id (plus 256 KiB), about what
   * the table costs: dense ids (LIBMF, Matrix Market, MovieLens) stay out of it. */
  size_t limit = 8 * (m->n + 1) + 65536;
  if (id >= m->ndirect && id < limit) {
    size_t nd = m->ndirect * 2 > id + 1 ? m->ndirect * 2 : (size_t)id + 1;
    int rc = grow_direct(m, nd < limit ? nd : limit);
    if (rc) return rc;
  }
  if (id < m->ndirect) {
    m->direct[id] = (uint32_t)m->n + 1;
  } else {
    if (!m->slots || (m->nhashed + 1) * 2 > m->mask + 1) {
      int rc = rehash(m, m->slots ? (m->mask + 1) * 2 : 1024, m->ndirect);
      if (rc) return rc;
    }
    size_t i = idhash(id) & m->mask;
    while (m->slots[i].index1) i = (i + 1) & m->mask;
    m->slots[i] = (mf_idmap_slot_t){id, (uint32_t)m->n + 1};
    m->nhashed++;
  }
  m->ids[m->n] = id;
  *index = (uint32_t)m->n++;
  return 0;
}

int mf_idmap_init_identity(mf_idmap_t *m, size_t n)
{
  mf_idmap_free(m);
  if (n > MF_IDMAP_MAX) return MF_ERANGE;
  size_t cap = n ? n : 1;
  m->ids = malloc(cap * sizeof(*m->ids));
  if (!m->ids) return MF_ENOMEM;
  m->cap = cap;
  for (size_t i = 0; i < n; i++) m->ids[i] = i;
  m->n = n;
  int rc = n ? grow_direct(m, n) : 0;
  if (rc) mf_idmap_free(m);
  return rc;
}

void mf_idmap_free(mf_idmap_t *m)
{
  free(m->ids);
  free(m->direct);
  free(m->slots);
  memset(m, 0, sizeof(*m));
}

/* ---- formats ------------------------------------------------------------------------ */

static const char *const format_names[] = {"auto", "csv", "udata", "dat", "triples", "mm"};

int mf_format_parse(const char *name, mf_format_t *out)
{
  for (int i = 0; i <= MF_FMT_MM; i++) {
    if (strcmp(name, format_names[i]) == 0) {
      *out = (mf_format_t)i;
      return 0;
    }
  }
  return MF_EINVAL;
}

const char *mf_format_name(mf_format_t fmt)
{
  return (unsigned)fmt <= MF_FMT_MM ? format_names[fmt] : "?";
}

/* Line syntax as people should read it in error messages, by format. */
static const char *const expected_line[] = {
    "'row col value'",
    "'user,item,rating[,timestamp]'",
    "'user<TAB>item<TAB>rating[<TAB>timestamp]'",
    "'user::item::rating[::timestamp]'",
    "'row col value'",
    "'row col value'",
};

static inline int is_ws(char c)
{
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

typedef struct {
  const char *b, *e; /* [b, e) */
} field_t;

/* Whitespace-separated fields of [p, e). Stores at most maxf; returns how many there
 * are, up to maxf + 1 (so callers can tell "too many"). */
static int split_ws(const char *p, const char *e, field_t *f, int maxf)
{
  int n = 0;
  for (;;) {
    while (p < e && is_ws(*p)) p++;
    if (p == e) return n;
    if (n == maxf) return n + 1;
    f[n].b = p;
    while (p < e && !is_ws(*p)) p++;
    f[n++].e = p;
  }
}

/* Fields of [p, e) separated by the string sep, each trimmed of blanks; same return
 * convention as split_ws. A non-blank line always has at least one field. */
static int split_sep(const char *p, const char *e, const char *sep, size_t seplen, field_t *f,
                     int maxf)
{
  int n = 0;
  for (;;) {
    if (n == maxf) return n + 1;
    const char *q = p;
    while (q < e && !(*q == sep[0] && (size_t)(e - q) >= seplen && !memcmp(q, sep, seplen))) q++;
    const char *b = p, *fe = q;
    while (b < fe && is_ws(*b)) b++;
    while (fe > b && is_ws(fe[-1])) fe--;
    f[n].b = b, f[n++].e = fe;
    if (q == e) return n;
    p = q + seplen;
  }
}

static int parse_u64(const char *b, const char *e, uint64_t *out)
{
  if (b == e) return 0;
  uint64_t v = 0;
  for (; b < e; b++) {
    unsigned d = (unsigned)(*b - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

enum { VAL_OK, VAL_SYNTAX, VAL_NONFINITE };

/* The largest rating magnitude taken: training squares the errors in single precision,
 * and ratings near the float range (1e38) overflowed them, which then read as a learning
 * rate too large. Counts and scores up to a billion fit. */
#define MAX_RATING 1e9

/* Parses [b, e) as a float. Fast path: [sign]digits[.digits] with at most 15 digits is
 * mantissa / 10^k, both exact in a double, so the division rounds correctly, like
 * strtod. Everything else (exponents, long mantissas, nan, inf) goes to strtod, which
 * stops at the field's end because a separator, blank or NUL always follows it. */
static int parse_value(const char *b, const char *e, float *out)
{
  static const double pow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  const char *p = b;
  int neg = 0, digits = 0, frac = 0;
  uint64_t mant = 0;
  if (p < e && (*p == '-' || *p == '+')) neg = *p++ == '-';
  for (; p < e && *p >= '0' && *p <= '9' && digits < 16; p++, digits++)
    mant = mant * 10 + (uint64_t)(*p - '0');
  if (p < e && *p == '.') {
    for (p++; p < e && *p >= '0' && *p <= '9' && digits < 16; p++, digits++, frac++)
      mant = mant * 10 + (uint64_t)(*p - '0');
  }
  if (p == e && digits > 0 && digits <= 15) {
    double d = (double)mant / pow10[frac];
    if (d > MAX_RATING) return VAL_NONFINITE;
    *out = (float)(neg ? -d : d);
    return VAL_OK;
  }
  if (b == e) return VAL_SYNTAX;
  for (const char *q = b; q < e; q++) /* decimal only: strtod also reads 0x10 and nan(...) */
    if (*q == 'x' || *q == 'X' || *q == '(') return VAL_SYNTAX;
  char *end;
  double d = strtod(b, &end);
  if (end != e) return VAL_SYNTAX;
  if (!isfinite(d) || fabs(d) > MAX_RATING) return VAL_NONFINITE;
  *out = (float)d;
  return VAL_OK;
}

/* ---- loader ------------------------------------------------------------------------- */

typedef struct {
  const char *path;
  mf_format_t fmt;
  mf_idmap_t *rows, *cols;
  int add_new_ids;
  mf_ratings_t *out;
  size_t skipped;
  char *err;
  size_t errlen;
  size_t lineno;
  long long part_at; /* > 0: the lines are of a part of the file from this byte on
                        (mf_load_part), named by where they start: line_at */
  long long line_at;
  mf_rating_fn raw; /* mf_load_part: each rating's ids as they are in the file */
  void *raw_arg;
  int seen_data; /* a non-blank line was read (a CSV header may only come first) */
  /* Matrix Market */
  int mm_state; /* 0: banner next, 1: size line next, 2: entries */
  int mm_symmetric;
  uint64_t mm_rows, mm_cols, mm_nnz, mm_count;
  size_t mm_size_line;
} loader_t;

/* The offending line for a message: at most 60 characters, control bytes as '?'. */
static const char *shown(char *buf, size_t cap, const char *line, size_t len)
{
  size_t n = len > 60 ? 60 : len, i;
  if (n + 4 > cap) n = cap - 4;
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)line[i];
    buf[i] = c < 0x20 && c != '\t' ? '?' : (char)c;
  }
  if (len > n) memcpy(buf + i, "...", 3), i += 3;
  buf[i] = '\0';
  return buf;
}

/* "PATH:LINE: expected WHAT, got 'LINE'". Returns MF_EPARSE. */
static int bad_line(loader_t *L, const char *what, const char *line, size_t len)
{
  char buf[80];
  if (L->part_at > 0)
    mf__set_err(L->err, L->errlen, "%s: the line at byte %lld: expected %s, got '%s'", L->path,
                L->line_at, what, shown(buf, sizeof(buf), line, len));
  else
    mf__set_err(L->err, L->errlen, "%s:%zu: expected %s, got '%s'", L->path, L->lineno, what,
                shown(buf, sizeof(buf), line, len));
  return MF_EPARSE;
}

static int add_rating(loader_t *L, uint64_t rid, uint64_t cid, float v)
{
  uint32_t r, c;
  if (L->raw) {
    int rc = L->raw(L->raw_arg, rid, cid, v);
    if (rc)
      mf__set_err(L->err, L->errlen, "%s: %s", L->path,
                  rc == MF_ENOMEM ? "out of memory" : "cannot send its ratings to another node");
    return rc;
  }
  if (L->add_new_ids) {
    int rc = mf_idmap_insert(L->rows, rid, &r);
    if (!rc) rc = mf_idmap_insert(L->cols, cid, &c);
    if (rc == MF_ERANGE) {
      mf__set_err(L->err, L->errlen, "%s:%zu: more than %u distinct row or column ids", L->path,
                  L->lineno, MF_IDMAP_MAX);
      return rc;
    }
    if (rc) goto nomem;
  } else if (!mf_idmap_find(L->rows, rid, &r) || !mf_idmap_find(L->cols, cid, &c)) {
    L->skipped++;
    return 0;
  }
  if (!push(L->out, r, c, v)) return 0;
nomem:
  mf__set_err(L->err, L->errlen, "%s:%zu: out of memory", L->path, L->lineno);
  return MF_ENOMEM;
}

/* One rating line of CSV, UDATA, DAT or TRIPLES. */
static int rating_line(loader_t *L, const char *line, size_t len)
{
  const char *e = line + len;
  field_t f[5];
  int n, minf = 3, maxf = 4;
  switch (L->fmt) {
  case MF_FMT_CSV:
    n = split_sep(line, e, ",", 1, f, 4);
    break;
  case MF_FMT_DAT:
    n = split_sep(line, e, "::", 2, f, 4);
    break;
  case MF_FMT_TRIPLES:
    n = split_ws(line, e, f, maxf = 3);
    break;
  default:
    n = split_ws(line, e, f, 4);
    break;
  }
  uint64_t rid = 0, cid = 0, ts;
  int ids_ok = parse_u64(f[0].b, f[0].e, &rid);
  /* a header (userId,movieId,rating,timestamp): a first line whose first field is a name,
     not a number that failed (-1, 1.5: a bad line, said, not a rating dropped) */
  const int named = f[0].b < f[0].e && (isalpha((unsigned char)*f[0].b) || *f[0].b == '"');
  if (L->fmt == MF_FMT_CSV && !L->seen_data && !ids_ok && named && n >= minf && n <= maxf) {
    L->seen_data = 1;
    return 0;
  }
  L->seen_data = 1;
  if (n < minf || n > maxf || !ids_ok || !parse_u64(f[1].b, f[1].e, &cid) ||
      (n == 4 && !parse_u64(f[3].b, f[3].e, &ts)))
    return bad_line(L, expected_line[L->fmt], line, len);
  if (rid == MF_NO_ID || cid == MF_NO_ID) /* (the value that marks "no id" in a model) */
    return bad_line(L, "ids below 18446744073709551615", line, len);
  float v;
  int vr = parse_value(f[2].b, f[2].e, &v);
  if (vr != VAL_OK) {
    char what[96];
    snprintf(what, sizeof(what), "%s%s", expected_line[L->fmt],
             vr == VAL_NONFINITE ? " with a rating within +-1e9" : "");
    return bad_line(L, what, line, len);
  }
  return add_rating(L, rid, cid, v);
}

#define MM_BANNER "'%%MatrixMarket matrix coordinate real general' (or integer, symmetric)"

static int mm_banner(loader_t *L, const char *line, size_t len)
{
  field_t f[6];
  int n = split_ws(line, line + len, f, 5);
#define IS(k, s) ((size_t)(f[k].e - f[k].b) == strlen(s) && !strncasecmp(f[k].b, s, strlen(s)))
  if (n != 5 || !IS(0, "%%MatrixMarket") || !IS(1, "matrix"))
    return bad_line(L, MM_BANNER, line, len);
  if (IS(2, "array"))
    return bad_line(L, "a sparse 'coordinate' matrix (dense 'array' files are not supported)", line,
                    len);
  if (!IS(2, "coordinate")) return bad_line(L, MM_BANNER, line, len);
  if (IS(3, "complex") || IS(3, "pattern"))
    return bad_line(L,
                    "'real' or 'integer' values ('complex' and 'pattern' matrices are not "
                    "supported: ratings are real numbers)",
                    line, len);
  if (!IS(3, "real") && !IS(3, "integer")) return bad_line(L, MM_BANNER, line, len);
  if (IS(4, "symmetric"))
    L->mm_symmetric = 1;
  else if (!IS(4, "general"))
    return bad_line(L, "symmetry 'general' or 'symmetric' (others are not supported)", line, len);
#undef IS
  L->mm_state = 1;
  return 0;
}

static int mm_line(loader_t *L, const char *line, size_t len)
{
  field_t f[4];
  int n = split_ws(line, line + len, f, 3);
  if (L->mm_state == 1) {
    if (n != 3 || !parse_u64(f[0].b, f[0].e, &L->mm_rows) ||
        !parse_u64(f[1].b, f[1].e, &L->mm_cols) || !parse_u64(f[2].b, f[2].e, &L->mm_nnz))
      return bad_line(L, "the size line 'rows cols entries'", line, len);
    if (L->mm_symmetric && L->mm_rows != L->mm_cols)
      return bad_line(L, "a square size line 'n n entries' for a symmetric matrix", line, len);
    L->mm_state = 2;
    L->mm_size_line = L->lineno;
    /* A hint only: a wrong count in the file must not make us allocate gigabytes. */
    uint64_t want = L->mm_nnz * (L->mm_symmetric ? 2 : 1);
    if (want > (1u << 24)) want = 1u << 24;
    if (L->out && mf_ratings_reserve(L->out, L->out->n + (size_t)want)) {
      mf__set_err(L->err, L->errlen, "%s:%zu: out of memory", L->path, L->lineno);
      return MF_ENOMEM;
    }
    return 0;
  }
  uint64_t i = 0, j = 0;
  float v;
  int vr = VAL_SYNTAX;
  if (n == 3 && parse_u64(f[0].b, f[0].e, &i) && parse_u64(f[1].b, f[1].e, &j))
    vr = parse_value(f[2].b, f[2].e, &v);
  if (vr == VAL_SYNTAX) return bad_line(L, "'row col value'", line, len);
  if (vr == VAL_NONFINITE)
    return bad_line(L, "'row col value' with a value within +-1e9", line, len);
  char what[128];
  if (i < 1 || i > L->mm_rows || j < 1 || j > L->mm_cols) {
    snprintf(what, sizeof(what), "'row col value' with row in 1..%llu and col in 1..%llu",
             (unsigned long long)L->mm_rows, (unsigned long long)L->mm_cols);
    return bad_line(L, what, line, len);
  }
  if (++L->mm_count > L->mm_nnz) {
    snprintf(what, sizeof(what), "at most %llu entries (the count on line %zu)",
             (unsigned long long)L->mm_nnz, L->mm_size_line);
    return bad_line(L, what, line, len);
  }
  int rc = add_rating(L, i, j, v);
  if (!rc && L->mm_symmetric && i != j) rc = add_rating(L, j, i, v);
  return rc;
}

static int load_line(loader_t *L, const char *line, size_t len)
{
  if (L->lineno == 1 && L->line_at == 0 && len >= 3 && !memcmp(line, "\xef\xbb\xbf", 3))
    line += 3, len -= 3; /* a UTF-8 byte-order mark at the file's start */
  if (L->fmt == MF_FMT_MM && L->mm_state == 0) return mm_banner(L, line, len);
  const char *p = line;
  while (p < line + len && is_ws(*p)) p++;
  if (p == line + len) return 0; /* blank */
  if (L->fmt == MF_FMT_MM) return *p == '%' ? 0 : mm_line(L, line, len);
  if (L->fmt == MF_FMT_TRIPLES && *p == '#') return 0;
  return rating_line(L, line, len);
}

/* End-of-file checks: Matrix Market must have had its banner, size line and count. */
static int load_finish(loader_t *L)
{
  if (L->fmt != MF_FMT_MM || (L->mm_state == 2 && L->mm_count == L->mm_nnz)) return 0;
  size_t at = L->lineno ? L->lineno : 1;
  if (L->mm_state == 0)
    mf__set_err(L->err, L->errlen, "%s:%zu: expected %s, got an empty file", L->path, at,
                MM_BANNER);
  else if (L->mm_state == 1)
    mf__set_err(L->err, L->errlen,
                "%s:%zu: expected the size line 'rows cols entries', got the end of the file",
                L->path, at);
  else
    mf__set_err(L->err, L->errlen,
                "%s:%zu: expected %llu entries (the count on line %zu), got %llu before the end of "
                "the file",
                L->path, at, (unsigned long long)L->mm_nnz, L->mm_size_line,
                (unsigned long long)L->mm_count);
  return MF_EPARSE;
}

/* The file at path, buffered for reading ratings, its format decided (MF_FMT_AUTO: by
 * mf_format_detect); NULL with a message in err (*rc: MF_EINVAL, MF_EIO). */
static FILE *open_ratings(const char *path, mf_format_t *fmt, int *rc, char *err, size_t errlen)
{
  if (*fmt == MF_FMT_AUTO) *fmt = mf_format_detect(path);
  if ((unsigned)*fmt > MF_FMT_MM) {
    mf__set_err(err, errlen, "%s: unknown format %d", path, (int)*fmt);
    *rc = MF_EINVAL;
    return NULL;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    mf__set_err(err, errlen, "%s: %s", path, strerror(errno));
    *rc = MF_EIO;
    return NULL;
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  return f;
}

int mf_load(const char *path, mf_format_t fmt, mf_idmap_t *rows, mf_idmap_t *cols, int add_new_ids,
            mf_ratings_t *out, size_t *skipped, char *err, size_t errlen)
{
  if (skipped) *skipped = 0;
  int rc = 0;
  FILE *f = open_ratings(path, &fmt, &rc, err, errlen);
  if (!f) return rc;
  loader_t L = {.path = path,
                .fmt = fmt,
                .rows = rows,
                .cols = cols,
                .add_new_ids = add_new_ids,
                .out = out,
                .err = err,
                .errlen = errlen};
  size_t start = out->n;
  char *line = NULL;
  size_t linecap = 0;
  ssize_t len;
  while (!rc && (len = getline(&line, &linecap, f)) >= 0) {
    L.lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    rc = load_line(&L, line, (size_t)len); /* a NUL byte fails like any bad character */
  }
  if (!rc && !feof(f)) { /* getline failed: a read error or no memory */
    mf__set_err(err, errlen, "%s:%zu: %s", path, L.lineno + 1, strerror(errno));
    rc = errno == ENOMEM ? MF_ENOMEM : MF_EIO;
  }
  if (!rc) rc = load_finish(&L);
  free(line);
  fclose(f);
  if (rc)
    out->n = start;
  else if (skipped)
    *skipped = L.skipped;
  return rc;
}

int mf_load_part(const char *path, mf_format_t fmt, int part, int nparts, mf_rating_fn fn,
                 void *arg, uint64_t *mm_entries, uint64_t *mm_nnz, char *err, size_t errlen)
{
  int rc = 0;
  if (mm_entries) *mm_entries = 0;
  if (mm_nnz) *mm_nnz = 0;
  if (nparts < 1 || part < 0 || part >= nparts) {
    mf__set_err(err, errlen, "%s: part %d of %d", path, part, nparts);
    return MF_EINVAL;
  }
  FILE *f = open_ratings(path, &fmt, &rc, err, errlen);
  if (!f) return rc;
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    mf__set_err(err, errlen, "%s: %s", path, strerror(errno));
    fclose(f);
    return MF_EIO;
  }
  loader_t L = {.path = path,
                .fmt = fmt,
                .raw = fn,
                .raw_arg = arg,
                .seen_data = part > 0, /* a CSV header is the file's first line only */
                .err = err,
                .errlen = errlen};
  char *line = NULL;
  size_t linecap = 0;
  ssize_t len;
  /* Matrix Market: the header on every part, its lines numbered; the parts cut the rest */
  long long body = 0;
  while (!rc && fmt == MF_FMT_MM && L.mm_state < 2 && (len = getline(&line, &linecap, f)) >= 0) {
    body += len;
    L.lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    rc = load_line(&L, line, (size_t)len);
  }
  if (!rc && fmt == MF_FMT_MM && L.mm_state < 2) rc = load_finish(&L);
  /* [from, to) of the bytes; a line belongs to the part in which it starts */
  const long long size = (long long)st.st_size, span = size > body ? size - body : 0;
  const long long from = body + span * part / nparts, to = body + span * (part + 1) / nparts;
  L.part_at = part > 0 ? from : 0;
  long long at = from;
  int seek = 0;
  if (!rc && from > body) { /* from the first line that starts at or after `from` */
    seek = fseeko(f, (off_t)(from - 1), SEEK_SET) != 0;
    at = from - 1;
    for (int c; !seek && (c = getc(f)) != EOF;) {
      at++;
      if (c == '\n') break;
    }
  }
  if (!rc && !seek) seek = fseeko(f, (off_t)at, SEEK_SET) != 0;
  if (!rc && seek) rc = MF_EIO;
  while (!rc && at < to && (len = getline(&line, &linecap, f)) >= 0) {
    L.line_at = at;
    at += len;
    L.lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    rc = load_line(&L, line, (size_t)len);
  }
  if ((!rc && ferror(f)) || seek) {
    mf__set_err(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
    rc = errno == ENOMEM ? MF_ENOMEM : MF_EIO;
  }
  if (!rc && fmt == MF_FMT_MM) {
    if (mm_entries) *mm_entries = L.mm_count;
    if (mm_nnz) *mm_nnz = L.mm_nnz;
  }
  free(line);
  fclose(f);
  return rc;
}

static int ends_with_ci(const char *s, const char *suffix)
{
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcasecmp(s + n - k, suffix);
}

mf_format_t mf_format_detect(const char *path)
{
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (ends_with_ci(base, ".csv")) return MF_FMT_CSV;
  if (ends_with_ci(base, ".data")) return MF_FMT_UDATA; /* u.data, also any *.data */
  if (ends_with_ci(base, ".dat")) return MF_FMT_DAT;
  if (ends_with_ci(base, ".mtx") || ends_with_ci(base, ".mm")) return MF_FMT_MM;

  mf_format_t fmt = MF_FMT_TRIPLES;
  FILE *f = fopen(path, "r");
  if (!f) return fmt; /* mf_load reports the error */
  char buf[4096];
  for (int first = 1; fgets(buf, sizeof(buf), f); first = 0) {
    if (first && !strncasecmp(buf, "%%MatrixMarket", 14)) {
      fmt = MF_FMT_MM;
      break;
    }
    const char *p = buf;
    while (*p && (is_ws(*p) || *p == '\n')) p++;
    if (!*p || *p == '#') continue;
    field_t fl[5];
    if (strstr(p, "::"))
      fmt = MF_FMT_DAT;
    else if (strchr(p, ','))
      fmt = MF_FMT_CSV;
    else if (split_ws(p, p + strcspn(p, "\n"), fl, 4) == 4)
      fmt = MF_FMT_UDATA;
    break;
  }
  fclose(f);
  return fmt;
}
