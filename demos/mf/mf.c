/* mf.c — matrix factorization on augur, AdaGrad or SGD over blocks (see mf.h).
 *
 * The invariant: a block is walked by one worker at a time, and no two blocks held at once
 * share a row block or a column block (blocksched.h). So on a node no two workers touch
 * the same row factor (rows need no synchronisation) or the same column factor; across
 * nodes, column factors change only through the table.
 */
#include "mf.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blocksched.h"

#define QBLOCK_BYTES  (512 * 1024) /* column factors of a column block: about half an L2 */
#define MAX_AHEAD     1024         /* most column blocks announced ahead (--lookahead) */
#define CLOCK_RATINGS 512          /* ratings per tick of a worker's clock */
/* Most ratings per step when the view holds rows fetched from another node. With
 * --batch's 8192 a 3-node classic run (sgd, 1M ratings, 8 epochs, a loaded machine) ended
 * at 0.188-0.197 and once 0.295, against 0.187-0.190 on one node; with 2048, 0.190-0.192. */
#define REMOTE_BATCH 2048
/* A column block's span is announced as this many back-to-back intents. The placer
 * (intent.c) takes a node's gap between two uses of an actor, if shorter than ten uses,
 * as its rhythm and keeps the claim ten gaps past the intent's end; with the whole span
 * as one use, the gap between an epoch's visit and the next (walking backward) counts as
 * rhythm, claims outlive the visit by many column blocks, overlap the next node's, and
 * every column ends up replicated (--stagger on 4 nodes: 13 M bytes per epoch instead
 * of 4.5-10 M, no moves after epoch 2). */
#define INTENT_PARTS 4
#define PHASE_SUMS   18 /* what run_phase() sums over the cluster */

/* ThreadSanitizer builds leave the column rows to the table's own (atomic) update path,
 * as augur.h does for Hogwild tables. */
#if defined(__SANITIZE_THREAD__)
#define MF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MF_TSAN 1
#endif
#endif

typedef struct worker {
  struct mf *m;
  int id;
  mf_walk_t walk;
  uint32_t *cols; /* the walk's column blocks */
  /* training: the block being walked (-1: none), its next cell, its column block */
  long cur;
  size_t at;
  uint32_t cur_cb; /* the column block of the last block taken */
  size_t cb_ticks; /* clock ticks taken in it */
  int ahead_said;  /* the ones after it announced */
  uint32_t *cpos;  /* column block -> its place in cols */
  uint32_t *said;  /* column block -> the epoch (+ 1) in which it was announced */
  /* evaluation: the test blocks of the step (EVAL_GROUP at most) */
  size_t eblk[32];
  int en;
  /* this run */
  int eval;
  float lr;
  double sse;
  uint64_t done, waits;
  /* under a consistency bound: the run's first clock it has taken, the ticks of the
   * block being walked, added when it ends */
  int64_t based;
  size_t owed;
} worker_t;

/* Rows: global row g lives on node g % nodes as local row l = g / nodes, whose factor is
 * P row row_map[l] (a random place, see balance()); column c is table key col_key[c]. */
struct mf {
  au_node_t *node;
  int rank, nodes;
  mf_opts_t o;
  uint32_t nrows, ncols, dim, node_rows;
  float mean;
  mf_isa_t isa;
  int fused; /* column rows of this node may be updated in place (see qmode_of) */
  au_table_t *cols;
  uint32_t *row_map, *col_key;
  float *P;
  size_t pstride, qstride;
  mf_grid_t train, test;
  size_t *blen; /* ratings per training block, for the scheduler */
  /* column block cb: its distinct columns on this node ckeys[ckoff[cb] .. ckoff[cb + 1]),
   * the clock ticks its blocks take */
  au_key_t *ckeys;
  size_t *ckoff, *cticks;
  /* under a consistency bound: the most ticks any worker can take in a run (the ticks of
   * the largest node's blocks), and the clock this run starts from (runs so far times it) */
  int64_t run_ticks, clock_base;
  uint32_t epoch;  /* the epoch running, for said[] */
  int checkpoints; /* written by this process (mf_checkpoint) */
  mf_sched_t sched;
  int sched_ok;
  atomic_size_t eval_next; /* the next test block to hand out */
  int nworkers;
  worker_t *w;
};

void mf_opts_default(mf_opts_t *o)
{
  *o = (mf_opts_t){.rank = 16,
                   .biases = 0,
                   .workers = 0,
                   .batch = 8192,
                   .lookahead = 1,
                   .stagger = -1,
                   .place = AU_PLACE_ADAPTIVE,
                   .kernel = AU_KERNEL_HOGWILD,
                   .seed = 1};
  mf_opts_optimizer(o, MF_ADAGRAD);
}

void mf_opts_optimizer(mf_opts_t *o, mf_optim_t optim)
{
  o->optim = optim;
  o->init_sd = 0.1f;
  if (optim == MF_ADAGRAD) { /* it anneals by itself: no decay */
    o->lr = 0.1f, o->reg = 0.05f, o->decay = 0;
  } else {
    o->lr = 0.02f, o->reg = 0.02f, o->decay = 0.1f;
  }
}

static size_t block_len(const mf_grid_t *g, size_t b)
{
  return g->start[b + 1] - g->start[b];
}

static size_t ticks(size_t n)
{
  return (n + CLOCK_RATINGS - 1) / CLOCK_RATINGS;
}

/* Clock ticks the walk of block b takes: a tick per CLOCK_RATINGS ratings of each step. */
static size_t block_ticks(const mf_t *m, size_t b)
{
  size_t n = block_len(&m->train, b), t = 0;
  for (; n > m->o.batch; n -= m->o.batch) t += ticks(m->o.batch);
  return t + ticks(n);
}

/* The column block at place i of the worker's walk this epoch. */
static uint32_t walk_cb(const worker_t *w, uint32_t i)
{
  const uint32_t ncb = w->m->train.ncb;
  return w->walk.back ? w->cols[ncb - 1 - i] : w->cols[i];
}

/* Announces column blocks of the worker's walk, each once per epoch: from place i on, up
 * to n of them that have ratings here, one after another from clock `at`, each for the
 * clock ticks its blocks take. Returns 0 or AU_E*. */
static int announce(au_worker_t *aw, worker_t *w, uint32_t i, uint32_t n, au_clock_t at)
{
  const mf_t *m = w->m;
  const uint32_t ncb = m->train.ncb, stamp = m->epoch + 1;
  for (uint32_t k = 0; i < ncb && k < n; i++) {
    const uint32_t c = walk_cb(w, i);
    if (m->cticks[c] == 0) continue; /* no ratings on this node */
    const au_clock_t end = at + (au_clock_t)m->cticks[c];
    if (w->said[c] != stamp) {
      w->said[c] = stamp;
      for (int p = 0; p < INTENT_PARTS; p++) {
        const au_clock_t s0 = at + (end - at) * p / INTENT_PARTS;
        const au_clock_t s1 = at + (end - at) * (p + 1) / INTENT_PARTS;
        if (s1 <= s0) continue;
        int rc = au_worker_intent(aw, m->cols, &m->ckeys[m->ckoff[c]],
                                  m->ckoff[c + 1] - m->ckoff[c], s0, s1);
        if (rc != 0) return rc;
      }
    }
    at = end;
    k++;
  }
  return 0;
}

