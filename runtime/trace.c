/* trace.c — the trace recorder: per-thread chunked buffers, the cap, and the Chrome
 * trace-event JSON that au_trace_stop writes.
 *
 * Buffers: one per scheduler thread, one for the I/O thread, one shared by every other
 * thread (under a mutex). Each is a chain of chunks of up to CHUNK_EVENTS events; a full
 * chunk is followed by a new one, so recording never waits for a reader and nothing is
 * overwritten. Chunks are granted against the cap under `grant_mu`, once per chunk; past
 * the cap a buffer counts what it drops.
 *
 * The invariant that makes reading safe: au_trace_stop reads and frees the buffers only
 * when no thread can be inside an append. Scheduler threads are joined (no run is in
 * progress: stop refuses otherwise); the shared buffer's writers hold its mutex and look
 * at the flag under it; the I/O thread, which runs all the time, announces each append in
 * `io_busy` (a Dekker handshake with stop, below).
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/trace.h"

#define CHUNK_EVENTS       65536u       /* events per chunk: 2.5 MiB */
#define DEFAULT_MAX_EVENTS (4ull << 20) /* 160 MiB of events, ~0.6 GB of JSON */
#define MAX_MAX_EVENTS     (1ull << 36) /* AU_TRACE_MAX_EVENTS above this is a typo */
#define MARK_NS            1000u        /* events with a flow are drawn 1 µs wide */
#define TID_STRIDE         10000        /* tid = pid * TID_STRIDE + thread slot */
#define STR(x)             #x
#define XSTR(x)            STR(x)
#define GENERATOR          "augur " XSTR(AU_VERSION_MAJOR) "." XSTR(AU_VERSION_MINOR)

/* 40 bytes: the time since the trace started (ns) in the top 56 bits, the kind below. */
typedef struct trace_event {
  uint64_t tk;
  uint64_t arg[4];
} trace_event_t;

typedef struct chunk {
  struct chunk *next;
  size_t n, cap; /* n: events in it; set when the chunk is left, or at stop */
  trace_event_t ev[];
} chunk_t;

/* Written by its one writer; read by stop only when no writer can be appending. */
typedef struct tbuf {
  _Alignas(64) trace_event_t *pos, *end; /* free space in the last chunk */
  chunk_t *head, *tail;
  uint64_t dropped;
  uint64_t park_ts; /* when the owner last parked: the unpark's duration */
  int full;         /* the cap is reached: drop without asking again */
} tbuf_t;

/* A registered kind; `duration` (the runtime's park) is drawn from the event to the
 * thread's next one when that is an unpark. */
typedef struct kind {
  au__trace_kind_t k;
  int duration;
  int span;      /* au_trace_span's: a slice from its fourth argument to the event */
  char name[32]; /* a span's name, copied */
} kind_t;

struct trace {
  pthread_mutex_t grant_mu;  /* guards `granted`; taken once per chunk */
  pthread_mutex_t shared_mu; /* the buffer of threads that are not the runtime's */
  atomic_int io_busy;        /* the I/O thread is inside trace_record (see au_trace_stop) */
  uint64_t t0;               /* au_now_ns at au_trace_start */
  uint64_t cap, granted;     /* events allowed, and granted to chunks so far */
  char *path;                /* where au_trace_stop writes (before the rank suffix) */
  int nbufs;                 /* S scheduler threads, then the I/O thread, then the rest */
  tbuf_t *bufs;
  pthread_mutex_t kinds_mu; /* guards kinds[] */
  kind_t kinds[AU__TRACE_MAX];
  _Atomic uint64_t registered; /* bit k: kinds[k] is registered (AU__TRACE_MAX <= 64) */
};

