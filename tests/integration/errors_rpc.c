// SPDX-License-Identifier: MIT
/*
 * errors_rpc.c - the documented errors of rmsg_call(3), rmsg_call_cancel(3),
 * rmsg_handle(3), rmsg_reply(3) and rmsg_reply_error(3), on either
 * transport, and what each call's callback receives. After every refused
 * call the objects must stay usable: the connection still answers, a
 * request refused with -EINVAL can still be answered, and a call that
 * failed never runs its callback nor writes its call id.
 *
 *  1. rmsg_handle: NULL context (-EINVAL), removing a method that has no
 *     handler (-ENOENT); a removed method answers -ENOSYS.
 *  2. Send queue bound 4: four calls made before the connection is
 *     established wait in the queue, the fifth fails with -EAGAIN;
 *     on_writable follows and all four are answered.
 *  3. rmsg_call -EINVAL (NULL connection, iovcnt -1 and RMSG_IOV_MAX,
 *     NULL iov, a NULL base with a length); RMSG_IOV_MAX - 1 pieces work.
 *  4. Maximum message size 1024 on both sides: a request of 1008 bytes
 *     (+16 of header = 1024) works, 1009 fails with -EMSGSIZE; a reply of
 *     1009 bytes fails with -EMSGSIZE, uses up the request, and the caller
 *     gets -EMSGSIZE.
 *  5. rmsg_reply/rmsg_reply_error -EINVAL (NULL request, bad iov, err out
 *     of -4095..-1) leave the request to be answered; a second answer
 *     fails with -EINVAL and the caller gets the first one only.
 *  6. rmsg_call_cancel: NULL connection (-EINVAL); unknown id, a call
 *     already answered, past its deadline or canceled: -ENOENT.
 *  7. Out of memory (a second connection, no size limit): the server's
 *     budget (rmsg_cfg_set_reg_limit) used up by its own rmsg_buf_alloc
 *     buffers, rmsg_reply of as many bytes as one such buffer fails with
 *     -ENOMEM and the request stays to be answered: once the buffers are
 *     freed the same request is answered. Over RDMA a request sent by
 *     rendezvous meanwhile is refused by the server: the caller gets
 *     -ENOMEM and the handler never sees it (over TCP it waits for
 *     receive memory and arrives once the buffers are freed).
 *  8. Closing: rmsg_call on a closing connection fails with -ENOTCONN,
 *     a call outstanding gets -ECANCELED; the handler's requests left
 *     over are answered with -ENOTCONN (and are used up: -EINVAL again).
 */
#include <string.h>
#include <unistd.h>

#include "common.h"

#define M_ECHO 1
#define M_HOLD 2   /* answered later, from the test */
#define M_CHECKS 3 /* the handler tries the invalid answers first */
#define M_BIG 4	   /* replies as many bytes as the request's first byte x 8 */
#define M_ERR 5	   /* answers with the error in the request */
#define M_GONE 6   /* registered, then removed */
#define M_NOMEM 7  /* exhausts the server's budget, then replies */
#define MAX_MSG 1024
#define HDR 16 /* the RPC header, rmsg_call(3) "On the wire" */
#define BUF ((size_t)64 << 10)
#define SRV_LIMIT ((size_t)16 << 20)
#define MAX_BUFS ((int)(SRV_LIMIT / BUF) + 1)

struct res {
	int n;
	int status;
	double at; /* ev_time() of the callback */
	size_t len;
	uint8_t data[MAX_MSG];
};

static struct ev_loop *loop;
static struct rmsg_conn *client, *client2, *server_conn;
static struct rmsg_ctx *sctx;
static void *bufs[MAX_BUFS];
static int nbufs, nomem_ret = 1;
static struct rmsg_req *nomem_req;
static int established, writable, cli_closed, srv_closed;
static int cli_reason = 1, srv_reason = 1;
static struct rmsg_req *held[4];
static int nheld;
static int checks_done;
static int big_ret = 1, big_again = 1;

/* ---- server ---- */

