/* wire.h — frames on a byte stream: encoding their headers and reassembling them from
 * whatever chunks a socket delivers. Pure: no I/O, no clock, no globals; the transport
 * (runtime/conn.c) calls it. The format, byte by byte, is in docs/wire.md.
 *
 *   frame  := u32 length (little-endian) | header | payload
 *   header := msgpack array of 4..8 unsigned integers [type, src, dst, seq, extra0..3]
 *
 * The invariant: a frame reaches the handler only whole, in stream order, with a header
 * that passed every check (length within the limit, header inside the frame, known type,
 * seq exactly one more than the previous frame's); the first frame that fails stops the
 * decoder for good, because after it the stream's framing can no longer be trusted.
 */
#ifndef AUGUR_RUNTIME_WIRE_H
#define AUGUR_RUNTIME_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "augur.h"

/* The protocol's largest frame (length field value). A decoder may be given a lower
 * limit; no encoder writes a longer frame. */
#define WIRE_MAX_FRAME (64u << 20)
/* The smallest header: fixarray marker and four 1-byte integers. */
#define WIRE_MIN_HEADER 5
/* The most bytes wire_put_header writes: length, array marker, type (uint8: 2 bytes),
 * src and dst (uint32: 5 each), seq and 4 extras (uint64: 9 each). */
#define WIRE_HEADER_MAX (4 + 1 + 2 + 5 + 5 + 9 + 4 * 9)
#define WIRE_MAX_EXTRA  4
/* Room for any decoder error message (longer err buffers are fine, shorter truncate). */
#define WIRE_ERR_MAX 160

typedef struct wire_hdr {
  uint8_t type;      /* frame type, 0..255 */
  uint32_t src;      /* sender's node rank */
  uint32_t dst;      /* destination port on the receiving node */
  uint64_t seq;      /* per connection and direction: previous frame's seq + 1 */
  int nextra;        /* extra fields present, 0..WIRE_MAX_EXTRA */
  uint64_t extra[4]; /* meaning depends on type; unused ones are 0 after decoding */
} wire_hdr_t;

/* Writes the 4-byte length and the header of a frame whose payload (payload_len bytes,
 * sent separately, e.g. by writev) follows. Allocates nothing. Returns the bytes written
 * (at most WIRE_HEADER_MAX), AU_EINVAL if nextra is out of range or cap is too small,
 * AU_ERANGE if the frame would be longer than WIRE_MAX_FRAME. */
int wire_put_header(uint8_t *out, size_t cap, const wire_hdr_t *h, size_t payload_len);

/* wire_put_header followed by a copy of the payload, for small frames. Returns the
 * frame's total size or the errors of wire_put_header (AU_EINVAL when cap is short). */
int wire_put_frame(uint8_t *out, size_t cap, const wire_hdr_t *h, const void *payload,
                   size_t payload_len);

/* Sets a type's bit in a 256-bit known-types mask (bit t is byte t/8, bit t%8). */
static inline void wire_type_set(uint8_t mask[32], unsigned type)
{
  mask[(type & 255) >> 3] |= (uint8_t)(1u << (type & 7));
}

/* Called for each complete frame. payload points into the decoder's buffer or into the
 * data being fed, has no particular alignment (read arrays with memcpy), and is valid only
 * during the call. A nonzero return stops the decoder (see wire_decoder_feed). The handler
 * must not feed or free the decoder that called it. */
typedef int (*wire_frame_fn)(void *arg, const wire_hdr_t *h, const uint8_t *payload,
                             size_t payload_len);

/* Reassembles frames of one direction of one connection. Caller-allocated; the partial
 * frame buffer it owns never exceeds max_frame + 4 bytes, grows only with bytes that
 * actually arrived (a peer announcing 64 MiB and sending 10 bytes costs a few KiB), and
 * is freed when a frame longer than WIRE_BUF_KEEP has been consumed. */
typedef struct wire_decoder {
  uint8_t *buf;           /* the partial frame, from its length field on */
  size_t len, cap;        /* bytes in buf; allocated */
  size_t max_frame;       /* longest accepted length field */
  uint64_t next_seq;      /* the seq the next frame must carry */
  uint64_t frames;        /* frames delivered so far */
  int err;                /* 0, or the error every later feed returns */
  uint8_t known[32];      /* known frame types, one bit each */
  char msg[WIRE_ERR_MAX]; /* the reason for err */
} wire_decoder_t;

#define WIRE_BUF_MIN  4096u
#define WIRE_BUF_KEEP (64u << 10)

/* max_frame: 0 for WIRE_MAX_FRAME, else WIRE_MIN_HEADER..WIRE_MAX_FRAME. known_types:
 * the 256-bit mask of accepted types, or NULL to accept every type. first_seq: the seq
 * of the first frame. 0 or AU_EINVAL. */
int wire_decoder_init(wire_decoder_t *d, size_t max_frame, const uint8_t known_types[32],
                      uint64_t first_seq);
void wire_decoder_free(wire_decoder_t *d);

/* Feeds bytes as they come off the socket, in any chunking. Calls on_frame for each
 * complete frame, in order; a frame that lies whole in data is not copied, only a
 * partial frame at either end is buffered. Returns 0 when every byte was consumed (a
 * trailing partial frame stays buffered for the next call); AU_EPROTO for malformed input,
 * with a one-line reason in err (at most errlen bytes, always terminated; err may be
 * NULL); AU_ENOMEM; or the first nonzero value on_frame returned. Any of these is final:
 * the bytes after the failing frame are dropped and every later call returns the same
 * value and reason without looking at its data. */
int wire_decoder_feed(wire_decoder_t *d, const uint8_t *data, size_t len, wire_frame_fn on_frame,
                      void *arg, char *err, size_t errlen);

#endif
