/* rawpeer.c — a misbehaving peer for the cluster tests: connects to a node and sends
 * one kind of bad input, then reports whether the node closed the connection.
 *
 *   rawpeer HOST:PORT KIND [CLUSTER [SECRET]]   (SECRET: whether the node has one)
 *
 * KIND: garbage, oversized, truncated, badmsgpack, unknowntype, version, cluster, secret,
 * nosecret. Prints "closed after N ms" (exit 0) or "still open" (exit 1).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "augur.h"
#include "runtime/handshake.h"
#include "runtime/wire.h"

static int dial(const char *addr)
{
  char host[128];
  const char *colon = strrchr(addr, ':');
  if (!colon || (size_t)(colon - addr) >= sizeof(host)) return -1;
  memcpy(host, addr, (size_t)(colon - addr));
  host[colon - addr] = '\0';
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) return -1;
  return fd;
}

/* A HELLO like a real node's, with one field changed by kind. */
static size_t hello(uint8_t *out, const char *kind, const char *cluster, int with_secret)
{
  uint8_t payload[16 + 64] = {0};
  size_t clen = strlen(cluster);
  memcpy(payload + 16, cluster, clen);
  /* rank 1 of 2 is what a real peer of rank 0 would claim */
  wire_hdr_t h = {.type = HS_HELLO,
                  .src = 1,
                  .dst = 0,
                  .seq = 0,
                  .nextra = 4,
                  .extra = {HS_MAGIC, HS_VERSION, 2, (uint64_t)with_secret}};
  if (!strcmp(kind, "version")) h.extra[1] = HS_VERSION + 7;
  return (size_t)wire_put_frame(out, 512, &h, payload, 16 + clen);
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: rawpeer HOST:PORT KIND [CLUSTER [SECRET]]\n");
    return 2;
  }
  const char *kind = argv[2], *cluster = argc > 3 ? argv[3] : "augur";
  int has_secret = argc > 4 && argv[4][0];
  int fd = dial(argv[1]);
  if (fd < 0) {
    fprintf(stderr, "rawpeer: cannot connect to %s\n", argv[1]);
    return 2;
  }
  uint8_t buf[4096];
  size_t n = 0;
  if (!strcmp(kind, "garbage")) {
    for (n = 0; n < 1000; n++) buf[n] = (uint8_t)(n * 131 + 7);
    buf[0] = 40, buf[1] = buf[2] = buf[3] = 0; /* a plausible length, then noise */
  } else if (!strcmp(kind, "oversized")) {
    uint32_t len = 0xfffffff0u;
    memcpy(buf, &len, 4);
    n = 4;
  } else if (!strcmp(kind, "truncated")) {
    n = hello(buf, kind, cluster, has_secret) - 10; /* then close */
  } else if (!strcmp(kind, "badmsgpack")) {
    uint32_t len = 6;
    memcpy(buf, &len, 4);
    memcpy(buf + 4, "\xc1\xc1\xc1\xc1\xc1\xc1", 6); /* 0xc1: never used in msgpack */
    n = 10;
  } else if (!strcmp(kind, "unknowntype")) {
    wire_hdr_t h = {.type = 99, .src = 1, .seq = 0};
    n = (size_t)wire_put_frame(buf, sizeof(buf), &h, "x", 1);
  } else if (!strcmp(kind, "version") || !strcmp(kind, "cluster")) {
    n = hello(buf, kind, !strcmp(kind, "cluster") ? "another-cluster" : cluster, has_secret);
  } else if (!strcmp(kind, "nosecret")) {
    n = hello(buf, kind, cluster, 0); /* claims no secret to a node that has one */
  } else if (!strcmp(kind, "secret")) {
    /* a correct HELLO that claims a secret, then an AUTH whose MAC was not made with
     * the cluster's secret */
    n = hello(buf, kind, cluster, 1);
    wire_hdr_t a = {.type = HS_AUTH, .src = 1, .seq = 1};
    uint8_t mac[HS_MAC_LEN];
    for (size_t i = 0; i < sizeof(mac); i++) mac[i] = (uint8_t)(i * 7 + 1);
    n += (size_t)wire_put_frame(buf + n, sizeof(buf) - n, &a, mac, sizeof(mac));
  } else {
    fprintf(stderr, "rawpeer: unknown kind '%s'\n", kind);
    return 2;
  }
  if (write(fd, buf, n) != (ssize_t)n) return 2;
  if (!strcmp(kind, "truncated")) shutdown(fd, SHUT_WR);
  uint64_t t0 = au_now_ns();
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = 3000 - (int)((au_now_ns() - t0) / 1000000);
    if (ms <= 0 || poll(&p, 1, ms) <= 0) break;
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r <= 0) {
      printf("closed after %llu ms\n", (unsigned long long)((au_now_ns() - t0) / 1000000));
      return 0;
    }
  }
  printf("still open\n");
  return 1;
}
