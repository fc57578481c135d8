/* handshake.c — HELLO / AUTH: check who the peer is, then (with a secret) that it knows
 * the secret, by an HMAC bound to both sides' fresh nonces and ranks.
 *
 * The invariant: the secret and the MACs only ever go into HMAC() and CRYPTO_memcmp(),
 * never into a reason string, and are wiped as soon as the handshake ends either way.
 */
#include "runtime/handshake.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

enum { ST_NEW, ST_WAIT_HELLO, ST_WAIT_AUTH, ST_DONE, ST_FAILED };

static const char auth_label[] = "augur-auth-v1"; /* the MAC's domain, without the NUL */

int hs_init(hs_t *hs, uint32_t my_rank, uint32_t nodes, const char *cluster_id, const void *secret,
            size_t secret_len, int64_t expected_peer_rank)
{
  memset(hs, 0, sizeof *hs);
  if (nodes < 2 || my_rank >= nodes || !cluster_id) return AU_EINVAL;
  size_t clen = strnlen(cluster_id, HS_CLUSTER_MAX + 1);
  if (clen == 0 || clen > HS_CLUSTER_MAX) return AU_EINVAL;
  if (secret_len > HS_SECRET_MAX || (secret_len && !secret)) return AU_EINVAL;
  if (expected_peer_rank != -1 &&
      (expected_peer_rank < 0 || expected_peer_rank >= nodes || expected_peer_rank == my_rank))
    return AU_EINVAL;
  hs->my_rank = my_rank;
  hs->nodes = nodes;
  hs->peer_rank = UINT32_MAX;
  hs->expect_peer = expected_peer_rank;
  memcpy(hs->cluster, cluster_id, clen);
  hs->cluster_len = clen;
  if (secret_len) memcpy(hs->secret, secret, secret_len);
  hs->secret_len = secret_len;
  if (RAND_bytes(hs->nonce, HS_NONCE_LEN) != 1) {
    hs_clear(hs);
    return AU_ENOMEM;
  }
  hs->state = ST_NEW;
  return 0;
}

void hs_clear(hs_t *hs)
{
  OPENSSL_cleanse(hs, sizeof *hs);
}

int hs_hello_frame(hs_t *hs, uint8_t *out, size_t cap)
{
  if (hs->state != ST_NEW || cap < HS_FRAME_MAX) return AU_EINVAL;
  uint8_t payload[HS_NONCE_LEN + HS_CLUSTER_MAX];
  memcpy(payload, hs->nonce, HS_NONCE_LEN);
  memcpy(payload + HS_NONCE_LEN, hs->cluster, hs->cluster_len);
  wire_hdr_t h = {.type = HS_HELLO,
                  .src = hs->my_rank,
                  .dst = 0,
                  .seq = hs->tx_seq,
                  .nextra = 4,
                  .extra = {HS_MAGIC, HS_VERSION, hs->nodes, hs->secret_len > 0}};
  int n = wire_put_frame(out, cap, &h, payload, HS_NONCE_LEN + hs->cluster_len);
  if (n < 0) return n;
  hs->tx_seq++;
  hs->state = ST_WAIT_HELLO;
  return n;
}

/* Ends the handshake in failure: keeps the reason for later calls, wipes the secret. */
__attribute__((format(printf, 4, 5))) static int refuse(hs_t *hs, char *reason, size_t reason_len,
                                                        const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(hs->reason, sizeof hs->reason, fmt, ap);
  va_end(ap);
  OPENSSL_cleanse(hs->secret, sizeof hs->secret);
  hs->state = ST_FAILED;
  if (reason && reason_len) snprintf(reason, reason_len, "%s", hs->reason);
  return HS_FAIL;
}

/* Writes a cluster id for a log line: printable ASCII as is, anything else (and the quote
 * and backslash) as \xNN, so that a hostile peer cannot forge log lines. */
static const char *quoted(char *out, size_t cap, const uint8_t *s, size_t n)
{
  size_t o = 0;
  for (size_t i = 0; i < n && o + 5 < cap; i++) {
    if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'' && s[i] != '\\')
      out[o++] = (char)s[i];
    else
      o += (size_t)snprintf(out + o, cap - o, "\\x%02x", s[i]);
  }
  out[o] = '\0';
  return out;
}

