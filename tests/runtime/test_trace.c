/* test_trace.c — the trace recorder: events of every kind from scheduler threads, the
 * I/O thread's buffer and user threads, steals and parks from a skewed run, read back
 * from the JSON with a small strict parser of its own (not the tool's), so that a bug
 * shared by the writer and `augur trace` cannot hide. Also: nothing happens while off,
 * the cap and its dropped count, the rank suffix, API errors, and the cost of
 * trace_emit (printed as key=value lines). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "augur.h"
#include "runtime/rt.h"
#include "runtime/trace.h"
#include "tests/runtime/check.h"

/* --- a strict JSON reader (RFC 8259), building a tree ----------------------------------- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
  int type;
  double num;
  char *str;        /* J_STR */
  struct jv **item; /* J_ARR, J_OBJ */
  char **key;       /* J_OBJ */
  size_t n, cap;
} jv_t;

typedef struct jp {
  const char *s;
  size_t i, n;
  const char *err;
} jp_t;

static jv_t *jparse_value(jp_t *p, int depth);

static void jfree(jv_t *v)
{
  if (!v) return;
  for (size_t i = 0; i < v->n; i++) {
    jfree(v->item[i]);
    if (v->key) free(v->key[i]);
  }
  free(v->item);
  free(v->key);
  free(v->str);
  free(v);
}

static void jws(jp_t *p)
{
  while (p->i < p->n && strchr(" \t\r\n", p->s[p->i])) p->i++;
}

static jv_t *jfail(jp_t *p, const char *what, jv_t *v)
{
  if (!p->err) p->err = what;
  jfree(v);
  return NULL;
}

static jv_t *jnew(int type)
{
  jv_t *v = calloc(1, sizeof(*v));
  assert_non_null(v);
  v->type = type;
  return v;
}

static void jpush(jv_t *v, char *key, jv_t *item)
{
  if (v->n == v->cap) {
    v->cap = v->cap ? 2 * v->cap : 8;
    v->item = realloc(v->item, v->cap * sizeof(*v->item));
    assert_non_null(v->item);
    if (v->type == J_OBJ) {
      v->key = realloc(v->key, v->cap * sizeof(*v->key));
      assert_non_null(v->key);
    }
  }
  if (v->type == J_OBJ) v->key[v->n] = key;
  v->item[v->n++] = item;
}

static char *jparse_string(jp_t *p)
{
  if (p->i >= p->n || p->s[p->i] != '"') return NULL;
  p->i++;
  size_t cap = 16, len = 0;
  char *out = malloc(cap);
  assert_non_null(out);
  for (;;) {
    if (p->i >= p->n) break;
    unsigned char c = (unsigned char)p->s[p->i++];
    if (c == '"') {
      out[len] = '\0';
      return out;
    }
    if (c < 0x20) break;
    if (c == '\\') {
      if (p->i >= p->n) break;
      char e = p->s[p->i++];
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *k = strchr(from, e);
      if (e == 'u') {
        if (p->i + 4 > p->n) break;
        for (int j = 0; j < 4; j++)
          if (!strchr("0123456789abcdefABCDEF", p->s[p->i + j])) goto bad;
        p->i += 4;
        c = '?'; /* the tests only compare ASCII */
      } else if (e && k) {
        c = (unsigned char)to[k - from];
      } else {
        break;
      }
    }
    if (len + 2 > cap) {
      cap *= 2;
      out = realloc(out, cap);
      assert_non_null(out);
    }
    out[len++] = (char)c;
  }
bad:
  free(out);
  return NULL;
}

static jv_t *jparse_number(jp_t *p)
{
  size_t start = p->i;
  if (p->i < p->n && p->s[p->i] == '-') p->i++;
  if (p->i < p->n && p->s[p->i] == '0') {
    p->i++;
  } else {
    if (p->i >= p->n || p->s[p->i] < '1' || p->s[p->i] > '9') return NULL;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  if (p->i < p->n && p->s[p->i] == '.') {
    p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return NULL;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return NULL;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  char buf[64];
  size_t len = p->i - start;
  if (len >= sizeof(buf)) return NULL;
  memcpy(buf, p->s + start, len);
  buf[len] = '\0';
  jv_t *v = jnew(J_NUM);
  v->num = strtod(buf, NULL);
  return v;
}

static jv_t *jparse_value(jp_t *p, int depth)
{
  if (depth > 32) return jfail(p, "too deep", NULL);
  jws(p);
  if (p->i >= p->n) return jfail(p, "unexpected end", NULL);
  char c = p->s[p->i];
  if (c == '{' || c == '[') {
    int obj = c == '{';
    jv_t *v = jnew(obj ? J_OBJ : J_ARR);
    p->i++;
    jws(p);
    if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
      p->i++;
      return v;
    }
    for (;;) {
      char *key = NULL;
      if (obj) {
        jws(p);
        if (!(key = jparse_string(p))) return jfail(p, "expected a key", v);
        jws(p);
        if (p->i >= p->n || p->s[p->i] != ':') {
          free(key);
          return jfail(p, "expected ':'", v);
        }
        p->i++;
      }
      jv_t *item = jparse_value(p, depth + 1);
      if (!item) {
        free(key);
        return jfail(p, "bad value", v);
      }
      jpush(v, key, item);
      jws(p);
      if (p->i < p->n && p->s[p->i] == ',') {
        p->i++;
        continue;
      }
      if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
        p->i++;
        return v;
      }
      return jfail(p, "expected ',' or a closing bracket", v);
    }
  }
  if (c == '"') {
    jv_t *v = jnew(J_STR);
    if (!(v->str = jparse_string(p))) return jfail(p, "bad string", v);
    return v;
  }
  static const char *lit[] = {"true", "false", "null"};
  for (int k = 0; k < 3; k++) {
    size_t len = strlen(lit[k]);
    if (p->n - p->i >= len && memcmp(p->s + p->i, lit[k], len) == 0) {
      p->i += len;
      jv_t *v = jnew(k == 2 ? J_NULL : J_BOOL);
      v->num = k == 0;
      return v;
    }
  }
  jv_t *v = jparse_number(p);
  return v ? v : jfail(p, "bad number", NULL);
}

