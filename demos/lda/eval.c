/* eval.c — reading the trained LDA model (see lda.h): the log-likelihood, the invariant
 * checks, the top words of each topic and saving. All run on the main thread between
 * sweeps, over the rows this node holds, and combine the nodes' parts with
 * au_allreduce_sum (which gathers, too: each node fills only its own slots of a vector
 * that is zero elsewhere).
 */
#include "model.h"

#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define REDUCE_MAX (1u << 20) /* doubles per allreduce: 8 MiB, well under a frame */

static au_runtime_t *rt_of(lda_t *m)
{
  return au_node_runtime(m->node);
}

/* ---- log-likelihood --------------------------------------------------------------------- */

typedef struct {
  lda_t *m;
  double sum;
  uint64_t negative;
} llh_acc_t;

static int llh_row(void *arg, au_key_t key, const int32_t *row)
{
  (void)key;
  llh_acc_t *a = arg;
  a->sum += lda_llh_counts(row, a->m->p.K, &a->m->lgb, &a->negative);
  return 0;
}

int lda_llh(lda_t *m, double *per_token)
{
  const uint32_t K = m->p.K;
  llh_acc_t acc = {m, 0, 0};
  int32_t *scratch = calloc(K, sizeof(int32_t));
  if (!scratch) return AU_ENOMEM;
  int rc = lda__each_row(m, 0, m->V, llh_row, &acc);
  if (rc == 0 && (rc = lda__read_totals(m, scratch)) == 1) {
    acc.sum += lda_llh_totals(scratch, K, m->p.vbeta, &acc.negative);
    memset(scratch, 0, K * sizeof(int32_t));
    rc = 0;
  }
  double docs = 0;
  for (int i = 0; i < m->nshards && rc == 0; i++) {
    const shard_t *s = &m->shards[i];
    for (uint32_t d = 0; d < s->ndocs; d++)
      docs += lda_llh_doc_entries((const lda_doc_t *)(s->dmem + (size_t)s->doc_block[d] * 64),
                                  m->p.kalpha, &m->lga);
  }
  free(scratch);
  if (rc < 0) return rc;
  double v[2] = {acc.sum, docs};
  if ((rc = au_allreduce_sum(rt_of(m), v, 2)) != 0) return rc;
  *per_token = (v[0] + v[1]) / (double)m->tokens;
  return 0;
}

/* ---- invariants ------------------------------------------------------------------------- */

typedef struct {
  lda_t *m;
  uint64_t first;    /* the chunk's first word */
  const double *cnt; /* the chunk's recount over all nodes: word - first, topic */
  double *colsum;    /* K */
  lda_check_t *out;
} check_acc_t;

static int check_row(void *arg, au_key_t key, const int32_t *row)
{
  check_acc_t *a = arg;
  const uint32_t K = a->m->p.K;
  const double *c = &a->cnt[(key - a->first) * K];
  int64_t sum = 0;
  for (uint32_t k = 0; k < K; k++) {
    if (row[k] < 0) a->out->negative++;
    if ((double)row[k] != c[k]) a->out->recount++;
    sum += row[k];
    a->colsum[k] += row[k];
  }
  if (sum != (int64_t)a->m->word_count[key]) a->out->row_sums++;
  return 0;
}

/* Documents of shard s whose counts differ from a recount of their tokens' topics: the
 * tokens are added up again into a copy of the blocks (emptied), which is then compared
 * entry by entry. -1 if out of memory. */
static int64_t check_docs(const shard_t *s, uint32_t K)
{
  if (s->ndocs == 0) return 0;
  const uint32_t last = s->doc_block[s->ndocs - 1];
  const lda_doc_t *ld = (const lda_doc_t *)(s->dmem + (size_t)last * 64);
  size_t bytes = (size_t)last * 64 + LDA_DOC_BYTES(ld->room);
  uint8_t *copy = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (!copy) return -1;
  memset(copy, 0, bytes);
  for (uint32_t d = 0; d < s->ndocs; d++) {
    const lda_doc_t *doc = (const lda_doc_t *)(s->dmem + (size_t)s->doc_block[d] * 64);
    lda_doc_init((lda_doc_t *)(copy + (size_t)s->doc_block[d] * 64), doc->len, doc->room);
  }
  int64_t bad = 0;
  for (uint32_t j = 0; j < s->tstart[s->nw]; j++) {
    lda_doc_t *doc = (lda_doc_t *)(copy + (size_t)s->tok[j].doc * 64);
    if (s->tok[j].z >= K || doc->n >= doc->room) return free(copy), (int64_t)s->ndocs;
    lda_doc_add(doc, s->tok[j].z);
  }
  for (uint32_t d = 0; d < s->ndocs; d++) {
    const lda_doc_t *a = (const lda_doc_t *)(s->dmem + (size_t)s->doc_block[d] * 64);
    const lda_doc_t *b = (const lda_doc_t *)(copy + (size_t)s->doc_block[d] * 64);
    int differs = a->n != b->n;
    for (uint32_t i = 0; i < b->n && !differs; i++) {
      uint32_t at = lda_doc_find(a, lda_doc_topic(b, i));
      differs = at == a->n || lda_doc_count(a, at) != lda_doc_count(b, i);
    }
    bad += differs;
  }
  free(copy);
  return bad;
}

