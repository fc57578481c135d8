/* corpus.h — data sets for augur-lda: a corpus of documents as word ids, loaders for UCI
 * bag-of-words files and plain text, and a generator that draws documents from the LDA
 * generative process with planted topics. libc and libm only; no global state.
 *
 * The one invariant: every token is a word id below nwords, and the tokens of document
 * d are words[doc_start[d] .. doc_start[d + 1]). Everything random is a pure function of
 * its seed (demos/lda/rng.h). See docs/lda.md.
 */
#ifndef AUGUR_DEMOS_LDA_CORPUS_H
#define AUGUR_DEMOS_LDA_CORPUS_H

#include <stddef.h>
#include <stdint.h>

/* Errors: 0 or one of these; lda_strerror() names them. Loaders also write a message for
 * people into their err buffer (which may be NULL). */
enum {
  LDA_EIO = -1,    /* a file could not be opened or read */
  LDA_EPARSE = -2, /* malformed input */
  LDA_ENOMEM = -3, /* allocation failed */
  LDA_EINVAL = -4, /* bad argument (impossible generator options, vocabulary mismatch) */
  LDA_ERANGE = -5, /* more tokens, words or documents than the corpus holds */
};
const char *lda_strerror(int err);
/* Internal to the loaders (corpus.c, text.c, and infer.c's of a model): formats a message into err
 * (may be NULL), and shows an offending line as at most 60 characters, control bytes as '?'. */
void lda__set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *lda__shown(char *buf, size_t cap, const char *line, size_t len);
/* Internal: calls fn(state, line, len, lineno) for each line of path (without its '\n'
 * and '\r') until fn returns nonzero; *lines gets the number of lines read. 0, fn's
 * result, or LDA_EIO / LDA_ENOMEM with a message in err. */
typedef int (*lda__line_fn)(void *state, char *line, size_t len, size_t lineno);
int lda__each_line(const char *path, lda__line_fn fn, void *state, size_t *lines, char *err,
                   size_t errlen);
/* Internal: LDA_EPARSE with a message when line holds a carriage return followed by more
 * than whitespace (a classic Mac line end, which getline does not split at: the file would
 * be one long line), else 0. where as lda__where takes it. */
int lda__check_cr(const char *path, size_t lineno, long long at, const char *line, size_t len,
                  char *err, size_t errlen);

/* Internal: "PATH:LINE", or "PATH: the line at byte AT" when at >= 0 (a line of a part). */
const char *lda__where(char *buf, size_t cap, const char *path, size_t lineno, long long at);
/* Internal: calls fn(state, line, len, lineno, at, where) for the lines of part `part` of
 * `nparts` of the bytes [body, end of file) of path, body_lines lines into the file: those
 * that start in the part (where 0; a line belongs to the part in which it starts, so the
 * parts together read every line once), before them the last non-blank line that starts
 * before the part, if one does at or after body (where -1), and with extend the lines
 * after the part (where 1) until fn returns LDA__STOP. In part 0 lineno is the line's
 * number in the file and at -1; in the others at is the byte where the line starts
 * (lda__where names it either way). 0, fn's error, or LDA_EIO / LDA_ENOMEM with a message
 * in err. */
#define LDA__STOP 1
typedef int (*lda__part_fn)(void *state, char *line, size_t len, size_t lineno, long long at,
                            int where);
int lda__each_line_part(const char *path, long long body, size_t body_lines, int part, int nparts,
                        int extend, lda__part_fn fn, void *state, char *err, size_t errlen);

/* tokens one corpus holds: the count tables are int32 (one topic may come to hold every
 * token of the corpus), so 2^31 - 1 */
#define LDA_MAX_TOKENS 0x7fffffffu
#define LDA_MAX_WORDS  0x7fffffffu /* vocabulary size */

typedef struct lda_corpus {
  uint32_t ndocs, nwords; /* D documents over a vocabulary of V words */
  size_t ntokens;
  size_t *doc_start; /* ndocs + 1 offsets into words */
  uint32_t *words;   /* ntokens word ids, grouped by document */
  char **vocab;      /* NULL (generated data: word i is shown as "w<i>") or nwords strings */
  char *vocab_blob;  /* the strings' storage */
} lda_corpus_t;