static jv_t *jget(const jv_t *o, const char *key)
{
  if (!o || o->type != J_OBJ) return NULL;
  for (size_t i = 0; i < o->n; i++)
    if (strcmp(o->key[i], key) == 0) return o->item[i];
  return NULL;
}

/* The string member `key`, or NULL. */
static const char *jstr_opt(const jv_t *o, const char *key)
{
  jv_t *v = jget(o, key);
  return v && v->type == J_STR ? v->str : NULL;
}

/* The string member `key`, which must be there. */
static const char *jstr(const jv_t *o, const char *key)
{
  const char *s = jstr_opt(o, key);
  if (!s) fail_msg("no string \"%s\" in the event", key);
  return s;
}

static double jnum(const jv_t *o, const char *key)
{
  jv_t *v = jget(o, key);
  assert_non_null(v);
  assert_int_equal(v->type, J_NUM);
  return v->num;
}

static char *slurp(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len < 2) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

/* Reads and parses a trace file; fails the test if it is not valid JSON of our shape. */
static jv_t *load(const char *path)
{
  char *text = slurp(path);
  if (!text) fail_msg("%s: %s", path, strerror(errno));
  jp_t p = {.s = text, .n = strlen(text)};
  jv_t *v = jparse_value(&p, 0);
  if (v) {
    jws(&p);
    if (p.i != p.n) {
      jfree(v);
      v = NULL;
      p.err = "text after the value";
    }
  }
  if (!v) fail_msg("%s: byte %zu: invalid JSON: %s", path, p.i, p.err ? p.err : "?");
  free(text);
  assert_int_equal(v->type, J_OBJ);
  jv_t *evs = jget(v, "traceEvents");
  assert_non_null(evs);
  assert_int_equal(evs->type, J_ARR);
  assert_non_null(jget(v, "otherData"));
  assert_string_equal(jstr(v, "displayTimeUnit"), "ns");
  return v;
}

/* --- helpers over a loaded trace -------------------------------------------------------- */

static int is_augur(const jv_t *e)
{
  const char *cat = jstr_opt(e, "cat");
  return cat && strcmp(cat, "augur") == 0;
}

static size_t count_kind(const jv_t *doc, const char *name)
{
  const jv_t *evs = jget(doc, "traceEvents");
  size_t n = 0;
  for (size_t i = 0; i < evs->n; i++)
    if (is_augur(evs->item[i]) && strcmp(jstr(evs->item[i], "name"), name) == 0) n++;
  return n;
}

static size_t count_augur(const jv_t *doc)
{
  const jv_t *evs = jget(doc, "traceEvents");
  size_t n = 0;
  for (size_t i = 0; i < evs->n; i++) n += is_augur(evs->item[i]);
  return n;
}

/* The tid of the thread named `name` in the metadata, or -1. */
static int tid_of(const jv_t *doc, const char *name)
{
  const jv_t *evs = jget(doc, "traceEvents");
  for (size_t i = 0; i < evs->n; i++) {
    const jv_t *e = evs->item[i];
    const char *n = jstr(e, "name");
    if (strcmp(n, "thread_name") == 0 && strcmp(jstr(jget(e, "args"), "name"), name) == 0)
      return (int)jnum(e, "tid");
  }
  return -1;
}

static void tmp_path(char *buf, size_t len, const char *what)
{
  snprintf(buf, len, "/tmp/augur-test-trace-%d-%s.json", (int)getpid(), what);
  unlink(buf);
}

static int exists(const char *path)
{
  return access(path, F_OK) == 0;
}

/* The parameter server's kinds, as actors/ registers them (the runtime knows none). */
enum {
  T_INTENT = AU__TRACE_USER,
  T_RELOC_START,
  T_RELOC_END,
  T_REPLICA_CREATE,
  T_REPLICA_SYNC,
  T_REPLICA_DROP,
  T_REMOTE_ACCESS,
  T_FORWARD,
  T_END
};

