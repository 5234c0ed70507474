// SPDX-License-Identifier: MIT
/*
 * verbs_bound.c - what a peer can make a keyed RDMA server hold, before
 * and after the proof, while a keyed client keeps working (rmsg.7 "What
 * each state allows", RDMA cells of "Before the PSK proof" and
 * "Established"; rmsg_cfg_set_reg_limit.3).
 *
 * A listener with a key (credits fixed at CREDITS, eager size EAGER,
 * budget LIMIT) echoes a keyed librmsg client that sends 1 KiB and 1 MiB
 * messages in turn, one at a time, all through the test: every echo must
 * come back whole, and none of its sends may fail. What the server holds
 * is the budget's use (reg_taken - reg_given of rmsg_ctx_stats), sampled
 * every millisecond and in every callback:
 *
 * 1. With the client alone, its peak is the baseline W.
 * 2. Before the proof: NRAW raw librdmacm/verbs peers (a child process)
 *    connect at once with a hello that says they have a key and never
 *    prove it. Half announce a RNDV message of RNDV_LEN bytes readable
 *    in their memory, half send their whole grant of eager frames. Each
 *    must be closed (DISCONNECTED at the raw peer, auth_failures at the
 *    server), the application must never see one, no rendezvous read
 *    may start, and the peak may exceed W by at most their receive
 *    buffers, credits x eager size each, plus two pool slabs (256 KiB
 *    each) of rounding, for those buffers and for the connections' fixed
 *    header slots (the table's "fixed objects"); a read started would
 *    add RNDV_LEN.
 * 3. Established: a second keyed client (the hog) announces HOGN
 *    messages of HOG_LEN bytes at once. Its reads stay within its share
 *    of the budget, or one message up to half of it: the peak may exceed
 *    W by at most LIMIT / 2 (without the bound the hog's reads would take
 *    the budget), and all its messages arrive whole.
 *
 * RDMA only: exits 77 over TCP (tests/fault/tcp_preauth and tcp_share
 * cover the TCP cells).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "proto.h"
#include "raw_verbs.h"

#define CREDITS 8
#define EAGER 8192
#define LIMIT ((size_t)64 << 20)
#define SLAB ((uint64_t)256 << 10)
#define NRAW 4
#define RNDV_LEN ((size_t)16 << 20)
#define SMALL 1024
#define LARGE ((size_t)1 << 20)
#define HOGN 4
#define HOG_LEN ((size_t)24 << 20)
#define ROUNDS 16 /* honest round trips per phase, at least */

static const char psk[] = "verbs_bound: a key of 32 bytes ok";

/* ------------------------------------------------------------------ */
/* the raw peers (child process)                                        */

static const struct raw_opts opts = {.cqe = 256,
				     .sqn = 64,
				     .credits = RAW_RXN,
				     .eager = EAGER,
				     .responder_resources = 1,
				     .secs = 30,
				     .hello_flags = RMSGI_HELLO_F_AUTH};

/* announces a message of RNDV_LEN bytes that @mr makes readable */
static void raw_rndv(struct raw *r, struct ibv_mr *mr)
{
	struct rmsgi_hdr h = {
		.type = RMSGI_T_RNDV_REQ, .id = 1, .len = RNDV_LEN};
	struct rmsgi_seg s = {.addr = (uintptr_t)mr->addr,
			      .len = (uint32_t)RNDV_LEN,
			      .rkey = mr->rkey};

	rmsgi_hdr_encode(&h, raw_sbuf(r, 0));
	rmsgi_seg_encode(&s, raw_sbuf(r, RMSGI_HDR_SIZE));
	if (raw_send(r, 0, RMSGI_HDR_SIZE + RMSGI_SEG_SIZE, false))
		_exit(41);
}

/* spends the whole grant on eager frames as large as they may be */
static void raw_flood(struct raw *r)
{
	struct rmsgi_hdr h = {.type = RMSGI_T_DATA,
			      .len = EAGER - RMSGI_HDR_SIZE};
	unsigned i;

	memset(raw_sbuf(r, 0), 0x77, EAGER);
	rmsgi_hdr_encode(&h, raw_sbuf(r, 0));
	for (i = 0; i < r->srv.credits && i < opts.sqn; i++)
		if (raw_send(r, 0, EAGER, false))
			_exit(42);
}

