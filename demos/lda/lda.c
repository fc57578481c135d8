/* lda.c — LDA training on augur (see lda.h): dealing documents to workers, the worker
 * steps that assign and sample topics, and the collective sweeps.
 *
 * The invariant (model.h): the count tables equal the counts of the workers' topic
 * assignments between runs. A step changes topics only after its views are acquired
 * (an AU_WAIT re-runs it from the start, so nothing before may be irreversible), logs
 * each change, and applies all of them as exact -1/+1 deltas before it returns.
 */
#include "cli.h"
#include "model.h"
#include "shard.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* On a cluster a step's rows from one node travel in one message: keep it well under the
 * transport's 64 MiB frame limit. */
#define STEP_ROW_BYTES (16u << 20)

/* Words per parameter actor of the word-topic table: as many consecutive words as fill
 * about this many bytes. A step walks a run of consecutive words, so an actor's words are
 * used together, and what the placement does per actor (intents, claims, moves, replicas)
 * is paid per 128 KiB instead of per row: with the table's default of one 4 KB row per
 * actor at K = 1000, 2 nodes, 50,000 words, a sweep took 1.1-1.7 s adaptive (classic
 * 0.6-0.74), with 32 words 0.72-0.79 (docs/lda.md). */
#define WORD_ACTOR_BYTES (128u << 10)

/* The word table's group: a power of two, at most the vocabulary. */
static uint32_t word_group(uint32_t topics, uint64_t words)
{
  uint32_t g = 1;
  while ((uint64_t)g * 2 * topics * sizeof(int32_t) <= WORD_ACTOR_BYTES && (uint64_t)g * 2 <= words)
    g *= 2;
  return g;
}

/* Rows are prefetched this many words ahead of the word being sampled, documents this
 * many tokens ahead (at most PREFETCH_DOC_LINES cache lines of each). */
#define PREFETCH_WORDS     4
#define PREFETCH_TOKENS    8
#define PREFETCH_DOC_LINES 4

void lda_opts_default(lda_opts_t *o)
{
  *o = (lda_opts_t){.topics = 20,
                    .alpha = 0.1,
                    .beta = 0.01,
                    .workers = 0,
                    .batch = 65536,
                    .lookahead = 4,
                    .mh_steps = 1,
                    .seed = 1,
                    .place = AU_PLACE_ADAPTIVE};
}

/* ---- steps ------------------------------------------------------------------------------ */

static inline lda_doc_t *doc_at(const shard_t *s, uint32_t block)
{
  return (lda_doc_t *)(s->dmem + (size_t)block * 64);
}

/* Applies a word's pending change (wdelta at the topics of its n moves) through its view
 * row, or by au_worker_push without a view; leaves wdelta zero. A row held here takes the
 * moves' counts in place, with the table's own arithmetic (relaxed atomic adds, as its
 * kernel; api/augur.h, au_view_row_local): a few topics change, and the kernel's pass over
 * the K-wide delta was 6% of the cycles on 4 nodes at K = 1000. */
static int apply_word(au_worker_t *w, shard_t *s, const au_view_t *wv, uint32_t i, au_key_t key,
                      uint32_t n)
{
  int32_t *d = s->wdelta, any = 0;
  int rc = 0;
  if (wv && au_view_row_local(wv, i)) {
    _Atomic int32_t *row = au_view_row(wv, i);
    for (uint32_t j = 0; j < n; j++) {
      const uint32_t from = s->mv[j].from, to = s->mv[j].to;
      if (d[from]) atomic_fetch_add_explicit(&row[from], d[from], memory_order_relaxed);
      d[from] = 0;
      if (d[to]) atomic_fetch_add_explicit(&row[to], d[to], memory_order_relaxed);
      d[to] = 0;
    }
    return 0;
  }
  for (uint32_t j = 0; j < n; j++) any |= d[s->mv[j].from] | d[s->mv[j].to];
  if (any) {
    if (wv)
      au_view_update(wv, i, d);
    else
      rc = au_worker_push(w, s->m->words, &key, 1, d);
  }
  for (uint32_t j = 0; j < n; j++) d[s->mv[j].from] = d[s->mv[j].to] = 0;
  return rc;
}

/* Applies the step's change of the totals not yet applied; leaves tdelta zero. */
static int apply_totals(au_worker_t *w, shard_t *s, const au_view_t *tv)
{
  const uint32_t K = s->m->p.K;
  int32_t any = 0;
  int rc = 0;
  for (uint32_t k = 0; k < K; k++) any |= s->tdelta[k];
  if (any) {
    au_key_t zero = 0;
    if (tv)
      au_view_update(tv, 0, s->tdelta);
    else
      rc = au_worker_push(w, s->m->totals, &zero, 1, s->tdelta);
  }
  memset(s->tdelta, 0, K * sizeof(int32_t));
  return rc;
}

/* The words of the step-th step of a sweep: keys[k0 .. k0 + *kn), k0 returned. */
static uint32_t step_words(const shard_t *s, uint32_t step, uint32_t *kn)
{
  uint32_t j = (s->first + step) % s->nsteps;
  *kn = s->step_kstart[j + 1] - s->step_kstart[j];
  return s->step_kstart[j];
}

