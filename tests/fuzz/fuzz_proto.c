// SPDX-License-Identifier: MIT
/*
 * fuzz_proto.c - libFuzzer target over every decoder of bytes a peer
 * controls: the frame header (rmsgi_hdr_decode, with several maximum
 * message sizes), the handshake (rmsgi_hello_decode), the rendezvous
 * segment list (rmsgi_seg_decode), the one-sided RMA header
 * (rmsgi_rma_decode) and the exported memory-region descriptor
 * (rmsgi_desc_decode and rmsgi_desc_check, src/mr.c), and the entries
 * of a PACK frame (rmsgi_pack_check).
 *
 * Besides "no crash, no out-of-bounds read, no undefined behaviour"
 * (ASan and UBSan do that), it checks properties; a failed one aborts,
 * which libFuzzer reports as a crash:
 *   - return codes are only the documented ones; a header with a bad
 *     magic, version, type, or flag bit other than the ack request is -EPROTO; fewer than
 *     the fixed size of bytes is always refused;
 *   - what decodes re-encodes to the very same bytes, and decoding the
 *     re-encoded bytes gives the same struct (decode(encode(x)) == x);
 *   - a structure built from the input, encoded then decoded, comes back
 *     unchanged (or, for a header, is refused with -EPROTO);
 *   - no accepted header announces a payload above max_len (plus the small
 *     fixed overheads of one-sided and handshake frames); acceptance only
 *     grows with max_len; -EMSGSIZE only for a length above max_len;
 *   - a header decodes the same from exactly 32 bytes as from the whole
 *     input (it never looks further);
 *   - a descriptor accepted by rmsgi_desc_check really covers the range.
 * The input is also walked as a TCP byte stream of frames, the way
 * tcp_parse() and conn.c take it apart, running the payload decoders on
 * the payloads.
 *
 * Built by tests/fuzz/run.sh. With -DFUZZ_STANDALONE it gets a main()
 * that replays files given on the command line (for gcc, valgrind, or a
 * machine without libFuzzer).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmsg_int.h" /* rmsgi_desc_*, and proto.h */

/* mr.c's one call into rekey.c (rmsg_mr_export to a connection, which
 * this target never makes): no session here */
bool rmsgi_rekey_later(const struct rmsg_conn *c)
{
	(void)c;
	return false;
}

