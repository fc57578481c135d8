/* test_handshake.c — two handshake state machines talking through real frames and
 * decoders: matching peers connect (with and without a secret, whichever speaks first);
 * every mismatch is refused with its own reason; a recorded session replayed against a
 * new one fails, because the new side's nonce is in the MAC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/handshake.h"

/* One end of a connection: its handshake, the decoder for what it receives, and the
 * bytes it has written but the other end has not read yet. */
typedef struct side {
  hs_t hs;
  wire_decoder_t dec;
  uint8_t out[1024];
  size_t out_len;
  int result; /* HS_MORE until the handshake ends */
  char reason[HS_REASON_MAX];
} side_t;

static int on_frame(void *arg, const wire_hdr_t *h, const uint8_t *p, size_t n)
{
  side_t *s = arg;
  if (s->result != HS_MORE) return 0; /* a refused side reads no further */
  size_t out_len = 0;
  s->result = hs_on_frame(&s->hs, h, p, n, s->out + s->out_len, sizeof s->out - s->out_len,
                          &out_len, s->reason, sizeof s->reason);
  s->out_len += out_len;
  return 0;
}

static void side_init(side_t *s, uint32_t rank, uint32_t nodes, const char *cluster,
                      const char *secret, int64_t expect)
{
  memset(s, 0, sizeof *s);
  assert_int_equal(
      hs_init(&s->hs, rank, nodes, cluster, secret, secret ? strlen(secret) : 0, expect), 0);
  uint8_t known[32] = {0};
  wire_type_set(known, HS_HELLO);
  wire_type_set(known, HS_AUTH);
  assert_int_equal(wire_decoder_init(&s->dec, 0, known, 0), 0);
  int n = hs_hello_frame(&s->hs, s->out, sizeof s->out);
  assert_true(n > 0 && n <= HS_FRAME_MAX);
  s->out_len = (size_t)n;
  s->result = HS_MORE;
}

static void side_free(side_t *s)
{
  wire_decoder_free(&s->dec);
  hs_clear(&s->hs);
}

/* Delivers raw bytes to s. */
static void deliver(side_t *s, const uint8_t *bytes, size_t n)
{
  char err[WIRE_ERR_MAX];
  int rc = wire_decoder_feed(&s->dec, bytes, n, on_frame, s, err, sizeof err);
  if (rc) fail_msg("decoder refused a handshake frame: %s", err);
}

/* Moves from's unread bytes to to. */
static void flush(side_t *from, side_t *to)
{
  uint8_t tmp[sizeof from->out];
  size_t n = from->out_len;
  memcpy(tmp, from->out, n);
  from->out_len = 0;
  deliver(to, tmp, n);
}

/* Runs the exchange to its end; b_first: b's bytes reach a before a's reach b. */
static void run(side_t *a, side_t *b, int b_first)
{
  for (int i = 0; i < 10 && (a->out_len || b->out_len); i++) {
    if (b_first) {
      flush(b, a);
      flush(a, b);
    } else {
      flush(a, b);
      flush(b, a);
    }
  }
  assert_int_equal(a->out_len + b->out_len, 0);
}