/* The first run: uniformly random topics, their counts pushed to the tables. */
static int init_step(au_worker_t *w, shard_t *s)
{
  const uint32_t K = s->m->p.K;
  uint32_t kn, k0 = step_words(s, s->pos, &kn);
  int rc = 0;
  for (uint32_t i = k0; i < k0 + kn && rc == 0; i++) {
    uint32_t n = 0;
    for (uint32_t o = s->tstart[i]; o < s->tstart[i + 1]; o++) {
      uint32_t t = lda_rng_below(&s->rng, K);
      s->tok[o].z = (uint16_t)t;
      lda_doc_add(doc_at(s, s->tok[o].doc), t);
      s->wdelta[t]++;
      s->tdelta[t]++;
      s->mv[n++] = (lda_move_t){(uint16_t)t, (uint16_t)t};
    }
    rc = apply_word(w, s, NULL, i - k0, s->keys[i], n);
  }
  if (rc == 0) rc = apply_totals(w, s, NULL);
  if (rc != 0) return rc;
  s->pos++;
  return AU_CONTINUE;
}

/* The word's factor of topic k now: its row plus this worker's pending change. */
static inline float word_factor(const int32_t *row, const int32_t *wdelta, const float *inv,
                                float beta, uint32_t k)
{
  return lda_base(lda_count(row, k) + wdelta[k], beta, inv[k]);
}

#ifdef LDA_CHECK_FACTORS
/* A testing aid (test_lda_checked): after every token, the word's factors f and its
 * table's dense weights wq against values computed afresh. Meaningful with one worker,
 * whose row nobody else changes while it samples. */
atomic_ulong lda_factor_checks, lda_factor_mismatches; /* every worker adds to them */

static void check_factors(const shard_t *s, const int32_t *row, float beta)
{
  unsigned long bad = 0;
  for (uint32_t k = 0; k < s->m->p.K; k++) {
    float fresh = word_factor(row, s->wdelta, s->inv, beta, k);
    bad += fabsf(s->f[k] - fresh) > 1e-6f * fabsf(fresh);
    bad += s->wq[k] != (float)lda_alias_weight(&s->word, k);
  }
  atomic_fetch_add_explicit(&lda_factor_mismatches, bad, memory_order_relaxed);
  atomic_fetch_add_explicit(&lda_factor_checks, 1, memory_order_relaxed);
}
#endif

static inline void set_inv(shard_t *s, uint32_t k)
{
  s->inv[k] = 1.0f / ((float)(s->nt[k] > 0 ? s->nt[k] : 0) + s->vbeta);
}

/* The totals as of now (everything applied to the view's row so far), and the smoothing
 * bucket from them. 0 or AU_ENOMEM. */
static int read_totals(shard_t *s, const au_view_t *tv)
{
  const lda_t *m = s->m;
  const int32_t *nt = au_view_row(tv, 0);
  const float beta = (float)m->p.beta;
  for (uint32_t k = 0; k < m->p.K; k++) {
    s->nt[k] = lda_count(nt, k);
    set_inv(s, k);
    s->smooth_inv[k] = s->inv[k];
    s->f[k] = beta * s->inv[k]; /* between words: every count 0 (sample_words) */
  }
  return lda_alias_build_smooth(&s->smooth, s->inv, m->p.alpha, m->p.beta, m->p.K, &s->build) == 0
             ? 0
             : AU_ENOMEM;
}

/* Samples the tokens of the words keys[k0 .. k0 + kn) word by word (wv: their rows);
 * applies each word's change when its tokens are done. 0 or AU_ENOMEM (a table could not
 * be built: the counts are still exact). */
