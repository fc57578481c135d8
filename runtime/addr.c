/* addr.c — network addresses for the cluster (addr.h). */
#include "runtime/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int addr_split(const char *hostport, int zero_ok, char *host, size_t hostlen, int *port)
{
  const char *h = hostport, *colon;
  size_t n;
  if (*h == '[') { /* [v6]:port */
    const char *close = strchr(h, ']');
    if (!close || close[1] != ':') return -1;
    h++;
    n = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(h, ':');
    if (!colon) return -1;
    n = (size_t)(colon - h);
    if (memchr(h, ':', n)) return -1; /* a bare IPv6 address needs brackets */
  }
  if (n == 0 || n >= hostlen) return -1;
  char *end;
  errno = 0;
  long p = strtol(colon + 1, &end, 10);
  if (errno || *end || colon[1] == '\0' || p < (zero_ok ? 0 : 1) || p > 65535) return -1;
  memcpy(host, h, n);
  host[n] = '\0';
  *port = (int)p;
  return 0;
}

socklen_t addr_len(const struct sockaddr_storage *ss)
{
  return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int addr_port(const struct sockaddr_storage *ss)
{
  return ss->ss_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)ss)->sin6_port)
                                   : ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

void addr_set_port(struct sockaddr_storage *ss, int port)
{
  if (ss->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

/* host (no port) into out, port 0: getaddrinfo, the first stream address. */
static int resolve_host(const char *host, int family, struct sockaddr_storage *out, char *err,
                        size_t errlen)
{
  struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || !res) {
    snprintf(err, errlen, "cannot resolve '%s': %s", host, rc ? gai_strerror(rc) : "no address");
    if (res) freeaddrinfo(res);
    return -1;
  }
  memset(out, 0, sizeof(*out));
  memcpy(out, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  addr_set_port(out, 0);
  return 0;
}

int addr_resolve(const char *hostport, struct sockaddr_storage *out, char *err, size_t errlen)
{
  char host[256];
  int port;
  if (addr_split(hostport, 0, host, sizeof(host), &port) != 0) {
    snprintf(err, errlen, "'%s' is not host:port (a port in 1..65535; IPv6 as [addr]:port)",
             hostport);
    return -1;
  }
  if (resolve_host(host, AF_UNSPEC, out, err, errlen) != 0) return -1;
  addr_set_port(out, port);
  return 0;
}

int addr_toward(const struct sockaddr_storage *to, struct sockaddr_storage *out, char *err,
                size_t errlen)
{
  int fd = socket(to->ss_family, SOCK_DGRAM, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  struct sockaddr_storage dst = *to;
  if (addr_port(&dst) == 0) addr_set_port(&dst, 9); /* connect() wants a port; nothing is sent */
  socklen_t len = sizeof(*out);
  int rc = connect(fd, (struct sockaddr *)&dst, addr_len(&dst));
  if (rc == 0) rc = getsockname(fd, (struct sockaddr *)out, &len);
  int e = errno;
  close(fd);
  if (rc != 0) {
    char name[80];
    addr_name(to, name, sizeof(name));
    snprintf(err, errlen, "no route from this host to %s: %s", name, strerror(e));
    return -1;
  }
  addr_set_port(out, 0);
  return 0;
}

int addr_bind_spec(const char *spec, int family, struct sockaddr_storage *out, char *err,
                   size_t errlen)
{
  /* an interface's name: its first address, of the coordinator's family if it has one */
  if (if_nametoindex(spec) != 0) {
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
      snprintf(err, errlen, "AU_BIND=%s: getifaddrs: %s", spec, strerror(errno));
      return -1;
    }
    int found = 0;
    for (int pass = 0; pass < 2 && !found; pass++)
      for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || strcmp(i->ifa_name, spec) != 0) continue;
        const int fam = i->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6) continue;
        if (pass == 0 && family != AF_UNSPEC && fam != family) continue;
        memset(out, 0, sizeof(*out));
        out->ss_family = (sa_family_t)fam;
        memcpy(out, i->ifa_addr, addr_len(out));
        found = 1;
      }
    freeifaddrs(ifs);
    if (!found) {
      snprintf(err, errlen, "AU_BIND=%s: the interface has no IP address", spec);
      return -1;
    }
    addr_set_port(out, 0);
    return 0;
  }
  char e2[160];
  if (resolve_host(spec, AF_UNSPEC, out, e2, sizeof(e2)) != 0) {
    snprintf(err, errlen, "AU_BIND=%s is neither an address nor an interface (%s)", spec, e2);
    return -1;
  }
  return 0;
}

int addr_is_numeric(const char *host)
{
  struct in6_addr a6;
  struct in_addr a4;
  return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

int addr_is_loopback(const struct sockaddr_storage *ss)
{
  if (ss->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss->ss_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
  return 0;
}

void addr_any(const struct sockaddr_storage *ss, struct sockaddr_storage *out)
{
  memset(out, 0, sizeof(*out));
  out->ss_family = ss->ss_family;
  if (ss->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)out)->sin6_addr = in6addr_any;
  else
    ((struct sockaddr_in *)out)->sin_addr.s_addr = htonl(INADDR_ANY);
}

void addr_name(const struct sockaddr_storage *ss, char *out, size_t len)
{
  char ip[INET6_ADDRSTRLEN] = "?";
  if (ss->ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip, sizeof(ip));
    snprintf(out, len, "[%s]:%d", ip, addr_port(ss));
  } else {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip, sizeof(ip));
    snprintf(out, len, "%s:%d", ip, addr_port(ss));
  }
}