static int all_zero(const uint8_t *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static void test_connect(void **state)
{
  (void)state;
  static const char *secrets[] = {NULL, "s3cret",
                                  "a much longer secret, more than one SHA-256 "
                                  "block of 64 bytes, so that HMAC hashes it first"};
  for (int k = 0; k < 3; k++)
    for (int order = 0; order < 2; order++) {
      side_t a, b;
      side_init(&a, 0, 3, "prod", secrets[k], 2);  /* a dialled rank 2 */
      side_init(&b, 2, 3, "prod", secrets[k], -1); /* b accepts anyone */
      run(&a, &b, order);
      if (a.result != HS_DONE || b.result != HS_DONE)
        fail_msg("secret %d order %d: a %d '%s', b %d '%s'", k, order, a.result, a.reason, b.result,
                 b.reason);
      assert_int_equal(a.hs.peer_rank, 2);
      assert_int_equal(b.hs.peer_rank, 0);
      /* Data frames go on from here: HELLO was 0, AUTH (with a secret) 1. */
      assert_true(a.hs.tx_seq == (secrets[k] ? 2 : 1));
      assert_true(b.dec.next_seq == a.hs.tx_seq);
      assert_true(a.dec.next_seq == b.hs.tx_seq);
      assert_true(all_zero(a.hs.secret, sizeof a.hs.secret));
      assert_true(all_zero(b.hs.secret, sizeof b.hs.secret));
      /* A frame after the end is not the handshake's. */
      wire_hdr_t h = {.type = 4};
      uint8_t out[HS_FRAME_MAX];
      size_t out_len = 1;
      char why[HS_REASON_MAX];
      assert_int_equal(hs_on_frame(&a.hs, &h, NULL, 0, out, sizeof out, &out_len, why, sizeof why),
                       HS_FAIL);
      assert_int_equal(out_len, 0);
      side_free(&a);
      side_free(&b);
    }
}

/* Each side of a mismatched pair refuses with the reason from its own point of view. */
typedef struct pair_case {
  uint32_t a_rank, a_nodes, b_rank, b_nodes;
  const char *a_cluster, *b_cluster, *a_secret, *b_secret;
  int64_t a_expect;
  const char *a_why, *b_why; /* NULL: that side may still be waiting when the other refused */
} pair_case_t;

static const pair_case_t pairs[] = {
    {0, 3, 1, 3, "xyz", "abc", NULL, NULL, -1, "cluster 'abc', this node is in cluster 'xyz'",
     "cluster 'xyz', this node is in cluster 'abc'"},
    {0, 3, 1, 4, "c", "c", NULL, NULL, -1, "the peer's cluster has 4 nodes, this node's has 3",
     "the peer's cluster has 3 nodes, this node's has 4"},
    {1, 3, 1, 3, "c", "c", NULL, NULL, -1, "the peer claims rank 1, which is this node's own",
     "the peer claims rank 1, which is this node's own"},
    {0, 3, 1, 3, "c", "c", NULL, NULL, 2, "the peer is rank 1, expected rank 2", NULL},
    {0, 3, 1, 3, "c", "c", "only-a-has-it", NULL, -1,
     "the peer has no secret but this node requires one",
     "the peer requires a secret but this node has none"},
    {0, 3, 1, 3, "c", "c", NULL, "only-b-has-it", -1,
     "the peer requires a secret but this node has none",
     "the peer has no secret but this node requires one"},
    {0, 3, 1, 3, "c", "c", "secret-of-a", "secret-of-b", -1, "wrong secret (authentication failed)",
     "wrong secret (authentication failed)"},
    {0, 3, 1, 3, "odd'\n", "c", NULL, NULL, -1,
     "cluster 'c', this node is in cluster 'odd\\x27\\x0a'",
     "cluster 'odd\\x27\\x0a', this node is in cluster 'c'"},
};

static void test_mismatches(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    const pair_case_t *c = &pairs[i];
    side_t a, b;
    side_init(&a, c->a_rank, c->a_nodes, c->a_cluster, c->a_secret, c->a_expect);
    side_init(&b, c->b_rank, c->b_nodes, c->b_cluster, c->b_secret, -1);
    run(&a, &b, 0);
    if (a.result != HS_FAIL || strcmp(a.reason, c->a_why) != 0)
      fail_msg("case %zu: a got %d '%s', expected '%s'", i, a.result, a.reason, c->a_why);
    if (c->b_why && (b.result != HS_FAIL || strcmp(b.reason, c->b_why) != 0))
      fail_msg("case %zu: b got %d '%s', expected '%s'", i, b.result, b.reason, c->b_why);
    if (c->a_secret) assert_null(strstr(a.reason, c->a_secret));
    if (c->b_secret) assert_null(strstr(b.reason, c->b_secret));
    assert_true(all_zero(a.hs.secret, sizeof a.hs.secret));
    /* The refusal is final and repeats its reason. */
    wire_hdr_t h = {.type = HS_HELLO};
    uint8_t out[HS_FRAME_MAX];
    size_t out_len;
    char again[HS_REASON_MAX];
    assert_int_equal(
        hs_on_frame(&a.hs, &h, NULL, 0, out, sizeof out, &out_len, again, sizeof again), HS_FAIL);
    assert_string_equal(again, c->a_why);
    side_free(&a);
    side_free(&b);
  }
}

/* A HELLO as another program (or another protocol version) would send it. */
static size_t hello(uint8_t *out, uint32_t src, uint64_t seq, uint64_t magic, uint64_t version,
                    uint64_t nodes, uint64_t auth, const char *cluster, int nextra)
{
  uint8_t payload[16 + 80];
  memset(payload, 0x5a, 16);
  size_t clen = strlen(cluster);
  memcpy(payload + 16, cluster, clen);
  wire_hdr_t h = {.type = HS_HELLO,
                  .src = src,
                  .seq = seq,
                  .nextra = nextra,
                  .extra = {magic, version, nodes, auth}};
  int n = wire_put_frame(out, 256, &h, payload, 16 + clen);
  assert_true(n > 0);
  return (size_t)n;
}

