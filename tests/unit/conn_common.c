// SPDX-License-Identifier: MIT
/*
 * conn_common.c - the application, frames from the peer and the set-up
 * that the tests of the connection state machine share (conn_t.h).
 */
#include "conn_t.h"

/* ------------------------------------------------------------------ */
/* received frames                                                      */

int msgs_freed;

static void tmsg_free(struct rmsg_msg *m)
{
	struct tmsg *t = RMSGI_CONTAINER_OF(m, struct tmsg, m);

	msgs_freed++;
	if (t->credit)
		rmsgi_conn_credit_freed(m->conn, m->wcost);
	free(t);
}

struct rmsg_msg *tmsg_new(struct rmsg_conn *c, const char *s)
{
	struct tmsg *t = calloc(1, sizeof(*t));
	size_t len = s ? strlen(s) : 0;

	assert_non_null(t);
	assert_true(len <= sizeof(t->data));
	if (len)
		memcpy(t->data, s, len);
	rmsgi_msg_init(&t->m, c, t->data, len);
	t->m.free_fn = tmsg_free;
	t->credit = true;
	return &t->m;
}

int rx(struct rmsg_conn *c, uint8_t type, uint16_t credits, uint32_t aux,
       uint64_t id, struct rmsg_msg *m)
{
	struct rmsgi_hdr h = {.type = type,
			      .credits = credits,
			      .aux = aux,
			      .id = id,
			      .len = m->len};

	return rx_hdr(c, &h, m);
}

int rx_hdr(struct rmsg_conn *c, const struct rmsgi_hdr *h, struct rmsg_msg *m)
{
	int ret = rmsgi_conn_rx(c, h, m);

	/* the one ownership rule (transport.h): done with, it is ours */
	if (ret == RMSGI_RX_KEPT)
		return 0;
	/* (the core returned its credit: the fake backend has no
	 * RMSGI_TR_CAP_CREDIT_LATE) */
	RMSGI_CONTAINER_OF(m, struct tmsg, m)->credit = false;
	tmsg_free(m);
	return ret;
}

int rx_data(struct rmsg_conn *c, const char *s, uint16_t credits)
{
	return rx(c, RMSGI_T_DATA, credits, 0, 0, tmsg_new(c, s));
}

int rx_credit(struct rmsg_conn *c, uint16_t credits)
{
	return rx(c, RMSGI_T_CREDIT, credits, 0, 0, tmsg_new(c, NULL));
}

/* ------------------------------------------------------------------ */
/* the application                                                      */

static void logev(struct t *t, char kind, int status, intptr_t arg)
{
	assert_true(t->nlog < LOG_MAX);
	t->log[t->nlog].kind = kind;
	t->log[t->nlog].status = status;
	t->log[t->nlog].arg = arg;
	t->nlog++;
}

static void on_established(struct rmsg_conn *c, void *arg)
{
	struct t *t = arg;

	t->established++;
	logev(t, 'E', 0, 0);
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct t *t = arg;
	size_t n = RMSGI_MIN(rmsg_msg_len(m), sizeof(t->last_msg) - 1);

	t->msgs++;
	memcpy(t->last_msg, rmsg_msg_data(m), n);
	t->last_msg[n] = '\0';
	logev(t, 'M', 0, 0);
	if (t->hold) {
		assert_int_equal(rmsg_msg_hold(m), 0);
		assert_int_equal(rmsg_msg_hold(m), -EALREADY);
		t->held = m;
	}
	if (t->close_in_msg)
		rmsg_conn_close(c);
}

static void on_writable(struct rmsg_conn *c, void *arg)
{
	struct t *t = arg;

	t->writable++;
	logev(t, 'W', 0, 0);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct t *t = arg;

	t->closed++;
	t->close_reason = reason;
	logev(t, 'X', reason, 0);
	if (t->c == c && !t->hold)
		t->c = NULL; /* freed after this */
}

const struct rmsg_conn_ops ops = {
	.on_established = on_established,
	.on_msg = on_msg,
	.on_writable = on_writable,
	.on_close = on_close,
};

void done_cb(struct rmsg_conn *c, int status, void *arg)
{
	logev(c->arg, 'S', status, (intptr_t)arg);
}

int done_count(const struct t *t, intptr_t arg, int *status_p)
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

int count(const struct t *t, char kind)
{
	int i, n = 0;

	for (i = 0; i < t->nlog; i++)
		n += t->log[i].kind == kind;
	return n;
}

int send_str(struct t *t, const char *s, intptr_t arg)
{
	struct iovec iov = {.iov_base = (void *)s, .iov_len = strlen(s)};

	return rmsg_send(t->c, &iov, 1, done_cb, (void *)arg);
}

int send_len(struct t *t, size_t len, intptr_t arg)
{
	static char big[1 << 16];
	struct iovec iov = {.iov_base = big, .iov_len = len};

	assert_true(len <= sizeof(big));
	return rmsg_send(t->c, &iov, 1, done_cb, (void *)arg);
}

void flush(struct t *t)
{
	rmsgi_ctx_flush(t->ctx);
}

void establish(struct t *t, uint16_t credits, uint32_t eager)
{
	struct rmsgi_hello h = {.credits = credits, .eager_size = eager};

	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
}

static void log_hook(int level, const char *line, void *arg)
{
	struct t *t = arg;

	if (level <= RMSG_LOG_WARN)
		t->warnings++;
	if (getenv("RMSG_UNIT_VERBOSE"))
		fprintf(stderr, "  log: %s\n", line);
}

static struct t *new_t(const struct rmsgi_cfgv *cfg)
{
	struct t *t = calloc(1, sizeof(*t));
	struct rmsg_cfg *ccfg;
	struct rmsgi_cfgv v;

	assert_non_null(t);
	t->loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(t->loop);
	assert_int_equal(rmsg_cfg_create(&ccfg), 0);
	assert_int_equal(rmsg_cfg_set_log(ccfg, RMSG_LOG_WARN, log_hook, t), 0);
	assert_int_equal(rmsg_ctx_create(t->loop, ccfg, &t->ctx), 0);
	rmsg_cfg_destroy(ccfg);
	if (!cfg) {
		rmsgi_cfg_defaults(&v);
		/* a fixed grant (the credits) unless a test says otherwise:
		 * the grant that follows use has tests of its own */
		v.credits_initial = v.credits;
		cfg = &v;
	}
	assert_int_equal(rmsgi_conn_new(t->ctx, cfg, &ops, t, &t->c), 0);
	fake_tr_attach(t->c);
	return t;
}

int setup(void **state)
{
	fake_tr_reset(0);
	msgs_freed = 0;
	*state = new_t(NULL);
	return 0;
}

int teardown(void **state)
{
	struct t *t = *state;

	ft.auto_down = true;
	ft.post_ret = 0;
	/* a failed test may leave its conn halfway */
	if (t->c && t->c->state == RMSGI_CS_CLOSING && !t->c->tr_down)
		tr_down(t->c);
	if (t->held && t->c)
		rmsg_msg_release(t->held);
	assert_int_equal(rmsg_ctx_destroy(t->ctx), 0);
	ev_loop_destroy(t->loop);
	free(t);
	return 0;
}

struct t *replace_t(void **state, const struct rmsgi_cfgv *cfg, unsigned caps)
{
	teardown(state);
	fake_tr_reset(caps);
	msgs_freed = 0;
	*state = new_t(cfg);
	return *state;
}
