/* kge.c — see kge.h. */
#include "kge.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_AHEAD 64

/* ---- the arithmetic -------------------------------------------------------------------
 * Rows of ComplEx are [re 0..k-1, im 0..k-1]. With q = h r (complex product) the score
 * Re(sum h r conj(t)) is the real dot product q . t, and with p = conj(r) t it is h . p:
 * a side of a batch is then one dot product per candidate. DistMult's q and p are the
 * elementwise products. */

int kge_model_parse(const char *name, kge_model_t *out)
{
  if (name && !strcmp(name, "complex")) return *out = KGE_COMPLEX, 0;
  if (name && !strcmp(name, "distmult")) return *out = KGE_DISTMULT, 0;
  return -1;
}

const char *kge_model_name(kge_model_t m)
{
  return m == KGE_COMPLEX ? "complex" : m == KGE_DISTMULT ? "distmult" : "?";
}

void kge_opts_default(kge_opts_t *o)
{
  *o = (kge_opts_t){.model = KGE_COMPLEX,
                    .rank = 100,
                    .lr = 0.1f,
                    .reg = 0.01f,
                    .init_sd = 0.001f,
                    .batch = 512,
                    .negatives = 256,
                    .lookahead = 4,
                    .place = AU_PLACE_ADAPTIVE,
                    .seed = 1};
}

/* The row loops in vectors of 8 floats (GCC's vector extension: one AVX register, two
 * SSE ones), a scalar tail after them; batch_grad is built for AVX-512, AVX2 and the
 * x86-64 baseline, picked at run time. */
typedef float v8 __attribute__((vector_size(32)));

/* The ISAs to build for. Not under the sanitizers: ThreadSanitizer's runtime is not up yet
 * when the dynamic loader calls the clones' resolvers (test_kge crashed at start). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CLONES
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define CLONES
#endif
#endif
#ifndef CLONES
#if defined(__x86_64__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif
#endif

static inline v8 ld8(const float *p)
{
  v8 v;
  memcpy(&v, p, sizeof(v));
  return v;
}

static inline void st8(float *p, v8 v)
{
  memcpy(p, &v, sizeof(v));
}

static inline float hsum8(v8 v)
{
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

static inline float dot(const float *restrict a, const float *restrict b, uint32_t d)
{
  v8 s = {0};
  uint32_t j = 0;
  for (; j + 8 <= d; j += 8) s += ld8(a + j) * ld8(b + j);
  float r = hsum8(s);
  for (; j < d; j++) r += a[j] * b[j];
  return r;
}

static inline void axpy(float *restrict y, float a, const float *restrict x, uint32_t d)
{
  uint32_t j = 0;
  for (; j + 8 <= d; j += 8) st8(y + j, ld8(y + j) + a * ld8(x + j));
  for (; j < d; j++) y[j] += a * x[j];
}

/* *a = x . u, *b = x . v, reading x once */
static inline void dot2(const float *restrict u, const float *restrict v, const float *restrict x,
                        uint32_t d, float *a, float *b)
{
  v8 s0 = {0}, s1 = {0}, t0 = {0}, t1 = {0};
  uint32_t j = 0;
  for (; j + 16 <= d; j += 16) {
    const v8 x0 = ld8(x + j), x1 = ld8(x + j + 8);
    s0 += ld8(u + j) * x0, s1 += ld8(u + j + 8) * x1;
    t0 += ld8(v + j) * x0, t1 += ld8(v + j + 8) * x1;
  }
  for (; j + 8 <= d; j += 8) {
    const v8 x0 = ld8(x + j);
    s0 += ld8(u + j) * x0, t0 += ld8(v + j) * x0;
  }
  float ra = hsum8(s0 + s1), rb = hsum8(t0 + t1);
  for (; j < d; j++) ra += u[j] * x[j], rb += v[j] * x[j];
  *a = ra, *b = rb;
}

/* A negative x with weights a (tail side) and b (head side): du += a x, dv += b x, and its
 * own gradient gx += a u + b v. */
static inline void grad2(float *restrict du, float *restrict dv, float *restrict gx, float a,
                         float b, const float *restrict u, const float *restrict v,
                         const float *restrict x, uint32_t d)
{
  uint32_t j = 0;
  for (; j + 8 <= d; j += 8) {
    const v8 xj = ld8(x + j);
    st8(du + j, ld8(du + j) + a * xj);
    st8(dv + j, ld8(dv + j) + b * xj);
    st8(gx + j, ld8(gx + j) + a * ld8(u + j) + b * ld8(v + j));
  }
  for (; j < d; j++) {
    du[j] += a * x[j];
    dv[j] += b * x[j];
    gx[j] += a * u[j] + b * v[j];
  }
}

/* q = h r (ComplEx) or h * r (DistMult) */
static void mul_hr(kge_model_t m, uint32_t k, const float *h, const float *r, float *q)
{
  if (m == KGE_DISTMULT) {
    for (uint32_t j = 0; j < k; j++) q[j] = h[j] * r[j];
    return;
  }
  for (uint32_t j = 0; j < k; j++) {
    q[j] = h[j] * r[j] - h[k + j] * r[k + j];
    q[k + j] = h[j] * r[k + j] + h[k + j] * r[j];
  }
}

