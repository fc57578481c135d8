/* replica.c — replicas of parameter actors (AU_PLACE_REPLICATE, _HOT, _ADAPTIVE), kept by
 * the placer.
 *
 * A node that needs rows of a replicated table asks the owner for a copy (PS_REP_REQ /
 * PS_REP_DATA) and keeps two: the values its workers read and update in place, and
 * `base`, the owner's values as last synced. Every sync_ms (au_node_opts_t, default 2)
 * the placer ships, per owner
 * node in one message, delta = values - base for each replica that changed, and sets
 * base = the values it read. The owner applies the deltas through the table's kernel and,
 * at its next tick, sends its fresh values to every replica (PS_FRESH), which merges them
 * as values += fresh - base, base = fresh: the updates made since are kept.
 *
 * The invariant that ends a run with every replica equal to its owner: a placer that has
 * shipped or received something in its last tick counts as busy, so its node is not idle
 * and the run cannot end; once workers are idle, deltas go out, the owners apply them
 * and send fresh values back, and the ticks after that send nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/placement.h"
#include "actors/psmsg.h"
#include "runtime/net.h"
#include "runtime/rt.h"
#include "runtime/trace.h"

static size_t group_bytes(const au_table_t *t)
{
  return (size_t)t->group * t->row_bytes;
}

void replica_arm(struct placer *p)
{
  if (atomic_load(&p->sync_armed)) return;
  au_timer_id_t id;
  atomic_store(&p->sync_armed,
               au_timer_start(p->node->rt, p->actor, PL_SYNC, (uint64_t)p->node->sync_ms,
                              (uint64_t)p->node->sync_ms, &id) == 0);
}

/* The node is not idle while the placer has syncs to finish. */
static void set_busy(struct placer *p, int busy)
{
  if (atomic_exchange(&p->busy, busy) == busy) return;
  if (busy)
    net_set_idle(p->node->rt, 0);
  else if (!placer_busy(p->node) && atomic_load(&p->node->active) == 0)
    net_set_idle(p->node->rt, 1);
}

void placement_touched(au_node_t *n)
{
  struct placer *p = n->placer;
  /* no replicas yet, no sync timer: nobody needs to hear (a replica asked for later
   * copies the values as they are then) */
  if (!p || !atomic_load(&p->sync_armed)) return;
  /* before the message that changed the values counts as processed: the termination
   * poll then sees this node busy */
  atomic_store(&p->touched, 1);
  net_set_idle(n->rt, 0);
}

int placer_busy(const au_node_t *n)
{
  return n->placer && (atomic_load(&n->placer->busy) || atomic_load(&n->placer->pending) > 0 ||
                       atomic_load(&n->placer->touched));
}

void placer_pending(struct placer *p, long d)
{
  long before = atomic_fetch_add(&p->pending, d);
  if (d > 0 && before == 0)
    net_set_idle(p->node->rt, 0);
  else if (d < 0 && before + d == 0 && !placer_busy(p->node) && atomic_load(&p->node->active) == 0)
    net_set_idle(p->node->rt, 1);
}

void replica_want(struct placer *p, rec_t *r)
{
  if (r->requested) return;
  r->requested = 1;
  au_node_t *n = p->node;
  uint8_t msg[PSM_ACTOR_MAX];
  size_t len = psm_actor_encode(
      msg, PS_REP_REQ, &(psm_actor_msg_t){.t = r->t, .actor = r->actor, .node = (uint32_t)n->rank});
  au_send_to(n->rt, pa_of(r)->owner, PS_PLACER_PORT, PS_REP_REQ, msg, len);
}

/* Copies the owner's values of an actor into out, a value at a time (the kernels may be
 * writing them). */
static void copy_values(const rec_t *r, uint8_t *out)
{
  const au_table_t *t = r->t;
  for (uint32_t row = 0; row < t->group; row++)
    kernel_copy_row(out + row * t->row_bytes,
                    (const uint8_t *)pa_of(r)->values + row * t->row_bytes, t->width);
}

