// SPDX-License-Identifier: MIT
/*
 * hostile_peer.c - a peer gets only what it was given (issue 14), over
 * TCP: a child process speaks the wire format by hand against a librmsg
 * tcp:// listener, one attack per connection, while a well-behaved
 * librmsg client of the same server does round trips throughout:
 *   H  sends 40 messages against a grant of 32 while the server's app
 *      holds them                                    -> -EPROTO
 *   F  grants 4 credits and never returns one, asking unknown RPC
 *      methods whenever it has a credit to spare; then says nothing
 *                   -> bounded (it runs out), then -ETIMEDOUT
 *   S  announces a 1 MiB frame and trickles it a byte at a time
 *                                                    -> -ETIMEDOUT
 *   C  the server's app closes the connection at its first message
 *      while the peer keeps sending read requests    -> on_close (0)
 *   R  the server reads from the peer, which never answers
 *                                                    -> -ETIMEDOUT
 * Each ends within the keepalive bound plus a margin (scaled by
 * RMSG_TEST_SCALE), the server's RSS grows by less than 64 MiB, and the
 * good client's round trips go on between every two hostile closes.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "raw_tcp.h"

#define KA_MS 200
#define KA_MISSES 3
#define GRANT 32
#define NHOSTILE 5

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *good;
static uint64_t round_trips, rt_at_close[NHOSTILE];
static int nclosed, child_done, good_closed;
static long rss_start;

/* ------------------------------------------------------------------ */
/* the raw peer (child process)                                        */

static void put(int fd, const void *buf, size_t len)
{
	if (!raw_put(fd, buf, len))
		_exit(11);
}

static void put_hdr(int fd, uint8_t type, uint32_t aux, uint64_t len,
		    uint64_t id)
{
	struct rmsgi_hdr h = {.type = type, .aux = aux, .len = len, .id = id};
	uint8_t buf[RMSGI_HDR_SIZE];

	rmsgi_hdr_encode(&h, buf);
	put(fd, buf, sizeof(buf));
}

/* reads exactly @len bytes; 0 at EOF */
static int get(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, (uint8_t *)buf + got, len - got);

		if (r <= 0)
			return 0;
		got += (size_t)r;
	}
	return 1;
}

/* one frame's header; its payload is read and dropped. 0 at EOF */
static int get_frame(int fd, struct rmsgi_hdr *h)
{
	uint8_t buf[RMSGI_HDR_SIZE], junk[4096];
	uint64_t left;

	if (!get(fd, buf, sizeof(buf)) ||
	    rmsgi_hdr_decode(buf, sizeof(buf), UINT64_MAX, h))
		return 0;
	for (left = h->len; left;) {
		size_t n = left > sizeof(junk) ? sizeof(junk) : (size_t)left;

		if (!get(fd, junk, n))
			return 0;
		left -= n;
	}
	return 1;
}

/* HELLO with a one-letter scenario as private data, then HELLO_ACK;
 * returns the socket and the credits the server granted */
static int handshake(uint16_t port, char what, uint16_t grant, int *avail)
{
	struct rmsgi_hello hello = {.credits = grant, .eager_size = 8192};
	uint8_t buf[RMSGI_HDR_SIZE + 64];
	struct rmsgi_hdr h;
	size_t n;
	int fd = raw_connect(port);

	hello.pdata_len = 1;
	hello.pdata[0] = (uint8_t)what;
	n = rmsgi_hello_encode(&hello, buf);
	put_hdr(fd, RMSGI_T_HELLO, 0, n, 0);
	put(fd, buf, n);
	if (!get(fd, buf, RMSGI_HDR_SIZE) ||
	    rmsgi_hdr_decode(buf, RMSGI_HDR_SIZE, 1 << 20, &h) ||
	    h.type != RMSGI_T_HELLO_ACK || h.len > 64 ||
	    !get(fd, buf, (size_t)h.len) ||
	    rmsgi_hello_decode(buf, (size_t)h.len, &hello))
		_exit(13);
	*avail = hello.credits;
	return fd;
}

/* waits for the server to close, reading what it still sends */
static void expect_eof(int fd)
{
	struct rmsgi_hdr h;

	while (get_frame(fd, &h))
		;
	close(fd);
}

static void attack_hold(uint16_t port)
{
	int avail, fd = handshake(port, 'H', GRANT, &avail), i;

	for (i = 0; i < 40; i++) {
		put_hdr(fd, RMSGI_T_DATA, 0, 4, 0);
		put(fd, "held", 4);
	}
	expect_eof(fd);
}