/* HMAC-SHA256(secret, label | nonce_a | nonce_b | rank_a (u32 le) | rank_b (u32 le) |
 * cluster). The sender of an AUTH puts the receiver's nonce first and its own rank first,
 * so each direction signs a different message. */
static int auth_mac(const hs_t *hs, const uint8_t *nonce_a, const uint8_t *nonce_b, uint32_t rank_a,
                    uint32_t rank_b, uint8_t mac[HS_MAC_LEN])
{
  uint8_t msg[sizeof auth_label - 1 + 2 * HS_NONCE_LEN + 8 + HS_CLUSTER_MAX];
  size_t n = 0;
  memcpy(msg, auth_label, sizeof auth_label - 1);
  n += sizeof auth_label - 1;
  memcpy(msg + n, nonce_a, HS_NONCE_LEN);
  n += HS_NONCE_LEN;
  memcpy(msg + n, nonce_b, HS_NONCE_LEN);
  n += HS_NONCE_LEN;
  for (int i = 0; i < 4; i++) msg[n++] = (uint8_t)(rank_a >> (8 * i));
  for (int i = 0; i < 4; i++) msg[n++] = (uint8_t)(rank_b >> (8 * i));
  memcpy(msg + n, hs->cluster, hs->cluster_len);
  n += hs->cluster_len;
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), hs->secret, (int)hs->secret_len, msg, n, mac, &len) || len != HS_MAC_LEN)
    return -1;
  return 0;
}

static int on_hello(hs_t *hs, const wire_hdr_t *h, const uint8_t *payload, size_t plen,
                    uint8_t *out, size_t cap, size_t *out_len, char *reason, size_t reason_len)
{
  char a[4 * HS_CLUSTER_MAX + 1], b[4 * HS_CLUSTER_MAX + 1];
  if (h->type != HS_HELLO)
    return refuse(hs, reason, reason_len, "expected a HELLO, got a frame of type %u", h->type);
  if (h->nextra < 1 || h->extra[0] != HS_MAGIC)
    return refuse(hs, reason, reason_len, "not an augur peer (magic 0x%llx)",
                  h->nextra < 1 ? 0ULL : (unsigned long long)h->extra[0]);
  if (h->nextra < 2 || h->extra[1] != HS_VERSION)
    return refuse(hs, reason, reason_len, "protocol version %llu, this node speaks %d",
                  h->nextra < 2 ? 0ULL : (unsigned long long)h->extra[1], HS_VERSION);
  if (h->nextra != 4 || h->seq != 0 || h->dst != 0)
    return refuse(hs, reason, reason_len,
                  "malformed HELLO (%d extra fields, seq %llu, port %u; expected 4, 0, 0)",
                  h->nextra, (unsigned long long)h->seq, h->dst);
  if (plen <= HS_NONCE_LEN || plen > HS_NONCE_LEN + HS_CLUSTER_MAX)
    return refuse(hs, reason, reason_len,
                  "HELLO payload of %zu bytes, expected a %d-byte nonce and a 1- to %d-byte "
                  "cluster id",
                  plen, HS_NONCE_LEN, HS_CLUSTER_MAX);
  const uint8_t *cluster = payload + HS_NONCE_LEN;
  size_t clen = plen - HS_NONCE_LEN;
  if (clen != hs->cluster_len || memcmp(cluster, hs->cluster, clen) != 0)
    return refuse(hs, reason, reason_len, "cluster '%s', this node is in cluster '%s'",
                  quoted(a, sizeof a, cluster, clen),
                  quoted(b, sizeof b, hs->cluster, hs->cluster_len));
  if (h->extra[2] != hs->nodes)
    return refuse(hs, reason, reason_len, "the peer's cluster has %llu nodes, this node's has %u",
                  (unsigned long long)h->extra[2], hs->nodes);
  if (h->src >= hs->nodes)
    return refuse(hs, reason, reason_len, "peer rank %u is out of range (the cluster has %u nodes)",
                  h->src, hs->nodes);
  if (h->src == hs->my_rank)
    return refuse(hs, reason, reason_len, "the peer claims rank %u, which is this node's own",
                  h->src);
  if (hs->expect_peer >= 0 && h->src != (uint64_t)hs->expect_peer)
    return refuse(hs, reason, reason_len, "the peer is rank %u, expected rank %lld", h->src,
                  (long long)hs->expect_peer);
  if (h->extra[3] > 1)
    return refuse(hs, reason, reason_len, "HELLO auth flag %llu, expected 0 or 1",
                  (unsigned long long)h->extra[3]);
  int have = hs->secret_len > 0;
  if (h->extra[3] != (uint64_t)have)
    return refuse(hs, reason, reason_len,
                  have ? "the peer has no secret but this node requires one"
                       : "the peer requires a secret but this node has none");
  if (memcmp(payload, hs->nonce, HS_NONCE_LEN) == 0)
    return refuse(hs, reason, reason_len, "the peer echoed this node's nonce");

  hs->peer_rank = h->src;
  memcpy(hs->peer_nonce, payload, HS_NONCE_LEN);
  if (!have) {
    hs->state = ST_DONE;
    return HS_DONE;
  }
  uint8_t mac[HS_MAC_LEN];
  if (auth_mac(hs, hs->peer_nonce, hs->nonce, hs->my_rank, hs->peer_rank, mac))
    return refuse(hs, reason, reason_len, "HMAC-SHA256 failed (OpenSSL error)");
  wire_hdr_t ah = {.type = HS_AUTH, .src = hs->my_rank, .dst = 0, .seq = hs->tx_seq};
  int n = wire_put_frame(out, cap, &ah, mac, HS_MAC_LEN);
  OPENSSL_cleanse(mac, sizeof mac);
  if (n < 0) return refuse(hs, reason, reason_len, "could not encode the AUTH frame (%d)", n);
  hs->tx_seq++;
  *out_len = (size_t)n;
  hs->state = ST_WAIT_AUTH;
  return HS_MORE;
}

