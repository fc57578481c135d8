/* bench_sched.c — scheduler benchmarks for augur, printed as key=value lines:
 * ping-pong between two actors, fan-out from one sender per thread to many receivers
 * (with the same workload on a plain mutex+condvar thread pool as the baseline, measured
 * in the same run), a skynet tree of 1,111,111 actors, and the latency of waking a
 * parked scheduler thread from outside.
 *
 * The invariant: every workload checks its own result (exact counts and sums) and the
 * program exits 1 if one is wrong, so that no number it prints comes from a wrong run.
 */
#include <augur.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define PROG "augur-bench-sched"

#define PINGPONG_ROUNDS 1000000u /* round trips: two messages each */
#define FAN_MSGS        4000000u /* messages over all senders */
#define FAN_RECEIVERS   1000u    /* FAN_MSGS is a multiple, so each gets the same count */
#define FAN_CHUNK       64u      /* messages a sender sends per "go" */
#define FAN_REPS        3        /* runtime and pool runs, interleaved; medians reported */
#define SKYNET_LEAVES   1000000u /* a power of SKYNET_WIDTH */
#define SKYNET_WIDTH    10u
#define WAKE_TRIALS     200
#define WAKE_GAP_NS     2000000u /* idle time before each trial: every thread parks */

enum { MSG_PING = 1, MSG_GO, MSG_ADD, MSG_START, MSG_RESULT, MSG_PROBE, MSG_TICK };

/* A bench cannot go on without a message it meant to send. */
static void must_send(au_actor_t *to, uint32_t type, const void *data, size_t len)
{
  int rc = au_send(to, type, data, len);
  if (rc != 0) {
    fprintf(stderr, PROG ": au_send failed: %s\n", au_strerror(rc));
    exit(1);
  }
}

static au_actor_t *must_spawn(au_runtime_t *rt, au_behaviour_t fn, size_t state_size)
{
  au_actor_t *a;
  int rc = au_actor_spawn(rt, fn, state_size, &a);
  if (rc != 0) {
    fprintf(stderr, PROG ": au_actor_spawn failed: %s\n", au_strerror(rc));
    exit(1);
  }
  return a;
}

static au_runtime_t *must_create(int threads)
{
  au_runtime_t *rt;
  au_runtime_opts_t opts = {.threads = threads};
  int rc = au_runtime_create(&opts, &rt);
  if (rc != 0) {
    fprintf(stderr, PROG ": au_runtime_create(threads=%d) failed: %s\n", threads, au_strerror(rc));
    exit(1);
  }
  return rt;
}

static void must_run(au_runtime_t *rt)
{
  int rc = au_runtime_run(rt);
  if (rc != 0) {
    fprintf(stderr, PROG ": au_runtime_run failed: %s\n", au_strerror(rc));
    exit(1);
  }
}

static double seconds_between(uint64_t t0, uint64_t t1)
{
  return (double)(t1 - t0) / 1e9;
}

