/* shard.c — see shard.h. Everything travels through the allreduce: a node's share of a
 * gathered array is its own slot, zero elsewhere, so the sum is every node's values. */
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PACK 6 /* bytes per double: below 2^53, exact through the sum */

/* Every node's n values, rank after rank: *all (malloc'd) and each rank's count in
 * per[rank] (nodes entries). */
static int allgather(au_runtime_t *rt, int rank, int nodes, const double *mine, size_t n,
                     size_t *per, double **all)
{
  double *cnt = calloc((size_t)nodes, sizeof(double));
  if (!cnt) return AU_ENOMEM;
  cnt[rank] = (double)n;
  int rc = au_allreduce_sum(rt, cnt, (size_t)nodes);
  size_t total = 0, at = 0;
  for (int r = 0; r < nodes; r++) {
    per[r] = (size_t)cnt[r];
    if (r < rank) at += per[r];
    total += per[r];
  }
  free(cnt);
  if (rc) return rc;
  double *v = calloc(total ? total : 1, sizeof(double));
  if (!v) return AU_ENOMEM; /* the others then wait in the allreduce: a lost job */
  if (n) memcpy(v + at, mine, n * sizeof(double));
  if ((rc = au_allreduce_sum(rt, v, total)) != 0) {
    free(v);
    return rc;
  }
  *all = v;
  return 0;
}

/* The cluster's vocabulary of a text file: every node's words in rank order (parts are in
 * file order, so this is the order of first appearance in the file), counts summed; the
 * words counted min_count times go into c (vocab, nwords), and map[i] gets the id of
 * this node's word i there (UINT32_MAX: dropped). */
static int text_vocab(au_runtime_t *rt, int rank, int nodes, const lda_text_t *t,
                      uint32_t min_count, uint32_t *map, lda_corpus_t *c)
{
  uint32_t n;
  size_t blen;
  const char *blob = lda_text_words(t, &n, &blen);
  const uint64_t *count = lda_text_counts(t);
  size_t packs = (blen + PACK - 1) / PACK;
  double *mine = calloc(packs + (size_t)n + 1, sizeof(double)), *words = NULL, *counts = NULL;
  size_t *per_w = calloc((size_t)nodes, sizeof(size_t)),
         *per_c = calloc((size_t)nodes, sizeof(size_t));
  lda_text_t *all = lda_text_new();
  uint32_t *gmap = NULL;
  char *bytes = NULL;
  int rc = mine && per_w && per_c && all ? 0 : AU_ENOMEM;
  if (!rc) {
    for (size_t i = 0; i < blen; i++)
      mine[i / PACK] += (double)((uint64_t)(unsigned char)blob[i] << (8 * (i % PACK)));
    rc = allgather(rt, rank, nodes, mine, packs, per_w, &words);
  }
  if (!rc) {
    for (uint32_t i = 0; i < n; i++) mine[i] = (double)count[i];
    rc = allgather(rt, rank, nodes, mine, n, per_c, &counts);
  }
  size_t total_packs = 0, total_words = 0;
  for (int r = 0; r < nodes && !rc; r++) total_packs += per_w[r], total_words += per_c[r];
  if (!rc && !(bytes = malloc(total_packs * PACK + 1))) rc = AU_ENOMEM;
  uint64_t *cnt = NULL;
  if (!rc && !(cnt = malloc((total_words + 1) * sizeof(uint64_t)))) rc = AU_ENOMEM;
  /* merge rank by rank; a rank's bytes are its words, NUL-terminated, zero padding after */
  for (size_t p = 0, w = 0, r = 0; !rc && r < (size_t)nodes; r++) {
    for (size_t i = 0; i < per_w[r] * PACK; i++) {
      uint64_t v = (uint64_t)words[p + i / PACK];
      bytes[i] = (char)(v >> (8 * (i % PACK)));
    }
    for (size_t i = 0; i < per_c[r]; i++) cnt[i] = (uint64_t)counts[w + i];
    if (lda_text_merge(all, bytes, (uint32_t)per_c[r], cnt) != 0) rc = AU_ENOMEM;
    p += per_w[r], w += per_c[r];
  }
  uint32_t an = 0;
  size_t alen;
  if (!rc) {
    lda_text_words(all, &an, &alen);
    if (!(gmap = malloc(((size_t)an + 1) * sizeof(uint32_t)))) rc = AU_ENOMEM;
  }
  if (!rc && lda_text_vocab(all, min_count, gmap, c) != 0) rc = AU_ENOMEM;
  for (uint32_t i = 0; !rc && i < n; i++) {
    size_t len = strlen(blob);
    uint32_t g = lda_text_find(all, blob, len);
    map[i] = g == UINT32_MAX ? UINT32_MAX : gmap[g];
    blob += len + 1;
  }
  free(mine), free(words), free(counts), free(per_w), free(per_c), free(bytes), free(cnt);
  free(gmap);
  lda_text_free(all);
  return rc;
}

