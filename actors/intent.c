/* intent.c — placement driven by intents (AU_PLACE_HOT and AU_PLACE_ADAPTIVE).
 *
 * A worker's au_intent(keys, start, end) becomes times on its node: the worker's clock
 * rate (policy.c) says in how many nanoseconds its clock reaches start and end, and the
 * worker hands the actors, the two delays and the two clocks to its placer (PS_INTENT).
 * The placer keeps, per actor, the end of the claim its owner has heard of; an intent that
 * ends later is a new claim, sent once its start is closer than the measured action
 * latency (claim to actor or replica here) plus four deviations and a tick, batched per
 * owner (PS_CLAIM). A claim lasts past the intent's end by a lease, twice the usual gap
 * between this node's intents for the actor (within bounds; a pause such as the next
 * epoch is not a gap). The claim follows the worker's clock (follow_clock): renewed while
 * the clock is short of the intent's end, released once it is well past it.
 *
 * The owner keeps the claims of every node and decides (place_decide) when a claim comes
 * in and on every replica tick: move the actor to the one node that needs it, give a
 * replica to each of several nodes that need it at once, drop replicas whose node's claim
 * has lapsed. An actor with replicas does not move: its replicas are dropped first. The
 * owner also keeps a short history (usage_period): an actor shared in its last period of
 * use is not moved to a lone claimant, and its replicas stay through the usual pause
 * between periods. A move takes the owner's claims along (pass_claims).
 *
 * Dropping a replica (PS_REP_DROP): its node marks it remote (new accesses go to the
 * owner), waits out a grace period over its workers and servers, ships the last delta
 * (PS_SYNC) and then says so (PS_REP_GONE, on the same connection, so after the delta).
 * The owner forgets the replica only then, so no update is lost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/placement.h"
#include "actors/psmsg.h"
#include "runtime/net.h"
#include "runtime/rt.h"
#include "runtime/trace.h"

#define LEASE_MIN (10 * 1000 * 1000ull)   /* a claim outlives its intent at least this */
#define LEASE_MAX (1000 * 1000 * 1000ull) /* ... and at most this */
#define HOT_EVERY 65536                   /* intent keys between hot-threshold updates */
#define GAP_PAUSE 10.0             /* a gap this many times the usual one is a pause, not rhythm */
#define MOVE_HOLD (1000 * 1000ull) /* as placement.c's HOLD_NS */

/* Sends a message that names r's actor alone (PS_REP_DROP, PS_REP_GONE) to node. */
static void send_actor(struct placer *p, const rec_t *r, uint32_t type, uint32_t node)
{
  uint8_t msg[PSM_ACTOR_MAX];
  size_t len = psm_actor_encode(msg, type, &(psm_actor_msg_t){.t = r->t, .actor = r->actor});
  au_send_to(p->node->rt, node, PS_PLACER_PORT, type, msg, len);
}

/* The record of the actor such a message names, or NULL if it names none. */
static rec_t *actor_rec(struct placer *p, const au_msg_t *m)
{
  psm_actor_msg_t a;
  psm_why_t why;
  if (psm_actor_decode(p->node, m->type, m->data, m->len, &a, &why) != 0) {
    fprintf(stderr, "augur[rank %d]: malformed message from node %u: %s\n", p->node->rank,
            m->from_node, why.text);
    return NULL;
  }
  return rec_get(p, a.t, a.actor);
}

/* --- the worker's side ---------------------------------------------------------------- */

