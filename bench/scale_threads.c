// SPDX-License-Identifier: MIT
/*
 * scale_threads - RPC rate and latency of one address served by N loop
 * threads (rmsg_listen_group, issue 20); bench/scale-threads.sh runs it.
 *
 *   scale_threads server [-T THREADS] URI
 *   scale_threads client [-n CONNS] [-c CALLS] [-w WARMUP] [-s SIZE] URI
 *
 * The server runs THREADS loop threads (default 1), one context each,
 * all serving URI through one group listener (round-robin); method 1
 * echoes its request. It prints "ready" once listening, and on SIGTERM
 * or SIGINT stops and prints "calls=N" (what its threads served).
 *
 * The client opens CONNS connections (default 64) on one context on
 * one thread; each makes WARMUP calls (default 100), then CALLS calls
 * (default 1000), one at a time (a closed loop: CONNS calls in flight in
 * all). It prints one line:
 *   conns=64 calls=64000 secs=1.234 rate=51863 p50_us=1201.3 p99_us=...
 * rate: calls answered per second between the moment every connection
 * finished its warm-up and the last answer; p50/p99: the latency of every
 * call after its connection's warm-up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ev.h>
#include <rmsg.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "scale_threads: %s: %s\n", what, rmsg_strerror(err));
	exit(1);
}

/* ------------------------------------------------------------------ */
/* server                                                               */

struct worker {
	struct ev_loop *loop;
	struct rmsg_ctx *ctx;
	pthread_t tid;
	unsigned long calls;
};

static struct worker w[RMSG_GROUP_MAX];
static unsigned nthreads = 1;
static struct rmsg_listener *lis;

static void echo(struct rmsg_conn *c, struct rmsg_req *req, struct rmsg_msg *m,
		 void *arg)
{
	struct worker *x = arg;
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	x->calls++;
	rmsg_reply(req, &iov, 1);
}

static void *run(void *arg)
{
	ev_run(((struct worker *)arg)->loop, 0);
	return NULL;
}

static void stop(struct rmsg_ctx *ctx, void *arg)
{
	ev_break(((struct worker *)arg)->loop, EVBREAK_ALL);
}

static void on_sig(struct ev_loop *loop, ev_signal *s, int revents)
{
	unsigned i;

	rmsg_listener_close(lis);
	for (i = 1; i < nthreads; i++)
		rmsg_ctx_submit(w[i].ctx, stop, &w[i]);
	ev_break(loop, EVBREAK_ALL);
}

static int server(const char *uri)
{
	static const struct rmsg_conn_ops ops;
	struct rmsg_ctx *ctxs[RMSG_GROUP_MAX];
	unsigned long calls = 0;
	ev_signal s1, s2;
	unsigned i;
	int ret;

	for (i = 0; i < nthreads; i++) {
		w[i].loop = i ? ev_loop_new(EVFLAG_AUTO) : EV_DEFAULT;
		ret = rmsg_ctx_create(w[i].loop, NULL, &w[i].ctx);
		if (ret)
			die("rmsg_ctx_create", ret);
		ret = rmsg_handle(w[i].ctx, 1, echo, &w[i]);
		if (ret)
			die("rmsg_handle", ret);
		ctxs[i] = w[i].ctx;
	}
	ret = rmsg_listen_group(ctxs, nthreads, uri, NULL, &ops, NULL, NULL,
				NULL, &lis);
	if (ret)
		die("rmsg_listen_group", ret);
	ev_signal_init(&s1, on_sig, SIGTERM);
	ev_signal_init(&s2, on_sig, SIGINT);
	ev_signal_start(EV_DEFAULT, &s1);
	ev_signal_start(EV_DEFAULT, &s2);
	for (i = 1; i < nthreads; i++)
		pthread_create(&w[i].tid, NULL, run, &w[i]);
	printf("ready\n");
	fflush(stdout);
	ev_run(EV_DEFAULT, 0);
	for (i = 1; i < nthreads; i++)
		pthread_join(w[i].tid, NULL);
	for (i = 0; i < nthreads; i++) {
		calls += w[i].calls;
		rmsg_ctx_destroy(w[i].ctx);
	}
	printf("calls=%lu\n", calls);
	return 0;
}

