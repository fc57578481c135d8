/* test_wire.c — frame encoding and stream reassembly: random frames round-trip through
 * every chunking exactly, each malformed frame is refused with its own reason, and the
 * decoder's memory follows the bytes that arrived, never the length a peer announced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/wire.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void)
{
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* A value of random magnitude, so every msgpack integer width is exercised. */
static uint64_t rand_width(void)
{
  static const int bits[] = {0, 5, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64};
  int b = bits[next_rand() % 12];
  uint64_t v = next_rand();
  return b == 64 ? v : v & ((1ULL << b) - 1);
}

/* ---- a stream of random frames ------------------------------------------------------ */

enum { NFRAMES = 1500 };

typedef struct expect {
  wire_hdr_t h;
  size_t off, plen; /* payload within the stream */
} expect_t;

typedef struct stream {
  uint8_t *bytes;
  size_t len;
  expect_t ex[NFRAMES];
  int n;
} stream_t;

static void make_stream(stream_t *s, uint64_t first_seq)
{
  size_t cap = 8u << 20;
  s->bytes = malloc(cap);
  assert_non_null(s->bytes);
  s->len = 0;
  for (s->n = 0; s->n < NFRAMES; s->n++) {
    expect_t *e = &s->ex[s->n];
    memset(e, 0, sizeof *e);
    e->h.type = (uint8_t)next_rand();
    e->h.src = (uint32_t)rand_width();
    e->h.dst = (uint32_t)rand_width();
    e->h.seq = first_seq + (uint64_t)s->n;
    e->h.nextra = (int)(next_rand() % 5);
    for (int i = 0; i < e->h.nextra; i++) e->h.extra[i] = rand_width();
    uint64_t r = next_rand() % 100;
    e->plen = r < 20 ? 0 : r < 70 ? next_rand() % 64 : r < 98 ? next_rand() % 4096 : 100000;
    int n = wire_put_header(s->bytes + s->len, cap - s->len, &e->h, e->plen);
    assert_true(n > 4 && n <= WIRE_HEADER_MAX);
    s->len += (size_t)n;
    e->off = s->len;
    for (size_t i = 0; i < e->plen; i++) s->bytes[s->len++] = (uint8_t)next_rand();
    assert_true(s->len < cap - 200000);
  }
}

typedef struct check {
  const stream_t *s;
  int got;
  const uint8_t *chunk; /* the data of the current feed, for the zero-copy check */
  size_t chunk_len;
  int in_place; /* frames whose payload pointed into the fed data */
} check_t;

static int check_frame(void *arg, const wire_hdr_t *h, const uint8_t *payload, size_t plen)
{
  check_t *c = arg;
  assert_true(c->got < c->s->n);
  const expect_t *e = &c->s->ex[c->got++];
  assert_int_equal(h->type, e->h.type);
  assert_int_equal(h->src, e->h.src);
  assert_int_equal(h->dst, e->h.dst);
  assert_true(h->seq == e->h.seq);
  assert_int_equal(h->nextra, e->h.nextra);
  for (int i = 0; i < 4; i++) assert_true(h->extra[i] == (i < e->h.nextra ? e->h.extra[i] : 0));
  assert_int_equal(plen, e->plen);
  if (plen) assert_memory_equal(payload, c->s->bytes + e->off, plen);
  if (payload >= c->chunk && payload + plen <= c->chunk + c->chunk_len) c->in_place++;
  return 0;
}

/* Feeds the stream in chunks chosen by `mode`: 0 whole, 1 one byte at a time, 2 random
 * sizes up to 64 bytes, 3 random sizes up to 64 KiB. */
