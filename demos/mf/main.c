/* main.c — augur-mf: matrix factorization (AdaGrad or SGD) on augur, on a generated
 * data set or a ratings file. Prints one key=value line per epoch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <augur.h>

#include "cli.h"
#include "data.h"
#include "mf.h"
#include "shard.h"
#include "use.h"

#define PROG "augur-mf"

static void usage(FILE *f)
{
  fprintf(f, "usage: " PROG " [FLAGS] [TRAIN_FILE]\n"
             "       " PROG " predict MODEL RATINGS     (see " PROG " predict --help)\n"
             "       " PROG " recommend MODEL --user ID (see " PROG " recommend --help)\n"
             "\n"
             "Matrix factorization on augur (AdaGrad or SGD). Without TRAIN_FILE, trains on a\n"
             "generated low-rank data set. Prints one key=value line per epoch:\n"
             "  epoch=3 train_rmse=0.9121 test_rmse=0.9514 seconds=1.23 updates_per_s=2.1e7 "
             "local=1.000 ...\n"
             "\n"
             "model and training:\n"
             "  --rank K          factor length (default 16)\n"
             "  --epochs N        epochs (default 10)\n"
             "  --optimizer O     adagrad (default: one accumulator per row, as LIBMF) or sgd\n"
             "  --lr X            learning rate of the first epoch (default 0.1; sgd 0.02)\n"
             "  --decay X         epoch e uses lr / (1 + decay * e) (default 0; sgd 0.1)\n"
             "  --reg X           L2 regularization (default 0.05; sgd 0.02)\n"
             "  --biases          add row and column biases\n"
             "  --init-sd X       initial factors ~ N(0, X) (default 0.1)\n"
             "  --exact           exact float adds (CAS) for column updates instead of Hogwild\n"
             "  --threads N       scheduler threads (default: online cores)\n"
             "  --workers N       worker actors (default: one per thread)\n"
             "  --batch N         most ratings per worker step (default 8192)\n"
             "  --lookahead N     intents name the columns of the column block a worker\n"
             "                    enters and of the next N of its walk (0..1024, default 1)\n"
             "  --stagger         stagger all workers of the cluster over the column blocks,\n"
             "                    so that a column is used by one node at a time (default on\n"
             "                    a cluster, but for classic with --optimizer sgd)\n"
             "  --no-stagger      every node walks the column blocks in its own order\n"
             "  --seed N          seed for generation, split, shuffle, initialization (default 1)\n"
             "  --mode M          parameter placement across nodes (docs/cluster.md):\n"
             "                    adaptive (default: by the intents, a column used by one node\n"
             "                    moves there, one used by several is replicated on each),\n"
             "                    classic (columns stay home; others fetch and push rows),\n"
             "                    replicate (every node keeps replicas of what it uses),\n"
             "                    relocate (columns move to the node that uses them),\n"
             "                    hot (the actors of the --hot most rated columns replicated,\n"
             "                    the rest placed as adaptive places them)\n"
             "  --hot N           for --mode hot: the N most rated columns are hot\n"
             "                    (default 1%% of the columns)\n"
             "  --sync-ms N       replicas sync every N ms, their staleness bound (default 2)\n"
             "  --consistency M   async (default), ssp:S or bsp: what a read may miss of the\n"
             "                    other workers' updates, in clocks of 512 ratings (docs/mf.md)\n"
             "  --trace FILE      write a Chrome trace of the run (FILE.<rank> on a cluster)\n"
             "\n"
             "data:\n"
             "  TRAIN_FILE        ratings to train on\n"
             "  --format F        auto csv udata dat triples mm (default auto)\n"
             "                    csv: MovieLens ratings.csv (header, userId,movieId,rating,...)\n"
             "                    udata: MovieLens u.data (tabs); dat: ratings.dat (::)\n"
             "                    triples: 'row col value', 0-based (LIBMF); mm: Matrix Market\n"
             "  --test FILE       held-out ratings (same format); unknown ids are skipped\n"
             "  --test-ratio R    hold out this share of the training ratings instead\n"
             "                    (default 0.1 when there is no --test; 0 = no test set)\n"
             "  --save DIR        write the model into DIR after training: one model on a\n"
             "                    cluster too, with the file's ids (docs/mf.md)\n");
  cli_ckpt_usage(f, "epochs");
  fprintf(f, "  --resume DIR      go on from DIR's latest checkpoint (same data and flags;\n"
             "                    any node count): --epochs counts the epochs done there\n"
             "\n"
             "generated data (without TRAIN_FILE):\n"
             "  --rows N          rows (default 20000)\n"
             "  --cols N          columns (default 5000)\n"
             "  --ratings N       ratings (default 5000000)\n"
             "  --true-rank K     rank of the truth (default 8)\n"
             "  --noise S         noise standard deviation sigma (default 0.1)\n"
             "  --skew A          power-law popularity exponent of rows and columns (default 0.8)\n"
             "\n"
             "  --help            this text\n"
             "\n"
             "Exit status: 0 done, 1 training failed, 2 bad flags or input.\n");
}

typedef struct args {
  mf_opts_t mf;
  int optim;                     /* -1: the default */
  float lr, decay, reg, init_sd; /* NAN: the optimizer's default */
  mf_gen_opts_t gen;
  int epochs, threads, sync_ms;
  au_consistency_t consistency;
  int staleness;
  const char *train, *test, *save, *trace;
  cli_ckpt_t ck;
  double test_ratio;
  int have_test_ratio;
  mf_format_t format;
} args_t;

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, args_t *a)
{
  cli_set_prog(PROG);
  *a = (args_t){0}; /* every field has a value, whatever the defaults below forget */
  mf_opts_default(&a->mf);
  mf_gen_opts_default(&a->gen);
  a->epochs = 10;
  cli_ckpt_default(&a->ck);
  a->optim = -1;
  a->lr = a->decay = a->reg = a->init_sd = NAN;
  a->test_ratio = 0.1;
  a->format = MF_FMT_AUTO;
  const char *gen_flag = NULL; /* a generator flag given */
  int hot_flag = 0;
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    uint64_t u;
    double d;
    int rc = 0;
#define VALUE() (i + 1 < argc ? argv[++i] : NULL)
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(f, "--biases")) {
      a->mf.biases = 1;
    } else if (!strcmp(f, "--exact")) {
      a->mf.kernel = AU_KERNEL_ADD;
    } else if (!strcmp(f, "--rank")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1024, &u))) a->mf.rank = (uint32_t)u;
    } else if (!strcmp(f, "--epochs")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 100000, &u))) a->epochs = (int)u;
    } else if (!strcmp(f, "--optimizer")) {
      const char *v = VALUE();
      if (v && !strcmp(v, "sgd"))
        a->optim = MF_SGD;
      else if (v && !strcmp(v, "adagrad"))
        a->optim = MF_ADAGRAD;
      else
        rc = cli_fail_flag(f, v, "sgd or adagrad");
    } else if (!strcmp(f, "--lr")) {
      if (!(rc = cli_parse_double(f, VALUE(), 1e-9, 10, &d))) a->lr = (float)d;
    } else if (!strcmp(f, "--decay")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 1e6, &d))) a->decay = (float)d;
    } else if (!strcmp(f, "--reg")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 1e6, &d))) a->reg = (float)d;
    } else if (!strcmp(f, "--init-sd")) {
      /* (0: every factor and gradient zero, nothing learns) */
      if (!(rc = cli_parse_double(f, VALUE(), 1e-9, 100, &d))) a->init_sd = (float)d;
    } else if (!strcmp(f, "--threads")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1024, &u))) a->threads = (int)u;
    } else if (!strcmp(f, "--sync-ms")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1000, &u))) a->sync_ms = (int)u;
    } else if (!strcmp(f, "--consistency")) {
      const char *v = VALUE();
      if (au_consistency_parse(v, &a->consistency, &a->staleness) != 0)
        rc = cli_fail_flag(f, v, "async, ssp:S (S = 0..1000000) or bsp");
      a->mf.bounded = a->consistency != AU_ASYNC;
    } else if (!strcmp(f, "--workers")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 4096, &u))) a->mf.workers = (int)u; /* a node's */
    } else if (!strcmp(f, "--batch")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1 << 24, &u))) a->mf.batch = (uint32_t)u;
    } else if (!strcmp(f, "--stagger")) {
      a->mf.stagger = 1;
    } else if (!strcmp(f, "--no-stagger")) {
      a->mf.stagger = 0;
    } else if (!strcmp(f, "--lookahead")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 1024, &u))) a->mf.lookahead = (int)u;
    } else if (!strcmp(f, "--seed")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, UINT64_MAX, &u))) a->mf.seed = a->gen.seed = u;
    } else if (!strcmp(f, "--mode")) {
      const char *v = VALUE();
      if (au_place_parse(v, &a->mf.place) != 0)
        rc = cli_fail_flag(f, v, "classic, replicate, relocate, hot or adaptive");
    } else if (!strcmp(f, "--hot")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, UINT64_MAX, &u))) a->mf.hot = u;
    } else if (!strcmp(f, "--trace")) {
      rc = cli_path(f, a->trace = VALUE());
    } else if (!strcmp(f, "--format")) {
      const char *v = VALUE();
      if (!v || mf_format_parse(v, &a->format) != 0)
        rc = cli_fail_flag(f, v, "one of auto csv udata dat triples mm");
    } else if (!strcmp(f, "--test")) {
      rc = cli_path(f, a->test = VALUE());
    } else if (!strcmp(f, "--test-ratio")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 0.9, &d)))
        a->test_ratio = d, a->have_test_ratio = 1;
    } else if (cli_ckpt_is(f)) {
      rc = cli_ckpt_set(&a->ck, f, VALUE());
    } else if (!strcmp(f, "--save")) {
      rc = cli_path(f, a->save = VALUE());
    } else if (!strcmp(f, "--rows")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, UINT32_MAX - 1, &u))) a->gen.rows = (uint32_t)u;
    } else if (!strcmp(f, "--cols")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, UINT32_MAX - 1, &u))) a->gen.cols = (uint32_t)u;
    } else if (!strcmp(f, "--ratings")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, (uint64_t)1 << 34, &u))) a->gen.nnz = (size_t)u;
    } else if (!strcmp(f, "--true-rank")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1024, &u))) a->gen.rank = (uint32_t)u;
    } else if (!strcmp(f, "--noise")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 1e6, &d))) a->gen.sigma = d;
    } else if (!strcmp(f, "--skew")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 10, &d))) a->gen.row_skew = a->gen.col_skew = d;
    } else if (f[0] == '-' && f[1]) {
      return cli_unknown_flag(f);
    } else if (!a->train) {
      a->train = f;
    } else {
      fprintf(stderr, PROG ": one TRAIN_FILE only, got '%s' and '%s'\n", a->train, f);
      return 2;
    }
