/* main.c — augur-kge: knowledge-graph embeddings (ComplEx, DistMult) on augur, on a
 * generated WN18-like graph or on triples files. Prints one key=value line per epoch.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <augur.h>

#include "cli.h"
#include "graph.h"
#include "kge.h"

#define PROG "augur-kge"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: " PROG " [FLAGS] [TRAIN_FILE --valid FILE --test FILE]\n"
          "\n"
          "Knowledge-graph embeddings on augur: ComplEx or DistMult, negative sampling,\n"
          "AdaGrad. Without TRAIN_FILE, trains on a generated WN18-like graph. Files hold\n"
          "'head<TAB>relation<TAB>tail' lines with names, as WN18 and FB15k ship. Prints one\n"
          "key=value line per epoch, with the filtered MRR on the validation triples:\n"
          "  epoch=3 loss=1.234 seconds=0.81 triples_per_s=1.7e5 local=0.98 ... valid_mrr=0.71\n"
          "and the filtered MRR and Hits@1/3/10 on the test triples at the end.\n"
          "\n"
          "model and training:\n"
          "  --model M         complex (default) or distmult\n"
          "  --rank K          complex numbers (ComplEx) or floats (DistMult) per embedding\n"
          "                    (default 100)\n"
          "  --epochs N        epochs (default 20)\n"
          "  --lr X            AdaGrad's learning rate (default 0.1)\n"
          "  --reg X           N3 regularization weight (default 0.01)\n"
          "  --init-sd X       initial values ~ N(0, X) (default 0.001)\n"
          "  --batch N         positive triples per step (default 512)\n"
          "  --negatives N     uniform negative entities per step, shared by its triples as\n"
          "                    heads and tails (default 256)\n"
          "  --lookahead N     batches drawn, negatives included, and announced as intents\n"
          "                    ahead (0..64, default 4)\n"
          "  --threads N       scheduler threads (default: online cores)\n"
          "  --workers N       worker actors (default: one per thread)\n"
          "  --seed N          seed for generation, initialization, order, negatives (default 1)\n"
          "  --mode M          parameter placement across nodes (docs/cluster.md): adaptive\n"
          "                    (default), classic, replicate, relocate or hot\n"
          "  --hot N           for --mode hot: this many parameter actors of each table are\n"
          "                    hot, by the intents (default 1%%)\n"
          "  --entity-table T  dense (default): entities are rows of a table of their indexes;\n"
          "                    ids: rows of an id table keyed by their names' 64-bit ids\n"
          "                    (docs/tables.md), placed by --mode as the dense one\n"
          "  --sync-ms N       replicas sync every N ms, their staleness bound (default 2)\n"
          "  --trace FILE      write a Chrome trace of the run (FILE.<rank> on a cluster)\n"
          "\n"
          "evaluation (filtered: other known triples do not count against a rank):\n"
          "  --eval-every N    evaluate on the validation triples every N epochs (default 1;\n"
          "                    0: never)\n"
          "  --eval-triples N  validation triples evaluated (default 1000; 0: all)\n"
          "  --test-triples N  test triples evaluated at the end (default 0: all)\n");
  cli_ckpt_usage(f, "epochs");
  fprintf(f, "  --resume DIR      go on from DIR's latest checkpoint (same data, model and rank;\n"
             "                    any node count): --epochs counts the epochs done there\n"
             "  --save DIR        write DIR/entities.tsv and DIR/relations.tsv after training:\n"
             "                    a name, then its values, tab separated\n"
             "\n"
             "data:\n"
             "  TRAIN_FILE        training triples\n"
             "  --valid FILE      validation triples (names unknown to TRAIN_FILE are skipped)\n"
             "  --test FILE       test triples (likewise)\n"
             "\n"
             "generated graph (without TRAIN_FILE; docs/kge.md):\n"
             "  --entities N      entities (default 40943, as WN18)\n"
             "  --pairs N         inverse relation pairs (default 7)\n"
             "  --symmetric N     symmetric relations (default 4)\n"
             "  --edges N         edges drawn per pair or symmetric relation (default 6900)\n"
             "  --clusters N      entity clusters the relations map between (default 400)\n"
             "  --valid-size N    held-out validation triples (default 5000)\n"
             "  --test-size N     held-out test triples (default 5000)\n"
             "\n"
             "  --help            this text\n"
             "\n"
             "Exit status: 0 done, 1 training failed, 2 bad flags or input.\n");
}

typedef struct args {
  kge_opts_t k;
  kg_gen_opts_t gen;
  int epochs, threads, sync_ms, eval_every;
  uint64_t eval_triples, test_triples;
  const char *train, *valid, *test, *save, *trace;
  cli_ckpt_t ck;
} args_t;

static int parse_args(int argc, char **argv, args_t *a)
{
  cli_set_prog(PROG);
  *a = (args_t){0};
  kge_opts_default(&a->k);
  kg_gen_opts_default(&a->gen);
  a->epochs = 20;
  a->eval_every = 1;
  a->eval_triples = 1000;
  cli_ckpt_default(&a->ck);
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
    } else if (!strcmp(f, "--model")) {
      const char *v = VALUE();
      if (kge_model_parse(v, &a->k.model) != 0) rc = cli_fail_flag(f, v, "complex or distmult");
    } else if (!strcmp(f, "--rank")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1024, &u))) a->k.rank = (uint32_t)u;
    } else if (!strcmp(f, "--epochs")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 100000, &u))) a->epochs = (int)u;
    } else if (!strcmp(f, "--lr")) {
      if (!(rc = cli_parse_double(f, VALUE(), 1e-9, 100, &d))) a->k.lr = (float)d;
    } else if (!strcmp(f, "--reg")) {
      if (!(rc = cli_parse_double(f, VALUE(), 0, 1e6, &d))) a->k.reg = (float)d;
    } else if (!strcmp(f, "--init-sd")) {
      /* (0 would make every row and gradient zero: nothing learns, every score ties) */
      if (!(rc = cli_parse_double(f, VALUE(), 1e-9, 100, &d))) a->k.init_sd = (float)d;
    } else if (!strcmp(f, "--batch")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1 << 20, &u))) a->k.batch = (uint32_t)u;
    } else if (!strcmp(f, "--negatives")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1 << 20, &u))) a->k.negatives = (uint32_t)u;
    } else if (!strcmp(f, "--lookahead")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 64, &u))) a->k.lookahead = (int)u;
    } else if (!strcmp(f, "--threads")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1024, &u))) a->threads = (int)u;
    } else if (!strcmp(f, "--workers")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 4096, &u))) a->k.workers = (int)u; /* a node's */
    } else if (!strcmp(f, "--seed")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, UINT64_MAX, &u))) a->k.seed = a->gen.seed = u;
    } else if (!strcmp(f, "--mode")) {
      const char *v = VALUE();
      if (au_place_parse(v, &a->k.place) != 0)
        rc = cli_fail_flag(f, v, "classic, replicate, relocate, hot or adaptive");
    } else if (!strcmp(f, "--entity-table")) {
      const char *v = VALUE();
      if (v && !strcmp(v, "ids"))
        a->k.id_entities = 1;
      else if (v && !strcmp(v, "dense"))
        a->k.id_entities = 0;
      else
        rc = cli_fail_flag(f, v, "dense or ids");
    } else if (!strcmp(f, "--hot")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, UINT64_MAX, &u))) a->k.hot = u;
    } else if (!strcmp(f, "--sync-ms")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, 1000, &u))) a->sync_ms = (int)u;
    } else if (!strcmp(f, "--trace")) {
      rc = cli_path(f, a->trace = VALUE());
    } else if (!strcmp(f, "--eval-every")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, 100000, &u))) a->eval_every = (int)u;
    } else if (!strcmp(f, "--eval-triples")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, UINT64_MAX, &u))) a->eval_triples = u;
    } else if (!strcmp(f, "--test-triples")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, UINT64_MAX, &u))) a->test_triples = u;
    } else if (cli_ckpt_is(f)) {
      rc = cli_ckpt_set(&a->ck, f, VALUE());
    } else if (!strcmp(f, "--save")) {
      rc = cli_path(f, a->save = VALUE());
    } else if (!strcmp(f, "--valid")) {
      rc = cli_path(f, a->valid = VALUE());
    } else if (!strcmp(f, "--test")) {
      rc = cli_path(f, a->test = VALUE());
    } else if (!strcmp(f, "--entities")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 2, KG_MAX_ENTITIES, &u))) a->gen.entities = (uint32_t)u;
    } else if (!strcmp(f, "--pairs")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, KG_MAX_RELATIONS / 2, &u)))
        a->gen.pairs = (uint32_t)u;
    } else if (!strcmp(f, "--symmetric")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, KG_MAX_RELATIONS, &u)))
        a->gen.symmetric = (uint32_t)u;
    } else if (!strcmp(f, "--edges")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, KG_MAX_ENTITIES, &u))) a->gen.edges = (uint32_t)u;
    } else if (!strcmp(f, "--clusters")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 1, KG_MAX_ENTITIES, &u))) a->gen.clusters = (uint32_t)u;
    } else if (!strcmp(f, "--valid-size")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, KG_MAX_ENTITIES, &u))) a->gen.valid = (uint32_t)u;
    } else if (!strcmp(f, "--test-size")) {
      if (!(rc = cli_parse_u64(f, VALUE(), 0, KG_MAX_ENTITIES, &u))) a->gen.test = (uint32_t)u;
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
    static const char *const gen_flags[] = {"--entities", "--pairs",      "--symmetric", "--edges",
                                            "--clusters", "--valid-size", "--test-size", NULL};
    if (cli_one_of(f, gen_flags)) gen_flag = f;
    if (!strcmp(f, "--hot")) hot_flag = 1;
  }
  if (gen_flag && a->train) { /* a flag that would do nothing is a mistake to say */
    fprintf(stderr, PROG ": %s shapes the generated graph; with a TRAIN_FILE it does nothing\n",
            gen_flag);
    return 2;
  }
  if (hot_flag && a->k.place != AU_PLACE_HOT) {
    fprintf(stderr, PROG ": --hot is for --mode hot (this run is --mode %s)\n",
            au_place_name(a->k.place));
    return 2;
  }
  if ((a->valid || a->test) && !a->train) {
    fprintf(stderr, PROG ": --valid and --test need a TRAIN_FILE (a generated graph holds its "
                         "own: --valid-size, --test-size)\n");
    return 2;
  }
  return -1;
}

