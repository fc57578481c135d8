/* bench_queues.c — augur-bench-queues: an actor's mailbox (runtime/mailbox.c, an
 * intrusive Vyukov MPSC queue whose head carries the "empty" tag) against Concurrency
 * Kit's ck_fifo_mpmc used the same way. A mailbox must also say, on each push, whether
 * the actor has to be scheduled; with ck_fifo that takes a separate flag per actor (an
 * exchange after each enqueue, and a clear-then-recheck by the consumer), which the
 * benchmark includes, since the runtime would need it.
 *
 * Two measures, medians of 5 rounds:
 *   - one thread: push then pop, ns per message (the cost a local send pays);
 *   - P producer threads and one consumer: ns per message handed over, the consumer
 *     draining until empty, then marking empty and waiting to be "scheduled" again.
 * "ck_fifo_alone" is the queue without the flag (its consumer spins): what the flag costs.
 * Prints key=value lines; the ratios are what to compare across machines.
 */
#include <ck_fifo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <augur.h>

#include "runtime/mailbox.h"

typedef struct {
  struct ck_fifo_mpmc_entry e; /* embedded, as au__next is in au_msg_t */
  uint64_t payload;
} ckmsg_t;

typedef struct {
  int kind; /* 0 mailbox, 1 ck_fifo_mpmc and a flag, 2 ck_fifo_mpmc alone */
  size_t per_producer;
  mailbox_t mb;
  struct ck_fifo_mpmc fifo;
  _Alignas(64) atomic_int sched;    /* ck: 1 while the consumer is scheduled */
  _Alignas(64) atomic_int runnable; /* set by whoever "schedules" the consumer */
  unsigned char **mem;              /* per producer: messages of 64 bytes */
  ckmsg_t **cks;
  atomic_int go;
} bench_t;

typedef struct {
  bench_t *b;
  int id;
} prod_arg_t;

static void *producer(void *p)
{
  prod_arg_t *a = p;
  bench_t *b = a->b;
  while (!atomic_load_explicit(&b->go, memory_order_acquire)) {
  }
  for (size_t i = 0; i < b->per_producer; i++) {
    bool schedule;
    if (b->kind == 0) {
      schedule = mailbox_push(&b->mb, (au_msg_t *)(b->mem[a->id] + i * 64));
    } else {
      ckmsg_t *m = &b->cks[a->id][i];
      ck_fifo_mpmc_enqueue(&b->fifo, &m->e, m);
      schedule =
          b->kind == 2 ? i == 0 : atomic_exchange_explicit(&b->sched, 1, memory_order_acq_rel) == 0;
    }
    if (schedule) atomic_store_explicit(&b->runnable, 1, memory_order_release);
  }
  return NULL;
}

/* The consumer: drains, marks empty, waits to be scheduled. Returns messages seen. */
static size_t consume(bench_t *b, size_t total)
{
  size_t seen = 0;
  while (seen < total) {
    while (!atomic_load_explicit(&b->runnable, memory_order_acquire)) {
    }
    atomic_store_explicit(&b->runnable, 0, memory_order_relaxed);
    for (;;) {
      if (b->kind == 0) {
        au_msg_t *rel, *m;
        while ((m = mailbox_pop(&b->mb, &rel))) seen++;
        if (mailbox_mark_empty(&b->mb)) break;
      } else {
        void *v;
        struct ck_fifo_mpmc_entry *garbage;
        while (ck_fifo_mpmc_dequeue(&b->fifo, &v, &garbage)) seen++;
        if (b->kind == 2 && seen < total) continue; /* the queue alone: the consumer spins */
        if (b->kind == 2) break;
        atomic_store_explicit(&b->sched, 0, memory_order_seq_cst);
        /* recheck: a push between the last dequeue and the clear saw sched == 1 */
        if (CK_FIFO_MPMC_ISEMPTY(&b->fifo)) break;
        if (atomic_exchange_explicit(&b->sched, 1, memory_order_acq_rel) != 0) break;
      }
      if (seen >= total) break;
    }
  }
  return seen;
}

static void setup(bench_t *b)
{
  if (b->kind == 0) {
    static _Alignas(64) unsigned char stub[64];
    mailbox_init(&b->mb, (au_msg_t *)stub);
  } else {
    static ckmsg_t stub;
    ck_fifo_mpmc_init(&b->fifo, &stub.e);
    atomic_store(&b->sched, 0);
  }
  atomic_store(&b->runnable, 0);
}

