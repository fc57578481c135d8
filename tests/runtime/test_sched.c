/* test_sched.c — the scheduler and actors through the public API: ping-pong with an
 * exact count, fan-out/fan-in sums, stealing from a skewed start, quiescence, timers in
 * order, an idle runtime using no CPU, explicit stop, actors that stop themselves.
 * Behaviours run on scheduler threads: they CHECK, and the test asserts once the run has
 * returned (tests/runtime/check.h). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "augur.h"
#include "tests/runtime/check.h"

static au_runtime_t *new_rt(int threads)
{
  au_runtime_t *rt;
  assert_int_equal(au_runtime_create(&(au_runtime_opts_t){.threads = threads}, &rt), 0);
  return rt;
}

/* In behaviours: CHECK, not assert (tests/runtime/check.h). */
static uint64_t get_u64(const au_msg_t *m)
{
  uint64_t v = 0;
  CHECK(m->len == sizeof(v));
  if (m->len >= sizeof(v)) memcpy(&v, m->data, sizeof(v));
  return v;
}

/* --- ping-pong ------------------------------------------------------------------ */

typedef struct {
  au_actor_t *peer;
  uint64_t received;
} pp_t;

static void pingpong(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)self;
  pp_t *s = st;
  uint64_t left = get_u64(m);
  s->received++;
  if (left == 0) return;
  left--;
  CHECK(au_send(s->peer, 0, &left, sizeof(left)) == 0);
}

static void test_pingpong_exact(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  au_actor_t *a, *b;
  assert_int_equal(au_actor_spawn(rt, pingpong, sizeof(pp_t), &a), 0);
  assert_int_equal(au_actor_spawn(rt, pingpong, sizeof(pp_t), &b), 0);
  ((pp_t *)au_actor_state(a))->peer = b;
  ((pp_t *)au_actor_state(b))->peer = a;
  uint64_t hops = 2000000; /* 10^6 round trips */
  assert_int_equal(au_send(a, 0, &hops, sizeof(hops)), 0);
  assert_int_equal(au_runtime_run(rt), 0);
  assert_checks(); /* threads joined: what behaviours CHECKed */
  /* hops+1 messages in all: a gets the even-numbered ones */
  assert_int_equal(((pp_t *)au_actor_state(a))->received, hops / 2 + 1);
  assert_int_equal(((pp_t *)au_actor_state(b))->received, hops / 2);
  au_runtime_destroy(rt);
}

/* --- fan-out / fan-in --------------------------------------------------------------- */

enum { FAN_WORKERS = 500, FAN_ROUNDS = 20 };

typedef struct {
  au_actor_t *collector;
} fan_worker_t;

typedef struct {
  uint64_t sum, replies;
} collector_t;

static void fan_worker(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)self;
  fan_worker_t *w = st;
  uint64_t v = get_u64(m) * 3 + 1;
  CHECK(au_send(w->collector, 0, &v, sizeof(v)) == 0);
}

static void collector(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)self;
  collector_t *c = st;
  c->sum += get_u64(m);
  c->replies++;
}

typedef struct {
  au_actor_t **workers;
  int n, rounds;
} fanner_t;

/* Runs on a scheduler thread, so the sends go to its deque and other threads steal. */
static void fanner(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)self;
  (void)m;
  fanner_t *f = st;
  for (int r = 0; r < f->rounds; r++)
    for (uint64_t i = 0; i < (uint64_t)f->n; i++) {
      uint64_t v = i + (uint64_t)r * (uint64_t)f->n;
      CHECK(au_send(f->workers[i], 0, &v, sizeof(v)) == 0);
    }
}