int lda_check(lda_t *m, lda_check_t *out)
{
  const uint32_t K = m->p.K, chunk = REDUCE_MAX / K;
  memset(out, 0, sizeof(*out));
  double *cnt = malloc((size_t)chunk * K * sizeof(double));
  double *colsum = calloc(K, sizeof(double));
  int32_t *totals = malloc(K * sizeof(int32_t));
  int rc = cnt && colsum && totals ? 0 : AU_ENOMEM;
  /* Recount the assignments of every node, a chunk of words at a time, and compare with
   * the rows held here. (One pass over the tokens per chunk: a testing aid, not fast.) */
  for (uint64_t first = 0; first < m->V && rc == 0; first += chunk) {
    uint64_t n = m->V - first < chunk ? m->V - first : chunk;
    memset(cnt, 0, (size_t)n * K * sizeof(double));
    for (int i = 0; i < m->nshards; i++) {
      const shard_t *s = &m->shards[i];
      for (uint32_t w = 0; w < s->nw; w++) {
        uint64_t g = s->keys[w];
        if (g < first || g >= first + n) continue;
        for (uint32_t j = s->tstart[w]; j < s->tstart[w + 1]; j++)
          cnt[(g - first) * K + s->tok[j].z] += 1;
      }
    }
    if ((rc = au_allreduce_sum(rt_of(m), cnt, (int)(n * K))) != 0) break;
    check_acc_t acc = {m, first, cnt, colsum, out};
    rc = lda__each_row(m, first, first + n, check_row, &acc);
  }
  /* every document's counts against its tokens */
  for (int i = 0; i < m->nshards && rc == 0; i++) {
    int64_t bad = check_docs(&m->shards[i], K);
    if (bad < 0)
      rc = AU_ENOMEM;
    else
      out->docs += (uint64_t)bad;
  }
  /* the totals row against the column sums of all rows */
  if (rc == 0) rc = au_allreduce_sum(rt_of(m), colsum, (int)K);
  if (rc == 0 && (rc = lda__read_totals(m, totals)) == 1) {
    rc = 0;
    for (uint32_t k = 0; k < K; k++) {
      if (totals[k] < 0) out->negative++;
      if ((double)totals[k] != colsum[k]) out->totals++;
      out->tokens += (uint64_t)(int64_t)totals[k];
    }
  }
  free(cnt);
  free(colsum);
  free(totals);
  if (rc < 0) return rc;
  double v[6] = {(double)out->negative, (double)out->row_sums, (double)out->totals,
                 (double)out->recount,  (double)out->docs,     (double)out->tokens};
  if ((rc = au_allreduce_sum(rt_of(m), v, 6)) != 0) return rc;
  *out = (lda_check_t){.negative = (uint64_t)v[0],
                       .row_sums = (uint64_t)v[1],
                       .totals = (uint64_t)v[2],
                       .recount = (uint64_t)v[3],
                       .docs = (uint64_t)v[4],
                       .tokens = (uint64_t)v[5]};
  return 0;
}

int lda_check_ok(const lda_check_t *c, uint64_t tokens)
{
  return c->negative == 0 && c->row_sums == 0 && c->totals == 0 && c->recount == 0 &&
         c->docs == 0 && c->tokens == tokens;
}

/* ---- top words -------------------------------------------------------------------------- */

typedef struct {
  uint32_t n, k0, nk; /* per topic; the topics [k0, k0 + nk) of this round */
  uint32_t *words;    /* nk x n, best first */
  int64_t *counts;
  uint32_t *size;
  uint32_t K;
} top_acc_t;

/* count descending, then word ascending: the same order on every node */
static inline int better(int64_t c, uint32_t w, int64_t c2, uint32_t w2)
{
  return c > c2 || (c == c2 && w < w2);
}

