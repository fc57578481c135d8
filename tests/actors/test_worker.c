/* test_worker.c — worker actors through the public API: W workers pushing commuting
 * exact updates give the same final values as a serial reference; barriers order
 * phases; pause/resume across au_node_run; errors, deadlock and misuse are reported; a
 * consistency bound holds a fast worker back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/runtime/check.h"

#include "augur.h"

enum { W = 8, K = 500, D = 4, NUPD = 20000, BATCH = 64 };

typedef struct {
  au_table_t *ti, *tf;
  au_key_t keys[NUPD];
  int32_t di[NUPD][D];
  float df[NUPD][D];
  size_t pos;
  int phase; /* 0: updates, 1: after the barrier */
  int32_t seen_after_barrier;
  uint64_t intents;
} shard_t;

static uint64_t rng(uint64_t *s)
{
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static int shard_step(au_worker_t *w, void *arg)
{
  shard_t *s = arg;
  if (s->phase == 1) {
    /* after the barrier every worker's phase-0 pushes are visible */
    au_key_t k = 0;
    int32_t row[D];
    CHECK((au_worker_pull(w, s->ti, &k, 1, row)) == (0));
    s->seen_after_barrier = row[0];
    return AU_DONE;
  }
  if (s->pos == NUPD) {
    int rc = au_worker_barrier(w);
    if (rc == AU_EAGAIN) return AU_WAIT;
    CHECK((rc) == (0));
    s->phase = 1;
    return AU_CONTINUE;
  }
  size_t n = NUPD - s->pos < BATCH ? NUPD - s->pos : BATCH;
  const au_key_t *keys = &s->keys[s->pos];
  /* announce the next batch's keys one clock ahead, as a real worker would */
  if (s->pos + n < NUPD) {
    size_t m = NUPD - s->pos - n < BATCH ? NUPD - s->pos - n : BATCH;
    CHECK((au_worker_intent(w, s->ti, keys + n, m, au_worker_clock(w) + 1,
                            au_worker_clock(w) + 2)) == (0));
    s->intents++;
  }
  au_view_t v;
  CHECK((au_view_acquire(w, s->ti, keys, n, &v)) == (0));
  for (size_t i = 0; i < n; i++) {
    CHECK((au_view_row(&v, i)) != NULL);
    au_view_update(&v, i, s->di[s->pos + i]);
  }
  au_view_release(w, &v);
  CHECK((au_worker_push(w, s->tf, keys, n, s->df[s->pos])) == (0));
  s->pos += n;
  au_worker_advance(w);
  return AU_CONTINUE;
}

static void test_workers_match_serial_reference(void **state)
{
  (void)state;
  au_node_t *node;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 2}, &node), 0);
  au_table_t *ti, *tf;
  assert_int_equal(
      au_table_create(node, &(au_table_opts_t){.keys = K, .dim = D, .type = AU_I32, .group = 8},
                      &ti),
      0);
  assert_int_equal(
      au_table_create(node, &(au_table_opts_t){.keys = K, .dim = D, .type = AU_F32, .group = 8},
                      &tf),
      0);
  static shard_t shards[W];
  static int64_t ref_i[K][D];
  static double ref_f[K][D];
  memset(ref_i, 0, sizeof(ref_i));
  memset(ref_f, 0, sizeof(ref_f));
  uint64_t seed = 12345;
  for (int w = 0; w < W; w++) {
    shard_t *s = &shards[w];
    memset(s, 0, sizeof(*s));
    s->ti = ti;
    s->tf = tf;
    for (int u = 0; u < NUPD; u++) {
      /* skewed keys: key 0 is hit by everyone, often */
      uint64_t r = rng(&seed);
      s->keys[u] = (r & 7) == 0 ? 0 : r % K;
      for (int j = 0; j < D; j++) {
        s->di[u][j] = (int32_t)(rng(&seed) % 201) - 100;
        s->df[u][j] = (float)((int)(rng(&seed) % 17) - 8) * 0.125f; /* exact in float */
        ref_i[s->keys[u]][j] += s->di[u][j];
        ref_f[s->keys[u]][j] += s->df[u][j];
      }
    }
    /* key 0, column 0 also counts the pushes of phase 0, to check the barrier */
    assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){shard_step, s}, NULL), 0);
  }
  assert_int_equal(au_node_run(node), 0);
  assert_checks(); /* what the steps checked, now that the run is over */

  int32_t vi[K * D];
  float vf[K * D];
  au_key_t keys[K];
  for (int k = 0; k < K; k++) keys[k] = (au_key_t)k;
  assert_int_equal(au_table_read(ti, keys, K, vi), 0);
  assert_int_equal(au_table_read(tf, keys, K, vf), 0);
  int bad = 0;
  for (int k = 0; k < K; k++)
    for (int j = 0; j < D; j++) {
      bad += vi[k * D + j] != ref_i[k][j];
      bad += vf[k * D + j] != (float)ref_f[k][j];
    }
  assert_int_equal(bad, 0);
  au_node_stats_t st;
  au_node_stats(node, &st);
  uint64_t intents = 0;
  for (int w = 0; w < W; w++) intents += shards[w].intents;
  /* every update row twice (view, push), plus one pull per worker after the barrier */
  assert_int_equal(st.rows_local, (uint64_t)W * NUPD * 2 + W);
  assert_int_equal(st.rows_remote, 0);
  assert_int_equal(st.intents, intents);
  assert_true(st.steps >= (uint64_t)W * (NUPD / BATCH));
  for (int w = 0; w < W; w++) {
    assert_int_equal(shards[w].phase, 1);
    assert_int_equal(shards[w].seen_after_barrier, ref_i[0][0]);
    assert_true(shards[w].intents > 0);
  }
  au_node_destroy(node);
}

