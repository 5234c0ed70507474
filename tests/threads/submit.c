// SPDX-License-Identifier: MIT
/*
 * submit.c - rmsg_ctx_submit(3) from other threads, as its page
 * promises it: every submitted item runs, once, on the loop thread, in
 * the order each thread submitted it, and the loop is woken for it.
 *
 *  fd mode: the loop is the test's own epoll_wait() on rmsg_ctx_fd()
 *    with rmsg_ctx_timeout(), and rmsg_ctx_progress() when readable; no
 *    libev call. Once every submitting thread has returned from its
 *    last rmsg_ctx_submit(), an item that has not run must make the
 *    descriptor readable (or the timeout 0): the test checks that
 *    without waiting, so a lost wake-up fails at once, not after a
 *    time-out. The submits come in bursts while the loop is inside
 *    rmsg_ctx_progress() and while it is about to block.
 *  libev mode: the context on a libev loop run by ev_run() on the main
 *    thread, the same bursts; the loop returns only when all ran.
 *
 *  destroy: work still queued when rmsg_ctx_destroy() starts runs
 *    there, once; what it submits then is refused (-ESHUTDOWN) and
 *    never runs.
 *
 * Every run repeats this RMSG_TEST_LOOPS times (default 200); the
 * ThreadSanitizer build runs it too (scripts/tsan.sh).
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../integration/common.h"

#define NT 3	 /* submitting threads */
#define BURST 64 /* items per thread and iteration */

struct item {
	int thread, seq;
};

static struct rmsg_ctx *ctx;
static pthread_t loop_tid;
static struct item items[NT][BURST];
static int next_seq[NT];    /* loop thread only */
static int ran;		    /* loop thread only */
static int finished;	    /* threads done submitting (atomic) */
static int go;		    /* start line (atomic) */
static struct ev_loop *evl; /* libev mode */

static void work(struct rmsg_ctx *c, void *arg)
{
	struct item *it = arg;

	T_ASSERT(c == ctx, "work ran with another context");
	T_ASSERT(pthread_equal(pthread_self(), loop_tid),
		 "work ran off the loop thread");
	T_ASSERT(it->seq == next_seq[it->thread],
		 "thread %d: item %d ran, %d expected (order or twice)",
		 it->thread, it->seq, next_seq[it->thread]);
	next_seq[it->thread]++;
	ran++;
	if (evl && ran == NT * BURST)
		ev_break(evl, EVBREAK_ALL);
}