static int sample_words(au_worker_t *w, shard_t *s, uint32_t k0, uint32_t kn, const au_view_t *wv)
{
  lda_t *m = s->m;
  const uint32_t K = m->p.K;
  const lda_draw_ctx_t ctx = {m->p, &s->smooth, s->smooth_inv, s->w, s->block, m->o.mh_steps};
  const float alpha = (float)m->p.alpha, beta = (float)m->p.beta;
  int32_t *wdelta = s->wdelta, *nt = s->nt;
  float *inv = s->inv, *f = s->f, *wq = s->wq;
  lda_alias_t *a = &s->word;
  const lda_tok_t *stop = &s->tok[s->tstart[k0 + kn]]; /* the step's tokens end */
  uint64_t moved = 0;
  int rc = 0;
  for (uint32_t i = 0; i < kn && rc == 0; i++) {
    if (i + PREFETCH_WORDS < kn) {
      /* a coming word's row: its tokens will read it all over (the document bucket visits
       * every topic of their documents) */
      const char *next = au_view_row(wv, i + PREFETCH_WORDS);
      for (size_t at = 0; at < (size_t)K * sizeof(int32_t); at += 64)
        __builtin_prefetch(next + at, 0, 2);
    }
    const int32_t *row = au_view_row(wv, i);
    lda_tok_t *tok = &s->tok[s->tstart[k0 + i]], *end = &s->tok[s->tstart[k0 + i + 1]];
    /* The word's factor of every topic, kept current below as this worker's moves change
     * the word's counts (wdelta is zero here; inv stays as the word finds it, see after
     * the tokens), and its table, fresh: built now and again after K draws from it
     * (LightLDA's rule: an O(K) build amortized over as many draws). Between words f is
     * beta inv and wq 0 at every topic, the values of a count of 0: the word's first
     * build writes its positive counts' only, and they are put back after its tokens
     * (on 4 nodes a node visits every word for a quarter of its tokens, and two O(K)
     * passes a visit cost as much as the draws). */
    if (lda_word_build_sparse(a, f, wq, row, inv, alpha, beta, K, &s->build) != 0) rc = AU_ENOMEM;
    uint32_t n = 0;
    int rebuilt = 0;
    for (; tok < end && rc == 0; tok++) {
      if (tok + PREFETCH_TOKENS < stop) { /* a coming token's document, maybe a next word's */
        const char *next = (const char *)doc_at(s, tok[PREFETCH_TOKENS].doc);
        for (uint32_t l = 0; l < tok[PREFETCH_TOKENS].lines && l < PREFETCH_DOC_LINES; l++)
          __builtin_prefetch(next + 64 * l);
      }
      if (a->draws >= K) {
        rebuilt = 1;
        if (lda_word_build(a, NULL, wq, row, wdelta, inv, alpha, beta, K, &s->build) != 0)
          rc = AU_ENOMEM;
      }
      const uint32_t z0 = tok->z;
      lda_doc_t *doc = doc_at(s, tok->doc);
      /* the token out of the word's and totals' counts (the sampler takes it out of its
       * document's), a new topic, the counts of the new topic */
      wdelta[z0]--;
      const float f0 = f[z0];
      nt[z0]--;
      f[z0] = word_factor(row, wdelta, inv, beta, z0);
      uint32_t at0, at;
      const uint32_t t = lda_sample(&ctx, f, doc, a, wq, z0, &at0, &at, &s->rng);
      if (t == z0) { /* nothing changed */
        wdelta[z0]++;
        nt[z0]++;
        f[z0] = f0;
#ifdef LDA_CHECK_FACTORS
        check_factors(s, row, beta);
#endif
        continue;
      }
      /* z0's entry one less (the last entry fills it if it empties), t's one more */
      const uint32_t last = doc->n - 1;
      const int gone = lda_doc_count(doc, at0) == 1.0f;
      lda_doc_remove_at(doc, at0);
      at = at == last + 1 ? doc->n : gone && at == last ? at0 : at;
      lda_doc_add_at(doc, t, at);
      wdelta[t]++;
      nt[t]++;
      f[t] = word_factor(row, wdelta, inv, beta, t);
      tok->z = (uint16_t)t;
      s->tdelta[z0]--;
      s->tdelta[t]++;
      s->mv[n++] = (lda_move_t){(uint16_t)z0, (uint16_t)t};
#ifdef LDA_CHECK_FACTORS
      check_factors(s, row, beta);
#endif
    }
    moved += n;
    /* back to the values of a count of 0 where the word had others: its table's topics
     * and its moves' (below); after a rebuild (an O(K) pass already, and the row may have
     * lost a topic of the first build to another worker) every topic */
    for (uint32_t j = 0, all = rebuilt ? K : a->n; j < all; j++) {
      const uint32_t k = rebuilt ? j : a->key[j];
      f[k] = beta * inv[k];
      wq[k] = 0;
    }
    int r2 = apply_word(w, s, wv, i, s->keys[k0 + i], n);
    if (rc == 0) rc = r2;
    /* The totals' factors of the topics the word's tokens left or joined, for the next
     * words: within a word they stay as the word found them (the worker's own moves
     * change n_k by a few in thousands, less than the other workers' moves it sees only
     * at its next step), which keeps two divisions per token off the sampler's path. */
    for (uint32_t j = 0; j < n; j++) {
      const uint32_t from = s->mv[j].from, to = s->mv[j].to;
      set_inv(s, from);
      set_inv(s, to);
      f[from] = beta * inv[from];
      f[to] = beta * inv[to];
    }
  }
  s->moved += moved;
  return rc;
}

static int sample_step(au_worker_t *w, shard_t *s)
{
  lda_t *m = s->m;
  uint32_t kn, k0 = step_words(s, s->pos, &kn);
  const au_key_t *keys = &s->keys[k0], zero = 0;
  au_clock_t now = au_worker_clock(w);

  /* Announce the words of the step `lookahead` steps ahead (wrapping into the next
   * sweep), and the totals. A re-run after AU_WAIT repeats this; intents are idempotent. */
  if (m->o.lookahead > 0) {
    uint32_t an,
        a0 = step_words(s, (uint32_t)((s->pos + (uint64_t)m->o.lookahead) % s->nsteps), &an);
    au_clock_t at = now + m->o.lookahead;
    int rc = au_worker_intent(w, m->words, &s->keys[a0], an, at, at + 1);
    if (rc == 0) rc = au_worker_intent(w, m->totals, &zero, 1, at, at + 1);
    if (rc != 0) return rc;
  }

  /* Both acquires even when the first must wait, so that on a cluster their requests
   * travel in one round trip. */
  au_view_t wv, tv;
  int rw = au_view_acquire(w, m->words, keys, kn, &wv);
  int rt = au_view_acquire(w, m->totals, &zero, 1, &tv);
  if (rw != 0 || rt != 0) {
    if (rw == 0) au_view_release(w, &wv);
    if (rt == 0) au_view_release(w, &tv);
    if ((rw == 0 || rw == AU_EAGAIN) && (rt == 0 || rt == AU_EAGAIN)) return AU_WAIT;
    return rw < 0 && rw != AU_EAGAIN ? rw : rt;
  }

  /* From here on the step completes: the totals as of now, the smoothing bucket, then
   * the words, then the totals' change. */
  int rc = read_totals(s, &tv);
  if (rc == 0) rc = sample_words(w, s, k0, kn, &wv);
  int r2 = apply_totals(w, s, &tv);
  au_view_release(w, &wv);
  au_view_release(w, &tv);
  if (rc == 0) rc = r2;
  if (rc != 0) return rc;
  s->tokens += s->tstart[k0 + kn] - s->tstart[k0];
  s->pos++;
  au_worker_advance(w);
  return AU_CONTINUE;
}