/* --- pause and resume ---------------------------------------------------------------- */

typedef struct {
  int steps, runs_seen;
} pauser_t;

static int pause_step(au_worker_t *w, void *arg)
{
  pauser_t *p = arg;
  p->steps++;
  au_worker_advance(w);
  if (p->steps % 10 == 0) return p->steps == 30 ? AU_DONE : AU_PAUSE;
  return AU_CONTINUE;
}

static void test_pause_resumes_in_next_run(void **state)
{
  (void)state;
  au_node_t *node;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 2}, &node), 0);
  pauser_t p[3] = {{0}};
  au_worker_t *ws[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){pause_step, &p[i]}, &ws[i]), 0);
    assert_int_equal(au_worker_id(ws[i]), i);
  }
  for (int run = 1; run <= 3; run++) {
    assert_int_equal(au_node_run(node), 0);
    assert_checks(); /* what the steps checked, now that the run is over */
    for (int i = 0; i < 3; i++) {
      assert_int_equal(p[i].steps, 10 * run);
      assert_int_equal(au_worker_clock(ws[i]), 10 * run);
    }
  }
  assert_int_equal(au_node_run(node), 0); /* all done: nothing runs */
  assert_checks();
  for (int i = 0; i < 3; i++) assert_int_equal(p[i].steps, 30);
  au_node_destroy(node);
}

/* --- errors --------------------------------------------------------------------------- */

static int waits_forever(au_worker_t *w, void *arg)
{
  (void)w;
  (void)arg;
  return AU_WAIT;
}

static int fails(au_worker_t *w, void *arg)
{
  (void)w;
  (void)arg;
  return AU_ENOMEM;
}

static int keeps_view(au_worker_t *w, void *arg)
{
  au_view_t v;
  au_key_t k = 1;
  CHECK((au_view_acquire(w, arg, &k, 1, &v)) == (0));
  return AU_DONE; /* forgot au_view_release */
}

static int bad_keys(au_worker_t *w, void *arg)
{
  au_table_t *t = arg;
  au_key_t k = au_table_keys(t);
  au_view_t v;
  float row[2];
  CHECK((au_view_acquire(w, t, &k, 1, &v)) == (AU_ERANGE));
  CHECK((au_worker_pull(w, t, &k, 1, row)) == (AU_ERANGE));
  CHECK((au_worker_push(w, t, &k, 1, row)) == (AU_ERANGE));
  CHECK((au_worker_intent(w, t, &k, 1, 0, 1)) == (AU_ERANGE));
  k = 0;
  CHECK((au_worker_intent(w, t, &k, 1, 5, 5)) == (AU_EINVAL));
  return AU_DONE;
}

