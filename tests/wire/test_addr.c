/* Addresses (src/wire/addr.c), the one parser of --listen, --connect and
 * --serve: HOST:PORT with a name, a dotted IPv4 address or an [IPv6]
 * address; port 0 only for a listener; every bad form refused with one line
 * naming the flag and the value. Then resolving (a numeric address needs no
 * lookup; "localhost" does), the loopback test and the "ip:port" format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "runtime/error.h"
#include "wire/addr.h"

#define ERRLEN 512

static void expect_parse(const char *spec, bool port0_ok, const char *host, int port)
{
    ro_addr_t a;
    char err[ERRLEN] = "";
    int rc = ro__addr_parse(spec, port0_ok, &a, "--connect", err, sizeof err);
    if (rc != 0)
        fail_msg("'%s' refused: %s", spec, err);
    assert_string_equal(a.host, host);
    assert_int_equal(a.port, port);
}

/* One line naming the flag, the value as given and the port range. */
static void expect_bad(const char *spec, bool port0_ok)
{
    ro_addr_t a;
    char err[ERRLEN] = "", want[ERRLEN];
    assert_int_equal(ro__addr_parse(spec, port0_ok, &a, "--listen", err, sizeof err), RO_EINVAL);
    snprintf(want, sizeof want, "--listen '%s': expected HOST:PORT", spec);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("'%s': message \"%s\" does not start \"%s\"", spec, err, want);
    assert_non_null(strstr(err, port0_ok ? "[0, 65535]" : "[1, 65535]"));
    assert_null(strchr(err, '\n'));
}

static void test_parse_good(void **state)
{
    (void)state;
    expect_parse("127.0.0.1:5555", false, "127.0.0.1", 5555);
    expect_parse("10.1.2.3:1", false, "10.1.2.3", 1);
    expect_parse("0.0.0.0:65535", false, "0.0.0.0", 65535);
    expect_parse("[::1]:6000", false, "::1", 6000);
    expect_parse("[fe80::1%eth0]:7", false, "fe80::1%eth0", 7);
    expect_parse("localhost:80", false, "localhost", 80);
    expect_parse("node-3.example.org:5555", false, "node-3.example.org", 5555);
    /* Port 0 (any free port) only where the caller allows it. */
    expect_parse("127.0.0.1:0", true, "127.0.0.1", 0);
    expect_parse("[::1]:0", true, "::1", 0);
    /* The longest host that fits. */
    char spec[300], host[256];
    memset(host, 'h', 255);
    host[255] = '\0';
    snprintf(spec, sizeof spec, "%s:9", host);
    expect_parse(spec, false, host, 9);
}

static void test_parse_bad(void **state)
{
    (void)state;
    const char *bad[] = {
        "",                               /* nothing */
        "localhost",                      /* no port */
        "5555",                           /* no host */
        ":5555",                          /* empty host */
        "127.0.0.1:",                     /* empty port */
        "127.0.0.1:http",                 /* a service name */
        "127.0.0.1:-1",                   /* a sign */
        "127.0.0.1:+80",                  /* a sign */
        "127.0.0.1: 80",                  /* a blank */
        "127.0.0.1:80x",                  /* trailing junk */
        "127.0.0.1:65536",                /* too big */
        "127.0.0.1:99999999999999999999", /* far too big */
        "::1:5555",                       /* a bare IPv6 address: its port is ambiguous */
        "::1",                            /* the same, without a port */
        "[::1]",                          /* brackets, no port */
        "[::1]:",                         /* brackets, empty port */
        "[]:80",                          /* empty brackets */
        "[::1:80",                        /* unclosed bracket */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        expect_bad(bad[i], false);
        expect_bad(bad[i], true);
    }
    /* Port 0 where it is not allowed. */
    expect_bad("127.0.0.1:0", false);
    expect_bad("[::1]:0", false);
    /* A host longer than any name. */
    char spec[300];
    memset(spec, 'h', 256);
    snprintf(spec + 256, sizeof spec - 256, ":9");
    expect_bad(spec, false);
}

