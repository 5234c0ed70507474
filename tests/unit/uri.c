// SPDX-License-Identifier: MIT
/* unit tests of URI parsing (src/uri.c) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

#include "unit.h"

#include "rmsg_int.h"

static void ok(const char *s, enum rmsgi_scheme scheme, const char *host,
	       uint16_t port)
{
	struct rmsgi_uri u;

	memset(&u, 0xaa, sizeof(u));
	if (rmsgi_uri_parse(s, &u) != 0)
		fail_msg("'%s' did not parse", s);
	assert_int_equal(u.scheme, scheme);
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
	ok("rdma://10.0.0.1:7471", RMSGI_SCHEME_RDMA, "10.0.0.1", 7471);
	ok("tcp://localhost:80", RMSGI_SCHEME_TCP, "localhost", 80);
	ok("auto://node-3.example.org:65535", RMSGI_SCHEME_AUTO,
	   "node-3.example.org", 65535);
}

/* port 0 asks a listener for any free port */
static void uri_parse__port_range(void **state)
{
	(void)state;
	ok("tcp://h:0", RMSGI_SCHEME_TCP, "h", 0);
	ok("tcp://h:1", RMSGI_SCHEME_TCP, "h", 1);
	ok("tcp://h:00080", RMSGI_SCHEME_TCP, "h", 80);
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
	ok("tcp://[::1]:7000", RMSGI_SCHEME_TCP, "::1", 7000);
	ok("rdma://[fe80::1%eth0]:1", RMSGI_SCHEME_RDMA, "fe80::1%eth0", 1);
	ok("auto://[2001:db8::42]:65535", RMSGI_SCHEME_AUTO, "2001:db8::42",
	   65535);
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
	ok(s, RMSGI_SCHEME_TCP, host, 1);
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
	assert_int_equal(u.scheme, RMSGI_SCHEME_AUTO);
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
