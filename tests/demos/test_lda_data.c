/* test_lda_data.c — ldadata: the UCI bag-of-words, vocabulary and plain-text loaders on
 * small files in a temp dir (exact contents, then malformed inputs whose messages must
 * name the file and line), the stop-word list, and the generator (determinism, shapes,
 * planted topics). */
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

#include "corpus.h"

static char dir[64];

static int make_dir(void **state)
{
  (void)state;
  strcpy(dir, "/tmp/test_lda_data.XXXXXX");
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

/* Writes len bytes to dir/name; returns the path (static: use before the next call). */
static const char *write_bytes(const char *name, const char *content, size_t len)
{
  static char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(content, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  return path;
}

static const char *write_file(const char *name, const char *content)
{
  return write_bytes(name, content, strlen(content));
}

/* The words of document d, sorted, as a string "1 1 4" (for exact comparisons). */
static const char *doc_words(const lda_corpus_t *c, uint32_t d)
{
  static char buf[1024];
  uint32_t w[256];
  size_t n = c->doc_start[d + 1] - c->doc_start[d], at = 0;
  assert_true(n <= 256);
  if (n) memcpy(w, &c->words[c->doc_start[d]], n * sizeof(uint32_t));
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && w[j - 1] > w[j]; j--) {
      uint32_t t = w[j];
      w[j] = w[j - 1];
      w[j - 1] = t;
    }
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++)
    at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%u", i ? " " : "", w[i]);
  return buf;
}

/* ---- stop words ---------------------------------------------------------------------- */

static void test_stop_words(void **state)
{
  (void)state;
  size_t n = lda_stop_word_count();
  assert_true(n >= 100 && n <= 200);
  /* sorted and unique (bsearch relies on it), lower case, and each one found */
  for (size_t i = 0; i < n; i++) {
    const char *w = lda_stop_word_at(i);
    if (i > 0 && strcmp(lda_stop_word_at(i - 1), w) >= 0)
      fail_msg("stop words out of order: '%s' then '%s'", lda_stop_word_at(i - 1), w);
    for (const char *c = w; *c; c++) assert_true(*c >= 'a' && *c <= 'z');
    assert_true(strlen(w) >= 2);
    assert_true(lda_is_stop_word(w, strlen(w)));
  }
  assert_null(lda_stop_word_at(n));
  assert_true(lda_is_stop_word("the", 3));
  assert_true(lda_is_stop_word("yourselves", 10));
  assert_true(lda_is_stop_word("about", 5));
  assert_false(lda_is_stop_word("topic", 5));
  assert_false(lda_is_stop_word("th", 2));    /* a prefix of "the" */
  assert_false(lda_is_stop_word("thee", 4));  /* "the" is a prefix of it */
  assert_false(lda_is_stop_word("zzzzz", 5)); /* after the last */
  assert_false(lda_is_stop_word("aaaaa", 5)); /* before the first */
}

/* ---- UCI ------------------------------------------------------------------------------ */

static void test_uci_reads_documents(void **state)
{
  (void)state;
  /* entries out of document order, a blank line, document 2 without entries */
  const char *p = write_file("docword.ok.txt", "3\n5\n4\n"
                                               "3 5 1\n"
                                               "1 1 2\n"
                                               "\n"
                                               "1 4 1\n"
                                               "3 2 3\n");
  lda_corpus_t c;
  char err[256];
  assert_int_equal(lda_load_uci(p, &c, err, sizeof(err)), 0);
  assert_int_equal(c.ndocs, 3);
  assert_int_equal(c.nwords, 5);
  assert_int_equal(c.ntokens, 7);
  assert_string_equal(doc_words(&c, 0), "0 0 3");
  assert_string_equal(doc_words(&c, 1), "");
  assert_string_equal(doc_words(&c, 2), "1 1 1 4");
  assert_null(c.vocab);
  uint64_t counts[5];
  lda_corpus_word_counts(&c, counts);
  assert_int_equal(counts[0], 2);
  assert_int_equal(counts[1], 3);
  assert_int_equal(counts[2], 0);
  char buf[32];
  assert_string_equal(lda_corpus_word(&c, 4, buf, sizeof(buf)), "w4");

  /* and its vocabulary */
  const char *v = write_file("vocab.ok.txt", "apple\nbanana\n cherry \ndate\nelder\n");
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), 0);
  assert_string_equal(lda_corpus_word(&c, 0, buf, sizeof(buf)), "apple");
  assert_string_equal(lda_corpus_word(&c, 2, buf, sizeof(buf)), "cherry");
  assert_string_equal(lda_corpus_word(&c, 4, buf, sizeof(buf)), "elder");
  lda_corpus_free(&c);
  assert_null(c.words);
}