static void feed_stream(const stream_t *s, uint64_t first_seq, int mode)
{
  wire_decoder_t d;
  assert_int_equal(wire_decoder_init(&d, 0, NULL, first_seq), 0);
  check_t c = {.s = s};
  char err[WIRE_ERR_MAX] = "";
  size_t off = 0;
  while (off < s->len) {
    size_t n = mode == 0   ? s->len
               : mode == 1 ? 1
               : mode == 2 ? 1 + next_rand() % 64
                           : 1 + next_rand() % 65536;
    if (n > s->len - off) n = s->len - off;
    c.chunk = s->bytes + off, c.chunk_len = n;
    int rc = wire_decoder_feed(&d, s->bytes + off, n, check_frame, &c, err, sizeof err);
    assert_int_equal(rc, 0);
    assert_string_equal(err, "");
    assert_true(d.cap <= d.max_frame + 4);
    off += n;
  }
  assert_int_equal(c.got, s->n);
  assert_int_equal(d.len, 0);
  assert_true(d.next_seq == first_seq + (uint64_t)s->n);
  if (mode == 0) assert_int_equal(c.in_place, s->n); /* nothing was copied */
  wire_decoder_free(&d);
}

static void test_round_trip(void **state)
{
  (void)state;
  static stream_t s;
  static const uint64_t firsts[] = {1, 0, UINT64_MAX - 700};
  for (int f = 0; f < 3; f++) {
    make_stream(&s, firsts[f]);
    for (int mode = 0; mode < 4; mode++) feed_stream(&s, firsts[f], mode);
    free(s.bytes);
  }
}

/* ---- exact bytes --------------------------------------------------------------------- */

static void test_encoding_bytes(void **state)
{
  (void)state;
  uint8_t out[WIRE_HEADER_MAX + 8];
  wire_hdr_t h = {.type = 4, .src = 1, .dst = 2, .seq = 3, .nextra = 1, .extra = {300}};
  const uint8_t want[] = {13, 0, 0, 0, 0x95, 4, 1, 2, 3, 0xcd, 0x01, 0x2c, 'h', 'e', 'l', 'l', 'o'};
  assert_int_equal(wire_put_frame(out, sizeof out, &h, "hello", 5), sizeof want);
  assert_memory_equal(out, want, sizeof want);

  wire_hdr_t big = {.type = 255,
                    .src = UINT32_MAX,
                    .dst = UINT32_MAX,
                    .seq = UINT64_MAX,
                    .nextra = 4,
                    .extra = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX}};
  assert_int_equal(wire_put_header(out, sizeof out, &big, 0), WIRE_HEADER_MAX);
  assert_int_equal(out[0], WIRE_HEADER_MAX - 4);
  wire_hdr_t small = {0};
  assert_int_equal(wire_put_header(out, sizeof out, &small, 0), 4 + WIRE_MIN_HEADER);

  /* Errors: a short buffer, too many extras, a frame over the protocol's limit. */
  assert_int_equal(wire_put_header(out, WIRE_HEADER_MAX - 1, &big, 0), AU_EINVAL);
  assert_int_equal(wire_put_header(out, 3, &small, 0), AU_EINVAL);
  wire_hdr_t bad = {.nextra = 5};
  assert_int_equal(wire_put_header(out, sizeof out, &bad, 0), AU_EINVAL);
  bad.nextra = -1;
  assert_int_equal(wire_put_header(out, sizeof out, &bad, 0), AU_EINVAL);
  assert_int_equal(wire_put_header(out, sizeof out, &small, WIRE_MAX_FRAME - 5), 9);
  assert_int_equal(wire_put_header(out, sizeof out, &small, WIRE_MAX_FRAME - 4), AU_ERANGE);
  assert_int_equal(wire_put_frame(out, 12, &h, "hello", 5), AU_EINVAL);
}

/* Legal msgpack that is not the shortest form is accepted with the same values. */
static int keep_hdr(void *arg, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  assert_int_equal(n, 4);
  assert_memory_equal(p, "pay!", 4);
  *(wire_hdr_t *)arg = *h;
  return 0;
}