static void srv_echo(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_reply(req, &iov, 1));
}

static void srv_hold(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *m, void *arg)
{
	T_ASSERT(nheld < 4, "too many held requests");
	held[nheld++] = req;
}

static void srv_checks(struct rmsg_conn *c, struct rmsg_req *req,
		       struct rmsg_msg *m, void *arg)
{
	struct iovec ok = {"ok", 2}, nullbase = {NULL, 5};
	struct iovec many[RMSG_IOV_MAX];
	int i;

	for (i = 0; i < RMSG_IOV_MAX; i++)
		many[i] = ok;
	/* covers: rmsg_handle.3 EINVAL */
	T_ASSERT(rmsg_reply(NULL, &ok, 1) == -EINVAL, "reply NULL req");
	T_ASSERT(rmsg_reply_error(NULL, -EPERM) == -EINVAL,
		 "reply_error NULL req");
	T_ASSERT(rmsg_reply(req, &ok, -1) == -EINVAL, "reply iovcnt -1");
	T_ASSERT(rmsg_reply(req, many, RMSG_IOV_MAX) == -EINVAL,
		 "reply iovcnt RMSG_IOV_MAX");
	T_ASSERT(rmsg_reply(req, NULL, 1) == -EINVAL, "reply NULL iov");
	T_ASSERT(rmsg_reply(req, &nullbase, 1) == -EINVAL, "reply NULL base");
	T_ASSERT(rmsg_reply_error(req, 0) == -EINVAL, "reply_error 0");
	T_ASSERT(rmsg_reply_error(req, 1) == -EINVAL, "reply_error 1");
	T_ASSERT(rmsg_reply_error(req, -4096) == -EINVAL, "reply_error -4096");
	/* the request is still to be answered */
	T_OK(rmsg_reply(req, &ok, 1));
	/* a second answer, in either form, is detected and changes nothing */
	/* covers: rmsg_handle.3 EINVAL */
	T_ASSERT(rmsg_reply(req, &ok, 1) == -EINVAL, "second reply");
	T_ASSERT(rmsg_reply_error(req, -EPERM) == -EINVAL,
		 "reply_error after reply");
	checks_done++;
}

static void srv_big(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *m, void *arg)
{
	static uint8_t buf[2 * MAX_MSG];
	size_t n = rmsg_msg_len(m) == sizeof(uint32_t)
			   ? *(const uint32_t *)rmsg_msg_data(m)
			   : 0;
	struct iovec iov = {buf, n};

	T_ASSERT(n <= sizeof(buf), "big %zu", n);
	memset(buf, 0xb5, n);
	big_ret = rmsg_reply(req, &iov, 1);
	if (big_ret) {
		/* used up by any error but EINVAL/ENOMEM */
		iov.iov_len = 1;
		big_again = rmsg_reply(req, &iov, 1);
	}
}

static void srv_err(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *m, void *arg)
{
	int32_t err;

	T_ASSERT(rmsg_msg_len(m) == sizeof(err), "err len");
	memcpy(&err, rmsg_msg_data(m), sizeof(err));
	T_OK(rmsg_reply_error(req, err));
	T_ASSERT(rmsg_reply_error(req, err) == -EINVAL, "second reply_error");
}

static void srv_gone(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *m, void *arg)
{
	T_FAIL("a removed handler ran");
}

/* the budget used up by the app's own buffers: the reply cannot be
 * copied (it is as large as one of them, so no pool buffer is free) */
static void srv_nomem(struct rmsg_conn *c, struct rmsg_req *req,
		      struct rmsg_msg *m, void *arg)
{
	static uint8_t reply[BUF - HDR];
	struct iovec iov = {reply, sizeof(reply)};
	int ret;

	while ((ret = rmsg_buf_alloc(sctx, BUF, &bufs[nbufs])) == 0)
		T_ASSERT(++nbufs < MAX_BUFS, "%d buffers of %zu within %zu",
			 nbufs, BUF, SRV_LIMIT);
	T_ASSERT(ret == -ENOMEM, "rmsg_buf_alloc: %d", ret);
	memset(reply, 0x6d, sizeof(reply));
	nomem_ret = rmsg_reply(req, &iov, 1);
	nomem_req = req;
}

