// SPDX-License-Identifier: MIT
/*
 * ownloop.c - the timer heap of a private loop (src/timer.c) and the
 * argument and state checks of the fd mode (src/ownloop.c). What the fd
 * mode does end to end is tests/integration/fdmode.c.
 */
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include "unit.h"
#include "rmsg_int.h"

/* ------------------------------------------------------------------ */
/* the heap: after any mix of starts, restarts and stops the earliest
 * deadline is the earliest of the running timers */

#define NT 200

static void t_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	(*(int *)w->data)++;
}

static void touch(void *arg)
{
	(*(int *)arg)++;
}

static double expect_next(struct rmsgi_timer *t, int n)
{
	double min = 0;
	int i;

	for (i = 0; i < n; i++)
		if (rmsgi_timer_active(&t[i]) && (!min || t[i].due < min))
			min = t[i].due;
	return min;
}

static void timers_heap(void **state)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_NOENV);
	static struct rmsgi_timer t[NT];
	struct rmsgi_timers *ts;
	int sooner = 0, fired = 0, i, round;
	double due, want;

	(void)state;
	assert_non_null(loop);
	assert_int_equal(rmsgi_timers_create(touch, NULL, &sooner, &ts), 0);
	assert_false(rmsgi_timers_next(ts, &due));
	srand(7);
	for (i = 0; i < NT; i++) {
		rmsgi_timer_init(&t[i], ts, t_cb);
		t[i].w.data = &fired;
	}
	for (round = 0; round < 2000; round++) {
		i = rand() % NT;
		switch (rand() % 3) {
		case 0:
		case 1:
			rmsgi_timer_start(loop, &t[i], 10 + rand() % 1000, 0);
			break;
		default:
			rmsgi_timer_stop(loop, &t[i]);
		}
		want = expect_next(t, NT);
		if (!want) {
			assert_false(rmsgi_timers_next(ts, &due));
		} else {
			assert_true(rmsgi_timers_next(ts, &due));
			assert_true(due == want);
		}
	}
	/* a start that became the earliest told the owner */
	assert_true(sooner > 0);
	for (i = 0; i < NT; i++)
		rmsgi_timer_stop(loop, &t[i]);
	assert_false(rmsgi_timers_next(ts, &due));
	/* one that fires leaves the heap before its callback; a repeating
	 * one stays with its next deadline */
	rmsgi_timer_start(loop, &t[0], 0.001, 0);
	rmsgi_timer_start(loop, &t[1], 0.001, 100);
	usleep(5000);
	ev_run(loop, EVRUN_NOWAIT);
	assert_int_equal(fired, 2);
	assert_true(rmsgi_timers_next(ts, &due));
	assert_true(due > rmsgi_mono_now() + 50);
	rmsgi_timer_stop(loop, &t[1]);
	assert_false(rmsgi_timers_next(ts, &due));
	rmsgi_timers_destroy(ts);
	ev_loop_destroy(loop);
}

/* ------------------------------------------------------------------ */
/* the fd mode's calls */

static int readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms);
}

struct work {
	int runs;
	int progress_ret;
};

static void work_cb(struct rmsg_ctx *ctx, void *arg)
{
	struct work *w = arg;

	w->runs++;
	/* covers: rmsg_ctx_progress.3 EBUSY */
	w->progress_ret = rmsg_ctx_progress(ctx);
}

static void *submitter(void *arg)
{
	static struct work w;

	usleep(20000);
	assert_int_equal(rmsg_ctx_submit(arg, work_cb, &w), 0);
	return &w;
}

static void fd_mode_calls(void **state)
{
	struct rmsg_ctx *ctx, *evctx;
	struct work *w;
	pthread_t th;
	int fd, ms, n, i;

	(void)state;
	/* covers: rmsg_ctx_create_fd.3 EINVAL */
	assert_int_equal(rmsg_ctx_create_fd(NULL, NULL), -EINVAL);
	assert_int_equal(rmsg_ctx_create_fd(NULL, &ctx), 0);
	/* covers: rmsg_ctx_progress.3 EINVAL */
	assert_int_equal(rmsg_ctx_progress(NULL), -EINVAL);
	assert_int_equal(rmsg_ctx_fd(NULL), -EINVAL);
	assert_int_equal(rmsg_ctx_timeout(NULL, &ms), -EINVAL);
	assert_int_equal(rmsg_ctx_timeout(ctx, NULL), -EINVAL);
	fd = rmsg_ctx_fd(ctx);
	assert_true(fd >= 0);
	assert_int_equal(rmsg_ctx_fd(ctx), fd);
	/* nothing scheduled, nothing ready */
	assert_int_equal(rmsg_ctx_timeout(ctx, &ms), 0);
	assert_int_equal(ms, -1);
	assert_int_equal(readable(fd, 0), 0);
	assert_int_equal(rmsg_ctx_progress(ctx), 0);
	/* another thread's rmsg_ctx_submit() wakes a blocked poll */
	assert_int_equal(pthread_create(&th, NULL, submitter, ctx), 0);
	assert_int_equal(readable(fd, 10000), 1);
	pthread_join(th, (void **)&w);
	assert_int_equal(w->runs, 0); /* nothing runs outside progress */
	for (i = 0; i < 10 && !w->runs; i++) {
		n = rmsg_ctx_progress(ctx);
		assert_true(n >= 0);
	}
	assert_int_equal(w->runs, 1);
	assert_int_equal(w->progress_ret, -EBUSY);
	/* handled: the descriptor is quiet again */
	assert_int_equal(readable(fd, 0), 0);
	assert_int_equal(rmsg_ctx_progress(ctx), 0);

	/* a context on the application's loop has no descriptor */
	assert_int_equal(rmsg_ctx_create(NULL, NULL, &evctx), 0);
	assert_int_equal(rmsg_ctx_fd(evctx), -EOPNOTSUPP);
	assert_int_equal(rmsg_ctx_timeout(evctx, &ms), -EOPNOTSUPP);
	assert_int_equal(rmsg_ctx_progress(evctx), 0);
	assert_int_equal(rmsg_ctx_destroy(evctx), 0);
	assert_int_equal(rmsg_ctx_destroy(ctx), 0);
}

/* out of descriptors: a clear error, nothing leaked */
static void fd_mode_emfile(void **state)
{
	struct rlimit old, lim;
	struct rmsg_ctx *ctx = NULL;
	int fds[4096], n = 0, ret;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	lim = old;
	lim.rlim_cur = 64;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	while (n < 4096 && (fds[n] = dup(0)) >= 0)
		n++;
	ret = rmsg_ctx_create_fd(NULL, &ctx);
	/* covers: rmsg_ctx_create_fd.3 EMFILE */
	assert_int_equal(ret, -EMFILE);
	assert_null(ctx);
	while (n)
		close(fds[--n]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(rmsg_ctx_create_fd(NULL, &ctx), 0);
	assert_int_equal(rmsg_ctx_destroy(ctx), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(timers_heap),
		cmocka_unit_test(fd_mode_calls),
		cmocka_unit_test(fd_mode_emfile),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