static void test_longer_encodings(void **state)
{
  (void)state;
  /* array16 of 5: int8 7, uint8 2, uint16 3, fixint 1, int16 9; then 4 payload bytes. */
  const uint8_t f[] = {18,   0,    0,    0, 0xdc, 0x00, 0x05, 0xd0, 0x07, 0xcc, 0x02,
                       0xcd, 0x00, 0x03, 1, 0xd1, 0x00, 0x09, 'p',  'a',  'y',  '!'};
  wire_decoder_t d;
  assert_int_equal(wire_decoder_init(&d, 0, NULL, 1), 0);
  wire_hdr_t h;
  char err[WIRE_ERR_MAX];
  assert_int_equal(wire_decoder_feed(&d, f, sizeof f, keep_hdr, &h, err, sizeof err), 0);
  assert_int_equal(d.frames, 1);
  assert_int_equal(h.type, 7);
  assert_int_equal(h.src, 2);
  assert_int_equal(h.dst, 3);
  assert_true(h.seq == 1);
  assert_int_equal(h.nextra, 1);
  assert_true(h.extra[0] == 9);
  wire_decoder_free(&d);
}

/* ---- refusals ------------------------------------------------------------------------ */

typedef struct bad_case {
  const char *name;
  uint8_t bytes[48];
  size_t len;
  size_t max_frame;
  uint64_t first_seq;
  int frames_before; /* valid frames that precede the bad one */
  const char *why;
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"zero length", {0, 0, 0, 0}, 4, 0, 0, 0, "zero-length frame"},
    {"too long",
     {0xff, 0xff, 0xff, 0xff},
     4,
     0,
     0,
     0,
     "frame length 4294967295 exceeds the limit of 67108864 bytes"},
    {"over a lower limit",
     {17, 0, 0, 0},
     4,
     16,
     0,
     0,
     "frame length 17 exceeds the limit of 16 bytes"},
    {"map",
     {5, 0, 0, 0, 0x84, 0, 0, 0, 0},
     9,
     0,
     0,
     0,
     "frame header is not a msgpack array (it starts with byte 0x84)"},
    {"integer",
     {1, 0, 0, 0, 0x07},
     5,
     0,
     0,
     0,
     "frame header is not a msgpack array (it starts with byte 0x07)"},
    {"3 fields",
     {4, 0, 0, 0, 0x93, 1, 0, 0},
     8,
     0,
     0,
     0,
     "frame header has 3 fields, expected 4 to 8"},
    {"9 fields",
     {10, 0, 0, 0, 0x99, 1, 0, 0, 0, 0, 0, 0, 0, 0},
     14,
     0,
     0,
     0,
     "frame header has 9 fields, expected 4 to 8"},
    {"array16 of 2",
     {5, 0, 0, 0, 0xdc, 0, 2, 1, 0},
     9,
     0,
     0,
     0,
     "frame header has 2 fields, expected 4 to 8"},
    {"array32 of 2^32-1",
     {9, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0},
     13,
     0,
     0,
     0,
     "frame header has 4294967295 fields, expected 4 to 8"},
    {"string dst",
     {6, 0, 0, 0, 0x94, 1, 0, 0xa1, 'a', 1},
     10,
     0,
     0,
     0,
     "frame header field 2 (dst) is not an unsigned integer"},
    {"negative dst",
     {5, 0, 0, 0, 0x94, 1, 0, 0xff, 1},
     9,
     0,
     0,
     0,
     "frame header field 2 (dst) is not an unsigned integer"},
    {"negative int64 seq",
     {13, 0, 0, 0, 0x94, 1, 0, 0, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0},
     17,
     0,
     0,
     0,
     "frame header field 3 (seq) is not an unsigned integer"},
    {"huge array as src",
     {9, 0, 0, 0, 0x94, 1, 0xdd, 0xff, 0xff, 0xff, 0xff, 0, 0},
     13,
     0,
     0,
     0,
     "frame header field 1 (src) is not an unsigned integer"},
    {"huge map as type",
     {9, 0, 0, 0, 0x94, 0xdf, 0xff, 0xff, 0xff, 0xff, 0, 0, 0},
     13,
     0,
     0,
     0,
     "frame header field 0 (type) is not an unsigned integer"},
    {"float extra",
     {10, 0, 0, 0, 0x95, 1, 0, 0, 0, 0xca, 0, 0, 0, 0},
     14,
     0,
     0,
     0,
     "frame header field 4 (extra0) is not an unsigned integer"},
    {"nil extra3",
     {9, 0, 0, 0, 0x98, 1, 0, 0, 0, 0, 0, 0, 0xc0},
     13,
     0,
     0,
     0,
     "frame header field 7 (extra3) is not an unsigned integer"},
    {"uint64 seq cut",
     {8, 0, 0, 0, 0x94, 1, 0, 0, 0xcf, 0, 0, 0},
     12,
     0,
     0,
     0,
     "header of 13 bytes overruns the 8-byte frame"},
    {"uint32 src cut",
     {4, 0, 0, 0, 0x94, 1, 0xce, 0},
     8,
     0,
     0,
     0,
     "header of at least 9 bytes overruns the 4-byte frame"},
    {"marker only",
     {1, 0, 0, 0, 0x94},
     5,
     0,
     0,
     0,
     "header of at least 5 bytes overruns the 1-byte frame"},
    {"array32 cut",
     {2, 0, 0, 0, 0xdd, 0},
     6,
     0,
     0,
     0,
     "header of at least 9 bytes overruns the 2-byte frame"},
    {"type 300",
     {7, 0, 0, 0, 0x94, 0xcd, 0x01, 0x2c, 0, 0, 0},
     11,
     0,
     0,
     0,
     "frame type 300 is out of range (0 to 255)"},
    {"src of 33 bits",
     {13, 0, 0, 0, 0x94, 1, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
     17,
     0,
     0,
     0,
     "frame header field 1 (src) is 4294967296, more than 32 bits"},
    {"unknown type", {5, 0, 0, 0, 0x94, 99, 0, 0, 0}, 9, 0, 0, 0, "unknown frame type 99"},
    {"first seq", {5, 0, 0, 0, 0x94, 1, 0, 0, 0}, 9, 0, 1, 0, "first sequence 0, expected 1"},
    {"seq gap",
     {5, 0, 0, 0, 0x94, 1, 0, 0, 5, 5, 0, 0, 0, 0x94, 1, 0, 0, 7},
     18,
     0,
     5,
     1,
     "sequence 7 after 5"},
    {"seq repeat",
     {5, 0, 0, 0, 0x94, 1, 0, 0, 5, 5, 0, 0, 0, 0x94, 1, 0, 0, 5},
     18,
     0,
     5,
     1,
     "sequence 5 after 5"},
};

