/* SPDX-License-Identifier: MIT */
/*
 * common.h - helpers shared by the integration tests. Each test runs a
 * server and a client on one libev loop, over the transport named by
 * RMSG_TEST_TRANSPORT (tcp or rdma) at RMSG_TEST_ADDR.
 */
#ifndef RMSG_TEST_COMMON_H
#define RMSG_TEST_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <ev.h>
#include <rmsg.h>

#define T_SKIP 77

#define T_FAIL(...)                                                  \
	do {                                                         \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                        \
		fprintf(stderr, "\n");                               \
		exit(1);                                             \
	} while (0)

#define T_ASSERT(cond, ...)                                                \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "assertion '%s' failed\n", #cond); \
			T_FAIL(__VA_ARGS__);                               \
		}                                                          \
	} while (0)

#define T_OK(expr)                                            \
	do {                                                  \
		int t_ret_ = (expr);                          \
		if (t_ret_)                                   \
			T_FAIL("%s = %d (%s)", #expr, t_ret_, \
			       rmsg_strerror(t_ret_));        \
	} while (0)

/* "tcp" or "rdma" */
const char *t_transport(void);
/* scheme://addr:port for the chosen transport */
void t_uri(char *buf, size_t len, uint16_t port);
/* listens on port 0 and returns the listener's URI for clients */
void t_listen(struct rmsg_ctx *ctx, const struct rmsg_cfg *cfg,
	      const struct rmsg_conn_ops *ops, rmsg_accept_cb accept, void *arg,
	      struct rmsg_listener **l_p, char *uri, size_t len);
/* fails the test if the loop still runs after @seconds */
void t_deadline(struct ev_loop *loop, double seconds);
/* exits 77 when the transport is unavailable here */
void t_require_transport(void);
/* the value of the environment variable @name, which the script
 * @script sets; exits 77 when it is not set (run alone) */
const char *t_need_env(const char *name, const char *script);
/* deterministic PRNG (xorshift64*) */
uint64_t t_rand(void);
void t_seed(uint64_t seed);
/* log-uniform size in [lo, hi] */
size_t t_size_log(size_t lo, size_t hi);
/* fills/checks a pattern derived from (seed, offset) */
void t_fill(void *buf, size_t len, uint64_t seed);
int t_check(const void *buf, size_t len, uint64_t seed);
/* splits [0,len) into up to @max random pieces of @buf */
int t_split(void *buf, size_t len, struct iovec *iov, int max);
/* scale for slow environments: RMSG_TEST_SCALE (default 1.0) */
double t_scale(void);
/* a forked raw peer watched on the loop: once it exits, the test fails
 * unless it exited 0; then *@done is set and @then (if any) runs */
struct t_child {
	ev_child w;
	int *done;
	void (*then)(void);
};
void t_child_watch(struct ev_loop *loop, struct t_child *c, pid_t pid,
		   int *done, void (*then)(void));
/* runs @loop for @secs seconds */
void t_run_for(struct ev_loop *loop, double secs);
/* rmsg_mr_revoke(), tried again while it says -EBUSY (RDMA: the window
 * is still being bound, rmsg_mr_export.3) with the loop turning in
 * between, for at most 60 s (scaled); its last result. Not from a
 * callback */
int t_revoke(struct ev_loop *loop, struct rmsg_mr *mr, const void *desc);

/* A loop's stalls, as the library's keepalive sees them: a keepalive tick
 * that comes more than an interval after the one before restarts its
 * windows (the peer's silence, an unanswered rendezvous), since frames may
 * wait unread (src/keepalive.c). Under load (a TCG guest beside a
 * compile) that happens, so a bound on a keepalive close counts from the
 * later of its start and the end of the last stall before the close, not
 * from its start alone. The library ticks every half interval: each such
 * restart shows to a timer of 20 ms as a gap of over half the interval,
 * so watching with @gap = half the interval sees every restart (and
 * perhaps more, which makes a bound start later, never earlier). */
struct t_stalls {
	ev_timer w;
	double gap;	/* a gap longer than this is a stall */
	ev_tstamp prev; /* the timer's previous run */
	ev_tstamp end;	/* the end of the last stall; 0: none yet */
	double longest;
	int n;
};
/* starts watching @loop; the watcher does not keep the loop running */
void t_stalls_watch(struct ev_loop *loop, struct t_stalls *s, double gap);

/* runs @loop until @cond holds; fails after @max_s seconds (scaled) */
#define T_RUN_UNTIL(loop, cond, max_s)                                     \
	do {                                                               \
		double t0_ = ev_time();                                    \
		while (!(cond) && ev_time() - t0_ < (max_s)*t_scale())     \
			t_run_for((loop), 0.01);                           \
		T_ASSERT(cond, "timed out after %.1f s", (double)(max_s)); \
	} while (0)

#endif