int trace_init(au_runtime_t *rt)
{
  struct trace *tr = calloc(1, sizeof(*tr));
  if (!tr) return AU_ENOMEM;
  tr->nbufs = rt->nthreads + 2;
  size_t size = (size_t)tr->nbufs * sizeof(tbuf_t); /* a multiple of 64: tbuf_t is aligned */
  tr->bufs = aligned_alloc(_Alignof(tbuf_t), size);
  if (!tr->bufs) {
    free(tr);
    return AU_ENOMEM;
  }
  memset(tr->bufs, 0, size);
  pthread_mutex_init(&tr->grant_mu, NULL);
  pthread_mutex_init(&tr->shared_mu, NULL);
  pthread_mutex_init(&tr->kinds_mu, NULL);
  atomic_init(&tr->io_busy, 0);
  atomic_init(&rt->trace_on, 0);
  rt->trace = tr;
  /* the scheduler's own */
  tr->kinds[TRACE_STEAL].k = (au__trace_kind_t){"steal", {"victim", NULL, NULL, NULL}, NULL, 0};
  tr->kinds[TRACE_PARK].k = (au__trace_kind_t){"park", {"sleeping", NULL, NULL, NULL}, NULL, 0};
  tr->kinds[TRACE_PARK].duration = 1;
  tr->kinds[TRACE_UNPARK].k = (au__trace_kind_t){"unpark", {"ns", "token", NULL, NULL}, NULL, 0};
  atomic_init(&tr->registered, 1ull << TRACE_STEAL | 1ull << TRACE_PARK | 1ull << TRACE_UNPARK);
  return 0;
}

int trace_kind_register(au_runtime_t *rt, int kind, const au__trace_kind_t *k)
{
  struct trace *tr = rt->trace;
  if (kind <= 0 || kind >= AU__TRACE_MAX || !k || !k->name || !*k->name) return AU_EINVAL;
  int rc = 0;
  pthread_mutex_lock(&tr->kinds_mu);
  kind_t *e = &tr->kinds[kind];
  if (!e->k.name) {
    e->k = *k;
    /* relaxed: trace_record only filters by it; the JSON writer reads kinds[] under the
     * mutex */
    atomic_fetch_or_explicit(&tr->registered, 1ull << kind, memory_order_relaxed);
  } else if (strcmp(e->k.name, k->name) != 0) {
    rc = AU_EINVAL;
  }
  pthread_mutex_unlock(&tr->kinds_mu);
  return rc;
}

void au_trace_span(au_runtime_t *rt, const char *name, uint64_t n, uint64_t begin_ns)
{
  /* (a name longer than a kind holds is not recorded: cut, it would match no call) */
  if (!rt || !name || !*name || strnlen(name, 32) == 32 || !trace_on(rt)) return;
  struct trace *tr = rt->trace;
  int kind = 0;
  /* the names so far, without the lock: a kind's name is written before its bit */
  uint64_t reg = atomic_load_explicit(&tr->registered, memory_order_acquire);
  for (int k = TRACE_SPAN; k < AU__TRACE_USER && !kind; k++)
    if ((reg >> k & 1) && tr->kinds[k].span && strcmp(tr->kinds[k].name, name) == 0) kind = k;
  if (!kind) { /* a new name: the first free span kind; past the last, not recorded */
    pthread_mutex_lock(&tr->kinds_mu);
    for (int k = TRACE_SPAN; k < AU__TRACE_USER && !kind; k++) {
      kind_t *e = &tr->kinds[k];
      if (e->k.name && strcmp(e->name, name) == 0) {
        kind = k;
      } else if (!e->k.name) {
        snprintf(e->name, sizeof(e->name), "%s", name);
        e->k = (au__trace_kind_t){e->name, {"n", NULL, NULL, NULL}, NULL, 0};
        e->span = 1;
        atomic_fetch_or_explicit(&tr->registered, 1ull << k, memory_order_release);
        kind = k;
      }
    }
    pthread_mutex_unlock(&tr->kinds_mu);
    if (!kind) return;
  }
  trace_record(rt, kind, n, 0, 0, begin_ns);
}