/* p = conj(r) t (ComplEx) or r * t (DistMult) */
static void mul_rt(kge_model_t m, uint32_t k, const float *r, const float *t, float *p)
{
  if (m == KGE_DISTMULT) {
    for (uint32_t j = 0; j < k; j++) p[j] = r[j] * t[j];
    return;
  }
  for (uint32_t j = 0; j < k; j++) {
    p[j] = r[j] * t[j] + r[k + j] * t[k + j];
    p[k + j] = r[j] * t[k + j] - r[k + j] * t[j];
  }
}

float kge_score(kge_model_t m, uint32_t rank, const float *h, const float *r, const float *t)
{
  const uint32_t d = kge_dim(m, rank);
  float q[2 * 1024];
  if (d > sizeof(q) / sizeof(q[0])) return NAN;
  mul_hr(m, rank, h, r, q);
  return dot(q, t, d);
}

/* From the gradient dq of q = h r: dh += dq conj(r), dr += dq conj(h). */
static void back_hr(kge_model_t m, uint32_t k, const float *h, const float *r, const float *dq,
                    float *dh, float *dr)
{
  if (m == KGE_DISTMULT) {
    for (uint32_t j = 0; j < k; j++) dh[j] += dq[j] * r[j], dr[j] += dq[j] * h[j];
    return;
  }
  for (uint32_t j = 0; j < k; j++) {
    const float a = dq[j], b = dq[k + j];
    dh[j] += a * r[j] + b * r[k + j];
    dh[k + j] += b * r[j] - a * r[k + j];
    dr[j] += a * h[j] + b * h[k + j];
    dr[k + j] += b * h[j] - a * h[k + j];
  }
}

/* From the gradient dp of p = conj(r) t: dt += dp r, dr += conj(dp) t. */
static void back_rt(kge_model_t m, uint32_t k, const float *r, const float *t, const float *dp,
                    float *dr, float *dt)
{
  if (m == KGE_DISTMULT) {
    for (uint32_t j = 0; j < k; j++) dt[j] += dp[j] * r[j], dr[j] += dp[j] * t[j];
    return;
  }
  for (uint32_t j = 0; j < k; j++) {
    const float a = dp[j], b = dp[k + j];
    dt[j] += a * r[j] - b * r[k + j];
    dt[k + j] += a * r[k + j] + b * r[j];
    dr[j] += a * t[j] + b * t[k + j];
    dr[k + j] += a * t[k + j] - b * t[j];
  }
}

/* N3: reg * sum |z|^3 over the row's numbers (complex moduli for ComplEx); adds its
 * gradient to g and returns the penalty. */
static float n3(kge_model_t m, uint32_t k, const float *x, float reg, float *g)
{
  float s = 0;
  if (m == KGE_DISTMULT) {
    for (uint32_t j = 0; j < k; j++) {
      const float a = fabsf(x[j]);
      s += a * a * a;
      g[j] += 3 * reg * a * x[j];
    }
    return reg * s;
  }
  for (uint32_t j = 0; j < k; j++) {
    const float a = sqrtf(x[j] * x[j] + x[k + j] * x[k + j]);
    s += a * a * a;
    g[j] += 3 * reg * a * x[j];
    g[k + j] += 3 * reg * a * x[k + j];
  }
  return reg * s;
}

/* ---- ranking --------------------------------------------------------------------------- */

CLONES static void ranks(kge_model_t m, uint32_t rank, const float *ent, uint32_t nent,
                         const float *rel, const kg_set_t *known, const kg_triple_t *tr,
                         float *scratch, uint64_t *tail_rank, uint64_t *head_rank)
{
  const uint32_t d = kge_dim(m, rank);
  float q[2 * 1024];
  const float *h = &ent[(size_t)tr->h * d], *r = &rel[(size_t)tr->r * d],
              *t = &ent[(size_t)tr->t * d];
  for (int side = 0; side < 2; side++) {
    if (side == 0)
      mul_hr(m, rank, h, r, q); /* (h, r, e) = q . e */
    else
      mul_rt(m, rank, r, t, q); /* (e, r, t) = e . p */
    const float target = dot(q, side == 0 ? t : h, d);
    for (uint32_t e = 0; e < nent; e++) scratch[e] = dot(q, &ent[(size_t)e * d], d);
    /* ties count against the triple, and so does a score that is not a number (the
       target's too: then every unknown entity is above it), so that a degenerate model
       (all rows equal, or diverged) ranks last rather than first */
    uint64_t above = 0;
    for (uint32_t e = 0; e < nent; e++) {
      if (scratch[e] < target) continue;
      const int is_known =
          side == 0 ? kg_set_has(known, tr->h, tr->r, e) : kg_set_has(known, e, tr->r, tr->t);
      above += !is_known;
    }
    *(side == 0 ? tail_rank : head_rank) = above + 1;
  }
}

/* (a wrapper: clang builds target_clones of static functions only) */
void kge_ranks(kge_model_t m, uint32_t rank, const float *ent, uint32_t nent, const float *rel,
               const kg_set_t *known, const kg_triple_t *tr, float *scratch, uint64_t *tail_rank,
               uint64_t *head_rank)
{
  ranks(m, rank, ent, nent, rel, known, tr, scratch, tail_rank, head_rank);
}

