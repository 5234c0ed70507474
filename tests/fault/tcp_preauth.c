// SPDX-License-Identifier: MIT
/*
 * tcp_preauth.c - before a peer proves the pre-shared key, a TCP
 * listener with a key (rmsg_cfg_set_psk) holds only what the handshake
 * needs (rmsg(7), "What each state allows"; issue 30, case 3). Raw peers
 * in forked children send HELLO with the key flag, get the server's
 * nonce, and then, instead of their proof:
 *   1. 4 peers announce a 512 MiB DATA frame and stream its bytes;
 *   2. 4 peers announce a 512 MiB AUTH frame and stream its bytes;
 *   3. 1 peer sends a 4 KiB DATA frame (a frame other than AUTH);
 *   4. 1 peer, before any hello, announces a 512 MiB HELLO frame.
 * Each peer stops at STREAM bytes. The server must close every one of
 * them before it took STREAM bytes (the peer sees its writes fail and
 * exits 0; exit 1: the server swallowed them all), count the DATA ones
 * in auth_failures, and its peak resident memory must grow by less than
 * BOUND for all 10 peers together (before: every byte streamed was kept:
 * +STREAM per peer). A keyed librmsg client keeps doing round trips
 * meanwhile. Then:
 *   5. TRICKLE peers connect and send the first 10 bytes of a HELLO
 *      header, and no more: the memory the server allocated for them
 *      (malloc's count, not the resident size: untouched pages of a
 *      buffer cost nothing resident) must stay under TRICKLE_BOUND each
 *      (before: a 256 KiB read buffer each, 64 MiB at max_pending).
 * TCP only (raw sockets); exits 77 over RDMA.
 */
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "../integration/common.h"
#include "raw_tcp.h"

#define MIB ((size_t)1 << 20)
#define ANNOUNCE ((uint64_t)512 << 20)
#define STREAM (64 * MIB)
#define BOUND (8 * MIB)
#define PEERS 10
#define KEY "tcp_preauth test key"
#define TRICKLE 64
#define TRICKLE_BOUND (16 << 10)

static struct ev_loop *loop;
static struct rmsg_conn *cli;
static long round_trips;
static int closes, n_refused;
static bool cli_up, ending;
static uint16_t port_g;