static const au__trace_kind_t test_kinds[T_END - T_INTENT] = {
    {"intent", {"table", "actor", "node", "worker"}, NULL, 0},
    {"relocation_start", {"table", "actor", "to", "flow"}, "relocation", 0},
    {"relocation_end", {"table", "actor", "to", "flow"}, "relocation", 1},
    {"replica_create", {"table", "actor", "owner", "bytes"}, NULL, 0},
    {"replica_sync", {"table", "actor", "owner", "rows"}, NULL, 0},
    {"replica_drop", {"table", "actor", "owner", NULL}, NULL, 0},
    {"remote_access", {"table", "actor", "node", "rows"}, NULL, 0},
    {"forward", {"table", "actor", "to", "hops"}, NULL, 0},
};

static au_runtime_t *new_rt(int threads)
{
  au_runtime_t *rt;
  assert_int_equal(au_runtime_create(&(au_runtime_opts_t){.threads = threads}, &rt), 0);
  for (int k = T_INTENT; k < T_END; k++)
    assert_int_equal(au__trace_kind(rt, k, &test_kinds[k - T_INTENT]), 0);
  return rt;
}

/* The placement kinds, emitted with arguments derived from (who, i). */
static const int placement[] = {T_INTENT,        T_REPLICA_CREATE, T_REPLICA_SYNC, T_REPLICA_DROP,
                                T_REMOTE_ACCESS, T_FORWARD,        T_RELOC_START,  T_RELOC_END};
#define NPLACEMENT 8

static void emit_placement(au_runtime_t *rt, uint64_t who, uint64_t i)
{
  for (int k = 0; k < NPLACEMENT; k++) {
    int kind = placement[k];
    uint64_t d =
        kind == T_RELOC_START || kind == T_RELOC_END ? au__trace_flow(who, i, 0) : 1000 * who + i;
    trace_emit(rt, kind, who, i, (uint64_t)k, d);
  }
}

/* --- off: nothing is recorded, nothing is written ---------------------------------------- */

static void test_off_records_nothing(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  char path[256];
  tmp_path(path, sizeof(path), "off");
  assert_int_equal(au_trace_enabled(rt), 0);
  for (int i = 0; i < 100; i++) emit_placement(rt, 1, (uint64_t)i);
  assert_int_equal(au_trace_stop(rt), AU_EINVAL); /* not recording */
  assert_false(exists(path));

  /* what was emitted while off does not show up once it is on */
  assert_int_equal(au_trace_start(rt, path), 0);
  assert_int_equal(au_trace_enabled(rt), 1);
  trace_emit(rt, T_INTENT, 5, 6, 7, 8);
  assert_int_equal(au_trace_stop(rt), 0);
  assert_int_equal(au_trace_enabled(rt), 0);
  for (int i = 0; i < 100; i++) emit_placement(rt, 1, (uint64_t)i);
  jv_t *doc = load(path);
  assert_int_equal(count_augur(doc), 1);
  assert_int_equal(count_kind(doc, "intent"), 1);
  assert_int_equal(jnum(jget(doc, "otherData"), "events"), 1);
  jfree(doc);

  /* a second session starts empty */
  assert_int_equal(au_trace_start(rt, path), 0);
  assert_int_equal(au_trace_stop(rt), 0);
  doc = load(path);
  assert_int_equal(count_augur(doc), 0);
  jfree(doc);
  unlink(path);
  au_runtime_destroy(rt);
}

/* --- API errors ------------------------------------------------------------------------ */

typedef struct {
  int rc;
} stopper_t;

static void try_stop(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)m;
  ((stopper_t *)st)->rc = au_trace_stop(au_actor_runtime(self));
}

static void test_api_errors(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(1);
  char path[256];
  tmp_path(path, sizeof(path), "api");
  assert_int_equal(au_trace_start(rt, NULL), AU_EINVAL);
  assert_int_equal(au_trace_start(rt, ""), AU_EINVAL);
  assert_int_equal(au_trace_start(rt, "/nonexistent-augur-dir/x.json"), AU_EINVAL);
  setenv("AU_TRACE_MAX_EVENTS", "12abc", 1);
  assert_int_equal(au_trace_start(rt, path), AU_EINVAL);
  setenv("AU_TRACE_MAX_EVENTS", "0", 1);
  assert_int_equal(au_trace_start(rt, path), AU_EINVAL);
  unsetenv("AU_TRACE_MAX_EVENTS");
  assert_int_equal(au_trace_enabled(rt), 0);

  assert_int_equal(au_trace_start(rt, path), 0);
  assert_int_equal(au_trace_start(rt, path), AU_EINVAL); /* already on */
  /* stopping from inside a run is refused, and recording goes on */
  au_actor_t *a;
  assert_int_equal(au_actor_spawn(rt, try_stop, sizeof(stopper_t), &a), 0);
  assert_int_equal(au_send(a, 0, NULL, 0), 0);
  assert_int_equal(au_runtime_run(rt), 0);
  assert_int_equal(((stopper_t *)au_actor_state(a))->rc, AU_EBUSY);
  assert_int_equal(au_trace_enabled(rt), 1);
  assert_false(exists(path));
  au_runtime_destroy(rt); /* stops the trace and writes it */
  jv_t *doc = load(path);
  jfree(doc);
  unlink(path);
}