int replica_give(struct placer *p, rec_t *r, uint32_t to)
{
  au_node_t *n = p->node;
  size_t bytes = group_bytes(r->t);
  if (!r->replicas) {
    /* the owner's base: its values as last sent to the replicas */
    if (!(r->base = malloc(bytes))) return AU_ENOMEM;
    copy_values(r, r->base);
    r->next_owned = p->owned;
    p->owned = r;
  }
  r->replicas |= 1ull << to;
  au_outbuf_t ob;
  uint8_t *out =
      au_send_to_start(n->rt, to, PS_PLACER_PORT, PS_REP_DATA, psm_values_len(r->t), &ob);
  if (!out) {
    replica_gone(p, r, (int)to); /* never sent: no replica to keep track of */
    return ob.rc;
  }
  /* newer than base, maybe: the next tick sends the rest */
  copy_values(r, psm_values_encode(out, r->t, r->actor, 0));
  au_send_to_finish(&ob);
  atomic_store(&pa_of(r)->dirty, 1); /* ... so it must look */
  replica_arm(p);
  /* busy until a tick has sent whatever changed after the copy */
  placement_touched(n);
  return 0;
}

void replica_gone(struct placer *p, rec_t *r, int node)
{
  r->replicas &= ~(1ull << node);
  if (r->replicas) return;
  for (rec_t **pp = &p->owned; *pp; pp = &(*pp)->next_owned)
    if (*pp == r) {
      *pp = r->next_owned;
      break;
    }
  r->next_owned = NULL;
  free(r->base);
  r->base = NULL;
}

void replica_unlist(struct placer *p, rec_t *r)
{
  for (rec_t **pp = &p->replicas; *pp; pp = &(*pp)->next_replica)
    if (*pp == r) {
      *pp = r->next_replica;
      break;
    }
  r->next_replica = NULL;
}

static void on_rep_req(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_actor_msg_t q;
  psm_why_t why;
  if (psm_actor_decode(n, PS_REP_REQ, m->data, m->len, &q, &why) != 0 || q.node >= 64) {
    fprintf(stderr, "augur[rank %d]: bad replica request from node %u: %s\n", n->rank, m->from_node,
            q.node >= 64 ? "a node past 64" : why.text);
    return;
  }
  rec_t *r = rec_get(p, q.t, q.actor);
  if (!r || atomic_load(&pa_of(r)->state) != PA_OWNER) {
    fprintf(stderr, "augur[rank %d]: replica request from node %u for an actor not owned here\n",
            n->rank, m->from_node);
    return;
  }
  if (replica_give(p, r, q.node) != 0)
    fprintf(stderr, "augur[rank %d]: cannot send a replica to node %u\n", n->rank, q.node);
}

static void on_rep_data(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_values_t v;
  psm_why_t why;
  if (psm_values_decode(n, m->data, m->len, &v, &why) != 0) {
    fprintf(stderr, "augur[rank %d]: malformed replica from node %u: %s\n", n->rank, m->from_node,
            why.text);
    return;
  }
  rec_t *r = rec_get(p, v.t, v.actor);
  if (!r) return;
  param_actor_t *pa = pa_of(r);
  size_t bytes = group_bytes(r->t);
  if (atomic_load(&pa->state) != PA_REMOTE || r->dropping_here) {
    fprintf(stderr, "augur[rank %d]: a replica of actor %llu came from node %u while one is here\n",
            n->rank, (unsigned long long)r->actor, m->from_node);
    return;
  }
  void *values = table_values_alloc(r->t, r->actor);
  r->base = malloc(bytes);
  if (!values || !r->base) {
    fprintf(stderr, "augur[rank %d]: out of memory for a replica of actor %llu\n", n->rank,
            (unsigned long long)r->actor);
    if (values) table_values_free(r->t, r->actor, values);
    free(r->base);
    r->base = NULL;
    return;
  }
  memcpy(values, v.values, bytes);
  memcpy(r->base, v.values, bytes);
  pa->values = values;
  pa->owner = m->from_node; /* the owner sent it (asked or not) */
  atomic_store_explicit(&pa->state, PA_REPLICA, memory_order_release);
  counter_add(&p->replicas_made, 1);
  atomic_fetch_add(&p->replicas_held, 1);
  intent_arrived(p, r);
  trace_emit(n->rt, TRACE_REPLICA_CREATE, (uint64_t)r->t->id, r->actor, pa->owner, bytes);
  r->requested = 0;
  r->next_replica = p->replicas;
  p->replicas = r;
  notify_waiters(p, r);
  replica_arm(p);
}