int lda_shard_load(au_node_t *node, const char *path, int uci, uint32_t min_count, lda_corpus_t *c,
                   lda_shard_t *out, char *err, size_t errlen)
{
  au_runtime_t *rt = au_node_runtime(node);
  const int rank = au_node_rank(node), nodes = au_node_nodes(node);
  memset(c, 0, sizeof(*c));
  memset(out, 0, sizeof(*out));
  err[0] = '\0';
  lda_uci_part_t up = {0};
  lda_text_t *t = NULL;
  int bad = uci ? lda_load_uci_part(path, rank, nodes, &up, err, errlen)
                : lda_text_read(path, rank, nodes, &t, err, errlen);
  /* what every node must know: who failed; for UCI the documents' ranges, the entries */
  const size_t nv = 4 + 2 * (size_t)nodes;
  double *v = calloc(nv, sizeof(double));
  int rc = v ? 0 : AU_ENOMEM;
  if (!rc) {
    v[0] = bad ? 1 : 0;
    if (uci && !bad) {
      v[1] = up.sorted ? 0 : 1;
      v[2] = (double)up.entries;
      v[3] = (double)up.c.ntokens;
      v[4 + 2 * rank] = up.c.ndocs ? (double)up.first_doc + 1 : 0;
      v[5 + 2 * rank] = up.c.ndocs ? (double)(up.first_doc + up.c.ndocs) : 0;
    }
    rc = au_allreduce_sum(rt, v, nv);
  }
  if (!rc && v[0] > 0 && !bad) {
    snprintf(err, errlen, "another node could not read its part of %s", path);
    bad = LDA_EIO;
  }
  if (!rc && !bad && uci) {
    int sorted = v[1] == 0;
    for (int r = 0, last = -1; r < nodes && sorted; r++) { /* ranges rise rank by rank */
      if (v[4 + 2 * r] == 0) continue;
      if (last >= 0 && v[4 + 2 * r] <= v[5 + 2 * last]) sorted = 0;
      last = r;
    }
    if (!sorted) {
      out->whole = 1;
    } else if ((uint64_t)v[2] != up.nnz) {
      snprintf(err, errlen, "%s: expected %llu entries (NNZ, line 3), got %llu in all", path,
               (unsigned long long)up.nnz, (unsigned long long)v[2]);
      bad = LDA_EPARSE;
    } else {
      *c = up.c;
      up.c = (lda_corpus_t){0};
      out->first_doc = up.first_doc;
      out->docs = up.docs;
      out->tokens = (uint64_t)v[3];
    }
  }
  if (!rc && !bad && !uci) {
    uint32_t n;
    size_t blen;
    lda_text_words(t, &n, &blen);
    uint32_t *map = malloc(((size_t)n + 1) * sizeof(uint32_t));
    rc = map ? text_vocab(rt, rank, nodes, t, min_count, map, c) : AU_ENOMEM;
    if (!rc && lda_text_docs(t, map, c) != 0) rc = AU_ENOMEM;
    free(map);
    /* every node's documents (its lines) and tokens; its first document's id */
    double *tot = calloc((size_t)nodes + 1, sizeof(double));
    if (!rc && !tot) rc = AU_ENOMEM;
    if (!rc) {
      tot[rank] = (double)c->ndocs, tot[nodes] = (double)c->ntokens;
      rc = au_allreduce_sum(rt, tot, (size_t)nodes + 1);
    }
    for (int r = 0; !rc && r < nodes; r++) {
      if (r < rank) out->first_doc += (uint64_t)tot[r];
      out->docs += (uint64_t)tot[r];
    }
    if (!rc) out->tokens = (uint64_t)tot[nodes];
    free(tot);
  }
  if (rc && !bad) {
    snprintf(err, errlen, "reading %s across the cluster: %s", path, au_strerror(rc));
    bad = rc == AU_ENOMEM ? LDA_ENOMEM : LDA_EIO;
  }
  free(v);
  lda_corpus_free(&up.c);
  lda_text_free(t);
  if (bad) lda_corpus_free(c);
  return bad;
}
