/* runtime.c — creating, running and destroying a runtime: the glue between the
 * scheduler (sched.c), the actors (actor.c), the pools and the I/O thread (io.c).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/io.h"
#include "runtime/net.h"
#include "runtime/rt.h"
#include "runtime/trace.h"

#define DEFAULT_BATCH 64

int au_runtime_create(const au_runtime_opts_t *opts, au_runtime_t **out)
{
  au_runtime_opts_t o = opts ? *opts : (au_runtime_opts_t){0};
  if (!out || o.threads < 0 || o.threads > 1024 || o.batch < 0) return AU_EINVAL;
  if (o.threads == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = n > 0 ? (int)n : 1;
  }
  au_runtime_t *rt = calloc(1, sizeof(*rt));
  if (!rt) return AU_ENOMEM;
  rt->nthreads = o.threads;
  rt->batch = o.batch ? o.batch : DEFAULT_BATCH;
  rt->rank = 0;
  rt->nodes = 1;
  rt->keep_denormals = o.keep_denormals;
  int rc = AU_ENOMEM;
  /* caches: one per scheduler thread and one for the I/O thread */
  if (pool_init(&rt->pool, rt->nthreads + 1) != 0) goto fail_rt;
  rt->lists = calloc((size_t)rt->nthreads + 2, sizeof(actor_list_t));
  if (!rt->lists) goto fail_pool;
  for (int i = 0; i < rt->nthreads + 2; i++) pthread_mutex_init(&rt->lists[i].mu, NULL);
  if ((rc = sched_init(rt)) != 0) goto fail_lists;
  if ((rc = trace_init(rt)) != 0) goto fail_sched;
  if ((rc = io_start(rt)) != 0) goto fail_trace;
  *out = rt;
  return 0;

fail_trace:
  trace_free(rt);
fail_sched:
  sched_destroy(rt);
fail_lists:
  for (int i = 0; i < rt->nthreads + 2; i++) pthread_mutex_destroy(&rt->lists[i].mu);
  free(rt->lists);
fail_pool:
  pool_destroy(&rt->pool);
fail_rt:
  free(rt);
  return rc;
}

int au_runtime_run(au_runtime_t *rt)
{
  if (!rt) return AU_EINVAL;
  int rc = sched_run(rt);
  /* in a cluster, a run also ends when a node is lost: say so */
  return rc ? rc : net_error(rt);
}

void au_runtime_destroy(au_runtime_t *rt)
{
  if (!rt) return;
  net_leave(rt); /* BYE to every peer, while the I/O thread still runs */
  io_stop(rt);
  trace_free(rt); /* writes a trace still on: every thread of the runtime has stopped */
  net_free(rt);
  free(rt->ports);
  actor_free_all(rt);
  sched_destroy(rt);
  for (int i = 0; i < rt->nthreads + 2; i++) pthread_mutex_destroy(&rt->lists[i].mu);
  free(rt->lists);
  pool_destroy(&rt->pool);
  free(rt);
}

int au_runtime_threads(const au_runtime_t *rt)
{
  return rt->nthreads;
}
