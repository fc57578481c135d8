/* replication.c — replicas of parameter actors (AU_PLACE_REPLICATE, _HOT, _ADAPTIVE;
 * placer.h).
 *
 * A node that needs rows of a replicated table gets a copy from the owner (PS_REP_REQ /
 * PS_REP_DATA) and keeps two: the values its workers read and update in place, and
 * `base`, the owner's values as last synced. Every tick (sync_ms, au_node_opts_t, default
 * 2) it ships, per owner node in one message, delta = values - base for each replica that
 * changed, and sets base = the values it read. The owner applies the deltas through the
 * table's kernel and, at its next tick, sends its fresh values to every replica
 * (PS_FRESH), which merges them as values += fresh - base, base = fresh: the updates made
 * since are kept. Optimizer slots are part of the rows and sync the same way.
 *
 * Dropping a replica (PS_REP_DROP): its node marks it remote (new accesses go to the
 * owner), waits out a grace period over its workers and servers, ships the last delta
 * (PS_SYNC) and then says so (PS_REP_GONE, on the same connection, so after the delta).
 * The owner forgets the replica only then, so no update is lost.
 *
 * The invariant that ends a run with every replica equal to its owner: a tick that has
 * shipped something, or followed a change, counts as busy (idle.c), so the node is not
 * idle and the run cannot end; once workers are idle, deltas go out, the owners apply
 * them and send fresh values back, and the ticks after that send nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/idle.h"
#include "actors/placer.h"

/* The replicas and owned lists: pushed at the head, removed in place. */
#define LIST_PUSH(head, r, f)                                                                      \
  do {                                                                                             \
    (r)->repl.next_##f = *(head);                                                                  \
    if (*(head)) (*(head))->repl.pprev_##f = &(r)->repl.next_##f;                                  \
    (r)->repl.pprev_##f = (head);                                                                  \
    *(head) = (r);                                                                                 \
  } while (0)
#define LIST_DEL(r, f)                                                                             \
  do {                                                                                             \
    if ((r)->repl.pprev_##f) {                                                                     \
      *(r)->repl.pprev_##f = (r)->repl.next_##f;                                                   \
      if ((r)->repl.next_##f) (r)->repl.next_##f->repl.pprev_##f = (r)->repl.pprev_##f;            \
    }                                                                                              \
    (r)->repl.next_##f = NULL;                                                                     \
    (r)->repl.pprev_##f = NULL;                                                                    \
  } while (0)

/* An actor's bytes as replicas hold them: its rows, or an id table's blob (ids.c). */
static size_t group_bytes(const au_table_t *t)
{
  return table_actor_bytes(t);
}

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
    au__log(AU_LOG_WARN, p->node->rank, "malformed message from node %u: %s", m->from_node,
            why.text);
    return NULL;
  }
  return rec_get(p, a.t, a.actor);
}

