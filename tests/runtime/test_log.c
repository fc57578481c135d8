/* test_log.c — the library's messages through au_log_set: the runtime's own reports
 * reach the function with their level and rank (from the caller's thread and from the
 * I/O thread of a cluster that never forms), calls never overlap, a replaced function is
 * never called after au_log_set returns, a function that logs again does not deadlock,
 * and NULL brings back stderr in the old format. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "augur.h"
#include "runtime/log.h"

/* --- capturing -------------------------------------------------------------------------- */

#define CAP_MAX 64

typedef struct captured {
  pthread_mutex_t mu;
  int n;
  struct {
    au_log_level_t level;
    int rank;
    char msg[256];
  } m[CAP_MAX];
  atomic_int inside;   /* a call is in progress */
  atomic_int overlaps; /* a call began while another was in progress */
  atomic_int calls;
} captured_t;

static void capture(void *arg, au_log_level_t level, int rank, const char *msg)
{
  captured_t *c = arg;
  if (atomic_exchange(&c->inside, 1)) atomic_fetch_add(&c->overlaps, 1);
  atomic_fetch_add(&c->calls, 1);
  pthread_mutex_lock(&c->mu);
  if (c->n < CAP_MAX) {
    c->m[c->n].level = level;
    c->m[c->n].rank = rank;
    snprintf(c->m[c->n].msg, sizeof(c->m[c->n].msg), "%s", msg);
    c->n++;
  }
  pthread_mutex_unlock(&c->mu);
  atomic_store(&c->inside, 0);
}

static void cap_init(captured_t *c)
{
  memset(c, 0, sizeof(*c));
  pthread_mutex_init(&c->mu, NULL);
}

/* The index of the first message containing `text`, or -1. */
static int cap_find(captured_t *c, const char *text)
{
  pthread_mutex_lock(&c->mu);
  int found = -1;
  for (int i = 0; i < c->n && found < 0; i++)
    if (strstr(c->m[i].msg, text)) found = i;
  pthread_mutex_unlock(&c->mu);
  return found;
}

/* --- the runtime's messages, from the caller's thread ----------------------------------- */

static void test_runtime_messages_reach_the_function(void **state)
{
  (void)state;
  captured_t c;
  cap_init(&c);
  au_log_set(capture, &c);
  au_runtime_t *rt;
  assert_int_equal(au_runtime_create(&(au_runtime_opts_t){.threads = 1}, &rt), 0);
  setenv("AU_TRACE_MAX_EVENTS", "12abc", 1);
  assert_int_equal(au_trace_start(rt, "/tmp/augur-test-log.json"), AU_EINVAL);
  unsetenv("AU_TRACE_MAX_EVENTS");
  assert_int_equal(au_trace_start(rt, "/nonexistent-augur-dir/x.json"), AU_EINVAL);
  au_runtime_destroy(rt);
  au_log_set(NULL, NULL);

  assert_int_equal(c.n, 2);
  int i = cap_find(&c, "AU_TRACE_MAX_EVENTS");
  assert_true(i >= 0);
  assert_int_equal(c.m[i].level, AU_LOG_ERROR);
  assert_int_equal(c.m[i].rank, -1); /* one node, no cluster */
  assert_non_null(strstr(c.m[i].msg, "'12abc'"));
  assert_null(strchr(c.m[i].msg, '\n'));
  assert_true(strncmp(c.m[i].msg, "augur", 5) != 0); /* the prefix is the default sink's */
  assert_true(cap_find(&c, "cannot write into /nonexistent-augur-dir") >= 0);
  pthread_mutex_destroy(&c.mu);
}

/* --- from the I/O thread: rank 0 of a cluster that never forms ------------------------- */

static int free_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
    port = ntohs(sa.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

typedef struct knocker {
  int port;
  int sent; /* garbage reached the listener */
} knocker_t;

/* Connects to the coordinator's port (retrying while it is not listening yet) and sends
 * bytes that are no frame. */
static void *knock(void *arg)
{
  knocker_t *k = arg;
  for (int tries = 0; tries < 200 && !k->sent; tries++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)k->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
      static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
      k->sent = write(fd, junk, sizeof(junk) - 1) == (ssize_t)(sizeof(junk) - 1);
      usleep(100000); /* let the node read it before the connection closes */
    } else {
      usleep(10000);
    }
    if (fd >= 0) close(fd);
  }
  return NULL;
}

static void test_io_thread_messages_carry_the_rank(void **state)
{
  (void)state;
  captured_t c;
  cap_init(&c);
  au_log_set(capture, &c);
  au_runtime_t *rt;
  assert_int_equal(au_runtime_create(&(au_runtime_opts_t){.threads = 1}, &rt), 0);
  au_cluster_opts_t o = {.rank = 0, .nodes = 2, .timeout_ms = 1000};
  knocker_t k = {.port = free_port()};
  assert_true(k.port > 0);
  snprintf(o.coord, sizeof(o.coord), "127.0.0.1:%d", k.port);
  snprintf(o.cluster, sizeof(o.cluster), "test-log");
  snprintf(o.bind, sizeof(o.bind), "127.0.0.1");
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, knock, &k), 0);
  char err[400];
  int rc = au_runtime_join(rt, &o, err, sizeof(err)); /* nobody else joins: times out */
  pthread_join(th, NULL);
  au_runtime_destroy(rt);
  au_log_set(NULL, NULL);

  assert_int_equal(rc, AU_ETIMEDOUT);
  assert_true(k.sent);
  int i = cap_find(&c, "closed connection from 127.0.0.1");
  assert_true(i >= 0);
  assert_int_equal(c.m[i].level, AU_LOG_WARN); /* refused a peer, and went on */
  assert_int_equal(c.m[i].rank, 0);
  i = cap_find(&c, "timed out after");
  assert_true(i >= 0);
  assert_int_equal(c.m[i].level, AU_LOG_ERROR);
  assert_int_equal(c.m[i].rank, 0);
  assert_int_equal(atomic_load(&c.overlaps), 0);
  pthread_mutex_destroy(&c.mu);
}

