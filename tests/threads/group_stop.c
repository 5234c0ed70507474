// SPDX-License-Identifier: MIT
/*
 * group_stop.c - an rmsg_listen_group(3) shut down the way its page
 * says, with the threads doing it at the same time: each member's
 * thread leaves its loop and destroys its context while the home's
 * thread closes the listener, in whatever order the threads happen to
 * run. Every rmsg_ctx_destroy() returns 0, every server connection's
 * on_close runs exactly once, on its own thread, and every client
 * connection is closed.
 *
 * Member 1 runs a libev loop; member 2 is an fd-mode context driven by
 * epoll_wait() on its descriptor (hand-overs to it travel through its
 * cross-thread queue as rmsg_ctx_submit() does). The home (ctxs[0]) and
 * the client context share the main thread's loop. Connections arrive
 * while the members are busy, so hand-overs are still queued when the
 * shutdown starts in some iterations.
 *
 * RMSG_TEST_LOOPS iterations (default 200; 20 over RDMA); the
 * ThreadSanitizer build runs it too (scripts/tsan.sh).
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../integration/common.h"

#define NSRV 3
#define K 16 /* connections per iteration */

struct member {
	int idx;
	struct ev_loop *loop; /* member 1; NULL: fd mode */
	struct rmsg_ctx *ctx;
	pthread_t tid;
	ev_async stop_w;
	int stop; /* atomic: leave the loop */
	int destroy_ret;
	int yields; /* before the destroy: shuffles the order */
};

static struct member mem[NSRV];
static struct ev_loop *home_loop;
static pthread_t home_tid;
static int established[NSRV], closes[NSRV], wrong_thread, twice;
static int cli_est, cli_closed, cli_echo; /* main thread */

static void inc(int *p)
{
	__atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST);
}

static int ld(int *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static int idx_of(struct rmsg_ctx *ctx)
{
	int i;

	for (i = 0; i < NSRV; i++)
		if (mem[i].ctx == ctx) {
			pthread_t want = i ? mem[i].tid : home_tid;

			if (!pthread_equal(pthread_self(), want))
				inc(&wrong_thread);
			return i;
		}
	T_FAIL("a connection of no server context");
}

struct sconn {
	int idx, closed;
};

static void srv_est(struct rmsg_conn *c, void *arg)
{
	struct sconn *s = calloc(1, sizeof(*s));

	T_ASSERT(s, "calloc");
	s->idx = idx_of(rmsg_conn_ctx(c));
	rmsg_conn_set_arg(c, s);
	inc(&established[s->idx]);
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

	(void)arg;
	idx_of(rmsg_conn_ctx(c));
	rmsg_msg_hold(m);
	if (rmsg_send(c, &iov, 1, srv_sent, m))
		rmsg_msg_release(m);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct sconn *s = arg;

	(void)reason;
	if (!s) /* closed before it was established */
		return;
	if (idx_of(rmsg_conn_ctx(c)) != s->idx)
		inc(&wrong_thread);
	if (s->closed++)
		inc(&twice);
	inc(&closes[s->idx]);
	free(s);
}

static const struct rmsg_conn_ops sops = {
	.on_established = srv_est,
	.on_msg = srv_msg,
	.on_close = srv_close,
};

static void cli_sent(struct rmsg_conn *c, int status, void *arg)
{
	(void)c;
	(void)status;
	(void)arg;
}

static char ping[] = "ping";

static void cli_established(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {ping, sizeof(ping)};

	(void)arg;
	cli_est++;
	if (rmsg_send(c, &iov, 1, cli_sent, NULL))
		rmsg_conn_close(c);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)m;
	(void)arg;
	cli_echo++;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)reason;
	(void)arg;
	cli_closed++;
}

static const struct rmsg_conn_ops cops = {
	.on_established = cli_established,
	.on_msg = cli_msg,
	.on_close = cli_close,
};

static void stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

/* spins the scheduler a little: a different interleaving each time */
static void shuffle(int n)
{
	while (n-- > 0)
		sched_yield();
}

static void *member_main(void *arg)
{
	struct member *m = arg;

	if (m->loop) {
		ev_run(m->loop, 0);
	} else {
		struct epoll_event ev = {.events = EPOLLIN};
		int ep = epoll_create1(EPOLL_CLOEXEC), ms;

		T_ASSERT(ep >= 0, "epoll_create1");
		T_ASSERT(epoll_ctl(ep, EPOLL_CTL_ADD, rmsg_ctx_fd(m->ctx),
				   &ev) == 0,
			 "epoll_ctl");
		while (!ld(&m->stop)) {
			T_OK(rmsg_ctx_timeout(m->ctx, &ms));
			/* the stop flag is polled: wait briefly */
			if (epoll_wait(ep, &ev, 1, ms < 0 || ms > 2 ? 2 : ms) >
				    0 ||
			    ms == 0)
				T_ASSERT(rmsg_ctx_progress(m->ctx) >= 0,
					 "progress");
		}
		close(ep);
	}
	shuffle(m->yields);
	/* the documented order: out of the loop, then destroy */
	m->destroy_ret = rmsg_ctx_destroy(m->ctx);
	return NULL;
}

