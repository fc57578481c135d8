/* test_pool.c — message pools: size classes, reuse, and messages allocated on one thread
 * and freed on another (the exchange) with no corruption: every message's payload
 * survives intact until it is freed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/mailbox.h"
#include "runtime/pool.h"
#include "tests/runtime/check.h"

static void test_classes_and_big(void **state)
{
  (void)state;
  pool_t p;
  assert_int_equal(pool_init(&p, 1), 0);
  size_t sizes[] = {0, 1, 32, 33, 100, 4000, 4064, 4065, 16352, 16353, 100000};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    au_msg_t *m = pool_alloc(&p, &p.caches[0], sizes[i]);
    assert_non_null(m);
    assert_int_equal(m->len, sizes[i]);
    assert_int_equal((uintptr_t)m->data % 16, 0);
    memset(m->data, 0xab, sizes[i]); /* ASan: the whole payload is ours */
    if (sizeof(au_msg_t) + sizes[i] > 16384)
      assert_int_equal(m->au__class, POOL_BIG);
    else
      assert_int_not_equal(m->au__class, POOL_BIG);
    pool_free(&p, &p.caches[0], m);
  }
  /* LIFO reuse: the block just freed comes back first */
  au_msg_t *a = pool_alloc(&p, &p.caches[0], 8);
  pool_free(&p, &p.caches[0], a);
  au_msg_t *sh = pool_alloc(&p, NULL, 8); /* the locked shared cache works too */
  assert_non_null(sh);
  pool_free(&p, NULL, sh);
  assert_ptr_equal(pool_alloc(&p, &p.caches[0], 8), a);
  /* A 4 KiB payload (a typical frame) takes a 5 KiB block, not an 8 KiB one: blocks of a
   * class lie next to each other in a fresh slab. */
  au_msg_t *b1 = pool_alloc(&p, &p.caches[0], 4096);
  au_msg_t *b2 = pool_alloc(&p, &p.caches[0], 4096);
  assert_int_equal((char *)b2 - (char *)b1, 5120);
  pool_free(&p, &p.caches[0], b1);
  pool_free(&p, &p.caches[0], b2);
  pool_destroy(&p);
}

enum { NMSG = 500000 };

typedef struct {
  pool_t pool;
  mailbox_t q;
} shared_t;

static void *producer(void *arg)
{
  shared_t *s = arg;
  for (uint32_t i = 0; i < NMSG; i++) {
    size_t len = 4 + (i % 5) * 100; /* several classes */
    au_msg_t *m = pool_alloc(&s->pool, &s->pool.caches[0], len);
    CHECK(m != NULL); /* the producer's thread: CHECK, not assert */
    if (!m) break;
    m->type = i;
    memset(m->data, (int)(i & 0xff), len);
    mailbox_push(&s->q, m);
  }
  return NULL;
}

static void test_cross_thread_free(void **state)
{
  (void)state;
  shared_t s;
  assert_int_equal(pool_init(&s.pool, 2), 0);
  mailbox_init(&s.q, pool_alloc(&s.pool, NULL, 0));
  pthread_t th;
  pthread_create(&th, NULL, producer, &s);
  long got = 0, corrupt = 0;
  while (got < NMSG && !atomic_load(&check_failures)) { /* a failed producer sends no more */
    au_msg_t *rel;
    au_msg_t *m = mailbox_pop(&s.q, &rel);
    if (rel) pool_free(&s.pool, &s.pool.caches[1], rel);
    if (!m) continue;
    for (uint32_t k = 0; k < m->len; k++) corrupt += m->data[k] != (unsigned char)(m->type & 0xff);
    corrupt += m->type != (uint32_t)got;
    got++;
  }
  pthread_join(th, NULL);
  assert_checks();
  pool_free(&s.pool, &s.pool.caches[1], mailbox_stub(&s.q));
  assert_int_equal(corrupt, 0);
  pool_destroy(&s.pool);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_classes_and_big),
      cmocka_unit_test(test_cross_thread_free),
  };
  return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
