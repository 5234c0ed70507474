// SPDX-License-Identifier: MIT
/*
 * unit tests of URI parsing (src/uri.c). The schemes are the registry's
 * rows (registry.h); the lookup is stubbed here over rows of this file's
 * own, two of which no real backend has, so that a parser that knew the
 * schemes itself would fail.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

#include "unit.h"

#include "rmsg_int.h"

static const struct rmsgi_tr stub = {.name = "stub"};
static const struct rmsgi_tr_row rows[] = {
	{"rdma", &stub, NULL}, {"tcp", &stub, NULL},  {"auto", &stub, "tcp"},
	{"x+y", &stub, NULL},  {"tcp2", &stub, NULL}, {NULL, NULL, NULL},
};

/* the registry's lookup, over this file's rows (the real one is tested
 * in tests/unit/registry.c) */
const struct rmsgi_tr_row *rmsgi_tr_row(const char *s, size_t len)
{
	const struct rmsgi_tr_row *r;

	for (r = rows; r->tr; r++)
		if (strlen(r->scheme) == len && !memcmp(r->scheme, s, len))
			return r;
	return NULL;
}

static void ok(const char *s, const char *scheme, const char *host,
	       uint16_t port)
{
	struct rmsgi_uri u;

	memset(&u, 0xaa, sizeof(u));
	if (rmsgi_uri_parse(s, &u) != 0)
		fail_msg("'%s' did not parse", s);
	assert_string_equal(u.row->scheme, scheme);
	assert_string_equal(u.host, host);
	assert_int_equal(u.port, port);
}

static void bad(const char *s, int err)
{
	struct rmsgi_uri u;
	int ret = rmsgi_uri_parse(s, &u);

	if (ret != err)
		fail_msg("'%s': %d, expected %d", s, ret, err);
}

static void uri_parse__schemes(void **state)
{
	(void)state;
	ok("rdma://10.0.0.1:7471", "rdma", "10.0.0.1", 7471);
	ok("tcp://localhost:80", "tcp", "localhost", 80);
	ok("auto://node-3.example.org:65535", "auto", "node-3.example.org",
	   65535);
	/* any scheme with a row: the one it names, not a prefix of it */
	ok("x+y://h:1", "x+y", "h", 1);
	ok("tcp2://h:2", "tcp2", "h", 2);
	/* the first "://" ends the scheme */
	ok("tcp://h:3?src=1.2.3.4", "tcp", "h", 3);
}

/* port 0 asks a listener for any free port */
static void uri_parse__port_range(void **state)
{
	(void)state;
	ok("tcp://h:0", "tcp", "h", 0);
	ok("tcp://h:1", "tcp", "h", 1);
	ok("tcp://h:00080", "tcp", "h", 80);
	bad("tcp://h:65536", -EINVAL);
	bad("tcp://h:99999", -EINVAL);
	bad("tcp://h:4294967376", -EINVAL); /* 2^32 + 80 */
	bad("tcp://h:184467440737095516160", -EINVAL);
	bad("tcp://h:-1", -EINVAL);
	bad("tcp://h:+80", -EINVAL);
	bad("tcp://h: 80", -EINVAL);
}

static void uri_parse__ipv6_brackets(void **state)
{
	(void)state;
	ok("tcp://[::1]:7000", "tcp", "::1", 7000);
	ok("rdma://[fe80::1%eth0]:1", "rdma", "fe80::1%eth0", 1);
	ok("auto://[2001:db8::42]:65535", "auto", "2001:db8::42", 65535);
	/* unbracketed IPv6 is ambiguous */
	bad("tcp://::1:7000", -EINVAL);
	bad("tcp://[::1]", -EINVAL);
	bad("tcp://[::1:7000", -EINVAL);
	bad("tcp://[::1]7000", -EINVAL);
	bad("tcp://[]:7000", -EINVAL);
}

static void uri_parse__missing_port(void **state)
{
	(void)state;
	bad("tcp://host", -EINVAL);
	bad("tcp://host:", -EINVAL);
	bad("rdma://[::1]:", -EINVAL);
	bad("tcp://", -EINVAL);
}

static void uri_parse__empty_host(void **state)
{
	(void)state;
	bad("tcp://:80", -EINVAL);
	bad("rdma://:7471", -EINVAL);
}

static void uri_parse__host_length(void **state)
{
	char s[300], host[256];

	(void)state;
	memset(host, 'a', 255);
	host[255] = '\0';
	snprintf(s, sizeof(s), "tcp://%s:1", host);
	ok(s, "tcp", host, 1);
	snprintf(s, sizeof(s), "tcp://%sa:1", host);
	bad(s, -EINVAL);
}

