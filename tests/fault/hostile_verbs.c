// SPDX-License-Identifier: MIT
/*
 * hostile_verbs.c - a raw librdmacm/verbs peer misbehaves against a
 * librmsg rdma:// listener. The peer (a child process that speaks the
 * wire format by hand) connects with a valid hello in the private data,
 * then sends one malformed frame per connection:
 *   random bytes (16 buffers, 1..4096 B, bad magic) -> -EPROTO
 *   a header cut to 20 bytes                        -> -EPROTO
 *   protocol version 2                              -> -EPROTO
 *   unknown type 99                                 -> -EPROTO
 *   a TCP-only type (HELLO) over RDMA               -> -EPROTO
 *   DATA announcing more bytes than it carries      -> -EPROTO
 *   DATA announcing 2^40 bytes (max is 1 MiB)       -> -EMSGSIZE
 *   RNDV_REQ of max + 1 bytes                       -> -EMSGSIZE
 *   RNDV_REQ whose segments do not add up           -> -EPROTO
 *   credits beyond the grant (CREDIT, 60000)        -> -EPROTO
 *   the IMM frame of a split write-with-immediate claiming the whole
 *     region's length, a region this peer was never granted (exported
 *     to the good client only)                      -> -EPROTO
 *   a SEND larger than the receive buffers (64 KiB) -> -EPROTO
 *   a forged RNDV_REQ: bogus address and rkey       -> the server's READ
 *     fails: -EACCES (remote access error)
 *   an RDMA WRITE into a region of the server exported to another
 *     connection (the good client's), with that export's real address
 *     and rkey                                      -> the device refuses
 *     it: the raw peer's write completes with a remote access error, the
 *     region is unchanged, and the server's connection fails with an
 *     error (rmsg_mr_reg.3, rmsg_write_imm.3: the queue pair fails on
 *     both sides)
 * and last a well-behaved DATA "hello", which must come back echoed.
 * The server must not deliver any hostile frame to the app, must close
 * each hostile connection with the reason above, and must keep serving
 * a librmsg client that pings it throughout. RDMA only: exits 77 over
 * TCP (tests/fault/tcp_hostile.c is the TCP twin).
 */
#include <arpa/inet.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "proto.h"
#include "raw_verbs.h"

#define MAX_MSG (1 << 20)
#define NRANDOM 16
#define PAGE 4096
#define VICTIM_LEN (4 * PAGE)
#define VICTIM_BYTE 0x3c

enum kind {
	K_RANDOM,
	K_TRUNC,
	K_VERSION,
	K_TYPE,
	K_HELLO,
	K_DATA_SHORT,
	K_DATA_HUGE,
	K_RNDV_HUGE,
	K_RNDV_SUM,
	K_CREDIT,
	K_IMM_LEN,
	K_OVERSIZE,
	K_RNDV_FORGED,
	K_WRITE_FORGED,
	K_GOOD,
};

static const struct {
	enum kind k;
	const char *what;
	int expect; /* 1: any error but a close on purpose (-ESHUTDOWN) */
} cases[] = {
	{K_TRUNC, "header cut to 20 bytes", -EPROTO},
	{K_VERSION, "version 2", -EPROTO},
	{K_TYPE, "unknown type 99", -EPROTO},
	{K_HELLO, "HELLO over RDMA", -EPROTO},
	{K_DATA_SHORT, "DATA longer than its SEND", -EPROTO},
	{K_DATA_HUGE, "DATA of 2^40 bytes", -EMSGSIZE},
	{K_RNDV_HUGE, "RNDV_REQ of max + 1 bytes", -EMSGSIZE},
	{K_RNDV_SUM, "RNDV_REQ segments != length", -EPROTO},
	{K_CREDIT, "credits beyond the grant", -EPROTO},
	{K_IMM_LEN, "IMM beyond what it was granted", -EPROTO},
	{K_OVERSIZE, "SEND of 64 KiB", -EPROTO},
	{K_RNDV_FORGED, "forged RNDV_REQ, bogus rkey", -EACCES},
	{K_WRITE_FORGED, "RDMA WRITE, another conn's rkey", 1},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))
#define NHOSTILE (NRANDOM + NCASES)

/* a region of the server, with a page of canary on each side, exported
 * to the good client's connection only; allocated before the fork, so
 * the raw peer knows its address */
static uint8_t victim[PAGE + VICTIM_LEN + PAGE] __attribute__((aligned(4096)));
/* the export's descriptor, passed to the raw peer through the pipe */
static uint8_t victim_desc[RMSG_MR_DESC_SIZE];