/* The loader fails with rc and a message that contains every string of want. */
static void expect_uci_error(const char *name, const char *content, int rc, const char *want1,
                             const char *want2)
{
  const char *p = write_file(name, content);
  lda_corpus_t c;
  char err[512] = "";
  assert_int_equal(lda_load_uci(p, &c, err, sizeof(err)), rc);
  if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
    fail_msg("%s: message '%s' lacks '%s' / '%s'", name, err, want1, want2 ? want2 : "");
  assert_null(c.words);
  assert_null(c.doc_start);
}

static void test_uci_malformed(void **state)
{
  (void)state;
  char want[600];
  snprintf(want, sizeof(want), "%s/bad1.txt:1: expected the number of documents D", dir);
  expect_uci_error("bad1.txt", "three\n5\n1\n1 1 1\n", LDA_EPARSE, want, "got 'three'");
  snprintf(want, sizeof(want), "%s/bad2.txt:2: expected the vocabulary size W", dir);
  expect_uci_error("bad2.txt", "2\n5 5\n1\n1 1 1\n", LDA_EPARSE, want, "got '5 5'");
  snprintf(want, sizeof(want), "%s/bad3.txt:3: expected the number of entries NNZ", dir);
  expect_uci_error("bad3.txt", "2\n5\n", LDA_EPARSE, want, "end of the file");
  snprintf(want, sizeof(want), "%s/bad4.txt:5: expected 'docID wordID count'", dir);
  expect_uci_error("bad4.txt", "2\n5\n2\n1 1 1\n2 x 1\n", LDA_EPARSE, want, "got '2 x 1'");
  snprintf(want, sizeof(want), "%s/bad5.txt:4: expected 'docID wordID count' with docID in 1..2",
           dir);
  expect_uci_error("bad5.txt", "2\n5\n1\n3 1 1\n", LDA_EPARSE, want, "got '3 1 1'");
  snprintf(want, sizeof(want), "%s/bad6.txt:4:", dir);
  expect_uci_error("bad6.txt", "2\n5\n1\n1 0 1\n", LDA_EPARSE, want, "wordID in 1..5");
  snprintf(want, sizeof(want), "%s/bad7.txt:4:", dir);
  expect_uci_error("bad7.txt", "2\n5\n1\n1 2 0\n", LDA_EPARSE, want, "count >= 1");
  snprintf(want, sizeof(want), "%s/bad8.txt:5: expected at most 1 entries (NNZ on line 3)", dir);
  expect_uci_error("bad8.txt", "2\n5\n1\n1 1 1\n1 2 1\n", LDA_EPARSE, want, "got '1 2 1'");
  snprintf(want, sizeof(want), "%s/bad9.txt:4: expected 3 entries (NNZ on line 3), got 1", dir);
  expect_uci_error("bad9.txt", "2\n5\n3\n1 1 1\n", LDA_EPARSE, want, NULL);
  snprintf(want, sizeof(want), "%s/bad10.txt:4: expected 'docID wordID count'", dir);
  expect_uci_error("bad10.txt", "2\n5\n1\n1 1 1 1\n", LDA_EPARSE, want, NULL);
  /* tokens: what the int32 count tables hold, 2^31 - 1 (the count on line 4 took 8 GB) */
  snprintf(want, sizeof(want), "%s/bad11.txt:4: more than 2147483647 tokens", dir);
  expect_uci_error("bad11.txt", "2\n5\n2\n1 1 2147483648\n2 1 4000000000\n", LDA_ERANGE, want,
                   NULL);
  snprintf(want, sizeof(want), "%s/bad12.txt:5: more than 2147483647 tokens", dir);
  expect_uci_error("bad12.txt", "2\n5\n2\n1 1 2000000000\n2 1 200000000\n", LDA_ERANGE, want, NULL);
  /* a W far above NNZ: the model's W x K tables would go by it (2^31 - 1 words were an OOM
   * kill); 2^20 unused words are still fine */
  snprintf(want, sizeof(want), "%s/bad13.txt:3: expected NNZ (line 3) near W = 2147483647", dir);
  expect_uci_error("bad13.txt", "1\n2147483647\n1\n1 1 1\n", LDA_EPARSE, want, "got '1'");
  lda_corpus_t w;
  char werr[512];
  const char *wp = write_file("wide.txt", "1\n1048577\n1\n1 1048577 2\n");
  assert_int_equal(lda_load_uci(wp, &w, werr, sizeof(werr)), 0);
  assert_int_equal(w.nwords, 1048577);
  lda_corpus_free(&w);
  /* classic Mac line ends: one line, named with its carriage return */
  snprintf(want, sizeof(want), "%s/bad14.txt:1: expected lines that end in \\n or \\r\\n", dir);
  expect_uci_error("bad14.txt", "1\r3\r1\r1 1 1\r", LDA_EPARSE, want, "after '1'");
  /* a text whose first line is a number, taken for UCI: the hint, appended */
  snprintf(want, sizeof(want), "%s/bad15.txt:2: expected the vocabulary size W", dir);
  const char *hp = write_file("bad15.txt", "1984\nbig brother\n");
  assert_int_equal(lda_load_uci(hp, &w, werr, sizeof(werr)), LDA_EPARSE);
  lda_uci_hint(werr, sizeof(werr));
  assert_non_null(strstr(werr, want));
  assert_non_null(strstr(werr, "got 'big brother' (the file was taken for UCI because its first "
                               "line is a number: give --format text for a text corpus)"));

  /* a missing file: the path and the system's reason */
  lda_corpus_t c;
  char err[512], path[512];
  snprintf(path, sizeof(path), "%s/missing.txt", dir);
  assert_int_equal(lda_load_uci(path, &c, err, sizeof(err)), LDA_EIO);
  assert_non_null(strstr(err, path));
  assert_non_null(strstr(err, "No such file"));
}

