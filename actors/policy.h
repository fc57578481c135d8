/* policy.h — the placement policy and its inputs: how fast each worker's clock runs,
 * when an intent must be acted on to be in time, and what to do with a parameter actor
 * given who intends it. Pure functions of their arguments (no clock read, no I/O), so
 * every decision can be tested and traced.
 *
 * The invariant: the static techniques are the same machinery with a fixed answer, so
 * one run can compare them: classic never moves, replicate copies to every claimant,
 * relocate moves to the claimant that needs it first, hot replicates the hot actors and
 * relocates the rest, adaptive decides from the claims alone.
 */
#ifndef AUGUR_ACTORS_POLICY_H
#define AUGUR_ACTORS_POLICY_H

#include <stdint.h>

#include "actors/nodeset.h"
#include "augur.h"

/* --- clock rates ------------------------------------------------------------------- */

/* A worker's clock speed, as an exponentially weighted mean of nanoseconds per tick.
 * Gaps far longer than the mean (a pause between runs) are not samples. */
typedef struct clock_rate {
  double ns_per_tick; /* 0 until the first sample */
  uint64_t last_ns;
  au_clock_t last_clock;
  int seen;
} clock_rate_t;

/* Records that the clock reads `clock` at time now_ns. */
void clock_rate_tick(clock_rate_t *r, au_clock_t clock, uint64_t now_ns);
/* Estimated nanoseconds from now until the clock reaches `target` (0 if it already
 * has, or if no rate is known yet: act at once rather than late). */
uint64_t clock_rate_eta(const clock_rate_t *r, au_clock_t clock, au_clock_t target);

/* --- action timing ------------------------------------------------------------------- */

/* How long actions take (relocation, replica set-up), as a running estimate; starts at
 * a guess and learns from every completed action: a mean and a mean deviation, as TCP
 * estimates its round trip (RFC 6298), so that the margin covers the slow ones too. */
typedef struct action_latency {
  double ns;  /* current estimate */
  double dev; /* its mean deviation */
  int samples;
} action_latency_t;

void action_latency_init(action_latency_t *l, uint64_t guess_ns);
void action_latency_observe(action_latency_t *l, uint64_t took_ns);
/* How long before an intent's start to act on it: the latency plus four deviations. */
uint64_t action_margin(const action_latency_t *l);
/* When to act on an intent that starts in eta_ns: now, or later (ns from now), with that
 * margin so that the rows are there in time. */
uint64_t action_delay(const action_latency_t *l, uint64_t eta_ns);

/* --- decisions ------------------------------------------------------------------------ */

typedef enum place_mode {
  PLACE_CLASSIC = 0,
  PLACE_REPLICATE,
  PLACE_RELOCATE,
  PLACE_HOT,
  PLACE_ADAPTIVE,
} place_mode_t;

/* "classic", "replicate", "relocate", "hot", "adaptive" -> mode; 0 or AU_EINVAL. */
int place_mode_parse(const char *name, place_mode_t *out);
const char *place_mode_name(place_mode_t mode);

/* One node's need for a parameter actor: from..until in the deciding node's clock. */
typedef struct claim {
  int node;
  int hot; /* AU_PLACE_HOT: the claiming node counts the actor among its hot ones */
  uint64_t from_ns, until_ns;
} claim_t;

typedef enum place_kind {
  PLACE_LEAVE = 0, /* nothing to do */
  PLACE_MOVE,      /* relocate ownership to `node` */
  PLACE_REPLICAS,  /* make sure each node in `nodes` holds a replica */
  PLACE_DROP,      /* no one needs the replicas any more: drop them */
} place_kind_t;

typedef struct place_action {
  place_kind_t kind;
  int node; /* PLACE_MOVE */
} place_action_t;

/* Decides for one parameter actor owned by `owner` at time now_ns. claims may overlap
 * and come in any order; expired ones (until_ns <= now_ns) count as absent. hot: the
 * actor is among the hot ones (PLACE_HOT only). replicas: the nodes that hold a replica
 * of it (NULL: none). shared: in its last period of use (claims without a break) several
 * nodes claimed it together for longer than one alone did (PLACE_ADAPTIVE: a lone
 * claimant then gets a replica, not the actor; the others are likely on their way
 * again). For PLACE_REPLICAS, `nodes` (sized to the cluster) gets the nodes that should
 * hold one; otherwise it is left empty. */
place_action_t place_decide(place_mode_t mode, int owner, const claim_t *claims, int n, int hot,
                            const nodeset_t *replicas, int shared, uint64_t now_ns,
                            nodeset_t *nodes);

/* What the owner knows of an actor when it decides, and what it then does (place_plan).
 * Node sets are sized to the cluster; a NULL one is empty. */
typedef struct place_input {
  place_mode_t mode;
  int owner;             /* this node, which owns the actor */
  const claim_t *claims; /* the claims that have not lapsed */
  int nclaims;
  const nodeset_t *claimants; /* their nodes */
  int hot;                    /* AU_PLACE_HOT: a claimant counts the actor among its hot ones */
  int shared;                 /* several nodes used it together in its last period of use */
  uint64_t keep_until;        /* ... and its replicas stay until then, through a pause */
  const nodeset_t *replicas;  /* nodes holding a replica */
  const nodeset_t *dropping;  /* ... of which these were told to go */
  uint64_t arrived_ns;        /* when the actor last arrived here */
  uint64_t hold_ns; /* ... and how long it stays before it moves again (0: PLACE_HOLD_NS) */
  uint64_t now_ns;
  int pinned; /* the owner does not move it (AU_SSP / AU_BSP): a lone claimant gets a
                 replica instead */
} place_input_t;

typedef struct place_plan {
  int move_to;       /* hand the actor off to this node; -1: it stays */
  uint64_t retry_ns; /* a move waits out the hold until then: decide again (0: no) */
  nodeset_t *give;   /* the caller's sets, sized to the cluster: nodes that get a replica, */
  nodeset_t *drop;   /* replicas told to go, */
  nodeset_t *work;   /* and one for place_plan's own use */
} place_plan_t;

/* An actor that arrived stays at least this long before it moves again (no ping-pong:
 * the workers that waited for it get to use it). */
#define PLACE_HOLD_NS (1000 * 1000ull)

/* The owner's whole decision for one actor: place_decide's answer, carried out under the
 * rules that an actor with replicas drops them before it moves, that an actor that just
 * arrived stays a while, that the replicas of a shared actor with a rhythm stay through
 * its pause, and (adaptive) that a replica whose node no longer claims the actor goes. */
void place_plan(const place_input_t *in, place_plan_t *plan);

#endif
