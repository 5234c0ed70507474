// SPDX-License-Identifier: MIT
/*
 * verbs_unproven.c - an export to any peer is out of reach of a peer that
 * has not proven the pre-shared key (rmsg_cfg_set_psk.3: "until the proof
 * is complete ... no export is reachable"; rmsg_mr_export.3).
 *
 * A listener with a key exports a region with RMSG_EXPORT_ANY_PEER once a
 * keyed librmsg client is established, and sends the client the
 * descriptor: the client's rmsg_write() into it lands. A raw
 * librdmacm/verbs peer (a child process) that knows the descriptor
 * connects with a valid hello but never sends its proof, and RDMA-writes
 * into the export with the descriptor's address and rkey (bytes 16 and
 * 4, src/mr.c): its write must fail (the server's device refuses it) and
 * the region must hold the client's bytes only. Then the keyed client and
 * the server exchange a BIG message each way (rendezvous: each side's
 * device reads the other's memory once both proofs are done). RDMA
 * only: exits 77 over
 * TCP (there, tests/fault/export_hostile.c covers one-sided frames
 * before the proof).
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "proto.h"
#include "raw_verbs.h"

#define PAGE 4096
#define VICTIM_LEN (4 * PAGE)
#define VICTIM_BYTE 0x3c
#define GOOD_BYTE 0x11
#define RAW_BYTE 0x5a
#define BIG (256 << 10)

static const char psk[] = "verbs_unproven: a key of 32 bytes";

/* the server's region, a page of canary on each side */
static uint8_t victim[PAGE + VICTIM_LEN + PAGE] __attribute__((aligned(4096)));
static uint8_t desc[RMSG_MR_DESC_SIZE];

/* ------------------------------------------------------------------ */
/* the raw peer (child process)                                         */

static const struct raw_opts opts = {.cqe = 64,
				     .sqn = 16,
				     .credits = RAW_RXN,
				     .eager = 8192,
				     .responder_resources = 1,
				     .secs = 15,
				     .hello_flags = RMSGI_HELLO_F_AUTH};

static void raw_peer(const char *host, int fd)
{
	struct raw r = {0};
	uint16_t port;
	int st;

	if (read(fd, &port, sizeof(port)) != sizeof(port) ||
	    read(fd, desc, sizeof(desc)) != sizeof(desc))
		_exit(30);
	if (rmsgi_get64(desc + 16) != (uintptr_t)(victim + PAGE))
		_exit(31); /* not the region's address: no rkey to use */
	/* a valid hello, then no proof: the server waits in AUTH */
	raw_connect(&r, host, port, &opts);
	memset(raw_sbuf(&r, 0), RAW_BYTE, PAGE);
	if (raw_post(&r, IBV_WR_RDMA_WRITE, 0, PAGE, true,
		     rmsgi_get64(desc + 16), rmsgi_get32(desc + 4)))
		_exit(32);
	st = raw_wait_wr(&r, 30 * t_scale());
	if (st == -2)
		_exit(33);
	if (st == -1) {
		fprintf(stderr, "raw: the write has no completion\n");
		_exit(34);
	}
	printf("raw: write before the proof: %s\n",
	       ibv_wc_status_str((enum ibv_wc_status)st));
	fflush(stdout);
	/* the device's refusal: a remote access or invalid request
	 * error, whichever the QP's rights give */
	if (st == IBV_WC_SUCCESS)
		_exit(40);
	raw_close(&r);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* the librmsg server and its keyed client                              */

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *good;
static struct rmsg_mr *victim_mr;
static int pipe_fd = -1, child_done, wrote, srv_closes, big_back;
static uint8_t payload[PAGE];
static uint8_t big[BIG];

/* the keyed client's BIG message, echoed */
static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {big, BIG};

	(void)arg;
	T_ASSERT(rmsg_msg_len(m) == BIG && !memcmp(rmsg_msg_data(m), big, BIG),
		 "server: %zu bytes, not the client's", rmsg_msg_len(m));
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {desc, sizeof(desc)};
	uint16_t port;

	(void)arg;
	T_ASSERT(pipe_fd >= 0, "a second connection was established");
	T_OK(rmsg_mr_export(victim_mr, NULL, 0, 0,
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_EXPORT_ANY_PEER,
			    desc));
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
	T_OK(rmsg_listener_port(lis, &port));
	T_ASSERT(write(pipe_fd, &port, sizeof(port)) == sizeof(port) &&
			 write(pipe_fd, desc, sizeof(desc)) == sizeof(desc),
		 "pipe");
	close(pipe_fd);
	pipe_fd = -1;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	srv_closes++;
	printf("server: conn closed: %s\n", rmsg_strerror(reason));
}