int au__trace_kind(au_runtime_t *rt, int kind, const au__trace_kind_t *k)
{
  if (!rt || kind < AU__TRACE_USER) return AU_EINVAL;
  return trace_kind_register(rt, kind, k);
}

void au__trace(au_runtime_t *rt, int kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
  trace_emit(rt, kind, a, b, c, d);
}

/* Frees the events. Only while no thread can be appending. */
static void reset(struct trace *tr)
{
  for (int i = 0; i < tr->nbufs; i++) {
    tbuf_t *b = &tr->bufs[i];
    for (chunk_t *c = b->head, *next; c; c = next) {
      next = c->next;
      free(c);
    }
    memset(b, 0, sizeof(*b));
  }
  tr->granted = 0;
}

void trace_free(au_runtime_t *rt)
{
  struct trace *tr = rt->trace;
  if (!tr) return;
  if (atomic_load(&rt->trace_on)) au_trace_stop(rt);
  reset(tr);
  free(tr->path);
  free(tr->bufs);
  pthread_mutex_destroy(&tr->grant_mu);
  pthread_mutex_destroy(&tr->shared_mu);
  pthread_mutex_destroy(&tr->kinds_mu);
  free(tr);
  rt->trace = NULL;
}

/* Gives b a new chunk against the cap. -1 when the cap is reached (or memory is out). */
static int grow(struct trace *tr, tbuf_t *b)
{
  if (b->full) return -1;
  pthread_mutex_lock(&tr->grant_mu);
  uint64_t n = tr->cap - tr->granted;
  if (n > CHUNK_EVENTS) n = CHUNK_EVENTS;
  tr->granted += n;
  pthread_mutex_unlock(&tr->grant_mu);
  chunk_t *c = n ? malloc(sizeof(*c) + n * sizeof(trace_event_t)) : NULL;
  if (!c) {
    if (n) { /* out of memory: give the grant back to the other buffers */
      pthread_mutex_lock(&tr->grant_mu);
      tr->granted -= n;
      pthread_mutex_unlock(&tr->grant_mu);
    }
    b->full = 1;
    return -1;
  }
  c->next = NULL;
  c->n = 0;
  c->cap = n;
  if (b->tail) {
    b->tail->n = b->tail->cap;
    b->tail->next = c;
  } else {
    b->head = c;
  }
  b->tail = c;
  b->pos = c->ev;
  b->end = c->ev + n;
  return 0;
}

static void append(struct trace *tr, tbuf_t *b, int kind, uint64_t a0, uint64_t a1, uint64_t a2,
                   uint64_t a3)
{
  uint64_t now = au_now_ns();
  if (kind == TRACE_PARK) {
    b->park_ts = now;
  } else if (kind == TRACE_UNPARK) {
    a0 = b->park_ts && now >= b->park_ts ? now - b->park_ts : 0;
    b->park_ts = 0;
  }
  if (b->pos == b->end && grow(tr, b) != 0) {
    b->dropped++;
    return;
  }
  uint64_t dt = now > tr->t0 ? now - tr->t0 : 0;
  *b->pos++ = (trace_event_t){.tk = dt << 8 | (uint64_t)kind, .arg = {a0, a1, a2, a3}};
}