static void top_insert(top_acc_t *a, uint32_t k, uint32_t w, int64_t c)
{
  uint32_t *ws = &a->words[(size_t)k * a->n], *sz = &a->size[k];
  int64_t *cs = &a->counts[(size_t)k * a->n];
  if (*sz == a->n && !better(c, w, cs[a->n - 1], ws[a->n - 1])) return;
  uint32_t i = *sz < a->n ? (*sz)++ : a->n - 1;
  while (i > 0 && better(c, w, cs[i - 1], ws[i - 1])) {
    cs[i] = cs[i - 1];
    ws[i] = ws[i - 1];
    i--;
  }
  cs[i] = c;
  ws[i] = w;
}

static int top_row(void *arg, au_key_t key, const int32_t *row)
{
  top_acc_t *a = arg;
  for (uint32_t k = 0; k < a->nk; k++)
    if (row[a->k0 + k] > 0) top_insert(a, k, (uint32_t)key, row[a->k0 + k]);
  return 0;
}

int lda_top_words(lda_t *m, uint32_t n, uint32_t *words, int64_t *counts, int64_t *totals)
{
  const uint32_t K = m->p.K, nodes = (uint32_t)m->nodes, rank = (uint32_t)m->rank;
  if (n == 0) return AU_EINVAL;
  /* topics per round, so that the gathered candidates fit one reduction */
  uint64_t per = REDUCE_MAX / ((uint64_t)nodes * n * 2);
  uint32_t round = per == 0 ? 1 : per < K ? (uint32_t)per : K;
  top_acc_t a = {.n = n, .K = K};
  a.words = malloc((size_t)round * n * sizeof(uint32_t));
  a.counts = malloc((size_t)round * n * sizeof(int64_t));
  a.size = malloc((size_t)round * sizeof(uint32_t));
  size_t glen = (size_t)nodes * round * n * 2;
  double *g = malloc(glen * sizeof(double));
  double *t = calloc(K, sizeof(double));
  int32_t *row = malloc(K * sizeof(int32_t));
  int rc = a.words && a.counts && a.size && g && t && row ? 0 : AU_ENOMEM;
  for (uint32_t k0 = 0; k0 < K && rc == 0; k0 += round) {
    a.k0 = k0;
    a.nk = K - k0 < round ? K - k0 : round;
    memset(a.size, 0, (size_t)round * sizeof(uint32_t));
    if ((rc = lda__each_row(m, 0, m->V, top_row, &a)) != 0) break;
    /* gather every node's candidates: slot (node, topic, rank) = word + 1, count */
    memset(g, 0, glen * sizeof(double));
    for (uint32_t k = 0; k < a.nk; k++)
      for (uint32_t i = 0; i < a.size[k]; i++) {
        size_t at = (((size_t)rank * round + k) * n + i) * 2;
        g[at] = (double)a.words[(size_t)k * n + i] + 1;
        g[at + 1] = (double)a.counts[(size_t)k * n + i];
      }
    if ((rc = au_allreduce_sum(rt_of(m), g, (int)glen)) != 0) break;
    memset(a.size, 0, (size_t)round * sizeof(uint32_t));
    for (uint32_t r = 0; r < nodes; r++)
      for (uint32_t k = 0; k < a.nk; k++)
        for (uint32_t i = 0; i < n; i++) {
          size_t at = (((size_t)r * round + k) * n + i) * 2;
          if (g[at] > 0) top_insert(&a, k, (uint32_t)(g[at] - 1), (int64_t)g[at + 1]);
        }
    for (uint32_t k = 0; k < a.nk; k++)
      for (uint32_t i = 0; i < n; i++) {
        size_t out = (size_t)(k0 + k) * n + i, in = (size_t)k * n + i;
        words[out] = i < a.size[k] ? a.words[in] : UINT32_MAX;
        counts[out] = i < a.size[k] ? a.counts[in] : 0;
      }
  }
  if (rc == 0 && (rc = lda__read_totals(m, row)) == 1) {
    for (uint32_t k = 0; k < K; k++) t[k] = row[k];
    rc = 0;
  }
  if (rc == 0) rc = au_allreduce_sum(rt_of(m), t, (int)K);
  if (rc == 0)
    for (uint32_t k = 0; k < K; k++) totals[k] = (int64_t)t[k];
  free(a.words);
  free(a.counts);
  free(a.size);
  free(g);
  free(t);
  free(row);
  return rc < 0 ? rc : 0;
}

/* ---- saving ----------------------------------------------------------------------------- */

typedef struct {
  FILE *f;
  const lda_corpus_t *c;
  uint32_t K;
} save_acc_t;

