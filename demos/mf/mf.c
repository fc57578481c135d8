/* mf.c — SGD matrix factorization on augur (see mf.h).
 *
 * The invariant: a row's factor is touched only by the one worker that owns the row,
 * so row factors need no synchronisation; column factors are touched by every worker
 * and change only through the table's kernel.
 */
#include "mf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sgd.h"

#define BLOCK_BYTES (256 * 1024) /* factor bytes per row or column block: fits in L2 */
#define PHASE_SUMS  10           /* what run_phase() sums over the cluster */

typedef struct shard {
  au_table_t *cols_table;
  uint32_t k, dim; /* dim = k + biases */
  int biases;
  float mean, lr, reg;
  int lookahead;
  uint32_t batch;
  /* ratings in walking order; .row is the shard's row index (see struct mf) */
  mf_ratings_t r, test;
  au_key_t *keys, *test_keys; /* the ratings' columns, as the table API takes keys */
  size_t pos;                 /* the evaluation's next test rating */
  int eval;                   /* this run evaluates the test ratings instead of training */
  /* blocks of the walking order: block b is r.r[bstart[b] .. bstart[b + 1]), its distinct
   * columns bkeys[boff[b] .. boff[b + 1]) */
  size_t nb, *bstart, *boff;
  au_key_t *bkeys;
  /* the epoch's walk over the blocks: first to last, or last to first when back (every
   * other epoch, so that an epoch starts in the block where the last one ended) */
  int back;
  size_t wi;        /* the walk's current block (walk index; blk() gives the block) */
  size_t at;        /* the next training rating, in block blk(wi) */
  size_t steps;     /* steps taken in this epoch */
  size_t said;      /* blocks announced so far in this epoch (walk indices 0..said-1) */
  size_t said_step; /* the step at which block `said` starts */
  /* row factors: nrows_local x dim */
  uint32_t nrows_local;
  float *p;
  /* this run */
  double sse;
  uint64_t done;
} shard_t;

/* Rows are dealt out twice: global row g lives on node g % nodes as node row
 * l = g / nodes, and there on shard (worker) l % shards as shard row l / shards. */
struct mf {
  au_node_t *node;
  int rank, nodes;
  mf_opts_t o;
  uint32_t nrows, ncols, dim;
  float mean;
  au_table_t *cols;
  int nshards;
  shard_t *shards;
};

void mf_opts_default(mf_opts_t *o)
{
  *o = (mf_opts_t){.rank = 16,
                   .lr = 0.02f,
                   .decay = 0.1f,
                   .reg = 0.02f,
                   .biases = 0,
                   .init_sd = 0.1f,
                   .workers = 0,
                   .batch = 512,
                   .lookahead = 1,
                   .place = AU_PLACE_ADAPTIVE,
                   .kernel = AU_KERNEL_HOGWILD,
                   .seed = 1};
}

/* Block number of the walk's i-th block in this epoch. */
static size_t blk(const shard_t *s, size_t i)
{
  return s->back ? s->nb - 1 - i : i;
}

/* Steps a block takes: batches end at the block's end. */
static size_t block_steps(const shard_t *s, size_t b)
{
  return (s->bstart[b + 1] - s->bstart[b] + s->batch - 1) / s->batch;
}

/* Announces the columns of each block of the walk once the worker is within `lookahead`
 * average block lengths of it, for the clocks of the steps that walk it: a whole block at
 * once, so the placement knows when this worker starts and stops using a column; it acts
 * when the start comes close enough. A re-run after AU_WAIT announces nothing new. */
static int announce_blocks(au_worker_t *w, shard_t *s)
{
  const size_t reach = s->steps + (size_t)s->lookahead * (s->r.n / s->batch + s->nb) / s->nb;
  const au_clock_t now = au_clock(w);
  while (s->said < s->nb && s->said_step <= reach) {
    size_t b = blk(s, s->said), first = s->said_step, end = first + block_steps(s, b);
    s->said++;
    s->said_step = end;
    if (end <= s->steps) continue; /* walked already */
    au_clock_t start = now + (au_clock_t)(first > s->steps ? first - s->steps : 0);
    int rc = au_intent(w, s->cols_table, &s->bkeys[s->boff[b]], s->boff[b + 1] - s->boff[b], start,
                       now + (au_clock_t)(end - s->steps));
    if (rc != 0) return rc;
  }
  return 0;
}