#undef VALUE
    if (rc) return rc;
    static const char *const gen_flags[] = {"--rows",  "--cols", "--ratings", "--true-rank",
                                            "--noise", "--skew", NULL};
    if (cli_one_of(f, gen_flags)) gen_flag = f;
    if (!strcmp(f, "--hot")) hot_flag = 1;
  }
  if (gen_flag && a->train) { /* a flag that would do nothing is a mistake to say */
    fprintf(stderr, PROG ": %s shapes the generated data; with a file it does nothing\n", gen_flag);
    return 2;
  }
  if (hot_flag && a->mf.place != AU_PLACE_HOT) {
    fprintf(stderr, PROG ": --hot is for --mode hot (this run is --mode %s)\n",
            au_place_name(a->mf.place));
    return 2;
  }

  /* the optimizer's defaults, then what the flags set */
  if (a->optim >= 0) mf_opts_optimizer(&a->mf, (mf_optim_t)a->optim);
  if (!isnan(a->lr)) a->mf.lr = a->lr;
  if (!isnan(a->decay)) a->mf.decay = a->decay;
  if (!isnan(a->reg)) a->mf.reg = a->reg;
  if (!isnan(a->init_sd)) a->mf.init_sd = a->init_sd;
  if (a->mf.place == AU_PLACE_RELOCATE && a->consistency != AU_ASYNC) {
    fprintf(stderr, PROG ": --mode relocate needs --consistency async: under a bound parameter "
                         "actors do not move (replicate, hot and adaptive work)\n");
    return 2;
  }
  if (a->test && a->have_test_ratio) {
    fprintf(stderr, PROG ": --test and --test-ratio exclude each other\n");
    return 2;
  }
  if (a->format != MF_FMT_AUTO && !a->train) {
    fprintf(stderr, PROG ": --format needs a TRAIN_FILE (without one the data is generated)\n");
    return 2;
  }
  if (a->test && !a->train) {
    fprintf(stderr, PROG ": --test needs a TRAIN_FILE (generated data uses --test-ratio)\n");
    return 2;
  }
  return -1;
}