static void raw_peers(const char *host, int fd)
{
	static struct raw r[NRAW];
	struct ibv_mr *mr[NRAW] = {0};
	uint8_t *lure = calloc(1, RNDV_LEN);
	uint16_t port;
	int i, st;

	if (!lure || read(fd, &port, sizeof(port)) != sizeof(port))
		_exit(30);
	for (i = 0; i < NRAW; i++)
		raw_connect(&r[i], host, port, &opts);
	for (i = 0; i < NRAW; i++) {
		if (r[i].srv.credits != CREDITS ||
		    !(r[i].srv.flags & RMSGI_HELLO_F_AUTH)) {
			fprintf(stderr,
				"raw: server hello: %u credits, flags %#x\n",
				r[i].srv.credits, r[i].srv.flags);
			_exit(31);
		}
		if (i % 2) {
			raw_flood(&r[i]);
			continue;
		}
		mr[i] = ibv_reg_mr(r[i].pd, lure, RNDV_LEN,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_READ);
		if (!mr[i])
			_exit(32);
		raw_rndv(&r[i], mr[i]);
	}
	/* the server closes each unproven peer */
	for (i = 0; i < NRAW; i++) {
		st = raw_wait_ev(&r[i], RDMA_CM_EVENT_DISCONNECTED,
				 60 * t_scale());
		if (st) {
			fprintf(stderr, "raw %d: not disconnected: %s\n", i,
				strerror(-st));
			_exit(33);
		}
	}
	for (i = 0; i < NRAW; i++) {
		raw_disconnect(&r[i]);
		if (mr[i])
			ibv_dereg_mr(mr[i]);
		raw_free(&r[i]);
	}
	free(lure);
	printf("raw: %d unproven peers closed by the server\n", NRAW);
	fflush(stdout);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* the librmsg server, its keyed client and the hog                     */

static struct ev_loop *loop;
static struct rmsg_ctx *sctx, *cctx, *hctx;
static struct rmsg_cfg *cfg;
static struct rmsg_listener *lis;
static struct rmsg_conn *good, *hog;
static char uri[128];
static int pipe_fd = -1, child_done, phase, srv_est_n, srv_close_n;
static int rounds, phase_rounds, hog_msgs, hog_est, stop;
static uint64_t peak, base, peak_raw, peak_hog;
static uint8_t *small, *large, *hogbuf;

static uint64_t held(void)
{
	struct rmsg_stats st;

	T_ASSERT(rmsg_ctx_stats(sctx, &st, sizeof(st)) == sizeof(st), "stats");
	return st.reg_taken - st.reg_given;
}

static void sample(void)
{
	uint64_t h = held();

	if (h > peak)
		peak = h;
}

static void sample_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
	sample();
}

static void srv_sent(struct rmsg_conn *c, int status, void *arg)
{
	(void)c;
	(void)status;
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	sample();
	if (arg == (void *)&hog_msgs) {
		T_ASSERT(rmsg_msg_len(m) == HOG_LEN &&
				 !t_check(rmsg_msg_data(m), HOG_LEN, 9),
			 "server: the hog's message of %zu bytes is not its "
			 "own",
			 rmsg_msg_len(m));
		hog_msgs++;
		return;
	}
	rmsg_msg_hold(m);
	T_OK(rmsg_send(c, &iov, 1, srv_sent, m));
}

static int srv_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		      const void *pd, size_t len, void *arg)
{
	(void)l;
	(void)arg;
	/* the hog says who it is */
	if (len == 3 && !memcmp(pd, "hog", 3))
		rmsg_conn_set_arg(c, &hog_msgs);
	return 0;
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	srv_est_n++;
	sample();
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	(void)reason;
	srv_close_n++;
}

static void good_sent(struct rmsg_conn *c, int status, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(status == 0, "a keyed client's send failed: %s",
		 rmsg_strerror(status));
}

/* the keyed client: one message at a time, 1 KiB and 1 MiB in turn */
static void good_send(struct rmsg_conn *c)
{
	bool big = rounds % 2;
	struct iovec iov = {big ? large : small, big ? LARGE : SMALL};

	T_OK(rmsg_send(c, &iov, 1, good_sent, NULL));
}

