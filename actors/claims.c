/* claims.c — placement driven by intents (AU_PLACE_HOT and AU_PLACE_ADAPTIVE; placer.h).
 *
 * A worker's au_worker_intent(keys, start, end) arrives here as times: the worker's clock rate
 * says in how many nanoseconds its clock reaches start and end (worker.c sends PS_INTENT).
 * The placer keeps, per actor, the end of the claim its owner has heard of; an intent
 * that ends later is a new claim, sent once its start is closer than CLAIM_AHEAD or the
 * measured action latency (claim to actor or replica here) plus four deviations and a
 * tick, whichever is longer, batched per owner (PS_CLAIM). A claim lasts past the intent's
 * end by a lease, twice the usual gap between this node's intents for the actor (within
 * bounds; a pause such as the next epoch is not a gap). The claim follows the worker's
 * clock (follow_clock): renewed while the clock is short of the intent's end, released
 * once it is past it (release_clock).
 *
 * The owner keeps the claims of every node, and a short history of the actor's use
 * (usage_period): whether several nodes used it together in its last period of use, and
 * the pauses between periods. The placer decides from them (claims_inputs, place_plan)
 * when a claim comes in and on every tick; a move takes the claims along (claims_pass).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/placer.h"

#define LEASE_MIN    (10 * 1000 * 1000ull)   /* a claim outlives its intent at least this */
#define LEASE_MAX    (1000 * 1000 * 1000ull) /* ... and at most this */
#define HOT_MIN_KEYS 64   /* intent keys at least between hot-threshold updates */
#define GAP_PAUSE    10.0 /* a gap this many times the usual one is a pause, not rhythm */
#define MOVE_HOLD    (1000 * 1000ull) /* as placement.c's HOLD_NS */
/* A claim goes out at least this long before its start: the owner plans from the claims'
 * windows, and one told early can move the actor as soon as the node before lets it go
 * (augur-lda on 4 nodes, K = 1000: 1.2-1.5 s a sweep with claims sent only the action's
 * latency ahead, 0.75-0.8 s with this; docs/cluster.md) */
#define CLAIM_AHEAD (1000 * 1000 * 1000ull)

/* --- lists and claims ------------------------------------------------------------------ */

/* --- the wake heap ----------------------------------------------------------------------- */

