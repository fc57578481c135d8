/* text.c — the plain-text loader of augur-lda (see corpus.h): one document per line,
 * lower-cased words made of letters, English stop words and rare words dropped.
 *
 * The invariant: word ids are dense and in order of first appearance among the words
 * that are kept, so the same file always gives the same corpus.
 */
#include "corpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* Common English function words, sorted (strcmp) for bsearch; test_lda_data checks the
 * order. One-letter words are dropped before this list is asked. */
static const char *const stop_words[] = {
    "about",   "above",   "after",   "again",    "against",    "all",       "also",       "am",
    "among",   "an",      "and",     "another",  "any",        "are",       "aren",       "around",
    "as",      "at",      "away",    "back",     "be",         "became",    "because",    "become",
    "been",    "before",  "being",   "below",    "between",    "both",      "but",        "by",
    "can",     "could",   "couldn",  "did",      "didn",       "do",        "does",       "doesn",
    "doing",   "don",     "down",    "during",   "each",       "even",      "ever",       "every",
    "few",     "for",     "from",    "further",  "get",        "got",       "had",        "has",
    "hasn",    "have",    "haven",   "having",   "he",         "her",       "here",       "hers",
    "herself", "him",     "himself", "his",      "how",        "however",   "if",         "in",
    "into",    "is",      "isn",     "it",       "its",        "itself",    "just",       "like",
    "ll",      "made",    "make",    "many",     "may",        "me",        "might",      "more",
    "most",    "much",    "must",    "my",       "myself",     "never",     "new",        "no",
    "nor",     "not",     "now",     "of",       "off",        "on",        "once",       "one",
    "only",    "or",      "other",   "our",      "ours",       "ourselves", "out",        "over",
    "own",     "re",      "said",    "same",     "say",        "says",      "see",        "shall",
    "she",     "should",  "shouldn", "since",    "so",         "some",      "still",      "such",
    "than",    "that",    "the",     "their",    "theirs",     "them",      "themselves", "then",
    "there",   "these",   "they",    "this",     "those",      "through",   "to",         "too",
    "two",     "under",   "until",   "up",       "upon",       "us",        "ve",         "very",
    "was",     "wasn",    "we",      "well",     "were",       "weren",     "what",       "when",
    "where",   "whether", "which",   "while",    "who",        "whom",      "whose",      "why",
    "will",    "with",    "within",  "without",  "won",        "would",     "wouldn",     "yet",
    "you",     "your",    "yours",   "yourself", "yourselves",
};

#define NSTOP (sizeof(stop_words) / sizeof(stop_words[0]))

size_t lda_stop_word_count(void)
{
  return NSTOP;
}

const char *lda_stop_word_at(size_t i)
{
  return i < NSTOP ? stop_words[i] : NULL;
}

typedef struct {
  const char *w;
  size_t n;
} word_key_t;

static int stop_cmp(const void *key, const void *elem)
{
  const word_key_t *k = key;
  const char *s = *(const char *const *)elem;
  size_t m = strlen(s);
  int c = memcmp(k->w, s, k->n < m ? k->n : m);
  if (c) return c;
  return (k->n > m) - (k->n < m);
}

int lda_is_stop_word(const char *w, size_t n)
{
  word_key_t k = {w, n};
  return bsearch(&k, stop_words, NSTOP, sizeof(stop_words[0]), stop_cmp) != NULL;
}

/* ---- interning: word -> provisional id (first seen), with counts ------------------------- */

typedef struct {
  uint32_t *slots; /* id + 1, 0 = empty; mask + 1 slots */
  size_t mask;
  size_t *off; /* word id -> offset in blob (NUL-terminated there) */
  uint32_t *len;
  uint64_t *count;
  uint32_t n, cap;
  char *blob;
  size_t blen, bcap;
} intern_t;

static uint64_t str_hash(const char *s, size_t n)
{
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
  return h ^ (h >> 29);
}