static int load_graph(const args_t *a, kg_graph_t *g)
{
  char err[512];
  int rc;
  if (!a->train) {
    if ((rc = kg_generate(&a->gen, g, err, sizeof(err))) != 0) goto fail;
    return 0;
  }
  *g = (kg_graph_t){0};
  size_t skipped[2] = {0, 0};
  if ((rc = kg_load(a->train, g, &g->train, 1, NULL, err, sizeof(err))) != 0) goto fail;
  if (g->train.n == 0) {
    snprintf(err, sizeof(err), "%s: no triples", a->train);
    goto fail;
  }
  if (a->valid && (rc = kg_load(a->valid, g, &g->valid, 0, &skipped[0], err, sizeof(err))) != 0)
    goto fail;
  if (a->test && (rc = kg_load(a->test, g, &g->test, 0, &skipped[1], err, sizeof(err))) != 0)
    goto fail;
  for (int k = 0; k < 2; k++) { /* a file given to evaluate on must leave something to */
    const char *path = k ? a->test : a->valid;
    if (path && (k ? g->test.n : g->valid.n) == 0) {
      snprintf(err, sizeof(err), "%s: none of its %zu triples has only names the training file has",
               path, skipped[k]);
      goto fail;
    }
  }
  if (skipped[0] + skipped[1])
    fprintf(stderr,
            PROG ": skipped %zu validation and %zu test triples with names the training "
                 "file does not have\n",
            skipped[0], skipped[1]);
  return 0;
fail:
  fprintf(stderr, PROG ": %s\n", err);
  kg_graph_free(g);
  return rc == KG_ENOMEM ? 1 : 2;
}

