// SPDX-License-Identifier: MIT
/*
 * stats.c - the counters (rmsg_conn_stats(3), rmsg_ctx_stats(3)) move by
 * exactly the traffic this test makes, on both ends, on either transport.
 * A client context and a server context on one loop:
 *
 *  1. c -> s: N eager and M rendezvous-sized messages each way: msgs,
 *     bytes, eager and rendezvous (over TCP every message is eager).
 *  2. c -> s: one-sided ops, W writes, I writes with immediate, R reads:
 *     issued by kind on c; on s the immediates received (both
 *     transports), writes and reads served (TCP only: the RDMA device
 *     serves them unseen).
 *  3. s holds every message; c sends until its send queue is full, then
 *     tries twice more: sendq_full == 2 exactly, and s received exactly
 *     the messages that did not stall (sent - credit_stalls) until it
 *     releases them; then all arrive and the stalls stay.
 *  4. c3 with a short keepalive to a listener without one, idle: c3
 *     probes (s3 answers), s3 never does, no timeout.
 *  5. A connection the accept callback refuses: conns_refused.
 *  6. Last, a revoked descriptor: c's write is refused (refused_ours on
 *     c; on s refused_peer over TCP, where the library sees it).
 *  7. Contexts, once every connection closed: the sums of the counters
 *     each connection had at on_close, and opened / accepted / refused /
 *     closed.
 *  8. TCP only: raw peers (tests/fault/raw_tcp.h) to a third context:
 *     one sends a frame of an unknown type (proto_errors 1), one stays
 *     silent to a listener with a short keepalive (ka_timeouts 1).
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "common.h"
#include "../fault/raw_tcp.h"

#define N 5
#define M 3
#define SMALL 100
#define EAGER 1024
#define BIG 4096
#define LONE (EAGER * 3 / 4)
#define W 2
#define I 3
#define R 4
#define RLEN 4096
#define SQ 40
#define SCREDITS 16
#define KA_MS 100

static struct ev_loop *loop;
static bool rdma;
static struct rmsg_conn *c, *c3, *c4, *s, *s3;
static int c_est, s_est, c3_est, s3_est;
static int c_msgs, s_msgs, s_imm, c4_closed, c4_reason;
static int closes; /* on_close of c, c3, s, s3 */
static bool s_hold;
static struct rmsg_msg *held[SQ + 8];
static int nheld;
static uint8_t desc[2][RMSG_MR_DESC_SIZE];
static int ndesc;
static int ops_done, ops_status[W + I + R + 1];
static int refused_status = 1;
/* each connection's counters at its on_close */
static struct rmsg_stats at_close_cli, at_close_srv;
/* c's and s's at their on_close: over RDMA the device's refusal (step 6)
 * ends both, and a connection is freed once its on_close returned */
static struct rmsg_stats last_c, last_s;
static bool c_gone, s_gone;

