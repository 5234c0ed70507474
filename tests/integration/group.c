// SPDX-License-Identifier: MIT
/*
 * group.c - one address served by several contexts (rmsg_listen_group),
 * each on its own thread. What rmsg_listen_group(3) promises:
 *  1. round-robin spreads connections evenly over the contexts; accept
 *     and every callback of a connection run on its context's thread;
 *     messages and RPC work on every connection; each server callback
 *     runs exactly once (on_established, on_close);
 *  2. a pick callback runs on the home's thread with the peer's address
 *     and chooses the context; an index out of range refuses the peer
 *     (-ECONNREFUSED at the client, no accept on the server);
 *  3. a member can be destroyed while the listener is open: its peers
 *     close, and round-robin serves the next ones on the others (the
 *     race of this with the listener's close is tests/threads/
 *     group_stop);
 *  4. peers on their way to a member when the listener closes are
 *     refused (the members are kept busy so that hand-overs queue up);
 *  5. the same when the home context is destroyed instead; afterwards
 *     the members can be destroyed.
 * The client runs on the main thread's loop; each server context runs
 * on a thread of its own, driven by commands through an ev_async.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <string.h>
#include <arpa/inet.h>

#include "common.h"

#define NSRV 3
#define K 12 /* connections per round */

enum cmd {
	CMD_NONE,
	CMD_LISTEN_RR,
	CMD_LISTEN_PICK,
	CMD_CLOSE,
	CMD_BLOCK,
	CMD_DESTROY
};

struct srv {
	int idx;
	struct ev_loop *loop;
	struct rmsg_ctx *ctx; /* NULL once destroyed */
	pthread_t tid;
	ev_async ctl;
	pthread_mutex_t mu;
	enum cmd cmd;
	int done; /* commands completed (atomic) */
	int ret;  /* the last command's result */
	sem_t unblock;
};

static struct srv srv[NSRV];
static struct rmsg_listener *lis; /* home thread only */
static char uri[128];
static pthread_t main_tid;

/* server side counters (atomic) */
static int accepts[NSRV], established[NSRV], closes[NSRV];
static int wrong_thread, twice, msgs, rpcs;
/* pick: calls, the context it returns next (-1: the call's index % 3),
 * the thread and families it saw */
static int pick_calls, pick_next = -1, pick_bad;

struct sconn {
	int idx;
	int est, closed;
};

static int ld(int *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static void inc(int *p)
{
	__atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST);
}

/* the context index of @ctx; the caller must be on that context's thread */
static int on_thread(struct rmsg_ctx *ctx)
{
	int i;

	for (i = 0; i < NSRV; i++)
		if (srv[i].ctx == ctx) {
			if (!pthread_equal(pthread_self(), srv[i].tid))
				inc(&wrong_thread);
			return i;
		}
	T_FAIL("a connection of no server context");
}

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t pdlen, void *arg)
{
	struct sconn *s = calloc(1, sizeof(*s));
	uint16_t port;

	T_ASSERT(s, "calloc");
	s->idx = on_thread(rmsg_conn_ctx(c));
	/* the stand-in a member's accept gets still tells the port */
	T_OK(rmsg_listener_port(l, &port));
	T_ASSERT(port != 0, "port");
	/* covers: rmsg_listener_close.3 EINVAL */
	T_ASSERT(s->idx == 0 || rmsg_listener_close(l) == -EINVAL,
		 "a member's stand-in cannot be closed");
	inc(&accepts[s->idx]);
	rmsg_conn_set_arg(c, s);
	return 0;
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	struct sconn *s = arg;

	T_ASSERT(on_thread(rmsg_conn_ctx(c)) == s->idx, "same context");
	if (s->est++)
		inc(&twice);
	inc(&established[s->idx]);
}

static void srv_sent(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	on_thread(rmsg_conn_ctx(c));
	inc(&msgs);
	rmsg_msg_hold(m);
	if (rmsg_send(c, &iov, 1, srv_sent, m))
		rmsg_msg_release(m);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct sconn *s = arg;

	T_ASSERT(on_thread(rmsg_conn_ctx(c)) == s->idx, "same context");
	if (s->closed++)
		inc(&twice);
	inc(&closes[s->idx]);
	free(s);
}