/* values += add, through the table's kernel, a row at a time. */
static void apply_group(rec_t *r, const uint8_t *add, obuf_t *scratch)
{
  au_table_t *t = r->t;
  scratch->len = 0;
  if (!scratch->p || scratch->cap < t->row_bytes) {
    uint8_t *b = realloc(scratch->p, t->row_bytes);
    if (!b) return;
    scratch->p = b;
    scratch->cap = t->row_bytes;
  }
  for (uint32_t row = 0; row < t->group; row++) {
    memcpy(scratch->p, add + row * t->row_bytes, t->row_bytes); /* aligned for the kernel */
    t->kernel((uint8_t *)pa_of(r)->values + row * t->row_bytes, scratch->p, t->width,
              t->kernel_arg);
  }
}

/* out = a - b, value by value, in the table's type; returns whether anything differs. */
int replica_diff(const au_table_t *t, const uint8_t *a, const uint8_t *b, uint8_t *out)
{
  size_t n = group_bytes(t) / 4;
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t x, y, d;
    memcpy(&x, a + 4 * i, 4);
    memcpy(&y, b + 4 * i, 4);
    /* changed means other bits: a NaN that stays NaN is no change (a diverged model
     * would otherwise keep the replicas syncing, and the run from ending, for ever) */
    any |= x != y;
    if (t->type == AU_F32) {
      float fx, fy, fd;
      memcpy(&fx, &x, 4);
      memcpy(&fy, &y, 4);
      fd = x == y ? 0.0f : fx - fy;
      memcpy(&d, &fd, 4);
    } else {
      d = x - y;
    }
    memcpy(out + 4 * i, &d, 4);
  }
  return any;
}

/* values = fresh + (values - base), a float at a time with CAS (workers may be adding).
 * Where nothing was added since the last sync the result is fresh exactly: float
 * additions do not round-trip, and residues would otherwise travel back and forth for
 * ever. */
static void merge_f32(rec_t *r, const uint8_t *fresh)
{
  _Atomic uint32_t *v = pa_of(r)->values;
  const uint8_t *base = r->base;
  size_t n = group_bytes(r->t) / 4;
  for (size_t i = 0; i < n; i++) {
    float f, b;
    memcpy(&f, fresh + 4 * i, 4);
    memcpy(&b, base + 4 * i, 4);
    uint32_t old = atomic_load_explicit(&v[i], memory_order_relaxed), upd;
    do {
      float cur, next;
      memcpy(&cur, &old, 4);
      next = memcmp(&cur, &b, 4) == 0 ? f : f + (cur - b); /* bits: NaN stays put */
      memcpy(&upd, &next, 4);
    } while (!atomic_compare_exchange_weak_explicit(&v[i], &old, upd, memory_order_relaxed,
                                                    memory_order_relaxed));
  }
}

/* An owner applies replicas' deltas; a replica merges the owner's values. */
static void on_entries(struct placer *p, const au_msg_t *m, int fresh)
{
  au_node_t *n = p->node;
  psm_entries_t it;
  psm_values_t e;
  psm_why_t why;
  uint8_t *tmp = NULL;
  size_t tmp_cap = 0;
  int more = -1;
  if (psm_entries_begin(m->data, m->len, &it, &why) != 0) goto bad;
  if (!fresh) placement_touched(n); /* fresh values for the replicas go out at the next tick */
  while ((more = psm_entry_next(n, &it, &e, &why)) == 1) {
    rec_t *r = rec_get(p, e.t, e.actor);
    if (!r) break;
    const uint8_t *vals = e.values;
    size_t bytes = group_bytes(r->t);
    uint8_t st = atomic_load(&pa_of(r)->state);
    if (!fresh) {
      if (st != PA_OWNER) continue;
      apply_group(r, vals, &p->scratch);
      atomic_store(&pa_of(r)->dirty, 1); /* the replicas must hear */
      continue;
    }
    if (st != PA_REPLICA) continue;
    trace_emit(n->rt, TRACE_REPLICA_SYNC, (uint64_t)r->t->id, r->actor, m->from_node, r->t->group);
    if (tmp_cap < bytes) {
      uint8_t *b = realloc(tmp, bytes);
      if (!b) break;
      tmp = b;
      tmp_cap = bytes;
    }
    /* keep what the workers added since the last sync: values += fresh - base */
    if (r->t->type == AU_F32)
      merge_f32(r, vals);
    else if (replica_diff(r->t, vals, r->base, tmp))
      apply_group(r, tmp, &p->scratch);
    memcpy(r->base, vals, bytes);
  }
  free(tmp);
  if (more >= 0) return;
bad:
  fprintf(stderr, "augur[rank %d]: malformed %s from node %u: %s\n", n->rank,
          fresh ? "fresh values" : "sync", m->from_node, why.text);
}

