// SPDX-License-Identifier: MIT
/*
 * unit tests of the TCP backend alone (src/transport/tcp/) over a
 * socketpair: the backend gets one end through tcp_conn_adopt(), the test
 * drives the other end raw with the wire codec (proto.h), and a fake core
 * written here implements the up-calls of transport.h, recording what the
 * backend reports. Which frames are legal is the core's rule, inline in
 * op.h (rmsgi_tr_frame_ok), as the backend sees it in the library.
 *
 * What is checked is the backend's side of the contract in transport.h
 * ("Posting", the up-calls, disconnect): frames go out whole and in order,
 * each posted op completes exactly once, a failure is reported once and
 * before the end, the end comes after every op completed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

#include "transport/tcp/tcp.h"

/* a generous bound on waiting for the loop or the raw end; never a
 * measure of speed */
#define WAIT_MS 10000
#define OPS_MAX 16
#define RX_MAX 16
#define EVLOG_MAX 64

/* ------------------------------------------------------------------ */
/* the fake core                                                        */

struct rmsg_ctx {
	struct rmsgi_tr_env env;
	struct rmsgi_reaper reaper;
	struct rmsgi_cfgv cfg;
	void *slot; /* the TCP backend's */
	int warnings;
};

struct top {
	struct rmsgi_op op;
	int done;   /* times rmsgi_conn_op_done() ran for it */
	int status; /* its last status */
};

struct rxf {
	struct rmsgi_hdr h;
	uint8_t *data;
};

struct rmsg_conn {
	struct rmsgi_tr_conn_info ci;
	void *tc;
	/* 'E' established, 'F' failed, 'D' down, 'O' op done, 'R' frame */
	char ev[EVLOG_MAX];
	int nev;
	int established, failed, down;
	int fail_reason;
	struct rmsgi_hello peer;
	int undone_at_down; /* posted ops not completed when ev_down came */
	struct top ops[OPS_MAX];
	int nops;
	struct rxf rx[RX_MAX];
	int nrx;
	int rooms;
	/* the core's answer to rmsgi_conn_rx_admit: 0 takes any frame,
	 * else the largest one before the (mocked) proof */
	size_t unproven_max;
	int admits;
	char why[192]; /* the first reason given (rmsgi_conn_why) */
};

static struct ev_loop *loop;
static struct rmsg_ctx ctx;
static struct rmsg_conn conn;
static int raw = -1; /* the test's end of the socketpair */

static void ev_add(struct rmsg_conn *c, char kind)
{
	assert_true(c->nev < EVLOG_MAX);
	c->ev[c->nev++] = kind;
}

