// SPDX-License-Identifier: MIT
/*
 * link_cut.c - the link between two hosts goes silent (100% loss) while
 * calls, sends (eager and rendezvous) and one-sided writes and reads are
 * in flight: nothing answers, nothing is reset, no device goes down. Both
 * ends must notice by themselves within the keepalive bound, every
 * callback must run exactly once, a connection over another link keeps
 * working, and once the link is back a new connection works.
 *
 * The two "hosts" are the two ends of a veth pair in the VM, each with
 * its own address (and, for RDMA, its own rxe device); the client binds
 * the second address with "?src=". tests/fault/link_cut.sh builds that
 * network and passes, in the environment:
 *   LINK_A    the server's address (one end)
 *   LINK_B    the client's address (the other end)
 *   LINK_CUT  a shell command that cuts the link
 *   LINK_HEAL a shell command that restores it
 *   LINK_SILENT an address on the link that nobody answers
 * RMSG_TEST_ADDR is the other link (rxe0 on dummy0). Runs over
 * RMSG_TEST_TRANSPORT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/common.h"

#define NCALLS 40
#define SEND_WINDOW 16 /* sends kept in flight until the link dies */
#define OS_WINDOW 4    /* one-sided ops kept in flight */
#define NONESIDED 20   /* slots of the server's region */
#define CREDITS 128    /* room for the held calls and the stream */
#define BIG 200000
#define CHUNK 16384
#define REGION (NONESIDED * CHUNK)
#define KA_MS 300
#define KA_MISSES 3
#define M_HOLD 1 /* the server keeps the request: in flight at the cut */
#define M_ECHO 2

static struct ev_loop *loop;
static const char *cut_cmd, *heal_cmd;
static char srv_uri[160];

/* ---- the server end (LINK_A) ---- */

static struct rmsg_ctx *sctx;
static struct rmsg_mr *smr;
static uint8_t *sregion, sdesc[RMSG_MR_DESC_SIZE];
static struct rmsg_req *held[NCALLS];
static int nheld, srv_msgs, srv_closes, srv_reason;
static ev_tstamp t_srv_closed;

static void srv_est(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {sdesc, sizeof(sdesc)};

	/* to this connection only (a memory window on its queue pair) */
	T_OK(rmsg_mr_export(smr, c, 0, 0,
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			    sdesc));
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	srv_msgs++;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	int i;

	srv_closes++;
	if (srv_closes > 1)
		return; /* the second connection, after the heal */
	t_srv_closed = ev_time();
	srv_reason = reason;
	/* answers to a closed connection are dropped, and say so */
	for (i = 0; i < nheld; i++)
		T_ASSERT(rmsg_reply_error(held[i], -EIO) == -ENOTCONN,
			 "answer %d to a dead link", i);
	nheld = 0;
}

static void hold(struct rmsg_conn *c, struct rmsg_req *req, struct rmsg_msg *m,
		 void *arg)
{
	T_ASSERT(nheld < NCALLS, "more requests than calls");
	held[nheld++] = req;
}

static void echo(struct rmsg_conn *c, struct rmsg_req *req, struct rmsg_msg *m,
		 void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_reply(req, &iov, 1));
}

/* ---- the client end (LINK_B) ---- */

static struct rmsg_ctx *cctx;
static struct rmsg_conn *victim;
static int call_cbs, send_cbs, send_ok, os_cbs, os_ok, cli_reason;
static int sends, os_ops, pumping;
static uint8_t sdesc_copy[RMSG_MR_DESC_SIZE];
static int cli_closes, healed_ok;
static ev_tstamp t_cut, t_cli_closed, t_heal, t_healed;
static uint8_t *big, *lbuf;
static ev_timer cutter;

static void call_cb(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		    void *arg)
{
	/* the reason the connection failed (rmsg_call.3) */
	T_ASSERT(status == -ETIMEDOUT, "a held call: %s",
		 rmsg_strerror(status));
	call_cbs++;
}

static void send_cb(struct rmsg_conn *c, int status, void *arg);
static void os_cb(struct rmsg_conn *c, int status, void *arg);

