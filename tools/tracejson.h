/* tracejson.h — reading the Chrome trace-event JSON that augur's tracing writes
 * (au_trace_stop, runtime/trace.c), for `augur trace` and `augur report`.
 *
 * The reader is a strict recursive-descent JSON parser over the whole file in memory
 * (libc only). It validates every byte, also of the parts it does not use, and stops at
 * the first error with "FILE: byte N: expected ...", N counted from 1; nesting is
 * bounded, so no input can overflow the stack. Events whose "cat" is "augur" must have a
 * "name", a "ph" and a numeric "ts"; other events are only checked to be JSON.
 */
#ifndef AUGUR_TOOLS_TRACEJSON_H
#define AUGUR_TOOLS_TRACEJSON_H

#include <stddef.h>
#include <stdint.h>

#define MAX_ARGS 8 /* "args" fields kept per event */

typedef struct reader {
  const char *s;
  size_t n, i;
  const char *file;
  char err[256]; /* set once, by the first error */
} reader_t;

typedef struct span {
  size_t a, b; /* [a, b) in the file */
} span_t;

/* The parts of one event that the summary uses. */
typedef struct event {
  size_t at; /* offset of its '{' */
  char name[40], cat[24], ph[4];
  int has_ts, has_dur, has_pid;
  int64_t ts, dur, pid; /* ts and dur in ns */
  int nargs;
  struct {
    char key[16];
    uint64_t v; /* a non-negative integer, or a hex string (the flow id) */
    int ok;
  } arg[MAX_ARGS];
} event_t;

/* What one file's "otherData" says. */
typedef struct info {
  char host[128];
  int64_t rank, events, dropped; /* -1: not given */
} info_t;

/* What to do with each event and with otherData: summary or merge. */
typedef struct sink {
  int (*event)(reader_t *r, void *ctx, const event_t *e, span_t raw);
  void *ctx;
} sink_t;

/* Parses one whole trace from r (r->s, r->n, r->file set; the rest zero): a
 * {"traceEvents":[...], ...} object or a bare array of events, each handed to sink. 0, or
 * -1 with the error in r->err. */
int tj_parse(reader_t *r, const sink_t *sink, info_t *info);
/* The value of the event's numeric (or hex string) argument `key`: 1, or 0 if none. */
int tj_arg(const event_t *e, const char *key, uint64_t *v);
/* Reads path whole. NULL (and a message on stderr, prefixed "prog: ") if it cannot. */
char *tj_slurp(const char *prog, const char *path, size_t *len);

#endif