void rmsgi_log(const struct rmsg_ctx *x, int level, const char *fmt, ...)
{
	va_list ap;

	if (level <= RMSG_LOG_WARN)
		((struct rmsg_ctx *)x)->warnings++;
	if (!getenv("RMSG_UNIT_VERBOSE"))
		return;
	va_start(ap, fmt);
	fprintf(stderr, "  log: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

const struct rmsgi_tr_env *rmsgi_ctx_env(struct rmsg_ctx *x)
{
	return &x->env;
}

void **rmsgi_ctx_tr_slot(struct rmsg_ctx *x, const struct rmsgi_tr *tr)
{
	assert_ptr_equal(tr, &rmsgi_tr_tcp);
	return &x->slot;
}

/* no listener here: nobody knocks */
int rmsgi_tr_incoming(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      void *tc, struct rmsg_conn **c_p,
		      const struct rmsgi_tr_conn_info **ci_p,
		      struct rmsgi_hello *refusal)
{
	(void)l, (void)tr, (void)tc, (void)c_p, (void)ci_p, (void)refusal;
	fail_msg("rmsgi_tr_incoming without a listener");
	return -ECONNREFUSED;
}

bool rmsgi_tr_group(const struct rmsg_listener *l)
{
	(void)l;
	return false;
}

void rmsgi_tr_handoff(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      const struct sockaddr *peer, void *h)
{
	(void)l, (void)tr, (void)peer, (void)h;
	fail_msg("rmsgi_tr_handoff without a listener");
}

int rmsgi_conn_ev_request(struct rmsg_conn *c, struct rmsg_listener *l,
			  const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply)
{
	(void)c, (void)l, (void)h, (void)reply;
	fail_msg("rmsgi_conn_ev_request on a client connection");
	return -ECONNREFUSED;
}

void rmsgi_conn_set_tc(struct rmsg_conn *c, void *tc)
{
	c->tc = tc;
}

/* the hello this side sends */
static const struct rmsgi_hello my_hello = {
	.credits = 32, .eager_size = 8192, .pdata_len = 3, .pdata = "cli"};

void rmsgi_conn_hello(const struct rmsg_conn *c, struct rmsgi_hello *h)
{
	(void)c;
	*h = my_hello;
}

void rmsgi_conn_ev_established(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	assert_non_null(h); /* a client's: the peer's answer */
	assert_int_equal(c->down, 0);
	c->established++;
	c->peer = *h;
	ev_add(c, 'E');
}

void rmsgi_conn_ev_failed(struct rmsg_conn *c, int reason,
			  const struct rmsgi_hello *h)
{
	(void)h;
	assert_int_equal(c->down, 0);
	c->failed++;
	c->fail_reason = reason;
	ev_add(c, 'F');
}

/* the reason's words are the core's business (conn.c): kept as the
 * core keeps them, the first one */
void rmsgi_conn_why(struct rmsg_conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

void rmsgi_conn_ev_down(struct rmsg_conn *c)
{
	int i;

	c->down++;
	for (i = 0; i < c->nops; i++)
		c->undone_at_down += c->ops[i].done == 0;
	ev_add(c, 'D');
}

void rmsgi_conn_op_done(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	struct top *o = RMSGI_CONTAINER_OF(op, struct top, op);

	assert_int_equal(c->down, 0);
	o->done++;
	o->status = status;
	ev_add(c, 'O');
}

int rmsgi_conn_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *m)
{
	struct rxf *f;

	assert_int_equal(c->down, 0);
	assert_true(c->nrx < RX_MAX);
	assert_true(m->ready);
	assert_int_equal(m->len, h->len);
	f = &c->rx[c->nrx++];
	f->h = *h;
	f->data = malloc(m->len ? m->len : 1);
	assert_non_null(f->data);
	memcpy(f->data, m->data, m->len);
	/* done with it before returning: the backend takes it back */
	ev_add(c, 'R');
	return RMSGI_RX_DONE;
}

void rmsgi_conn_tr_room(struct rmsg_conn *c)
{
	c->rooms++;
}

void rmsgi_conn_credit_freed(struct rmsg_conn *c, uint32_t wcost)
{
	(void)c;
	(void)wcost;
}

int rmsgi_conn_rx_admit(struct rmsg_conn *c, const struct rmsgi_hdr *h)
{
	c->admits++;
	if (!c->unproven_max)
		return 1;
	return h->len <= c->unproven_max ? 0 : -EACCES;
}

void rmsgi_conn_heard(struct rmsg_conn *c)
{
	(void)c;
}

void rmsgi_conn_rx_progress(struct rmsg_conn *c, size_t got)
{
	(void)c;
	(void)got;
}

/* ------------------------------------------------------------------ */
/* the loop and the raw end                                             */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void spin(void)
{
	ev_run(loop, EVRUN_NOWAIT);
}

/* runs the loop until @cond holds, for WAIT_MS at most */
#define RUN_UNTIL(cond)                                       \
	do {                                                  \
		double t0_ = now_ms();                        \
		while (!(cond) && now_ms() - t0_ < WAIT_MS) { \
			spin();                               \
			if (!(cond))                          \
				usleep(200);                  \
		}                                             \
		assert_true(cond);                            \
	} while (0)

/* reads exactly @len bytes from the raw end, running the loop between
 * reads (the backend writes from it); 0, or -1 at EOF / error */
static int raw_read(void *buf, size_t len)
{
	uint8_t *p = buf;
	double t0 = now_ms();

	while (len) {
		ssize_t r = read(raw, p, len);

		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		assert_true(now_ms() - t0 < WAIT_MS);
		spin();
		usleep(100);
	}
	return 0;
}

/* reads one whole frame; its payload in @data (caller frees) */
static void raw_frame(struct rmsgi_hdr *h, uint8_t **data)
{
	uint8_t hb[RMSGI_HDR_SIZE];

	assert_int_equal(raw_read(hb, sizeof(hb)), 0);
	assert_int_equal(rmsgi_hdr_decode(hb, sizeof(hb), UINT64_MAX, h), 0);
	*data = malloc(h->len ? h->len : 1);
	assert_non_null(*data);
	if (h->len)
		assert_int_equal(raw_read(*data, h->len), 0);
}

/* writes all of @buf to the raw end, running the loop while the socket
 * is full (the backend reads from it) */
static void raw_write(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	double t0 = now_ms();

	while (len) {
		ssize_t w = write(raw, p, len);

		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		assert_true(w < 0 && (errno == EAGAIN || errno == EINTR));
		assert_true(now_ms() - t0 < WAIT_MS);
		spin();
		usleep(100);
	}
}

static void raw_send(uint8_t type, const void *payload, size_t len)
{
	struct rmsgi_hdr h = {.type = type, .len = len};
	uint8_t hb[RMSGI_HDR_SIZE];

	rmsgi_hdr_encode(&h, hb);
	raw_write(hb, sizeof(hb));
	if (len)
		raw_write(payload, len);
}

/* the raw end reads until EOF; false if the socket stays open */
static bool raw_eof(void)
{
	double t0 = now_ms();
	uint8_t b[4096];

	while (now_ms() - t0 < WAIT_MS) {
		ssize_t r = read(raw, b, sizeof(b));

		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return true;
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		spin();
		usleep(100);
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* set-up: a connection over the fake core                              */

static const struct rmsgi_tr_conn_ops *tops(void)
{
	return rmsgi_tr_tcp.conn;
}

/* starts the connection; its HELLO is read back and checked */
static void start(void)
{
	struct rmsgi_hello h;
	struct rmsgi_hdr hdr;
	uint8_t *data;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	raw = sv[1];
	assert_int_equal(fcntl(raw, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(tcp_conn_adopt(&ctx, &conn, &conn.ci, sv[0]), 0);
	assert_non_null(conn.tc);
	raw_frame(&hdr, &data);
	assert_int_equal(hdr.type, RMSGI_T_HELLO);
	assert_int_equal(rmsgi_hello_decode(data, hdr.len, &h), 0);
	assert_int_equal(h.credits, my_hello.credits);
	assert_int_equal(h.eager_size, my_hello.eager_size);
	assert_int_equal(h.pdata_len, 3);
	assert_memory_equal(h.pdata, "cli", 3);
	free(data);
	assert_int_equal(conn.established, 0);
}

static const struct rmsgi_hello peer_hello = {
	.credits = 16, .eager_size = 4096, .pdata_len = 3, .pdata = "srv"};

/* the raw end accepts; the backend reports established */
static void open_conn(void)
{
	uint8_t b[RMSGI_HELLO_SIZE + sizeof(peer_hello.pdata)];
	size_t n;

	start();
	n = rmsgi_hello_encode(&peer_hello, b);
	raw_send(RMSGI_T_HELLO_ACK, b, n);
	RUN_UNTIL(conn.established);
}

static int setup(void **state)
{
	(void)state;
	loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(loop);
	memset(&ctx, 0, sizeof(ctx));
	memset(&conn, 0, sizeof(conn));
	/* what the backend reads of the configuration */
	ctx.cfg.max_msg_size = (size_t)4 << 20;
	ctx.cfg.tcp_rx_limit = (size_t)64 << 20;
	ctx.cfg.timeout_ms = WAIT_MS;
	/* on: the backend then tries TCP_USER_TIMEOUT, which a unix
	 * socket refuses, harmlessly */
	ctx.cfg.keepalive_ms = 1000;
	ctx.cfg.keepalive_misses = 3;
	ctx.cfg.credits = my_hello.credits;
	ctx.cfg.eager_size = my_hello.eager_size;
	ctx.env.ctx = &ctx;
	ctx.env.loop = loop;
	ctx.env.cfg = &ctx.cfg;
	ctx.env.log_max = RMSG_LOG_WARN;
	ctx.reaper.tail = &ctx.reaper.head;
	ctx.env.reaper = &ctx.reaper;
	conn.ci.ctx = &ctx;
	conn.ci.cfg = &ctx.cfg;
	conn.ci.id = 1;
	conn.ci.dial_ms = ctx.cfg.timeout_ms;
	return 0;
}

static int teardown(void **state)
{
	int i;

	(void)state;
	if (conn.tc && !conn.down)
		tops()->disconnect(conn.tc, 0);
	if (ctx.slot)
		rmsgi_tr_tcp.ctx->fini(ctx.slot);
	assert_null(ctx.slot);
	for (i = 0; i < conn.nrx; i++)
		free(conn.rx[i].data);
	if (raw >= 0)
		close(raw);
	raw = -1;
	ev_loop_destroy(loop);
	return 0;
}

/* a DATA op of @len bytes of @buf, posted */
static struct top *post(const void *buf, size_t len)
{
	struct top *o;

	assert_true(conn.nops < OPS_MAX);
	o = &conn.ops[conn.nops++];
	memset(o, 0, sizeof(*o));
	rmsgi_list_init(&o->op.link);
	rmsgi_list_init(&o->op.rlink);
	o->op.kind = RMSGI_OP_SEND;
	o->op.type = RMSGI_T_DATA;
	o->op.proto = RMSGI_OP_P_EAGER;
	o->op.state = RMSGI_OS_POSTED;
	o->op.credits = (uint16_t)conn.nops;
	o->op.len = len;
	o->op.iovcnt = 1;
	o->op.iov = o->op.iov_inline;
	o->op.iov[0].iov_base = (void *)buf;
	o->op.iov[0].iov_len = len;
	assert_int_equal(tops()->post(conn.tc, &o->op), 0);
	return o;
}

static int count_ev(char kind)
{
	int i, n = 0;

	for (i = 0; i < conn.nev; i++)
		n += conn.ev[i] == kind;
	return n;
}

/* a payload that shows where each byte sits */
static uint8_t *pattern(size_t len, unsigned seed)
{
	uint8_t *p = malloc(len ? len : 1);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 12));
	return p;
}

/* more than the socketpair's buffers take at once: it stays queued
 * until the raw end reads */
#define QUEUED_LEN ((size_t)3 << 20)

/* ------------------------------------------------------------------ */
/* the handshake                                                        */

static void tcp__hello_then_established(void **state)
{
	(void)state;
	open_conn();
	assert_int_equal(conn.established, 1);
	assert_int_equal(conn.peer.credits, peer_hello.credits);
	assert_int_equal(conn.peer.eager_size, peer_hello.eager_size);
	assert_int_equal(conn.peer.pdata_len, 3);
	assert_memory_equal(conn.peer.pdata, "srv", 3);
	spin();
	assert_int_equal(conn.established, 1);
	assert_int_equal(conn.failed, 0);
	assert_int_equal(conn.down, 0);
}

/* a REJECT ends the handshake: a failure, then the end */
static void tcp__reject_fails(void **state)
{
	struct rmsgi_hello no = {.status = -EPERM};
	uint8_t b[RMSGI_HELLO_SIZE + sizeof(no.pdata)];

	(void)state;
	start();
	raw_send(RMSGI_T_REJECT, b, rmsgi_hello_encode(&no, b));
	RUN_UNTIL(conn.down);
	assert_int_equal(conn.established, 0);
	assert_int_equal(conn.failed, 1);
	assert_int_equal(conn.fail_reason, -ECONNREFUSED);
	assert_int_equal(conn.ev[conn.nev - 1], 'D');
}

/* tcp_conn_adopt() bounds the handshake by the connection timeout: a
 * peer that never answers the HELLO fails it with -ETIMEDOUT */
static void tcp__hello_unanswered_times_out(void **state)
{
	(void)state;
	ctx.cfg.timeout_ms = 50;
	start();
	RUN_UNTIL(conn.down);
	assert_int_equal(conn.established, 0);
	assert_int_equal(conn.failed, 1);
	assert_int_equal(conn.fail_reason, -ETIMEDOUT);
	assert_int_equal(conn.ev[conn.nev - 1], 'D');
}

/* ------------------------------------------------------------------ */
/* sending                                                              */

static void tcp__posted_in_order_done_once(void **state)
{
	static const char *msg[] = {"one", "", "three three"};
	uint8_t *big = pattern(100000, 1);
	struct top *o[4];
	struct rmsgi_hdr h;
	uint8_t *data;
	int i;

	(void)state;
	open_conn();
	for (i = 0; i < 3; i++)
		o[i] = post(msg[i], strlen(msg[i]));
	o[3] = post(big, 100000);
	tops()->kick(conn.tc);
	for (i = 0; i < 4; i++) {
		size_t len = i < 3 ? strlen(msg[i]) : 100000;

		raw_frame(&h, &data);
		assert_int_equal(h.type, RMSGI_T_DATA);
		assert_int_equal(h.credits, i + 1); /* the order */
		assert_int_equal(h.len, len);
		assert_memory_equal(data, i < 3 ? (const uint8_t *)msg[i] : big,
				    len);
		free(data);
	}
	RUN_UNTIL(o[3]->done);
	for (i = 0; i < 10; i++)
		spin();
	for (i = 0; i < 4; i++) {
		assert_int_equal(o[i]->done, 1);
		assert_int_equal(o[i]->status, 0);
	}
	assert_int_equal(count_ev('O'), 4);
	assert_int_equal(conn.failed, 0);
	assert_int_equal(conn.down, 0);
	free(big);
}

/* ------------------------------------------------------------------ */
/* receiving                                                            */

static void tcp__rx_byte_by_byte(void **state)
{
	const char *s = "byte by byte";
	struct rmsgi_hdr h = {.type = RMSGI_T_DATA, .len = strlen(s), .id = 7};
	uint8_t f[RMSGI_HDR_SIZE + 16];
	size_t n = RMSGI_HDR_SIZE + strlen(s), i;

	(void)state;
	open_conn();
	rmsgi_hdr_encode(&h, f);
	memcpy(f + RMSGI_HDR_SIZE, s, strlen(s));
	for (i = 0; i < n; i++) {
		raw_write(&f[i], 1);
		spin();
		spin();
		/* nothing before the last byte */
		assert_int_equal(conn.nrx, i + 1 < n ? 0 : conn.nrx);
	}
	RUN_UNTIL(conn.nrx);
	spin();
	assert_int_equal(conn.nrx, 1);
	assert_int_equal(conn.rx[0].h.type, RMSGI_T_DATA);
	assert_int_equal(conn.rx[0].h.id, 7);
	assert_int_equal(conn.rx[0].h.len, strlen(s));
	assert_memory_equal(conn.rx[0].data, s, strlen(s));
	assert_int_equal(conn.failed, 0);
}

/* a frame larger than the read buffer arrives whole, between others */
static void tcp__rx_large_frame(void **state)
{
	size_t len = (size_t)TCP_RBUF_SIZE * 3 + 12345;
	uint8_t *big = pattern(len, 3);

	(void)state;
	open_conn();
	raw_send(RMSGI_T_DATA, "before", 6);
	raw_send(RMSGI_T_DATA, big, len);
	raw_send(RMSGI_T_DATA, "after", 5);
	RUN_UNTIL(conn.nrx == 3);
	spin();
	assert_int_equal(conn.nrx, 3);
	assert_int_equal(conn.rx[0].h.len, 6);
	assert_memory_equal(conn.rx[0].data, "before", 6);
	assert_int_equal(conn.rx[1].h.len, len);
	assert_memory_equal(conn.rx[1].data, big, len);
	assert_int_equal(conn.rx[2].h.len, 5);
	assert_memory_equal(conn.rx[2].data, "after", 5);
	assert_int_equal(conn.failed, 0);
	free(big);
}

/* frames larger than TCP_RBUF_FRAME_MAX in a row, written before the
 * backend reads: however they are read (whole in the read buffer, or
 * into memory of their own), each arrives once, whole, in order */
static void tcp__rx_large_frames_in_a_row(void **state)
{
	size_t len = (size_t)TCP_RBUF_FRAME_MAX + 4567;
	uint8_t *a = pattern(len, 21), *b = pattern(len, 22);

	(void)state;
	open_conn();
	raw_send(RMSGI_T_DATA, "x", 1);
	raw_send(RMSGI_T_DATA, a, len);
	raw_send(RMSGI_T_DATA, b, len);
	raw_send(RMSGI_T_DATA, "y", 1);
	RUN_UNTIL(conn.nrx == 4);
	spin();
	assert_int_equal(conn.nrx, 4);
	assert_memory_equal(conn.rx[0].data, "x", 1);
	assert_int_equal(conn.rx[1].h.len, len);
	assert_memory_equal(conn.rx[1].data, a, len);
	assert_int_equal(conn.rx[2].h.len, len);
	assert_memory_equal(conn.rx[2].data, b, len);
	assert_int_equal(conn.rx[3].h.len, 1);
	assert_memory_equal(conn.rx[3].data, "y", 1);
	assert_int_equal(conn.failed, 0);
	free(a);
	free(b);
}

/* ------------------------------------------------------------------ */
/* failures                                                             */

/* a frame the backend must refuse, with an op still queued: the
 * failure is reported once, the op completes once with it, then down */
static void refused(uint8_t type, uint64_t len, int reason)
{
	uint8_t *big = pattern(QUEUED_LEN, 5);
	struct rmsgi_hdr h = {.type = type, .len = len};
	uint8_t hb[RMSGI_HDR_SIZE];
	struct top *o;

	open_conn();
	o = post(big, QUEUED_LEN);
	tops()->kick(conn.tc);
	spin();
	assert_int_equal(o->done, 0);
	rmsgi_hdr_encode(&h, hb);
	raw_write(hb, sizeof(hb));
	RUN_UNTIL(conn.down);
	spin();
	assert_int_equal(conn.failed, 1);
	assert_int_equal(conn.fail_reason, reason);
	assert_int_equal(conn.down, 1);
	assert_int_equal(conn.undone_at_down, 0);
	assert_int_equal(o->done, 1);
	assert_int_equal(o->status, reason);
	assert_int_equal(conn.nrx, 0);
	/* failed, the op, then down: the end is the last word */
	assert_int_equal(conn.ev[conn.nev - 1], 'D');
	assert_int_equal(count_ev('F'), 1);
	assert_true(raw_eof());
	free(big);
}

/* rmsg_connect.3: a peer announcing more than the maximum message size
 * is disconnected with -EMSGSIZE */
static void tcp__rx_over_max_msg_size(void **state)
{
	(void)state;
	refused(RMSGI_T_DATA, ctx.cfg.max_msg_size + 1, -EMSGSIZE);
}

/* a type the core calls illegal on an open connection (a second HELLO) */
static void tcp__rx_illegal_type(void **state)
{
	(void)state;
	refused(RMSGI_T_HELLO, RMSGI_HELLO_SIZE, -EPROTO);
}

/* a type no peer may send */
static void tcp__rx_unknown_type(void **state)
{
	(void)state;
	refused(200, 0, -EPROTO);
}

/* rmsg.7, "What each state allows": before the peer's proof the core
 * admits only a handshake-sized frame; a longer header ends the
 * connection with the core's answer (-EACCES), its payload unread, and
 * the backend asks for every frame until the core takes any */
static void tcp__rx_unproven_bound(void **state)
{
	uint8_t *big = pattern(4096, 9);
	struct rmsgi_hdr h = {.type = RMSGI_T_DATA};
	uint8_t hb[RMSGI_HDR_SIZE];

	(void)state;
	open_conn();
	conn.unproven_max = 64;
	raw_send(RMSGI_T_DATA, "proof", 5);
	RUN_UNTIL(conn.nrx == 1);
	/* the mocked proof is done: any size now, asked no more */
	conn.unproven_max = 0;
	raw_send(RMSGI_T_DATA, big, 4096);
	raw_send(RMSGI_T_DATA, "x", 1);
	RUN_UNTIL(conn.nrx == 3);
	assert_int_equal(conn.admits, 2);
	assert_int_equal(conn.failed, 0);
	free(big);

	teardown(NULL);
	setup(NULL);
	open_conn();
	conn.unproven_max = 64;
	h.len = ctx.cfg.max_msg_size; /* the most the decode lets through */
	rmsgi_hdr_encode(&h, hb);
	raw_write(hb, sizeof(hb));
	RUN_UNTIL(conn.down);
	spin();
	assert_int_equal(conn.failed, 1);
	assert_int_equal(conn.fail_reason, -EACCES);
	assert_int_equal(conn.nrx, 0);
	assert_true(raw_eof());
}

/* the raw end closes: reported once as a reset, then down */
static void tcp__peer_close(void **state)
{
	(void)state;
	open_conn();
	close(raw);
	raw = -1;
	RUN_UNTIL(conn.down);
	spin();
	assert_int_equal(conn.failed, 1);
	assert_int_equal(conn.fail_reason, -ECONNRESET);
	assert_int_equal(conn.down, 1);
	assert_int_equal(conn.ev[conn.nev - 1], 'D');
}

/* post() makes no up-calls (transport.h): a batch that reaches
 * TCP_BATCH_BYTES makes it say -EAGAIN rather than write, even on a
 * socket that has failed; kick() writes, finds the failure and ends the
 * connection, completing every op once, and the core hears of room */
static void tcp__post_never_writes(void **state)
{
	size_t half = TCP_BATCH_BYTES / 2;
	uint8_t *big = pattern(half, 3);
	struct top *a, *b, *c3;

	(void)state;
	open_conn();
	close(raw); /* the peer is gone; our read side has not seen it */
	raw = -1;
	a = post(big, half);
	b = post(big, half);
	c3 = &conn.ops[conn.nops++];
	*c3 = *b;
	rmsgi_list_init(&c3->op.link);
	assert_int_equal(tops()->post(conn.tc, &c3->op), -EAGAIN);
	assert_int_equal(conn.failed, 0);
	assert_int_equal(a->done + b->done + c3->done, 0);
	tops()->kick(conn.tc);
	assert_int_equal(conn.failed, 1);
	assert_int_equal(a->done, 1);
	assert_int_equal(b->done, 1);
	assert_int_equal(c3->done, 0); /* never taken */
	RUN_UNTIL(conn.down);
	free(big);
}

/* a socket call that fails with ETIMEDOUT (the kernel's user timeout,
 * the keepalive bound) ends the connection with a reason that names it,
 * not a bare "timed out" */
static void tcp__user_timeout_named(void **state)
{
	struct tcp_conn *tc;

	(void)state;
	ctx.cfg.keepalive_ms = 200;
	ctx.cfg.keepalive_misses = 3;
	open_conn();
	tc = conn.tc;
	tcp_enter(tc);
	tcp_conn_fail(tc, -ETIMEDOUT);
	tcp_leave(tc);
	RUN_UNTIL(conn.down);
	assert_int_equal(conn.failed, 1);
	assert_int_equal(conn.fail_reason, -ETIMEDOUT);
	assert_non_null(strstr(conn.why, "TCP_USER_TIMEOUT"));
	assert_non_null(strstr(conn.why, "600 ms"));
}

/* with keepalive off no user timeout is set: an ETIMEDOUT then comes
 * from the kernel's retransmission limit, and the reason says that, not
 * "0 ms (TCP_USER_TIMEOUT)" */
static void tcp__retransmit_timeout_named(void **state)
{
	struct tcp_conn *tc;

	(void)state;
	ctx.cfg.keepalive_ms = 0;
	open_conn();
	tc = conn.tc;
	tcp_enter(tc);
	tcp_conn_fail(tc, -ETIMEDOUT);
	tcp_leave(tc);
	RUN_UNTIL(conn.down);
	assert_int_equal(conn.fail_reason, -ETIMEDOUT);
	assert_null(strstr(conn.why, "TCP_USER_TIMEOUT"));
	assert_non_null(strstr(conn.why, "retransmissions"));
}

/* a connect that gets no socket for any address fails at once, with
 * nothing reported, and leaves the context's entry bracket closed: a
 * depth left raised would stop the reaper for good (no later ended
 * connection would be freed or go down) */
static void tcp__connect_no_socket(void **state)
{
	struct rmsgi_addrs to;
	struct rmsgi_uri u;

	(void)state;
	memset(&to, 0, sizeof(to));
	memset(&u, 0, sizeof(u));
	to.n = 2;
	to.a[0].ss_family = AF_MAX; /* socket(): EAFNOSUPPORT */
	to.len[0] = sizeof(struct sockaddr_in);
	to.a[1] = to.a[0];
	to.len[1] = to.len[0];
	assert_int_equal(tops()->connect(&conn, &conn.ci, &u, &to),
			 -EAFNOSUPPORT);
	assert_int_equal(ctx.reaper.depth, 0);
	assert_int_equal(conn.failed, 0);
	assert_int_equal(conn.down, 0);
	conn.tc = NULL; /* released: rmsg_connect() frees the conn */
	/* the reaper still runs: a connection that ends now goes down */
	open_conn();
	tops()->disconnect(conn.tc, 0);
	RUN_UNTIL(conn.down);
	assert_int_equal(ctx.reaper.depth, 0);
}

/* busy polling (the context op spin): a pass reads what arrived
 * without the loop running (the io watcher never fires here), finds
 * nothing when nothing came, and sees the peer's close the same way,
 * reported once the pass's bracket ends */
static void tcp__spin_reads_without_the_loop(void **state)
{
	const char *s = "spun";
	struct rmsgi_hdr h = {.type = RMSGI_T_DATA, .len = 4, .id = 9};
	uint8_t f[RMSGI_HDR_SIZE + 4];

	(void)state;
	open_conn();
	assert_non_null(rmsgi_tr_tcp.ctx->spin);
	assert_null(rmsgi_tr_tcp.ctx->poll); /* never on every prepare */
	assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 0);
	rmsgi_hdr_encode(&h, f);
	memcpy(f + RMSGI_HDR_SIZE, s, 4);
	raw_write(f, sizeof(f)); /* a socketpair: readable at once */
	assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 1);
	assert_int_equal(conn.nrx, 1);
	assert_int_equal(conn.rx[0].h.id, 9);
	assert_memory_equal(conn.rx[0].data, s, 4);
	assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 0);
	close(raw);
	raw = -1;
	assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 1);
	assert_int_equal(conn.failed, 1);
	assert_int_equal(conn.fail_reason, -ECONNRESET);
	assert_int_equal(conn.down, 1);
	/* an ended connection is not read again */
	assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 0);
}

