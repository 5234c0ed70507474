// SPDX-License-Identifier: MIT
/* unit tests of the wire codec (src/proto.c) */
#include "unit.h"

#include "proto.h"

#define MAX_LEN 100

/* a valid encoded header of @type with @len */
static void mkhdr(uint8_t *buf, uint8_t type, uint64_t len)
{
	struct rmsgi_hdr h = {.type = type, .len = len};

	rmsgi_hdr_encode(&h, buf);
}

static int decode(const uint8_t *buf)
{
	struct rmsgi_hdr out;

	return rmsgi_hdr_decode(buf, RMSGI_HDR_SIZE, MAX_LEN, &out);
}

/* ------------------------------------------------------------------ */
/* header                                                               */

static void hdr_encode__roundtrip(void **state)
{
	struct rmsgi_hdr in = {.type = RMSGI_T_DATA,
			       .credits = 7,
			       .aux = 0x01020304,
			       .len = 4096,
			       .id = 0x1122334455667788ull};
	struct rmsgi_hdr out;
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	rmsgi_hdr_encode(&in, buf);
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 1 << 20, &out), 0);
	assert_int_equal(out.type, in.type);
	assert_int_equal(out.flags, 0);
	assert_int_equal(out.credits, in.credits);
	assert_int_equal(out.aux, in.aux);
	assert_true(out.len == in.len);
	assert_true(out.id == in.id);
}

/* every type goes through with a length it allows */
static void hdr_encode__roundtrip_every_type(void **state)
{
	static const struct {
		uint8_t type;
		uint64_t len;
		uint32_t aux_max; /* types that constrain aux */
	} cases[] = {
		{RMSGI_T_DATA, MAX_LEN, UINT32_MAX},
		{RMSGI_T_CREDIT, 0, UINT32_MAX},
		{RMSGI_T_RNDV_REQ, MAX_LEN, UINT32_MAX},
		{RMSGI_T_RNDV_ACK, 0, UINT32_MAX},
		{RMSGI_T_HELLO, RMSGI_HELLO_SIZE, UINT32_MAX},
		{RMSGI_T_HELLO_ACK, RMSGI_HELLO_SIZE + 32, UINT32_MAX},
		{RMSGI_T_REJECT, RMSGI_HELLO_SIZE + 1, UINT32_MAX},
		{RMSGI_T_WRITE, RMSGI_RMA_SIZE + MAX_LEN, 0},
		{RMSGI_T_WRITE_IMM, RMSGI_RMA_SIZE + MAX_LEN, UINT32_MAX},
		{RMSGI_T_READ_REQ, RMSGI_READ_REQ_SIZE, 0},
		{RMSGI_T_READ_RESP, MAX_LEN, 0},
		{RMSGI_T_IMM, 0, UINT32_MAX},
		{RMSGI_T_AUTH, RMSGI_AUTH_MAX, 4095},
		{RMSGI_T_PACK, RMSGI_PACK_MAX, 1},
		{RMSGI_T_REKEY, 0, UINT32_MAX},
	};
	size_t i;

	(void)state;
	assert_int_equal(sizeof(cases) / sizeof(cases[0]), RMSGI_T_MAX_ - 1);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rmsgi_hdr in = {
			.type = cases[i].type,
			.credits = (uint16_t)(0xffff - i),
			.aux = 0xfffffff0u + (uint32_t)i < cases[i].aux_max
				       ? 0xfffffff0u + (uint32_t)i
				       : cases[i].aux_max,
			.len = cases[i].len,
			.id = ~(uint64_t)i};
		struct rmsgi_hdr out;
		uint8_t buf[RMSGI_HDR_SIZE];

		memset(&out, 0xaa, sizeof(out));
		rmsgi_hdr_encode(&in, buf);
		assert_int_equal(
			rmsgi_hdr_decode(buf, sizeof(buf), MAX_LEN, &out), 0);
		assert_int_equal(out.type, in.type);
		assert_int_equal(out.flags, 0);
		assert_int_equal(out.credits, in.credits);
		assert_int_equal(out.aux, in.aux);
		assert_true(out.len == in.len);
		assert_true(out.id == in.id);
	}
}