static void good_est(struct rmsg_conn *c, void *arg)
{
	(void)arg;
	good_send(c);
}

static void good_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	bool big = rounds % 2;

	(void)arg;
	T_ASSERT(rmsg_msg_len(m) == (big ? LARGE : SMALL) &&
			 !memcmp(rmsg_msg_data(m), big ? large : small,
				 big ? LARGE : SMALL),
		 "the keyed client's echo %d (%zu bytes) is not its message",
		 rounds, rmsg_msg_len(m));
	rounds++;
	phase_rounds++;
	sample();
	if (stop) {
		/* nothing in flight: the counts below are exact */
		peak_hog = peak;
		phase = 3;
		return;
	}
	good_send(c);
}

static void good_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(reason == 0 && phase == 3,
		 "the keyed client closed with %s in phase %d",
		 rmsg_strerror(reason), phase);
	good = NULL;
}

static void hog_est_cb(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {hogbuf, HOG_LEN};
	int i;

	(void)arg;
	hog_est = 1;
	/* all at once: the server reads them within the hog's share */
	for (i = 0; i < HOGN; i++)
		T_OK(rmsg_send(c, &iov, 1, good_sent, NULL));
}

static void hog_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(reason == 0 && phase == 3, "the hog closed with %s",
		 rmsg_strerror(reason));
	hog = NULL;
}

static uint64_t auth_failures(void)
{
	struct rmsg_stats st;

	T_ASSERT(rmsg_ctx_stats(sctx, &st, sizeof(st)) == sizeof(st), "stats");
	return st.auth_failures;
}

static void step_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	static const struct rmsg_conn_ops hops = {.on_established = hog_est_cb,
						  .on_close = hog_close};
	uint16_t port;

	(void)revents;
	if (phase == 0 && phase_rounds >= ROUNDS) {
		base = peak;
		phase_rounds = 0;
		T_OK(rmsg_listener_port(lis, &port));
		T_ASSERT(write(pipe_fd, &port, sizeof(port)) == sizeof(port),
			 "pipe");
		close(pipe_fd);
		pipe_fd = -1;
		phase = 1;
	} else if (phase == 1 && child_done && auth_failures() >= NRAW &&
		   phase_rounds >= ROUNDS) {
		struct rmsg_cfg *hcfg;

		peak_raw = peak;
		peak = held(); /* the hog's phase has a peak of its own */
		phase_rounds = 0;
		phase = 2;
		T_OK(rmsg_cfg_create(&hcfg));
		T_OK(rmsg_cfg_set_psk(hcfg, psk, sizeof(psk) - 1));
		T_OK(rmsg_cfg_set_private_data(hcfg, "hog", 3));
		T_OK(rmsg_connect(hctx, uri, hcfg, &hops, NULL, &hog));
		rmsg_cfg_destroy(hcfg);
	} else if (phase == 2 && hog_msgs == HOGN && phase_rounds >= ROUNDS) {
		stop = 1; /* at the keyed client's next echo */
		ev_timer_stop(l, w);
	}
}