/* busy polling tries every connection on every pass, so an idle one
 * must stay idle: its empty reads are not counted as use (the sweep would
 * keep its read buffer for good), and one that gave its buffer back is
 * not handed one for a read that finds nothing; the buffer comes with
 * the first byte */
static void tcp__spin_idle_keeps_no_buffer(void **state)
{
	struct rmsgi_hdr h = {.type = RMSGI_T_DATA, .len = 1, .id = 4};
	uint8_t f[RMSGI_HDR_SIZE + 1];
	struct tcp_conn *tc;
	unsigned reads;
	int i;

	(void)state;
	open_conn();
	tc = conn.tc;
	reads = tc->rb_reads;
	for (i = 0; i < 4 * TCP_RBUF_BUSY_READS; i++)
		assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 0);
	assert_int_equal(tc->rb_reads, reads);
	tcp_enter(tc);
	tcp_rbuf_drop_idle(tc); /* what the sweep does to an idle one */
	tcp_leave(tc);
	assert_null(tc->rb);
	for (i = 0; i < 4 * TCP_RBUF_BUSY_READS; i++)
		assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 0);
	assert_null(tc->rb);
	rmsgi_hdr_encode(&h, f);
	f[RMSGI_HDR_SIZE] = 'x';
	raw_write(f, sizeof(f));
	assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 1);
	assert_int_equal(conn.nrx, 1);
	assert_int_equal(conn.rx[0].h.id, 4);
	assert_int_equal(conn.failed, 0);
}