static int step(au_worker_t *w, void *arg)
{
  shard_t *s = arg;
  if (s->m->o.bounded && s->based != s->m->clock_base) {
    /* every worker starts the sweep at the same clock, whatever its steps last time */
    au_worker_advance_to(w, s->m->clock_base);
    s->based = s->m->clock_base;
  }
  if (s->pos >= s->nsteps) {
    s->pos = 0;
    return AU_PAUSE; /* end of the sweep; the next au_node_run starts the next */
  }
  return s->init ? init_step(w, s) : sample_step(w, s);
}

/* ---- building the model ----------------------------------------------------------------- */

static void shard_free(shard_t *s)
{
  free(s->dmem);
  free(s->doc_block);
  free(s->doc_id);
  free(s->keys);
  free(s->tstart);
  free(s->step_kstart);
  free(s->tok);
  free(s->nt);
  free(s->inv);
  free(s->smooth_inv);
  free(s->w);
  free(s->block);
  free(s->f);
  free(s->wq);
  free(s->tdelta);
  free(s->wdelta);
  lda_alias_free(&s->word);
  lda_alias_free(&s->smooth);
  free(s->mv);
  lda_build_scratch_free(&s->build);
}

/* On a cluster the vocabulary is cut into slices that every node shares, LightLDA's model
 * slicing (docs/lda.md, Across nodes): runs of whole parameter actors (g words) of about
 * equal tokens in the whole corpus, at most max_words words, at least SLICES_PER_WORKER per
 * worker of the cluster and about `batch` tokens a node. A worker's step is its words of
 * one slice, and the workers start their sweeps at slices spread evenly over the cluster:
 * a slice is used by one worker at a time and, on the way round, by the next one
 * SLICES_PER_WORKER steps later, so its actors can move there in between, and workers that
 * drift apart by a few steps still do not need them at once. 16: on 4 nodes at K = 1000
 * (docs/lda.md) adaptive swept in 0.72-0.96 s with 8, 0.75-0.79 with 16, 0.79-0.84 with 32
 * and 0.81-0.84 with 64 (shorter steps cost more of their own). */
#define SLICES_PER_WORKER 16ull

typedef struct slices {
  uint32_t n;      /* slices */
  uint32_t *start; /* n + 1: each slice's first word */
} slices_t;

static int make_slices(slices_t *sl, const uint64_t *count, uint32_t V, uint32_t g, uint64_t total,
                       uint32_t nodes, uint32_t workers, uint32_t batch, uint32_t max_words)
{
  uint64_t want = (total + (uint64_t)nodes * batch - 1) / ((uint64_t)nodes * batch);
  if (want < SLICES_PER_WORKER * workers) want = SLICES_PER_WORKER * workers;
  if (max_words < g) max_words = g;
  uint64_t groups = (V + g - 1) / g;
  if (want > groups) want = groups;
  sl->start = malloc(((size_t)groups + 1) * sizeof(uint32_t));
  if (!sl->start) return AU_ENOMEM;
  uint64_t cum = 0;
  uint32_t n = 0, from = 0;
  sl->start[0] = 0;
  for (uint32_t a = 0; a < V; a += g) {
    uint32_t end = V - a > g ? a + g : V;
    for (uint32_t w = a; w < end; w++) cum += count[w];
    /* cut after this actor when the slice has its share of the tokens so far, or the next
     * actor would take it over max_words */
    int full = cum * want >= (uint64_t)(n + 1) * total || end + g - from > max_words;
    if (end < V && full) {
      sl->start[++n] = end;
      from = end;
    }
  }
  sl->n = n + 1;
  sl->start[sl->n] = V;
  return 0;
}

/* The shard's distinct words in key order, its tokens (tw: their words; doc_start: the
 * documents' token offsets) grouped by word, and the steps: runs of whole words of about
 * `batch` tokens and at most max_words words (at least one word). mark: V entries of
 * scratch. */