#define CHECK(cond)                                                \
	do {                                                       \
		if (!(cond)) {                                     \
			fprintf(stderr,                            \
				"fuzz_proto: property failed: %s " \
				"(%s:%d)\n",                       \
				#cond, __FILE__, __LINE__);        \
			abort();                                   \
		}                                                  \
	} while (0)

/* fixed payload overheads a header may announce beyond max_len: the RMA
 * header of WRITE, a READ_REQ, a handshake with full private data */
#define OVERHEAD_MAX RMSGI_HELLO_MAX

/* independent little-endian readers (not proto.c's) */
static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* an exact-size heap copy, so ASan sees any read past @n */
static uint8_t *dup_exact(const uint8_t *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	if (!q)
		abort();
	if (n)
		memcpy(q, p, n);
	return q;
}

static int hdr_eq(const struct rmsgi_hdr *a, const struct rmsgi_hdr *b)
{
	return a->type == b->type && a->flags == b->flags &&
	       a->credits == b->credits && a->acks == b->acks &&
	       a->aux == b->aux && a->bytes == b->bytes && a->len == b->len &&
	       a->id == b->id;
}

static int hello_eq(const struct rmsgi_hello *a, const struct rmsgi_hello *b)
{
	return a->pdata_len == b->pdata_len && a->flags == b->flags &&
	       a->credits == b->credits && a->status == b->status &&
	       a->eager_size == b->eager_size && a->conn_id == b->conn_id &&
	       a->pdata_len <= sizeof(a->pdata) &&
	       memcmp(a->pdata, b->pdata, a->pdata_len) == 0 &&
	       a->nonce_len == b->nonce_len &&
	       memcmp(a->nonce, b->nonce, a->nonce_len) == 0 &&
	       a->sess_len == b->sess_len && a->sess_len <= sizeof(a->sess) &&
	       memcmp(a->sess, b->sess, a->sess_len) == 0;
}

/* ------------------------------------------------------------------ */
/* the header                                                           */

static const uint64_t max_lens[] = {
	0,
	1,
	RMSGI_RMA_SIZE - 1,
	RMSGI_RMA_SIZE,
	4096,
	65536,
	1 << 20,
	UINT32_MAX,
	UINT64_MAX - RMSGI_RMA_SIZE,
	UINT64_MAX - 1,
	UINT64_MAX,
};
#define N_MAX_LENS (sizeof(max_lens) / sizeof(max_lens[0]))

/* one decode at @max_len, checked; returns its result */
static int hdr_one(const uint8_t *d, size_t n, uint64_t max_len,
		   struct rmsgi_hdr *out)
{
	struct rmsgi_hdr h, h2, h3;
	uint8_t enc[RMSGI_HDR_SIZE];
	int rc;

	memset(&h, 0, sizeof(h));
	rc = rmsgi_hdr_decode(d, n, max_len, &h);
	CHECK(rc == 0 || rc == -EPROTO || rc == -EMSGSIZE);
	if (n < RMSGI_HDR_SIZE) {
		CHECK(rc == -EPROTO);
		return rc;
	}
	/* documented: bad magic, version, type or flags (bytes 6-7 are
	 * the acks, which the connection checks) */
	if (d[0] != RMSGI_MAGIC || d[1] != RMSGI_PROTO_VERSION || d[2] == 0 ||
	    d[2] >= RMSGI_T_MAX_ || (d[3] & ~RMSGI_HDR_F_ACKREQ))
		CHECK(rc == -EPROTO);
	if (rc == -EMSGSIZE)
		CHECK(rd64(d + 16) > max_len);
	if (max_len == UINT64_MAX)
		CHECK(rc != -EMSGSIZE);

	/* the header alone decides: 32 bytes decode exactly alike */
	{
		uint8_t *c = dup_exact(d, RMSGI_HDR_SIZE);

		memset(&h3, 0, sizeof(h3));
		CHECK(rmsgi_hdr_decode(c, RMSGI_HDR_SIZE, max_len, &h3) == rc);
		if (rc == 0)
			CHECK(hdr_eq(&h, &h3));
		free(c);
	}
	if (rc)
		return rc;

	/* accepted: fields are the bytes, and the bounds hold */
	CHECK(h.type == d[2] && h.flags == d[3] && h.credits == rd16(d + 4) &&
	      h.acks == rd16(d + 6) && h.aux == rd32(d + 8) &&
	      h.bytes == rd32(d + 12) && h.len == rd64(d + 16) &&
	      h.id == rd64(d + 24));
	CHECK(h.type > 0 && h.type < RMSGI_T_MAX_);
	/* PACK: bounded by the largest eager size, not by max_len */
	CHECK(h.len <= max_len || h.len - max_len <= (uint64_t)OVERHEAD_MAX ||
	      h.type == RMSGI_T_PACK);
	switch (h.type) {
	case RMSGI_T_DATA:
	case RMSGI_T_RNDV_REQ:
	case RMSGI_T_READ_RESP:
		CHECK(h.len <= max_len);
		break;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
		CHECK(h.len >= RMSGI_RMA_SIZE);
		CHECK(h.len - RMSGI_RMA_SIZE <= max_len);
		break;
	case RMSGI_T_READ_REQ:
		CHECK(h.len == RMSGI_READ_REQ_SIZE);
		break;
	case RMSGI_T_HELLO: /* a resume request's session part may follow */
	case RMSGI_T_REJECT:
		CHECK(h.len >= RMSGI_HELLO_SIZE &&
		      h.len <= RMSGI_HELLO_SIZE + RMSG_PRIVATE_DATA_MAX +
				       RMSGI_SESS_WIRE);
		break;
	case RMSGI_T_HELLO_ACK: /* a server's nonce may follow */
		CHECK(h.len >= RMSGI_HELLO_SIZE && h.len <= RMSGI_HELLO_MAX);
		break;
	case RMSGI_T_AUTH:
		CHECK(h.len <= RMSGI_AUTH_MAX && h.aux <= 4095);
		break;
	case RMSGI_T_PACK: /* at least one entry of 8 bytes or more each */
		CHECK(h.aux >= 1 && h.aux <= 256 && h.len % 8 == 0 &&
		      h.len <= (1u << 20) && h.len / 8 >= h.aux);
		break;
	default:
		break;
	}

	/* round trip: encode(decode(b)) == b, decode(encode(h)) == h */
	memset(enc, 0x5a, sizeof(enc));
	rmsgi_hdr_encode(&h, enc);
	CHECK(memcmp(enc, d, RMSGI_HDR_SIZE) == 0);
	memset(&h2, 0, sizeof(h2));
	CHECK(rmsgi_hdr_decode(enc, sizeof(enc), max_len, &h2) == 0);
	CHECK(hdr_eq(&h, &h2));
	if (out)
		*out = h;
	return 0;
}

static void fuzz_hdr(const uint8_t *d, size_t n)
{
	int rc[N_MAX_LENS + 1];
	size_t i;

	for (i = 0; i < N_MAX_LENS; i++)
		rc[i] = hdr_one(d, n, max_lens[i], NULL);
	/* acceptance only grows with max_len (the list is ascending) */
	for (i = 1; i < N_MAX_LENS; i++)
		if (rc[i - 1] == 0)
			CHECK(rc[i] == 0);
	/* a maximum taken from the input, around the announced length */
	if (n >= RMSGI_HDR_SIZE + 1) {
		uint64_t len = rd64(d + 16), m = len;

		switch (d[n - 1] & 3) {
		case 0:
			m = len;
			break;
		case 1:
			m = len ? len - 1 : 0;
			break;
		case 2:
			m = len - RMSGI_RMA_SIZE;
			break;
		default:
			m = len + 1;
			break;
		}
		(void)hdr_one(d, n, m, NULL);
	}
	/* every truncation below the header size is refused, without
	 * reading past it */
	if (n >= 1) {
		size_t k = d[0] % RMSGI_HDR_SIZE;
		uint8_t *c = dup_exact(d, k < n ? k : n);
		struct rmsgi_hdr h;

		CHECK(rmsgi_hdr_decode(c, k < n ? k : n, UINT64_MAX, &h) ==
		      -EPROTO);
		free(c);
	}
}

/* decode(encode(x)) == x for a header built from the input */
static void roundtrip_hdr(const uint8_t *d, size_t n)
{
	struct rmsgi_hdr x, y;
	uint8_t enc[RMSGI_HDR_SIZE];
	int rc;

	if (n < 23)
		return;
	memset(&x, 0, sizeof(x));
	x.type = d[0];
	x.flags = d[0] & RMSGI_HDR_F_ACKREQ; /* the only flag */
	x.credits = rd16(d + 1);
	x.aux = rd32(d + 3);
	x.len = rd64(d + 7);
	x.id = rd64(d + 15);
	rmsgi_hdr_encode(&x, enc);
	CHECK(enc[0] == RMSGI_MAGIC && enc[1] == RMSGI_PROTO_VERSION);
	memset(&y, 0, sizeof(y));
	rc = rmsgi_hdr_decode(enc, sizeof(enc), UINT64_MAX, &y);
	/* a valid type with a length it may carry comes back; anything
	 * else is a protocol error, never a size error at UINT64_MAX */
	CHECK(rc == 0 || rc == -EPROTO);
	if (x.type == 0 || x.type >= RMSGI_T_MAX_)
		CHECK(rc == -EPROTO);
	if (x.type == RMSGI_T_DATA || x.type == RMSGI_T_RNDV_REQ)
		CHECK(rc == 0);
	if (rc == 0)
		CHECK(hdr_eq(&x, &y));
}

/* ------------------------------------------------------------------ */
/* the handshake                                                        */

static int fuzz_hello(const uint8_t *d, size_t n)
{
	struct rmsgi_hello h, h2;
	uint8_t enc[RMSGI_HELLO_MAX];
	size_t m;
	int rc;

	memset(&h, 0xa5, sizeof(h));
	rc = rmsgi_hello_decode(d, n, &h);
	CHECK(rc == 0 || rc == -EPROTO);
	CHECK(rmsgi_hello_decode(NULL, n, &h2) == -EPROTO);
	if (n < RMSGI_HELLO_SIZE)
		CHECK(rc == -EPROTO);
	if (n >= 3 && (d[0] != RMSGI_MAGIC || d[1] != RMSGI_PROTO_VERSION ||
		       d[2] > RMSG_PRIVATE_DATA_MAX))
		CHECK(rc == -EPROTO);
	if (rc)
		return rc;
	CHECK(h.pdata_len <= RMSG_PRIVATE_DATA_MAX);
	CHECK(RMSGI_HELLO_SIZE + (size_t)h.pdata_len <= n);
	CHECK(h.status <= 0);
	CHECK(h.pdata_len == d[2] && h.flags == d[3] &&
	      h.credits == rd16(d + 4) && h.status == (int16_t)rd16(d + 6) &&
	      h.eager_size == rd32(d + 8) && h.conn_id == rd32(d + 12));
	/* the server's nonce: with the flag, when its bytes are there */
	if ((h.flags & RMSGI_HELLO_F_AUTH) &&
	    n >= RMSGI_HELLO_SIZE + (size_t)h.pdata_len + RMSGI_NONCE_SIZE)
		CHECK(h.nonce_len == RMSGI_NONCE_SIZE &&
		      memcmp(h.nonce, d + RMSGI_HELLO_SIZE + h.pdata_len,
			     RMSGI_NONCE_SIZE) == 0);
	else
		CHECK(h.nonce_len == 0);
	/* the session part: with its flag, after the private data and the
	 * nonce, its length byte (RMSGI_SESS_MAX at most, within what
	 * came) then its bytes; none when nothing follows; with the key
	 * holder's flag only behind a nonce */
	if ((h.flags & RMSGI_HELLO_F_RESUME) &&
	    (!(h.flags & RMSGI_HELLO_F_AUTH) || h.nonce_len)) {
		size_t off =
			RMSGI_HELLO_SIZE + (size_t)h.pdata_len + h.nonce_len;
		size_t want = off < n ? d[off] : 0;

		CHECK(want <= RMSGI_SESS_MAX && (!want || off + 1 + want <= n));
		CHECK(h.sess_len == want &&
		      memcmp(h.sess, d + off + 1, h.sess_len) == 0);
	} else {
		CHECK(h.sess_len == 0);
	}
	m = rmsgi_hello_encode(&h, enc);
	CHECK(m == RMSGI_HELLO_SIZE + (size_t)h.pdata_len + h.nonce_len +
			   (h.sess_len ? 1 + (size_t)h.sess_len : 0));
	CHECK(memcmp(enc, d, m) == 0);
	/* exactly the encoded bytes suffice; one fewer never does (a
	 * nonce cut short: a hello without one) */
	{
		uint8_t *c = dup_exact(enc, m);

		memset(&h2, 0, sizeof(h2));
		CHECK(rmsgi_hello_decode(c, m, &h2) == 0);
		CHECK(hello_eq(&h, &h2));
		if (h.sess_len) {
			/* a session part shorter than its length says */
			CHECK(rmsgi_hello_decode(c, m - 1, &h2) == -EPROTO);
		} else if (h.nonce_len) {
			CHECK(rmsgi_hello_decode(c, m - 1, &h2) == 0);
			CHECK(h2.nonce_len == 0);
		} else {
			CHECK(rmsgi_hello_decode(c, m - 1, &h2) == -EPROTO);
		}
		free(c);
	}
	return 0;
}

static void roundtrip_hello(const uint8_t *d, size_t n)
{
	struct rmsgi_hello x, y;
	uint8_t enc[RMSGI_HELLO_MAX];
	size_t m;

	if (n < 15)
		return;
	memset(&x, 0, sizeof(x));
	x.pdata_len = d[0] % (RMSG_PRIVATE_DATA_MAX + 1);
	x.flags = d[1];
	x.credits = rd16(d + 2);
	x.status = (int16_t)(rd16(d + 4) | 0x8000); /* negative */
	if (d[0] & 0x80)
		x.status = 0;
	x.eager_size = rd32(d + 6);
	x.conn_id = rd32(d + 10);
	m = n - 14 < x.pdata_len ? n - 14 : x.pdata_len;
	memcpy(x.pdata, d + 14, m);
	if (d[13] == 0xff) {
		/* a length above the maximum is clamped by the encoder */
		memcpy(x.pdata, d + 14,
		       n - 14 < sizeof(x.pdata) ? n - 14 : sizeof(x.pdata));
		x.pdata_len = (uint8_t)(RMSG_PRIVATE_DATA_MAX + 1 + d[0] % 200);
		m = rmsgi_hello_encode(&x, enc);
		CHECK(m == RMSGI_HELLO_SIZE + RMSG_PRIVATE_DATA_MAX);
		x.pdata_len = RMSG_PRIVATE_DATA_MAX;
	} else {
		/* a server's accepting hello to a key holder: its nonce */
		if ((x.flags & RMSGI_HELLO_F_AUTH) && (d[13] & 0x40)) {
			x.nonce_len = RMSGI_NONCE_SIZE;
			memset(x.nonce, d[12], RMSGI_NONCE_SIZE);
		}
		/* a resumable session's part (session.c, resume.c) */
		if ((x.flags & RMSGI_HELLO_F_RESUME) &&
		    (!(x.flags & RMSGI_HELLO_F_AUTH) || x.nonce_len)) {
			x.sess_len = (uint8_t)(d[12] % (RMSGI_SESS_MAX + 1));
			memset(x.sess, d[11], x.sess_len);
		}
		m = rmsgi_hello_encode(&x, enc);
		CHECK(m == RMSGI_HELLO_SIZE + (size_t)x.pdata_len +
				   x.nonce_len +
				   (x.sess_len ? 1 + (size_t)x.sess_len : 0));
	}
	memset(&y, 0, sizeof(y));
	CHECK(rmsgi_hello_decode(enc, m, &y) == 0);
	CHECK(hello_eq(&x, &y));
}

/* ------------------------------------------------------------------ */
/* segments, RMA headers, descriptors                                   */

static void fuzz_seg(const uint8_t *d)
{
	struct rmsgi_seg s, s2;
	uint8_t enc[RMSGI_SEG_SIZE];

	rmsgi_seg_decode(d, &s);
	CHECK(s.addr == rd64(d) && s.len == rd32(d + 8) &&
	      s.rkey == rd32(d + 12));
	rmsgi_seg_encode(&s, enc);
	CHECK(memcmp(enc, d, RMSGI_SEG_SIZE) == 0);
	rmsgi_seg_decode(enc, &s2);
	CHECK(s.addr == s2.addr && s.len == s2.len && s.rkey == s2.rkey);
}

static void fuzz_segs(const uint8_t *d, size_t n)
{
	size_t off;

	for (off = 0; off + RMSGI_SEG_SIZE <= n; off += RMSGI_SEG_SIZE) {
		uint8_t *c = dup_exact(d + off, RMSGI_SEG_SIZE);

		fuzz_seg(c);
		free(c);
	}
}

static int fuzz_rma(const uint8_t *d, size_t n, int read)
{
	size_t need = read ? RMSGI_READ_REQ_SIZE : RMSGI_RMA_SIZE;
	struct rmsgi_rma r, r2;
	uint8_t enc[RMSGI_READ_REQ_SIZE];
	int rc;

	memset(&r, 0xa5, sizeof(r));
	rc = rmsgi_rma_decode(d, n, read, &r);
	CHECK(rc == 0 || rc == -EPROTO);
	if (n < need)
		CHECK(rc == -EPROTO);
	if (n >= need)
		CHECK(rc == 0); /* any token decodes */
	if (rc)
		return rc;
	CHECK(r.off == rd64(d) && r.token == rd64(d + 8));
	CHECK(read ? r.len == rd64(d + 16) : r.len == 0);
	memset(enc, 0x5a, sizeof(enc));
	rmsgi_rma_encode(&r, read, enc);
	CHECK(memcmp(enc, d, need) == 0);
	if (!read)
		CHECK(enc[RMSGI_RMA_SIZE] == 0x5a); /* wrote 16 bytes only */
	memset(&r2, 0, sizeof(r2));
	CHECK(rmsgi_rma_decode(enc, need, read, &r2) == 0);
	CHECK(r.off == r2.off && r.token == r2.token && r.len == r2.len);
	return 0;
}

#define DESC_SIZE 32

static void fuzz_desc(const uint8_t *d, size_t n)
{
	struct rmsgi_desc x, x2;
	uint8_t enc[DESC_SIZE], *c;
	uint64_t off, len;
	int rc, acc;

	CHECK(rmsgi_desc_decode(NULL, &x) == -EINVAL);
	if (n < DESC_SIZE)
		return;
	c = dup_exact(d, DESC_SIZE);
	memset(&x, 0xa5, sizeof(x));
	rc = rmsgi_desc_decode(c, &x);
	free(c);
	CHECK(rc == 0 || rc == -EINVAL);
	if (rc)
		return;
	CHECK(x.access == d[2] && x.flags == d[3] && x.rkey == rd32(d + 4) &&
	      x.token == rd64(d + 8) && x.addr == rd64(d + 16) &&
	      x.len == rd64(d + 24));
	CHECK((x.access & ~RMSGI_ACCESS_ALL) == 0);
	CHECK(x.token != 0 && x.len != 0 && x.addr + x.len >= x.addr);
	CHECK((x.flags & RMSGI_DESC_F_RKEY) || (x.rkey == 0 && x.addr == 0));
	rmsgi_desc_encode(&x, enc);
	CHECK(memcmp(enc, d, DESC_SIZE) == 0);
	memset(&x2, 0, sizeof(x2));
	CHECK(rmsgi_desc_decode(enc, &x2) == 0);
	CHECK(x.access == x2.access && x.flags == x2.flags &&
	      x.token == x2.token && x.rkey == x2.rkey && x.addr == x2.addr &&
	      x.len == x2.len);

	/* a peer's (offset, length) against the descriptor */
	if (n < DESC_SIZE + 17)
		return;
	off = rd64(d + DESC_SIZE);
	len = rd64(d + DESC_SIZE + 8);
	acc = d[DESC_SIZE + 16] & RMSGI_ACCESS_ALL;
	switch (d[DESC_SIZE + 16] >> 6) {
	case 1: /* near the end of the region */
		off = x.len - (off % (x.len < 64 ? x.len : 64) + 1);
		break;
	case 2:
		len = x.len - off;
		break;
	default:
		break;
	}
	rc = rmsgi_desc_check(&x, off, len, acc);
	CHECK(rc == 0 || rc == -EACCES || rc == -EINVAL);
	if (rc == 0) {
		CHECK((x.access & acc) == acc);
		CHECK(off <= x.len && len <= x.len - off); /* no overflow */
	} else if ((x.access & acc) == acc && off <= x.len &&
		   len <= x.len - off) {
		CHECK(0 && "in-bounds access refused");
	}
}

static void roundtrip_rma_desc(const uint8_t *d, size_t n)
{
	struct rmsgi_rma r, r2;
	struct rmsgi_desc x, y;
	uint8_t enc[DESC_SIZE];
	int read;

	if (n < 30)
		return;
	for (read = 0; read < 2; read++) {
		r.off = rd64(d);
		r.token = rd64(d + 8);
		r.len = read ? rd64(d + 16) : 0;
		rmsgi_rma_encode(&r, read, enc);
		CHECK(rmsgi_rma_decode(
			      enc, read ? RMSGI_READ_REQ_SIZE : RMSGI_RMA_SIZE,
			      read, &r2) == 0);
		CHECK(r.off == r2.off && r.token == r2.token &&
		      r.len == r2.len);
	}
	memset(&x, 0, sizeof(x));
	x.access = d[0] & RMSGI_ACCESS_ALL;
	x.flags = d[1] & RMSGI_DESC_F_RKEY;
	x.rkey = x.flags ? rd32(d + 2) : 0;
	x.token = rd64(d + 6) | 1;
	x.addr = x.flags ? rd64(d + 14) : 0;
	x.len = rd64(d + 22) | 1;
	if (x.addr + x.len < x.addr)
		x.addr = UINT64_MAX - x.len;
	rmsgi_desc_encode(&x, enc);
	memset(&y, 0, sizeof(y));
	CHECK(rmsgi_desc_decode(enc, &y) == 0);
	CHECK(x.access == y.access && x.flags == y.flags &&
	      x.token == y.token && x.rkey == y.rkey && x.addr == y.addr &&
	      x.len == y.len);
}

/* ------------------------------------------------------------------ */
/* PACK payloads                                                        */

/*
 * rmsgi_pack_check over @n bytes announced with @cnt entries, against an
 * independent walk of proto.h's format: accepted exactly when the walk
 * finds @cnt entries (reserved words and padding zero, each no longer
 * than @max_len) that end at @n.
 */
static void fuzz_pack(const uint8_t *d, size_t n, uint32_t cnt,
		      uint64_t max_len)
{
	size_t off = 0;
	uint32_t i;
	int rc, ok = cnt > 0 && cnt <= 256;

	rc = rmsgi_pack_check(d, n, cnt, max_len);
	CHECK(rc == 0 || rc == -EPROTO);
	for (i = 0; ok && i < cnt; i++) {
		uint32_t l;
		size_t sz, j;

		if (n - off < 8) {
			ok = 0;
			break;
		}
		l = rd32(d + off);
		sz = 8 + (((size_t)l + 7) / 8) * 8;
		if (rd32(d + off + 4) != 0 || l > max_len || n - off < sz) {
			ok = 0;
			break;
		}
		for (j = 8 + l; j < sz; j++)
			if (d[off + j])
				ok = 0;
		off += sz;
	}
	if (ok && off != n)
		ok = 0;
	CHECK((rc == 0) == ok);
}

/* the input as PACK payloads: announced with 1..8 entries and a few
 * bounds; and the entry codec's round trip */
static void fuzz_packs(const uint8_t *d, size_t n)
{
	static const uint64_t maxes[] = {0, 7, 64, UINT64_MAX};
	uint8_t enc[8];
	uint8_t *c;
	uint32_t cnt;
	size_t i;

	if (n < 1)
		return;
	c = dup_exact(d + 1, n - 1);
	for (i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++)
		for (cnt = 0; cnt <= (uint32_t)(d[0] & 7) + 1; cnt++)
			fuzz_pack(c, n - 1, cnt, maxes[i]);
	/* counts around the bound: all-zero input is 257 empty entries */
	fuzz_pack(c, n - 1, 256, UINT64_MAX);
	fuzz_pack(c, n - 1, 257, UINT64_MAX);
	free(c);
	if (n >= 4) {
		CHECK(rmsgi_pack_ent_encode(enc, rd32(d)) == enc + 8);
		CHECK(rd32(enc) == rd32(d) && rd32(enc + 4) == 0);
	}
}

/* ------------------------------------------------------------------ */
/* the input as a TCP byte stream of frames                            */

static void fuzz_stream(const uint8_t *d, size_t n)
{
	const uint64_t max = 1 << 20;
	size_t off = 0;
	int frames = 0;

	while (n - off >= RMSGI_HDR_SIZE && frames++ < 64) {
		struct rmsgi_hdr h;
		const uint8_t *p;
		uint8_t *pay;

		if (hdr_one(d + off, n - off, max, &h))
			return;
		if (n - off - RMSGI_HDR_SIZE < h.len)
			return; /* incomplete: the parser waits */
		p = d + off + RMSGI_HDR_SIZE;
		pay = dup_exact(p, (size_t)h.len);
		switch (h.type) {
		case RMSGI_T_HELLO:
		case RMSGI_T_HELLO_ACK:
		case RMSGI_T_REJECT:
			(void)fuzz_hello(pay, (size_t)h.len);
			break;
		case RMSGI_T_RNDV_REQ:
			fuzz_segs(pay, (size_t)h.len);
			break;
		case RMSGI_T_WRITE:
		case RMSGI_T_WRITE_IMM:
			(void)fuzz_rma(pay, (size_t)h.len, 0);
			break;
		case RMSGI_T_READ_REQ:
			(void)fuzz_rma(pay, (size_t)h.len, 1);
			break;
		case RMSGI_T_PACK:
			fuzz_pack(pay, (size_t)h.len, h.aux, max);
			break;
		default:
			break;
		}
		free(pay);
		off += RMSGI_HDR_SIZE + (size_t)h.len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_hdr(data, size);
	roundtrip_hdr(data, size);
	(void)fuzz_hello(data, size);
	roundtrip_hello(data, size);
	fuzz_segs(data, size);
	(void)fuzz_rma(data, size, 0);
	(void)fuzz_rma(data, size, 1);
	fuzz_desc(data, size);
	roundtrip_rma_desc(data, size);
	fuzz_packs(data, size);
	fuzz_stream(data, size);
	return 0;
}

#ifdef FUZZ_STANDALONE
/* replays the files named on the command line, once each */
int main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		uint8_t *buf = NULL;
		size_t n = 0, cap = 0, r;

		if (!f) {
			perror(argv[i]);
			return 2;
		}
		do {
			if (n == cap) {
				cap = cap ? cap * 2 : 4096;
				buf = realloc(buf, cap);
				if (!buf)
					abort();
			}
			r = fread(buf + n, 1, cap - n, f);
			n += r;
		} while (r > 0);
		fclose(f);
		/* exact size, as libFuzzer passes it */
		{
			uint8_t *c = dup_exact(buf, n);

			LLVMFuzzerTestOneInput(c, n);
			free(c);
		}
		free(buf);
	}
	printf("fuzz_proto: replayed %d input(s)\n", argc - 1);
	return 0;
}
#endif