/* and the write side: a socket that was full is written again by the
 * pass as soon as it has room, without the loop's EV_WRITE */
static void tcp__spin_writes_a_full_socket(void **state)
{
	size_t total = RMSGI_HDR_SIZE + QUEUED_LEN, got = 0;
	uint8_t *big = pattern(QUEUED_LEN, 13), *in = malloc(total);
	double t0 = now_ms();
	struct top *o;

	(void)state;
	assert_non_null(in);
	open_conn();
	o = post(big, QUEUED_LEN);
	tops()->kick(conn.tc);
	assert_int_equal(o->done, 0); /* the socketpair is full */
	assert_int_equal(rmsgi_tr_tcp.ctx->spin(ctx.slot), 0);
	while (got < total) {
		ssize_t r = read(raw, in + got, total - got);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		assert_true(r < 0 && (errno == EAGAIN || errno == EINTR));
		assert_true(now_ms() - t0 < WAIT_MS);
		rmsgi_tr_tcp.ctx->spin(ctx.slot); /* never the loop */
	}
	assert_memory_equal(in + RMSGI_HDR_SIZE, big, QUEUED_LEN);
	assert_int_equal(o->done, 1);
	assert_int_equal(o->status, 0);
	assert_int_equal(conn.failed, 0);
	free(in);
	free(big);
}

