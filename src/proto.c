// SPDX-License-Identifier: MIT
/*
 * proto.c - wire header encode/decode and validation.
 *
 * Transport-free and fuzzed: everything that arrives from the network goes
 * through rmsgi_hdr_decode() or rmsgi_hello_decode() before it is trusted.
 */
#include <errno.h>
#include <string.h>

#include "proto.h"

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
	return get16(p) | ((uint32_t)get16(p + 2) << 16);
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | ((uint64_t)get32(p + 4) << 32);
}

void rmsgi_hdr_encode(const struct rmsgi_hdr *h, void *buf)
{
	uint8_t *p = buf;

	p[0] = RMSGI_MAGIC;
	p[1] = RMSGI_PROTO_VERSION;
	p[2] = h->type;
	p[3] = h->flags;
	put16(p + 4, h->credits);
	put16(p + 6, 0);
	put32(p + 8, h->aux);
	put32(p + 12, 0);
	put64(p + 16, h->len);
	put64(p + 24, h->id);
}

int rmsgi_hdr_decode(const void *buf, size_t avail, uint64_t max_len,
		     struct rmsgi_hdr *h)
{
	const uint8_t *p = buf;

	if (avail < RMSGI_HDR_SIZE)
		return -EPROTO;
	if (p[0] != RMSGI_MAGIC || p[1] != RMSGI_PROTO_VERSION)
		return -EPROTO;
	if (p[2] == 0 || p[2] >= RMSGI_T_MAX_ || p[3] != 0)
		return -EPROTO;
	if (get16(p + 6) != 0 || get32(p + 12) != 0)
		return -EPROTO;
	h->type = p[2];
	h->flags = p[3];
	h->credits = get16(p + 4);
	h->aux = get32(p + 8);
	h->len = get64(p + 16);
	h->id = get64(p + 24);
	switch (h->type) {
	case RMSGI_T_DATA:
	case RMSGI_T_RNDV_REQ:
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
	case RMSGI_T_HELLO_ACK:
	case RMSGI_T_REJECT:
		if (h->len < RMSGI_HELLO_SIZE || h->len > RMSGI_HELLO_SIZE + 32)
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
	put16(p + 4, h->credits);
	put16(p + 6, (uint16_t)h->status);
	put32(p + 8, h->eager_size);
	put32(p + 12, h->conn_id);
	memcpy(p + RMSGI_HELLO_SIZE, h->pdata, n);
	return RMSGI_HELLO_SIZE + n;
}

int rmsgi_hello_decode(const void *buf, size_t avail, struct rmsgi_hello *h)
{
	const uint8_t *p = buf;

	if (!buf || avail < RMSGI_HELLO_SIZE)
		return -EPROTO;
	if (p[0] != RMSGI_MAGIC || p[1] != RMSGI_PROTO_VERSION)
		return -EPROTO;
	if (p[2] > 32 || RMSGI_HELLO_SIZE + (size_t)p[2] > avail)
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	h->pdata_len = p[2];
	h->flags = p[3];
	h->credits = get16(p + 4);
	h->status = (int16_t)get16(p + 6);
	h->eager_size = get32(p + 8);
	h->conn_id = get32(p + 12);
	if (h->status > 0)
		return -EPROTO;
	memcpy(h->pdata, p + RMSGI_HELLO_SIZE, h->pdata_len);
	return 0;
}

void rmsgi_seg_encode(const struct rmsgi_seg *s, void *buf)
{
	uint8_t *p = buf;

	put64(p, s->addr);
	put32(p + 8, s->len);
	put32(p + 12, s->rkey);
}

void rmsgi_seg_decode(const void *buf, struct rmsgi_seg *s)
{
	const uint8_t *p = buf;

	s->addr = get64(p);
	s->len = get32(p + 8);
	s->rkey = get32(p + 12);
}

void rmsgi_rma_encode(const struct rmsgi_rma *r, int read, void *buf)
{
	uint8_t *p = buf;

	put64(p, r->off);
	put32(p + 8, r->rid);
	put32(p + 12, 0);
	if (read)
		put64(p + 16, r->len);
}

int rmsgi_rma_decode(const void *buf, size_t avail, int read,
		     struct rmsgi_rma *r)
{
	const uint8_t *p = buf;

	if (avail < (read ? RMSGI_READ_REQ_SIZE : RMSGI_RMA_SIZE))
		return -EPROTO;
	if (get32(p + 12) != 0)
		return -EPROTO;
	r->off = get64(p);
	r->rid = get32(p + 8);
	r->len = read ? get64(p + 16) : 0;
	return 0;
}