/* --- checkpoints ---------------------------------------------------------------------
 * The two tables go through au_checkpoint (values and AdaGrad slots; incremental, a full
 * one every CKPT_FULL_EVERY); beside them rank 0 writes kge.meta, what the tables' rows
 * mean: the model, its rank, and the entity and relation names' ids in index order (a
 * checksum), so that a resume on other data or another model says so instead of
 * training on rows that belong to other names. */
#define CKPT_FULL_EVERY 10
#define META_FORMAT                                                                                \
  "augur-kge checkpoint model=%15s rank=%u entities=%u relations=%u names=%llx "                   \
  "entity_table=%7s train=%llx"

static uint64_t names_sum(const kg_graph_t *g)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  const kg_names_t *sets[2] = {&g->ent, &g->rel};
  for (int k = 0; k < 2; k++)
    for (uint32_t i = 0; i < sets[k]->n; i++) h = (h ^ sets[k]->id[i]) * 0x100000001b3ULL;
  return h ^ sets[1]->n;
}

/* The training triples, in order: a resume on other triples over the same names is
 * other data too. */
static uint64_t train_sum(const kg_graph_t *g)
{
  uint64_t h = 0xcbf29ce484222325ULL ^ g->train.n;
  for (size_t i = 0; i < g->train.n; i++) {
    const kg_triple_t *t = &g->train.v[i];
    h = (h ^ ((uint64_t)t->h << 32 | t->t)) * 0x100000001b3ULL;
    h = (h ^ t->r) * 0x100000001b3ULL;
  }
  return h;
}