/* ------------------------------------------------------------------ */
/* disconnect                                                           */

/* lingering: everything posted goes out whole, then the FIN; the end
 * follows the peer's FIN, without a failure */
static void tcp__disconnect_linger(void **state)
{
	uint8_t *big = pattern(QUEUED_LEN, 9);
	struct top *a, *b;
	struct rmsgi_hdr h;
	uint8_t *data;

	(void)state;
	open_conn();
	a = post(big, QUEUED_LEN);
	/* a batch of TCP_BATCH_BYTES and more: written by the kick, which
	 * fills the socket; what follows queues behind it */
	tops()->kick(conn.tc);
	b = post("last", 4);
	tops()->disconnect(conn.tc, WAIT_MS);
	assert_int_equal(conn.down, 0);
	raw_frame(&h, &data);
	assert_int_equal(h.len, QUEUED_LEN);
	assert_memory_equal(data, big, QUEUED_LEN);
	free(data);
	raw_frame(&h, &data);
	assert_int_equal(h.len, 4);
	assert_memory_equal(data, "last", 4);
	free(data);
	/* then the FIN */
	assert_true(raw_eof());
	assert_int_equal(conn.down, 0);
	shutdown(raw, SHUT_WR);
	RUN_UNTIL(conn.down);
	assert_int_equal(conn.failed, 0);
	assert_int_equal(a->done, 1);
	assert_int_equal(a->status, 0);
	assert_int_equal(b->done, 1);
	assert_int_equal(b->status, 0);
	assert_int_equal(conn.undone_at_down, 0);
	free(big);
}

