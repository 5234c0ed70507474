// SPDX-License-Identifier: MIT
/*
 * hostile_bound.c - a raw librdmacm/verbs peer tries to make a librmsg
 * rdma:// server hold more than it was given (issue 14, "memory bounded
 * by what arrived" and the SRQ item). The server context has a budget of
 * BUDGET registered bytes, accepts messages up to MAX_MSG, and exports
 * one remote-writable region of REGION bytes. One connection per case:
 *   flood: a DATA "slow" (the server's app takes STALL_MS over it, as
 *     any app may), then CREDIT frames far beyond the 32 credits
 *     granted, as fast as the device takes them: while the server is
 *     busy they empty the SRQ every connection shares
 *                                            -> -EPROTO, and the other
 *     peers' connections do not fail with RNR (a pinger process sends
 *     to the server every PINGER_MS all along and must be answered)
 *   an IMM frame claiming REGION + 1 bytes   -> -EPROTO, no on_imm
 *   an IMM frame claiming 2^40 bytes         -> -EPROTO, no on_imm
 *   an IMM frame claiming REGION bytes       -> on_imm(REGION)
 *   a hello announcing a 1 MiB eager size; the server then sends it
 *     32 KiB: it must come as a rendezvous request, never as a DATA
 *     frame over the server's own 8 KiB eager size
 *   NRNDV rendezvous requests of RNDV_LEN each (every segment points at
 *     the same 1 MiB of the peer: announcing costs it nothing), then one
 *     of OVER_LEN: the connection's share of the budget is
 *     BUDGET / (connections + 1) = BUDGET / 4 (the good client's, the
 *     pinger's and its own; BUDGET / 5 if the previous case's connection
 *     is still being torn down), so the server reads one RNDV_LEN
 *     message at a time (all acknowledged with 0, in order); OVER_LEN
 *     is over what one connection may ever read (BUDGET / 2, the share
 *     of a single connection, which a connection with nothing being
 *     read may take for one message however many are open), so it is
 *     refused with -ENOMEM; the connection stays up
 * and last a well-behaved DATA "hello", which must come back echoed.
 * Throughout, a librmsg client of the same server pings it every PING_MS
 * and must be served; while the rendezvous requests are being read it
 * sends the server a RNDV_LEN message of its own, which must arrive.
 * (Before the share, the server took memory for every announced request
 * at once, until the budget ran out; the requests after that failed with
 * -ENOMEM although each was within any fair share.)
 * The server context's registered bytes (its budget in use, read from
 * the library's internals) are sampled; their peak above the level
 * before the attack must stay under a bound (printed).
 * RDMA only: exits 77 over TCP.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "proto.h"
#include "raw_verbs.h"
#include "rmsg_int.h" /* the server context's registered bytes */

#define MIB ((size_t)1 << 20)
#define BUDGET (48 * MIB)
#define MAX_MSG (32 * MIB)
#define REGION ((size_t)64 << 10)
static uint8_t region_desc[RMSG_MR_DESC_SIZE];
#define RNDV_LEN (8 * MIB)
/* over BUDGET / 2 (20 MiB, over the share BUDGET / 4 but under
 * BUDGET / 2, is now read once the reads before it are done) */
#define OVER_LEN (28 * MIB)
#define NRNDV 6
#define SRC_LEN MIB
#define EAGER_SEND ((size_t)32 << 10)
#define SQN 256
#define NFLOOD 4000
#define PING_MS 20
#define PINGER_MS 2
#define STALL_MS 300

enum kind {
	K_FLOOD,
	K_IMM_LIE,
	K_IMM_HUGE,
	K_IMM_OK,
	K_EAGER,
	K_RNDV,
	K_GOOD,
};