/* An evaluation step: predictions for a batch of test ratings, no updates. */
static int eval_step(au_worker_t *w, shard_t *s)
{
  if (s->pos >= s->test.n) {
    s->pos = 0;
    return AU_PAUSE;
  }
  size_t n = s->test.n - s->pos < s->batch ? s->test.n - s->pos : s->batch;
  const mf_rating_t *rs = &s->test.r[s->pos];
  au_view_t v;
  int rc = au_acquire(w, s->cols_table, &s->test_keys[s->pos], n, &v);
  if (rc == AU_EAGAIN) return AU_WAIT;
  if (rc != 0) return rc;
  double sse = 0;
  for (size_t i = 0; i < n; i++) {
    const float *p = &s->p[(size_t)rs[i].row * s->dim];
    double e = (double)rs[i].value - mf_predict(p, au_view_row(&v, i), s->k, s->biases, s->mean);
    sse += e * e;
  }
  au_release(w, &v);
  s->sse += sse;
  s->done += n;
  s->pos += n;
  return AU_CONTINUE;
}

static int step(au_worker_t *w, void *arg)
{
  shard_t *s = arg;
  if (s->eval) return eval_step(w, s);
  if (s->wi >= s->nb) { /* end of the epoch; the next au_node_run starts the next */
    s->back = !s->back;
    s->wi = s->steps = s->said = s->said_step = 0;
    s->at = s->nb ? s->bstart[blk(s, 0)] : 0;
    return AU_PAUSE;
  }
  const size_t b = blk(s, s->wi);
  size_t n = s->bstart[b + 1] - s->at < s->batch ? s->bstart[b + 1] - s->at : s->batch;
  const mf_rating_t *rs = &s->r.r[s->at];
  int rc = announce_blocks(w, s);
  if (rc != 0) return rc;

  au_view_t v;
  rc = au_acquire(w, s->cols_table, &s->keys[s->at], n, &v);
  if (rc == AU_EAGAIN) return AU_WAIT;
  if (rc != 0) return rc;
  /* locals, not s->...: stores through the float rows could alias float fields of *s,
   * which would make the compiler reload them after every store */
  const uint32_t k = s->k, dim = s->dim;
  const int biases = s->biases;
  const float mean = s->mean, lr = s->lr, reg = s->reg;
  float *const P = s->p;
  float dq[dim];
  double sse = 0;
  for (size_t i = 0; i < n; i++) {
    float *p = &P[(size_t)rs[i].row * dim];
    float err = mf_sgd(p, au_view_row(&v, i), dq, k, biases, mean, rs[i].value, lr, reg);
    au_view_update(&v, i, dq);
    sse += (double)err * err;
  }
  au_release(w, &v);
  s->sse += sse;
  s->done += n;
  s->steps++;
  if ((s->at += n) == s->bstart[b + 1] && ++s->wi < s->nb) s->at = s->bstart[blk(s, s->wi)];
  au_clock_advance(w);
  return AU_CONTINUE;
}

/* Row factors depend on (seed, global row) only, not on the node or worker count. */
static void init_rows(const mf_t *m, shard_t *s, int shard)
{
  const mf_opts_t *o = &m->o;
  for (uint32_t lr = 0; lr < s->nrows_local; lr++) {
    uint64_t node_row = (uint64_t)lr * (uint64_t)m->nshards + (uint64_t)shard;
    uint64_t row = node_row * (uint64_t)m->nodes + (uint64_t)m->rank;
    mf_rng_t rng;
    mf_rng_seed(&rng, (o->seed ^ 0x5bd1e995u) + row * 0xd1342543de82ef95ULL);
    float *p = &s->p[(size_t)lr * s->dim];
    for (uint32_t j = 0; j < s->k; j++) p[j] = (float)(o->init_sd * mf_rng_normal(&rng));
    if (s->biases) p[s->k] = 0;
  }
}

