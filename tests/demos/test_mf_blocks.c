/* test_mf_blocks.c — augur-mf's grid (grid.h) and block scheduler (blocksched.h).
 *
 * The grid: every kept rating lands in exactly one cell, in its block, with its column
 * among the block's keys; cells by row, 16 rows taking turns; balanced blocks hold similar
 * loads.
 * The scheduler, under stress: threads take and put blocks (holding several at once, as
 * workers that reserve ahead do) while a checker records every block held; it fails if two
 * threads ever hold blocks that share a row block or a column block, or if an epoch visits
 * a rating other than exactly once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "blocksched.h"
#include "data.h"
#include "grid.h"

/* Ratings with skewed rows and columns (the low indices popular, a power law), as real
 * data has. */
static void make_ratings(mf_ratings_t *r, uint32_t rows, uint32_t cols, size_t n, uint64_t seed)
{
  mf_rng_t rng;
  mf_rng_seed(&rng, seed);
  for (size_t i = 0; i < n; i++) {
    uint64_t x = mf_rng_next(&rng);
    double u = (double)(x & 0xffffff) / 0x1p24, v = (double)(x >> 24 & 0xffffff) / 0x1p24;
    uint32_t row = (uint32_t)(rows * u * u), col = (uint32_t)(cols * v * v * v);
    assert_int_equal(mf_ratings_push(r, row, col, (float)(x >> 48) / 1e3f), 0);
  }
}

/* (global row, column, value) of every cell of g, from the grid's own maps' inverses. */
typedef struct triple {
  uint32_t row, col;
  float value;
} triple_t;

static int cmp_triple(const void *a, const void *b)
{
  const triple_t *x = a, *y = b;
  if (x->row != y->row) return x->row < y->row ? -1 : 1;
  if (x->col != y->col) return x->col < y->col ? -1 : 1;
  return (x->value > y->value) - (x->value < y->value);
}

