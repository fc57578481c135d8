/* shard.c — reading a ratings file on a cluster, each node its share (shard.h). */
#include "shard.h"

#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHARD_PORT ((au_port_t)0x4d46) /* a user port ("MF"), below AU_PORT_RESERVED */
#define BATCH      8192                /* ratings per message (128 KiB) */
#define EXACT_IDS  (1ull << 53)        /* ids travel as doubles through the allreduce */

enum { T_TRAIN = 1, T_TEST = 2, T_DONE = 3 };

/* A rating as it travels to its row's node: the row's file id, the dense column. */
typedef struct rec {
  uint64_t row;
  uint32_t col;
  float v;
} rec_t;

/* A node's ratings as they come: 12 bytes each (the row as its index in the store's own
 * map of file ids, first seen first), in chunks of their own pages (mmap: each one's
 * memory goes back when it is freed, whatever malloc's thresholds are), with no copy and
 * no slack of a doubling array. */
#define CHUNK 87381 /* ratings per chunk: about 1 MiB */
typedef struct store {
  mf_rating_t **chunk;
  size_t nchunks, capchunks, n;
  mf_idmap_t rows; /* file id -> the index the ratings hold */
} store_t;

static void chunk_free(mf_rating_t *c)
{
  if (c) munmap(c, CHUNK * sizeof(mf_rating_t));
}