static int count_frame(void *arg, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  (void)h, (void)p, (void)n;
  ++*(int *)arg;
  return 0;
}

/* Types 1..10 are known; 99 is not. */
static void some_types(uint8_t mask[32])
{
  memset(mask, 0, 32);
  for (unsigned t = 1; t <= 10; t++) wire_type_set(mask, t);
}

static void test_refusals(void **state)
{
  (void)state;
  uint8_t mask[32];
  some_types(mask);
  const uint8_t good[] = {5, 0, 0, 0, 0x94, 1, 0, 0, 0};
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const bad_case_t *b = &bad_cases[i];
    for (int bytewise = 0; bytewise < 2; bytewise++) {
      wire_decoder_t d;
      assert_int_equal(wire_decoder_init(&d, b->max_frame, mask, b->first_seq), 0);
      int frames = 0, rc = 0;
      char err[WIRE_ERR_MAX] = "";
      if (bytewise) {
        for (size_t k = 0; k < b->len && rc == 0; k++)
          rc = wire_decoder_feed(&d, b->bytes + k, 1, count_frame, &frames, err, sizeof err);
      } else {
        rc = wire_decoder_feed(&d, b->bytes, b->len, count_frame, &frames, err, sizeof err);
      }
      if (rc != AU_EPROTO || strcmp(err, b->why) != 0)
        fail_msg("case '%s' (%s): rc %d, reason '%s', expected '%s'", b->name,
                 bytewise ? "bytewise" : "whole", rc, err, b->why);
      assert_int_equal(frames, b->frames_before);
      /* Final: a good frame later is not looked at, and the reason repeats. */
      char again[WIRE_ERR_MAX] = "";
      assert_int_equal(
          wire_decoder_feed(&d, good, sizeof good, count_frame, &frames, again, sizeof again),
          AU_EPROTO);
      assert_string_equal(again, b->why);
      assert_int_equal(frames, b->frames_before);
      /* A short err buffer gets a terminated prefix. */
      char shortbuf[6];
      assert_int_equal(wire_decoder_feed(&d, NULL, 0, count_frame, &frames, shortbuf, 6),
                       AU_EPROTO);
      assert_int_equal(strlen(shortbuf), 5);
      wire_decoder_free(&d);
    }
  }
}