static void check_grid(uint32_t nodes, uint32_t rank, uint32_t rb_rows, uint32_t cb_cols,
                       int balanced)
{
  const uint32_t rows = 3000, cols = 700;
  mf_ratings_t in = {0}, copy = {0};
  make_ratings(&in, rows, cols, 50000, 7 + rank);
  assert_int_equal(mf_ratings_reserve(&copy, in.n), 0);
  memcpy(copy.r, in.r, in.n * sizeof(mf_rating_t));
  copy.n = in.n;
  const uint32_t lrows = (rows - rank + nodes - 1) / nodes;
  uint32_t *rc = calloc(lrows, 4), *cc = calloc(cols, 4), *rmap = malloc(lrows * 4),
           *cmap = malloc(cols * 4), *rinv = malloc(lrows * 4), *cinv = malloc(cols * 4);
  for (size_t i = 0; i < in.n; i++) {
    cc[in.r[i].col]++;
    if (in.r[i].row % nodes == rank) rc[in.r[i].row / nodes]++;
  }
  assert_int_equal(mf_grid_balance(rc, lrows, rb_rows, 1, rmap), 0);
  assert_int_equal(mf_grid_balance(cc, cols, cb_cols, 2, cmap), 0);
  for (uint32_t i = 0; i < lrows; i++) rinv[rmap[i]] = i;
  for (uint32_t i = 0; i < cols; i++) cinv[cmap[i]] = i;
  mf_grid_t g;
  mf_grid_opts_t o = {.nodes = nodes,
                      .rank = rank,
                      .nrows = lrows,
                      .ncols = cols,
                      .rb_rows = rb_rows,
                      .cb_cols = cb_cols,
                      .row_map = balanced ? rmap : NULL,
                      .col_map = balanced ? cmap : NULL,
                      .consume = 1};
  assert_int_equal(mf_grid_build(&g, &o, &in), 0);
  assert_int_equal(in.n, 0); /* consumed */
  assert_null(in.r);

  /* every kept rating in exactly one cell: the multisets agree */
  size_t kept = 0;
  for (size_t i = 0; i < copy.n; i++) kept += copy.r[i].row % nodes == rank;
  assert_int_equal(g.n, kept);
  triple_t *want = malloc(kept * sizeof(triple_t)), *got = malloc(kept * sizeof(triple_t));
  for (size_t i = 0, k = 0; i < copy.n; i++)
    if (copy.r[i].row % nodes == rank)
      want[k++] = (triple_t){copy.r[i].row, copy.r[i].col, copy.r[i].value};
  size_t k = 0;
  uint64_t load_max = 0, load_sum = 0;
  for (size_t b = 0; b < mf_grid_blocks(&g); b++) {
    const uint32_t rb = (uint32_t)(b % g.nrb), cb = (uint32_t)(b / g.nrb);
    const size_t nk = g.koff[b + 1] - g.koff[b];
    for (size_t j = 0; j < nk; j++) { /* keys ascending, inside the column block */
      assert_true(g.keys[g.koff[b] + j] / cb_cols == cb);
      if (j) assert_true(g.keys[g.koff[b] + j] > g.keys[g.koff[b] + j - 1]);
    }
    /* by row, 16 rows taking turns: rows begin in ascending order, at most 16 are begun
     * and not finished at any point, and a row's ratings follow one another with the
     * others of its turn in between (each row's cells from its first to its last) */
    int64_t *first = malloc(g.rb_rows * sizeof(int64_t)), *last = malloc(g.rb_rows * 8);
    for (uint32_t r = 0; r < g.rb_rows; r++) first[r] = last[r] = -1;
    for (size_t i = g.start[b]; i < g.start[b + 1]; i++) {
      const uint32_t r = g.cells[i].row;
      assert_true(r < g.rb_rows);
      if (first[r] < 0) first[r] = (int64_t)i;
      last[r] = (int64_t)i;
    }
    int64_t prev_first = -1;
    for (uint32_t r = 0; r < g.rb_rows; r++) {
      if (first[r] < 0) continue;
      assert_true(first[r] > prev_first);
      prev_first = first[r];
    }
    for (size_t i = g.start[b]; i < g.start[b + 1]; i++) {
      int open = 0;
      for (uint32_t r = 0; r < g.rb_rows; r++)
        open += first[r] >= 0 && first[r] <= (int64_t)i && last[r] >= (int64_t)i;
      assert_true(open <= 16);
    }
    free(first);
    free(last);
    for (size_t i = g.start[b]; i < g.start[b + 1]; i++) {
      const mf_cell_t *c = &g.cells[i];
      assert_true(c->col < nk);
      uint32_t l = rb * rb_rows + c->row, key = (uint32_t)g.keys[g.koff[b] + c->col];
      assert_true(l < lrows);
      uint32_t local = balanced ? rinv[l] : l, col = balanced ? cinv[key] : key;
      got[k++] = (triple_t){local * nodes + rank, col, c->value};
    }
  }
  for (uint32_t cb = 0; cb < g.ncb; cb++) {
    uint64_t load = 0;
    for (uint32_t rb = 0; rb < g.nrb; rb++)
      load += g.start[cb * g.nrb + rb + 1] - g.start[cb * g.nrb + rb];
    load_sum += load;
    if (load > load_max) load_max = load;
  }
  assert_int_equal(k, kept);
  qsort(want, kept, sizeof(triple_t), cmp_triple);
  qsort(got, kept, sizeof(triple_t), cmp_triple);
  assert_memory_equal(want, got, kept * sizeof(triple_t));
  /* balanced: the heaviest column block is near the average (the hot columns spread) */
  print_message("grid nodes=%u rank=%u blocks=%ux%u balanced=%d heaviest column block %.2f x avg\n",
                nodes, rank, g.nrb, g.ncb, balanced, (double)load_max * g.ncb / (double)load_sum);
  /* balanced: the heaviest column block holds at most an average block plus the most
   * rated column (LPT's bound); unbalanced, the popular low columns share one block */
  uint32_t top = 0;
  for (uint32_t c = 0; c < cols; c++)
    if (cc[c] > top) top = cc[c];
  if (balanced)
    assert_true((double)load_max <= (double)load_sum / g.ncb + top);
  else if (g.ncb > 1)
    assert_true((double)load_max > (double)load_sum / g.ncb + top); /* the bound bites */
  mf_grid_free(&g);
  free(want), free(got), free(rc), free(cc), free(rmap), free(cmap), free(rinv), free(cinv);
  mf_ratings_free(&copy);
}

static void test_grid_keeps_every_rating(void **state)
{
  (void)state;
  check_grid(1, 0, 256, 64, 0);
  check_grid(1, 0, 256, 64, 1);
  check_grid(3, 2, 100, 32, 1);   /* a node of a cluster, uneven last blocks */
  check_grid(2, 0, 5000, 700, 1); /* one block */
}

static void test_grid_rejects_bad_spans(void **state)
{
  (void)state;
  mf_ratings_t in = {0};
  mf_grid_t g;
  mf_grid_opts_t o = {.nodes = 1, .nrows = 10, .ncols = 10, .rb_rows = 0, .cb_cols = 4};
  assert_int_equal(mf_grid_build(&g, &o, &in), MF_EINVAL);
  o.rb_rows = MF_GRID_MAX_SPAN + 1;
  assert_int_equal(mf_grid_build(&g, &o, &in), MF_EINVAL);
}

