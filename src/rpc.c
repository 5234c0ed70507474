// SPDX-License-Identifier: MIT
/*
 * rpc.c - calls, replies, the call table, deadlines and cancellation.
 *
 * RPC rides on ordinary messages, so eager sends, rendezvous and credits
 * apply unchanged and no transport knows about it. A request or reply is
 * a message whose frame header has aux = RMSGI_AUX_RPC_REQ or _REP and
 * whose payload starts with a 16-byte RPC header (little-endian):
 *
 *   0  4  method (request) or status (reply: 0 or a negative errno)
 *   4  4  reserved, 0
 *   8  8  call id, chosen by the caller, echoed by the reply
 *
 * A call finishes once: by its reply, its deadline, rmsg_call_cancel() or
 * the connection's end. Its callback runs from the loop, never inside an
 * API call, and never before the request's memory is free: a reply proves
 * the peer has the whole request; a deadline or cancel that comes first
 * waits for the send's completion.
 */
#include <stdlib.h>

#include "rmsg_int.h"
#include "pool.h"

#define RPC_HDR_SIZE 16
#define RPC_BUCKETS 256
#define RPC_IOV_INLINE 8
#define RPC_SPARES 256 /* recycled call and request objects per context */
/* an answered request object waits behind this many others before it is
 * reused or freed, so that a second rmsg_reply() on a stale pointer
 * finds it marked answered instead of answering someone else's request */
#define RPC_REQ_QUARANTINE 256

struct rpc_call {
	struct rmsgi_list link; /* conn's calls, for close; spare list */
	struct rpc_call *hnext; /* id hash chain */
	struct rmsg_conn *c;
	uint64_t id;
	rmsg_reply_cb cb;
	void *arg;
	struct rmsgi_timer timer; /* deadline, then the deferred callback */
	bool timer_on;
	bool sent;     /* the request's send callback ran */
	bool finished; /* status is known */
	bool delivered;
	bool hashed;
	int status;
	/* a reply that came before the request's send completed: held
	 * here, delivered from call_sent (rpc_rx_reply) */
	struct rmsg_msg *reply;
	uint8_t hdr[RPC_HDR_SIZE];
	struct iovec iov_inline[RPC_IOV_INLINE];
	struct iovec *iov;
};

struct rmsgi_rpc_conn {
	struct rmsgi_list calls;
	struct rpc_call *hash[RPC_BUCKETS];
};

struct rpc_handler {
	struct rpc_handler *next;
	uint32_t method;
	rmsg_handler_cb h;
	void *arg;
};

struct rmsg_req {
	struct rmsg_conn *c;
	struct rmsgi_quar_ent q; /* answered: rmsgi_rpc_ctx.reqs_done */
	struct rmsgi_list live;	 /* on rmsgi_rpc_ctx.live until answered */
	uint64_t id;
	uint32_t method;
	bool answered; /* on the quarantine list: any further use is misuse */
};

struct rmsgi_rpc_ctx {
	struct rpc_handler *buckets[64];
	uint64_t next_id;
	/* no allocation per call or request once warm */
	struct rpc_call *spare_calls;
	/* answered requests (RPC_REQ_QUARANTINE of them kept readable) */
	struct rmsgi_quar reqs_done;
	unsigned nspare_calls;
	/* requests handed to a handler and not answered yet: the context
	 * frees them (and their connection reference) when destroyed */
	struct rmsgi_list live;
};

static void rpc_hdr_encode(uint8_t *p, uint32_t word, uint64_t id)
{
	rmsgi_put32(p, word);
	rmsgi_put32(p + 4, 0);
	rmsgi_put32(p + 8, (uint32_t)id);
	rmsgi_put32(p + 12, (uint32_t)(id >> 32));
}

static struct rmsgi_rpc_ctx *rpc_ctx(struct rmsg_ctx *ctx)
{
	if (!ctx->rpc) {
		ctx->rpc = calloc(1, sizeof(*ctx->rpc));
		if (ctx->rpc) {
			rmsgi_list_init(&ctx->rpc->live);
			rmsgi_quar_init(&ctx->rpc->reqs_done,
					RPC_REQ_QUARANTINE);
		}
	}
	return ctx->rpc;
}

static struct rmsgi_rpc_conn *rpc_conn(struct rmsg_conn *c)
{
	if (!c->rpc) {
		c->rpc = calloc(1, sizeof(*c->rpc));
		if (c->rpc)
			rmsgi_list_init(&c->rpc->calls);
	}
	return c->rpc;
}