static int intern_grow_slots(intern_t *t)
{
  size_t cap = t->slots ? 2 * (t->mask + 1) : 4096;
  uint32_t *s = calloc(cap, sizeof(*s));
  if (!s) return LDA_ENOMEM;
  for (uint32_t id = 0; id < t->n; id++) {
    size_t i = str_hash(t->blob + t->off[id], t->len[id]) & (cap - 1);
    while (s[i]) i = (i + 1) & (cap - 1);
    s[i] = id + 1;
  }
  free(t->slots);
  t->slots = s;
  t->mask = cap - 1;
  return 0;
}

/* The id of w (added if new), its count incremented. 0, LDA_ENOMEM or LDA_ERANGE. */
static int intern(intern_t *t, const char *w, size_t n, uint32_t *id)
{
  if ((!t->slots || 2 * ((size_t)t->n + 1) > t->mask + 1) && intern_grow_slots(t))
    return LDA_ENOMEM;
  size_t i = str_hash(w, n) & t->mask;
  for (; t->slots[i]; i = (i + 1) & t->mask) {
    uint32_t k = t->slots[i] - 1;
    if (t->len[k] == n && !memcmp(t->blob + t->off[k], w, n)) {
      t->count[k]++;
      *id = k;
      return 0;
    }
  }
  if (t->n >= LDA_MAX_WORDS) return LDA_ERANGE;
  if (t->n == t->cap) {
    uint32_t cap = t->cap ? 2 * t->cap : 1024;
    size_t *off = realloc(t->off, cap * sizeof(*off));
    if (off) t->off = off;
    uint32_t *len = realloc(t->len, cap * sizeof(*len));
    if (len) t->len = len;
    uint64_t *count = realloc(t->count, cap * sizeof(*count));
    if (count) t->count = count;
    if (!off || !len || !count) return LDA_ENOMEM;
    t->cap = cap;
  }
  if (t->blen + n + 1 > t->bcap) {
    size_t cap = t->bcap ? t->bcap : 1 << 16;
    while (cap < t->blen + n + 1) cap *= 2;
    char *b = realloc(t->blob, cap);
    if (!b) return LDA_ENOMEM;
    t->blob = b;
    t->bcap = cap;
  }
  memcpy(t->blob + t->blen, w, n);
  t->blob[t->blen + n] = '\0';
  t->off[t->n] = t->blen;
  t->len[t->n] = (uint32_t)n;
  t->count[t->n] = 1;
  t->blen += n + 1;
  t->slots[i] = t->n + 1;
  *id = t->n++;
  return 0;
}

static void intern_free(intern_t *t)
{
  free(t->slots);
  free(t->off);
  free(t->len);
  free(t->count);
  free(t->blob);
}

/* ---- reading ---------------------------------------------------------------------------- */

struct lda_text {
  const char *path;
  char *err;
  size_t errlen;
  intern_t words;
  uint32_t *tok; /* provisional ids */
  size_t ntok, captok;
  size_t *doc_start; /* ndocs + 1 used */
  size_t ndocs, capdocs;
  char *word; /* the word being read, lower-cased */
  size_t wcap;
  long long at; /* in a part: the byte where the line starts (-1: whole file) */
};

static inline int is_letter(unsigned char c)
{
  return (unsigned)((c | 0x20) - 'a') < 26u || c >= 0x80;
}

/* Adds a finished word of the current line. */
static int add_word(lda_text_t *t, size_t n, size_t lineno)
{
  if (n < 2 || (n <= 10 && lda_is_stop_word(t->word, n))) return 0;
  char where[600];
  uint32_t id;
  int rc = intern(&t->words, t->word, n, &id);
  if (!rc && t->ntok >= LDA_MAX_TOKENS) rc = LDA_ERANGE;
  if (!rc && t->ntok == t->captok) {
    size_t cap = t->captok ? 2 * t->captok : 1 << 16;
    uint32_t *p = realloc(t->tok, cap * sizeof(*p));
    if (!p)
      rc = LDA_ENOMEM;
    else
      t->tok = p, t->captok = cap;
  }
  if (rc == LDA_ERANGE) {
    lda__set_err(t->err, t->errlen, "%s: more than %u tokens or distinct words",
                 lda__where(where, sizeof(where), t->path, lineno, t->at), LDA_MAX_TOKENS);
    return rc;
  }
  if (rc) {
    lda__set_err(t->err, t->errlen, "%s: out of memory", t->path);
    return rc;
  }
  t->tok[t->ntok++] = id;
  return 0;
}

