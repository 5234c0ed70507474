// SPDX-License-Identifier: MIT
/*
 * link_resume.c - a resumable connection (rmsg_cfg_set_resume_ms)
 * across a link that goes silent for 2 s and comes back: both ends
 * stream numbered messages of random sizes (one in 50 up to 1 MiB) at
 * each other and make RPC calls while the link is cut. Nothing is reset:
 * each end notices by its keepalive, suspends, and the client dials
 * again until the link is back. Every message must arrive exactly once
 * and in order, every send's callback say 0 once, every call be answered
 * once, and neither end close. One-sided: a region the server exported
 * to the connection before the cut, and one it exported once it suspended,
 * are written and read back by the client after the resume with the
 * descriptors it had (over RDMA the windows were bound again on the new
 * QP: rekey.c).
 *
 * LINK_FAILOVER=1: rdma+tcp:// (auto:// without its same-host step: both
 * ends are on this VM), and RoCE's packets are dropped from the cut
 * on: the connection resumes over TCP. LINK_FAILOVER=2: the same, then
 * the drop is lifted once both ends run on TCP, and the client's probes
 * must bring the connection back to RDMA by themselves while the last
 * quarter of the stream trickles across the switch (start.c); LINK_CUT
 * and LINK_HEAL may also remove the client's rxe device and add it
 * back (link_cut.sh). LINK_WHAT names the case in the summary line.
 *
 * RMSG_TEST_TRANSPORT=tcp from tests/fault/link_resume.sh (a network
 * namespace on the host), tcp and rdma from tests/fault/link_cut.sh in
 * the test VM; both build the veth pair and pass LINK_A, LINK_B,
 * LINK_CUT, LINK_HEAL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../integration/common.h"

#define NMSG 4000
#define MAXLEN 4096
#define KA_MS 300
#define M_ECHO 3
#define NCALL 100

static struct ev_loop *loop;
static const char *cut_cmd, *heal_cmd;
/* LINK_FAILOVER=1: rdma+tcp://, and the cut (of RDMA's packets only) lasts
 * to the end: the connection resumes over TCP; 2: and then moves back */
static int failover;
/* failover 2: the connection is back on RDMA; until then the last
 * quarter of each stream goes a message per trickle tick */
static int back;
static uint64_t trickled[2];
static ev_tstamp t_back;

struct side {
	struct rmsg_conn *c;
	uint64_t next_out, next_in;
	int sent_ok, send_err, closed, reason;
};
static struct side sd[2]; /* 0: server, 1: client */
static int calls_ok, calls_err, calls_out;
static uint64_t calls_next;
static int cut_done, healed;
static ev_tstamp t_cut, t_heal, t_flow;

/* one-sided: the server's region, exported before the cut (desc[0]),
 * while suspended (desc[1]) and, failover 2, while on TCP (desc[2]),
 * each a third of it */
#define REG_LEN (64 << 10)
#define REG_ALL (REG_LEN / 2 * 3)
static uint8_t *region;
static struct rmsg_mr *mr;
static uint8_t desc[3][RMSG_MR_DESC_SIZE];
static int exported_suspended, rma_done, rma_err;

static size_t msg_len(uint64_t n, int side)
{
	uint64_t h = n * 2654435761u + (unsigned)side * 977u;

	if (n % 50 == 7)
		return (64 << 10) + (size_t)(h % ((1 << 20) - (64 << 10)));
	return 8 + (size_t)(h % (MAXLEN - 8));
}

static void send_done(struct rmsg_conn *c, int st, void *arg)
{
	int side = c == sd[0].c ? 0 : 1;

	T_ASSERT(!sd[side].closed, "a send's callback after on_close");
	free(arg);
	if (st) {
		if (!sd[side].send_err)
			fprintf(stderr, "side %d: a send failed: %s\n", side,
				rmsg_strerror(st));
		sd[side].send_err++;
	} else {
		sd[side].sent_ok++;
	}
}

static void pump(int side)
{
	uint64_t lim = NMSG;

	if (failover == 2 && !back)
		lim = NMSG * 3 / 4 + trickled[side];
	if (lim > NMSG)
		lim = NMSG;
	while (sd[side].next_out < lim) {
		uint64_t n = sd[side].next_out;
		size_t len = msg_len(n, side);
		uint8_t *p = malloc(len);
		struct iovec iov = {p, len};

		T_ASSERT(p, "malloc");
		memcpy(p, &n, 8);
		t_fill(p + 8, len - 8, n * 2 + (uint64_t)side);
		if (rmsg_send(sd[side].c, &iov, 1, send_done, p)) {
			free(p);
			return; /* on_writable */
		}
		sd[side].next_out++;
	}
}