void trace_record(au_runtime_t *rt, int kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
  struct trace *tr = rt->trace;
  /* relaxed: an event of a kind registered just now may be dropped, no more */
  if (kind <= 0 || kind >= AU__TRACE_MAX ||
      !(atomic_load_explicit(&tr->registered, memory_order_relaxed) >> kind & 1))
    return;
  rt_ctx_t *ctx = rt_ctx(rt);
  if (ctx && ctx->sched) {
    /* acquire: pairs with au_trace_start's release store, so the buffer state it set up
     * is visible. No run is in progress while stop reads the buffer. */
    if (atomic_load_explicit(&rt->trace_on, memory_order_acquire))
      append(tr, &tr->bufs[ctx->sched->index], kind, a, b, c, d);
    return;
  }
  if (ctx) {
    /* The I/O thread. seq_cst store, then seq_cst load: with stop's clearing of the flag
     * and its reading of io_busy (both seq_cst), either this thread sees the flag
     * cleared, or stop sees io_busy set and waits for the release store below. */
    atomic_store(&tr->io_busy, 1);
    if (atomic_load(&rt->trace_on)) append(tr, &tr->bufs[rt->nthreads], kind, a, b, c, d);
    /* release: stop reads 0 with acquire before it reads the buffer */
    atomic_store_explicit(&tr->io_busy, 0, memory_order_release);
    return;
  }
  pthread_mutex_lock(&tr->shared_mu);
  /* stop clears the flag before it takes this mutex, so under it the flag is exact;
   * acquire for start's set-up, as above */
  if (atomic_load_explicit(&rt->trace_on, memory_order_acquire))
    append(tr, &tr->bufs[rt->nthreads + 1], kind, a, b, c, d);
  pthread_mutex_unlock(&tr->shared_mu);
}

/* --- au_trace_start ------------------------------------------------------------------ */

static int max_events(int rank, uint64_t *out)
{
  const char *s = getenv("AU_TRACE_MAX_EVENTS");
  *out = DEFAULT_MAX_EVENTS;
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*s < '0' || *s > '9' || *end || errno || v == 0 || v > MAX_MAX_EVENTS) {
    au__log(AU_LOG_ERROR, rank,
            "AU_TRACE_MAX_EVENTS: expected a number of events from 1 to %llu, got '%s'",
            (unsigned long long)MAX_MAX_EVENTS, s);
    return AU_EINVAL;
  }
  *out = v;
  return 0;
}

/* The directory that will hold path exists and is writable: fail now, not at stop. */
static int dir_writable(int rank, const char *path)
{
  const char *slash = strrchr(path, '/');
  char dir[4096];
  if (!slash) {
    strcpy(dir, ".");
  } else if (slash == path) {
    strcpy(dir, "/");
  } else {
    size_t n = (size_t)(slash - path);
    if (n >= sizeof(dir)) n = sizeof(dir) - 1;
    memcpy(dir, path, n);
    dir[n] = '\0';
  }
  if (access(dir, W_OK | X_OK) == 0) return 0;
  au__log(AU_LOG_ERROR, rank, "trace %s: cannot write into %s: %s", path, dir, strerror(errno));
  return AU_EINVAL;
}

int au_trace_start(au_runtime_t *rt, const char *path)
{
  if (!rt || !path || !*path) return AU_EINVAL;
  struct trace *tr = rt->trace;
  if (atomic_load(&rt->trace_on)) {
    au__log(AU_LOG_ERROR, rt_log_rank(rt), "trace %s: tracing is already on (into %s)", path,
            tr->path);
    return AU_EINVAL;
  }
  uint64_t cap;
  int rc = max_events(rt_log_rank(rt), &cap);
  if (rc) return rc;
  if ((rc = dir_writable(rt_log_rank(rt), path))) return rc;
  char *p = strdup(path);
  if (!p) return AU_ENOMEM;
  free(tr->path);
  tr->path = p;
  tr->cap = cap;
  tr->granted = 0;
  tr->t0 = au_now_ns();
  /* release: a thread that reads 1 with acquire (trace_record) sees the set-up above */
  atomic_store_explicit(&rt->trace_on, 1, memory_order_release);
  return 0;
}

int au_trace_enabled(const au_runtime_t *rt)
{
  /* relaxed: a hint for callers that prepare expensive arguments; no data depends on it */
  return rt && atomic_load_explicit(&((au_runtime_t *)rt)->trace_on, memory_order_relaxed);
}

/* --- the JSON ------------------------------------------------------------------------ */

