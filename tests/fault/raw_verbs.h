/* SPDX-License-Identifier: MIT */
/*
 * raw_verbs.h - a peer that speaks librmsg's RDMA wire format by hand
 * over librdmacm and verbs (src/proto.h), for the hostile-peer tests:
 * connects with a hello in the private data, RAW_RXN receive buffers of
 * RAW_RXSZ bytes posted, then a send area of RAW_RXSZ bytes after them.
 * Errors end the process with _exit(): these run in forked children.
 */
#ifndef RMSG_TEST_RAW_VERBS_H
#define RMSG_TEST_RAW_VERBS_H

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#include "proto.h"

#define RAW_RXN 16     /* receive buffers posted */
#define RAW_RXSZ 65536 /* bytes each, and of the send area */

struct raw {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf; /* RAW_RXN receive buffers, then the send area */
	struct rmsgi_hello srv; /* the server's hello */
};

/* how raw_connect() sets the connection up */
struct raw_opts {
	int cqe;		     /* completion queue entries */
	uint32_t sqn;		     /* send queue depth */
	uint16_t credits;	     /* the hello's */
	uint32_t eager;		     /* the hello's eager size */
	uint8_t responder_resources; /* reads the server may have out */
	double secs;		     /* to wait for ESTABLISHED */
	uint8_t hello_flags;	     /* RMSGI_HELLO_F_AUTH: "I have a key" */
};

/* the send area, @off bytes in */
static inline uint8_t *raw_sbuf(struct raw *r, size_t off)
{
	return r->buf + (size_t)RAW_RXN * RAW_RXSZ + off;
}

/* waits for a cm event of type @want; the server's hello of an
 * ESTABLISHED or CONNECT_RESPONSE goes to r->srv */
static inline int raw_wait_ev(struct raw *r, enum rdma_cm_event_type want,
			      double secs)
{
	struct pollfd p = {.fd = r->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int type;

	if (poll(&p, 1, (int)(secs * 1000)) != 1)
		return -ETIMEDOUT;
	if (rdma_get_cm_event(r->ch, &ev))
		_exit(20);
	type = ev->event;
	if (type == RDMA_CM_EVENT_ESTABLISHED ||
	    type == RDMA_CM_EVENT_CONNECT_RESPONSE)
		rmsgi_hello_decode(ev->param.conn.private_data,
				   ev->param.conn.private_data_len, &r->srv);
	rdma_ack_cm_event(ev);
	if ((int)type != (int)want) {
		fprintf(stderr, "raw: cm event %s, wanted %s\n",
			rdma_event_str(type), rdma_event_str(want));
		return -EPROTO;
	}
	return 0;
}

/* posts receive buffer @i */
static inline void raw_post_recv(struct raw *r, int i)
{
	struct ibv_sge sge = {(uintptr_t)(r->buf + (size_t)i * RAW_RXSZ),
			      RAW_RXSZ, r->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uint64_t)i,
				 .sg_list = &sge,
				 .num_sge = 1},
			   *bad;

	if (ibv_post_recv(r->id->qp, &wr, &bad))
		_exit(25);
}

/* a cm id with its address and route resolved to @host:@port */
static inline void raw_resolve(struct raw *r, const char *host, uint16_t port)
{
	struct addrinfo *ai;
	char ps[8];

	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host, ps, NULL, &ai))
		_exit(21);
	r->ch = rdma_create_event_channel();
	if (!r->ch || rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(r->id, NULL, ai->ai_addr, 5000) ||
	    raw_wait_ev(r, RDMA_CM_EVENT_ADDR_RESOLVED, 10) ||
	    rdma_resolve_route(r->id, 5000) ||
	    raw_wait_ev(r, RDMA_CM_EVENT_ROUTE_RESOLVED, 10))
		_exit(22);
	freeaddrinfo(ai);
}

/* connection parameters carrying hello @h (encoded into @pd_buf, 64
 * bytes) */
static inline void raw_conn_param(struct rdma_conn_param *cp, uint8_t *pd_buf,
				  const struct rmsgi_hello *h,
				  uint8_t responder_resources)
{
	cp->private_data = pd_buf;
	cp->private_data_len = (uint8_t)rmsgi_hello_encode(h, pd_buf);
	cp->responder_resources = responder_resources;
	cp->initiator_depth = 1;
	cp->retry_count = 6;
	cp->rnr_retry_count = 7; /* retries RNR for good */
}