static int make_words(shard_t *s, const uint32_t *tw, const uint32_t *doc_start, uint32_t V,
                      uint32_t batch, uint32_t max_words, const slices_t *sl, uint32_t *mark)
{
  const uint32_t ntok = doc_start[s->ndocs];
  uint32_t nw = 0;
  for (uint32_t g = 0; g < V; g++) mark[g] = 0;
  for (uint32_t j = 0; j < ntok; j++) nw += !mark[tw[j]]++;
  s->nw = nw;
  s->keys = malloc(((size_t)nw + 1) * sizeof(au_key_t));
  s->tstart = malloc(((size_t)nw + 1) * sizeof(uint32_t));
  s->tok = malloc(((size_t)ntok + 1) * sizeof(lda_tok_t));
  if (!s->keys || !s->tstart || !s->tok) return AU_ENOMEM;
  /* words ascending (a pass over the vocabulary sorts them), each word's first token */
  uint32_t i = 0, at = 0;
  s->max_tokens = 0;
  for (uint32_t g = 0; g < V; g++) {
    if (!mark[g]) continue;
    uint32_t count = mark[g];
    if (count > s->max_tokens) s->max_tokens = count;
    s->keys[i] = g;
    s->tstart[i++] = at;
    mark[g] = at; /* where the word's next token goes */
    at += count;
  }
  s->tstart[nw] = ntok;
  for (uint32_t d = 0; d < s->ndocs; d++) {
    const lda_doc_t *doc = doc_at(s, s->doc_block[d]);
    size_t bytes = LDA_DOC_BYTES(doc->room);
    uint16_t lines = (uint16_t)(bytes / 64 < 65535 ? bytes / 64 : 65535);
    for (uint32_t j = doc_start[d]; j < doc_start[d + 1]; j++)
      s->tok[mark[tw[j]]++] = (lda_tok_t){s->doc_block[d], 0, lines};
  }
  if (sl) { /* on a cluster: step j is the worker's words of slice j, maybe none */
    s->nsteps = sl->n;
    s->step_kstart = calloc((size_t)sl->n + 1, sizeof(uint32_t));
    if (!s->step_kstart) return AU_ENOMEM;
    for (uint32_t j = 0, w = 0; j < sl->n; j++) {
      while (w < nw && s->keys[w] < sl->start[j]) w++;
      s->step_kstart[j] = w;
    }
    s->step_kstart[sl->n] = nw;
    return 0;
  }
  /* the steps (first pass: count them) */
  for (int fill = 0; fill < 2; fill++) {
    uint32_t n = 0, tokens = 0, words = 0;
    for (uint32_t w = 0; w < nw; w++) {
      uint32_t len = s->tstart[w + 1] - s->tstart[w];
      if (words > 0 && ((uint64_t)tokens + len > batch || words >= max_words)) {
        n++;
        tokens = words = 0;
      }
      if (fill && words == 0) s->step_kstart[n] = w;
      tokens += len;
      words++;
    }
    n += words > 0;
    if (!fill) {
      s->nsteps = n ? n : 1;
      s->step_kstart = calloc((size_t)s->nsteps + 1, sizeof(uint32_t));
      if (!s->step_kstart) return AU_ENOMEM;
    }
  }
  s->step_kstart[s->nsteps] = nw;
  return 0;
}

/* The shard's document blocks (doc_start: the documents' token offsets): one per
 * document, empty, in document order. */
static int make_docs(shard_t *s, const uint32_t *doc_start, uint32_t K)
{
  size_t units = 0;
  s->doc_block = malloc(((size_t)s->ndocs + 1) * sizeof(uint32_t));
  if (!s->doc_block) return AU_ENOMEM;
  for (uint32_t d = 0; d < s->ndocs; d++) {
    uint32_t len = doc_start[d + 1] - doc_start[d];
    if (units > UINT32_MAX) return AU_ENOMEM; /* beyond what a block number holds */
    s->doc_block[d] = (uint32_t)units;
    units += LDA_DOC_BYTES(LDA_DOC_ROOM(len, K)) / 64;
  }
  s->dmem = lda_lines(units, 64);
  if (!s->dmem) return AU_ENOMEM;
  for (uint32_t d = 0; d < s->ndocs; d++) {
    uint32_t len = doc_start[d + 1] - doc_start[d];
    lda_doc_init(doc_at(s, s->doc_block[d]), len, LDA_DOC_ROOM(len, K));
  }
  return 0;
}

/* Deals this node's documents (d % nodes == rank, or all of a sharded corpus) to the
 * shards: node document l goes to shard l % nshards. */