static int save_row(void *arg, au_key_t key, const int32_t *row)
{
  save_acc_t *a = arg;
  char buf[32];
  fprintf(a->f, "%llu %s", (unsigned long long)key,
          lda_corpus_word(a->c, (uint32_t)key, buf, sizeof(buf)));
  for (uint32_t k = 0; k < a->K; k++)
    if (row[k] != 0) fprintf(a->f, " %u:%d", k, row[k]);
  fputc('\n', a->f);
  return 0;
}

/* The files of a save, written under temporary names (NAME.tmp) and renamed once every
 * node has written all of its own: a save that fails anywhere leaves the previous one. */
enum { SAVE_FILES = 5 };
typedef struct save_set {
  int n, totals; /* files written; whether this node wrote totals.txt */
  char tmp[SAVE_FILES][4200], path[SAVE_FILES][4200];
} save_set_t;

static FILE *open_tmp(save_set_t *s, const char *dir, const char *name, const char *suffix,
                      char *err, size_t errlen)
{
  snprintf(s->path[s->n], sizeof(s->path[0]), "%s/%s%s", dir, name, suffix);
  snprintf(s->tmp[s->n], sizeof(s->tmp[0]), "%s/%s%s.tmp", dir, name, suffix);
  FILE *f = fopen(s->tmp[s->n], "w");
  if (!f) snprintf(err, errlen, "%s: %s", s->tmp[s->n], strerror(errno));
  return f;
}

static int close_tmp(save_set_t *s, FILE *f, char *err, size_t errlen)
{
  const int e = cli_close_synced(f);
  if (e) {
    snprintf(err, errlen, "%s: write failed: %s", s->tmp[s->n], strerror(e));
    remove(s->tmp[s->n]);
    return -1;
  }
  s->n++;
  return 0;
}

/* This node's word rows, totals and documents (and on rank 0 the vocabulary), into s. */
static int save_files(lda_t *m, const char *dir, const lda_corpus_t *c, const char *suffix,
                      save_set_t *s, char *err, size_t errlen)
{
  FILE *f = open_tmp(s, dir, "word_topic.txt", suffix, err, errlen);
  if (!f) return -1;
  fprintf(f, "# augur-lda word-topic counts topics=%u alpha=%g beta=%g words=%u node=%d/%d\n",
          m->p.K, m->p.alpha, m->p.beta, m->V, m->rank, m->nodes);
  fprintf(f, "# one line per word row held by this node: id word topic:count ... (nonzero)\n");
  save_acc_t acc = {f, c, m->p.K};
  int rc = lda__each_row(m, 0, m->V, save_row, &acc);
  if (close_tmp(s, f, err, errlen) != 0) return -1;
  if (rc != 0) {
    snprintf(err, errlen, "%s: reading the rows: %s", s->path[s->n - 1], au_strerror(rc));
    return -1;
  }
  int32_t *row = malloc(m->p.K * sizeof(int32_t));
  if (!row || (rc = lda__read_totals(m, row)) < 0) {
    free(row);
    snprintf(err, errlen, "reading the topic totals: %s", au_strerror(row ? rc : AU_ENOMEM));
    return -1;
  }
  if (rc == 1) {
    if (!(f = open_tmp(s, dir, "totals.txt", suffix, err, errlen))) {
      free(row);
      return -1;
    }
    s->totals = 1;
    fprintf(f, "# augur-lda topic totals: topic tokens\n");
    for (uint32_t k = 0; k < m->p.K; k++) fprintf(f, "%u %d\n", k, row[k]);
    if (close_tmp(s, f, err, errlen) != 0) {
      free(row);
      return -1;
    }
  }
  free(row);
  /* this node's documents: their topic counts */
  if (!(f = open_tmp(s, dir, "doc_topic.txt", suffix, err, errlen))) return -1;
  fprintf(f, "# augur-lda document-topic counts topics=%u alpha=%g node=%d/%d\n", m->p.K,
          m->p.alpha, m->rank, m->nodes);
  fprintf(f, "# one line per document of this node: doc tokens topic:count ... (nonzero); "
             "theta_k = (count_k + alpha) / (tokens + topics alpha)\n");
  for (int i = 0; i < m->nshards; i++) {
    const shard_t *sh = &m->shards[i];
    for (uint32_t d = 0; d < sh->ndocs; d++) {
      const lda_doc_t *doc = (const lda_doc_t *)(sh->dmem + (size_t)sh->doc_block[d] * 64);
      fprintf(f, "%llu %u", (unsigned long long)sh->doc_id[d], doc->len);
      for (uint32_t e = 0; e < doc->n; e++)
        fprintf(f, " %u:%.0f", lda_doc_topic(doc, e), (double)lda_doc_count(doc, e));
      fputc('\n', f);
    }
  }
  if (close_tmp(s, f, err, errlen) != 0) return -1;
  if (m->rank != 0) return 0;
  if (!(f = open_tmp(s, dir, "vocab.txt", "", err, errlen))) return -1;
  char buf[32];
  for (uint32_t w = 0; w < m->V; w++) fprintf(f, "%s\n", lda_corpus_word(c, w, buf, sizeof(buf)));
  return close_tmp(s, f, err, errlen);
}