/* ---- the model ------------------------------------------------------------------------- */

typedef struct batch {
  uint32_t n;       /* positives */
  uint32_t ne, nr;  /* distinct entities and relations */
  uint32_t *tri;    /* batch size: indexes into the graph's training triples */
  uint32_t *neg;    /* negatives */
  au_key_t *ekeys;  /* distinct entities, sorted */
  au_key_t *rkeys;  /* distinct relations, sorted */
  au_clock_t clock; /* when the batch runs */
} batch_t;

typedef struct worker {
  struct kge *m;
  int id;
  uint32_t *trip; /* this worker's training triples, in this epoch's order */
  size_t ntrip, pos;
  size_t tfirst, tstride; /* ... which are tfirst + tstride * j */
  batch_t *ring;
  int head, count, said_epoch;
  au_clock_t next_clock;
  uint64_t rng, rng0;    /* the negatives' generator, and its seed (node, worker) */
  uint32_t *epos, *rpos; /* entity / relation -> index in the step's view */
  float *q, *p, *dq, *dp, *ge, *gr, *s;
  /* id_entities: the step's entities' ids, their pulled values, and row pointers; the
   * ids of a batch drawn ahead, for its intent */
  uint64_t *eids, *iids;
  float *evals;
  void **erows;
  double loss;
  uint64_t done;
} worker_t;

struct kge {
  au_node_t *node;
  kge_opts_t o;
  const kg_graph_t *g;
  int rank, nodes, nworkers;
  uint32_t dim, nent, nrel;
  au_table_t *ent, *rel;
  au_ids_t *ids; /* id_entities: the entities (ent is NULL), keyed by g->ent.id */
  worker_t *w;
  int epoch;
  kg_set_t known;
  int known_built;
};

static int cmp_key(const void *a, const void *b)
{
  const au_key_t x = *(const au_key_t *)a, y = *(const au_key_t *)b;
  return x < y ? -1 : x > y;
}

static uint32_t distinct(au_key_t *k, uint32_t n)
{
  qsort(k, n, sizeof(au_key_t), cmp_key);
  uint32_t u = 0;
  for (uint32_t i = 0; i < n; i++)
    if (u == 0 || k[i] != k[u - 1]) k[u++] = k[i];
  return u;
}

/* Draws the worker's next batch into the ring (its triples, its negatives) and announces
 * its rows for the clock it will run at. 0 when there is none left, 1 when one was drawn,
 * or an AU_E* code. */
static int draw(au_worker_t *aw, worker_t *w)
{
  struct kge *m = w->m;
  const kge_opts_t *o = &m->o;
  if (w->pos >= w->ntrip) return 0;
  batch_t *b = &w->ring[(w->head + w->count) % (o->lookahead + 1)];
  b->n = (uint32_t)(w->ntrip - w->pos < o->batch ? w->ntrip - w->pos : o->batch);
  uint32_t ne = 0, nr = 0;
  for (uint32_t i = 0; i < b->n; i++) {
    const uint32_t ti = w->trip[w->pos + i];
    const kg_triple_t *t = &m->g->train.v[ti];
    b->tri[i] = ti;
    b->ekeys[ne++] = t->h;
    b->ekeys[ne++] = t->t;
    b->rkeys[nr++] = t->r;
  }
  w->pos += b->n;
  for (uint32_t j = 0; j < o->negatives; j++)
    b->ekeys[ne++] = b->neg[j] = kg_below(&w->rng, m->nent);
  b->ne = distinct(b->ekeys, ne);
  b->nr = distinct(b->rkeys, nr);
  b->clock = w->next_clock++;
  w->count++;
  int rc = 0;
  if (m->ent) {
    rc = au_worker_intent(aw, m->ent, b->ekeys, b->ne, b->clock, b->clock + 1);
  } else {
    for (uint32_t i = 0; i < b->ne; i++) w->iids[i] = m->g->ent.id[b->ekeys[i]];
    rc = au_worker_ids_intent(aw, m->ids, w->iids, b->ne, b->clock, b->clock + 1);
  }
  if (rc == 0) rc = au_worker_intent(aw, m->rel, b->rkeys, b->nr, b->clock, b->clock + 1);
  return rc ? rc : 1;
}

/* The batch's loss and gradients: ge (one row per distinct entity), gr (per relation).
 * erows[i]: the values of the batch's i-th distinct entity. */
