/* idle.c — is the node idle? (idle.h) */
#include "actors/idle.h"

#include "actors/ps.h"

int idle_busy(const au_node_t *n)
{
  const node_idle_t *i = &n->idle;
  return atomic_load(&i->busy) || atomic_load(&i->pending) > 0 || atomic_load(&i->touched);
}

/* Says idle once nothing is left: no active worker, no placer work. */
static void maybe_idle(au_node_t *n)
{
  if (!idle_busy(n) && atomic_load(&n->active) == 0) au__cluster_idle(n->rt, 1);
}

void idle_pending(au_node_t *n, long d)
{
  long before = atomic_fetch_add(&n->idle.pending, d);
  if (d > 0 && before == 0)
    au__cluster_idle(n->rt, 0);
  else if (d < 0 && before + d == 0)
    maybe_idle(n);
}

void idle_touched(au_node_t *n)
{
  /* no tick yet (no replicas): nobody needs to hear (a replica asked for later copies the
   * values as they are then) */
  if (!atomic_load(&n->idle.ticking)) return;
  /* before the message that changed the values counts as processed: the termination
   * poll then sees this node busy */
  atomic_store(&n->idle.touched, 1);
  au__cluster_idle(n->rt, 0);
}

void idle_tick(au_node_t *n, int sent)
{
  /* something changed since the last tick (a push, a sync): busy for one more tick */
  int busy = sent | atomic_exchange(&n->idle.touched, 0);
  if (atomic_exchange(&n->idle.busy, busy) == busy) return;
  if (busy)
    au__cluster_idle(n->rt, 0);
  else
    maybe_idle(n);
}

void idle_worker_left(au_node_t *n)
{
  /* what the worker changed in replicas (or in owned values with replicas) has not gone
   * out yet: the placer's next tick ships it, and says idle itself when it is done */
  idle_touched(n);
  if (atomic_fetch_sub(&n->active, 1) == 1 && !idle_busy(n)) au__cluster_idle(n->rt, 1);
}