/* unknown-method calls whenever a credit is to spare, harvesting what
 * the server returns, never returning its credits */
static void attack_flood(uint16_t port)
{
	uint8_t rpc[16] = {0};
	int avail, fd = handshake(port, 'F', 4, &avail), sent = 0, quiet = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct rmsgi_hdr h;

	rmsgi_put32(rpc, 0xdead); /* a method nobody handles */
	while (quiet < 30) {
		while (avail > 1) {
			rmsgi_put32(rpc + 8, (uint32_t)++sent);
			put_hdr(fd, RMSGI_T_DATA, 1 /* RPC request */,
				sizeof(rpc), 0);
			put(fd, rpc, sizeof(rpc));
			avail--;
		}
		if (poll(&p, 1, 10) == 1) {
			if (!get_frame(fd, &h))
				break; /* the server gave up on us */
			avail += h.credits;
			quiet = 0;
		} else {
			quiet++;
		}
	}
	fprintf(stderr,
		"flood: %d requests with a grant of %d and no credit "
		"returned, then silence\n",
		sent, GRANT);
	if (sent > 4 * GRANT)
		_exit(20);
	expect_eof(fd);
}

static void attack_stall(uint16_t port)
{
	int avail, fd = handshake(port, 'S', GRANT, &avail), i;

	put_hdr(fd, RMSGI_T_DATA, 0, 1 << 20, 0);
	/* a byte every 100 ms: far from 64 KiB per keepalive interval */
	for (i = 0; i < 600; i++) {
		if (send(fd, "x", 1, MSG_NOSIGNAL) != 1)
			break;
		usleep(100000);
	}
	expect_eof(fd);
}

static void attack_close(uint16_t port)
{
	uint8_t rr[RMSGI_READ_REQ_SIZE];
	struct rmsgi_rma r = {.off = 0, .token = 12345, .len = 64};
	int avail, fd = handshake(port, 'C', GRANT, &avail), i;

	rmsgi_rma_encode(&r, 1, rr);
	put_hdr(fd, RMSGI_T_DATA, 0, 4, 0);
	put(fd, "bye!", 4);
	/* read requests while the server's close lingers */
	for (i = 0; i < GRANT - 2; i++) {
		put_hdr(fd, RMSGI_T_READ_REQ, 0, sizeof(rr), (uint64_t)i + 1);
		if (send(fd, rr, sizeof(rr), MSG_NOSIGNAL) != sizeof(rr))
			break;
	}
	expect_eof(fd);
}

static void attack_unanswered(uint16_t port)
{
	int avail, fd = handshake(port, 'R', GRANT, &avail);

	/* reads the server's READ_REQ and never answers */
	expect_eof(fd);
}

static void child(uint16_t port)
{
	attack_hold(port);
	attack_flood(port);
	attack_stall(port);
	attack_close(port);
	attack_unanswered(port);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* the server                                                           */

struct hconn {
	char what;
	ev_tstamp est;
	int nheld;
	struct rmsg_msg *held[64];
	struct rmsg_mr *mr;
};

static char read_target[4096];
static struct rmsg_mr *local_mr;

static long rss_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t len, void *arg)
{
	struct hconn *h = calloc(1, sizeof(*h));

	T_ASSERT(h && len == 1, "pdata %zu", len);
	h->what = *(const char *)pd;
	return rmsg_conn_set_arg(c, h);
}

static void read_done(struct rmsg_conn *c, int status, void *arg)
{
	struct hconn *h = arg;

	/* fails with the connection's reason, keepalive's (rmsg_write_imm.3,
	 * rmsg_send.3) */
	T_ASSERT(h->what == 'R' && status == -ETIMEDOUT,
		 "an unanswered read completed with %s", rmsg_strerror(status));
}