int mf_block_order(mf_ratings_t *r, uint32_t nrows, uint32_t ncols, uint32_t dim, int start, int of,
                   uint32_t align, size_t **starts, size_t *nstarts)
{
  size_t per_block = BLOCK_BYTES / ((size_t)dim * sizeof(float));
  if (per_block == 0) per_block = 1;
  size_t col_block = per_block;
  if (align > 0) {
    /* at least `of` column blocks of whole actors (rounded down, so there are no fewer),
     * each worker starting in one of its own; fewer when ncols < of x align */
    size_t most = of > 1 ? (size_t)ncols / (size_t)of : col_block;
    if (most < col_block) col_block = most;
    col_block = col_block / align * align;
    if (col_block < align) col_block = align;
  }
  size_t ncb = ((size_t)ncols + col_block - 1) / col_block;
  size_t nrb = ((size_t)nrows + per_block - 1) / per_block;
  if (ncb == 0) ncb = 1;
  if (nrb == 0) nrb = 1;
  size_t nb = ncb * nrb, off = of > 0 ? (size_t)start * ncb / (size_t)of : 0;
  size_t *first = calloc(nb + 1, sizeof(size_t));
  mf_rating_t *out = malloc((r->n ? r->n : 1) * sizeof(*out));
  if (!first || !out) {
    free(first), free(out);
    return MF_ENOMEM;
  }
#define BLOCK_OF(x) ((((x).col / col_block + ncb - off) % ncb) * nrb + (x).row / per_block)
  for (size_t i = 0; i < r->n; i++) first[BLOCK_OF(r->r[i]) + 1]++;
  for (size_t b = 0; b < nb; b++) first[b + 1] += first[b];
  if (starts) { /* the blocks that have ratings, and the end */
    size_t k = 0;
    if (!(*starts = malloc((nb + 1) * sizeof(size_t)))) {
      free(first), free(out);
      return MF_ENOMEM;
    }
    for (size_t b = 0; b < nb; b++)
      if (first[b + 1] > first[b]) (*starts)[k++] = first[b];
    (*starts)[k] = r->n;
    *nstarts = k;
  }
  for (size_t i = 0; i < r->n; i++) out[first[BLOCK_OF(r->r[i])]++] = r->r[i];
#undef BLOCK_OF
  free(first);
  free(r->r);
  r->r = out;
  r->cap = r->n ? r->n : 1;
  return 0;
}

/* The distinct columns of block b, written to out (when not NULL), counted; stamp marks
 * the columns seen in it (stamp[col] == pass, a value no other block of the pass uses). */
static size_t block_cols(const shard_t *s, size_t b, uint32_t pass, uint32_t *stamp, au_key_t *out)
{
  size_t k = 0;
  for (size_t i = s->bstart[b]; i < s->bstart[b + 1]; i++) {
    uint32_t col = s->r.r[i].col;
    if (stamp[col] == pass) continue;
    stamp[col] = pass;
    if (out) out[k] = col;
    k++;
  }
  return k;
}

/* The distinct columns of each block of the shard's walking order, for its intents: a
 * pass to count them, a pass to write them (blocks numbered 1.. and nb + 1.. in stamp). */
static int block_keys(shard_t *s, uint32_t ncols)
{
  uint32_t *stamp = calloc(ncols, sizeof(uint32_t));
  s->boff = malloc((s->nb + 1) * sizeof(size_t));
  size_t total = 0;
  for (size_t b = 0; stamp && s->boff && b < s->nb; b++)
    total += block_cols(s, b, (uint32_t)(b + 1), stamp, NULL);
  s->bkeys = malloc((total ? total : 1) * sizeof(au_key_t));
  if (!stamp || !s->boff || !s->bkeys) {
    free(stamp);
    return MF_ENOMEM;
  }
  size_t k = 0;
  for (size_t b = 0; b < s->nb; b++) {
    s->boff[b] = k;
    k += block_cols(s, b, (uint32_t)(s->nb + 1 + b), stamp, &s->bkeys[k]);
  }
  s->boff[s->nb] = k;
  free(stamp);
  return 0;
}