/* one-sided frames: lengths and aux as proto.h says, nothing else */
static void hdr_decode__one_sided(void **state)
{
	static const struct {
		uint8_t type;
		uint32_t aux;
		uint64_t len;
		int ret;
	} cases[] = {
		{RMSGI_T_WRITE, 0, RMSGI_RMA_SIZE - 1, -EPROTO},
		{RMSGI_T_WRITE, 1, RMSGI_RMA_SIZE, -EPROTO},
		{RMSGI_T_WRITE, 0, RMSGI_RMA_SIZE, 0},
		{RMSGI_T_WRITE, 0, RMSGI_RMA_SIZE + MAX_LEN + 1, -EMSGSIZE},
		{RMSGI_T_WRITE, 0, UINT64_MAX, -EMSGSIZE},
		{RMSGI_T_WRITE_IMM, 7, RMSGI_RMA_SIZE - 1, -EPROTO},
		{RMSGI_T_WRITE_IMM, 7, RMSGI_RMA_SIZE + MAX_LEN + 1, -EMSGSIZE},
		{RMSGI_T_READ_REQ, 0, RMSGI_READ_REQ_SIZE + 1, -EPROTO},
		{RMSGI_T_READ_REQ, 1, RMSGI_READ_REQ_SIZE, -EPROTO},
		{RMSGI_T_READ_RESP, 13, 0, 0},
		{RMSGI_T_READ_RESP, 13, 1, -EPROTO},
		{RMSGI_T_READ_RESP, 4096, 0, -EPROTO},
		{RMSGI_T_READ_RESP, 0, MAX_LEN + 1, -EMSGSIZE},
		{RMSGI_T_IMM, 5, 1, -EPROTO},
	};
	struct rmsgi_rma r = {.off = 1ull << 40,
			      .token = 0xfedcba9876543210ull,
			      .len = 9},
			 o;
	uint8_t rb[RMSGI_READ_REQ_SIZE];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rmsgi_hdr in = {.type = cases[i].type,
				       .aux = cases[i].aux,
				       .len = cases[i].len};
		struct rmsgi_hdr out;
		uint8_t buf[RMSGI_HDR_SIZE];

		rmsgi_hdr_encode(&in, buf);
		assert_int_equal(
			rmsgi_hdr_decode(buf, sizeof(buf), MAX_LEN, &out),
			cases[i].ret);
	}
	rmsgi_rma_encode(&r, 1, rb);
	assert_int_equal(rmsgi_rma_decode(rb, sizeof(rb), 1, &o), 0);
	assert_true(o.off == r.off && o.token == r.token && o.len == r.len);
	/* the token is the 8 bytes after the offset, little-endian */
	assert_int_equal(rb[8], 0x10);
	assert_int_equal(rb[15], 0xfe);
	assert_int_equal(rmsgi_rma_decode(rb, RMSGI_RMA_SIZE, 1, &o), -EPROTO);
	assert_int_equal(rmsgi_rma_decode(rb, RMSGI_RMA_SIZE, 0, &o), 0);
	assert_true(o.len == 0);
}

/* the layout documented in proto.h, little-endian */
static void hdr_encode__wire_layout(void **state)
{
	static const uint8_t expect[RMSGI_HDR_SIZE] = {
		RMSGI_MAGIC,
		RMSGI_PROTO_VERSION,
		RMSGI_T_RNDV_ACK,
		0,
		0x34,
		0x12,
		0,
		0,
		0x78,
		0x56,
		0x34,
		0x12,
		0,
		0,
		0,
		0,
		0x08,
		0x07,
		0x06,
		0x05,
		0x04,
		0x03,
		0x02,
		0x01,
		0x18,
		0x17,
		0x16,
		0x15,
		0x14,
		0x13,
		0x12,
		0x11,
	};
	struct rmsgi_hdr in = {.type = RMSGI_T_RNDV_ACK,
			       .credits = 0x1234,
			       .aux = 0x12345678,
			       .len = 0x0102030405060708ull,
			       .id = 0x1112131415161718ull};
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	rmsgi_hdr_encode(&in, buf);
	assert_memory_equal(buf, expect, sizeof(expect));
}

static void hdr_decode__bad_magic(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, RMSGI_T_CREDIT, 0);
	buf[0] ^= 0xff;
	assert_int_equal(decode(buf), -EPROTO);
}

static void hdr_decode__bad_version(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, RMSGI_T_CREDIT, 0);
	buf[1] = RMSGI_PROTO_VERSION + 1;
	assert_int_equal(decode(buf), -EPROTO);
	buf[1] = 0;
	assert_int_equal(decode(buf), -EPROTO);
}

static void hdr_decode__type_zero(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, 0, 0);
	assert_int_equal(decode(buf), -EPROTO);
}