static int srv_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		      const void *pdata, size_t len, void *arg)
{
	server_conn = c;
	return 0;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	srv_closed++;
	srv_reason = reason;
}

/* ---- client ---- */

static void reply_cb(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		     void *arg)
{
	struct res *res = arg;

	T_ASSERT(c == client || c == client2, "callback on another connection");
	T_ASSERT(status == 0 ? r != NULL : r == NULL, "status %d with reply %p",
		 status, (void *)r);
	res->n++;
	res->status = status;
	res->at = ev_time();
	res->len = r ? rmsg_msg_len(r) : 0;
	if (r && res->len <= sizeof(res->data))
		memcpy(res->data, rmsg_msg_data(r), res->len);
}

static void never_cb(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		     void *arg)
{
	T_FAIL("callback of a failed rmsg_call ran (status %d)", status);
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	established++;
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	writable++;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	cli_closed++;
	cli_reason = reason;
}

/* an echo round trip: the connection still works */
static void echo_ok(const char *what)
{
	static struct res r;
	struct iovec iov = {(void *)what, strlen(what)};

	memset(&r, 0, sizeof(r));
	T_OK(rmsg_call(client, M_ECHO, &iov, 1, 0, reply_cb, &r, NULL));
	T_RUN_UNTIL(loop, r.n == 1, 30);
	T_ASSERT(r.status == 0 && r.len == iov.iov_len &&
			 !memcmp(r.data, what, r.len),
		 "echo after %s: status %d len %zu", what, r.status, r.len);
}