static void on_writable(struct rmsg_conn *c, void *arg)
{
	(void)c;
	pump((int)(intptr_t)arg);
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	int side = (int)(intptr_t)arg;
	const uint8_t *p = rmsg_msg_data(m);
	uint64_t n;

	(void)c;
	T_ASSERT(rmsg_msg_len(m) >= 8, "short message");
	memcpy(&n, p, 8);
	if (n != sd[side].next_in) {
		struct rmsg_stats s;
		size_t k, bad = 0, want = msg_len(sd[side].next_in, 1 - side);

		rmsg_conn_stats(c, &s, sizeof(s));
		for (k = 8; k + 8 <= rmsg_msg_len(m) && !bad; k += 8)
			if (t_check(p + k, 8, 0) && k > 8)
				bad = k;
		fprintf(stderr,
			"side %d: message %llu (%zu bytes; %zu expected), "
			"expected %llu; cut %d healed %d (%.2f s after the "
			"cut); suspends %llu resumes %llu rndv_recv %llu "
			"msgs_recv %llu\n",
			side, (unsigned long long)n, rmsg_msg_len(m), want,
			(unsigned long long)sd[side].next_in, cut_done, healed,
			cut_done ? ev_now(loop) - t_cut : -1.0,
			(unsigned long long)s.suspends,
			(unsigned long long)s.resumes,
			(unsigned long long)s.rndv_recv,
			(unsigned long long)s.msgs_recv);
		if (rmsg_msg_len(m) == want) {
			for (k = 0; k + 8 <= want; k += 4096) {
				uint64_t v;

				memcpy(&v, p + k, 8);
				fprintf(stderr, "  at %zu: %016llx\n", k,
					(unsigned long long)v);
				if (k > 8 * 4096)
					break;
			}
		}
	}
	T_ASSERT(n == sd[side].next_in, "side %d: message %llu, expected %llu",
		 side, (unsigned long long)n,
		 (unsigned long long)sd[side].next_in);
	T_ASSERT(rmsg_msg_len(m) == msg_len(n, 1 - side) &&
			 t_check(p + 8, rmsg_msg_len(m) - 8,
				 n * 2 + (uint64_t)(1 - side)) == 0,
		 "side %d: message %llu corrupt", side, (unsigned long long)n);
	sd[side].next_in++;
	if (healed && !t_flow)
		t_flow = ev_now(loop);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	int side = (int)(intptr_t)arg;

	sd[side].closed++;
	sd[side].reason = reason;
	fprintf(stderr, "side %d closed: %s\n", side,
		rmsg_conn_close_reason(c));
}

static void established(struct rmsg_conn *c, void *arg)
{
	sd[(int)(intptr_t)arg].c = c;
}

static uint8_t served[NCALL];

static void echo(struct rmsg_conn *c, struct rmsg_req *req,
		 struct rmsg_msg *request, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(request),
			    rmsg_msg_len(request)};
	uint64_t k;

	(void)c;
	(void)arg;
	T_ASSERT(iov.iov_len == 8, "request of %zu bytes", iov.iov_len);
	memcpy(&k, iov.iov_base, 8);
	T_ASSERT(k < NCALL && !served[k], "call %llu served twice",
		 (unsigned long long)k);
	served[k] = 1;
	T_OK(rmsg_reply(req, &iov, 1));
}

static void call_done(struct rmsg_conn *c, int st, struct rmsg_msg *rep,
		      void *arg)
{
	uint64_t *k = arg;

	(void)c;
	if (st == 0 && rep && rmsg_msg_len(rep) == 8 &&
	    memcmp(rmsg_msg_data(rep), k, 8) == 0)
		calls_ok++;
	else
		calls_err++;
	calls_out--;
	free(k);
}

/* a call every 20 ms, across the cut too */
static void calls_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	uint64_t *v;
	struct iovec iov;

	(void)l;
	(void)revents;
	if (calls_next >= NCALL) {
		ev_timer_stop(loop, w);
		return;
	}
	v = malloc(sizeof(*v));
	T_ASSERT(v, "malloc");
	*v = calls_next;
	iov.iov_base = v;
	iov.iov_len = 8;
	if (rmsg_call(sd[1].c, M_ECHO, &iov, 1, 60000, call_done, v, NULL)) {
		free(v);
		return;
	}
	calls_out++;
	calls_next++;
}

