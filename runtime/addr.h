/* addr.h — network addresses for the cluster (addr.c): "host:port" and "[v6]:port" parsed
 * and resolved (getaddrinfo: host names and IPv6), the local address from which this host
 * reaches another, an interface's address, and numeric names to advertise. Blocking
 * (name resolution); called once while a node joins.
 */
#ifndef AUGUR_RUNTIME_ADDR_H
#define AUGUR_RUNTIME_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Splits "host:port" or "[host]:port" (port 1..65535, or 0 when zero_ok) into host and
 * port. 0, or -1. */
int addr_split(const char *hostport, int zero_ok, char *host, size_t hostlen, int *port);
/* Resolves "host:port" (a name, an IPv4 or an IPv6 address) into out. 0, or -1 with a
 * reason in err. */
int addr_resolve(const char *hostport, struct sockaddr_storage *out, char *err, size_t errlen);
/* The local address from which this host sends to `to` (the source address a connected
 * UDP socket gets; nothing is sent), port 0. 0, or -1 with a reason. */
int addr_toward(const struct sockaddr_storage *to, struct sockaddr_storage *out, char *err,
                size_t errlen);
/* What AU_BIND names, port 0: an IP address, a host name, or a network interface ("eth0":
 * its first address of the family `family`, else any). 0, or -1 with a reason. */
int addr_bind_spec(const char *spec, int family, struct sockaddr_storage *out, char *err,
                   size_t errlen);
/* 1 if host is a numeric IPv4 or IPv6 address. */
int addr_is_numeric(const char *host);
/* 1 if ss is a loopback address (127/8, ::1). */
int addr_is_loopback(const struct sockaddr_storage *ss);
/* The wildcard address (0.0.0.0 or ::) of ss's family. */
void addr_any(const struct sockaddr_storage *ss, struct sockaddr_storage *out);
int addr_port(const struct sockaddr_storage *ss);
void addr_set_port(struct sockaddr_storage *ss, int port);
/* The length of ss's address for connect() and bind(). */
socklen_t addr_len(const struct sockaddr_storage *ss);
/* "1.2.3.4:port" or "[::1]:port". */
void addr_name(const struct sockaddr_storage *ss, char *out, size_t len);

#endif
