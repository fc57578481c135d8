/* main.c — augur-lda: latent Dirichlet allocation by collapsed Gibbs sampling on augur,
 * on a generated corpus or a UCI bag-of-words or plain-text file. Prints one key=value
 * line per iteration, then the top words of each topic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <augur.h>

#include "cli.h"
#include "corpus.h"
#include "lda.h"
#include "sampler.h"
#include "infer.h"
#include "shard.h"

#define PROG "augur-lda"

static void usage(FILE *f)
{
  fprintf(f, "usage: " PROG " [FLAGS] [FILE]\n"
             "       " PROG " infer MODEL DOCS   (see " PROG " infer --help)\n"
             "\n"
             "Latent Dirichlet allocation by collapsed Gibbs sampling on augur (AliasLDA:\n"
             "SparseLDA's buckets, alias tables, Metropolis-Hastings). Without FILE, trains\n"
             "on a generated corpus with planted topics. Prints one key=value line per\n"
             "iteration:\n"
             "  iteration=10 llh_per_token=-8.912 seconds=0.41 tokens_per_s=6.2e+06 moved=0.12 "
             "local=1.000 ...\n"
             "then the top words of each topic.\n"
             "\n"
             "model and training:\n"
             "  --topics K        topics (default 20, at most 65535)\n"
             "  --alpha X         Dirichlet prior of document-topic mixtures (default 0.1)\n"
             "  --beta X          Dirichlet prior of topic-word distributions (default 0.01)\n"
             "  --iterations N    sweeps over the corpus (default 50)\n"
             "  --eval-every N    log-likelihood after every N-th sweep and the last (default 1;\n"
             "                    its cost grows with words x topics)\n"
             "  --mh-steps N      Metropolis-Hastings steps per token (default 1)\n"
             "  --threads N       scheduler threads (default: online cores)\n"
             "  --workers N       worker actors (default: one per thread)\n"
             "  --batch N         tokens per worker step, whole words (default 65536)\n"
             "  --lookahead N     intents announce the words N steps ahead (default 4)\n"
             "  --seed N          seed for generation, initial topics and sampling (default 1)\n"
             "  --mode M          placement of the count tables across nodes, as augur-mf's\n"
             "                    (docs/cluster.md): adaptive (default), classic, replicate,\n"
             "                    relocate, hot\n"
             "  --trace FILE      write a Chrome trace of the run (FILE.<rank> on a cluster)\n"
             "  --sync-ms N       replicas sync every N ms, their staleness bound (default 2)\n"
             "  --consistency M   async (default), ssp:S or bsp: what a read may miss of the\n"
             "                    other workers' updates, in clocks of one step (docs/lda.md)\n"
             "\n"
             "data:\n"
             "  FILE              the corpus\n"
             "  --format F        uci or text (default: uci when the first line is a number)\n"
             "                    uci: docword.*.txt, lines D, W, NNZ, then 'docID wordID count'\n"
             "                    text: one document per line; lower-cased words of letters,\n"
             "                    English stop words and one-letter words dropped\n"
             "  --vocab FILE      words of a uci corpus, one per line (vocab.*.txt)\n"
             "  --min-count N     text: drop words seen fewer than N times (default 2)\n"
             "\n"
             "generated corpus (without FILE):\n"
             "  --docs N          documents (default 10000)\n"
             "  --vocab-size N    words (default 10000)\n"
             "  --doc-length N    mean tokens per document, uniform in [N/2, 3N/2] (default 100)\n"
             "  --planted-topics N  topics the documents are drawn from (default 20)\n"
             "  --zipf S          words follow Zipf's law of exponent S, each spread over\n"
             "                    the planted topics (default 0: sparse planted topics)\n"
             "  --length-sigma X  log-normal lengths, X the deviation of their log\n"
             "                    (default 0: uniform lengths)\n"
             "\n"
             "output:\n"
             "  --top-words N     words shown per topic at the end (default 10, 0 = none)\n"
             "  --check           after training, recount every table from the tokens and\n"
             "                    print check=ok or check=FAILED (a testing aid; docs/lda.md)\n"
             "  --save DIR        write the model into DIR: word-topic counts, document-topic\n"
             "                    counts, vocabulary, hyperparameters (docs/lda.md)\n");
  cli_ckpt_usage(f, "sweeps");
  fprintf(f, "  --resume DIR      go on from DIR's latest checkpoint (same corpus and flags,\n"
             "                    any node count): --iterations counts the sweeps done there\n"
             "\n"
             "  --help            this text\n"
             "\n"
             "Exit status: 0 done, 1 training failed, 2 bad flags or input.\n");
}

enum { FMT_AUTO, FMT_UCI, FMT_TEXT };

typedef struct args {
  lda_opts_t lda;
  lda_gen_opts_t gen;
  int iterations, eval_every, threads, sync_ms, format, check, have_min_count;
  au_consistency_t consistency;
  int staleness;
  uint32_t top_words, min_count;
  const char *file, *vocab, *save, *trace;
  cli_ckpt_t ck;
} args_t;

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, args_t *a)
{
  cli_set_prog(PROG);
  *a = (args_t){0}; /* every field has a value, whatever the defaults below forget */
  lda_opts_default(&a->lda);
  lda_gen_opts_default(&a->gen);
  a->iterations = 50;
  cli_ckpt_default(&a->ck);
  a->eval_every = 1;
  a->format = FMT_AUTO;
  a->top_words = 10;
  a->min_count = 2;
  const char *gen_flag = NULL; /* a generator flag given */
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    uint64_t u;
    double d;
    int rc = 0;