static void shard_free(shard_t *s)
{
  mf_ratings_free(&s->r);
  mf_ratings_free(&s->test);
  free(s->keys);
  free(s->test_keys);
  free(s->bstart);
  free(s->boff);
  free(s->bkeys);
  free(s->p);
}

/* Deals this node's ratings of `all` out to the shards (into `which`: train or test),
 * rows renumbered to shard rows. */
static int deal(mf_t *m, const mf_ratings_t *all, int test)
{
  uint32_t nodes = (uint32_t)m->nodes, shards = (uint32_t)m->nshards;
  size_t *count = calloc((size_t)shards, sizeof(size_t));
  if (!count) return AU_ENOMEM;
  for (size_t i = 0; i < all->n; i++)
    if (all->r[i].row % nodes == (uint32_t)m->rank) count[all->r[i].row / nodes % shards]++;
  int rc = 0;
  for (uint32_t w = 0; w < shards && rc == 0; w++) {
    shard_t *s = &m->shards[w];
    mf_ratings_t *r = test ? &s->test : &s->r;
    au_key_t **keys = test ? &s->test_keys : &s->keys;
    *keys = malloc((count[w] + 1) * sizeof(au_key_t));
    if (!*keys || mf_ratings_reserve(r, count[w] + 1) != 0) rc = AU_ENOMEM;
  }
  free(count);
  if (rc) return rc;
  for (size_t i = 0; i < all->n; i++) {
    const mf_rating_t *x = &all->r[i];
    if (x->row % nodes != (uint32_t)m->rank) continue;
    uint32_t l = x->row / nodes;
    shard_t *s = &m->shards[l % shards];
    mf_ratings_t *r = test ? &s->test : &s->r;
    r->r[r->n++] = (mf_rating_t){l / shards, x->col, x->value};
  }
  for (uint32_t w = 0; w < shards; w++) {
    shard_t *s = &m->shards[w];
    mf_ratings_t *r = test ? &s->test : &s->r;
    /* the node's workers start apart; with stagger every worker of the cluster starts in
     * a column block of its own, a free block between two (of = 2 x workers) */
    const int workers = m->nodes * m->nshards, me = m->rank * m->nshards + (int)w;
    const uint32_t group = au_table_group(m->cols);
    if (!test && m->o.stagger && w == 0 && m->rank == 0 && m->ncols / group < 2 * (uint32_t)workers)
      fprintf(stderr,
              "augur-mf: --stagger: %u columns make %u column blocks of whole parameter actors "
              "(%u columns each) for %d workers, fewer than 2 each: some workers share a "
              "block\n",
              m->ncols, (m->ncols + group - 1) / group, group, workers);
    int rc2 = 0;
    if (!test && m->o.stagger)
      rc2 = mf_block_order(r, s->nrows_local, m->ncols, m->dim, 2 * me, 2 * workers, group,
                           &s->bstart, &s->nb);
    else if (!test)
      rc2 = mf_block_order(r, s->nrows_local, m->ncols, m->dim, (int)w, m->nshards, 0, &s->bstart,
                           &s->nb);
    if (rc2 != 0 || (!test && block_keys(s, m->ncols) != 0)) return AU_ENOMEM;
    au_key_t *keys = test ? s->test_keys : s->keys;
    for (size_t i = 0; i < r->n; i++) keys[i] = r->r[i].col;
  }
  return 0;
}

