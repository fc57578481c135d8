/* placer.c — the placer actor (placer.h): one per node, it owns placement for every
 * table on the node. It decodes nothing itself: each message goes to the module whose
 * technique it is (relocation, replication, claims), and what concerns several of them
 * is written here once: workers told when an actor they wait for arrives by either road,
 * the owner's decision for an actor (place_plan) carried out by the module that does it,
 * the claims that travel with a moved actor, and the one tick.
 */
#include <stdio.h>
#include <stdlib.h>

#include "actors/idle.h"
#include "actors/placer.h"

#define SYNC_SPACING 4 /* a replica sync that took d is followed by one after 4 d at least */

/* Tells the waiting local workers that the actor is here. */
static void notify_waiters(struct placer *p, rec_t *r)
{
  for (int i = 0; i < r->nwaiters; i++)
    au_send(p->node->workers[r->waiters[i]]->actor, PS_ARRIVED, NULL, 0);
  r->nwaiters = 0;
}

/* An actor (or a replica of it) came here. */
static void arrived(struct placer *p, rec_t *r)
{
  claims_arrived(p, r);
  notify_waiters(p, r);
}

/* The owner decides for an actor it holds and carries the decision out. */
static void decide(struct placer *p, rec_t *r, uint64_t now)
{
  uint8_t st = atomic_load(&pa_of(r)->state);
  if (st != PA_OWNER || r->reloc.handing_off) return;
  const int nodes = p->node->nodes;
  if (!p->work) { /* the cluster's size is known once the node has joined */
    p->claimants = nodeset_new(nodes), p->give = nodeset_new(nodes);
    p->drop = nodeset_new(nodes), p->work = nodeset_new(nodes);
    if (!p->claimants || !p->give || !p->drop || !p->work) {
      free(p->claimants), free(p->give), free(p->drop), free(p->work);
      p->claimants = p->give = p->drop = p->work = NULL;
      return;
    }
  }
  place_input_t in = {.mode = (place_mode_t)r->t->place,
                      .owner = p->node->rank,
                      .replicas = r->repl.replicas,
                      .dropping = r->repl.dropping,
                      .arrived_ns = r->reloc.arrived_ns,
                      .hold_ns = reloc_hold_ns(r),
                      .now_ns = now,
                      .pinned = node_bounded(p->node)};
  claims_inputs(r, now, &in, p->claimants);
  place_plan_t plan = {.give = p->give, .drop = p->drop, .work = p->work};
  place_plan(&in, &plan);
  if (!nodeset_empty(plan.drop)) replication_drop(p, r, plan.drop);
  for (int node = -1; (node = nodeset_next(plan.give, node)) >= 0;)
    if (replication_give(p, r, (uint32_t)node) != 0)
      au__log(AU_LOG_ERROR, p->node->rank, "cannot send a replica to node %d", node);
  if (plan.retry_ns) claims_retry_at(p, r, plan.retry_ns);
  if (plan.move_to >= 0 && relocation_hand_off(p, r, plan.move_to)) {
    /* the claims go with it, held to follow the values */
    obuf_t c = {0};
    claims_pass(r, now, &c);
    if (c.len) rec_hold(p, r, NULL, PS_CLAIM, c.p, (uint32_t)c.len);
    free(c.p);
  }
}

/* Decides for what the last message put on the list, each record once. */
static void decide_listed(struct placer *p)
{
  if (!p->ndecide) return;
  uint64_t now = au_now_ns();
  for (int i = 0; i < p->ndecide; i++) {
    rec_t *r = p->decide[i];
    int seen = 0; /* a batch of claims names an actor many times rarely: look back a little */
    for (int j = i - 1; j >= 0 && j >= i - 8 && !seen; j--) seen = p->decide[j] == r;
    if (!seen) decide(p, r, now);
  }
  p->ndecide = 0;
}

/* A local worker wants these actors here: it waits for them (PS_WANT) or fetches their
 * rows meanwhile (PS_HINT). */
static void on_want(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_want_t want;
  int wid = (int)m->from_port - (int)PS_WORKER_PORT(0);
  if (wid < 0 || wid >= n->nworkers || psm_want_decode(n, m->data, m->len, &want, NULL) != 0)
    return;
  au_table_t *t = want.t;
  int here = 0;
  for (uint32_t i = 0; i < want.n; i++) {
    uint64_t actor = psm_want_actor(&want, i);
    uint8_t st = atomic_load(&t->actors[actor].state);
    if (st == PA_OWNER || st == PA_REPLICA) {
      here = 1; /* came in while the worker asked */
      continue;
    }
    rec_t *r = rec_get(p, t, actor);
    if (!r || (m->type == PS_WANT && rec_add_waiter(r, wid) != 0)) continue;
    if (t->place == AU_PLACE_REPLICATE)
      replication_want(p, r);
    else if (!r->reloc.requested && !r->reloc.handing_off)
      relocation_ask(p, r, 0);
  }
  if (here) au_send(n->workers[wid]->actor, PS_ARRIVED, NULL, 0);
}