static void test_vocab_malformed(void **state)
{
  (void)state;
  const char *p = write_file("docword.v.txt", "1\n3\n1\n1 1 1\n");
  lda_corpus_t c;
  char err[512], want[600];
  assert_int_equal(lda_load_uci(p, &c, err, sizeof(err)), 0);

  const char *v = write_file("vocab.short.txt", "a\nb\n");
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want), "%s:2: expected 3 words", v);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, "got 2"));

  v = write_file("vocab.long.txt", "a\nb\nc\nd\n");
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want), "%s:4: expected at most 3 words", v);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, "got 'd'"));

  v = write_file("vocab.blank.txt", "a\n\nc\n");
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want), "%s:2: expected a word", v);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, "got a blank line before 'c' on line 3"));
  assert_null(c.vocab); /* a failed load leaves the corpus as it was */

  /* a word twice: both lines named */
  v = write_file("vocab.dup.txt", "pear\nplum\npear\n");
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want), "%s:3: expected each word once, got 'pear' again (line 1)", v);
  assert_string_equal(err, want);
  v = write_file("vocab.dup2.txt", "b\na\nc\na\nb\n"); /* the first repeat: line 4 */
  c.nwords = 5;
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want), "%s:4: expected each word once, got 'a' again (line 2)", v);
  assert_string_equal(err, want);
  c.nwords = 3;
  assert_null(c.vocab);

  /* classic Mac line ends: refused, as in the corpus */
  v = write_file("vocab.cr.txt", "a\rb\rc\r");
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want), "%s:1: expected lines that end in", v);
  assert_non_null(strstr(err, want));

  /* blank lines after the last word are fine (an editor's trailing newline), as is \r\n */
  v = write_file("vocab.trail.txt", "a\r\nb\nc\n\n  \n");
  assert_int_equal(lda_load_vocab(v, &c, err, sizeof(err)), 0);
  char buf[32];
  assert_string_equal(lda_corpus_word(&c, 2, buf, sizeof(buf)), "c");
  lda_corpus_free(&c);
}