void rmsgi_rpc_ctx_fini(struct rmsg_ctx *ctx)
{
	struct rmsgi_quar_ent *e;
	struct rmsgi_list *n;
	size_t i;

	if (!ctx->rpc)
		return;
	/* never answered: the caller's req pointers die with the context */
	while ((n = rmsgi_list_pop(&ctx->rpc->live))) {
		struct rmsg_req *req =
			rmsgi_list_entry(n, struct rmsg_req, live);

		rmsgi_conn_put(req->c);
		free(req);
	}
	for (i = 0; i < RMSGI_ARRAY_SIZE(ctx->rpc->buckets); i++)
		while (ctx->rpc->buckets[i]) {
			struct rpc_handler *h = ctx->rpc->buckets[i];

			ctx->rpc->buckets[i] = h->next;
			free(h);
		}
	while (ctx->rpc->spare_calls) {
		struct rpc_call *call = ctx->rpc->spare_calls;

		ctx->rpc->spare_calls = call->hnext;
		free(call);
	}
	while ((e = rmsgi_quar_drain(&ctx->rpc->reqs_done)))
		free(RMSGI_CONTAINER_OF(e, struct rmsg_req, q));
	free(ctx->rpc);
	ctx->rpc = NULL;
}

int rmsg_handle(struct rmsg_ctx *ctx, uint32_t method, rmsg_handler_cb h,
		void *arg)
{
	struct rmsgi_rpc_ctx *r;
	struct rpc_handler **p, *e;

	if (!ctx)
		return -EINVAL;
	r = rpc_ctx(ctx);
	if (!r)
		return -ENOMEM;
	for (p = &r->buckets[method % 64]; *p; p = &(*p)->next)
		if ((*p)->method == method)
			break;
	if (!h) {
		/* removes the handler: later requests get -ENOSYS */
		if (!*p)
			return -ENOENT;
		e = *p;
		*p = e->next;
		free(e);
		return 0;
	}
	if (!*p) {
		*p = calloc(1, sizeof(**p));
		if (!*p)
			return -ENOMEM;
		(*p)->method = method;
	}
	(*p)->h = h;
	(*p)->arg = arg;
	return 0;
}

static struct rpc_handler *handler_find(struct rmsg_ctx *ctx, uint32_t m)
{
	struct rpc_handler *h;

	if (!ctx->rpc)
		return NULL;
	for (h = ctx->rpc->buckets[m % 64]; h; h = h->next)
		if (h->method == m)
			return h;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* the caller's side                                                    */

static void call_unhash(struct rpc_call *call)
{
	struct rpc_call **p;

	if (!call->hashed)
		return;
	call->hashed = false;
	for (p = &call->c->rpc->hash[call->id % RPC_BUCKETS]; *p;
	     p = &(*p)->hnext)
		if (*p == call) {
			*p = call->hnext;
			return;
		}
}

static struct rpc_call *call_find(struct rmsg_conn *c, uint64_t id)
{
	struct rpc_call *call;

	if (!c->rpc)
		return NULL;
	for (call = c->rpc->hash[id % RPC_BUCKETS]; call; call = call->hnext)
		if (call->id == id)
			return call;
	return NULL;
}

static void call_timer_stop(struct rpc_call *call)
{
	if (call->timer_on) {
		rmsgi_timer_stop(call->c->ctx->loop, &call->timer);
		call->timer_on = false;
	}
}

/* frees the call once its callback ran and its send completed */
static void call_maybe_free(struct rpc_call *call)
{
	if (!call->delivered || !call->sent)
		return;
	struct rmsgi_rpc_ctx *r = call->c->ctx->rpc;

	call_timer_stop(call);
	rmsgi_list_del(&call->link);
	if (call->iov != call->iov_inline)
		free(call->iov);
	rmsgi_conn_put(call->c);
	if (r->nspare_calls < RPC_SPARES) {
		call->hnext = r->spare_calls;
		r->spare_calls = call;
		r->nspare_calls++;
		return;
	}
	free(call);
}

static void call_deliver(struct rpc_call *call, struct rmsg_msg *reply)
{
	struct rmsg_conn *c = call->c;

	call->delivered = true;
	if (call->cb) {
		RMSGI_USER_CB(c->ctx,
			      call->cb(c, call->status, reply, call->arg));
	}
}

/* the callback with the reply kept by rpc_rx_reply, if any (the app may
 * hold it there, as any reply), else without one */
static void call_deliver_kept(struct rpc_call *call)
{
	struct rmsg_msg *m = call->reply;

	if (!m) {
		call_deliver(call, NULL);
		return;
	}
	call->reply = NULL;
	m->held = 0; /* ours (rpc_rx_reply) goes; the app may take one */
	m->in_deliver = 1;
	call_deliver(call, m);
	m->in_deliver = 0;
	if (!m->held)
		rmsgi_msg_free(m);
}

static void call_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rpc_call *call = w->data;
	struct rmsg_ctx *ctx;