static void add(struct rmsg_stats *to, const struct rmsg_stats *f)
{
	uint64_t *t = (uint64_t *)to;
	const uint64_t *p = (const uint64_t *)f;
	size_t i;

	for (i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		t[i] += p[i];
}

static struct rmsg_stats cst(struct rmsg_conn *x)
{
	struct rmsg_stats st;

	T_ASSERT(rmsg_conn_stats(x, &st, sizeof(st)) == (int)sizeof(st),
		 "rmsg_conn_stats");
	return st;
}

static struct rmsg_stats xst(struct rmsg_ctx *x)
{
	struct rmsg_stats st;

	T_ASSERT(rmsg_ctx_stats(x, &st, sizeof(st)) == (int)sizeof(st),
		 "rmsg_ctx_stats");
	return st;
}

#define EQ(a, b)                                                            \
	T_ASSERT((uint64_t)(a) == (uint64_t)(b), "%s = %llu, not %llu", #a, \
		 (unsigned long long)(a), (unsigned long long)(b))

/* ------------------------------------------------------------------ */

static void cli_est(struct rmsg_conn *x, void *arg)
{
	if (x == c3)
		c3_est++;
	else
		c_est++;
}

static void cli_msg(struct rmsg_conn *x, struct rmsg_msg *m, void *arg)
{
	if (rmsg_msg_len(m) == RMSG_MR_DESC_SIZE + 1 && ndesc < 2) {
		memcpy(desc[ndesc++], (const uint8_t *)rmsg_msg_data(m) + 1,
		       RMSG_MR_DESC_SIZE);
		return;
	}
	c_msgs++;
}

static void cli_close(struct rmsg_conn *x, int reason, void *arg)
{
	struct rmsg_stats st = cst(x);

	if (x == c4) {
		c4_closed++;
		c4_reason = reason;
	}
	add(&at_close_cli, &st);
	if (x == c) {
		last_c = st;
		c_gone = true;
	}
	if (x != c4)
		closes++;
}

static int srv_accept(struct rmsg_listener *l, struct rmsg_conn *x,
		      const void *pdata, size_t len, void *arg)
{
	if (len == 2 && !memcmp(pdata, "no", 2))
		return -ECONNREFUSED;
	if (len == 2 && !memcmp(pdata, "ka", 2))
		s3 = x;
	else
		s = x;
	return 0;
}

static void srv_est(struct rmsg_conn *x, void *arg)
{
	if (x == s3)
		s3_est++;
	else
		s_est++;
}

static void srv_msg(struct rmsg_conn *x, struct rmsg_msg *m, void *arg)
{
	s_msgs++;
	if (s_hold) {
		T_OK(rmsg_msg_hold(m));
		T_ASSERT(nheld < (int)(sizeof(held) / sizeof(held[0])), "held");
		held[nheld++] = m;
	}
}

static void srv_imm(struct rmsg_conn *x, uint32_t imm, size_t len, void *arg)
{
	s_imm++;
}

static void srv_close(struct rmsg_conn *x, int reason, void *arg)
{
	struct rmsg_stats st = cst(x);

	add(&at_close_srv, &st);
	if (x == s) {
		last_s = st;
		s_gone = true;
	}
	closes++;
}

static void op_done(struct rmsg_conn *x, int status, void *arg)
{
	ops_status[ops_done++] = status;
}

static void refused_done(struct rmsg_conn *x, int status, void *arg)
{
	refused_status = status;
}

/* ------------------------------------------------------------------ */

static char small[SMALL], big[BIG];

static void send_each_way(void)
{
	struct iovec si = {small, SMALL}, bi = {big, BIG};
	int i;

	for (i = 0; i < N; i++) {
		T_OK(rmsg_send(c, &si, 1, NULL, NULL));
		T_OK(rmsg_send(s, &si, 1, NULL, NULL));
	}
	for (i = 0; i < M; i++) {
		T_OK(rmsg_send(c, &bi, 1, NULL, NULL));
		T_OK(rmsg_send(s, &bi, 1, NULL, NULL));
	}
}

/* the messages' counters on one end, from @b to @a */
static void check_msgs(const char *who, const struct rmsg_stats *b,
		       const struct rmsg_stats *a)
{
	uint64_t eager = rdma ? N : N + M, rndv = rdma ? M : 0;

	printf("%s: %llu messages out (%llu eager, %llu rndv), %llu in\n", who,
	       (unsigned long long)(a->msgs_sent - b->msgs_sent),
	       (unsigned long long)(a->eager_sent - b->eager_sent),
	       (unsigned long long)(a->rndv_sent - b->rndv_sent),
	       (unsigned long long)(a->msgs_recv - b->msgs_recv));
	EQ(a->msgs_sent - b->msgs_sent, N + M);
	EQ(a->bytes_sent - b->bytes_sent, N * SMALL + M * BIG);
	EQ(a->eager_sent - b->eager_sent, eager);
	EQ(a->rndv_sent - b->rndv_sent, rndv);
	EQ(a->msgs_recv - b->msgs_recv, N + M);
	EQ(a->bytes_recv - b->bytes_recv, N * SMALL + M * BIG);
	EQ(a->eager_recv - b->eager_recv, eager);
	EQ(a->rndv_recv - b->rndv_recv, rndv);
	EQ(a->credit_stalls - b->credit_stalls, 0);
	EQ(a->sendq_full - b->sendq_full, 0);
}

/* the server exports @mr to s and sends the descriptor in a message
 * (over RDMA behind the window's bind on the same queue) */
static void send_desc(struct rmsg_mr *mr)
{
	static uint8_t buf[2][RMSG_MR_DESC_SIZE + 1];
	static int k;
	struct iovec iov = {buf[k], sizeof(buf[k])};

	T_OK(rmsg_mr_export(mr, s, 0, 0,
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			    buf[k] + 1));
	T_OK(rmsg_send(s, &iov, 1, NULL, NULL));
	k++;
}

/* 8. raw peers: TCP only */
static void raw_bad_frame(uint16_t port)
{
	int fd = raw_handshake(port);
	uint8_t b[256];

	raw_put_hdr(fd, 200, 0, 0); /* no such frame type */
	while (read(fd, b, sizeof(b)) > 0)
		;
	_exit(0);
}

static void raw_silent(uint16_t port)
{
	int fd = raw_handshake(port);
	uint8_t b[256];
	ssize_t r;

	/* reads the probes, answers none, until the server closes */
	while ((r = read(fd, b, sizeof(b))) > 0)
		;
	_exit(r == 0 ? 0 : 20);
}

static int p_closed, p_reason_proto, p_reason_ka;

static void p_close(struct rmsg_conn *x, int reason, void *arg)
{
	struct rmsg_stats st = cst(x);

	const char *why = rmsg_conn_close_reason(x);

	p_closed++;
	/* and in words (rmsg_conn_close_reason.3), naming what broke */
	printf("raw peer: closed: %s\n", why);
	if (reason == -EPROTO) {
		T_ASSERT(strstr(why, "frame of an unknown type"), "%s", why);
		p_reason_proto++;
		EQ(st.proto_errors, 1);
		EQ(st.ka_timeouts, 0);
	} else if (reason == -ETIMEDOUT) {
		T_ASSERT(!strncmp(why, "keepalive: nothing heard", 24), "%s",
			 why);
		p_reason_ka++;
		EQ(st.ka_timeouts, 1);
		T_ASSERT(st.ka_probes >= 1, "no probe before the timeout");
		EQ(st.proto_errors, 0);
	}
}

static void raw_peers(void)
{
	struct rmsg_conn_ops ops = {.on_close = p_close};
	struct rmsg_cfg *kcfg;
	struct rmsg_listener *l1, *l2;
	struct rmsg_ctx *pctx;
	struct rmsg_stats st;
	struct t_child ch1, ch2;
	int done1 = 0, done2 = 0;
	uint16_t p1, p2;
	pid_t pid;

	T_OK(rmsg_cfg_create(&kcfg));
	T_OK(rmsg_cfg_set_keepalive_ms(kcfg, 0));
	T_OK(rmsg_ctx_create(loop, kcfg, &pctx));
	T_OK(rmsg_listen(pctx, "tcp://127.0.0.1:0", kcfg, &ops, NULL, NULL,
			 &l1));
	T_OK(rmsg_cfg_set_keepalive_ms(kcfg, KA_MS));
	T_OK(rmsg_listen(pctx, "tcp://127.0.0.1:0", kcfg, &ops, NULL, NULL,
			 &l2));
	T_OK(rmsg_listener_port(l1, &p1));
	T_OK(rmsg_listener_port(l2, &p2));
	pid = fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid == 0)
		raw_bad_frame(p1);
	t_child_watch(loop, &ch1, pid, &done1, NULL);
	pid = fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid == 0)
		raw_silent(p2);
	t_child_watch(loop, &ch2, pid, &done2, NULL);
	T_RUN_UNTIL(loop, done1 && done2 && p_closed == 2, 30);
	EQ(p_reason_proto, 1);
	EQ(p_reason_ka, 1);
	st = xst(pctx);
	printf("raw peers: proto_errors %llu, ka_timeouts %llu, ka_probes "
	       "%llu\n",
	       (unsigned long long)st.proto_errors,
	       (unsigned long long)st.ka_timeouts,
	       (unsigned long long)st.ka_probes);
	EQ(st.proto_errors, 1);
	EQ(st.ka_timeouts, 1);
	EQ(st.conns_accepted, 2);
	EQ(st.conns_closed, 2);
	EQ(st.msgs_recv, 0);
	T_OK(rmsg_listener_close(l1));
	T_OK(rmsg_listener_close(l2));
	T_OK(rmsg_ctx_destroy(pctx));
	rmsg_cfg_destroy(kcfg);
}