/* RPC method 1 answers with the index of the context that ran it */
static void handler(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *request, void *arg)
{
	uint32_t idx = (uint32_t)on_thread(rmsg_conn_ctx(c));
	struct iovec iov = {&idx, sizeof(idx)};

	inc(&rpcs);
	T_OK(rmsg_reply(req, &iov, 1));
}

static unsigned pick(const struct sockaddr *peer, unsigned n, void *arg)
{
	int calls = __atomic_fetch_add(&pick_calls, 1, __ATOMIC_SEQ_CST);
	int next = ld(&pick_next);

	if (!pthread_equal(pthread_self(), srv[0].tid) || n != NSRV || !peer ||
	    (peer->sa_family != AF_INET && peer->sa_family != AF_INET6))
		inc(&pick_bad);
	return next >= 0 ? (unsigned)next : (unsigned)calls % n;
}

static const struct rmsg_conn_ops sops = {
	.on_established = srv_est,
	.on_msg = srv_msg,
	.on_close = srv_close,
};

static void ctl_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct srv *s = w->data;
	struct rmsg_ctx *ctxs[NSRV];
	enum cmd cmd;
	int i, ret = 0;

	pthread_mutex_lock(&s->mu);
	cmd = s->cmd;
	s->cmd = CMD_NONE;
	pthread_mutex_unlock(&s->mu);
	switch (cmd) {
	case CMD_NONE:
		return;
	case CMD_LISTEN_RR:
	case CMD_LISTEN_PICK:
		for (i = 0; i < NSRV; i++)
			ctxs[i] = srv[i].ctx;
		t_uri(uri, sizeof(uri), 0);
		ret = rmsg_listen_group(ctxs, NSRV, uri, NULL, &sops, on_accept,
					cmd == CMD_LISTEN_PICK ? pick : NULL,
					NULL, &lis);
		if (ret == 0) {
			uint16_t port;

			T_OK(rmsg_listener_port(lis, &port));
			t_uri(uri, sizeof(uri), port);
		}
		break;
	case CMD_CLOSE:
		ret = rmsg_listener_close(lis);
		lis = NULL;
		break;
	case CMD_BLOCK:
		/* hand-overs to this context queue up meanwhile */
		__atomic_store_n(&s->ret, 0, __ATOMIC_SEQ_CST);
		inc(&s->done);
		while (sem_wait(&s->unblock) && errno == EINTR)
			;
		return;
	case CMD_DESTROY:
		ret = rmsg_ctx_destroy(s->ctx);
		if (ret == 0) {
			s->ctx = NULL;
			if (s->idx == 0)
				lis = NULL; /* closed by the destroy */
			ev_async_stop(loop, &s->ctl);
		}
		break;
	}
	__atomic_store_n(&s->ret, ret, __ATOMIC_SEQ_CST);
	inc(&s->done);
}

static void *srv_thread(void *arg)
{
	struct srv *s = arg;

	ev_run(s->loop, 0); /* until CMD_DESTROY stops ctl */
	return NULL;
}

/* server @i: a context on a loop of its own, on a thread of its own */
static void srv_start(int i)
{
	struct srv *s = &srv[i];

	s->idx = i;
	s->loop = ev_loop_new(0);
	T_ASSERT(s->loop, "ev_loop_new");
	T_OK(rmsg_ctx_create(s->loop, NULL, &s->ctx));
	T_OK(rmsg_handle(s->ctx, 1, handler, NULL));
	ev_async_init(&s->ctl, ctl_cb);
	s->ctl.data = s;
	ev_async_start(s->loop, &s->ctl);
	T_ASSERT(pthread_create(&s->tid, NULL, srv_thread, s) == 0,
		 "pthread_create");
}

/* runs @cmd on server @i's thread; waits for it (the client's loop runs
 * meanwhile) unless @nowait, and returns its result */
static int srv_cmd(int i, enum cmd cmd, bool nowait)
{
	struct srv *s = &srv[i];
	int before = ld(&s->done);

	pthread_mutex_lock(&s->mu);
	s->cmd = cmd;
	pthread_mutex_unlock(&s->mu);
	ev_async_send(s->loop, &s->ctl);
	if (nowait)
		return 0;
	T_RUN_UNTIL(EV_DEFAULT, ld(&s->done) > before, 60);
	return ld(&s->ret);
}

/* the client side */
struct cconn {
	struct rmsg_conn *c;
	int est, closes, reason, echoed, replied, ctx_idx;
};