static const char *entity_table(const args_t *a)
{
  return a->k.id_entities ? "ids" : "dense";
}

static int write_meta(const char *path, const args_t *a, const kg_graph_t *g)
{
  char tmp[4300];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  int ok = f && fprintf(f,
                        "augur-kge checkpoint model=%s rank=%u entities=%u relations=%u "
                        "names=%llx entity_table=%s train=%llx\n",
                        kge_model_name(a->k.model), a->k.rank, g->ent.n, g->rel.n,
                        (unsigned long long)names_sum(g), entity_table(a),
                        (unsigned long long)train_sum(g)) > 0;
  if (f) ok &= cli_close_synced(f) == 0;
  ok = ok && rename(tmp, path) == 0;
  if (!ok) remove(tmp);
  return ok ? 0 : -1;
}

/* Epochs done, into --checkpoint DIR's ckpt-EPOCHS: kge.meta (rank 0), then the tables.
 * Collective. 0, or an AU_E* code with a message in err. */
static int checkpoint(au_node_t *node, const args_t *a, const kg_graph_t *g, int epochs,
                      int *written, char *err, size_t errlen)
{
  char sub[4096], path[4200];
  snprintf(sub, sizeof(sub), "%s/ckpt-%d", a->ck.dir, epochs);
  snprintf(path, sizeof(path), "%s/kge.meta", sub);
  double bad = 0;
  if (au_node_rank(node) == 0) {
    mkdir(a->ck.dir, 0777), mkdir(sub, 0777);
    if (write_meta(path, a, g) != 0) {
      snprintf(err, errlen, "checkpoint: %s: %s", path, strerror(errno));
      bad = 1;
    }
  }
  /* no LATEST names a checkpoint without its meta */
  int rc = au_allreduce_sum(au_node_runtime(node), &bad, 1);
  if (rc) return rc;
  if (bad > 0) {
    if (au_node_rank(node) != 0)
      snprintf(err, errlen, "checkpoint: node 0 could not write %s", path);
    return AU_EIO;
  }
  const int full = (*written)++ % CKPT_FULL_EVERY == 0;
  return au_checkpoint(node, a->ck.dir, (uint64_t)epochs, full, err, errlen);
}

/* Reads the tables from dir's latest checkpoint after checking its kge.meta against this
 * run's data and model; *epochs gets the epochs done. Collective. 0, AU_EINVAL (another
 * model or data), AU_EIO, with a message in err. */