/*
 * An op the device finished before the cut can report success after the
 * connection began to close (on_close comes after the callbacks): the
 * next op then gets -ENOTCONN, and the stream stops there.
 */
static int stream_more(int ret)
{
	if (ret == -ENOTCONN) {
		pumping = 0;
		return 0;
	}
	T_OK(ret);
	return 1;
}

/* a stream that runs until the link dies: one more per completion */
static void send_one(struct rmsg_conn *c)
{
	struct iovec iov = {big, sends % 4 ? 100 : BIG};

	sends += stream_more(rmsg_send(c, &iov, 1, send_cb, NULL));
}

static void os_one(struct rmsg_conn *c)
{
	int i = os_ops % NONESIDED, ret;
	struct iovec iov = {lbuf + (size_t)i * CHUNK, CHUNK};

	if (os_ops % 2)
		ret = rmsg_write_imm(c, &iov, 1, sdesc_copy,
				     (uint64_t)i * CHUNK, (uint32_t)i, os_cb,
				     NULL);
	else
		ret = rmsg_read(c, &iov, 1, sdesc_copy, (uint64_t)i * CHUNK,
				os_cb, NULL);
	os_ops += stream_more(ret);
}

static void send_cb(struct rmsg_conn *c, int status, void *arg)
{
	/* done, or failed with the connection's reason (rmsg_send.3) */
	T_ASSERT(status == 0 || status == -ETIMEDOUT, "a send: %s",
		 rmsg_strerror(status));
	send_cbs++;
	send_ok += status == 0;
	if (status == 0 && pumping)
		send_one(c);
}

static void os_cb(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0 || status == -ETIMEDOUT, "a one-sided op: %s",
		 rmsg_strerror(status));
	os_cbs++;
	os_ok += status == 0;
	if (status == 0 && pumping)
		os_one(c);
}

static void cut_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	int rc = system(cut_cmd);

	T_ASSERT(rc == 0, "'%s' failed (%d)", cut_cmd, rc);
	t_cut = ev_time();
}

/* the server's region descriptor: start everything; the streams run
 * on, so that some of it is always on the wire when the link goes */
static void victim_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec small = {"x", 1};
	int i;

	T_ASSERT(rmsg_msg_len(m) == RMSG_MR_DESC_SIZE, "descriptor size");
	memcpy(sdesc_copy, rmsg_msg_data(m), sizeof(sdesc_copy));
	pumping = 1;
	for (i = 0; i < NCALLS; i++)
		T_OK(rmsg_call(c, M_HOLD, &small, 1, 0, call_cb, NULL, NULL));
	for (i = 0; i < SEND_WINDOW; i++)
		send_one(c);
	for (i = 0; i < OS_WINDOW; i++)
		os_one(c);
	ev_timer_init(&cutter, cut_cb, 0.3, 0);
	ev_timer_start(loop, &cutter);
}

static void victim_close(struct rmsg_conn *c, int reason, void *arg)
{
	t_cli_closed = ev_time();
	cli_reason = reason;
	cli_closes++;
	pumping = 0;
	T_ASSERT(call_cbs == NCALLS && send_cbs == sends && os_cbs == os_ops,
		 "before on_close: %d/%d call, %d/%d send, %d/%d one-sided "
		 "callbacks",
		 call_cbs, NCALLS, send_cbs, sends, os_cbs, os_ops);
	victim = NULL;
}

static void healed_cb(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		      void *arg)
{
	T_OK(status);
	T_ASSERT(rmsg_msg_len(r) == 5 && !memcmp(rmsg_msg_data(r), "again", 5),
		 "echo after the heal");
	t_healed = ev_time();
	healed_ok = 1;
	rmsg_conn_close(c);
}

static void healed_est(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {"again", 5};

	T_OK(rmsg_call(c, M_ECHO, &iov, 1, 0, healed_cb, NULL, NULL));
}

static void healed_close(struct rmsg_conn *c, int reason, void *arg)
{
	T_ASSERT(reason == 0, "connection after the heal: %s",
		 rmsg_strerror(reason));
	ev_break(loop, EVBREAK_ALL);
}

/* a neighbour that never answers ARP: address resolution runs in slices
 * until the connection's own timeout, not just the first slice */