	call->timer_on = false;
	if (!call->finished) {
		/* the deadline passed; a late reply finds no call */
		call->finished = true;
		call->status = -ETIMEDOUT;
		call_unhash(call);
	}
	if (!call->sent)
		return; /* delivered from the send callback */
	ctx = call->c->ctx;
	call_deliver(call, NULL);
	call_maybe_free(call);
	rmsgi_ctx_flush(ctx);
}

/* ends a call without a reply; the callback follows from the loop */
static void call_end(struct rpc_call *call, int status)
{
	if (call->finished)
		return;
	call->finished = true;
	call->status = status;
	call_unhash(call);
	call_timer_stop(call);
	if (call->sent) {
		rmsgi_timer_start(call->c->ctx->loop, &call->timer, 0, 0);
		call->timer_on = true;
	}
}

static void call_sent(struct rmsg_conn *c, int status, void *arg)
{
	struct rpc_call *call = arg;

	call->sent = true;
	if (status && !call->finished) {
		call->finished = true;
		call->status = status;
		call_unhash(call);
		call_timer_stop(call);
	}
	if (call->finished && !call->delivered) {
		call_timer_stop(call);
		call_deliver_kept(call);
	}
	call_maybe_free(call);
}

int rmsg_call(struct rmsg_conn *c, uint32_t method, const struct iovec *iov,
	      int iovcnt, uint32_t timeout_ms, rmsg_reply_cb cb, void *arg,
	      uint64_t *call_id_p)
{
	struct rmsgi_rpc_ctx *rctx;
	struct rmsgi_rpc_conn *rc;
	struct rpc_call *call;
	int ret;

	if (!c || iovcnt < 0 || iovcnt > RMSG_IOV_MAX - 1 || (iovcnt && !iov))
		return -EINVAL;
	if (c->state >= RMSGI_CS_CLOSING)
		return -ENOTCONN;
	rctx = rpc_ctx(c->ctx);
	rc = rpc_conn(c);
	if (!rctx || !rc)
		return -ENOMEM;
	call = rctx->spare_calls;
	if (call) {
		rctx->spare_calls = call->hnext;
		rctx->nspare_calls--;
		memset(call, 0, sizeof(*call));
	} else {
		call = calloc(1, sizeof(*call));
		if (!call)
			return -ENOMEM;
	}
	call->iov = call->iov_inline;
	if (iovcnt + 1 > RPC_IOV_INLINE) {
		call->iov = malloc(sizeof(*iov) * (size_t)(iovcnt + 1));
		if (!call->iov) {
			free(call);
			return -ENOMEM;
		}
	}
	call->c = c;
	call->id = ++rctx->next_id;
	call->cb = cb;
	call->arg = arg;
	rpc_hdr_encode(call->hdr, method, call->id);
	call->iov[0].iov_base = call->hdr;
	call->iov[0].iov_len = RPC_HDR_SIZE;
	if (iovcnt)
		memcpy(call->iov + 1, iov, sizeof(*iov) * (size_t)iovcnt);
	ret = rmsgi_conn_send(c, call->iov, iovcnt + 1, RMSGI_AUX_RPC_REQ,
			      false, call_sent, call);
	if (ret) {
		if (call->iov != call->iov_inline)
			free(call->iov);
		free(call);
		return ret;
	}
	rmsgi_conn_get(c);
	rmsgi_list_add_tail(&rc->calls, &call->link);
	call->hnext = rc->hash[call->id % RPC_BUCKETS];
	rc->hash[call->id % RPC_BUCKETS] = call;
	call->hashed = true;
	rmsgi_timer_init(&call->timer, c->ctx->env.timers, call_timer_cb);
	call->timer.w.data = call;
	if (timeout_ms) {
		/* from this call, as rmsg_call(3) says: the loop's cached
		 * time is as old as the app's work since it woke */
		ev_now_update(c->ctx->loop);
		rmsgi_timer_start(c->ctx->loop, &call->timer,
				  timeout_ms / 1000.0, 0);
		call->timer_on = true;
	}
	if (call_id_p)
		*call_id_p = call->id;
	return 0;
}