static const struct {
	enum kind k;
	const char *what;
	int expect; /* 1: the peer closes, any reason */
} cases[] = {
	{K_FLOOD, "CREDIT flood beyond the grant", -EPROTO},
	{K_IMM_LIE, "IMM frame of REGION + 1 bytes", -EPROTO},
	{K_IMM_HUGE, "IMM frame of 2^40 bytes", -EPROTO},
	{K_IMM_OK, "IMM frame of REGION bytes", 1},
	{K_EAGER, "hello with a 1 MiB eager size", 1},
	{K_RNDV, "rendezvous requests over the share", 1},
	{K_GOOD, "a well-behaved DATA", 1},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* ------------------------------------------------------------------ */
/* the raw peer (child process)                                         */

static int raw_fail; /* the first failed check of the raw peer */

#define RAW_FAIL(code, ...)                           \
	do {                                          \
		fprintf(stderr, "raw: " __VA_ARGS__); \
		fprintf(stderr, "\n");                \
		if (!raw_fail)                        \
			raw_fail = (code);            \
	} while (0)

/* what rendezvous requests point at, and the sends out; one connection
 * at a time */
static uint8_t *src;
static struct ibv_mr *src_mr;
static int sq_out;

static void raw_connect_bound(struct raw *r, const char *host, uint16_t port,
			      uint32_t eager)
{
	struct raw_opts o = {.cqe = 1024,
			     .sqn = SQN,
			     .credits = RAW_RXN,
			     .eager = eager,
			     .responder_resources = 16, /* the server's reads */
			     /* RNR retried for good: holds the SRQ */
			     .secs = 15};

	raw_connect(r, host, port, &o);
	src = calloc(1, SRC_LEN);
	if (!src)
		_exit(23);
	src_mr = ibv_reg_mr(r->pd, src, SRC_LEN,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!src_mr)
		_exit(24);
	sq_out = 0;
}

static void raw_close_bound(struct raw *r)
{
	raw_disconnect(r);
	ibv_dereg_mr(src_mr);
	raw_free(r);
	free(src);
}

static uint8_t *hdr_at(struct raw *r, size_t off, uint8_t type, uint64_t len,
		       uint64_t id)
{
	struct rmsgi_hdr h = {.type = type, .len = len, .id = id};
	uint8_t *b = raw_sbuf(r, off);

	rmsgi_hdr_encode(&h, b);
	return b;
}

/*
 * waits for a frame from the server (a receive completion), decoding its
 * header into @h; reposts the buffer. Returns the frame's length, or -1
 * after @secs seconds or on an error completion.
 */
static long raw_recv(struct raw *r, struct rmsgi_hdr *h, double secs)
{
	ev_tstamp end = ev_time() + secs;
	struct ibv_wc wc;

	while (ev_time() < end) {
		int n = ibv_poll_cq(r->cq, 1, &wc);

		if (n == 0) {
			usleep(500);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			raw_wc_error(&wc);
			return -1;
		}
		if (wc.opcode != IBV_WC_RECV)
			continue;
		raw_take_recv(r, &wc, h);
		return (long)wc.byte_len;
	}
	return -1;
}

/* a flood of CREDIT frames, beyond the 32 credits the server granted */
static int raw_flood(struct raw *r)
{
	struct ibv_wc wcs[64];
	int i, n, sent = 0, err = 0;

	hdr_at(r, 0, RMSGI_T_CREDIT, 0, 0);
	for (i = 0; i < NFLOOD && !err; i++) {
		while (sq_out >= SQN - 64) {
			struct pollfd p = {.fd = r->ch->fd, .events = POLLIN};

			/* the server closed: its QP answers no more */
			if (poll(&p, 1, 0) == 1) {
				err = 1;
				break;
			}
			n = ibv_poll_cq(r->cq, 64, wcs);
			while (n-- > 0) {
				if (wcs[n].opcode & IBV_WC_RECV)
					continue;
				if (wcs[n].status != IBV_WC_SUCCESS)
					err = 1;
				sq_out -= 64;
			}
			if (err)
				break;
		}
		if (err)
			break;
		/* one in 64 signalled: it retires the 63 before it */
		if (raw_send(r, 0, RMSGI_HDR_SIZE, (i % 64) == 63)) {
			err = 1;
			break;
		}
		if ((i % 64) == 63)
			sq_out += 64;
		sent++;
	}
	return sent;
}

/* rendezvous requests: NRNDV of RNDV_LEN, one of OVER_LEN; each ACK's
 * status must be 0 but the last, -ENOMEM */
static void raw_rndv(struct raw *r)
{
	int status[NRNDV + 1], got = 0, i, k;
	ev_tstamp t0 = ev_time();

	for (i = 0; i <= NRNDV; i++) {
		size_t len = i < NRNDV ? RNDV_LEN : OVER_LEN;
		uint32_t nseg = (uint32_t)(len / SRC_LEN);
		uint8_t *b = hdr_at(r, (size_t)i * 1024, RMSGI_T_RNDV_REQ, len,
				    (uint64_t)i + 1);

		for (k = 0; k < (int)nseg; k++) {
			struct rmsgi_seg seg = {(uintptr_t)src, SRC_LEN,
						src_mr->rkey};

			rmsgi_seg_encode(&seg, b + RMSGI_HDR_SIZE +
						       k * RMSGI_SEG_SIZE);
		}
		status[i] = 1;
		if (raw_send(r, (size_t)i * 1024,
			     RMSGI_HDR_SIZE + nseg * RMSGI_SEG_SIZE, false))
			_exit(32);
	}
	while (got <= NRNDV) {
		struct rmsgi_hdr h;

		if (raw_recv(r, &h, 120) < 0) {
			RAW_FAIL(33, "%d of %d rendezvous ACKs", got,
				 NRNDV + 1);
			return;
		}
		if (h.type != RMSGI_T_RNDV_ACK)
			continue;
		if (h.id < 1 || h.id > NRNDV + 1 || status[h.id - 1] != 1)
			_exit(34);
		status[h.id - 1] = -(int)h.aux;
		printf("raw: rendezvous %d (%zu MiB): %s after %.2f s\n",
		       (int)h.id, (h.id <= NRNDV ? RNDV_LEN : OVER_LEN) / MIB,
		       rmsg_strerror(-(int)h.aux), ev_time() - t0);
		got++;
	}
	fflush(stdout);
	for (i = 0; i < NRNDV; i++)
		if (status[i] != 0)
			RAW_FAIL(35,
				 "rendezvous %d of %zu MiB within the share "
				 "failed: %s",
				 i + 1, RNDV_LEN / MIB,
				 rmsg_strerror(status[i]));
	if (status[NRNDV] != -ENOMEM)
		RAW_FAIL(36, "rendezvous of %zu MiB over BUDGET / 2: %s",
			 OVER_LEN / MIB, rmsg_strerror(status[NRNDV]));
}

static void raw_case(const char *host, uint16_t port, enum kind k)
{
	struct raw r = {0};
	struct rmsgi_hdr h;
	uint8_t *b;
	ev_tstamp t0 = ev_time();
	long n;
	int ret;

	raw_connect_bound(&r, host, port, k == K_EAGER ? 1u << 20 : 8192);
	switch (k) {
	case K_FLOOD:
		b = hdr_at(&r, 4096, RMSGI_T_DATA, 4, 0);
		memcpy(b + RMSGI_HDR_SIZE, "slow", 4);
		if (raw_send(&r, 4096, RMSGI_HDR_SIZE + 4, false))
			_exit(27);
		n = raw_flood(&r);
		printf("raw: flood: %ld CREDIT frames posted in %.3f s\n", n,
		       ev_time() - t0);
		break;
	case K_IMM_LIE:
	case K_IMM_HUGE:
	case K_IMM_OK:
		hdr_at(&r, 0, RMSGI_T_IMM, 0,
		       k == K_IMM_LIE	 ? REGION + 1
		       : k == K_IMM_HUGE ? (uint64_t)1 << 40
					 : REGION);
		b = raw_sbuf(&r, 0);
		rmsgi_put32(b + 8, 77); /* the immediate */
		if (raw_send(&r, 0, RMSGI_HDR_SIZE, true))
			_exit(27);
		break;
	case K_EAGER:
		b = hdr_at(&r, 0, RMSGI_T_DATA, 4, 0);
		memcpy(b + RMSGI_HDR_SIZE, "big!", 4);
		if (raw_send(&r, 0, RMSGI_HDR_SIZE + 4, true))
			_exit(27);
		do {
			n = raw_recv(&r, &h, 30);
		} while (n >= 0 && h.type == RMSGI_T_CREDIT);
		if (n < 0) {
			RAW_FAIL(37, "eager: nothing from the server");
			break;
		}
		printf("raw: eager 1 MiB announced: the server's %zu KiB "
		       "came as %s, a frame of %ld B\n",
		       EAGER_SEND >> 10,
		       h.type == RMSGI_T_RNDV_REQ ? "a rendezvous request"
		       : h.type == RMSGI_T_DATA	  ? "DATA"
						  : "another type",
		       n);
		if (h.type != RMSGI_T_RNDV_REQ || h.len != EAGER_SEND)
			RAW_FAIL(38, "the server sent an eager frame over its "
				     "own eager size");
		break;
	case K_RNDV:
		raw_rndv(&r);
		break;
	case K_GOOD:
		b = hdr_at(&r, 0, RMSGI_T_DATA, 5, 0);
		memcpy(b + RMSGI_HDR_SIZE, "hello", 5);
		if (raw_send(&r, 0, RMSGI_HDR_SIZE + 5, true))
			_exit(27);
		do {
			n = raw_recv(&r, &h, 30);
		} while (n >= 0 && h.type != RMSGI_T_DATA);
		if (n != RMSGI_HDR_SIZE + 5) {
			RAW_FAIL(29, "good peer: no echo");
			break;
		}
		printf("raw: good peer: echo received\n");
		break;
	}
	if (cases[k].expect != 1) {
		ret = raw_wait_ev(&r, RDMA_CM_EVENT_DISCONNECTED, 15);
		printf("raw: case %d (%s): %s %.3f s after the start\n", k,
		       cases[k].what,
		       ret ? "no disconnect from the server"
			   : "server disconnected",
		       ev_time() - t0);
	}
	fflush(stdout);
	raw_close_bound(&r);
}

static void raw_peer(const char *host, int fd)
{
	uint16_t port;
	int i;

	if (read(fd, &port, sizeof(port)) != sizeof(port))
		_exit(30);
	for (i = 0; i < NCASES; i++)
		raw_case(host, port, cases[i].k);
	_exit(raw_fail);
}

/* ------------------------------------------------------------------ */
/* the pinger (child process): a librmsg client of its own              */

static int pg_pings, pg_pongs, pg_reason, pg_stop;
static struct rmsg_conn *pg_conn;
static struct ev_loop *pg_loop;
static ev_timer pg_timer;
static ev_io pg_io;

static void pg_tick(struct ev_loop *l, ev_timer *w, int revents)
{
	struct iovec iov = {"ping", 4};

	/* a few in flight at any time */
	if (pg_pings - pg_pongs < 8 &&
	    rmsg_send(pg_conn, &iov, 1, NULL, NULL) == 0)
		pg_pings++;
}

static void pg_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	pg_pongs++;
	if (pg_stop && pg_pongs == pg_pings)
		rmsg_conn_close(c);
}