/* with 0: the end at once, what was queued cancelled */
static void tcp__disconnect_now(void **state)
{
	uint8_t *big = pattern(QUEUED_LEN, 11);
	struct top *o;

	(void)state;
	open_conn();
	o = post(big, QUEUED_LEN);
	tops()->kick(conn.tc);
	spin();
	assert_int_equal(o->done, 0);
	tops()->disconnect(conn.tc, 0);
	assert_int_equal(conn.down, 1);
	assert_int_equal(conn.failed, 0);
	assert_int_equal(o->done, 1);
	assert_int_equal(o->status, -ECANCELED);
	assert_int_equal(conn.undone_at_down, 0);
	spin();
	assert_int_equal(conn.down, 1);
	assert_int_equal(o->done, 1);
	assert_true(raw_eof());
	free(big);
}

/* the addrs op over a socket that is not IP: no addresses to tell */
static void tcp__addrs_not_ip(void **state)
{
	struct sockaddr_storage l, p, untouched;

	(void)state;
	open_conn();
	memset(&l, 0x5a, sizeof(l));
	memset(&p, 0x5a, sizeof(p));
	memset(&untouched, 0x5a, sizeof(untouched));
	assert_int_equal(tops()->addrs(conn.tc, &l, &p), -EAFNOSUPPORT);
	assert_memory_equal(&l, &untouched, sizeof(l));
	assert_memory_equal(&p, &untouched, sizeof(p));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(tcp__hello_then_established),
		T(tcp__reject_fails),
		T(tcp__hello_unanswered_times_out),
		T(tcp__posted_in_order_done_once),
		T(tcp__rx_byte_by_byte),
		T(tcp__rx_large_frame),
		T(tcp__rx_large_frames_in_a_row),
		T(tcp__rx_over_max_msg_size),
		T(tcp__rx_illegal_type),
		T(tcp__rx_unknown_type),
		T(tcp__rx_unproven_bound),
		T(tcp__peer_close),
		T(tcp__post_never_writes),
		T(tcp__user_timeout_named),
		T(tcp__retransmit_timeout_named),
		T(tcp__connect_no_socket),
		T(tcp__spin_reads_without_the_loop),
		T(tcp__spin_writes_a_full_socket),
		T(tcp__spin_idle_keeps_no_buffer),
		T(tcp__disconnect_linger),
		T(tcp__disconnect_now),
		T(tcp__addrs_not_ip),
	};
#undef T

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
