// SPDX-License-Identifier: MIT
/*
 * pool_exhaust.c - the server context's pools exhausted (issue 8).
 *
 * The server's context has a small budget of registered memory
 * (rmsg_cfg_set_reg_limit, LIMIT), which its pools share with regions
 * and the registration cache. Two clients, each on its own context:
 * A sends large messages (LARGE, above the eager size), B pings the
 * server with small eager messages every PING_MS all along and must get
 * every answer (scenario 3).
 *
 * 1. The server allocates BUF-sized pool buffers until rmsg_buf_alloc()
 *    fails: it must fail with -ENOMEM, leave *buf_p alone, and the text
 *    must name rmsg_cfg_set_reg_limit. While the pool is exhausted:
 *    A sends one large message (over RDMA the server has no memory for
 *    its rendezvous read: the send must fail with -ENOMEM, the
 *    connection stays up; over TCP see below), and the server sends
 *    from one of its pool buffers (zero-copy: must work). After freeing
 *    them all, a buffer of another size class (BIG_BUF, the freed slabs
 *    go back to the budget) is allocated and sent to A.
 * 2. The server holds every large message A sends (WINDOW in flight),
 *    until the budget is used up. Over RDMA the messages that find no
 *    memory must fail on A's send callback with -ENOMEM (the server's
 *    RNDV_ACK), the server logs a warning for each, and the messages
 *    behind them still arrive. Then the server releases them and AFTER
 *    more messages must all go through.
 *    Nothing is lost: the set of sequence numbers whose send completed
 *    with 0 is exactly the set the server received, intact, once each;
 *    a send that failed never arrives.
 *
 * 2b. Client A's own context exhausted by rmsg_buf_alloc, A calls a
 *    method whose answer is REPLY bytes. Over RDMA A refuses the reply;
 *    the server then answers the call with -ENOMEM, so the call must
 *    end with -ENOMEM (not by its deadline). After A frees its buffers
 *    the same call gets its reply.
 *
 * Over TCP nothing is registered and a large message travels as one
 * frame, read into memory of its own (not from the pools), whose send
 * completes once it is written: the receiver cannot refuse one message
 * and tell its sender. The budget therefore bounds the pools only
 * (scenario 1 is the same), and in scenario 2 every message must go
 * through. If the memory for such a frame cannot be had at all
 * (malloc), the TCP backend closes the connection with -ENOMEM: the
 * frame is on the wire and must be consumed, so it cannot fail alone.
 *
 * Printed: allocations before -ENOMEM, messages failed and delivered,
 * and how long A waited for the -ENOMEM of a refused message.
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "../integration/common.h"

#define LIMIT ((size_t)16 << 20)
#define BUF ((size_t)64 << 10)
#define BIG_BUF ((size_t)1 << 20)
#define LARGE ((size_t)256 << 10)
#define MAX_BUFS 4096
#define MAX_SEQ 512
#define WINDOW 4
#define SLOTS (2 * WINDOW)
#define AFTER 16
#define PING_MS 10
#define TCP_CREDITS 160
#define METHOD 7
#define REPLY ((size_t)256 << 10)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static struct ev_loop *loop;
static struct rmsg_ctx *sctx, *actx, *bctx;
static struct rmsg_conn *srv_a, *srv_b, *cli_a, *cli_b;
static bool rdma;

/* server */
static bool hold_mode;
static struct rmsg_msg *held[MAX_SEQ];
static int nheld, srv_closed;
static int srv_got[MAX_SEQ]; /* times each large message arrived */
static int refused_logs;
static uint8_t pong[64];

/* client A */
static uint8_t payload[SLOTS][LARGE] __attribute__((aligned(64)));
static int slot_of[MAX_SEQ];
static bool slot_busy[SLOTS];
static int a_status[MAX_SEQ]; /* 1: in flight */
static double a_sent_at[MAX_SEQ], a_done_at[MAX_SEQ];
static int a_inflight, a_small, a_big, a_closed;

/* client B */
static ev_timer ping_timer;
static uint8_t ping[64];
static int b_pings, b_pongs, b_closed, b_pending;
static bool closing;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void log_cb(int level, const char *line, void *arg)
{
	(void)arg;
	if (level == RMSG_LOG_WARN && strstr(line, "no memory for an incoming"))
		refused_logs++;
	if (level <= RMSG_LOG_WARN)
		fprintf(stderr, "server log: %s\n", line);
}

/* ------------------------------------------------------------------ */
/* server                                                               */

