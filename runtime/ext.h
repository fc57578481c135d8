/* ext.h — the runtime's extension interface: what the parameter server (actors/) uses
 * from the runtime beyond the public augur.h. actors/ includes this header and augur.h,
 * nothing else of runtime/, so the runtime's internal structs and modules can change
 * without touching it (docs/architecture.md, "Module boundaries").
 *
 * Names here are au__* (internal, but across the boundary), plus the runtime's small
 * standalone utilities that the parameter server uses as they are.
 */
#ifndef AUGUR_RUNTIME_EXT_H
#define AUGUR_RUNTIME_EXT_H

#include <stdint.h>

#include "augur.h"
#include "runtime/counter.h" /* counters that one thread writes and any reads */
#include "runtime/log.h"     /* au__log: messages through au_log_set's function */
#include "runtime/u64map.h"  /* a hash map from 64-bit keys to pointers */

/* --- collective runs in a cluster ---------------------------------------------------
 * In a cluster the runtime is never quiescent (the network can always bring a message);
 * a collective run ends instead when every node has declared itself idle and no message
 * is in flight anywhere (docs/cluster.md, "Runs: when is a distributed run over?"). */

/* Main thread, collective: runs the runtime until then. 0, AU_ENODE (a node was lost) or
 * AU_EBUSY (a run is in progress). */
int au__cluster_run(au_runtime_t *rt);
/* Any thread: this node's own sources of messages (its workers) are idle (1) or busy (0)
 * in the current run. A no-op outside a cluster. */
void au__cluster_idle(au_runtime_t *rt, int idle);
/* Any thread: payload bytes of the data messages this node has sent to other nodes. */
uint64_t au__bytes_sent(const au_runtime_t *rt);
/* The same for the data messages of type `type`. Counted in AU__BYTES_TYPES slots, slot
 * type % AU__BYTES_TYPES for the first type that used it: another type of the same slot
 * reads 0 (its bytes are in au__bytes_sent only). The parameter server's types are
 * consecutive numbers, fewer than the slots: each has one unless a program's own type of
 * its slot was sent first. */
#define AU__BYTES_TYPES 32
uint64_t au__bytes_sent_type(const au_runtime_t *rt, uint32_t type);

/* --- scheduling ---------------------------------------------------------------------- */

/* On a scheduler thread, from a behaviour: this turn was a long one (user code ran, a
 * worker's step), so the thread's next turn looks at the inject queue first: messages from
 * other threads (the network's) wait one such turn, not many. A no-op elsewhere. */
void au__long_turn(void);

/* --- trace events -------------------------------------------------------------------
 * The trace recorder (au_trace_start) knows the scheduler's events only; its users
 * register theirs, by number, with the names the JSON gives them (docs/tracing.md). */

#define AU__TRACE_USER 16 /* the first kind a user may register; below: the runtime's */
#define AU__TRACE_MAX  64 /* kinds are below this */

typedef struct au__trace_kind {
  const char *name;   /* the event's name in the JSON */
  const char *arg[4]; /* the names of its four arguments; NULL: not written */
  /* NULL, or the name of an arrow drawn between two events of different threads or
   * nodes that pass the same id (au__trace_flow) as their fourth argument: such an event
   * is drawn 1 us wide, its id in hex; 0 means no arrow */
  const char *flow;
  int flow_end; /* with flow: 0 = the arrow starts at this event, 1 = it ends here */
} au__trace_kind_t;

/* Registers `kind` (AU__TRACE_USER..AU__TRACE_MAX-1) in rt's trace; the strings must live
 * as long as rt. Before recording starts, or at any time from one thread. 0, or AU_EINVAL
 * (a bad kind or name; the kind is taken by another name). Registering the same name
 * again under the same kind is a no-op. */
int au__trace_kind(au_runtime_t *rt, int kind, const au__trace_kind_t *k);

/* Records an event of a registered kind, if tracing is on; from any thread, never
 * blocking on other threads' recording (see au_trace_start for the cap). The arguments
 * are evaluated even when it is off: pass values at hand, or test au_trace_enabled. */
void au__trace(au_runtime_t *rt, int kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/* A flow id from three numbers that both ends of an arrow know; never 0. */
static inline uint64_t au__trace_flow(uint64_t a, uint64_t b, uint64_t c)
{
  uint64_t x = (a + 1) * 0x9e3779b97f4a7c15ull;
  x ^= (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
  x ^= (c + 1) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x ? x : 1;
}

#endif
