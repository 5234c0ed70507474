// SPDX-License-Identifier: MIT
/* harness.c - the rdma backend's tests' application and peer (harness.h) */
#include "harness.h"

int rt_poll(struct rmsg_ctx *ctx)
{
	void *r = *rmsgi_ctx_tr_slot(ctx, &rmsgi_tr_rdma);

	return r ? rmsgi_tr_rdma.ctx->poll(r, false) : 0;
}

static void logev(struct rt *t, char kind, int status, intptr_t arg)
{
	assert_true(t->nlog < LOG_MAX);
	t->log[t->nlog].kind = kind;
	t->log[t->nlog].status = status;
	t->log[t->nlog].arg = arg;
	t->nlog++;
}

int count(const struct rt *t, char kind)
{
	int i, n = 0;

	for (i = 0; i < t->nlog; i++)
		n += t->log[i].kind == kind;
	return n;
}

int done_count(const struct rt *t, intptr_t arg, int *status_p)
{
	int i, n = 0;

	for (i = 0; i < t->nlog; i++)
		if (t->log[i].kind == 'S' && t->log[i].arg == arg) {
			n++;
			if (status_p)
				*status_p = t->log[i].status;
		}
	return n;
}

static void on_established(struct rmsg_conn *c, void *arg)
{
	struct rt *t = arg;

	t->established++;
	logev(t, 'E', 0, 0);
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct rt *t = arg;

	t->msgs++;
	free(t->last_msg);
	t->last_len = rmsg_msg_len(m);
	t->last_msg = malloc(t->last_len + 1);
	assert_non_null(t->last_msg);
	memcpy(t->last_msg, rmsg_msg_data(m), t->last_len);
	t->sent_at_msg = mock.n_sent;
	logev(t, 'M', 0, 0);
	if (t->hold) {
		assert_int_equal(rmsg_msg_hold(m), 0);
		t->held[0] = t->held[1];
		t->held[1] = m;
	}
	if (t->close_in_msg)
		assert_int_equal(rmsg_conn_close(c), 0);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct rt *t = arg;
	const void *pd;
	size_t len;

	t->closed++;
	t->close_reason = reason;
	if (rmsg_conn_peer_data(c, &pd, &len) == 0 && len <= 32) {
		memcpy(t->peer_pdata, pd, len);
		t->peer_pdata_len = len;
	}
	logev(t, 'X', reason, 0);
	if (t->c == c)
		t->c = NULL;
}

const struct rmsg_conn_ops ops = {
	.on_established = on_established,
	.on_msg = on_msg,
	.on_close = on_close,
};

void done_cb(struct rmsg_conn *c, int status, void *arg)
{
	struct rt *t = c->arg;

	logev(t, 'S', status, (intptr_t)arg);
}

static void log_hook(int level, const char *line, void *arg)
{
	struct rt *t = arg;

	if (level <= RMSG_LOG_WARN)
		t->warnings++;
	if (strstr(line, "send ring")) {
		t->ring_moves++;
		snprintf(t->ring_last, sizeof(t->ring_last), "%s", line);
	}
	if (strstr(line, "receive buffers back to the pool"))
		t->chunks_back++;
	if (getenv("RMSG_UNIT_VERBOSE"))
		fprintf(stderr, "  log: %s\n", line);
}

uint8_t peer_hello_flags;

void rt_debug_log(struct rt *t)
{
	assert_int_equal(rmsg_cfg_set_log(t->cfg, RMSG_LOG_DEBUG, log_hook, t),
			 0);
}

static void run_for_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ONE);
}

void run_for(struct rt *t, double s)
{
	ev_timer tm;

	ev_timer_init(&tm, run_for_cb, s, 0);
	ev_timer_start(t->loop, &tm);
	ev_run(t->loop, 0);
	ev_timer_stop(t->loop, &tm);
}

struct rt *rt_new(void)
{
	struct rt *t = calloc(1, sizeof(*t));

	peer_hello_flags = 0;
	assert_non_null(t);
	mock_reset();
	t->loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(t->loop);
	assert_int_equal(rmsg_cfg_create(&t->cfg), 0);
	assert_int_equal(rmsg_cfg_set_log(t->cfg, RMSG_LOG_WARN, log_hook, t),
			 0);
	return t;
}

void rt_ctx(struct rt *t)
{
	assert_int_equal(rmsg_ctx_create(t->loop, t->cfg, &t->ctx), 0);
}

bool rt_free(struct rt *t)
{
	bool clean;

	if (t->ctx)
		assert_int_equal(rmsg_ctx_destroy(t->ctx), 0);
	rmsg_cfg_destroy(t->cfg);
	ev_loop_destroy(t->loop);
	free(t->last_msg);
	clean = mock_all_released();
	if (!clean)
		mock_print_live();
	free(t);
	return clean;
}