static void uri_parse__unknown_scheme(void **state)
{
	(void)state;
	bad("udp://h:1", -EPROTONOSUPPORT);
	bad("TCP://h:1", -EPROTONOSUPPORT);
	bad("tcp:/h:1", -EPROTONOSUPPORT);
	bad("tcp//h:1", -EPROTONOSUPPORT);
	bad("h:1", -EPROTONOSUPPORT);
	bad("", -EPROTONOSUPPORT);
	bad("rdmax://h:1", -EPROTONOSUPPORT);
	bad("tc://h:1", -EPROTONOSUPPORT); /* a prefix of a row's scheme */
	bad("x+://h:1", -EPROTONOSUPPORT);
	bad("://h:1", -EPROTONOSUPPORT);
	bad("udp://tcp://h:1", -EPROTONOSUPPORT);
}

/* "?src=ADDR" binds the connection's source address (numeric only) */
static void uri_parse__source_address(void **state)
{
	struct sockaddr_in6 *s6;
	struct sockaddr_in *s4;
	struct rmsgi_uri u;
	char text[64];

	(void)state;
	assert_int_equal(rmsgi_uri_parse("rdma://198.18.1.1:7471", &u), 0);
	assert_int_equal(u.src_len, 0);
	assert_int_equal(
		rmsgi_uri_parse("rdma://198.18.1.1:7471?src=198.18.1.2", &u),
		0);
	assert_string_equal(u.host, "198.18.1.1");
	assert_int_equal(u.port, 7471);
	assert_int_equal(u.src_len, sizeof(*s4));
	s4 = (struct sockaddr_in *)&u.src;
	assert_int_equal(s4->sin_family, AF_INET);
	assert_int_equal(s4->sin_port, 0);
	inet_ntop(AF_INET, &s4->sin_addr, text, sizeof(text));
	assert_string_equal(text, "198.18.1.2");
	/* IPv6, bare or bracketed; the host's own colons are not confused
	 * with the source's */
	assert_int_equal(rmsgi_uri_parse("tcp://[::1]:80?src=::1", &u), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 80);
	s6 = (struct sockaddr_in6 *)&u.src;
	assert_int_equal(s6->sin6_family, AF_INET6);
	assert_int_equal(u.src_len, sizeof(*s6));
	assert_int_equal(rmsgi_uri_parse("auto://h:1?src=[2001:db8::2]", &u),
			 0);
	assert_string_equal(u.row->scheme, "auto");
	assert_int_equal(u.src_len, sizeof(*s6));
	/* a later parse without a source forgets the earlier one */
	assert_int_equal(rmsgi_uri_parse("tcp://h:1", &u), 0);
	assert_int_equal(u.src_len, 0);

	bad("tcp://h:1?src=", -EINVAL);
	bad("tcp://h:1?", -EINVAL);
	bad("tcp://h:1?dst=1.2.3.4", -EINVAL);
	bad("tcp://h:1?src=localhost", -EINVAL); /* names would block */
	bad("tcp://h:1?src=1.2.3.4&x=1", -EINVAL);
	bad("tcp://h:1?src=1.2.3.4?", -EINVAL);
	bad("tcp://h:1?src=[1.2.3.4", -EINVAL);
	bad("tcp://h?src=1.2.3.4", -EINVAL);
	bad("tcp://h:x?src=1.2.3.4", -EINVAL);
}

static void uri_parse__trailing_garbage(void **state)
{
	(void)state;
	bad("tcp://h:80x", -EINVAL);
	bad("tcp://h:80/", -EINVAL);
	bad("tcp://h:80/path", -EINVAL);
	bad("tcp://h:80 ", -EINVAL);
	bad("tcp://[::1]:80]", -EINVAL);
	bad("tcp://h:80:81", -EINVAL);
}

static void uri_parse__null(void **state)
{
	struct rmsgi_uri u;

	(void)state;
	assert_int_equal(rmsgi_uri_parse(NULL, &u), -EINVAL);
	assert_int_equal(rmsgi_uri_parse("tcp://h:1", NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(uri_parse__schemes),
		cmocka_unit_test(uri_parse__port_range),
		cmocka_unit_test(uri_parse__ipv6_brackets),
		cmocka_unit_test(uri_parse__missing_port),
		cmocka_unit_test(uri_parse__empty_host),
		cmocka_unit_test(uri_parse__host_length),
		cmocka_unit_test(uri_parse__unknown_scheme),
		cmocka_unit_test(uri_parse__trailing_garbage),
		cmocka_unit_test(uri_parse__source_address),
		cmocka_unit_test(uri_parse__null),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