/* --- calls never overlap; a replaced function is never called again --------------------- */

#define LOGGERS 4
#define ENOUGH  1000 /* calls of each function before the test moves on */

typedef struct replaced {
  atomic_int switched; /* au_log_set(B) has returned */
  atomic_int done;     /* loggers: stop */
  atomic_int late;     /* A was called after the switch */
  atomic_int a_calls, b_calls, logged;
  atomic_int inside, overlaps;
} replaced_t;

static void slow_enter(replaced_t *r)
{
  if (atomic_exchange(&r->inside, 1)) atomic_fetch_add(&r->overlaps, 1);
  for (volatile int i = 0; i < 200; i++) {
  }
  atomic_store(&r->inside, 0);
}

static void fn_a(void *arg, au_log_level_t level, int rank, const char *msg)
{
  (void)level, (void)rank, (void)msg;
  replaced_t *r = arg;
  if (atomic_load(&r->switched)) atomic_fetch_add(&r->late, 1);
  atomic_fetch_add(&r->a_calls, 1);
  slow_enter(r);
}

static void fn_b(void *arg, au_log_level_t level, int rank, const char *msg)
{
  (void)level, (void)rank, (void)msg;
  replaced_t *r = arg;
  atomic_fetch_add(&r->b_calls, 1);
  slow_enter(r);
}

static void *logger(void *arg)
{
  replaced_t *r = arg;
  for (int i = 0; !atomic_load(&r->done); i++) {
    au__log(AU_LOG_INFO, i % 3 - 1, "message %d", i);
    atomic_fetch_add(&r->logged, 1);
  }
  return NULL;
}

static void test_calls_never_overlap_or_outlive_a_replacement(void **state)
{
  (void)state;
  replaced_t r = {0};
  au_log_set(fn_a, &r);
  pthread_t th[LOGGERS];
  for (int i = 0; i < LOGGERS; i++) assert_int_equal(pthread_create(&th[i], NULL, logger, &r), 0);
  while (atomic_load(&r.a_calls) < ENOUGH) sched_yield();
  au_log_set(fn_b, &r); /* while the loggers log */
  atomic_store(&r.switched, 1);
  while (atomic_load(&r.b_calls) < ENOUGH) sched_yield();
  atomic_store(&r.done, 1);
  for (int i = 0; i < LOGGERS; i++) pthread_join(th[i], NULL);
  au_log_set(NULL, NULL);
  assert_int_equal(atomic_load(&r.a_calls) + atomic_load(&r.b_calls), atomic_load(&r.logged));
  assert_int_equal(atomic_load(&r.late), 0);
  assert_int_equal(atomic_load(&r.overlaps), 0);
}

/* --- NULL: stderr, as before; a function that logs does not deadlock -------------------- */

/* Runs fn with stderr going to a file; returns what was written (caller frees). */
static char *with_stderr_captured(void (*fn)(void))
{
  char path[] = "/tmp/augur-test-log-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  off_t n = lseek(fd, 0, SEEK_END);
  char *text = calloc(1, (size_t)n + 1);
  assert_int_equal(pread(fd, text, (size_t)n, 0), n);
  close(fd);
  unlink(path);
  return text;
}

static void log_two(void)
{
  au__log(AU_LOG_ERROR, -1, "no node: %d", 7);
  au__log(AU_LOG_WARN, 3, "rank three");
}

static int again_calls;

static void logs_again(void *arg, au_log_level_t level, int rank, const char *msg)
{
  (void)arg, (void)level, (void)msg;
  again_calls++;
  au__log(AU_LOG_INFO, rank, "from inside the log function"); /* goes to stderr */
}

static void log_through_logs_again(void)
{
  au_log_set(logs_again, NULL);
  au__log(AU_LOG_ERROR, 1, "outer");
  au_log_set(NULL, NULL);
}

static void test_default_is_stderr(void **state)
{
  (void)state;
  au_log_set(NULL, NULL);
  char *text = with_stderr_captured(log_two);
  assert_string_equal(text, "augur: no node: 7\naugur[rank 3]: rank three\n");
  free(text);
  text = with_stderr_captured(log_through_logs_again);
  assert_int_equal(again_calls, 1);
  assert_string_equal(text, "augur[rank 1]: from inside the log function\n");
  free(text);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runtime_messages_reach_the_function),
      cmocka_unit_test(test_io_thread_messages_carry_the_rank),
      cmocka_unit_test(test_calls_never_overlap_or_outlive_a_replacement),
      cmocka_unit_test(test_default_is_stderr),
  };
  return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