int mf_create(au_node_t *node, const mf_opts_t *o, uint32_t nrows, uint32_t ncols,
              const mf_ratings_t *train, const mf_ratings_t *test, mf_t **out, char *err,
              size_t errlen)
{
  if (o->rank == 0 || o->batch == 0 || !(o->lr > 0) || o->reg < 0 || o->decay < 0 ||
      o->lookahead < 0 || ncols == 0 || nrows == 0) {
    snprintf(err, errlen, "invalid model options (rank, batch, lr > 0; reg, decay >= 0)");
    return AU_EINVAL;
  }
  mf_t *m = calloc(1, sizeof(*m));
  if (!m) return AU_ENOMEM;
  m->node = node;
  m->rank = au_node_rank(node);
  m->nodes = au_node_nodes(node);
  m->o = *o;
  m->nrows = nrows;
  m->ncols = ncols;
  m->dim = o->rank + (o->biases ? 1 : 0);
  uint32_t node_rows = (nrows - (uint32_t)m->rank + (uint32_t)m->nodes - 1) / (uint32_t)m->nodes;
  int nshards = o->workers > 0 ? o->workers : au_runtime_threads(au_node_runtime(node));
  if ((uint32_t)nshards > node_rows) nshards = node_rows ? (int)node_rows : 1;
  m->nshards = nshards;

  /* the global mean of the training ratings: each node sums its own rows */
  double sums[2] = {0, 0};
  for (size_t i = 0; i < train->n; i++)
    if (train->r[i].row % (uint32_t)m->nodes == (uint32_t)m->rank)
      sums[0] += train->r[i].value, sums[1] += 1;
  int rc = au_allreduce_sum(au_node_runtime(node), sums, 2);
  if (rc != 0) {
    snprintf(err, errlen, "summing the ratings over the cluster: %s", au_strerror(rc));
    free(m);
    return rc;
  }
  m->mean = sums[1] > 0 ? (float)(sums[0] / sums[1]) : 0.0f;

  rc = au_table_create(node, &m->cols,
                       &(au_table_opts_t){.keys = ncols,
                                          .dim = m->dim,
                                          .type = AU_F32,
                                          .init = AU_INIT_NORMAL,
                                          .init_a = 0,
                                          .init_b = o->init_sd,
                                          .seed = o->seed,
                                          .kernel = o->kernel,
                                          .place = o->place,
                                          .hot = o->hot,
                                          .name = "columns"});
  if (rc != 0) {
    snprintf(err, errlen, "creating the column table: %s", au_strerror(rc));
    free(m);
    return rc;
  }
  m->shards = calloc((size_t)nshards, sizeof(shard_t));
  if (!m->shards) goto nomem;
  for (int w = 0; w < nshards; w++) {
    shard_t *s = &m->shards[w];
    s->cols_table = m->cols;
    s->k = o->rank;
    s->dim = m->dim;
    s->biases = o->biases;
    s->mean = m->mean;
    s->reg = o->reg;
    s->lookahead = o->lookahead;
    s->batch = o->batch;
    s->nrows_local = (node_rows - (uint32_t)w + (uint32_t)nshards - 1) / (uint32_t)nshards;
    s->p = malloc(((size_t)s->nrows_local + 1) * m->dim * sizeof(float));
    if (!s->p) goto nomem;
    init_rows(m, s, w);
  }
  if (deal(m, train, 0) != 0 || (test && deal(m, test, 1) != 0)) goto nomem;
  for (int w = 0; w < nshards; w++) {
    rc = au_worker_spawn(node, NULL, &(au_worker_opts_t){step, &m->shards[w]});
    if (rc != 0) {
      snprintf(err, errlen, "spawning worker %d: %s", w, au_strerror(rc));
      mf_free(m);
      return rc;
    }
  }
  *out = m;
  return 0;

nomem:
  snprintf(err, errlen, "out of memory building the model");
  mf_free(m);
  return AU_ENOMEM;
}