/* --- kinds: registered by their users, by number and name ------------------------------- */

static void test_kinds_registered_by_users(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(1);
  const au__trace_kind_t mine = {"my_event", {"alpha", NULL, "gamma", NULL}, NULL, 0};
  assert_int_equal(au__trace_kind(rt, TRACE_PARK, &mine), AU_EINVAL); /* the runtime's */
  assert_int_equal(au__trace_kind(rt, AU__TRACE_USER - 1, &mine), AU_EINVAL);
  assert_int_equal(au__trace_kind(rt, AU__TRACE_MAX, &mine), AU_EINVAL);
  assert_int_equal(au__trace_kind(rt, T_INTENT, &mine), AU_EINVAL);  /* taken by "intent" */
  assert_int_equal(au__trace_kind(rt, T_INTENT, &test_kinds[0]), 0); /* again: a no-op */
  assert_int_equal(au__trace_kind(rt, T_END, &(au__trace_kind_t){.name = ""}), AU_EINVAL);
  char path[256];
  tmp_path(path, sizeof(path), "kinds");
  assert_int_equal(au_trace_start(rt, path), 0);
  au__trace(rt, T_END, 1, 2, 3, 4);                      /* not registered: not recorded */
  assert_int_equal(au__trace_kind(rt, T_END, &mine), 0); /* while recording */
  au__trace(rt, T_END, 1, 2, 3, 4);
  au__trace(rt, T_FORWARD, 5, 6, 7, 8);
  assert_int_equal(au_trace_stop(rt), 0);
  jv_t *doc = load(path);
  assert_int_equal(jnum(jget(doc, "otherData"), "events"), 2);
  assert_int_equal(count_augur(doc), 2);
  assert_int_equal(count_kind(doc, "my_event"), 1);
  assert_int_equal(count_kind(doc, "forward"), 1);
  const jv_t *evs = jget(doc, "traceEvents");
  for (size_t i = 0; i < evs->n; i++) {
    const jv_t *e = evs->item[i];
    if (strcmp(jstr(e, "name"), "my_event") != 0) continue;
    const jv_t *args = jget(e, "args");
    assert_int_equal(args->n, 2); /* the unnamed arguments are not written */
    assert_int_equal(jnum(args, "alpha"), 1);
    assert_int_equal(jnum(args, "gamma"), 3);
  }
  jfree(doc);
  unlink(path);
  au_runtime_destroy(rt);
}

/* --- spans: au_trace_span ------------------------------------------------------------- */

static void test_spans(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(1);
  char path[256];
  tmp_path(path, sizeof(path), "spans");
  au_trace_span(rt, "epoch", 1, au_now_ns()); /* off: not recorded */
  assert_int_equal(au_trace_start(rt, path), 0);
  const uint64_t before = au_now_ns() - 1000000; /* began before the trace did: clamped */
  au_trace_span(rt, "epoch", 7, before);
  const uint64_t b1 = au_now_ns();
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  au_trace_span(rt, "epoch", 8, b1);
  au_trace_span(rt, NULL, 1, b1); /* no name: ignored */
  au_trace_span(rt, "", 1, b1);   /* empty: ignored */
  for (int i = 0; i < 20; i++)    /* too long: not recorded, and takes no name's place */
    au_trace_span(rt, "a-name-of-forty-bytes-for-a-span-kind-xx", 1, b1);
  char names[16][8];
  for (int i = 0; i < 13; i++) { /* 12 names in all: "epoch" and 11 more; the 13th is not */
    snprintf(names[i], sizeof(names[i]), "s%d", i);
    au_trace_span(rt, names[i], (uint64_t)i, au_now_ns());
  }
  assert_int_equal(au_trace_stop(rt), 0);
  jv_t *doc = load(path);
  assert_int_equal(count_kind(doc, "epoch"), 2);
  for (int i = 0; i < 11; i++) assert_int_equal(count_kind(doc, names[i]), 1);
  assert_int_equal(count_kind(doc, "s11"), 0);
  assert_int_equal(count_kind(doc, "s12"), 0);
  const jv_t *evs = jget(doc, "traceEvents");
  const double start_us = jnum(jget(doc, "otherData"), "start_ns") / 1000.0;
  int seen = 0;
  for (size_t i = 0; i < evs->n; i++) {
    const jv_t *e = evs->item[i];
    if (!is_augur(e) || strcmp(jstr(e, "name"), "epoch") != 0) continue;
    assert_string_equal(jstr(e, "ph"), "X");
    const jv_t *args = jget(e, "args");
    assert_int_equal(args->n, 1); /* n only; the beginning is the slice's ts */
    const double n = jnum(args, "n"), t = jnum(e, "ts"), dur = jnum(e, "dur");
    if (n == 7) {
      assert_true(t >= start_us - 0.002 && t <= start_us + 1000); /* from the trace's start */
    } else {
      assert_true(n == 8);
      assert_true(fabs(t - (double)b1 / 1000.0) < 0.002); /* from where it began */
      assert_true(dur >= 2000);                           /* the 2 ms slept */
    }
    seen++;
  }
  assert_int_equal(seen, 2);
  jfree(doc);
  unlink(path);
  au_runtime_destroy(rt);
}