/* ---- the scheduler under stress ----------------------------------------------------- */

#define MAXW 6

typedef struct stress {
  mf_sched_t s;
  const mf_grid_t *g;
  uint32_t nrb, ncb;
  int workers, ahead;
  atomic_int *row_by, *col_by; /* worker + 1 holding it, 0 = nobody */
  atomic_int *row_n, *col_n;   /* blocks held there */
  atomic_uint *visits;         /* per cell, this epoch */
  atomic_int violations, busy;
  int back;
} stress_t;

typedef struct wargs {
  stress_t *st;
  int id;
  uint32_t *cols;
} wargs_t;

static void hold(stress_t *st, int w, long b)
{
  const uint32_t rb = (uint32_t)b % st->nrb, cb = (uint32_t)b / st->nrb;
  int by = atomic_load(&st->row_by[rb]);
  if (atomic_load(&st->row_n[rb]) > 0 && by != w + 1) atomic_fetch_add(&st->violations, 1);
  by = atomic_load(&st->col_by[cb]);
  if (atomic_load(&st->col_n[cb]) > 0 && by != w + 1) atomic_fetch_add(&st->violations, 1);
  atomic_store(&st->row_by[rb], w + 1);
  atomic_store(&st->col_by[cb], w + 1);
  atomic_fetch_add(&st->row_n[rb], 1);
  atomic_fetch_add(&st->col_n[cb], 1);
}

/* Cleared before the scheduler frees the ranges: the checker never lags behind it. */
static void unhold(stress_t *st, long b)
{
  const uint32_t rb = (uint32_t)b % st->nrb, cb = (uint32_t)b / st->nrb;
  if (atomic_fetch_sub(&st->row_n[rb], 1) == 1) atomic_store(&st->row_by[rb], 0);
  if (atomic_fetch_sub(&st->col_n[cb], 1) == 1) atomic_store(&st->col_by[cb], 0);
}

static void *stress_worker(void *arg)
{
  wargs_t *a = arg;
  stress_t *st = a->st;
  mf_walk_t walk = {.cols = a->cols,
                    .row0 = (uint32_t)a->id * st->nrb / (uint32_t)st->workers,
                    .back = st->back,
                    .worker = a->id};
  long held[1 + 8];
  int nheld = 0;
  for (;;) {
    /* top up: the block walked and up to `ahead` reserved */
    int done = 0;
    while (nheld < 1 + st->ahead) {
      long b = mf_sched_take(&st->s, &walk);
      if (b < 0) {
        done = b == MF_SCHED_DONE;
        if (b == MF_SCHED_BUSY) atomic_fetch_add(&st->busy, 1);
        break;
      }
      hold(st, a->id, b);
      held[nheld++] = b;
    }
    if (nheld == 0) {
      if (done) break; /* nothing is left to take */
      continue;
    }
    /* walk the oldest: visit its cells */
    long b = held[0];
    for (size_t i = st->g->start[b]; i < st->g->start[b + 1]; i++)
      atomic_fetch_add(&st->visits[i], 1);
    unhold(st, b);
    mf_sched_put(&st->s, a->id, (uint32_t)b);
    memmove(held, held + 1, (size_t)(--nheld) * sizeof(long));
  }
  return NULL;
}