static void test_crafted_hellos(void **state)
{
  (void)state;
  struct {
    uint32_t src;
    uint64_t seq, magic, version, nodes, auth;
    const char *cluster;
    int nextra;
    const char *why;
  } cases[] = {
      {1, 0, 0x12345678, 1, 4, 0, "c", 4, "not an augur peer (magic 0x12345678)"},
      {1, 0, 0, 0, 0, 0, "c", 0, "not an augur peer (magic 0x0)"},
      {1, 0, HS_MAGIC, 2, 4, 0, "c", 4, "protocol version 2, this node speaks 1"},
      {1, 0, HS_MAGIC, 1, 4, 0, "c", 3,
       "malformed HELLO (3 extra fields, seq 0, port 0; expected 4, 0, 0)"},
      {7, 0, HS_MAGIC, 1, 4, 0, "c", 4, "peer rank 7 is out of range (the cluster has 4 nodes)"},
      {1, 0, HS_MAGIC, 1, 4, 2, "c", 4, "HELLO auth flag 2, expected 0 or 1"},
      {1, 0, HS_MAGIC, 1, 4, 0, "", 4,
       "HELLO payload of 16 bytes, expected a 16-byte nonce and a 1- to 64-byte cluster id"},
      {1, 0, HS_MAGIC, 1, 4, 0,
       "0123456789012345678901234567890123456789012345678901234567890123456789", 4,
       "HELLO payload of 86 bytes, expected a 16-byte nonce and a 1- to 64-byte cluster id"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    side_t b;
    side_init(&b, 0, 4, "c", NULL, -1);
    uint8_t buf[256];
    size_t n = hello(buf, cases[i].src, cases[i].seq, cases[i].magic, cases[i].version,
                     cases[i].nodes, cases[i].auth, cases[i].cluster, cases[i].nextra);
    deliver(&b, buf, n);
    if (b.result != HS_FAIL || strcmp(b.reason, cases[i].why) != 0)
      fail_msg("case %zu: got %d '%s', expected '%s'", i, b.result, b.reason, cases[i].why);
    side_free(&b);
  }

  /* A HELLO for this node, well formed: accepted. */
  side_t b;
  side_init(&b, 0, 4, "c", NULL, -1);
  uint8_t buf[256];
  deliver(&b, buf, hello(buf, 3, 0, HS_MAGIC, HS_VERSION, 4, 0, "c", 4));
  assert_int_equal(b.result, HS_DONE);
  assert_int_equal(b.hs.peer_rank, 3);
  side_free(&b);
}

/* Frames out of place: data before the HELLO, a HELLO where the AUTH belongs, AUTHs of
 * the wrong shape or from another rank. */
static void test_out_of_place(void **state)
{
  (void)state;
  uint8_t out[HS_FRAME_MAX];
  size_t out_len;
  char why[HS_REASON_MAX];
  side_t a, b;
  side_init(&a, 0, 2, "c", "k", -1);
  wire_hdr_t data = {.type = 4};
  assert_int_equal(hs_on_frame(&a.hs, &data, NULL, 0, out, sizeof out, &out_len, why, sizeof why),
                   HS_FAIL);
  assert_string_equal(why, "expected a HELLO, got a frame of type 4");
  side_free(&a);

  struct {
    wire_hdr_t h;
    size_t plen;
    const char *why;
  } auths[] = {
      {{.type = HS_HELLO, .src = 1, .seq = 1}, 32, "expected an AUTH, got a frame of type 1"},
      {{.type = HS_AUTH, .src = 0, .seq = 1},
       32,
       "AUTH from rank 0, but the HELLO came from rank 1"},
      {{.type = HS_AUTH, .src = 1, .seq = 1},
       31,
       "malformed AUTH (0 extra fields, seq 1, port 0, 31-byte payload; expected 0, 1, 0, 32)"},
      {{.type = HS_AUTH, .src = 1, .seq = 1, .nextra = 1},
       32,
       "malformed AUTH (1 extra fields, seq 1, port 0, 32-byte payload; expected 0, 1, 0, 32)"},
      {{.type = HS_AUTH, .src = 1, .seq = 1}, 32, "wrong secret (authentication failed)"},
  };
  for (size_t i = 0; i < sizeof auths / sizeof auths[0]; i++) {
    side_init(&a, 0, 2, "c", "k", -1);
    side_init(&b, 1, 2, "c", "k", -1);
    flush(&b, &a); /* a has b's HELLO: now waits for the AUTH */
    assert_int_equal(a.result, HS_MORE);
    assert_true(a.out_len > 0);
    uint8_t mac[32] = {0};
    a.result = hs_on_frame(&a.hs, &auths[i].h, mac, auths[i].plen, out, sizeof out, &out_len,
                           a.reason, sizeof a.reason);
    assert_int_equal(a.result, HS_FAIL);
    assert_string_equal(a.reason, auths[i].why);
    side_free(&a);
    side_free(&b);
  }
}

/* A recorded session (one side's whole byte stream: HELLO and AUTH) replayed against a
 * new session of the other side fails: the new side's nonce is fresh, and the recorded
 * MAC covers the old one. Replaying only the AUTH after a fresh HELLO fails the same way. */
static void test_replay(void **state)
{
  (void)state;
  side_t a1, b1;
  side_init(&a1, 0, 2, "c", "k", -1);
  side_init(&b1, 1, 2, "c", "k", -1);
  uint8_t rec[1024];
  size_t rec_len = 0;
  memcpy(rec, a1.out, a1.out_len); /* a1's HELLO */
  rec_len = a1.out_len;
  flush(&a1, &b1);
  flush(&b1, &a1); /* a1 answers with its AUTH */
  memcpy(rec + rec_len, a1.out, a1.out_len);
  rec_len += a1.out_len;
  run(&a1, &b1, 0);
  assert_int_equal(a1.result, HS_DONE);
  assert_int_equal(b1.result, HS_DONE);

  side_t b2;
  side_init(&b2, 1, 2, "c", "k", -1);
  deliver(&b2, rec, rec_len);
  assert_int_equal(b2.result, HS_FAIL);
  assert_string_equal(b2.reason, "wrong secret (authentication failed)");

  /* A fresh HELLO from a second a, then the old AUTH. */
  side_t a2, b3;
  side_init(&a2, 0, 2, "c", "k", -1);
  side_init(&b3, 1, 2, "c", "k", -1);
  flush(&a2, &b3);
  assert_int_equal(b3.result, HS_MORE);
  /* The recorded AUTH is the last frame of rec: its length field tells where it starts. */
  size_t first = 4 + (size_t)(rec[0] | rec[1] << 8);
  deliver(&b3, rec + first, rec_len - first);
  assert_int_equal(b3.result, HS_FAIL);
  assert_string_equal(b3.reason, "wrong secret (authentication failed)");

  /* Reflection: a node's own frames sent back to it. */
  side_t c;
  side_init(&c, 1, 2, "c", "k", -1);
  uint8_t own[256];
  size_t own_len = c.out_len;
  memcpy(own, c.out, own_len);
  deliver(&c, own, own_len);
  assert_int_equal(c.result, HS_FAIL);
  assert_string_equal(c.reason, "the peer claims rank 1, which is this node's own");

  side_free(&a1), side_free(&b1), side_free(&b2), side_free(&a2), side_free(&b3), side_free(&c);
}

static void test_init_arguments(void **state)
{
  (void)state;
  hs_t hs;
  char long_id[HS_CLUSTER_MAX + 2];
  memset(long_id, 'x', sizeof long_id - 1);
  long_id[sizeof long_id - 1] = '\0';
  uint8_t secret[HS_SECRET_MAX + 1] = {1};
  assert_int_equal(hs_init(&hs, 0, 1, "c", NULL, 0, -1), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 2, 2, "c", NULL, 0, -1), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, "", NULL, 0, -1), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, NULL, NULL, 0, -1), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, long_id, NULL, 0, -1), AU_EINVAL);
  long_id[HS_CLUSTER_MAX] = '\0';
  assert_int_equal(hs_init(&hs, 0, 2, long_id, NULL, 0, -1), 0);
  assert_int_equal(hs_init(&hs, 0, 2, "c", secret, sizeof secret, -1), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, "c", NULL, 3, -1), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, "c", secret, HS_SECRET_MAX, -1), 0);
  assert_int_equal(hs_init(&hs, 0, 2, "c", NULL, 0, 0), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, "c", NULL, 0, 2), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, "c", NULL, 0, -2), AU_EINVAL);
  assert_int_equal(hs_init(&hs, 0, 2, "c", NULL, 0, 1), 0);

  /* The HELLO is written once, into a buffer that can hold any. */
  uint8_t out[HS_FRAME_MAX];
  assert_int_equal(hs_hello_frame(&hs, out, sizeof out - 1), AU_EINVAL);
  assert_true(hs_hello_frame(&hs, out, sizeof out) > 0);
  assert_int_equal(hs_hello_frame(&hs, out, sizeof out), AU_EINVAL);

  /* Two sessions draw different nonces. */
  hs_t other;
  assert_int_equal(hs_init(&other, 0, 2, "c", NULL, 0, 1), 0);
  assert_memory_not_equal(hs.nonce, other.nonce, HS_NONCE_LEN);
  hs_clear(&hs);
  hs_clear(&other);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_connect),        cmocka_unit_test(test_mismatches),
      cmocka_unit_test(test_crafted_hellos), cmocka_unit_test(test_out_of_place),
      cmocka_unit_test(test_replay),         cmocka_unit_test(test_init_arguments),
  };
  return cmocka_run_group_tests_name("handshake", tests, NULL, NULL);
}