/* CPU seconds used by the whole process so far. */
static double cpu_seconds(void)
{
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- ping-pong: A sends n to B, B returns n + 1; A stops at PINGPONG_ROUNDS ---- */

typedef struct pingpong {
  au_actor_t *peer;
  int is_b;         /* B counts the round trips */
  uint64_t handled; /* messages this actor handled */
  uint64_t end_ns;  /* A: when the last round trip came back */
} pingpong_t;

static void pingpong_fn(au_actor_t *self, void *state, au_msg_t *msg)
{
  (void)self;
  pingpong_t *s = state;
  uint64_t n;
  memcpy(&n, msg->data, sizeof(n));
  s->handled++;
  if (s->is_b) {
    n++;
  } else if (n == PINGPONG_ROUNDS) {
    s->end_ns = au_now_ns();
    return;
  }
  must_send(s->peer, MSG_PING, &n, sizeof(n));
}

static int bench_pingpong(int threads, double *msgs_per_s)
{
  au_runtime_t *rt = must_create(threads);
  au_actor_t *a = must_spawn(rt, pingpong_fn, sizeof(pingpong_t));
  au_actor_t *b = must_spawn(rt, pingpong_fn, sizeof(pingpong_t));
  pingpong_t *sa = au_actor_state(a), *sb = au_actor_state(b);
  sa->peer = b;
  sb->peer = a;
  sb->is_b = 1;
  uint64_t zero = 0;
  must_send(a, MSG_PING, &zero, sizeof(zero));
  uint64_t t0 = au_now_ns();
  must_run(rt);
  /* A handled the kick-off plus one message per round trip, B one per round trip. */
  int ok = sa->handled == PINGPONG_ROUNDS + 1u && sb->handled == PINGPONG_ROUNDS && sa->end_ns;
  if (ok) *msgs_per_s = 2.0 * PINGPONG_ROUNDS / seconds_between(t0, sa->end_ns);
  au_runtime_destroy(rt);
  return ok;
}

/* ---- fan-out: message number g (0 <= g < FAN_MSGS) goes to receiver g % R and adds g to
 * its sum. Senders own contiguous ranges of g. ---- */

/* cpu_per_wall witnesses how many cores a run really got: on a shared machine a
 * 2-thread run with cpu_per_wall near 1 ran on one core, which flatters the pool (its
 * lock is then never contended) and says little about either. */
typedef struct fan_result {
  double msgs_per_s;
  double cpu_per_wall;
  int ok;
  uint64_t steals; /* runtime only: summed over its threads */
  double per_turn; /* runtime only: messages per actor turn */
} fan_result_t;

/* Receiver r must have seen c = M / R messages, g = r, r + R, ..., summing to
 * r*c + R*c*(c-1)/2. */
static int fan_check(uint32_t r, uint64_t count, uint64_t sum)
{
  uint64_t c = FAN_MSGS / FAN_RECEIVERS;
  return count == c && sum == r * c + (uint64_t)FAN_RECEIVERS * c * (c - 1) / 2;
}

typedef struct fan_sender {
  au_actor_t **receivers;
  uint64_t next, end; /* the part of g this sender still has to send */
  uint32_t r;         /* next % FAN_RECEIVERS, kept to avoid a division per message */
} fan_sender_t;

typedef struct fan_receiver {
  uint64_t sum, count;
} fan_receiver_t;

static void fan_sender_fn(au_actor_t *self, void *state, au_msg_t *msg)
{
  (void)msg;
  fan_sender_t *s = state;
  for (uint32_t k = 0; k < FAN_CHUNK && s->next < s->end; k++) {
    uint64_t g = s->next++;
    must_send(s->receivers[s->r], MSG_ADD, &g, sizeof(g));
    if (++s->r == FAN_RECEIVERS) s->r = 0;
  }
  /* The rest goes in later turns rather than one loop, so that receivers can run in
   * between. (The runtime handles up to `batch` messages per turn, self-sent ones
   * included: with the default 64, one turn covers up to 64 chunks.) */
  if (s->next < s->end) must_send(self, MSG_GO, NULL, 0);
}

static void fan_receiver_fn(au_actor_t *self, void *state, au_msg_t *msg)
{
  (void)self;
  fan_receiver_t *s = state;
  uint64_t g;
  memcpy(&g, msg->data, sizeof(g));
  s->sum += g;
  s->count++;
}

static fan_result_t bench_fanout(int threads)
{
  fan_result_t res = {0};
  au_runtime_t *rt = must_create(threads);
  int nsend = au_runtime_threads(rt);
  au_actor_t **receivers = calloc(FAN_RECEIVERS, sizeof(*receivers));
  au_actor_t **senders = calloc((size_t)nsend, sizeof(*senders));
  au_sched_stats_t *stats = calloc((size_t)nsend, sizeof(*stats));
  if (!receivers || !senders || !stats) {
    fprintf(stderr, PROG ": out of memory\n");
    exit(1);
  }
  for (uint32_t r = 0; r < FAN_RECEIVERS; r++)
    receivers[r] = must_spawn(rt, fan_receiver_fn, sizeof(fan_receiver_t));
  for (int i = 0; i < nsend; i++) {
    senders[i] = must_spawn(rt, fan_sender_fn, sizeof(fan_sender_t));
    fan_sender_t *s = au_actor_state(senders[i]);
    s->receivers = receivers;
    s->next = (uint64_t)FAN_MSGS * (uint64_t)i / (uint64_t)nsend;
    s->end = (uint64_t)FAN_MSGS * (uint64_t)(i + 1) / (uint64_t)nsend;
    s->r = (uint32_t)(s->next % FAN_RECEIVERS);
  }
  for (int i = 0; i < nsend; i++) must_send(senders[i], MSG_GO, NULL, 0);

  double c0 = cpu_seconds();
  uint64_t t0 = au_now_ns();
  must_run(rt);
  uint64_t t1 = au_now_ns();
  res.cpu_per_wall = (cpu_seconds() - c0) / seconds_between(t0, t1);

  res.ok = 1;
  for (uint32_t r = 0; r < FAN_RECEIVERS; r++) {
    fan_receiver_t *s = au_actor_state(receivers[r]);
    if (!fan_check(r, s->count, s->sum)) res.ok = 0;
  }
  res.msgs_per_s = FAN_MSGS / seconds_between(t0, t1);
  au_runtime_stats(rt, nsend, stats);
  uint64_t runs = 0, msgs = 0;
  for (int i = 0; i < nsend; i++) {
    res.steals += stats[i].steals;
    runs += stats[i].runs;
    msgs += stats[i].msgs;
  }
  res.per_turn = runs ? (double)msgs / (double)runs : 0;
  au_runtime_destroy(rt);
  free(stats);
  free(senders);
  free(receivers);
  return res;
}

/* ---- the baseline: the same fan-out on the thread pool most people would write first.
 *
 * N worker threads share one FIFO of tasks (a growable ring of task structs, so no malloc
 * per task) under one mutex; every submit locks it, appends and signals the condvar. A
 * task either adds a value to one receiver, under that receiver's own mutex (the obvious
 * way to keep a receiver's sum consistent when any worker may run its tasks), or is a
 * sender's "go": submit FAN_CHUNK adds, then submit the sender's next "go" at the back
 * of the queue. The pool is done when no task is queued or running. ---- */

typedef struct mp_task {
  uint32_t is_go; /* 1: sender `who` sends a chunk; 0: add `value` to receiver `who` */
  uint32_t who;
  uint64_t value;
} mp_task_t;

typedef struct mp_receiver {
  _Alignas(64) pthread_mutex_t mu;
  uint64_t sum, count;
} mp_receiver_t;

typedef struct mp_sender {
  uint64_t next, end;
  uint32_t r;
} mp_sender_t;

typedef struct mpool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  mp_task_t *ring; /* tasks [head, head + len) modulo cap */
  size_t cap, head, len;
  uint64_t pending; /* tasks queued or running */
  int done;
  mp_receiver_t *receivers;
  mp_sender_t *senders;
} mpool_t;

