/* consistency.c — the bound of AU_SSP and AU_BSP (au_node_opts_t.consistency): a read at
 * clock c waits until every update that any worker made at clocks <= c - S - 1 is visible
 * on its node (S = the staleness; 0 under AU_BSP). docs/workers.md, "Consistency".
 *
 * Each worker publishes, at the end of each step (after its writes, its marks for the
 * replica tick and its pushes), the last clock it finished: its clock - 1, or INT64_MAX
 * once it is out of the run (paused, done). A node's clock is the least of its workers'.
 * When it grows, the placer, in one pass:
 *
 *   1. flush: ships its replicas' deltas (a replica tick) and then tells every other
 *      placer PS_CLK_FLUSH(clock, push messages sent to it so far); the deltas travel
 *      before it on the same connection. Pushes travel from the workers to the servers,
 *      another connection: the receiver waits until its servers have applied as many
 *      push messages from the sender as the flush counted.
 *   2. fresh: once every node's flush of clock t is in (and its pushes applied), every
 *      update up to t is in the actors this node owns; the placer sends their fresh
 *      values to the replicas (a replica tick) and then PS_CLK_FRESH(t) to every placer.
 *   3. visible: the least fresh clock over all nodes (this one's own included). Rows
 *      owned elsewhere are fetched from owners that have every update up to it; replicas
 *      here merged the fresh values before the PS_CLK_FRESH that follows them. Workers
 *      read `visible`; a waiting worker is kicked when it passes.
 *
 * Parameter actors do not move under a bound (the placement gives replicas instead):
 * a push that chased a moved actor would reach the new owner after the flush that
 * counted it, on a connection the count does not cover. For the same reason no push
 * goes to a node's own server (that happens only for an actor moving away) and none is
 * forwarded. A replica that is leaving holds
 * the flush back until its last delta has gone (replication.c).
 *
 * Runs: everything is in place between runs, but a worker's clock goes on from where it
 * was, so each run starts the bound afresh (visible = -inf, one round before the first
 * read) and tags its messages with the run; a node that starts sooner may send the next
 * run's news while this one still finishes the last, which is why there are two slots.
 *
 * The invariant: `visible` on a node only grows within a run, and only to a clock t once
 * every node has said fresh(t), each after every node's flush(t) and pushes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/idle.h"
#include "actors/placer.h"

#define STALENESS_MAX 1000000

int au_consistency_parse(const char *text, au_consistency_t *model, int *staleness)
{
  if (!text || !model || !staleness) return AU_EINVAL;
  if (strcmp(text, "async") == 0 || strcmp(text, "bsp") == 0) {
    *model = text[0] == 'a' ? AU_ASYNC : AU_BSP;
    *staleness = 0;
    return 0;
  }
  if (strncmp(text, "ssp:", 4) != 0 || text[4] < '0' || text[4] > '9') return AU_EINVAL;
  char *end;
  long s = strtol(text + 4, &end, 10);
  if (*end != '\0' || s < 0 || s > STALENESS_MAX) return AU_EINVAL;
  *model = AU_SSP;
  *staleness = (int)s;
  return 0;
}

const char *au_consistency_name(au_consistency_t model, int staleness, char *buf, size_t len)
{
  if (!buf || len == 0) return "?";
  switch (model) {
  case AU_ASYNC:
    snprintf(buf, len, "async");
    break;
  case AU_BSP:
    snprintf(buf, len, "bsp");
    break;
  case AU_SSP:
    snprintf(buf, len, "ssp:%d", staleness);
    break;
  default:
    snprintf(buf, len, "?");
    break;
  }
  return buf;
}

int clk_join(au_node_t *n)
{
  if (n->nodes == 1) return 0;
  /* every node must run the same model: a bounded node would wait for ever for the
   * flushes of an async one (collective: every node joins in au_node_create) */
  double v[2] = {n->consistency, n->staleness};
  int rc = au_allreduce_sum(n->rt, v, 2);
  if (rc != 0) return rc;
  if (v[0] != (double)n->consistency * n->nodes || v[1] != (double)n->staleness * n->nodes) {
    char name[24];
    au__log(
        AU_LOG_ERROR, n->rank,
        "the nodes do not all run the same consistency model (this one: %s): give every "
        "node the same",
        au_consistency_name((au_consistency_t)n->consistency, n->staleness, name, sizeof(name)));
    return AU_EINVAL;
  }
  if (!node_bounded(n)) return 0;
  const size_t k = (size_t)n->nodes;
  n->pushes_sent = calloc(k, sizeof(*n->pushes_sent));
  n->pushes_applied = calloc(k, sizeof(*n->pushes_applied));
  struct placer *p = n->placer;
  for (int i = 0; i < 2; i++) {
    clk_slot_t *s = &p->clk.slot[i];
    s->flush_clock = malloc(k * sizeof(int64_t));
    s->flush_pushes = malloc(k * sizeof(uint64_t));
    s->ok = malloc(k * sizeof(int64_t));
    s->fresh = malloc(k * sizeof(int64_t));
    if (!s->flush_clock || !s->flush_pushes || !s->ok || !s->fresh) return AU_ENOMEM;
  }
  return n->pushes_sent && n->pushes_applied ? 0 : AU_ENOMEM;
}