CLONES static double batch_grad(const struct kge *m, const batch_t *b, worker_t *w,
                                void *const *erows, const au_view_t *vr)
{
  const kge_opts_t *o = &m->o;
  const kge_model_t mo = o->model;
  const uint32_t k = o->rank, d = m->dim, N = o->negatives, n = b->n;
  float *ge = w->ge, *gr = w->gr, *s = w->s;
  memset(ge, 0, (size_t)b->ne * d * sizeof(float));
  memset(gr, 0, (size_t)b->nr * d * sizeof(float));
  for (uint32_t i = 0; i < b->ne; i++) w->epos[b->ekeys[i]] = i;
  for (uint32_t i = 0; i < b->nr; i++) w->rpos[b->rkeys[i]] = i;
  double loss = 0;
  for (uint32_t i = 0; i < n; i++) {
    const kg_triple_t *t = &m->g->train.v[b->tri[i]];
    const uint32_t hi = w->epos[t->h], ti = w->epos[t->t], ri = w->rpos[t->r];
    const float *h = erows[hi], *tt = erows[ti], *r = au_view_row(vr, ri);
    float *q = &w->q[(size_t)i * d], *p = &w->p[(size_t)i * d];
    float *dq = &w->dq[(size_t)i * d], *dp = &w->dp[(size_t)i * d];
    mul_hr(mo, k, h, r, q);
    mul_rt(mo, k, r, tt, p);
    memset(dq, 0, d * sizeof(float));
    memset(dp, 0, d * sizeof(float));
    /* both sides at once, one pass over each negative's row per phase: the scores (a
     * negative that is the positive's own entity left out), the two softmaxes, then
     * the gradients */
    const float pos = dot(q, tt, d);
    float *st = s, *sh = s + N, mt = pos, mh = pos;
    for (uint32_t j = 0; j < N; j++) {
      const float *x = erows[w->epos[b->neg[j]]];
      dot2(q, p, x, d, &st[j], &sh[j]);
      if (b->neg[j] == t->t) st[j] = -INFINITY;
      if (b->neg[j] == t->h) sh[j] = -INFINITY;
      mt = st[j] > mt ? st[j] : mt;
      mh = sh[j] > mh ? sh[j] : mh;
    }
    float zt = expf(pos - mt), zh = expf(pos - mh);
    for (uint32_t j = 0; j < N; j++) zt += st[j] = expf(st[j] - mt), zh += sh[j] = expf(sh[j] - mh);
    loss += (double)(logf(zt) - (pos - mt)) + (double)(logf(zh) - (pos - mh));
    const float it = 1.0f / zt, ih = 1.0f / zh;
    /* d loss / d pos: the tail side's moves q and t, the head side's p and h */
    const float gt0 = expf(pos - mt) * it - 1.0f, gh0 = expf(pos - mh) * ih - 1.0f;
    axpy(dq, gt0, tt, d);
    axpy(&ge[(size_t)ti * d], gt0, q, d);
    axpy(dp, gh0, h, d);
    axpy(&ge[(size_t)hi * d], gh0, p, d);
    for (uint32_t j = 0; j < N; j++) {
      const uint32_t ni = w->epos[b->neg[j]];
      grad2(dq, dp, &ge[(size_t)ni * d], st[j] * it, sh[j] * ih, q, p, erows[ni], d);
    }
    back_hr(mo, k, h, r, dq, &ge[(size_t)hi * d], &gr[(size_t)ri * d]);
    back_rt(mo, k, r, tt, dp, &gr[(size_t)ri * d], &ge[(size_t)ti * d]);
    if (o->reg > 0) {
      loss += n3(mo, k, h, o->reg, &ge[(size_t)hi * d]);
      loss += n3(mo, k, tt, o->reg, &ge[(size_t)ti * d]);
      loss += n3(mo, k, r, o->reg, &gr[(size_t)ri * d]);
    }
  }
  return loss;
}

static int step(au_worker_t *aw, void *arg)
{
  worker_t *w = arg;
  struct kge *m = w->m;
  int rc;
  if (w->said_epoch != m->epoch) { /* a new epoch: draw the first batches */
    w->said_epoch = m->epoch;
    w->next_clock = au_worker_clock(aw);
    while (w->count < m->o.lookahead + 1 && (rc = draw(aw, w)) == 1) {
    }
    if (rc < 0) return rc;
  }
  if (w->count == 0) return AU_PAUSE; /* the next au_node_run starts the next epoch */
  batch_t *b = &w->ring[w->head];
  au_view_t ve = {0}, vr;
  if (m->ids) { /* copies of the entities' values; their gradients go to the owners */
    for (uint32_t i = 0; i < b->ne; i++) {
      w->eids[i] = m->g->ent.id[b->ekeys[i]];
      w->erows[i] = &w->evals[(size_t)i * m->dim];
    }
    rc = au_worker_ids_pull(aw, m->ids, w->eids, b->ne, w->evals);
  } else {
    rc = au_view_acquire(aw, m->ent, b->ekeys, b->ne, &ve);
  }
  if (rc == AU_EAGAIN) return AU_WAIT;
  if (rc != 0) return rc;
  rc = au_view_acquire(aw, m->rel, b->rkeys, b->nr, &vr);
  if (rc != 0) {
    if (!m->ids) au_view_release(aw, &ve);
    return rc == AU_EAGAIN ? AU_WAIT : rc;
  }
  w->loss += batch_grad(m, b, w, m->ids ? w->erows : ve.rows, &vr);
  if (m->ids) {
    if ((rc = au_worker_ids_push(aw, m->ids, w->eids, b->ne, w->ge)) != 0) {
      au_view_release(aw, &vr);
      return rc;
    }
  } else {
    for (uint32_t i = 0; i < b->ne; i++) au_view_update(&ve, i, &w->ge[(size_t)i * m->dim]);
  }
  for (uint32_t i = 0; i < b->nr; i++) au_view_update(&vr, i, &w->gr[(size_t)i * m->dim]);
  au_view_release(aw, &vr);
  if (!m->ids) au_view_release(aw, &ve);
  w->done += b->n;
  au_worker_advance(aw);
  w->head = (w->head + 1) % (m->o.lookahead + 1);
  w->count--;
  rc = draw(aw, w);
  return rc < 0 ? rc : AU_CONTINUE;
}