static void rma_cb(struct rmsg_conn *c, int st, void *arg)
{
	(void)c;
	if (st) {
		fprintf(stderr, "one-sided op %d: %s\n", (int)(intptr_t)arg,
			rmsg_strerror(st));
		rma_err++;
	}
	rma_done++;
}

/* the client writes @k's half of the region through desc[k], reads it
 * back, and the server's memory must hold it */
static void rma_check(int k, uint64_t seed)
{
	static uint8_t out[REG_LEN / 2], in[REG_LEN / 2];
	struct iovec wv = {out, sizeof(out)}, rv = {in, sizeof(in)};
	int want = rma_done + 2;

	t_fill(out, sizeof(out), seed);
	memset(in, 0, sizeof(in));
	T_OK(rmsg_write(sd[1].c, &wv, 1, desc[k], 0, rma_cb,
			(void *)(intptr_t)(2 * k)));
	T_OK(rmsg_read(sd[1].c, &rv, 1, desc[k], 0, rma_cb,
		       (void *)(intptr_t)(2 * k + 1)));
	T_RUN_UNTIL(loop, rma_done >= want || rma_err, 60);
	T_ASSERT(!rma_err, "one-sided ops through descriptor %d failed", k);
	T_ASSERT(memcmp(region + (size_t)k * sizeof(out), out, sizeof(out)) ==
				 0 &&
			 memcmp(in, out, sizeof(out)) == 0,
		 "descriptor %d: the region does not hold what was written", k);
}

/* the server's suspends so far */
static unsigned long long server_suspends(void)
{
	struct rmsg_stats st;

	if (rmsg_conn_stats(sd[0].c, &st, sizeof(st)) <= 0)
		return 0;
	return (unsigned long long)st.suspends;
}

/* both ends established (not suspended) over @tr */
static int both_on(const char *tr)
{
	int i;

	for (i = 0; i < 2; i++)
		if (!sd[i].c || strcmp(rmsg_conn_transport(sd[i].c), tr) ||
		    rmsg_conn_resume_state(sd[i].c) != RMSG_RESUME_ON)
			return 0;
	return 1;
}

static int both_suspended(void)
{
	return rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_SUSPENDED &&
	       rmsg_conn_resume_state(sd[1].c) == RMSG_RESUME_SUSPENDED;
}

static void run_cmd(const char *what, const char *cmd)
{
	int rc = system(cmd);

	T_ASSERT(rc == 0, "%s: '%s' exited %d", what, cmd, rc);
}

/* cuts the link once a quarter of the stream went, heals it 2 s later */
static void cut_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)revents;
	if (!cut_done) {
		if (sd[0].next_in + sd[1].next_in < NMSG / 2)
			return;
		run_cmd("cut", cut_cmd);
		cut_done = 1;
		t_cut = ev_now(loop);
		return;
	}
	/* the server suspended: now, or a moment ago (a client that fails
	 * over fast resumes it within a tick of this timer: its resume
	 * request suspends the old transport, which an RDMA QP in error
	 * ends at once) */
	if (!exported_suspended && sd[0].c &&
	    (rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_SUSPENDED ||
	     server_suspends() > 0)) {
		T_OK(rmsg_mr_export(mr, sd[0].c, REG_LEN / 2, REG_LEN / 2,
				    RMSG_ACCESS_REMOTE_WRITE |
					    RMSG_ACCESS_REMOTE_READ,
				    desc[1]));
		exported_suspended = 1;
	}
	if (failover == 2 && !healed) {
		/* heal once both run on TCP again */
		if (!exported_suspended || !both_on("tcp"))
			return;
		/* its descriptor must work over RDMA once back */
		T_OK(rmsg_mr_export(mr, sd[0].c, REG_LEN, REG_LEN / 2,
				    RMSG_ACCESS_REMOTE_WRITE |
					    RMSG_ACCESS_REMOTE_READ,
				    desc[2]));
		run_cmd("heal", heal_cmd);
		healed = 1;
		t_heal = ev_now(loop);
		return;
	}
	if (failover == 2) {
		if (!both_on("rdma"))
			return;
		back = 1;
		t_back = ev_now(loop);
		pump(0);
		pump(1);
		ev_timer_stop(loop, w);
		return;
	}
	if (!healed && failover) {
		if (!exported_suspended)
			return;
		healed = 1; /* never: TCP must carry the rest */
		t_heal = ev_now(loop);
		ev_timer_stop(loop, w);
	} else if (!healed && ev_now(loop) - t_cut >= 2.0 * t_scale() &&
		   (both_suspended() ||
		    ev_now(loop) - t_cut >= 20.0 * t_scale())) {
		/* (both must have seen the cut: over RDMA a rendezvous
		 * being read takes up to the keepalive bound plus its size
		 * at 1 MiB/s to be given up, and the QP's retries may
		 * outlast a short cut) */
		run_cmd("heal", heal_cmd);
		healed = 1;
		t_heal = ev_now(loop);
		ev_timer_stop(loop, w);
	}
}

