/* blocksched.c — see blocksched.h. */
#include "blocksched.h"

#include <stdlib.h>
#include <string.h>

int mf_sched_init(mf_sched_t *s, uint32_t nrb, uint32_t ncb, const size_t *len, int workers)
{
  memset(s, 0, sizeof(*s));
  s->nrb = nrb;
  s->ncb = ncb;
  s->workers = workers;
  s->len = len;
  const size_t nb = (size_t)nrb * ncb;
  s->taken = malloc(nb ? nb : 1);
  s->row_owner = malloc((nrb ? nrb : 1) * sizeof(int32_t));
  s->col_owner = malloc((ncb ? ncb : 1) * sizeof(int32_t));
  s->row_held = calloc(nrb ? nrb : 1, sizeof(uint32_t));
  s->col_held = calloc(ncb ? ncb : 1, sizeof(uint32_t));
  if (!s->taken || !s->row_owner || !s->col_owner || !s->row_held || !s->col_held ||
      pthread_mutex_init(&s->mu, NULL) != 0) {
    free(s->taken), free(s->row_owner), free(s->col_owner), free(s->row_held), free(s->col_held);
    memset(s, 0, sizeof(*s));
    return -1;
  }
  for (uint32_t r = 0; r < nrb; r++) s->row_owner[r] = -1;
  for (uint32_t c = 0; c < ncb; c++) s->col_owner[c] = -1;
  mf_sched_epoch(s);
  return 0;
}

void mf_sched_destroy(mf_sched_t *s)
{
  if (!s->taken) return;
  pthread_mutex_destroy(&s->mu);
  free(s->taken), free(s->row_owner), free(s->col_owner), free(s->row_held), free(s->col_held);
  memset(s, 0, sizeof(*s));
}

void mf_sched_epoch(mf_sched_t *s)
{
  const size_t nb = (size_t)s->nrb * s->ncb;
  s->left = 0;
  for (size_t b = 0; b < nb; b++) {
    s->taken[b] = s->len[b] == 0;
    s->left += s->len[b] != 0;
  }
}

long mf_sched_take(mf_sched_t *s, const mf_walk_t *w)
{
  const int32_t me = w->worker;
  long got = MF_SCHED_DONE;
  pthread_mutex_lock(&s->mu);
  if (s->left == 0) goto out;
  got = MF_SCHED_BUSY;
  for (uint32_t i = 0; i < s->ncb; i++) {
    const uint32_t cb = w->cols[w->back ? s->ncb - 1 - i : i];
    if (s->col_held[cb] && s->col_owner[cb] != me) continue;
    for (uint32_t j = 0; j < s->nrb; j++) {
      /* forward: row0, row0 + 1, ..; backward: from row0 - 1 down, where forward ends */
      const uint32_t rb =
          w->back ? (w->row0 + 2 * s->nrb - 1 - j) % s->nrb : (w->row0 + j) % s->nrb;
      const size_t b = (size_t)cb * s->nrb + rb;
      if (s->taken[b] || (s->row_held[rb] && s->row_owner[rb] != me)) continue;
      s->taken[b] = 1;
      s->left--;
      s->row_owner[rb] = s->col_owner[cb] = me;
      s->row_held[rb]++;
      s->col_held[cb]++;
      got = (long)b;
      goto out;
    }
  }
out:
  pthread_mutex_unlock(&s->mu);
  return got;
}

void mf_sched_put(mf_sched_t *s, int worker, uint32_t b)
{
  const uint32_t rb = b % s->nrb, cb = b / s->nrb;
  (void)worker;
  pthread_mutex_lock(&s->mu);
  if (--s->row_held[rb] == 0) s->row_owner[rb] = -1;
  if (--s->col_held[cb] == 0) s->col_owner[cb] = -1;
  pthread_mutex_unlock(&s->mu);
}