static void test_fanout_fanin_sum(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  au_actor_t *coll, *fan, *workers[FAN_WORKERS];
  assert_int_equal(au_actor_spawn(rt, collector, sizeof(collector_t), &coll), 0);
  for (int i = 0; i < FAN_WORKERS; i++) {
    assert_int_equal(au_actor_spawn(rt, fan_worker, sizeof(fan_worker_t), &workers[i]), 0);
    ((fan_worker_t *)au_actor_state(workers[i]))->collector = coll;
  }
  assert_int_equal(au_actor_spawn(rt, fanner, sizeof(fanner_t), &fan), 0);
  *(fanner_t *)au_actor_state(fan) = (fanner_t){workers, FAN_WORKERS, FAN_ROUNDS};
  assert_int_equal(au_send(fan, 0, NULL, 0), 0);
  assert_int_equal(au_runtime_run(rt), 0);
  assert_checks();

  uint64_t n = (uint64_t)FAN_WORKERS * FAN_ROUNDS;
  collector_t *c = au_actor_state(coll);
  assert_int_equal(c->replies, n);
  assert_int_equal(c->sum, 3 * (n * (n - 1) / 2) + n);

  au_sched_stats_t st[2];
  au_runtime_stats(rt, 2, st);
  assert_int_equal(st[0].msgs + st[1].msgs, 1 + 2 * n);
  au_runtime_destroy(rt);
}

/* --- skewed start: all work spawned by one actor on one thread ------------------------ */

static pthread_t thread_ids[2];
static atomic_int thread_seen[2];
static pthread_mutex_t ids_mu = PTHREAD_MUTEX_INITIALIZER;

static void note_thread(void)
{
  pthread_t me = pthread_self();
  pthread_mutex_lock(&ids_mu);
  for (int i = 0; i < 2; i++) {
    if (atomic_load(&thread_seen[i]) && pthread_equal(thread_ids[i], me)) break;
    if (!atomic_load(&thread_seen[i])) {
      thread_ids[i] = me;
      atomic_store(&thread_seen[i], 1);
      break;
    }
  }
  pthread_mutex_unlock(&ids_mu);
}

static void busy(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)self;
  (void)st;
  (void)m;
  note_thread();
  /* Every busy actor starts in the spawner's deque, so the other thread gets one only by
   * stealing. On a loaded machine it may not get the CPU before this one has run them
   * all: wait (5 s at most) until it has run one, so that the run surely steals. */
  uint64_t deadline = au_now_ns() + 5000000000ull;
  while (!(atomic_load(&thread_seen[0]) && atomic_load(&thread_seen[1])) && au_now_ns() < deadline)
    sched_yield();
  volatile uint64_t x = 0;
  for (int i = 0; i < 200000; i++) x += (uint64_t)i;
  (void)x;
}

static void spawner(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)st;
  (void)m;
  for (int i = 0; i < 200; i++) {
    au_actor_t *b;
    if (au_actor_spawn(au_actor_runtime(self), busy, 0, &b) != 0) {
      CHECK(!"au_actor_spawn failed");
      return;
    }
    CHECK(au_send(b, 0, NULL, 0) == 0);
  }
}

static void test_skewed_work_is_stolen(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  au_actor_t *sp;
  assert_int_equal(au_actor_spawn(rt, spawner, 0, &sp), 0);
  au_send(sp, 0, NULL, 0);
  assert_int_equal(au_runtime_run(rt), 0);
  assert_checks();
  au_sched_stats_t st[2];
  au_runtime_stats(rt, 2, st);
  assert_int_equal(st[0].msgs + st[1].msgs, 201);
  assert_true(st[0].steals + st[1].steals > 0);
  assert_true(st[0].runs > 0 && st[1].runs > 0);
  assert_true(atomic_load(&thread_seen[0]) && atomic_load(&thread_seen[1]));
  au_runtime_destroy(rt);
}

/* --- quiescence, stop, self-stopping actors --------------------------------------- */

static void test_quiescence_empty_and_rerun(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  uint64_t t0 = au_now_ns();
  assert_int_equal(au_runtime_run(rt), 0); /* nothing to do: returns at once */
  assert_checks();
  assert_true(au_now_ns() - t0 < 2000000000ull);
  /* runs again after returning */
  au_actor_t *a, *b;
  au_actor_spawn(rt, pingpong, sizeof(pp_t), &a);
  au_actor_spawn(rt, pingpong, sizeof(pp_t), &b);
  ((pp_t *)au_actor_state(a))->peer = b;
  ((pp_t *)au_actor_state(b))->peer = a;
  uint64_t hops = 1001;
  au_send(a, 0, &hops, sizeof(hops));
  assert_int_equal(au_runtime_run(rt), 0);
  assert_checks();
  assert_int_equal(((pp_t *)au_actor_state(a))->received + ((pp_t *)au_actor_state(b))->received,
                   hops + 1);
  au_send(a, 0, &hops, sizeof(hops));
  assert_int_equal(au_runtime_run(rt), 0);
  assert_checks();
  assert_int_equal(((pp_t *)au_actor_state(a))->received + ((pp_t *)au_actor_state(b))->received,
                   2 * (hops + 1));
  au_runtime_destroy(rt);
}