static void test_errors_are_reported(void **state)
{
  (void)state;
  au_node_t *node;
  au_table_t *t;
  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 2}, &node), 0);
  assert_int_equal(
      au_table_create(node, &(au_table_opts_t){.keys = 4, .dim = 2, .type = AU_F32}, &t), 0);
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){bad_keys, t}, NULL), 0);
  assert_int_equal(au_node_run(node), 0);
  assert_checks(); /* what the steps checked, now that the run is over */
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){waits_forever, NULL}, NULL), 0);
  assert_int_equal(au_node_run(node), AU_EDEADLK);
  assert_checks(); /* what the steps checked, now that the run is over */
  au_node_destroy(node);

  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 2}, &node), 0);
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){fails, NULL}, NULL), 0);
  assert_int_equal(au_node_run(node), AU_ENOMEM);
  assert_checks(); /* what the steps checked, now that the run is over */
  au_node_destroy(node);

  assert_int_equal(au_node_create(&(au_node_opts_t){.threads = 2}, &node), 0);
  assert_int_equal(
      au_table_create(node, &(au_table_opts_t){.keys = 4, .dim = 2, .type = AU_F32}, &t), 0);
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){keeps_view, t}, NULL), 0);
  assert_int_equal(au_node_run(node), AU_EINVAL);
  assert_checks(); /* what the steps checked, now that the run is over */
  assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){NULL, NULL}, NULL), AU_EINVAL);
  au_node_destroy(node);
}

/* Consistency on one node: a fast worker and a slow one (it takes SLOW steps per clock);
 * whenever the fast one passes au_worker_sync at clock c, the slow one has finished clock
 * c - S - 1, so its clock is at least c - S. */
enum { CLOCKS = 40, SLOW = 30 };
typedef struct pacer {
  int slow;
  _Atomic int64_t *slow_clock; /* the slow worker's clock, published after each advance */
  int64_t worst;               /* the fast one: least (slow clock - own clock) at a pass */
  int steps;
} pacer_t;

static int pace_step(au_worker_t *w, void *arg)
{
  pacer_t *p = arg;
  if (au_worker_clock(w) >= CLOCKS) return AU_DONE;
  if (au_worker_sync(w) == AU_EAGAIN) return AU_WAIT;
  if (p->slow) {
    if (++p->steps % SLOW) return AU_CONTINUE;
    au_worker_advance(w);
    atomic_store(p->slow_clock, au_worker_clock(w));
    return AU_CONTINUE;
  }
  int64_t lead = atomic_load(p->slow_clock) - au_worker_clock(w);
  if (lead < p->worst) p->worst = lead;
  au_worker_advance(w);
  return AU_CONTINUE;
}

static void test_consistency_bound(void **state)
{
  (void)state;
  au_consistency_t c;
  int s;
  char name[24];
  assert_int_equal(au_consistency_parse("ssp:3", &c, &s), 0);
  assert_true(c == AU_SSP && s == 3);
  assert_string_equal(au_consistency_name(c, s, name, sizeof(name)), "ssp:3");
  assert_int_equal(au_consistency_parse("bsp", &c, &s), 0);
  assert_true(c == AU_BSP && s == 0);
  assert_int_equal(au_consistency_parse("async", &c, &s), 0);
  assert_true(c == AU_ASYNC);
  const char *bad[] = {"ssp", "ssp:", "ssp:-1", "ssp:2x", "ssp:1000001", "BSP", ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(au_consistency_parse(bad[i], &c, &s), AU_EINVAL);
  au_node_t *node;
  assert_int_equal(au_node_create(&(au_node_opts_t){.consistency = 7}, &node), AU_EINVAL);
  const int staleness[] = {0, 2};
  for (int i = 0; i < 2; i++) {
    const au_node_opts_t o = {
        .threads = 2, .consistency = staleness[i] ? AU_SSP : AU_BSP, .staleness = staleness[i]};
    assert_int_equal(au_node_create(&o, &node), 0);
    au_table_t *t;
    /* relocation needs async: parameter actors do not move under a bound */
    assert_int_equal(
        au_table_create(
            node,
            &(au_table_opts_t){.keys = 4, .dim = 1, .type = AU_I32, .place = AU_PLACE_RELOCATE},
            &t),
        AU_EINVAL);
    _Atomic int64_t slow_clock = 0;
    pacer_t fast = {.slow_clock = &slow_clock, .worst = INT64_MAX},
            slow = {.slow = 1, .slow_clock = &slow_clock};
    assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){pace_step, &fast}, NULL), 0);
    assert_int_equal(au_worker_spawn(node, &(au_worker_opts_t){pace_step, &slow}, NULL), 0);
    assert_int_equal(au_node_run(node), 0);
    assert_true(fast.worst >= -staleness[i]);
    au_node_stats_t st;
    au_node_stats(node, &st);
    assert_true(st.reads_waited > 0); /* the fast one had to wait */
    au_node_destroy(node);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_workers_match_serial_reference),
      cmocka_unit_test(test_pause_resumes_in_next_run),
      cmocka_unit_test(test_errors_are_reported),
      cmocka_unit_test(test_consistency_bound),
  };
  return cmocka_run_group_tests_name("worker", tests, NULL, NULL);
}
