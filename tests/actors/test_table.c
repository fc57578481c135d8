/* test_table.c — tables and update kernels: options are checked, initial values depend
 * only on (seed, key), exact adds from several threads conserve sums exactly, the
 * Hogwild and custom kernels apply deltas, the memory overhead stays small, and the
 * optimizers follow their formulas with their state in the row, inline or called. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/runtime/check.h"

#include "actors/ps.h"
#include "augur.h"

static au_node_t *node;

static int setup(void **state)
{
  (void)state;
  return au_node_create(&(au_node_opts_t){.threads = 2}, &node);
}

static int teardown(void **state)
{
  (void)state;
  au_node_destroy(node);
  return 0;
}

static void test_bad_options(void **state)
{
  (void)state;
  au_table_t *t;
  au_table_opts_t o = {.keys = 10, .dim = 4, .type = AU_F32};
  assert_int_equal(au_table_create(node, &o, &t), 0);
  au_table_opts_t bad[] = {
      {.keys = 0, .dim = 4, .type = AU_F32},
      {.keys = 10, .dim = 0, .type = AU_F32},
      {.keys = 10, .dim = 4, .type = 7},
      {.keys = 10, .dim = 4, .type = AU_F32, .group = 3},
      {.keys = 10, .dim = 4, .type = AU_F32, .init = AU_INIT_UNIFORM, .init_a = 1, .init_b = 1},
      {.keys = 10, .dim = 4, .type = AU_F32, .kernel = AU_KERNEL_CUSTOM},
      {.keys = 10, .dim = 4, .type = AU_F32, .row_align = 24},
      {.keys = 10, .dim = 4, .type = AU_F32, .row_align = 8192},
      {.keys = 10, .dim = 4, .type = AU_F32, .optim = 9, .lr = 0.1f},
      {.keys = 10, .dim = 4, .type = AU_F32, .optim = AU_OPTIM_SGD},             /* no lr */
      {.keys = 10, .dim = 4, .type = AU_I32, .optim = AU_OPTIM_SGD, .lr = 0.1f}, /* int */
      {.keys = 10,
       .dim = 4,
       .type = AU_F32,
       .optim = AU_OPTIM_ADAGRAD,
       .lr = 0.1f,
       .kernel = AU_KERNEL_CUSTOM,
       .kernel_fn = (au_kernel_fn)1},
      {.keys = 10,
       .dim = 4,
       .type = AU_F32,
       .optim = AU_OPTIM_ADAGRAD,
       .lr = 0.1f,
       .optim_init = -1},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(au_table_create(node, &bad[i], &t), AU_EINVAL);
  au_key_t k = 10;
  float out[4];
  assert_int_equal(au_table_read(t, &k, 1, out), AU_ERANGE);
  /* the hot set: only for a hot table, only its keys; an error changes nothing */
  au_key_t hot[] = {3, 9};
  assert_int_equal(au_table_hot(t, hot, 2), AU_EINVAL); /* classic */
  au_table_t *h;
  o.place = AU_PLACE_HOT;
  assert_int_equal(au_table_create(node, &o, &h), 0);
  assert_int_equal(au_table_hot(h, NULL, 1), AU_EINVAL);
  au_key_t over[] = {3, 10};
  assert_int_equal(au_table_hot(h, over, 2), AU_ERANGE);
  assert_int_equal(au_table_hot(h, hot, 2), 0);
  assert_int_equal(au_table_hot(h, hot, 0), 0); /* back to counting intents */
}