/* Frees everything and leaves c empty (all zero). */
void lda_corpus_free(lda_corpus_t *c);
/* How many times each word occurs: counts[w] for w < nwords. */
void lda_corpus_word_counts(const lda_corpus_t *c, uint64_t *counts);
/* Writes word w as people see it: its vocabulary entry, or "w<id>". */
const char *lda_corpus_word(const lda_corpus_t *c, uint32_t w, char *buf, size_t cap);

/* ---- loaders --------------------------------------------------------------------------- */

/* UCI bag-of-words (docword.*.txt): three header lines D, W, NNZ, then NNZ lines
 * "docID wordID count", 1-based ids, in any order. Blank lines are skipped. Document d
 * (1-based) becomes document d - 1; a document with no entries is empty. A header whose D
 * or W is more than 2^20 above its NNZ is refused (memory goes by them), and so are more
 * than LDA_MAX_TOKENS tokens in all.
 * 0, or LDA_EIO / LDA_EPARSE / LDA_ENOMEM / LDA_ERANGE with a one-line message in err
 * ("PATH:LINE: expected 'docID wordID count', got 'abc'"). On failure out is empty. */
int lda_load_uci(const char *path, lda_corpus_t *out, char *err, size_t errlen);
/* After lda_load_uci failed with LDA_EPARSE on a file taken for UCI only because its first
 * line is a number (no --format given): appends to err that a text corpus needs --format
 * text (a text whose first line is "1984" fails at line 2 otherwise). */
void lda_uci_hint(char *err, size_t errlen);

/* Part `part` of `nparts` of a UCI file, for a cluster whose nodes each read one
 * (demos/lda/shard.c): every part reads the header, then the entries of the documents
 * whose first entry line starts in its share of the bytes after it (documents are taken
 * whole across a cut, so a file must list each document's entries together: sorted by
 * document, as UCI's are). c holds documents first_doc .. first_doc + c.ndocs - 1 (0-based;
 * none when the part has no entry) over the header's W words; `sorted` is 0 when a
 * document id fell within the part (the parts then do not hold whole documents: read the
 * file whole). NNZ can only be checked over all parts (entries, summed). Messages name a
 * line by its byte ("PATH: the line at byte B: expected ..."). */
typedef struct lda_uci_part {
  lda_corpus_t c;
  uint64_t first_doc;
  uint64_t docs, nnz; /* the header's D and NNZ */
  uint64_t entries;   /* entry lines this part read */
  int sorted;
} lda_uci_part_t;
int lda_load_uci_part(const char *path, int part, int nparts, lda_uci_part_t *out, char *err,
                      size_t errlen);

/* A vocabulary for c (vocab.*.txt): one word per line, line i naming word i - 1; exactly
 * c->nwords words, each once, then only blank lines if any. 0, or an error with a message
 * (c's vocabulary unchanged): a blank line before a word, a word twice (naming both
 * lines). */
int lda_load_vocab(const char *path, lda_corpus_t *c, char *err, size_t errlen);

/* Plain text, one document per line: bytes are lower-cased, words are runs of letters
 * (ASCII letters and any byte >= 0x80, so UTF-8 words stay whole), words of one letter
 * and the built-in English stop words are dropped, then words occurring fewer than
 * min_count times in the whole file. Every line is a document (possibly empty). The
 * vocabulary is the kept words in order of first appearance. A NUL byte, and a carriage
 * return that does not end its line (lines end in \n or \r\n), are malformed input. 0,
 * or an error with a message. */
int lda_load_text(const char *path, uint32_t min_count, lda_corpus_t *out, char *err,
                  size_t errlen);
/* Plain text in parts, for a cluster whose nodes each read one (demos/lda/shard.c) and
 * agree on one vocabulary: lda_load_text is read (part 0 of 1), vocab, docs. */
typedef struct lda_text lda_text_t;
/* The documents of the lines that start in part `part` of `nparts` of the file's bytes
 * (every line a document, words as lda_load_text finds them), with ids in order of first
 * appearance in the part. 0 or an error with a message (a line named by its byte). */
