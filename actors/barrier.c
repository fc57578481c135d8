/* barrier.c — au_worker_barrier across the cluster: it returns 0 once every worker of every node
 * that is not done has arrived, and once the updates they pushed to other nodes before
 * arriving have been applied there.
 *
 * On one node this is a count under a lock. In a cluster, a node whose workers have all
 * arrived (or are done) tells node 0's barrier actor how many of its workers take part
 * (PS_BAR_ARRIVE); a node whose workers are all done says so once (PS_BAR_DONE). Node 0,
 * when every node has arrived or is done, tells every node how many workers took part in
 * all (PS_BAR_GO). Meanwhile each worker, at the end of the step in which it arrived,
 * after that step's pushes, sends a fence (PS_BAR_FENCE) to the server on every other node
 * that its pushes go to: a server handles its messages in order, so when it passes the
 * fence on to its barrier actor, the pushes before it are applied. A node that has GO and
 * a fence from every worker of the other nodes tells node 0 (PS_BAR_APPLIED), and node 0,
 * once every node did, opens the barrier everywhere (PS_BAR_OPEN): a worker past the
 * barrier reads rows on any node, so every node's pushes must be in, not only its own
 * node's (before, a node opened on its own fences, and a worker there read another node's
 * rows before the last pushes to them: the guide's histogram came out short on 3 nodes,
 * 1 run in 20 under load). Nodes whose workers are all done take part in this second
 * half too: they hold rows that others push to.
 *
 * The invariant: generations agree across nodes, because every node opens each one, in
 * order, only when node 0 says so, after all have arrived; a fence counts for the
 * generation it names.
 */
#include <stdio.h>
#include <stdlib.h>

#include "actors/barrier.h"
#include "actors/psmsg.h"
#include "actors/remote.h"

struct barrier {
  au_node_t *node;
  au_actor_t *actor;
  /* every node: fences of the other nodes' workers for the generation it waits at, and
   * for the next (a node that opened sooner may be there already), and GO's count */
  uint64_t fences, fences_next;
  int64_t expect;   /* fences to wait for, once GO came (-1 before) */
  int arrived_here; /* this node has told node 0 it arrived */
  int said_done;    /* ... that its workers are all done (once) */
  int applied_here; /* ... and that the pushes to it are in */
  /* node 0: who arrived for the current generation, who is done for good, who has every
   * push to it applied */
  uint8_t *arrived, *done, *applied;
  int napplied;
  uint64_t workers; /* workers that arrived, over all nodes */
  uint64_t gen;     /* the generation they arrived at */
  int narrived;
};

/* With barrier_mu held: opens the barrier, re-running every worker that waits at it. */
static void release_locked(au_node_t *n)
{
  uint64_t gen = n->barrier_gen++;
  n->barrier_arrived = 0;
  for (int i = 0; i < n->nworkers; i++)
    if (n->workers[i]->barrier_gen == gen) worker_kick(n->workers[i]);
}

static void send_bar(au_node_t *n, uint32_t node, uint32_t type, uint64_t gen, uint32_t count)
{
  uint8_t msg[PSM_BAR_LEN];
  size_t len = psm_bar_encode(msg, &(psm_bar_t){.gen = gen, .count = count});
  au_send_to(n->rt, node, PS_BARRIER_PORT, type, msg, len);
}

/* With barrier_mu held: this node's workers have all arrived (or are done). */
static void node_arrived_locked(au_node_t *n)
{
  if (n->nodes == 1) {
    release_locked(n);
    return;
  }
  struct barrier *b = n->barrier;
  if (b->arrived_here) return;
  b->arrived_here = 1;
  send_bar(n, 0, PS_BAR_ARRIVE, n->barrier_gen, (uint32_t)n->barrier_arrived);
}

/* With barrier_mu held: GO came and every fence: the pushes to this node are in. */
static void maybe_applied_locked(au_node_t *n)
{
  struct barrier *b = n->barrier;
  if (b->expect < 0 || b->fences < (uint64_t)b->expect || b->applied_here) return;
  b->applied_here = 1;
  send_bar(n, 0, PS_BAR_APPLIED, n->barrier_gen, 0);
}

