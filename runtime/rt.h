/* rt.h — the runtime's internal state (struct au_runtime, actors, scheduler threads, the
 * per-thread context), shared inside runtime/ only: actors/ sees none of it (runtime/ext.h
 * is its interface). Declares the core's functions (actor.c, sched.c); the I/O thread's
 * are in io.h, the network's in net.h and the headers it names.
 *
 * The invariant that ties them: an actor is runnable exactly when it sits in one run
 * queue (a scheduler's deque or the inject queue) or is running on one thread, and it
 * gets there only through the mailbox push that found its mailbox empty.
 */
#ifndef AUGUR_RUNTIME_RT_H
#define AUGUR_RUNTIME_RT_H

#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

#include "augur.h"
#include "runtime/deque.h"
#include "runtime/injectq.h"
#include "runtime/log.h"
#include "runtime/mailbox.h"
#include "runtime/pool.h"
#include "runtime/u64map.h"

struct au_actor {
  mailbox_t mq;
  injectq_node_t inject; /* link while in the inject queue */
  au_behaviour_t fn;
  au_runtime_t *rt;
  struct au_actor *prev, *next; /* in the live list of the thread that spawned it */
  int list;                     /* which live list */
  au_port_t port;               /* its port on this node, or AU_NO_PORT */
  int stopping;                 /* set by au_actor_stop, read after the behaviour */
  int yield;                    /* sent itself a message in this turn */
  _Alignas(16) unsigned char state[];
};

/* Live actors, one list per thread slot, so spawn rarely contends. */
typedef struct actor_list {
  pthread_mutex_t mu;
  au_actor_t *head;
} actor_list_t;

typedef struct sched_thread {
  deque_t dq;
  au_runtime_t *rt;
  int index;
  pthread_t tid;
  uint64_t rng;
  unsigned tick;
  au_actor_t *deferred; /* still runnable after its turn: runs once the deque is empty */
  unsigned deferred_at; /* tick when it was deferred */
  int long_turn;        /* the last turn was long: look at the inject queue first */
  uint64_t spin_ns;     /* how long the next search for work lasts (sched.c) */
  int inject_first;     /* this turn's actor came first from the inject queue so */
  /* counters: written by the owner only, read by au_runtime_stats; a line of
   * their own, away from `bottom`, which thieves read (local_sent changes per send) */
  _Alignas(64) atomic_ullong runs, msgs, steals, parks;
  /* For the cluster's end-of-run detection (runtime/term.c): local messages that
   * behaviours on this thread sent, and messages handled here that count as sent
   * somewhere (from another node, or from a behaviour); `handled` is stored with
   * release, after the handlers. */
  atomic_ullong local_sent, handled;
} sched_thread_t;

struct io_ext;

typedef struct io {
  uv_loop_t loop;
  uv_async_t async;
  pthread_t tid;
  injectq_t cmdq;                     /* commands (messages) from any thread, for the I/O thread */
  u64map_t timers;                    /* id -> io_timer, I/O thread only */
  atomic_ullong next_id;              /* timer ids, from 1 */
  _Atomic(const struct io_ext *) ext; /* io_extend's, or NULL (runtime/io.h) */
} io_t;

struct au_runtime {
  int nthreads, batch;
  int rank, nodes;              /* in a cluster; 0 and 1 otherwise */
  struct net *net;              /* the cluster transport, or NULL (runtime/cluster.h) */
  _Atomic(au_actor_t *) *ports; /* port -> actor, 65535 entries, allocated on first use */
  int keep_denormals;
  sched_thread_t *threads;
  /* Tracing (runtime/trace.h). trace_on is read by every trace_emit, so it sits with the
   * read-mostly fields; `trace` lives from au_runtime_create to au_runtime_destroy. */
  atomic_int trace_on;
  struct trace *trace;
  injectq_t inject;
  pool_t pool;         /* caches 0..S-1: scheduler threads; S: the I/O thread */
  actor_list_t *lists; /* S + 2: scheduler threads, I/O thread, everyone else */

  /* Parking. `sleeping` and `searching` are read without the lock by senders deciding
   * whether to wake someone; they change under `idle_mu` (sleeping) or atomically. */
  pthread_mutex_t idle_mu;
  pthread_cond_t idle_cv;
  atomic_int sleeping;  /* threads inside park() */
  atomic_int searching; /* threads looking for work to steal */
  int waiting;          /* threads blocked on idle_cv (under idle_mu) */
  int tokens;           /* wake-ups granted and not yet consumed (under idle_mu) */
  atomic_int stop;      /* au_runtime_stop was called */
  atomic_int quiescent; /* the last thread to park found nothing to do */
  atomic_int running;
  atomic_long io_pending; /* armed timers: sources of future messages */
  atomic_ullong dropped;  /* counted messages freed unhandled (stopped actors) */

  io_t io;
};

/* Per-thread context: set on scheduler threads and the I/O thread of one runtime. */
typedef struct rt_ctx {
  au_runtime_t *rt;
  sched_thread_t *sched; /* NULL on the I/O thread */
  pool_cache_t *cache;
  int list;            /* which live list spawns from this thread join */
  au_actor_t *current; /* the actor whose behaviour runs now */
  unsigned woken;      /* actors this thread pushed on its deque in the current turn */
} rt_ctx_t;

extern _Thread_local rt_ctx_t *rt_tls;

/* This thread's context if it belongs to rt, else NULL. */
static inline rt_ctx_t *rt_ctx(au_runtime_t *rt)
{
  rt_ctx_t *c = rt_tls;
  return c && c->rt == rt ? c : NULL;
}

/* The rank that the runtime's messages name (runtime/log.h): -1 outside a cluster. */
static inline int rt_log_rank(const au_runtime_t *rt)
{
  return rt->nodes > 1 ? rt->rank : -1;
}

static inline pool_cache_t *rt_cache(au_runtime_t *rt)
{
  rt_ctx_t *c = rt_ctx(rt);
  return c ? c->cache : NULL;
}

/* sched.c */
int sched_init(au_runtime_t *rt);
void sched_destroy(au_runtime_t *rt);
int sched_run(au_runtime_t *rt);
/* Puts a newly runnable actor in a run queue and wakes a thread if one is needed. */
void sched_schedule(au_runtime_t *rt, au_actor_t *a);
/* Wakes one parked thread so that it looks again (e.g. for quiescence). */
void sched_poke(au_runtime_t *rt);
/* Keeps an actor that is still runnable after its turn aside until the actors in the
 * thread's deque (those it just woke) have run. Owner thread only. */
void sched_defer(rt_ctx_t *ctx, au_actor_t *a);
/* Adds one actor turn that handled `msgs` messages to the thread's counters. */
void sched_count_turn(sched_thread_t *t, unsigned msgs);

/* actor.c */
void actor_run(rt_ctx_t *ctx, au_actor_t *a);
void actor_free_all(au_runtime_t *rt);

/* actor.c */
/* Delivers a message whose sender fields are already set (the I/O thread does this for
 * messages from other nodes). */
void actor_deliver(au_actor_t *to, au_msg_t *m);
/* actor_deliver of first..last, linked through au__next: one mailbox push, at most one
 * wake-up, for a run of messages to the same actor. */
void actor_deliver_chain(au_actor_t *to, au_msg_t *first, au_msg_t *last);

static inline au_actor_t *rt_port_actor(au_runtime_t *rt, au_port_t port)
{
  /* acquire: pairs with au_port_register's release, so the actor is fully built */
  return rt->ports && port != AU_NO_PORT
             ? atomic_load_explicit(&rt->ports[port], memory_order_acquire)
             : NULL;
}

#endif