/* ------------------------------------------------------------------ */
/* the raw peer (child process)                                         */

static const struct raw_opts opts = {.cqe = 64,
				     .sqn = 16,
				     .credits = RAW_RXN,
				     .eager = 8192,
				     .responder_resources = 1,
				     .secs = 15};

static void raw_post_op(struct raw *r, enum ibv_wr_opcode op, size_t len,
			uint64_t raddr, uint32_t rkey)
{
	if (raw_post(r, op, 0, len, true, raddr, rkey))
		_exit(27);
}

/* waits for the DATA echo of "hello" */
static void raw_expect_echo(struct raw *r)
{
	ev_tstamp end = ev_time() + 20;
	struct ibv_wc wc;

	while (ev_time() < end) {
		int n = ibv_poll_cq(r->cq, 1, &wc);

		if (n == 1 && wc.status == IBV_WC_SUCCESS &&
		    wc.opcode == IBV_WC_RECV) {
			struct rmsgi_hdr h;
			uint8_t *b = r->buf + wc.wr_id * RAW_RXSZ;

			if (rmsgi_hdr_decode(b, wc.byte_len, MAX_MSG, &h) ==
				    0 &&
			    h.type == RMSGI_T_DATA && h.len == 5 &&
			    !memcmp(b + RMSGI_HDR_SIZE, "hello", 5))
				return;
		} else if (n == 1 && wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "raw: good peer wc %s\n",
				ibv_wc_status_str(wc.status));
			_exit(28);
		} else if (n == 0) {
			usleep(1000);
		}
	}
	_exit(29);
}

static void hdr_at(uint8_t *b, uint8_t type, uint16_t credits, uint64_t len)
{
	struct rmsgi_hdr h = {.type = type, .credits = credits, .len = len};

	rmsgi_hdr_encode(&h, b);
	b[2] = type; /* even a type encode would refuse */
}

/* the forged write's completion must be a remote access error: the
 * server's device refused the key of another connection's export */
static void raw_expect_rem_access(struct raw *r)
{
	ev_tstamp end = ev_time() + 20 * t_scale();
	struct ibv_wc wc;

	while (ev_time() < end) {
		int n = ibv_poll_cq(r->cq, 1, &wc);

		if (n == 0) {
			usleep(1000);
			continue;
		}
		if (n < 0)
			_exit(41);
		if (wc.wr_id != 1000)
			continue; /* a receive flushed with the queue pair */
		printf("raw: forged write: %s\n", ibv_wc_status_str(wc.status));
		if (wc.status != IBV_WC_REM_ACCESS_ERR)
			_exit(42);
		return;
	}
	fprintf(stderr, "raw: forged write: no completion\n");
	_exit(43);
}