static int srv_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		      const void *pdata, size_t len, void *arg)
{
	(void)l;
	(void)arg;
	T_ASSERT(len == 1, "private data");
	if (*(const char *)pdata == 'A')
		srv_a = c;
	else
		srv_b = c;
	return 0;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const uint8_t *p = rmsg_msg_data(m);
	size_t len = rmsg_msg_len(m);
	struct iovec iov = {pong, sizeof(pong)};
	uint32_t seq;

	(void)arg;
	if (c == srv_b) {
		/* a ping: answered at once (pong never changes) */
		T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
		return;
	}
	T_ASSERT(c == srv_a && len == LARGE, "unexpected message of %zu B",
		 len);
	memcpy(&seq, p, sizeof(seq));
	T_ASSERT(seq < MAX_SEQ, "sequence %u", seq);
	T_ASSERT(t_check(p + 8, len - 8, seq + 1) == 0, "message %u corrupted",
		 seq);
	srv_got[seq]++;
	if (hold_mode) {
		T_OK(rmsg_msg_hold(m));
		held[nheld++] = m;
	}
}

/* a send from a pool buffer: the buffer is freed only after this */
static int srv_sends;

static void srv_sent(struct rmsg_conn *c, int status, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(status == 0, "server send: %d (%s)", status,
		 rmsg_strerror(status));
	srv_sends++;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)reason;
	(void)arg;
	srv_closed++;
}

/* ------------------------------------------------------------------ */
/* clients                                                              */

static void a_est(struct rmsg_conn *c, void *arg)
{
	(void)c;
	(void)arg;
}

static void a_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)arg;
	if (rmsg_msg_len(m) == 64) {
		a_small++;
		T_ASSERT(t_check(rmsg_msg_data(m), 64, 7) == 0, "small");
	} else {
		T_ASSERT(rmsg_msg_len(m) == BIG_BUF, "len %zu",
			 rmsg_msg_len(m));
		T_ASSERT(t_check(rmsg_msg_data(m), BIG_BUF, 8) == 0, "big");
		a_big++;
	}
}

static void a_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(reason == 0, "client A closed: %d (%s)", reason,
		 rmsg_strerror(reason));
	a_closed++;
}

static void b_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)m;
	(void)arg;
	b_pongs++;
	b_pending = 0;
}

static void b_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(reason == 0, "client B closed: %d (%s)", reason,
		 rmsg_strerror(reason));
	b_closed++;
}

/* one ping at a time, every PING_MS */
static void ping_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	struct iovec iov = {ping, sizeof(ping)};

	(void)l;
	(void)w;
	(void)revents;
	if (b_pending || closing)
		return;
	T_OK(rmsg_send(cli_b, &iov, 1, NULL, NULL));
	b_pending = 1;
	b_pings++;
}

static void a_sent(struct rmsg_conn *c, int status, void *arg)
{
	uint32_t seq = (uint32_t)(uintptr_t)arg;

	(void)c;
	T_ASSERT(a_status[seq] == 1, "callback of %u twice", seq);
	T_ASSERT(status == 0 || status == -ENOMEM, "send %u: %d (%s)", seq,
		 status, rmsg_strerror(status));
	a_status[seq] = status;
	a_done_at[seq] = now();
	slot_busy[slot_of[seq]] = false;
	a_inflight--;
}

static void a_send(uint32_t seq)
{
	struct iovec iov;
	int k = 0;

	T_ASSERT(seq < MAX_SEQ, "too many messages");
	/* a buffer whose send has completed */
	while (slot_busy[k])
		k++;
	T_ASSERT(k < SLOTS, "no free slot");
	slot_busy[k] = true;
	slot_of[seq] = k;
	memset(payload[k], 0, 8);
	memcpy(payload[k], &seq, sizeof(seq));
	t_fill(payload[k] + 8, LARGE - 8, seq + 1);
	iov.iov_base = payload[k];
	iov.iov_len = LARGE;
	a_status[seq] = 1;
	a_sent_at[seq] = now();
	T_OK(rmsg_send(cli_a, &iov, 1, a_sent, (void *)(uintptr_t)seq));
	a_inflight++;
}

/* ------------------------------------------------------------------ */

/* the ping timer wakes the loop at least every PING_MS */
#define RUN_UNTIL(cond)                           \
	do {                                      \
		while (!(cond))                   \
			ev_run(loop, EVRUN_ONCE); \
	} while (0)

/* RPC: the server's handler answers with REPLY bytes */
static uint8_t reply_buf[REPLY];
static int call_status = 1, handled;
static size_t call_len;
static double call_at, call_done_at;

