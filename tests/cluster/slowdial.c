/* slowdial.c — an LD_PRELOAD shim for the cluster tests: makes one node slow while the
 * cluster forms. In the process whose AU_RANK equals SLOWDIAL_RANK, the first connect()
 * to a port other than AU_COORD's (its first dial of the mesh, on its I/O thread) waits
 * SLOWDIAL_MS first, as a node on a loaded host would; every other call goes straight to
 * libc's connect().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static int port_of(const struct sockaddr *a)
{
  if (a->sa_family == AF_INET) return ntohs(((const struct sockaddr_in *)a)->sin_port);
  if (a->sa_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
  return -1;
}

int connect(int fd, const struct sockaddr *a, socklen_t len)
{
  static atomic_int slept;
  int (*real)(int, const struct sockaddr *, socklen_t) =
      (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
  const char *rank = getenv("AU_RANK"), *slow = getenv("SLOWDIAL_RANK");
  const char *coord = getenv("AU_COORD"), *ms = getenv("SLOWDIAL_MS");
  const char *colon = coord ? strrchr(coord, ':') : NULL;
  if (rank && slow && colon && ms && !strcmp(rank, slow) && port_of(a) != atoi(colon + 1) &&
      port_of(a) > 0 && !atomic_exchange(&slept, 1)) {
    long t = atol(ms);
    struct timespec ts = {t / 1000, (t % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return real(fd, a, len);
}