static void heap_up(wake_t *h, size_t i)
{
  while (i > 0 && h[(i - 1) / 2].at > h[i].at) {
    wake_t t = h[i];
    h[i] = h[(i - 1) / 2];
    h[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static void heap_down(wake_t *h, size_t n, size_t i)
{
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && h[l].at < h[m].at) m = l;
    if (l + 1 < n && h[l + 1].at < h[m].at) m = l + 1;
    if (m == i) return;
    wake_t t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* Drops the stale entries (those whose time is not their record's any more) and makes a
 * heap of the rest, once they are more than half of it: a record scheduled earlier and
 * earlier leaves one behind each time. */
static void heap_compact(claims_state_t *s)
{
  size_t k = 0;
  for (size_t i = 0; i < s->nheap; i++)
    if (s->heap[i].r->claims.wake_ns == s->heap[i].at) s->heap[k++] = s->heap[i];
  s->nheap = k;
  for (size_t i = k / 2; i-- > 0;) heap_down(s->heap, k, i);
}

/* r is to be looked at `at` (an earlier time than what it waits for wins; a later one
 * replaces it once that one comes and finds nothing). */
static void wake_at(struct placer *p, rec_t *r, uint64_t at)
{
  claims_state_t *s = &p->claims;
  if (!at || (r->claims.wake_ns && r->claims.wake_ns <= at)) return;
  if (!r->claims.wake_ns) s->live++;
  if (s->nheap > 2 * s->live + 256) heap_compact(s);
  if (s->nheap == s->capheap) {
    size_t cap = s->capheap ? 2 * s->capheap : 256;
    wake_t *h = realloc(s->heap, cap * sizeof(*h));
    if (!h) return;
    s->heap = h;
    s->capheap = cap;
  }
  r->claims.wake_ns = at;
  s->heap[s->nheap] = (wake_t){at, r};
  heap_up(s->heap, s->nheap++);
  placer_arm_tick(p); /* the tick looks at the heap */
}

void claims_retry_at(struct placer *p, rec_t *r, uint64_t at)
{
  r->claims.retry_ns = at;
  wake_at(p, r, at);
}

static uint64_t end_worker_clock(const struct placer *p, const rec_t *r);
static uint64_t lease_of(const rec_t *r);
static uint64_t claim_margin(const struct placer *p);

/* The worker's clock at which this node's claim on r goes: ten of its usual idle gaps past
 * the end of the latest intent when it uses r in a rhythm (a gap short against the use:
 * it comes back soon, and a move away and back would cost more than it saves), one clock
 * past it when a use is followed by a pause (the next sweep or epoch: as augur-lda's slices
 * and augur-mf's blocks are used, once per pass), so that the next node's claim, a few
 * clocks later, finds it free. */
static float release_clock(const claims_rec_t *c)
{
  return (float)c->end_clock +
         (c->idle_ticks > 0 ? GAP_PAUSE * (c->idle_ticks > 1 ? c->idle_ticks : 1) : 1);
}

/* When the tick must look at r next, from its claims alone: a claim due to go out, this
 * node's claim to renew (before it lapses, while the worker's clock is short of the end)
 * or to release (the clock well past the end, estimated from its speed and checked
 * then), an owner's claim lapsing, a keep or a retry coming. 0: nothing to look at. */
static uint64_t next_wake(struct placer *p, rec_t *r, uint64_t now)
{
  const claims_rec_t *c = &r->claims;
  const uint64_t tick = (uint64_t)p->node->sync_ms * 1000 * 1000;
  uint64_t w = UINT64_MAX;
  if (c->due_from) {
    uint64_t m = claim_margin(p);
    w = c->due_from > m ? c->due_from - m : 1;
  } else if (c->end_clock) {
    const uint64_t clk = end_worker_clock(p, r);
    const float release = release_clock(c);
    if ((float)clk < release) {
      if (clk < c->end_clock) { /* renewed halfway through the lease */
        const uint64_t half = lease_of(r) / 2;
        w = c->told_until > half ? c->told_until - half : 1;
      }
      if (c->told_until) { /* released when the clock gets there */
        uint64_t est = c->tick_ns > 0 ? (uint64_t)((release - (float)clk) * c->tick_ns) : tick;
        if (now + est < w) w = now + est;
      }
    }
  }
  for (int i = 0; i < c->nclaims; i++)
    if (c->claims[i].until_ns > now && c->claims[i].until_ns < w) w = c->claims[i].until_ns;
  if (c->keep_until > now && c->keep_until < w) w = c->keep_until;
  if (c->retry_ns > now && c->retry_ns < w) w = c->retry_ns;
  return w == UINT64_MAX ? 0 : w > now ? w : now + 1;
}

static void schedule(struct placer *p, rec_t *r, uint64_t now)
{
  wake_at(p, r, next_wake(p, r, now));
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

/* How many nodes have a claim that has not lapsed (at most two are counted: the claims
 * hold one per node); with `out`, which. */
static int claimants(const rec_t *r, uint64_t now, nodeset_t *out)
{
  int first = -1, count = 0;
  if (out) nodeset_clear(out);
  for (int i = 0; i < r->claims.nclaims; i++) {
    const claim_t *c = &r->claims.claims[i];
    if (c->until_ns <= now) continue;
    if (out) nodeset_add(out, c->node);
    if (count == 0)
      first = c->node, count = 1;
    else if (c->node != first)
      count = 2;
  }
  return count;
}

/* The claims an owner knows go with the actor it hands off, after the values (as claims
 * that reach it during the hand-off do): the new owner would otherwise decide alone from
 * the claims renewed after the move, half a lease later, and move the actor on while the
 * other claimants still use it. */
void claims_pass(rec_t *r, uint64_t now, obuf_t *out)
{
  claims_rec_t *c = &r->claims;
  for (int i = 0; i < c->nclaims; i++) {
    const claim_t *k = &c->claims[i];
    if (k->until_ns <= now) continue;
    put_claim(out, r, (uint32_t)k->node, 0, k->hot ? PSM_CLAIM_HOT : 0,
              k->from_ns > now ? k->from_ns - now : 0, k->until_ns - now);
  }
  c->nclaims = 0;
  c->together_ns = c->alone_ns = c->seen_ns = 0; /* the new owner watches from here */
  c->shared = 0;
  c->period_end_ns = c->pause_ns = c->keep_until = 0;
}

/* Accounts the time since the owner last looked to one claimant or to several; when no
 * claim is left, the period of use is over and says whether the actor was shared. */
static void usage_period(rec_t *r, uint64_t now)
{
  const int nodes = claimants(r, now, NULL);
  if (!nodes) {
    if (r->claims.seen_ns) { /* the period is over */
      r->claims.shared = r->claims.together_ns > r->claims.alone_ns;
      r->claims.period_end_ns = now;
      /* a shared actor used in a rhythm (the next epoch, the next pass) keeps its
       * replicas through a pause half again as long as the last one: nobody writes it
       * meanwhile, so they cost nothing, and making them again would */
      r->claims.keep_until = r->claims.shared && r->claims.pause_ns
                                 ? now + r->claims.pause_ns + r->claims.pause_ns / 2
                                 : 0;
    }
    r->claims.together_ns = r->claims.alone_ns = r->claims.seen_ns = 0;
    return;
  }
  if (!r->claims.seen_ns && r->claims.period_end_ns) { /* a new period: the pause before it, quick
                                                        * to follow a longer one, slow to shrink */
    uint64_t pause = now - r->claims.period_end_ns;
    r->claims.pause_ns =
        pause > r->claims.pause_ns ? pause : r->claims.pause_ns - (r->claims.pause_ns - pause) / 4;
  }
  uint64_t dt = r->claims.seen_ns && now > r->claims.seen_ns ? now - r->claims.seen_ns : 0;
  r->claims.seen_ns = now;
  if (nodes > 1)
    r->claims.together_ns += dt;
  else
    r->claims.alone_ns += dt;
}

void claims_inputs(rec_t *r, uint64_t now, place_input_t *in, nodeset_t *claimants_out)
{
  claims_rec_t *c = &r->claims;
  int k = 0; /* lapsed claims go */
  for (int i = 0; i < c->nclaims; i++)
    if (c->claims[i].until_ns > now) c->claims[k++] = c->claims[i];
  c->nclaims = k;
  /* hot if any claimant counts it hot (nodes count their own intents); between its uses,
   * when no claim is active, what the last claims said: a hot actor keeps its replicas
   * through the pauses (adaptive's rules, which hot applies to the others, would drop
   * them) */
  int hot = 0;
  for (int i = 0; i < c->nclaims; i++) hot |= c->claims[i].hot;
  if (c->nclaims) c->hot = (uint8_t)hot;
  hot = c->hot;
  usage_period(r, now);
  in->claims = c->claims;
  in->nclaims = c->nclaims;
  claimants(r, now, claimants_out);
  in->claimants = claimants_out;
  in->hot = hot;
  in->shared = c->shared;
  in->keep_until = c->keep_until;
}

/* The owner takes a claim. 1 if it may change the decision: a new claimant, a release, a
 * window that starts earlier or now overlaps another node's, or another hot mark; 0 for a
 * renewal that changes none of that, which the decision sees when it next looks. */
static int claim_here(struct placer *p, rec_t *r, int node, int flags, uint64_t from,
                      uint64_t until, uint64_t now)
{
  claim_t *c = NULL;
  for (int i = 0; i < r->claims.nclaims; i++)
    if (r->claims.claims[i].node == node) c = &r->claims.claims[i];
  if (flags & PSM_CLAIM_RELEASE) { /* until: now */
    if (!c || c->until_ns <= until) return 0;
    c->until_ns = until;
    return 1;
  }
  int changed = 0;
  if (!c || c->until_ns <= now) {
    if (!c) {
      if (r->claims.nclaims == r->claims.capclaims) {
        int cap = r->claims.capclaims ? 2 * r->claims.capclaims : 2;
        claim_t *m = realloc(r->claims.claims, (size_t)cap * sizeof(*m));
        if (!m) return 0;
        r->claims.claims = m;
        r->claims.capclaims = cap;
      }
      c = &r->claims.claims[r->claims.nclaims++];
    }
    *c = (claim_t){.node = node, .from_ns = from, .until_ns = until};
    changed = 1;
  } else {
    if (c->until_ns <= from || from < c->from_ns) c->from_ns = from, changed = 1;
    if (until > c->until_ns) {
      /* a later end that now overlaps another node's claim changes who shares it */
      for (int i = 0; i < r->claims.nclaims && !changed; i++) {
        const claim_t *o = &r->claims.claims[i];
        changed = o != c && o->from_ns >= c->until_ns && o->from_ns < until;
      }
      c->until_ns = until;
    }
  }
  const int hot = (flags & PSM_CLAIM_HOT) != 0;
  changed |= c->hot != hot;
  c->hot = hot;
  schedule(p, r, now); /* its lapse */
  return changed;
}

/* A claim for r from `node`, here or on its way to the owner. */
static void claim(struct placer *p, rec_t *r, int node, uint16_t hops, int flags, uint64_t from,
                  uint64_t until, uint64_t now, obuf_t *out)
{
  au_node_t *n = p->node;
  uint8_t st = atomic_load(&pa_of(r)->state);
  if (st == PA_OWNER && !r->reloc.handing_off) {
    if (claim_here(p, r, node, flags, from, until, now)) rec_to_decide(p, r);
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
    if (one.len) rec_hold(p, r, NULL, PS_CLAIM, one.p, (uint32_t)one.len);
    free(one.p);
    return;
  }
  /* the owner as this node knows it (PS_OWNER keeps that fresh); a node that knows
   * better sends it on */
  int to = (int)pa_of(r)->owner;
  if (to == n->rank) to = rec_next_hop(n, r);
  if (to == n->rank) return;
  put_claim(&out[to], r, (uint32_t)node, (uint16_t)(hops + 1), flags, from_d, until_d);
}

/* PSM_CLAIM_HOT if this node counts r among its hot actors (AU_PLACE_HOT). */
static int hot_here(const rec_t *r)
{
  const au_table_t *t = r->t;
  if (t->place != AU_PLACE_HOT) return 0;
  if (atomic_load_explicit(&t->hot_named, memory_order_acquire)) /* after hot_set */
    return atomic_load_explicit(&t->hot_set[r->actor], memory_order_relaxed) ? PSM_CLAIM_HOT : 0;
  const uint32_t h = r->claims.hits;
  if (t->hot_min == 0) return 0; /* else h == 0 is not hot either */
  return h > t->hot_min || (h == t->hot_min && r->actor <= t->hot_last) ? PSM_CLAIM_HOT : 0;
}

/* This node's claim for r goes out (or is taken here, by its owner). */
static void claim_out(struct placer *p, rec_t *r, uint64_t from, uint64_t until, uint64_t now,
                      obuf_t *out)
{
  r->claims.told_until = until;
  r->claims.due_from = r->claims.due_until = 0;
  uint8_t st = atomic_load(&pa_of(r)->state);
  if (st == PA_REMOTE) r->claims.asked_ns = now; /* the latest claim: it may bring it here */
  counter_add(&p->claims.claims_sent, 1);
  claim(p, r, p->node->rank, 0, hot_here(r), from, until, now, out);
  schedule(p, r, now); /* renewed or released as the worker's clock goes */
}

static void release_out(struct placer *p, rec_t *r, uint64_t now, obuf_t *out)
{
  r->claims.told_until = 0; /* a later intent claims it afresh */
  counter_add(&p->claims.releases, 1);
  claim(p, r, p->node->rank, 0, PSM_CLAIM_RELEASE, now, now, now, out);
}

/* How long a claim outlives its intent: twice the usual gap between this node's intents
 * naming the actor, within bounds. */
static uint64_t lease_of(const rec_t *r)
{
  double g2 = 2.0 * r->claims.gap_ns;
  return g2 < LEASE_MIN ? LEASE_MIN : g2 > LEASE_MAX ? LEASE_MAX : (uint64_t)g2;
}

/* The clock of the worker whose intent naming r ends last. */
static uint64_t end_worker_clock(const struct placer *p, const rec_t *r)
{
  const au_node_t *n = p->node;
  if (r->claims.end_worker < 0 || r->claims.end_worker >= n->nworkers) return r->claims.end_clock;
  return atomic_load_explicit(&n->workers[r->claims.end_worker]->seen_clock, memory_order_relaxed);
}

/* This node's claim on r, once sent, follows the worker's clock rather than the time it
 * was estimated from: while the clock has not reached the end of the latest intent naming
 * r, the claim is renewed before it lapses (a worker slower than estimated, or off the
 * CPU, keeps what it uses); once the clock is past that end by ten of its usual idle gaps
 * between uses, the claim goes at once (the owner need not wait out the lease). */
static void follow_clock(struct placer *p, rec_t *r, uint64_t now, obuf_t *out)
{
  if (r->claims.due_from || !r->claims.end_clock) return;
  uint64_t clk = end_worker_clock(p, r);
  if ((float)clk >= release_clock(&r->claims)) {
    if (r->claims.told_until) release_out(p, r, now, out);
    return;
  }
  /* renewed before it lapses, or claimed again when it went (the owner dropped this
   * node's replica): the workers still need it */
  uint64_t lease = lease_of(r);
  if (clk >= r->claims.end_clock || r->claims.told_until > now + lease / 2) return;
  uint64_t left = (uint64_t)((float)(r->claims.end_clock - clk) * r->claims.tick_ns);
  claim_out(p, r, now, now + left + lease, now, out);
}

typedef struct hits {
  uint32_t hits;
  uint64_t actor;
} hits_t;

/* more intents first; among equals, the lower index */
static int cmp_hits(const void *a, const void *b)
{
  const hits_t *x = a, *y = b;
  if (x->hits != y->hits) return x->hits < y->hits ? 1 : -1;
  return x->actor < y->actor ? -1 : x->actor > y->actor;
}

/* AU_PLACE_HOT without the application's hot set: the border of the hot set, the table's
 * hot_actors most intended actors by this node's counts, ties to the lower index (so that
 * intents that name every actor equally often, as augur-mf's blocks do, still make
 * hot_actors hot, the same ones on every node). Computed again after about one intent per
 * actor intended so far (at least HOT_MIN_KEYS): early, and then about once per pass of
 * the workers over what they use. */
static void hot_thresholds(struct placer *p)
{
  au_node_t *n = p->node;
  for (int tid = 0; tid < n->ntables + n->nids; tid++) { /* dense tables, then id tables */
    au_table_t *t = tid < n->ntables ? n->table_by_id[tid] : n->ids_by_id[tid - n->ntables];
    if (!t || t->place != AU_PLACE_HOT || atomic_load(&t->hot_named)) continue;
    size_t cnt = 0, cap = 1024;
    hits_t *hits = malloc(cap * sizeof(*hits));
    if (!hits) return;
    for (size_t i = 0; i <= p->recs.mask; i++) {
      rec_t *r = p->recs.slot[i].key ? p->recs.slot[i].val : NULL;
      if (!r || r->t != t || !r->claims.hits) continue;
      if (cnt == cap) {
        hits_t *m = realloc(hits, 2 * cap * sizeof(*hits));
        if (!m) break;
        hits = m;
        cap *= 2;
      }
      hits[cnt++] = (hits_t){r->claims.hits, r->actor};
    }
    qsort(hits, cnt, sizeof(*hits), cmp_hits);
    const uint64_t want = t->hot_actors;
    if (want == 0 || cnt == 0) {
      t->hot_min = 0;
    } else {
      const hits_t *last = &hits[(want < cnt ? want : cnt) - 1];
      t->hot_min = last->hits;
      t->hot_last = want < cnt ? last->actor : UINT64_MAX;
    }
    free(hits);
  }
}

/* How long before a claim's start it goes out: the action's latency with its deviation
 * (policy.c), and one tick more, as the tick is what sends a claim that came due; at least
 * CLAIM_AHEAD. */
static uint64_t claim_margin(const struct placer *p)
{
  const uint64_t m = action_margin(&p->claims.lat) + (uint64_t)p->node->sync_ms * 1000 * 1000;
  return m > CLAIM_AHEAD ? m : CLAIM_AHEAD;
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

void claims_on_intent(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_intent_t in;
  psm_why_t why;
  if (psm_intent_decode(n, m->data, m->len, &in, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "malformed intent: %s", why.text);
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
    if (r->claims.hits++ == 0) p->claims.intended++;
    /* the rhythm of this node's intents for the actor: quick to follow a shorter gap,
     * slow to follow a longer one, deaf to a pause (the next epoch, another phase) */
    if (r->claims.last_intent_ns) {
      double gap = (double)(now - r->claims.last_intent_ns);
      if (r->claims.gap_ns == 0 || gap < r->claims.gap_ns)
        r->claims.gap_ns = (float)gap;
      else if (gap < GAP_PAUSE * r->claims.gap_ns)
        r->claims.gap_ns += (float)(0.25 * (gap - r->claims.gap_ns));
    }
    r->claims.last_intent_ns = now;
    uint64_t lease = lease_of(r);
    /* the intent needs [from, end); the claim covers a lease beyond, so that a node that
     * keeps using the actor renews it about once per lease, not once per intent */
    uint64_t from = now + from_d, end = now + (until_d > from_d ? until_d : from_d);
    if (!r->claims.end_clock || end >= r->claims.last_end_ns || (int)wid == r->claims.end_worker) {
      /* the worker's clock between the end of its last use and this one: its rhythm; a
       * gap many times longer than the use itself is a pause between periods of use (the
       * next epoch: a worker that walks blocks of columns), not rhythm */
      const float use = end_clock > start_clock ? (float)(end_clock - start_clock) : 1.0f;
      const float g =
          start_clock > r->claims.end_clock ? (float)(start_clock - r->claims.end_clock) : 0.0f;
      if (r->claims.end_clock && (int)wid == r->claims.end_worker && g > 0 && g < GAP_PAUSE * use) {
        if (r->claims.idle_ticks == 0 || g < r->claims.idle_ticks)
          r->claims.idle_ticks = g;
        else if (g < GAP_PAUSE * r->claims.idle_ticks)
          r->claims.idle_ticks += 0.25f * (g - r->claims.idle_ticks);
      }
      if ((int)wid != r->claims.end_worker || end_clock > r->claims.end_clock)
        r->claims.end_clock = end_clock;
      r->claims.end_worker = (int)wid;
      r->claims.tick_ns = tick;
      r->claims.last_end_ns = end;
    }
    if (end + lease / 2 <= r->claims.told_until) continue; /* the owner knows; renewed halfway */
    uint64_t until = end + lease;
    if (from > now + margin) { /* not yet: the tick sends it when due */
      if (!r->claims.due_from || from < r->claims.due_from) r->claims.due_from = from;
      if (until > r->claims.due_until) r->claims.due_until = until;
      schedule(p, r, now);
      continue;
    }
    claim_out(p, r, from, until, now, out);
  }
  send_batches(p, out);
  free_batches(p, out);
  if ((p->claims.intent_keys += cnt) >= HOT_MIN_KEYS &&
      p->claims.intent_keys >= p->claims.intended) {
    p->claims.intent_keys = 0;
    hot_thresholds(p);
  }
}

void claims_on_claim(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  uint32_t count;
  psm_why_t why;
  if (psm_claims_decode(n, m->data, m->len, &count, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "malformed claim from node %u: %s", m->from_node, why.text);
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

void claims_tick(struct placer *p)
{
  /* Only while this node's workers run: a timer is not a message, so what a tick starts
   * on an idle node would escape the end-of-run detection (a move still on the wire when
   * au_node_run returns). Claims and answers that arrive as messages are acted on always. */
  claims_state_t *s = &p->claims;
  if (!s->nheap || atomic_load(&p->node->active) == 0) return;
  obuf_t *out = NULL;
  const uint64_t now = au_now_ns(), margin = claim_margin(p);
  while (s->nheap && s->heap[0].at <= now) {
    wake_t e = s->heap[0];
    s->heap[0] = s->heap[--s->nheap];
    heap_down(s->heap, s->nheap, 0);
    rec_t *r = e.r;
    claims_rec_t *c = &r->claims;
    if (c->wake_ns != e.at) continue; /* stale: it was scheduled again */
    c->wake_ns = 0;
    s->live--;
    if (!out && !(out = batches(p))) {
      wake_at(p, r, now + 1); /* out of memory: at the next tick */
      break;
    }
    if (c->due_from && c->due_from <= now + margin)
      claim_out(p, r, c->due_from, c->due_until, now, out);
    else
      follow_clock(p, r, now, out);
    /* the owner decides again when one of its times has come since it last looked: a
     * claim lapsed, a keep or a retry over (a renewal alone changes nothing) */
    const uint64_t last = c->looked_ns;
    c->looked_ns = now;
    int due = c->retry_ns && c->retry_ns <= now;
    if (due) c->retry_ns = 0;
    due |= c->keep_until > last && c->keep_until <= now;
    for (int i = 0; i < c->nclaims && !due; i++)
      due = c->claims[i].until_ns > last && c->claims[i].until_ns <= now;
    if (due) rec_to_decide(p, r);
    schedule(p, r, now);
  }
  if (!out) return;
  send_batches(p, out);
  free_batches(p, out);
}

void claims_arrived(struct placer *p, rec_t *r)
{
  /* the new owner's own claim: it went to the old owner, which passed it on, but the
   * actor can arrive first (a move asked for by a worker, not by the claim) */
  uint64_t now = au_now_ns();
  if (atomic_load(&pa_of(r)->state) == PA_OWNER && r->claims.told_until > now) {
    claim_here(p, r, p->node->rank, hot_here(r), now, r->claims.told_until, now);
  }
  if (!r->claims.asked_ns) return;
  uint64_t took = now - r->claims.asked_ns;
  r->claims.asked_ns = 0;
  /* a claim that was not acted on at once (the owner waited for other claims to lapse)
   * says nothing about the latency of the action */
  if (p->claims.lat.samples == 0 || took < 10.0 * p->claims.lat.ns)
    action_latency_observe(&p->claims.lat, took);
}

void claims_forget(rec_t *r)
{
  r->claims.told_until = 0;
}

void claims_free(rec_t *r)
{
  free(r->claims.claims);
  r->claims.claims = NULL;
  r->claims.nclaims = r->claims.capclaims = 0;
}
