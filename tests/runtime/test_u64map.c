/* test_u64map.c — the single-thread hash map against a plain array as reference, through
 * growth and many deletions (backward shift must keep every key reachable). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "runtime/u64map.h"

enum { N = 20000 };

static void test_against_reference(void **state)
{
  (void)state;
  u64map_t m;
  assert_int_equal(u64map_init(&m, 2), 0);
  static void *ref[N];
  uint64_t x = 88172645463325252ULL;
  for (int round = 0; round < 200000; round++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint64_t key = 1 + x % N;
    void *val = (void *)(uintptr_t)(round + 1);
    if (x & 0x100) {
      assert_int_equal(u64map_put(&m, key, val), 0);
      ref[key - 1] = val;
    } else {
      assert_ptr_equal(u64map_del(&m, key), ref[key - 1]);
      ref[key - 1] = NULL;
    }
  }
  size_t live = 0;
  for (uint64_t k = 1; k <= N; k++) {
    assert_ptr_equal(u64map_get(&m, k), ref[k - 1]);
    live += ref[k - 1] != NULL;
  }
  assert_int_equal(m.count, live);
  assert_null(u64map_get(&m, N + 1));
  u64map_destroy(&m);
}

int main(void)
{
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_against_reference)};
  return cmocka_run_group_tests_name("u64map", tests, NULL, NULL);
}