static void test_resolve(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ro_addr_t a;
    struct sockaddr_storage ss;
    char err[ERRLEN] = "", buf[80];

    /* Numeric: no lookup, the address itself. */
    assert_int_equal(ro__addr_parse("127.0.0.1:5555", false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&loop, &a, &ss, "--connect", err, sizeof err), 0);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 5555);
    assert_true(ro__addr_is_loopback((struct sockaddr *)&ss));
    ro__addr_format((struct sockaddr *)&ss, buf, sizeof buf);
    assert_string_equal(buf, "127.0.0.1:5555");

    assert_int_equal(ro__addr_parse("[::1]:6000", false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&loop, &a, &ss, "--connect", err, sizeof err), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_true(ro__addr_is_loopback((struct sockaddr *)&ss));
    ro__addr_format((struct sockaddr *)&ss, buf, sizeof buf);
    assert_string_equal(buf, "[::1]:6000");

    /* A name: looked up, the port written in. */
    assert_int_equal(ro__addr_parse("localhost:7070", false, &a, "--connect", err, sizeof err), 0);
    int rc = ro__addr_resolve(&loop, &a, &ss, "--connect", err, sizeof err);
    if (rc != 0)
        fail_msg("localhost: %s", err);
    assert_true(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
    assert_true(ro__addr_is_loopback((struct sockaddr *)&ss));
    ro__addr_format((struct sockaddr *)&ss, buf, sizeof buf);
    assert_non_null(strstr(buf, ":7070"));

    /* A name that cannot resolve (.invalid never does: RFC 6761). */
    assert_int_equal(
        ro__addr_parse("no-such-host.invalid:80", false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&loop, &a, &ss, "--connect", err, sizeof err), RO_ENOENT);
    assert_non_null(strstr(err, "--connect: cannot resolve 'no-such-host.invalid'"));

    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_loopback_and_format(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    char buf[80];
    const struct {
        const char *ip;
        bool loopback;
    } v4[] = {{"127.0.0.1", true}, {"127.255.3.4", true}, {"10.0.0.1", false},
              {"0.0.0.0", false},  {"128.0.0.1", false},  {"192.0.2.7", false}};
    for (size_t i = 0; i < sizeof v4 / sizeof v4[0]; i++) {
        assert_int_equal(uv_ip4_addr(v4[i].ip, 4242, (struct sockaddr_in *)&ss), 0);
        assert_int_equal(ro__addr_is_loopback((struct sockaddr *)&ss), v4[i].loopback);
        ro__addr_format((struct sockaddr *)&ss, buf, sizeof buf);
        char want[80];
        snprintf(want, sizeof want, "%s:4242", v4[i].ip);
        assert_string_equal(buf, want);
    }
    const struct {
        const char *ip;
        bool loopback;
    } v6[] = {{"::1", true}, {"::", false}, {"fd00::2", false}, {"::2", false}};
    for (size_t i = 0; i < sizeof v6 / sizeof v6[0]; i++) {
        assert_int_equal(uv_ip6_addr(v6[i].ip, 80, (struct sockaddr_in6 *)&ss), 0);
        assert_int_equal(ro__addr_is_loopback((struct sockaddr *)&ss), v6[i].loopback);
        ro__addr_format((struct sockaddr *)&ss, buf, sizeof buf);
        char want[80];
        snprintf(want, sizeof want, "[%s]:80", v6[i].ip);
        assert_string_equal(buf, want);
    }
    /* ro__addr_set_port, both families. */
    ro__addr_set_port(&ss, 9);
    ro__addr_format((struct sockaddr *)&ss, buf, sizeof buf);
    assert_string_equal(buf, "[::2]:9");
    assert_int_equal(uv_ip4_addr("127.0.0.1", 1, (struct sockaddr_in *)&ss), 0);
    ro__addr_set_port(&ss, 65535);
    ro__addr_format((struct sockaddr *)&ss, buf, sizeof buf);
    assert_string_equal(buf, "127.0.0.1:65535");
    /* A short buffer is cut, still terminated. */
    ro__addr_format((struct sockaddr *)&ss, buf, 6);
    assert_string_equal(buf, "127.0");
    /* Neither family: not loopback, and "?". */
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    assert_false(ro__addr_is_loopback((struct sockaddr *)&un));
    ro__addr_format((struct sockaddr *)&un, buf, sizeof buf);
    assert_string_equal(buf, "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_loopback_and_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
