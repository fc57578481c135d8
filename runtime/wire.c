/* wire.c — frame headers packed with msgpack-c into the caller's buffer, and a stream
 * decoder that hands whole frames to a handler without copying those that arrive whole.
 *
 * The decoder reads a header itself, not with msgpack-c's general unpacker: a header is
 * an array of 4..8 integers, and every marker is checked (kind, length, inside the frame)
 * before a byte of value is read, so nothing a peer sends can make it allocate or read
 * past the frame. (msgpack-c would allocate a container's storage from the count in its
 * marker, before it has seen one element, and cost more than the rest of a frame's
 * handling: the unpacker was 7% of a receiving node's time at 4 KiB messages.)
 */
#include "runtime/wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const field_name[8] = {"type",   "src",    "dst",    "seq",
                                          "extra0", "extra1", "extra2", "extra3"};

/* ---- encoding ---------------------------------------------------------------------- */

typedef struct outbuf {
  uint8_t *p;
  size_t len, cap;
} outbuf_t;

/* msgpack_packer's write callback: appends to a fixed buffer, fails when it is full. */
static int outbuf_write(void *data, const char *buf, size_t len)
{
  outbuf_t *o = data;
  if (len > o->cap - o->len) return -1;
  memcpy(o->p + o->len, buf, len);
  o->len += len;
  return 0;
}

static void put_le32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t get_le32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int wire_put_header(uint8_t *out, size_t cap, const wire_hdr_t *h, size_t payload_len)
{
  if (h->nextra < 0 || h->nextra > WIRE_MAX_EXTRA) return AU_EINVAL;
  if (cap < 4) return AU_EINVAL;
  outbuf_t o = {out, 4, cap};
  msgpack_packer pk;
  msgpack_packer_init(&pk, &o, outbuf_write);
  /* msgpack-c packs every unsigned value in its shortest form. */
  int bad = msgpack_pack_array(&pk, 4 + (size_t)h->nextra);
  bad |= msgpack_pack_uint8(&pk, h->type);
  bad |= msgpack_pack_uint32(&pk, h->src);
  bad |= msgpack_pack_uint32(&pk, h->dst);
  bad |= msgpack_pack_uint64(&pk, h->seq);
  for (int i = 0; i < h->nextra; i++) bad |= msgpack_pack_uint64(&pk, h->extra[i]);
  if (bad) return AU_EINVAL;
  size_t hlen = o.len - 4;
  if (payload_len > WIRE_MAX_FRAME - hlen) return AU_ERANGE;
  put_le32(out, (uint32_t)(hlen + payload_len));
  return (int)o.len;
}

int wire_put_frame(uint8_t *out, size_t cap, const wire_hdr_t *h, const void *payload,
                   size_t payload_len)
{
  int n = wire_put_header(out, cap, h, payload_len);
  if (n < 0) return n;
  if (payload_len > cap - (size_t)n) return AU_EINVAL;
  if (payload_len) memcpy(out + n, payload, payload_len);
  return n + (int)payload_len;
}

/* ---- decoding ---------------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static int fail(wire_decoder_t *d, int code, const char *fmt,
                                                      ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  d->err = code;
  return code;
}

int wire_decoder_init(wire_decoder_t *d, size_t max_frame, const uint8_t known_types[32],
                      uint64_t first_seq)
{
  if (max_frame == 0) max_frame = WIRE_MAX_FRAME;
  if (max_frame < WIRE_MIN_HEADER || max_frame > WIRE_MAX_FRAME) return AU_EINVAL;
  memset(d, 0, sizeof *d);
  d->max_frame = max_frame;
  d->next_seq = first_seq;
  if (known_types)
    memcpy(d->known, known_types, sizeof d->known);
  else
    memset(d->known, 0xff, sizeof d->known);
  return 0;
}

void wire_decoder_free(wire_decoder_t *d)
{
  free(d->buf);
  d->buf = NULL;
  d->len = d->cap = 0;
}

/* Bytes an integer whose marker is b occupies, or 0 if b does not start an integer.
 * Signed markers count: msgpack reads a non-negative int8..int64 as a positive integer,
 * and a negative one is refused later, by value. */
