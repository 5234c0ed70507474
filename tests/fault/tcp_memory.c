// SPDX-License-Identifier: MIT
/*
 * tcp_memory.c - TCP receive memory follows the bytes that arrived, not
 * the lengths peers announce, and stays under the context's cap
 * (rmsg_cfg_set_tcp_rx_limit), while a well-behaved librmsg client of
 * a server keeps doing round trips (issue 14). Raw peers in forked
 * children speak the wire format by hand:
 *   1. 8 peers each announce a 512 MiB frame to server A (default cap,
 *      1 GiB) and send 4 KiB: the process's peak virtual and resident
 *      memory grow by less than ANNOUNCE_BOUND (before: 4 GiB virtual);
 *   2. server B has a cap of CAP (64 MiB) and holds what it receives: a
 *      peer sends a whole 48 MiB frame (held), a second one sends
 *      another 48 MiB as fast as it can: B stops reading it once the cap
 *      is full, peak memory stays under CAP plus RX_SLACK, and the
 *      second peer is closed with -ENOBUFS after B's timeout;
 *   3. a peer announces a frame larger than B's cap: -EMSGSIZE at once;
 *   4. no raw peer: the spare buffer a connection keeps after a large
 *      frame (here the client's, after an 8 MiB echo) is freed once it
 *      stays unused for one to two seconds (malloc's bytes in use).
 * The server's memory is read from /proc/self/status: VmHWM (peak
 * resident) and VmPeak (peak virtual), compared to before each phase.
 * Under ASan or valgrind (RMSG_TEST_NO_RSS set) their allocators own
 * the memory: the figures are printed, not judged.
 * TCP only (raw sockets); exits 77 over RDMA.
 */
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "../integration/common.h"
#include "raw_tcp.h"

#define MIB ((size_t)1 << 20)
#define CAP (64 * MIB)
#define RAW_PEERS 8
#define ANNOUNCE ((uint64_t)512 << 20)
#define ANNOUNCE_BOUND (16 * MIB)
#define RX_SLACK (24 * MIB)
#define TIMEOUT_MS 2000
#define FILL ((uint64_t)48 << 20)

static struct ev_loop *loop;
static struct rmsg_conn *cli;
static long round_trips;
static int closes, n_nobufs, n_msgsize, n_reset;
static bool cli_up, ending, pp_pause, big_back;
static bool judge_mem; /* no RMSG_TEST_NO_RSS */
static struct rmsg_msg *b_held[4];
static int b_nheld;

/* ------------------------------------------------------------------ */
/* memory of this process                                               */

static size_t status_kib(const char *key)
{
	char line[256];
	size_t v = 0, n = strlen(key);
	FILE *f = fopen("/proc/self/status", "r");

	T_ASSERT(f, "/proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = strtoul(line + n + 1, NULL, 10);
	fclose(f);
	return v * 1024;
}

struct mem {
	size_t hwm, peak, rss, data;
};

static void mem_read(struct mem *m)
{
	m->hwm = status_kib("VmHWM");
	m->peak = status_kib("VmPeak");
	m->rss = status_kib("VmRSS");
	m->data = status_kib("VmData");
}

static void mem_print(const char *what, const struct mem *a,
		      const struct mem *b)
{
	printf("%s: VmRSS %zu -> %zu KiB, VmData %zu -> %zu KiB, "
	       "VmHWM +%zu KiB, VmPeak +%zu KiB\n",
	       what, a->rss >> 10, b->rss >> 10, a->data >> 10, b->data >> 10,
	       (b->hwm - a->hwm) >> 10, (b->peak - a->peak) >> 10);
}

/* ------------------------------------------------------------------ */
/* the server (echo) and the well-behaved client (ping-pong)            */

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

/* server B keeps every message until the test releases them */
static void hold_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	T_ASSERT(b_nheld < 4, "server B got %d messages", b_nheld + 1);
	T_OK(rmsg_msg_hold(m));
	b_held[b_nheld++] = m;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	closes++;
	n_nobufs += reason == -ENOBUFS;
	n_msgsize += reason == -EMSGSIZE;
	n_reset += reason == -ECONNRESET;
	printf("server conn closed: %d (%s)\n", reason, rmsg_strerror(reason));
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

#define BIG (8 * MIB)

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	if (rmsg_msg_len(m) == BIG) {
		big_back = true;
		return;
	}
	round_trips++;
	if (!pp_pause)
		ping();
}

/* bytes malloc has handed out and not got back */
static size_t malloc_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (!ending)
		T_FAIL("the well-behaved client was closed: %s",
		       rmsg_strerror(reason));
}