static void hdr_decode__type_max(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];
	unsigned int t;

	(void)state;
	for (t = RMSGI_T_MAX_; t <= 0xff; t++) {
		mkhdr(buf, (uint8_t)t, 0);
		assert_int_equal(decode(buf), -EPROTO);
	}
}

static void hdr_decode__flags_nonzero(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];
	unsigned int bit;

	(void)state;
	for (bit = 1; bit < 8; bit++) {
		mkhdr(buf, RMSGI_T_CREDIT, 0);
		buf[3] = (uint8_t)(1u << bit);
		assert_int_equal(decode(buf), -EPROTO);
	}
}

/* bytes 12-15 are the byte window's returned bytes (issue 32): the
 * header takes them, the connection refuses them from a peer without a
 * window (conn_credit.c) */
static void hdr_decode__window_bytes(void **state)
{
	struct rmsgi_hdr out;
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, RMSGI_T_CREDIT, 0);
	buf[12] = 0x01;
	buf[15] = 0x80;
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), MAX_LEN, &out), 0);
	assert_int_equal(out.bytes, 0x80000001u);
	memset(&out, 0, sizeof(out));
	out.type = RMSGI_T_CREDIT;
	out.bytes = 0x12345678;
	rmsgi_hdr_encode(&out, buf);
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), MAX_LEN, &out), 0);
	assert_int_equal(out.bytes, 0x12345678u);
}

/* the hello's window bits: what a window of so many bytes encodes to,
 * and back; 0 is none (every older peer) */
static void hello_window_bits(void **state)
{
	(void)state;
	assert_int_equal(rmsgi_hello_win(0), 0);
	assert_int_equal(rmsgi_hello_win(RMSGI_HELLO_F_PACK), 0);
	assert_int_equal(rmsgi_hello_win_flags(0), 0);
	assert_int_equal(rmsgi_hello_win(rmsgi_hello_win_flags(512 << 10)),
			 512 << 10);
	/* rounded down to a power of two, within 64 KiB .. 1 GiB */
	assert_int_equal(rmsgi_hello_win(rmsgi_hello_win_flags(700 << 10)),
			 512 << 10);
	assert_int_equal(rmsgi_hello_win(rmsgi_hello_win_flags(1000)),
			 64 << 10);
	assert_int_equal(rmsgi_hello_win(rmsgi_hello_win_flags(0xffffffffu)),
			 1u << 30);
	assert_int_equal(rmsgi_hello_win(0xf0), 1u << 30);
	assert_int_equal(rmsgi_hello_win_flags(1u << 30) & 0x0f, 0);
}

/* bytes 6-7, reserved before resumable sessions, carry the acks (the
 * connection refuses them without a session: rx.c); of byte 3 (flags)
 * only bit 0, the ack request, is taken */
static void hdr_decode__acks(void **state)
{
	struct rmsgi_hdr h = {.type = RMSGI_T_DATA, .acks = 0x8001, .len = 1};
	uint8_t buf[RMSGI_HDR_SIZE];
	struct rmsgi_hdr out;

	(void)state;
	rmsgi_hdr_encode(&h, buf);
	assert_int_equal(buf[6], 0x01);
	assert_int_equal(buf[7], 0x80);
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 1, &out), 0);
	assert_int_equal(out.acks, 0x8001);
	mkhdr(buf, RMSGI_T_DATA, 1);
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 1, &out), 0);
	assert_int_equal(out.acks, 0);
	buf[3] = 0x80;
	assert_int_equal(decode(buf), -EPROTO);
	buf[3] = RMSGI_HDR_F_ACKREQ;
	assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 1, &out), 0);
	assert_int_equal(out.flags, RMSGI_HDR_F_ACKREQ);
	h.flags = RMSGI_HDR_F_ACKREQ;
	rmsgi_hdr_encode(&h, buf);
	assert_int_equal(buf[3], RMSGI_HDR_F_ACKREQ);
}

static void hdr_decode__short_buffer(void **state)
{
	struct rmsgi_hdr out;
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, RMSGI_T_CREDIT, 0);
	assert_int_equal(
		rmsgi_hdr_decode(buf, RMSGI_HDR_SIZE - 1, MAX_LEN, &out),
		-EPROTO);
	assert_int_equal(rmsgi_hdr_decode(buf, 0, MAX_LEN, &out), -EPROTO);
	/* more than a header is fine: the payload follows */
	assert_int_equal(
		rmsgi_hdr_decode(buf, RMSGI_HDR_SIZE + 100, MAX_LEN, &out), 0);
}