/* Intents at column-block granularity: a worker walks a column block's row blocks before
 * it moves on (blocksched.h), so the span in which it walks a column block is the span in
 * which its node uses the block's columns, what the placement acts on (cluster.md). When
 * it enters a column block it announces that block (if not announced yet); half-way
 * through, the next --lookahead ones of its walk, for the clocks after the ticks left. A
 * lead of half a column block: enough for a move to land, short enough that the nodes
 * (which drift apart within an epoch) do not look as if they used a block at once. */
static int announce_ahead(au_worker_t *aw, worker_t *w)
{
  const mf_t *m = w->m;
  const uint32_t ncb = m->train.ncb, cb = w->cur_cb;
  const uint32_t i = w->walk.back ? ncb - 1 - w->cpos[cb] : w->cpos[cb];
  if (w->ahead_said || 2 * w->cb_ticks < m->cticks[cb]) return 0;
  w->ahead_said = 1;
  const size_t left = m->cticks[cb] > w->cb_ticks ? m->cticks[cb] - w->cb_ticks : 0;
  return announce(aw, w, i + 1, (uint32_t)m->o.lookahead, au_worker_clock(aw) + (au_clock_t)left);
}

/* How a step updates its view's column rows. Through au_view_update (the table's
 * optimizer) in general; but when every row of the view is on this node (owned or a
 * replica: au_view_local) and the table is Hogwild, the loop applies the same optimizer
 * to the rows in place, accumulator at [dim], in the pass that computes the gradient:
 * what au_view_update would do, without a second pass over the row. au_view_release still
 * marks the rows for the replicas. */
static mf_qmode_t qmode_of(const mf_t *m, const au_view_t *v)
{
  return m->fused && au_view_local(v) ? MF_Q_INPLACE : MF_Q_GRAD;
}

static mf_kargs_t kargs(const mf_t *m, const mf_grid_t *g, size_t b, const au_view_t *v, float lr)
{
  const uint32_t rb = (uint32_t)(b % g->nrb);
  return (mf_kargs_t){.P = m->P + (size_t)rb * g->rb_rows * m->pstride,
                      .pstride = m->pstride,
                      .Q = v->rows,
                      .v = v,
                      .k = m->o.rank,
                      .biases = m->o.biases,
                      .mean = m->mean,
                      .lr = lr,
                      .reg = m->o.reg,
                      .optim = m->o.optim,
                      .qmode = qmode_of(m, v)};
}

/* An evaluation step: predictions for a group of test blocks (up to EVAL_GROUP, or until
 * they hold EVAL_CELLS ratings; the workers take them in turns from one counter), no
 * updates. The group's views are all acquired before the step waits, so that the rows of
 * the whole group come from the other nodes in one round trip, not one per block: on 4
 * nodes at 200 us an evaluation took longer than the epoch when each block was a step of
 * its own. */
#define EVAL_GROUP ((int)(sizeof(((worker_t *)0)->eblk) / sizeof(size_t)))
#define EVAL_CELLS (1u << 16) /* ratings in a group, about */
static int eval_step(au_worker_t *aw, worker_t *w)
{
  mf_t *m = w->m;
  const mf_grid_t *g = &m->test;
  if (w->en == 0) { /* a new group (a re-run after AU_WAIT goes on with the one it has) */
    for (size_t cells = 0; w->en < EVAL_GROUP && cells < EVAL_CELLS;) {
      const size_t b = atomic_fetch_add_explicit(&m->eval_next, 1, memory_order_relaxed);
      if (b >= mf_grid_blocks(g)) break;
      if (block_len(g, b) == 0) continue;
      w->eblk[w->en++] = b;
      cells += block_len(g, b);
    }
    if (w->en == 0) return AU_PAUSE;
  }
  au_view_t v[EVAL_GROUP];
  uint8_t held[EVAL_GROUP];
  int rc = 0, wait = 0;
  for (int i = 0; i < w->en; i++) {
    const size_t b = w->eblk[i];
    const int r = au_view_acquire(aw, m->cols, (const au_key_t *)&g->keys[g->koff[b]],
                                  g->koff[b + 1] - g->koff[b], &v[i]);
    held[i] = r == 0;
    if (r == AU_EAGAIN)
      wait = 1;
    else if (r != 0 && !rc)
      rc = r;
  }
  for (int i = 0; i < w->en && (rc || wait); i++)
    if (held[i]) au_view_release(aw, &v[i]);
  if (rc) return rc;
  if (wait) return AU_WAIT; /* re-run when every row has come: the fetched ones stay */
  for (int i = 0; i < w->en; i++) {
    const size_t b = w->eblk[i], n = block_len(g, b);
    const mf_kargs_t a = kargs(m, g, b, &v[i], 0);
    w->sse += mf_kernel_eval(m->isa, &a, g->cells + g->start[b], n);
    au_view_release(aw, &v[i]);
    w->done += n;
  }
  w->en = 0;
  return AU_CONTINUE;
}

static int step(au_worker_t *aw, void *arg)
{
  worker_t *w = arg;
  mf_t *m = w->m;
  if (m->o.bounded && w->based != m->clock_base) {
    /* every worker starts the run at the same clock: one with less work in the last run
     * would otherwise hold the others back under the bound for good */
    au_worker_advance_to(aw, m->clock_base);
    w->based = m->clock_base;
  }
  if (w->eval) return eval_step(aw, w);
  const mf_grid_t *g = &m->train;
  int rc;
  if (w->cur < 0) {
    /* under a bound, wait before taking a block, not with one: the block's rows and
     * columns would be held from the workers this one waits for */
    if (m->o.bounded && au_worker_sync(aw) == AU_EAGAIN) return AU_WAIT;
    long b = mf_sched_take(&m->sched, &w->walk);
    if (b == MF_SCHED_DONE) return AU_PAUSE; /* the next au_node_run starts the next epoch */
    if (b == MF_SCHED_BUSY) {
      w->waits++; /* every unwalked block's range is held by another worker: its turn */
      return AU_CONTINUE;
    }
    w->cur = b;
    w->at = g->start[b];
    const uint32_t cb = (uint32_t)((size_t)b / g->nrb);
    if (cb != w->cur_cb) { /* entered a column block */
      w->cur_cb = cb;
      w->cb_ticks = 0;
      w->ahead_said = 0;
      const uint32_t i = w->walk.back ? g->ncb - 1 - w->cpos[cb] : w->cpos[cb];
      if ((rc = announce(aw, w, i, 1, au_worker_clock(aw))) != 0) return rc;
    }
  }
  if ((rc = announce_ahead(aw, w)) != 0) return rc;

  const size_t b = (size_t)w->cur, end = g->start[b + 1];
  au_view_t v;
  rc = au_view_acquire(aw, m->cols, (const au_key_t *)&g->keys[g->koff[b]],
                       g->koff[b + 1] - g->koff[b], &v);
  if (rc == AU_EAGAIN) return AU_WAIT;
  if (rc != 0) return rc;
  const mf_kargs_t a = kargs(m, g, b, &v, w->lr);
  /* rows fetched from another node are copies the other nodes do not see until the
   * gradients reach the owner: the step is short then, so the copies stay fresh */
  const size_t most = !au_view_local(&v) && m->o.batch > REMOTE_BATCH ? REMOTE_BATCH : m->o.batch;
  const size_t n = end - w->at < most ? end - w->at : most;
  w->sse += mf_kernel_run(m->isa, &a, g->cells + w->at, n);
  au_view_release(aw, &v);
  w->done += n;
  w->cb_ticks += ticks(n);
  /* the clock counts work, not steps: blocks differ in size, and the placement turns
   * intent windows into time by the clock's rate. Under a bound it moves when the block
   * is done, so that the block's steps all read at the clock the wait was for */
  size_t tick = ticks(n);
  if (m->o.bounded) w->owed += tick, tick = 0;
  if ((w->at += n) == end) {
    mf_sched_put(&m->sched, w->id, (uint32_t)b);
    w->cur = -1;
    tick += w->owed;
    w->owed = 0;
  }
  for (; tick > 0; tick--) au_worker_advance(aw);
  return AU_CONTINUE;
}