/* splitmix64, as the initializers use it */
static uint64_t ref_splitmix(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void read_all(au_table_t *t, void *out)
{
  uint64_t n = au_table_keys(t);
  au_key_t *keys = malloc(n * sizeof(*keys));
  for (uint64_t k = 0; k < n; k++) keys[k] = k;
  assert_int_equal(au_table_read(t, keys, n, out), 0);
  free(keys);
}

static void test_init_deterministic_per_seed(void **state)
{
  (void)state;
  enum { K = 1000, D = 8 };
  float *a = malloc(K * D * sizeof(float)), *b = malloc(K * D * sizeof(float)),
        *c = malloc(K * D * sizeof(float));
  au_table_t *ta, *tb, *tc;
  au_table_opts_t o = {.keys = K,
                       .dim = D,
                       .type = AU_F32,
                       .init = AU_INIT_NORMAL,
                       .init_a = 1.0,
                       .init_b = 2.0,
                       .seed = 42};
  assert_int_equal(au_table_create(node, &o, &ta), 0);
  o.group = 1; /* a different grouping must not change the values */
  assert_int_equal(au_table_create(node, &o, &tb), 0);
  o.seed = 43;
  assert_int_equal(au_table_create(node, &o, &tc), 0);
  read_all(ta, a);
  read_all(tb, b);
  read_all(tc, c);
  assert_memory_equal(a, b, K * D * sizeof(float));
  assert_memory_not_equal(a, c, K * D * sizeof(float));
  double sum = 0, sq = 0;
  for (int i = 0; i < K * D; i++) sum += a[i], sq += (double)a[i] * a[i];
  double mean = sum / (K * D), sd = sqrt(sq / (K * D) - mean * mean);
  assert_true(fabs(mean - 1.0) < 0.1);
  assert_true(fabs(sd - 2.0) < 0.1);

  au_table_opts_t u = {.keys = K,
                       .dim = D,
                       .type = AU_F32,
                       .init = AU_INIT_UNIFORM,
                       .init_a = -0.5,
                       .init_b = 0.25,
                       .seed = 1};
  assert_int_equal(au_table_create(node, &u, &ta), 0);
  read_all(ta, a);
  for (int i = 0; i < K * D; i++) assert_true(a[i] >= -0.5f && a[i] < 0.25f);
  /* the values are splitmix64's stream from (seed, key), one step a value, to the bit
     (runs are reproducible and the docs' figures rest on them) */
  for (int k = 0; k < K; k++) {
    uint64_t st = 1 ^ ((uint64_t)k * 0xd1342543de82ef95ULL);
    ref_splitmix(&st);
    for (int j = 0; j < D; j++) {
      double unit = ((double)(ref_splitmix(&st) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
      float want = (float)(-0.5 + 0.75 * unit);
      if (memcmp(&want, &a[k * D + j], sizeof(want)) != 0)
        fail_msg("key %d value %d is %.9g, the stream says %.9g", k, j, a[k * D + j], want);
    }
  }

  int32_t *ia = (int32_t *)a;
  au_table_opts_t ci = {.keys = K, .dim = D, .type = AU_I32, .init = AU_INIT_CONST, .init_a = 7};
  assert_int_equal(au_table_create(node, &ci, &ta), 0);
  read_all(ta, ia);
  for (int i = 0; i < K * D; i++) assert_int_equal(ia[i], 7);
  free(a);
  free(b);
  free(c);
}

/* --- exact adds from several threads ---------------------------------------------- */

enum { NT = 4, ROUNDS = 20000, KEYS = 64, DIM = 8 };

typedef struct {
  au_table_t *t;
  int id;
} adder_t;

static void *adder(void *arg)
{
  adder_t *a = arg;
  au_table_t *t = a->t;
  int32_t di[DIM];
  float df[DIM];
  for (int r = 0; r < ROUNDS; r++) {
    au_key_t k = (au_key_t)((r * 7 + a->id) % KEYS); /* every thread hits every key */
    for (int j = 0; j < DIM; j++) {
      di[j] = a->id + j + 1;
      df[j] = 0.25f * (float)(a->id + 1); /* exactly representable, sums stay exact */
    }
    void *row = table_row(t, k);
    if (t->type == AU_I32)
      t->kernel(row, di, DIM, NULL);
    else
      t->kernel(row, df, DIM, NULL);
  }
  return NULL;
}

static void run_adders(au_table_t *t)
{
  pthread_t th[NT];
  adder_t args[NT];
  for (int i = 0; i < NT; i++) {
    args[i] = (adder_t){t, i};
    pthread_create(&th[i], NULL, adder, &args[i]);
  }
  for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
}

static void test_exact_add_conserves_sums(void **state)
{
  (void)state;
  au_table_t *ti, *tf;
  assert_int_equal(
      au_table_create(node, &(au_table_opts_t){.keys = KEYS, .dim = DIM, .type = AU_I32}, &ti), 0);
  assert_int_equal(
      au_table_create(node, &(au_table_opts_t){.keys = KEYS, .dim = DIM, .type = AU_F32}, &tf), 0);
  run_adders(ti);
  run_adders(tf);
  int32_t vi[KEYS * DIM];
  float vf[KEYS * DIM];
  read_all(ti, vi);
  read_all(tf, vf);
  /* expected: thread i adds (i + j + 1) to column j of a key each time it visits it;
   * the visits per (thread, key) are counted exactly as the loop above makes them */
  for (int k = 0; k < KEYS; k++) {
    int64_t ei[DIM] = {0};
    double ef = 0;
    for (int i = 0; i < NT; i++) {
      int visits = 0;
      for (int r = 0; r < ROUNDS; r++) visits += (r * 7 + i) % KEYS == k;
      for (int j = 0; j < DIM; j++) ei[j] += (int64_t)visits * (i + j + 1);
      ef += visits * 0.25 * (i + 1);
    }
    for (int j = 0; j < DIM; j++) {
      assert_int_equal(vi[k * DIM + j], ei[j]);
      assert_true(vf[k * DIM + j] == (float)ef);
    }
  }
}

static void times_two_plus(void *row, const void *delta, uint32_t dim, void *arg)
{
  int32_t *r = row;
  const int32_t *d = delta;
  int32_t extra = *(int32_t *)arg;
  for (uint32_t j = 0; j < dim; j++) r[j] = 2 * r[j] + d[j] + extra;
}

static void test_hogwild_and_custom_kernels(void **state)
{
  (void)state;
  au_table_t *th, *tc;
  assert_int_equal(au_table_create(node,
                                   &(au_table_opts_t){.keys = 4,
                                                      .dim = 5,
                                                      .type = AU_F32,
                                                      .kernel = AU_KERNEL_HOGWILD,
                                                      .init = AU_INIT_CONST,
                                                      .init_a = 1},
                                   &th),
                   0);
  float d[5] = {1, 2, 3, 4, 5};
  th->kernel(table_row(th, 2), d, 5, th->kernel_arg);
  float v[5];
  au_key_t k = 2;
  assert_int_equal(au_table_read(th, &k, 1, v), 0);
  for (int j = 0; j < 5; j++) assert_true(v[j] == 2.0f + (float)j);

  int32_t extra = 100;
  assert_int_equal(au_table_create(node,
                                   &(au_table_opts_t){.keys = 4,
                                                      .dim = 3,
                                                      .type = AU_I32,
                                                      .init = AU_INIT_CONST,
                                                      .init_a = 5,
                                                      .kernel = AU_KERNEL_CUSTOM,
                                                      .kernel_fn = times_two_plus,
                                                      .kernel_arg = &extra},
                                   &tc),
                   0);
  int32_t di[3] = {1, 2, 3}, vi[3];
  tc->kernel(table_row(tc, 1), di, 3, tc->kernel_arg);
  k = 1;
  assert_int_equal(au_table_read(tc, &k, 1, vi), 0);
  for (int j = 0; j < 3; j++) assert_int_equal(vi[j], 10 + j + 1 + 100);
}

static void test_memory_overhead_small(void **state)
{
  (void)state;
  /* 10^7 keys x dim 16 float32: 640 MB of values. Zero-initialized, so calloc maps the
   * pages lazily and the test stays cheap; au_table_memory counts them all. */
  au_table_t *t;
  assert_int_equal(
      au_table_create(node, &(au_table_opts_t){.keys = 10000000, .dim = 16, .type = AU_F32}, &t),
      0);
  size_t raw = (size_t)10000000 * 16 * sizeof(float);
  size_t used = au_table_memory(t);
  print_message("memory: raw=%zu used=%zu ratio=%.4f group=%u\n", raw, used,
                (double)used / (double)raw, au_table_group(t));
  assert_true(used >= raw);
  assert_true((double)used < 1.2 * (double)raw);
}

/* --- optimizers --------------------------------------------------------------------- */

enum { OK = 6, OD = 13 }; /* keys, dim: 13 exercises the loops' tails */

/* The gradient of update u to key k: multiples of 1/8, whose squares sum exactly. */
static float grad(int u, au_key_t k, uint32_t j)
{
  return (float)((int)((u * 7 + (int)k * 3 + (int)j * 5) % 9) - 4) * 0.125f;
}

/* What the optimizer's formula gives after `updates` gradients, in double: values and
 * slots of key k from value v0 and accumulator g0. */
static void expected(au_optim_t o, double lr, double g0, float v0, au_key_t k, int updates,
                     double *val, double *slots)
{
  double G[OD], Grow = g0;
  for (uint32_t j = 0; j < OD; j++) val[j] = v0, G[j] = g0;
  for (int u = 0; u < updates; u++) {
    double ms = 0;
    for (uint32_t j = 0; j < OD; j++) ms += (double)grad(u, k, j) * grad(u, k, j) / OD;
    for (uint32_t j = 0; j < OD; j++) {
      double g = grad(u, k, j);
      if (o == AU_OPTIM_SGD)
        val[j] -= lr * g;
      else if (o == AU_OPTIM_ADAGRAD_ROW)
        val[j] -= lr / sqrt(Grow) * g;
      else if (o == AU_OPTIM_ADAGRAD) {
        G[j] += g * g;
        val[j] -= lr * g / sqrt(G[j]);
      }
    }
    Grow += ms;
  }
  for (uint32_t j = 0; j < OD; j++) slots[j] = o == AU_OPTIM_ADAGRAD_ROW ? Grow : G[j];
}

static void check_formula(au_table_t *t, au_optim_t o, double lr, double g0, float v0, int updates)
{
  float v[OK * OD], sl[OK * OD];
  au_key_t keys[OK];
  for (au_key_t k = 0; k < OK; k++) keys[k] = k;
  assert_int_equal(au_table_read(t, keys, OK, v), 0);
  assert_int_equal(au_table_read_slots(t, keys, OK, sl), 0);
  uint32_t ns = au_table_slots(t);
  for (au_key_t k = 0; k < OK; k++) {
    double ev[OD], es[OD];
    expected(o, lr, g0, v0, k, updates, ev, es);
    for (uint32_t j = 0; j < OD; j++) assert_true(fabs(v[k * OD + j] - ev[j]) < 1e-4);
    /* per value, accumulators are sums of exact squares: exact; per row, means of them */
    for (uint32_t j = 0; j < ns; j++)
      assert_true(o == AU_OPTIM_ADAGRAD ? sl[k * ns + j] == (float)es[j]
                                        : fabs(sl[k * ns + j] - es[j]) < 1e-5 * es[j]);
  }
}

static au_table_t *optim_table(au_optim_t o, au_kernel_t kernel, uint32_t align)
{
  au_table_t *t;
  assert_int_equal(au_table_create(node,
                                   &(au_table_opts_t){.keys = OK,
                                                      .dim = OD,
                                                      .type = AU_F32,
                                                      .init = AU_INIT_CONST,
                                                      .init_a = 0.5,
                                                      .kernel = kernel,
                                                      .optim = o,
                                                      .lr = 0.25f,
                                                      .optim_init = o ? 2.0f : 0,
                                                      .row_align = align},
                                   &t),
                   0);
  return t;
}

/* A home slot given back cleared is taken as zero once, and as not zero after that (an
 * actor arriving then writes every byte); one given back as it was is not zero. */
static void test_home_slot_zero_marks(void **state)
{
  (void)state;
  au_table_t *t;
  au_table_opts_t o = {.keys = 64, .dim = 8, .type = AU_I32, .group = 4};
  assert_int_equal(au_table_create(node, &o, &t), 0);
  int zero = -1;
  void *b = table_values_take(t, 3, &zero);
  assert_ptr_equal(b, t->actors[3].values);
  assert_int_equal(zero, 0);
  table_values_give(t, 3, b, 1);
  assert_ptr_equal(table_values_take(t, 3, &zero), b);
  assert_int_equal(zero, 1);
  assert_ptr_equal(table_values_take(t, 3, &zero), b);
  assert_int_equal(zero, 0);
  table_values_give(t, 5, t->actors[5].values, 1);
  table_values_give(t, 3, b, 0);
  assert_ptr_equal(table_values_take(t, 3, &zero), b);
  assert_int_equal(zero, 0);
  table_values_take(t, 5, &zero);
  assert_int_equal(zero, 1);
}

static void test_optim_layout(void **state)
{
  (void)state;
  au_table_t *t = optim_table(AU_OPTIM_ADAGRAD, AU_KERNEL_HOGWILD, 64);
  assert_int_equal(au_table_slots(t), OD);
  assert_int_equal(t->row_bytes, 128); /* 26 words padded to 64 bytes */
  for (au_key_t k = 0; k < OK; k++) {
    float *row = table_row(t, k);
    assert_int_equal((uintptr_t)row % 64, 0);
    for (uint32_t j = 0; j < OD; j++) {
      assert_true(row[j] == 0.5f);
      assert_true(row[OD + j] == 2.0f); /* the slots follow the values */
    }
  }
  assert_int_equal(au_table_slots(optim_table(AU_OPTIM_ADAGRAD_ROW, AU_KERNEL_ADD, 0)), 1);
  assert_int_equal(au_table_slots(optim_table(AU_OPTIM_SGD, AU_KERNEL_ADD, 0)), 0);
  au_table_t *plain = optim_table(AU_OPTIM_NONE, AU_KERNEL_ADD, 0);
  assert_int_equal(plain->row_bytes, OD * 4); /* no padding by default */
  assert_int_equal(au_table_set_lr(plain, 0.1f), AU_EINVAL);
  assert_int_equal(au_table_set_lr(t, 0), AU_EINVAL);
  assert_int_equal(au_table_set_lr(t, 0.5f), 0);
  au_optim_t o;
  assert_int_equal(au_optim_parse("adagrad-row", &o), 0);
  assert_int_equal(o, AU_OPTIM_ADAGRAD_ROW);
  assert_string_equal(au_optim_name(AU_OPTIM_ADAGRAD), "adagrad");
  assert_int_equal(au_optim_parse("adam", &o), AU_EINVAL);
}

/* table_apply on every optimizer and kernel kind follows the formula. */
static void test_optim_formulas(void **state)
{
  (void)state;
  const au_optim_t optims[] = {AU_OPTIM_SGD, AU_OPTIM_ADAGRAD, AU_OPTIM_ADAGRAD_ROW};
  const au_kernel_t kernels[] = {AU_KERNEL_ADD, AU_KERNEL_HOGWILD};
  for (int oi = 0; oi < 3; oi++)
    for (int ki = 0; ki < 2; ki++) {
      au_table_t *t = optim_table(optims[oi], kernels[ki], 16);
      for (int u = 0; u < 40; u++)
        for (au_key_t k = 0; k < OK; k++) {
          float g[OD];
          for (uint32_t j = 0; j < OD; j++) g[j] = grad(u, k, j);
          table_apply(t, table_row(t, k), g);
        }
      check_formula(t, optims[oi], 0.25, 2.0, 0.5f, 40);
    }
}

/* Workers update through views (inline for Hogwild float tables) and pushes: the same
 * results as the formula. */
typedef struct {
  au_table_t *t;
  int push, u, updates;
} updater_t;

static int update_step(au_worker_t *w, void *arg)
{
  updater_t *s = arg;
  if (s->u == s->updates) return AU_DONE;
  au_key_t keys[OK];
  float g[OK * OD];
  for (au_key_t k = 0; k < OK; k++) {
    keys[k] = k;
    for (uint32_t j = 0; j < OD; j++) g[k * OD + j] = grad(s->u, k, j);
  }
  if (s->push) {
    CHECK((au_worker_push(w, s->t, keys, OK, g)) == (0));
  } else {
    au_view_t v;
    CHECK((au_view_acquire(w, s->t, keys, OK, &v)) == (0));
    for (size_t i = 0; i < OK; i++) au_view_update(&v, i, &g[i * OD]);
    au_view_release(w, &v);
  }
  s->u++;
  return AU_CONTINUE;
}

static void test_optim_views_and_pushes(void **state)
{
  (void)state;
  au_node_t *nd;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 1}, &nd), 0);
  au_node_t *saved = node;
  node = nd; /* optim_table() creates in `node` */
  const au_optim_t optims[] = {AU_OPTIM_NONE, AU_OPTIM_SGD, AU_OPTIM_ADAGRAD, AU_OPTIM_ADAGRAD_ROW};
  updater_t up[4][2][2];
  for (int oi = 0; oi < 4; oi++)
    for (int hog = 0; hog < 2; hog++)
      for (int push = 0; push < 2; push++) {
        up[oi][hog][push] = (updater_t){
            optim_table(optims[oi], hog ? AU_KERNEL_HOGWILD : AU_KERNEL_ADD, hog ? 64 : 0), push, 0,
            25};
        assert_int_equal(
            au_worker_spawn(nd, &(au_worker_opts_t){update_step, &up[oi][hog][push]}, NULL), 0);
      }
  assert_int_equal(au_node_run(nd), 0);
  assert_checks(); /* what the steps checked, now that the run is over */
  for (int oi = 0; oi < 4; oi++)
    for (int hog = 0; hog < 2; hog++)
      for (int push = 0; push < 2; push++) {
        au_table_t *t = up[oi][hog][push].t;
        if (optims[oi] != AU_OPTIM_NONE) {
          check_formula(t, optims[oi], 0.25, 2.0, 0.5f, 25);
          continue;
        }
        /* no optimizer: the updates were deltas, summed */
        float v[OK * OD];
        au_key_t keys[OK];
        for (au_key_t k = 0; k < OK; k++) keys[k] = k;
        assert_int_equal(au_table_read(t, keys, OK, v), 0);
        for (au_key_t k = 0; k < OK; k++)
          for (uint32_t j = 0; j < OD; j++) {
            double e = 0.5;
            for (int u = 0; u < 25; u++) e += grad(u, k, j);
            assert_true(v[k * OD + j] == (float)e);
          }
      }
  node = saved;
  au_node_destroy(nd);
}