/* CPU seconds this process has used, its threads together. */
static double cpu_seconds(void)
{
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* One collective run of every worker, training or evaluating; sums over the cluster
 * into v: sse, ratings, local rows, remote rows, intents, moves in, replicas held at the
 * end, bytes sent, claims released, CPU seconds. */
static int run_phase(mf_t *m, int eval, float lr, double v[PHASE_SUMS], double *seconds)
{
  for (int w = 0; w < m->nshards; w++) {
    m->shards[w].eval = eval;
    m->shards[w].lr = lr;
    m->shards[w].sse = 0;
    m->shards[w].done = 0;
  }
  au_node_stats_t before, after;
  au_node_stats(m->node, &before);
  uint64_t t0 = au_now_ns();
  double cpu0 = cpu_seconds();
  int rc = au_node_run(m->node);
  *seconds = (double)(au_now_ns() - t0) / 1e9;
  v[9] = cpu_seconds() - cpu0;
  if (rc != 0) return rc;
  au_node_stats(m->node, &after);
  v[0] = v[1] = 0;
  for (int w = 0; w < m->nshards; w++) {
    v[0] += m->shards[w].sse;
    v[1] += (double)m->shards[w].done;
  }
  v[2] = (double)(after.rows_local - before.rows_local);
  v[3] = (double)(after.rows_remote - before.rows_remote);
  v[4] = (double)(after.intents - before.intents);
  v[5] = (double)(after.moves_in - before.moves_in);
  v[6] = (double)after.replicas;
  v[7] = (double)(after.bytes_sent - before.bytes_sent);
  v[8] = (double)(after.releases - before.releases);
  return au_allreduce_sum(au_node_runtime(m->node), v, PHASE_SUMS);
}

int mf_evaluate(mf_t *m, double *rmse)
{
  double v[PHASE_SUMS], seconds;
  int rc = run_phase(m, 1, 0, v, &seconds);
  if (rc == 0) *rmse = v[1] > 0 ? sqrt(v[0] / v[1]) : NAN;
  return rc;
}

int mf_epoch(mf_t *m, int e, mf_epoch_t *out)
{
  double v[PHASE_SUMS];
  int rc = run_phase(m, 0, m->o.lr / (1.0f + m->o.decay * (float)e), v, &out->seconds);
  if (rc != 0) return rc;
  out->updates = (uint64_t)v[1];
  out->updates_per_s = out->seconds > 0 ? v[1] / out->seconds : 0;
  out->train_rmse = v[1] > 0 ? sqrt(v[0] / v[1]) : 0;
  out->local = v[2] + v[3] > 0 ? v[2] / (v[2] + v[3]) : 1.0;
  out->intents = (uint64_t)v[4];
  out->moves = (uint64_t)v[5];
  out->replicas = (uint64_t)v[6];
  out->bytes_sent = (uint64_t)v[7];
  out->releases = (uint64_t)v[8];
  out->cpu_seconds = v[9];
  return mf_evaluate(m, &out->test_rmse);
}

static void write_vec(FILE *f, const char *kind, uint64_t id, const float *v, uint32_t n)
{
  fprintf(f, "%s %llu", kind, (unsigned long long)id);
  for (uint32_t j = 0; j < n; j++) fprintf(f, " %.9g", v[j]);
  fputc('\n', f);
}

int mf_save(mf_t *m, const char *path, const mf_idmap_t *rows, const mf_idmap_t *cols, char *err,
            size_t errlen)
{
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return MF_EIO;
  }
  fprintf(f, "# augur-mf factors rank=%u biases=%d mean=%.9g rows=%u cols=%u node=%d/%d\n",
          m->o.rank, m->o.biases, m->mean, m->nrows, m->ncols, m->rank, m->nodes);
  fprintf(f, "# prediction = mean + row . col%s\n",
          m->o.biases ? " + row_bias + col_bias (the last value of each line)" : "");
  /* this node's rows, then the columns it holds */
  for (uint64_t g = (uint64_t)m->rank; g < m->nrows; g += (uint64_t)m->nodes) {
    uint64_t l = g / (uint64_t)m->nodes;
    const shard_t *s = &m->shards[l % (uint64_t)m->nshards];
    write_vec(f, "row", rows && g < rows->n ? rows->ids[g] : g,
              &s->p[(l / (uint64_t)m->nshards) * m->dim], m->dim);
  }
  float *q = malloc(m->dim * sizeof(float));
  for (uint32_t c = 0; q && c < m->ncols; c++) {
    au_key_t k = c;
    if (au_table_read(m->cols, &k, 1, q) == 0)
      write_vec(f, "col", cols && c < cols->n ? cols->ids[c] : c, q, m->dim);
  }
  free(q);
  if (ferror(f) | fclose(f)) {
    snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    return MF_EIO;
  }
  return 0;
}

void mf_free(mf_t *m)
{
  if (!m) return;
  if (m->shards)
    for (int w = 0; w < m->nshards; w++) shard_free(&m->shards[w]);
  free(m->shards);
  free(m);
}