/* Row factors depend on (seed, global row) only, not on the node or worker count. */
static void init_rows(mf_t *m)
{
  const mf_opts_t *o = &m->o;
  for (uint32_t l = 0; l < m->node_rows; l++) {
    uint64_t row = (uint64_t)l * (uint64_t)m->nodes + (uint64_t)m->rank;
    mf_rng_t rng;
    mf_rng_seed(&rng, (o->seed ^ 0x5bd1e995u) + row * 0xd1342543de82ef95ULL);
    float *p = &m->P[(size_t)m->row_map[l] * m->pstride];
    memset(p, 0, m->pstride * sizeof(float));
    for (uint32_t j = 0; j < o->rank; j++) p[j] = (float)(o->init_sd * mf_rng_normal(&rng));
    if (o->optim == MF_ADAGRAD) p[m->dim] = 1.0f; /* the accumulator's first value */
  }
}

/* The grid's shape: column blocks of whole parameter actors whose factors fill about
 * QBLOCK_BYTES, but enough of them that every worker finds a free one (and, with
 * --stagger, two per worker of the cluster); twice as many row blocks. */
static void plan(const mf_t *m, uint32_t group, uint32_t *rb_rows, uint32_t *cb_cols)
{
  const uint32_t W = (uint32_t)m->nworkers;
  uint32_t min_c = 2 * W + 1; /* a free one for every worker, with one to spare */
  if (m->o.stagger && 2 * W * (uint32_t)m->nodes > min_c) min_c = 2 * W * (uint32_t)m->nodes;
  size_t cb = QBLOCK_BYTES / (m->qstride * sizeof(float));
  if (cb > m->ncols / min_c) cb = m->ncols / min_c;
  if (cb > MF_GRID_MAX_SPAN) cb = MF_GRID_MAX_SPAN;
  cb = cb / group * group;
  if (cb < group) cb = group;
  const uint32_t ncb = (uint32_t)((m->ncols + cb - 1) / cb);
  uint32_t nrb = 2 * ncb > min_c ? 2 * ncb : min_c;
  size_t rb = (m->node_rows + nrb - 1) / nrb;
  if (rb > MF_GRID_MAX_SPAN) rb = MF_GRID_MAX_SPAN;
  *rb_rows = rb ? (uint32_t)rb : 1;
  *cb_cols = (uint32_t)cb;
}

/* The walking orders: worker w of `of` (the node's, or with --stagger the cluster's)
 * starts at column block w * ncb / of and walks them in order, wrapping; its rows from
 * row block id * nrb / workers. */
static int init_walks(mf_t *m)
{
  const uint32_t ncb = m->train.ncb, nrb = m->train.nrb;
  const int of = m->o.stagger ? m->nodes * m->nworkers : m->nworkers;
  for (int i = 0; i < m->nworkers; i++) {
    worker_t *w = &m->w[i];
    const int me = m->o.stagger ? m->rank * m->nworkers + i : i;
    w->cols = malloc(ncb * sizeof(uint32_t));
    w->cpos = malloc(ncb * sizeof(uint32_t));
    w->said = calloc(ncb, sizeof(uint32_t));
    if (!w->cols || !w->cpos || !w->said) return AU_ENOMEM;
    const uint32_t c0 = (uint32_t)((uint64_t)me * ncb / (uint64_t)of);
    for (uint32_t c = 0; c < ncb; c++) w->cols[c] = (c0 + c) % ncb, w->cpos[(c0 + c) % ncb] = c;
    w->cur_cb = UINT32_MAX;
    w->walk = (mf_walk_t){.cols = w->cols,
                          .row0 = (uint32_t)((uint64_t)i * nrb / (uint64_t)m->nworkers),
                          .back = 0,
                          .worker = i};
  }
  return 0;
}

/* Per column block: the distinct columns of its blocks (for intents) and their clock ticks. */
static int column_keys(mf_t *m)
{
  const mf_grid_t *g = &m->train;
  m->ckoff = calloc((size_t)g->ncb + 1, sizeof(size_t));
  m->cticks = calloc(g->ncb, sizeof(size_t));
  m->ckeys = malloc((g->nkeys ? g->nkeys : 1) * sizeof(au_key_t));
  uint8_t *seen = calloc(g->cb_cols, 1);
  if (!m->ckoff || !m->cticks || !m->ckeys || !seen) {
    free(seen);
    return AU_ENOMEM;
  }
  size_t n = 0;
  for (uint32_t cb = 0; cb < g->ncb; cb++) {
    const uint64_t c0 = (uint64_t)cb * g->cb_cols;
    m->ckoff[cb] = n;
    for (uint32_t rb = 0; rb < g->nrb; rb++) {
      const size_t b = (size_t)cb * g->nrb + rb;
      m->cticks[cb] += block_ticks(m, b);
      for (size_t i = g->koff[b]; i < g->koff[b + 1]; i++) seen[g->keys[i] - c0] = 1;
    }
    for (uint32_t off = 0; off < g->cb_cols; off++)
      if (seen[off]) m->ckeys[n++] = c0 + off, seen[off] = 0;
  }
  m->ckoff[g->ncb] = n;
  free(seen);
  return 0;
}

/* Under a bound: the most clock ticks a worker can take in one run, over the cluster
 * (collective): all of the largest node's blocks. */