static void worker_free(worker_t *w, int ring)
{
  for (int i = 0; w->ring && i < ring; i++) {
    batch_t *b = &w->ring[i];
    free(b->tri), free(b->neg), free(b->ekeys), free(b->rkeys);
  }
  free(w->ring);
  free(w->trip), free(w->epos), free(w->rpos);
  free(w->q), free(w->p), free(w->dq), free(w->dp), free(w->ge), free(w->gr), free(w->s);
  free(w->eids), free(w->evals), free(w->erows), free(w->iids);
}

void kge_free(kge_t *m)
{
  if (!m) return;
  for (int i = 0; m->w && i < m->nworkers; i++) worker_free(&m->w[i], m->o.lookahead + 1);
  free(m->w);
  kg_set_free(&m->known);
  free(m);
}

int kge_workers(const kge_t *m)
{
  return m->nworkers;
}

size_t kge_memory(const kge_t *m)
{
  if (m->ids) {
    au_ids_stats_t st;
    au_ids_stats(m->ids, &st);
    return st.memory + au_table_memory(m->rel);
  }
  return au_table_memory(m->ent) + au_table_memory(m->rel);
}

/* The entities as an id table, keyed by their names' ids, with their dense table's
 * options (the initializer draws from (seed, id) instead of (seed, index)), placed by
 * --mode as the dense table is (draw announces a batch's ids with au_worker_ids_intent),
 * every id admitted at its first push.
 * Its budget holds twice this node's share of the entities, so that no bucket of 64 rows
 * overflows (at half load a bucket holds 32 on average; more than 64 is a 10^-7 event
 * per bucket) and no entity is evicted: kge_epoch counts evictions all the same. */
static int entity_ids(kge_t *m, au_node_t *node)
{
  const kge_opts_t *o = &m->o;
  const size_t row = ((size_t)2 * m->dim * sizeof(float) + 63) / 64 * 64; /* values, AdaGrad */
  const size_t share = (m->nent + (size_t)m->nodes - 1) / (size_t)m->nodes;
  const size_t slots = 2 * share + 16 * 64; /* a spare actor's buckets */
  au_ids_opts_t io = {.row = {.dim = m->dim,
                              .type = AU_F32,
                              .init = AU_INIT_NORMAL,
                              .init_a = 0,
                              .init_b = o->init_sd,
                              .seed = o->seed,
                              .optim = AU_OPTIM_ADAGRAD,
                              .lr = o->lr,
                              .optim_init = 1e-6f,
                              .row_align = 64,
                              .place = o->place,
                              .hot = o->hot,
                              .name = "entities"},
                      /* a slot's row and its share of the bucket's digests, ids and counters */
                      .budget = slots * (row + 32) + (1 << 20)};
  return au_ids_create(node, &io, &m->ids);
}

static int worker_init(kge_t *m, worker_t *w, int id)
{
  const kge_opts_t *o = &m->o;
  const uint32_t B = o->batch, N = o->negatives, d = m->dim, ring = (uint32_t)o->lookahead + 1;
  w->m = m;
  w->id = id;
  w->said_epoch = -1;
  /* this worker's triples: node rank + nodes * (id + workers * j) */
  const size_t stride = (size_t)m->nodes * (size_t)m->nworkers;
  const size_t first = (size_t)m->rank + (size_t)m->nodes * (size_t)id;
  const size_t ntr = m->g->train.n;
  w->ntrip = ntr > first ? (ntr - first + stride - 1) / stride : 0;
  w->trip = malloc((w->ntrip ? w->ntrip : 1) * sizeof(uint32_t));
  w->ring = calloc(ring, sizeof(batch_t));
  w->epos = malloc(m->nent * sizeof(uint32_t));
  w->rpos = malloc(m->nrel * sizeof(uint32_t));
  const size_t bd = (size_t)B * d * sizeof(float);
  w->q = malloc(bd), w->p = malloc(bd), w->dq = malloc(bd), w->dp = malloc(bd);
  w->ge = malloc(((size_t)2 * B + N) * d * sizeof(float));
  w->gr = malloc((size_t)B * d * sizeof(float));
  w->s = malloc(2 * (size_t)N * sizeof(float));
  if (!w->trip || !w->ring || !w->epos || !w->rpos || !w->q || !w->p || !w->dq || !w->dp ||
      !w->ge || !w->gr || !w->s)
    return AU_ENOMEM;
  if (o->id_entities) {
    const size_t most = (size_t)2 * B + N; /* distinct entities of a batch, at most */
    w->eids = malloc(most * sizeof(uint64_t));
    w->evals = malloc(most * d * sizeof(float));
    w->erows = malloc(most * sizeof(void *));
    w->iids = malloc(most * sizeof(uint64_t));
    if (!w->eids || !w->evals || !w->erows || !w->iids) return AU_ENOMEM;
  }
  w->tfirst = first, w->tstride = stride;
  for (uint32_t i = 0; i < ring; i++) {
    batch_t *b = &w->ring[i];
    b->tri = malloc(B * sizeof(uint32_t));
    b->neg = malloc((N ? N : 1) * sizeof(uint32_t));
    b->ekeys = malloc(((size_t)2 * B + N) * sizeof(au_key_t));
    b->rkeys = malloc(B * sizeof(au_key_t));
    if (!b->tri || !b->neg || !b->ekeys || !b->rkeys) return AU_ENOMEM;
  }
  return 0;
}