static void mp_submit(mpool_t *p, mp_task_t t)
{
  pthread_mutex_lock(&p->mu);
  if (p->len == p->cap) {
    size_t cap = p->cap * 2;
    mp_task_t *ring = malloc(cap * sizeof(*ring));
    if (!ring) {
      fprintf(stderr, PROG ": out of memory growing the pool queue to %zu tasks\n", cap);
      exit(1);
    }
    for (size_t i = 0; i < p->len; i++) ring[i] = p->ring[(p->head + i) % p->cap];
    free(p->ring);
    p->ring = ring;
    p->cap = cap;
    p->head = 0;
  }
  p->ring[(p->head + p->len) % p->cap] = t;
  p->len++;
  p->pending++;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static void mp_execute(mpool_t *p, const mp_task_t *t)
{
  if (!t->is_go) {
    mp_receiver_t *r = &p->receivers[t->who];
    pthread_mutex_lock(&r->mu);
    r->sum += t->value;
    r->count++;
    pthread_mutex_unlock(&r->mu);
    return;
  }
  /* Only one "go" per sender exists at a time, so its state needs no lock. */
  mp_sender_t *s = &p->senders[t->who];
  for (uint32_t k = 0; k < FAN_CHUNK && s->next < s->end; k++) {
    mp_submit(p, (mp_task_t){.is_go = 0, .who = s->r, .value = s->next++});
    if (++s->r == FAN_RECEIVERS) s->r = 0;
  }
  if (s->next < s->end) mp_submit(p, *t);
}

static void *mp_worker(void *arg)
{
  mpool_t *p = arg;
  int ran = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (ran && --p->pending == 0) {
      p->done = 1;
      pthread_cond_broadcast(&p->cv);
    }
    while (p->len == 0 && !p->done) pthread_cond_wait(&p->cv, &p->mu);
    if (p->len == 0) break;
    mp_task_t t = p->ring[p->head];
    p->head = (p->head + 1) % p->cap;
    p->len--;
    pthread_mutex_unlock(&p->mu);
    mp_execute(p, &t);
    ran = 1;
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static fan_result_t bench_mutex_pool(int threads)
{
  fan_result_t res = {0};
  mpool_t p = {.cap = 1024};
  p.ring = malloc(p.cap * sizeof(*p.ring));
  p.receivers = calloc(FAN_RECEIVERS, sizeof(*p.receivers));
  p.senders = calloc((size_t)threads, sizeof(*p.senders));
  pthread_t *tids = calloc((size_t)threads, sizeof(*tids));
  if (!p.ring || !p.receivers || !p.senders || !tids) {
    fprintf(stderr, PROG ": out of memory\n");
    exit(1);
  }
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  for (uint32_t r = 0; r < FAN_RECEIVERS; r++) pthread_mutex_init(&p.receivers[r].mu, NULL);
  for (int i = 0; i < threads; i++) {
    mp_sender_t *s = &p.senders[i];
    s->next = (uint64_t)FAN_MSGS * (uint64_t)i / (uint64_t)threads;
    s->end = (uint64_t)FAN_MSGS * (uint64_t)(i + 1) / (uint64_t)threads;
    s->r = (uint32_t)(s->next % FAN_RECEIVERS);
    mp_submit(&p, (mp_task_t){.is_go = 1, .who = (uint32_t)i});
  }

  double c0 = cpu_seconds();
  uint64_t t0 = au_now_ns();
  int started = 0;
  for (; started < threads; started++)
    if (pthread_create(&tids[started], NULL, mp_worker, &p) != 0) break;
  if (started == 0) {
    fprintf(stderr, PROG ": could not start a single pool thread\n");
    exit(1);
  }
  for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
  uint64_t t1 = au_now_ns();
  res.cpu_per_wall = (cpu_seconds() - c0) / seconds_between(t0, t1);

  res.ok = started == threads;
  for (uint32_t r = 0; r < FAN_RECEIVERS; r++) {
    if (!fan_check(r, p.receivers[r].count, p.receivers[r].sum)) res.ok = 0;
    pthread_mutex_destroy(&p.receivers[r].mu);
  }
  res.msgs_per_s = FAN_MSGS / seconds_between(t0, t1);
  pthread_cond_destroy(&p.cv);
  pthread_mutex_destroy(&p.mu);
  free(tids);
  free(p.senders);
  free(p.receivers);
  free(p.ring);
  return res;
}

static int cmp_fan(const void *a, const void *b)
{
  double x = ((const fan_result_t *)a)->msgs_per_s, y = ((const fan_result_t *)b)->msgs_per_s;
  return (x > y) - (x < y);
}

/* Runs the runtime's fan-out and the pool's FAN_REPS times each, alternating, so that a
 * noisy neighbour hurts both alike; *fan and *pool get the median runs. */
static int bench_fanout_vs_pool(int threads, fan_result_t *fan, fan_result_t *pool)
{
  fan_result_t f[FAN_REPS], p[FAN_REPS];
  int ok = 1;
  for (int i = 0; i < FAN_REPS; i++) {
    f[i] = bench_fanout(threads);
    p[i] = bench_mutex_pool(threads);
    ok &= f[i].ok && p[i].ok;
  }
  qsort(f, FAN_REPS, sizeof(f[0]), cmp_fan);
  qsort(p, FAN_REPS, sizeof(p[0]), cmp_fan);
  *fan = f[FAN_REPS / 2];
  *pool = p[FAN_REPS / 2];
  fan->ok = pool->ok = ok;
  return ok;
}

/* ---- skynet: node (offset, size) spawns SKYNET_WIDTH children over its range; a leaf
 * replies its offset, an inner node the sum of its children's replies; every node stops
 * after replying. The root replies into *out, since no actor sent it its start. ---- */

typedef struct sky_start {
  uint64_t offset, size;
  uint64_t *out;
} sky_start_t;

typedef struct sky_node {
  au_actor_t *parent; /* NULL for the root */
  uint64_t *out;
  uint64_t sum;
  uint32_t pending; /* children that have not replied */
} sky_node_t;

static void sky_reply(au_actor_t *self, sky_node_t *s, uint64_t v)
{
  if (s->parent)
    must_send(s->parent, MSG_RESULT, &v, sizeof(v));
  else
    *s->out = v;
  au_actor_stop(self);
}

static void sky_fn(au_actor_t *self, void *state, au_msg_t *msg)
{
  sky_node_t *s = state;
  if (msg->type == MSG_RESULT) {
    uint64_t v;
    memcpy(&v, msg->data, sizeof(v));
    s->sum += v;
    if (--s->pending == 0) sky_reply(self, s, s->sum);
    return;
  }
  sky_start_t st;
  memcpy(&st, msg->data, sizeof(st));
  s->parent = msg->sender;
  s->out = st.out;
  if (st.size == 1) {
    sky_reply(self, s, st.offset);
    return;
  }
  uint64_t part = st.size / SKYNET_WIDTH;
  au_runtime_t *rt = au_actor_runtime(self);
  s->pending = SKYNET_WIDTH;
  for (uint32_t i = 0; i < SKYNET_WIDTH; i++) {
    au_actor_t *child = must_spawn(rt, sky_fn, sizeof(sky_node_t));
    sky_start_t cs = {.offset = st.offset + i * part, .size = part, .out = st.out};
    must_send(child, MSG_START, &cs, sizeof(cs));
  }
}

static int bench_skynet(int threads, double *ms)
{
  au_runtime_t *rt = must_create(threads);
  uint64_t result = 0;
  au_actor_t *root = must_spawn(rt, sky_fn, sizeof(sky_node_t));
  sky_start_t st = {.offset = 0, .size = SKYNET_LEAVES, .out = &result};
  must_send(root, MSG_START, &st, sizeof(st));
  uint64_t t0 = au_now_ns();
  must_run(rt);
  uint64_t t1 = au_now_ns();
  au_runtime_destroy(rt);
  *ms = (double)(t1 - t0) / 1e6;
  return result == (uint64_t)SKYNET_LEAVES * (SKYNET_LEAVES - 1) / 2;
}

/* ---- wake-up latency: with every scheduler thread parked, the main thread stamps the
 * time and sends; the probe's behaviour stamps it again. An armed timer that never fires
 * keeps the runtime from going quiescent while it idles; au_runtime_run runs on its own
 * thread. ---- */

typedef struct wake {
  uint64_t lat_ns[WAKE_TRIALS];
  atomic_int seen; /* seq of the last probe message handled */
} wake_t;

typedef struct probe_msg {
  uint64_t t0;
  int seq;   /* 1, 2, ...: one per message */
  int trial; /* where the latency goes; -1: not a trial */
} probe_msg_t;

typedef struct probe {
  wake_t *w;
} probe_t;

static void probe_fn(au_actor_t *self, void *state, au_msg_t *msg)
{
  (void)self;
  uint64_t now = au_now_ns();
  if (msg->type != MSG_PROBE) return; /* MSG_TICK, should the far-away timer fire */
  probe_t *s = state;
  probe_msg_t pm;
  memcpy(&pm, msg->data, sizeof(pm));
  if (pm.trial >= 0) s->w->lat_ns[pm.trial] = now - pm.t0;
  /* release: the main thread that reads `seen` sees the latency written above. */
  atomic_store_explicit(&s->w->seen, pm.seq, memory_order_release);
}

static void *run_thread(void *arg)
{
  must_run(arg);
  return NULL;
}

static void sleep_ns(uint64_t ns)
{
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Waits (sleeping, not spinning: the machine may have fewer cores than threads) until
 * the probe has handled message `seq`. */
static void wait_seen(wake_t *w, int seq)
{
  /* acquire: pairs with the probe's release store. */
  while (atomic_load_explicit(&w->seen, memory_order_acquire) != seq) sleep_ns(50000);
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void bench_wake(int threads, double *median_us, double *p90_us)
{
  au_runtime_t *rt = must_create(threads);
  wake_t *w = calloc(1, sizeof(*w));
  if (!w) {
    fprintf(stderr, PROG ": out of memory\n");
    exit(1);
  }
  atomic_init(&w->seen, 0);
  au_actor_t *probe = must_spawn(rt, probe_fn, sizeof(probe_t));
  ((probe_t *)au_actor_state(probe))->w = w;
  au_timer_id_t keepalive;
  int rc = au_timer_start(rt, probe, MSG_TICK, 3600u * 1000u, 0, &keepalive);
  if (rc != 0) {
    fprintf(stderr, PROG ": au_timer_start failed: %s\n", au_strerror(rc));
    exit(1);
  }
  pthread_t runner;
  if (pthread_create(&runner, NULL, run_thread, rt) != 0) {
    fprintf(stderr, PROG ": could not start the runner thread\n");
    exit(1);
  }
  /* The first message only proves that the runtime runs, so that the stop below is not
   * lost (au_runtime_run clears an earlier stop). */
  probe_msg_t warm = {.seq = 1, .trial = -1};
  must_send(probe, MSG_PROBE, &warm, sizeof(warm));
  wait_seen(w, 1);
  for (int i = 0; i < WAKE_TRIALS; i++) {
    sleep_ns(WAKE_GAP_NS);
    probe_msg_t pm = {.seq = i + 2, .trial = i};
    pm.t0 = au_now_ns();
    must_send(probe, MSG_PROBE, &pm, sizeof(pm));
    wait_seen(w, i + 2);
  }
  au_runtime_stop(rt);
  pthread_join(runner, NULL);
  au_timer_stop(rt, keepalive);
  au_runtime_destroy(rt);

  qsort(w->lat_ns, WAKE_TRIALS, sizeof(w->lat_ns[0]), cmp_u64);
  *median_us = (double)w->lat_ns[WAKE_TRIALS / 2] / 1e3;
  *p90_us = (double)w->lat_ns[WAKE_TRIALS * 9 / 10] / 1e3;
  free(w);
}

/* ---- command line ---- */

static void usage(FILE *f)
{
  fprintf(f,
          "usage: " PROG " [--threads N] [--help]\n"
          "\n"
          "Runs augur's scheduler benchmarks and prints key=value lines: ping-pong,\n"
          "fan-out (and the same fan-out on a mutex+condvar thread pool, as a ratio),\n"
          "skynet (1,111,111 actors) and the wake-up latency of a parked thread.\n"
          "Exits 1 if a workload computes a wrong result.\n"
          "\n"
          "Keys: threads, pingpong_msgs_per_s, fanout_msgs_per_s, steals (fan-out),\n"
          "fanout_msgs_per_turn, mutex_pool_fanout_msgs_per_s, ratio_vs_mutex_pool,\n"
          "skynet_ms, wake_latency_us and wake_latency_p90_us, plus *_ok=1|0 checks.\n"
          "Fan-out numbers are medians of %d interleaved runtime/pool runs;\n"
          "*_cpu_per_wall (process CPU time / wall time) shows how many cores a run\n"
          "really got: near 1 on a 2-thread run means a busy machine.\n"
          "\n"
          "  --threads N  scheduler threads (and pool threads), 1..1024;\n"
          "               default: one per online core\n"
          "  --help       print this and exit\n",
          FAN_REPS);
}

/* Parses all of s as a decimal integer in [min, max]. No sign, no spaces. */
static int parse_int(const char *s, long long min, long long max, long long *out)
{
  if (s[0] < '0' || s[0] > '9') return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, int *threads)
{
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    const char *val = NULL;
    if (strcmp(arg, "--threads") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, PROG ": --threads needs a value; see --help\n");
        return -1;
      }
      val = argv[++i];
    } else if (strncmp(arg, "--threads=", 10) == 0) {
      val = arg + 10;
    } else {
      fprintf(stderr, PROG ": %s '%s'; see --help\n",
              arg[0] == '-' ? "unknown flag" : "unexpected argument", arg);
      return -1;
    }
    long long v;
    if (parse_int(val, 1, 1024, &v) != 0) {
      fprintf(stderr, PROG ": --threads: expected an integer from 1 to 1024, got '%s'\n", val);
      return -1;
    }
    *threads = (int)v;
  }
  return 0;
}

int main(int argc, char **argv)
{
  int threads = 0;
  if (parse_args(argc, argv, &threads) != 0) return 2;
  if (threads == 0) {
    /* Resolve "one per core" the runtime's way, so that the pool gets the same count. */
    au_runtime_t *rt = must_create(0);
    threads = au_runtime_threads(rt);
    au_runtime_destroy(rt);
  }
  int failed = 0;
  printf("threads=%d\n", threads);
  fflush(stdout);

  double pp = 0;
  int pp_ok = bench_pingpong(threads, &pp);
  failed |= !pp_ok;
  printf("pingpong_msgs_per_s=%.0f\npingpong_ok=%d\n", pp, pp_ok);
  fflush(stdout);

  fan_result_t fan, pool;
  failed |= !bench_fanout_vs_pool(threads, &fan, &pool);
  printf("fanout_msgs_per_s=%.0f\nfanout_ok=%d\nsteals=%" PRIu64
         "\nfanout_msgs_per_turn=%.1f\nfanout_cpu_per_wall=%.2f\n",
         fan.msgs_per_s, fan.ok, fan.steals, fan.per_turn, fan.cpu_per_wall);
  printf("mutex_pool_fanout_msgs_per_s=%.0f\nmutex_pool_ok=%d\nmutex_pool_cpu_per_wall=%.2f\n"
         "ratio_vs_mutex_pool=%.2f\n",
         pool.msgs_per_s, pool.ok, pool.cpu_per_wall, fan.msgs_per_s / pool.msgs_per_s);
  fflush(stdout);

  double sky_ms = 0;
  int sky_ok = bench_skynet(threads, &sky_ms);
  failed |= !sky_ok;
  printf("skynet_ms=%.1f\nskynet_ok=%d\n", sky_ms, sky_ok);
  fflush(stdout);

  double wake_med = 0, wake_p90 = 0;
  bench_wake(threads, &wake_med, &wake_p90);
  printf("wake_latency_us=%.1f\nwake_latency_p90_us=%.1f\n", wake_med, wake_p90);
  return failed ? 1 : 0;
}
