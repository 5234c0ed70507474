// SPDX-License-Identifier: MIT
/*
 * gen_corpus.c - writes the seed corpus of fuzz_proto (valid frames of
 * every type, handshakes, descriptors, truncated and hostile ones) with the
 * library's own encoders, and the hand-written regression inputs.
 *
 *   tests/fuzz/run.sh --regen      (rebuilds tests/fuzz/corpus/proto and
 *                                   the named tests/fuzz/regressions inputs)
 *
 * The files are committed; this only documents how they were made.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmsg_int.h"

static const char *dir;

static void put(const char *name, const void *buf, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* a header of @type then @plen payload bytes from @pay */
static size_t frame(uint8_t *buf, uint8_t type, uint16_t credits, uint32_t aux,
		    uint64_t len, uint64_t id, const void *pay, size_t plen)
{
	struct rmsgi_hdr h = {.type = type,
			      .credits = credits,
			      .aux = aux,
			      .len = len,
			      .id = id};

	rmsgi_hdr_encode(&h, buf);
	if (plen)
		memcpy(buf + RMSGI_HDR_SIZE, pay, plen);
	return RMSGI_HDR_SIZE + plen;
}

static size_t hello(uint8_t *buf, int16_t status, const char *pdata)
{
	struct rmsgi_hello h = {.flags = 0,
				.credits = 64,
				.status = status,
				.eager_size = 8192,
				.conn_id = 7};

	h.pdata_len = (uint8_t)strlen(pdata);
	memcpy(h.pdata, pdata, h.pdata_len);
	return rmsgi_hello_encode(&h, buf);
}

static void seeds(void)
{
	uint8_t b[512], p[256];
	struct rmsgi_seg s;
	struct rmsgi_rma r;
	struct rmsgi_desc d;
	size_t n, m;

	n = frame(b, RMSGI_T_DATA, 4, 0, 5, 0, "hello", 5);
	put("data-hello", b, n);
	n = frame(b, RMSGI_T_DATA, 0, 0, 0, 0, NULL, 0);
	put("data-empty", b, n);
	n = frame(b, RMSGI_T_CREDIT, 16, 0, 0, 0, NULL, 0);
	put("credit", b, n);

	s = (struct rmsgi_seg){
		.addr = 0x7f0000001000, .len = 4096, .rkey = 0x1234};
	rmsgi_seg_encode(&s, p);
	s = (struct rmsgi_seg){
		.addr = 0x7f0000003000, .len = 4096, .rkey = 0x1234};
	rmsgi_seg_encode(&s, p + RMSGI_SEG_SIZE);
	n = frame(b, RMSGI_T_RNDV_REQ, 0, 0, 8192, 42, p, 2 * RMSGI_SEG_SIZE);
	put("rndv-req-2seg", b, n);
	n = frame(b, RMSGI_T_RNDV_ACK, 2, 0, 0, 42, NULL, 0);
	put("rndv-ack", b, n);

	m = hello(p, 0, "abc");
	n = frame(b, RMSGI_T_HELLO, 0, 0, m, 0, p, m);
	put("hello-frame", b, n);
	m = hello(p, 0, "");
	n = frame(b, RMSGI_T_HELLO_ACK, 0, 0, m, 0, p, m);
	put("hello-ack-frame", b, n);
	m = hello(p, -ECONNREFUSED, "go away");
	n = frame(b, RMSGI_T_REJECT, 0, 0, m, 0, p, m);
	put("reject-frame", b, n);
	/* the rdma_cm private data: a bare handshake, full private data */
	m = hello(p, 0, "0123456789abcdef0123456789abcdef");
	put("hello-raw-full", p, m);

	r = (struct rmsgi_rma){.off = 128, .token = 0x0123456789abcdefull};
	rmsgi_rma_encode(&r, 0, p);
	memcpy(p + RMSGI_RMA_SIZE, "payload!", 8);
	n = frame(b, RMSGI_T_WRITE, 0, 0, RMSGI_RMA_SIZE + 8, 9, p,
		  RMSGI_RMA_SIZE + 8);
	put("write", b, n);
	n = frame(b, RMSGI_T_WRITE_IMM, 0, 0x1234, RMSGI_RMA_SIZE + 8, 10, p,
		  RMSGI_RMA_SIZE + 8);
	put("write-imm", b, n);
	r = (struct rmsgi_rma){
		.off = 0, .token = 0x0123456789abcdefull, .len = 64};
	rmsgi_rma_encode(&r, 1, p);
	n = frame(b, RMSGI_T_READ_REQ, 0, 0, RMSGI_READ_REQ_SIZE, 11, p,
		  RMSGI_READ_REQ_SIZE);
	put("read-req", b, n);
	n = frame(b, RMSGI_T_READ_RESP, 0, 0, 8, 11, "8 bytes.", 8);
	put("read-resp", b, n);
	n = frame(b, RMSGI_T_READ_RESP, 0, EACCES, 0, 11, NULL, 0);
	put("read-resp-error", b, n);
	n = frame(b, RMSGI_T_IMM, 0, 0xabcd, 0, 1 << 20, NULL, 0);
	put("imm", b, n);

	/* a stream of three frames, as TCP delivers them */
	n = frame(b, RMSGI_T_CREDIT, 8, 0, 0, 0, NULL, 0);
	n += frame(b + n, RMSGI_T_DATA, 0, 0, 3, 0, "abc", 3);
	n += frame(b + n, RMSGI_T_RNDV_ACK, 0, 0, 0, 1, NULL, 0);
	put("stream-3-frames", b, n);

	/* truncated and oversize */
	n = frame(b, RMSGI_T_DATA, 0, 0, 5, 0, "hello", 5);
	put("trunc-hdr-20", b, 20);
	m = hello(p, 0, "abc");
	put("trunc-hello-17", p, 17);
	n = frame(b, RMSGI_T_DATA, 0, 0, (uint64_t)1 << 40, 0, NULL, 0);
	put("data-oversize", b, n);

	d = (struct rmsgi_desc){.access = RMSGI_ACCESS_ALL,
				.flags = RMSGI_DESC_F_RKEY,
				.token = 0x1badcafe0badf00dull,
				.rkey = 0x77,
				.addr = 0x7f0000000000,
				.len = 1 << 16};
	rmsgi_desc_encode(&d, b);
	memset(b + 32, 0, 17); /* offset 0, length 0, access 0 */
	b[32 + 8] = 64;	       /* length 64 */
	b[32 + 16] = RMSG_ACCESS_REMOTE_WRITE;
	put("desc-rw-64k", b, 49);
}