/* ---- text ----------------------------------------------------------------------------- */

static void test_text_reads_documents(void **state)
{
  (void)state;
  /* case, punctuation and digits split words; stop words ("The", "of", "and") and one-letter
   * words ("a", "x") go; the empty line is an empty document; UTF-8 stays whole */
  const char *p = write_file("text.ok.txt", "The Cat-sat on a mat, x 42 times!\n"
                                            "\n"
                                            "cat and MAT of caf\xc3\xa9\r\n"
                                            "caf\xc3\xa9 cat");
  lda_corpus_t c;
  char err[256], buf[32];
  assert_int_equal(lda_load_text(p, 1, &c, err, sizeof(err)), 0);
  assert_int_equal(c.ndocs, 4);
  /* first appearance: cat sat mat times café */
  assert_int_equal(c.nwords, 5);
  assert_string_equal(lda_corpus_word(&c, 0, buf, sizeof(buf)), "cat");
  assert_string_equal(lda_corpus_word(&c, 1, buf, sizeof(buf)), "sat");
  assert_string_equal(lda_corpus_word(&c, 2, buf, sizeof(buf)), "mat");
  assert_string_equal(lda_corpus_word(&c, 3, buf, sizeof(buf)), "times");
  assert_string_equal(lda_corpus_word(&c, 4, buf, sizeof(buf)), "caf\xc3\xa9");
  assert_string_equal(doc_words(&c, 0), "0 1 2 3");
  assert_string_equal(doc_words(&c, 1), "");
  assert_string_equal(doc_words(&c, 2), "0 2 4");
  assert_string_equal(doc_words(&c, 3), "0 4");
  lda_corpus_free(&c);

  /* --min-count 2: sat and times (once each) go, ids renumbered in the same order */
  assert_int_equal(lda_load_text(p, 2, &c, err, sizeof(err)), 0);
  assert_int_equal(c.nwords, 3);
  assert_string_equal(lda_corpus_word(&c, 1, buf, sizeof(buf)), "mat");
  assert_string_equal(lda_corpus_word(&c, 2, buf, sizeof(buf)), "caf\xc3\xa9");
  assert_string_equal(doc_words(&c, 0), "0 1");
  assert_int_equal(c.ntokens, 7);
  lda_corpus_free(&c);

  /* everything dropped: no tokens, but the documents are there */
  p = write_file("text.stop.txt", "the of and\nto be\n");
  assert_int_equal(lda_load_text(p, 1, &c, err, sizeof(err)), 0);
  assert_int_equal(c.ndocs, 2);
  assert_int_equal(c.ntokens, 0);
  assert_int_equal(c.nwords, 0);
  lda_corpus_free(&c);
}

static void test_text_malformed(void **state)
{
  (void)state;
  const char bytes[] = "fine words here\nbroken \0 line\n";
  const char *p = write_bytes("text.nul.txt", bytes, sizeof(bytes) - 1);
  lda_corpus_t c;
  char err[512], want[800];
  assert_int_equal(lda_load_text(p, 1, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want), "%s:2: expected text without NUL bytes, got 'broken ? line'", p);
  assert_string_equal(err, want);
  assert_null(c.words);

  snprintf(want, sizeof(want), "%s/none.txt", dir);
  assert_int_equal(lda_load_text(want, 1, &c, err, sizeof(err)), LDA_EIO);
  assert_non_null(strstr(err, want));

  /* classic Mac line ends (\r alone) were one document: refused, naming the line and what
   * came before the carriage return; \r\n and a last line's \r stay fine */
  p = write_file("text.cr.txt", "apple banana apple\rbanana apple cherry\r");
  assert_int_equal(lda_load_text(p, 1, &c, err, sizeof(err)), LDA_EPARSE);
  snprintf(want, sizeof(want),
           "%s:1: expected lines that end in \\n or \\r\\n, got a carriage return (\\r) "
           "within the line, after 'apple banana apple'",
           p);
  assert_memory_equal(err, want, strlen(want));
  assert_null(c.words);
  p = write_file("text.crlf.txt", "apple banana\r\npear plum \r\r\nfig kiwi\r");
  assert_int_equal(lda_load_text(p, 1, &c, err, sizeof(err)), 0);
  assert_int_equal(c.ndocs, 3);
  assert_int_equal(c.ntokens, 6);
  lda_corpus_free(&c);
}

