/* log.c — the library's messages: formatted here, then handed to the function that
 * au_log_set installed, or written to stderr as "augur[rank R]: text" ("augur: text"
 * when the message names no node).
 *
 * The sink is process-wide, the one piece of global state outside a node: messages can
 * come before any runtime exists (a bad environment in au_node_create) and from threads
 * that belong to none. One mutex serializes the calls, so the function needs no locking
 * of its own and lines from different threads never mix; au_log_set takes the same mutex,
 * so once it returns the previous function is never called again.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "runtime/log.h"

#define LINE_MAX_BYTES 1024

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static au_log_fn log_fn; /* under log_mu; NULL: stderr */
static void *log_arg;
/* The log function called into augur, which logged again: write that one to stderr
 * rather than deadlock on log_mu. */
static _Thread_local int in_log;

static void write_stderr(int rank, const char *msg)
{
  if (rank >= 0)
    fprintf(stderr, "augur[rank %d]: %s\n", rank, msg);
  else
    fprintf(stderr, "augur: %s\n", msg);
}

void au_log_set(au_log_fn fn, void *arg)
{
  pthread_mutex_lock(&log_mu);
  log_fn = fn;
  log_arg = fn ? arg : NULL;
  pthread_mutex_unlock(&log_mu);
}

void au__log(au_log_level_t level, int rank, const char *fmt, ...)
{
  char line[LINE_MAX_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (in_log) {
    write_stderr(rank, line);
    return;
  }
  pthread_mutex_lock(&log_mu);
  if (log_fn) {
    in_log = 1;
    log_fn(log_arg, level, rank, line);
    in_log = 0;
  } else {
    write_stderr(rank, line);
  }
  pthread_mutex_unlock(&log_mu);
}
