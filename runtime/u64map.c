/* u64map.c — see u64map.h. */
#include "runtime/u64map.h"

#include <stdlib.h>

#include "augur.h"

static size_t hash(uint64_t k)
{
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}

int u64map_init(u64map_t *m, size_t capacity_log2)
{
  size_t cap = (size_t)1 << capacity_log2;
  m->slot = calloc(cap, sizeof(*m->slot));
  if (!m->slot) return AU_ENOMEM;
  m->mask = cap - 1;
  m->count = 0;
  return 0;
}

void u64map_destroy(u64map_t *m)
{
  free(m->slot);
  m->slot = NULL;
  m->mask = m->count = 0;
}

static int grow(u64map_t *m)
{
  u64map_t n = {0};
  size_t cap = (m->mask + 1) * 2;
  n.slot = calloc(cap, sizeof(*n.slot));
  if (!n.slot) return AU_ENOMEM;
  n.mask = cap - 1;
  for (size_t i = 0; i <= m->mask; i++)
    if (m->slot[i].key) u64map_put(&n, m->slot[i].key, m->slot[i].val);
  free(m->slot);
  *m = n;
  return 0;
}

int u64map_put(u64map_t *m, uint64_t key, void *val)
{
  if ((m->count + 1) * 4 > (m->mask + 1) * 3 && grow(m) != 0) return AU_ENOMEM;
  for (size_t i = hash(key) & m->mask;; i = (i + 1) & m->mask) {
    if (m->slot[i].key == key) {
      m->slot[i].val = val;
      return 0;
    }
    if (!m->slot[i].key) {
      m->slot[i].key = key;
      m->slot[i].val = val;
      m->count++;
      return 0;
    }
  }
}

void *u64map_get(const u64map_t *m, uint64_t key)
{
  for (size_t i = hash(key) & m->mask;; i = (i + 1) & m->mask) {
    if (m->slot[i].key == key) return m->slot[i].val;
    if (!m->slot[i].key) return NULL;
  }
}

void *u64map_del(u64map_t *m, uint64_t key)
{
  size_t i = hash(key) & m->mask;
  while (m->slot[i].key != key) {
    if (!m->slot[i].key) return NULL;
    i = (i + 1) & m->mask;
  }
  void *val = m->slot[i].val;
  /* Backward shift: pull later members of the probe run into the hole. */
  for (size_t j = (i + 1) & m->mask; m->slot[j].key; j = (j + 1) & m->mask) {
    size_t home = hash(m->slot[j].key) & m->mask;
    /* j may move to i if its home is not in the cyclic range (i, j]. */
    if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
      m->slot[i] = m->slot[j];
      i = j;
    }
  }
  m->slot[i].key = 0;
  m->slot[i].val = NULL;
  m->count--;
  return val;
}