static struct cconn cc[K];
static int cli_closes;

static void cli_sent(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0 || status == -ECANCELED, "send %d", status);
}

static void cli_reply(struct rmsg_conn *c, int status, struct rmsg_msg *m,
		      void *arg)
{
	struct cconn *x = arg;
	uint32_t idx;

	T_OK(status);
	T_ASSERT(rmsg_msg_len(m) == sizeof(idx), "reply length");
	memcpy(&idx, rmsg_msg_data(m), sizeof(idx));
	x->ctx_idx = (int)idx;
	x->replied++;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	static char ping[] = "ping";
	struct cconn *x = arg;
	struct iovec iov = {ping, 4};

	T_ASSERT(pthread_equal(pthread_self(), main_tid), "client thread");
	x->est++;
	T_OK(rmsg_send(c, &iov, 1, cli_sent, NULL));
	T_OK(rmsg_call(c, 1, &iov, 1, (uint32_t)(30000 * t_scale()), cli_reply,
		       x, NULL));
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct cconn *x = arg;

	T_ASSERT(rmsg_msg_len(m) == 4 && !memcmp(rmsg_msg_data(m), "ping", 4),
		 "echo");
	x->echoed++;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct cconn *x = arg;

	x->closes++;
	x->reason = reason;
	cli_closes++;
}

static const struct rmsg_conn_ops cops = {
	.on_established = cli_est,
	.on_msg = cli_msg,
	.on_close = cli_close,
};

static void connect_all(struct rmsg_ctx *cctx, int n)
{
	int i;

	memset(cc, 0, sizeof(cc));
	cli_closes = 0;
	for (i = 0; i < n; i++)
		T_OK(rmsg_connect(cctx, uri, NULL, &cops, &cc[i], &cc[i].c));
}

/* every client connection closed exactly once */
static void wait_closed(int n)
{
	int i;

	double t0 = ev_time();

	while (cli_closes != n && ev_time() - t0 < 120 * t_scale())
		t_run_for(EV_DEFAULT, 0.01);
	for (i = 0; i < n && cli_closes != n; i++)
		fprintf(stderr, "conn %d: est %d closes %d reason %d\n", i,
			cc[i].est, cc[i].closes, cc[i].reason);
	T_ASSERT(cli_closes == n, "%d of %d closed", cli_closes, n);
	for (i = 0; i < n; i++)
		T_ASSERT(cc[i].closes == 1, "conn %d: on_close %d times", i,
			 cc[i].closes);
}

static void close_all(int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!cc[i].closes)
			rmsg_conn_close(cc[i].c);
	wait_closed(n);
}

static int sum(const int *v)
{
	int i, t = 0;

	for (i = 0; i < NSRV; i++)
		t += ld((int *)&v[i]);
	return t;
}

static void reset_counts(void)
{
	int i;

	/* the server threads count atomically: so is the reset */
	for (i = 0; i < NSRV; i++) {
		__atomic_store_n(&accepts[i], 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&established[i], 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&closes[i], 0, __ATOMIC_SEQ_CST);
	}
}

/* 1 and 2: connections spread, messages and RPC on each */
static void round_served(struct rmsg_ctx *cctx, int expect_idx)
{
	int i, per[NSRV] = {0};

	reset_counts();
	connect_all(cctx, K);
	T_RUN_UNTIL(EV_DEFAULT, ({
			    int d = 0;
			    for (i = 0; i < K; i++)
				    d += cc[i].echoed && cc[i].replied;
			    d == K;
		    }),
		    120);
	for (i = 0; i < K; i++) {
		T_ASSERT(cc[i].est == 1, "conn %d established %d", i,
			 cc[i].est);
		T_ASSERT(cc[i].ctx_idx >= 0 && cc[i].ctx_idx < NSRV, "idx");
		per[cc[i].ctx_idx]++;
	}
	for (i = 0; i < NSRV; i++) {
		int want =
			expect_idx < 0 ? K / NSRV : (i == expect_idx ? K : 0);

		T_ASSERT(per[i] == want, "context %d served %d, not %d", i,
			 per[i], want);
		T_ASSERT(ld(&accepts[i]) == want, "context %d accepted %d", i,
			 ld(&accepts[i]));
	}
	T_RUN_UNTIL(EV_DEFAULT, sum(established) == K, 60);
	fprintf(stderr, "served on every connection; closing\n");
	close_all(K);
	T_RUN_UNTIL(EV_DEFAULT, sum(closes) == K, 60);
	for (i = 0; i < NSRV; i++)
		T_ASSERT(ld(&closes[i]) == ld(&accepts[i]), "closes %d", i);
	T_ASSERT(ld(&wrong_thread) == 0, "%d callbacks on a wrong thread",
		 ld(&wrong_thread));
	T_ASSERT(ld(&twice) == 0, "a server callback ran twice");
}

