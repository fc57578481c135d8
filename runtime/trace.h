/* trace.h — recording events (the scheduler's, and those its users register) into
 * per-thread buffers, written as Chrome trace-event JSON by au_trace_stop (docs/tracing.md
 * says what users see).
 *
 * The recorder knows no event by meaning: kinds are registered by their users with the
 * names the JSON gives them and their arguments.
 *
 * The invariant: every buffer has one writer at a time — its scheduler thread, the I/O
 * thread, or whoever holds the shared buffer's mutex — and the trace reads or frees a
 * buffer only when no writer can be inside an append (see au_trace_stop in trace.c).
 * While tracing is off, trace_emit costs one relaxed load and a branch.
 */
#ifndef AUGUR_RUNTIME_TRACE_H
#define AUGUR_RUNTIME_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "runtime/ext.h"
#include "runtime/rt.h"

/* Event kinds are small numbers, registered with their names (trace_kind_register, or
 * au__trace_kind from outside runtime/): the JSON calls them by name. The runtime's own,
 * recorded by the scheduler, are below AU__TRACE_USER (runtime/ext.h); their users'
 * (the parameter server's placement events) from it up. */
enum {
  TRACE_STEAL = 1,  /* victim (thread index): a scheduler thread stole */
  TRACE_PARK = 2,   /* sleeping (parked threads, this one included) */
  TRACE_UNPARK = 3, /* ns (parked for; the trace fills it in), token: woke up; token is 1
                     * when a wake-up token woke it, 0 when the run ended */
  TRACE_SPAN = 4,   /* kinds TRACE_SPAN.. below AU__TRACE_USER: au_trace_span's names, in
                     * the order first used; args n, -, -, begin (ns) */
};

/* au_runtime_create / au_runtime_destroy. trace_free writes a trace that is still on.
 * trace_init registers the runtime's own kinds. */
int trace_init(au_runtime_t *rt);
void trace_free(au_runtime_t *rt);

/* Registers `kind` (1..AU__TRACE_MAX-1) as k describes it; k's strings must live as long
 * as the runtime. 0, or AU_EINVAL (a bad kind or name, or the kind is taken by another
 * name). Registering the same name again under the same kind is a no-op. */
int trace_kind_register(au_runtime_t *rt, int kind, const au__trace_kind_t *k);

/* The slow path of trace_emit: appends an event to the calling thread's buffer. */
void trace_record(au_runtime_t *rt, int kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/* Whether recording is on (to skip preparing arguments that cost something). */
static inline int trace_on(au_runtime_t *rt)
{
  return atomic_load_explicit(&rt->trace_on, memory_order_relaxed) != 0;
}

/* Records an event of a registered `kind` with its four arguments, from any thread,
 * if tracing is on. Never blocks on other threads' recording and never overwrites: past
 * the cap (AU_TRACE_MAX_EVENTS) events are counted as dropped. Arguments are evaluated
 * even when tracing is off: pass values at hand, not computations. */
static inline void trace_emit(au_runtime_t *rt, int kind, uint64_t a, uint64_t b, uint64_t c,
                              uint64_t d)
{
  /* relaxed: a stale value only moves an event across au_trace_start/stop; trace_record
   * reads the flag again with acquire before it touches a buffer. */
  if (__builtin_expect(atomic_load_explicit(&rt->trace_on, memory_order_relaxed) != 0, 0))
    trace_record(rt, kind, a, b, c, d);
}

#endif