static int text_line(void *state, char *line, size_t len, size_t lineno)
{
  lda_text_t *t = state;
  char buf[80], where[600];
  if (memchr(line, '\0', len)) {
    lda__set_err(t->err, t->errlen, "%s: expected text without NUL bytes, got '%s'",
                 lda__where(where, sizeof(where), t->path, lineno, t->at),
                 lda__shown(buf, sizeof(buf), line, len));
    return LDA_EPARSE;
  }
  int rc = lda__check_cr(t->path, lineno, t->at, line, len, t->err, t->errlen);
  if (rc) return rc;
  if (t->ndocs + 1 >= 0xffffffffu) {
    lda__set_err(t->err, t->errlen, "%s: more than %u documents",
                 lda__where(where, sizeof(where), t->path, lineno, t->at), 0xfffffffeu);
    return LDA_ERANGE;
  }
  if (t->wcap < len + 1) {
    char *w = realloc(t->word, len + 1);
    if (!w) goto nomem;
    t->word = w;
    t->wcap = len + 1;
  }
  size_t n = 0;
  for (size_t i = 0; i <= len; i++) {
    unsigned char c = i < len ? (unsigned char)line[i] : ' ';
    if (is_letter(c)) {
      t->word[n++] = (char)(c < 0x80 ? (c | 0x20) : c);
    } else if (n) {
      if ((rc = add_word(t, n, lineno)) != 0) return rc;
      n = 0;
    }
  }
  if (t->ndocs + 2 > t->capdocs) {
    size_t cap = t->capdocs ? 2 * t->capdocs : 4096;
    size_t *p = realloc(t->doc_start, cap * sizeof(*p));
    if (!p) goto nomem;
    t->doc_start = p;
    t->capdocs = cap;
  }
  t->doc_start[0] = 0;
  t->doc_start[++t->ndocs] = t->ntok;
  return 0;
nomem:
  lda__set_err(t->err, t->errlen, "%s: out of memory", t->path);
  return LDA_ENOMEM;
}

static int text_part_line(void *state, char *line, size_t len, size_t lineno, long long at,
                          int where)
{
  lda_text_t *t = state;
  if (where < 0) return 0; /* the line before: another part's document */
  t->at = at;
  return text_line(t, line, len, lineno);
}

lda_text_t *lda_text_new(void)
{
  lda_text_t *t = calloc(1, sizeof(*t));
  if (t) t->at = -1;
  return t;
}

void lda_text_free(lda_text_t *t)
{
  if (!t) return;
  intern_free(&t->words);
  free(t->tok);
  free(t->doc_start);
  free(t->word);
  free(t);
}

int lda_text_read(const char *path, int part, int nparts, lda_text_t **out, char *err,
                  size_t errlen)
{
  *out = NULL;
  lda_text_t *t = lda_text_new();
  if (!t) {
    lda__set_err(err, errlen, "%s: out of memory", path);
    return LDA_ENOMEM;
  }
  t->path = path, t->err = err, t->errlen = errlen;
  int rc;
  if (nparts == 1) {
    size_t lines;
    rc = lda__each_line(path, text_line, t, &lines, err, errlen);
  } else {
    rc = lda__each_line_part(path, 0, 0, part, nparts, 0, text_part_line, t, err, errlen);
  }
  if (rc) {
    lda_text_free(t);
    return rc;
  }
  t->path = NULL, t->err = NULL;
  *out = t;
  return 0;
}

const char *lda_text_words(const lda_text_t *t, uint32_t *n, size_t *len)
{
  *n = t->words.n;
  *len = t->words.blen;
  return t->words.blob;
}