/* builds and sends one case; returns after the server disconnected */
static void raw_case(const char *host, uint16_t port, enum kind k, int n)
{
	struct raw r = {0};
	struct rmsgi_seg seg;
	uint8_t *s;
	size_t len = RMSGI_HDR_SIZE;
	ev_tstamp t0;
	int i, ret;

	raw_connect(&r, host, port, &opts);
	s = raw_sbuf(&r, 0);
	switch (k) {
	case K_RANDOM:
		len = 1 + t_rand() % 4096;
		for (i = 0; i < (int)len; i++)
			s[i] = (uint8_t)t_rand();
		if (s[0] == RMSGI_MAGIC)
			s[0] ^= 0xff;
		break;
	case K_TRUNC:
		hdr_at(s, RMSGI_T_DATA, 0, 0);
		len = 20;
		break;
	case K_VERSION:
		hdr_at(s, RMSGI_T_DATA, 0, 0);
		s[1] = 2;
		break;
	case K_TYPE:
		hdr_at(s, 99, 0, 0);
		break;
	case K_HELLO:
		hdr_at(s, RMSGI_T_HELLO, 0, 0);
		break;
	case K_DATA_SHORT:
		hdr_at(s, RMSGI_T_DATA, 0, 1000);
		len += 10;
		break;
	case K_DATA_HUGE:
		hdr_at(s, RMSGI_T_DATA, 0, (uint64_t)1 << 40);
		len += 100;
		break;
	case K_RNDV_HUGE:
	case K_RNDV_SUM:
	case K_RNDV_FORGED:
		seg.addr = 0xdead0000ull;
		seg.len = 4096;
		seg.rkey = 0x1234567;
		hdr_at(s, RMSGI_T_RNDV_REQ, 0,
		       k == K_RNDV_HUGE	 ? (uint64_t)MAX_MSG + 1
		       : k == K_RNDV_SUM ? 8192
					 : 4096);
		rmsgi_seg_encode(&seg, s + RMSGI_HDR_SIZE);
		len += RMSGI_SEG_SIZE;
		break;
	case K_CREDIT:
		hdr_at(s, RMSGI_T_CREDIT, 60000, 0);
		break;
	case K_IMM_LEN: {
		/* the length of a write it could not have made: the
		 * region is exported to another connection only */
		struct rmsgi_hdr h = {
			.type = RMSGI_T_IMM, .aux = 7, .id = VICTIM_LEN};

		rmsgi_hdr_encode(&h, s);
		break;
	}
	case K_OVERSIZE:
		hdr_at(s, RMSGI_T_DATA, 0, RAW_RXSZ - RMSGI_HDR_SIZE);
		len = RAW_RXSZ;
		break;
	case K_WRITE_FORGED:
		/* the export's address and rkey (descriptor bytes 16 and
		 * 4, src/mr.c), valid on the good client's queue pair */
		memset(s, 0x5a, PAGE);
		if (rmsgi_get64(victim_desc + 16) != (uintptr_t)(victim + PAGE))
			_exit(44); /* not the region's address */
		raw_post_op(&r, IBV_WR_RDMA_WRITE, PAGE,
			    rmsgi_get64(victim_desc + 16),
			    rmsgi_get32(victim_desc + 4));
		raw_expect_rem_access(&r);
		break;
	case K_GOOD:
		hdr_at(s, RMSGI_T_DATA, 0, 5);
		memcpy(s + RMSGI_HDR_SIZE, "hello", 5);
		len += 5;
		break;
	}
	t0 = ev_time();
	if (k != K_WRITE_FORGED)
		raw_post_op(&r, IBV_WR_SEND, len, 0, 0);
	if (k == K_GOOD) {
		raw_expect_echo(&r);
		printf("raw: good peer: echo received\n");
		raw_close(&r);
		return;
	}
	/* the forged write's connection fails on the server's side too
	 * (rmsg_write_imm.3), found by its keepalive if not sooner */
	ret = raw_wait_ev(&r, RDMA_CM_EVENT_DISCONNECTED,
			  k == K_WRITE_FORGED ? 30 * t_scale() : 10);
	printf("raw: case %d (%d B): %s %.3f s after the send\n", n, (int)len,
	       ret ? "no disconnect from the server" : "server disconnected",
	       ev_time() - t0);
	fflush(stdout);
	if (ret && k == K_WRITE_FORGED)
		_exit(45);
	raw_close(&r);
}

static void raw_peer(const char *host, int fd)
{
	uint16_t port;
	int i;

	if (read(fd, &port, sizeof(port)) != sizeof(port) ||
	    read(fd, victim_desc, sizeof(victim_desc)) != sizeof(victim_desc))
		_exit(30);
	t_seed(8);
	for (i = 0; i < NRANDOM; i++)
		raw_case(host, port, K_RANDOM, i);
	for (i = 0; i < NCASES; i++)
		raw_case(host, port, cases[i].k, NRANDOM + i);
	raw_case(host, port, K_GOOD, NHOSTILE);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* the librmsg server and its well-behaved librmsg client               */

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *good;
static int closes, hellos, pongs, pings, child_done, pipe_fd = -1;
static struct rmsg_mr *victim_mr;
static int reasons[NHOSTILE + 2];
static ev_tstamp t_close[NHOSTILE + 2];
static ev_timer ping_timer;

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	size_t n = rmsg_msg_len(m);
	const char *d = rmsg_msg_data(m);
	struct iovec iov;

	T_ASSERT((n == 4 && !memcmp(d, "ping", 4)) ||
			 (n == 5 && !memcmp(d, "hello", 5)),
		 "a hostile frame (%zu B) reached the app", n);
	if (n == 5)
		hellos++;
	iov.iov_base = n == 4 ? "ping" : "hello";
	iov.iov_len = n;
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

/* the first connection the server sees is the good client's (the raw
 * peer learns the port only now): the victim region goes to it only */
static void srv_est(struct rmsg_conn *c, void *arg)
{
	uint16_t port;

	if (pipe_fd < 0)
		return;
	T_OK(rmsg_mr_export(victim_mr, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE,
			    victim_desc));
	T_OK(rmsg_listener_port(lis, &port));
	T_ASSERT(write(pipe_fd, &port, sizeof(port)) == sizeof(port) &&
			 write(pipe_fd, victim_desc, sizeof(victim_desc)) ==
				 sizeof(victim_desc),
		 "pipe");
	close(pipe_fd);
	pipe_fd = -1;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (closes < NHOSTILE + 2) {
		t_close[closes] = ev_time();
		reasons[closes] = reason;
	}
	closes++;
	printf("server: conn %d closed: %s\n", closes, rmsg_strerror(reason));
}

static void ping_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	struct iovec iov = {"ping", 4};

	T_OK(rmsg_send(good, &iov, 1, NULL, NULL));
	pings++;
}