static size_t int_size(uint8_t b)
{
  if (b <= 0x7f || b >= 0xe0) return 1;                      /* positive / negative fixint */
  if (b >= 0xcc && b <= 0xcf) return 1 + (1u << (b - 0xcc)); /* uint8..uint64 */
  if (b >= 0xd0 && b <= 0xd3) return 1 + (1u << (b - 0xd0)); /* int8..int64 */
  return 0;
}

/* The value of the integer at p, whose marker int_size accepted and whose bytes are all
 * in the frame; -1 in *neg for a negative one (not an unsigned integer), else 0. */
static uint64_t int_value(const uint8_t *p, int *neg)
{
  uint8_t b = p[0];
  *neg = 0;
  if (b <= 0x7f) return b;
  if (b >= 0xe0 || (b >= 0xd0 && (p[1] & 0x80))) { /* negative fixint, or int8..int64 < 0 */
    *neg = -1;
    return 0;
  }
  size_t n = b >= 0xd0 ? 1u << (b - 0xd0) : 1u << (b - 0xcc); /* big-endian bytes */
  uint64_t v = 0;
  for (size_t i = 1; i <= n; i++) v = v << 8 | p[i];
  return v;
}

static int overrun(wire_decoder_t *d, size_t need, int exact, size_t flen)
{
  return fail(d, AU_EPROTO, "header of %s%zu bytes overruns the %zu-byte frame",
              exact ? "" : "at least ", need, flen);
}

/* Checks the shape of the header at f (the frame after its length field, flen >= 1
 * bytes) and unpacks it into h. Sets *hlen to the header's size. */
static int parse_header(wire_decoder_t *d, const uint8_t *f, size_t flen, wire_hdr_t *h,
                        size_t *hlen)
{
  size_t off, count;
  uint8_t b = f[0];
  if ((b & 0xf0) == 0x90) {
    count = b & 15, off = 1;
  } else if (b == 0xdc || b == 0xdd) { /* array16 / array32: legal, if not the shortest */
    off = b == 0xdc ? 3 : 5;
    if (flen < off) return overrun(d, off + 4, 0, flen);
    count = b == 0xdc ? (size_t)f[1] << 8 | f[2]
                      : (size_t)f[1] << 24 | (size_t)f[2] << 16 | (size_t)f[3] << 8 | f[4];
  } else {
    return fail(d, AU_EPROTO, "frame header is not a msgpack array (it starts with byte 0x%02x)",
                b);
  }
  if (count < 4 || count > 8)
    return fail(d, AU_EPROTO, "frame header has %zu fields, expected 4 to 8", count);
  size_t at[8]; /* where each field starts */
  for (size_t i = 0; i < count; i++) {
    if (off >= flen) return overrun(d, off + (count - i), 0, flen);
    size_t n = int_size(f[off]);
    if (n == 0)
      return fail(d, AU_EPROTO, "frame header field %zu (%s) is not an unsigned integer", i,
                  field_name[i]);
    at[i] = off;
    off += n;
    if (off > flen) return overrun(d, off + (count - 1 - i), i + 1 == count, flen);
  }
  /* every field's bytes are inside the frame now */
  uint64_t v[8];
  for (size_t i = 0; i < count; i++) {
    int neg;
    v[i] = int_value(f + at[i], &neg);
    if (neg)
      return fail(d, AU_EPROTO, "frame header field %zu (%s) is not an unsigned integer", i,
                  field_name[i]);
  }
  if (v[0] > UINT8_MAX)
    return fail(d, AU_EPROTO, "frame type %llu is out of range (0 to 255)",
                (unsigned long long)v[0]);
  for (int i = 1; i <= 2; i++)
    if (v[i] > UINT32_MAX)
      return fail(d, AU_EPROTO, "frame header field %d (%s) is %llu, more than 32 bits", i,
                  field_name[i], (unsigned long long)v[i]);
  h->type = (uint8_t)v[0];
  h->src = (uint32_t)v[1];
  h->dst = (uint32_t)v[2];
  h->seq = v[3];
  h->nextra = (int)count - 4;
  for (size_t i = 0; i < WIRE_MAX_EXTRA; i++) h->extra[i] = i + 4 < count ? v[i + 4] : 0;
  *hlen = off;
  return 0;
}

