/* make_corpus.c — writes the seed corpus of fuzz_wire: valid streams (a handshake, data
 * frames of every header width, a large payload) and one example of each refusal, in the
 * fuzzer's input format (see fuzz_wire.c). Deterministic: running it again rewrites the
 * same files.
 *
 *   make_corpus tests/fuzz/corpus/wire
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/handshake.h"
#include "runtime/wire.h"

/* Config byte bits, as fuzz_wire.c reads them. */
#define CFG_MAX_DEFAULT 0x0f /* low 4 bits 15: WIRE_MAX_FRAME */
#define CFG_SEQ(s)      ((s) << 4)
#define CFG_SECRET      0x40
#define CFG_FEW_TYPES   0x80

typedef struct seed {
  uint8_t bytes[16384];
  size_t len;
} seed_t;

static const char *dir;

static void start(seed_t *s, uint8_t cfg, const uint8_t *chunks, size_t nchunks)
{
  s->len = 0;
  s->bytes[s->len++] = cfg;
  s->bytes[s->len++] = (uint8_t)nchunks;
  for (size_t i = 0; i < nchunks; i++) s->bytes[s->len++] = (uint8_t)(chunks[i] - 1);
}

static void raw(seed_t *s, const void *p, size_t n)
{
  if (n > sizeof s->bytes - s->len) {
    fprintf(stderr, "make_corpus: seed too large\n");
    exit(1);
  }
  memcpy(s->bytes + s->len, p, n);
  s->len += n;
}

static void frame(seed_t *s, const wire_hdr_t *h, const void *payload, size_t plen)
{
  int n = wire_put_frame(s->bytes + s->len, sizeof s->bytes - s->len, h, payload, plen);
  if (n < 0) {
    fprintf(stderr, "make_corpus: wire_put_frame: %d\n", n);
    exit(1);
  }
  s->len += (size_t)n;
}

/* A HELLO from rank src of a 4-node cluster "fuzz" (what fuzz_wire's side expects). */
static void hello(seed_t *s, uint32_t src, uint64_t auth)
{
  uint8_t payload[HS_NONCE_LEN + 4];
  for (int i = 0; i < HS_NONCE_LEN; i++) payload[i] = (uint8_t)(0xa0 + i);
  memcpy(payload + HS_NONCE_LEN, "fuzz", 4);
  wire_hdr_t h = {.type = HS_HELLO,
                  .src = src,
                  .seq = 0,
                  .nextra = 4,
                  .extra = {HS_MAGIC, HS_VERSION, 4, auth}};
  frame(s, &h, payload, sizeof payload);
}