int main(void)
{
	static const struct rmsg_conn_ops sops = {.on_established = srv_est,
						  .on_msg = srv_msg,
						  .on_close = srv_close};
	static const struct rmsg_conn_ops gops = {.on_established = good_est,
						  .on_msg = good_msg,
						  .on_close = good_close};
	const char *host = getenv("RMSG_TEST_ADDR");
	uint64_t raw_bound, hog_bound;
	struct rmsg_stats st;
	ev_timer sample_w, step_w;
	struct t_child cw;
	int fds[2];
	pid_t pid;

	if (strcmp(t_transport(), "rdma")) {
		printf("SKIP: raw verbs peers: RDMA only "
		       "(RMSG_TEST_TRANSPORT=rdma, 'make check-rxe')\n");
		return T_SKIP;
	}
	t_require_transport();
	if (!host || !*host)
		host = "127.0.0.1";
	signal(SIGPIPE, SIG_IGN);
	loop = ev_default_loop(0);
	/* fork before any verbs state exists in this process */
	T_ASSERT(pipe(fds) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		raw_peers(host, fds[0]);
	}
	close(fds[0]);
	pipe_fd = fds[1];
	small = malloc(SMALL);
	large = malloc(LARGE);
	hogbuf = malloc(HOG_LEN);
	T_ASSERT(small && large && hogbuf, "malloc");
	t_fill(small, SMALL, 1);
	t_fill(large, LARGE, 2);
	t_fill(hogbuf, HOG_LEN, 9);

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_psk(cfg, psk, sizeof(psk) - 1));
	T_OK(rmsg_cfg_set_credits(cfg, CREDITS));
	T_OK(rmsg_cfg_set_credits_initial(cfg, CREDITS));
	T_OK(rmsg_cfg_set_eager_size(cfg, EAGER));
	T_OK(rmsg_cfg_set_reg_limit(cfg, LIMIT));
	T_OK(rmsg_ctx_create(loop, cfg, &sctx));
	T_OK(rmsg_ctx_create(loop, cfg, &cctx));
	T_OK(rmsg_ctx_create(loop, cfg, &hctx));
	t_listen(sctx, cfg, &sops, srv_accept, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &gops, NULL, &good));
	t_child_watch(loop, &cw, pid, &child_done, NULL);
	ev_timer_init(&sample_w, sample_cb, 0.001, 0.001);
	ev_timer_start(loop, &sample_w);
	ev_timer_init(&step_w, step_cb, 0.01, 0.01);
	ev_timer_start(loop, &step_w);
	t_deadline(loop, 600);
	while (phase < 3)
		ev_run(loop, EVRUN_ONCE);
	ev_timer_stop(loop, &sample_w);

	T_OK(rmsg_ctx_stats(sctx, &st, sizeof(st)) == sizeof(st) ? 0 : -EIO);
	raw_bound = base + (uint64_t)NRAW * CREDITS * EAGER + 2 * SLAB;
	hog_bound = base + LIMIT / 2;
	printf("rdma: held by the server: %llu KiB with the keyed client "
	       "alone, %llu KiB with %d unproven peers (bound %llu), "
	       "%llu KiB with the hog's %d x %zu MiB (bound %llu); %d keyed "
	       "round trips\n",
	       (unsigned long long)(base >> 10),
	       (unsigned long long)(peak_raw >> 10), NRAW,
	       (unsigned long long)(raw_bound >> 10),
	       (unsigned long long)(peak_hog >> 10), HOGN, HOG_LEN >> 20,
	       (unsigned long long)(hog_bound >> 10), rounds);
	T_ASSERT(peak_raw <= raw_bound,
		 "unproven peers made the server hold %llu bytes over the "
		 "%llu of the keyed client alone (bound %llu)",
		 (unsigned long long)(peak_raw - base),
		 (unsigned long long)base,
		 (unsigned long long)(raw_bound - base));
	T_ASSERT(peak_hog <= hog_bound,
		 "the hog made the server hold %llu bytes over the %llu of "
		 "the keyed client alone (bound %llu)",
		 (unsigned long long)(peak_hog - base),
		 (unsigned long long)base,
		 (unsigned long long)(hog_bound - base));
	/* the application never saw an unproven peer; everything it got
	 * came from the keyed ones */
	T_ASSERT(srv_est_n == 2, "server: %d connections established, not 2",
		 srv_est_n);
	T_ASSERT(st.auth_failures == NRAW, "server: %llu auth failures",
		 (unsigned long long)st.auth_failures);
	T_ASSERT(st.msgs_recv == (uint64_t)rounds + HOGN &&
			 st.rndv_recv == (uint64_t)rounds / 2 + HOGN,
		 "server: %llu messages (%llu rendezvous) received, not the "
		 "keyed peers' %d (%d)",
		 (unsigned long long)st.msgs_recv,
		 (unsigned long long)st.rndv_recv, rounds + HOGN,
		 rounds / 2 + HOGN);
	T_OK(rmsg_conn_close(good));
	T_OK(rmsg_conn_close(hog));
	T_RUN_UNTIL(loop, !good && !hog, 60);
	rmsg_listener_close(lis);
	T_OK(rmsg_ctx_destroy(hctx));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(cfg);
	free(small);
	free(large);
	free(hogbuf);
	return 0;
}
