/* node.c — a node: one process's share of the parameter server, with its runtime,
 * tables, server actors and workers. When the environment names a cluster, the node
 * joins it before anything else can talk to it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "actors/barrier.h"
#include "actors/placer.h"
#include "actors/ps.h"

/* The names the trace gives ps.h's TRACE_* kinds, and their arguments. */
static const au__trace_kind_t trace_kinds[TRACE_PS_END - TRACE_INTENT] = {
    [TRACE_INTENT - TRACE_INTENT] = {"intent", {"table", "actor", "node", "worker"}, NULL, 0},
    [TRACE_RELOC_START -
        TRACE_INTENT] = {"relocation_start", {"table", "actor", "to", "flow"}, "relocation", 0},
    [TRACE_RELOC_END -
        TRACE_INTENT] = {"relocation_end", {"table", "actor", "to", "flow"}, "relocation", 1},
    [TRACE_REPLICA_CREATE -
        TRACE_INTENT] = {"replica_create", {"table", "actor", "owner", "bytes"}, NULL, 0},
    [TRACE_REPLICA_SYNC -
        TRACE_INTENT] = {"replica_sync", {"table", "actor", "owner", "rows"}, NULL, 0},
    [TRACE_REPLICA_DROP -
        TRACE_INTENT] = {"replica_drop", {"table", "actor", "owner", NULL}, NULL, 0},
    [TRACE_REMOTE_ACCESS -
        TRACE_INTENT] = {"remote_access", {"table", "actor", "node", "rows"}, NULL, 0},
    [TRACE_FORWARD - TRACE_INTENT] = {"forward", {"table", "actor", "to", "hops"}, NULL, 0},
};

int au_node_create(const au_node_opts_t *opts, au_node_t **out)
{
  if (!out) return AU_EINVAL;
  au_cluster_opts_t cluster;
  char err[400];
  int rc = au_cluster_opts_from_env(&cluster, err, sizeof(err));
  if (rc < 0) {
    au__log(AU_LOG_ERROR, -1, "%s", err);
    return rc;
  }
  au_node_t *n = calloc(1, sizeof(*n));
  if (!n) return AU_ENOMEM;
  au_node_opts_t o = opts ? *opts : (au_node_opts_t){0};
  if (o.sync_ms < 0 || o.sync_ms > 1000 || o.consistency < AU_ASYNC || o.consistency > AU_BSP ||
      o.staleness < 0 || o.staleness > 1000000) {
    free(n);
    return AU_EINVAL;
  }
  n->sync_ms = o.sync_ms ? o.sync_ms : 2;
  n->consistency = (int)o.consistency;
  n->staleness = o.consistency == AU_SSP ? o.staleness : 0;
  atomic_init(&n->visible, INT64_MIN);
  rc = au_runtime_create(
      &(au_runtime_opts_t){.threads = o.threads, .keep_denormals = o.keep_denormals}, &n->rt);
  if (rc != 0) {
    free(n);
    return rc;
  }
  for (int k = TRACE_INTENT; k < TRACE_PS_END; k++)
    au__trace_kind(n->rt, k, &trace_kinds[k - TRACE_INTENT]); /* cannot fail: fixed kinds */
  n->rank = 0;
  n->nodes = 1;
  ck_epoch_init(&n->epoch); /* before the servers' and placer's records join it */
  pthread_mutex_init(&n->barrier_mu, NULL);
  n->barrier_gen = 1; /* a worker's barrier_gen of 0 means "not at a barrier" */
  atomic_init(&n->error, 0);
  atomic_init(&n->live, 0);
  atomic_init(&n->active, 0);
  /* servers first: once this node has joined, requests may come at any time */
  if ((rc = remote_start_servers(n)) != 0 || (rc = placer_start(n)) != 0 ||
      (rc = barrier_start(n)) != 0) {
    au_node_destroy(n);
    return rc;
  }
  if (cluster.nodes > 1) {
    if ((rc = au_runtime_join(n->rt, &cluster, err, sizeof(err))) != 0) {
      au__log(AU_LOG_ERROR, cluster.rank, "%s", err);
      au_node_destroy(n);
      return rc;
    }
    n->rank = au_runtime_rank(n->rt);
    n->nodes = au_runtime_nodes(n->rt);
    if ((rc = barrier_join(n)) != 0 || (rc = clk_join(n)) != 0) {
      au_node_destroy(n);
      return rc;
    }
  }
  *out = n;
  return 0;
}

int au_node_rank(const au_node_t *n)
{
  return n->rank;
}

int au_node_nodes(const au_node_t *n)
{
  return n->nodes;
}

int au_node_run(au_node_t *n)
{
  if (!n) return AU_EINVAL;
  atomic_store(&n->error, 0);
  int ready = 0;
  for (int i = 0; i < n->nworkers; i++) {
    au_worker_t *w = n->workers[i];
    if (w->state == W_READY || w->state == W_PAUSED) {
      w->state = W_READY;
      ready++;
    }
  }
  barrier_run(n);
  clk_run_start(n); /* before the kicks: no read goes by the last run's bound */
  /* busy before the first kick, so that no worker can make the node idle early */
  atomic_store(&n->active, ready);
  if (ready)
    au__cluster_idle(n->rt, 0);
  else
    au__cluster_idle(n->rt, 1);
  for (int i = 0; i < n->nworkers; i++) {
    au_worker_t *w = n->workers[i];
    if (w->state == W_READY) {
      int rc = worker_kick(w);
      if (rc != 0) return rc;
    }
  }
  /* one node: until quiescent; a cluster: until every node is idle (au__cluster_run) */
  int rc = n->nodes > 1 ? au__cluster_run(n->rt) : au_runtime_run(n->rt);
  if (rc != 0) return rc;
  rc = atomic_load(&n->error);
  if (rc != 0) return rc;
  int waiting = 0;
  for (int i = 0; i < n->nworkers; i++) waiting += n->workers[i]->state == W_WAITING;
  if (waiting) {
    au__log(AU_LOG_ERROR, -1, "%d worker(s) wait (AU_WAIT) for something that cannot arrive",
            waiting);
    return AU_EDEADLK;
  }
  return 0;
}

void au_node_destroy(au_node_t *n)
{
  if (!n) return;
  for (int i = 0; i < n->nworkers; i++) worker_release_memory(n->workers[i]);
  au_runtime_destroy(n->rt); /* leaves the cluster; frees the worker actors (their state
                               is au_worker_t) */
  remote_free_servers(n);
  clk_free(n);
  placer_free(n);
  barrier_free(n);
  checkpoint_free(n);
  free(n->table_by_id);
  ids_free_all(n);
  au_table_t *t = n->tables;
  while (t) {
    au_table_t *next = t->next;
    table_free(t);
    t = next;
  }
  free(n->workers);
  pthread_mutex_destroy(&n->barrier_mu);
  free(n);
}

au_runtime_t *au_node_runtime(au_node_t *n)
{
  return n->rt;
}