static int on_auth(hs_t *hs, const wire_hdr_t *h, const uint8_t *payload, size_t plen, char *reason,
                   size_t reason_len)
{
  if (h->type != HS_AUTH)
    return refuse(hs, reason, reason_len, "expected an AUTH, got a frame of type %u", h->type);
  if (h->src != hs->peer_rank)
    return refuse(hs, reason, reason_len, "AUTH from rank %u, but the HELLO came from rank %u",
                  h->src, hs->peer_rank);
  if (h->nextra != 0 || h->seq != 1 || h->dst != 0 || plen != HS_MAC_LEN)
    return refuse(hs, reason, reason_len,
                  "malformed AUTH (%d extra fields, seq %llu, port %u, %zu-byte payload; "
                  "expected 0, 1, 0, %d)",
                  h->nextra, (unsigned long long)h->seq, h->dst, plen, HS_MAC_LEN);
  /* What the peer signed: this node's nonce first, its own rank first. */
  uint8_t want[HS_MAC_LEN];
  if (auth_mac(hs, hs->nonce, hs->peer_nonce, hs->peer_rank, hs->my_rank, want))
    return refuse(hs, reason, reason_len, "HMAC-SHA256 failed (OpenSSL error)");
  int differ = CRYPTO_memcmp(want, payload, HS_MAC_LEN);
  OPENSSL_cleanse(want, sizeof want);
  if (differ) return refuse(hs, reason, reason_len, "wrong secret (authentication failed)");
  OPENSSL_cleanse(hs->secret, sizeof hs->secret);
  hs->state = ST_DONE;
  return HS_DONE;
}

int hs_on_frame(hs_t *hs, const wire_hdr_t *h, const uint8_t *payload, size_t plen, uint8_t *out,
                size_t cap, size_t *out_len, char *reason, size_t reason_len)
{
  *out_len = 0;
  switch (hs->state) {
  case ST_WAIT_HELLO:
    if (cap < HS_FRAME_MAX)
      return refuse(hs, reason, reason_len, "output buffer of %zu bytes, need %d", cap,
                    HS_FRAME_MAX);
    return on_hello(hs, h, payload, plen, out, cap, out_len, reason, reason_len);
  case ST_WAIT_AUTH:
    return on_auth(hs, h, payload, plen, reason, reason_len);
  case ST_NEW:
    return refuse(hs, reason, reason_len, "a frame arrived before this node's HELLO was written");
  case ST_DONE:
    if (reason && reason_len)
      snprintf(reason, reason_len, "the handshake is already complete (frame type %u)", h->type);
    return HS_FAIL;
  default:
    if (reason && reason_len) snprintf(reason, reason_len, "%s", hs->reason);
    return HS_FAIL;
  }
}
