// SPDX-License-Identifier: MIT
/*
 * proto.c - wire header encode/decode and validation.
 *
 * Transport-free and fuzzed: everything that arrives from the network goes
 * through rmsgi_hdr_decode() or rmsgi_hello_decode() before it is trusted.
 * The header codec itself is inline in proto.h (it runs for every frame);
 * the rules per frame type are here.
 */
#include <errno.h>
#include <string.h>

#include "proto.h"

int rmsgi_hdr_check_type(const struct rmsgi_hdr *h, uint64_t max_len)
{
	if (h->type == 0 || h->type >= RMSGI_T_MAX_)
		return -EPROTO;
	switch (h->type) {
	case RMSGI_T_RNDV_REQ: /* DATA is checked inline (proto.h) */
		if (h->len > max_len)
			return -EMSGSIZE;
		break;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
		if (h->type == RMSGI_T_WRITE && h->aux != 0)
			return -EPROTO;
		if (h->len < RMSGI_RMA_SIZE)
			return -EPROTO;
		if (h->len - RMSGI_RMA_SIZE > max_len)
			return -EMSGSIZE;
		break;
	case RMSGI_T_READ_REQ:
		if (h->len != RMSGI_READ_REQ_SIZE || h->aux != 0)
			return -EPROTO;
		break;
	case RMSGI_T_READ_RESP:
		if (h->aux > 4095 || (h->aux && h->len))
			return -EPROTO;
		if (h->len > max_len)
			return -EMSGSIZE;
		break;
	case RMSGI_T_HELLO:
	case RMSGI_T_REJECT:
		if (h->len < RMSGI_HELLO_SIZE ||
		    h->len > RMSGI_HELLO_SIZE + 32 + RMSGI_SESS_WIRE)
			return -EPROTO;
		break;
	case RMSGI_T_HELLO_ACK: /* may carry the server's nonce */
		if (h->len < RMSGI_HELLO_SIZE || h->len > RMSGI_HELLO_MAX)
			return -EPROTO;
		break;
	case RMSGI_T_AUTH:
		if (h->len > RMSGI_AUTH_MAX || h->aux > 4095)
			return -EPROTO;
		break;
	case RMSGI_T_PACK: /* the entries: rmsgi_pack_check */
		if (h->aux == 0 || h->aux > RMSGI_PACK_MAX_ENT ||
		    h->len < RMSGI_PACK_ENT_SIZE || h->len % 8 ||
		    h->len / RMSGI_PACK_ENT_SIZE < h->aux ||
		    h->len > RMSGI_PACK_MAX)
			return -EPROTO;
		break;
	default:
		if (h->len != 0)
			return -EPROTO;
		break;
	}
	return 0;
}

size_t rmsgi_hello_encode(const struct rmsgi_hello *h, void *buf)
{
	uint8_t *p = buf;
	uint8_t n = h->pdata_len > 32 ? 32 : h->pdata_len;

	p[0] = RMSGI_MAGIC;
	p[1] = RMSGI_PROTO_VERSION;
	p[2] = n;
	p[3] = h->flags;
	rmsgi_put16(p + 4, h->credits);
	rmsgi_put16(p + 6, (uint16_t)h->status);
	rmsgi_put32(p + 8, h->eager_size);
	rmsgi_put32(p + 12, h->conn_id);
	memcpy(p + RMSGI_HELLO_SIZE, h->pdata, n);
	p += RMSGI_HELLO_SIZE + n;
	if ((h->flags & RMSGI_HELLO_F_AUTH) &&
	    h->nonce_len == RMSGI_NONCE_SIZE) {
		memcpy(p, h->nonce, RMSGI_NONCE_SIZE);
		p += RMSGI_NONCE_SIZE;
	}
	/* a session part after a key holder's flag only behind its nonce:
	 * the decoder would take it for one (never sent so: a client's
	 * resume request drops the flag, a server's reply has the nonce) */
	if ((h->flags & RMSGI_HELLO_F_RESUME) && h->sess_len &&
	    h->sess_len <= RMSGI_SESS_MAX &&
	    (!(h->flags & RMSGI_HELLO_F_AUTH) ||
	     h->nonce_len == RMSGI_NONCE_SIZE)) {
		*p++ = h->sess_len;
		memcpy(p, h->sess, h->sess_len);
		p += h->sess_len;
	}
	return (size_t)(p - (uint8_t *)buf);
}