/* ---- reading in parts (a cluster's nodes, demos/lda/shard.c) ---------------------------- */

/* A sorted UCI file of 60 documents (some empty, some long enough to straddle cuts), with
 * blank lines; every cut into 1..40 parts gives each document to exactly one part, whole,
 * as the whole-file loader reads it. */
static void test_uci_parts(void **state)
{
  (void)state;
  char *text = malloc(1 << 16);
  size_t at = 0, nnz = 0;
  char body[1 << 15];
  size_t bl = 0;
  for (int d = 1; d <= 60; d++) {
    if (d % 7 == 0) continue; /* an empty document */
    int n = d % 5 == 0 ? 40 : 1 + d % 4;
    for (int k = 0; k < n; k++) {
      bl += (size_t)snprintf(body + bl, sizeof(body) - bl, "%d %d %d\n", d, 1 + (d * 7 + k) % 30,
                             1 + k % 3);
      if (k == 2) bl += (size_t)snprintf(body + bl, sizeof(body) - bl, "\n");
      nnz++;
    }
  }
  at = (size_t)snprintf(text, 1 << 16, "60\n30\n%zu\n%s", nnz, body);
  const char *p = write_bytes("parts.uci.txt", text, at);
  lda_corpus_t whole;
  char err[256];
  assert_int_equal(lda_load_uci(p, &whole, err, sizeof(err)), 0);
  for (int nparts = 1; nparts <= 40; nparts++) {
    uint64_t next = 0, entries = 0, tokens = 0;
    for (int part = 0; part < nparts; part++) {
      lda_uci_part_t u;
      assert_int_equal(lda_load_uci_part(p, part, nparts, &u, err, sizeof(err)), 0);
      assert_true(u.sorted);
      assert_int_equal(u.docs, 60);
      assert_int_equal(u.nnz, nnz);
      assert_int_equal(u.c.nwords, 30);
      entries += u.entries;
      tokens += u.c.ntokens;
      if (u.c.ndocs) {
        assert_true(u.first_doc >= next); /* rising, no document twice */
        for (uint32_t d = 0; d < u.c.ndocs; d++) {
          char mine[1024];
          strcpy(mine, doc_words(&u.c, d));
          assert_string_equal(mine, doc_words(&whole, (uint32_t)u.first_doc + d));
        }
        /* the documents a part skipped over are empty in the whole file */
        for (uint64_t d = next; d < u.first_doc; d++)
          assert_int_equal(whole.doc_start[d + 1], whole.doc_start[d]);
        next = u.first_doc + u.c.ndocs;
      }
      lda_corpus_free(&u.c);
    }
    assert_int_equal(entries, nnz);
    assert_int_equal(tokens, whole.ntokens);
  }
  lda_corpus_free(&whole);

  /* the entries shuffled: some part sees a document id fall */
  at = (size_t)snprintf(text, 1 << 16, "3\n4\n4\n2 1 1\n1 2 1\n3 1 1\n1 4 2\n");
  p = write_bytes("parts.unsorted.txt", text, at);
  lda_uci_part_t u;
  assert_int_equal(lda_load_uci_part(p, 0, 1, &u, err, sizeof(err)), 0);
  assert_false(u.sorted);
  lda_corpus_free(&u.c);

  /* a bad line is named by its byte in a part after the first, by its line in the first */
  at = (size_t)snprintf(text, 1 << 16, "3\n4\n4\n1 1 1\n1 2 1\n2 x 1\n3 4 2\n");
  p = write_bytes("parts.bad.txt", text, at);
  int bad = 0;
  for (int part = 0; part < 2; part++) {
    int rc = lda_load_uci_part(p, part, 2, &u, err, sizeof(err));
    if (rc == 0) {
      lda_corpus_free(&u.c);
      continue;
    }
    bad++;
    char want[600];
    assert_int_equal(rc, LDA_EPARSE);
    if (part == 0)
      snprintf(want, sizeof(want), "%s:6: expected 'docID wordID count'", p);
    else
      snprintf(want, sizeof(want), "%s: the line at byte 18: expected 'docID wordID count'", p);
    assert_memory_equal(err, want, strlen(want));
  }
  assert_int_equal(bad, 1);
  free(text);
}