static void handler(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *request, void *arg)
{
	struct iovec iov = {reply_buf, REPLY};

	(void)c;
	(void)request;
	(void)arg;
	handled++;
	T_OK(rmsg_reply(req, &iov, 1));
}

static void replied(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		    void *arg)
{
	(void)c;
	(void)arg;
	call_status = status;
	call_done_at = now();
	if (!status) {
		call_len = rmsg_msg_len(reply);
		T_ASSERT(t_check(rmsg_msg_data(reply), call_len, 9) == 0,
			 "reply corrupted");
	}
}

/* one call from A, with a deadline far beyond the test's timings */
static int call(void)
{
	static const uint8_t q[16];
	struct iovec iov = {(void *)q, sizeof(q)};

	call_status = 1;
	call_len = 0;
	call_at = now();
	T_OK(rmsg_call(cli_a, METHOD, &iov, 1, 30000, replied, NULL, NULL));
	RUN_UNTIL(call_status != 1);
	return call_status;
}

static void connect_client(struct rmsg_ctx *ctx, const char *uri, char tag,
			   const struct rmsg_conn_ops *ops,
			   struct rmsg_conn **c_p)
{
	struct rmsg_cfg *cfg;

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_private_data(cfg, &tag, 1));
	T_OK(rmsg_connect(ctx, uri, cfg, ops, NULL, c_p));
	rmsg_cfg_destroy(cfg);
}

/* B keeps getting answers */
static void b_progress(const char *phase)
{
	int until = b_pongs + 3;

	RUN_UNTIL(b_pongs >= until);
	T_ASSERT(!b_closed && !a_closed && !srv_closed, "%s: closed", phase);
	printf("  %s: client B %d pongs so far\n", phase, b_pongs);
}

static uint32_t next_seq;