static void pg_close(struct rmsg_conn *c, int reason, void *arg)
{
	pg_reason = reason;
	ev_timer_stop(pg_loop, &pg_timer);
	ev_io_stop(pg_loop, &pg_io);
}

/* the parent closes the pipe: finish */
static void pg_eof(struct ev_loop *l, ev_io *w, int revents)
{
	char ch;

	if (read(w->fd, &ch, 1) > 0)
		return;
	ev_io_stop(l, w);
	ev_timer_stop(l, &pg_timer);
	pg_stop = 1;
	if (pg_pongs == pg_pings)
		rmsg_conn_close(pg_conn);
}

static void pinger(int fd)
{
	struct rmsg_conn_ops ops = {.on_msg = pg_msg, .on_close = pg_close};
	/* a loop of its own: the default one's epoll is the parent's */
	struct ev_loop *l = pg_loop = ev_loop_new(EVFLAG_AUTO);
	struct rmsg_ctx *ctx;
	struct rmsg_cfg *cfg;
	char uri[128];
	uint16_t port;

	if (!l || read(fd, &port, sizeof(port)) != sizeof(port))
		_exit(50);
	t_uri(uri, sizeof(uri), port);
	/* the default keepalive (1 s x 3), stretched like every bound of
	 * the tests where the machine is slow (TCG and ASan: the server
	 * is busy reading the attack's rendezvous for seconds) */
	if (rmsg_cfg_create(&cfg) ||
	    rmsg_cfg_set_keepalive_ms(cfg, (unsigned)(1000 * t_scale())) ||
	    rmsg_ctx_create(l, cfg, &ctx) ||
	    rmsg_connect(ctx, uri, cfg, &ops, NULL, &pg_conn))
		_exit(51);
	rmsg_cfg_destroy(cfg);
	ev_timer_init(&pg_timer, pg_tick, 0.2, PINGER_MS / 1000.0);
	ev_timer_start(l, &pg_timer);
	ev_io_init(&pg_io, pg_eof, fd, EV_READ);
	ev_io_start(l, &pg_io);
	ev_run(l, 0);
	printf("pinger: %d pings, %d answered; closed with %s\n", pg_pings,
	       pg_pongs, rmsg_strerror(pg_reason));
	fflush(stdout);
	rmsg_ctx_destroy(ctx);
	_exit(pg_reason || pg_pongs != pg_pings || pg_pings < 10 ? 1 : 0);
}

