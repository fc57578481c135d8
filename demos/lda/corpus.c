/* corpus.c — see corpus.h: the corpus, and the UCI bag-of-words and vocabulary loaders.
 * Loaders read a line at a time with getline and parse fields in place; every message
 * names the file and line. The text loader is in text.c, the generator in generate.c.
 */
#include "corpus.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

const char *lda_strerror(int err)
{
  static const char *const msg[] = {"success",       "input/output error", "malformed input",
                                    "out of memory", "invalid argument",   "too large"};
  return err <= 0 && err >= LDA_ERANGE ? msg[-err] : "unknown error";
}

void lda__set_err(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

const char *lda__shown(char *buf, size_t cap, const char *line, size_t len)
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

void lda_corpus_free(lda_corpus_t *c)
{
  free(c->doc_start);
  free(c->words);
  free(c->vocab);
  free(c->vocab_blob);
  memset(c, 0, sizeof(*c));
}

void lda_corpus_word_counts(const lda_corpus_t *c, uint64_t *counts)
{
  memset(counts, 0, (size_t)c->nwords * sizeof(*counts));
  for (size_t i = 0; i < c->ntokens; i++) counts[c->words[i]]++;
}

const char *lda_corpus_word(const lda_corpus_t *c, uint32_t w, char *buf, size_t cap)
{
  if (c->vocab && w < c->nwords) return c->vocab[w];
  snprintf(buf, cap, "w%u", w);
  return buf;
}

/* ---- fields ----------------------------------------------------------------------------- */

static inline int is_ws(char c)
{
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

typedef struct {
  const char *b, *e;
} field_t;

/* Whitespace-separated fields of [p, e): stores at most maxf, returns how many there are
 * up to maxf + 1 (so that callers can tell "too many"). */
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

static int parse_u64(const field_t *f, uint64_t *out)
{
  if (f->b == f->e) return 0;
  uint64_t v = 0;
  for (const char *p = f->b; p < f->e; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

/* A UTF-8 byte-order mark at the file's start (its first line) is not text: dropped. */
static size_t drop_bom(char *line, size_t len, int first)
{
  if (!first || len < 3 || memcmp(line, "\xef\xbb\xbf", 3)) return len;
  memmove(line, line + 3, len - 2); /* (the terminating NUL too) */
  return len - 3;
}

int lda__each_line(const char *path, lda__line_fn fn, void *state, size_t *lines, char *err,
                   size_t errlen)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    lda__set_err(err, errlen, "%s: %s", path, strerror(errno));
    return LDA_EIO;
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t len;
  int rc = 0;
  while (!rc && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    len = (ssize_t)drop_bom(line, (size_t)len, lineno == 1);
    rc = fn(state, line, (size_t)len, lineno);
  }
  if (!rc && !feof(f)) { /* getline failed: a read error or no memory */
    lda__set_err(err, errlen, "%s:%zu: %s", path, lineno + 1, strerror(errno));
    rc = errno == ENOMEM ? LDA_ENOMEM : LDA_EIO;
  }
  free(line);
  fclose(f);
  *lines = lineno;
  return rc;
}

const char *lda__where(char *buf, size_t cap, const char *path, size_t lineno, long long at)
{
  if (at >= 0)
    snprintf(buf, cap, "%s: the line at byte %lld", path, at);
  else
    snprintf(buf, cap, "%s:%zu", path, lineno);
  return buf;
}

int lda__check_cr(const char *path, size_t lineno, long long at, const char *line, size_t len,
                  char *err, size_t errlen)
{
  const char *cr = memchr(line, '\r', len), *q = cr;
  while (q && q < line + len && is_ws(*q)) q++;
  if (!cr || q == line + len) return 0; /* none, or only whitespace after it */
  char buf[80], where[600];
  lda__set_err(err, errlen,
               "%s: expected lines that end in \\n or \\r\\n, got a carriage return (\\r) "
               "within the line, after '%s' (classic Mac line ends? tr '\\r' '\\n' converts "
               "them)",
               lda__where(where, sizeof(where), path, lineno, at),
               lda__shown(buf, sizeof(buf), line, (size_t)(cr - line)));
  return LDA_EPARSE;
}

/* The last non-blank line that starts in [body, s) (s a line start), into *line (malloc'd,
 * without its '\n'). 1 if there is one, 0 if not, LDA_EIO / LDA_ENOMEM. */
static int prev_line(FILE *f, long long body, long long s, char **line, size_t *len)
{
  for (long long w = 4096;; w *= 2) {
    const long long from = s - w < body ? body : s - w;
    const size_t n = (size_t)(s - from);
    char *b = malloc(n + 1);
    if (!b) return LDA_ENOMEM;
    if (fseeko(f, (off_t)from, SEEK_SET) != 0 || fread(b, 1, n, f) != n) {
      free(b);
      return LDA_EIO;
    }
    size_t e = n; /* the lines of the window, last first: [st, end) */
    while (e > 0) {
      size_t end = b[e - 1] == '\n' ? e - 1 : e, st = end;
      while (st > 0 && b[st - 1] != '\n') st--;
      if (st == 0 && from > body) break; /* it may begin before the window: widen it */
      size_t q = end;
      while (q > st && b[q - 1] == '\r') q--;
      int blank = 1;
      for (size_t x = st; x < q; x++) blank &= is_ws(b[x]);
      if (!blank) {
        *len = q - st;
        memmove(b, b + st, *len);
        b[*len] = '\0';
        *line = b;
        return 1;
      }
      e = st;
    }
    free(b);
    if (e == 0) return 0; /* back at body: no line before */
  }
}

int lda__each_line_part(const char *path, long long body, size_t body_lines, int part, int nparts,
                        int extend, lda__part_fn fn, void *state, char *err, size_t errlen)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    lda__set_err(err, errlen, "%s: %s", path, strerror(errno));
    return LDA_EIO;
  }
  struct stat st;
  int rc = 0;
  if (fstat(fileno(f), &st) != 0) {
    lda__set_err(err, errlen, "%s: %s", path, strerror(errno));
    fclose(f);
    return LDA_EIO;
  }
  const long long size = (long long)st.st_size, span = size > body ? size - body : 0;
  const long long from = body + span * part / nparts, to = body + span * (part + 1) / nparts;
  long long at = from;
  char *line = NULL;
  size_t cap = 0;
  if (from > body) { /* from the first line that starts at or after `from` */
    int c = 0;
    if (fseeko(f, (off_t)(from - 1), SEEK_SET) != 0) rc = LDA_EIO;
    at = from - 1;
    while (!rc && (c = getc(f)) != EOF) {
      at++;
      if (c == '\n') break;
    }
    if (c == EOF) at = size;
    size_t plen = 0;
    int got = rc ? 0 : prev_line(f, body, at, &line, &plen);
    if (got < 0) rc = got;
    if (got == 1) {
      cap = plen + 1;
      rc = fn(state, line, plen, 0, 0, -1);
    }
  }
  if (!rc && fseeko(f, (off_t)at, SEEK_SET) != 0) rc = LDA_EIO;
  if (rc == LDA_EIO || rc == LDA_ENOMEM)
    lda__set_err(err, errlen, "%s: %s", path, rc == LDA_EIO ? "cannot read it" : "out of memory");
  ssize_t len;
  size_t lineno = body_lines;
  while (!rc && (at < to || extend) && (len = getline(&line, &cap, f)) >= 0) {
    const long long here = at;
    at += len;
    lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    len = (ssize_t)drop_bom(line, (size_t)len, here == 0);
    rc = fn(state, line, (size_t)len, lineno, part ? here : -1, here >= to);
  }
  if (rc == LDA__STOP) {
    rc = 0;
  } else if (!rc && ferror(f)) {
    lda__set_err(err, errlen, "%s: %s", path, strerror(errno));
    rc = errno == ENOMEM ? LDA_ENOMEM : LDA_EIO;
  }
  free(line);
  fclose(f);
  return rc;
}

/* ---- UCI bag-of-words ------------------------------------------------------------------- */

typedef struct {
  uint32_t doc, word, count;
} entry_t;

typedef struct {
  const char *path;
  char *err;
  size_t errlen;
  int header;         /* header values read so far: D, W, NNZ */
  uint64_t d, w, nnz; /* the header */
  size_t nnz_line;    /* line of the NNZ header value */
  entry_t *e;         /* entries read so far */
  size_t n, cap;      /* entries */
  uint64_t tokens;    /* sum of their counts */
  long long at;       /* in a part: the byte where the line starts (-1: whole file) */
  /* in a part: documents (1-based ids) as they come */
  uint64_t prev_doc; /* of the line before the part (0: none); its lines are not ours */
  uint64_t first_doc, last_doc, max_doc; /* 0: none yet */
  int skip;                              /* still at lines of prev_doc */
  int unsorted;                          /* a document's id fell */
} uci_t;

static int uci_bad(uci_t *u, size_t lineno, const char *what, const char *line, size_t len)
{
  char buf[80], where[600];
  lda__set_err(u->err, u->errlen, "%s: expected %s, got '%s'",
               lda__where(where, sizeof(where), u->path, lineno, u->at), what,
               lda__shown(buf, sizeof(buf), line, len));
  return LDA_EPARSE;
}

static int uci_line(void *state, char *line, size_t len, size_t lineno)
{
  uci_t *u = state;
  field_t f[4];
  int n = split_ws(line, line + len, f, 3);
  if (n == 0) return 0; /* blank */
  int rc = lda__check_cr(u->path, lineno, u->at, line, len, u->err, u->errlen);
  if (rc) return rc;
  if (u->header < 3) {
    static const char *const what[] = {"the number of documents D (line 1 of a UCI docword file)",
                                       "the vocabulary size W (line 2 of a UCI docword file)",
                                       "the number of entries NNZ (line 3 of a UCI docword file)"};
    static const uint64_t max[] = {0xfffffffeu, LDA_MAX_WORDS, UINT64_MAX};
    uint64_t v;
    if (n != 1 || !parse_u64(&f[0], &v) || v > max[u->header])
      return uci_bad(u, lineno, what[u->header], line, len);
    if (u->header == 0) u->d = v;
    if (u->header == 1) u->w = v;
    /* memory goes by D, and the model's tables by W: say so, not use them */
    const int over_d = u->d > v + (1u << 20), over_w = u->w > v + (1u << 20);
    if (u->header == 2 && (over_d || over_w)) {
      char what[200];
      snprintf(what, sizeof(what),
               "NNZ (line 3) near %s = %llu (line %d): more than 2^20 of its %s would be %s (a "
               "header that does not describe the file?)",
               over_d ? "D" : "W", (unsigned long long)(over_d ? u->d : u->w), over_d ? 1 : 2,
               over_d ? "documents" : "words", over_d ? "empty" : "in no entry");
      return uci_bad(u, lineno, what, line, len);
    }
    if (u->header == 2) {
      u->nnz = v;
      u->nnz_line = lineno;
      /* a hint only: a wrong count must not make us allocate gigabytes */
      size_t want = v > (1u << 20) ? (1u << 20) : (size_t)v;
      if (want && !(u->e = malloc(want * sizeof(*u->e)))) goto nomem;
      u->cap = want;
    }
    u->header++;
    return 0;
  }
  uint64_t doc, word, count;
  if (n != 3 || !parse_u64(&f[0], &doc) || !parse_u64(&f[1], &word) || !parse_u64(&f[2], &count))
    return uci_bad(u, lineno, "'docID wordID count'", line, len);
  if (doc < 1 || doc > u->d || word < 1 || word > u->w || count < 1) {
    char what[160];
    snprintf(what, sizeof(what),
             "'docID wordID count' with docID in 1..%llu, wordID in 1..%llu and count >= 1",
             (unsigned long long)u->d, (unsigned long long)u->w);
    return uci_bad(u, lineno, what, line, len);
  }
  if (u->n >= u->nnz) {
    char what[96];
    snprintf(what, sizeof(what), "at most %llu entries (NNZ on line %zu)",
             (unsigned long long)u->nnz, u->nnz_line);
    return uci_bad(u, lineno, what, line, len);
  }
  if (count > LDA_MAX_TOKENS || (u->tokens += count) > LDA_MAX_TOKENS) {
    char where[600];
    lda__set_err(u->err, u->errlen,
                 "%s: more than %u tokens in all (the count tables are int32: one topic may hold "
                 "every token)",
                 lda__where(where, sizeof(where), u->path, lineno, u->at), LDA_MAX_TOKENS);
    return LDA_ERANGE;
  }
  if (u->n == u->cap) {
    size_t cap = u->cap ? 2 * u->cap : 1024;
    entry_t *e = realloc(u->e, cap * sizeof(*e));
    if (!e) goto nomem;
    u->e = e;
    u->cap = cap;
  }
  u->e[u->n++] = (entry_t){(uint32_t)(doc - 1), (uint32_t)(word - 1), (uint32_t)count};
  if (doc < u->last_doc) u->unsorted = 1;
  if (!u->first_doc || doc < u->first_doc) u->first_doc = doc;
  if (doc > u->max_doc) u->max_doc = doc;
  u->last_doc = doc;
  return 0;
nomem:
  lda__set_err(u->err, u->errlen, "%s: out of memory", u->path);
  return LDA_ENOMEM;
}

/* The entries of documents [first, first + ndocs) into out (a counting sort by document;
 * within one, the file's order). */
static int uci_build(const uci_t *u, uint64_t first, uint64_t ndocs, lda_corpus_t *out)
{
  out->ndocs = (uint32_t)ndocs;
  out->nwords = (uint32_t)u->w;
  out->ntokens = (size_t)u->tokens;
  out->doc_start = calloc((size_t)ndocs + 1, sizeof(size_t));
  out->words = malloc((u->tokens ? (size_t)u->tokens : 1) * sizeof(uint32_t));
  size_t *fill = malloc(((size_t)ndocs + 1) * sizeof(size_t));
  if (!out->doc_start || !out->words || !fill) {
    free(fill);
    lda__set_err(u->err, u->errlen, "%s: out of memory for %llu tokens", u->path,
                 (unsigned long long)u->tokens);
    return LDA_ENOMEM;
  }
  for (size_t i = 0; i < u->n; i++) out->doc_start[u->e[i].doc - first + 1] += u->e[i].count;
  for (uint64_t d = 0; d < ndocs; d++) out->doc_start[d + 1] += out->doc_start[d];
  memcpy(fill, out->doc_start, ((size_t)ndocs + 1) * sizeof(size_t));
  for (size_t i = 0; i < u->n; i++)
    for (uint32_t k = 0; k < u->e[i].count; k++)
      out->words[fill[u->e[i].doc - first]++] = u->e[i].word;
  free(fill);
  return 0;
}

int lda_load_uci(const char *path, lda_corpus_t *out, char *err, size_t errlen)
{
  memset(out, 0, sizeof(*out));
  uci_t u = {.path = path, .err = err, .errlen = errlen, .at = -1};
  size_t lines;
  int rc = lda__each_line(path, uci_line, &u, &lines, err, errlen);
  if (!rc && u.header < 3) {
    static const char *const what[] = {"the number of documents D", "the vocabulary size W",
                                       "the number of entries NNZ"};
    lda__set_err(err, errlen, "%s:%zu: expected %s, got the end of the file", path, lines + 1,
                 what[u.header]);
    rc = LDA_EPARSE;
  } else if (!rc && u.n != u.nnz) {
    lda__set_err(err, errlen,
                 "%s:%zu: expected %llu entries (NNZ on line %zu), got %zu before the end of the "
                 "file",
                 path, lines, (unsigned long long)u.nnz, u.nnz_line, u.n);
    rc = LDA_EPARSE;
  }
  if (!rc) rc = uci_build(&u, 0, u.d, out);
  free(u.e);
  if (rc) lda_corpus_free(out);
  return rc;
}

void lda_uci_hint(char *err, size_t errlen)
{
  size_t n = err ? strnlen(err, errlen) : errlen;
  if (n < errlen)
    snprintf(err + n, errlen - n,
             " (the file was taken for UCI because its first line is a number: give --format "
             "text for a text corpus)");
}

/* A line of a part of a UCI file (lda__each_line_part): a document is the part's in which
 * its first line starts, so lines of the document before the part are skipped, and the
 * part goes on past its end while its last document does. */
static int uci_part_line(void *state, char *line, size_t len, size_t lineno, long long at,
                         int where)
{
  uci_t *u = state;
  field_t f[4];
  uint64_t doc = 0;
  int n = split_ws(line, line + len, f, 3);
  if (n == 0) return 0; /* blank */
  int has_doc = n == 3 && parse_u64(&f[0], &doc);
  if (where < 0) { /* the line before the part */
    if (has_doc) u->prev_doc = doc;
    u->skip = has_doc;
    return 0;
  }
  /* a malformed line is the part's in which it starts; past the end, the next part's */
  if (where > 0 && (!has_doc || doc != u->last_doc || !u->last_doc)) return LDA__STOP;
  if (u->skip && has_doc && doc == u->prev_doc) return 0;
  u->skip = 0;
  u->at = at;
  return uci_line(u, line, len, lineno);
}

int lda_load_uci_part(const char *path, int part, int nparts, lda_uci_part_t *out, char *err,
                      size_t errlen)
{
  memset(out, 0, sizeof(*out));
  if (nparts < 1 || part < 0 || part >= nparts) {
    lda__set_err(err, errlen, "%s: part %d of %d", path, part, nparts);
    return LDA_EINVAL;
  }
  uci_t u = {.path = path, .err = err, .errlen = errlen, .at = -1};
  /* the header, on every node: D, W and NNZ, and where the entries begin */
  FILE *f = fopen(path, "r");
  if (!f) {
    lda__set_err(err, errlen, "%s: %s", path, strerror(errno));
    return LDA_EIO;
  }
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  long long body = 0;
  ssize_t len;
  int rc = 0;
  while (!rc && u.header < 3 && (len = getline(&line, &cap, f)) >= 0) {
    body += len;
    lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    len = (ssize_t)drop_bom(line, (size_t)len, lineno == 1);
    rc = uci_line(&u, line, (size_t)len, lineno);
  }
  free(line);
  fclose(f);
  if (!rc && u.header < 3) {
    static const char *const what[] = {"the number of documents D", "the vocabulary size W",
                                       "the number of entries NNZ"};
    lda__set_err(err, errlen, "%s:%zu: expected %s, got the end of the file", path, lineno + 1,
                 what[u.header]);
    rc = LDA_EPARSE;
  }
  if (!rc)
    rc = lda__each_line_part(path, body, lineno, part, nparts, 1, uci_part_line, &u, err, errlen);
  if (!rc && u.first_doc) rc = uci_build(&u, u.first_doc - 1, u.max_doc - u.first_doc + 1, &out->c);
  if (!rc) {
    out->first_doc = u.first_doc ? u.first_doc - 1 : 0;
    out->docs = u.d;
    out->nnz = u.nnz;
    out->entries = u.n;
    out->sorted = !u.unsorted;
    out->c.nwords = (uint32_t)u.w;
  }
  free(u.e);
  if (rc) lda_corpus_free(&out->c);
  return rc;
}

/* ---- vocabulary ------------------------------------------------------------------------- */

typedef struct {
  const char *path;
  char *err;
  size_t errlen;
  uint32_t want, n; /* words expected, read */
  size_t blank;     /* the first blank line after the last word (0: none yet) */
  size_t *off;      /* start of word i in blob (the word of line i + 1) */
  char *blob;
  size_t len, cap;
} vocab_t;

static int vocab_line(void *state, char *line, size_t len, size_t lineno)
{
  vocab_t *v = state;
  const char *b = line, *e = line + len;
  while (b < e && is_ws(*b)) b++;
  while (e > b && is_ws(e[-1])) e--;
  char buf[80];
  int rc = lda__check_cr(v->path, lineno, -1, line, len, v->err, v->errlen);
  if (rc) return rc;
  if (b == e) { /* fine at the end; before a word it would shift every word after it */
    if (!v->blank) v->blank = lineno;
    return 0;
  }
  if (v->blank) {
    lda__set_err(v->err, v->errlen,
                 "%s:%zu: expected a word (one per line: line i names word i), got a blank line "
                 "before '%s' on line %zu",
                 v->path, v->blank, lda__shown(buf, sizeof(buf), line, len), lineno);
    return LDA_EPARSE;
  }
  if (memchr(b, '\0', (size_t)(e - b))) {
    lda__set_err(v->err, v->errlen, "%s:%zu: expected a word without NUL bytes, got '%s'", v->path,
                 lineno, lda__shown(buf, sizeof(buf), line, len));
    return LDA_EPARSE;
  }
  for (const char *q = b; q < e; q++)
    if (is_ws(*q)) { /* the model's files separate fields by spaces */
      lda__set_err(v->err, v->errlen, "%s:%zu: expected a word without spaces, got '%s'", v->path,
                   lineno, lda__shown(buf, sizeof(buf), line, len));
      return LDA_EPARSE;
    }
  if (v->n == v->want) {
    lda__set_err(v->err, v->errlen,
                 "%s:%zu: expected at most %u words (the vocabulary size W of the corpus), got "
                 "'%s'",
                 v->path, lineno, v->want, lda__shown(buf, sizeof(buf), line, len));
    return LDA_EPARSE;
  }
  size_t n = (size_t)(e - b);
  if (v->len + n + 1 > v->cap) {
    size_t cap = v->cap ? v->cap : 4096;
    while (cap < v->len + n + 1) cap *= 2;
    char *p = realloc(v->blob, cap);
    if (!p) {
      lda__set_err(v->err, v->errlen, "%s:%zu: out of memory", v->path, lineno);
      return LDA_ENOMEM;
    }
    v->blob = p;
    v->cap = cap;
  }
  memcpy(v->blob + v->len, b, n);
  v->blob[v->len + n] = '\0';
  v->off[v->n++] = v->len;
  v->len += n + 1;
  return 0;
}

typedef struct {
  const char *w;
  uint32_t i;
} vocab_word_t;

static int vocab_cmp(const void *a, const void *b)
{
  const vocab_word_t *x = a, *y = b;
  int c = strcmp(x->w, y->w);
  return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* 0 if the n words of blob (word i at off[i], on line i + 1) differ, else LDA_EPARSE with
 * a message naming the first line that repeats a word, and the line it repeats. */
static int vocab_unique(const char *path, const char *blob, const size_t *off, uint32_t n,
                        char *err, size_t errlen)
{
  vocab_word_t *s = malloc(((size_t)n + 1) * sizeof(*s));
  if (!s) {
    lda__set_err(err, errlen, "%s: out of memory", path);
    return LDA_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) s[i] = (vocab_word_t){blob + off[i], i};
  qsort(s, n, sizeof(*s), vocab_cmp);
  /* the earliest repeat is a second occurrence: right after its first in the order */
  uint32_t first = 0, again = UINT32_MAX;
  for (uint32_t i = 1; i < n; i++)
    if (s[i].i < again && !strcmp(s[i].w, s[i - 1].w)) first = s[i - 1].i, again = s[i].i;
  int rc = 0;
  if (again != UINT32_MAX) {
    char buf[80];
    const char *w = blob + off[again];
    lda__set_err(err, errlen, "%s:%u: expected each word once, got '%s' again (line %u)", path,
                 again + 1, lda__shown(buf, sizeof(buf), w, strlen(w)), first + 1);
    rc = LDA_EPARSE;
  }
  free(s);
  return rc;
}

int lda_load_vocab(const char *path, lda_corpus_t *c, char *err, size_t errlen)
{
  vocab_t v = {.path = path, .err = err, .errlen = errlen, .want = c->nwords};
  v.off = malloc(((size_t)c->nwords + 1) * sizeof(size_t));
  if (!v.off) {
    lda__set_err(err, errlen, "%s: out of memory", path);
    return LDA_ENOMEM;
  }
  size_t lines;
  int rc = lda__each_line(path, vocab_line, &v, &lines, err, errlen);
  if (!rc && v.n != v.want) {
    lda__set_err(err, errlen,
                 "%s:%zu: expected %u words (the vocabulary size W of the corpus), got %u before "
                 "the end of the file",
                 path, lines ? lines : 1, v.want, v.n);
    rc = LDA_EPARSE;
  }
  if (!rc) rc = vocab_unique(path, v.blob, v.off, v.n, err, errlen);
  char **vocab = NULL;
  if (!rc && !(vocab = malloc(((size_t)v.n + 1) * sizeof(char *)))) {
    lda__set_err(err, errlen, "%s: out of memory", path);
    rc = LDA_ENOMEM;
  }
  if (rc) {
    free(v.off);
    free(v.blob);
    return rc;
  }
  for (uint32_t i = 0; i < v.n; i++) vocab[i] = v.blob + v.off[i];
  free(v.off);
  free(c->vocab);
  free(c->vocab_blob);
  c->vocab = vocab;
  c->vocab_blob = v.blob;
  return 0;
}