typedef struct dataset {
  mf_idmap_t rows, cols;
  mf_ratings_t train, test;
  uint32_t nrows, ncols;
  size_t test_skipped;
} dataset_t;

static void dataset_free(dataset_t *d)
{
  mf_ratings_free(&d->train);
  mf_ratings_free(&d->test);
  mf_idmap_free(&d->rows);
  mf_idmap_free(&d->cols);
}

/* Returns 0, or an exit status after printing why; on failure d holds nothing. */
static int load_data(args_t *a, dataset_t *d)
{
  char err[512];
  mf_ratings_t all = {0};
  int rc, status = 2;
  if (a->train) {
    rc = mf_load(a->train, a->format, &d->rows, &d->cols, 1, &all, NULL, err, sizeof(err));
    if (rc != 0) goto fail_msg;
    d->nrows = (uint32_t)d->rows.n;
    d->ncols = (uint32_t)d->cols.n;
  } else {
    if (mf_gen_opts_check(&a->gen, err, sizeof(err)) != 0) goto fail_msg;
    if ((rc = mf_generate(&a->gen, &all, &d->nrows, &d->ncols)) != 0 ||
        (rc = mf_idmap_init_identity(&d->rows, d->nrows)) != 0 ||
        (rc = mf_idmap_init_identity(&d->cols, d->ncols)) != 0) {
      snprintf(err, sizeof(err), "generating data: %s", mf_strerror(rc));
      status = 1;
      goto fail_msg;
    }
  }
  if (all.n == 0) {
    snprintf(err, sizeof(err), "%s: no ratings", a->train ? a->train : "generator");
    goto fail_msg;
  }
  if (a->test) {
    d->train = all;
    all = (mf_ratings_t){0};
    rc = mf_load(a->test, a->format, &d->rows, &d->cols, 0, &d->test, &d->test_skipped, err,
                 sizeof(err));
    if (rc != 0) goto fail_msg;
    if (d->test.n == 0) { /* nothing to evaluate: say so rather than print no test_rmse */
      snprintf(err, sizeof(err), "%s: no rating of a known row and column (%zu skipped)", a->test,
               d->test_skipped);
      rc = MF_EPARSE;
      goto fail_msg;
    }
  } else if ((rc = mf_split_inplace(&all, a->test_ratio, a->gen.seed, &d->test)) != 0) {
    snprintf(err, sizeof(err), "splitting: %s", mf_strerror(rc));
    status = 1;
    goto fail_msg;
  } else {
    d->train = all; /* what the split left */
    all = (mf_ratings_t){0};
  }
  /* SGD wants a random order; the model keeps it within its cache blocks */
  mf_shuffle(&d->train, a->mf.seed);
  return 0;

fail_msg:
  fprintf(stderr, PROG ": %s\n", err);
  mf_ratings_free(&all);
  dataset_free(d);
  return status;
}

