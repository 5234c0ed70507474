/* SPDX-License-Identifier: MIT */
/*
 * harness.h - what every test of the rdma backend shares: the backend
 * (src/transport/rdma/) driven against the libibverbs/librdmacm mocks
 * (tests/mocks): connections are set up through mocked rdma_cm events,
 * frames arrive by filling posted SRQ receives, and the test completes
 * posted work requests itself. The backend is reached through its ops
 * table and the public API only. One test file per file of the backend
 * (cm.c, send.c, mem.c, recv.c, rma.c, teardown.c, dev.c).
 */
#ifndef RMSG_UNIT_RDMA_HARNESS_H
#define RMSG_UNIT_RDMA_HARNESS_H

#include <limits.h>
#include <sys/mman.h>
#include <stdio.h>
#include <unistd.h>
#include <ev.h>

#include "unit.h"

#include "mock.h"
#include "rmsg_int.h"
#include "conn_int.h" /* rmsgi_auth_client_mac: a peer's proof */

#define URI "rdma://192.0.2.1:7471"
#define SEND_TAG ((uint64_t)1 << 63)

extern const struct rmsgi_tr rmsgi_tr_rdma;

/* the backend's poll, as the context runs it */
int rt_poll(struct rmsg_ctx *ctx);

/* the application: callbacks that log what happens (harness.c) */

#define LOG_MAX 1024

struct event {
	char kind; /* 'E'stablished, 'M'essage, 'S'end done, 'X' close */
	int status;
	intptr_t arg;
};

struct rt {
	struct ev_loop *loop;
	struct rmsg_cfg *cfg;
	struct rmsg_ctx *ctx;
	struct rmsg_listener *l;
	struct rmsg_conn *c;
	struct rdma_cm_id *id;
	uint32_t qpn;
	struct event log[LOG_MAX];
	int nlog;
	int established, closed, close_reason, msgs;
	uint8_t *last_msg;
	size_t last_len;
	int sent_at_msg; /* mock.n_sent when on_msg ran */
	bool close_in_msg;
	int accept_ret;
	uint8_t peer_pdata[32];
	size_t peer_pdata_len;
	int warnings;
	int ring_moves;	     /* "send ring" debug lines (send.c) */
	char ring_last[128]; /* the last of them */
	int chunks_back;     /* sweeps of receive chunks to the pool (dev.c) */
	bool hold;	     /* on_msg holds the message */
	struct rmsg_msg *held[2]; /* the last two held */
};

int count(const struct rt *t, char kind);

int done_count(const struct rt *t, intptr_t arg, int *status_p);

extern const struct rmsg_conn_ops ops;

void done_cb(struct rmsg_conn *c, int status, void *arg);

/* driving the backend */

/* the flags of the peer's hello (a test sets them; rt_new clears) */
extern uint8_t peer_hello_flags;

struct rt *rt_new(void);

/* the context, once the test has set up t->cfg */
void rt_ctx(struct rt *t);

/* tears everything down; false if a mock object was left behind */
bool rt_free(struct rt *t);

int setup(void **state);

int teardown(void **state);

/* the backend's debug lines reach the log hook (ring_moves) */
void rt_debug_log(struct rt *t);

/* runs the loop for @s seconds (timers fire) */
void run_for(struct rt *t, double s);

/* delivers the queued CM events, as the event channel's ev_io would */
void cm_deliver(struct rt *t);

void cm_event(struct rt *t, struct rdma_cm_id *id, enum rdma_cm_event_type type,
	      int status, const void *pdata, size_t len);

/* drains completions and runs what they made due */
void pump(struct rt *t);

size_t hello(void *buf, uint16_t credits, uint32_t eager, int16_t status,
	     const char *pdata);

/* rmsg_connect, up to the rdma_connect() the peer would answer */
void start_connect(struct rt *t);

/* a client connection, established with a peer granting @credits */
void connect_peer(struct rt *t, uint16_t credits, uint32_t eager);

int send_buf(struct rt *t, const void *buf, size_t len, intptr_t arg);

int send_str(struct rt *t, const char *s, intptr_t arg);

/* a frame from the peer */
void peer_frame(struct rt *t, uint8_t type, uint16_t credits, uint32_t aux,
		uint64_t id, uint64_t len, const void *payload, size_t plen);

void peer_data(struct rt *t, const char *s, uint16_t credits);

/* a RNDV_REQ listing @n segments */
void peer_rndv(struct rt *t, uint64_t id, uint64_t len,
	       const struct rmsgi_seg *segs, int n);

/* the header of a send WR the mock captured */
void sent_hdr(const struct mock_send_wr *w, struct rmsgi_hdr *h);

/* every test runs between setup and teardown */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

#endif /* RMSG_UNIT_RDMA_HARNESS_H */
