/* test_deque.c — Chase–Lev deque: order, growth, and a stress test where one owner and
 * several thieves race over 10^6 items and every item must be taken exactly once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "runtime/deque.h"
#include "tests/runtime/check.h"

#define ITEM(i)  ((void *)(uintptr_t)((i) + 2)) /* never NULL, never DEQUE_ABORT */
#define INDEX(p) ((long)(uintptr_t)(p)-2)

static void test_owner_lifo_thief_fifo(void **state)
{
  (void)state;
  deque_t d;
  assert_int_equal(deque_init(&d, 2), 0);
  for (long i = 0; i < 100; i++) assert_int_equal(deque_push(&d, ITEM(i)), i); /* grows */
  assert_ptr_equal(deque_steal(&d), ITEM(0));
  assert_ptr_equal(deque_steal(&d), ITEM(1));
  assert_ptr_equal(deque_pop(&d), ITEM(99));
  assert_ptr_equal(deque_pop(&d), ITEM(98));
  for (long i = 97; i >= 2; i--) assert_ptr_equal(deque_pop(&d), ITEM(i));
  assert_null(deque_pop(&d));
  assert_null(deque_steal(&d));
  assert_true(deque_empty(&d));
  deque_destroy(&d);
}

enum { NITEMS = 1000000, NTHIEVES = 3 };

typedef struct {
  deque_t d;
  _Atomic unsigned char *seen;
  atomic_int done;
  atomic_long taken;
} stress_t;

static void take(stress_t *s, void *x)
{
  long i = INDEX(x);
  CHECK(i >= 0 && i < NITEMS); /* on thieves' threads too: CHECK, not assert */
  if (i < 0 || i >= NITEMS) return;
  atomic_fetch_add_explicit(&s->seen[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->taken, 1, memory_order_relaxed);
}

static void *thief(void *arg)
{
  stress_t *s = arg;
  for (;;) {
    void *x = deque_steal(&s->d);
    if (x == DEQUE_ABORT) continue;
    if (x)
      take(s, x);
    else if (atomic_load(&s->done) && deque_empty(&s->d))
      break;
  }
  return NULL;
}

static void test_stress_exactly_once(void **state)
{
  (void)state;
  stress_t s;
  assert_int_equal(deque_init(&s.d, 4), 0); /* small: forces growth under contention */
  s.seen = calloc(NITEMS, 1);
  atomic_init(&s.done, 0);
  atomic_init(&s.taken, 0);
  pthread_t th[NTHIEVES];
  for (int i = 0; i < NTHIEVES; i++) pthread_create(&th[i], NULL, thief, &s);
  /* The owner pushes in bursts and pops some itself, so pop and steal race on the
   * last item as well as in the middle. */
  for (long i = 0; i < NITEMS;) {
    long burst = 1 + (i * 7919) % 64;
    for (long k = 0; k < burst && i < NITEMS; k++, i++) assert_true(deque_push(&s.d, ITEM(i)) >= 0);
    for (long k = 0; k < burst / 3; k++) {
      void *x = deque_pop(&s.d);
      if (!x) break;
      take(&s, x);
    }
  }
  void *x;
  while ((x = deque_pop(&s.d)) != NULL) take(&s, x);
  atomic_store(&s.done, 1);
  for (int i = 0; i < NTHIEVES; i++) pthread_join(th[i], NULL);
  assert_checks();

  assert_int_equal(atomic_load(&s.taken), NITEMS);
  long bad = 0;
  for (long i = 0; i < NITEMS; i++) bad += s.seen[i] != 1;
  assert_int_equal(bad, 0);
  free((void *)s.seen);
  deque_destroy(&s.d);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_owner_lifo_thief_fifo),
      cmocka_unit_test(test_stress_exactly_once),
  };
  return cmocka_run_group_tests_name("deque", tests, NULL, NULL);
}