int kge_create(au_node_t *node, const kge_opts_t *o, const kg_graph_t *g, kge_t **out, char *err,
               size_t errlen)
{
  if (o->rank == 0 || o->rank > 1024 || o->batch == 0 || o->negatives == 0 || !(o->lr > 0) ||
      o->reg < 0 || o->lookahead < 0 || o->lookahead > MAX_AHEAD) {
    snprintf(err, errlen,
             "invalid model options (rank 1..1024, batch and negatives > 0, lr > 0, reg >= 0, "
             "lookahead 0..%d)",
             MAX_AHEAD);
    return AU_EINVAL;
  }
  if (g->ent.n == 0 || g->rel.n == 0 || g->train.n == 0) {
    snprintf(err, errlen, "the graph has no training triples");
    return AU_EINVAL;
  }
  kge_t *m = calloc(1, sizeof(*m));
  if (!m) return AU_ENOMEM;
  m->node = node;
  m->o = *o;
  m->g = g;
  m->rank = au_node_rank(node);
  m->nodes = au_node_nodes(node);
  m->dim = kge_dim(o->model, o->rank);
  m->nent = g->ent.n;
  m->nrel = g->rel.n;
  m->epoch = -1;
  m->nworkers = o->workers > 0 ? o->workers : au_runtime_threads(au_node_runtime(node));
  int rc;
  const char *names[2] = {"entities", "relations"};
  for (int i = 0; i < 2; i++) {
    if (i == 0 && o->id_entities) {
      if ((rc = entity_ids(m, node)) != 0) {
        snprintf(err, errlen, "creating the entities' id table: %s", au_strerror(rc));
        kge_free(m);
        return rc;
      }
      continue;
    }
    rc = au_table_create(node,
                         &(au_table_opts_t){.keys = i == 0 ? m->nent : m->nrel,
                                            .dim = m->dim,
                                            .type = AU_F32,
                                            .init = AU_INIT_NORMAL,
                                            .init_a = 0,
                                            .init_b = o->init_sd,
                                            .seed = o->seed + (uint64_t)i,
                                            .place = o->place,
                                            .hot = o->hot,
                                            .optim = AU_OPTIM_ADAGRAD,
                                            .lr = o->lr,
                                            .optim_init = 1e-6f,
                                            .row_align = 64,
                                            .name = names[i]},
                         i == 0 ? &m->ent : &m->rel);
    if (rc != 0) {
      snprintf(err, errlen, "creating the %s table: %s", names[i], au_strerror(rc));
      kge_free(m);
      return rc;
    }
  }
  if (!(m->w = calloc((size_t)m->nworkers, sizeof(worker_t)))) goto nomem;
  for (int i = 0; i < m->nworkers; i++)
    if (worker_init(m, &m->w[i], i) != 0) goto nomem;
  for (int i = 0; i < m->nworkers; i++) {
    worker_t *w = &m->w[i];
    w->rng0 = o->seed * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)m->rank << 32 | (uint64_t)i);
    if ((rc = au_worker_spawn(node, &(au_worker_opts_t){step, w}, NULL)) != 0) {
      snprintf(err, errlen, "spawning worker %d: %s", i, au_strerror(rc));
      kge_free(m);
      return rc;
    }
  }
  *out = m;
  return 0;
nomem:
  snprintf(err, errlen, "out of memory building the model");
  kge_free(m);
  return AU_ENOMEM;
}

