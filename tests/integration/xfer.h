/* SPDX-License-Identifier: MIT */
/*
 * xfer.h - a checked message stream between two ends on one loop, for
 * tests that send chosen sizes (eager.c, inline.c): every message is
 * filled from its own seed, split into random pieces, and checked on
 * arrival (order, length, every byte); every send callback must run once
 * with status 0. Static helpers: include once per test.
 */
#ifndef RMSG_TEST_XFER_H
#define RMSG_TEST_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "common.h"

#define XFER_RING 8192

struct xfer_end {
	const char *name;
	struct rmsg_ctx *ctx;
	struct rmsg_conn *c;
	bool up, closed;
	int reason;
	/* messages this end expects, in order */
	size_t want_len[XFER_RING];
	uint64_t want_seed[XFER_RING];
	unsigned want_head, want_tail;
	unsigned long received;
	/* sends of this end */
	unsigned long sent, done;
	bool writable_wanted;
};

/* memory of one send, freed by its callback */
struct xfer_tx {
	struct xfer_end *from;
	void *buf;
	bool pooled;
};

enum xfer_mem {
	XFER_MALLOC,
	XFER_POOL
};

static void xfer_on_est(struct rmsg_conn *c, void *arg)
{
	struct xfer_end *e = arg;

	e->c = c;
	e->up = true;
}

static void xfer_on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct xfer_end *e = arg;

	e->closed = true;
	e->reason = reason;
}

static void xfer_on_writable(struct rmsg_conn *c, void *arg)
{
	((struct xfer_end *)arg)->writable_wanted = false;
}

static void xfer_on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct xfer_end *e = arg;
	unsigned k = e->want_head % XFER_RING;
	size_t len = rmsg_msg_len(m);

	T_ASSERT(e->want_head != e->want_tail,
		 "%s: a message of %zu bytes nobody sent", e->name, len);
	T_ASSERT(len == e->want_len[k],
		 "%s: message %u is %zu bytes, %zu were sent", e->name,
		 e->want_head, len, e->want_len[k]);
	T_ASSERT(t_check(rmsg_msg_data(m), len, e->want_seed[k]) == 0,
		 "%s: message %u of %zu bytes: wrong content", e->name,
		 e->want_head, len);
	e->want_head++;
	e->received++;
}

static void xfer_sent(struct rmsg_conn *c, int status, void *arg)
{
	struct xfer_tx *tx = arg;

	T_ASSERT(status == 0, "%s: send status %s", tx->from->name,
		 rmsg_strerror(status));
	tx->from->done++;
	T_ASSERT(tx->from->done <= tx->from->sent,
		 "%s: %lu callbacks for %lu sends", tx->from->name,
		 tx->from->done, tx->from->sent);
	if (tx->pooled)
		rmsg_buf_free(tx->from->ctx, tx->buf);
	else
		free(tx->buf);
	free(tx);
}

static const struct rmsg_conn_ops xfer_ops = {
	.on_established = xfer_on_est,
	.on_msg = xfer_on_msg,
	.on_close = xfer_on_close,
	.on_writable = xfer_on_writable,
};

static int xfer_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		       const void *pdata, size_t len, void *arg)
{
	return rmsg_conn_set_arg(c, arg);
}

/*
 * Sends @len bytes from @from to @to in up to @maxiov pieces (exactly
 * -@maxiov if negative): 0, or
 * -EAGAIN when the send queue is full (nothing was sent then).
 */
static int xfer_send(struct xfer_end *from, struct xfer_end *to, size_t len,
		     uint64_t seed, int maxiov, enum xfer_mem mem)
{
	struct iovec iov[RMSG_IOV_MAX];
	struct xfer_tx *tx = calloc(1, sizeof(*tx));
	unsigned k = to->want_tail % XFER_RING;
	int n, ret;

	T_ASSERT(tx, "out of memory");
	T_ASSERT(to->want_tail - to->want_head < XFER_RING, "ring full");
	tx->from = from;
	if (mem == XFER_POOL) {
		T_OK(rmsg_buf_alloc(from->ctx, len ? len : 1, &tx->buf));
		tx->pooled = true;
	} else {
		tx->buf = malloc(len ? len : 1);
		T_ASSERT(tx->buf, "out of memory");
	}
	t_fill(tx->buf, len, seed);
	if (maxiov < 0) {
		/* exactly -@maxiov pieces, as even as they come */
		size_t off = 0;

		for (n = 0; n < -maxiov; n++) {
			size_t end = len * (size_t)(n + 1) / (size_t)-maxiov;

			iov[n].iov_base = (uint8_t *)tx->buf + off;
			iov[n].iov_len = end - off;
			off = end;
		}
	} else {
		n = t_split(tx->buf, len, iov, maxiov);
	}
	to->want_len[k] = len;
	to->want_seed[k] = seed;
	to->want_tail++;
	ret = rmsg_send(from->c, iov, n, xfer_sent, tx);
	if (ret == -EAGAIN) {
		to->want_tail--;
		from->writable_wanted = true;
		if (tx->pooled)
			rmsg_buf_free(from->ctx, tx->buf);
		else
			free(tx->buf);
		free(tx);
		return ret;
	}
	T_ASSERT(ret == 0, "%s: rmsg_send of %zu bytes: %s", from->name, len,
		 rmsg_strerror(ret));
	from->sent++;
	return 0;
}

static void xfer_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
}

/* T_RUN_UNTIL, returning as soon as @cond holds (not after 10 ms): the
 * sweeps wait for thousands of single messages */
#define XFER_RUN_UNTIL(loop, cond, max_s)                                  \
	do {                                                               \
		double t0_ = ev_time();                                    \
		ev_timer tick_;                                            \
		ev_timer_init(&tick_, xfer_tick, 0.01, 0.01);              \
		ev_timer_start((loop), &tick_);                            \
		while (!(cond) && ev_time() - t0_ < (max_s)*t_scale())     \
			ev_run((loop), EVRUN_ONCE);                        \
		ev_timer_stop((loop), &tick_);                             \
		T_ASSERT(cond, "timed out after %.1f s", (double)(max_s)); \
	} while (0)

/* every message sent so far to @to arrived, every callback of @from ran */
static void xfer_drain(struct ev_loop *loop, struct xfer_end *from,
		       struct xfer_end *to, double max_s)
{
	XFER_RUN_UNTIL(loop,
		       to->want_head == to->want_tail &&
			       from->done == from->sent,
		       max_s);
}

/* sends, waiting for room when the queue is full */
static void xfer_send_wait(struct ev_loop *loop, struct xfer_end *from,
			   struct xfer_end *to, size_t len, uint64_t seed,
			   int maxiov, enum xfer_mem mem)
{
	while (xfer_send(from, to, len, seed, maxiov, mem) == -EAGAIN)
		XFER_RUN_UNTIL(loop, !from->writable_wanted, 30);
}

/* a listener on @sctx (@lcfg) and a client of @cctx (@ccfg), up */
static void xfer_pair(struct ev_loop *loop, struct xfer_end *srv,
		      const struct rmsg_cfg *lcfg, struct xfer_end *cli,
		      const struct rmsg_cfg *ccfg, struct rmsg_listener **l_p)
{
	char uri[128];

	t_listen(srv->ctx, lcfg, &xfer_ops, xfer_accept, srv, l_p, uri,
		 sizeof(uri));
	T_OK(rmsg_connect(cli->ctx, uri, ccfg, &xfer_ops, cli, &cli->c));
	XFER_RUN_UNTIL(loop, srv->up && cli->up, 30);
}

#endif