void replication_want(struct placer *p, rec_t *r)
{
  if (r->repl.requested) return;
  r->repl.requested = 1;
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

/* The owner forgets its replica on `node`, and the base once none is left. */
static void forget(rec_t *r, int node)
{
  nodeset_del(r->repl.replicas, node);
  if (!nodeset_empty(r->repl.replicas)) return;
  LIST_DEL(r, owned);
  free(r->repl.base);
  r->repl.base = NULL;
}

int replication_give(struct placer *p, rec_t *r, uint32_t to)
{
  au_node_t *n = p->node;
  size_t bytes = group_bytes(r->t);
  if (!r->repl.replicas && !(r->repl.replicas = nodeset_new(n->nodes))) return AU_ENOMEM;
  if (nodeset_empty(r->repl.replicas)) {
    /* the owner's base: its values as last sent to the replicas */
    if (!(r->repl.base = malloc(bytes))) return AU_ENOMEM;
    if (r->t->ids)
      ids_actor_snapshot(r->t->ids, pa_of(r)->values, r->repl.base);
    else
      copy_values(r, r->repl.base);
    LIST_PUSH(&p->repl.owned, r, owned);
  }
  nodeset_add(r->repl.replicas, (int)to);
  /* The base, not the values as they are now: the next tick sends every word in which
   * the values differ from the base, which brings the new replica to them as it brings
   * the others. A copy newer than the base lost a word that changed after the base and
   * changed back before the tick: the tick saw no difference and the new replica kept
   * the copy's word (the review of 2026-12-02 found it; under a consistency bound a read
   * would have missed an update). The base is the placer's own: it does not change while
   * it is written out. */
  int rc = values_send(n->rt, &p->wire, to, PS_REP_DATA, r->t, r->actor, 0, 0, r->repl.base, NULL);
  if (rc != 0) {
    forget(r, (int)to); /* never sent: no replica to keep track of */
    return rc;
  }
  atomic_store(&pa_of(r)->dirty, 1); /* ... so it must look */
  placer_arm_tick(p);
  /* busy until a tick has sent whatever changed after the copy */
  idle_touched(n);
  return 0;
}

void replication_drop(struct placer *p, rec_t *r, const nodeset_t *nodes)
{
  if (!r->repl.dropping && !(r->repl.dropping = nodeset_new(p->node->nodes))) return;
  for (int node = -1; (node = nodeset_next(nodes, node)) >= 0;) {
    if (!nodeset_has(r->repl.replicas, node) || nodeset_has(r->repl.dropping, node)) continue;
    send_actor(p, r, PS_REP_DROP, (uint32_t)node);
    nodeset_add(r->repl.dropping, node);
  }
}

void replication_on_req(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_actor_msg_t q;
  psm_why_t why;
  if (psm_actor_decode(n, PS_REP_REQ, m->data, m->len, &q, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "bad replica request from node %u: %s", m->from_node, why.text);
    return;
  }
  rec_t *r = rec_get(p, q.t, q.actor);
  if (!r || atomic_load(&pa_of(r)->state) != PA_OWNER) {
    au__log(AU_LOG_ERROR, n->rank, "replica request from node %u for an actor not owned here",
            m->from_node);
    return;
  }
  if (replication_give(p, r, q.node) != 0)
    au__log(AU_LOG_ERROR, n->rank, "cannot send a replica to node %u", q.node);
}

/* The replica is here: its values in place, the owner known, on the tick's list. */
static rec_t *replica_here(struct placer *p, rec_t *r, void *values, uint32_t owner)
{
  param_actor_t *pa = pa_of(r);
  pa->values = values;
  pa->owner = owner; /* the owner sent it (asked or not) */
  atomic_store_explicit(&pa->state, PA_REPLICA, memory_order_release);
  counter_add(&p->repl.replicas_made, 1);
  atomic_fetch_add(&p->repl.replicas_held, 1);
  au__trace(p->node->rt, TRACE_REPLICA_CREATE, (uint64_t)r->t->id, r->actor, owner,
            group_bytes(r->t));
  r->repl.requested = 0;
  LIST_PUSH(&p->repl.replicas, r, replica);
  placer_arm_tick(p);
  return r;
}

/* An id table's replica: the owner's blob, checked, read in place (no base: only the
 * owner's fresh words change it; ids.c). */
static rec_t *ids_replica_in(struct placer *p, rec_t *r, const psm_values_t *v, uint32_t from)
{
  au_ids_t *t = r->t->ids;
  char why[200] = "out of memory";
  void *rep = ids_replica_new(t);
  if (rep) psm_values_copy(v, ids_replica_blob(rep), 0);
  if (!rep || ids_replica_check(t, r->actor, rep, why, sizeof(why)) != 0) {
    au__log(AU_LOG_ERROR, p->node->rank, "cannot take a replica of actor %llu from node %u: %s",
            (unsigned long long)r->actor, from, why);
    ids_replica_free(t, rep);
    r->repl.requested = 0;
    return NULL;
  }
  return replica_here(p, r, rep, from);
}

rec_t *replication_on_data(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_values_t v;
  psm_why_t why;
  if (psm_values_decode(n, m->data, m->len, &v, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "malformed replica from node %u: %s", m->from_node, why.text);
    return NULL;
  }
  rec_t *r = rec_get(p, v.t, v.actor);
  if (!r) return NULL;
  param_actor_t *pa = pa_of(r);
  size_t bytes = group_bytes(r->t);
  if (atomic_load(&pa->state) != PA_REMOTE || r->repl.dropping_here) {
    au__log(AU_LOG_ERROR, n->rank, "a replica of actor %llu came from node %u while one is here",
            (unsigned long long)r->actor, m->from_node);
    return NULL;
  }
  if (r->t->ids) return ids_replica_in(p, r, &v, m->from_node);
  int zero = 0;
  void *values = table_values_take(r->t, r->actor, &zero);
  r->repl.base = malloc(bytes);
  if (!values || !r->repl.base) {
    au__log(AU_LOG_ERROR, n->rank, "out of memory for a replica of actor %llu",
            (unsigned long long)r->actor);
    if (values) table_values_give(r->t, r->actor, values, zero);
    free(r->repl.base);
    r->repl.base = NULL;
    return NULL;
  }
  psm_values_copy(&v, values, zero);
  memcpy(r->repl.base, values, bytes);
  return replica_here(p, r, values, m->from_node);
}

/* --- syncs: what changed, word by word ------------------------------------------------ */

/* Scratch for one actor: which words changed, and what each carries. */
typedef struct words {
  uint32_t *changed, *vals;
  size_t cap; /* words */
} words_t;

static int words_fit(words_t *w, const au_table_t *t)
{
  size_t n = group_bytes(t) / 4;
  if (w->cap >= n) return 0;
  uint32_t *b = realloc(w->changed, 2 * n * sizeof(uint32_t));
  if (!b) return AU_ENOMEM;
  w->changed = b;
  w->vals = b + n;
  w->cap = n;
  return 0;
}

static void words_free(words_t *w)
{
  free(w->changed);
  *w = (words_t){0};
}

/* The kernel adds word by word (not a custom kernel of whole rows): deltas may be sparse. */
static int adds_words(const au_table_t *t)
{
  return t->kernel == kernel_add_f32 || t->kernel == kernel_add_i32 ||
         t->kernel == kernel_hogwild_f32 || t->kernel == kernel_hogwild_i32;
}

/* One pass over an actor's words: those that differ from base (other bits: a NaN that
 * stays NaN is no change, or a diverged model would keep the replicas syncing, and the
 * run from ending, for ever) go into w with their delta value - base (delta) or their
 * value (!delta), and base takes their value. Values are read with relaxed atomic loads
 * (workers may be adding). Returns how many changed. */
static uint32_t take_changes(const au_table_t *t, const void *values, uint32_t *base, words_t *w,
                             int delta)
{
  _Atomic uint32_t *v = (_Atomic uint32_t *)values;
  const size_t n = group_bytes(t) / 4;
  uint32_t k = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t x = atomic_load_explicit(&v[i], memory_order_relaxed), b = base[i];
    if (x == b) continue;
    w->changed[k] = (uint32_t)i;
    if (!delta) {
      w->vals[k] = x;
    } else if (t->type == AU_F32) {
      float fx, fb, fd;
      memcpy(&fx, &x, 4);
      memcpy(&fb, &b, 4);
      fd = fx - fb;
      memcpy(&w->vals[k], &fd, 4);
    } else {
      w->vals[k] = x - b;
    }
    base[i] = x; /* what was read is what is shipped */
    k++;
  }
  return k;
}

