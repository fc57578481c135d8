/* policy.c — clock rates, action timing and placement decisions (see policy.h). */
#include "actors/policy.h"

#include <string.h>

#define EWMA_ALPHA   0.25
#define PAUSE_FACTOR 10.0 /* a tick this many times slower than usual was a pause */

void clock_rate_tick(clock_rate_t *r, au_clock_t clock, uint64_t now_ns)
{
  if (r->seen && clock > r->last_clock && now_ns > r->last_ns) {
    double sample = (double)(now_ns - r->last_ns) / (double)(clock - r->last_clock);
    if (r->ns_per_tick == 0)
      r->ns_per_tick = sample;
    else if (sample < PAUSE_FACTOR * r->ns_per_tick)
      r->ns_per_tick += EWMA_ALPHA * (sample - r->ns_per_tick);
  }
  r->last_clock = clock;
  r->last_ns = now_ns;
  r->seen = 1;
}

uint64_t clock_rate_eta(const clock_rate_t *r, au_clock_t clock, au_clock_t target)
{
  if (target <= clock || r->ns_per_tick <= 0) return 0;
  return (uint64_t)((double)(target - clock) * r->ns_per_tick);
}

void action_latency_init(action_latency_t *l, uint64_t guess_ns)
{
  l->ns = (double)guess_ns;
  l->dev = l->ns / 4;
  l->samples = 0;
}

void action_latency_observe(action_latency_t *l, uint64_t took_ns)
{
  double x = (double)took_ns;
  if (l->samples++ == 0) {
    l->ns = x;
    l->dev = x / 4;
    return;
  }
  double d = x > l->ns ? x - l->ns : l->ns - x;
  l->dev += EWMA_ALPHA * (d - l->dev);
  l->ns += EWMA_ALPHA * (x - l->ns);
}

uint64_t action_margin(const action_latency_t *l)
{
  return (uint64_t)(l->ns + 4.0 * l->dev);
}

uint64_t action_delay(const action_latency_t *l, uint64_t eta_ns)
{
  uint64_t margin = action_margin(l);
  return eta_ns > margin ? eta_ns - margin : 0;
}

static const char *const mode_names[] = {"classic", "replicate", "relocate", "hot", "adaptive"};

int place_mode_parse(const char *name, place_mode_t *out)
{
  for (int m = 0; m < (int)(sizeof(mode_names) / sizeof(mode_names[0])); m++)
    if (name && strcmp(name, mode_names[m]) == 0) {
      *out = (place_mode_t)m;
      return 0;
    }
  return AU_EINVAL;
}

const char *place_mode_name(place_mode_t mode)
{
  return (unsigned)mode < sizeof(mode_names) / sizeof(mode_names[0]) ? mode_names[mode] : "?";
}

/* The active claim that starts first, or NULL. */
static const claim_t *first_claim(const claim_t *c, int n, uint64_t now)
{
  const claim_t *first = NULL;
  for (int i = 0; i < n; i++)
    if (c[i].until_ns > now && (!first || c[i].from_ns < first->from_ns)) first = &c[i];
  return first;
}

/* Into out: the nodes with an active claim, optionally only those overlapping
 * [from, until) of `within`; how many. */
static unsigned claimants(const claim_t *c, int n, uint64_t now, const claim_t *within,
                          nodeset_t *out)
{
  nodeset_clear(out);
  for (int i = 0; i < n; i++) {
    if (c[i].until_ns <= now) continue;
    if (within && (c[i].from_ns >= within->until_ns || c[i].until_ns <= within->from_ns)) continue;
    nodeset_add(out, c[i].node);
  }
  return nodeset_count(out);
}

static place_action_t move_to_first(int owner, const claim_t *c, int n, uint64_t now)
{
  const claim_t *first = first_claim(c, n, now);
  if (!first || first->node == owner) return (place_action_t){.kind = PLACE_LEAVE};
  return (place_action_t){.kind = PLACE_MOVE, .node = first->node};
}

/* Replicas for `nodes` but the owner. */
static place_action_t replicate_to(int owner, nodeset_t *nodes)
{
  nodeset_del(nodes, owner);
  return nodeset_empty(nodes) ? (place_action_t){.kind = PLACE_LEAVE}
                              : (place_action_t){.kind = PLACE_REPLICAS};
}

