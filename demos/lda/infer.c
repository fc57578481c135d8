/* infer.c — `augur-lda infer MODEL DOCS`: topic mixtures of new documents under a saved
 * model (its word-topic counts fixed), and their held-out log-likelihood per token
 * (docs/lda.md, "Inference"). One process, no cluster. */
#include "infer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "corpus.h"
#include "rng.h"

#define PROG "augur-lda"

static void usage(FILE *f)
{
  fprintf(f, "usage: " PROG " infer MODEL DOCS [--iterations N] [--top N] [--seed N] [--format F]\n"
             "\n"
             "The topic mixture of every document of DOCS (plain text, one document per line,\n"
             "or UCI bag-of-words over the model's vocabulary) under the model that\n"
             "`augur-lda --save MODEL` wrote, one line per document, then the held-out\n"
             "log-likelihood per token (each document's odd tokens under a mixture sampled\n"
             "from its even ones):\n"
             "  doc=0 tokens=74 topics=17:0.301,14:0.268,6:0.214\n"
             "  infer docs=D tokens=N unknown=U llh_per_token=X\n"
             "(unknown: tokens whose word the model does not have; they are left out).\n"
             "  --iterations N  Gibbs sweeps per document, the mixture averaged over the\n"
             "                  second half (default 50)\n"
             "  --top N         topics shown per document (default 5)\n"
             "  --seed N        (default 1)\n"
             "  --format F      auto, uci or text (default auto, as augur-lda)\n"
             "Exit status: 0 done, 1 failed, 2 bad flags or input.\n");
}

typedef struct model {
  uint32_t K, V;
  double alpha, beta;
  float *phi; /* V x K: (n_wk + beta) / (n_k + V beta) */
  lda_corpus_t vocab;
} model_t;

