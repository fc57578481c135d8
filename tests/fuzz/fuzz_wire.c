/* fuzz_wire.c — libFuzzer target for the frame decoder and the handshake.
 *
 * Input: cfg (1 byte) | n (1 byte, low 3 bits used) | n chunk sizes (byte + 1 each) |
 * the stream. cfg bits 0-3: max_frame (15: WIRE_MAX_FRAME, else 16 << k); bits 4-5: the
 * first seq; bit 6: the handshake side has a secret; bit 7: only types 1..6 are known.
 *
 * The stream is decoded twice: whole, and in chunks of the given sizes (cycled). Both must
 * deliver the same frames and end with the same result and reason, or the target aborts.
 * Every delivered header is re-encoded and decoded again to the same fields, and every
 * frame goes to a handshake state machine (rank 0 of 4 in cluster "fuzz"), which is
 * started again after it finishes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/handshake.h"
#include "runtime/wire.h"

#define SECRET "\001fuzz-secret\177"

typedef struct run {
  uint64_t hash, frames;
  int with_hs;
  int secret;
  hs_t hs;
  int hs_live;
} run_t;

static uint64_t mix(uint64_t h, uint64_t v)
{
  h ^= v;
  h *= 0x100000001b3ULL;
  return h ^ (h >> 29);
}

static void hs_start(run_t *r)
{
  if (hs_init(&r->hs, 0, 4, "fuzz", r->secret ? SECRET : NULL, r->secret ? strlen(SECRET) : 0, -1))
    abort();
  uint8_t out[HS_FRAME_MAX];
  if (hs_hello_frame(&r->hs, out, sizeof out) <= 0) abort();
  r->hs_live = 1;
}

static int keep(void *arg, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  (void)p, (void)n;
  *(wire_hdr_t *)arg = *h;
  return 0;
}

/* Encodes h again and decodes the result: the same fields must come back. */
static void reencode(const wire_hdr_t *h, size_t plen)
{
  uint8_t buf[WIRE_HEADER_MAX];
  int n = wire_put_header(buf, sizeof buf, h, plen);
  if (n == AU_ERANGE) return; /* a long frame under a lower limit: nothing to compare */
  if (n < WIRE_MIN_HEADER + 4) abort();
  /* Only the header: cut the length field down to it. */
  uint32_t hl = (uint32_t)n - 4;
  buf[0] = (uint8_t)hl, buf[1] = buf[2] = buf[3] = 0;
  wire_decoder_t d;
  if (wire_decoder_init(&d, 0, NULL, h->seq)) abort();
  wire_hdr_t back;
  memset(&back, 0, sizeof back);
  if (wire_decoder_feed(&d, buf, (size_t)n, keep, &back, NULL, 0) != 0 || d.frames != 1) abort();
  wire_decoder_free(&d);
  if (back.type != h->type || back.src != h->src || back.dst != h->dst || back.seq != h->seq ||
      back.nextra != h->nextra || memcmp(back.extra, h->extra, sizeof back.extra) != 0)
    abort();
}

static int on_frame(void *arg, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  run_t *r = arg;
  uint64_t x = r->hash;
  x = mix(x, h->type), x = mix(x, h->src), x = mix(x, h->dst), x = mix(x, h->seq);
  x = mix(x, (uint64_t)h->nextra);
  for (int i = 0; i < 4; i++) x = mix(x, h->extra[i]);
  x = mix(x, n);
  for (size_t i = 0; i < n; i++) x = mix(x, p[i]);
  r->hash = x;
  r->frames++;
  if (!r->with_hs) return 0;
  reencode(h, n);
  if (!r->hs_live) hs_start(r);
  uint8_t out[HS_FRAME_MAX];
  size_t out_len = 7;
  char why[HS_REASON_MAX];
  int rc = hs_on_frame(&r->hs, h, p, n, out, sizeof out, &out_len, why, sizeof why);
  if (rc != HS_MORE && rc != HS_DONE && rc != HS_FAIL) abort();
  if (out_len > sizeof out || (rc != HS_MORE && out_len != 0)) abort();
  if (rc != HS_MORE) {
    /* A reason may quote what the peer sent, escaped to printable ASCII; the secret holds
     * bytes that are never printed as they are, so finding it means it was leaked. */
    if (rc == HS_FAIL && (why[0] == '\0' || strstr(why, SECRET))) abort();
    hs_clear(&r->hs);
    r->hs_live = 0;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2) return 0;
  uint8_t cfg = data[0];
  size_t nchunks = data[1] & 7;
  if (size < 2 + nchunks) return 0;
  const uint8_t *chunk = data + 2;
  const uint8_t *s = data + 2 + nchunks;
  size_t len = size - 2 - nchunks;

  size_t max_frame = (cfg & 15) == 15 ? 0 : (size_t)16 << (cfg & 15);
  uint64_t first_seq = (cfg >> 4) & 3;
  uint8_t known[32] = {0};
  for (unsigned t = 1; t <= 6; t++) wire_type_set(known, t);
  const uint8_t *mask = cfg & 0x80 ? known : NULL;

  run_t whole = {.with_hs = 1, .secret = (cfg >> 6) & 1};
  run_t split = {0};
  wire_decoder_t a, b;
  if (wire_decoder_init(&a, max_frame, mask, first_seq) ||
      wire_decoder_init(&b, max_frame, mask, first_seq))
    abort();
  char err_a[WIRE_ERR_MAX] = "", err_b[WIRE_ERR_MAX] = "";

  int rc_a = wire_decoder_feed(&a, s, len, on_frame, &whole, err_a, sizeof err_a);
  int rc_b = 0;
  size_t off = 0, k = 0;
  while (off < len && rc_b == 0) {
    size_t n = nchunks ? (size_t)chunk[k++ % nchunks] + 1 : len;
    if (n > len - off) n = len - off;
    rc_b = wire_decoder_feed(&b, s + off, n, on_frame, &split, err_b, sizeof err_b);
    if (b.cap > b.max_frame + 4) abort();
    off += n;
  }
  if (rc_a != rc_b || whole.frames != split.frames || whole.hash != split.hash ||
      strcmp(err_a, err_b) != 0 || (rc_a == 0 && a.len != b.len)) {
    fprintf(stderr, "whole: %d '%s' %llu frames; split: %d '%s' %llu frames\n", rc_a, err_a,
            (unsigned long long)whole.frames, rc_b, err_b, (unsigned long long)split.frames);
    abort();
  }
  if (rc_a != 0 && rc_a != AU_EPROTO) abort();
  wire_decoder_free(&a);
  wire_decoder_free(&b);
  if (whole.hs_live) hs_clear(&whole.hs);
  return 0;
}