/* --- a run with steals and parks, and events from every kind of thread ------------------- */

#define SPAWNED      200
#define USER_THREADS 3
#define USER_EVENTS  500 /* rounds of emit_placement per user thread */
#define IO_EVENTS    300

static atomic_int ran_on; /* bit i: a busy actor ran on scheduler thread i */

static void busy(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)st;
  uint64_t i;
  memcpy(&i, m->data, sizeof(i));
  /* All busy actors start in the spawner's deque, so the other thread gets one only by
   * stealing: wait (a while, at most) until it has, so that the run surely steals. */
  atomic_fetch_or(&ran_on, 1 << rt_tls->sched->index);
  uint64_t deadline = au_now_ns() + 5000000000ull;
  while (atomic_load(&ran_on) != 3 && au_now_ns() < deadline) sched_yield();
  volatile uint64_t x = 0;
  for (int k = 0; k < 20000; k++) x += (uint64_t)k;
  (void)x;
  emit_placement(au_actor_runtime(self), 100, i);
}

static void spawner(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)st;
  if (m->type == 1) return; /* the timer: by now both threads have parked */
  /* a timer keeps the run from ending while the threads wait: they park */
  CHECK(au_timer_start(au_actor_runtime(self), self, 1, 30, 0, NULL) == 0);
  for (uint64_t i = 0; i < SPAWNED; i++) {
    au_actor_t *b;
    if (au_actor_spawn(au_actor_runtime(self), busy, 0, &b) != 0) {
      CHECK(!"au_actor_spawn failed");
      return;
    }
    CHECK(au_send(b, 0, &i, sizeof(i)) == 0);
  }
}

typedef struct {
  au_runtime_t *rt;
  uint64_t who;
  int as_io; /* pretend to be the runtime's I/O thread (its buffer) */
  atomic_int *go;
} emitter_t;