/* 4 and 5: the members are busy while their hand-overs arrive; then the
 * listener closes (@destroy false) or the home goes (true) */
static void inflight(struct rmsg_ctx *cctx, bool destroy)
{
	int i, refused = 0, home = 0;

	reset_counts();
	__atomic_store_n(&pick_calls, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&pick_next, -1, __ATOMIC_SEQ_CST);
	T_OK(srv_cmd(0, CMD_LISTEN_PICK, false));
	for (i = 1; i < NSRV; i++)
		T_OK(srv_cmd(i, CMD_BLOCK, false));
	connect_all(cctx, K);
	/* every peer has been handed over (or kept by the home), and the
	 * home's share is up */
	T_RUN_UNTIL(EV_DEFAULT, ld(&pick_calls) == K, 120);
	/* the home's share is up and answered its call: destroyed before
	 * answering, a call would fail, which is not what this checks */
	T_RUN_UNTIL(EV_DEFAULT, ({
			    int d = 0;
			    for (i = 0; i < K; i++)
				    d += cc[i].est && cc[i].replied;
			    d == K / NSRV;
		    }),
		    120);
	if (destroy)
		T_OK(srv_cmd(0, CMD_DESTROY, false));
	else
		T_OK(srv_cmd(0, CMD_CLOSE, false));
	for (i = 1; i < NSRV; i++)
		sem_post(&srv[i].unblock);
	if (!destroy) {
		/* the home's share was accepted and works */
		T_RUN_UNTIL(EV_DEFAULT, ld(&accepts[0]) == K / NSRV, 60);
		T_RUN_UNTIL(EV_DEFAULT, ({
				    int d = 0;
				    for (i = 0; i < K; i++)
					    d += cc[i].replied || cc[i].closes;
				    d == K;
			    }),
			    120);
		close_all(K);
	} else {
		wait_closed(K);
	}
	for (i = 0; i < K; i++) {
		if (cc[i].est) {
			home++;
			continue;
		}
		/* covers: rmsg_listen_group.3 ECONNREFUSED */
		T_ASSERT(cc[i].reason == -ECONNREFUSED,
			 "conn %d: a queued peer closed with %d (%s)", i,
			 cc[i].reason, rmsg_strerror(cc[i].reason));
		refused++;
	}
	T_ASSERT(ld(&accepts[1]) == 0 && ld(&accepts[2]) == 0,
		 "a member accepted a peer queued before the close");
	T_ASSERT(refused == K - K / NSRV, "refused %d", refused);
	T_ASSERT(home == ld(&accepts[0]), "home %d of %d", home,
		 ld(&accepts[0]));
	T_RUN_UNTIL(EV_DEFAULT, sum(closes) == sum(accepts), 60);
	T_ASSERT(sum(established) <= sum(accepts), "established");
	T_ASSERT(ld(&twice) == 0, "a server callback ran twice");
	T_ASSERT(ld(&wrong_thread) == 0, "a callback on a wrong thread");
	printf("group over %s: %s with hand-overs queued: %d refused, %d "
	       "home connections served\n",
	       t_transport(), destroy ? "home destroyed" : "listener closed",
	       refused, home);
}

/* 3: member 1 is destroyed on its thread while the listener is open;
 * its connections close, and the next peers go round-robin to the home
 * and member 2 only */