/* ------------------------------------------------------------------ */
/* the librmsg server and its well-behaved librmsg client               */

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *good;
static int closes, pongs, pings, hellos, big_rx, imms, imm_bad, bad_msgs;
static int child_done, child_status, good_dead = 1, good_reason, finished;
static int pinger_done, pinger_status, pinger_fd = -1;
static ev_child pinger_w;
static int good_big_sent, good_big_status = 1;
static size_t imm_len;
static int reasons[NCASES + 2];
static ev_timer ping_timer, reg_timer;
static uint8_t *eager_buf, *good_big;
static struct rmsg_ctx *sctx;
static size_t reg_base, reg_peak;

/* the server context's registered bytes: regions, pools, cache */
static void reg_sample(void)
{
	if (sctx && sctx->mrt.bytes > reg_peak)
		reg_peak = sctx->mrt.bytes;
}

static void reg_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	reg_sample();
}

/* the raw peer is done and the good client was answered: end */
static void maybe_finish(void)
{
	if (!finished && child_done && pinger_fd >= 0) {
		close(pinger_fd); /* the pinger ends */
		pinger_fd = -1;
	}
	if (finished || !child_done || !pinger_done)
		return;
	/* no new ping from here: with one every PING_MS and a round trip
	 * longer than that (a loaded host), pongs would never catch up */
	ev_timer_stop(loop, &ping_timer);
	if (!good_dead &&
	    (pongs != pings || (good_big_sent && good_big_status == 1)))
		return;
	finished = 1;
	ev_timer_stop(loop, &ping_timer);
	ev_timer_stop(loop, &reg_timer);
	if (!good_dead)
		rmsg_conn_close(good);
	rmsg_listener_close(lis);
	lis = NULL;
}