static void *emitter_main(void *arg)
{
  emitter_t *e = arg;
  rt_ctx_t ctx = {.rt = e->rt, .sched = NULL};
  if (e->as_io) rt_tls = &ctx;
  while (!atomic_load(e->go)) sched_yield();
  if (e->as_io) {
    for (uint64_t i = 0; i < IO_EVENTS; i++) trace_emit(e->rt, T_FORWARD, 3, 77, 2, i);
  } else {
    for (uint64_t i = 0; i < USER_EVENTS; i++) emit_placement(e->rt, e->who, i);
  }
  rt_tls = NULL;
  return NULL;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_run_every_thread(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  char path[256];
  tmp_path(path, sizeof(path), "run");
  atomic_store(&ran_on, 0);
  assert_int_equal(au_trace_start(rt, path), 0);

  atomic_int go = 0;
  pthread_t th[USER_THREADS + 1];
  emitter_t em[USER_THREADS + 1];
  for (int i = 0; i <= USER_THREADS; i++) {
    em[i] = (emitter_t){.rt = rt, .who = (uint64_t)i + 1, .as_io = i == USER_THREADS, .go = &go};
    assert_int_equal(pthread_create(&th[i], NULL, emitter_main, &em[i]), 0);
  }
  au_actor_t *sp;
  assert_int_equal(au_actor_spawn(rt, spawner, 0, &sp), 0);
  assert_int_equal(au_send(sp, 0, NULL, 0), 0);
  atomic_store(&go, 1);
  assert_int_equal(au_runtime_run(rt), 0);
  for (int i = 0; i <= USER_THREADS; i++) pthread_join(th[i], NULL);
  assert_checks();
  /* the main thread too, through the shared buffer */
  trace_emit(rt, T_RELOC_END, 9, 9, 0, au__trace_flow(9, 9, 0)); /* no start: no pair */
  trace_emit(rt, T_RELOC_START, 8, 8, 1, 0);                     /* flow 0: no arrow */

  au_sched_stats_t st[2];
  au_runtime_stats(rt, 2, st);
  uint64_t steals = st[0].steals + st[1].steals, parks = st[0].parks + st[1].parks;
  assert_int_equal(au_trace_stop(rt), 0);
  jv_t *doc = load(path);

  /* counts per kind */
  size_t per_kind = SPAWNED + USER_THREADS * USER_EVENTS;
  assert_int_equal(count_kind(doc, "intent"), per_kind);
  assert_int_equal(count_kind(doc, "replica_create"), per_kind);
  assert_int_equal(count_kind(doc, "replica_sync"), per_kind);
  assert_int_equal(count_kind(doc, "replica_drop"), per_kind);
  assert_int_equal(count_kind(doc, "remote_access"), per_kind);
  assert_int_equal(count_kind(doc, "forward"), per_kind + IO_EVENTS);
  assert_int_equal(count_kind(doc, "relocation_start"), per_kind + 1);
  assert_int_equal(count_kind(doc, "relocation_end"), per_kind + 1);
  assert_int_equal(atomic_load(&ran_on), 3); /* both threads ran busy actors: one stole */
  assert_true(steals > 0);
  assert_true(parks > 0); /* both waited for the timer */
  assert_int_equal(count_kind(doc, "steal"), steals);
  assert_int_equal(count_kind(doc, "park"), parks);
  assert_int_equal(count_kind(doc, "unpark"), parks);
  size_t total = 8 * per_kind + IO_EVENTS + 2 + steals + 2 * parks;
  assert_int_equal(count_augur(doc), total);
  const jv_t *other = jget(doc, "otherData");
  assert_int_equal(jnum(other, "events"), total);
  assert_int_equal(jnum(other, "dropped"), 0);
  assert_int_equal(jnum(other, "rank"), 0);
  assert_int_equal(jnum(other, "nodes"), 1);
  assert_int_equal(jnum(other, "threads"), 2);

  /* the threads, named */
  int tid_s0 = tid_of(doc, "sched-0"), tid_s1 = tid_of(doc, "sched-1");
  int tid_io = tid_of(doc, "io"), tid_main = tid_of(doc, "main");
  assert_true(tid_s0 >= 0 && tid_s1 >= 0 && tid_io >= 0 && tid_main >= 0);
  assert_true(tid_s0 != tid_s1 && tid_io != tid_main && tid_s0 != tid_io);

  /* per thread: timestamps never go back; events within the trace's span; the I/O
   * buffer holds exactly the I/O thread's forwards, with their arguments, in order */
  const jv_t *evs = jget(doc, "traceEvents");
  double start_us = jnum(other, "start_ns") / 1000.0, stop_us = jnum(other, "stop_ns") / 1000.0;
  int tids[4] = {tid_s0, tid_s1, tid_io, tid_main};
  size_t io_seen = 0, steals_seen = 0;
  for (int t = 0; t < 4; t++) {
    double last = 0;
    for (size_t i = 0; i < evs->n; i++) {
      const jv_t *e = evs->item[i];
      if (!is_augur(e) || (int)jnum(e, "tid") != tids[t]) continue;
      double ts = jnum(e, "ts");
      assert_true(ts >= last);
      assert_true(ts >= start_us - 0.001 && ts <= stop_us + 0.001);
      last = ts;
      assert_int_equal(jnum(e, "pid"), 1);
      const jv_t *args = jget(e, "args");
      const char *name = jstr(e, "name");
      const char *ph = jstr(e, "ph");
      if (strcmp(ph, "i") == 0) assert_string_equal(jstr(e, "s"), "t");
      if (tids[t] == tid_io) {
        assert_string_equal(name, "forward");
        assert_int_equal(jnum(args, "table"), 3);
        assert_int_equal(jnum(args, "actor"), 77);
        assert_int_equal(jnum(args, "to"), 2);
        assert_int_equal(jnum(args, "hops"), io_seen);
        io_seen++;
      }
      if (strcmp(name, "steal") == 0) {
        assert_true(tids[t] == tid_s0 || tids[t] == tid_s1);
        /* the victim is the other scheduler thread */
        assert_int_equal(jnum(args, "victim"), tids[t] == tid_s0 ? 1 : 0);
        steals_seen++;
      }
      if (strcmp(name, "park") == 0) {
        assert_true(tids[t] == tid_s0 || tids[t] == tid_s1);
        /* a park lasts until the thread's next event, its unpark, which says how long */
        assert_string_equal(ph, "X");
        const jv_t *u = NULL;
        for (size_t j = i + 1; j < evs->n && !u; j++)
          if (is_augur(evs->item[j]) && (int)jnum(evs->item[j], "tid") == tids[t]) u = evs->item[j];
        assert_non_null(u);
        assert_string_equal(jstr(u, "name"), "unpark");
        double dur = jnum(e, "dur"), ns = jnum(jget(u, "args"), "ns");
        assert_true(dur > 0);
        assert_true(dur * 1000 - ns < 2 && ns - dur * 1000 < 2);
        assert_true(jnum(u, "ts") - (ts + dur) < 0.002 && (ts + dur) - jnum(u, "ts") < 0.002);
        assert_true(jnum(args, "sleeping") >= 1 && jnum(args, "sleeping") <= 2);
      }
      if (strcmp(name, "intent") == 0 && jnum(args, "table") == 100)
        assert_true(tids[t] == tid_s0 || tids[t] == tid_s1); /* from the busy actors */
      if (strcmp(name, "intent") == 0 && jnum(args, "table") <= USER_THREADS)
        assert_int_equal(tids[t], tid_main); /* user threads share "main" */
    }
  }
  assert_int_equal(io_seen, IO_EVENTS);
  assert_int_equal(steals_seen, steals);

  /* flows: each relocation with a flow id has one arrow end ("s" on relocation_start,
   * "f" with bp=e on relocation_end), right after its slice, same ts and thread; every
   * start has exactly one finish */
  size_t starts = 0, finishes = 0;
  const char **sid = calloc(evs->n, sizeof(char *)), **fid = calloc(evs->n, sizeof(char *));
  assert_true(sid && fid);
  for (size_t i = 0; i < evs->n; i++) {
    const jv_t *e = evs->item[i];
    const char *cat = jstr_opt(e, "cat");
    if (!cat || strcmp(cat, "augur.flow") != 0) continue;
    assert_string_equal(jstr(e, "name"), "relocation");
    const char *ph = jstr(e, "ph"), *id = jstr(e, "id");
    assert_non_null(id);
    assert_true(i > 0);
    const jv_t *slice = evs->item[i - 1];
    assert_string_equal(jstr(slice, "ph"), "X");
    assert_true(jnum(slice, "ts") == jnum(e, "ts"));
    assert_true(jnum(slice, "tid") == jnum(e, "tid"));
    assert_string_equal(jstr(jget(slice, "args"), "flow"), id);
    if (strcmp(ph, "s") == 0) {
      assert_string_equal(jstr(slice, "name"), "relocation_start");
      sid[starts++] = id;
    } else {
      assert_string_equal(ph, "f");
      assert_string_equal(jstr(e, "bp"), "e");
      assert_string_equal(jstr(slice, "name"), "relocation_end");
      fid[finishes++] = id;
    }
  }
  assert_int_equal(starts, per_kind);       /* not the one with flow 0: no arrow */
  assert_int_equal(finishes, per_kind + 1); /* and one whose start is elsewhere */
  qsort(sid, starts, sizeof(char *), cmp_str);
  qsort(fid, finishes, sizeof(char *), cmp_str);
  for (size_t i = 0; i < starts; i++) {
    if (i > 0) assert_string_not_equal(sid[i - 1], sid[i]); /* ids are unique */
    const char **hit = bsearch(&sid[i], fid, finishes, sizeof(char *), cmp_str);
    assert_non_null(hit);
    assert_true(hit == fid || strcmp(hit[-1], sid[i]) != 0);
    assert_true(hit + 1 == fid + finishes || strcmp(hit[1], sid[i]) != 0);
  }
  free(sid);
  free(fid);
  jfree(doc);
  unlink(path);
  au_runtime_destroy(rt);
}

/* --- the cap ---------------------------------------------------------------------------- */

typedef struct {
  au_runtime_t *rt;
  int n;
} capper_t;

static void *cap_main(void *arg)
{
  capper_t *c = arg;
  for (int i = 0; i < c->n; i++) trace_emit(c->rt, TRACE_STEAL, 0, 0, 0, 0);
  return NULL;
}

static void test_cap_counts_dropped(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(2);
  char path[256];
  tmp_path(path, sizeof(path), "cap");
  setenv("AU_TRACE_MAX_EVENTS", "1000", 1);
  assert_int_equal(au_trace_start(rt, path), 0);
  for (int i = 0; i < 1500; i++) trace_emit(rt, T_INTENT, 1, (uint64_t)i, 0, 0);
  assert_int_equal(au_trace_stop(rt), 0);
  jv_t *doc = load(path);
  assert_int_equal(count_kind(doc, "intent"), 1000);
  assert_int_equal(jnum(jget(doc, "otherData"), "events"), 1000);
  assert_int_equal(jnum(jget(doc, "otherData"), "dropped"), 500);
  assert_int_equal(jnum(jget(doc, "otherData"), "max_events"), 1000);
  /* the first 1000 are kept, not the last */
  const jv_t *evs = jget(doc, "traceEvents");
  double max_actor = -1;
  for (size_t i = 0; i < evs->n; i++)
    if (is_augur(evs->item[i]) && jnum(jget(evs->item[i], "args"), "actor") > max_actor)
      max_actor = jnum(jget(evs->item[i], "args"), "actor");
  assert_int_equal(max_actor, 999);
  jfree(doc);

  /* several threads against one cap: the cap is granted per chunk, so what is kept may be
   * below it, but nothing is lost uncounted and the cap holds */
  assert_int_equal(au_trace_start(rt, path), 0);
  pthread_t th[4];
  capper_t c = {rt, 700};
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, cap_main, &c), 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  assert_int_equal(au_trace_stop(rt), 0);
  unsetenv("AU_TRACE_MAX_EVENTS");
  doc = load(path);
  size_t kept = count_kind(doc, "steal");
  double dropped = jnum(jget(doc, "otherData"), "dropped");
  assert_true(kept <= 1000);
  assert_true(dropped >= 1800);
  assert_int_equal(kept + (size_t)dropped, 2800);
  jfree(doc);
  unlink(path);
  au_runtime_destroy(rt);
}