/* ------------------------------------------------------------------ */
/* raw peers                                                            */

static pid_t spawn(void (*fn)(uint16_t port, int note), uint16_t port,
		   int *note_p)
{
	int p[2];
	pid_t pid;

	T_ASSERT(pipe(p) == 0, "pipe");
	pid = fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		close(p[0]);
		fn(port, p[1]);
		_exit(0);
	}
	close(p[1]);
	*note_p = p[0];
	return pid;
}

/* phase 1: announce 512 MiB, send 4 KiB, say so, wait to be killed */
static void announcers(uint16_t port, int note)
{
	static uint8_t junk[4096];
	int fd[RAW_PEERS], i;

	for (i = 0; i < RAW_PEERS; i++) {
		fd[i] = raw_handshake(port);
		raw_put_hdr(fd[i], RMSGI_T_DATA, 0, ANNOUNCE);
		if (!raw_put(fd[i], junk, sizeof(junk)))
			_exit(20);
	}
	if (write(note, "x", 1) != 1)
		_exit(21);
	pause();
}

/* phase 2: a whole 48 MiB frame, then, on a second connection,
 * another one; the server stops reading the second and closes it */
static void filler(uint16_t port, int note)
{
	static uint8_t junk[1 << 20];
	uint64_t sent = 0;
	int fd = raw_handshake(port), fd2;

	raw_put_hdr(fd, RMSGI_T_DATA, 0, FILL);
	while (sent < FILL && raw_put(fd, junk, sizeof(junk)))
		sent += sizeof(junk);
	if (sent < FILL || write(note, "x", 1) != 1)
		_exit(22);
	fd2 = raw_handshake(port);
	raw_put_hdr(fd2, RMSGI_T_DATA, 0, FILL);
	for (sent = 0; sent < FILL && raw_put(fd2, junk, sizeof(junk));)
		sent += sizeof(junk);
	/* the server closed it; a full send would be a failure */
	_exit(sent < FILL ? 0 : 23);
}

/* phase 3: a frame larger than the cap */
static void over_cap(uint16_t port, int note)
{
	char b[64];
	int fd = raw_handshake(port);

	raw_put_hdr(fd, RMSGI_T_DATA, 0, 2 * CAP);
	while (read(fd, b, sizeof(b)) > 0)
		;
	_exit(0);
}

static int reap(pid_t pid, bool kill_it)
{
	int st;

	if (kill_it)
		kill(pid, SIGKILL);
	T_ASSERT(waitpid(pid, &st, 0) == pid, "waitpid");
	return st;
}