/* With barrier_mu held: node 0 says every node has every push: open. */
static void open_locked(au_node_t *n)
{
  struct barrier *b = n->barrier;
  b->fences = b->fences_next;
  b->fences_next = 0;
  b->expect = -1;
  b->arrived_here = 0;
  b->applied_here = 0;
  release_locked(n);
}

int au_worker_barrier(au_worker_t *w)
{
  au_node_t *n = w->node;
  int rc = AU_EAGAIN;
  pthread_mutex_lock(&n->barrier_mu);
  if (w->barrier_gen != 0) {
    /* re-run after arriving: released once the generation moved on */
    if (w->barrier_gen != n->barrier_gen) {
      w->barrier_gen = 0;
      rc = 0;
    }
  } else {
    w->barrier_gen = n->barrier_gen;
    w->fence_gen = n->nodes > 1 ? n->barrier_gen : 0; /* after this step's pushes */
    /* the last to arrive opens a node's barrier and passes at once; a cluster waits */
    if (++n->barrier_arrived >= atomic_load(&n->live)) {
      node_arrived_locked(n);
      if (w->barrier_gen != n->barrier_gen) {
        w->barrier_gen = 0;
        rc = 0;
      }
    }
  }
  pthread_mutex_unlock(&n->barrier_mu);
  return rc;
}

/* With barrier_mu held: tells node 0, once, that this node's workers are all done. */
static void say_done_locked(au_node_t *n)
{
  if (n->nodes == 1 || n->barrier->said_done) return;
  n->barrier->said_done = 1;
  send_bar(n, 0, PS_BAR_DONE, n->barrier_gen, 0);
}

void barrier_left(au_node_t *n)
{
  pthread_mutex_lock(&n->barrier_mu);
  int live = atomic_load(&n->live);
  /* this worker's leaving may complete a barrier the others wait at */
  if (n->barrier_arrived > 0 && n->barrier_arrived >= live) node_arrived_locked(n);
  /* the last one gone: this node takes part in no barrier again */
  if (live == 0) say_done_locked(n);
  pthread_mutex_unlock(&n->barrier_mu);
}

void barrier_run(au_node_t *n)
{
  pthread_mutex_lock(&n->barrier_mu);
  /* a node that runs without workers (none spawned, or all done) takes part in no
   * barrier: node 0 must not wait for it (it did, for ever, before) */
  if (atomic_load(&n->live) == 0) say_done_locked(n);
  pthread_mutex_unlock(&n->barrier_mu);
}

void barrier_fence(au_worker_t *w)
{
  au_node_t *n = w->node;
  uint64_t gen = w->fence_gen;
  w->fence_gen = 0;
  uint8_t msg[PSM_BAR_LEN];
  size_t len = psm_bar_encode(msg, &(psm_bar_t){.gen = gen});
  /* the same server as the worker's pushes (remote.c) */
  for (int node = 0; node < n->nodes; node++)
    if (node != n->rank)
      au_send_to(n->rt, (uint32_t)node, PS_SERVER_PORT(w->id % n->nservers), PS_BAR_FENCE, msg,
                 len);
}

/* Node 0: the generation is complete when every node arrived or is done. */
static void coordinate(struct barrier *b)
{
  au_node_t *n = b->node;
  if (!b->narrived) return;
  for (int k = 0; k < n->nodes; k++)
    if (!b->arrived[k] && !b->done[k]) return;
  const uint64_t gen = b->gen;
  uint64_t workers = b->workers;
  b->workers = 0;
  b->narrived = 0;
  for (int k = 0; k < n->nodes; k++) b->arrived[k] = 0;
  /* done nodes too: they count the fences for the rows they hold */
  for (int k = 0; k < n->nodes; k++) send_bar(n, (uint32_t)k, PS_BAR_GO, gen, (uint32_t)workers);
}

/* Node 0: every node has the pushes to it applied: open everywhere. */
static void coordinate_open(struct barrier *b)
{
  au_node_t *n = b->node;
  if (b->napplied < n->nodes) return;
  b->napplied = 0;
  for (int k = 0; k < n->nodes; k++) b->applied[k] = 0;
  for (int k = 0; k < n->nodes; k++) send_bar(n, (uint32_t)k, PS_BAR_OPEN, b->gen, 0);
}