static void good_big_done(struct rmsg_conn *c, int status, void *arg)
{
	good_big_status = status;
	printf("good client: its %zu MiB message to the server: %s\n",
	       RNDV_LEN / MIB, rmsg_strerror(status));
	maybe_finish();
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	size_t n = rmsg_msg_len(m);
	const char *d = rmsg_msg_data(m);
	struct iovec iov;

	reg_sample();
	if (n == RNDV_LEN) {
		/* a hostile one, or the good client's */
		big_rx++;
		if (!good_big_sent && !good_dead) {
			/* the hostile requests behind it were announced:
			 * the good client's rendezvous must still fit */
			good_big_sent = 1;
			iov.iov_base = good_big;
			iov.iov_len = RNDV_LEN;
			T_OK(rmsg_send(good, &iov, 1, good_big_done, NULL));
		}
		return;
	}
	if (n == 4 && !memcmp(d, "slow", 4)) {
		/* an app busy for a while: the device takes the peer's
		 * frames meanwhile, the library sees them after */
		usleep(STALL_MS * 1000);
		return;
	}
	if (!((n == 4 && !memcmp(d, "ping", 4)) ||
	      (n == 4 && !memcmp(d, "big!", 4)) ||
	      (n == 5 && !memcmp(d, "hello", 5)))) {
		fprintf(stderr, "a hostile frame (%zu B) reached the app\n", n);
		bad_msgs++;
		return;
	}
	if (n == 5)
		hellos++;
	if (n == 4 && d[0] == 'b') {
		iov.iov_base = eager_buf;
		iov.iov_len = EAGER_SEND;
	} else {
		iov.iov_base = n == 4 ? "ping" : "hello";
		iov.iov_len = n;
	}
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void srv_imm(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	if (len > REGION) {
		fprintf(stderr,
			"on_imm reported %zu bytes, the largest writable "
			"region has %zu\n",
			len, REGION);
		imm_bad++;
		return;
	}
	imms++;
	imm_len = len;
}

/* the connections accepted before the raw peer starts: the good
 * client's and the pinger's */
static struct rmsg_conn *friends[2];
static int nfriends, raw_started, friend_closes;

static int srv_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		      const void *pdata, size_t len, void *arg)
{
	if (!raw_started && nfriends < 2)
		friends[nfriends++] = c;
	return 0;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (c == friends[0] || c == friends[1]) {
		friend_closes++;
		printf("server: a friendly conn closed: %s\n",
		       rmsg_strerror(reason));
		return;
	}
	if (closes < NCASES + 2)
		reasons[closes] = reason;
	closes++;
	printf("server: conn %d closed: %s\n", closes, rmsg_strerror(reason));
}