static int run_ticks(mf_t *m)
{
  double *v = calloc((size_t)m->nodes, sizeof(double));
  if (!v) return AU_ENOMEM;
  for (uint32_t cb = 0; cb < m->train.ncb; cb++) v[m->rank] += (double)m->cticks[cb];
  int rc = au_allreduce_sum(au_node_runtime(m->node), v, (size_t)m->nodes);
  m->run_ticks = 1;
  for (int k = 0; rc == 0 && k < m->nodes; k++)
    if (v[k] + 1 > (double)m->run_ticks) m->run_ticks = (int64_t)v[k] + 1;
  free(v);
  return rc;
}

/* Where rows and columns go in the grid. Columns: balanced by their ratings over all
 * nodes (every node computes the same keys), so that no column block holds the few most
 * rated columns together (zipf 1.1: the top one alone has 14% of the ratings). Rows: a
 * random permutation of this node's. Balancing the rows too would pair the most rated rows
 * with the most rated columns block by block (both greedy orders hand out the top ones
 * first), and training converged more slowly: 1 thread, 20 epochs, test RMSE 0.408 on
 * the realistic shape (0.383 with random rows), 0.171 against 0.152 after 4 sgd epochs on
 * the default one. A row block may hold a heavy row or two more than another; with a
 * column block of its own per worker that costs little. */
typedef struct col_count {
  uint32_t n, col;
} col_count_t;

static int more_rated(const void *a, const void *b)
{
  const col_count_t *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? 1 : -1;
  return x->col < y->col ? -1 : x->col > y->col;
}

/* --mode hot: the hot columns are the most rated ones (--hot of them, default 1%), which
 * the table is told, so that it does not have to guess from the intents: those name a
 * block's columns once per block, every column alike. Every node has all the ratings and
 * names the same columns. */
static int name_hot(mf_t *m, const uint32_t *cc, uint32_t cb_cols)
{
  uint64_t want = m->o.hot ? m->o.hot : (m->ncols + 99) / 100;
  if (want > m->ncols) want = m->ncols;
  col_count_t *c = malloc(m->ncols * sizeof(*c));
  au_key_t *keys = malloc(want * sizeof(*keys));
  const uint32_t ncb = (m->ncols + cb_cols - 1) / cb_cols;
  uint32_t *at = malloc(m->ncols * sizeof(uint32_t)), *first = calloc(ncb, sizeof(uint32_t));
  int rc = AU_ENOMEM;
  if (c && keys && at && first) {
    for (uint32_t j = 0; j < m->ncols; j++) c[j] = (col_count_t){cc[j], j};
    qsort(c, m->ncols, sizeof(*c), more_rated);
    /* the hot columns to the first places of their column blocks, where they share
     * parameter actors (a table replicates whole actors): 50 columns of the default
     * data set made 39 of its 157 actors hot when they lay where the balance put them,
     * and 9 now (each swaps places with the column there, in the same block) */
    for (uint32_t j = 0; j < m->ncols; j++) at[m->col_key[j]] = j; /* place -> column */
    for (uint64_t i = 0; i < want; i++) {
      const uint32_t col = c[i].col, p = m->col_key[col], cb = p / cb_cols;
      const uint32_t q = cb * cb_cols + first[cb]++, other = at[q];
      if (q < p) { /* (q > p cannot be: the block's first places hold hot columns) */
        m->col_key[col] = q, m->col_key[other] = p;
        at[q] = col, at[p] = other;
      }
      keys[i] = m->col_key[col];
    }
    rc = au_table_hot(m->cols, keys, want);
  }
  free(c);
  free(keys);
  free(at);
  free(first);
  return rc;
}

/* cc summed over the cluster (in doubles, through the allreduce). 0 or AU_*. */
static int sum_counts(mf_t *m, uint32_t *cc)
{
  double *v = malloc((m->ncols ? m->ncols : 1) * sizeof(double));
  if (!v) return AU_ENOMEM;
  for (uint32_t j = 0; j < m->ncols; j++) v[j] = cc[j];
  int rc = au_allreduce_sum(au_node_runtime(m->node), v, m->ncols);
  for (uint32_t j = 0; rc == 0 && j < m->ncols; j++)
    cc[j] = v[j] < UINT32_MAX ? (uint32_t)v[j] : UINT32_MAX;
  free(v);
  return rc;
}

static int balance(mf_t *m, const mf_ratings_t *train, uint32_t cb_cols)
{
  uint32_t *cc = calloc(m->ncols, sizeof(uint32_t));
  m->col_key = malloc(m->ncols * sizeof(uint32_t));
  m->row_map = malloc((m->node_rows ? m->node_rows : 1) * sizeof(uint32_t));
  int ret = AU_ENOMEM;
  if (cc && m->col_key && m->row_map) {
    for (size_t i = 0; i < train->n; i++)
      if (cc[train->r[i].col] < UINT32_MAX) cc[train->r[i].col]++;
    ret = m->o.sharded ? sum_counts(m, cc) : 0; /* + the other nodes' ratings of each column */
    if (ret == 0)
      ret = mf_grid_balance(cc, m->ncols, cb_cols, m->o.seed ^ 0xc01u, m->col_key) ? AU_ENOMEM : 0;
    if (ret == 0 && m->o.place == AU_PLACE_HOT) ret = name_hot(m, cc, cb_cols);
    mf_rng_t rng;
    mf_rng_seed(&rng, m->o.seed ^ (0x40fu + (uint64_t)m->rank));
    for (uint32_t l = 0; l < m->node_rows; l++) m->row_map[l] = l;
    for (uint32_t j = m->node_rows; j > 1; j--) {
      const uint32_t r = (uint32_t)(mf_rng_next(&rng) % j), t = m->row_map[j - 1];
      m->row_map[j - 1] = m->row_map[r], m->row_map[r] = t;
    }
  }
  free(cc);
  return ret;
}

/* The row layout for rows of `width` floats (values and accumulator), the table's and
 * P's alike: padded to 16, 32 or 64 bytes and aligned to it, whichever touches the fewest
 * cache lines at worst, and of those the smallest (rank 40 + 1: 192 bytes on 64, 3 lines
 * instead of up to 4; rank 16 + 1: 80 bytes on 16, 2 lines as 128 on 64 would be). */
static size_t row_floats(uint32_t width, uint32_t *align)
{
  size_t best_bytes = 0, best_lines = SIZE_MAX;
  for (uint32_t a = 16; a <= 64; a *= 2) {
    const size_t bytes = ((size_t)width * sizeof(float) + a - 1) / a * a;
    size_t lines = 0; /* the most lines a row starting at a multiple of a spans */
    for (size_t off = 0; off < 64; off += a)
      if ((off + bytes + 63) / 64 > lines) lines = (off + bytes + 63) / 64;
    if (lines < best_lines || (lines == best_lines && bytes < best_bytes))
      best_lines = lines, best_bytes = bytes, *align = a;
  }
  return best_bytes / sizeof(float);
}