/* Checks and delivers one whole frame: f is the frame after its length field. */
static int deliver(wire_decoder_t *d, const uint8_t *f, size_t flen, wire_frame_fn on_frame,
                   void *arg)
{
  wire_hdr_t h;
  size_t hlen = 0;
  int rc = parse_header(d, f, flen, &h, &hlen);
  if (rc) return rc;
  if (!(d->known[h.type >> 3] >> (h.type & 7) & 1))
    return fail(d, AU_EPROTO, "unknown frame type %u", h.type);
  if (h.seq != d->next_seq) {
    if (d->frames == 0)
      return fail(d, AU_EPROTO, "first sequence %llu, expected %llu", (unsigned long long)h.seq,
                  (unsigned long long)d->next_seq);
    return fail(d, AU_EPROTO, "sequence %llu after %llu", (unsigned long long)h.seq,
                (unsigned long long)(d->next_seq - 1));
  }
  d->next_seq = h.seq + 1;
  d->frames++;
  rc = on_frame(arg, &h, f + hlen, flen - hlen);
  if (rc) return fail(d, rc, "stopped: the frame handler returned %d", rc);
  return 0;
}

/* Checks a length field as soon as it is known, before any of its bytes are kept. */
static int check_length(wire_decoder_t *d, uint32_t flen)
{
  if (flen == 0) return fail(d, AU_EPROTO, "zero-length frame");
  if (flen > d->max_frame)
    return fail(d, AU_EPROTO, "frame length %lu exceeds the limit of %zu bytes",
                (unsigned long)flen, d->max_frame);
  return 0;
}

/* Makes room for need bytes (need <= max_frame + 4, checked by the callers). Grows to
 * at most twice what is held, so memory follows the bytes that arrived, not the length
 * a peer announced. */
static int reserve(wire_decoder_t *d, size_t need)
{
  if (need <= d->cap) return 0;
  size_t cap = d->cap * 2 > WIRE_BUF_MIN ? d->cap * 2 : WIRE_BUF_MIN;
  if (cap > d->max_frame + 4) cap = d->max_frame + 4;
  if (cap < need) cap = need;
  uint8_t *p = realloc(d->buf, cap);
  if (!p) return fail(d, AU_ENOMEM, "out of memory buffering a frame of %zu bytes", need);
  d->buf = p;
  d->cap = cap;
  return 0;
}

static int append(wire_decoder_t *d, const uint8_t *data, size_t n)
{
  if (reserve(d, d->len + n)) return d->err;
  memcpy(d->buf + d->len, data, n);
  d->len += n;
  return 0;
}

static int stopped(const wire_decoder_t *d, char *err, size_t errlen)
{
  if (err && errlen) snprintf(err, errlen, "%s", d->msg);
  return d->err;
}

int wire_decoder_feed(wire_decoder_t *d, const uint8_t *data, size_t len, wire_frame_fn on_frame,
                      void *arg, char *err, size_t errlen)
{
  if (d->err) return stopped(d, err, errlen);
  if (len == 0) return 0;

  /* First finish the frame begun by an earlier call. */
  if (d->len > 0) {
    if (d->len < 4) {
      size_t take = 4 - d->len < len ? 4 - d->len : len;
      if (append(d, data, take)) return stopped(d, err, errlen);
      data += take, len -= take;
      if (d->len < 4) return 0;
      if (check_length(d, get_le32(d->buf))) return stopped(d, err, errlen);
    }
    size_t total = 4 + (size_t)get_le32(d->buf);
    size_t take = total - d->len < len ? total - d->len : len;
    if (append(d, data, take)) return stopped(d, err, errlen);
    data += take, len -= take;
    if (d->len < total) return 0;
    int rc = deliver(d, d->buf + 4, total - 4, on_frame, arg);
    d->len = 0;
    if (d->cap > WIRE_BUF_KEEP) {
      free(d->buf);
      d->buf = NULL;
      d->cap = 0;
    }
    if (rc) return stopped(d, err, errlen);
  }

  /* Then every frame that lies whole in data, in place. */
  while (len >= 4) {
    uint32_t flen = get_le32(data);
    if (check_length(d, flen)) return stopped(d, err, errlen);
    if (len - 4 < flen) break;
    if (deliver(d, data + 4, flen, on_frame, arg)) return stopped(d, err, errlen);
    data += 4 + (size_t)flen, len -= 4 + (size_t)flen;
  }

  /* Keep the partial tail; its length (if complete) was checked above. */
  if (len > 0 && append(d, data, len)) return stopped(d, err, errlen);
  return 0;
}
