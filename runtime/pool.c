/* pool.c — per-thread message pools (see pool.h). */
#include "runtime/pool.h"

#include <stdlib.h>
#include <string.h>

#define POOL_BATCH 256         /* messages moved to or from the exchange at once */
#define SLAB_BYTES (64 * 1024) /* carved into blocks of one class */

/* Block sizes, multiples of 64: a block stays aligned to a cache line, its payload to 16. */
static const uint32_t block_size[POOL_CLASSES] = {
    64,   128,  256,  512,  1024, 1280, 1536,  1792,  2048,  2560,  3072,
    3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
};

/* Under AddressSanitizer a free message is poisoned, except the fields the free lists
 * use (the link, the size class, the exchange link in the first payload word), so a
 * behaviour that keeps a message after returning is caught like a use-after-free. */
#ifdef AUGUR_ASAN
#include <sanitizer/asan_interface.h>
static void poison(au_msg_t *m, int on)
{
  size_t block = block_size[m->au__class];
  char *fields = (char *)&m->sender, *tail = (char *)m->data + 8;
  size_t nfields = offsetof(au_msg_t, au__class) - offsetof(au_msg_t, sender);
  size_t ntail = block - (size_t)(tail - (char *)m);
  if (on) {
    ASAN_POISON_MEMORY_REGION(fields, nfields);
    ASAN_POISON_MEMORY_REGION(tail, ntail);
  } else {
    ASAN_UNPOISON_MEMORY_REGION(fields, nfields);
    ASAN_UNPOISON_MEMORY_REGION(tail, ntail);
  }
}
#else
static inline void poison(au_msg_t *m, int on)
{
  (void)m;
  (void)on;
}
#endif

typedef struct slab {
  struct slab *next;
  _Alignas(64) unsigned char mem[];
} slab_t;

/* The next batch in the exchange hides in the first message's payload. */
static au_msg_t **batch_link(au_msg_t *m)
{
  return (au_msg_t **)(void *)m->data;
}

static au_msg_t *next_of(au_msg_t *m)
{
  return (au_msg_t *)m->au__next;
}

static int class_of(size_t total)
{
  for (int c = 0; c < POOL_CLASSES; c++)
    if (total <= block_size[c]) return c;
  return -1;
}

int pool_init(pool_t *p, int ncaches)
{
  memset(p, 0, sizeof(*p));
  p->caches = calloc((size_t)ncaches, sizeof(pool_cache_t));
  if (!p->caches) return AU_ENOMEM;
  p->ncaches = ncaches;
  pthread_mutex_init(&p->mu, NULL);
  return 0;
}

static void free_slabs(pool_cache_t *c)
{
  slab_t *s = c->slabs;
  while (s) {
    slab_t *next = s->next;
    free(s);
    s = next;
  }
  c->slabs = NULL;
}

void pool_destroy(pool_t *p)
{
  for (int i = 0; i < p->ncaches; i++) free_slabs(&p->caches[i]);
  free_slabs(&p->shared);
  free(p->caches);
  pthread_mutex_destroy(&p->mu);
  memset(p, 0, sizeof(*p));
}

/* Refills an empty cache class: a batch from the exchange, else a new slab. */
static int refill(pool_t *p, pool_cache_t *c, int cls, int locked)
{
  if (!locked) pthread_mutex_lock(&p->mu);
  au_msg_t *batch = p->batches[cls];
  if (batch) p->batches[cls] = *batch_link(batch);
  if (!locked) pthread_mutex_unlock(&p->mu);
  if (batch) {
    c->free[cls] = batch;
    c->count[cls] = POOL_BATCH;
    return 0;
  }
  size_t block = block_size[cls];
  /* at least 16 blocks a slab, so that large classes are not carved one by one */
  size_t bytes = block * 16 > SLAB_BYTES ? block * 16 : SLAB_BYTES;
  slab_t *s = malloc(sizeof(slab_t) + bytes);
  if (!s) return AU_ENOMEM;
  s->next = c->slabs;
  c->slabs = s;
  size_t n = bytes / block;
  au_msg_t *head = NULL;
  for (size_t i = n; i-- > 0;) {
    au_msg_t *m = (au_msg_t *)(void *)(s->mem + i * block);
    m->au__class = (uint16_t)cls;
    m->au__next = head;
    head = m;
  }
  c->free[cls] = head;
  c->count[cls] = (unsigned)n;
  return 0;
}

/* Moves POOL_BATCH messages of a class that has too many to the exchange. */
static void spill(pool_t *p, pool_cache_t *c, int cls, int locked)
{
  au_msg_t *first = c->free[cls], *last = first;
  for (int i = 1; i < POOL_BATCH; i++) last = next_of(last);
  c->free[cls] = next_of(last);
  c->count[cls] -= POOL_BATCH;
  last->au__next = NULL;
  if (!locked) pthread_mutex_lock(&p->mu);
  *batch_link(first) = p->batches[cls];
  p->batches[cls] = first;
  if (!locked) pthread_mutex_unlock(&p->mu);
}

static au_msg_t *alloc_in(pool_t *p, pool_cache_t *c, int cls, int locked)
{
  if (!c->free[cls] && refill(p, c, cls, locked) != 0) return NULL;
  au_msg_t *m = c->free[cls];
  c->free[cls] = next_of(m);
  c->count[cls]--;
  poison(m, 0);
  return m;
}

au_msg_t *pool_alloc(pool_t *p, pool_cache_t *cache, size_t len)
{
  if (len > UINT32_MAX - sizeof(au_msg_t)) return NULL;
  size_t total = sizeof(au_msg_t) + len;
  int cls = class_of(total);
  au_msg_t *m;
  if (cls < 0) {
    m = aligned_alloc(64, (total + 63) & ~(size_t)63);
    if (!m) return NULL;
    m->au__class = POOL_BIG;
  } else if (cache) {
    m = alloc_in(p, cache, cls, 0);
  } else {
    pthread_mutex_lock(&p->mu);
    m = alloc_in(p, &p->shared, cls, 1);
    pthread_mutex_unlock(&p->mu);
  }
  if (!m) return NULL;
  m->au__next = NULL;
  m->sender = NULL;
  m->type = 0;
  m->len = (uint32_t)len;
  return m;
}

void pool_free(pool_t *p, pool_cache_t *cache, au_msg_t *m)
{
  unsigned cls = m->au__class;
  if (cls == POOL_BIG) {
    free(m);
    return;
  }
  int locked = cache == NULL;
  if (locked) {
    cache = &p->shared;
    pthread_mutex_lock(&p->mu);
  }
  poison(m, 1);
  m->au__next = cache->free[cls];
  cache->free[cls] = m;
  if (++cache->count[cls] >= 2 * POOL_BATCH) spill(p, cache, (int)cls, locked);
  if (locked) pthread_mutex_unlock(&p->mu);
}