static void iteration(int it, const char *base_uri)
{
	struct rmsg_ctx *ctxs[NSRV], *cli;
	struct rmsg_listener *l;
	struct rmsg_conn *conn;
	char uri[128];
	uint16_t port;
	int i, target, est_total = 0, close_total = 0;

	memset(established, 0, sizeof(established));
	memset(closes, 0, sizeof(closes));
	cli_est = cli_closed = cli_echo = 0;
	T_OK(rmsg_ctx_create(home_loop, NULL, &mem[0].ctx));
	mem[1].loop = ev_loop_new(EVFLAG_AUTO);
	T_ASSERT(mem[1].loop, "ev_loop_new");
	T_OK(rmsg_ctx_create(mem[1].loop, NULL, &mem[1].ctx));
	mem[2].loop = NULL;
	T_OK(rmsg_ctx_create_fd(NULL, &mem[2].ctx));
	for (i = 0; i < NSRV; i++) {
		ctxs[i] = mem[i].ctx;
		mem[i].idx = i;
		mem[i].stop = 0;
		mem[i].destroy_ret = 1;
		mem[i].yields = (int)(t_rand() % 64);
	}
	ev_async_init(&mem[1].stop_w, stop_cb);
	ev_async_start(mem[1].loop, &mem[1].stop_w);
	T_OK(rmsg_listen_group(ctxs, NSRV, base_uri, NULL, &sops, NULL, NULL,
			       NULL, &l));
	T_OK(rmsg_listener_port(l, &port));
	for (i = 1; i < NSRV; i++)
		T_ASSERT(pthread_create(&mem[i].tid, NULL, member_main,
					&mem[i]) == 0,
			 "pthread_create");
	T_OK(rmsg_ctx_create(home_loop, NULL, &cli));
	t_uri(uri, sizeof(uri), port);
	for (i = 0; i < K; i++)
		T_OK(rmsg_connect(cli, uri, NULL, &cops, NULL, &conn));
	/* half the iterations shut down with connections still arriving
	 * (some hand-overs queued), the others once every echo is back */
	target = it % 2 ? K : (int)(t_rand() % K);
	if (it % 2)
		T_RUN_UNTIL(home_loop, cli_echo == K, 60);
	else
		T_RUN_UNTIL(home_loop, cli_est >= target, 60);

	/* the shutdown, on three threads at once */
	__atomic_store_n(&mem[2].stop, 1, __ATOMIC_SEQ_CST);
	ev_async_send(mem[1].loop, &mem[1].stop_w);
	shuffle((int)(t_rand() % 64));
	T_OK(rmsg_listener_close(l));
	for (i = 1; i < NSRV; i++) {
		pthread_join(mem[i].tid, NULL);
		T_ASSERT(mem[i].destroy_ret == 0,
			 "iteration %d: member %d: rmsg_ctx_destroy() = %d "
			 "(%s) during the group's shutdown",
			 it, i, mem[i].destroy_ret,
			 rmsg_strerror(mem[i].destroy_ret));
	}
	/* the clients learn of it; the home's own connections close
	 * with its context */
	T_OK(rmsg_ctx_destroy(mem[0].ctx));
	T_RUN_UNTIL(home_loop, cli_closed == K, 60);
	T_OK(rmsg_ctx_destroy(cli));
	for (i = 0; i < NSRV; i++) {
		T_ASSERT(ld(&closes[i]) == ld(&established[i]),
			 "iteration %d: context %d: %d established, %d "
			 "on_close",
			 it, i, ld(&established[i]), ld(&closes[i]));
		est_total += ld(&established[i]);
		close_total += ld(&closes[i]);
	}
	T_ASSERT(!ld(&wrong_thread), "a callback ran on the wrong thread");
	T_ASSERT(!ld(&twice), "a callback ran twice");
	T_ASSERT(est_total <= K && close_total == est_total, "counts");
	ev_async_stop(mem[1].loop, &mem[1].stop_w);
	ev_loop_destroy(mem[1].loop);
	for (i = 0; i < NSRV; i++)
		mem[i].ctx = NULL;
}

int main(void)
{
	const char *e = getenv("RMSG_TEST_LOOPS");
	int loops, i;
	char base[128];

	t_require_transport();
	loops = e ? atoi(e) : strcmp(t_transport(), "rdma") ? 200 : 20;
	if (loops < 1)
		loops = 1;
	t_seed(0x5eed30);
	home_loop = EV_DEFAULT;
	home_tid = pthread_self();
	t_uri(base, sizeof(base), 0);
	t_deadline(home_loop, 600 * t_scale());
	for (i = 0; i < loops; i++)
		iteration(i, base);
	printf("%s: %d iterations of a group shutdown with %d connections\n",
	       t_transport(), loops, K);
	return 0;
}