static int deal(lda_t *m, const lda_corpus_t *c)
{
  const uint32_t nodes = (uint32_t)m->nodes, rank = (uint32_t)m->rank, ns = (uint32_t)m->nshards;
  /* a sharded corpus is this node's documents: shard sh takes d = sh, sh + ns, ... */
  const uint64_t d0 = m->o.sharded ? 0 : rank, dstep = m->o.sharded ? 1 : nodes;
  const uint32_t K = m->p.K;
  uint32_t *mark = malloc(((size_t)c->nwords + 1) * sizeof(uint32_t));
  if (!mark) return AU_ENOMEM;
  uint32_t max_words = UINT32_MAX;
  if (m->nodes > 1) {
    size_t row = (size_t)K * sizeof(int32_t);
    max_words = STEP_ROW_BYTES / row ? (uint32_t)(STEP_ROW_BYTES / row) : 1;
  }
  int rc = 0;
  slices_t sl = {0, NULL};
  if (m->nodes > 1)
    rc = make_slices(&sl, m->word_count, c->nwords, au_table_group(m->words), m->tokens, nodes,
                     nodes * ns, m->o.batch, max_words);
  for (uint32_t sh = 0; sh < ns && rc == 0; sh++) {
    shard_t *s = &m->shards[sh];
    s->m = m;
    uint64_t ntok = 0;
    uint32_t nd = 0;
    for (uint64_t d = d0 + dstep * sh; d < c->ndocs; d += dstep * ns) {
      ntok += c->doc_start[d + 1] - c->doc_start[d];
      nd++;
    }
    s->ndocs = nd;
    uint32_t *doc_start = malloc(((size_t)nd + 1) * sizeof(uint32_t));
    uint32_t *tw = malloc((ntok + 1) * sizeof(uint32_t)); /* token -> word */
    if (!doc_start || !tw) {
      free(doc_start);
      free(tw);
      rc = AU_ENOMEM;
      break;
    }
    uint32_t t = 0, i = 0;
    doc_start[0] = 0;
    s->doc_id = malloc(((size_t)nd + 1) * sizeof(uint64_t));
    if (!s->doc_id) {
      free(doc_start);
      free(tw);
      rc = AU_ENOMEM;
      break;
    }
    for (uint64_t d = d0 + dstep * sh; d < c->ndocs; d += dstep * ns) {
      for (size_t j = c->doc_start[d]; j < c->doc_start[d + 1]; j++) tw[t++] = c->words[j];
      s->doc_id[i] = m->o.sharded ? m->o.doc_base + d : d;
      doc_start[++i] = t;
    }
    rc = make_docs(s, doc_start, K);
    if (rc == 0)
      rc = make_words(s, tw, doc_start, c->nwords, m->o.batch, max_words, sl.start ? &sl : NULL,
                      mark);
    free(doc_start);
    free(tw);
    if (rc != 0) break;
    /* the workers of all nodes start their sweeps at different words, spread evenly,
     * so that they seldom update the same rows at once and each sees the others'
     * changes to a word from a fraction of a sweep before */
    s->first = (uint32_t)((uint64_t)s->nsteps * (rank * ns + sh) / ((uint64_t)nodes * ns));
    s->nt = lda_lines(K, sizeof(int32_t));
    s->inv = lda_lines(K, sizeof(float));
    s->smooth_inv = lda_lines(K, sizeof(float));
    s->w = lda_lines((size_t)K + 8, sizeof(float));
    s->block = lda_lines((size_t)K / 8 + 2, sizeof(float));
    s->f = lda_lines(K, sizeof(float));
    s->wq = lda_lines(K, sizeof(float));
    s->tdelta = lda_lines(K, sizeof(int32_t));
    s->wdelta = lda_lines(K, sizeof(int32_t));
    s->mv = lda_lines((size_t)s->max_tokens + 1, sizeof(lda_move_t));
    if (!s->nt || !s->inv || !s->smooth_inv || !s->w || !s->block || !s->f || !s->wq ||
        !s->tdelta || !s->wdelta || !s->mv || lda_build_scratch_init(&s->build, K) != 0) {
      rc = AU_ENOMEM;
      break;
    }
    s->vbeta = (float)m->p.vbeta;
    lda_rng_seed(&s->rng, m->o.seed, 0x100000u + ((uint64_t)rank << 16) + sh);
  }
  free(sl.start);
  free(mark);
  return rc;
}

static int check_opts(const lda_opts_t *o, const lda_corpus_t *c, char *err, size_t errlen)
{
  if (o->topics < 1 || o->topics > LDA_MAX_TOPICS)
    snprintf(err, errlen, "topics must be in [1, %d], got %u", LDA_MAX_TOPICS, o->topics);
  else if (!(o->alpha > 0) || !(o->beta > 0))
    snprintf(err, errlen, "alpha and beta must be positive, got %g and %g", o->alpha, o->beta);
  else if (o->batch < 1 || o->mh_steps < 1 || o->lookahead < 0 || o->workers < 0)
    snprintf(err, errlen, "batch and mh_steps must be at least 1, lookahead and workers >= 0");
  else if (c->nwords < 1 || (c->ntokens < 1 && !o->sharded))
    snprintf(err, errlen, "the corpus has no tokens");
  else
    return 0;
  return AU_EINVAL;
}

/* The model must fit in this machine's memory, or it is bad input (a vocabulary or K too
 * large), said before the tables are made, not an OOM kill later. What scales, on this
 * node: its share of the word-topic table, W x K int32 over the nodes (at the least: the
 * placement may bring it more rows, as replicas or moved actors), about 32 bytes a word
 * (counts, keys, marks), and per token its topic and document block (8 + 8), its word
 * while dealt (4) and in the corpus given (4); per document its block and ids (about 80). */
static int check_memory(const lda_opts_t *o, const lda_corpus_t *c, int nodes, char *err,
                        size_t errlen)
{
  const double need = (double)c->nwords * o->topics * sizeof(int32_t) / nodes + 32.0 * c->nwords +
                      24.0 * (double)c->ntokens + 80.0 * c->ndocs;
  const double have = cli_memory_bytes();  /* (not cli_check_memory: one message, ours) */
  if (have == 0 || need <= have) return 0; /* (unknown: let malloc say) */
  snprintf(err, errlen,
           "the model needs %.1f GB (%u words x %u topics of int32 counts, %zu tokens: a node's "
           "share), more "
           "than this machine's %.1f GB of memory: fewer topics or a smaller vocabulary",
           need / 1e9, c->nwords, o->topics, c->ntokens, have / 1e9);
  return AU_EINVAL;
}

typedef struct word_freq {
  uint64_t n;
  uint32_t w;
} word_freq_t;

static int more_frequent(const void *a, const void *b)
{
  const word_freq_t *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? 1 : -1;
  return x->w < y->w ? -1 : x->w > y->w;
}

/* --mode hot: the hot words are the 1% most frequent ones (every node has the whole
 * corpus's counts, so all name the same), and the topic totals' one key; the tables are
 * told, as their intents name every word of a step alike. */
static int name_hot(lda_t *m)
{
  const uint32_t want = (m->V + 99) / 100;
  word_freq_t *f = malloc((size_t)m->V * sizeof(*f));
  au_key_t *keys = malloc((size_t)want * sizeof(*keys));
  int rc = AU_ENOMEM;
  if (f && keys) {
    for (uint32_t w = 0; w < m->V; w++) f[w] = (word_freq_t){m->word_count[w], w};
    qsort(f, m->V, sizeof(*f), more_frequent);
    for (uint32_t i = 0; i < want; i++) keys[i] = f[i].w;
    rc = au_table_hot(m->words, keys, want);
    const au_key_t total = 0;
    if (rc == 0) rc = au_table_hot(m->totals, &total, 1);
  }
  free(f);
  free(keys);
  return rc;
}