static int resume(au_node_t *node, const args_t *a, const kg_graph_t *g, const char *dir,
                  int *epochs, char *err, size_t errlen)
{
  char sub[4096], path[4200];
  int writers = 0, rc = 0;
  const int found = au_checkpoint_find(dir, sub, sizeof(sub), &writers);
  if (found == AU_EINVAL) {
    snprintf(err, errlen, "--resume: the directory's path is %zu bytes long, at most 4000",
             strlen(dir));
    rc = AU_EINVAL;
  } else if (found != 0) {
    snprintf(err, errlen, "--resume %s: no checkpoint there (no LATEST, not a ckpt-N)", dir);
    rc = AU_EINVAL;
  }
  char model[16] = "", kind[8] = "dense"; /* (a meta without entity_table=: dense) */
  unsigned rank = 0, ne = 0, nr = 0;
  unsigned long long sum = 0, tsum = train_sum(g); /* (a meta without train=: not checked) */
  if (!rc) {
    snprintf(path, sizeof(path), "%s/kge.meta", sub);
    FILE *f = fopen(path, "r");
    int got = f ? fscanf(f, META_FORMAT, model, &rank, &ne, &nr, &sum, kind, &tsum) : -1;
    if (f) fclose(f);
    if (!f) {
      snprintf(err, errlen, "--resume: %s: %s", path, strerror(errno));
      rc = AU_EIO;
    } else if (got < 5) {
      snprintf(err, errlen, "--resume: %s: not an augur-kge checkpoint's description", path);
      rc = AU_EINVAL;
    } else if (strcmp(model, kge_model_name(a->k.model)) || rank != a->k.rank) {
      snprintf(err, errlen,
               "--resume %s: written by --model %s --rank %u, this run is --model %s --rank %u",
               dir, model, rank, kge_model_name(a->k.model), a->k.rank);
      rc = AU_EINVAL;
    } else if (strcmp(kind, entity_table(a))) {
      snprintf(err, errlen,
               "--resume %s: written with --entity-table %s, this run is --entity-table %s", dir,
               kind, entity_table(a));
      rc = AU_EINVAL;
    } else if (ne != g->ent.n || nr != g->rel.n || sum != names_sum(g)) {
      snprintf(err, errlen,
               "--resume %s: written for other data (%u entities and %u relations, names "
               "%llx; here %u, %u, %llx)",
               dir, ne, nr, sum, g->ent.n, g->rel.n, (unsigned long long)names_sum(g));
      rc = AU_EINVAL;
    } else if (tsum != train_sum(g)) {
      snprintf(err, errlen,
               "--resume %s: written for other training triples over the same names (%zu "
               "triples here)",
               dir, g->train.n);
      rc = AU_EINVAL;
    }
  }
  /* every node decides alike before the collective restore */
  double bad = rc ? 1 : 0;
  int ar = au_allreduce_sum(au_node_runtime(node), &bad, 1);
  if (ar) return ar;
  if (bad > 0) {
    if (!rc) snprintf(err, errlen, "--resume %s: another node could not use the checkpoint", dir);
    return rc ? rc : AU_EINVAL;
  }
  uint64_t clock = 0;
  char rerr[512];
  if ((rc = au_restore(node, dir, &clock, rerr, sizeof(rerr))) != 0) {
    snprintf(err, errlen, "--resume: %s", rerr);
    return rc;
  }
  *epochs = (int)clock;
  return 0;
}

/* What the run writes is checked before it trains, not after (--save, --checkpoint and
 * --trace failed at the end before 2026-12-04): --save on rank 0, which writes it, the
 * others on every node. */
static int check_outputs(const args_t *a)
{
  au_cluster_opts_t co;
  char cerr[256];
  const int rank = au_cluster_opts_from_env(&co, cerr, sizeof(cerr)) == 1 ? co.rank : 0;
  return cli_check_outputs(rank == 0 ? a->save : NULL, a->ck.dir, a->trace);
}