/* The announced length is judged on its own 4 bytes: nothing of the frame is kept. */
static void test_too_long_refused_before_buffering(void **state)
{
  (void)state;
  const uint8_t len[] = {0x01, 0x00, 0x00, 0x04}; /* 64 MiB + 1 */
  wire_decoder_t d;
  assert_int_equal(wire_decoder_init(&d, 0, NULL, 0), 0);
  int frames = 0;
  char err[WIRE_ERR_MAX];
  assert_int_equal(wire_decoder_feed(&d, len, 3, count_frame, &frames, err, sizeof err), 0);
  assert_true(d.cap <= WIRE_BUF_MIN);
  assert_int_equal(wire_decoder_feed(&d, NULL, 0, count_frame, &frames, err, sizeof err), 0);
  assert_int_equal(d.len, 3);
  assert_int_equal(wire_decoder_feed(&d, len + 3, 1, count_frame, &frames, err, sizeof err),
                   AU_EPROTO);
  assert_string_equal(err, "frame length 67108865 exceeds the limit of 67108864 bytes");
  assert_true(d.cap <= WIRE_BUF_MIN);
  wire_decoder_free(&d);

  /* Within one feed, after good frames, the bad length stops it before the tail. */
  static uint8_t buf[1 << 16];
  wire_hdr_t h = {.type = 1};
  int n = wire_put_frame(buf, sizeof buf, &h, NULL, 0);
  memcpy(buf + n, len, 4);
  memset(buf + n + 4, 0x55, sizeof buf - (size_t)n - 4);
  assert_int_equal(wire_decoder_init(&d, 0, NULL, 0), 0);
  assert_int_equal(wire_decoder_feed(&d, buf, sizeof buf, count_frame, &frames, err, sizeof err),
                   AU_EPROTO);
  assert_int_equal(frames, 1);
  assert_int_equal(d.cap, 0);
  wire_decoder_free(&d);
}

/* A peer that announces a large frame and trickles it in costs memory in proportion to
 * what it sent; a consumed large frame gives its buffer back. */
static void test_memory_follows_arrival(void **state)
{
  (void)state;
  const size_t plen = 8u << 20;
  uint8_t *f = malloc(plen + WIRE_HEADER_MAX);
  assert_non_null(f);
  wire_hdr_t h = {.type = 3, .seq = 0};
  int hn = wire_put_header(f, WIRE_HEADER_MAX, &h, plen);
  assert_true(hn > 0);
  memset(f + hn, 0xab, plen);
  size_t total = (size_t)hn + plen;

  wire_decoder_t d;
  assert_int_equal(wire_decoder_init(&d, 0, NULL, 0), 0);
  int frames = 0;
  char err[WIRE_ERR_MAX];
  assert_int_equal(wire_decoder_feed(&d, f, 100, count_frame, &frames, err, sizeof err), 0);
  assert_true(d.cap <= WIRE_BUF_MIN);
  size_t off = 100;
  while (off < total) {
    size_t n = total - off < 65536 ? total - off : 65536;
    assert_int_equal(wire_decoder_feed(&d, f + off, n, count_frame, &frames, err, sizeof err), 0);
    off += n;
    if (off < total) assert_true(d.cap <= 2 * off);
  }
  assert_int_equal(frames, 1);
  assert_int_equal(d.cap, 0);
  assert_null(d.buf);
  wire_decoder_free(&d);
  free(f);
}

