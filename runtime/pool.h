/* pool.h — message memory: size classes of 64..16384 bytes, a free-list cache per
 * thread, and a shared exchange of whole batches between threads. From 1 KiB up the
 * classes are a quarter of a power of two apart, so a message takes at most a quarter
 * more memory than it needs (a 4 KiB payload with its frame header takes 5 KiB, not 8).
 *
 * The invariant: a cache is touched only by the thread that owns it (a scheduler thread
 * or the I/O thread); every other thread goes through the locked `shared` cache. A
 * message may be freed on another thread than the one that allocated it: it joins the
 * freeing thread's cache, and surplus flows back through the exchange in batches, so the
 * hot path is a pointer pop/push with no atomic operation and no malloc.
 */
#ifndef AUGUR_RUNTIME_POOL_H
#define AUGUR_RUNTIME_POOL_H

#include <pthread.h>
#include <stddef.h>

#include "augur.h"

#define POOL_CLASSES 21    /* 64..512 by doubling, then 1024, 1280, 1536, 1792, ..., 16384 */
#define POOL_BIG     0xffu /* class of messages too large for a pool: plain malloc */

typedef struct pool_cache {
  au_msg_t *free[POOL_CLASSES];
  unsigned count[POOL_CLASSES];
  void *slabs; /* chain of slabs this cache carved, freed by pool_destroy */
} pool_cache_t;

typedef struct pool {
  pool_cache_t *caches; /* one per owning thread */
  int ncaches;
  pthread_mutex_t mu;              /* guards `shared` and the batch exchange */
  pool_cache_t shared;             /* for threads that own no cache */
  au_msg_t *batches[POOL_CLASSES]; /* exchange: lists of POOL_BATCH free messages */
} pool_t;

int pool_init(pool_t *p, int ncaches);
void pool_destroy(pool_t *p);

/* cache: the calling thread's own cache, or NULL to use the locked shared one.
 * Returns a message with room for len payload bytes, type and len set, sender NULL. */
au_msg_t *pool_alloc(pool_t *p, pool_cache_t *cache, size_t len);
void pool_free(pool_t *p, pool_cache_t *cache, au_msg_t *m);

#endif
