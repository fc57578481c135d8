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

#include "sgd.h"

#define BLOCK_BYTES (256 * 1024) /* factor bytes per row or column block: fits in L2 */

typedef struct shard {
  au_table_t *cols_table;
  uint32_t k, dim; /* dim = k + biases */
  int biases;
  float mean, lr, reg;
  int lookahead;
  uint32_t batch;
  /* ratings in walking order; .row is the local row index (global row / workers) */
  mf_ratings_t r;
  au_key_t *keys; /* keys[i] = r.r[i].col, as the table API takes keys */
  size_t pos;
  /* row factors: nrows_local x dim */
  uint32_t nrows_local;
  float *p;
  /* this epoch */
  double sse;
  uint64_t done;
} shard_t;

struct mf {
  au_node_t *node;
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
                   .lookahead = 2,
                   .kernel = AU_KERNEL_HOGWILD,
                   .seed = 1};
}

static int step(au_worker_t *w, void *arg)
{
  shard_t *s = arg;
  if (s->pos >= s->r.n) {
    s->pos = 0;
    return AU_PAUSE; /* end of the epoch; the next au_node_run starts the next */
  }
  size_t n = s->r.n - s->pos < s->batch ? s->r.n - s->pos : s->batch;
  const mf_rating_t *rs = &s->r.r[s->pos];
  au_clock_t now = au_clock(w);

  /* Announce the columns of the batch `lookahead` steps ahead (wrapping into the next
   * epoch). A re-run after AU_WAIT repeats this; intents are idempotent. */
  if (s->lookahead > 0) {
    size_t ahead = (s->pos + (size_t)s->lookahead * s->batch) % s->r.n;
    size_t m = s->r.n - ahead < s->batch ? s->r.n - ahead : s->batch;
    int rc =
        au_intent(w, s->cols_table, &s->keys[ahead], m, now + s->lookahead, now + s->lookahead + 1);
    if (rc != 0) return rc;
  }

  au_view_t v;
  int rc = au_acquire(w, s->cols_table, &s->keys[s->pos], n, &v);
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
  s->pos += n;
  au_clock_advance(w);
  return AU_CONTINUE;
}