static void forever(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)m;
  uint64_t *count = st;
  if (++*count == 1000) au_runtime_stop(au_actor_runtime(self));
  CHECK(au_send(self, 0, NULL, 0) == 0);
}

static void test_explicit_stop(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  au_actor_t *a;
  au_actor_spawn(rt, forever, sizeof(uint64_t), &a);
  au_send(a, 0, NULL, 0);
  assert_int_equal(au_runtime_run(rt), 0); /* would never be quiescent */
  assert_checks();
  assert_true(*(uint64_t *)au_actor_state(a) >= 1000);
  au_runtime_destroy(rt); /* frees the actor and its queued message */
}

/* A tree of actors that stop themselves once they have replied (as skynet does). */
typedef struct {
  au_actor_t *parent;
  uint64_t sum;
  int waiting;
} node_t;

typedef struct {
  au_actor_t *parent;
  uint64_t id, depth;
} spawn_t;

enum { T_SPAWN = 1, T_SUM = 2 };

static void tree_node(au_actor_t *self, void *st, au_msg_t *m)
{
  node_t *n = st;
  if (m->type == T_SPAWN) {
    spawn_t sp;
    memcpy(&sp, m->data, sizeof(sp));
    n->parent = sp.parent;
    if (sp.depth == 0) {
      CHECK(au_send(n->parent, T_SUM, &sp.id, sizeof(sp.id)) == 0);
      au_actor_stop(self);
      return;
    }
    n->waiting = 10;
    for (uint64_t i = 0; i < 10; i++) {
      au_actor_t *c;
      if (au_actor_spawn(au_actor_runtime(self), tree_node, sizeof(node_t), &c) != 0) {
        CHECK(!"au_actor_spawn failed");
        n->waiting--;
        continue;
      }
      spawn_t child = {self, sp.id * 10 + i, sp.depth - 1};
      CHECK(au_send(c, T_SPAWN, &child, sizeof(child)) == 0);
    }
    return;
  }
  CHECK(m->sender != NULL); /* sent from a behaviour: sender is set */
  n->sum += get_u64(m);
  if (--n->waiting == 0) {
    au_send(n->parent, T_SUM, &n->sum, sizeof(n->sum));
    au_actor_stop(self);
  }
}

static void test_self_stopping_tree(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  au_actor_t *r, *top;
  au_actor_spawn(rt, collector, sizeof(collector_t), &r);
  au_actor_spawn(rt, tree_node, sizeof(node_t), &top);
  spawn_t sp = {r, 0, 4}; /* 10^4 leaves with ids 0..9999, 11111 actors that stop */
  assert_int_equal(au_send(top, T_SPAWN, &sp, sizeof(sp)), 0);
  assert_int_equal(au_runtime_run(rt), 0);
  assert_checks();
  collector_t *c = au_actor_state(r);
  assert_int_equal(c->replies, 1);
  assert_int_equal(c->sum, 9999ull * 10000 / 2);
  au_runtime_destroy(rt); /* under ASan: a stopped actor not freed would leak */
}

/* --- timers ------------------------------------------------------------------------ */

enum { T_PERIODIC = 100, T_MARKER = 101 };

typedef struct {
  uint32_t order[16];
  int n;
  uint64_t ticks;       /* periodic ticks before the marker */
  uint64_t ticks_after; /* periodic ticks after the marker: the stop did not hold */
  int markers, stop_rc, marker_rc;
  au_timer_id_t periodic;
} timer_log_t;

/* The periodic timer is stopped after its third tick. au_timer_stop takes effect on the
 * I/O thread, so ticks already fired before it got there still arrive: how many is up to
 * the machine's load. What the contract promises is that none fires after the stop has
 * reached the I/O thread. The marker is a one-shot timer armed right after the stop, from
 * the same thread: the I/O thread takes the two commands in that order, so the marker
 * fires after the periodic timer was disarmed, and its message reaches the mailbox behind
 * every tick (both come from the I/O thread, FIFO). A tick after the marker is a bug. */