/* The owner adds a replica's deltas: all the group's rows through the kernel a row at a
 * time, or the changed words one by one. */
static void apply_deltas(rec_t *r, const psm_entry_t *e, obuf_t *scratch)
{
  au_table_t *t = r->t;
  uint8_t *v = pa_of(r)->values;
  if (e->npairs) {
    for (uint32_t i = 0; i < e->npairs; i++) {
      uint32_t d = psm_entry_word(e, i);
      t->kernel(v + (size_t)psm_entry_index(e, i) * 4, &d, 1, t->kernel_arg);
    }
    return;
  }
  scratch->len = 0;
  if (obuf_reserve(scratch, t->row_bytes) != 0) return;
  for (uint32_t row = 0; row < t->group; row++) {
    /* aligned for the kernel */
    memcpy(scratch->p, e->words + (size_t)row * t->row_bytes, t->row_bytes);
    t->kernel(v + (size_t)row * t->row_bytes, scratch->p, t->width, t->kernel_arg);
  }
}

/* A replica merges one word of the owner's: value += fresh - base, base = fresh, with
 * CAS (workers may be adding). Where nothing was added since the last sync the result is
 * fresh exactly: float additions do not round-trip, and residues would otherwise travel
 * back and forth for ever. */
static void merge_word(const au_table_t *t, _Atomic uint32_t *v, uint32_t *base, uint32_t fresh)
{
  const uint32_t b = *base;
  *base = fresh;
  if (fresh == b) return;
  uint32_t old = atomic_load_explicit(v, memory_order_relaxed), upd;
  do {
    if (t->type != AU_F32) {
      upd = old + (fresh - b); /* wraps as the kernels' adds do */
      continue;
    }
    float cur, fb, ff, next;
    memcpy(&cur, &old, 4);
    memcpy(&fb, &b, 4);
    memcpy(&ff, &fresh, 4);
    next = old == b ? ff : ff + (cur - fb); /* bits: NaN stays put */
    memcpy(&upd, &next, 4);
  } while (!atomic_compare_exchange_weak_explicit(v, &old, upd, memory_order_relaxed,
                                                  memory_order_relaxed));
}