static void on_tick(struct placer *p)
{
  au_node_t *n = p->node;
  intent_tick(p);
  obuf_t *syncs = calloc((size_t)n->nodes, sizeof(obuf_t));
  obuf_t *fresh = calloc((size_t)n->nodes, sizeof(obuf_t));
  if (!syncs || !fresh) {
    free(syncs);
    free(fresh);
    return;
  }
  uint8_t *now = NULL;
  size_t now_cap = 0;
  int sent = 0;
  /* replicas here: ship what the workers changed since the last sync */
  for (rec_t *r = p->replicas; r; r = r->next_replica) {
    /* unmarked: nobody wrote it since the last look (marks come after the writes, so a
     * write during this look marks it again for the next) */
    if (!atomic_exchange(&pa_of(r)->dirty, 0)) continue;
    size_t bytes = group_bytes(r->t);
    if (now_cap < bytes) {
      uint8_t *b = realloc(now, 2 * bytes); /* the values read, and their delta */
      if (!b) break;
      now = b;
      now_cap = bytes;
    }
    uint8_t *diff = now + bytes;
    copy_values(r, now);
    if (!replica_diff(r->t, now, r->base, diff)) continue; /* unchanged */
    uint8_t *d = psm_entry_add(&syncs[pa_of(r)->owner], r->t, r->actor);
    if (!d) break;
    memcpy(d, diff, bytes);
    memcpy(r->base, now, bytes); /* what was read is what was shipped */
    counter_add(&p->syncs, 1);
  }
  /* owned actors whose values changed since last sent, whoever changed them (synced
   * deltas, pushes, local workers): send them to every replica */
  for (rec_t *r = p->owned; r; r = r->next_owned) {
    if (!atomic_exchange(&pa_of(r)->dirty, 0)) continue;
    size_t bytes = group_bytes(r->t);
    if (now_cap < bytes) {
      uint8_t *b = realloc(now, 2 * bytes); /* the values read, and their delta */
      if (!b) break;
      now = b;
      now_cap = bytes;
    }
    copy_values(r, now);
    if (memcmp(now, r->base, bytes) == 0) continue;
    memcpy(r->base, now, bytes);
    for (int node = 0; node < n->nodes && node < 64; node++)
      if (r->replicas >> node & 1) {
        uint8_t *v = psm_entry_add(&fresh[node], r->t, r->actor);
        if (v) memcpy(v, now, bytes);
      }
  }
  for (int node = 0; node < n->nodes; node++) {
    if (syncs[node].len) {
      au_send_to(n->rt, (uint32_t)node, PS_PLACER_PORT, PS_SYNC, syncs[node].p, syncs[node].len);
      sent = 1;
    }
    if (fresh[node].len) {
      au_send_to(n->rt, (uint32_t)node, PS_PLACER_PORT, PS_FRESH, fresh[node].p, fresh[node].len);
      sent = 1;
    }
    free(syncs[node].p);
    free(fresh[node].p);
  }
  free(syncs);
  free(fresh);
  free(now);
  /* something changed since the last tick (a push, a sync): busy for one more tick */
  set_busy(p, sent | atomic_exchange(&p->touched, 0));
}

void replica_handle(struct placer *p, const au_msg_t *m)
{
  switch (m->type) {
  case PS_REP_REQ:
    on_rep_req(p, m);
    break;
  case PS_REP_DATA:
    on_rep_data(p, m);
    break;
  case PS_SYNC:
    on_entries(p, m, 0);
    break;
  case PS_FRESH:
    on_entries(p, m, 1);
    break;
  case PL_SYNC:
    on_tick(p);
    break;
  default:
    break;
  }
}

void replica_free(rec_t *r)
{
  free(r->base);
  r->base = NULL;
}