int setup(void **state)
{
	*state = rt_new();
	return 0;
}

int teardown(void **state)
{
	return rt_free(*state) ? 0 : -1;
}

void cm_deliver(struct rt *t)
{
	assert_non_null(mock.last_ech);
	ev_feed_fd_event(t->loop, mock.last_ech->fd, EV_READ);
	ev_invoke_pending(t->loop);
}

void cm_event(struct rt *t, struct rdma_cm_id *id, enum rdma_cm_event_type type,
	      int status, const void *pdata, size_t len)
{
	mock_cm_push(id, type, status, pdata, len);
	cm_deliver(t);
}

void pump(struct rt *t)
{
	int i;

	for (i = 0; i < 1000 && rt_poll(t->ctx) > 0; i++)
		rmsgi_ctx_flush(t->ctx);
	rmsgi_ctx_flush(t->ctx);
}

size_t hello(void *buf, uint16_t credits, uint32_t eager, int16_t status,
	     const char *pdata)
{
	struct rmsgi_hello h = {.credits = credits,
				.eager_size = eager,
				.status = status,
				.flags = peer_hello_flags,
				.conn_id = 77};

	if (pdata) {
		h.pdata_len = (uint8_t)strlen(pdata);
		memcpy(h.pdata, pdata, h.pdata_len);
	}
	return rmsgi_hello_encode(&h, buf);
}

void start_connect(struct rt *t)
{
	rt_ctx(t);
	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &t->c), 0);
	t->id = mock.last_id;
	assert_non_null(t->id);
	assert_int_equal(mock.n_resolve_addr, 1);
	cm_event(t, t->id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	assert_int_equal(mock.n_resolve_route, 1);
	cm_event(t, t->id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
}

void connect_peer(struct rt *t, uint16_t credits, uint32_t eager)
{
	uint8_t buf[64];

	start_connect(t);
	assert_int_equal(mock.n_connect, 1);
	assert_non_null(mock.last_qp);
	t->qpn = mock.last_qp->qp.qp_num;
	cm_event(t, t->id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, buf,
		 hello(buf, credits, eager, 0, NULL));
	assert_int_equal(t->established, 1);
	assert_non_null(t->c);
	/* the loop never runs between the tests' sends, so the clock does
	 * not move: sends at this loop time are the later ones of a burst
	 * (queued, posted by the flush) unless a test moves the clock; the
	 * establishment's own flush must not open a burst for them */
	t->c->tx.burst = false;
}

int send_buf(struct rt *t, const void *buf, size_t len, intptr_t arg)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return rmsg_send(t->c, &iov, 1, done_cb, (void *)arg);
}

int send_str(struct rt *t, const char *s, intptr_t arg)
{
	return send_buf(t, s, strlen(s), arg);
}

void peer_frame(struct rt *t, uint8_t type, uint16_t credits, uint32_t aux,
		uint64_t id, uint64_t len, const void *payload, size_t plen)
{
	uint8_t *f = malloc(RMSGI_HDR_SIZE + plen);
	struct rmsgi_hdr h = {.type = type,
			      .credits = credits,
			      .aux = aux,
			      .len = len,
			      .id = id};

	assert_non_null(f);
	rmsgi_hdr_encode(&h, f);
	if (plen)
		memcpy(f + RMSGI_HDR_SIZE, payload, plen);
	assert_int_equal(mock_recv(t->qpn, f, RMSGI_HDR_SIZE + plen), 0);
	free(f);
}

void peer_data(struct rt *t, const char *s, uint16_t credits)
{
	peer_frame(t, RMSGI_T_DATA, credits, 0, 0, strlen(s), s, strlen(s));
}

void peer_rndv(struct rt *t, uint64_t id, uint64_t len,
	       const struct rmsgi_seg *segs, int n)
{
	uint8_t p[RMSGI_SEG_SIZE * 8];
	int i;

	assert_true(n <= 8);
	for (i = 0; i < n; i++)
		rmsgi_seg_encode(&segs[i], p + i * RMSGI_SEG_SIZE);
	peer_frame(t, RMSGI_T_RNDV_REQ, 0, 0, id, len, p,
		   (size_t)n * RMSGI_SEG_SIZE);
}

void sent_hdr(const struct mock_send_wr *w, struct rmsgi_hdr *h)
{
	assert_true(w->total >= RMSGI_HDR_SIZE);
	assert_int_equal(rmsgi_hdr_decode(w->data, w->total, UINT64_MAX, h), 0);
}