/* Exact optimizers from several threads: no accumulator increment is lost. */
static void *optim_adder(void *arg)
{
  au_table_t *t = arg;
  float g[OD];
  for (uint32_t j = 0; j < OD; j++) g[j] = 0.5f; /* mean square 0.25, exact */
  for (int r = 0; r < ROUNDS; r++) table_apply(t, table_row(t, (au_key_t)(r % OK)), g);
  return NULL;
}

static void test_optim_exact_threads(void **state)
{
  (void)state;
  au_table_t *t = optim_table(AU_OPTIM_ADAGRAD_ROW, AU_KERNEL_ADD, 0);
  pthread_t th[NT];
  for (int i = 0; i < NT; i++) pthread_create(&th[i], NULL, optim_adder, t);
  for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
  float sl[OK], v[OK * OD];
  au_key_t keys[OK];
  for (au_key_t k = 0; k < OK; k++) keys[k] = k;
  assert_int_equal(au_table_read_slots(t, keys, OK, sl), 0);
  assert_int_equal(au_table_read(t, keys, OK, v), 0);
  for (au_key_t k = 0; k < OK; k++) {
    int visits = 0;
    for (int r = 0; r < ROUNDS; r++) visits += r % OK == (int)k;
    double G = 2.0 + 0.25 * visits * NT;
    assert_true(sl[k] == (float)G);
    /* every step went down, by at most lr * 0.5 / sqrt(2) and at least the last rate's */
    double most = 0.5 - 0.25 * 0.5 * visits * NT / sqrt(G),
           least = 0.5 - 0.25 * 0.5 / sqrt(2.0) * visits * NT;
    for (uint32_t j = 0; j < OD; j++)
      assert_true(v[k * OD + j] <= most + 1e-3 && v[k * OD + j] >= least - 1e-3);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_init_deterministic_per_seed),
      cmocka_unit_test(test_exact_add_conserves_sums),
      cmocka_unit_test(test_hogwild_and_custom_kernels),
      cmocka_unit_test(test_memory_overhead_small),
      cmocka_unit_test(test_home_slot_zero_marks),
      cmocka_unit_test(test_optim_layout),
      cmocka_unit_test(test_optim_formulas),
      cmocka_unit_test(test_optim_views_and_pushes),
      cmocka_unit_test(test_optim_exact_threads),
  };
  return cmocka_run_group_tests_name("table", tests, setup, teardown);
}