static int bad(const char *fmt, const char *a, const char *b)
{
  fprintf(stderr, PROG ": ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 2;
}

/* A decimal number at *p (before end), at most max; *p moves past it. */
static int parse_num(const char **p, const char *end, uint64_t max, uint64_t *out)
{
  const char *q = *p;
  uint64_t v = 0;
  for (; q < end && *q >= '0' && *q <= '9'; q++) {
    const uint64_t d = (uint64_t)(*q - '0');
    if (d > max || v > (max - d) / 10) return 0;
    v = v * 10 + d;
  }
  if (q == *p) return 0;
  *p = q, *out = v;
  return 1;
}

/* The rows of one word_topic.txt file, "id word topic:count ..." as lda_save writes them,
 * into n (V x K): each word's row once over all the files (seen), under its word in
 * vocab.txt, each topic once in it; *rows and *tokens add up what was read. */
static int read_counts(const char *path, model_t *md, int32_t *n, uint8_t *seen, uint64_t *rows,
                       uint64_t *tokens)
{
  FILE *f = fopen(path, "r");
  if (!f) return bad("%s: %s", path, strerror(errno));
  char *line = NULL, buf[80];
  size_t cap = 0, lineno = 0;
  ssize_t len;
  int rc = 0;
  while (!rc && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') len--;
    if (len > 0 && line[len - 1] == '\r') len--;
    if (len == 0 || line[0] == '#') continue;
    const char *p = line, *end = line + len, *word;
    uint64_t w, k, c;
    if (!parse_num(&p, end, md->V - 1, &w) || p == end || *p != ' ') {
      fprintf(stderr,
              PROG ": %s:%zu: expected 'id word topic:count ...' with an id below %u, "
                   "got '%s'\n",
              path, lineno, md->V, lda__shown(buf, sizeof(buf), line, (size_t)len));
      rc = 2;
      break;
    }
    for (word = ++p; p < end && *p != ' ';) p++;
    const char *want = md->vocab.vocab[w];
    if ((size_t)(p - word) != strlen(want) || memcmp(word, want, (size_t)(p - word))) {
      fprintf(stderr,
              PROG ": %s:%zu: expected word %llu to be '%s' (vocab.txt line %llu), got '%s'\n",
              path, lineno, (unsigned long long)w, want, (unsigned long long)w + 1,
              lda__shown(buf, sizeof(buf), word, (size_t)(p - word)));
      rc = 2;
      break;
    }
    if (seen[w]) {
      fprintf(stderr, PROG ": %s:%zu: expected each word's row once, got word %llu ('%s') again\n",
              path, lineno, (unsigned long long)w, want);
      rc = 2;
      break;
    }
    seen[w] = 1;
    ++*rows;
    int32_t *row = n + (size_t)w * md->K;
    while (!rc && p < end) { /* " topic:count", counts of an int32 table */
      const char *at = ++p;
      if (!parse_num(&p, end, md->K - 1, &k) || p == end || *p++ != ':' ||
          !parse_num(&p, end, INT32_MAX, &c) || (p < end && *p != ' ') || row[k]) {
        while (p < end && *p != ' ') p++;
        fprintf(stderr,
                PROG ": %s:%zu: expected topic:count with a topic below %u, a count below 2^31 "
                     "and each topic once, got '%s'\n",
                path, lineno, md->K, lda__shown(buf, sizeof(buf), at, (size_t)(p - at)));
        rc = 2;
      } else {
        row[k] = (int32_t)c;
        *tokens += c;
      }
    }
  }
  if (!rc && ferror(f)) rc = bad("%s: %s", path, strerror(errno));
  free(line);
  fclose(f);
  return rc;
}

static int load_model(const char *dir, model_t *md)
{
  char path[4096], line[256];
  snprintf(path, sizeof(path), "%s/model.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) return bad("%s: %s (a directory that augur-lda --save wrote?)", path, strerror(errno));
  double topics = -1, words = -1, format = -1, nodes = 1; /* (nodes=: since 2026-12-01) */
  double tokens = -1;
  md->alpha = md->beta = -1;
  while (fgets(line, sizeof(line), f)) {
    char key[32];
    double v;
    if (line[0] == '#' || sscanf(line, "%31[a-z]=%lf", key, &v) != 2) continue;
    if (!strcmp(key, "format")) format = v;
    if (!strcmp(key, "topics")) topics = v;
    if (!strcmp(key, "words")) words = v;
    if (!strcmp(key, "alpha")) md->alpha = v;
    if (!strcmp(key, "beta")) md->beta = v;
    if (!strcmp(key, "nodes")) nodes = v;
    if (!strcmp(key, "tokens")) tokens = v;
  }
  fclose(f);
  if (format != 1 || topics < 1 || topics > 65535 || topics != (uint32_t)topics || words < 1 ||
      words > LDA_MAX_WORDS || words != (uint32_t)words || !(md->alpha > 0) || !(md->beta > 0) ||
      !(tokens == -1 || (tokens >= 0 && tokens <= LDA_MAX_TOKENS && tokens == (uint64_t)tokens)))
    return bad("%s: expected format=1, topics, words, alpha and beta (and tokens) in range%s", path,
               "");
  md->K = (uint32_t)topics, md->V = (uint32_t)words;
  /* before anything that size: the counts, phi and the vocabulary's offsets */
  int rc = cli_check_memory("the model (words x topics counts)",
                            (double)md->V * md->K * (sizeof(int32_t) + sizeof(float)) +
                                (double)md->V * 32);
  if (rc) return rc;
  char err[512];
  md->vocab = (lda_corpus_t){.nwords = md->V};
  snprintf(path, sizeof(path), "%s/vocab.txt", dir);
  if (lda_load_vocab(path, &md->vocab, err, sizeof(err)) != 0) return bad("%s%s", err, "");
  int32_t *n = calloc((size_t)md->V * md->K, sizeof(int32_t));
  uint8_t *seen = calloc(md->V, 1);
  md->phi = malloc((size_t)md->V * md->K * sizeof(float));
  if (!n || !seen || !md->phi) {
    free(n);
    free(seen);
    return bad("%s: out of memory for the model%s", dir, "");
  }
  /* exactly the files the save wrote: word_topic.txt, or one per node (not whatever else
     a directory holds: another save's, by another node count) */
  rc = nodes >= 1 && nodes <= 65536 && nodes == (int)nodes
           ? 0
           : bad("%s: nodes= is not a node count%s", dir, "");
  uint64_t rows = 0, sum = 0;
  for (int r = 0; !rc && r < (int)nodes; r++) {
    if (nodes == 1)
      snprintf(path, sizeof(path), "%s/word_topic.txt", dir);
    else
      snprintf(path, sizeof(path), "%s/word_topic.txt.%d", dir, r);
    rc = read_counts(path, md, n, seen, &rows, &sum);
  }
  free(seen);
  /* every row, and every token: a file cut short is not a smaller model */
  const char *files = nodes > 1 ? "word_topic.txt.*" : "word_topic.txt";
  if (!rc && rows != md->V) {
    fprintf(stderr,
            PROG ": %s: expected %u word rows (model.txt's words=), got %llu in %s (a file cut "
                 "short?)\n",
            dir, md->V, (unsigned long long)rows, files);
    rc = 2;
  } else if (!rc && tokens >= 0 && sum != (uint64_t)tokens) {
    fprintf(stderr,
            PROG ": %s: expected %.0f tokens (model.txt's tokens=), got %llu in the rows of %s\n",
            dir, tokens, (unsigned long long)sum, files);
    rc = 2;
  }
  double *nk = calloc(md->K, sizeof(double));
  if (!rc && !nk) rc = bad("%s: out of memory%s", dir, "");
  for (size_t i = 0; !rc && i < (size_t)md->V * md->K; i++) nk[i % md->K] += n[i];
  const double vbeta = md->V * md->beta;
  for (size_t i = 0; !rc && i < (size_t)md->V * md->K; i++)
    md->phi[i] = (float)((n[i] + md->beta) / (nk[i % md->K] + vbeta));
  free(nk);
  free(n);
  return rc;
}

/* Gibbs over the tokens w[0..n) with phi fixed, `sweeps` sweeps; theta (K) gets the mean
 * of (n_dk + alpha) / (n + K alpha) over the second half. */
static void fold_in(const model_t *md, const uint32_t *w, size_t n, int sweeps, lda_rng_t *rng,
                    uint16_t *z, float *nd, double *p, double *theta)
{
  const uint32_t K = md->K;
  memset(nd, 0, K * sizeof(float));
  memset(theta, 0, K * sizeof(double));
  for (size_t i = 0; i < n; i++) nd[z[i] = (uint16_t)lda_rng_below(rng, K)]++;
  int kept = 0;
  for (int s = 0; s < sweeps; s++) {
    for (size_t i = 0; i < n; i++) {
      const float *f = md->phi + (size_t)w[i] * K;
      nd[z[i]]--;
      double sum = 0;
      for (uint32_t k = 0; k < K; k++) p[k] = sum += (nd[k] + md->alpha) * f[k];
      const double u = lda_rng_double(rng) * sum;
      uint32_t lo = 0, hi = K - 1;
      while (lo < hi) { /* the first k with p[k] > u */
        uint32_t mid = (lo + hi) / 2;
        if (p[mid] > u)
          hi = mid;
        else
          lo = mid + 1;
      }
      nd[z[i] = (uint16_t)lo]++;
    }
    if (2 * s >= sweeps) {
      for (uint32_t k = 0; k < K; k++) theta[k] += nd[k];
      kept++;
    }
  }
  for (uint32_t k = 0; k < K; k++)
    theta[k] = (theta[k] / (kept ? kept : 1) + md->alpha) / ((double)n + K * md->alpha);
}

/* The top n topics of theta into order[0..n), largest share first (ties: lower topic). */
static void top_topics(const double *theta, uint32_t K, uint32_t n, uint32_t *order)
{
  for (uint32_t i = 0; i < n; i++) {
    uint32_t best = UINT32_MAX;
    for (uint32_t k = 0; k < K; k++) {
      int taken = 0;
      for (uint32_t j = 0; j < i && !taken; j++) taken = order[j] == k;
      if (!taken && (best == UINT32_MAX || theta[k] > theta[best])) best = k;
    }
    order[i] = best;
  }
}

int lda_infer_main(int argc, char **argv)
{
  cli_set_prog(PROG);
  const char *model = NULL, *docs = NULL, *format = "auto";
  uint64_t sweeps = 50, top = 5, seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    int rc = 0;
    const char *v = NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(f, "--iterations")) {
      rc = cli_parse_u64(f, i + 1 < argc ? argv[++i] : NULL, 1, 100000, &sweeps);
    } else if (!strcmp(f, "--top")) {
      rc = cli_parse_u64(f, i + 1 < argc ? argv[++i] : NULL, 1, 65535, &top);
    } else if (!strcmp(f, "--seed")) {
      rc = cli_parse_u64(f, i + 1 < argc ? argv[++i] : NULL, 0, UINT64_MAX, &seed);
    } else if (!strcmp(f, "--format")) {
      v = i + 1 < argc ? argv[++i] : NULL;
      if (!v || (strcmp(v, "auto") && strcmp(v, "uci") && strcmp(v, "text")))
        return cli_fail_flag(f, v, "auto, uci or text");
      format = v;
    } else if (f[0] == '-' && f[1]) {
      return cli_unknown_flag(f);
    } else if (!model) {
      model = f;
    } else if (!docs) {
      docs = f;
    } else {
      fprintf(stderr, PROG " infer: MODEL and DOCS only, got '%s' too\n", f);
      return 2;
    }
    if (rc) return rc;
  }
  if (!model || !docs) {
    usage(stderr);
    return 2;
  }
  model_t md = {0};
  int status = load_model(model, &md);
  lda_corpus_t c = {0};
  uint64_t unknown = 0;
  char err[512];
  int uci = !strcmp(format, "uci"), guessed = 0;
  if (!strcmp(format, "auto")) { /* a first line that is one number: UCI's D */
    FILE *f = fopen(docs, "r");
    char buf[256];
    if (f && fgets(buf, sizeof(buf), f)) {
      char *e;
      strtoul(buf, &e, 10);
      guessed = uci = e != buf && (*e == '\n' || *e == '\r' || *e == '\0');
    }
    if (f) fclose(f);
  }
  if (!status && uci) {
    int rc = lda_load_uci(docs, &c, err, sizeof(err));
    if (rc == LDA_EPARSE && guessed) lda_uci_hint(err, sizeof(err));
    if (rc != 0) {
      status = bad("%s%s", err, "");
    } else if (c.nwords != md.V) {
      fprintf(stderr, PROG ": %s: its vocabulary has %u words, the model's %u\n", docs, c.nwords,
              md.V);
      status = 2;
    }
  } else if (!status) { /* text: words by the model's vocabulary */
    lda_text_t *t = NULL, *vt = lda_text_new();
    uint64_t *ones = malloc(((size_t)md.V + 1) * sizeof(uint64_t));
    uint32_t *map = NULL, n = 0;
    size_t blen;
    if (!vt || !ones) status = bad("out of memory%s%s", "", "");
    for (uint32_t i = 0; !status && i < md.V; i++) ones[i] = 1;
    for (uint32_t i = 0; !status && i < md.V; i++) /* the vocabulary's words, in order */
      if (lda_text_merge(vt, md.vocab.vocab[i], 1, ones) != 0)
        status = bad("out of memory%s%s", "", "");
    if (!status && lda_text_read(docs, 0, 1, &t, err, sizeof(err)) != 0)
      status = bad("%s%s", err, "");
    const char *b = status ? NULL : lda_text_words(t, &n, &blen);
    if (!status && !(map = malloc(((size_t)n + 1) * sizeof(uint32_t))))
      status = bad("out of memory%s%s", "", "");
    const uint64_t *cnt = status ? NULL : lda_text_counts(t);
    for (uint32_t i = 0; !status && i < n; i++, b += strlen(b) + 1) {
      map[i] = lda_text_find(vt, b, strlen(b));
      if (map[i] == UINT32_MAX) unknown += cnt[i];
    }
    if (!status && lda_text_docs(t, map, &c) != 0) status = bad("out of memory%s%s", "", "");
    c.nwords = md.V;
    free(map);
    free(ones);
    lda_text_free(t);
    lda_text_free(vt);
  }
  const uint32_t K = md.K;
  size_t maxlen = 0;
  for (uint32_t d = 0; !status && d < c.ndocs; d++)
    if (c.doc_start[d + 1] - c.doc_start[d] > maxlen) maxlen = c.doc_start[d + 1] - c.doc_start[d];
  uint16_t *z = malloc((maxlen + 1) * sizeof(uint16_t));
  uint32_t *half = malloc((maxlen / 2 + 2) * sizeof(uint32_t)),
           *order = malloc(K * sizeof(uint32_t));
  float *nd = malloc(K * sizeof(float));
  double *p = malloc(K * sizeof(double)), *theta = malloc(K * sizeof(double));
  if (!status && (!z || !half || !order || !nd || !p || !theta))
    status = bad("out of memory%s%s", "", "");
  lda_rng_t rng;
  lda_rng_seed(&rng, seed, 0x1f);
  double llh = 0;
  uint64_t scored = 0, tokens = 0;
  for (uint32_t d = 0; !status && d < c.ndocs; d++) {
    const uint32_t *w = c.words + c.doc_start[d];
    const size_t n = c.doc_start[d + 1] - c.doc_start[d];
    tokens += n;
    /* held out: the odd tokens under the mixture of the even ones */
    size_t h = 0;
    for (size_t i = 0; i < n; i += 2) half[h++] = w[i];
    fold_in(&md, half, h, (int)sweeps, &rng, z, nd, p, theta);
    for (size_t i = 1; i < n; i += 2) {
      const float *f = md.phi + (size_t)w[i] * K;
      double s = 0;
      for (uint32_t k = 0; k < K; k++) s += theta[k] * f[k];
      llh += log(s);
      scored++;
    }
    /* the document's mixture, from all its tokens */
    fold_in(&md, w, n, (int)sweeps, &rng, z, nd, p, theta);
    const uint32_t shown = top < K ? (uint32_t)top : K;
    top_topics(theta, K, shown, order);
    printf("doc=%u tokens=%zu topics=", d, n);
    for (uint32_t i = 0; i < shown; i++)
      printf("%s%u:%.3f", i ? "," : "", order[i], theta[order[i]]);
    putchar('\n');
  }
  if (!status)
    printf("infer docs=%u tokens=%llu unknown=%llu llh_per_token=%.4f\n", c.ndocs,
           (unsigned long long)tokens, (unsigned long long)unknown,
           scored ? llh / (double)scored : NAN);
  free(z), free(half), free(order), free(nd), free(p), free(theta);
  free(md.phi);
  lda_corpus_free(&md.vocab);
  lda_corpus_free(&c);
  return cli_stdout_status(status);
}