/* Events are formatted by hand into a buffer: fprintf made writing ~4x slower. */
typedef struct writer {
  FILE *f;
  char *buf;
  size_t len;
  int first; /* no element written yet: no comma before the next */
  int pid;
  uint64_t t0;
  const kind_t *kinds; /* the registered kinds (a copy), by number */
} writer_t;

#define WBUF 65536

static void w_flush(writer_t *w)
{
  fwrite(w->buf, 1, w->len, w->f);
  w->len = 0;
}

static void w_str(writer_t *w, const char *s) /* raw text, not quoted */
{
  size_t n = strlen(s);
  if (w->len + n > WBUF) w_flush(w);
  if (n > WBUF) {
    fwrite(s, 1, n, w->f);
    return;
  }
  memcpy(w->buf + w->len, s, n);
  w->len += n;
}

static void w_u64(writer_t *w, uint64_t v)
{
  char tmp[24];
  int n = 0;
  do tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  if (w->len + 24 > WBUF) w_flush(w);
  while (n) w->buf[w->len++] = tmp[--n];
}

static void w_hex(writer_t *w, uint64_t v)
{
  char tmp[24];
  int n = 0;
  do tmp[n++] = "0123456789abcdef"[v & 15];
  while ((v >>= 4) != 0);
  if (w->len + 24 > WBUF) w_flush(w);
  while (n) w->buf[w->len++] = tmp[--n];
}

/* Microseconds with three decimals: ns resolution, as Chrome's "ts" and "dur" want. */
static void w_us(writer_t *w, uint64_t ns)
{
  w_u64(w, ns / 1000);
  unsigned frac = (unsigned)(ns % 1000);
  char tmp[5] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                 (char)('0' + frac % 10), '\0'};
  w_str(w, tmp);
}

/* A JSON string, quoted and escaped. */
static void w_quoted(writer_t *w, const char *s)
{
  w_str(w, "\"");
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    char tmp[8];
    if (ch == '"' || ch == '\\')
      snprintf(tmp, sizeof(tmp), "\\%c", ch);
    else if (ch < 0x20)
      snprintf(tmp, sizeof(tmp), "\\u%04x", ch);
    else
      tmp[0] = (char)ch, tmp[1] = '\0';
    w_str(w, tmp);
  }
  w_str(w, "\"");
}

static void w_begin(writer_t *w)
{
  w_str(w, w->first ? "\n" : ",\n");
  w->first = 0;
}

/* ,"pid":P,"tid":T */
static void w_thread(writer_t *w, int tid)
{
  w_str(w, ",\"pid\":");
  w_u64(w, (uint64_t)w->pid);
  w_str(w, ",\"tid\":");
  w_u64(w, (uint64_t)tid);
}

/* process_name/thread_name and the sort index that keeps the tracks in slot order */
static void w_meta(writer_t *w, int tid, const char *what, const char *name, int sort)
{
  w_begin(w);
  w_str(w, "{\"name\":\"");
  w_str(w, what);
  w_str(w, "_name\",\"ph\":\"M\"");
  w_thread(w, tid);
  w_str(w, ",\"args\":{\"name\":");
  w_quoted(w, name);
  w_str(w, "}}");
  w_begin(w);
  w_str(w, "{\"name\":\"");
  w_str(w, what);
  w_str(w, "_sort_index\",\"ph\":\"M\"");
  w_thread(w, tid);
  w_str(w, ",\"args\":{\"sort_index\":");
  w_u64(w, (uint64_t)sort);
  w_str(w, "}}");
}