static void ping_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	struct iovec iov = {"ping", 4};

	if (good_dead)
		return;
	T_OK(rmsg_send(good, &iov, 1, NULL, NULL));
	pings++;
}

static void good_est(struct rmsg_conn *c, void *arg)
{
	good_dead = 0;
}

static void good_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	pongs++;
	maybe_finish();
}

static void good_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason)
		fprintf(stderr, "the good client closed with %s\n",
			rmsg_strerror(reason));
	good_reason = reason;
	good_dead = 1;
	maybe_finish();
}

static void pinger_cb(struct ev_loop *l, ev_child *w, int revents)
{
	ev_child_stop(l, w);
	pinger_status = w->rstatus;
	pinger_done = 1;
	maybe_finish();
}

static void child_cb(struct ev_loop *l, ev_child *w, int revents)
{
	ev_child_stop(l, w);
	child_status = w->rstatus;
	if (!WIFEXITED(w->rstatus) || WEXITSTATUS(w->rstatus))
		fprintf(stderr, "raw peer failed with status %d\n", w->rstatus);
	child_done = 1;
	maybe_finish();
}

int main(void)
{
	struct rmsg_conn_ops sops = {
		.on_msg = srv_msg, .on_imm = srv_imm, .on_close = srv_close};
	struct rmsg_conn_ops gops = {.on_established = good_est,
				     .on_msg = good_msg,
				     .on_close = good_close};
	const char *host = getenv("RMSG_TEST_ADDR");
	struct rmsg_ctx *ctx, *cctx;
	struct rmsg_cfg *cfg;
	struct rmsg_mr *mr;
	char uri[128];
	uint16_t port;
	int fds[2], pfds[2], i, bad = 0;
	long bound;
	uint8_t *region;
	ev_child cw;
	pid_t pid, ppid;
	ev_tstamp t0;

	if (strcmp(t_transport(), "rdma")) {
		printf("SKIP: raw verbs peer: RDMA only "
		       "(RMSG_TEST_TRANSPORT=rdma, 'make check-rxe')\n");
		return T_SKIP;
	}
	t_require_transport();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!host || !*host)
		host = "127.0.0.1";
	signal(SIGPIPE, SIG_IGN);
	loop = ev_default_loop(0);
	/* fork before any verbs state exists in this process */
	T_ASSERT(pipe(fds) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		raw_peer(host, fds[0]);
	}
	close(fds[0]);
	T_ASSERT(pipe(pfds) == 0, "pipe");
	ppid = fork();
	if (ppid == 0) {
		close(fds[1]);
		close(pfds[1]);
		pinger(pfds[0]);
	}
	close(pfds[0]);
	pinger_fd = pfds[1];
	eager_buf = calloc(1, EAGER_SEND);
	good_big = malloc(RNDV_LEN);
	region = calloc(1, REGION);
	T_ASSERT(eager_buf && good_big && region, "malloc");
	memset(good_big, 0x3c, RNDV_LEN);
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_max_msg_size(cfg, MAX_MSG));
	T_OK(rmsg_cfg_set_reg_limit(cfg, BUDGET));
	/* a fixed grant of 32: the raw peers' hellos do not take a growing
	 * one (so they would keep the initial 4), and the cases below
	 * count on 32 */
	T_OK(rmsg_cfg_set_credits_initial(cfg, 32));
	T_OK(rmsg_ctx_create(loop, cfg, &ctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_mr_reg(ctx, region, REGION, RMSG_ACCESS_REMOTE_WRITE, &mr));
	/* to every peer: what an IMM frame may claim is what its peer was
	 * granted (issue 30), here REGION */
	T_OK(rmsg_mr_export(mr, NULL, 0, 0,
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_EXPORT_ANY_PEER,
			    region_desc));
	t_listen(ctx, cfg, &sops, srv_accept, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_listener_port(lis, &port));
	T_OK(rmsg_connect(cctx, uri, NULL, &gops, NULL, &good));
	ev_timer_init(&ping_timer, ping_cb, 0.1, PING_MS / 1000.0);
	ev_timer_start(loop, &ping_timer);
	/* a first round trip, then the level before the attack */
	while (pongs < 2)
		ev_run(loop, EVRUN_ONCE);
	sctx = ctx;
	reg_base = reg_peak = ctx->mrt.bytes;
	ev_timer_init(&reg_timer, reg_cb, 0.01, 0.01);
	ev_timer_start(loop, &reg_timer);
	T_ASSERT(write(pinger_fd, &port, sizeof(port)) == sizeof(port), "pipe");
	ev_child_init(&pinger_w, pinger_cb, ppid, 0);
	ev_child_start(loop, &pinger_w);
	/* the pinger's first answers before the attack: at least 1.5 s,
	 * and until its connection was accepted (a forked process setting
	 * up RDMA on a loaded emulated host may take longer) */
	for (t0 = ev_time(); (ev_time() - t0 < 1.5 || nfriends < 2) &&
			     ev_time() - t0 < 60 * t_scale();)
		ev_run(loop, EVRUN_ONCE);
	T_ASSERT(nfriends == 2, "%d connections before the attack", nfriends);
	raw_started = 1;
	T_ASSERT(write(fds[1], &port, sizeof(port)) == sizeof(port), "pipe");
	close(fds[1]);
	ev_child_init(&cw, child_cb, pid, 0);
	ev_child_start(loop, &cw);
	t_deadline(loop, 600);
	ev_run(loop, 0);

	/*
	 * The bound on the server context's registered bytes beyond their
	 * level before the attack: the hostile connection's share (BUDGET /
	 * 4, one RNDV_LEN read at a time), the good client's RNDV_LEN and
	 * 4 MiB for pool slabs. Before the share, the announced requests
	 * took the budget at once.
	 */
	bound = (long)((BUDGET / 4 + RNDV_LEN + 4 * MIB) >> 10);
	printf("hostile_bound: rdma: server registered %zu KiB before the "
	       "attack, peak %+ld KiB (bound %+ld KiB); announced %zu MiB of "
	       "rendezvous, budget %zu MiB\n",
	       reg_base >> 10, (long)(reg_peak - reg_base) >> 10, bound,
	       (NRNDV * RNDV_LEN + OVER_LEN) / MIB, BUDGET / MIB);
	for (i = 0; i < NCASES; i++) {
		int want = cases[i].expect;

		printf("case %-36s -> %s\n", cases[i].what,
		       rmsg_strerror(reasons[i]));
		if (want != 1 && reasons[i] != want) {
			fprintf(stderr, "case %d (%s): %s, wanted %s\n", i,
				cases[i].what, rmsg_strerror(reasons[i]),
				rmsg_strerror(want));
			bad++;
		}
	}
	T_ASSERT(good_reason == 0, "the good client closed with %s",
		 rmsg_strerror(good_reason));
	T_ASSERT(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0,
		 "raw peer failed with status %d", WEXITSTATUS(child_status));
	T_ASSERT(WIFEXITED(pinger_status) && WEXITSTATUS(pinger_status) == 0,
		 "the pinger failed: status %d", pinger_status);
	T_ASSERT(closes == NCASES && friend_closes == 2, "%d + %d closes",
		 closes, friend_closes);
	T_ASSERT(!bad, "%d cases closed with the wrong reason", bad);
	T_ASSERT(!bad_msgs, "%d hostile frames reached the app", bad_msgs);
	T_ASSERT(!imm_bad, "on_imm reported %d lengths over the region",
		 imm_bad);
	T_ASSERT(hellos == 1, "the good raw peer was served %d times", hellos);
	T_ASSERT(imms == 1 && imm_len == REGION, "on_imm: %d times, %zu B",
		 imms, imm_len);
	T_ASSERT(big_rx == NRNDV + 1, "%d messages of %zu MiB arrived", big_rx,
		 RNDV_LEN / MIB);
	T_ASSERT(good_big_status == 0, "the good client's %zu MiB: %s",
		 RNDV_LEN / MIB, rmsg_strerror(good_big_status));
	T_ASSERT(pongs == pings && pings > 0, "good client: %d/%d pongs", pongs,
		 pings);
	T_ASSERT((long)(reg_peak - reg_base) >> 10 <= bound,
		 "registered memory grew by %ld KiB",
		 (long)(reg_peak - reg_base) >> 10);
	printf("hostile_bound: %d hostile connections closed; the good raw "
	       "peer and a librmsg client (%d pings) were served\n",
	       NCASES - 1, pings);
	T_OK(rmsg_mr_dereg(mr));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(ctx));
	rmsg_cfg_destroy(cfg);
	free(region);
	free(good_big);
	free(eager_buf);
	return 0;
}