static int nb_reason;
static ev_tstamp t_nb_closed;

static void nb_close(struct rmsg_conn *c, int reason, void *arg)
{
	nb_reason = reason;
	t_nb_closed = ev_time();
	ev_break(loop, EVBREAK_ALL);
}

/* ---- the other link (RMSG_TEST_ADDR) ---- */

static struct rmsg_ctx *octx_s, *octx_c;
static struct rmsg_conn *other;
static int other_rtts, healing;

static void other_echo(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void other_ping(void)
{
	struct iovec iov = {"ping", 4};

	T_OK(rmsg_send(other, &iov, 1, NULL, NULL));
}

static void other_est(struct rmsg_conn *c, void *arg)
{
	other_ping();
}

/* round trips go on all the time; the first run of the loop stops once
 * both ends of the cut link have closed and a round trip completed after
 * that */
static void other_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	other_rtts++;
	if (!healing && cli_closes && srv_closes && t_cut > 0 &&
	    ev_time() > t_cli_closed && ev_time() > t_srv_closed) {
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	other_ping();
}

static struct rmsg_ctx *ctx_new(struct rmsg_cfg *cfg)
{
	struct rmsg_ctx *ctx;

	T_OK(rmsg_ctx_create(loop, cfg, &ctx));
	return ctx;
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_msg = srv_msg,
				     .on_close = srv_close};
	struct rmsg_conn_ops vops = {.on_msg = victim_msg,
				     .on_close = victim_close};
	struct rmsg_conn_ops hops = {.on_established = healed_est,
				     .on_close = healed_close};
	struct rmsg_conn_ops oops = {.on_established = other_est,
				     .on_msg = other_msg};
	struct rmsg_conn_ops eops = {.on_msg = other_echo};
	struct rmsg_conn_ops nops = {.on_close = nb_close};
	struct rmsg_cfg *ncfg;
	ev_tstamp t_nb;
	const char *silent;
	struct rmsg_listener *sl, *ol;
	const char *a, *b, *tr = t_transport();
	struct rmsg_conn *again;
	char uri[200], ouri[160];
	struct rmsg_cfg *cfg;
	uint16_t port;
	int rtts_at_close;

	a = t_need_env("LINK_A", "link_cut.sh");
	b = t_need_env("LINK_B", "link_cut.sh");
	cut_cmd = t_need_env("LINK_CUT", "link_cut.sh");
	heal_cmd = t_need_env("LINK_HEAL", "link_cut.sh");
	silent = t_need_env("LINK_SILENT", "link_cut.sh");
	t_require_transport();
	loop = ev_default_loop(0);
	big = calloc(1, BIG);
	lbuf = calloc(1, REGION);
	sregion = calloc(1, REGION);
	T_ASSERT(big && lbuf && sregion, "out of memory");

	/* both ends of the cut link watch it with the same keepalive */
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, KA_MS));
	T_OK(rmsg_cfg_set_keepalive_misses(cfg, KA_MISSES));
	T_OK(rmsg_cfg_set_credits(cfg, CREDITS));
	/* one context per device: the server end, the client end, and the
	 * other link's two ends */
	sctx = ctx_new(cfg);
	cctx = ctx_new(cfg);
	octx_s = ctx_new(NULL);
	octx_c = ctx_new(NULL);
	T_OK(rmsg_handle(sctx, M_HOLD, hold, NULL));
	T_OK(rmsg_handle(sctx, M_ECHO, echo, NULL));
	T_OK(rmsg_mr_reg(sctx, sregion, REGION,
			 RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			 &smr));

	snprintf(uri, sizeof(uri), "%s://%s:0", tr, a);
	T_OK(rmsg_listen(sctx, uri, NULL, &sops, NULL, NULL, &sl));
	T_OK(rmsg_listener_port(sl, &port));
	snprintf(srv_uri, sizeof(srv_uri), "%s://%s:%u?src=%s", tr, a, port, b);
	t_listen(octx_s, NULL, &eops, NULL, NULL, &ol, ouri, sizeof(ouri));

	t_deadline(loop, 120);
	T_OK(rmsg_connect(octx_c, ouri, NULL, &oops, NULL, &other));
	T_OK(rmsg_connect(cctx, srv_uri, NULL, &vops, NULL, &victim));
	ev_run(loop, 0);

	/* nothing answers and nothing is reset: each end declares the
	 * other dead, -ETIMEDOUT (rmsg_cfg_set_keepalive_ms.3; over RDMA an
	 * op's retries running out says the same) */
	T_ASSERT(cli_closes == 1 && cli_reason == -ETIMEDOUT,
		 "client close %d (%s)", cli_closes, rmsg_strerror(cli_reason));
	T_ASSERT(srv_closes == 1 && srv_reason == -ETIMEDOUT,
		 "server close %d (%s)", srv_closes, rmsg_strerror(srv_reason));
	printf("%s: link cut: client on_close(%s) %.2f s, server "
	       "on_close(%s) %.2f s after the cut (keepalive bound %.1f s)\n",
	       tr, rmsg_strerror(cli_reason), t_cli_closed - t_cut,
	       rmsg_strerror(srv_reason), t_srv_closed - t_cut,
	       KA_MS * KA_MISSES / 1000.0);
	printf("%s: all %d callbacks ran once: %d/%d sends and %d/%d "
	       "one-sided ops had completed, %d held calls failed; the server "
	       "had %d messages; the other link did %d round trips "
	       "meanwhile\n",
	       tr, NCALLS + sends + os_ops, send_ok, sends, os_ok, os_ops,
	       NCALLS, srv_msgs, other_rtts);
	T_ASSERT(send_ok < sends && os_ok < os_ops,
		 "nothing was in flight at the cut");
	/* generous: the bound plus teardown, on a loaded emulated host */
	T_ASSERT(t_cli_closed - t_cut < 10 * t_scale() &&
			 t_srv_closed - t_cut < 10 * t_scale(),
		 "detection took %.1f / %.1f s", t_cli_closed - t_cut,
		 t_srv_closed - t_cut);
	T_ASSERT(other_rtts > 0, "the other link stopped working");

	/* the link comes back: a new connection works */
	rtts_at_close = other_rtts;
	T_ASSERT(system(heal_cmd) == 0, "'%s' failed", heal_cmd);
	t_heal = ev_time();
	healing = 1;
	other_ping();
	T_OK(rmsg_connect(cctx, srv_uri, NULL, &hops, NULL, &again));
	ev_run(loop, 0);
	T_ASSERT(healed_ok, "no call after the heal");
	printf("%s: link back: a new connection answered a call %.2f s "
	       "later (%d more round trips on the other link)\n",
	       tr, t_healed - t_heal, other_rtts - rtts_at_close);

	/* nobody answers: the connect fails at its 2 s timeout */
	T_OK(rmsg_cfg_create(&ncfg));
	T_OK(rmsg_cfg_set_timeout_ms(ncfg, 2000));
	snprintf(uri, sizeof(uri), "%s://%s:%u?src=%s", tr, silent, port, b);
	t_nb = ev_time();
	T_OK(rmsg_connect(cctx, uri, ncfg, &nops, NULL, &again));
	ev_run(loop, 0);
	/* the setup outlived its timeout (rmsg_connect.3, on_close) */
	T_ASSERT(nb_reason == -ETIMEDOUT, "a silent neighbour: %s",
		 rmsg_strerror(nb_reason));
	T_ASSERT(t_nb_closed - t_nb >= 1.5,
		 "a silent neighbour: gave up after %.2f s, before the 2 s "
		 "timeout",
		 t_nb_closed - t_nb);
	printf("%s: a silent neighbour: connect failed (%s) after %.2f s "
	       "(timeout 2 s)\n",
	       tr, rmsg_strerror(nb_reason), t_nb_closed - t_nb);
	rmsg_cfg_destroy(ncfg);

	rmsg_conn_close(other);
	rmsg_listener_close(sl);
	rmsg_listener_close(ol);
	T_OK(rmsg_mr_dereg(smr));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	T_OK(rmsg_ctx_destroy(octx_c));
	T_OK(rmsg_ctx_destroy(octx_s));
	rmsg_cfg_destroy(cfg);
	free(big);
	free(lbuf);
	free(sregion);
	return 0;
}
