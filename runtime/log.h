/* log.h — where the library's messages go: au_log_set's function, or stderr.
 *
 * The invariant: calls of the log function never overlap and never outlive au_log_set
 * replacing it; a message is formatted before the lock is taken, so a slow function
 * delays other messages but never a thread that has none to report.
 */
#ifndef AUGUR_RUNTIME_LOG_H
#define AUGUR_RUNTIME_LOG_H

#include "augur.h"

/* Reports one message (printf format, no trailing newline) at `level` (an AU_LOG_*), for
 * node `rank` or -1 when it belongs to no node of a cluster. Any thread; never fails: a
 * message longer than 1 KiB is cut. */
void au__log(au_log_level_t level, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