int main(void)
{
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_msg = srv_msg,
				     .on_imm = srv_imm,
				     .on_close = srv_close};
	struct rmsg_cfg *ccfg, *kcfg, *scfg;
	struct rmsg_ctx *cctx, *sctx;
	struct rmsg_listener *lis;
	struct rmsg_stats cb, ca, sb, sa, st, sum;
	struct rmsg_mr *mr;
	uint8_t *region, *local;
	char uri[128];
	int i, n_ok = 0, eagain = 0;
	uint64_t stalls;

	t_require_transport();
	rdma = !strcmp(t_transport(), "rdma");
	loop = ev_default_loop(0);
	t_deadline(loop, 300);
	region = calloc(1, RLEN);
	local = calloc(1, RLEN);
	T_ASSERT(region && local, "calloc");

	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_keepalive_ms(ccfg, 0));
	T_OK(rmsg_cfg_set_eager_size(ccfg, EAGER));
	T_OK(rmsg_cfg_set_send_queue(ccfg, SQ));
	/* fixed grants (initial = credits): the counts below are exact for
	 * them; a grant that grows with use stalls a fresh connection's
	 * first burst (rmsg_cfg_set_credits_initial.3) */
	T_OK(rmsg_cfg_set_credits_initial(ccfg, 32));
	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_set_keepalive_ms(scfg, 0));
	T_OK(rmsg_cfg_set_eager_size(scfg, EAGER));
	T_OK(rmsg_cfg_set_credits(scfg, SCREDITS));
	T_OK(rmsg_cfg_set_credits_initial(scfg, SCREDITS));
	T_OK(rmsg_ctx_create(loop, ccfg, &cctx));
	T_OK(rmsg_ctx_create(loop, scfg, &sctx));
	T_OK(rmsg_mr_reg(sctx, region, RLEN,
			 RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			 &mr));
	t_listen(sctx, scfg, &sops, srv_accept, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, ccfg, &cops, NULL, &c));
	T_RUN_UNTIL(loop, c_est && s_est, 60);
	EQ(xst(cctx).conns_opened, 1);
	EQ(xst(sctx).conns_accepted, 1);

	/* the descriptors first: two messages s -> c, before the baseline */
	send_desc(mr);
	send_desc(mr);
	T_RUN_UNTIL(loop, ndesc == 2, 30);

	/* 1. messages each way */
	cb = cst(c);
	sb = cst(s);
	memset(small, 's', sizeof(small));
	memset(big, 'b', sizeof(big));
	send_each_way();
	T_RUN_UNTIL(loop, c_msgs == N + M && s_msgs == N + M, 60);
	/* the send side may still be completing: wait for nothing, the
	 * counters move when the message is handed over */
	ca = cst(c);
	sa = cst(s);
	check_msgs("client", &cb, &ca);
	check_msgs("server", &sb, &sa);

	/* 2. one-sided ops, c -> s */
	cb = ca;
	sb = sa;
	for (i = 0; i < W; i++) {
		struct iovec iov = {local, 512};

		T_OK(rmsg_write(c, &iov, 1, desc[0], 0, op_done, NULL));
	}
	for (i = 0; i < I; i++) {
		struct iovec iov = {local, 256};

		T_OK(rmsg_write_imm(c, &iov, 1, desc[0], 1024, (uint32_t)i,
				    op_done, NULL));
	}
	for (i = 0; i < R; i++) {
		struct iovec iov = {local + 2048, 128};

		T_OK(rmsg_read(c, &iov, 1, desc[0], 0, op_done, NULL));
	}
	T_RUN_UNTIL(loop, ops_done == W + I + R && s_imm == I, 60);
	for (i = 0; i < W + I + R; i++)
		T_ASSERT(ops_status[i] == 0, "op %d: %d", i, ops_status[i]);
	ca = cst(c);
	sa = cst(s);
	EQ(ca.writes - cb.writes, W);
	EQ(ca.writes_imm - cb.writes_imm, I);
	EQ(ca.reads - cb.reads, R);
	EQ(ca.msgs_sent - cb.msgs_sent, 0);
	EQ(ca.refused_ours - cb.refused_ours, 0);
	EQ(ca.writes_served - cb.writes_served, 0);
	EQ(sa.imm_recv - sb.imm_recv, I);
	EQ(sa.writes_served - sb.writes_served, rdma ? 0 : W + I);
	EQ(sa.reads_served - sb.reads_served, rdma ? 0 : R);
	EQ(sa.refused_peer - sb.refused_peer, 0);
	EQ(sa.writes - sb.writes, 0);
	EQ(sa.msgs_recv - sb.msgs_recv, 0);
	printf("one-sided: %d writes, %d write_imm, %d reads; served by the "
	       "library: %llu writes, %llu reads\n",
	       W, I, R,
	       (unsigned long long)(sa.writes_served - sb.writes_served),
	       (unsigned long long)(sa.reads_served - sb.reads_served));

	/* 3. credits and a full send queue: s holds what arrives */
	cb = ca;
	sb = sa;
	s_hold = true;
	s_msgs = 0;
	for (;;) {
		/* more than half the eager size: one message a frame (smaller
		 * ones that queue up go packed, several to a credit) */
		struct iovec iov = {big, LONE};
		int ret = rmsg_send(c, &iov, 1, NULL, NULL);

		if (ret == -EAGAIN) {
			eagain++;
			break;
		}
		T_OK(ret);
		n_ok++;
		T_ASSERT(n_ok <= 4 * SQ, "%d sends, the queue holds %d", n_ok,
			 SQ);
	}
	{
		struct iovec iov = {big, LONE};

		/* covers: rmsg_send.3 EAGAIN */
		T_ASSERT(rmsg_send(c, &iov, 1, NULL, NULL) == -EAGAIN,
			 "still full");
		eagain++;
	}
	EQ(cst(c).sendq_full - cb.sendq_full, 2);
	/* the messages without a credit wait, each counted once as a stall;
	 * s, holding what arrives, gets no more than the credits it granted
	 * less the one kept for returning credits (rmsg.7). A credit s
	 * returned just before (for the write_imm of part 2, over RDMA) may
	 * land after the sends and let stalled ones through: arrivals and
	 * stalls cover the sends, not always exactly */
	T_RUN_UNTIL(loop,
		    cst(c).credit_stalls > cb.credit_stalls &&
			    (uint64_t)s_msgs + cst(c).credit_stalls -
					    cb.credit_stalls >=
				    (uint64_t)n_ok,
		    30);
	t_run_for(loop, 0.2 * t_scale()); /* nothing more may arrive */
	stalls = cst(c).credit_stalls - cb.credit_stalls;
	T_ASSERT(s_msgs <= SCREDITS - 1 && s_msgs + (int)stalls >= n_ok,
		 "%d arrived with %d credits granted, %llu stalled of %d",
		 s_msgs, SCREDITS, (unsigned long long)stalls, n_ok);
	printf("credits: %d sent, %d arrived before the release, %llu "
	       "stalled; send queue full %d times\n",
	       n_ok, s_msgs, (unsigned long long)stalls, eagain);
	s_hold = false;
	for (i = 0; i < nheld; i++)
		rmsg_msg_release(held[i]);
	nheld = 0;
	T_RUN_UNTIL(loop, s_msgs == n_ok, 30);
	/* all went, each stall counted once */
	t_run_for(loop, 0.1 * t_scale());
	ca = cst(c);
	EQ(ca.credit_stalls - cb.credit_stalls, stalls);
	EQ(ca.msgs_sent - cb.msgs_sent, n_ok);
	EQ(ca.sendq_full - cb.sendq_full, 2);
	EQ(cst(s).msgs_recv - sb.msgs_recv, n_ok);

	/* 4. keepalive: c3 probes, s3 (keepalive off) answers */
	T_OK(rmsg_cfg_create(&kcfg));
	T_OK(rmsg_cfg_set_keepalive_ms(kcfg, KA_MS));
	T_OK(rmsg_cfg_set_keepalive_misses(kcfg, 1000));
	T_OK(rmsg_cfg_set_private_data(kcfg, "ka", 2));
	T_OK(rmsg_connect(cctx, uri, kcfg, &cops, NULL, &c3));
	T_RUN_UNTIL(loop, c3_est && s3_est, 60);
	T_RUN_UNTIL(loop, cst(c3).ka_probes >= 3, 30);
	st = cst(c3);
	printf("keepalive: %llu probes from c3\n",
	       (unsigned long long)st.ka_probes);
	EQ(st.ka_timeouts, 0);
	EQ(cst(s3).ka_probes, 0);
	EQ(cst(s3).ka_timeouts, 0);
	EQ(cst(c).ka_probes, 0);

	/* 5. refused by the accept callback */
	T_OK(rmsg_cfg_set_private_data(kcfg, "no", 2));
	T_OK(rmsg_connect(cctx, uri, kcfg, &cops, NULL, &c4));
	T_RUN_UNTIL(loop, c4_closed, 60);
	EQ(c4_reason, -ECONNREFUSED);
	EQ(xst(sctx).conns_refused, 1);
	EQ(xst(sctx).conns_accepted, 2);
	EQ(xst(cctx).conns_opened, 3);
	EQ(xst(cctx).conns_closed, 1);
	rmsg_cfg_destroy(kcfg);

	/* 6. a revoked descriptor */
	cb = cst(c);
	sb = cst(s);
	T_OK(t_revoke(loop, mr, desc[1]));
	{
		struct iovec iov = {local, 64};

		T_OK(rmsg_write(c, &iov, 1, desc[1], 0, refused_done, NULL));
	}
	T_RUN_UNTIL(loop, refused_status != 1, 60);
	T_ASSERT(refused_status < 0, "revoked write: %d", refused_status);
	/* (over RDMA c and s may be closed and freed by now) */
	ca = c_gone ? last_c : cst(c);
	sa = s_gone ? last_s : cst(s);
	printf("refused write: %s; c refused_ours %llu, s refused_peer "
	       "%llu\n",
	       rmsg_strerror(refused_status),
	       (unsigned long long)(ca.refused_ours - cb.refused_ours),
	       (unsigned long long)(sa.refused_peer - sb.refused_peer));
	EQ(ca.writes - cb.writes, 1);
	EQ(ca.refused_ours - cb.refused_ours, 1);
	EQ(sa.refused_peer - sb.refused_peer, rdma ? 0 : 1);
	EQ(sa.refused_ours - sb.refused_ours, 0);

	/* 7. close everything: the contexts keep the sums */
	if (rdma)
		/* the device's refusal ended c and s */
		T_RUN_UNTIL(loop, closes >= 2, 60);
	else
		T_OK(rmsg_conn_close(c));
	T_OK(rmsg_conn_close(c3));
	T_RUN_UNTIL(loop, closes == 4, 60);
	st = xst(cctx);
	sum = at_close_cli;
	sum.conns_opened = 3;
	sum.conns_closed = 3;
	/* context only; checked in 8. */
	sum.reg_taken = st.reg_taken;
	sum.reg_given = st.reg_given;
	T_ASSERT(!memcmp(&st, &sum, sizeof(st)),
		 "client context: not the sum of its connections");
	EQ(st.msgs_sent, N + M + n_ok);
	st = xst(sctx);
	sum = at_close_srv;
	sum.conns_accepted = 2;
	sum.conns_refused = 1;
	sum.conns_closed = 2;
	sum.reg_taken = st.reg_taken;
	sum.reg_given = st.reg_given;
	T_ASSERT(!memcmp(&st, &sum, sizeof(st)),
		 "server context: not the sum of its connections");
	EQ(st.msgs_sent, 2 + N + M);
	EQ(st.msgs_recv, N + M + n_ok);
	EQ(st.imm_recv, I);
	printf("contexts: client %llu messages out, server %llu in\n",
	       (unsigned long long)xst(cctx).msgs_sent,
	       (unsigned long long)st.msgs_recv);

	if (!rdma)
		raw_peers();

	/* 8. registered memory, context only: a region is charged
	 * page-rounded (rmsg_conn_stats(3)) and given back when it goes */
	{
		size_t ps = (size_t)sysconf(_SC_PAGESIZE);
		char *mem = aligned_alloc(ps, 4 * ps);
		struct rmsg_stats r0, r1, r2;
		struct rmsg_mr *rmr;

		T_ASSERT(mem, "aligned_alloc");
		r0 = xst(cctx);
		T_ASSERT(r0.reg_taken >= r0.reg_given,
			 "given back more (%llu) "
			 "than taken (%llu)",
			 (unsigned long long)r0.reg_given,
			 (unsigned long long)r0.reg_taken);
		/* 2 pages from byte 1 on span 3 pages */
		T_OK(rmsg_mr_reg(cctx, mem + 1, 2 * ps, 0, &rmr));
		r1 = xst(cctx);
		EQ(r1.reg_taken - r0.reg_taken, 3 * ps);
		EQ(r1.reg_given - r0.reg_given, 0);
		T_OK(rmsg_mr_dereg(rmr));
		r2 = xst(cctx);
		EQ(r2.reg_taken - r1.reg_taken, 0);
		EQ(r2.reg_given - r1.reg_given, 3 * ps);
		free(mem);
		printf("registered: a 3-page region taken and given back "
		       "(%zu bytes)\n",
		       3 * ps);
	}

	T_OK(rmsg_listener_close(lis));
	T_OK(rmsg_mr_dereg(mr));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(ccfg);
	rmsg_cfg_destroy(scfg);
	free(region);
	free(local);
	return 0;
}