/* Text in parts, merged rank by rank as shard.c does: the vocabulary and the documents of
 * every cut into 1..30 parts are those of the whole file. */
static void test_text_parts(void **state)
{
  (void)state;
  char text[4096];
  size_t at = 0;
  static const char *const w[] = {"apple", "pear", "plum", "fig", "kiwi", "lime", "date"};
  for (int d = 0; d < 40; d++) {
    for (int k = 0; k < d % 6; k++)
      at += (size_t)snprintf(text + at, sizeof(text) - at, "%s%s", k ? " " : "",
                             w[(d * 3 + k * k) % 7]);
    at += (size_t)snprintf(text + at, sizeof(text) - at, d % 9 == 4 ? "\r\n" : "\n");
  }
  const char *p = write_bytes("parts.text.txt", text, at);
  for (uint32_t min = 1; min <= 12; min += 11) {
    lda_corpus_t whole;
    char err[256];
    assert_int_equal(lda_load_text(p, min, &whole, err, sizeof(err)), 0);
    for (int nparts = 1; nparts <= 30; nparts++) {
      lda_text_t *t[30], *all = lda_text_new();
      assert_non_null(all);
      for (int part = 0; part < nparts; part++) {
        assert_int_equal(lda_text_read(p, part, nparts, &t[part], err, sizeof(err)), 0);
        uint32_t n;
        size_t len;
        const char *b = lda_text_words(t[part], &n, &len);
        assert_int_equal(lda_text_merge(all, b, n, lda_text_counts(t[part])), 0);
      }
      uint32_t an, gmap[64], map[64];
      size_t alen;
      lda_text_words(all, &an, &alen);
      lda_corpus_t v = {0};
      assert_int_equal(lda_text_vocab(all, min, gmap, &v), 0);
      assert_int_equal(v.nwords, whole.nwords);
      for (uint32_t i = 0; i < v.nwords; i++) assert_string_equal(v.vocab[i], whole.vocab[i]);
      uint32_t d0 = 0;
      for (int part = 0; part < nparts; part++) {
        uint32_t n;
        size_t len;
        const char *b = lda_text_words(t[part], &n, &len);
        for (uint32_t i = 0; i < n; i++, b += strlen(b) + 1)
          map[i] = gmap[lda_text_find(all, b, strlen(b))];
        lda_corpus_t c = {0};
        assert_int_equal(lda_text_docs(t[part], map, &c), 0);
        for (uint32_t d = 0; d < c.ndocs; d++) {
          char mine[1024];
          strcpy(mine, doc_words(&c, d));
          assert_string_equal(mine, doc_words(&whole, d0 + d));
        }
        d0 += c.ndocs;
        lda_corpus_free(&c);
        lda_text_free(t[part]);
      }
      assert_int_equal(d0, whole.ndocs);
      assert_int_equal(lda_text_find(all, "none", 4), UINT32_MAX);
      lda_corpus_free(&v);
      lda_text_free(all);
    }
    lda_corpus_free(&whole);
  }
}

/* ---- generator ------------------------------------------------------------------------ */