static bool readable(int fd)
{
	struct timeval tv = {0};
	fd_set s;

	FD_ZERO(&s);
	FD_SET(fd, &s);
	return select(fd + 1, &s, NULL, NULL, &tv) == 1;
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = srv_close};
	struct rmsg_conn_ops bops = {.on_msg = hold_msg, .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_established,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct rmsg_ctx *sctx, *bctx, *cctx;
	struct rmsg_listener *l, *lb;
	struct rmsg_cfg *scfg;
	struct mem m0, m1;
	char uri[64];
	uint16_t port, bport;
	long rt0;
	size_t v;
	pid_t pid;
	int note, st;

	if (strcmp(t_transport(), "tcp")) {
		printf("SKIP: raw TCP peers only\n");
		return T_SKIP;
	}
	judge_mem = !getenv("RMSG_TEST_NO_RSS");
	signal(SIGPIPE, SIG_IGN);
	loop = ev_loop_new(EVFLAG_AUTO); /* the default loop reaps children */
	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_get_tcp_rx_limit(scfg, &v));
	T_ASSERT(v == (size_t)1 << 30, "default tcp_rx_limit %zu", v);
	T_ASSERT(rmsg_cfg_set_tcp_rx_limit(scfg, 4096) == -EINVAL, "4 KiB");
	T_OK(rmsg_cfg_set_timeout_ms(scfg, TIMEOUT_MS));
	/* raw peers answer no probes: only the memory bounds end them */
	T_OK(rmsg_cfg_set_keepalive_ms(scfg, 0));
	T_OK(rmsg_ctx_create(loop, scfg, &sctx));
	T_OK(rmsg_listen(sctx, "tcp://127.0.0.1:0", scfg, &sops, NULL, NULL,
			 &l));
	T_OK(rmsg_listener_port(l, &port));
	T_OK(rmsg_cfg_set_tcp_rx_limit(scfg, CAP));
	T_OK(rmsg_ctx_create(loop, scfg, &bctx));
	T_OK(rmsg_listen(bctx, "tcp://127.0.0.1:0", scfg, &bops, NULL, NULL,
			 &lb));
	T_OK(rmsg_listener_port(lb, &bport));
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &cli));
	t_deadline(loop, 120);
	T_RUN_UNTIL(loop, cli_up && round_trips > 100, 10);
	/* warm: the first large frames, on a client's connection, mapped
	 * and freed; malloc's own state settled */
	t_run_for(loop, 0.2);

	/* 1. announcements cost what arrived */
	mem_read(&m0);
	rt0 = round_trips;
	pid = spawn(announcers, port, &note);
	T_RUN_UNTIL(loop, readable(note), 20);
	t_run_for(loop, 0.5); /* the server reads what they sent */
	mem_read(&m1);
	mem_print("8 x 512 MiB announced, 4 KiB sent", &m0, &m1);
	T_ASSERT(!judge_mem || (m1.peak - m0.peak < ANNOUNCE_BOUND &&
				m1.hwm - m0.hwm < ANNOUNCE_BOUND),
		 "memory grew with announced lengths");
	T_ASSERT(closes == 0, "an announcer was closed");
	printf("round trips meanwhile: %ld\n", round_trips - rt0);
	T_ASSERT(round_trips - rt0 > 100, "the good client starved");
	reap(pid, true);
	close(note);
	T_RUN_UNTIL(loop, closes == RAW_PEERS, 10);
	T_ASSERT(n_reset == RAW_PEERS, "announcers closed: %d resets", n_reset);

	/* 2. a peer that really sends is held at the cap, then closed */
	t_run_for(loop, 0.2);
	mem_read(&m0);
	rt0 = round_trips;
	pid = spawn(filler, bport, &note);
	T_RUN_UNTIL(loop, b_nheld == 1, 10);
	T_RUN_UNTIL(loop, n_nobufs == 1, 5 + TIMEOUT_MS / 1000.0);
	mem_read(&m1);
	mem_print("2 x 48 MiB sent into a 64 MiB cap", &m0, &m1);
	T_ASSERT(!judge_mem || m1.hwm - m0.hwm < CAP + RX_SLACK,
		 "resident memory beyond the cap");
	T_ASSERT(!judge_mem || m1.peak - m0.peak < CAP + RX_SLACK,
		 "virtual memory beyond the cap");
	printf("round trips meanwhile: %ld\n", round_trips - rt0);
	T_ASSERT(round_trips - rt0 > 100, "the good client starved");
	st = reap(pid, false);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "trickler: %d", st);
	close(note);

	/* 3. more than the cap can ever hold */
	pid = spawn(over_cap, bport, &note);
	T_RUN_UNTIL(loop, n_msgsize == 1, 5);
	T_ASSERT(b_nheld == 1, "server B got %d messages", b_nheld);
	rmsg_msg_release(b_held[0]);
	st = reap(pid, false);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "over_cap: %d", st);
	close(note);

	/* 4. an idle spare buffer goes (last: it moves the peaks) */
	{
		struct iovec iov = {.iov_len = BIG};
		size_t u0, u1, u2;

		iov.iov_base = calloc(1, BIG);
		T_ASSERT(iov.iov_base, "calloc");
		pp_pause = true;
		t_run_for(loop, 0.1);
		u0 = malloc_in_use();
		T_OK(rmsg_send(cli, &iov, 1, NULL, NULL));
		T_RUN_UNTIL(loop, big_back, 10);
		u1 = malloc_in_use();
		t_run_for(loop, 2.5);
		u2 = malloc_in_use();
		printf("8 MiB echo: malloc in use %zu KiB before, %zu KiB "
		       "after, %zu KiB 2.5 s later\n",
		       u0 >> 10, u1 >> 10, u2 >> 10);
		T_ASSERT(!judge_mem || u1 > u0 + BIG / 2,
			 "no spare kept after the echo?");
		T_ASSERT(!judge_mem || u2 < u0 + MIB,
			 "the idle spare was not freed");
		free(iov.iov_base);
		pp_pause = false;
		ping();
	}

	ending = true;
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(bctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(scfg);
	printf("tcp_memory: announced lengths cost nothing, a sender is held "
	       "at the %zu MiB cap and closed with -ENOBUFS, a frame over "
	       "it with -EMSGSIZE; %ld round trips of a good client\n",
	       CAP >> 20, round_trips);
	return 0;
}