static double cpu_seconds(void)
{
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

#define SUMS 16

int kge_epoch(kge_t *m, int e, kge_epoch_t *out)
{
  m->epoch = e;
  for (int i = 0; i < m->nworkers; i++) {
    worker_t *w = &m->w[i];
    w->loss = 0, w->done = 0, w->pos = 0;
    w->head = w->count = 0;
    /* a new order and negatives each epoch, pure functions of (seed, epoch, node,
     * worker): a run resumed at epoch e trains as the uninterrupted one did */
    uint64_t x = m->o.seed ^ ((uint64_t)e * 0xd1342543de82ef95ULL) ^ w->rng0;
    w->rng = w->rng0 ^ ((uint64_t)(e + 1) * 0x9e3779b97f4a7c15ULL);
    for (size_t j = 0; j < w->ntrip; j++) w->trip[j] = (uint32_t)(w->tfirst + j * w->tstride);
    for (size_t j = w->ntrip; j > 1; j--) {
      size_t r = (size_t)(kg_uniform(&x) * (double)j), t;
      if (r >= j) r = j - 1;
      t = w->trip[j - 1], w->trip[j - 1] = w->trip[r], w->trip[r] = (uint32_t)t;
    }
  }
  au_node_stats_t before, after;
  au_node_stats(m->node, &before);
  const uint64_t t0 = au_now_ns();
  const double c0 = cpu_seconds();
  int rc = au_node_run(m->node);
  out->seconds = (double)(au_now_ns() - t0) / 1e9;
  double v[SUMS] = {0};
  v[2] = cpu_seconds() - c0;
  if (rc != 0) return rc;
  au_node_stats(m->node, &after);
  for (int i = 0; i < m->nworkers; i++) v[0] += m->w[i].loss, v[1] += (double)m->w[i].done;
  v[3] = (double)(after.rows_local - before.rows_local);
  v[4] = (double)(after.rows_remote - before.rows_remote);
  v[5] = (double)(after.intents - before.intents);
  v[6] = (double)(after.moves_in - before.moves_in);
  v[7] = (double)after.replicas;
  v[8] = (double)(after.bytes_sent - before.bytes_sent);
  v[9] = (double)(after.bytes_fetch - before.bytes_fetch);
  v[10] = (double)(after.bytes_push - before.bytes_push);
  v[11] = (double)(after.bytes_move - before.bytes_move);
  v[12] = (double)(after.bytes_replica - before.bytes_replica);
  v[13] = (double)(after.bytes_control - before.bytes_control);
  if (m->ids) {
    au_ids_stats_t is;
    au_ids_stats(m->ids, &is);
    v[14] = (double)is.rows, v[15] = (double)(is.evicted + is.expired);
  }
  if ((rc = au_allreduce_sum(au_node_runtime(m->node), v, SUMS)) != 0) return rc;
  out->triples = (uint64_t)v[1];
  out->loss = v[1] > 0 ? v[0] / (2 * v[1]) : 0;
  out->cpu_seconds = v[2];
  out->triples_per_s = out->seconds > 0 ? v[1] / out->seconds : 0;
  out->local = v[3] + v[4] > 0 ? v[3] / (v[3] + v[4]) : 1;
  out->intents = (uint64_t)v[5];
  out->moves = (uint64_t)v[6];
  out->replicas = (uint64_t)v[7];
  out->bytes_sent = (uint64_t)v[8];
  for (int i = 0; i < 5; i++) out->bytes_by[i] = (uint64_t)v[9 + i];
  out->entity_rows = (uint64_t)v[14];
  out->entity_evicted = (uint64_t)v[15];
  return 0;
}

int kge_gather(kge_t *m, float **ent, float **rel)
{
  const size_t d = m->dim, ne = (size_t)m->nent * d, n = ne + (size_t)m->nrel * d;
  double *v = calloc(n, sizeof(double));
  float *row = malloc(d * sizeof(float));
  float *fe = malloc(ne * sizeof(float)), *fr = malloc((n - ne) * sizeof(float));
  int rc = v && row && fe && fr ? 0 : AU_ENOMEM; /* (the others then wait in the allreduce) */
  for (uint32_t k = 0; !rc && m->ids && k < m->nent; k++) { /* this node's ids */
    const uint64_t id = m->g->ent.id[k];
    if (au_ids_owner(m->ids, id) != m->rank) continue;
    if ((rc = au_ids_read(m->ids, &id, 1, row)) != 0) break; /* not a use */
    for (size_t j = 0; j < d; j++) v[k * d + j] = row[j];
  }
  for (int t = m->ids ? 1 : 0; !rc && t < 2; t++) {
    au_table_t *tb = t == 0 ? m->ent : m->rel;
    const uint32_t keys = t == 0 ? m->nent : m->nrel;
    double *base = t == 0 ? v : v + ne;
    for (au_key_t k = 0; !rc && k < keys; k++) {
      if (au_table_owns(tb, k) != 1) continue;
      if ((rc = au_table_read(tb, &k, 1, row)) != 0) break;
      for (size_t j = 0; j < d; j++) base[k * d + j] = row[j];
    }
  }
  if (!rc || rc == AU_ENOMEM) {
    int ar = au_allreduce_sum(au_node_runtime(m->node), v ? v : (double[1]){0}, v ? n : 1);
    if (!rc) rc = ar;
  }
  if (!rc) {
    for (size_t i = 0; i < ne; i++) fe[i] = (float)v[i];
    for (size_t i = ne; i < n; i++) fr[i - ne] = (float)v[i];
    *ent = fe, *rel = fr;
    fe = fr = NULL;
  }
  free(v), free(row), free(fe), free(fr);
  return rc;
}

typedef struct eval_job {
  const kge_t *m;
  const float *ent, *rel;
  const kg_triples_t *tr;
  size_t from, n, stride;
  double sums[4]; /* 1/rank, hits at 1, 3, 10 */
  uint64_t ranks;
  int rc, made; /* made: a thread of its own was started (joined even if it failed) */
} eval_job_t;

static void *eval_thread(void *arg)
{
  eval_job_t *j = arg;
  const kge_t *m = j->m;
  float *scratch = malloc(m->nent * sizeof(float));
  if (!scratch) {
    j->rc = AU_ENOMEM;
    return NULL;
  }
  for (size_t i = j->from; i < j->n; i += j->stride) {
    uint64_t r[2];
    kge_ranks(m->o.model, m->o.rank, j->ent, m->nent, j->rel, &m->known, &j->tr->v[i], scratch,
              &r[0], &r[1]);
    for (int s = 0; s < 2; s++) {
      j->sums[0] += 1.0 / (double)r[s];
      j->sums[1] += r[s] <= 1;
      j->sums[2] += r[s] <= 3;
      j->sums[3] += r[s] <= 10;
      j->ranks++;
    }
  }
  free(scratch);
  return NULL;
}

int kge_evaluate(kge_t *m, const kg_triples_t *triples, size_t n, int threads, kge_eval_t *out)
{
  const uint64_t t0 = au_now_ns();
  if (n > triples->n) n = triples->n;
  int rc = 0;
  if (!m->known_built) {
    const kg_triples_t *lists[3] = {&m->g->train, &m->g->valid, &m->g->test};
    rc = kg_set_build(&m->known, lists, 3) ? AU_ENOMEM : 0;
    m->known_built = rc == 0;
  }
  float *ent = NULL, *rel = NULL;
  const int grc = kge_gather(m, &ent, &rel); /* collective, whatever rc says */
  if (!rc) rc = grc;
  if (threads < 1) threads = 1;
  eval_job_t *jobs = calloc((size_t)threads, sizeof(eval_job_t));
  pthread_t *tid = calloc((size_t)threads, sizeof(pthread_t));
  if (!rc && (!jobs || !tid)) rc = AU_ENOMEM;
  double v[6] = {0};
  if (!rc) {
    /* triple i goes to node i % nodes, and within it to thread (i / nodes) % threads */
    const size_t stride = (size_t)m->nodes * (size_t)threads;
    for (int t = 0; t < threads; t++) {
      jobs[t] = (eval_job_t){.m = m,
                             .ent = ent,
                             .rel = rel,
                             .tr = triples,
                             .from = (size_t)m->rank + (size_t)m->nodes * (size_t)t,
                             .n = n,
                             .stride = stride};
      if (t > 0 && pthread_create(&tid[t], NULL, eval_thread, &jobs[t]) != 0)
        jobs[t].rc = AU_ENOMEM;
      else
        jobs[t].made = t > 0;
    }
    eval_thread(&jobs[0]);
    for (int t = 1; t < threads; t++)
      if (jobs[t].made) pthread_join(tid[t], NULL);
    for (int t = 0; t < threads; t++) {
      if (jobs[t].rc && !rc) rc = jobs[t].rc;
      for (int s = 0; s < 4; s++) v[s] += jobs[t].sums[s];
      v[4] += (double)jobs[t].ranks;
    }
  }
  v[5] = rc != 0;
  const int ar = au_allreduce_sum(au_node_runtime(m->node), v, 6);
  if (!rc) rc = ar;
  if (!rc && v[5] > 0) rc = AU_ENOMEM; /* another node failed */
  free(jobs), free(tid), free(ent), free(rel);
  if (rc) return rc;
  *out = (kge_eval_t){.mrr = v[4] > 0 ? v[0] / v[4] : 0,
                      .hits1 = v[4] > 0 ? v[1] / v[4] : 0,
                      .hits3 = v[4] > 0 ? v[2] / v[4] : 0,
                      .hits10 = v[4] > 0 ? v[3] / v[4] : 0,
                      .ranks = (uint64_t)v[4],
                      .seconds = (double)(au_now_ns() - t0) / 1e9};
  return 0;
}

/* Writes path (a temporary name: the caller renames it), flushed to the disk. */
static int save_names(const kg_names_t *names, uint32_t dim, const float *x, const char *path,
                      char *err, size_t errlen)
{
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  for (uint32_t i = 0; i < names->n; i++) {
    fputs(names->name[i], f);
    for (uint32_t j = 0; j < dim; j++) fprintf(f, "\t%.9g", x[(size_t)i * dim + j]);
    fputc('\n', f);
  }
  const int e = cli_close_synced(f);
  if (e) {
    snprintf(err, errlen, "%s: %s", path, strerror(e));
    return -1;
  }
  return 0;
}

int kge_save(const kg_graph_t *g, uint32_t dim, const float *ent, const float *rel, const char *dir,
             char *err, size_t errlen)
{
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "%s: %s", dir, strerror(errno));
    return -1;
  }
  /* both files whole under temporary names first, then renamed: a save that fails
     (a full disk) leaves the previous one as it was */
  char et[4200], rt[4200], ep[4200], rp[4200];
  snprintf(et, sizeof(et), "%s/entities.tsv.tmp", dir);
  snprintf(rt, sizeof(rt), "%s/relations.tsv.tmp", dir);
  snprintf(ep, sizeof(ep), "%s/entities.tsv", dir);
  snprintf(rp, sizeof(rp), "%s/relations.tsv", dir);
  if (save_names(&g->ent, dim, ent, et, err, errlen) != 0 ||
      save_names(&g->rel, dim, rel, rt, err, errlen) != 0) {
    remove(et), remove(rt);
    return -1;
  }
  if (rename(et, ep) != 0 || rename(rt, rp) != 0) {
    snprintf(err, errlen, "%s: %s", dir, strerror(errno));
    remove(et), remove(rt);
    return -1;
  }
  return 0;
}