static size_t hwm(void)
{
	char line[256];
	size_t v = 0;
	FILE *f = fopen("/proc/self/status", "r");

	T_ASSERT(f, "/proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			v = strtoul(line + 6, NULL, 10);
	fclose(f);
	return v * 1024;
}

static void sent_release(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	rmsg_msg_hold(m);
	if (rmsg_send(c, &iov, 1, sent_release, m))
		rmsg_msg_release(m);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	closes++;
}

static void ping(void)
{
	static char buf[64];
	struct iovec iov = {buf, sizeof(buf)};

	T_OK(rmsg_send(cli, &iov, 1, NULL, NULL));
}

static void cli_established(struct rmsg_conn *c, void *arg)
{
	cli_up = true;
	ping();
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	round_trips++;
	ping();
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (!ending)
		T_FAIL("the keyed client was closed: %s",
		       rmsg_strerror(reason));
}

/* bytes malloc has handed out and not had back (heap and mmap) */
static size_t allocated(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* phase 5: peers that send part of a header and stop */
static void tricklers(void)
{
	static const uint8_t part[10] = {RMSGI_MAGIC, 1, RMSGI_T_HELLO};
	int fds[TRICKLE], i;
	size_t m0, m1, each;

	t_run_for(loop, 0.2);
	m0 = allocated();
	for (i = 0; i < TRICKLE; i++) {
		fds[i] = raw_connect(port_g);
		T_ASSERT(write(fds[i], part, sizeof(part)) == sizeof(part),
			 "trickler %d", i);
	}
	t_run_for(loop, 0.5);
	m1 = allocated();
	each = m1 > m0 ? (m1 - m0) / TRICKLE : 0;
	printf("%d peers trickling a header: %zu bytes allocated each "
	       "(bound %d)\n",
	       TRICKLE, each, TRICKLE_BOUND);
	/* malloc's counts are not there under a sanitizer or valgrind
	 * (RMSG_TEST_NO_RSS: they replace malloc) */
	if (getenv("RMSG_TEST_NO_RSS") || !m1) {
		printf("(not judged: no malloc counts here)\n");
		goto out;
	}
	/* they were accepted (a connection costs some hundred bytes), and
	 * hold no full read buffer */
	T_ASSERT(each >= 256, "the tricklers were not accepted (%zu B each)",
		 each);
	T_ASSERT(each < TRICKLE_BOUND,
		 "an unproven peer that sent 10 bytes holds %zu bytes", each);
out:
	for (i = 0; i < TRICKLE; i++)
		close(fds[i]);
	t_run_for(loop, 0.2);
}

/* HELLO with the key flag; the answer (HELLO_ACK with the server's
 * nonce) is read and dropped */
static int key_hello(uint16_t port)
{
	struct rmsgi_hello hello = {
		.credits = 32, .eager_size = 8192, .flags = RMSGI_HELLO_F_AUTH};
	uint8_t buf[RMSGI_HDR_SIZE + RMSGI_HELLO_MAX];
	struct rmsgi_hdr h;
	size_t n = rmsgi_hello_encode(&hello, buf), got = 0;
	int fd = raw_connect(port);

	raw_put_hdr(fd, RMSGI_T_HELLO, 0, n);
	if (!raw_put(fd, buf, n))
		_exit(11);
	while (got < RMSGI_HDR_SIZE) {
		ssize_t r = read(fd, buf + got, RMSGI_HDR_SIZE - got);

		if (r <= 0)
			_exit(12);
		got += (size_t)r;
	}
	if (rmsgi_hdr_decode(buf, got, 1 << 20, &h) ||
	    h.type != RMSGI_T_HELLO_ACK || h.len > RMSGI_HELLO_MAX)
		_exit(13);
	got = 0;
	while (got < h.len) {
		ssize_t r = read(fd, buf + got, h.len - got);

		if (r <= 0)
			_exit(12);
		got += (size_t)r;
	}
	return fd;
}

/* @type frame announced as @len bytes; streams up to STREAM of them:
 * exit 0 once the server closed, 1 if it took them all */
static void peer(uint16_t port, uint8_t type, uint64_t len)
{
	static uint8_t junk[64 << 10];
	int fd = type == RMSGI_T_HELLO ? raw_connect(port) : key_hello(port);
	size_t sent = 0, n = len < sizeof(junk) ? (size_t)len : sizeof(junk);

	raw_put_hdr(fd, type, 0, len);
	while (sent < STREAM && sent < len) {
		if (!raw_put(fd, junk, n))
			_exit(0);
		sent += n;
	}
	/* all sent: closed now (read says 0 or an error), or never */
	_exit(read(fd, junk, 1) > 0 ? 1 : (sent < STREAM ? 0 : 1));
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_established,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_listener *l;
	struct rmsg_cfg *scfg;
	struct rmsg_stats st0, st1;
	pid_t pids[PEERS];
	size_t h0, h1;
	char uri[64];
	uint16_t port;
	long rt0;
	bool judge_mem = !getenv("RMSG_TEST_NO_RSS");
	int i, failed = 0;

	if (strcmp(t_transport(), "tcp")) {
		printf("SKIP: raw TCP peers only\n");
		return T_SKIP;
	}
	signal(SIGPIPE, SIG_IGN);
	loop = ev_loop_new(EVFLAG_AUTO); /* the default loop reaps children */
	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_set_psk(scfg, KEY, strlen(KEY)));
	/* the proof's own bound must not be what ends the peers */
	T_OK(rmsg_cfg_set_timeout_ms(scfg, 60000));
	T_OK(rmsg_cfg_set_keepalive_ms(scfg, 0));
	T_OK(rmsg_ctx_create(loop, scfg, &sctx));
	T_OK(rmsg_listen(sctx, "tcp://127.0.0.1:0", scfg, &sops, NULL, NULL,
			 &l));
	T_OK(rmsg_listener_port(l, &port));
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	T_OK(rmsg_ctx_create(loop, scfg, &cctx));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &cli));
	t_deadline(loop, 120);
	T_RUN_UNTIL(loop, cli_up && round_trips > 100, 10);
	t_run_for(loop, 0.2);

	T_ASSERT(rmsg_ctx_stats(sctx, &st0, sizeof(st0)) > 0, "stats");
	h0 = hwm();
	rt0 = round_trips;
	for (i = 0; i < PEERS; i++) {
		pids[i] = fork();
		T_ASSERT(pids[i] >= 0, "fork");
		if (pids[i] == 0) {
			if (i < 4)
				peer(port, RMSGI_T_DATA, ANNOUNCE);
			else if (i < 8)
				peer(port, RMSGI_T_AUTH, ANNOUNCE);
			else if (i < 9)
				peer(port, RMSGI_T_DATA, 4096);
			else
				peer(port, RMSGI_T_HELLO, ANNOUNCE);
		}
	}
	/* the loop runs until every peer is done (bounded by t_deadline) */
	for (i = 0; i < PEERS; i++) {
		int s;

		while (waitpid(pids[i], &s, WNOHANG) == 0)
			t_run_for(loop, 0.01);
		if (!WIFEXITED(s) || WEXITSTATUS(s) != 0) {
			printf("peer %d: the server took all %zu MiB (status "
			       "%d)\n",
			       i, STREAM >> 20, s);
			failed++;
		}
	}
	h1 = hwm();
	T_ASSERT(rmsg_ctx_stats(sctx, &st1, sizeof(st1)) > 0, "stats");
	n_refused = (int)(st1.auth_failures - st0.auth_failures);
	printf("%d peers without a proof: VmHWM +%zu KiB, auth_failures "
	       "+%d, %d closed before %zu MiB, round trips meanwhile %ld\n",
	       PEERS, (h1 - h0) >> 10, n_refused, PEERS - failed, STREAM >> 20,
	       round_trips - rt0);
	T_ASSERT(failed == 0, "%d peers streamed %zu MiB unproven", failed,
		 STREAM >> 20);
	T_ASSERT(!judge_mem || h1 - h0 < BOUND,
		 "resident memory grew by %zu KiB before any proof",
		 (h1 - h0) >> 10);
	/* the DATA frames are refused as "another frame before the proof";
	 * an AUTH header longer than a proof fails its decode (-EPROTO,
	 * counted in proto_errors) */
	T_ASSERT(n_refused >= 5, "auth_failures +%d of 5", n_refused);
	printf("proto_errors +%llu\n",
	       (unsigned long long)(st1.proto_errors - st0.proto_errors));
	T_ASSERT(st1.proto_errors - st0.proto_errors >= 4,
		 "the long AUTH headers were not counted");
	/* served meanwhile, and still served: counts, not rates (under
	 * valgrind a round trip takes far longer) */
	T_ASSERT(round_trips - rt0 > 0, "the keyed client starved");
	rt0 = round_trips;
	T_RUN_UNTIL(loop, round_trips - rt0 >= 20, 60);
	port_g = port;
	tricklers();

	ending = true;
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(scfg);
	printf("tcp_preauth: %d unproven peers closed, %d server closes\n",
	       PEERS, closes);
	return 0;
}