static void good_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	pongs++;
	if (child_done && pongs == pings) {
		ev_timer_stop(loop, &ping_timer);
		rmsg_conn_close(good);
	}
}

static void good_close(struct rmsg_conn *c, int reason, void *arg)
{
	T_ASSERT(reason == 0, "the good client closed with %s",
		 rmsg_strerror(reason));
	rmsg_listener_close(lis);
	lis = NULL;
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_msg = srv_msg,
				     .on_close = srv_close};
	struct rmsg_conn_ops gops = {.on_msg = good_msg,
				     .on_close = good_close};
	const char *host = getenv("RMSG_TEST_ADDR");
	struct rmsg_ctx *ctx, *cctx;
	struct rmsg_cfg *cfg;
	char uri[128];
	int fds[2], i, bad = 0;
	struct t_child cw;
	pid_t pid;

	if (strcmp(t_transport(), "rdma")) {
		printf("SKIP: raw verbs peer: RDMA only "
		       "(RMSG_TEST_TRANSPORT=rdma, 'make check-rxe')\n");
		return T_SKIP;
	}
	t_require_transport();
	if (!host || !*host)
		host = "127.0.0.1";
	memset(victim, VICTIM_BYTE, sizeof(victim));
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
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_max_msg_size(cfg, MAX_MSG));
	T_OK(rmsg_ctx_create(loop, cfg, &ctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_mr_reg(ctx, victim + PAGE, VICTIM_LEN,
			 RMSG_ACCESS_REMOTE_WRITE, &victim_mr));
	t_listen(ctx, cfg, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &gops, NULL, &good));
	ev_timer_init(&ping_timer, ping_cb, 0.05, 0.05);
	ev_timer_start(loop, &ping_timer);
	pipe_fd = fds[1]; /* srv_est tells the raw peer */
	t_child_watch(loop, &cw, pid, &child_done, NULL);
	t_deadline(loop, 300);
	ev_run(loop, 0);

	/* closes: NHOSTILE hostile, the good raw peer, the good client */
	for (i = 0; i < NHOSTILE; i++) {
		int want = i < NRANDOM ? -EPROTO : cases[i - NRANDOM].expect;

		if (want == 1 ? reasons[i] >= 0 || reasons[i] == -ESHUTDOWN
			      : reasons[i] != want) {
			fprintf(stderr, "case %d (%s): %s, wanted %s\n", i,
				i < NRANDOM ? "random bytes"
					    : cases[i - NRANDOM].what,
				rmsg_strerror(reasons[i]),
				want == 1 ? "an error" : rmsg_strerror(want));
			bad++;
		}
		if (i >= NRANDOM)
			printf("case %-30s -> %s\n", cases[i - NRANDOM].what,
			       rmsg_strerror(reasons[i]));
	}
	T_ASSERT(closes == NHOSTILE + 2, "%d closes", closes);
	T_ASSERT(hellos == 1, "the good raw peer was served %d times", hellos);
	T_ASSERT(!bad, "%d cases closed with the wrong reason", bad);
	T_ASSERT(pongs == pings && pings > 0, "good client: %d/%d pongs", pongs,
		 pings);
	/* the forged write changed nothing */
	for (i = 0; i < (int)sizeof(victim); i++)
		T_ASSERT(victim[i] == VICTIM_BYTE,
			 "the server's memory changed at %d of its region",
			 i - PAGE);
	printf("hostile_verbs: %d hostile connections (%d random, %d crafted) "
	       "closed, none reached the app; the good raw peer and a "
	       "librmsg client (%d pings) were served\n",
	       NHOSTILE, NRANDOM, NCASES, pings);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(ctx));
	rmsg_cfg_destroy(cfg);
	return 0;
}