static void hdr_decode__too_long(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, RMSGI_T_DATA, MAX_LEN + 1);
	assert_int_equal(decode(buf), -EMSGSIZE);
	mkhdr(buf, RMSGI_T_DATA, UINT64_MAX);
	assert_int_equal(decode(buf), -EMSGSIZE);
	mkhdr(buf, RMSGI_T_DATA, MAX_LEN);
	assert_int_equal(decode(buf), 0);
	mkhdr(buf, RMSGI_T_DATA, 0);
	assert_int_equal(decode(buf), 0);
}

static void hdr_decode__rndv_too_long(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, RMSGI_T_RNDV_REQ, MAX_LEN + 1);
	assert_int_equal(decode(buf), -EMSGSIZE);
	mkhdr(buf, RMSGI_T_RNDV_REQ, MAX_LEN);
	assert_int_equal(decode(buf), 0);
}

/* CREDIT and RNDV_ACK carry no payload */
static void hdr_decode__ctrl_len_nonzero(void **state)
{
	static const uint8_t types[] = {RMSGI_T_CREDIT, RMSGI_T_RNDV_ACK};
	uint8_t buf[RMSGI_HDR_SIZE];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(types); i++) {
		mkhdr(buf, types[i], 1);
		assert_int_equal(decode(buf), -EPROTO);
		mkhdr(buf, types[i], (uint64_t)1 << 63);
		assert_int_equal(decode(buf), -EPROTO);
		mkhdr(buf, types[i], 0);
		assert_int_equal(decode(buf), 0);
	}
}

/* handshake frames carry 16..48 bytes, whatever max_len says; a
 * server's HELLO_ACK up to 80 (its nonce after the private data) */
static void hdr_decode__hello_len_bounds(void **state)
{
	static const uint8_t types[] = {RMSGI_T_HELLO, RMSGI_T_HELLO_ACK,
					RMSGI_T_REJECT};
	struct rmsgi_hdr out;
	uint8_t buf[RMSGI_HDR_SIZE];
	size_t i, max;

	(void)state;
	for (i = 0; i < sizeof(types); i++) {
		/* private data and a session part (resume); a server's
		 * reply also a nonce */
		max = RMSGI_HELLO_SIZE + 32 + RMSGI_SESS_WIRE;
		if (types[i] == RMSGI_T_HELLO_ACK)
			max += RMSGI_NONCE_SIZE;
		mkhdr(buf, types[i], 0);
		assert_int_equal(decode(buf), -EPROTO);
		mkhdr(buf, types[i], RMSGI_HELLO_SIZE - 1);
		assert_int_equal(decode(buf), -EPROTO);
		mkhdr(buf, types[i], RMSGI_HELLO_SIZE);
		assert_int_equal(decode(buf), 0);
		mkhdr(buf, types[i], max);
		assert_int_equal(rmsgi_hdr_decode(buf, sizeof(buf), 0, &out),
				 0);
		mkhdr(buf, types[i], max + 1);
		assert_int_equal(decode(buf), -EPROTO);
	}
}

/* AUTH: a MAC and 32 bytes at most, aux a status (an errno) */
static void hdr_decode__auth_bounds(void **state)
{
	uint8_t buf[RMSGI_HDR_SIZE];

	(void)state;
	mkhdr(buf, RMSGI_T_AUTH, 0);
	assert_int_equal(decode(buf), 0);
	mkhdr(buf, RMSGI_T_AUTH, 64);
	assert_int_equal(decode(buf), 0);
	mkhdr(buf, RMSGI_T_AUTH, 65);
	assert_int_equal(decode(buf), -EPROTO);
	mkhdr(buf, RMSGI_T_AUTH, 0);
	buf[8] = 0xff;
	buf[9] = 0x0f; /* aux 4095 */
	assert_int_equal(decode(buf), 0);
	buf[9] = 0x10; /* aux 4096: not an errno */
	assert_int_equal(decode(buf), -EPROTO);
}

