// SPDX-License-Identifier: MIT
/* unit tests of the wire header codec (src/proto.c) */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto.h"

static void hdr_encode__roundtrip(void **state)
{
	struct rmsgi_hdr in = { .type = RMSGI_T_DATA, .credits = 7,
				.aux = 0x01020304, .len = 4096,
				.id = 0x1122334455667788ull };
	struct rmsgi_hdr out;
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	rmsgi_hdr_encode(&in, buf);
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 1 << 20, &out), 0);
	assert_int_equal(out.type, in.type);
	assert_int_equal(out.credits, in.credits);
	assert_int_equal(out.aux, in.aux);
	assert_true(out.len == in.len);
	assert_true(out.id == in.id);
}

static void hdr_decode__bad_magic(void **state)
{
	struct rmsgi_hdr in = { .type = RMSGI_T_CREDIT }, out;
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	rmsgi_hdr_encode(&in, buf);
	buf[0] ^= 0xff;
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 100, &out),
			 -EPROTO);
}

static void hdr_decode__too_long(void **state)
{
	struct rmsgi_hdr in = { .type = RMSGI_T_DATA, .len = 101 }, out;
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	rmsgi_hdr_encode(&in, buf);
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 100, &out),
			 -EMSGSIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hdr_encode__roundtrip),
		cmocka_unit_test(hdr_decode__bad_magic),
		cmocka_unit_test(hdr_decode__too_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