/* Rank 0, before the renames: what an earlier save by another node count left that this
 * one does not write (word_topic.txt.3 of a 4-node save under a 2-node one, or the
 * unsuffixed files under a cluster's), so that the directory holds one model. */
static void remove_stale(const char *dir, int nodes)
{
  static const char *const names[] = {"word_topic.txt", "totals.txt", "doc_topic.txt"};
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    for (int k = 0; k < 3; k++) {
      const size_t len = strlen(names[k]);
      if (strncmp(e->d_name, names[k], len)) continue;
      const char *rest = e->d_name + len;
      char *end;
      long r = *rest == '.' && rest[1] >= '0' && rest[1] <= '9' ? strtol(rest + 1, &end, 10) : -1;
      const int stale = *rest == '\0' ? nodes > 1 : r >= 0 && !*end && (nodes == 1 || r >= nodes);
      char path[4400];
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      if (stale) remove(path);
    }
  if (d) closedir(d);
}

/* Collective: 0 if every node says ok, else -1 (err says why where it was not this one). */
static int all_ok(lda_t *m, int ok, const char *what, char *err, size_t errlen)
{
  double v = ok ? 0 : 1;
  if (au_allreduce_sum(rt_of(m), &v, 1) != 0) {
    if (ok) snprintf(err, errlen, "%s: the nodes could not agree", what);
    return -1;
  }
  if (v > 0 && ok) snprintf(err, errlen, "%s: another node failed", what);
  return v > 0 ? -1 : 0;
}

int lda_save(lda_t *m, const char *dir, const lda_corpus_t *c, char *err, size_t errlen)
{
  char suffix[32] = "";
  if (m->nodes > 1) snprintf(suffix, sizeof(suffix), ".%d", m->rank);
  save_set_t *s = calloc(1, sizeof(*s));
  int ok = s != NULL;
  if (!ok) snprintf(err, errlen, "%s: out of memory", dir);
  if (ok && mkdir(dir, 0777) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "%s: %s", dir, strerror(errno));
    ok = 0;
  }
  ok = ok && save_files(m, dir, c, suffix, s, err, errlen) == 0;
  int rc = all_ok(m, ok, dir, err, errlen);
  if (!rc && m->rank == 0) { /* the old model.txt first: a directory with one is whole */
    char path[4200];
    snprintf(path, sizeof(path), "%s/model.txt", dir);
    if (remove(path) != 0 && errno != ENOENT) {
      snprintf(err, errlen, "%s: %s", path, strerror(errno));
      rc = -1;
    }
    remove_stale(dir, m->nodes);
  }
  rc = all_ok(m, rc == 0, dir, err, errlen);
  if (!rc && !s->totals) { /* the totals row's holder wrote them: another save's go */
    char old[4200];
    snprintf(old, sizeof(old), "%s/totals.txt%s", dir, suffix);
    remove(old);
  }
  for (int i = 0; !rc && i < s->n; i++)
    if (rename(s->tmp[i], s->path[i]) != 0) {
      snprintf(err, errlen, "%s: %s", s->path[i], strerror(errno));
      rc = -1;
    }
  for (int i = 0; s && rc && i < s->n; i++) remove(s->tmp[i]);
  free(s);
  rc = all_ok(m, rc == 0, dir, err, errlen);
  if (rc || m->rank != 0) return rc;
  /* last, once every node's files are in place: the hyperparameters and sizes (augur-lda
     infer reads them, and the files they name) */
  char path[4200], tmp[4300];
  snprintf(path, sizeof(path), "%s/model.txt", dir);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
    return -1;
  }
  fprintf(f,
          "# augur-lda model: word_topic.txt* (counts), totals.txt*, vocab.txt, doc_topic.txt*\n"
          "format=1\ntopics=%u\nalpha=%.9g\nbeta=%.9g\nwords=%u\ntokens=%llu\nnodes=%d\n",
          m->p.K, m->p.alpha, m->p.beta, m->V, (unsigned long long)m->tokens, m->nodes);
  int e = cli_close_synced(f);
  if (!e && rename(tmp, path) != 0) e = errno;
  if (e) {
    snprintf(err, errlen, "%s: %s", path, strerror(e));
    remove(tmp);
    return -1;
  }
  return 0;
}
