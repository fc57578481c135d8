/* ckpt.c — augur-lda's checkpoints (lda.h; docs/lda.md, "Checkpoints"): the count tables
 * through au_checkpoint, and each node's topic assignments as (document id, word, topic)
 * per token in DIR/ckpt-S/docs-RANK.bin, then its samplers' random states, written before
 * the manifest and LATEST. A resume restores the tables, gives every token of this node's
 * documents its topic (a document holds a word's tokens in any order: the topics of its
 * (document, word) pairs are what counts) and recounts the documents' topics from them,
 * on any node count; on the same node and sampler count each sampler goes on with its
 * random stream where it was, elsewhere new streams are drawn. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model.h"

#define DOCS_MAGIC      "AUGURLD2" /* 2: the samplers' random states after the tokens */
#define CKPT_FULL_EVERY 10
#define FNV_INIT        0xcbf29ce484222325ULL

typedef struct __attribute__((packed)) rec {
  uint64_t doc;
  uint32_t word;
  uint16_t z;
} rec_t;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static lda_doc_t *doc_of(const shard_t *s, uint32_t block)
{
  return (lda_doc_t *)(s->dmem + (size_t)block * 64);
}

/* The document of a block (blocks rise with the document). */
static uint32_t doc_index(const shard_t *s, uint32_t block)
{
  uint32_t lo = 0, hi = s->ndocs - 1;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if (s->doc_block[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

int lda_checkpoint(lda_t *m, const char *dir, int sweeps, char *err, size_t errlen)
{
  char sub[4096], path[4200], tmp[4300];
  snprintf(sub, sizeof(sub), "%s/ckpt-%d", dir, sweeps);
  snprintf(path, sizeof(path), "%s/docs-%d.bin", sub, m->rank);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  mkdir(dir, 0777), mkdir(sub, 0777);
  FILE *f = fopen(tmp, "wb");
  int ok = f != NULL;
  if (ok) {
    uint64_t n = 0, h = FNV_INIT;
    for (int i = 0; i < m->nshards; i++) n += m->shards[i].tstart[m->shards[i].nw];
    fwrite(DOCS_MAGIC, 1, 8, f), fwrite(&n, 8, 1, f);
    for (int i = 0; i < m->nshards; i++) {
      const shard_t *s = &m->shards[i];
      for (uint32_t j = 0; j < s->nw; j++)
        for (uint32_t o = s->tstart[j]; o < s->tstart[j + 1]; o++) {
          rec_t r = {s->doc_id[doc_index(s, s->tok[o].doc)], (uint32_t)s->keys[j], s->tok[o].z};
          fwrite(&r, sizeof(r), 1, f);
          h = fnv(h, &r, sizeof(r));
        }
    }
    const uint32_t ns = (uint32_t)m->nshards;
    fwrite(&ns, 4, 1, f);
    h = fnv(h, &ns, 4);
    for (int i = 0; i < m->nshards; i++) {
      fwrite(m->shards[i].rng.s, 8, 4, f);
      h = fnv(h, m->shards[i].rng.s, 32);
    }
    fwrite(&h, 8, 1, f);
    ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) remove(tmp);
  }
  if (!ok) snprintf(err, errlen, "checkpoint: %s: %s", path, strerror(errno));
  double bad = ok ? 0 : 1; /* no LATEST may name a checkpoint without every node's topics */
  int rc = au_allreduce_sum(au_node_runtime(m->node), &bad, 1);
  if (rc) return rc;
  if (bad > 0) {
    if (ok) snprintf(err, errlen, "checkpoint: another node could not write its topics");
    return AU_EIO;
  }
  /* incremental, with a full one every CKPT_FULL_EVERY (a chain of at most that many) */
  const int full = m->checkpoints++ % CKPT_FULL_EVERY == 0;
  return au_checkpoint(m->node, dir, (uint64_t)sweeps, full, err, errlen);
}

/* This node's documents by id: sorted (id, shard, document). */
typedef struct mine {
  uint64_t id;
  uint32_t shard, d;
} mine_t;

static int by_id(const void *a, const void *b)
{
  const mine_t *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

static const mine_t *find_doc(const mine_t *v, size_t n, uint64_t id)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && v[lo].id == id ? &v[lo] : NULL;
}

/* The next token of word key in document block `block` without a topic yet, or -1. */
static long free_token(const shard_t *s, const uint8_t *taken, au_key_t key, uint32_t block)
{
  uint32_t lo = 0, hi = s->nw;
  while (lo < hi) { /* the word */
    uint32_t mid = lo + (hi - lo) / 2;
    if (s->keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == s->nw || s->keys[lo] != key) return -1;
  uint32_t a = s->tstart[lo], b = s->tstart[lo + 1];
  while (a < b) { /* its first token in the block: tokens of a word rise with the document */
    uint32_t mid = a + (b - a) / 2;
    if (s->tok[mid].doc < block)
      a = mid + 1;
    else
      b = mid;
  }
  for (uint32_t o = a; o < s->tstart[lo + 1] && s->tok[o].doc == block; o++)
    if (!taken[o]) return (long)o;
  return -1;
}

int lda_resume(lda_t *m, const char *dir, int *sweeps, char *err, size_t errlen)
{
  uint64_t clock = 0;
  char rerr[512];
  int rc = au_restore(m->node, dir, &clock, rerr, sizeof(rerr)); /* collective */
  if (rc) snprintf(err, errlen, "%s", rerr);
  char sub[4096], path[4300];
  FILE *f;
  int writers = 0; /* au_restore has read this checkpoint: it is there */
  if (!rc && au_checkpoint_find(dir, sub, sizeof(sub), &writers) != 0) {
    snprintf(err, errlen, "resume: %s: no checkpoint", dir);
    rc = AU_EIO;
  }
  /* this node's documents, and a mark per token */
  size_t nmine = 0, ntok = 0;
  for (int i = 0; i < m->nshards; i++) nmine += m->shards[i].ndocs;
  mine_t *mine = malloc((nmine + 1) * sizeof(mine_t));
  uint8_t **taken = calloc((size_t)m->nshards + 1, sizeof(uint8_t *));
  if (!rc && (!mine || !taken)) rc = AU_ENOMEM;
  for (int i = 0, at = 0; !rc && i < m->nshards; i++) {
    const shard_t *s = &m->shards[i];
    for (uint32_t d = 0; d < s->ndocs; d++) mine[at++] = (mine_t){s->doc_id[d], (uint32_t)i, d};
    ntok += s->tstart[s->nw];
    if (!(taken[i] = calloc((size_t)s->tstart[s->nw] + 1, 1))) rc = AU_ENOMEM;
  }
  if (!rc) qsort(mine, nmine, sizeof(mine_t), by_id);
  size_t given = 0;
  uint64_t records = 0; /* in all the writers' files (every node reads them all) */
  uint64_t *streams = calloc(4 * (size_t)m->nshards + 1, sizeof(uint64_t));
  int have_streams = 0;
  if (!rc && !streams) rc = AU_ENOMEM;
  for (int r = 0; !rc && r < writers; r++) {
    snprintf(path, sizeof(path), "%s/docs-%d.bin", sub, r);
    if (!(f = fopen(path, "rb"))) {
      snprintf(err, errlen, "resume: %s: %s", path, strerror(errno));
      rc = AU_EIO;
      break;
    }
    char magic[8] = {0};
    uint64_t n = 0, h = FNV_INIT, stored = 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, DOCS_MAGIC, 8) || fread(&n, 8, 1, f) != 1)
      rc = AU_EIO;
    if (rc && !memcmp(magic, "AUGURLD1", 8)) { /* (2026-12-01's, without the states) */
      snprintf(err, errlen,
               "resume: %s: format 1, from an earlier augur-lda; this one reads format 2 "
               "(docs/lda.md): train on from a new checkpoint",
               path);
      rc = AU_EINVAL; /* (exit 2: the input, not the machine) */
      fclose(f);
      break;
    }
    rec_t rec;
    for (uint64_t i = 0; !rc && i < n; i++) {
      if (fread(&rec, sizeof(rec), 1, f) != 1 || rec.z >= m->p.K) {
        rc = AU_EIO;
        break;
      }
      h = fnv(h, &rec, sizeof(rec));
      records++;
      const mine_t *d = find_doc(mine, nmine, rec.doc);
      if (!d) continue; /* another node's document */
      shard_t *s = &m->shards[d->shard];
      long o = free_token(s, taken[d->shard], rec.word, s->doc_block[d->d]);
      if (o < 0) {
        rc = AU_EINVAL;
        snprintf(err, errlen,
                 "resume: %s: document %llu has more tokens of word %u than here (another "
                 "corpus?)",
                 path, (unsigned long long)rec.doc, rec.word);
        break;
      }
      s->tok[o].z = rec.z;
      taken[d->shard][o] = 1;
      given++;
    }
    /* the writer's samplers' random states: ours if it was this node of as many */
    uint32_t ns = 0;
    uint64_t st[4];
    if (!rc && (fread(&ns, 4, 1, f) != 1 || ns > (1u << 20))) rc = AU_EIO;
    if (!rc) h = fnv(h, &ns, 4);
    const int same = writers == m->nodes && r == m->rank && ns == (uint32_t)m->nshards;
    for (uint32_t i = 0; !rc && i < ns; i++) {
      if (fread(st, 8, 4, f) != 4) {
        rc = AU_EIO;
        break;
      }
      h = fnv(h, st, 32);
      if (same) memcpy(streams + 4 * (size_t)i, st, 32);
    }
    if (!rc && same) have_streams = 1;
    if (!rc && (fread(&stored, 8, 1, f) != 1 || stored != h || fgetc(f) != EOF)) rc = AU_EIO;
    if (rc == AU_EIO) snprintf(err, errlen, "resume: %s: malformed", path);
    fclose(f);
  }
  if (!rc && given != ntok) {
    snprintf(err, errlen,
             "resume: %s: %zu of this node's %zu tokens have no topic there "
             "(another corpus?)",
             sub, ntok - given, ntok);
    rc = AU_EINVAL;
  }
  /* the documents' topic counts, from the tokens' topics */
  for (int i = 0; !rc && i < m->nshards; i++) {
    shard_t *s = &m->shards[i];
    for (uint32_t d = 0; d < s->ndocs; d++) {
      lda_doc_t *doc = doc_of(s, s->doc_block[d]);
      memset(doc->g, 0, (size_t)doc->room / 8 * sizeof(lda_group_t)); /* entries, padding */
      lda_doc_init(doc, doc->len, doc->room);
    }
    for (uint32_t o = 0; o < s->tstart[s->nw]; o++)
      lda_doc_add(doc_of(s, s->tok[o].doc), s->tok[o].z);
  }
  for (int i = 0; taken && i < m->nshards; i++) free(taken[i]);
  free(taken);
  free(mine);
  /* every node the same answer; and every token of the checkpoint taken by some node: one
     of a document no node has (a corpus with fewer documents) is another corpus too */
  double v[2] = {rc ? 1 : 0, (double)given};
  int ar = au_allreduce_sum(au_node_runtime(m->node), v, 2);
  if (!rc && ar) rc = ar;
  if (!rc && v[0] > 0) {
    snprintf(err, errlen, "resume: another node could not take its topics from %s", dir);
    rc = AU_EIO;
  }
  if (!rc && v[1] != (double)records) {
    snprintf(err, errlen,
             "resume: %s: %.0f of its %llu tokens belong to no document here (another corpus?)",
             dir, (double)records - v[1], (unsigned long long)records);
    rc = AU_EINVAL;
  }
  if (!rc) *sweeps = (int)clock;
  /* the samplers go on with their streams where the checkpoint left them; on another
   * node or sampler count, with new ones, elsewhere than the first run's (a resumed job
   * that drew the same numbers again would repeat its first sweeps' draws) */
  for (int i = 0; !rc && i < m->nshards; i++)
    if (have_streams)
      memcpy(m->shards[i].rng.s, streams + 4 * (size_t)i, 32);
    else
      lda_rng_seed(&m->shards[i].rng, m->o.seed ^ (clock * 0x9e3779b97f4a7c15ULL),
                   0x100000u + ((uint64_t)m->rank << 16) + (uint64_t)i);
  free(streams);
  return rc;
}
