/* check.h — checks for code that runs on threads other than the test's own: behaviours
 * on scheduler threads, the I/O thread, threads a test starts.
 *
 * cmocka's assert_* longjmp to the test's jmp_buf, which belongs to the thread that runs
 * the test; called on another thread they crash the process or leave the runtime hung.
 * CHECK(cond) there records the first failed check (and counts every one); once the
 * threads are joined (au_runtime_run has returned, pthread_join), assert_checks() on the
 * test's thread fails the test with what was recorded. Record, join, then assert.
 */
#ifndef AUGUR_TESTS_CHECK_H
#define AUGUR_TESTS_CHECK_H

#include <stdatomic.h>
#include <stddef.h>

static atomic_int check_failures;
static const char *_Atomic check_first_expr;
static const char *check_first_file;
static int check_first_line;

static inline void check_fail(const char *expr, const char *file, int line)
{
  if (atomic_fetch_add(&check_failures, 1) == 0) {
    check_first_file = file;
    check_first_line = line;
    /* release: assert_checks reads file and line after it sees the expression (and the
     * threads are joined by then anyway) */
    atomic_store_explicit(&check_first_expr, expr, memory_order_release);
  }
}

#define CHECK(cond) ((cond) ? (void)0 : check_fail(#cond, __FILE__, __LINE__))

/* On the test's thread, after joining every thread that may CHECK: fails the test if a
 * check failed, and resets the record for the next test. */
#define assert_checks()                                                                            \
  do {                                                                                             \
    int n_ = atomic_exchange(&check_failures, 0);                                                  \
    /* acquire: pairs with check_fail's release */                                                 \
    const char *e_ = atomic_exchange_explicit(&check_first_expr, NULL, memory_order_acquire);      \
    if (n_)                                                                                        \
      fail_msg("%s:%d: check failed on another thread: %s (%d failed checks in all)",              \
               check_first_file, check_first_line, e_ ? e_ : "?", n_);                             \
  } while (0)

#endif