static void test_generator_shapes_and_determinism(void **state)
{
  (void)state;
  lda_gen_opts_t o;
  lda_gen_opts_default(&o);
  o.docs = 500;
  o.vocab = 300;
  o.doc_length = 40;
  o.topics = 6;
  o.seed = 9;
  lda_corpus_t a, b;
  float *phi;
  assert_int_equal(lda_generate(&o, &a, &phi), 0);
  assert_int_equal(a.ndocs, 500);
  assert_int_equal(a.nwords, 300);
  size_t total = 0;
  for (uint32_t d = 0; d < a.ndocs; d++) {
    size_t len = a.doc_start[d + 1] - a.doc_start[d];
    assert_true(len >= 20 && len <= 60);
    total += len;
  }
  assert_int_equal(total, a.ntokens);
  assert_true(a.ntokens > 500 * 35 && a.ntokens < 500 * 45); /* mean 40 */
  for (size_t i = 0; i < a.ntokens; i++) assert_true(a.words[i] < 300);
  for (uint32_t k = 0; k < o.topics; k++) {
    double sum = 0;
    for (uint32_t v = 0; v < o.vocab; v++) sum += phi[(size_t)k * o.vocab + v];
    assert_true(fabs(sum - 1) < 1e-4);
  }

  /* same options, same corpus; another seed, another one */
  assert_int_equal(lda_generate(&o, &b, NULL), 0);
  assert_int_equal(b.ntokens, a.ntokens);
  assert_memory_equal(a.words, b.words, a.ntokens * sizeof(uint32_t));
  lda_corpus_free(&b);
  o.seed = 10;
  assert_int_equal(lda_generate(&o, &b, NULL), 0);
  assert_true(b.ntokens != a.ntokens ||
              memcmp(a.words, b.words, a.ntokens * sizeof(uint32_t)) != 0);
  lda_corpus_free(&b);

  /* beta 0.01 plants sparse topics: each one's 10 likeliest words carry most of its mass,
   * and two topics share few of them */
  uint32_t top[6][10];
  float *row = malloc(o.vocab * sizeof(float));
  assert_non_null(row);
  for (uint32_t k = 0; k < o.topics; k++) {
    memcpy(row, &phi[(size_t)k * o.vocab], o.vocab * sizeof(float));
    double mass = 0;
    for (int r = 0; r < 10; r++) {
      uint32_t best = 0;
      for (uint32_t v = 1; v < o.vocab; v++)
        if (row[v] > row[best]) best = v;
      mass += row[best];
      row[best] = -1; /* taken */
      top[k][r] = best;
    }
    assert_true(mass > 0.5);
  }
  for (uint32_t k = 0; k < o.topics; k++)
    for (uint32_t k2 = k + 1; k2 < o.topics; k2++) {
      int shared = 0;
      for (int r = 0; r < 10; r++)
        for (int r2 = 0; r2 < 10; r2++) shared += top[k][r] == top[k2][r2];
      assert_true(shared <= 2);
    }
  free(row);
  free(phi);
  lda_corpus_free(&a);
}

/* Zipf's law and log-normal lengths: word frequencies fall with the word's rank (ten
 * times from rank 100 to rank 1000 at exponent 1), documents average the asked length
 * with a long tail, the planted topics are still distributions, and the corpus is still a
 * pure function of the options. */
