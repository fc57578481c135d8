/* ctx.c — the per-thread context (rt.h's rt_tls): set on a runtime's scheduler threads and
 * its I/O thread, NULL everywhere else. A file of its own so that every layer can read it
 * without depending on the scheduler. */
#include "runtime/rt.h"

_Thread_local rt_ctx_t *rt_tls;
