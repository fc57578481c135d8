/* handshake.h — the first frames of every connection between two nodes: each side sends
 * a HELLO (who it is, which cluster, a fresh nonce) and, when the cluster has a secret,
 * an AUTH (an HMAC-SHA256 of both nonces and both ranks under the secret). Symmetric:
 * both ends run the same state machine. Pure like wire.c: the transport does the I/O.
 *
 * The invariant: hs_on_frame says HS_DONE only after the peer's HELLO matched this node
 * in every field and, with a secret, after the peer proved the secret over this node's
 * nonce of this connection; on HS_DONE or HS_FAIL the secret is wiped from the struct.
 *
 * Sequence numbers continue across the handshake: on each direction the HELLO is seq 0,
 * the AUTH (if any) seq 1, and data frames go on from hs_t.tx_seq. So one wire_decoder_t
 * created with first_seq 0 checks a connection's whole stream. See docs/wire.md.
 */
#ifndef AUGUR_RUNTIME_HANDSHAKE_H
#define AUGUR_RUNTIME_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "augur.h"
#include "runtime/wire.h"

/* Frame types (the same numbers as FT_HELLO and FT_AUTH in runtime/net.h). */
#define HS_HELLO 1
#define HS_AUTH  2

#define HS_MAGIC       0x41554752u /* "AUGR" */
#define HS_VERSION     1           /* protocol version; peers must speak the same */
#define HS_NONCE_LEN   16
#define HS_MAC_LEN     32 /* HMAC-SHA256 */
#define HS_CLUSTER_MAX 64
#define HS_SECRET_MAX  255
/* Room for any frame hs_hello_frame or hs_on_frame writes. */
#define HS_FRAME_MAX (WIRE_HEADER_MAX + HS_NONCE_LEN + HS_CLUSTER_MAX)
/* Room for any refusal reason (longer buffers are fine, shorter truncate). */
#define HS_REASON_MAX 200

/* hs_on_frame's results. */
enum { HS_FAIL = -1, HS_MORE = 0, HS_DONE = 1 };

typedef struct hs {
  uint32_t my_rank, nodes;
  int64_t expect_peer; /* the rank the peer must have, or -1 for any */
  uint32_t peer_rank;  /* once the peer's HELLO was accepted; UINT32_MAX until then */
  uint64_t tx_seq;     /* seq of the next frame this side sends (first data frame's, once done) */
  int state;           /* internal */
  uint8_t nonce[HS_NONCE_LEN], peer_nonce[HS_NONCE_LEN];
  size_t cluster_len, secret_len; /* secret_len 0: no secret */
  uint8_t cluster[HS_CLUSTER_MAX];
  uint8_t secret[HS_SECRET_MAX];
  char reason[HS_REASON_MAX]; /* why it failed, repeated by later calls */
} hs_t;

/* cluster_id: 1..HS_CLUSTER_MAX bytes (a C string). secret: secret_len bytes (at most
 * HS_SECRET_MAX; copied), or NULL / 0 for none. expected_peer_rank: the rank this
 * connection must reach (the dialling side knows it), or -1 to accept any other rank (the
 * listening side). Draws this side's nonce. 0, AU_EINVAL, or AU_ENOMEM if the random
 * generator failed. */
int hs_init(hs_t *hs, uint32_t my_rank, uint32_t nodes, const char *cluster_id, const void *secret,
            size_t secret_len, int64_t expected_peer_rank);

/* Writes this side's HELLO (seq 0), to be sent first on the connection. Returns its size,
 * AU_EINVAL if cap < HS_FRAME_MAX or the HELLO was already written. */
int hs_hello_frame(hs_t *hs, uint8_t *out, size_t cap);

/* Feeds one frame received from the peer (as a wire_decoder_t delivered it). Sets
 * *out_len to the size of a frame written to out that must be sent next, or 0. Returns
 * HS_MORE (wait for the next frame), HS_DONE (the connection is established; hs->peer_rank
 * and hs->tx_seq are set; frames after this one are data), or HS_FAIL with a one-line
 * reason for the log (never containing the secret). cap must be at least HS_FRAME_MAX.
 * After HS_DONE or HS_FAIL later calls fail. */
int hs_on_frame(hs_t *hs, const wire_hdr_t *h, const uint8_t *payload, size_t plen, uint8_t *out,
                size_t cap, size_t *out_len, char *reason, size_t reason_len);

/* Wipes the struct (secret included). For a connection dropped mid-handshake; harmless
 * after HS_DONE / HS_FAIL. */
void hs_clear(hs_t *hs);

#endif