/* --- a node of a cluster writes PATH.RANK ------------------------------------------------ */

static void test_rank_suffix(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(1);
  char path[256], ranked[300];
  tmp_path(path, sizeof(path), "rank");
  snprintf(ranked, sizeof(ranked), "%s.2", path);
  unlink(ranked);
  assert_int_equal(au_trace_start(rt, path), 0);
  trace_emit(rt, T_REMOTE_ACCESS, 1, 2, 0, 64);
  /* as if the runtime had joined a cluster of 3 as rank 2 (no network is touched) */
  rt->rank = 2;
  rt->nodes = 3;
  assert_int_equal(au_trace_stop(rt), 0);
  rt->rank = 0;
  rt->nodes = 1;
  assert_false(exists(path));
  jv_t *doc = load(ranked);
  assert_int_equal(jnum(jget(doc, "otherData"), "rank"), 2);
  assert_int_equal(jnum(jget(doc, "otherData"), "nodes"), 3);
  const jv_t *evs = jget(doc, "traceEvents");
  int named = 0;
  for (size_t i = 0; i < evs->n; i++) {
    const jv_t *e = evs->item[i];
    assert_int_equal(jnum(e, "pid"), 3); /* rank + 1 */
    const char *n = jstr(e, "name");
    if (strcmp(n, "process_name") == 0) {
      assert_string_equal(jstr(jget(e, "args"), "name"), "node 2");
      named = 1;
    }
  }
  assert_true(named);
  assert_int_equal(count_kind(doc, "remote_access"), 1);
  jfree(doc);
  unlink(ranked);
  au_runtime_destroy(rt);
}