int rmsg_call_cancel(struct rmsg_conn *c, uint64_t call_id)
{
	struct rpc_call *call;

	if (!c)
		return -EINVAL;
	call = call_find(c, call_id);
	if (!call)
		return -ENOENT; /* unknown, or already finished */
	call_end(call, -ECANCELED);
	return 0;
}

/*
 * A reply: delivered at once if the request's send completed. Else it is
 * kept until then (call_sent), as the callback never runs before the
 * request's memory is free again: an honest peer can answer before our
 * send's completion is seen (RDMA signals sends in batches; TCP's come
 * from the loop), and a lying one can answer a request still queued,
 * which would then go out of memory the app had reused.
 */
static int rpc_rx_reply(struct rmsg_conn *c, struct rmsg_msg *m, uint32_t word,
			uint64_t id)
{
	int32_t status = (int32_t)word;
	struct rpc_call *call;

	if (status > 0 || status < -4095)
		return -EPROTO;
	call = call_find(c, id);
	if (!call)
		return 0; /* late: the call timed out or was canceled */
	call->finished = true;
	call->status = status;
	call_unhash(call);
	call_timer_stop(call);
	if (!call->sent) {
		/* kept from the rx path's free (msg_after_cb) by a hold of
		 * the library's own, on no list: the call's reference keeps
		 * the connection, and its close delivers it */
		if (!status) {
			m->held = 1;
			call->reply = m;
		}
		return 0;
	}
	m->in_deliver = 1;
	call_deliver(call, status ? NULL : m);
	m->in_deliver = 0;
	call_maybe_free(call);
	return 0;
}

void rmsgi_rpc_stale(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	if (!c->rpc)
		return;
	rmsgi_list_for_each(n, &c->rpc->calls)
	{
		struct rpc_call *call =
			rmsgi_list_entry(n, struct rpc_call, link);

		if (call->reply)
			call->reply->wcost = RMSGI_WCOST_STALE;
	}
}

void rmsgi_rpc_conn_closed(struct rmsg_conn *c, int reason)
{
	struct rmsgi_list *n, *t;

	if (!c->rpc)
		return;
	rmsgi_list_for_each_safe (n, t, &c->rpc->calls) {
		struct rpc_call *call =
			rmsgi_list_entry(n, struct rpc_call, link);

		if (!call->finished) {
			call->finished = true;
			call->status = reason;
			call_unhash(call);
		}
		call_timer_stop(call);
		if (!call->delivered)
			call_deliver_kept(call);
		/* every request's send callback has run by now */
		call->sent = true;
		call_maybe_free(call);
	}
}

void rmsgi_rpc_conn_free(struct rmsg_conn *c)
{
	free(c->rpc);
	c->rpc = NULL;
}

/* ------------------------------------------------------------------ */
/* the handler's side                                                   */

static int send_reply(struct rmsg_conn *c, uint64_t id, int status,
		      const struct iovec *iov, int iovcnt);

/* a reply that failed alone for want of memory (ours, or the caller's,
 * who refused it): the caller learns it from a header-only error reply
 * rather than by its deadline */
static void reply_sent(struct rmsg_conn *c, int status, void *arg)
{
	uint8_t *buf = arg;
	uint64_t id = rmsgi_get32(buf + 8) | (uint64_t)rmsgi_get32(buf + 12)
						     << 32;
	bool tell = status == -ENOMEM && rmsgi_get32(buf) == 0 &&
		    rmsgi_conn_takes_sends(c);

	rmsgi_pool_free(c->ctx->pool, buf);
	if (tell)
		send_reply(c, id, -ENOMEM, NULL, 0);
}

static int send_reply(struct rmsg_conn *c, uint64_t id, int status,
		      const struct iovec *iov, int iovcnt)
{
	size_t len = RPC_HDR_SIZE, off;
	struct iovec out;
	uint8_t *buf;
	int i, ret;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	/* copied here, so the caller may reuse its memory at once; pool
	 * memory is registered, so RDMA sends it without another copy */
	if (rmsgi_pool_alloc(c->ctx->pool, len, (void **)&buf))
		return -ENOMEM;
	rpc_hdr_encode(buf, (uint32_t)status, id);
	off = RPC_HDR_SIZE;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len) /* an empty piece may have no base */
			memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	out.iov_base = buf;
	out.iov_len = len;
	/* replies skip the queue bound: they are bounded by requests */
	ret = rmsgi_conn_send(c, &out, 1, RMSGI_AUX_RPC_REP, true, reply_sent,
			      buf);
	if (ret)
		rmsgi_pool_free(c->ctx->pool, buf);
	return ret;
}