int lda_text_read(const char *path, int part, int nparts, lda_text_t **out, char *err,
                  size_t errlen);
/* An empty one (no words, no documents), to merge words into; NULL when out of memory. */
lda_text_t *lda_text_new(void);
void lda_text_free(lda_text_t *t);
/* t's *n words in order of their ids, NUL-terminated one after the other (*len bytes),
 * and how often each occurs. */
const char *lda_text_words(const lda_text_t *t, uint32_t *n, size_t *len);
const uint64_t *lda_text_counts(const lda_text_t *t);
/* Adds n words (as lda_text_words gives them) with their counts to t's: a new word gets
 * the next id, a known one adds its count. 0, LDA_ENOMEM or LDA_ERANGE. */
int lda_text_merge(lda_text_t *t, const char *blob, uint32_t n, const uint64_t *counts);
/* The id of word w (n bytes) in t, or UINT32_MAX. */
uint32_t lda_text_find(const lda_text_t *t, const char *w, size_t n);
/* The words of t that occur min_count times, in id order, as out's vocabulary (nwords,
 * vocab); map[i] gets word i's id there or UINT32_MAX. 0 or LDA_ENOMEM. */
int lda_text_vocab(const lda_text_t *t, uint32_t min_count, uint32_t *map, lda_corpus_t *out);
/* t's documents into out (ndocs, ntokens, doc_start, words), word i as map[i] (dropped
 * where UINT32_MAX); t's tokens move there. 0 or LDA_ENOMEM. */
int lda_text_docs(lda_text_t *t, const uint32_t *map, lda_corpus_t *out);

/* 1 if the lower-case word w (of length n) is in the built-in stop-word list. */
int lda_is_stop_word(const char *w, size_t n);
/* The built-in stop words: how many, and the i-th (sorted, for bsearch). */
size_t lda_stop_word_count(void);
const char *lda_stop_word_at(size_t i);

/* ---- generator ------------------------------------------------------------------------- */

/* Documents from the LDA generative process: planted topics phi_k ~ Dirichlet(beta) over
 * the vocabulary, then per document theta_d ~ Dirichlet(alpha), a length uniform in
 * [ceil(L/2), L + L/2] (L = doc_length), and each token's topic z ~ theta_d, word w ~
 * phi_z. A small beta makes the planted topics sparse and well separated.
 *
 * With zipf = s > 0 the words follow Zipf's law instead, as in natural text: word w
 * (0-based) has weight (w + 1)^-s, spread over the planted topics by shares ~
 * Dirichlet(beta) drawn per word, and phi_k(w) is proportional to its weight times its
 * share of topic k (so the words' overall frequencies fall as a power of their rank).
 * With length_sigma = x > 0 a document's length is log-normal with mean L and x the
 * standard deviation of its log (at least 1 token, at most 64 L): a few long documents
 * hold much of the text, as in a dictionary or the web. */
typedef struct lda_gen_opts {
  uint32_t docs, vocab, doc_length, topics;
  double alpha, beta;  /* Dirichlet parameters of theta_d and phi_k (or of word shares) */
  double zipf;         /* 0: topics drawn as above; s > 0: Zipf's law of exponent s */
  double length_sigma; /* 0: uniform lengths; x > 0: log-normal */
  uint64_t seed;
} lda_gen_opts_t;

/* docs 10000, vocab 10000, doc_length 100, topics 20, alpha 0.1, beta 0.01, zipf 0,
 * length_sigma 0, seed 1. */
void lda_gen_opts_default(lda_gen_opts_t *o);
/* 0, or LDA_EINVAL with a message in err saying which option is wrong. */
int lda_gen_opts_check(const lda_gen_opts_t *o, char *err, size_t errlen);
/* Fills out (vocabulary NULL). When phi is not NULL, *phi gets the planted topics as
 * topics x vocab floats (row k = phi_k; the caller frees it). Same options, same corpus.
 * 0, LDA_EINVAL, LDA_ERANGE (more than LDA_MAX_TOKENS tokens) or LDA_ENOMEM. */
int lda_generate(const lda_gen_opts_t *o, lda_corpus_t *out, float **phi);

#endif