static void member_gone(struct rmsg_ctx *cctx)
{
	int i, per[NSRV] = {0};

	reset_counts();
	T_OK(srv_cmd(0, CMD_LISTEN_RR, false));
	connect_all(cctx, NSRV);
	T_RUN_UNTIL(EV_DEFAULT, ({
			    int d = 0;
			    for (i = 0; i < NSRV; i++)
				    d += cc[i].replied;
			    d == NSRV;
		    }),
		    120);
	T_OK(srv_cmd(1, CMD_DESTROY, false));
	/* the peer it served is closed; the others stay */
	T_RUN_UNTIL(EV_DEFAULT, cli_closes == 1, 60);
	for (i = 0; i < NSRV; i++)
		T_ASSERT(!cc[i].closes || cc[i].ctx_idx == 1,
			 "conn %d of context %d closed", i, cc[i].ctx_idx);
	T_ASSERT(ld(&closes[1]) == 1, "member 1's on_close");
	close_all(NSRV);
	/* the servers' on_close of these comes after the clients': counted
	 * after the reset below, it would never let closes equal accepts */
	T_RUN_UNTIL(EV_DEFAULT, sum(closes) == sum(accepts), 60);
	reset_counts();
	connect_all(cctx, K);
	T_RUN_UNTIL(EV_DEFAULT, ({
			    int d = 0;
			    for (i = 0; i < K; i++)
				    d += cc[i].replied;
			    d == K;
		    }),
		    120);
	for (i = 0; i < K; i++)
		per[cc[i].ctx_idx]++;
	T_ASSERT(per[1] == 0 && per[0] == K / 2 && per[2] == K / 2,
		 "served %d, %d, %d", per[0], per[1], per[2]);
	close_all(K);
	T_OK(srv_cmd(0, CMD_CLOSE, false));
	T_RUN_UNTIL(EV_DEFAULT, sum(closes) == sum(accepts), 60);
	T_ASSERT(ld(&twice) == 0, "a server callback ran twice");
	/* its thread returned from the loop: a new member 1 */
	pthread_join(srv[1].tid, NULL);
	ev_loop_destroy(srv[1].loop);
	srv_start(1);
	printf("group over %s: a member destroyed while the listener is "
	       "open: round-robin went on over the others\n",
	       t_transport());
}

int main(void)
{
	struct rmsg_ctx *cctx;
	int i;

	t_require_transport();
	main_tid = pthread_self();
	T_OK(rmsg_ctx_create(EV_DEFAULT, NULL, &cctx));
	for (i = 0; i < NSRV; i++) {
		pthread_mutex_init(&srv[i].mu, NULL);
		sem_init(&srv[i].unblock, 0, 0);
		srv_start(i);
	}
	t_deadline(EV_DEFAULT, 600);

	/* 1: round-robin */
	T_OK(srv_cmd(0, CMD_LISTEN_RR, false));
	round_served(cctx, -1);
	printf("group over %s: round-robin: %d connections, %d per context, "
	       "callbacks on their context's thread\n",
	       t_transport(), K, K / NSRV);

	T_OK(srv_cmd(0, CMD_CLOSE, false));

	/* 2: the pick callback chooses; out of range refuses */
	__atomic_store_n(&pick_next, 2, __ATOMIC_SEQ_CST);
	T_OK(srv_cmd(0, CMD_LISTEN_PICK, false));
	round_served(cctx, 2);
	T_ASSERT(ld(&pick_calls) == K, "pick calls %d", ld(&pick_calls));
	T_ASSERT(ld(&pick_bad) == 0, "pick: wrong thread, n or address");
	reset_counts();
	__atomic_store_n(&pick_next, NSRV, __ATOMIC_SEQ_CST);
	fprintf(stderr, "two peers the pick callback refuses\n");
	connect_all(cctx, 2);
	wait_closed(2);
	for (i = 0; i < 2; i++)
		T_ASSERT(cc[i].est == 0 && cc[i].reason == -ECONNREFUSED,
			 "out-of-range pick: conn %d closed with %d", i,
			 cc[i].reason);
	T_ASSERT(sum(accepts) == 0, "accept ran for a refused peer");
	T_OK(srv_cmd(0, CMD_CLOSE, false));
	printf("group over %s: pick callback: all on context 2; an index "
	       "out of range refused\n",
	       t_transport());

	/* 4: listener closed with hand-overs queued */
	inflight(cctx, false);
	/* 3: a member goes while the listener is open */
	member_gone(cctx);
	/* 5: home destroyed with hand-overs queued */
	inflight(cctx, true);
	for (i = 1; i < NSRV; i++)
		T_OK(srv_cmd(i, CMD_DESTROY, false));
	for (i = 0; i < NSRV; i++) {
		pthread_join(srv[i].tid, NULL);
		ev_loop_destroy(srv[i].loop);
	}
	T_OK(rmsg_ctx_destroy(cctx));
	return 0;
}
