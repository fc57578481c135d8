/* test_addr.c — cluster addresses: host:port and [IPv6]:port parsing, resolution of names
 * and literals, the local address toward a host, interfaces, and the environment's checks
 * of AU_COORD, AU_BIND and AU_INSECURE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <netinet/in.h>

#include <augur.h>

#include "runtime/addr.h"

static void test_split(void **state)
{
  (void)state;
  char host[64];
  int port;
  assert_int_equal(addr_split("node01:7070", 0, host, sizeof(host), &port), 0);
  assert_string_equal(host, "node01");
  assert_int_equal(port, 7070);
  assert_int_equal(addr_split("[fe80::1]:80", 0, host, sizeof(host), &port), 0);
  assert_string_equal(host, "fe80::1");
  assert_int_equal(port, 80);
  assert_int_equal(addr_split("10.0.0.1:0", 1, host, sizeof(host), &port), 0);
  assert_int_equal(port, 0);
  /* refused: no port, port 0 where not allowed, out of range, a bare IPv6 address, an
   * empty host, an unclosed bracket, trailing junk, a host too long for the buffer */
  const char *bad[] = {"node01",
                       "node01:",
                       "10.0.0.1:0",
                       "h:65536",
                       "h:-1",
                       "::1:80",
                       ":80",
                       "[::1:80",
                       "[::1]80",
                       "h:80x",
                       "a-very-long-host-name-that-"
                       "does-not-fit-in-sixty-four-"
                       "bytes-at-all:1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(addr_split(bad[i], 0, host, sizeof(host), &port), -1);
}

static void test_resolve_and_name(void **state)
{
  (void)state;
  struct sockaddr_storage ss;
  char err[200], name[80];
  assert_int_equal(addr_resolve("127.0.0.1:7070", &ss, err, sizeof(err)), 0);
  addr_name(&ss, name, sizeof(name));
  assert_string_equal(name, "127.0.0.1:7070");
  assert_true(addr_is_loopback(&ss));
  assert_int_equal(addr_resolve("localhost:81", &ss, err, sizeof(err)), 0);
  assert_true(addr_is_loopback(&ss));
  assert_int_equal(addr_port(&ss), 81);
  assert_int_equal(addr_resolve("[::1]:7071", &ss, err, sizeof(err)), 0);
  assert_int_equal(ss.ss_family, AF_INET6);
  addr_name(&ss, name, sizeof(name));
  assert_string_equal(name, "[::1]:7071");
  assert_true(addr_is_loopback(&ss));
  assert_int_equal(addr_resolve("10.1.2.3:9", &ss, err, sizeof(err)), 0);
  assert_false(addr_is_loopback(&ss));
  /* a malformed one says so (names that do not resolve are not tried: that would ask a
   * name server, and tests contact nothing but their own addresses) */
  assert_int_equal(addr_resolve("::1:80", &ss, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "is not host:port"));
  assert_true(addr_is_numeric("10.0.0.1"));
  assert_true(addr_is_numeric("::1"));
  assert_false(addr_is_numeric("node01"));
}

static void test_toward_and_bind(void **state)
{
  (void)state;
  struct sockaddr_storage to, out;
  char err[200], name[80];
  assert_int_equal(addr_resolve("127.0.0.1:7070", &to, err, sizeof(err)), 0);
  assert_int_equal(addr_toward(&to, &out, err, sizeof(err)), 0);
  addr_name(&out, name, sizeof(name));
  assert_string_equal(name, "127.0.0.1:0"); /* loopback is reached from loopback */
  assert_int_equal(addr_bind_spec("lo", AF_INET, &out, err, sizeof(err)), 0);
  addr_name(&out, name, sizeof(name));
  assert_string_equal(name, "127.0.0.1:0");
  assert_int_equal(addr_bind_spec("127.0.0.2", AF_UNSPEC, &out, err, sizeof(err)), 0);
  addr_name(&out, name, sizeof(name));
  assert_string_equal(name, "127.0.0.2:0");
  struct sockaddr_storage any;
  addr_any(&to, &any);
  addr_set_port(&any, 5);
  addr_name(&any, name, sizeof(name));
  assert_string_equal(name, "0.0.0.0:5");
}