/* inputs that reached bugs of the kind a decoder must never have; each
 * found a planted bug within seconds (docs/reliability.md) */
static void regressions(void)
{
	uint8_t b[512], p[64];
	struct rmsgi_desc d;
	size_t n, m;

	/* pdata_len 32 with only the 16 fixed bytes there */
	m = hello(p, 0, "0123456789abcdef0123456789abcdef");
	put("hello-pdata-beyond-avail.bin", p, RMSGI_HELLO_SIZE);
	(void)m;
	/* WRITE shorter than its RMA header: len - 16 wraps */
	n = frame(b, RMSGI_T_WRITE, 0, 0, 15, 0, NULL, 0);
	put("write-len-below-rma.bin", b, n);
	/* WRITE_IMM of length 2^64 - 1: len + overhead wraps */
	n = frame(b, RMSGI_T_WRITE_IMM, 0, 1, UINT64_MAX, 0, NULL, 0);
	put("write-imm-len-max.bin", b, n);
	/* READ_RESP with both a status and bytes */
	n = frame(b, RMSGI_T_READ_RESP, 0, 5, 8, 0, "8 bytes.", 8);
	put("read-resp-status-and-bytes.bin", b, n);
	/* RNDV_REQ announcing more than any maximum */
	n = frame(b, RMSGI_T_RNDV_REQ, 0, 0, UINT64_MAX, 0, NULL, 0);
	put("rndv-req-len-max.bin", b, n);
	/* descriptor whose address + length wraps */
	d = (struct rmsgi_desc){.access = RMSGI_ACCESS_ALL,
				.token = 1,
				.addr = UINT64_MAX - 10,
				.len = 100};
	rmsgi_desc_encode(&d, b);
	put("desc-addr-wraps.bin", b, 32);
	/* valid descriptor, peer offset + length wrap past its end */
	d = (struct rmsgi_desc){.access = RMSGI_ACCESS_ALL,
				.flags = RMSGI_DESC_F_RKEY,
				.token = 1,
				.addr = 4096,
				.len = 4096};
	rmsgi_desc_encode(&d, b);
	memset(b + 32, 0xff, 8);
	b[32] = 0x10; /* offset 2^64 - 240, length 256: the sum wraps to 16 */
	memset(b + 40, 0, 8);
	b[41] = 1;
	b[48] = RMSG_ACCESS_REMOTE_READ;
	put("desc-check-offset-wraps.bin", b, 49);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr,
			"usage: gen_corpus corpus-dir regressions-dir\n");
		return 2;
	}
	dir = argv[1];
	seeds();
	dir = argv[2];
	regressions();
	return 0;
}