/* failover 2: a message of each stream's last quarter per tick, until
 * the connection is back on RDMA */
static void trickle_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	int i;

	(void)l;
	(void)revents;
	if (back) {
		ev_timer_stop(loop, w);
		return;
	}
	for (i = 0; i < 2; i++) {
		if (sd[i].next_out < NMSG * 3 / 4)
			continue;
		trickled[i]++;
		pump(i);
	}
}

int main(void)
{
	struct rmsg_conn_ops ops = {.on_established = established,
				    .on_msg = on_msg,
				    .on_writable = on_writable,
				    .on_close = on_close};
	struct rmsg_stats st[2];
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx[2];
	struct rmsg_cfg *cfg;
	struct rmsg_conn *c;
	ev_timer cut, calls, trickle;
	const char *a, *b, *scheme;
	char uri[200];
	uint16_t port;
	int i;

	a = t_need_env("LINK_A", "link_resume.sh");
	b = t_need_env("LINK_B", "link_resume.sh");
	cut_cmd = t_need_env("LINK_CUT", "link_resume.sh");
	heal_cmd = t_need_env("LINK_HEAL", "link_resume.sh");
	failover = getenv("LINK_FAILOVER") ? atoi(getenv("LINK_FAILOVER")) : 0;
	loop = ev_default_loop(0);
	T_OK(rmsg_cfg_create(&cfg));
	/* a slow build (sanitizers: RMSG_TEST_SCALE) on a loaded machine
	 * needs a longer keepalive, and the cut then lasts longer than it */
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, (unsigned)(KA_MS * t_scale())));
	T_OK(rmsg_cfg_set_resume_ms(cfg, 30000));
	/* a dial into the cut link gives up soon and the next one follows
	 * (an RDMA connect request's own retries last far longer) */
	T_OK(rmsg_cfg_set_timeout_ms(cfg, (unsigned)(2000 * t_scale())));
	T_OK(rmsg_cfg_set_send_queue(cfg, 128));
	for (i = 0; i < 2; i++)
		T_OK(rmsg_ctx_create(loop, cfg, &ctx[i]));
	T_OK(rmsg_handle(ctx[0], M_ECHO, echo, NULL));
	scheme = failover ? "rdma+tcp" : t_transport();
	snprintf(uri, sizeof(uri), "%s://%s:0", scheme, a);
	T_OK(rmsg_listen(ctx[0], uri, cfg, &ops, NULL, (void *)0, &l));
	T_OK(rmsg_listener_port(l, &port));
	snprintf(uri, sizeof(uri), "%s://%s:%u?src=%s", scheme, a, port, b);
	T_OK(rmsg_connect(ctx[1], uri, cfg, &ops, (void *)1, &c));
	t_deadline(loop, 300 * t_scale());
	T_RUN_UNTIL(loop, sd[0].c && sd[1].c, 60);
	T_ASSERT(rmsg_conn_resume_state(sd[1].c) == RMSG_RESUME_ON,
		 "not resumable");
	T_ASSERT(!failover || (!strcmp(rmsg_conn_transport(sd[0].c), "rdma") &&
			       !strcmp(rmsg_conn_transport(sd[1].c), "rdma")),
		 "rdma+tcp:// did not start over RDMA");
	region = calloc(1, REG_ALL);
	T_ASSERT(region, "calloc");
	T_OK(rmsg_mr_reg(ctx[0], region, REG_ALL,
			 RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			 &mr));
	T_OK(rmsg_mr_export(mr, sd[0].c, 0, REG_LEN / 2,
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			    desc[0]));
	rma_check(0, 1); /* before the cut */
	pump(0);
	pump(1);
	ev_timer_init(&cut, cut_cb, 0.005, 0.005);
	ev_timer_start(loop, &cut);
	ev_timer_init(&calls, calls_cb, 0.02, 0.02);
	ev_timer_start(loop, &calls);
	ev_timer_init(&trickle, trickle_cb, 0.005, 0.005);
	if (failover == 2)
		ev_timer_start(loop, &trickle);
	T_RUN_UNTIL(loop,
		    (sd[0].closed || sd[1].closed) ||
			    (healed && sd[0].next_in == NMSG &&
			     sd[1].next_in == NMSG && sd[0].sent_ok == NMSG &&
			     sd[1].sent_ok == NMSG && calls_next == NCALL &&
			     !calls_out && (failover != 2 || back)),
		    240);
	ev_timer_stop(loop, &cut);
	ev_timer_stop(loop, &calls);
	ev_timer_stop(loop, &trickle);
	if (cut_done && !healed)
		run_cmd("heal", heal_cmd);
	for (i = 0; i < 2; i++) {
		T_ASSERT(!sd[i].closed, "side %d closed: %s", i,
			 rmsg_strerror(sd[i].reason));
		T_ASSERT(!sd[i].send_err, "side %d: %d sends failed", i,
			 sd[i].send_err);
		T_ASSERT(rmsg_conn_stats(sd[i].c, &st[i], sizeof(st[i])) > 0,
			 "stats");
		T_ASSERT(st[i].suspends >= 1 && st[i].resumes == st[i].suspends,
			 "side %d: %llu suspends, %llu resumes", i,
			 (unsigned long long)st[i].suspends,
			 (unsigned long long)st[i].resumes);
	}
	T_ASSERT(calls_ok == NCALL && !calls_err, "calls: %d ok, %d failed",
		 calls_ok, calls_err);
	if (failover == 2) {
		T_ASSERT(both_on("rdma"), "not back on RDMA: %s and %s",
			 rmsg_conn_transport(sd[0].c),
			 rmsg_conn_transport(sd[1].c));
		T_ASSERT(st[1].fallbacks >= 1 && st[1].failbacks >= 1 &&
				 !rmsg_conn_fallback_reason(sd[1].c),
			 "the client's way back is not visible (%llu "
			 "fallbacks, %llu failbacks, reason %s)",
			 (unsigned long long)st[1].fallbacks,
			 (unsigned long long)st[1].failbacks,
			 rmsg_conn_fallback_reason(sd[1].c));
		printf("link_resume: rdma+tcp:// back on RDMA %.2f s after the "
		       "heal (%llu fallback(s), %llu "
		       "failback(s)); %llu + %llu messages trickled across "
		       "the switch\n",
		       t_back - t_heal, (unsigned long long)st[1].fallbacks,
		       (unsigned long long)st[1].failbacks,
		       (unsigned long long)trickled[0],
		       (unsigned long long)trickled[1]);
	} else if (failover) {
		T_ASSERT(!strcmp(rmsg_conn_transport(sd[0].c), "tcp") &&
				 !strcmp(rmsg_conn_transport(sd[1].c), "tcp"),
			 "resumed over %s and %s, not TCP",
			 rmsg_conn_transport(sd[0].c),
			 rmsg_conn_transport(sd[1].c));
		T_ASSERT(st[1].fallbacks >= 1 &&
				 rmsg_conn_fallback_reason(sd[1].c),
			 "the client's fallback is not visible (%llu, %s)",
			 (unsigned long long)st[1].fallbacks,
			 rmsg_conn_fallback_reason(sd[1].c));
		printf("link_resume: RDMA cut for good: resumed over TCP "
		       "(%s)\n",
		       rmsg_conn_fallback_reason(sd[1].c));
	}
	/* the descriptors of before the cut and of the suspension, after */
	T_ASSERT(exported_suspended, "the server never suspended");
	rma_check(0, 2);
	rma_check(1, 3);
	if (failover == 2)
		rma_check(2, 4); /* exported while on TCP, used over RDMA */
	printf("link_resume (%s): the link silent for %.1f s mid-stream: %d "
	       "+ %d messages and %d calls exactly once, in order; two "
	       "exports (one made after the break) written and read back "
	       "after it; client %llu suspend(s), %llu replayed, server %llu "
	       "replayed; traffic %.2f s after the heal\n",
	       getenv("LINK_WHAT") ? getenv("LINK_WHAT")
	       : failover ? "rdma+tcp://, RDMA's packets dropped from then on"
			  : t_transport(),
	       t_heal - t_cut, NMSG, NMSG, NCALL,
	       (unsigned long long)st[1].suspends,
	       (unsigned long long)st[1].replayed,
	       (unsigned long long)st[0].replayed,
	       t_flow ? t_flow - t_heal : -1.0);
	rmsg_conn_close(sd[1].c);
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 60);
	rmsg_listener_close(l);
	T_OK(rmsg_mr_dereg(mr));
	free(region);
	for (i = 0; i < 2; i++)
		T_OK(rmsg_ctx_destroy(ctx[i]));
	rmsg_cfg_destroy(cfg);
	return 0;
}