/* the flag and a server's nonce after the private data round-trip */
static void hello_encode__auth_nonce(void **state)
{
	struct rmsgi_hello in = {.pdata_len = 3,
				 .flags = RMSGI_HELLO_F_AUTH,
				 .credits = 8,
				 .eager_size = 4096,
				 .nonce_len = RMSGI_NONCE_SIZE};
	struct rmsgi_hello out;
	uint8_t buf[RMSGI_HELLO_MAX];
	size_t n;

	(void)state;
	memcpy(in.pdata, "abc", 3);
	memset(in.nonce, 0xa5, sizeof(in.nonce));
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(n, RMSGI_HELLO_SIZE + 3 + RMSGI_NONCE_SIZE);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), 0);
	assert_int_equal(out.flags, RMSGI_HELLO_F_AUTH);
	assert_int_equal(out.pdata_len, 3);
	assert_memory_equal(out.pdata, "abc", 3);
	assert_int_equal(out.nonce_len, RMSGI_NONCE_SIZE);
	assert_memory_equal(out.nonce, in.nonce, RMSGI_NONCE_SIZE);
	/* without the flag no nonce goes, whatever nonce_len says */
	in.flags = 0;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(n, RMSGI_HELLO_SIZE + 3);
	/* the flag without the bytes: a client's hello, no nonce */
	in.flags = RMSGI_HELLO_F_AUTH;
	in.nonce_len = 0;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(n, RMSGI_HELLO_SIZE + 3);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), 0);
	assert_int_equal(out.flags, RMSGI_HELLO_F_AUTH);
	assert_int_equal(out.nonce_len, 0);
}

/* ------------------------------------------------------------------ */
/* handshake                                                            */

static void hello_encode__roundtrip(void **state)
{
	struct rmsgi_hello in = {.pdata_len = 5,
				 .flags = 0x3,
				 .credits = 0x1234,
				 .status = -ECONNREFUSED,
				 .eager_size = 0x00102030,
				 .conn_id = 0xdeadbeef,
				 .pdata = {'h', 'e', 'l', 'l', 'o'}};
	struct rmsgi_hello out;
	uint8_t buf[RMSGI_HELLO_SIZE + 32];
	size_t n;

	(void)state;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(n, RMSGI_HELLO_SIZE + 5);
	assert_int_equal(buf[0], RMSGI_MAGIC);
	assert_int_equal(buf[1], RMSGI_PROTO_VERSION);
	assert_int_equal(buf[2], 5);
	memset(&out, 0xaa, sizeof(out));
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), 0);
	assert_int_equal(out.pdata_len, 5);
	assert_int_equal(out.flags, 0x3);
	assert_int_equal(out.credits, 0x1234);
	assert_int_equal(out.status, -ECONNREFUSED);
	assert_int_equal(out.eager_size, 0x00102030);
	assert_int_equal(out.conn_id, 0xdeadbeef);
	assert_memory_equal(out.pdata, "hello", 5);
	/* the rest of pdata is cleared, not left from before */
	assert_int_equal(out.pdata[5], 0);
}

static void hello_encode__full_pdata(void **state)
{
	struct rmsgi_hello in = {
		.pdata_len = 32, .credits = 4, .eager_size = 64};
	struct rmsgi_hello out;
	uint8_t buf[RMSGI_HELLO_SIZE + 32];
	size_t n;
	int i;

	(void)state;
	for (i = 0; i < 32; i++)
		in.pdata[i] = (uint8_t)(i * 7);
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(n, RMSGI_HELLO_SIZE + 32);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), 0);
	assert_int_equal(out.pdata_len, 32);
	assert_memory_equal(out.pdata, in.pdata, 32);
}

/* a pdata_len above 32 is clamped on encode, never overruns */
static void hello_encode__pdata_len_clamped(void **state)
{
	struct rmsgi_hello in = {.pdata_len = 200};
	uint8_t buf[RMSGI_HELLO_SIZE + 32 + 8];
	size_t n;

	(void)state;
	memset(buf, 0x5a, sizeof(buf));
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(n, RMSGI_HELLO_SIZE + 32);
	assert_int_equal(buf[2], 32);
	assert_int_equal(buf[RMSGI_HELLO_SIZE + 32], 0x5a);
}

static void hello_decode__pdata_len_above_32(void **state)
{
	struct rmsgi_hello in = {.pdata_len = 32}, out;
	uint8_t buf[RMSGI_HELLO_SIZE + 64];

	(void)state;
	memset(buf, 0, sizeof(buf));
	rmsgi_hello_encode(&in, buf);
	buf[2] = 33;
	assert_int_equal(rmsgi_hello_decode(buf, sizeof(buf), &out), -EPROTO);
	buf[2] = 0xff;
	assert_int_equal(rmsgi_hello_decode(buf, sizeof(buf), &out), -EPROTO);
}