static uint64_t splitmix64(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double normal(uint64_t *s)
{
  double u1 = ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = (double)(splitmix64(s) >> 11) / 9007199254740992.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Row factors depend on (seed, global row) only, not on the worker count. */
static void init_rows(shard_t *s, int shard, int nshards, const mf_opts_t *o)
{
  for (uint32_t lr = 0; lr < s->nrows_local; lr++) {
    uint64_t row = (uint64_t)lr * (uint64_t)nshards + (uint64_t)shard;
    uint64_t st = (o->seed ^ 0x5bd1e995u) + row * 0xd1342543de82ef95ULL;
    float *p = &s->p[(size_t)lr * s->dim];
    for (uint32_t j = 0; j < s->k; j++) p[j] = (float)(o->init_sd * normal(&st));
    if (s->biases) p[s->k] = 0;
  }
}

int mf_block_order(mf_ratings_t *r, uint32_t nrows, uint32_t ncols, uint32_t dim, int start, int of)
{
  size_t per_block = BLOCK_BYTES / ((size_t)dim * sizeof(float));
  if (per_block == 0) per_block = 1;
  size_t ncb = ((size_t)ncols + per_block - 1) / per_block;
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
#define BLOCK_OF(x) ((((x).col / per_block + ncb - off) % ncb) * nrb + (x).row / per_block)
  for (size_t i = 0; i < r->n; i++) first[BLOCK_OF(r->r[i]) + 1]++;
  for (size_t b = 0; b < nb; b++) first[b + 1] += first[b];
  for (size_t i = 0; i < r->n; i++) out[first[BLOCK_OF(r->r[i])]++] = r->r[i];
#undef BLOCK_OF
  free(first);
  free(r->r);
  r->r = out;
  r->cap = r->n ? r->n : 1;
  return 0;
}

static void shard_free(shard_t *s)
{
  mf_ratings_free(&s->r);
  free(s->keys);
  free(s->p);
}

int mf_create(au_node_t *node, const mf_opts_t *o, uint32_t nrows, uint32_t ncols,
              const mf_ratings_t *train, mf_t **out, char *err, size_t errlen)
{
  if (o->rank == 0 || o->batch == 0 || !(o->lr > 0) || o->reg < 0 || o->decay < 0 ||
      o->lookahead < 0 || ncols == 0 || nrows == 0) {
    snprintf(err, errlen, "invalid model options (rank, batch, lr > 0; reg, decay >= 0)");
    return AU_EINVAL;
  }
  mf_t *m = calloc(1, sizeof(*m));
  if (!m) return AU_ENOMEM;
  m->node = node;
  m->o = *o;
  m->nrows = nrows;
  m->ncols = ncols;
  m->dim = o->rank + (o->biases ? 1 : 0);
  int nshards = o->workers > 0 ? o->workers : au_runtime_threads(au_node_runtime(node));
  if ((uint32_t)nshards > nrows) nshards = (int)nrows;
  m->nshards = nshards;
  double sum = 0;
  for (size_t i = 0; i < train->n; i++) sum += train->r[i].value;
  m->mean = train->n ? (float)(sum / (double)train->n) : 0.0f;

  int rc = au_table_create(node, &m->cols,
                           &(au_table_opts_t){.keys = ncols,
                                              .dim = m->dim,
                                              .type = AU_F32,
                                              .init = AU_INIT_NORMAL,
                                              .init_a = 0,
                                              .init_b = o->init_sd,
                                              .seed = o->seed,
                                              .kernel = o->kernel,
                                              .name = "columns"});
  if (rc != 0) {
    snprintf(err, errlen, "creating the column table: %s", au_strerror(rc));
    free(m);
    return rc;
  }
  m->shards = calloc((size_t)nshards, sizeof(shard_t));
  if (!m->shards) goto nomem;
  size_t *count = calloc((size_t)nshards, sizeof(size_t));
  if (!count) goto nomem;
  for (size_t i = 0; i < train->n; i++) count[train->r[i].row % (uint32_t)nshards]++;
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
    s->nrows_local = (nrows - (uint32_t)w + (uint32_t)nshards - 1) / (uint32_t)nshards;
    s->keys = malloc((count[w] + 1) * sizeof(au_key_t));
    s->p = malloc(((size_t)s->nrows_local + 1) * m->dim * sizeof(float));
    if (mf_ratings_reserve(&s->r, count[w] + 1) != 0 || !s->keys || !s->p) {
      free(count);
      goto nomem;
    }
    init_rows(s, w, nshards, o);
  }
  free(count);
  for (size_t i = 0; i < train->n; i++) {
    const mf_rating_t *r = &train->r[i];
    shard_t *s = &m->shards[r->row % (uint32_t)nshards];
    s->r.r[s->r.n++] = (mf_rating_t){r->row / (uint32_t)nshards, r->col, r->value};
  }
  for (int w = 0; w < nshards; w++) {
    shard_t *s = &m->shards[w];
    if (mf_block_order(&s->r, s->nrows_local, ncols, m->dim, w, nshards) != 0) goto nomem;
    for (size_t i = 0; i < s->r.n; i++) s->keys[i] = s->r.r[i].col;
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

int mf_epoch(mf_t *m, int e, mf_epoch_t *out)
{
  float lr = m->o.lr / (1.0f + m->o.decay * (float)e);
  for (int w = 0; w < m->nshards; w++) {
    m->shards[w].lr = lr;
    m->shards[w].sse = 0;
    m->shards[w].done = 0;
  }
  au_node_stats_t before, after;
  au_node_stats(m->node, &before);
  uint64_t t0 = au_now_ns();
  int rc = au_node_run(m->node);
  uint64_t t1 = au_now_ns();
  if (rc != 0) return rc;
  au_node_stats(m->node, &after);
  double sse = 0;
  uint64_t done = 0;
  for (int w = 0; w < m->nshards; w++) {
    sse += m->shards[w].sse;
    done += m->shards[w].done;
  }
  uint64_t local = after.rows_local - before.rows_local;
  uint64_t remote = after.rows_remote - before.rows_remote;
  out->seconds = (double)(t1 - t0) / 1e9;
  out->updates = done;
  out->updates_per_s = out->seconds > 0 ? (double)done / out->seconds : 0;
  out->train_rmse = done ? sqrt(sse / (double)done) : 0;
  out->local = local + remote ? (double)local / (double)(local + remote) : 1.0;
  out->intents = after.intents - before.intents;
  return 0;
}

/* Copies the whole column table out (between epochs, nothing else runs). */
static float *read_cols(mf_t *m)
{
  float *q = malloc((size_t)m->ncols * m->dim * sizeof(float));
  au_key_t *keys = malloc((size_t)m->ncols * sizeof(au_key_t));
  if (!q || !keys) {
    free(q), free(keys);
    return NULL;
  }
  for (uint32_t c = 0; c < m->ncols; c++) keys[c] = c;
  int rc = au_table_read(m->cols, keys, m->ncols, q);
  free(keys);
  if (rc != 0) {
    free(q);
    return NULL;
  }
  return q;
}

static const float *row_factor(const mf_t *m, uint32_t row)
{
  const shard_t *s = &m->shards[row % (uint32_t)m->nshards];
  return &s->p[(size_t)(row / (uint32_t)m->nshards) * m->dim];
}

double mf_rmse(mf_t *m, const mf_ratings_t *set)
{
  if (set->n == 0) return NAN;
  float *q = read_cols(m);
  if (!q) return NAN;
  double sse = 0;
  for (size_t i = 0; i < set->n; i++) {
    const mf_rating_t *r = &set->r[i];
    const float *p = row_factor(m, r->row), *qc = &q[(size_t)r->col * m->dim];
    float pred = m->mean + mf_dot(p, qc, m->o.rank);
    if (m->o.biases) pred += p[m->o.rank] + qc[m->o.rank];
    double e = (double)r->value - pred;
    sse += e * e;
  }
  free(q);
  return sqrt(sse / (double)set->n);
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
  float *q = read_cols(m);
  if (!q) {
    fclose(f);
    snprintf(err, errlen, "%s: out of memory reading the factors", path);
    return MF_ENOMEM;
  }
  fprintf(f, "# augur-mf factors rank=%u biases=%d mean=%.9g rows=%u cols=%u\n", m->o.rank,
          m->o.biases, m->mean, m->nrows, m->ncols);
  fprintf(f, "# prediction = mean + row . col%s\n",
          m->o.biases ? " + row_bias + col_bias (the last value of each line)" : "");
  for (uint32_t r = 0; r < m->nrows; r++)
    write_vec(f, "row", rows && r < rows->n ? rows->ids[r] : r, row_factor(m, r), m->dim);
  for (uint32_t c = 0; c < m->ncols; c++)
    write_vec(f, "col", cols && c < cols->n ? cols->ids[c] : c, &q[(size_t)c * m->dim], m->dim);
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