static void save(const seed_t *s, const char *name)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(s->bytes, 1, s->len, f) != s->len || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* A seed of one raw (usually malformed) frame. */
static void bad(const char *name, uint8_t cfg, const void *p, size_t n)
{
  seed_t s;
  start(&s, cfg, NULL, 0);
  raw(&s, p, n);
  save(&s, name);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  dir = argv[1];
  seed_t s;
  static const uint8_t split[] = {1, 3, 7, 64, 200};

  /* Handshakes. */
  start(&s, CFG_MAX_DEFAULT, NULL, 0);
  hello(&s, 1, 0);
  save(&s, "ok-hello");
  start(&s, CFG_MAX_DEFAULT | CFG_SECRET, split, 2);
  hello(&s, 2, 1);
  uint8_t mac[HS_MAC_LEN];
  memset(mac, 0x3c, sizeof mac);
  wire_hdr_t auth = {.type = HS_AUTH, .src = 2, .seq = 1};
  frame(&s, &auth, mac, sizeof mac);
  save(&s, "ok-hello-auth");
  start(&s, CFG_MAX_DEFAULT, NULL, 0);
  hello(&s, 3, 0);
  wire_hdr_t d0 = {.type = 4, .src = 3, .dst = 7, .seq = 1, .nextra = 2, .extra = {9, 49152}};
  frame(&s, &d0, "ping", 4);
  save(&s, "ok-hello-then-data");
  start(&s, CFG_MAX_DEFAULT, NULL, 0);
  hello(&s, 0, 0);
  save(&s, "hs-own-rank");
  start(&s, CFG_MAX_DEFAULT | CFG_SECRET, NULL, 0);
  hello(&s, 1, 0);
  save(&s, "hs-no-secret");

  /* Data frames: every integer width, extras 0..4, in one stream, split variously. */
  start(&s, CFG_MAX_DEFAULT | CFG_SEQ(1), split, 5);
  static const uint64_t widths[] = {
      0, 1, 127, 128, 255, 256, 65535, 65536, 0xffffffff, 0x100000000ULL, UINT64_MAX};
  for (int i = 0; i < 11; i++) {
    wire_hdr_t h = {.type = (uint8_t)(1 + i % 6),
                    .src = (uint32_t)widths[i],
                    .dst = (uint32_t)widths[10 - i],
                    .seq = 1 + (uint64_t)i,
                    .nextra = i % 5};
    for (int k = 0; k < h.nextra; k++) h.extra[k] = widths[(i + k) % 11];
    uint8_t payload[40];
    memset(payload, i, sizeof payload);
    frame(&s, &h, payload, (size_t)(i * 4));
  }
  save(&s, "ok-data-widths");

  start(&s, 8 /* max_frame 4096 */, split + 3, 1);
  static uint8_t big[3000];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
  wire_hdr_t hb = {.type = 4, .src = 1, .dst = 2, .seq = 0};
  frame(&s, &hb, big, sizeof big);
  hb.seq = 1;
  frame(&s, &hb, big, 10);
  save(&s, "ok-large-payload");

  start(&s, CFG_MAX_DEFAULT | CFG_SEQ(3), NULL, 0);
  wire_hdr_t hm = {.type = 255,
                   .src = UINT32_MAX,
                   .dst = UINT32_MAX,
                   .seq = 3,
                   .nextra = 4,
                   .extra = {UINT64_MAX, 1, 0x80, UINT64_MAX - 1}};
  frame(&s, &hm, NULL, 0);
  save(&s, "ok-max-header");

  /* Legal msgpack, not the shortest form. */
  const uint8_t long_form[] = {18,   0,    0,    0, 0xdc, 0x00, 0x05, 0xd0, 0x07, 0xcc, 0x02,
                               0xcd, 0x00, 0x03, 0, 0xd1, 0x00, 0x09, 'p',  'a',  'y',  '!'};
  bad("ok-long-encodings", CFG_MAX_DEFAULT, long_form, sizeof long_form);

  /* One of each refusal. */
  bad("bad-zero-length", CFG_MAX_DEFAULT, (const uint8_t[]){0, 0, 0, 0}, 4);
  bad("bad-too-long", CFG_MAX_DEFAULT, (const uint8_t[]){0xff, 0xff, 0xff, 0xff, 0x94}, 5);
  bad("bad-over-limit", 0 /* max_frame 16 */, (const uint8_t[]){17, 0, 0, 0, 0x94, 1}, 6);
  bad("bad-map", CFG_MAX_DEFAULT, (const uint8_t[]){5, 0, 0, 0, 0x84, 0, 0, 0, 0}, 9);
  bad("bad-3-fields", CFG_MAX_DEFAULT, (const uint8_t[]){4, 0, 0, 0, 0x93, 1, 0, 0}, 8);
  bad("bad-9-fields", CFG_MAX_DEFAULT,
      (const uint8_t[]){10, 0, 0, 0, 0x99, 1, 0, 0, 0, 0, 0, 0, 0, 0}, 14);
  bad("bad-array32-count", CFG_MAX_DEFAULT,
      (const uint8_t[]){9, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0}, 13);
  bad("bad-string-field", CFG_MAX_DEFAULT, (const uint8_t[]){6, 0, 0, 0, 0x94, 1, 0, 0xa1, 'a', 1},
      10);
  bad("bad-negative", CFG_MAX_DEFAULT, (const uint8_t[]){5, 0, 0, 0, 0x94, 1, 0, 0xff, 1}, 9);
  bad("bad-nested-array", CFG_MAX_DEFAULT,
      (const uint8_t[]){9, 0, 0, 0, 0x94, 1, 0xdd, 0xff, 0xff, 0xff, 0xff, 0, 0}, 13);
  bad("bad-overrun", CFG_MAX_DEFAULT, (const uint8_t[]){8, 0, 0, 0, 0x94, 1, 0, 0, 0xcf, 0, 0, 0},
      12);
  bad("bad-type-300", CFG_MAX_DEFAULT, (const uint8_t[]){7, 0, 0, 0, 0x94, 0xcd, 1, 0x2c, 0, 0, 0},
      11);
  bad("bad-src-33-bits", CFG_MAX_DEFAULT,
      (const uint8_t[]){13, 0, 0, 0, 0x94, 1, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, 17);
  bad("bad-unknown-type", CFG_MAX_DEFAULT | CFG_FEW_TYPES,
      (const uint8_t[]){5, 0, 0, 0, 0x94, 99, 0, 0, 0}, 9);
  bad("bad-first-seq", CFG_MAX_DEFAULT | CFG_SEQ(1),
      (const uint8_t[]){5, 0, 0, 0, 0x94, 1, 0, 0, 0}, 9);
  bad("bad-seq-gap", CFG_MAX_DEFAULT | CFG_SEQ(1),
      (const uint8_t[]){5, 0, 0, 0, 0x94, 1, 0, 0, 1, 5, 0, 0, 0, 0x94, 1, 0, 0, 3}, 18);
  bad("bad-partial-tail", CFG_MAX_DEFAULT, (const uint8_t[]){5, 0, 0, 0, 0x94, 1, 0, 0, 0, 9, 0},
      11);
  return 0;
}