#define VALUE() (i + 1 < argc ? argv[++i] : NULL)
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(f, "--check")) {
      a->check = 1; /* a testing aid, documented in docs/lda.md */
    } else if (!strcmp(f, "--topics")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, LDA_MAX_TOPICS, &u))) a->lda.topics = (uint32_t)u;
    } else if (!strcmp(f, "--alpha")) {
      if (!(rc = cli_parse_double(f, VALUE(), 1e-6, 1e6, &d))) a->lda.alpha = d;
    } else if (!strcmp(f, "--beta")) {
      if (!(rc = cli_parse_double(f, VALUE(), 1e-6, 1e6, &d))) a->lda.beta = d;
    } else if (!strcmp(f, "--iterations")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 1000000, &u))) a->iterations = (int)u;
    } else if (!strcmp(f, "--eval-every")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1000000, &u))) a->eval_every = (int)u;
    } else if (!strcmp(f, "--mh-steps")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1000, &u))) a->lda.mh_steps = (int)u;
    } else if (!strcmp(f, "--threads")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1024, &u))) a->threads = (int)u;
    } else if (!strcmp(f, "--sync-ms")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1000, &u))) a->sync_ms = (int)u;
    } else if (!strcmp(f, "--consistency")) {
      const char *v = VALUE();
      if (au_consistency_parse(v, &a->consistency, &a->staleness) != 0)
        rc = cli_fail_flag(f, v, "async, ssp:S (S = 0..1000000) or bsp");
      a->lda.bounded = a->consistency != AU_ASYNC;
    } else if (!strcmp(f, "--workers")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 4096, &u))) a->lda.workers = (int)u;
    } else if (!strcmp(f, "--batch")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1u << 30, &u))) a->lda.batch = (uint32_t)u;
    } else if (!strcmp(f, "--lookahead")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 1 << 20, &u))) a->lda.lookahead = (int)u;
    } else if (!strcmp(f, "--seed")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, UINT64_MAX, &u))) a->lda.seed = a->gen.seed = u;
    } else if (!strcmp(f, "--mode")) {
      const char *v = VALUE();
      if (au_place_parse(v, &a->lda.place) != 0)
        rc = cli_fail_flag(f, v, "classic, replicate, relocate, hot or adaptive");
    } else if (!strcmp(f, "--trace")) {
      rc = cli_path(f, a->trace = VALUE());
    } else if (!strcmp(f, "--format")) {
      const char *v = VALUE();
      if (v && !strcmp(v, "uci"))
        a->format = FMT_UCI;
      else if (v && !strcmp(v, "text"))
        a->format = FMT_TEXT;
      else
        rc = cli_fail_flag(f, v, "uci or text");
    } else if (!strcmp(f, "--vocab")) {
      rc = cli_path(f, a->vocab = VALUE());
    } else if (!strcmp(f, "--min-count")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, UINT32_MAX, &u)))
        a->min_count = (uint32_t)u, a->have_min_count = 1;
    } else if (!strcmp(f, "--docs")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 0xfffffffeu, &u))) a->gen.docs = (uint32_t)u;
    } else if (!strcmp(f, "--vocab-size")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, LDA_MAX_WORDS, &u))) a->gen.vocab = (uint32_t)u;
    } else if (!strcmp(f, "--doc-length")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1u << 24, &u))) a->gen.doc_length = (uint32_t)u;
    } else if (!strcmp(f, "--planted-topics")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, LDA_MAX_TOPICS, &u))) a->gen.topics = (uint32_t)u;
    } else if (!strcmp(f, "--zipf")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 10, &d))) a->gen.zipf = d;
    } else if (!strcmp(f, "--length-sigma")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 3, &d))) a->gen.length_sigma = d;
    } else if (!strcmp(f, "--top-words")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 1000, &u))) a->top_words = (uint32_t)u;
    } else if (cli_ckpt_is(f)) {
      rc = cli_ckpt_set(&a->ck, f, VALUE());
    } else if (!strcmp(f, "--save")) {
      rc = cli_path(f, a->save = VALUE());
    } else if (f[0] == '-' && f[1]) {
      return cli_unknown_flag(f);
    } else if (!a->file) {
      a->file = f;
    } else {
      fprintf(stderr, PROG ": one FILE only, got '%s' and '%s'\n", a->file, f);
      return 2;
    }