static void stress(uint32_t nrb_rows, uint32_t cb_cols, int workers, int ahead)
{
  const uint32_t rows = 2000, cols = 600;
  mf_ratings_t in = {0};
  make_ratings(&in, rows, cols, 40000, 99);
  mf_grid_t g;
  mf_grid_opts_t o = {.nodes = 1,
                      .nrows = rows,
                      .ncols = cols,
                      .rb_rows = nrb_rows,
                      .cb_cols = cb_cols,
                      .consume = 1};
  assert_int_equal(mf_grid_build(&g, &o, &in), 0);
  const size_t nb = mf_grid_blocks(&g);
  size_t *len = malloc(nb * sizeof(size_t));
  for (size_t b = 0; b < nb; b++) len[b] = g.start[b + 1] - g.start[b];
  stress_t st = {.g = &g, .nrb = g.nrb, .ncb = g.ncb, .workers = workers, .ahead = ahead};
  assert_int_equal(mf_sched_init(&st.s, g.nrb, g.ncb, len, workers), 0);
  st.row_by = calloc(g.nrb, sizeof(atomic_int));
  st.row_n = calloc(g.nrb, sizeof(atomic_int));
  st.col_by = calloc(g.ncb, sizeof(atomic_int));
  st.col_n = calloc(g.ncb, sizeof(atomic_int));
  st.visits = calloc(g.n ? g.n : 1, sizeof(atomic_uint));
  uint32_t *cols_of[MAXW];
  for (int w = 0; w < workers; w++) {
    cols_of[w] = malloc(g.ncb * sizeof(uint32_t));
    for (uint32_t c = 0; c < g.ncb; c++)
      cols_of[w][c] = (c + (uint32_t)w * g.ncb / (uint32_t)workers) % g.ncb;
  }
  for (int epoch = 0; epoch < 6; epoch++) {
    st.back = epoch % 2;
    if (epoch) mf_sched_epoch(&st.s);
    for (size_t i = 0; i < g.n; i++) atomic_store(&st.visits[i], 0);
    pthread_t th[MAXW];
    wargs_t a[MAXW];
    for (int w = 0; w < workers; w++) {
      a[w] = (wargs_t){&st, w, cols_of[w]};
      assert_int_equal(pthread_create(&th[w], NULL, stress_worker, &a[w]), 0);
    }
    for (int w = 0; w < workers; w++) pthread_join(th[w], NULL);
    size_t wrong = 0;
    for (size_t i = 0; i < g.n; i++) wrong += atomic_load(&st.visits[i]) != 1;
    assert_int_equal(wrong, 0); /* every rating exactly once per epoch */
    for (uint32_t r = 0; r < g.nrb; r++) assert_int_equal(atomic_load(&st.row_n[r]), 0);
  }
  assert_int_equal(atomic_load(&st.violations), 0);
  print_message("sched blocks=%ux%u workers=%d ahead=%d: 6 epochs, %d busy takes, no overlap\n",
                g.nrb, g.ncb, workers, ahead, atomic_load(&st.busy));
  for (int w = 0; w < workers; w++) free(cols_of[w]);
  free(st.row_by), free(st.row_n), free(st.col_by), free(st.col_n), free(st.visits);
  mf_sched_destroy(&st.s);
  free(len);
  mf_grid_free(&g);
}

static void test_sched_stress(void **state)
{
  (void)state;
  stress(200, 60, 2, 1);   /* 10 x 10 blocks */
  stress(100, 40, 4, 2);   /* 20 x 15, more workers than free lines at times */
  stress(400, 100, 6, 0);  /* 5 x 6: workers must wait for each other */
  stress(2000, 600, 3, 1); /* one block */
}

/* The checker itself: a scheduler that ignored the ranges would be caught. */
static void test_checker_catches_overlap(void **state)
{
  (void)state;
  stress_t st = {.nrb = 2, .ncb = 2};
  atomic_int rb[2] = {0}, rn[2] = {0}, cb[2] = {0}, cn[2] = {0};
  st.row_by = rb, st.row_n = rn, st.col_by = cb, st.col_n = cn;
  hold(&st, 0, 0); /* worker 0: row block 0, column block 0 */
  hold(&st, 0, 1); /* its own: fine */
  assert_int_equal(atomic_load(&st.violations), 0);
  hold(&st, 1, 2); /* worker 1 in column block 1, row block 0: shares worker 0's row block */
  assert_int_equal(atomic_load(&st.violations), 1);
  hold(&st, 1, 1); /* worker 0's block itself: its row block and its column block */
  assert_int_equal(atomic_load(&st.violations), 3);
}

static void test_sched_empty_blocks_and_done(void **state)
{
  (void)state;
  size_t len[4] = {0, 5, 0, 0};
  mf_sched_t s;
  assert_int_equal(mf_sched_init(&s, 2, 2, len, 2), 0);
  uint32_t cols[2] = {0, 1};
  mf_walk_t w0 = {.cols = cols, .worker = 0}, w1 = {.cols = cols, .worker = 1};
  assert_int_equal(mf_sched_take(&s, &w0), 1);
  assert_int_equal(mf_sched_take(&s, &w1), MF_SCHED_DONE); /* the empty blocks count as taken */
  mf_sched_put(&s, 0, 1);
  mf_sched_epoch(&s);
  assert_int_equal(mf_sched_take(&s, &w1), 1);
  mf_sched_destroy(&s);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grid_keeps_every_rating),
      cmocka_unit_test(test_grid_rejects_bad_spans),
      cmocka_unit_test(test_checker_catches_overlap),
      cmocka_unit_test(test_sched_stress),
      cmocka_unit_test(test_sched_empty_blocks_and_done),
  };
  return cmocka_run_group_tests_name("mf_blocks", tests, NULL, NULL);
}