/* One event; `next` is the same thread's next event or NULL (for durations). */
static void w_event(writer_t *w, int tid, const trace_event_t *e, const trace_event_t *next)
{
  int kind = (int)(e->tk & 0xff);
  const kind_t *k = kind < AU__TRACE_MAX ? &w->kinds[kind] : NULL;
  if (!k || !k->k.name) return; /* never registered */
  uint64_t ts = w->t0 + (e->tk >> 8);
  uint64_t next_ts = next ? w->t0 + (next->tk >> 8) : UINT64_MAX;
  int flow = k->k.flow != NULL;
  uint64_t dur = 0;
  int complete = 0;
  if (flow) {
    /* A slice, so that the flow arrow has something to attach to; never overlapping the
     * thread's next event, so that slices on a thread nest. */
    complete = 1;
    dur = next_ts - ts < MARK_NS ? next_ts - ts : MARK_NS;
  } else if (k->duration && next && (int)(next->tk & 0xff) == TRACE_UNPARK) {
    complete = 1; /* from park to unpark: the next event of a parked thread is its wake-up */
    dur = next_ts - ts;
  } else if (k->span) {
    /* recorded where it ended, drawn from where it began (not before the trace did) */
    complete = 1;
    const uint64_t begin = e->arg[3] < w->t0 ? w->t0 : e->arg[3] > ts ? ts : e->arg[3];
    dur = ts - begin;
    ts = begin;
  }
  w_begin(w);
  w_str(w, "{\"name\":");
  w_quoted(w, k->k.name);
  w_str(w, complete ? ",\"cat\":\"augur\",\"ph\":\"X\",\"ts\":"
                    : ",\"cat\":\"augur\",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
  w_us(w, ts);
  if (complete) {
    w_str(w, ",\"dur\":");
    w_us(w, dur);
  }
  w_thread(w, tid);
  w_str(w, ",\"args\":{");
  for (int i = 0, n = 0; i < 4; i++) {
    const char *arg = k->k.arg[i];
    if (!arg) continue;
    w_str(w, n++ ? "," : "");
    w_quoted(w, arg);
    if (i == 3 && flow) { /* the flow id: 64 bits, more than a JSON reader's double holds */
      w_str(w, ":\"");
      w_hex(w, e->arg[i]);
      w_str(w, "\"");
    } else {
      w_str(w, ":");
      w_u64(w, e->arg[i]);
    }
  }
  w_str(w, "}}");
  uint64_t id = e->arg[3];
  if (flow && id) {
    w_begin(w);
    w_str(w, "{\"name\":");
    w_quoted(w, k->k.flow);
    w_str(w, k->k.flow_end ? ",\"cat\":\"augur.flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":\""
                           : ",\"cat\":\"augur.flow\",\"ph\":\"s\",\"id\":\"");
    w_hex(w, id);
    w_str(w, "\",\"ts\":");
    w_us(w, ts);
    w_thread(w, tid);
    w_str(w, "}");
  }
}

/* Walks one buffer's events in order. */
typedef struct cursor {
  const chunk_t *c;
  size_t i;
} cursor_t;

static const trace_event_t *cursor_next(cursor_t *it)
{
  while (it->c && it->i >= it->c->n) {
    it->c = it->c->next;
    it->i = 0;
  }
  return it->c ? &it->c->ev[it->i++] : NULL;
}

static int write_json(au_runtime_t *rt, struct trace *tr, uint64_t stop_ns)
{
  int rank = rt->rank, nodes = rt->nodes;
  size_t len = strlen(tr->path) + 16;
  char *path = malloc(len), *buf = malloc(WBUF);
  if (!path || !buf) {
    free(path);
    free(buf);
    return AU_ENOMEM;
  }
  if (nodes > 1)
    snprintf(path, len, "%s.%d", tr->path, rank);
  else
    snprintf(path, len, "%s", tr->path);
  FILE *f = fopen(path, "w");
  if (!f) {
    au__log(AU_LOG_ERROR, rt_log_rank(rt), "trace: cannot create %s: %s", path, strerror(errno));
    free(path);
    free(buf);
    return AU_EINVAL;
  }

  uint64_t events = 0, dropped = 0;
  for (int i = 0; i < tr->nbufs; i++) {
    tbuf_t *b = &tr->bufs[i];
    if (b->tail) b->tail->n = (size_t)(b->pos - b->tail->ev);
    for (chunk_t *c = b->head; c; c = c->next) events += c->n;
    dropped += b->dropped;
  }

  /* a copy of the kinds: registration may go on meanwhile (au__trace_kind) */
  kind_t *kinds = malloc(sizeof(tr->kinds));
  if (!kinds) {
    fclose(f);
    free(path);
    free(buf);
    return AU_ENOMEM;
  }
  pthread_mutex_lock(&tr->kinds_mu);
  memcpy(kinds, tr->kinds, sizeof(tr->kinds));
  pthread_mutex_unlock(&tr->kinds_mu);
  writer_t w = {.f = f, .buf = buf, .first = 1, .pid = rank + 1, .t0 = tr->t0, .kinds = kinds};
  w_str(&w, "{\"traceEvents\":[");
  char name[32];
  snprintf(name, sizeof(name), "node %d", rank);
  w_meta(&w, w.pid * TID_STRIDE, "process", name, rank);
  for (int i = 0; i < tr->nbufs; i++) {
    if (i < rt->nthreads)
      snprintf(name, sizeof(name), "sched-%d", i);
    else
      snprintf(name, sizeof(name), "%s", i == rt->nthreads ? "io" : "main");
    w_meta(&w, w.pid * TID_STRIDE + i, "thread", name, i);
  }
  for (int i = 0; i < tr->nbufs; i++) {
    cursor_t it = {tr->bufs[i].head, 0};
    const trace_event_t *e = cursor_next(&it);
    while (e) {
      const trace_event_t *next = cursor_next(&it);
      w_event(&w, w.pid * TID_STRIDE + i, e, next);
      e = next;
    }
  }
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  w_str(&w, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"generator\":");
  w_quoted(&w, GENERATOR);
  w_str(&w, ",\"host\":");
  w_quoted(&w, host);
  w_str(&w, ",\"clock\":\"CLOCK_MONOTONIC\"");
  const struct {
    const char *key;
    uint64_t v;
  } num[] = {
      {"rank", (uint64_t)rank}, {"nodes", (uint64_t)nodes}, {"threads", (uint64_t)rt->nthreads},
      {"events", events},       {"dropped", dropped},       {"max_events", tr->cap},
      {"start_ns", tr->t0},     {"stop_ns", stop_ns}};
  for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++) {
    w_str(&w, ",\"");
    w_str(&w, num[i].key);
    w_str(&w, "\":");
    w_u64(&w, num[i].v);
  }
  w_str(&w, "}}\n");
  w_flush(&w);
  free(buf);
  free(kinds);
  int err = ferror(f) ? errno : 0;
  if (fclose(f) != 0 && !err) err = errno;
  if (err) {
    au__log(AU_LOG_ERROR, rt_log_rank(rt), "trace: writing %s failed: %s", path, strerror(err));
    free(path);
    return AU_EINVAL;
  }
  free(path);
  return 0;
}

int au_trace_stop(au_runtime_t *rt)
{
  if (!rt) return AU_EINVAL;
  struct trace *tr = rt->trace;
  /* seq_cst: the threads of a run are joined before `running` is cleared */
  if (atomic_load(&rt->running)) return AU_EBUSY;
  if (!atomic_exchange(&rt->trace_on, 0)) return AU_EINVAL;
  uint64_t stop_ns = au_now_ns();
  /* The I/O thread: see trace_record. Its appends take nanoseconds. */
  while (atomic_load(&tr->io_busy)) sched_yield();
  /* Other threads: one that holds the mutex now finishes its append; any later one sees
   * the flag cleared. */
  pthread_mutex_lock(&tr->shared_mu);
  pthread_mutex_unlock(&tr->shared_mu);
  int rc = write_json(rt, tr, stop_ns);
  reset(tr);
  return rc;
}