/* resolves, sets up the PD, CQ, buffers and QP, posts the receive
 * buffers and connects with a hello */
static inline void raw_connect(struct raw *r, const char *host, uint16_t port,
			       const struct raw_opts *o)
{
	struct ibv_qp_init_attr qa = {0};
	struct rdma_conn_param cp = {0};
	struct rmsgi_hello h = {.credits = o->credits,
				.eager_size = o->eager,
				.flags = o->hello_flags};
	uint8_t pd_buf[64];
	int i;

	raw_resolve(r, host, port);
	r->pd = ibv_alloc_pd(r->id->verbs);
	r->cq = ibv_create_cq(r->id->verbs, o->cqe, NULL, NULL, 0);
	r->buf = calloc(RAW_RXN + 1, RAW_RXSZ);
	if (!r->pd || !r->cq || !r->buf)
		_exit(23);
	r->mr = ibv_reg_mr(r->pd, r->buf, (size_t)(RAW_RXN + 1) * RAW_RXSZ,
			   IBV_ACCESS_LOCAL_WRITE);
	qa.send_cq = qa.recv_cq = r->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = o->sqn;
	qa.cap.max_recv_wr = RAW_RXN;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (!r->mr || rdma_create_qp(r->id, r->pd, &qa))
		_exit(24);
	for (i = 0; i < RAW_RXN; i++)
		raw_post_recv(r, i);
	raw_conn_param(&cp, pd_buf, &h, o->responder_resources);
	if (rdma_connect(r->id, &cp) ||
	    raw_wait_ev(r, RDMA_CM_EVENT_ESTABLISHED, o->secs))
		_exit(26);
}

/* posts @op of @len bytes at @off of the send area (an RDMA op goes to
 * @raddr, @rkey); the ibv_post_send() result */
static inline int raw_post(struct raw *r, enum ibv_wr_opcode op, size_t off,
			   size_t len, bool sig, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)raw_sbuf(r, off), (uint32_t)len,
			      r->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1000,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = sig ? IBV_SEND_SIGNALED : 0},
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(r->id->qp, &wr, &bad);
}

/* the status of the signalled work request raw_post() made (wr_id
 * 1000), other completions skipped, polled for up to @secs seconds: -1
 * when none came, -2 when polling failed */
static inline int raw_wait_wr(struct raw *r, double secs)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = ibv_poll_cq(r->cq, 1, &wc);
		if (n < 0)
			return -2;
		if (n == 1) {
			if (wc.wr_id == 1000)
				return (int)wc.status;
			continue; /* a SEND, or a receive flushed */
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) +
			    (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >
		    secs)
			return -1;
		usleep(1000);
	}
}

/* a SEND of @len bytes at @off of the send area */
static inline int raw_send(struct raw *r, size_t off, size_t len, bool sig)
{
	return raw_post(r, IBV_WR_SEND, off, len, sig, 0, 0);
}

/* the header of the frame receive completion @wc brought into @h (at most
 * 2^40 bytes announced); reposts its buffer */
static inline void raw_take_recv(struct raw *r, const struct ibv_wc *wc,
				 struct rmsgi_hdr *h)
{
	if (rmsgi_hdr_decode(r->buf + wc->wr_id * RAW_RXSZ, wc->byte_len,
			     (uint64_t)1 << 40, h))
		_exit(31);
	raw_post_recv(r, (int)wc->wr_id);
}

/* prints an error completion */
static inline void raw_wc_error(const struct ibv_wc *wc)
{
	fprintf(stderr, "raw: wc %s (wr_id %llu)\n",
		ibv_wc_status_str(wc->status), (unsigned long long)wc->wr_id);
}

/* disconnects and destroys the QP */
static inline void raw_disconnect(struct raw *r)
{
	rdma_disconnect(r->id);
	rdma_destroy_qp(r->id);
}

/* frees the rest, after raw_disconnect() */
static inline void raw_free(struct raw *r)
{
	ibv_dereg_mr(r->mr);
	ibv_destroy_cq(r->cq);
	ibv_dealloc_pd(r->pd);
	rdma_destroy_id(r->id);
	rdma_destroy_event_channel(r->ch);
	free(r->buf);
}

static inline void raw_close(struct raw *r)
{
	raw_disconnect(r);
	raw_free(r);
}

#endif