/* --- what trace_emit costs ---------------------------------------------------------------- */

#define BENCH_EVENTS 200000
#define BENCH_RUNS   5

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ns per trace_emit from a scheduler thread (its own buffer), off and then on. */
typedef struct {
  double off[BENCH_RUNS], on[BENCH_RUNS];
  int run;
  char path[256];
  int started;
} bench_t;

static void bench_actor(au_actor_t *self, void *st, au_msg_t *m)
{
  (void)m;
  bench_t *b = *(bench_t **)st;
  au_runtime_t *rt = au_actor_runtime(self);
  uint64_t t0 = au_now_ns();
  for (uint64_t i = 0; i < BENCH_EVENTS; i++) trace_emit(rt, T_REMOTE_ACCESS, 1, i, 0, 8);
  b->off[b->run] = (double)(au_now_ns() - t0) / BENCH_EVENTS;
  b->started = au_trace_start(rt, b->path) == 0;
  t0 = au_now_ns();
  for (uint64_t i = 0; i < BENCH_EVENTS; i++) trace_emit(rt, T_REMOTE_ACCESS, 1, i, 0, 8);
  b->on[b->run] = (double)(au_now_ns() - t0) / BENCH_EVENTS;
}

static void test_emit_cost(void **state)
{
  (void)state;
  au_runtime_t *rt = new_rt(1);
  bench_t b = {.run = 0};
  tmp_path(b.path, sizeof(b.path), "bench");
  for (b.run = 0; b.run < BENCH_RUNS; b.run++) {
    au_actor_t *a;
    assert_int_equal(au_actor_spawn(rt, bench_actor, sizeof(bench_t *), &a), 0);
    *(bench_t **)au_actor_state(a) = &b;
    b.started = 0;
    assert_int_equal(au_send(a, 0, NULL, 0), 0);
    assert_int_equal(au_runtime_run(rt), 0);
    assert_true(b.started);
    assert_int_equal(au_trace_stop(rt), 0);
    /* all of them were recorded: the count is in otherData, at the end of the file */
    char *text = slurp(b.path);
    assert_non_null(text);
    char want[64];
    snprintf(want, sizeof(want), "\"events\":%d,\"dropped\":0,", BENCH_EVENTS);
    assert_non_null(strstr(text, want));
    free(text);
  }
  qsort(b.off, BENCH_RUNS, sizeof(double), cmp_double);
  qsort(b.on, BENCH_RUNS, sizeof(double), cmp_double);
  printf("trace_emit_off_ns=%.2f trace_emit_on_ns=%.2f events=%d runs=%d (medians)\n",
         b.off[BENCH_RUNS / 2], b.on[BENCH_RUNS / 2], BENCH_EVENTS, BENCH_RUNS);
  unlink(b.path);
  au_runtime_destroy(rt);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_off_records_nothing),
      cmocka_unit_test(test_api_errors),
      cmocka_unit_test(test_kinds_registered_by_users),
      cmocka_unit_test(test_spans),
      cmocka_unit_test(test_run_every_thread),
      cmocka_unit_test(test_cap_counts_dropped),
      cmocka_unit_test(test_rank_suffix),
      cmocka_unit_test(test_emit_cost),
  };
  return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