int mf_create(au_node_t *node, const mf_opts_t *o, uint32_t nrows, uint32_t ncols,
              mf_ratings_t *train, mf_ratings_t *test, mf_t **out, char *err, size_t errlen)
{
  mf_ratings_t none = {0};
  if (!test) test = &none;
  int rc = AU_EINVAL;
  if (o->rank == 0 || o->batch == 0 || !(o->lr > 0) || o->reg < 0 || o->decay < 0 ||
      o->lookahead < 0 || o->lookahead > MAX_AHEAD || ncols == 0 || nrows == 0) {
    snprintf(err, errlen,
             "invalid model options (rank, batch, lr > 0; reg, decay >= 0; lookahead 0..%d)",
             MAX_AHEAD);
    goto fail_data;
  }
  mf_t *m = calloc(1, sizeof(*m));
  if (!m) {
    rc = AU_ENOMEM;
    goto fail_data;
  }
  m->node = node;
  m->rank = au_node_rank(node);
  m->nodes = au_node_nodes(node);
  m->o = *o;
  /* Auto: staggered on a cluster, but for classic with plain SGD (mf.h) */
  if (m->o.stagger < 0)
    m->o.stagger = m->nodes > 1 && !(o->place == AU_PLACE_CLASSIC && o->optim == MF_SGD);
  m->nrows = nrows;
  m->ncols = ncols;
  m->dim = o->rank + (o->biases ? 1 : 0);
  m->node_rows = (nrows - (uint32_t)m->rank + (uint32_t)m->nodes - 1) / (uint32_t)m->nodes;
  if ((uint32_t)m->rank >= nrows) m->node_rows = 0;
  int nw = o->workers > 0 ? o->workers : au_runtime_threads(au_node_runtime(node));
  m->nworkers = nw;
  if ((rc = mf_isa_from_env(&m->isa, err, errlen)) != 0) {
    rc = AU_EINVAL;
    free(m);
    goto fail_data;
  }
#ifndef MF_TSAN
  m->fused = o->kernel == AU_KERNEL_HOGWILD;
#endif

  uint32_t align;
  m->pstride = m->qstride = row_floats(m->dim + (o->optim == MF_ADAGRAD ? 1 : 0), &align);
  /* the global mean of the training ratings: each node sums its own rows */
  double sums[2] = {0, 0};
  for (size_t i = 0; i < train->n; i++)
    if (train->r[i].row % (uint32_t)m->nodes == (uint32_t)m->rank)
      sums[0] += train->r[i].value, sums[1] += 1;
  rc = au_allreduce_sum(au_node_runtime(node), sums, 2);
  if (rc != 0) {
    snprintf(err, errlen, "summing the ratings over the cluster: %s", au_strerror(rc));
    free(m);
    goto fail_data;
  }
  m->mean = sums[1] > 0 ? (float)(sums[0] / sums[1]) : 0.0f;

  rc = au_table_create(
      node,
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
                         .optim = o->optim == MF_ADAGRAD ? AU_OPTIM_ADAGRAD_ROW : AU_OPTIM_SGD,
                         .lr = o->lr,
                         .row_align = align,
                         .name = "columns"},
      &m->cols);
  if (rc != 0) {
    snprintf(err, errlen, "creating the column table: %s", au_strerror(rc));
    free(m);
    goto fail_data;
  }
  /* the column rows as the table lays them out (values, accumulator, padding) */
  m->qstride = au_table_row_bytes(m->cols) / sizeof(float);
  uint32_t rb_rows, cb_cols;
  plan(m, au_table_group(m->cols), &rb_rows, &cb_cols);
  if (!(m->w = calloc((size_t)nw, sizeof(worker_t)))) goto nomem;
  if (balance(m, train, cb_cols) != 0) goto nomem;
  mf_grid_opts_t go = {.nodes = (uint32_t)m->nodes,
                       .rank = (uint32_t)m->rank,
                       .nrows = m->node_rows,
                       .ncols = ncols,
                       .rb_rows = rb_rows,
                       .cb_cols = cb_cols,
                       .row_map = m->row_map,
                       .col_map = m->col_key,
                       .consume = 1};
  if (mf_grid_build(&m->train, &go, train) != 0 || mf_grid_build(&m->test, &go, test) != 0)
    goto nomem;
  /* the row factors only now, when the ratings' first copy is gone: the peak is lower */
  const size_t prows = (size_t)m->node_rows + 1;
  /* rows start on multiples of their padding (m->pstride floats), like the table's */
  m->P = aligned_alloc(64, (prows * m->pstride * sizeof(float) + 63) / 64 * 64);
  if (!m->P) goto nomem;
  init_rows(m);
  const size_t nb = mf_grid_blocks(&m->train);
  if (!(m->blen = malloc(nb * sizeof(size_t)))) goto nomem;
  for (size_t b = 0; b < nb; b++) m->blen[b] = block_len(&m->train, b);
  if (mf_sched_init(&m->sched, m->train.nrb, m->train.ncb, m->blen, nw) != 0) goto nomem;
  m->sched_ok = 1;
  if (column_keys(m) != 0) goto nomem;
  if (init_walks(m) != 0) goto nomem;
  if (o->bounded && (rc = run_ticks(m)) != 0) {
    snprintf(err, errlen, "the clocks of a run over the cluster: %s", au_strerror(rc));
    mf_free(m);
    return rc;
  }
  for (int i = 0; i < nw; i++) {
    worker_t *w = &m->w[i];
    w->m = m;
    w->id = i;
    w->cur = -1;
    rc = au_worker_spawn(node, &(au_worker_opts_t){step, w}, NULL);
    if (rc != 0) {
      snprintf(err, errlen, "spawning worker %d: %s", i, au_strerror(rc));
      mf_free(m);
      return rc;
    }
  }
  *out = m;
  return 0;

nomem:
  snprintf(err, errlen, "out of memory building the model");
  mf_free(m);
  rc = AU_ENOMEM;
fail_data:
  mf_ratings_free(train);
  mf_ratings_free(test);
  return rc;
}

void mf_info(const mf_t *m, mf_info_t *out)
{
  *out = (mf_info_t){.grid = &m->train,
                     .isa = m->isa,
                     .pstride = m->pstride,
                     .qstride = m->qstride,
                     .mean = m->mean,
                     .workers = m->nworkers,
                     .stagger = m->o.stagger,
                     .memory = mf_grid_memory(&m->train) + mf_grid_memory(&m->test) +
                               ((size_t)m->node_rows + 1) * m->pstride * sizeof(float) +
                               au_table_memory(m->cols)};
}