void clk_free(au_node_t *n)
{
  free(n->pushes_sent);
  free(n->pushes_applied);
  n->pushes_sent = n->pushes_applied = NULL;
  struct placer *p = n->placer;
  if (!p) return;
  for (int i = 0; i < 2; i++) {
    clk_slot_t *s = &p->clk.slot[i];
    free(s->flush_clock), free(s->flush_pushes), free(s->ok), free(s->fresh);
    *s = (clk_slot_t){0};
  }
}

/* Main thread, between runs: no scheduler thread runs then (au__cluster_run returns once
 * sched_run has; reductions run on the I/O thread), so the placer is not inside
 * clk_update while this resets what it reads. */
void clk_run_start(au_node_t *n)
{
  if (!node_bounded(n)) return;
  atomic_fetch_add(&n->run, 1);
  atomic_store(&n->visible, INT64_MIN);
  for (int i = 0; i < n->nworkers; i++) {
    au_worker_t *w = n->workers[i];
    atomic_store(&w->done_clock, w->state == W_READY ? w->clock - 1 : INT64_MAX);
    atomic_store(&w->gate_need, GATE_NONE);
  }
  au_send(n->placer_actor, PL_CLK_RUN, NULL, 0);
}

/* The slot for run `run`, emptied if it held an older one. */
static clk_slot_t *slot_for(struct placer *p, uint64_t run)
{
  clk_slot_t *s = &p->clk.slot[run & 1];
  if (s->run != run && s->flush_clock) {
    s->run = run;
    for (int k = 0; k < p->node->nodes; k++)
      s->flush_clock[k] = s->ok[k] = s->fresh[k] = INT64_MIN, s->flush_pushes[k] = 0;
  }
  return s;
}

static void send_clk(struct placer *p, uint32_t type, int64_t clock)
{
  au_node_t *n = p->node;
  for (int k = 0; k < n->nodes; k++) {
    if (k == n->rank) continue;
    uint8_t msg[PSM_CLK_LEN];
    const uint64_t pushes = type == PS_CLK_FLUSH ? atomic_load(&n->pushes_sent[k]) : 0;
    size_t len =
        psm_clk_encode(msg, &(psm_clk_t){.run = p->clk.run, .clock = clock, .pushes = pushes});
    au_send_to(n->rt, (uint32_t)k, PS_PLACER_PORT, type, msg, len);
  }
}

/* Every update to the replicas here and to the actors owned here goes out now, before
 * the news that says so. */
static void ship(struct placer *p)
{
  idle_tick(p->node, replication_tick(p));
}