int main(int argc, char **argv)
{
  args_t a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  if ((rc = check_outputs(&a)) != 0) return rc;
  if ((rc = cli_ckpt_check(&a.ck)) != 0) return rc;
  kg_graph_t g;
  const uint64_t t0 = au_now_ns();
  if ((rc = load_graph(&a, &g)) != 0) return rc;
  const double load_s = (double)(au_now_ns() - t0) / 1e9;
  au_node_t *node;
  if ((rc = au_node_create(&(au_node_opts_t){.threads = a.threads, .sync_ms = a.sync_ms}, &node)) !=
      0) {
    fprintf(stderr, PROG ": starting the node: %s\n", au_strerror(rc));
    kg_graph_free(&g);
    return 1;
  }
  if (a.trace && (rc = au_trace_start(au_node_runtime(node), a.trace)) != 0) {
    fprintf(stderr, PROG ": --trace %s: %s\n", a.trace, au_strerror(rc));
    au_node_destroy(node);
    kg_graph_free(&g);
    return 2;
  }
  const int talk = au_node_rank(node) == 0, nodes = au_node_nodes(node);
  const int threads = au_runtime_threads(au_node_runtime(node));
  if (talk) {
    printf("data=%s entities=%u relations=%u train=%zu valid=%zu test=%zu load_seconds=%.2f\n",
           a.train ? a.train : "generated", g.ent.n, g.rel.n, g.train.n, g.valid.n, g.test.n,
           load_s);
    fflush(stdout);
  }
  /* a node's share of both tables (values and AdaGrad's sums; an id table holds twice its
   * share of the entities), and, to evaluate or save, the whole model gathered on every
   * node (kge_gather: a double and a float a value): a --rank no machine holds is refused
   * now, not OOM-killed after allocating */
  const double values = ((double)g.ent.n + (double)g.rel.n) * kge_dim(a.k.model, a.k.rank);
  const int gathers = g.test.n || (a.eval_every && g.valid.n) || a.save;
  const double model_bytes = values * 2 * sizeof(float) * (a.k.id_entities ? 2 : 1) / nodes +
                             (gathers ? values * (sizeof(double) + sizeof(float)) : 0);
  char what[128];
  snprintf(what, sizeof(what),
           "the model (entities and relations times the dimension: a node's "
           "share%s)",
           gathers ? ", and the whole model to evaluate or save" : "");
  if ((rc = cli_check_memory(what, model_bytes)) != 0) {
    au_node_destroy(node);
    kg_graph_free(&g);
    return rc;
  }
  char err[8192]; /* room for a checkpoint's path */
  kge_t *m;
  if ((rc = kge_create(node, &a.k, &g, &m, err, sizeof(err))) != 0) {
    fprintf(stderr, PROG ": %s\n", err);
    au_node_destroy(node);
    kg_graph_free(&g);
    return rc == AU_EINVAL ? 2 : 1;
  }
  if (talk) {
    printf("model=%s rank=%u dim=%u nodes=%d threads=%d workers=%d mode=%s lr=%g reg=%g "
           "batch=%u negatives=%u lookahead=%d entity_table=%s memory_mb=%.1f\n",
           kge_model_name(a.k.model), a.k.rank, kge_dim(a.k.model, a.k.rank), nodes, threads,
           kge_workers(m), au_place_name(a.k.place), a.k.lr, a.k.reg, a.k.batch, a.k.negatives,
           a.k.lookahead, a.k.id_entities ? "ids" : "dense", (double)kge_memory(m) / 1e6);
    fflush(stdout);
  }
  int status = 0, e0 = 0, written = 0;
  const size_t nvalid = a.eval_triples ? a.eval_triples : g.valid.n;
  /* augur run --restarts sets AU_RESTART when it starts a job again: go on from the
   * checkpoint if there is one */
  const char *from = cli_ckpt_from(&a.ck);
  if (from) {
    if ((rc = resume(node, &a, &g, from, &e0, err, sizeof(err))) != 0) {
      fprintf(stderr, PROG ": %s\n", err);
      status = rc == AU_EINVAL ? 2 : 1;
    } else if (talk) {
      printf("resumed=%s epochs=%d\n", from, e0);
      fflush(stdout);
      if (e0 >= a.epochs)
        fprintf(stderr,
                PROG ": warning: the checkpoint has %d epochs and --epochs is %d: "
                     "nothing to train\n",
                e0, a.epochs);
    }
  }
  for (int e = e0; e < a.epochs && status == 0; e++) {
    kge_epoch_t st;
    const uint64_t e0 = au_now_ns();
    if ((rc = kge_epoch(m, e, &st)) != 0) {
      fprintf(stderr, PROG ": epoch %d: %s\n", e + 1, au_strerror(rc));
      status = 1;
      break;
    }
    au_trace_span(au_node_runtime(node), "epoch", (uint64_t)e + 1, e0);
    kge_eval_t ev = {0};
    const int eval =
        a.eval_every && g.valid.n && ((e + 1) % a.eval_every == 0 || e + 1 == a.epochs);
    if (eval && (rc = kge_evaluate(m, &g.valid, nvalid, threads, &ev)) != 0) {
      fprintf(stderr, PROG ": evaluating: %s\n", au_strerror(rc));
      status = 1;
      break;
    }
    double ck_s = -1;
    int ck_removed = 0;
    if (a.ck.dir && ((e + 1) % a.ck.every == 0 || e + 1 == a.epochs)) {
      const uint64_t c0 = au_now_ns();
      if ((rc = checkpoint(node, &a, &g, e + 1, &written, err, sizeof(err))) != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        status = 1;
        break;
      }
      /* old checkpoints, on every node (each host may have a DIR of its own): a failure
       * to remove them leaves them, and training goes on */
      if (au_checkpoint_prune(a.ck.dir, a.ck.keep, &ck_removed, err, sizeof(err)) != 0 && talk)
        fprintf(stderr, PROG ": warning: %s\n", err);
      ck_s = (double)(au_now_ns() - c0) / 1e9;
    }
    if (!talk) continue;
    printf(
        "epoch=%d triples=%llu loss=%.4f seconds=%.3f triples_per_s=%.4g local=%.3f intents=%llu "
        "moves=%llu replicas=%llu bytes_sent=%llu bytes_fetch=%llu bytes_push=%llu "
        "bytes_move=%llu bytes_replica=%llu bytes_control=%llu cpu_seconds=%.3f",
        e + 1, (unsigned long long)st.triples, st.loss, st.seconds, st.triples_per_s, st.local,
        (unsigned long long)st.intents, (unsigned long long)st.moves,
        (unsigned long long)st.replicas, (unsigned long long)st.bytes_sent,
        (unsigned long long)st.bytes_by[0], (unsigned long long)st.bytes_by[1],
        (unsigned long long)st.bytes_by[2], (unsigned long long)st.bytes_by[3],
        (unsigned long long)st.bytes_by[4], st.cpu_seconds);
    if (a.k.id_entities)
      printf(" entity_rows=%llu entity_evicted=%llu", (unsigned long long)st.entity_rows,
             (unsigned long long)st.entity_evicted);
    if (eval)
      printf(" valid_mrr=%.4f valid_hits10=%.4f eval_seconds=%.2f", ev.mrr, ev.hits10, ev.seconds);
    putchar('\n');
    if (st.entity_evicted)
      fprintf(stderr,
              PROG ": warning: %llu entity rows were evicted from the id table (they "
                   "start over from their initial values)\n",
              (unsigned long long)st.entity_evicted);
    if (ck_s >= 0)
      printf("checkpoint=%s epochs=%d seconds=%.3f removed=%d\n", a.ck.dir, e + 1, ck_s,
             ck_removed);
    fflush(stdout);
  }
  if (status == 0 && g.test.n) {
    kge_eval_t ev;
    const size_t ntest = a.test_triples ? a.test_triples : g.test.n;
    if ((rc = kge_evaluate(m, &g.test, ntest, threads, &ev)) != 0) {
      fprintf(stderr, PROG ": evaluating: %s\n", au_strerror(rc));
      status = 1;
    } else if (talk) {
      printf("test triples=%llu mrr=%.4f hits1=%.4f hits3=%.4f hits10=%.4f seconds=%.2f\n",
             (unsigned long long)(ev.ranks / 2), ev.mrr, ev.hits1, ev.hits3, ev.hits10, ev.seconds);
      fflush(stdout);
    }
  }
  if (status == 0 && a.save) {
    float *ent, *rel;
    if ((rc = kge_gather(m, &ent, &rel)) != 0) {
      fprintf(stderr, PROG ": gathering the model: %s\n", au_strerror(rc));
      status = 1;
    } else {
      const uint32_t dim = kge_dim(a.k.model, a.k.rank);
      if (talk && kge_save(&g, dim, ent, rel, a.save, err, sizeof(err)) != 0) {
        fprintf(stderr, PROG ": --save: %s\n", err);
        status = 1;
      } else if (talk) {
        printf("saved=%s entities=%u relations=%u\n", a.save, g.ent.n, g.rel.n);
      }
      free(ent), free(rel);
    }
  }
  if (a.trace && (rc = au_trace_stop(au_node_runtime(node))) != 0) {
    fprintf(stderr, PROG ": writing the trace %s: %s\n", a.trace, au_strerror(rc));
    status = 1;
  }
  status = cli_stdout_status(status);
  au_node_destroy(node);
  kge_free(m);
  kg_graph_free(&g);
  return status;
}
