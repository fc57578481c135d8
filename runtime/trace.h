/* trace.h — recording placement and scheduler events into per-thread buffers, written as
 * Chrome trace-event JSON by au_trace_stop (docs/tracing.md says what users see).
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

#include "runtime/rt.h"

/* Event kinds. The numbers are stable; the JSON calls them by name (see trace.c). What the
 * four arguments a, b, c, d mean depends on the kind, as listed (the JSON "args" use
 * these names; "-" is not written). `table` is the table's id (creation order, the same
 * on every node), `actor` the parameter actor's index in its table, nodes are ranks. */
typedef enum trace_kind {
  TRACE_INTENT = 1,         /* table, actor, node (of the worker), worker: intent registered */
  TRACE_RELOC_START = 2,    /* table, actor, to (new owner), flow: the old owner lets it go */
  TRACE_RELOC_END = 3,      /* table, actor, to (new owner), flow: the new owner has it */
  TRACE_REPLICA_CREATE = 4, /* table, actor, owner (primary's node), bytes */
  TRACE_REPLICA_SYNC = 5,   /* table, actor, owner, rows (changed rows received) */
  TRACE_REPLICA_DROP = 6,   /* table, actor, owner, - */
  TRACE_REMOTE_ACCESS = 7,  /* table, actor, node (fetched from), rows: a batch of rows */
  TRACE_FORWARD = 8,        /* table, actor, to (node it goes on to), hops: its target moved */
  TRACE_STEAL = 9,          /* victim (thread index), -, -, -: a scheduler thread stole */
  TRACE_PARK = 10,          /* sleeping (parked threads, this one included), -, -, - */
  TRACE_UNPARK = 11,        /* ns (parked for; the trace fills it in), token, -, -: woke up;
                             * token is 1 when a wake-up token woke it, 0 when the run ended */
  TRACE_NKINDS
} trace_kind_t;

/* A flow id for a relocation: both ends must pass the same one so that the JSON draws an
 * arrow from the old owner's relocation_start to the new owner's relocation_end. Built
 * from what both know: the table id, the actor and its move count (param_actor_t's
 * version, which travels with it). Never 0; 0 as an argument means "no arrow". */
static inline uint64_t trace_flow_id(uint64_t table, uint64_t actor, uint64_t move)
{
  uint64_t x = (table + 1) * 0x9e3779b97f4a7c15ull;
  x ^= (actor + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
  x ^= (move + 1) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x ? x : 1;
}

/* au_runtime_create / au_runtime_destroy. trace_free writes a trace that is still on. */
int trace_init(au_runtime_t *rt);
void trace_free(au_runtime_t *rt);

/* The slow path of trace_emit: appends an event to the calling thread's buffer. */
void trace_record(au_runtime_t *rt, int kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/* Whether recording is on (to skip preparing arguments that cost something). */
static inline int trace_on(au_runtime_t *rt)
{
  return atomic_load_explicit(&rt->trace_on, memory_order_relaxed) != 0;
}

/* Records an event of `kind` (a TRACE_* value) with its four arguments, from any thread,
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
