/* sched.c — the work-stealing scheduler: S threads, each with a Chase–Lev deque, one
 * inject queue for other threads, random-victim stealing and parking.
 *
 * The invariant that keeps work from being stranded: a thread parks only after it has
 * announced itself in `sleeping` (seq_cst) and then seen every run queue empty, and a
 * thread that makes work runnable reads `sleeping` (after a seq_cst fence) once the work
 * is queued. Of two such threads at least one sees the other, so new work is either
 * seen by the parking thread or wakes it. A sender skips the wake-up while another
 * thread is searching: that searcher must still park through the same check, and when
 * it finds work and was the last searcher it wakes one more thread (as Go's scheduler
 * does), so parallelism ramps up without a wake-up per message.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "runtime/counter.h"
#include "runtime/ext.h"
#include "runtime/rt.h"
#include "runtime/trace.h"

#define SPIN_NS         50000 /* look for work this long before parking, at most */
#define SPIN_MIN_NS     2000  /* and at least */
#define INJECT_INTERVAL 61    /* check the inject queue every this many turns */

enum { PARK_AGAIN, PARK_EXIT };

static uint64_t rng_next(uint64_t *s)
{
  /* xorshift64* */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545f4914f6cdd1dULL;
}

int sched_init(au_runtime_t *rt)
{
  /* aligned: the deque's ends and the counters each have a cache line of their own */
  rt->threads = aligned_alloc(64, (size_t)rt->nthreads * sizeof(sched_thread_t));
  if (!rt->threads) return AU_ENOMEM;
  memset(rt->threads, 0, (size_t)rt->nthreads * sizeof(sched_thread_t));
  for (int i = 0; i < rt->nthreads; i++) {
    sched_thread_t *t = &rt->threads[i];
    if (deque_init(&t->dq, 8) != 0) {
      while (i-- > 0) deque_destroy(&rt->threads[i].dq);
      free(rt->threads);
      return AU_ENOMEM;
    }
    t->rt = rt;
    t->index = i;
    t->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
    t->spin_ns = SPIN_NS;
  }
  injectq_init(&rt->inject);
  pthread_mutex_init(&rt->idle_mu, NULL);
  pthread_cond_init(&rt->idle_cv, NULL);
  atomic_init(&rt->sleeping, 0);
  atomic_init(&rt->searching, 0);
  rt->waiting = rt->tokens = 0;
  atomic_init(&rt->stop, 0);
  atomic_init(&rt->quiescent, 0);
  atomic_init(&rt->running, 0);
  atomic_init(&rt->io_pending, 0);
  return 0;
}

void sched_destroy(au_runtime_t *rt)
{
  for (int i = 0; i < rt->nthreads; i++) deque_destroy(&rt->threads[i].dq);
  free(rt->threads);
  pthread_cond_destroy(&rt->idle_cv);
  pthread_mutex_destroy(&rt->idle_mu);
}

/* Grants one wake-up to a parked thread, if any is blocked without one. */
static void wake_one(au_runtime_t *rt)
{
  pthread_mutex_lock(&rt->idle_mu);
  if (rt->waiting > rt->tokens) {
    rt->tokens++;
    pthread_cond_signal(&rt->idle_cv);
  }
  pthread_mutex_unlock(&rt->idle_mu);
}

void sched_poke(au_runtime_t *rt)
{
  wake_one(rt);
}

/* Called after work was queued. */
static void notify(au_runtime_t *rt)
{
  /* seq_cst fence: the queue write above is ordered before the reads of `searching` and
   * `sleeping`; pairs with the seq_cst increment of `sleeping` in park(). */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&rt->searching, memory_order_relaxed) == 0 &&
      atomic_load_explicit(&rt->sleeping, memory_order_relaxed) > 0)
    wake_one(rt);
}

void sched_schedule(au_runtime_t *rt, au_actor_t *a)
{
  rt_ctx_t *c = rt_ctx(rt);
  if (c && c->sched) {
    int before = deque_push(&c->sched->dq, a);
    /* Only the push that makes the deque non-empty needs to wake anyone: while it holds
     * work, a parking thread sees it (work_visible), and the owner is awake anyway. */
    if (before == 0) notify(rt);
    if (before >= 0) return;
  }
  injectq_push(&rt->inject, &a->inject);
  notify(rt);
}

static au_actor_t *actor_of_node(injectq_node_t *n)
{
  return n ? (au_actor_t *)(void *)((char *)n - offsetof(au_actor_t, inject)) : NULL;
}

