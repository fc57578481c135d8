/* obuf.h — a growable byte buffer for messages being built (psmsg.c's batches). The
 * buffer owns its bytes; len bytes are used of cap.
 */
#ifndef AUGUR_ACTORS_OBUF_H
#define AUGUR_ACTORS_OBUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "augur.h"

typedef struct obuf {
  uint8_t *p;
  size_t len, cap;
} obuf_t;

/* Room for `more` bytes after len. 0 or AU_ENOMEM. */
static inline int obuf_reserve(obuf_t *b, size_t more)
{
  if (b->len + more <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more) cap *= 2;
  uint8_t *p = (uint8_t *)realloc(b->p, cap);
  if (!p) return AU_ENOMEM;
  b->p = p;
  b->cap = cap;
  return 0;
}

static inline int obuf_put(obuf_t *b, const void *data, size_t n)
{
  if (obuf_reserve(b, n) != 0) return AU_ENOMEM;
  memcpy(b->p + b->len, data, n);
  b->len += n;
  return 0;
}

#endif