int lda_create(au_node_t *node, const lda_opts_t *o, const lda_corpus_t *c, lda_t **out, char *err,
               size_t errlen)
{
  int rc = check_opts(o, c, err, errlen);
  if (rc != 0) return rc;
  /* collective: all nodes stop if one lacks the memory (its share may be the larger) */
  const int mine = check_memory(o, c, au_node_nodes(node), err, errlen);
  double short_of = mine != 0;
  if ((rc = au_allreduce_sum(au_node_runtime(node), &short_of, 1)) != 0) {
    snprintf(err, errlen, "checking the memory across the cluster: %s", au_strerror(rc));
    return rc;
  }
  if (short_of > 0) {
    if (!mine) snprintf(err, errlen, "another node lacks the memory for the model");
    return AU_EINVAL;
  }
  lda_t *m = calloc(1, sizeof(*m));
  if (!m) goto nomem;
  m->node = node;
  m->rank = au_node_rank(node);
  m->nodes = au_node_nodes(node);
  m->o = *o;
  m->V = c->nwords;
  m->tokens = c->ntokens;
  m->p = (lda_params_t){.K = o->topics,
                        .alpha = o->alpha,
                        .beta = o->beta,
                        .vbeta = o->beta * c->nwords,
                        .kalpha = o->alpha * o->topics};
  m->word_count = malloc((size_t)c->nwords * sizeof(uint64_t));
  if (!m->word_count) goto nomem;
  lda_corpus_word_counts(c, m->word_count);
  if (o->sharded) { /* the cluster's counts: V words, then the tokens */
    double *v = malloc(((size_t)c->nwords + 1) * sizeof(double));
    if (!v) goto nomem;
    for (uint32_t w = 0; w < c->nwords; w++) v[w] = (double)m->word_count[w];
    v[c->nwords] = (double)c->ntokens;
    rc = au_allreduce_sum(au_node_runtime(node), v, (size_t)c->nwords + 1);
    for (uint32_t w = 0; w < c->nwords && rc == 0; w++) m->word_count[w] = (uint64_t)v[w];
    m->tokens = (uint64_t)v[c->nwords];
    free(v);
    if (rc != 0) {
      snprintf(err, errlen, "counting the words across the cluster: %s", au_strerror(rc));
      lda_free(m);
      return rc;
    }
  }
  if (lda_lgamma_init(&m->lga, o->alpha, 1u << 12) != 0 ||
      lda_lgamma_init(&m->lgb, o->beta, 1u << 16) != 0)
    goto nomem;

  /* the same tables in the same order on every node */
  rc = au_table_create(node,
                       &(au_table_opts_t){.keys = c->nwords,
                                          .group = word_group(o->topics, c->nwords),
                                          .dim = o->topics,
                                          .type = AU_I32,
                                          .init = AU_INIT_ZERO,
                                          .kernel = AU_KERNEL_ADD,
                                          .place = o->place,
                                          .name = "word_topic"},
                       &m->words);
  if (rc == 0)
    rc = au_table_create(node,
                         &(au_table_opts_t){.keys = 1,
                                            .dim = o->topics,
                                            .type = AU_I32,
                                            .init = AU_INIT_ZERO,
                                            .kernel = AU_KERNEL_ADD,
                                            .place = o->place,
                                            .name = "topic_totals"},
                         &m->totals);
  if (rc == 0 && o->place == AU_PLACE_HOT) rc = name_hot(m);
  if (rc != 0) {
    snprintf(err, errlen, "creating the count tables (%u x %u int32): %s", c->nwords, o->topics,
             au_strerror(rc));
    lda_free(m);
    return rc;
  }

  uint64_t node_docs = o->sharded ? c->ndocs
                                  : c->ndocs / (uint32_t)m->nodes +
                                        ((uint32_t)m->rank < c->ndocs % (uint32_t)m->nodes ? 1 : 0);
  int ns = o->workers > 0 ? o->workers : au_runtime_threads(au_node_runtime(node));
  if ((uint64_t)ns > node_docs) ns = node_docs ? (int)node_docs : 1;
  m->nshards = ns;
  m->shards = lda_lines((size_t)ns, sizeof(shard_t));
  if (!m->shards || deal(m, c) != 0) goto nomem;
  for (int i = 0; i < ns; i++) {
    rc = au_worker_spawn(node, &(au_worker_opts_t){step, &m->shards[i]}, NULL);
    if (rc != 0) {
      snprintf(err, errlen, "spawning worker %d: %s", i, au_strerror(rc));
      lda_free(m);
      return rc;
    }
  }
  if (o->bounded) { /* the most steps of a worker over the cluster (collective) */
    double most = 0;
    double *v = calloc((size_t)m->nodes, sizeof(double));
    if (!v) goto nomem;
    for (int i = 0; i < ns; i++)
      if (m->shards[i].nsteps > v[m->rank]) v[m->rank] = m->shards[i].nsteps;
    rc = au_allreduce_sum(au_node_runtime(node), v, (size_t)m->nodes);
    for (int k = 0; k < m->nodes; k++)
      if (v[k] > most) most = v[k];
    free(v);
    if (rc != 0) {
      snprintf(err, errlen, "the steps of a sweep over the cluster: %s", au_strerror(rc));
      lda_free(m);
      return rc;
    }
    m->run_ticks = (int64_t)most + 1;
  }
  /* the initial topics and their counts: one collective run */
  for (int i = 0; i < ns; i++) m->shards[i].init = 1;
  rc = au_node_run(node);
  for (int i = 0; i < ns; i++) m->shards[i].init = 0;
  if (rc != 0) {
    snprintf(err, errlen, "initializing the counts: %s", au_strerror(rc));
    lda_free(m);
    return rc;
  }
  *out = m;
  return 0;

nomem:
  snprintf(err, errlen, "out of memory building the model");
  lda_free(m);
  return AU_ENOMEM;
}