static void hello_decode__short(void **state)
{
	struct rmsgi_hello in = {.pdata_len = 10}, out;
	uint8_t buf[RMSGI_HELLO_SIZE + 32];
	size_t n;

	(void)state;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), 0);
	/* the pdata it announces is not all there */
	assert_int_equal(rmsgi_hello_decode(buf, n - 1, &out), -EPROTO);
	assert_int_equal(rmsgi_hello_decode(buf, RMSGI_HELLO_SIZE - 1, &out),
			 -EPROTO);
	assert_int_equal(rmsgi_hello_decode(buf, 0, &out), -EPROTO);
	assert_int_equal(rmsgi_hello_decode(NULL, n, &out), -EPROTO);
}

static void hello_decode__bad_magic_version(void **state)
{
	struct rmsgi_hello in = {.credits = 8}, out;
	uint8_t buf[RMSGI_HELLO_SIZE + 32];
	size_t n;

	(void)state;
	n = rmsgi_hello_encode(&in, buf);
	buf[0] = RMSGI_MAGIC ^ 1;
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), -EPROTO);
	buf[0] = RMSGI_MAGIC;
	buf[1] = RMSGI_PROTO_VERSION + 1;
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), -EPROTO);
}

/* a status is 0 or a negative errno of a reject */
static void hello_decode__positive_status(void **state)
{
	struct rmsgi_hello in = {.status = 1}, out;
	uint8_t buf[RMSGI_HELLO_SIZE + 32];
	size_t n;

	(void)state;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), -EPROTO);
	in.status = INT16_MAX;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), -EPROTO);
	in.status = 0;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), 0);
	assert_int_equal(out.status, 0);
	in.status = INT16_MIN;
	n = rmsgi_hello_encode(&in, buf);
	assert_int_equal(rmsgi_hello_decode(buf, n, &out), 0);
	assert_int_equal(out.status, INT16_MIN);
}

/* ------------------------------------------------------------------ */
/* rendezvous segments                                                  */

static void seg_encode__roundtrip(void **state)
{
	static const uint8_t expect[RMSGI_SEG_SIZE] = {
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0x44, 0x33, 0x22, 0x11, 0xdd, 0xcc, 0xbb, 0xaa,
	};
	struct rmsgi_seg in = {.addr = 0x0102030405060708ull,
			       .len = 0x11223344,
			       .rkey = 0xaabbccdd};
	struct rmsgi_seg out;
	uint8_t buf[RMSGI_SEG_SIZE];

	(void)state;
	rmsgi_seg_encode(&in, buf);
	assert_memory_equal(buf, expect, sizeof(expect));
	memset(&out, 0, sizeof(out));
	rmsgi_seg_decode(buf, &out);
	assert_true(out.addr == in.addr);
	assert_int_equal(out.len, in.len);
	assert_int_equal(out.rkey, in.rkey);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hdr_encode__roundtrip),
		cmocka_unit_test(hdr_encode__roundtrip_every_type),
		cmocka_unit_test(hdr_decode__one_sided),
		cmocka_unit_test(hdr_encode__wire_layout),
		cmocka_unit_test(hdr_decode__bad_magic),
		cmocka_unit_test(hdr_decode__bad_version),
		cmocka_unit_test(hdr_decode__type_zero),
		cmocka_unit_test(hdr_decode__type_max),
		cmocka_unit_test(hdr_decode__flags_nonzero),
		cmocka_unit_test(hdr_decode__acks),
		cmocka_unit_test(hdr_decode__window_bytes),
		cmocka_unit_test(hello_window_bits),
		cmocka_unit_test(hdr_decode__short_buffer),
		cmocka_unit_test(hdr_decode__too_long),
		cmocka_unit_test(hdr_decode__rndv_too_long),
		cmocka_unit_test(hdr_decode__ctrl_len_nonzero),
		cmocka_unit_test(hdr_decode__hello_len_bounds),
		cmocka_unit_test(hello_encode__roundtrip),
		cmocka_unit_test(hello_encode__full_pdata),
		cmocka_unit_test(hello_encode__pdata_len_clamped),
		cmocka_unit_test(hello_decode__pdata_len_above_32),
		cmocka_unit_test(hello_decode__short),
		cmocka_unit_test(hello_decode__bad_magic_version),
		cmocka_unit_test(hello_decode__positive_status),
		cmocka_unit_test(seg_encode__roundtrip),
		cmocka_unit_test(hdr_decode__auth_bounds),
		cmocka_unit_test(hello_encode__auth_nonce),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