const uint64_t *lda_text_counts(const lda_text_t *t)
{
  return t->words.count;
}

int lda_text_merge(lda_text_t *t, const char *blob, uint32_t n, const uint64_t *counts)
{
  for (uint32_t i = 0; i < n; i++) {
    size_t len = strlen(blob);
    uint32_t id;
    int rc = intern(&t->words, blob, len, &id);
    if (rc) return rc;
    t->words.count[id] += counts[i] - 1; /* intern counted one */
    blob += len + 1;
  }
  return 0;
}

uint32_t lda_text_find(const lda_text_t *t, const char *w, size_t n)
{
  const intern_t *in = &t->words;
  if (!in->slots) return UINT32_MAX;
  for (size_t i = str_hash(w, n) & in->mask; in->slots[i]; i = (i + 1) & in->mask) {
    uint32_t k = in->slots[i] - 1;
    if (in->len[k] == n && !memcmp(in->blob + in->off[k], w, n)) return k;
  }
  return UINT32_MAX;
}

int lda_text_vocab(const lda_text_t *t, uint32_t min_count, uint32_t *map, lda_corpus_t *out)
{
  const intern_t *w = &t->words;
  uint32_t kept = 0;
  size_t blob = 0;
  for (uint32_t i = 0; i < w->n; i++) {
    map[i] = w->count[i] >= min_count ? kept++ : UINT32_MAX;
    if (map[i] != UINT32_MAX) blob += w->len[i] + 1;
  }
  char **vocab = malloc(((size_t)kept + 1) * sizeof(char *));
  char *vblob = malloc(blob + 1);
  if (!vocab || !vblob) {
    free(vocab);
    free(vblob);
    return LDA_ENOMEM;
  }
  for (uint32_t i = 0, at = 0; i < w->n; i++) {
    if (map[i] == UINT32_MAX) continue;
    memcpy(vblob + at, w->blob + w->off[i], w->len[i] + 1);
    vocab[map[i]] = vblob + at;
    at += w->len[i] + 1;
  }
  free(out->vocab);
  free(out->vocab_blob);
  out->vocab = vocab;
  out->vocab_blob = vblob;
  out->nwords = kept;
  return 0;
}

int lda_text_docs(lda_text_t *t, const uint32_t *map, lda_corpus_t *out)
{
  out->doc_start = malloc((t->ndocs + 1) * sizeof(size_t));
  if (!out->doc_start) return LDA_ENOMEM;
  size_t n = 0;
  out->doc_start[0] = 0;
  for (size_t d = 0; d < t->ndocs; d++) {
    for (size_t i = t->doc_start[d]; i < t->doc_start[d + 1]; i++)
      if (map[t->tok[i]] != UINT32_MAX) t->tok[n++] = map[t->tok[i]];
    out->doc_start[d + 1] = n;
  }
  out->ndocs = (uint32_t)t->ndocs;
  out->ntokens = n;
  out->words = t->tok; /* compacted in place */
  t->tok = NULL, t->ntok = t->captok = 0;
  if (n) {
    uint32_t *p = realloc(out->words, n * sizeof(uint32_t));
    if (p) out->words = p;
  }
  return 0;
}

int lda_load_text(const char *path, uint32_t min_count, lda_corpus_t *out, char *err, size_t errlen)
{
  memset(out, 0, sizeof(*out));
  lda_text_t *t;
  int rc = lda_text_read(path, 0, 1, &t, err, errlen);
  if (rc) return rc;
  /* keep the words seen min_count times, renumbered in order of first appearance */
  uint32_t *map = malloc(((size_t)t->words.n + 1) * sizeof(*map));
  rc = map ? lda_text_vocab(t, min_count, map, out) : LDA_ENOMEM;
  if (!rc) rc = lda_text_docs(t, map, out);
  if (rc) {
    lda__set_err(err, errlen, "%s: out of memory", path);
    lda_corpus_free(out);
  }
  free(map);
  lda_text_free(t);
  return rc;
}
