// SPDX-License-Identifier: MIT
/*
 * verbs_revoke.c - once rmsg_mr_revoke() has returned 0, no access by the
 * peer through the descriptor succeeds (rmsg_mr_export.3), even when the
 * export was made a moment before and its memory window's bind has not
 * been reaped yet.
 *
 * A raw librdmacm/verbs peer (a child process) connects to a librmsg
 * rdma:// listener and sends "go". The server exports a region to that
 * connection and revokes the export, as rmsg_mr_export.3 says: on -EBUSY
 * it tries again after the loop turned. Once the revoke returned 0 it
 * hands the descriptor to the raw peer and, without returning to its
 * loop, waits for the outcome of the peer's RDMA WRITE through it: the
 * write must fail and the region must be unchanged. RDMA only: exits 77
 * over TCP (there revoke is synchronous: tests/integration/
 * errors_onesided.c).
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
#define RAW_BYTE 0x5a

static uint8_t victim[PAGE + VICTIM_LEN + PAGE] __attribute__((aligned(4096)));
static uint8_t desc[RMSG_MR_DESC_SIZE];

/* ------------------------------------------------------------------ */
/* the raw peer (child process)                                         */

static const struct raw_opts opts = {.cqe = 64,
				     .sqn = 16,
				     .credits = RAW_RXN,
				     .eager = 8192,
				     .responder_resources = 1,
				     .secs = 15};

static void raw_peer(const char *host, int in, int out)
{
	struct rmsgi_hdr h = {.type = RMSGI_T_DATA, .len = 2};
	struct raw r = {0};
	uint16_t port;
	int st;

	if (read(in, &port, sizeof(port)) != sizeof(port))
		_exit(30);
	raw_connect(&r, host, port, &opts);
	rmsgi_hdr_encode(&h, raw_sbuf(&r, 0));
	memcpy(raw_sbuf(&r, RMSGI_HDR_SIZE), "go", 2);
	if (raw_send(&r, 0, RMSGI_HDR_SIZE + 2, false))
		_exit(31);
	/* the descriptor comes once the server's revoke returned 0 */
	if (read(in, desc, sizeof(desc)) != sizeof(desc))
		_exit(32);
	memset(raw_sbuf(&r, PAGE), RAW_BYTE, PAGE);
	if (raw_post(&r, IBV_WR_RDMA_WRITE, PAGE, PAGE, true,
		     rmsgi_get64(desc + 16), rmsgi_get32(desc + 4)))
		_exit(33);
	st = raw_wait_wr(&r, 30 * t_scale());
	if (st == -2)
		_exit(34);
	printf("raw: write after the revoke: %s\n",
	       st < 0 ? "no completion"
		      : ibv_wc_status_str((enum ibv_wc_status)st));
	fflush(stdout);
	if (write(out, &st, sizeof(st)) != sizeof(st))
		_exit(35);
	raw_close(&r);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* the librmsg server                                                   */

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_mr *victim_mr;
static struct rmsg_conn *raw_conn;
static int to_child = -1, from_child = -1, busy, raw_status = -2, closes;
static ev_timer retry_w;

/* the descriptor to the peer, then its write's outcome, all before the
 * loop turns again: whatever it would do after revoke returned cannot
 * help */
static void after_revoke(void)
{
	T_ASSERT(write(to_child, desc, sizeof(desc)) == sizeof(desc), "pipe");
	T_ASSERT(read(from_child, &raw_status, sizeof(raw_status)) ==
			 sizeof(raw_status),
		 "the raw peer said nothing");
	printf("server: revoke returned 0 after %d -EBUSY; the peer's write: "
	       "%s\n",
	       busy, ibv_wc_status_str((enum ibv_wc_status)raw_status));
}

static void try_revoke(void)
{
	int ret = rmsg_mr_revoke(victim_mr, desc);

	if (ret == -EBUSY) {
		/* rmsg_mr_export.3: the window is still being bound; the
		 * export is in force; again after the loop turned */
		busy++;
		T_ASSERT(busy < 100000, "revoke stays -EBUSY");
		ev_timer_start(loop, &retry_w);
		return;
	}
	T_OK(ret);
	after_revoke();
}

static void retry_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
	try_revoke();
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)arg;
	T_ASSERT(rmsg_msg_len(m) == 2 && !memcmp(rmsg_msg_data(m), "go", 2),
		 "unexpected message");
	raw_conn = c;
	T_OK(rmsg_mr_export(victim_mr, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE,
			    desc));
	try_revoke();
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	closes++;
	printf("server: conn closed: %s\n", rmsg_strerror(reason));
	rmsg_listener_close(lis);
	lis = NULL;
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = srv_close};
	const char *host = getenv("RMSG_TEST_ADDR");
	int down[2], up[2], i, done = 0;
	struct rmsg_ctx *ctx;
	struct t_child cw;
	uint16_t port;
	char uri[128];
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
	T_ASSERT(pipe(down) == 0 && pipe(up) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(down[1]);
		close(up[0]);
		raw_peer(host, down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	to_child = down[1];
	from_child = up[0];
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	T_OK(rmsg_mr_reg(ctx, victim + PAGE, VICTIM_LEN,
			 RMSG_ACCESS_REMOTE_WRITE, &victim_mr));
	t_listen(ctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_listener_port(lis, &port));
	T_ASSERT(write(to_child, &port, sizeof(port)) == sizeof(port), "pipe");
	ev_timer_init(&retry_w, retry_cb, 0.001, 0.);
	t_child_watch(loop, &cw, pid, &done, NULL);
	t_deadline(loop, 300);
	ev_run(loop, 0);

	T_ASSERT(done && closes == 1, "child %d, closes %d", done, closes);
	T_ASSERT(
		raw_status != IBV_WC_SUCCESS,
		"the peer's write succeeded after rmsg_mr_revoke() returned 0");
	for (i = 0; i < (int)sizeof(victim); i++)
		T_ASSERT(victim[i] == VICTIM_BYTE,
			 "the server's memory changed at %d of its region "
			 "after the revoke",
			 i - PAGE);
	printf("verbs_revoke: the write after the revoke failed (%s), the "
	       "region is unchanged\n",
	       ibv_wc_status_str((enum ibv_wc_status)raw_status));
	T_OK(rmsg_mr_dereg(victim_mr));
	T_OK(rmsg_ctx_destroy(ctx));
	return 0;
}