int main(int argc, char **argv)
{
  if (argc > 1 && !strcmp(argv[1], "predict")) return mf_predict_main(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "recommend")) return mf_recommend_main(argc - 1, argv + 1);
  args_t a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  { /* what the run writes, before it trains: --save on rank 0 (which writes it) */
    au_cluster_opts_t co;
    char cerr[256];
    const int rank = au_cluster_opts_from_env(&co, cerr, sizeof(cerr)) == 1 ? co.rank : 0;
    if ((rc = cli_check_outputs(rank == 0 ? a.save : NULL, a.ck.dir, a.trace)) != 0) return rc;
    if ((rc = cli_ckpt_check(&a.ck)) != 0) return rc;
  }

  char err[512];
  mf_isa_t isa; /* a bad AUGUR_MF_ISA is bad input: say so before loading anything */
  if (mf_isa_from_env(&isa, err, sizeof(err)) != 0) {
    fprintf(stderr, PROG ": %s\n", err);
    return 2;
  }
  dataset_t d = {0};
  /* A training file on a cluster: each node reads its part (shard.h), so the node comes
   * first. Otherwise every node loads or generates the whole set and keeps its rows. */
  au_cluster_opts_t co;
  mf_format_t fmt = a.format == MF_FMT_AUTO && a.train ? mf_format_detect(a.train) : a.format;
  const int sharded = a.train && au_cluster_opts_from_env(&co, err, sizeof(err)) == 1;
  uint64_t t0 = au_now_ns();
  if (!sharded && (rc = load_data(&a, &d)) != 0) return rc;
  double load_s = (double)(au_now_ns() - t0) / 1e9;

  au_node_t *node;
  if ((rc = au_node_create(&(au_node_opts_t){.threads = a.threads,
                                             .sync_ms = a.sync_ms,
                                             .consistency = a.consistency,
                                             .staleness = a.staleness},
                           &node)) != 0) {
    fprintf(stderr, PROG ": starting the node: %s\n", au_strerror(rc));
    dataset_free(&d);
    return 1;
  }
  size_t train_total = d.train.n, test_total = d.test.n;
  if (sharded) {
    mf_shard_out_t so;
    const mf_shard_in_t si = {.train = a.train,
                              .test = a.test,
                              .format = fmt,
                              .test_ratio = a.test ? 0 : a.test_ratio,
                              .seed = a.gen.seed};
    if ((rc = mf_shard_load(node, &si, &so, err, sizeof(err))) != 0) {
      fprintf(stderr, PROG ": %s\n", err);
      au_node_destroy(node);
      return rc;
    }
    d = (dataset_t){.rows = so.rows,
                    .cols = so.cols,
                    .train = so.train,
                    .test = so.test,
                    .nrows = so.nrows,
                    .ncols = so.ncols,
                    .test_skipped = so.test_skipped};
    train_total = so.train_total, test_total = so.test_total;
    a.mf.sharded = 1;
    mf_shuffle(&d.train, a.mf.seed); /* SGD wants a random order */
    load_s = (double)(au_now_ns() - t0) / 1e9;
  }
  if (a.trace && (rc = au_trace_start(au_node_runtime(node), a.trace)) != 0) {
    fprintf(stderr, PROG ": --trace %s: %s\n", a.trace, au_strerror(rc));
    au_node_destroy(node);
    dataset_free(&d);
    return 2;
  }
  /* every node computes the same lines; rank 0 prints them */
  int talk = au_node_rank(node) == 0, nodes = au_node_nodes(node);
  if (talk) {
    printf("data=%s rows=%u cols=%u train=%zu test=%zu", a.train ? a.train : "generated", d.nrows,
           d.ncols, train_total, test_total);
    if (sharded) printf(" read=parts");
    if (d.test_skipped) printf(" test_skipped=%zu", d.test_skipped);
    printf(" load_seconds=%.2f\n", load_s);
    fflush(stdout);
  }
  /* a node's share of the factors (and AdaGrad's accumulators) at the least: a --rank
   * no machine holds is refused now, not OOM-killed after minutes of allocating */
  const double model_bytes = ((double)d.nrows + (double)d.ncols) * a.mf.rank * sizeof(float) *
                             (a.mf.optim == MF_ADAGRAD ? 2 : 1) / nodes;
  if ((rc = cli_check_memory("the model (rows and columns times --rank, a node's share)",
                             model_bytes)) != 0) {
    au_node_destroy(node);
    dataset_free(&d);
    return rc;
  }
  mf_t *m;
  const size_t ntest = d.test.n; /* mf_create takes the ratings */
  rc = mf_create(node, &a.mf, d.nrows, d.ncols, &d.train, &d.test, &m, err, sizeof(err));
  if (rc != 0) {
    fprintf(stderr, PROG ": %s\n", err);
    au_node_destroy(node);
    dataset_free(&d);
    return 1;
  }
  int threads = au_runtime_threads(au_node_runtime(node));
  if (talk) {
    mf_info_t info;
    mf_info(m, &info);
    char cname[24];
    printf("model rank=%u biases=%d nodes=%d threads=%d workers=%d kernel=%s mode=%s "
           "consistency=%s optimizer=%s lr=%g reg=%g decay=%g stagger=%d isa=%s blocks=%ux%u "
           "memory_mb=%.1f\n",
           a.mf.rank, a.mf.biases, nodes, threads, info.workers,
           a.mf.kernel == AU_KERNEL_ADD ? "exact" : "hogwild", au_place_name(a.mf.place),
           au_consistency_name(a.consistency, a.staleness, cname, sizeof(cname)),
           a.mf.optim == MF_ADAGRAD ? "adagrad" : "sgd", a.mf.lr, a.mf.reg, a.mf.decay,
           info.stagger, mf_isa_name(info.isa), info.grid->nrb, info.grid->ncb,
           (double)info.memory / 1e6);
    fflush(stdout);
  }

  int status = 0, e0 = 0;
  /* augur run --restarts sets AU_RESTART when it starts a job again: go on from the
   * checkpoint if there is one */
  const char *resume = cli_ckpt_from(&a.ck);
  if (resume) {
    double rmse = NAN;
    if ((rc = mf_resume(m, resume, &d.rows, &d.cols, &e0, err, sizeof(err))) != 0) {
      fprintf(stderr, PROG ": %s\n", err);
      status = rc == AU_EINVAL ? 2 : 1;
    } else if (ntest && (rc = mf_evaluate(m, &rmse)) != 0) { /* collective */
      fprintf(stderr, PROG ": evaluating the resumed model: %s\n", au_strerror(rc));
      status = 1;
    } else if (talk) {
      printf("resumed=%s epochs=%d", resume, e0);
      if (ntest) printf(" test_rmse=%.4f", rmse);
      putchar('\n');
      fflush(stdout);
    }
  }
  for (int e = e0; e < a.epochs && status == 0; e++) {
    mf_epoch_t st;
    const uint64_t t0 = au_now_ns();
    rc = mf_epoch(m, e, &st);
    au_trace_span(au_node_runtime(node), "epoch", (uint64_t)e + 1, t0); /* (when tracing) */
    if (rc != 0) {
      fprintf(stderr, PROG ": epoch %d: %s\n", e + 1, au_strerror(rc));
      status = 1;
      break;
    }
    if (!isfinite(st.train_rmse)) { /* (the cluster's sum: every node stops here alike) */
      if (talk)
        fprintf(stderr,
                PROG ": epoch %d: training diverged (train_rmse=%g): nothing checkpointed or "
                     "saved; try a smaller --lr, --reg or --init-sd\n",
                e + 1, st.train_rmse);
      status = 1;
      break;
    }
    double ck_s = -1;
    int ck_removed = 0;
    if (a.ck.dir && ((e + 1) % a.ck.every == 0 || e + 1 == a.epochs)) {
      uint64_t c0 = au_now_ns();
      if ((rc = mf_checkpoint(m, a.ck.dir, e + 1, &d.rows, &d.cols, err, sizeof(err))) != 0) {
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
    printf("epoch=%d train_rmse=%.4f", e + 1, st.train_rmse);
    if (ntest) printf(" test_rmse=%.4f", st.test_rmse);
    printf(" seconds=%.3f updates_per_s=%.3g local=%.3f intents=%llu moves=%llu replicas=%llu "
           "bytes_sent=%llu bytes_fetch=%llu bytes_push=%llu bytes_move=%llu "
           "bytes_replica=%llu bytes_control=%llu releases=%llu cpu_seconds=%.3f waits=%llu "
           "clock_waits=%llu clock_wait_s=%.3f\n",
           st.seconds, st.updates_per_s, st.local, (unsigned long long)st.intents,
           (unsigned long long)st.moves, (unsigned long long)st.replicas,
           (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_by[0],
           (unsigned long long)st.bytes_by[1], (unsigned long long)st.bytes_by[2],
           (unsigned long long)st.bytes_by[3], (unsigned long long)st.bytes_by[4],
           (unsigned long long)st.releases, st.cpu_seconds, (unsigned long long)st.waits,
           (unsigned long long)st.clock_waits, st.clock_wait_s);
    if (ck_s >= 0)
      printf("checkpoint=%s epochs=%d seconds=%.3f removed=%d\n", a.ck.dir, e + 1, ck_s,
             ck_removed);
    fflush(stdout);
  }
  if (status == 0 && a.save) {
    /* the whole model, gathered on every node; rank 0 writes it */
    mf_model_t md;
    if ((rc = mf_model_gather(m, &d.rows, &d.cols, &md)) != 0) {
      fprintf(stderr, PROG ": gathering the model: %s\n", au_strerror(rc));
      status = 1;
    } else {
      if (talk && mf_model_save(&md, a.save, err, sizeof(err)) != 0) {
        fprintf(stderr, PROG ": --save: %s\n", err);
        status = 1;
      } else if (talk) {
        printf("saved=%s rows=%u cols=%u\n", a.save, md.nrows, md.ncols);
      }
      mf_model_free(&md);
    }
  }
  if (a.trace && (rc = au_trace_stop(au_node_runtime(node))) != 0) {
    fprintf(stderr, PROG ": writing the trace %s: %s\n", a.trace, au_strerror(rc));
    status = 1;
  } else if (a.trace && talk) {
    printf("trace=%s%s\n", a.trace, nodes > 1 ? ".<rank>" : "");
  }
  au_node_destroy(node);
  mf_free(m);
  dataset_free(&d);
  return cli_stdout_status(status);
}