void clk_update(struct placer *p)
{
  au_node_t *n = p->node;
  if (!node_bounded(n) || p->clk.run == 0 || p->clk.run != atomic_load(&n->run)) return;
  clk_slot_t *s = n->nodes > 1 ? slot_for(p, p->clk.run) : NULL;
  clk_state_t *c = &p->clk;
  int64_t mine = INT64_MAX;
  for (int i = 0; i < n->nworkers; i++) {
    int64_t d = atomic_load_explicit(&n->workers[i]->done_clock, memory_order_acquire);
    if (d < mine) mine = d;
  }
  /* 1. flush, unless a replica leaving has its last delta still to send */
  const int flush = mine > c->flushed_self && p->repl.drops_here == 0;
  const int64_t flushed = flush ? mine : c->flushed_self;
  /* 2. fresh: the least flush over the nodes whose pushes are all applied here (looked
   * at before the tick below, so that the tick carries every push counted) */
  int64_t all = flushed;
  for (int pass = 0; s && pass < 2; pass++) {
    int waiting = 0;
    all = flushed;
    for (int k = 0; k < n->nodes; k++) {
      if (k == n->rank) continue;
      if (s->flush_clock[k] > s->ok[k] && atomic_load(&n->pushes_applied[k]) >= s->flush_pushes[k])
        s->ok[k] = s->flush_clock[k];
      if (s->flush_clock[k] > s->ok[k]) waiting = 1;
      if (s->ok[k] < all) all = s->ok[k];
    }
    /* servers say when they apply more; look once more after asking them, for a push
     * applied just before they could see the question */
    atomic_store(&n->clk_push_wait, waiting);
    if (!waiting) break;
  }
  const int fresh = all > c->fresh_self;
  /* one tick for both: the deltas and fresh values go before the news that says so */
  if ((flush || fresh) && n->nodes > 1) ship(p);
  if (flush) {
    if (n->nodes > 1) send_clk(p, PS_CLK_FLUSH, mine);
    c->flushed_self = mine;
  }
  if (fresh) {
    if (n->nodes > 1) send_clk(p, PS_CLK_FRESH, all);
    c->fresh_self = all;
  }
  /* 3. visible: the least fresh clock over every node */
  int64_t vis = c->fresh_self;
  for (int k = 0; s && k < n->nodes; k++)
    if (k != n->rank && s->fresh[k] < vis) vis = s->fresh[k];
  if (vis <= atomic_load(&n->visible)) return;
  atomic_store(&n->visible, vis);
  for (int i = 0; i < n->nworkers; i++) {
    au_worker_t *w = n->workers[i];
    int64_t need = atomic_load(&w->gate_need);
    if (need != GATE_NONE && need <= vis &&
        atomic_compare_exchange_strong(&w->gate_need, &need, GATE_NONE))
      au_send(w->actor, PS_CLK_OPEN, NULL, 0); /* it re-runs its step (worker.c) */
  }
}

void clk_on_message(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  if (!node_bounded(n)) return;
  if (m->type == PL_CLK_RUN || m->type == PL_CLK_NEWS) {
    if (m->from_node != (uint32_t)n->rank) return; /* the placer's own */
    if (m->type == PL_CLK_RUN) {
      p->clk.run = atomic_load(&n->run);
      p->clk.flushed_self = p->clk.fresh_self = INT64_MIN;
    } else {
      atomic_store(&n->clk_news, 0); /* before looking: later news sends another */
    }
    clk_update(p);
    return;
  }
  psm_clk_t c;
  psm_why_t why = {"not from another node of the cluster"};
  if (m->from_node >= (uint32_t)n->nodes || m->from_node == (uint32_t)n->rank ||
      !p->clk.slot[0].flush_clock || psm_clk_decode(m->data, m->len, &c, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "malformed clock message from node %u: %s", m->from_node,
            why.text);
    return;
  }
  /* this run's, or the next one's (its sender started sooner); older news is over */
  if (c.run < p->clk.run || c.run > p->clk.run + 1) return;
  clk_slot_t *s = slot_for(p, c.run);
  const uint32_t k = m->from_node;
  if (m->type == PS_CLK_FLUSH) {
    if (c.clock > s->flush_clock[k]) s->flush_clock[k] = c.clock, s->flush_pushes[k] = c.pushes;
  } else if (c.clock > s->fresh[k]) {
    s->fresh[k] = c.clock;
  }
  clk_update(p);
}