static void merge_fresh(rec_t *r, const psm_entry_t *e)
{
  _Atomic uint32_t *v = pa_of(r)->values;
  uint32_t *base = r->repl.base;
  if (e->npairs) {
    for (uint32_t i = 0; i < e->npairs; i++) {
      uint32_t k = psm_entry_index(e, i);
      merge_word(r->t, &v[k], &base[k], psm_entry_word(e, i));
    }
    return;
  }
  const size_t n = group_bytes(r->t) / 4;
  for (size_t k = 0; k < n; k++) {
    uint32_t f;
    memcpy(&f, e->words + k * 4, 4);
    merge_word(r->t, &v[k], &base[k], f);
  }
}

/* An id table's replica takes the owner's words as they are, under its lock (a lookup
 * sees the blob before or after the entry, each of the owner's buckets as it was at one
 * time). */
static void ids_fresh(rec_t *r, const psm_entry_t *e)
{
  void *rep = pa_of(r)->values;
  uint8_t *blob = ids_replica_blob(rep);
  ids_replica_lock(rep);
  if (e->npairs) {
    for (uint32_t i = 0; i < e->npairs; i++) {
      const uint32_t w = psm_entry_word(e, i);
      memcpy(blob + (size_t)psm_entry_index(e, i) * 4, &w, 4);
    }
  } else {
    memcpy(blob, e->words, group_bytes(r->t));
  }
  ids_replica_unlock(rep);
}

/* An owner applies replicas' deltas; a replica merges the owner's values. */
void replication_on_entries(struct placer *p, const au_msg_t *m, int fresh)
{
  au_node_t *n = p->node;
  psm_entries_t it;
  psm_entry_t e;
  psm_why_t why;
  int more = -1;
  if (psm_entries_begin(m->data, m->len, &it, &why) != 0) goto bad;
  if (!fresh) idle_touched(n); /* fresh values for the replicas go out at the next tick */
  while ((more = psm_entry_next(n, &it, &e, &why)) == 1) {
    rec_t *r = rec_get(p, e.t, e.actor);
    if (!r) break;
    uint8_t st = atomic_load(&pa_of(r)->state);
    if (!fresh) {
      if (st != PA_OWNER) continue;
      if (r->t->ids) continue; /* an id table's replicas push to the owner: malformed */
      if (e.npairs && !adds_words(r->t)) continue; /* a sender would not: malformed */
      apply_deltas(r, &e, &p->scratch);
      atomic_store(&pa_of(r)->dirty, 1); /* the replicas must hear */
      continue;
    }
    if (st != PA_REPLICA) continue;
    au__trace(n->rt, TRACE_REPLICA_SYNC, (uint64_t)r->t->id, r->actor, m->from_node, r->t->group);
    if (r->t->ids)
      ids_fresh(r, &e);
    else
      merge_fresh(r, &e);
  }
  if (more >= 0) return;
bad:
  au__log(AU_LOG_WARN, n->rank, "malformed %s from node %u: %s", fresh ? "fresh values" : "sync",
          m->from_node, why.text);
}

int replication_on_drop(struct placer *p, const au_msg_t *m, rec_t **out)
{
  au_node_t *n = p->node;
  rec_t *r = *out = actor_rec(p, m);
  if (!r) return -1;
  if (r->repl.dropping_here) return 1; /* on its way out already: PS_REP_GONE follows */
  if (atomic_load(&pa_of(r)->state) != PA_REPLICA) {
    /* none here (it never arrived, or this node refused it): say so, or the owner
     * would wait for it for ever and never move the actor */
    send_actor(p, r, PS_REP_GONE, m->from_node);
    return 0;
  }
  /* no new access from here on; the values stay until the grace period is over */
  LIST_DEL(r, replica);
  r->repl.dropping_here = 1;
  p->repl.drops_here++;
  idle_pending(n, 1);
  atomic_store(&pa_of(r)->state, PA_REMOTE);
  grace_begin(p, r, PL_DROP_GRACE);
  return 1;
}