static void *submitter(void *arg)
{
	int t = (int)(intptr_t)arg, i;

	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		sched_yield();
	for (i = 0; i < BURST; i++) {
		items[t][i].thread = t;
		items[t][i].seq = i;
		T_OK(rmsg_ctx_submit(ctx, work, &items[t][i]));
		/* bursts of 8, then let the loop run into its pass */
		if (i % 8 == 7)
			sched_yield();
	}
	__atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void start(pthread_t *tid)
{
	int t;

	ran = 0;
	memset(next_seq, 0, sizeof(next_seq));
	__atomic_store_n(&finished, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&go, 0, __ATOMIC_RELEASE);
	for (t = 0; t < NT; t++)
		T_ASSERT(pthread_create(&tid[t], NULL, submitter,
					(void *)(intptr_t)t) == 0,
			 "pthread_create");
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
}

static void join(pthread_t *tid)
{
	int t;

	for (t = 0; t < NT; t++)
		pthread_join(tid[t], NULL);
}

/* one iteration driven by epoll_wait() on the context's descriptor */
static void fd_iteration(int ep, int iter)
{
	pthread_t tid[NT];
	struct epoll_event ev;
	int ms, n, fin;

	start(tid);
	while (ran < NT * BURST) {
		fin = __atomic_load_n(&finished, __ATOMIC_ACQUIRE);
		T_OK(rmsg_ctx_timeout(ctx, &ms));
		if (fin == NT) {
			/* every submit has returned: what is left must
			 * show, now, without waiting */
			n = epoll_wait(ep, &ev, 1, 0);
			T_ASSERT(n == 1 || ms == 0,
				 "iteration %d: %d of %d items ran, the "
				 "descriptor is not readable and "
				 "rmsg_ctx_timeout() says %d: the rest is "
				 "stranded",
				 iter, ran, NT * BURST, ms);
		} else {
			/* submitters still running: a short wait, so a
			 * loop that blocks and is woken is exercised */
			n = epoll_wait(ep, &ev, 1, ms < 0 || ms > 5 ? 5 : ms);
		}
		T_ASSERT(n >= 0, "epoll_wait");
		if (n > 0 || ms == 0)
			T_ASSERT(rmsg_ctx_progress(ctx) >= 0,
				 "rmsg_ctx_progress");
	}
	join(tid);
}

static void fd_mode(int loops)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ep, i;

	T_OK(rmsg_ctx_create_fd(NULL, &ctx));
	ep = epoll_create1(EPOLL_CLOEXEC);
	T_ASSERT(ep >= 0, "epoll_create1");
	T_ASSERT(epoll_ctl(ep, EPOLL_CTL_ADD, rmsg_ctx_fd(ctx), &ev) == 0,
		 "epoll_ctl");
	for (i = 0; i < loops; i++)
		fd_iteration(ep, i);
	T_OK(rmsg_ctx_destroy(ctx));
	close(ep);
	printf("fd mode: %d iterations of %d items from %d threads\n", loops,
	       BURST, NT);
}

/* a watcher that keeps ev_run() from returning while items are due */
static void keep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

static void ev_mode(int loops)
{
	pthread_t tid[NT];
	ev_timer keep;
	int i;

	evl = ev_loop_new(EVFLAG_AUTO);
	T_ASSERT(evl, "ev_loop_new");
	T_OK(rmsg_ctx_create(evl, NULL, &ctx));
	/* a long repeating timer: the loop blocks, and only the
	 * submits wake it */
	ev_timer_init(&keep, keep_cb, 3600., 3600.);
	ev_timer_start(evl, &keep);
	for (i = 0; i < loops; i++) {
		start(tid);
		ev_run(evl, 0);
		T_ASSERT(ran == NT * BURST, "iteration %d: %d of %d ran", i,
			 ran, NT * BURST);
		join(tid);
	}
	ev_timer_stop(evl, &keep);
	T_OK(rmsg_ctx_destroy(ctx));
	ev_loop_destroy(evl);
	evl = NULL;
	printf("libev mode: %d iterations of %d items from %d threads\n", loops,
	       BURST, NT);
}

static int late_ran, late_ret = 1;

static void late(struct rmsg_ctx *c, void *arg)
{
	(void)c;
	(void)arg;
	late_ran++;
}

static void at_destroy(struct rmsg_ctx *c, void *arg)
{
	(void)arg;
	late_ran += 100;
	late_ret = rmsg_ctx_submit(c, late, NULL);
}

static void destroy_mode(void)
{
	T_OK(rmsg_ctx_create_fd(NULL, &ctx));
	T_OK(rmsg_ctx_submit(ctx, at_destroy, NULL));
	T_OK(rmsg_ctx_destroy(ctx));
	T_ASSERT(late_ran == 100,
		 "the queued work ran %d times, its own "
		 "submit's %d",
		 late_ran / 100, late_ran % 100);
	/* covers: rmsg_ctx_submit.3 ESHUTDOWN */
	T_ASSERT(late_ret == -ESHUTDOWN, "a submit during the destroy: %d",
		 late_ret);
	printf("destroy: queued work ran once; its submit was refused\n");
}

int main(void)
{
	const char *e = getenv("RMSG_TEST_LOOPS");
	int loops = e ? atoi(e) : 200;

	if (loops < 1)
		loops = 1;
	loop_tid = pthread_self();
	fd_mode(loops);
	ev_mode(loops);
	destroy_mode();
	return 0;
}