static void test_generator_zipf(void **state)
{
  (void)state;
  lda_gen_opts_t o;
  lda_gen_opts_default(&o);
  o.docs = 4000, o.vocab = 2000, o.doc_length = 20, o.topics = 10, o.seed = 3;
  o.zipf = 1.0, o.length_sigma = 1.2, o.beta = 0.1;
  lda_corpus_t a, b;
  float *phi;
  assert_int_equal(lda_generate(&o, &a, &phi), 0);
  uint64_t *cnt = calloc(o.vocab, sizeof(uint64_t));
  assert_non_null(cnt);
  lda_corpus_word_counts(&a, cnt);
  /* counts of ranks 1-10, 91-110 and 901-1100 (word ids 0.., about rank order) */
  double head = 0, mid = 0, tail = 0;
  for (int v = 0; v < 10; v++) head += (double)cnt[v] / 10;
  for (int v = 90; v < 110; v++) mid += (double)cnt[v] / 20;
  for (int v = 900; v < 1100; v++) tail += (double)cnt[v] / 200;
  print_message("zipf: mean counts %.0f (ranks 1-10), %.1f (91-110), %.2f (901-1100)\n", head, mid,
                tail);
  assert_true(mid > 0 && tail > 0);
  assert_true(head / mid > 15 && head / mid < 45); /* H_10 / 10 against 1 / 100: 29 */
  assert_true(mid / tail > 5 && mid / tail < 20);  /* 10 at exponent 1 */
  uint32_t longest = 0, shortest = UINT32_MAX;
  for (uint32_t d = 0; d < a.ndocs; d++) {
    uint32_t len = (uint32_t)(a.doc_start[d + 1] - a.doc_start[d]);
    longest = len > longest ? len : longest;
    shortest = len < shortest ? len : shortest;
  }
  double mean = (double)a.ntokens / a.ndocs;
  print_message("lengths: mean %.1f, shortest %u, longest %u\n", mean, shortest, longest);
  assert_true(mean > 17 && mean < 23);
  assert_true(shortest >= 1 && longest > 100 && longest <= 64 * 20);
  for (uint32_t k = 0; k < o.topics; k++) {
    double sum = 0;
    for (uint32_t v = 0; v < o.vocab; v++) sum += phi[(size_t)k * o.vocab + v];
    assert_true(fabs(sum - 1) < 1e-4);
  }
  assert_int_equal(lda_generate(&o, &b, NULL), 0);
  assert_int_equal(b.ntokens, a.ntokens);
  assert_memory_equal(a.words, b.words, a.ntokens * sizeof(uint32_t));
  lda_corpus_free(&b);
  free(cnt);
  free(phi);
  lda_corpus_free(&a);
}

static void test_generator_options(void **state)
{
  (void)state;
  lda_gen_opts_t o;
  char err[256];
  lda_gen_opts_default(&o);
  assert_int_equal(lda_gen_opts_check(&o, err, sizeof(err)), 0);
  o.vocab = 0;
  assert_int_equal(lda_gen_opts_check(&o, err, sizeof(err)), LDA_EINVAL);
  assert_non_null(strstr(err, "--vocab-size"));
  lda_gen_opts_default(&o);
  o.topics = 100000;
  o.vocab = 100000;
  assert_int_equal(lda_gen_opts_check(&o, err, sizeof(err)), LDA_EINVAL);
  assert_non_null(strstr(err, "planted topics x vocabulary size"));
  lda_gen_opts_default(&o);
  o.docs = 100000000;
  o.doc_length = 100;
  assert_int_equal(lda_gen_opts_check(&o, err, sizeof(err)), LDA_EINVAL);
  assert_non_null(strstr(err, "tokens"));
  lda_gen_opts_default(&o);
  o.zipf = -1;
  assert_int_equal(lda_gen_opts_check(&o, err, sizeof(err)), LDA_EINVAL);
  assert_non_null(strstr(err, "--zipf"));
  lda_gen_opts_default(&o);
  o.length_sigma = 5;
  assert_int_equal(lda_gen_opts_check(&o, err, sizeof(err)), LDA_EINVAL);
  assert_non_null(strstr(err, "--length-sigma"));
  lda_gen_opts_default(&o);
  o.alpha = 0;
  assert_int_equal(lda_gen_opts_check(&o, err, sizeof(err)), LDA_EINVAL);
  lda_corpus_t c;
  assert_int_equal(lda_generate(&o, &c, NULL), LDA_EINVAL);
  assert_null(c.words);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stop_words),
      cmocka_unit_test(test_uci_reads_documents),
      cmocka_unit_test(test_uci_malformed),
      cmocka_unit_test(test_vocab_malformed),
      cmocka_unit_test(test_text_reads_documents),
      cmocka_unit_test(test_text_malformed),
      cmocka_unit_test(test_uci_parts),
      cmocka_unit_test(test_text_parts),
      cmocka_unit_test(test_generator_shapes_and_determinism),
      cmocka_unit_test(test_generator_zipf),
      cmocka_unit_test(test_generator_options),
  };
  return cmocka_run_group_tests_name("lda_data", tests, make_dir, remove_dir);
}