void replication_finish_drop(struct placer *p, rec_t *r)
{
  if (!r->repl.dropping_here) return;
  au_node_t *n = p->node;
  param_actor_t *pa = pa_of(r);
  uint32_t owner = pa->owner;
  /* the workers are out (the grace period): the values are read plainly */
  obuf_t batch = {0};
  words_t w = {0};
  if (r->t->ids) { /* nothing to ship: its node's pushes went to the owner */
    ids_replica_free(r->t->ids, pa->values);
  } else if (words_fit(&w, r->t) != 0) {
    au__log(AU_LOG_ERROR, n->rank, "out of memory: last delta of actor %llu lost",
            (unsigned long long)r->actor);
  } else {
    uint32_t k = take_changes(r->t, pa->values, r->repl.base, &w, 1);
    if (k &&
        psm_entry_add(&batch, r->t, r->actor, w.changed, w.vals, k, NULL, adds_words(r->t)) == 0) {
      au_send_to(n->rt, owner, PS_PLACER_PORT, PS_SYNC, batch.p, batch.len);
      counter_add(&p->repl.syncs, 1);
    }
  }
  words_free(&w);
  free(batch.p);
  if (!r->t->ids) table_values_give(r->t, r->actor, pa->values, 0);
  pa->values = NULL;
  free(r->repl.base);
  r->repl.base = NULL;
  r->repl.dropping_here = 0;
  p->repl.drops_here--;
  send_actor(p, r, PS_REP_GONE, owner);
  au__trace(n->rt, TRACE_REPLICA_DROP, (uint64_t)r->t->id, r->actor, owner, 0);
  counter_add(&p->repl.replicas_dropped, 1);
  atomic_fetch_sub(&p->repl.replicas_held, 1);
  idle_pending(n, -1);
}

rec_t *replication_on_gone(struct placer *p, const au_msg_t *m)
{
  rec_t *r = actor_rec(p, m);
  if (!r) return NULL;
  nodeset_del(r->repl.dropping, (int)m->from_node);
  forget(r, (int)m->from_node);
  return r;
}

int replication_tick(struct placer *p)
{
  au_node_t *n = p->node;
  if (!p->repl.replicas && !p->repl.owned) return 0;
  obuf_t *syncs = calloc((size_t)n->nodes, sizeof(obuf_t));
  obuf_t *fresh = calloc((size_t)n->nodes, sizeof(obuf_t));
  words_t w = {0};
  int sent = 1; /* out of memory: busy, the next tick tries again */
  if (!syncs || !fresh) goto out;
  sent = 0;
  /* replicas here: ship what the workers changed since the last sync */
  for (rec_t *r = p->repl.replicas; r; r = r->repl.next_replica) {
    if (r->t->ids) continue; /* its node's pushes went to the owner */
    /* unmarked: nobody wrote it since the last look (marks come after the writes, so a
     * write during this look marks it again for the next) */
    if (!atomic_exchange(&pa_of(r)->dirty, 0)) continue;
    if (words_fit(&w, r->t) != 0) break;
    uint32_t k = take_changes(r->t, pa_of(r)->values, r->repl.base, &w, 1);
    if (!k) continue; /* unchanged */
    obuf_t *b = &syncs[pa_of(r)->owner];
    if (psm_entry_add(b, r->t, r->actor, w.changed, w.vals, k, NULL, adds_words(r->t)) != 0) {
      /* not shipped: the base has them; put them back as the next delta */
      au__log(AU_LOG_ERROR, n->rank, "out of memory: a replica delta is lost");
      break;
    }
    counter_add(&p->repl.syncs, 1);
  }
  /* owned actors whose values changed since last sent, whoever changed them (synced
   * deltas, pushes, local workers): the changed words to every replica */
  for (rec_t *r = p->repl.owned; r; r = r->repl.next_owned) {
    /* an id table's buckets say themselves whether they changed (ids.c) */
    if (!r->t->ids && !atomic_exchange(&pa_of(r)->dirty, 0)) continue;
    if (words_fit(&w, r->t) != 0) break;
    uint32_t k =
        r->t->ids ? ids_actor_changes(r->t->ids, pa_of(r)->values, r->repl.base, w.changed, w.vals)
                  : take_changes(r->t, pa_of(r)->values, r->repl.base, &w, 0);
    if (!k) continue; /* the base is the values now: a dense entry carries all of it */
    for (int node = -1; (node = nodeset_next(r->repl.replicas, node)) >= 0;)
      psm_entry_add(&fresh[node], r->t, r->actor, w.changed, w.vals, k, r->repl.base, 1);
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
out:
  free(syncs);
  free(fresh);
  words_free(&w);
  return sent;
}

void replication_free(rec_t *r)
{
  param_actor_t *pa = pa_of(r);
  if (r->t->ids && (atomic_load(&pa->state) == PA_REPLICA || r->repl.dropping_here)) {
    ids_replica_free(r->t->ids, pa->values); /* (a dense table's go with the table) */
    pa->values = NULL;
  }
  free(r->repl.base);
  r->repl.base = NULL;
  free(r->repl.replicas);
  free(r->repl.dropping);
  r->repl.replicas = r->repl.dropping = NULL;
}