/* The one tick: claims that came due and decisions, held moves, replica syncs. */
static void tick(struct placer *p)
{
  claims_tick(p);
  decide_listed(p);
  relocation_tick(p);
  /* the sync's cost follows what changed; when that is much, it runs less often, so that
   * it takes at most a fifth of the placer's thread: a tick that took d waits 4 d */
  uint64_t t0 = au_now_ns();
  if (t0 < p->sync_next_ns) return; /* what is touched stays touched: the node stays busy */
  int sent = replication_tick(p);
  p->sync_next_ns = t0 + SYNC_SPACING * (au_now_ns() - t0);
  idle_tick(p->node, sent);
}

static void placer_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  (void)self;
  struct placer *p = *(struct placer **)state;
  rec_t *r;
  switch (m->type) {
  case PS_WANT:
  case PS_HINT:
    on_want(p, m);
    break;
  case PS_MOVE_REQ:
    relocation_on_move_req(p, m);
    break;
  case PS_MOVE_DATA:
    if ((r = relocation_on_move_data(p, m))) {
      arrived(p, r);
      relocation_release(p, r);
    }
    break;
  case PS_OWNER:
    if ((r = relocation_on_owner(p, m))) notify_waiters(p, r); /* they fetch the rows now */
    break;
  case PS_FWD_REQ:
  case PS_FWD_PUSH:
    relocation_on_forward(p, m);
    break;
  case PL_GRACE:
    if ((r = grace_poll(p, m)) && r->reloc.handing_off) {
      relocation_ship(p, r);
      /* local workers want it back: ask (the new owner holds it a while first) */
      if (r->nwaiters) relocation_ask(p, r, 0);
    }
    break;
  case PS_REP_REQ:
    replication_on_req(p, m);
    break;
  case PS_REP_DATA:
    if ((r = replication_on_data(p, m))) arrived(p, r);
    break;
  case PS_SYNC:
  case PS_FRESH:
    replication_on_entries(p, m, m->type == PS_FRESH);
    break;
  case PS_REP_DROP:
    if (replication_on_drop(p, m, &r) == 1) claims_forget(r); /* a later intent claims anew */
    break;
  case PL_DROP_GRACE:
    if ((r = grace_poll(p, m))) {
      replication_finish_drop(p, r);
      clk_update(p); /* a flush may have waited for its last delta */
    }
    break;
  case PL_CLK_RUN:
  case PL_CLK_NEWS:
  case PS_CLK_FLUSH:
  case PS_CLK_FRESH:
    clk_on_message(p, m);
    break;
  case PS_REP_GONE:
    if ((r = replication_on_gone(p, m))) decide(p, r, au_now_ns());
    break;
  case PS_INTENT:
    claims_on_intent(p, m);
    break;
  case PS_CLAIM:
    claims_on_claim(p, m);
    break;
  case PL_TICK:
    tick(p);
    break;
  default:
    break;
  }
  decide_listed(p);
}

int placer_start(au_node_t *n)
{
  struct placer *p = calloc(1, sizeof(*p));
  if (!p || u64map_init(&p->recs, 6) != 0) {
    free(p);
    return AU_ENOMEM;
  }
  p->node = n;
  grace_register(n, &p->ck);
  action_latency_init(&p->claims.lat, 1000 * 1000); /* a first guess: 1 ms, until measured */
  int rc = au_actor_spawn(n->rt, placer_behaviour, sizeof(p), &p->actor);
  if (rc == 0) rc = au_port_register(n->rt, PS_PLACER_PORT, p->actor);
  if (rc != 0) {
    u64map_destroy(&p->recs);
    free(p);
    return rc;
  }
  *(struct placer **)au_actor_state(p->actor) = p;
  n->placer = p;
  n->placer_actor = p->actor;
  return 0;
}

void placer_stats(const au_node_t *n, au_node_stats_t *st)
{
  struct placer *p = n->placer;
  if (!p) return;
  st->moves_in += counter_get(&p->reloc.moves_in);
  st->moves_out += counter_get(&p->reloc.moves_out);
  st->forwards += counter_get(&p->reloc.forwards);
  st->syncs += counter_get(&p->repl.syncs);
  st->claims += counter_get(&p->claims.claims_sent);
  st->releases += counter_get(&p->claims.releases);
  st->replicas_made += counter_get(&p->repl.replicas_made);
  st->replicas_dropped += counter_get(&p->repl.replicas_dropped);
  long long held = atomic_load(&p->repl.replicas_held);
  st->replicas += held > 0 ? (uint64_t)held : 0;
}

void placer_free(au_node_t *n)
{
  struct placer *p = n->placer;
  if (!p) return;
  for (size_t i = 0; i <= p->recs.mask; i++) {
    rec_t *r = p->recs.slot[i].key ? p->recs.slot[i].val : NULL;
    if (!r) continue;
    replication_free(r);
    claims_free(r);
    rec_free(r);
  }
  u64map_destroy(&p->recs);
  free(p->scratch.p);
  free(p->wire.p);
  free(p->decide);
  free(p->claims.heap);
  free(p->claimants), free(p->give), free(p->drop), free(p->work);
  free(p);
  n->placer = NULL;
}