int intent_send(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n, au_clock_t start,
                au_clock_t end)
{
  au_node_t *node = w->node;
  obuf_t *b = &w->intent_buf;
  b->len = 0;
  /* a hash set of the actors seen (a batch names an actor many times; the placer should
   * look each up once), in the worker's scratch */
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  if (!w->seen || w->seen_cap < cap) {
    uint64_t *s = realloc(w->seen, cap * sizeof(*s));
    if (!s) return AU_ENOMEM;
    w->seen = s;
    w->seen_cap = cap;
  }
  uint64_t *seen = w->seen;
  memset(seen, 0xff, cap * 8); /* UINT64_MAX: empty (no actor id is that large) */
  const psm_intent_t head = {.t = t,
                             .from_ns = clock_rate_eta(&w->rate, w->clock, start),
                             .until_ns = clock_rate_eta(&w->rate, w->clock, end),
                             .worker = (uint32_t)w->id,
                             .tick_ns = (float)w->rate.ns_per_tick,
                             .start_clock = (uint64_t)start,
                             .end_clock = (uint64_t)end};
  for (size_t i = 0; i < n; i++) {
    uint64_t actor = keys[i] >> t->group_shift;
    size_t h = (size_t)((actor * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
    while (seen[h] != UINT64_MAX && seen[h] != actor) h = (h + 1) & (cap - 1);
    if (seen[h] == actor) continue; /* named already */
    seen[h] = actor;
    if (trace_on(node->rt))
      trace_emit(node->rt, TRACE_INTENT, (uint64_t)t->id, actor, (uint64_t)node->rank,
                 (uint64_t)w->id);
    if (psm_intent_add(b, &head, actor) != 0) return AU_ENOMEM;
  }
  if (!b->len) return 0;
  return au_send_to(node->rt, (uint32_t)node->rank, PS_PLACER_PORT, PS_INTENT, b->p, b->len);
}

/* --- lists and claims ------------------------------------------------------------------ */

static void list(struct placer *p, rec_t *r)
{
  if (r->listed) return;
  r->listed = 1;
  r->next_claimed = p->claimed;
  p->claimed = r;
  replica_arm(p); /* its tick looks at the list */
}

/* Adds a claim for r to the batch for its owner. */
static void put_claim(obuf_t *b, const rec_t *r, uint32_t node, uint16_t hops, int flags,
                      uint64_t from, uint64_t until)
{
  psm_claim_add(b, &(psm_claim_t){.t = r->t,
                                  .actor = r->actor,
                                  .node = node,
                                  .hops = hops,
                                  .flags = (uint8_t)flags,
                                  .from_ns = from,
                                  .until_ns = until});
}

static void send_batches(struct placer *p, obuf_t *out)
{
  au_node_t *n = p->node;
  for (int node = 0; node < n->nodes; node++) {
    if (out[node].len)
      au_send_to(n->rt, (uint32_t)node, PS_PLACER_PORT, PS_CLAIM, out[node].p, out[node].len);
    out[node].len = 0;
  }
}

static void drop_replicas(struct placer *p, rec_t *r, uint64_t nodes)
{
  au_node_t *n = p->node;
  nodes &= r->replicas & ~r->dropping;
  for (int node = 0; node < n->nodes && node < 64; node++)
    if (nodes >> node & 1) send_actor(p, r, PS_REP_DROP, (uint32_t)node);
  r->dropping |= nodes;
}

/* Nodes with a claim that has not lapsed. */
static uint64_t claimants(const rec_t *r, uint64_t now)
{
  uint64_t nodes = 0;
  for (int i = 0; i < r->nclaims; i++)
    if (r->claims[i].until_ns > now && r->claims[i].node < 64) nodes |= 1ull << r->claims[i].node;
  return nodes;
}

/* The claims an owner knows go with the actor it hands off, after the values (as claims
 * that reach it during the hand-off do): the new owner would otherwise decide alone from
 * the claims renewed after the move, half a lease later, and move the actor on while the
 * other claimants still use it. */
static void pass_claims(struct placer *p, rec_t *r, uint64_t now)
{
  obuf_t all = {0};
  for (int i = 0; i < r->nclaims; i++) {
    const claim_t *c = &r->claims[i];
    if (c->until_ns <= now) continue;
    put_claim(&all, r, (uint32_t)c->node, 0, c->hot ? PSM_CLAIM_HOT : 0,
              c->from_ns > now ? c->from_ns - now : 0, c->until_ns - now);
  }
  if (all.len) placement_hold(p, r, PS_CLAIM, all.p, (uint32_t)all.len);
  free(all.p);
  r->nclaims = 0;
  r->together_ns = r->alone_ns = r->seen_ns = 0; /* the new owner watches from here */
  r->shared = 0;
  r->period_end_ns = r->pause_ns = r->keep_until = 0;
}

/* Accounts the time since the owner last looked to one claimant or to several; when no
 * claim is left, the period of use is over and says whether the actor was shared. */
static void usage_period(rec_t *r, uint64_t now)
{
  uint64_t nodes = claimants(r, now);
  if (!nodes) {
    if (r->seen_ns) { /* the period is over */
      r->shared = r->together_ns > r->alone_ns;
      r->period_end_ns = now;
      /* a shared actor used in a rhythm (the next epoch, the next pass) keeps its
       * replicas through a pause half again as long as the last one: nobody writes it
       * meanwhile, so they cost nothing, and making them again would */
      r->keep_until = r->shared && r->pause_ns ? now + r->pause_ns + r->pause_ns / 2 : 0;
    }
    r->together_ns = r->alone_ns = r->seen_ns = 0;
    return;
  }
  if (!r->seen_ns && r->period_end_ns) { /* a new period: the pause before it, quick to
                                          * follow a longer one, slow to shrink */
    uint64_t pause = now - r->period_end_ns;
    r->pause_ns = pause > r->pause_ns ? pause : r->pause_ns - (r->pause_ns - pause) / 4;
  }
  uint64_t dt = r->seen_ns && now > r->seen_ns ? now - r->seen_ns : 0;
  r->seen_ns = now;
  if (nodes & (nodes - 1))
    r->together_ns += dt;
  else
    r->alone_ns += dt;
}

/* The owner decides what to do with an actor it holds, given the claims. */
static void decide(struct placer *p, rec_t *r, uint64_t now)
{
  au_node_t *n = p->node;
  uint8_t st = atomic_load(&pa_of(r)->state);
  if (st != PA_OWNER || r->handing_off) return;
  int k = 0; /* lapsed claims go */
  for (int i = 0; i < r->nclaims; i++)
    if (r->claims[i].until_ns > now) r->claims[k++] = r->claims[i];
  r->nclaims = k;
  int hot = 0; /* hot if any claimant counts it hot (nodes count their own intents) */
  for (int i = 0; i < r->nclaims; i++) hot |= r->claims[i].hot;
  usage_period(r, now);
  place_action_t act = place_decide((place_mode_t)r->t->place, n->rank, r->claims, r->nclaims, hot,
                                    r->replicas & ~r->dropping, r->shared, now);
  switch (act.kind) {
  case PLACE_MOVE:
    if (r->replicas) {
      drop_replicas(p, r, r->replicas); /* first; the move comes after PS_REP_GONE */
      break;
    }
    if (now - r->arrived_ns < MOVE_HOLD) break; /* the tick looks again */
    placement_hand_off(p, r, act.node);
    if (r->handing_off) pass_claims(p, r, now);
    break;
  case PLACE_REPLICAS:
    for (int node = 0; node < n->nodes && node < 64; node++)
      if ((act.nodes >> node & 1) && !(r->replicas >> node & 1))
        if (replica_give(p, r, (uint32_t)node) != 0)
          fprintf(stderr, "augur[rank %d]: cannot send a replica to node %d\n", n->rank, node);
    break;
  case PLACE_DROP:
    if (now >= r->keep_until) drop_replicas(p, r, r->replicas);
    break;
  case PLACE_LEAVE:
    break;
  }
  /* adaptive: a replica whose node no longer claims the actor goes (hot keeps its
   * replicas: they are for the whole run) */
  if (r->t->place == AU_PLACE_ADAPTIVE && r->replicas && now >= r->keep_until)
    drop_replicas(p, r, r->replicas & ~claimants(r, now));
}

static void claim_here(struct placer *p, rec_t *r, int node, int flags, uint64_t from,
                       uint64_t until)
{
  claim_t *c = NULL;
  for (int i = 0; i < r->nclaims; i++)
    if (r->claims[i].node == node) c = &r->claims[i];
  if (flags & PSM_CLAIM_RELEASE) { /* until: now */
    if (c && c->until_ns > until) c->until_ns = until;
    return;
  }
  if (!c) {
    if (r->nclaims == r->capclaims) {
      int cap = r->capclaims ? 2 * r->capclaims : 2;
      claim_t *m = realloc(r->claims, (size_t)cap * sizeof(*m));
      if (!m) return;
      r->claims = m;
      r->capclaims = cap;
    }
    c = &r->claims[r->nclaims++];
    *c = (claim_t){.node = node, .from_ns = from, .until_ns = until};
  } else {
    if (c->until_ns <= from || from < c->from_ns) c->from_ns = from;
    if (until > c->until_ns) c->until_ns = until;
  }
  c->hot = (flags & PSM_CLAIM_HOT) != 0;
  list(p, r);
}

/* A claim for r from `node`, here or on its way to the owner. */
static void claim(struct placer *p, rec_t *r, int node, uint16_t hops, int flags, uint64_t from,
                  uint64_t until, uint64_t now, obuf_t *out)
{
  au_node_t *n = p->node;
  uint8_t st = atomic_load(&pa_of(r)->state);
  if (st == PA_OWNER && !r->handing_off) {
    claim_here(p, r, node, flags, from, until);
    decide(p, r, now);
    return;
  }
  /* handing off: held, and sent on to the new owner after the values; elsewhere (also
   * when this node waits for the actor or a replica: what it asked for may never come)
   * sent on toward the owner; astray: dropped after a few hops */
  if (hops > 2 * n->nodes) return;
  const uint64_t from_d = from > now ? from - now : 0, until_d = until > now ? until - now : 0;
  if (st == PA_HANDING_OFF) {
    obuf_t one = {0};
    put_claim(&one, r, (uint32_t)node, hops, flags, from_d, until_d);
    if (one.len) placement_hold(p, r, PS_CLAIM, one.p, (uint32_t)one.len);
    free(one.p);
    return;
  }
  /* the owner as this node knows it (PS_OWNER keeps that fresh); a node that knows
   * better sends it on */
  int to = (int)pa_of(r)->owner;
  if (to == n->rank) to = placement_next_hop(n, r);
  if (to == n->rank) return;
  put_claim(&out[to], r, (uint32_t)node, (uint16_t)(hops + 1), flags, from_d, until_d);
}

/* PSM_CLAIM_HOT if this node counts r among its hot actors (AU_PLACE_HOT). */
static int hot_here(const rec_t *r)
{
  return r->t->place == AU_PLACE_HOT && r->hits >= r->t->hot_min && r->t->hot_min > 0
             ? PSM_CLAIM_HOT
             : 0;
}

/* This node's claim for r goes out (or is taken here, by its owner). */
static void claim_out(struct placer *p, rec_t *r, uint64_t from, uint64_t until, uint64_t now,
                      obuf_t *out)
{
  r->told_until = until;
  r->due_from = r->due_until = 0;
  uint8_t st = atomic_load(&pa_of(r)->state);
  if (st == PA_REMOTE) r->asked_ns = now; /* the latest claim: it may bring it here */
  counter_add(&p->claims_sent, 1);
  list(p, r); /* the tick releases it once this node's workers are past it */
  claim(p, r, p->node->rank, 0, hot_here(r), from, until, now, out);
}

static void release_out(struct placer *p, rec_t *r, uint64_t now, obuf_t *out)
{
  r->told_until = 0; /* a later intent claims it afresh */
  counter_add(&p->releases, 1);
  claim(p, r, p->node->rank, 0, PSM_CLAIM_RELEASE, now, now, now, out);
}

/* How long a claim outlives its intent: twice the usual gap between this node's intents
 * naming the actor, within bounds. */
static uint64_t lease_of(const rec_t *r)
{
  double g2 = 2.0 * r->gap_ns;
  return g2 < LEASE_MIN ? LEASE_MIN : g2 > LEASE_MAX ? LEASE_MAX : (uint64_t)g2;
}

/* The clock of the worker whose intent naming r ends last. */
static uint64_t end_worker_clock(const struct placer *p, const rec_t *r)
{
  const au_node_t *n = p->node;
  if (r->end_worker < 0 || r->end_worker >= n->nworkers) return r->end_clock;
  return atomic_load_explicit(&n->workers[r->end_worker]->seen_clock, memory_order_relaxed);
}

/* This node's claim on r, once sent, follows the worker's clock rather than the time it
 * was estimated from: while the clock has not reached the end of the latest intent naming
 * r, the claim is renewed before it lapses (a worker slower than estimated, or off the
 * CPU, keeps what it uses); once the clock is past that end by ten of its usual idle gaps
 * between uses, the claim goes at once (the owner need not wait out the lease). */
static void follow_clock(struct placer *p, rec_t *r, uint64_t now, obuf_t *out)
{
  if (r->due_from || !r->end_clock) return;
  uint64_t clk = end_worker_clock(p, r);
  float idle = r->idle_ticks > 1 ? r->idle_ticks : 1;
  if ((float)clk >= (float)r->end_clock + GAP_PAUSE * idle) {
    if (r->told_until) release_out(p, r, now, out);
    return;
  }
  /* renewed before it lapses, or claimed again when it went (the owner dropped this
   * node's replica): the workers still need it */
  uint64_t lease = lease_of(r);
  if (clk >= r->end_clock || r->told_until > now + lease / 2) return;
  uint64_t left = (uint64_t)((float)(r->end_clock - clk) * r->tick_ns);
  claim_out(p, r, now, now + left + lease, now, out);
}

static int cmp_desc(const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* AU_PLACE_HOT: the intent count of the table's hot_actors-th most intended actor, from
 * this node's counts. */
static void hot_thresholds(struct placer *p)
{
  au_node_t *n = p->node;
  for (int tid = 0; tid < n->ntables; tid++) {
    au_table_t *t = n->table_by_id[tid];
    if (!t || t->place != AU_PLACE_HOT) continue;
    size_t cnt = 0, cap = 1024;
    uint32_t *hits = malloc(cap * sizeof(*hits));
    if (!hits) return;
    for (size_t i = 0; i <= p->recs.mask; i++) {
      rec_t *r = p->recs.slot[i].key ? p->recs.slot[i].val : NULL;
      if (!r || r->t != t || !r->hits) continue;
      if (cnt == cap) {
        uint32_t *m = realloc(hits, 2 * cap * sizeof(*hits));
        if (!m) break;
        hits = m;
        cap *= 2;
      }
      hits[cnt++] = r->hits;
    }
    qsort(hits, cnt, sizeof(*hits), cmp_desc);
    uint64_t want = t->hot_actors;
    t->hot_min = want == 0 ? 0 : cnt == 0 ? 0 : want <= cnt ? hits[want - 1] : hits[cnt - 1];
    free(hits);
  }
}

/* How long before a claim's start it goes out: the action's latency with its deviation
 * (policy.c), and one tick more, as the tick is what sends a claim that came due. */
static uint64_t claim_margin(const struct placer *p)
{
  return action_margin(&p->lat) + (uint64_t)p->node->sync_ms * 1000 * 1000;
}

/* --- messages -------------------------------------------------------------------------- */

static obuf_t *batches(struct placer *p)
{
  return calloc((size_t)p->node->nodes, sizeof(obuf_t));
}

static void free_batches(struct placer *p, obuf_t *out)
{
  for (int i = 0; i < p->node->nodes; i++) free(out[i].p);
  free(out);
}

static void on_intent(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_intent_t in;
  psm_why_t why;
  if (psm_intent_decode(n, m->data, m->len, &in, &why) != 0) {
    fprintf(stderr, "augur[rank %d]: malformed intent: %s\n", n->rank, why.text);
    return;
  }
  au_table_t *t = in.t;
  const uint32_t cnt = in.n, wid = in.worker;
  const uint64_t from_d = in.from_ns, until_d = in.until_ns;
  const uint64_t start_clock = in.start_clock, end_clock = in.end_clock;
  const float tick = in.tick_ns;
  obuf_t *out = batches(p);
  if (!out) return;
  uint64_t now = au_now_ns();
  uint64_t margin = claim_margin(p);
  for (uint32_t i = 0; i < cnt; i++) {
    rec_t *r = rec_get(p, t, psm_intent_actor(&in, i));
    if (!r) break;
    r->hits++;
    /* the rhythm of this node's intents for the actor: quick to follow a shorter gap,
     * slow to follow a longer one, deaf to a pause (the next epoch, another phase) */
    if (r->last_intent_ns) {
      double gap = (double)(now - r->last_intent_ns);
      if (r->gap_ns == 0 || gap < r->gap_ns)
        r->gap_ns = (float)gap;
      else if (gap < GAP_PAUSE * r->gap_ns)
        r->gap_ns += (float)(0.25 * (gap - r->gap_ns));
    }
    r->last_intent_ns = now;
    uint64_t lease = lease_of(r);
    /* the intent needs [from, end); the claim covers a lease beyond, so that a node that
     * keeps using the actor renews it about once per lease, not once per intent */
    uint64_t from = now + from_d, end = now + (until_d > from_d ? until_d : from_d);
    if (!r->end_clock || end >= r->last_end_ns || (int)wid == r->end_worker) {
      /* the worker's clock between the end of its last use and this one: its rhythm; a
       * gap many times longer than the use itself is a pause between periods of use (the
       * next epoch: a worker that walks blocks of columns), not rhythm */
      const float use = end_clock > start_clock ? (float)(end_clock - start_clock) : 1.0f;
      const float g = start_clock > r->end_clock ? (float)(start_clock - r->end_clock) : 0.0f;
      if (r->end_clock && (int)wid == r->end_worker && g > 0 && g < GAP_PAUSE * use) {
        if (r->idle_ticks == 0 || g < r->idle_ticks)
          r->idle_ticks = g;
        else if (g < GAP_PAUSE * r->idle_ticks)
          r->idle_ticks += 0.25f * (g - r->idle_ticks);
      }
      if ((int)wid != r->end_worker || end_clock > r->end_clock) r->end_clock = end_clock;
      r->end_worker = (int)wid;
      r->tick_ns = tick;
      r->last_end_ns = end;
    }
    if (end + lease / 2 <= r->told_until) continue; /* the owner knows; renewed halfway */
    uint64_t until = end + lease;
    if (from > now + margin) { /* not yet: the tick sends it when due */
      if (!r->due_from || from < r->due_from) r->due_from = from;
      if (until > r->due_until) r->due_until = until;
      list(p, r);
      continue;
    }
    claim_out(p, r, from, until, now, out);
  }
  send_batches(p, out);
  free_batches(p, out);
  if ((p->intent_keys += cnt) >= HOT_EVERY) {
    p->intent_keys = 0;
    hot_thresholds(p);
  }
}

static void on_claim(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  uint32_t count;
  psm_why_t why;
  if (psm_claims_decode(n, m->data, m->len, &count, &why) != 0) {
    fprintf(stderr, "augur[rank %d]: malformed claim from node %u: %s\n", n->rank, m->from_node,
            why.text);
    return;
  }
  obuf_t *out = batches(p);
  if (!out) return;
  uint64_t now = au_now_ns();
  for (uint32_t i = 0; i < count; i++) {
    psm_claim_t c;
    psm_claim_at(n, m->data, i, &c);
    rec_t *r = rec_get(p, c.t, c.actor);
    if (r) claim(p, r, (int)c.node, c.hops, c.flags, now + c.from_ns, now + c.until_ns, now, out);
  }
  send_batches(p, out);
  free_batches(p, out);
}

void intent_drop_here(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  rec_t *r = actor_rec(p, m);
  if (!r) return;
  if (r->dropping_here) return; /* on its way out already: PS_REP_GONE follows */
  if (atomic_load(&pa_of(r)->state) != PA_REPLICA) {
    /* none here (it never arrived, or this node refused it): say so, or the owner
     * would wait for it for ever and never move the actor */
    send_actor(p, r, PS_REP_GONE, m->from_node);
    return;
  }
  /* no new access from here on; the values stay until the grace period is over */
  replica_unlist(p, r);
  r->dropping_here = 1;
  r->told_until = 0; /* a later intent claims it afresh */
  placer_pending(p, 1);
  atomic_store(&pa_of(r)->state, PA_REMOTE);
  if (placement_grace_begin(p, r, PL_DROP_GRACE) != 0) {
    /* cannot wait: keep the replica (the owner keeps sending it fresh values) */
    fprintf(stderr, "augur[rank %d]: out of memory dropping a replica\n", n->rank);
    atomic_store(&pa_of(r)->state, PA_REPLICA);
    r->dropping_here = 0;
    r->next_replica = p->replicas;
    p->replicas = r;
    placer_pending(p, -1);
  }
}

/* The grace period of a replica leaving is over: its last delta, then the news. */
static void finish_drop(struct placer *p, rec_t *r)
{
  au_node_t *n = p->node;
  param_actor_t *pa = pa_of(r);
  uint32_t owner = pa->owner;
  obuf_t batch = {0};
  uint8_t *d = psm_entry_add(&batch, r->t, r->actor);
  if (d && replica_diff(r->t, pa->values, r->base, d)) {
    au_send_to(n->rt, owner, PS_PLACER_PORT, PS_SYNC, batch.p, batch.len);
    counter_add(&p->syncs, 1);
  } else if (!d) {
    fprintf(stderr, "augur[rank %d]: out of memory: last delta of actor %llu lost\n", n->rank,
            (unsigned long long)r->actor);
  }
  free(batch.p);
  table_values_free(r->t, r->actor, pa->values);
  pa->values = NULL;
  free(r->base);
  r->base = NULL;
  r->dropping_here = 0;
  send_actor(p, r, PS_REP_GONE, owner);
  trace_emit(n->rt, TRACE_REPLICA_DROP, (uint64_t)r->t->id, r->actor, owner, 0);
  counter_add(&p->replicas_dropped, 1);
  atomic_fetch_sub(&p->replicas_held, 1);
  placer_pending(p, -1);
}

static void on_gone(struct placer *p, const au_msg_t *m)
{
  rec_t *r = m->from_node < 64 ? actor_rec(p, m) : NULL;
  if (!r) return;
  r->dropping &= ~(1ull << m->from_node);
  replica_gone(p, r, (int)m->from_node);
  decide(p, r, au_now_ns());
}

void intent_handle(struct placer *p, const au_msg_t *m)
{
  switch (m->type) {
  case PS_INTENT:
    on_intent(p, m);
    break;
  case PS_CLAIM:
    on_claim(p, m);
    break;
  case PS_REP_DROP:
    intent_drop_here(p, m);
    break;
  case PS_REP_GONE:
    on_gone(p, m);
    break;
  case PL_DROP_GRACE: {
    rec_t *r = placement_grace_poll(p, m);
    if (r && r->dropping_here) finish_drop(p, r);
    break;
  }
  default:
    break;
  }
}

void intent_tick(struct placer *p)
{
  /* Only while this node's workers run: a timer is not a message, so what a tick starts
   * on an idle node would escape the end-of-run detection (a move still on the wire when
   * au_node_run returns). Claims and answers that arrive as messages are acted on always. */
  if (!p->claimed || atomic_load(&p->node->active) == 0) return;
  obuf_t *out = batches(p);
  if (!out) return;
  uint64_t now = au_now_ns();
  uint64_t margin = claim_margin(p);
  for (rec_t **pp = &p->claimed; *pp;) {
    rec_t *r = *pp;
    if (r->due_from && r->due_from <= now + margin)
      claim_out(p, r, r->due_from, r->due_until, now, out);
    else
      follow_clock(p, r, now, out);
    decide(p, r, now);
    if (!r->due_from && !r->nclaims && !r->replicas && r->told_until <= now &&
        end_worker_clock(p, r) >= r->end_clock) { /* nothing left */
      *pp = r->next_claimed;
      r->listed = 0;
      r->next_claimed = NULL;
      continue;
    }
    pp = &r->next_claimed;
  }
  send_batches(p, out);
  free_batches(p, out);
}

void intent_arrived(struct placer *p, rec_t *r)
{
  /* the new owner's own claim: it went to the old owner, which passed it on, but the
   * actor can arrive first (a move asked for by a worker, not by the claim) */
  uint64_t now = au_now_ns();
  if (atomic_load(&pa_of(r)->state) == PA_OWNER && r->told_until > now) {
    claim_here(p, r, p->node->rank, hot_here(r), now, r->told_until);
  }
  if (!r->asked_ns) return;
  uint64_t took = now - r->asked_ns;
  r->asked_ns = 0;
  /* a claim that was not acted on at once (the owner waited for other claims to lapse)
   * says nothing about the latency of the action */
  if (p->lat.samples == 0 || took < 10.0 * p->lat.ns) action_latency_observe(&p->lat, took);
}

void intent_free(rec_t *r)
{
  free(r->claims);
  r->claims = NULL;
  r->nclaims = r->capclaims = 0;
}