static int call_big(uint32_t reply_len, struct res *r)
{
	struct iovec iov = {&reply_len, sizeof(reply_len)};

	memset(r, 0, sizeof(*r));
	return rmsg_call(client, M_BIG, &iov, 1, 0, reply_cb, r, NULL);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_close = srv_close}, c2ops = {0};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_writable = cli_writable,
				     .on_close = cli_close};
	static struct res q[4], r1, r2, rcan, rdl, rhold[2];
	double t0;
	static uint8_t req[MAX_MSG], pieces[RMSG_IOV_MAX];
	static struct iovec many[RMSG_IOV_MAX];
	struct rmsg_ctx *cctx;
	struct rmsg_cfg *scfg, *ccfg, *ctxcfg;
	struct rmsg_listener *lis, *lis2;
	static uint8_t rndv[BUF];
	char uri2[128];
	struct iovec iov;
	uint64_t id, id2;
	char uri[128];
	int32_t err;
	int i;

	t_require_transport();
	loop = ev_default_loop(0);
	t_deadline(loop, 300);
	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_set_max_msg_size(scfg, MAX_MSG));
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_max_msg_size(ccfg, MAX_MSG));
	T_OK(rmsg_cfg_set_send_queue(ccfg, 4));
	T_OK(rmsg_cfg_create(&ctxcfg));
	T_OK(rmsg_cfg_set_reg_limit(ctxcfg, SRV_LIMIT));
	T_OK(rmsg_ctx_create(loop, ctxcfg, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));

	/* 1. rmsg_handle */
	/* covers: rmsg_handle.3 EINVAL */
	T_ASSERT(rmsg_handle(NULL, M_ECHO, srv_echo, NULL) == -EINVAL,
		 "handle NULL ctx");
	/* covers: rmsg_handle.3 ENOENT */
	T_ASSERT(rmsg_handle(sctx, M_GONE, NULL, NULL) == -ENOENT,
		 "removing a method without a handler");
	T_OK(rmsg_handle(sctx, M_ECHO, srv_echo, NULL));
	T_OK(rmsg_handle(sctx, M_HOLD, srv_hold, NULL));
	T_OK(rmsg_handle(sctx, M_CHECKS, srv_checks, NULL));
	T_OK(rmsg_handle(sctx, M_BIG, srv_big, NULL));
	T_OK(rmsg_handle(sctx, M_ERR, srv_err, NULL));
	T_OK(rmsg_handle(sctx, M_NOMEM, srv_nomem, NULL));
	T_OK(rmsg_handle(sctx, M_GONE, srv_gone, NULL));
	T_OK(rmsg_handle(sctx, M_GONE, NULL, NULL));
	/* covers: rmsg_handle.3 ENOENT */
	T_ASSERT(rmsg_handle(sctx, M_GONE, NULL, NULL) == -ENOENT,
		 "removing a removed method");
	t_listen(sctx, scfg, &sops, srv_accept, NULL, &lis, uri, sizeof(uri));
	/* without the size limit, for step 7 */
	t_listen(sctx, NULL, NULL, NULL, NULL, &lis2, uri2, sizeof(uri2));

	/* 2. the send queue bound, before the connection is established */
	T_OK(rmsg_connect(cctx, uri, ccfg, &cops, NULL, &client));
	T_ASSERT(!established, "established inside rmsg_connect");
	for (i = 0; i < 4; i++) {
		iov.iov_base = &q[i].data[MAX_MSG - 1];
		q[i].data[MAX_MSG - 1] = (uint8_t)('a' + i);
		iov.iov_len = 1;
		T_OK(rmsg_call(client, M_ECHO, &iov, 1, 0, reply_cb, &q[i],
			       NULL));
	}
	id = 0x5eed;
	iov.iov_base = "e";
	iov.iov_len = 1;
	/* covers: rmsg_call.3 EAGAIN */
	T_ASSERT(rmsg_call(client, M_ECHO, &iov, 1, 0, never_cb, NULL, &id) ==
			 -EAGAIN,
		 "fifth call with a send queue of 4");
	T_ASSERT(id == 0x5eed, "call id written by a failed call");
	T_RUN_UNTIL(loop, q[0].n && q[1].n && q[2].n && q[3].n && writable, 60);
	for (i = 0; i < 4; i++)
		T_ASSERT(q[i].n == 1 && q[i].status == 0 && q[i].len == 1 &&
				 q[i].data[0] == 'a' + i,
			 "queued call %d: n %d status %d", i, q[i].n,
			 q[i].status);
	T_ASSERT(established == 1 && server_conn, "established");
	echo_ok("EAGAIN");

	/* a removed method: -ENOSYS */
	memset(&r1, 0, sizeof(r1));
	T_OK(rmsg_call(client, M_GONE, NULL, 0, 0, reply_cb, &r1, NULL));
	T_RUN_UNTIL(loop, r1.n, 30);
	T_ASSERT(r1.status == -ENOSYS, "removed method: %d", r1.status);

	/* 3. rmsg_call -EINVAL */
	iov.iov_base = "x";
	iov.iov_len = 1;
	for (i = 0; i < RMSG_IOV_MAX; i++) {
		pieces[i] = (uint8_t)i;
		many[i].iov_base = &pieces[i];
		many[i].iov_len = 1;
	}
	/* covers: rmsg_call.3 EINVAL */
	T_ASSERT(rmsg_call(NULL, M_ECHO, &iov, 1, 0, never_cb, NULL, &id) ==
			 -EINVAL,
		 "call NULL conn");
	T_ASSERT(rmsg_call(client, M_ECHO, &iov, -1, 0, never_cb, NULL, &id) ==
			 -EINVAL,
		 "call iovcnt -1");
	T_ASSERT(rmsg_call(client, M_ECHO, many, RMSG_IOV_MAX, 0, never_cb,
			   NULL, &id) == -EINVAL,
		 "call iovcnt RMSG_IOV_MAX");
	T_ASSERT(rmsg_call(client, M_ECHO, NULL, 1, 0, never_cb, NULL, &id) ==
			 -EINVAL,
		 "call NULL iov");
	iov.iov_base = NULL;
	iov.iov_len = 3;
	T_ASSERT(rmsg_call(client, M_ECHO, &iov, 1, 0, never_cb, NULL, &id) ==
			 -EINVAL,
		 "call NULL base");
	T_ASSERT(id == 0x5eed, "call id written by a failed call");
	/* the limit itself works */
	memset(&r1, 0, sizeof(r1));
	T_OK(rmsg_call(client, M_ECHO, many, RMSG_IOV_MAX - 1, 0, reply_cb, &r1,
		       &id));
	T_ASSERT(id != 0 && id != 0x5eed, "call id %llu",
		 (unsigned long long)id);
	T_RUN_UNTIL(loop, r1.n, 30);
	T_ASSERT(r1.status == 0 && r1.len == RMSG_IOV_MAX - 1 &&
			 !memcmp(r1.data, pieces, RMSG_IOV_MAX - 1),
		 "RMSG_IOV_MAX - 1 pieces: %d, %zu bytes", r1.status, r1.len);

	/* 4. sizes: 16 bytes of header count */
	memset(req, 0x3c, sizeof(req));
	iov.iov_base = req;
	iov.iov_len = MAX_MSG - HDR + 1;
	/* covers: rmsg_call.3 EMSGSIZE */
	T_ASSERT(rmsg_call(client, M_ECHO, &iov, 1, 0, never_cb, NULL, &id) ==
			 -EMSGSIZE,
		 "request of max + 1 with its header");
	iov.iov_len = MAX_MSG - HDR;
	memset(&r1, 0, sizeof(r1));
	T_OK(rmsg_call(client, M_ECHO, &iov, 1, 0, reply_cb, &r1, NULL));
	T_RUN_UNTIL(loop, r1.n, 30);
	T_ASSERT(r1.status == 0 && r1.len == MAX_MSG - HDR &&
			 !memcmp(r1.data, req, r1.len),
		 "request of the maximum: %d, %zu", r1.status, r1.len);
	T_OK(call_big(MAX_MSG - HDR, &r1));
	T_RUN_UNTIL(loop, r1.n, 30);
	T_ASSERT(big_ret == 0 && r1.status == 0 && r1.len == MAX_MSG - HDR,
		 "reply of the maximum: %d %d %zu", big_ret, r1.status, r1.len);
	T_OK(call_big(MAX_MSG - HDR + 1, &r2));
	T_RUN_UNTIL(loop, r2.n, 30);
	/* covers: rmsg_handle.3 EMSGSIZE */
	T_ASSERT(big_ret == -EMSGSIZE, "reply of max + 1: %d", big_ret);
	/* used up: a second answer is refused */
	T_ASSERT(big_again == -EINVAL, "answer after -EMSGSIZE: %d", big_again);
	/* covers: rmsg_call.3 EMSGSIZE */
	T_ASSERT(r2.status == -EMSGSIZE, "caller of a too-large reply: %d",
		 r2.status);
	echo_ok("EMSGSIZE");

	/* 5. invalid answers leave the request to be answered */
	memset(&r1, 0, sizeof(r1));
	T_OK(rmsg_call(client, M_CHECKS, NULL, 0, 0, reply_cb, &r1, NULL));
	T_RUN_UNTIL(loop, r1.n, 30);
	T_ASSERT(checks_done == 1, "checks handler");
	T_ASSERT(r1.status == 0 && r1.len == 2 && !memcmp(r1.data, "ok", 2),
		 "the first answer: %d %zu", r1.status, r1.len);
	err = -4095;
	iov.iov_base = &err;
	iov.iov_len = sizeof(err);
	memset(&r2, 0, sizeof(r2));
	T_OK(rmsg_call(client, M_ERR, &iov, 1, 0, reply_cb, &r2, NULL));
	T_RUN_UNTIL(loop, r2.n, 30);
	T_ASSERT(r2.status == -4095, "reply_error(-4095): %d", r2.status);
	/* replies arrive in order: a second answer would have come first */
	echo_ok("second answers");
	T_ASSERT(r1.n == 1 && r2.n == 1, "callbacks ran %d and %d times", r1.n,
		 r2.n);

	/* 6. cancel */
	/* covers: rmsg_call.3 EINVAL */
	T_ASSERT(rmsg_call_cancel(NULL, id) == -EINVAL, "cancel NULL conn");
	/* covers: rmsg_call.3 ENOENT */
	T_ASSERT(rmsg_call_cancel(client, 0) == -ENOENT, "cancel of id 0");
	memset(&r1, 0, sizeof(r1));
	T_OK(rmsg_call(client, M_ECHO, NULL, 0, 0, reply_cb, &r1, &id));
	T_ASSERT(rmsg_call_cancel(client, id + 1000) == -ENOENT,
		 "cancel of an unknown id");
	T_RUN_UNTIL(loop, r1.n, 30);
	T_ASSERT(r1.status == 0, "empty echo: %d", r1.status);
	/* covers: rmsg_call.3 ENOENT */
	T_ASSERT(rmsg_call_cancel(client, id) == -ENOENT,
		 "cancel of an answered call");
	/* past its deadline: the handler holds the request. The app was
	 * busy for 100 ms first (the loop's cached time is that old): the
	 * 50 ms count from the call all the same (rmsg_call.3) */
	memset(&rdl, 0, sizeof(rdl));
	usleep(100 * 1000);
	t0 = ev_time();
	T_OK(rmsg_call(client, M_HOLD, NULL, 0, 50, reply_cb, &rdl, &id));
	T_RUN_UNTIL(loop, rdl.n, 30);
	T_ASSERT(rdl.status == -ETIMEDOUT, "deadline: %d", rdl.status);
	T_ASSERT(rdl.at - t0 >= 0.049, "deadline of 50 ms after %.3f s",
		 rdl.at - t0);
	/* covers: rmsg_call.3 ENOENT */
	T_ASSERT(rmsg_call_cancel(client, id) == -ENOENT,
		 "cancel after the deadline");
	/* the late answer is dropped; the handler's side still succeeds */
	T_ASSERT(nheld == 1, "held %d", nheld);
	T_OK(rmsg_reply(held[0], NULL, 0));
	nheld = 0;
	/* canceled: -ECANCELED, from the loop; then -ENOENT */
	memset(&rcan, 0, sizeof(rcan));
	T_OK(rmsg_call(client, M_HOLD, NULL, 0, 0, reply_cb, &rcan, &id2));
	T_OK(rmsg_call_cancel(client, id2));
	T_ASSERT(rcan.n == 0, "callback inside rmsg_call_cancel");
	/* covers: rmsg_call.3 ENOENT */
	T_ASSERT(rmsg_call_cancel(client, id2) == -ENOENT, "second cancel");
	T_RUN_UNTIL(loop, rcan.n && nheld == 1, 30);
	T_ASSERT(rcan.status == -ECANCELED, "cancel: %d", rcan.status);
	/* the connection is up: the handler's answer goes out, and is
	 * dropped by the caller's library */
	T_OK(rmsg_reply(held[0], NULL, 0));
	nheld = 0;
	echo_ok("cancel");
	T_ASSERT(rdl.n == 1 && rcan.n == 1,
		 "a late reply reached a finished call: %d %d", rdl.n, rcan.n);

	/* 7. out of memory */
	T_OK(rmsg_connect(cctx, uri2, NULL, &c2ops, NULL, &client2));
	memset(&r1, 0, sizeof(r1));
	T_OK(rmsg_call(client2, M_NOMEM, NULL, 0, 0, reply_cb, &r1, NULL));
	T_RUN_UNTIL(loop, nomem_req, 60);
	/* covers: rmsg_handle.3 ENOMEM */
	T_ASSERT(nomem_ret == -ENOMEM, "reply without memory: %d", nomem_ret);
	/* a request sent by rendezvous on RDMA (above the eager size) */
	memset(rndv, 0x21, sizeof(rndv));
	iov.iov_base = rndv;
	iov.iov_len = sizeof(rndv);
	memset(&r2, 0, sizeof(r2));
	T_OK(rmsg_call(client2, M_HOLD, &iov, 1, 0, reply_cb, &r2, NULL));
	if (!strcmp(t_transport(), "rdma")) {
		T_RUN_UNTIL(loop, r2.n, 60);
		/* covers: rmsg_call.3 ENOMEM */
		T_ASSERT(r2.status == -ENOMEM,
			 "request the server had no memory for: %d", r2.status);
		T_ASSERT(nheld == 0, "a refused request reached the handler");
	}
	/* (over TCP it waits for receive memory; nothing is refused) */
	T_ASSERT(r1.n == 0, "the unanswered call ended: %d", r1.status);
	while (nbufs)
		rmsg_buf_free(sctx, bufs[--nbufs]);
	/* still to be answered, and now it can be */
	iov.iov_base = "fine";
	iov.iov_len = 4;
	T_OK(rmsg_reply(nomem_req, &iov, 1));
	if (strcmp(t_transport(), "rdma")) {
		T_RUN_UNTIL(loop, nheld == 1, 60);
		T_OK(rmsg_reply(held[0], NULL, 0));
		nheld = 0;
	}
	T_RUN_UNTIL(loop, r1.n && r2.n, 60);
	T_ASSERT(r1.status == 0 && r1.len == 4 && !memcmp(r1.data, "fine", 4),
		 "the answer after -ENOMEM: %d %zu", r1.status, r1.len);
	T_ASSERT(r1.n == 1 && r2.n == 1, "callbacks %d %d", r1.n, r2.n);
	T_OK(rmsg_conn_close(client2));

	/* 8. closing: requests held by the handler, a call outstanding */
	memset(rhold, 0, sizeof(rhold));
	T_OK(rmsg_call(client, M_HOLD, NULL, 0, 0, reply_cb, &rhold[0], NULL));
	T_OK(rmsg_call(client, M_HOLD, NULL, 0, 0, reply_cb, &rhold[1], NULL));
	T_RUN_UNTIL(loop, nheld == 2, 30);
	T_OK(rmsg_conn_close(client));
	iov.iov_base = "x";
	iov.iov_len = 1;
	/* covers: rmsg_call.3 ENOTCONN */
	T_ASSERT(rmsg_call(client, M_ECHO, &iov, 1, 0, never_cb, NULL, &id) ==
			 -ENOTCONN,
		 "call on a closing connection");
	T_RUN_UNTIL(loop, cli_closed && srv_closed, 60);
	T_ASSERT(cli_reason == 0, "client on_close %d", cli_reason);
	for (i = 0; i < 2; i++)
		T_ASSERT(rhold[i].n == 1 && rhold[i].status == -ECANCELED,
			 "outstanding call %d at close: n %d status %d", i,
			 rhold[i].n, rhold[i].status);
	/* the requests stay valid after the close, until answered */
	/* covers: rmsg_handle.3 ENOTCONN */
	T_ASSERT(rmsg_reply(held[0], &iov, 1) == -ENOTCONN,
		 "reply after the close");
	/* covers: rmsg_handle.3 ENOTCONN */
	T_ASSERT(rmsg_reply_error(held[1], -EPERM) == -ENOTCONN,
		 "reply_error after the close");
	/* used up */
	T_ASSERT(rmsg_reply(held[0], &iov, 1) == -EINVAL,
		 "reply after -ENOTCONN");
	T_ASSERT(rmsg_reply_error(held[1], -EPERM) == -EINVAL,
		 "reply_error after -ENOTCONN");
	T_ASSERT(cli_closed == 1 && srv_closed == 1, "on_close %d %d",
		 cli_closed, srv_closed);

	T_OK(rmsg_listener_close(lis));
	T_OK(rmsg_listener_close(lis2));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(scfg);
	rmsg_cfg_destroy(ccfg);
	rmsg_cfg_destroy(ctxcfg);
	printf("errors_rpc over %s: handle, call, cancel, reply errors "
	       "checked\n",
	       t_transport());
	return 0;
}