static int st_push(store_t *st, const rec_t *r, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    uint32_t row;
    if (mf_idmap_insert(&st->rows, r[i].row, &row) != 0) return -1;
    if (st->n == st->nchunks * CHUNK) {
      if (st->nchunks == st->capchunks) {
        size_t cap = st->capchunks ? 2 * st->capchunks : 16;
        mf_rating_t **c = realloc(st->chunk, cap * sizeof(*c));
        if (!c) return -1;
        st->chunk = c;
        st->capchunks = cap;
      }
      void *p = mmap(NULL, CHUNK * sizeof(mf_rating_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return -1;
      st->chunk[st->nchunks++] = p;
    }
    st->chunk[st->n / CHUNK][st->n % CHUNK] = (mf_rating_t){row, r[i].col, r[i].v};
    st->n++;
  }
  return 0;
}

static void st_free(store_t *st)
{
  for (size_t i = 0; i < st->nchunks; i++) chunk_free(st->chunk[i]);
  free(st->chunk);
  mf_idmap_free(&st->rows);
  *st = (store_t){0};
}

typedef struct batch {
  rec_t r[BATCH];
  size_t n;
} batch_t;

typedef struct shard {
  au_runtime_t *rt;
  int rank, nodes;
  const mf_shard_in_t *in;
  int which;          /* the file being read: 0 training, 1 --test */
  mf_idmap_t *colmap; /* pass 1: this part's training columns; pass 2: all, dense */
  store_t own[2];     /* the parser's: this node's rows it read itself */
  store_t got[2];     /* the receiver's: this node's rows the others read */
  batch_t **out[2];   /* per node: the batch being filled for it */
  size_t skipped;     /* held-out ratings of a column training does not have */
  int dones;          /* nodes that said they sent everything (receiver) */
  int failed;         /* AU_ENOMEM / AU_EPROTO seen by the receiver */
} shard_t;

/* The node that owns the row with this file id. */
static int owner_of(uint64_t row_id, int nodes)
{
  return (int)(mf_hash64(row_id ^ 0x726f77ull) % (uint64_t)nodes);
}

/* 1 if a rating of the training file is held out (by its ids, whatever part it is in). */
static int held_out(const shard_t *s, uint64_t row, uint64_t col)
{
  if (s->in->test || s->in->test_ratio <= 0) return 0;
  uint64_t h = mf_hash64(mf_hash64(row ^ mf_hash64(s->in->seed)) ^ col);
  return (double)(h >> 11) * 0x1p-53 < s->in->test_ratio;
}

static void rx(au_actor_t *self, void *state, au_msg_t *m)
{
  (void)self;
  shard_t *s = *(shard_t **)state;
  if (!s) return; /* after the read: nothing more is for it */
  if (m->type == T_TRAIN || m->type == T_TEST) {
    if (m->len % sizeof(rec_t))
      s->failed = AU_EPROTO;
    else if (st_push(&s->got[m->type - T_TRAIN], (const rec_t *)(const void *)m->data,
                     m->len / sizeof(rec_t)) != 0) /* 16-byte aligned data, 16-byte records */
      s->failed = AU_ENOMEM;
  } else if (m->type == T_DONE && ++s->dones == s->nodes - 1) {
    au_runtime_stop(s->rt); /* every node's ratings for this one are in */
  }
}

static int flush(shard_t *s, int which, int to)
{
  batch_t *b = s->out[which][to];
  if (!b || !b->n) return 0;
  int rc = au_send_to(s->rt, (uint32_t)to, SHARD_PORT, (uint32_t)(T_TRAIN + which), b->r,
                      b->n * sizeof(rec_t));
  b->n = 0;
  return rc ? MF_EIO : 0;
}

/* pass 1: the training columns of this part */
static int on_col(void *arg, uint64_t row, uint64_t col, float v)
{
  (void)v;
  shard_t *s = arg;
  uint32_t idx;
  if (held_out(s, row, col)) return 0;
  return mf_idmap_insert(s->colmap, col, &idx) == 0 ? 0 : MF_ENOMEM;
}

/* pass 2: each rating to its row's node */
static int on_rating(void *arg, uint64_t row, uint64_t col, float v)
{
  shard_t *s = arg;
  const int which = s->which ? 1 : held_out(s, row, col);
  uint32_t c;
  if (!mf_idmap_find(s->colmap, col, &c)) { /* held out, of a column training lacks */
    s->skipped++;
    return 0;
  }
  const rec_t x = {row, c, v};
  const int to = owner_of(row, s->nodes);
  if (to == s->rank) return st_push(&s->own[which], &x, 1) ? MF_ENOMEM : 0;
  batch_t **b = &s->out[which][to];
  if (!*b && !(*b = calloc(1, sizeof(batch_t)))) return MF_ENOMEM;
  (*b)->r[(*b)->n++] = x;
  return (*b)->n == BATCH ? flush(s, which, to) : 0;
}

static int cmp_u64(const void *a, const void *b)
{
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The distinct values of ids[0..n), sorted, in place; their count. */
static size_t sort_unique(uint64_t *ids, size_t n)
{
  if (!n) return 0;
  qsort(ids, n, sizeof(*ids), cmp_u64);
  size_t k = 1;
  for (size_t i = 1; i < n; i++)
    if (ids[i] != ids[k - 1]) ids[k++] = ids[i];
  return k;
}

/* Index of id in sorted[0..n), or -1. */
static long find_u64(const uint64_t *sorted, size_t n, uint64_t id)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && sorted[lo] == id ? (long)lo : -1;
}

static void *run_thread(void *arg)
{
  shard_t *s = arg;
  intptr_t rc = au_runtime_run(s->rt);
  return (void *)rc;
}

/* Every node's training column ids, sorted and numbered the same on every node. 0 or an
 * AU_* error (*big: an id of 2^53 or more somewhere). */
static int gather_columns(shard_t *s, const mf_idmap_t *mine, int bad, uint64_t **cols_out,
                          size_t *ncols_out, int *anybad, int *big)
{
  const int N = s->nodes;
  double *cnt = calloc((size_t)N + 2, sizeof(double));
  if (!cnt) return AU_ENOMEM;
  cnt[s->rank] = (double)mine->n;
  cnt[N] = bad ? 1 : 0;
  for (size_t i = 0; i < mine->n; i++)
    if (mine->ids[i] >= EXACT_IDS) cnt[N + 1] = 1;
  int rc = au_allreduce_sum(s->rt, cnt, (size_t)N + 2);
  size_t total = 0, at = 0;
  for (int r = 0; r < N; r++) {
    if (r < s->rank) at += (size_t)cnt[r];
    total += (size_t)cnt[r];
  }
  *anybad = cnt[N] > 0;
  *big = cnt[N + 1] > 0;
  free(cnt);
  if (rc) return rc;
  double *all = calloc(total ? total : 1, sizeof(double));
  uint64_t *cols = malloc((total ? total : 1) * sizeof(uint64_t));
  if (!all || !cols) rc = AU_ENOMEM; /* the others then wait in the allreduce: a lost job */
  if (!rc) {
    for (size_t i = 0; i < mine->n; i++) all[at + i] = (double)mine->ids[i];
    rc = au_allreduce_sum(s->rt, all, total);
  }
  if (!rc) {
    for (size_t i = 0; i < total; i++) cols[i] = (uint64_t)all[i];
    *ncols_out = sort_unique(cols, total);
    *cols_out = cols;
    cols = NULL;
  }
  free(all);
  free(cols);
  return rc;
}

int mf_shard_load(au_node_t *node, const mf_shard_in_t *in, mf_shard_out_t *out, char *err,
                  size_t errlen)
{
  memset(out, 0, sizeof(*out));
  err[0] = '\0';
  shard_t s = {.rt = au_node_runtime(node),
               .rank = au_node_rank(node),
               .nodes = au_node_nodes(node),
               .in = in};
  const int N = s.nodes;
  s.out[0] = calloc((size_t)N, sizeof(batch_t *));
  s.out[1] = calloc((size_t)N, sizeof(batch_t *));
  au_actor_t *a = NULL;
  int rc = s.out[0] && s.out[1] ? 0 : AU_ENOMEM;
  if (!rc) rc = au_actor_spawn(s.rt, rx, sizeof(shard_t *), &a);
  if (!rc) {
    *(shard_t **)au_actor_state(a) = &s;
    rc = au_port_register(s.rt, SHARD_PORT, a);
  }
  if (rc) {
    snprintf(err, errlen, "reading the ratings across the cluster: %s", au_strerror(rc));
    free(s.out[0]), free(s.out[1]);
    return 1;
  }

  /* pass 1: the columns of this node's part of the training file, then everyone's. A bad
   * line is this node's to report; the others learn of it from the allreduce. */
  char why[512] = "";
  mf_idmap_t mine = {0}, colmap = {0};
  s.colmap = &mine;
  int bad =
      mf_load_part(in->train, in->format, s.rank, N, on_col, &s, NULL, NULL, why, sizeof(why));
  uint64_t *cols = NULL;
  size_t ncols = 0;
  int anybad = 0, big = 0;
  rc = gather_columns(&s, &mine, bad, &cols, &ncols, &anybad, &big);
  mf_idmap_free(&mine);
  if (!rc && big && !bad) {
    snprintf(why, sizeof(why), "%s: column ids of 2^53 and more cannot be read in parts",
             in->train);
    bad = MF_ERANGE;
  }
  for (size_t c = 0; !rc && !anybad && !big && c < ncols; c++) {
    uint32_t idx;
    if (mf_idmap_insert(&colmap, cols[c], &idx) != 0) rc = AU_ENOMEM; /* idx == c */
  }
  /* pass 2 (everyone or no one: the failure is known everywhere now): each rating to its
   * row's node, while this node's run takes the others' as they come */
  uint64_t mm[2] = {0, 0}, nnz[2] = {0, 0}; /* Matrix Market: entries read, declared */
  if (!rc && !anybad && !big) {
    s.colmap = &colmap;
    pthread_t th;
    double ready = 0; /* every node's port is there before any node sends to it */
    rc = au_allreduce_sum(s.rt, &ready, 1);
    if (!rc && pthread_create(&th, NULL, run_thread, &s) != 0) rc = AU_ENOMEM;
    if (!rc) {
      bad = mf_load_part(in->train, in->format, s.rank, N, on_rating, &s, &mm[0], &nnz[0], why,
                         sizeof(why));
      if (!bad && in->test) {
        s.which = 1;
        bad = mf_load_part(in->test, in->format, s.rank, N, on_rating, &s, &mm[1], &nnz[1], why,
                           sizeof(why));
      }
      int sent = 0;
      for (int which = 0; which < 2 && !sent; which++)
        for (int to = 0; to < N && !sent; to++)
          if (to != s.rank) sent = flush(&s, which, to);
      for (int to = 0; to < N; to++) /* even after a failure: the others wait for it */
        if (to != s.rank) au_send_to(s.rt, (uint32_t)to, SHARD_PORT, T_DONE, NULL, 0);
      void *run = NULL;
      pthread_join(th, &run);
      if (!bad && sent) bad = sent;
      rc = run ? (int)(intptr_t)run : s.failed;
    }
  }
  *(shard_t **)au_actor_state(a) = NULL;
  for (int which = 0; which < 2; which++) {
    for (int to = 0; to < N; to++) free(s.out[which][to]);
    free(s.out[which]);
  }

  /* this node's rows: the k-th in the sorted order of their training ids is g = k * N +
   * rank (the stores number their rows as they came) */
  uint64_t *rids = NULL;
  size_t nr = 0, nids = s.own[0].rows.n + s.got[0].rows.n;
  const int failed_here = bad || rc;
  if (!rc && !anybad) {
    rids = malloc((nids ? nids : 1) * sizeof(uint64_t));
    if (!rids) rc = AU_ENOMEM;
    for (size_t i = 0; rids && i < s.own[0].rows.n; i++) rids[i] = s.own[0].rows.ids[i];
    for (size_t i = 0; rids && i < s.got[0].rows.n; i++)
      rids[s.own[0].rows.n + i] = s.got[0].rows.ids[i];
    if (rids) nr = sort_unique(rids, nids);
  }
  /* who failed, the most rows a node has (a sum of one-hots), Matrix Market entries */
  double *per = calloc((size_t)N + 3, sizeof(double));
  if (!per) rc = rc ? rc : AU_ENOMEM;
  if (per && !anybad) {
    per[s.rank] = (double)nr;
    per[N] = failed_here;
    per[N + 1] = (double)mm[0], per[N + 2] = (double)mm[1];
    int ar = au_allreduce_sum(s.rt, per, (size_t)N + 3);
    if (ar && !rc) rc = ar;
  }
  for (int which = 0; which < 2 && per && !rc && !anybad && !(per[N] > 0); which++)
    if (nnz[which] && (uint64_t)per[N + 1 + which] != nnz[which]) { /* known everywhere */
      snprintf(why, sizeof(why), "%s: expected %llu entries (its size line), got %llu in all",
               which ? in->test : in->train, (unsigned long long)nnz[which],
               (unsigned long long)per[N + 1 + which]);
      bad = MF_EPARSE;
    }
  uint32_t maxrows = 0;
  for (int r = 0; per && r < N; r++)
    if (per[r] > maxrows) maxrows = (uint32_t)per[r];
  const int others_failed = anybad || (per && per[N] > 0 && !bad && !rc);
  if (!rc && others_failed) rc = AU_EPROTO;
  free(per);

  if (!rc && !bad) {
    out->ncols = (uint32_t)ncols;
    out->nrows = maxrows * (uint32_t)N;
    out->cols = (mf_idmap_t){.ids = cols, .n = ncols, .cap = ncols};
    cols = NULL;
    /* the rows of the other nodes, and this node's beyond its own (g = k * N + rank for
     * every node up to the most rows a node has): MF_NO_ID, left out of --save */
    uint64_t *rowids = malloc((out->nrows ? out->nrows : 1) * sizeof(uint64_t));
    if (!rowids) rc = AU_ENOMEM;
    for (size_t g = 0; rowids && g < out->nrows; g++) rowids[g] = MF_NO_ID;
    for (size_t k = 0; !rc && k < nr; k++) rowids[k * (size_t)N + (size_t)s.rank] = rids[k];
    out->rows = (mf_idmap_t){.ids = rowids, .n = out->nrows, .cap = out->nrows};
  }
  for (int which = 0; which < 2 && !rc && !bad; which++) {
    mf_ratings_t *dst = which ? &out->test : &out->train;
    if (mf_ratings_reserve(dst, s.own[which].n + s.got[which].n) != 0) rc = AU_ENOMEM;
    for (int src = 0; !rc && src < 2; src++) {
      store_t *st = src ? &s.got[which] : &s.own[which];
      /* the store's row index -> k (-1: a held-out rating of a row training lacks) */
      long *k = malloc((st->rows.n ? st->rows.n : 1) * sizeof(long));
      if (!k) rc = AU_ENOMEM;
      for (size_t i = 0; k && i < st->rows.n; i++) k[i] = find_u64(rids, nr, st->rows.ids[i]);
      for (size_t i = 0; !rc && i < st->n; i++) {
        const mf_rating_t *x = &st->chunk[i / CHUNK][i % CHUNK];
        if (k[x->row] < 0)
          s.skipped++;
        else if (mf_ratings_push(dst, (uint32_t)((size_t)k[x->row] * (size_t)N + (size_t)s.rank),
                                 x->col, x->value) != 0)
          rc = AU_ENOMEM;
        if (i % CHUNK == CHUNK - 1 || i + 1 == st->n) { /* a chunk done: its memory goes */
          chunk_free(st->chunk[i / CHUNK]);
          st->chunk[i / CHUNK] = NULL;
        }
      }
      free(k);
    }
  }
  free(rids);
  mf_idmap_free(&colmap);
  free(cols);
  for (int which = 0; which < 2; which++) st_free(&s.own[which]), st_free(&s.got[which]);
  double n[3] = {(double)out->train.n, (double)out->test.n, (double)s.skipped};
  if (!rc && !bad) rc = au_allreduce_sum(s.rt, n, 3);
  if (!rc && !bad) {
    out->train_total = (size_t)n[0];
    out->test_total = (size_t)n[1];
    out->test_skipped = (size_t)n[2];
    return 0;
  }
  if (bad && why[0])
    snprintf(err, errlen, "%s", why);
  else if (others_failed)
    snprintf(err, errlen, "%s: another node could not read its part of the file", in->train);
  else
    snprintf(err, errlen, "reading the ratings across the cluster: %s", au_strerror(rc));
  mf_shard_free(out);
  return bad || others_failed ? 2 : 1;
}

void mf_shard_free(mf_shard_out_t *out)
{
  mf_ratings_free(&out->train);
  mf_ratings_free(&out->test);
  mf_idmap_free(&out->rows);
  mf_idmap_free(&out->cols);
}