/* CPU seconds this process has used, its threads together. */
static double cpu_seconds(void)
{
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* One collective run of every worker, training (epoch e) or evaluating; sums over the
 * cluster into v: sse, ratings, local rows, remote rows, intents, moves in, replicas held
 * at the end, bytes sent, claims released, CPU seconds, waits, bytes sent by purpose
 * (au_node_stats_t's five). */
static int run_phase(mf_t *m, int eval, int e, float lr, double v[PHASE_SUMS], double *seconds)
{
  if (eval) {
    atomic_store_explicit(&m->eval_next, 0, memory_order_relaxed); /* before the run starts */
  } else {
    mf_sched_epoch(&m->sched);
    m->epoch = (uint32_t)e;
  }
  for (int i = 0; i < m->nworkers; i++) {
    worker_t *w = &m->w[i];
    w->eval = eval;
    w->lr = lr;
    w->sse = 0;
    w->done = w->waits = 0;
    /* every other epoch walks backward, from the block where the last one ended */
    if (!eval) w->walk.back = e % 2, w->cur_cb = UINT32_MAX;
  }
  if (m->o.bounded) m->clock_base += m->run_ticks; /* every node runs as often */
  au_node_stats_t before, after;
  au_node_stats(m->node, &before);
  uint64_t t0 = au_now_ns();
  double cpu0 = cpu_seconds();
  int rc = au_node_run(m->node);
  *seconds = (double)(au_now_ns() - t0) / 1e9;
  v[9] = cpu_seconds() - cpu0;
  if (rc != 0) return rc;
  au_node_stats(m->node, &after);
  v[0] = v[1] = v[10] = 0;
  for (int i = 0; i < m->nworkers; i++) {
    v[0] += m->w[i].sse;
    v[1] += (double)m->w[i].done;
    v[10] += (double)m->w[i].waits;
  }
  v[2] = (double)(after.rows_local - before.rows_local);
  v[3] = (double)(after.rows_remote - before.rows_remote);
  v[4] = (double)(after.intents - before.intents);
  v[5] = (double)(after.moves_in - before.moves_in);
  v[6] = (double)after.replicas;
  v[7] = (double)(after.bytes_sent - before.bytes_sent);
  v[8] = (double)(after.releases - before.releases);
  v[11] = (double)(after.bytes_fetch - before.bytes_fetch);
  v[12] = (double)(after.bytes_push - before.bytes_push);
  v[13] = (double)(after.bytes_move - before.bytes_move);
  v[14] = (double)(after.bytes_replica - before.bytes_replica);
  v[15] = (double)(after.bytes_control - before.bytes_control);
  v[16] = (double)(after.reads_waited - before.reads_waited);
  v[17] = (double)(after.wait_ns - before.wait_ns) / 1e9;
  return au_allreduce_sum(au_node_runtime(m->node), v, PHASE_SUMS);
}

int mf_evaluate(mf_t *m, double *rmse)
{
  double v[PHASE_SUMS], seconds;
  int rc = run_phase(m, 1, 0, 0, v, &seconds);
  if (rc == 0) *rmse = v[1] > 0 ? sqrt(v[0] / v[1]) : NAN;
  return rc;
}

int mf_epoch(mf_t *m, int e, mf_epoch_t *out)
{
  double v[PHASE_SUMS];
  const float lr = m->o.lr / (1.0f + m->o.decay * (float)e);
  int rc = au_table_set_lr(m->cols, lr); /* the columns' optimizer, as the rows' */
  if (rc == 0) rc = run_phase(m, 0, e, lr, v, &out->seconds);
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
  out->waits = (uint64_t)v[10];
  for (int i = 0; i < 5; i++) out->bytes_by[i] = (uint64_t)v[11 + i];
  out->clock_waits = (uint64_t)v[16];
  out->clock_wait_s = v[17];
  return mf_evaluate(m, &out->test_rmse);
}

int mf_model_gather(mf_t *m, const mf_idmap_t *rows, const mf_idmap_t *cols, mf_model_t *out)
{
  /* the vector: row factors, column factors, then per row (named, id high, id low 32
   * bits): a node that read its part of a file knows only its own rows' ids */
  const size_t dim = m->dim, np = (size_t)m->nrows * dim, nq = (size_t)m->ncols * dim;
  const size_t n = np + nq + 3 * (size_t)m->nrows;
  double *v = calloc(n ? n : 1, sizeof(double)), *ids = v ? v + np + nq : NULL;
  float *q = malloc(au_table_dim(m->cols) * sizeof(float));
  int rc = v && q ? 0 : AU_ENOMEM; /* (the others then wait in the allreduce) */
  /* each value from its node: this node's rows, the columns whose actors it owns */
  for (uint64_t g = (uint64_t)m->rank; !rc && g < m->nrows; g += (uint64_t)m->nodes) {
    const float *p = &m->P[(size_t)m->row_map[g / (uint64_t)m->nodes] * m->pstride];
    for (size_t j = 0; j < dim; j++) v[g * dim + j] = p[j];
    const uint64_t id = rows && g < rows->n ? rows->ids[g] : g;
    ids[3 * g] = id != MF_NO_ID; /* padding of a file read in parts: left out */
    ids[3 * g + 1] = (double)(id >> 32), ids[3 * g + 2] = (double)(id & 0xffffffffu);
  }
  for (uint32_t c = 0; !rc && c < m->ncols; c++) {
    au_key_t k = m->col_key[c];
    if (au_table_owns(m->cols, k) != 1) continue;
    if ((rc = au_table_read(m->cols, &k, 1, q)) != 0) break;
    for (size_t j = 0; j < dim; j++) v[np + c * dim + j] = q[j];
  }
  if (!rc) rc = au_allreduce_sum(au_node_runtime(m->node), v, n);
  uint32_t kept = 0;
  for (uint32_t g = 0; !rc && g < m->nrows; g++) kept += ids[3 * (size_t)g] > 0;
  *out = (mf_model_t){
      .rank = m->o.rank, .nrows = kept, .ncols = m->ncols, .biases = m->o.biases, .mean = m->mean};
  if (!rc && mf_model_alloc(out) != 0) rc = AU_ENOMEM;
  const uint32_t k = m->o.rank;
  for (uint32_t g = 0, r = 0; !rc && g < m->nrows; g++) {
    const double *id = &ids[3 * (size_t)g];
    if (id[0] <= 0) continue;
    out->row_ids[r] = (uint64_t)id[1] << 32 | (uint64_t)id[2];
    for (uint32_t j = 0; j < k; j++) out->P[(size_t)r * k + j] = (float)v[(size_t)g * dim + j];
    if (out->biases) out->row_bias[r] = (float)v[(size_t)g * dim + k];
    r++;
  }
  for (uint32_t c = 0; !rc && c < m->ncols; c++) {
    out->col_ids[c] = cols && c < cols->n ? cols->ids[c] : c;
    for (uint32_t j = 0; j < k; j++) out->Q[(size_t)c * k + j] = (float)v[np + (size_t)c * dim + j];
    if (out->biases) out->col_bias[c] = (float)v[np + (size_t)c * dim + k];
  }
  free(v);
  free(q);
  if (rc) mf_model_free(out);
  return rc;
}

/* ---- checkpoints ------------------------------------------------------------------------ */

#define ROWS_MAGIC      "AUGURMF1"
#define CKPT_FULL_EVERY 10

/* The floats of a row factor that training state holds: values, AdaGrad's accumulator. */
static uint32_t row_state(const mf_t *m)
{
  return m->dim + (m->o.optim == MF_ADAGRAD ? 1 : 0);
}

static uint64_t row_id(const mf_idmap_t *rows, uint64_t g)
{
  return rows && g < rows->n ? rows->ids[g] : g;
}

/* What the rows of a checkpoint mean beyond their width, after colmap.bin's keys: the
 * factor length, biases, optimizer and the columns' count, then the columns' file ids in
 * the writer's column order (u64 each). A resume maps the writer's columns to its own by
 * those ids (one node numbers a file's columns as they first appear, a cluster sorts
 * them), and refuses --rank 17 over --rank 16 --biases (the same width) or a file whose
 * columns are others, rather than train on rows that mean something else. */
typedef struct shape {
  uint32_t magic, rank, biases, optim;
  uint64_t ncols;
} shape_t;
#define SHAPE_MAGIC 0x5348504du /* "MPHS" */

static shape_t shape_of(const mf_t *m)
{
  return (shape_t){SHAPE_MAGIC, m->o.rank, (uint32_t)m->o.biases, (uint32_t)m->o.optim, m->ncols};
}

/* Column c's file id (generated data: its index). */
static uint64_t col_id(const mf_idmap_t *cols, uint32_t c)
{
  return cols && c < cols->n ? cols->ids[c] : c;
}

int mf_checkpoint(mf_t *m, const char *dir, int epochs, const mf_idmap_t *rows,
                  const mf_idmap_t *cols, char *err, size_t errlen)
{
  /* this node's rows (by file id) into the checkpoint's directory, then the column table
   * with au_checkpoint, whose manifest and LATEST come last */
  char sub[4096], path[4200], tmp[4300];
  snprintf(sub, sizeof(sub), "%s/ckpt-%d", dir, epochs);
  snprintf(path, sizeof(path), "%s/rows-%d.bin", sub, m->rank);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  mkdir(dir, 0777), mkdir(sub, 0777);
  int ok = 1;
  if (m->rank == 0) { /* the columns' table keys: a resume on another node count has others */
    char cpath[4200], ctmp[4300];
    snprintf(cpath, sizeof(cpath), "%s/colmap.bin", sub);
    snprintf(ctmp, sizeof(ctmp), "%s.tmp", cpath);
    FILE *c = fopen(ctmp, "wb");
    const shape_t sh = shape_of(m);
    ok = c && fwrite(&m->ncols, 4, 1, c) == 1 && fwrite(m->col_key, 4, m->ncols, c) == m->ncols &&
         fwrite(&sh, sizeof(sh), 1, c) == 1;
    for (uint32_t k = 0; ok && k < m->ncols; k++) {
      const uint64_t id = col_id(cols, k);
      ok = fwrite(&id, 8, 1, c) == 1;
    }
    ok = ok && fflush(c) == 0 && fsync(fileno(c)) == 0;
    if (c) ok &= fclose(c) == 0;
    ok = ok && rename(ctmp, cpath) == 0;
    if (!ok) {
      remove(ctmp);
      snprintf(path, sizeof(path), "%s", cpath);
    }
  }
  FILE *f = ok ? fopen(tmp, "wb") : NULL;
  ok = f != NULL;
  if (ok) {
    const uint32_t w = row_state(m);
    uint64_t n = 0, fnv = 0xcbf29ce484222325ULL;
    for (uint64_t g = (uint64_t)m->rank; g < m->nrows; g += (uint64_t)m->nodes)
      n += row_id(rows, g) != MF_NO_ID;
    uint32_t hdr[3] = {(uint32_t)m->rank, (uint32_t)m->nodes, w};
    fwrite(ROWS_MAGIC, 1, 8, f), fwrite(hdr, 4, 3, f), fwrite(&n, 8, 1, f);
    for (uint64_t g = (uint64_t)m->rank; g < m->nrows; g += (uint64_t)m->nodes) {
      const uint64_t id = row_id(rows, g);
      if (id == MF_NO_ID) continue;
      const float *p = &m->P[(size_t)m->row_map[g / (uint64_t)m->nodes] * m->pstride];
      fwrite(&id, 8, 1, f), fwrite(p, 4, w, f);
      const unsigned char *b = (const unsigned char *)p;
      for (size_t i = 0; i < 8; i++) fnv = (fnv ^ ((id >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
      for (size_t i = 0; i < (size_t)w * 4; i++) fnv = (fnv ^ b[i]) * 0x100000001b3ULL;
    }
    fwrite(&fnv, 8, 1, f);
    ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) remove(tmp);
  }
  if (!ok) snprintf(err, errlen, "checkpoint: %s: %s", path, strerror(errno));
  /* au_checkpoint learns from every node whether its part is there: the rows' failure
   * goes in as this node's, so that no LATEST names a checkpoint without them */
  double bad = ok ? 0 : 1;
  int rc = au_allreduce_sum(au_node_runtime(m->node), &bad, 1);
  if (rc) return rc;
  if (bad > 0) {
    if (ok) snprintf(err, errlen, "checkpoint: another node could not write its rows");
    return AU_EIO;
  }
  /* incremental, with a full one every CKPT_FULL_EVERY (a chain of at most that many) */
  const int full = m->checkpoints++ % CKPT_FULL_EVERY == 0;
  return au_checkpoint(m->node, dir, (uint64_t)epochs, full, err, errlen);
}

typedef struct colmap {
  const mf_t *m;
  uint32_t *written_col; /* the writer's table key -> column */
  uint32_t nkeys;
} colmap_t;

static au_key_t to_our_key(void *arg, const au_table_t *t, au_key_t written)
{
  const colmap_t *c = arg;
  (void)t;
  return written < c->nkeys && c->written_col[written] != UINT32_MAX
             ? c->m->col_key[c->written_col[written]]
             : UINT64_MAX;
}

int mf_resume(mf_t *m, const char *dir, const mf_idmap_t *rows, const mf_idmap_t *cols, int *epochs,
              char *err, size_t errlen)
{
  uint64_t clock = 0;
  char sub[4096], cpath[4200];
  int writers = 0; /* (a missing checkpoint is au_restore_map's to report) */
  if (au_checkpoint_find(dir, sub, sizeof(sub), &writers) != 0)
    snprintf(sub, sizeof(sub), "%s", dir);
  snprintf(cpath, sizeof(cpath), "%s/colmap.bin", sub);
  /* the writer's column keys, inverted: its key -> column -> ours */
  colmap_t cm = {.m = m, .nkeys = (uint32_t)au_table_keys(m->cols)};
  uint32_t *wk = malloc(((size_t)m->ncols + 1) * sizeof(uint32_t)), ncols = 0;
  cm.written_col = malloc(((size_t)cm.nkeys + 1) * sizeof(uint32_t));
  int rc = wk && cm.written_col ? 0 : AU_ENOMEM;
  FILE *cf = rc ? NULL : fopen(cpath, "rb");
  if (!rc && (!cf || fread(&ncols, 4, 1, cf) != 1 || ncols != m->ncols ||
              fread(wk, 4, ncols, cf) != ncols)) {
    snprintf(err, errlen, "resume: %s: %s", cpath,
             !cf ? strerror(errno) : "not the columns of this model (another data set?)");
    rc = cf ? AU_EINVAL : AU_EIO;
  }
  shape_t sh, want = shape_of(m);
  const size_t got = !rc && cf ? fread(&sh, 1, sizeof(sh), cf) : 0; /* (none before 2026-12-04) */
  uint32_t *ours = NULL; /* the writer's column c is our column ours[c] */
  if (!rc && got && (got != sizeof(sh) || sh.magic != SHAPE_MAGIC || sh.ncols != ncols)) {
    snprintf(err, errlen, "resume: %s: malformed after the column keys", cpath);
    rc = AU_EIO;
  } else if (!rc && got &&
             (sh.rank != want.rank || sh.biases != want.biases || sh.optim != want.optim)) {
    snprintf(err, errlen,
             "resume: %s: written by --rank %u%s --optimizer %s, this run is --rank %u%s "
             "--optimizer %s",
             dir, sh.rank, sh.biases ? " --biases" : "", sh.optim == MF_SGD ? "sgd" : "adagrad",
             want.rank, want.biases ? " --biases" : "", want.optim == MF_SGD ? "sgd" : "adagrad");
    rc = AU_EINVAL;
  } else if (!rc && got) {
    /* our columns by file id (a cluster's map holds only the ids in order: made here) */
    mf_idmap_t byid = {0};
    uint32_t at;
    if (!(ours = malloc(((size_t)ncols + 1) * sizeof(uint32_t)))) rc = AU_ENOMEM;
    for (uint32_t c = 0; !rc && cols && c < cols->n; c++)
      if (mf_idmap_insert(&byid, cols->ids[c], &at) != 0) rc = AU_ENOMEM;
    for (uint32_t c = 0; !rc && c < ncols; c++) {
      uint64_t id;
      if (fread(&id, 8, 1, cf) != 1) {
        snprintf(err, errlen, "resume: %s: malformed after the column keys", cpath);
        rc = AU_EIO;
      } else if (cols && cols->n ? !mf_idmap_find(&byid, id, &at) : (at = (uint32_t)id) >= ncols) {
        snprintf(err, errlen,
                 "resume: %s: written for other columns (column %llu is not in this data)", dir,
                 (unsigned long long)id);
        rc = AU_EINVAL;
      } else {
        ours[c] = at;
      }
    }
    mf_idmap_free(&byid);
  }
  if (cf) fclose(cf);
  for (uint32_t k = 0; !rc && k < cm.nkeys; k++) cm.written_col[k] = UINT32_MAX;
  for (uint32_t c = 0; !rc && c < ncols; c++)
    if (wk[c] < cm.nkeys) cm.written_col[wk[c]] = ours ? ours[c] : c;
  free(ours);
  /* collective whatever went wrong here: the others would wait for it */
  if (rc) cm.nkeys = 0; /* nothing taken */
  char rerr[512];
  int rr = au_restore_map(m->node, dir, to_our_key, &cm, &clock, rerr, sizeof(rerr));
  if (!rc && rr) rc = rr, snprintf(err, errlen, "%s", rerr);
  free(wk);
  free(cm.written_col);
  /* this node's rows by file id: id -> local row */
  mf_idmap_t mine = {0};
  uint32_t *local = malloc(((size_t)m->node_rows + 1) * sizeof(uint32_t)), at, found = 0, nmine = 0;
  if (!rc && !local) rc = AU_ENOMEM;
  for (uint64_t g = (uint64_t)m->rank; g < m->nrows && !rc; g += (uint64_t)m->nodes) {
    const uint64_t id = row_id(rows, g);
    if (id == MF_NO_ID) continue;
    if (mf_idmap_insert(&mine, id, &at) != 0)
      rc = AU_ENOMEM;
    else
      local[at] = (uint32_t)(g / (uint64_t)m->nodes), nmine++;
  }
  char path[4300];
  FILE *f;
  const uint32_t w = row_state(m);
  float *buf = malloc((size_t)w * sizeof(float));
  if (!rc && !buf) rc = AU_ENOMEM;
  /* every writer's rows file */
  for (int r = 0; !rc && r < writers; r++) {
    snprintf(path, sizeof(path), "%s/rows-%d.bin", sub, r);
    if (!(f = fopen(path, "rb"))) {
      snprintf(err, errlen, "resume: %s: %s", path, strerror(errno));
      rc = AU_EIO;
      break;
    }
    char magic[8];
    uint32_t hdr[3];
    uint64_t n = 0, fnv = 0xcbf29ce484222325ULL, stored = 0, id;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, ROWS_MAGIC, 8) || fread(hdr, 4, 3, f) != 3 ||
        hdr[2] != w || fread(&n, 8, 1, f) != 1)
      rc = AU_EIO;
    for (uint64_t i = 0; !rc && i < n; i++) {
      if (fread(&id, 8, 1, f) != 1 || fread(buf, 4, w, f) != w) {
        rc = AU_EIO;
        break;
      }
      const unsigned char *b = (const unsigned char *)buf;
      for (size_t k = 0; k < 8; k++) fnv = (fnv ^ ((id >> (8 * k)) & 0xff)) * 0x100000001b3ULL;
      for (size_t k = 0; k < (size_t)w * 4; k++) fnv = (fnv ^ b[k]) * 0x100000001b3ULL;
      if (mf_idmap_find(&mine, id, &at)) {
        memcpy(&m->P[(size_t)m->row_map[local[at]] * m->pstride], buf, (size_t)w * 4);
        found++;
      }
    }
    if (!rc && (fread(&stored, 8, 1, f) != 1 || stored != fnv || fgetc(f) != EOF)) rc = AU_EIO;
    fclose(f);
    if (rc) snprintf(err, errlen, "resume: %s: malformed, or not the rows of this model", path);
  }
  free(buf);
  free(local);
  mf_idmap_free(&mine);
  if (!rc && found != nmine) {
    snprintf(err, errlen, "resume: %s: %u of this node's %u rows are not in it (another data set?)",
             sub, nmine - found, nmine);
    rc = AU_EINVAL;
  }
  /* every node the same answer */
  double v = rc ? 1 : 0;
  int ar = au_allreduce_sum(au_node_runtime(m->node), &v, 1);
  if (!rc && ar) rc = ar;
  if (!rc && v > 0) {
    snprintf(err, errlen, "resume: another node could not take its rows from %s", dir);
    rc = AU_EIO;
  }
  if (!rc) *epochs = (int)clock;
  return rc;
}

void mf_free(mf_t *m)
{
  if (!m) return;
  if (m->w)
    for (int i = 0; i < m->nworkers; i++)
      free(m->w[i].cols), free(m->w[i].cpos), free(m->w[i].said);
  free(m->w);
  if (m->sched_ok) mf_sched_destroy(&m->sched);
  free(m->blen);
  free(m->ckeys);
  free(m->ckoff);
  free(m->cticks);
  mf_grid_free(&m->train);
  mf_grid_free(&m->test);
  free(m->P);
  free(m->row_map);
  free(m->col_key);
  free(m);
}