static void timer_sink(au_actor_t *self, void *st, au_msg_t *m)
{
  timer_log_t *t = st;
  au_runtime_t *rt = au_actor_runtime(self);
  if (m->type == T_PERIODIC) {
    if (t->markers) {
      /* still ticking after the stop: end the run rather than hang */
      if (++t->ticks_after == 3) au_runtime_stop(rt);
      return;
    }
    if (++t->ticks == 3) {
      t->stop_rc = au_timer_stop(rt, t->periodic);
      t->marker_rc = au_timer_start(rt, self, T_MARKER, 0, 0, NULL);
    }
    return;
  }
  if (m->type == T_MARKER) {
    t->markers++;
    return;
  }
  if (t->n < 16) t->order[t->n++] = m->type;
}

static void test_timers_fire_in_order(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  au_actor_t *a;
  au_actor_spawn(rt, timer_sink, sizeof(timer_log_t), &a);
  timer_log_t *log = au_actor_state(a);
  /* armed out of order; must arrive by deadline */
  uint32_t delays[] = {50, 10, 40, 20, 30};
  for (int i = 0; i < 5; i++) {
    au_timer_id_t id;
    assert_int_equal(au_timer_start(rt, a, delays[i], delays[i], 0, &id), 0);
    assert_true(id != 0);
  }
  /* a stopped timer never fires */
  au_timer_id_t cancelled;
  au_timer_start(rt, a, 999, 25, 0, &cancelled);
  assert_int_equal(au_timer_stop(rt, cancelled), 0);
  assert_int_equal(au_timer_stop(rt, 0), AU_EINVAL);
  assert_int_equal(au_timer_start(rt, a, T_PERIODIC, 5, 5, &log->periodic), 0);

  uint64_t t0 = au_now_ns();
  assert_int_equal(au_runtime_run(rt), 0); /* returns once every timer is disarmed */
  assert_checks();
  uint64_t ms = (au_now_ns() - t0) / 1000000;
  assert_int_equal(log->stop_rc, 0);
  assert_int_equal(log->marker_rc, 0);
  assert_true(log->ticks >= 3);
  assert_int_equal(log->markers, 1);
  assert_int_equal(log->ticks_after, 0);
  assert_true(ms >= 45);
  assert_int_equal(log->n, 5);
  for (int i = 0; i < 5; i++) assert_int_equal(log->order[i], 10u * (uint32_t)(i + 1));
  au_runtime_destroy(rt);
}

/* --- idle: parked threads burn no CPU, and wake promptly ------------------------------ */

static double cpu_seconds(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void test_idle_uses_no_cpu(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  au_actor_t *a;
  au_actor_spawn(rt, timer_sink, sizeof(timer_log_t), &a);
  au_timer_id_t id;
  au_timer_start(rt, a, 7, 1000, 0, &id); /* keeps the runtime alive, idle, for 1 s */
  double c0 = cpu_seconds();
  uint64_t t0 = au_now_ns();
  assert_int_equal(au_runtime_run(rt), 0);
  assert_checks();
  double wall = (double)(au_now_ns() - t0) / 1e9, cpu = cpu_seconds() - c0;
  print_message("idle: wall=%.3f s cpu=%.4f s\n", wall, cpu);
  assert_true(wall >= 0.99);
  /* two scheduler threads spinning would burn ~2 s; parked they use almost nothing.
   * The bound leaves room for sanitizer builds and a loaded machine. */
  assert_true(cpu < 0.1);
  assert_int_equal(((timer_log_t *)au_actor_state(a))->n, 1);
  au_runtime_destroy(rt);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pingpong_exact),
      cmocka_unit_test(test_fanout_fanin_sum),
      cmocka_unit_test(test_skewed_work_is_stolen),
      cmocka_unit_test(test_quiescence_empty_and_rerun),
      cmocka_unit_test(test_explicit_stop),
      cmocka_unit_test(test_self_stopping_tree),
      cmocka_unit_test(test_timers_fire_in_order),
      cmocka_unit_test(test_idle_uses_no_cpu),
  };
  return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