static void clear_env(void)
{
  const char *vars[] = {"AU_RANK",    "AU_NODES",       "AU_COORD",   "AU_BIND",
                        "AU_SECRET",  "AU_INSECURE",    "AU_PORTS",   "AU_CLUSTER",
                        "AU_TIMEOUT", "AU_QUEUE_BYTES", "AU_DEAD_MS", "OMPI_COMM_WORLD_SIZE",
                        "PMI_SIZE",   "SLURM_NTASKS"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
}

static void test_env(void **state)
{
  (void)state;
  au_cluster_opts_t o;
  char err[256];
  clear_env();
  setenv("AU_RANK", "1", 1);
  setenv("AU_NODES", "3", 1);
  setenv("AU_COORD", "[::1]:7070", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), 1);
  assert_string_equal(o.coord, "[::1]:7070");
  assert_string_equal(o.bind, ""); /* decided when joining */
  assert_int_equal(o.insecure, 0);
  setenv("AU_COORD", "node01:7070", 1);
  setenv("AU_BIND", "eth0", 1);
  setenv("AU_INSECURE", "1", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), 1);
  assert_string_equal(o.bind, "eth0");
  assert_int_equal(o.insecure, 1);
  setenv("AU_INSECURE", "yes", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), AU_EINVAL);
  assert_non_null(strstr(err, "AU_INSECURE='yes'"));
  unsetenv("AU_INSECURE");
  setenv("AU_BIND", "", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), AU_EINVAL);
  assert_non_null(strstr(err, "AU_BIND=''"));
  unsetenv("AU_BIND");
  setenv("AU_PORTS", "41000-41009", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), 1);
  assert_int_equal(o.port_lo, 41000);
  assert_int_equal(o.port_hi, 41009);
  const char *bad_ports[] = {"41000", "41009-41000", "0-5", "1-65536", "a-b", "1-2x", "-5"};
  for (size_t i = 0; i < sizeof(bad_ports) / sizeof(bad_ports[0]); i++) {
    setenv("AU_PORTS", bad_ports[i], 1);
    assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), AU_EINVAL);
    assert_non_null(strstr(err, "AU_PORTS="));
  }
  unsetenv("AU_PORTS");
  /* AU_DEAD_MS: the dead time, heartbeats at a tenth of it up to 500 ms */
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), 1);
  assert_int_equal(o.dead_ms, 5000);
  assert_int_equal(o.heartbeat_ms, 500);
  setenv("AU_DEAD_MS", "1500", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), 1);
  assert_int_equal(o.dead_ms, 1500);
  assert_int_equal(o.heartbeat_ms, 150);
  setenv("AU_DEAD_MS", "60000", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), 1);
  assert_int_equal(o.heartbeat_ms, 500);
  const char *bad_dead[] = {"99", "5s", "", "-1"};
  for (size_t i = 0; i < sizeof(bad_dead) / sizeof(bad_dead[0]); i++) {
    setenv("AU_DEAD_MS", bad_dead[i], 1);
    int rc = au_cluster_opts_from_env(&o, err, sizeof(err));
    if (!bad_dead[i][0]) { /* empty: unset */
      assert_int_equal(rc, 1);
      assert_int_equal(o.dead_ms, 5000);
    } else {
      assert_int_equal(rc, AU_EINVAL);
      assert_non_null(strstr(err, "AU_DEAD_MS="));
    }
  }
  unsetenv("AU_DEAD_MS");
  setenv("AU_COORD", "::1:7070", 1);
  assert_int_equal(au_cluster_opts_from_env(&o, err, sizeof(err)), AU_EINVAL);
  assert_non_null(strstr(err, "[addr]:port for IPv6"));
  clear_env();
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_resolve_and_name),
      cmocka_unit_test(test_toward_and_bind),
      cmocka_unit_test(test_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