place_action_t place_decide(place_mode_t mode, int owner, const claim_t *claims, int n, int hot,
                            const nodeset_t *replicas, int shared, uint64_t now_ns,
                            nodeset_t *nodes)
{
  const int has_replicas = !nodeset_empty(replicas);
  nodeset_clear(nodes);
  switch (mode) {
  case PLACE_CLASSIC:
    return (place_action_t){.kind = PLACE_LEAVE};
  case PLACE_REPLICATE:
    /* every node keeps what it touched, for the whole run: never drop */
    claimants(claims, n, now_ns, NULL, nodes);
    return replicate_to(owner, nodes);
  case PLACE_RELOCATE:
    return move_to_first(owner, claims, n, now_ns);
  case PLACE_HOT:
    if (hot) {
      claimants(claims, n, now_ns, NULL, nodes);
      return replicate_to(owner, nodes);
    }
    /* the others as adaptive places them (cluster.md: moved to a lone claimant, with
     * replicas while claims overlap) */
    /* fall through */
  case PLACE_ADAPTIVE: {
    const claim_t *first = first_claim(claims, n, now_ns);
    if (!first)
      return has_replicas ? (place_action_t){.kind = PLACE_DROP}
                          : (place_action_t){.kind = PLACE_LEAVE};
    /* who needs it while the first claimant does: one node -> move it there; several
     * at once -> a replica for each, the owner keeps it */
    if (claimants(claims, n, now_ns, first, nodes) <= 1) {
      nodeset_clear(nodes);
      /* a lone claimant that holds a replica keeps reading it: moving the actor there
       * would first drop that replica, and its workers would wait for the move */
      if (first->node != owner && nodeset_has(replicas, first->node))
        return (place_action_t){.kind = PLACE_LEAVE};
      /* an actor that several nodes used together last time: the others come again, and
       * a move now would pull it away from them (in turn, every actor to the node that
       * happens to be first) */
      if (first->node != owner && shared) {
        nodeset_add(nodes, first->node);
        return replicate_to(owner, nodes);
      }
      if (first->node != owner) return (place_action_t){.kind = PLACE_MOVE, .node = first->node};
      return has_replicas ? (place_action_t){.kind = PLACE_DROP}
                          : (place_action_t){.kind = PLACE_LEAVE};
    }
    return replicate_to(owner, nodes);
  }
  }
  return (place_action_t){.kind = PLACE_LEAVE};
}

int au_place_parse(const char *name, au_place_t *out)
{
  place_mode_t m;
  if (!out || place_mode_parse(name, &m) != 0) return AU_EINVAL;
  *out = (au_place_t)m;
  return 0;
}

const char *au_place_name(au_place_t place)
{
  return place_mode_name((place_mode_t)place);
}

void place_plan(const place_input_t *in, place_plan_t *plan)
{
  plan->move_to = -1;
  plan->retry_ns = 0;
  nodeset_clear(plan->drop);
  const uint64_t now = in->now_ns, hold = in->hold_ns ? in->hold_ns : PLACE_HOLD_NS;
  /* the replicas that have not been told to go yet: place_decide's view */
  nodeset_t *staying = plan->work;
  nodeset_clear(staying);
  nodeset_union(staying, in->replicas);
  nodeset_minus(staying, in->dropping);
  place_action_t act = place_decide(in->mode, in->owner, in->claims, in->nclaims, in->hot, staying,
                                    in->shared, now, plan->give);
  switch (act.kind) {
  case PLACE_MOVE:
    if (in->pinned) { /* a replica there, the owner stays (consistency.c says why) */
      nodeset_clear(plan->give);
      nodeset_add(plan->give, act.node);
      nodeset_minus(plan->give, in->replicas);
      break;
    }
    if (!nodeset_empty(in->replicas))
      nodeset_union(plan->drop, in->replicas); /* first; the move comes once they are gone */
    else if (now - in->arrived_ns >= hold)
      plan->move_to = act.node;
    else
      plan->retry_ns = in->arrived_ns + hold;
    break;
  case PLACE_REPLICAS:
    nodeset_minus(plan->give, in->replicas); /* those that have one keep it */
    break;
  case PLACE_DROP:
    if (now >= in->keep_until) nodeset_union(plan->drop, in->replicas);
    break;
  case PLACE_LEAVE:
    break;
  }
  /* adaptive, and hot's actors that are not hot: a replica whose node no longer claims
   * the actor goes (a hot actor keeps its replicas: they are for the whole run) */
  const int adaptive = in->mode == PLACE_ADAPTIVE || (in->mode == PLACE_HOT && !in->hot);
  if (adaptive && !nodeset_empty(in->replicas) && now >= in->keep_until) {
    for (int node = -1; (node = nodeset_next(in->replicas, node)) >= 0;)
      if (!nodeset_has(in->claimants, node)) nodeset_add(plan->drop, node);
  }
  nodeset_and(plan->drop, in->replicas);
  nodeset_minus(plan->drop, in->dropping);
}
