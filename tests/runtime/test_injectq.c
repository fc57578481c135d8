/* test_injectq.c — the inject queue: N producers and M consumers (try-lock MPMC), every
 * node popped exactly once and, per consumer, in push order of each producer. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "runtime/injectq.h"

enum { NPROD = 3, NCONS = 3, PER_PROD = 300000, TOTAL = NPROD * PER_PROD };

typedef struct {
  injectq_node_t link;
  int producer;
  long seq;
} node_t;

typedef struct {
  injectq_t q;
  node_t *nodes;
  _Atomic unsigned char *seen;
  atomic_long popped;
  atomic_long order_errors;
} shared_t;

typedef struct {
  shared_t *sh;
  int id;
} arg_t;

static void *producer(void *p)
{
  arg_t *a = p;
  for (long i = 0; i < PER_PROD; i++) {
    node_t *n = &a->sh->nodes[(long)a->id * PER_PROD + i];
    n->producer = a->id;
    n->seq = i;
    injectq_push(&a->sh->q, &n->link);
  }
  return NULL;
}

static void *consumer(void *p)
{
  shared_t *sh = ((arg_t *)p)->sh;
  /* Pops are totally ordered by the queue's try-lock, so the pops of one consumer are a
   * subsequence of push order: per producer, its sequence numbers must increase. */
  long last_seq[NPROD];
  for (int i = 0; i < NPROD; i++) last_seq[i] = -1;
  while (atomic_load(&sh->popped) < TOTAL) {
    injectq_node_t *l = injectq_pop(&sh->q);
    if (!l) continue;
    node_t *n = (node_t *)(void *)l;
    long idx = (long)n->producer * PER_PROD + n->seq;
    atomic_fetch_add(&sh->seen[idx], 1);
    if (last_seq[n->producer] >= n->seq) atomic_fetch_add(&sh->order_errors, 1);
    last_seq[n->producer] = n->seq;
    atomic_fetch_add(&sh->popped, 1);
  }
  return NULL;
}

static void test_mpmc_exactly_once(void **state)
{
  (void)state;
  shared_t sh;
  injectq_init(&sh.q);
  sh.nodes = calloc(TOTAL, sizeof(node_t));
  sh.seen = calloc(TOTAL, 1);
  atomic_init(&sh.popped, 0);
  atomic_init(&sh.order_errors, 0);
  pthread_t pt[NPROD], ct[NCONS];
  arg_t pa[NPROD], ca[NCONS];
  for (int i = 0; i < NCONS; i++) {
    ca[i] = (arg_t){&sh, i};
    pthread_create(&ct[i], NULL, consumer, &ca[i]);
  }
  for (int i = 0; i < NPROD; i++) {
    pa[i] = (arg_t){&sh, i};
    pthread_create(&pt[i], NULL, producer, &pa[i]);
  }
  for (int i = 0; i < NPROD; i++) pthread_join(pt[i], NULL);
  for (int i = 0; i < NCONS; i++) pthread_join(ct[i], NULL);

  assert_int_equal(atomic_load(&sh.popped), TOTAL);
  long bad = 0;
  for (long i = 0; i < TOTAL; i++) bad += sh.seen[i] != 1;
  assert_int_equal(bad, 0);
  assert_int_equal(atomic_load(&sh.order_errors), 0);
  assert_null(injectq_pop(&sh.q));
  assert_false(injectq_nonempty(&sh.q));
  free(sh.nodes);
  free((void *)sh.seen);
}

int main(void)
{
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_mpmc_exactly_once)};
  return cmocka_run_group_tests_name("injectq", tests, NULL, NULL);
}