static void good_wrote(struct rmsg_conn *c, int status, void *arg)
{
	(void)c;
	(void)arg;
	struct iovec iov = {big, BIG};

	T_ASSERT(status == 0, "the keyed client's write failed: %s",
		 rmsg_strerror(status));
	wrote = 1;
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void good_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	static uint8_t d[RMSG_MR_DESC_SIZE];
	struct iovec iov = {payload, sizeof(payload)};

	(void)arg;
	if (wrote) {
		T_ASSERT(rmsg_msg_len(m) == BIG &&
				 !memcmp(rmsg_msg_data(m), big, BIG),
			 "client: %zu bytes, not the echo", rmsg_msg_len(m));
		big_back = 1;
		return;
	}
	T_ASSERT(rmsg_msg_len(m) == sizeof(d), "not a descriptor");
	memcpy(d, rmsg_msg_data(m), sizeof(d));
	memset(payload, GOOD_BYTE, sizeof(payload));
	T_OK(rmsg_write(c, &iov, 1, d, 0, good_wrote, NULL));
}

static void good_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(reason == 0, "the keyed client closed with %s",
		 rmsg_strerror(reason));
	rmsg_listener_close(lis);
	lis = NULL;
}

static void wrote_check(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)revents;
	if (child_done && big_back) {
		ev_timer_stop(l, w);
		rmsg_conn_close(good);
	}
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
	struct t_child cw;
	ev_timer poll_w;
	char uri[128];
	int fds[2], i;
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
	for (i = 0; i < BIG; i++)
		big[i] = (uint8_t)(i * 7 + 1);
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
	T_OK(rmsg_cfg_set_psk(cfg, psk, sizeof(psk) - 1));
	T_OK(rmsg_ctx_create(loop, cfg, &ctx));
	T_OK(rmsg_ctx_create(loop, cfg, &cctx));
	T_OK(rmsg_mr_reg(ctx, victim + PAGE, VICTIM_LEN,
			 RMSG_ACCESS_REMOTE_WRITE, &victim_mr));
	t_listen(ctx, cfg, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	pipe_fd = fds[1]; /* srv_est tells the raw peer */
	T_OK(rmsg_connect(cctx, uri, NULL, &gops, NULL, &good));
	t_child_watch(loop, &cw, pid, &child_done, NULL);
	ev_timer_init(&poll_w, wrote_check, 0.05, 0.05);
	ev_timer_start(loop, &poll_w);
	t_deadline(loop, 300);
	ev_run(loop, 0);

	T_ASSERT(child_done && wrote && big_back,
		 "child %d, keyed write %d, echo %d", child_done, wrote,
		 big_back);
	/* the keyed client's page landed; nothing of the raw peer's */
	for (i = 0; i < (int)sizeof(victim); i++) {
		int want = i >= PAGE && i < 2 * PAGE ? GOOD_BYTE : VICTIM_BYTE;

		T_ASSERT(victim[i] == want,
			 "the server's memory at %d of its region is 0x%02x, "
			 "not 0x%02x%s",
			 i - PAGE, victim[i], want,
			 victim[i] == RAW_BYTE ? " (the unproven peer's)" : "");
	}
	printf("verbs_unproven: the unproven peer's write was refused, the "
	       "keyed client's landed, %d KiB went each way (%d server "
	       "closes)\n",
	       BIG >> 10, srv_closes);
	T_OK(rmsg_mr_dereg(victim_mr));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(ctx));
	rmsg_cfg_destroy(cfg);
	return 0;
}