/*
 * A request is used up: its object joins the tail of the quarantine and
 * keeps its answered mark until RPC_REQ_QUARANTINE - 1 later requests of
 * the context were answered; only then is it reused (or freed). A second
 * rmsg_reply() on it in that window sees the mark and returns -EINVAL.
 */
static void req_free(struct rmsg_req *req)
{
	struct rmsgi_rpc_ctx *r = req->c->ctx->rpc;
	struct rmsgi_quar_ent *e;

	rmsgi_list_del(&req->live);
	rmsgi_conn_put(req->c);
	req->c = NULL;
	req->answered = true;
	rmsgi_quar_put(&r->reqs_done, &req->q, 1);
	while ((e = rmsgi_quar_over(&r->reqs_done)))
		free(RMSGI_CONTAINER_OF(e, struct rmsg_req, q));
}

int rmsg_reply(struct rmsg_req *req, const struct iovec *iov, int iovcnt)
{
	int i, ret;

	if (!req || req->answered || iovcnt < 0 || iovcnt > RMSG_IOV_MAX - 1 ||
	    (iovcnt && !iov))
		return -EINVAL;
	for (i = 0; i < iovcnt; i++)
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
	/* suspended (resumable): the reply waits for the new transport */
	ret = rmsgi_conn_takes_sends(req->c)
		      ? send_reply(req->c, req->id, 0, iov, iovcnt)
		      : -ENOTCONN;
	if (ret == -ENOMEM)
		return ret;   /* the request stays: try again */
	if (ret == -EMSGSIZE) /* the caller learns why, not by deadline */
		send_reply(req->c, req->id, -EMSGSIZE, NULL, 0);
	req_free(req);
	return ret;
}

int rmsg_reply_error(struct rmsg_req *req, int err)
{
	int ret;

	if (!req || req->answered || err >= 0 || err < -4095)
		return -EINVAL;
	ret = rmsgi_conn_takes_sends(req->c)
		      ? send_reply(req->c, req->id, err, NULL, 0)
		      : -ENOTCONN;
	if (ret == -ENOMEM)
		return ret;
	req_free(req);
	return ret;
}

static int rpc_rx_request(struct rmsg_conn *c, struct rmsg_msg *m,
			  uint32_t method, uint64_t id)
{
	struct rpc_handler *h = handler_find(c->ctx, method);
	struct rmsgi_quar_ent *e;
	struct rmsg_req *req;

	if (!h)
		return send_reply(c, id, -ENOSYS, NULL, 0) == -ENOMEM ? -ENOMEM
								      : 0;
	/* a handler exists, so the context's RPC state does */
	e = rmsgi_quar_reuse(&c->ctx->rpc->reqs_done);
	if (e) {
		req = RMSGI_CONTAINER_OF(e, struct rmsg_req, q);
	} else {
		req = calloc(1, sizeof(*req));
		if (!req)
			return -ENOMEM;
	}
	req->c = c;
	req->id = id;
	req->method = method;
	req->answered = false;
	rmsgi_list_add_tail(&c->ctx->rpc->live, &req->live);
	rmsgi_conn_get(c);
	m->in_deliver = 1;
	RMSGI_USER_CB(c->ctx, h->h(c, req, m, h->arg));
	m->in_deliver = 0;
	return 0;
}

int rmsgi_rpc_rx(struct rmsg_conn *c, struct rmsg_msg *m)
{
	uint32_t word;
	uint64_t id;
	int ret;

	if (m->len < RPC_HDR_SIZE ||
	    (m->aux != RMSGI_AUX_RPC_REQ && m->aux != RMSGI_AUX_RPC_REP))
		return -EPROTO;
	word = rmsgi_get32(m->data);
	if (rmsgi_get32(m->data + 4))
		return -EPROTO;
	id = rmsgi_get32(m->data + 8) | (uint64_t)rmsgi_get32(m->data + 12)
						<< 32;
	m->data += RPC_HDR_SIZE;
	m->len -= RPC_HDR_SIZE;
	if (m->aux == RMSGI_AUX_RPC_REQ)
		ret = rpc_rx_request(c, m, word, id);
	else
		ret = rpc_rx_reply(c, m, word, id);
	return ret;
}
