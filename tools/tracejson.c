/* tracejson.c — the trace-event JSON reader (tracejson.h). */
#include "tools/tracejson.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64 /* nesting of arrays and objects */

static int fail(reader_t *r, const char *fmt, ...)
{
  if (r->err[0]) return -1;
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  if (r->i >= r->n)
    snprintf(r->err, sizeof(r->err), "%s: byte %zu: unexpected end of file, expected %s", r->file,
             r->n + 1, what);
  else
    snprintf(r->err, sizeof(r->err), "%s: byte %zu: expected %s", r->file, r->i + 1, what);
  return -1;
}

static void ws(reader_t *r)
{
  while (r->i < r->n &&
         (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
    r->i++;
}

static int peek(reader_t *r)
{
  ws(r);
  return r->i < r->n ? (unsigned char)r->s[r->i] : -1;
}

static int eat(reader_t *r, char c, const char *what)
{
  if (peek(r) != c) return fail(r, "%s", what);
  r->i++;
  return 0;
}

static int hexval(int c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A string; its text (ASCII, longer ones cut, \u escapes of non-ASCII as '?') goes to out
 * when out is not NULL. */
static int string(reader_t *r, char *out, size_t cap)
{
  size_t len = 0;
  if (eat(r, '"', "'\"' (a string)")) return -1;
  for (;;) {
    if (r->i >= r->n) return fail(r, "'\"' to close the string");
    unsigned char c = (unsigned char)r->s[r->i];
    if (c == '"') {
      r->i++;
      break;
    }
    if (c < 0x20) return fail(r, "a character, not control character 0x%02x, in a string", c);
    r->i++;
    if (c == '\\') {
      if (r->i >= r->n) return fail(r, "an escape after '\\'");
      char e = r->s[r->i];
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *k = e ? strchr(from, e) : NULL;
      if (k) {
        c = (unsigned char)to[k - from];
        r->i++;
      } else if (e == 'u') {
        r->i++;
        unsigned v = 0;
        for (int j = 0; j < 4; j++, r->i++) {
          int h = r->i < r->n ? hexval((unsigned char)r->s[r->i]) : -1;
          if (h < 0) return fail(r, "a hex digit in a \\u escape");
          v = v * 16 + (unsigned)h;
        }
        c = v < 0x80 ? (unsigned char)v : '?';
      } else {
        return fail(r, "an escape (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
      }
    }
    if (out && len + 1 < cap) out[len++] = (char)c;
  }
  if (out && cap) out[len] = '\0';
  return 0;
}

static int is_digit(reader_t *r)
{
  return r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9';
}

/* A number, by JSON's grammar; its text is s[sp->a, sp->b). */
static int number(reader_t *r, span_t *sp)
{
  ws(r);
  sp->a = r->i;
  if (r->i < r->n && r->s[r->i] == '-') r->i++;
  if (!is_digit(r)) return fail(r, "a digit");
  if (r->s[r->i] == '0')
    r->i++;
  else
    while (is_digit(r)) r->i++;
  if (r->i < r->n && r->s[r->i] == '.') {
    r->i++;
    if (!is_digit(r)) return fail(r, "a digit after '.'");
    while (is_digit(r)) r->i++;
  }
  if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
    r->i++;
    if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
    if (!is_digit(r)) return fail(r, "a digit in the exponent");
    while (is_digit(r)) r->i++;
  }
  sp->b = r->i;
  return 0;
}

/* The number as a non-negative integer: 0 when it is one (and fits), else -1. */
static int span_u64(const reader_t *r, span_t sp, uint64_t *out)
{
  uint64_t v = 0;
  if (sp.a == sp.b) return -1;
  for (size_t k = sp.a; k < sp.b; k++) {
    char c = r->s[k];
    if (c < '0' || c > '9') return -1;
    if (v > (UINT64_MAX - (uint64_t)(c - '0')) / 10) return -1;
    v = v * 10 + (uint64_t)(c - '0');
  }
  *out = v;
  return 0;
}

/* Microseconds (the trace's unit) to integer nanoseconds: exact for the plain decimals
 * augur writes, through a double otherwise. */
static int64_t span_ns(const reader_t *r, span_t sp)
{
  int64_t whole = 0, frac = 0;
  size_t k = sp.a;
  int neg = r->s[k] == '-', digits = 0;
  if (neg) k++;
  for (; k < sp.b && r->s[k] >= '0' && r->s[k] <= '9' && whole < INT64_MAX / 1000 / 10; k++)
    whole = whole * 10 + (r->s[k] - '0');
  if (k < sp.b && r->s[k] == '.') {
    for (k++; k < sp.b && r->s[k] >= '0' && r->s[k] <= '9'; k++)
      if (digits < 3) frac = frac * 10 + (r->s[k] - '0'), digits++;
  }
  if (k == sp.b) {
    while (digits++ < 3) frac *= 10;
    int64_t ns = whole * 1000 + frac;
    return neg ? -ns : ns;
  }
  char buf[64]; /* an exponent, or too long: let strtod do it */
  size_t len = sp.b - sp.a < sizeof(buf) - 1 ? sp.b - sp.a : sizeof(buf) - 1;
  memcpy(buf, r->s + sp.a, len);
  buf[len] = '\0';
  double us = strtod(buf, NULL) * 1000.0;
  return us > 9e18 ? INT64_MAX : us < -9e18 ? INT64_MIN : (int64_t)(us + (us < 0 ? -0.5 : 0.5));
}

static int value(reader_t *r, int depth);

/* Calls field(ctx, key) for each member; field must consume the value. */
static int object(reader_t *r, int depth, int (*field)(reader_t *, void *, const char *, int),
                  void *ctx)
{
  if (depth > MAX_DEPTH) return fail(r, "at most %d nested arrays and objects", MAX_DEPTH);
  if (eat(r, '{', "'{'")) return -1;
  if (peek(r) == '}') {
    r->i++;
    return 0;
  }
  for (;;) {
    char key[32];
    if (peek(r) != '"') return fail(r, "'\"' (an object key)");
    if (string(r, key, sizeof(key)) || eat(r, ':', "':' after an object key")) return -1;
    if (field ? field(r, ctx, key, depth + 1) : value(r, depth + 1)) return -1;
    int c = peek(r);
    if (c == ',') {
      r->i++;
      continue;
    }
    if (c == '}') {
      r->i++;
      return 0;
    }
    return fail(r, "',' or '}' in an object");
  }
}

/* Calls item(ctx) for each element; item must consume it. */
static int array(reader_t *r, int depth, int (*item)(reader_t *, void *, int), void *ctx)
{
  if (depth > MAX_DEPTH) return fail(r, "at most %d nested arrays and objects", MAX_DEPTH);
  if (eat(r, '[', "'['")) return -1;
  if (peek(r) == ']') {
    r->i++;
    return 0;
  }
  for (;;) {
    if (item ? item(r, ctx, depth + 1) : value(r, depth + 1)) return -1;
    int c = peek(r);
    if (c == ',') {
      r->i++;
      continue;
    }
    if (c == ']') {
      r->i++;
      return 0;
    }
    return fail(r, "',' or ']' in an array");
  }
}

static int literal(reader_t *r, const char *word)
{
  size_t len = strlen(word);
  if (r->n - r->i < len || memcmp(r->s + r->i, word, len) != 0) return fail(r, "a value");
  r->i += len;
  return 0;
}

/* Any JSON value, checked and skipped. */
static int value(reader_t *r, int depth)
{
  span_t sp;
  switch (peek(r)) {
  case '{':
    return object(r, depth, NULL, NULL);
  case '[':
    return array(r, depth, NULL, NULL);
  case '"':
    return string(r, NULL, 0);
  case 't':
    return literal(r, "true");
  case 'f':
    return literal(r, "false");
  case 'n':
    return literal(r, "null");
  default:
    if (peek(r) == '-' || (peek(r) >= '0' && peek(r) <= '9')) return number(r, &sp);
    return fail(r, "a value (object, array, string, number, true, false or null)");
  }
}

/* --- events ------------------------------------------------------------------------ */

static int arg_field(reader_t *r, void *ctx, const char *key, int depth)
{
  event_t *e = ctx;
  int c = peek(r);
  if (e->nargs == MAX_ARGS || (c != '"' && c != '-' && (c < '0' || c > '9')))
    return value(r, depth);
  int k = e->nargs++;
  snprintf(e->arg[k].key, sizeof(e->arg[k].key), "%s", key);
  e->arg[k].ok = 0;
  if (c == '"') { /* a flow id: hex */
    char text[24];
    if (string(r, text, sizeof(text))) return -1;
    char *end;
    errno = 0;
    e->arg[k].v = strtoull(text, &end, 16);
    e->arg[k].ok = text[0] && !*end && !errno && hexval((unsigned char)text[0]) >= 0;
    return 0;
  }
  span_t sp;
  if (number(r, &sp)) return -1;
  e->arg[k].ok = span_u64(r, sp, &e->arg[k].v) == 0;
  return 0;
}

static int event_field(reader_t *r, void *ctx, const char *key, int depth)
{
  event_t *e = ctx;
  int c = peek(r);
  char *str = !strcmp(key, "name")  ? e->name
              : !strcmp(key, "cat") ? e->cat
              : !strcmp(key, "ph")  ? e->ph
                                    : NULL;
  size_t cap = !strcmp(key, "name")  ? sizeof(e->name)
               : !strcmp(key, "cat") ? sizeof(e->cat)
                                     : sizeof(e->ph);
  if (str && c == '"') return string(r, str, cap);
  int is_ts = !strcmp(key, "ts"), is_dur = !strcmp(key, "dur"), is_pid = !strcmp(key, "pid");
  if ((is_ts || is_dur || is_pid) && (c == '-' || (c >= '0' && c <= '9'))) {
    span_t sp;
    if (number(r, &sp)) return -1;
    if (is_pid) {
      uint64_t v = 0;
      e->has_pid = span_u64(r, sp, &v) == 0 && v < (1ull << 31);
      e->pid = (int64_t)v;
    } else if (is_ts) {
      e->has_ts = 1;
      e->ts = span_ns(r, sp);
    } else {
      e->has_dur = 1;
      e->dur = span_ns(r, sp);
    }
    return 0;
  }
  if (!strcmp(key, "args") && c == '{') return object(r, depth, arg_field, e);
  return value(r, depth);
}

int tj_arg(const event_t *e, const char *key, uint64_t *v)
{
  for (int k = 0; k < e->nargs; k++)
    if (e->arg[k].ok && strcmp(e->arg[k].key, key) == 0) {
      *v = e->arg[k].v;
      return 1;
    }
  return 0;
}

typedef struct parse {
  const sink_t *sink;
  info_t *info;
  int events_seen;
} parse_t;

static int event_item(reader_t *r, void *ctx, int depth)
{
  parse_t *p = ctx;
  event_t e;
  memset(&e, 0, sizeof(e));
  if (peek(r) != '{') return fail(r, "'{' (an event is an object)");
  e.at = r->i;
  if (object(r, depth, event_field, &e)) return -1;
  span_t raw = {e.at, r->i};
  if (strcmp(e.cat, "augur") == 0 && (!e.name[0] || !e.ph[0] || !e.has_ts)) {
    r->i = e.at;
    return fail(r, "an augur event (\"cat\":\"augur\") with a \"name\", a \"ph\" and a "
                   "numeric \"ts\"");
  }
  return p->sink->event(r, p->sink->ctx, &e, raw);
}

static int info_field(reader_t *r, void *ctx, const char *key, int depth)
{
  info_t *in = ctx;
  int c = peek(r);
  if (!strcmp(key, "host") && c == '"') return string(r, in->host, sizeof(in->host));
  int64_t *num = !strcmp(key, "rank")      ? &in->rank
                 : !strcmp(key, "events")  ? &in->events
                 : !strcmp(key, "dropped") ? &in->dropped
                                           : NULL;
  if (num && (c == '-' || (c >= '0' && c <= '9'))) {
    span_t sp;
    uint64_t v = 0;
    if (number(r, &sp)) return -1;
    if (span_u64(r, sp, &v) == 0 && v < INT64_MAX) *num = (int64_t)v;
    return 0;
  }
  return value(r, depth);
}

static int top_field(reader_t *r, void *ctx, const char *key, int depth)
{
  parse_t *p = ctx;
  if (!strcmp(key, "traceEvents")) {
    if (peek(r) != '[') return fail(r, "'[' (traceEvents is an array of events)");
    p->events_seen = 1;
    return array(r, depth, event_item, p);
  }
  if (!strcmp(key, "otherData")) {
    if (peek(r) != '{') return fail(r, "'{' (otherData is an object)");
    return object(r, depth, info_field, p->info);
  }
  return value(r, depth);
}

int tj_parse(reader_t *r, const sink_t *sink, info_t *info)
{
  parse_t p = {.sink = sink, .info = info};
  *info = (info_t){.rank = -1, .events = -1, .dropped = -1};
  int c = peek(r);
  if (c == '[') {
    if (array(r, 1, event_item, &p)) return -1;
  } else if (c == '{') {
    if (object(r, 1, top_field, &p)) return -1;
    if (!p.events_seen) {
      r->i = 0;
      return fail(r, "a \"traceEvents\" array in the top-level object");
    }
  } else {
    return fail(r, "'{' or '[' (a Chrome trace-event JSON file)");
  }
  if (peek(r) != -1) return fail(r, "the end of the file after the trace");
  return 0;
}

char *tj_slurp(const char *prog, const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 20, n = 0, got;
  char *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *bigger = realloc(buf, cap *= 2);
      if (!bigger) free(buf);
      buf = bigger;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf || err) {
    fprintf(stderr, "%s: cannot read %s: %s\n", prog, path,
            buf ? strerror(errno) : "out of memory");
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}