int main(void)
{
	static const struct rmsg_conn_ops srv_ops = {.on_msg = srv_msg,
						     .on_close = srv_close};
	static const struct rmsg_conn_ops a_ops = {
		.on_established = a_est, .on_msg = a_msg, .on_close = a_close};
	static const struct rmsg_conn_ops b_ops = {.on_msg = b_msg,
						   .on_close = b_close};
	static void *bufs[MAX_BUFS];
	struct rmsg_listener *lis;
	struct rmsg_cfg *cfg;
	char uri[128];
	void *buf, *sentinel = (void *)0x1, *keep64;
	int nbufs = 0, ret, i, failed = 0, ok = 0, sent_done = 0;
	uint32_t seq, first_fail = UINT32_MAX;
	double worst = 0, best = 1e9, t0 = 0, t1 = 0;
	struct iovec iov;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_require_transport();
	rdma = !strcmp(t_transport(), "rdma");
	loop = ev_default_loop(0);
	t_deadline(loop, 120 * t_scale());
	memset(ping, 1, sizeof(ping));
	memset(pong, 2, sizeof(pong));

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_reg_limit(cfg, LIMIT));
	/* over TCP a held message keeps its frame's credit and its bytes
	 * of the byte window: enough of both to hold twice the budget */
	if (!rdma) {
		T_OK(rmsg_cfg_set_credits(cfg, TCP_CREDITS));
		T_OK(rmsg_cfg_set_tcp_window(cfg, 4 * LIMIT));
	}
	T_OK(rmsg_cfg_set_log(cfg, RMSG_LOG_WARN, log_cb, NULL));
	T_OK(rmsg_ctx_create(loop, cfg, &sctx));
	T_OK(rmsg_handle(sctx, METHOD, handler, NULL));
	t_fill(reply_buf, REPLY, 9);
	t_listen(sctx, cfg, &srv_ops, srv_accept, NULL, &lis, uri, sizeof(uri));
	rmsg_cfg_destroy(cfg);
	/* A gets a budget of its own, exhausted in scenario 2b */
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_reg_limit(cfg, LIMIT));
	T_OK(rmsg_ctx_create(loop, cfg, &actx));
	rmsg_cfg_destroy(cfg);
	T_OK(rmsg_ctx_create(loop, NULL, &bctx));
	connect_client(actx, uri, 'A', &a_ops, &cli_a);
	connect_client(bctx, uri, 'B', &b_ops, &cli_b);
	ev_timer_init(&ping_timer, ping_cb, 0, PING_MS / 1000.0);
	ev_timer_start(loop, &ping_timer);
	ev_unref(loop);
	RUN_UNTIL(srv_a && srv_b && b_pongs >= 3);
	printf("pool_exhaust over %s: server reg_limit %zu KiB\n",
	       t_transport(), LIMIT >> 10);

	/* 1. rmsg_buf_alloc until it fails */
	for (;;) {
		T_ASSERT(nbufs < MAX_BUFS, "no failure after %d buffers",
			 nbufs);
		t0 = now();
		ret = rmsg_buf_alloc(sctx, BUF, &buf);
		t1 = now();
		if (ret)
			break;
		memset(buf, 0xee, 64);
		bufs[nbufs++] = buf;
	}
	T_ASSERT(ret == -ENOMEM, "rmsg_buf_alloc: %d (%s)", ret,
		 rmsg_strerror(ret));
	buf = sentinel;
	T_ASSERT(rmsg_buf_alloc(sctx, BUF, &buf) == -ENOMEM, "again");
	T_ASSERT(buf == sentinel, "*buf_p written on failure");
	T_ASSERT(strstr(rmsg_strerror(ret), "rmsg_cfg_set_reg_limit"),
		 "the error text does not name the budget: %s",
		 rmsg_strerror(ret));
	printf("figure: rmsg_buf_alloc(%zu KiB) succeeded %d times "
	       "(%zu KiB), then -ENOMEM, returned in %.0f us\n",
	       BUF >> 10, nbufs, (size_t)nbufs * (BUF >> 10), (t1 - t0) * 1e6);

	/* exhausted: a large message to the server */
	seq = next_seq++;
	a_send(seq);
	RUN_UNTIL(a_status[seq] != 1);
	if (rdma) {
		T_ASSERT(a_status[seq] == -ENOMEM,
			 "large send into the exhausted server: %d",
			 a_status[seq]);
		printf("figure: exhausted by rmsg_buf_alloc: a %zu KiB message "
		       "failed with -ENOMEM after %.1f ms\n",
		       LARGE >> 10, (a_done_at[seq] - a_sent_at[seq]) * 1e3);
	} else {
		T_ASSERT(a_status[seq] == 0, "tcp: %d", a_status[seq]);
		RUN_UNTIL(srv_got[seq] == 1);
		printf("  tcp: the large message went through (TCP reads "
		       "large frames outside the pools)\n");
	}
	/* exhausted: the server sends from a pool buffer it holds */
	t_fill(bufs[0], 64, 7);
	iov.iov_base = bufs[0];
	iov.iov_len = 64;
	T_OK(rmsg_send(srv_a, &iov, 1, srv_sent, NULL));
	RUN_UNTIL(a_small == 1 && srv_sends == 1);
	b_progress("pools exhausted");
	/* memory back: another size class, sent */
	for (i = 0; i < nbufs; i++)
		rmsg_buf_free(sctx, bufs[i]);
	T_OK(rmsg_buf_alloc(sctx, BIG_BUF, &buf));
	t_fill(buf, BIG_BUF, 8);
	iov.iov_base = buf;
	iov.iov_len = BIG_BUF;
	T_OK(rmsg_send(srv_a, &iov, 1, srv_sent, NULL));
	RUN_UNTIL(a_big == 1 && srv_sends == 2);
	rmsg_buf_free(sctx, buf);
	seq = next_seq++;
	a_send(seq);
	RUN_UNTIL(a_status[seq] != 1 && srv_got[seq] == 1);
	T_ASSERT(a_status[seq] == 0, "after the free: %d", a_status[seq]);
	printf("  buffers freed: a %zu KiB buffer allocated and sent, a "
	       "large message went through\n",
	       BIG_BUF >> 10);

	/* 2. the server holds every large message */
	hold_mode = true;
	refused_logs = 0;
	for (;;) {
		T_ASSERT(next_seq + WINDOW < MAX_SEQ - AFTER, "never failed");
		while (a_inflight < WINDOW)
			a_send(next_seq++);
		ev_run(loop, EVRUN_ONCE);
		if (!rdma && nheld * LARGE >= 2 * LIMIT)
			break; /* TCP: more than the budget held, no failure */
		for (seq = 0, failed = 0; seq < next_seq; seq++)
			failed += a_status[seq] == -ENOMEM && seq >= 2;
		if (failed >= 2 * WINDOW)
			break;
	}
	RUN_UNTIL(a_inflight == 0);
	T_ASSERT(!a_closed && !b_closed && !srv_closed, "a connection closed");
	b_progress("messages held");
	for (seq = 2, failed = ok = 0; seq < next_seq; seq++) {
		if (a_status[seq] == 0) {
			ok++;
		} else {
			failed++;
			if (first_fail == UINT32_MAX)
				first_fail = seq;
			worst = MAX(worst, a_done_at[seq] - a_sent_at[seq]);
			best = MIN(best, a_done_at[seq] - a_sent_at[seq]);
		}
	}
	if (rdma) {
		T_ASSERT(failed > 0, "no send failed");
		T_ASSERT(refused_logs >= failed, "%d refusals logged for %d",
			 refused_logs, failed);
		printf("figure: %d held messages of %zu KiB (%zu KiB) went "
		       "through, then %d failed with -ENOMEM (%d logged by "
		       "the server); -ENOMEM reached the sender %.1f to %.1f "
		       "ms after rmsg_send\n",
		       ok, LARGE >> 10, (size_t)ok * (LARGE >> 10), failed,
		       refused_logs, best * 1e3, worst * 1e3);
	} else {
		T_ASSERT(failed == 0, "%d failed over tcp", failed);
		printf("figure: tcp: %d held messages of %zu KiB (%zu KiB, "
		       "twice the budget) went through, none failed\n",
		       ok, LARGE >> 10, (size_t)ok * (LARGE >> 10));
	}
	/* memory back */
	for (i = 0; i < nheld; i++)
		rmsg_msg_release(held[i]);
	nheld = 0;
	hold_mode = false;
	seq = next_seq;
	for (i = 0; i < AFTER; i++) {
		while (a_inflight >= WINDOW)
			ev_run(loop, EVRUN_ONCE);
		a_send(next_seq++);
	}
	RUN_UNTIL(a_inflight == 0);
	for (; seq < next_seq; seq++) {
		T_ASSERT(a_status[seq] == 0, "after release, %u: %d", seq,
			 a_status[seq]);
		sent_done++;
	}
	printf("figure: after the release %d of %d messages went through\n",
	       sent_done, AFTER);
	/* nothing lost, nothing duplicated, nothing failed that arrived */
	for (seq = 0; seq < next_seq; seq++)
		T_ASSERT(srv_got[seq] == (a_status[seq] == 0),
			 "message %u: status %d, received %d times", seq,
			 a_status[seq], srv_got[seq]);
	b_progress("after");

	/* 2b. the caller's pools exhausted: a large reply to it */
	T_OK(rmsg_buf_alloc(actx, 64, &keep64)); /* small copies still fit */
	for (nbufs = 0;; nbufs++) {
		T_ASSERT(nbufs < MAX_BUFS, "no failure on the client");
		ret = rmsg_buf_alloc(actx, BUF, &bufs[nbufs]);
		if (ret)
			break;
	}
	T_ASSERT(ret == -ENOMEM, "client rmsg_buf_alloc: %d", ret);
	ret = call();
	if (rdma) {
		T_ASSERT(ret == -ENOMEM,
			 "call into an exhausted caller: %d (%s)", ret,
			 rmsg_strerror(ret));
		printf("figure: a call whose %zu KiB reply the exhausted "
		       "caller "
		       "refused ended with -ENOMEM after %.1f ms\n",
		       REPLY >> 10, (call_done_at - call_at) * 1e3);
	} else {
		T_ASSERT(ret == 0 && call_len == REPLY, "tcp call: %d", ret);
		printf("  tcp: a call with a %zu KiB reply into the exhausted "
		       "caller went through\n",
		       REPLY >> 10);
	}
	for (i = 0; i < nbufs; i++)
		rmsg_buf_free(actx, bufs[i]);
	rmsg_buf_free(actx, keep64);
	ret = call();
	T_ASSERT(ret == 0 && call_len == REPLY, "call after the free: %d (%s)",
		 ret, rmsg_strerror(ret));
	T_ASSERT(handled == 2, "handler ran %d times", handled);
	printf("  caller's buffers freed: the call got its %zu KiB reply\n",
	       REPLY >> 10);
	b_progress("after the calls");

	/* orderly close; the timer keeps waking the loop (callbacks may
	 * run from the library's prepare watcher, just before it blocks) */
	closing = true;
	T_OK(rmsg_conn_close(cli_a));
	T_OK(rmsg_conn_close(cli_b));
	RUN_UNTIL(a_closed && b_closed && srv_closed == 2);
	ev_ref(loop);
	ev_timer_stop(loop, &ping_timer);
	printf("figure: client B: %d pings, %d pongs, never closed\n", b_pings,
	       b_pongs);
	T_OK(rmsg_listener_close(lis));
	T_OK(rmsg_ctx_destroy(actx));
	T_OK(rmsg_ctx_destroy(bctx));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