/* User and system time of this process so far. */
static double cpu_seconds(void)
{
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int lda_iterate(lda_t *m, lda_iter_t *out)
{
  for (int i = 0; i < m->nshards; i++) m->shards[i].tokens = m->shards[i].moved = 0;
  au_node_stats_t before, after;
  au_node_stats(m->node, &before);
  if (m->o.bounded) m->clock_base += m->run_ticks; /* every node sweeps as often */
  double cpu0 = cpu_seconds();
  uint64_t t0 = au_now_ns();
  int rc = au_node_run(m->node);
  out->seconds = (double)(au_now_ns() - t0) / 1e9;
  double cpu = cpu_seconds() - cpu0;
  if (rc != 0) return rc;
  au_node_stats(m->node, &after);
  double v[14] = {0,
                  0,
                  (double)(after.rows_local - before.rows_local),
                  (double)(after.rows_remote - before.rows_remote),
                  (double)(after.intents - before.intents),
                  cpu,
                  (double)(after.bytes_sent - before.bytes_sent),
                  (double)(after.bytes_fetch - before.bytes_fetch),
                  (double)(after.bytes_push - before.bytes_push),
                  (double)(after.bytes_move - before.bytes_move),
                  (double)(after.bytes_replica - before.bytes_replica),
                  (double)(after.bytes_control - before.bytes_control),
                  (double)(after.reads_waited - before.reads_waited),
                  (double)(after.wait_ns - before.wait_ns) / 1e9};
  for (int i = 0; i < m->nshards; i++) {
    v[0] += (double)m->shards[i].tokens;
    v[1] += (double)m->shards[i].moved;
  }
  if ((rc = au_allreduce_sum(au_node_runtime(m->node), v, 14)) != 0) return rc;
  out->tokens = (uint64_t)v[0];
  out->tokens_per_s = out->seconds > 0 ? v[0] / out->seconds : 0;
  out->moved = v[0] > 0 ? v[1] / v[0] : 0;
  out->local = v[2] + v[3] > 0 ? v[2] / (v[2] + v[3]) : 1.0;
  out->intents = (uint64_t)v[4];
  out->cpu_seconds = v[5];
  out->bytes_sent = (uint64_t)v[6];
  for (int i = 0; i < 5; i++) out->bytes_by[i] = (uint64_t)v[7 + i];
  out->clock_waits = (uint64_t)v[12];
  out->clock_wait_s = v[13];
  return 0;
}

/* ---- rows held here --------------------------------------------------------------------- */

int lda__each_row(lda_t *m, uint64_t first, uint64_t end, lda__row_fn fn, void *arg)
{
  /* a parameter actor's keys are all here or all elsewhere: read them together */
  const uint32_t g = au_table_group(m->words), K = m->p.K;
  if (end > m->V) end = m->V;
  au_key_t *keys = malloc((size_t)g * sizeof(au_key_t));
  int32_t *rows = malloc((size_t)g * K * sizeof(int32_t));
  int rc = keys && rows ? 0 : AU_ENOMEM;
  for (uint64_t a = first - first % g; a < end && rc == 0; a += g) {
    uint32_t n = (uint32_t)(m->V - a < g ? m->V - a : g);
    for (uint32_t i = 0; i < n; i++) keys[i] = a + i;
    /* owners only: a replica's rows are counted at their owner */
    rc = au_table_owns(m->words, keys[0]) == 1 ? au_table_read(m->words, keys, n, rows) : AU_EAGAIN;
    if (rc == AU_EAGAIN) {
      rc = 0; /* held by another node */
      continue;
    }
    for (uint32_t i = 0; i < n && rc == 0; i++)
      if (keys[i] >= first && keys[i] < end) rc = fn(arg, keys[i], &rows[(size_t)i * K]);
  }
  free(keys);
  free(rows);
  return rc;
}

int lda__read_totals(lda_t *m, int32_t *row)
{
  au_key_t zero = 0;
  if (au_table_owns(m->totals, zero) != 1) return 0; /* a replica counts at its owner */
  int rc = au_table_read(m->totals, &zero, 1, row);
  return rc == 0 ? 1 : rc == AU_EAGAIN ? 0 : rc;
}

au_table_t *lda_word_table(lda_t *m)
{
  return m->words;
}

au_table_t *lda_totals_table(lda_t *m)
{
  return m->totals;
}

int lda_workers(const lda_t *m)
{
  return m->nshards;
}

void lda_free(lda_t *m)
{
  if (!m) return;
  if (m->shards)
    for (int i = 0; i < m->nshards; i++) shard_free(&m->shards[i]);
  free(m->shards);
  free(m->word_count);
  lda_lgamma_free(&m->lga);
  lda_lgamma_free(&m->lgb);
  free(m);
}