#undef VALUE
    if (rc) return rc;
    static const char *const gen_flags[] = {
        "--docs", "--vocab-size", "--doc-length", "--planted-topics", "--zipf", "--length-sigma",
        NULL};
    if (cli_one_of(f, gen_flags)) gen_flag = f;
  }
  if (gen_flag && a->file) { /* a flag that would do nothing is a mistake to say */
    fprintf(stderr, PROG ": %s shapes the generated data; with a file it does nothing\n", gen_flag);
    return 2;
  }

  if (a->lda.place == AU_PLACE_RELOCATE && a->consistency != AU_ASYNC) {
    fprintf(stderr, PROG ": --mode relocate needs --consistency async: under a bound parameter "
                         "actors do not move (replicate, hot and adaptive work)\n");
    return 2;
  }
  if (!a->file && (a->vocab || a->format != FMT_AUTO || a->have_min_count)) {
    fprintf(stderr, PROG ": --format, --vocab and --min-count need a FILE (without one the "
                         "corpus is generated)\n");
    return 2;
  }
  return -1;
}

/* uci when the first non-blank line is one whole number (UCI's D), else text. */
static int detect_format(const char *path)
{
  FILE *f = fopen(path, "r");
  if (!f) return FMT_UCI; /* the loader reports the error */
  char buf[256];
  int fmt = FMT_TEXT;
  for (int first = 1; fgets(buf, sizeof(buf), f); first = 0) {
    char *p = buf;
    if (first && !memcmp(p, "\xef\xbb\xbf", 3)) p += 3; /* a UTF-8 byte-order mark */
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    if (!*p) continue;
    char *q = p;
    while (*q >= '0' && *q <= '9') q++;
    while (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n') q++;
    if (q > p && !*q) fmt = FMT_UCI;
    break;
  }
  fclose(f);
  return fmt;
}

/* The file's format, with the flags that go with one format only checked: FMT_UCI or
 * FMT_TEXT, or -1 after printing why. */
static int file_format(args_t *a)
{
  int fmt = a->format == FMT_AUTO ? detect_format(a->file) : a->format;
  if (fmt == FMT_TEXT && a->vocab) {
    fprintf(stderr, PROG ": --vocab goes with uci files; a text corpus brings its words\n");
    return -1;
  }
  if (fmt == FMT_UCI && a->have_min_count) {
    fprintf(stderr, PROG ": --min-count goes with text files, not uci\n");
    return -1;
  }
  return fmt;
}

/* The generated corpus, or the whole FILE. Returns 0, or an exit status after printing
 * why. */
static int load_data(args_t *a, lda_corpus_t *c)
{
  char err[512];
  int rc;
  if (!a->file) {
    if (lda_gen_opts_check(&a->gen, err, sizeof(err)) != 0) goto bad;
    if ((rc = lda_generate(&a->gen, c, NULL)) != 0) {
      fprintf(stderr, PROG ": generating the corpus: %s\n", lda_strerror(rc));
      return 1;
    }
  } else {
    int fmt = file_format(a);
    if (fmt < 0) return 2;
    rc = fmt == FMT_UCI ? lda_load_uci(a->file, c, err, sizeof(err))
                        : lda_load_text(a->file, a->min_count, c, err, sizeof(err));
    /* taken for UCI by its first line only (a text corpus may start with "1984") */
    if (rc == LDA_EPARSE && fmt == FMT_UCI && a->format == FMT_AUTO) lda_uci_hint(err, sizeof(err));
    if (rc == 0 && a->vocab) rc = lda_load_vocab(a->vocab, c, err, sizeof(err));
    if (rc != 0) {
      lda_corpus_free(c);
      goto bad;
    }
    a->format = fmt;
  }
  if (c->ntokens == 0) {
    lda_corpus_free(c);
    snprintf(err, sizeof(err), "%s: no tokens%s", a->file ? a->file : "generator",
             a->format == FMT_TEXT ? " (after dropping stop words and rare words)" : "");
    goto bad;
  }
  return 0;
bad:
  fprintf(stderr, PROG ": %s\n", err);
  return 2;
}

/* FILE on a cluster: this node's part of it (shard.h), or the whole file when it cannot
 * be cut (*sh.whole). Collective. Returns 0, or an exit status after printing why. */
static int load_part(args_t *a, au_node_t *node, lda_corpus_t *c, lda_shard_t *sh)
{
  char err[512];
  int fmt = file_format(a);
  if (fmt < 0) return 2; /* every node sees the same flags and file */
  int rc = lda_shard_load(node, a->file, fmt == FMT_UCI, a->min_count, c, sh, err, sizeof(err));
  if (rc == LDA_EPARSE && fmt == FMT_UCI && a->format == FMT_AUTO) lda_uci_hint(err, sizeof(err));
  if (rc == 0 && sh->whole) return load_data(a, c);
  if (rc == 0 && a->vocab) rc = lda_load_vocab(a->vocab, c, err, sizeof(err));
  if (rc != 0) {
    lda_corpus_free(c);
    fprintf(stderr, PROG ": %s\n", err);
    return rc == LDA_ENOMEM ? 1 : 2; /* bad input, here or on another node */
  }
  a->format = fmt;
  if (sh->tokens == 0) {
    lda_corpus_free(c);
    fprintf(stderr, PROG ": %s: no tokens%s\n", a->file,
            fmt == FMT_TEXT ? " (after dropping stop words and rare words)" : "");
    return 2;
  }
  a->lda.sharded = 1;
  a->lda.doc_base = sh->first_doc;
  return 0;
}

/* The top n words of each topic, one line per topic: topic=3 tokens=51234 words=a,b,c.
 * Collective; rank 0 (talk) prints. */
static int print_topics(lda_t *m, const lda_corpus_t *c, uint32_t K, uint32_t n, int talk)
{
  uint32_t *words = malloc((size_t)K * n * sizeof(uint32_t));
  int64_t *counts = malloc((size_t)K * n * sizeof(int64_t));
  int64_t *totals = malloc((size_t)K * sizeof(int64_t));
  int rc = words && counts && totals ? lda_top_words(m, n, words, counts, totals) : AU_ENOMEM;
  if (rc != 0) {
    fprintf(stderr, PROG ": top words: %s\n", au_strerror(rc));
  } else if (talk) {
    char buf[32];
    for (uint32_t k = 0; k < K; k++) {
      printf("topic=%u tokens=%lld words=", k, (long long)totals[k]);
      for (uint32_t i = 0; i < n && words[(size_t)k * n + i] != UINT32_MAX; i++)
        printf("%s%s", i ? "," : "",
               lda_corpus_word(c, words[(size_t)k * n + i], buf, sizeof(buf)));
      putchar('\n');
    }
  }
  free(words);
  free(counts);
  free(totals);
  return rc;
}

int main(int argc, char **argv)
{
  if (argc > 1 && !strcmp(argv[1], "infer")) return lda_infer_main(argc - 1, argv + 1);
  args_t a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  /* what the run writes, before it trains (every node writes its part of --save) */
  if ((rc = cli_check_outputs(a.save, a.ck.dir, a.trace)) != 0) return rc;
  if ((rc = cli_ckpt_check(&a.ck)) != 0) return rc;

  /* A FILE on a cluster: each node reads its part (shard.h), so the node comes first.
   * Otherwise every node loads or generates the whole corpus and keeps its documents. */
  lda_corpus_t c = {0};
  au_cluster_opts_t co;
  char cerr[256];
  const int parts = a.file && au_cluster_opts_from_env(&co, cerr, sizeof(cerr)) == 1;
  uint64_t t0 = au_now_ns();
  if (!parts && (rc = load_data(&a, &c)) != 0) return rc;
  double load_s = (double)(au_now_ns() - t0) / 1e9;

  au_node_t *node;
  if ((rc = au_node_create(&(au_node_opts_t){.threads = a.threads,
                                             .sync_ms = a.sync_ms,
                                             .consistency = a.consistency,
                                             .staleness = a.staleness},
                           &node)) != 0) {
    fprintf(stderr, PROG ": starting the node: %s\n", au_strerror(rc));
    lda_corpus_free(&c);
    return 1;
  }
  lda_shard_t sh = {.docs = c.ndocs, .tokens = c.ntokens};
  if (parts) {
    if ((rc = load_part(&a, node, &c, &sh)) != 0) {
      au_node_destroy(node);
      return rc;
    }
    if (sh.whole) sh = (lda_shard_t){.docs = c.ndocs, .tokens = c.ntokens, .whole = 1};
    load_s = (double)(au_now_ns() - t0) / 1e9;
  }
  /* every node computes the same lines; rank 0 prints them */
  int talk = au_node_rank(node) == 0, nodes = au_node_nodes(node);
  if (a.trace && (rc = au_trace_start(au_node_runtime(node), a.trace)) != 0) {
    fprintf(stderr, PROG ": --trace %s: %s\n", a.trace, au_strerror(rc));
    au_node_destroy(node);
    lda_corpus_free(&c);
    return 2; /* (as the other demos: a flag's file) */
  }
  if (talk) {
    printf("data=%s docs=%llu vocab=%u tokens=%llu load_seconds=%.2f%s\n",
           a.file ? a.file : "generated", (unsigned long long)sh.docs, c.nwords,
           (unsigned long long)sh.tokens, load_s,
           a.lda.sharded ? " read=parts"
           : parts       ? " read=whole"
                         : "");
    fflush(stdout);
  }
  char err[512];
  lda_t *m;
  t0 = au_now_ns();
  if ((rc = lda_create(node, &a.lda, &c, &m, err, sizeof(err))) != 0) {
    fprintf(stderr, PROG ": %s\n", err);
    au_node_destroy(node);
    lda_corpus_free(&c);
    return rc == AU_EINVAL ? 2 : 1; /* (a model larger than the memory: the flags' or the data's) */
  }
  double init_s = (double)(au_now_ns() - t0) / 1e9, llh;
  int status = 0;
  if ((rc = lda_llh(m, &llh)) != 0) {
    fprintf(stderr, PROG ": log-likelihood: %s\n", au_strerror(rc));
    status = 1;
  } else if (talk) {
    char cname[24];
    printf("model topics=%u alpha=%g beta=%g nodes=%d threads=%d workers=%d mode=%s "
           "consistency=%s mh_steps=%d batch=%u\n",
           a.lda.topics, a.lda.alpha, a.lda.beta, nodes, au_runtime_threads(au_node_runtime(node)),
           lda_workers(m), au_place_name(a.lda.place),
           au_consistency_name(a.consistency, a.staleness, cname, sizeof(cname)), a.lda.mh_steps,
           a.lda.batch);
    printf("init llh_per_token=%.4f seconds=%.3f\n", llh, init_s);
    fflush(stdout);
  }
  /* augur run --restarts sets AU_RESTART: go on from the checkpoint if there is one */
  const char *resume = cli_ckpt_from(&a.ck);
  int it0 = 0;
  if (status == 0 && resume) {
    if ((rc = lda_resume(m, resume, &it0, err, sizeof(err))) != 0) {
      fprintf(stderr, PROG ": %s\n", err);
      status = rc == AU_EINVAL ? 2 : 1;
    } else if ((rc = lda_llh(m, &llh)) != 0) { /* collective */
      fprintf(stderr, PROG ": log-likelihood: %s\n", au_strerror(rc));
      status = 1;
    } else if (talk) {
      printf("resumed=%s iterations=%d llh_per_token=%.4f\n", resume, it0, llh);
      fflush(stdout);
    }
  }
  for (int it = it0 + 1; it <= a.iterations && status == 0; it++) {
    lda_iter_t st;
    int eval = it % a.eval_every == 0 || it == a.iterations;
    const uint64_t t0 = au_now_ns();
    rc = lda_iterate(m, &st);
    au_trace_span(au_node_runtime(node), "iteration", (uint64_t)it, t0); /* (when tracing) */
    if (rc != 0 || (eval && (rc = lda_llh(m, &llh)) != 0)) {
      fprintf(stderr, PROG ": iteration %d: %s\n", it, au_strerror(rc));
      status = 1;
      break;
    }
    double ck_s = -1;
    int ck_removed = 0;
    if (a.ck.dir && (it % a.ck.every == 0 || it == a.iterations)) {
      uint64_t c0 = au_now_ns();
      if ((rc = lda_checkpoint(m, a.ck.dir, it, err, sizeof(err))) != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        status = 1;
        break;
      }
      /* old checkpoints: a failure to remove them leaves them, and training goes on */
      if (au_checkpoint_prune(a.ck.dir, a.ck.keep, &ck_removed, err, sizeof(err)) != 0)
        fprintf(stderr, PROG ": warning: %s\n", err);
      ck_s = (double)(au_now_ns() - c0) / 1e9;
    }
    if (!talk) continue;
    char lbuf[48] = "";
    if (eval) snprintf(lbuf, sizeof(lbuf), " llh_per_token=%.4f", llh);
    printf("iteration=%d%s seconds=%.3f tokens_per_s=%.3g moved=%.3f local=%.3f intents=%llu "
           "cpu_seconds=%.3f bytes_sent=%llu bytes_fetch=%llu bytes_push=%llu bytes_move=%llu "
           "bytes_replica=%llu bytes_control=%llu clock_waits=%llu clock_wait_s=%.3f\n",
           it, lbuf, st.seconds, st.tokens_per_s, st.moved, st.local,
           (unsigned long long)st.intents, st.cpu_seconds, (unsigned long long)st.bytes_sent,
           (unsigned long long)st.bytes_by[0], (unsigned long long)st.bytes_by[1],
           (unsigned long long)st.bytes_by[2], (unsigned long long)st.bytes_by[3],
           (unsigned long long)st.bytes_by[4], (unsigned long long)st.clock_waits, st.clock_wait_s);
    if (ck_s >= 0)
      printf("checkpoint=%s iterations=%d seconds=%.3f removed=%d\n", a.ck.dir, it, ck_s,
             ck_removed);
    fflush(stdout);
  }
  if (status == 0 && a.top_words > 0 && print_topics(m, &c, a.lda.topics, a.top_words, talk) != 0)
    status = 1;
  if (status == 0 && a.check) {
    lda_check_t ck;
    if ((rc = lda_check(m, &ck)) != 0) {
      fprintf(stderr, PROG ": check: %s\n", au_strerror(rc));
      status = 1;
    } else {
      int ok = lda_check_ok(&ck, sh.tokens);
      if (talk)
        printf("check=%s negative=%llu row_sums=%llu totals=%llu recount=%llu docs=%llu "
               "tokens=%llu\n",
               ok ? "ok" : "FAILED", (unsigned long long)ck.negative,
               (unsigned long long)ck.row_sums, (unsigned long long)ck.totals,
               (unsigned long long)ck.recount, (unsigned long long)ck.docs,
               (unsigned long long)ck.tokens);
      if (!ok) status = 1;
    }
  }
  if (status == 0 && a.save) {
    if (lda_save(m, a.save, &c, err, sizeof(err)) != 0) {
      fprintf(stderr, PROG ": %s\n", err);
      status = 1;
    } else if (talk) {
      printf("saved=%s%s\n", a.save, nodes > 1 ? " (word_topic.txt.<rank> per node)" : "");
    }
  }
  if (a.trace && (rc = au_trace_stop(au_node_runtime(node))) != 0) {
    fprintf(stderr, PROG ": writing the trace %s: %s\n", a.trace, au_strerror(rc));
    status = 1;
  } else if (a.trace && talk) {
    printf("trace=%s%s\n", a.trace, nodes > 1 ? ".<rank>" : "");
  }
  fflush(stdout);
  au_node_destroy(node);
  lda_free(m);
  lda_corpus_free(&c);
  return cli_stdout_status(status);
}