static au_actor_t *steal_round(sched_thread_t *t)
{
  au_runtime_t *rt = t->rt;
  int n = rt->nthreads;
  int start = (int)(rng_next(&t->rng) % (uint64_t)n);
  for (int k = 0; k < n; k++) {
    sched_thread_t *v = &rt->threads[(start + k) % n];
    if (v == t) continue;
    for (int tries = 0; tries < 4; tries++) {
      void *x = deque_steal(&v->dq);
      if (x == DEQUE_ABORT) continue;
      if (x) {
        counter_add(&t->steals, 1);
        trace_emit(rt, TRACE_STEAL, (uint64_t)v->index, 0, 0, 0);
        return x;
      }
      break;
    }
  }
  return actor_of_node(injectq_pop(&rt->inject));
}

void sched_defer(rt_ctx_t *ctx, au_actor_t *a)
{
  sched_thread_t *t = ctx->sched;
  if (!t->deferred) {
    t->deferred = a;
    t->deferred_at = t->tick;
    return;
  }
  /* One is waiting already: this one goes to the global FIFO, behind everyone. */
  injectq_push(&t->rt->inject, &a->inject);
  notify(t->rt);
}

void au__long_turn(void)
{
  sched_thread_t *t = rt_tls ? rt_tls->sched : NULL;
  if (t && !t->inject_first) t->long_turn = 1;
}

static au_actor_t *take_deferred(sched_thread_t *t)
{
  au_actor_t *a = t->deferred;
  t->deferred = NULL;
  return a;
}

/* Looks for work, first locally, then by stealing for up to t->spin_ns. */
static au_actor_t *find_work(sched_thread_t *t)
{
  au_runtime_t *rt = t->rt;
  au_actor_t *a = NULL;
  ++t->tick;
  /* Fairness: a deferred actor waits at most INJECT_INTERVAL turns, and the inject
   * queue is looked at every INJECT_INTERVAL turns, even while the deque has work, and
   * after a long turn (a worker's step: au__long_turn). The actor taken so does not
   * earn another such look (two workers in the inject queue would otherwise keep the
   * deque waiting). */
  if (t->deferred && t->tick - t->deferred_at >= INJECT_INTERVAL) return take_deferred(t);
  const int long_turn = t->long_turn;
  if (t->inject_first) t->inject_first = 0;
  if (t->tick % INJECT_INTERVAL == 0 || long_turn) {
    if (long_turn) t->long_turn = 0;
    a = actor_of_node(injectq_pop(&rt->inject));
    if (long_turn && a) t->inject_first = 1;
  }
  if (!a) a = deque_pop(&t->dq);
  if (!a && t->deferred) a = take_deferred(t);
  if (!a) a = actor_of_node(injectq_pop(&rt->inject));
  if (a) return a;

  atomic_fetch_add_explicit(&rt->searching, 1, memory_order_seq_cst);
  uint64_t deadline = 0;
  for (unsigned round = 0;; round++) {
    a = steal_round(t);
    if (a || atomic_load_explicit(&rt->stop, memory_order_relaxed)) break;
    if ((round & 15) == 15) {
      uint64_t now = au_now_ns();
      if (!deadline)
        deadline = now + t->spin_ns;
      else if (now >= deadline)
        break;
      sched_yield();
    }
  }
  if (a) t->spin_ns = SPIN_NS; /* searching paid: search as long next time */
  int was = atomic_fetch_sub_explicit(&rt->searching, 1, memory_order_seq_cst);
  /* The last searcher found work: there may be more, so let one more thread search. */
  if (a && was == 1 && atomic_load_explicit(&rt->sleeping, memory_order_seq_cst) > 0) wake_one(rt);
  return a;
}

/* Non-destructive look at every run queue, under idle_mu. */
static int work_visible(au_runtime_t *rt)
{
  if (injectq_nonempty(&rt->inject)) return 1;
  for (int i = 0; i < rt->nthreads; i++)
    if (!deque_empty(&rt->threads[i].dq)) return 1;
  return 0;
}