static void barrier_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  (void)self;
  struct barrier *b = *(struct barrier **)state;
  au_node_t *n = b->node;
  psm_bar_t msg;
  psm_why_t why;
  if (psm_bar_decode(m->data, m->len, &msg, &why) != 0 || m->from_node >= (uint32_t)n->nodes) {
    au__log(AU_LOG_WARN, n->rank, "malformed barrier message from node %u: %s", m->from_node,
            why.text);
    return;
  }
  switch (m->type) {
  case PS_BAR_ARRIVE:
  case PS_BAR_DONE:
    if (n->rank != 0) break;
    if (m->type == PS_BAR_DONE) {
      b->done[m->from_node] = 1;
    } else if (!b->arrived[m->from_node]) {
      if (b->narrived && msg.gen != b->gen) {
        au__log(AU_LOG_WARN, n->rank, "node %u arrived at barrier %llu, the others at %llu",
                m->from_node, (unsigned long long)msg.gen, (unsigned long long)b->gen);
        break;
      }
      b->gen = msg.gen;
      b->arrived[m->from_node] = 1;
      b->narrived++;
      b->workers += msg.count;
    }
    coordinate(b);
    break;
  case PS_BAR_GO:
    pthread_mutex_lock(&n->barrier_mu);
    /* the fences of the other nodes' workers: all that took part but this node's */
    b->expect = (int64_t)msg.count - n->barrier_arrived;
    maybe_applied_locked(n);
    pthread_mutex_unlock(&n->barrier_mu);
    break;
  case PS_BAR_APPLIED:
    if (n->rank != 0 || b->applied[m->from_node]) break;
    if (msg.gen != b->gen) {
      au__log(AU_LOG_WARN, n->rank, "node %u has barrier %llu applied, the others are at %llu",
              m->from_node, (unsigned long long)msg.gen, (unsigned long long)b->gen);
      break;
    }
    b->applied[m->from_node] = 1;
    b->napplied++;
    coordinate_open(b);
    break;
  case PS_BAR_OPEN:
    pthread_mutex_lock(&n->barrier_mu);
    if (msg.gen == n->barrier_gen && b->applied_here)
      open_locked(n);
    else
      au__log(AU_LOG_WARN, n->rank, "node 0 opened barrier %llu; this node is at barrier %llu%s",
              (unsigned long long)msg.gen, (unsigned long long)n->barrier_gen,
              b->applied_here ? "" : " and the pushes to it are not all in yet");
    pthread_mutex_unlock(&n->barrier_mu);
    break;
  case PS_BAR_FENCE: /* passed on by a server, after the pushes before it */
    pthread_mutex_lock(&n->barrier_mu);
    if (msg.gen == n->barrier_gen)
      b->fences++;
    else if (msg.gen == n->barrier_gen + 1)
      b->fences_next++;
    else
      au__log(AU_LOG_WARN, n->rank, "a fence for barrier %llu at barrier %llu",
              (unsigned long long)msg.gen, (unsigned long long)n->barrier_gen);
    maybe_applied_locked(n);
    pthread_mutex_unlock(&n->barrier_mu);
    break;
  default:
    break;
  }
}

int barrier_start(au_node_t *n)
{
  struct barrier *b = calloc(1, sizeof(*b));
  if (!b) return AU_ENOMEM;
  b->node = n;
  b->expect = -1;
  int rc = au_actor_spawn(n->rt, barrier_behaviour, sizeof(b), &b->actor);
  if (rc == 0) rc = au_port_register(n->rt, PS_BARRIER_PORT, b->actor);
  if (rc != 0) {
    free(b);
    return rc;
  }
  *(struct barrier **)au_actor_state(b->actor) = b;
  n->barrier = b;
  n->barrier_actor = b->actor;
  return 0;
}

int barrier_join(au_node_t *n)
{
  struct barrier *b = n->barrier;
  b->arrived = calloc((size_t)n->nodes, 1);
  b->done = calloc((size_t)n->nodes, 1);
  b->applied = calloc((size_t)n->nodes, 1);
  return b->arrived && b->done && b->applied ? 0 : AU_ENOMEM;
}

void barrier_free(au_node_t *n)
{
  struct barrier *b = n->barrier;
  if (!b) return;
  free(b->arrived);
  free(b->done);
  free(b->applied);
  free(b);
  n->barrier = NULL;
}