static void srv_established(struct rmsg_conn *c, void *arg)
{
	struct hconn *h = arg;
	char desc[RMSG_MR_DESC_SIZE];
	struct iovec iov = {read_target, sizeof(read_target)};

	h->est = ev_now(loop);
	if (h->what != 'R')
		return;
	/* any well-formed descriptor: the peer is asked, and stays mute */
	T_OK(rmsg_mr_export(local_mr, c, 0, 0, RMSG_ACCESS_REMOTE_READ, desc));
	T_OK(rmsg_read(c, &iov, 1, desc, 0, read_done, h));
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct hconn *h = arg;

	switch (h->what) {
	case 'G': {
		/* static memory: a ping-pong has one answer in flight */
		struct iovec iov = {"pong", 4};

		T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
		break;
	}
	case 'H':
		T_ASSERT(h->nheld < 64, "held %d", h->nheld);
		T_OK(rmsg_msg_hold(m));
		h->held[h->nheld++] = m;
		break;
	case 'C':
		T_OK(rmsg_conn_close(c));
		break;
	default:
		T_FAIL("scenario %c got a message", h->what);
	}
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct hconn *h = arg;
	double took = ev_now(loop) - h->est;
	double bound = t_scale() * (KA_MS * KA_MISSES / 1000.0 + 2.0);
	int i, want;

	for (i = 0; i < h->nheld; i++)
		rmsg_msg_release(h->held[i]);
	if (h->what == 'G') {
		free(h);
		return;
	}
	want = h->what == 'H' ? -EPROTO : h->what == 'C' ? 0 : -ETIMEDOUT;
	printf("tcp: %c closed after %.2f s: %d (%s)\n", h->what, took, reason,
	       rmsg_strerror(reason));
	T_ASSERT(reason == want, "%c: reason %d, want %d", h->what, reason,
		 want);
	if (h->what != 'H' && h->what != 'C')
		T_ASSERT(took < bound, "%c: %.2f s, bound %.2f s", h->what,
			 took, bound);
	T_ASSERT(nclosed < NHOSTILE, "too many closes");
	rt_at_close[nclosed++] = round_trips;
	free(h);
}

/* the well-behaved client */
static void ping(struct rmsg_conn *c)
{
	struct iovec iov = {"ping", 4};

	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void cli_established(struct rmsg_conn *c, void *arg)
{
	ping(c);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	round_trips++;
	if (!child_done || nclosed < NHOSTILE)
		ping(c);
	else
		rmsg_conn_close(c);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	T_ASSERT(reason == 0, "the good client closed with %d", reason);
	good_closed = 1;
	rmsg_listener_close(lis);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = srv_established,
				     .on_msg = srv_msg,
				     .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_established,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct rmsg_ctx *ctx;
	struct rmsg_cfg *cfg, *ccfg;
	struct t_child cw;
	char uri[64];
	uint16_t port;
	long rss_end;
	pid_t pid;
	int i;

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	loop = ev_default_loop(0);
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_credits(cfg, GRANT));
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, KA_MS));
	T_OK(rmsg_cfg_set_keepalive_misses(cfg, KA_MISSES));
	T_OK(rmsg_ctx_create(loop, cfg, &ctx));
	T_OK(rmsg_mr_reg(ctx, read_target, sizeof(read_target),
			 RMSG_ACCESS_REMOTE_READ, &local_mr));
	T_OK(rmsg_listen(ctx, "tcp://127.0.0.1:0", cfg, &sops, on_accept, NULL,
			 &lis));
	T_OK(rmsg_listener_port(lis, &port));
	rss_start = rss_kib();

	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_private_data(ccfg, "G", 1));
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	T_OK(rmsg_connect(ctx, uri, ccfg, &cops, NULL, &good));

	pid = fork();
	if (pid == 0)
		child(port);
	t_child_watch(loop, &cw, pid, &child_done, NULL);
	t_deadline(loop, 120);
	ev_run(loop, 0);

	rss_end = rss_kib();
	T_ASSERT(nclosed == NHOSTILE, "hostile closes %d", nclosed);
	T_ASSERT(good_closed, "the good client did not finish");
	for (i = 1; i < NHOSTILE; i++)
		T_ASSERT(rt_at_close[i] > rt_at_close[i - 1],
			 "no round trip between hostile closes %d and %d",
			 i - 1, i);
	T_ASSERT(rss_end - rss_start < 64 * 1024,
		 "RSS grew from %ld to %ld KiB", rss_start, rss_end);
	printf("tcp: %llu round trips of the good client meanwhile; "
	       "server RSS %ld -> %ld KiB\n",
	       (unsigned long long)round_trips, rss_start, rss_end);
	T_OK(rmsg_mr_dereg(local_mr));
	T_OK(rmsg_ctx_destroy(ctx));
	rmsg_cfg_destroy(cfg);
	rmsg_cfg_destroy(ccfg);
	return 0;
}
