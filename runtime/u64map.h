/* u64map.h — open-addressing hash map from nonzero uint64_t keys to pointers, for one
 * thread (no locking). Linear probing with backward-shift deletion, so there are no
 * tombstones and lookups stay short after many deletes.
 */
#ifndef AUGUR_RUNTIME_U64MAP_H
#define AUGUR_RUNTIME_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct u64map_slot {
  uint64_t key; /* 0 = empty */
  void *val;
} u64map_slot_t;

typedef struct u64map {
  u64map_slot_t *slot;
  size_t mask, count;
} u64map_t;

int u64map_init(u64map_t *m, size_t capacity_log2);
void u64map_destroy(u64map_t *m);
/* key must be nonzero. Replaces an existing value. 0 or AU_ENOMEM. */
int u64map_put(u64map_t *m, uint64_t key, void *val);
void *u64map_get(const u64map_t *m, uint64_t key);
/* Returns the removed value, or NULL if the key was absent. */
void *u64map_del(u64map_t *m, uint64_t key);

#endif