/* Random garbage, in random chunks, never makes the buffer exceed max_frame + 4, and
 * ends in a refusal or a buffered partial frame, never a crash. */
static void test_garbage_bounded(void **state)
{
  (void)state;
  static uint8_t junk[1 << 16];
  int refused = 0;
  for (int round = 0; round < 2000; round++) {
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)next_rand();
    /* Half the rounds: plausible lengths, so headers get parsed too. */
    if (round & 1)
      for (size_t i = 0; i + 4 <= sizeof junk; i += 64) {
        junk[i] = (uint8_t)(next_rand() % 60);
        junk[i + 1] = junk[i + 2] = junk[i + 3] = 0;
      }
    size_t max = round % 3 == 0 ? 0 : 64 + next_rand() % 4096;
    wire_decoder_t d;
    assert_int_equal(wire_decoder_init(&d, max, NULL, next_rand()), 0);
    int frames = 0, rc = 0;
    char err[WIRE_ERR_MAX];
    size_t off = 0;
    while (off < sizeof junk && rc == 0) {
      size_t n = 1 + next_rand() % 512;
      if (n > sizeof junk - off) n = sizeof junk - off;
      rc = wire_decoder_feed(&d, junk + off, n, count_frame, &frames, err, sizeof err);
      assert_true(d.cap <= d.max_frame + 4);
      off += n;
    }
    refused += rc != 0;
    if (rc) assert_int_equal(rc, AU_EPROTO);
    wire_decoder_free(&d);
  }
  assert_true(refused > 1900);
}

static int stop_at_two(void *arg, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  (void)h, (void)p, (void)n;
  return ++*(int *)arg == 2 ? 42 : 0;
}

static void test_handler_stops(void **state)
{
  (void)state;
  uint8_t buf[256];
  size_t len = 0;
  for (uint64_t s = 0; s < 4; s++) {
    wire_hdr_t h = {.type = 2, .seq = s};
    len += (size_t)wire_put_frame(buf + len, sizeof buf - len, &h, "xy", 2);
  }
  wire_decoder_t d;
  assert_int_equal(wire_decoder_init(&d, 0, NULL, 0), 0);
  int calls = 0;
  char err[WIRE_ERR_MAX];
  assert_int_equal(wire_decoder_feed(&d, buf, len, stop_at_two, &calls, err, sizeof err), 42);
  assert_int_equal(calls, 2);
  assert_int_equal(wire_decoder_feed(&d, buf, len, stop_at_two, &calls, err, sizeof err), 42);
  assert_int_equal(calls, 2);
  assert_string_equal(err, "stopped: the frame handler returned 42");
  wire_decoder_free(&d);
}

static void test_init_arguments(void **state)
{
  (void)state;
  wire_decoder_t d;
  assert_int_equal(wire_decoder_init(&d, WIRE_MAX_FRAME + 1, NULL, 0), AU_EINVAL);
  assert_int_equal(wire_decoder_init(&d, WIRE_MIN_HEADER - 1, NULL, 0), AU_EINVAL);
  assert_int_equal(wire_decoder_init(&d, WIRE_MIN_HEADER, NULL, 0), 0);
  assert_int_equal(d.max_frame, WIRE_MIN_HEADER);
  wire_decoder_free(&d);
  assert_int_equal(wire_decoder_init(&d, 0, NULL, 0), 0);
  assert_int_equal(d.max_frame, WIRE_MAX_FRAME);
  wire_decoder_free(&d);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_encoding_bytes),
      cmocka_unit_test(test_longer_encodings),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_too_long_refused_before_buffering),
      cmocka_unit_test(test_memory_follows_arrival),
      cmocka_unit_test(test_garbage_bounded),
      cmocka_unit_test(test_handler_stops),
      cmocka_unit_test(test_init_arguments),
  };
  return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