int rmsgi_hello_decode(const void *buf, size_t avail, struct rmsgi_hello *h)
{
	const uint8_t *p = buf;
	size_t off;

	if (!buf || avail < RMSGI_HELLO_SIZE)
		return -EPROTO;
	if (p[0] != RMSGI_MAGIC || p[1] != RMSGI_PROTO_VERSION)
		return -EPROTO;
	if (p[2] > 32 || RMSGI_HELLO_SIZE + (size_t)p[2] > avail)
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	h->pdata_len = p[2];
	h->flags = p[3];
	h->credits = rmsgi_get16(p + 4);
	h->status = (int16_t)rmsgi_get16(p + 6);
	h->eager_size = rmsgi_get32(p + 8);
	h->conn_id = rmsgi_get32(p + 12);
	if (h->status > 0)
		return -EPROTO;
	memcpy(h->pdata, p + RMSGI_HELLO_SIZE, h->pdata_len);
	/* a server's nonce; RDMA pads private data, so bytes beyond the
	 * hello may be there without one: only a server's reply to a key
	 * holder is read for it */
	off = RMSGI_HELLO_SIZE + (size_t)h->pdata_len;
	if ((h->flags & RMSGI_HELLO_F_AUTH) &&
	    avail >= off + RMSGI_NONCE_SIZE) {
		memcpy(h->nonce, p + off, RMSGI_NONCE_SIZE);
		h->nonce_len = RMSGI_NONCE_SIZE;
		off += RMSGI_NONCE_SIZE;
	}
	/* the session part: its length, then its bytes (RDMA pads private
	 * data with zeros: none sent reads as a length of 0; session.c
	 * checks each part's exact size) */
	if ((h->flags & RMSGI_HELLO_F_RESUME) &&
	    (!(h->flags & RMSGI_HELLO_F_AUTH) || h->nonce_len) && avail > off) {
		size_t n = p[off++];

		if (n > RMSGI_SESS_MAX || n > avail - off)
			return -EPROTO;
		h->sess_len = (uint8_t)n;
		memcpy(h->sess, p + off, n);
	}
	return 0;
}

int rmsgi_pack_check(const uint8_t *p, size_t len, uint32_t n, uint64_t max_len)
{
	size_t off = 0, sz, j;
	uint32_t i, l;

	if (n == 0 || n > RMSGI_PACK_MAX_ENT || (len && !p))
		return -EPROTO;
	for (i = 0; i < n; i++) {
		if (len - off < RMSGI_PACK_ENT_SIZE)
			return -EPROTO;
		l = rmsgi_get32(p + off);
		if (rmsgi_get32(p + off + 4) != 0 || l > max_len)
			return -EPROTO;
		sz = RMSGI_PACK_ENT(l);
		if (len - off < sz)
			return -EPROTO;
		for (j = RMSGI_PACK_ENT_SIZE + l; j < sz; j++)
			if (p[off + j])
				return -EPROTO;
		off += sz;
	}
	return off == len ? 0 : -EPROTO;
}

void rmsgi_seg_encode(const struct rmsgi_seg *s, void *buf)
{
	uint8_t *p = buf;

	rmsgi_put64(p, s->addr);
	rmsgi_put32(p + 8, s->len);
	rmsgi_put32(p + 12, s->rkey);
}

void rmsgi_seg_decode(const void *buf, struct rmsgi_seg *s)
{
	const uint8_t *p = buf;

	s->addr = rmsgi_get64(p);
	s->len = rmsgi_get32(p + 8);
	s->rkey = rmsgi_get32(p + 12);
}

void rmsgi_rma_encode(const struct rmsgi_rma *r, int read, void *buf)
{
	uint8_t *p = buf;

	rmsgi_put64(p, r->off);
	rmsgi_put64(p + 8, r->token);
	if (read)
		rmsgi_put64(p + 16, r->len);
}

int rmsgi_rma_decode(const void *buf, size_t avail, int read,
		     struct rmsgi_rma *r)
{
	const uint8_t *p = buf;

	if (avail < (read ? RMSGI_READ_REQ_SIZE : RMSGI_RMA_SIZE))
		return -EPROTO;
	/* any token decodes: which ones exist is the export table's say */
	r->off = rmsgi_get64(p);
	r->token = rmsgi_get64(p + 8);
	r->len = read ? rmsgi_get64(p + 16) : 0;
	return 0;
}

const char *rmsgi_frame_name(unsigned type)
{
	static const char *const names[RMSGI_T_MAX_] = {
		[RMSGI_T_DATA] = "DATA",
		[RMSGI_T_CREDIT] = "CREDIT",
		[RMSGI_T_RNDV_REQ] = "RNDV_REQ",
		[RMSGI_T_RNDV_ACK] = "RNDV_ACK",
		[RMSGI_T_HELLO] = "HELLO",
		[RMSGI_T_HELLO_ACK] = "HELLO_ACK",
		[RMSGI_T_REJECT] = "REJECT",
		[RMSGI_T_WRITE] = "WRITE",
		[RMSGI_T_WRITE_IMM] = "WRITE_IMM",
		[RMSGI_T_READ_REQ] = "READ_REQ",
		[RMSGI_T_READ_RESP] = "READ_RESP",
		[RMSGI_T_IMM] = "IMM",
		[RMSGI_T_AUTH] = "AUTH",
		[RMSGI_T_PACK] = "PACK",
		[RMSGI_T_REKEY] = "REKEY",
	};

	return type < RMSGI_T_MAX_ && names[type] ? names[type] : "unknown";
}