static double one_thread(int kind, size_t n, unsigned char *mem, ckmsg_t *cks)
{
  bench_t b = {.kind = kind};
  setup(&b);
  uint64_t t0 = au_now_ns();
  size_t seen = 0;
  for (size_t i = 0; i < n; i++) {
    if (kind == 0) {
      au_msg_t *rel;
      mailbox_push(&b.mb, (au_msg_t *)(mem + i * 64));
      seen += mailbox_pop(&b.mb, &rel) != NULL;
    } else {
      void *v;
      struct ck_fifo_mpmc_entry *g;
      ck_fifo_mpmc_enqueue(&b.fifo, &cks[i].e, &cks[i]);
      if (kind == 1) atomic_exchange_explicit(&b.sched, 1, memory_order_acq_rel);
      seen += ck_fifo_mpmc_dequeue(&b.fifo, &v, &g);
    }
  }
  uint64_t t1 = au_now_ns();
  if (seen != n) {
    fprintf(stderr, "augur-bench-queues: lost messages (%zu of %zu)\n", seen, n);
    exit(1);
  }
  return (double)(t1 - t0) / (double)n;
}

static double handoff(int kind, int producers, size_t per, unsigned char **mem, ckmsg_t **cks)
{
  bench_t b = {.kind = kind, .per_producer = per};
  b.mem = mem;
  b.cks = cks;
  setup(&b);
  pthread_t th[64];
  prod_arg_t args[64];
  for (int p = 0; p < producers; p++) {
    args[p] = (prod_arg_t){&b, p};
    pthread_create(&th[p], NULL, producer, &args[p]);
  }
  uint64_t t0 = au_now_ns();
  atomic_store_explicit(&b.go, 1, memory_order_release);
  size_t seen = consume(&b, per * (size_t)producers);
  uint64_t t1 = au_now_ns();
  for (int p = 0; p < producers; p++) pthread_join(th[p], NULL);
  if (seen != per * (size_t)producers) {
    fprintf(stderr, "augur-bench-queues: lost messages (%zu of %zu)\n", seen,
            per * (size_t)producers);
    exit(1);
  }
  return (double)(t1 - t0) / (double)seen;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
  size_t n = 2000000;
  int producers = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: augur-bench-queues [--messages N] [--producers P]\n"
             "  an actor's mailbox against ck_fifo_mpmc plus a scheduling flag: N pushes and\n"
             "  pops in one thread, then N messages from each of P producer threads to one\n"
             "  consumer (default N=2000000, P=1); medians of 5 rounds.\n");
      return 0;
    } else if (!strcmp(argv[i], "--messages") && i + 1 < argc) {
      n = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--producers") && i + 1 < argc) {
      producers = atoi(argv[++i]);
    } else {
      fprintf(stderr, "augur-bench-queues: unknown or incomplete flag '%s' (see --help)\n",
              argv[i]);
      return 2;
    }
  }
  if (n == 0 || producers < 1 || producers > 64) {
    fprintf(stderr, "augur-bench-queues: --messages must be positive, --producers 1..64\n");
    return 2;
  }
  unsigned char *mem[64];
  ckmsg_t *cks[64];
  for (int p = 0; p < producers; p++) {
    mem[p] = aligned_alloc(64, n * 64);
    cks[p] = calloc(n, sizeof(ckmsg_t));
    if (!mem[p] || !cks[p]) {
      fprintf(stderr, "augur-bench-queues: out of memory for %zu messages\n", n);
      return 1;
    }
    memset(mem[p], 0, n * 64);
  }
  double t[3][2][5];
  for (int round = 0; round < 5; round++)
    for (int kind = 0; kind < 3; kind++) {
      t[kind][0][round] = one_thread(kind, n, mem[0], cks[0]);
      t[kind][1][round] = handoff(kind, producers, n, mem, cks);
    }
  for (int k = 0; k < 3; k++)
    for (int m = 0; m < 2; m++) qsort(t[k][m], 5, sizeof(double), cmp);
  printf("messages=%zu producers=%d\n", n, producers);
  const char *what[2] = {"one_thread", "handoff"};
  for (int m = 0; m < 2; m++)
    printf("%s mailbox_ns=%.2f ck_fifo_ns=%.2f ck_fifo_over_mailbox=%.3f ck_fifo_alone_ns=%.2f "
           "ck_fifo_alone_over_mailbox=%.3f\n",
           what[m], t[0][m][2], t[1][m][2], t[1][m][2] / t[0][m][2], t[2][m][2],
           t[2][m][2] / t[0][m][2]);
  for (int p = 0; p < producers; p++) free(mem[p]), free(cks[p]);
  return 0;
}