static int park(sched_thread_t *t)
{
  au_runtime_t *rt = t->rt;
  int rc = PARK_AGAIN;
  pthread_mutex_lock(&rt->idle_mu);
  int asleep = atomic_fetch_add_explicit(&rt->sleeping, 1, memory_order_seq_cst) + 1;
  if (atomic_load(&rt->stop) || atomic_load(&rt->quiescent)) {
    rc = PARK_EXIT;
  } else if (work_visible(rt)) {
    rc = PARK_AGAIN;
  } else if (asleep == rt->nthreads && atomic_load(&rt->io_pending) == 0) {
    /* Everyone is here, nothing is queued and nothing will arrive: done. */
    atomic_store(&rt->quiescent, 1);
    pthread_cond_broadcast(&rt->idle_cv);
    rc = PARK_EXIT;
  } else {
    counter_add(&t->parks, 1);
    trace_emit(rt, TRACE_PARK, (uint64_t)asleep, 0, 0, 0);
    rt->waiting++;
    uint64_t parked_at = au_now_ns();
    while (!rt->tokens && !atomic_load(&rt->stop) && !atomic_load(&rt->quiescent))
      pthread_cond_wait(&rt->idle_cv, &rt->idle_mu);
    rt->waiting--;
    /* Adaptive search: work that came within SPIN_NS of parking would have been found by
     * searching longer, so search fully next time; after a longer wait, search half as
     * long (down to SPIN_MIN_NS). A thread whose work comes in bursts further apart than
     * the search (the receiving end of a stream) stops burning the CPU that the threads
     * feeding it need, on a machine with few cores. */
    if (rt->tokens) {
      if (au_now_ns() - parked_at < SPIN_NS)
        t->spin_ns = SPIN_NS;
      else if ((t->spin_ns /= 2) < SPIN_MIN_NS)
        t->spin_ns = SPIN_MIN_NS;
    }
    trace_emit(rt, TRACE_UNPARK, 0, rt->tokens > 0, 0, 0);
    if (rt->tokens) rt->tokens--;
    if (atomic_load(&rt->stop) || atomic_load(&rt->quiescent)) rc = PARK_EXIT;
  }
  atomic_fetch_sub_explicit(&rt->sleeping, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&rt->idle_mu);
  return rc;
}

/* Subnormal floats take a slow microcode path on x86 (tens of cycles per operation).
 * SGD drives unused factor dimensions toward zero through regularization and would
 * spend most of its time there, so scheduler threads flush them to zero, as ML
 * frameworks do, unless the runtime was created with keep_denormals. */
static void flush_denormals(void)
{
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) and DAZ (bit 6) */
#elif defined(__aarch64__)
  uint64_t fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  __asm__ volatile("msr fpcr, %0" : : "r"(fpcr | (1ull << 24))); /* FZ */
#endif
}

static void *thread_main(void *arg)
{
  sched_thread_t *t = arg;
  au_runtime_t *rt = t->rt;
  rt_ctx_t ctx = {.rt = rt, .sched = t, .cache = &rt->pool.caches[t->index], .list = t->index};
  rt_tls = &ctx;
  char name[16];
  snprintf(name, sizeof(name), "au-sched-%d", t->index);
  pthread_setname_np(pthread_self(), name);
  if (!rt->keep_denormals) flush_denormals();

  for (;;) {
    if (atomic_load_explicit(&rt->stop, memory_order_relaxed)) break;
    au_actor_t *a = find_work(t);
    if (a) {
      actor_run(&ctx, a);
      continue;
    }
    if (park(t) == PARK_EXIT) break;
  }
  /* Stopped with an actor deferred: keep it runnable for the next run. */
  au_actor_t *d = take_deferred(t);
  if (d && deque_push(&t->dq, d) < 0) injectq_push(&rt->inject, &d->inject);
  rt_tls = NULL;
  return NULL;
}

int sched_run(au_runtime_t *rt)
{
  int expect = 0;
  if (!atomic_compare_exchange_strong(&rt->running, &expect, 1)) return AU_EBUSY;
  /* `stop` is not cleared here: a stop requested before this run started ends it at
   * once instead of being lost. It is consumed when the run returns. */
  atomic_store(&rt->quiescent, 0);
  int started = 0;
  for (; started < rt->nthreads; started++)
    if (pthread_create(&rt->threads[started].tid, NULL, thread_main, &rt->threads[started]) != 0)
      break;
  if (started < rt->nthreads) au_runtime_stop(rt);
  for (int i = 0; i < started; i++) pthread_join(rt->threads[i].tid, NULL);
  atomic_store(&rt->stop, 0);
  atomic_store(&rt->running, 0);
  return started < rt->nthreads ? AU_ENOMEM : 0;
}

void au_runtime_stop(au_runtime_t *rt)
{
  pthread_mutex_lock(&rt->idle_mu);
  atomic_store(&rt->stop, 1);
  pthread_cond_broadcast(&rt->idle_cv);
  pthread_mutex_unlock(&rt->idle_mu);
}

void au_runtime_stats(const au_runtime_t *rt, int n, au_sched_stats_t *out)
{
  for (int i = 0; i < n && i < rt->nthreads; i++) {
    sched_thread_t *t = &rt->threads[i];
    out[i].runs = counter_get(&t->runs);
    out[i].msgs = counter_get(&t->msgs);
    out[i].steals = counter_get(&t->steals);
    out[i].parks = counter_get(&t->parks);
  }
}

void sched_count_turn(sched_thread_t *t, unsigned msgs)
{
  counter_add(&t->runs, 1);
  counter_add(&t->msgs, msgs);
}