/* ------------------------------------------------------------------ */
/* client                                                               */

struct cc {
	struct rmsg_conn *c;
	long left; /* calls to make, warm-up included */
	double t0;
};

static unsigned nconns = 64;
static long ncalls = 1000, nwarm = 100;
static size_t size = 64;
static char *payload;
static double *lat;
static long nlat, nrate, warm_left, done_conns, errors;
static double t_start, t_end;

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void issue(struct cc *x);

static void on_reply(struct rmsg_conn *c, int status, struct rmsg_msg *m,
		     void *arg)
{
	struct cc *x = arg;
	double t = now();

	if (status) {
		errors++;
		rmsg_conn_close(c);
		return;
	}
	if (x->left < ncalls) {
		lat[nlat++] = t - x->t0;
		if (t_start > 0) { /* the rate counts once all are warm */
			nrate++;
			t_end = t;
		}
	}
	if (x->left == ncalls && --warm_left == 0)
		t_start = t; /* every connection is warm */
	issue(x);
}

static void issue(struct cc *x)
{
	struct iovec iov = {payload, size};
	int ret;

	if (x->left == 0) {
		rmsg_conn_close(x->c);
		return;
	}
	x->left--;
	x->t0 = now();
	ret = rmsg_call(x->c, 1, &iov, 1, 60000, on_reply, x, NULL);
	if (ret) {
		errors++;
		rmsg_conn_close(x->c);
	}
}

static void on_est(struct rmsg_conn *c, void *arg)
{
	issue(arg);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct cc *x = arg;

	if (reason || x->left)
		errors++;
	done_conns++;
}

static int client(const char *uri)
{
	static const struct rmsg_conn_ops ops = {
		.on_established = on_est,
		.on_close = on_close,
	};
	struct rmsg_ctx *ctx;
	struct cc *v;
	unsigned i;
	int ret;

	v = calloc(nconns, sizeof(*v));
	lat = calloc((size_t)nconns * (size_t)ncalls, sizeof(*lat));
	payload = calloc(1, size);
	if (!v || !lat || !payload)
		die("calloc", -ENOMEM);
	warm_left = nconns;
	ret = rmsg_ctx_create(EV_DEFAULT, NULL, &ctx);
	if (ret)
		die("rmsg_ctx_create", ret);
	for (i = 0; i < nconns; i++) {
		v[i].left = ncalls + nwarm;
		ret = rmsg_connect(ctx, uri, NULL, &ops, &v[i], &v[i].c);
		if (ret)
			die("rmsg_connect", ret);
	}
	ev_run(EV_DEFAULT, 0);
	rmsg_ctx_destroy(ctx);
	if (errors || nlat == 0 || t_end <= t_start) {
		fprintf(stderr, "scale_threads: %ld errors, %ld calls timed\n",
			errors, nlat);
		return 1;
	}
	qsort(lat, (size_t)nlat, sizeof(*lat), cmp);
	printf("conns=%u calls=%ld secs=%.3f rate=%.0f p50_us=%.1f "
	       "p99_us=%.1f\n",
	       nconns, nlat, t_end - t_start, (double)nrate / (t_end - t_start),
	       lat[nlat / 2] * 1e6, lat[(nlat * 99) / 100] * 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "+T:n:c:w:s:")) != -1) {
		switch (opt) {
		case 'T':
			nthreads = (unsigned)atoi(optarg);
			if (nthreads < 1 || nthreads > RMSG_GROUP_MAX)
				return 2;
			break;
		case 'n':
			nconns = (unsigned)atoi(optarg);
			break;
		case 'c':
			ncalls = atol(optarg);
			break;
		case 'w':
			nwarm = atol(optarg);
			break;
		case 's':
			size = (size_t)atol(optarg);
			break;
		default:
			return 2;
		}
	}
	if (argc - optind != 2 || nconns < 1 || ncalls < 1 || nwarm < 0 ||
	    size < 1)
		return 2;
	if (!strcmp(argv[optind], "server"))
		return server(argv[optind + 1]);
	if (!strcmp(argv[optind], "client"))
		return client(argv[optind + 1]);
	return 2;
}
