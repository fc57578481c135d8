/* test_api.c — every error code has its own text, so a message never says "unknown". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "augur.h"

static void test_every_code_is_named(void **state)
{
  (void)state;
  int codes[] = {AU_EINVAL, AU_ENOMEM, AU_EBUSY, AU_ESHUTDOWN, AU_EAGAIN, AU_EDEADLK,
                 AU_ERANGE, AU_ENOENT, AU_EPROTO, AU_ETIMEDOUT, AU_ENODE};
  size_t n = sizeof(codes) / sizeof(codes[0]);
  for (size_t i = 0; i < n; i++) {
    assert_string_not_equal(au_strerror(codes[i]), "unknown error");
    for (size_t j = 0; j < i; j++) {
      assert_int_not_equal(codes[i], codes[j]);
      assert_string_not_equal(au_strerror(codes[i]), au_strerror(codes[j]));
    }
  }
  assert_string_equal(au_strerror(-12345), "unknown error");
}

int main(void)
{
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_code_is_named)};
  return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
