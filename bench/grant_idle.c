// SPDX-License-Identifier: MIT
/*
 * grant_idle.c - what a grown grant costs the receiver once its peer goes
 * quiet (issue 32; src/reclaim.c), in one process: a server context and a
 * client context on one loop. Two waves of N connections each; every
 * connection streams BURST messages of SIZE bytes (one per frame: SIZE
 * above half the eager size, so none are packed), which grows the
 * server's grant to it, and then idles. After each wave, and again after
 * IDLE seconds of quiet, it prints the server context's registered
 * memory (rmsg_ctx_stats reg_taken - reg_given) and the process's RSS.
 * Only public calls present since 0.2.0, so one binary runs against any
 * build (LD_LIBRARY_PATH) for a before and after in the same run:
 *
 *   grant_idle -u rdma://198.18.0.1 [-n 64] [-b 200] [-s 6000] [-i 5]
 */
#include "bench_common.h"

#include <ev.h>
#include <rmsg.h>

static struct ev_loop *loop;
static struct rmsg_ctx *sctx, *cctx;
static struct rmsg_conn **conns;
static int *sent;
static long recvd, goal;
static int nconn = 64, burst = 200, est;
static size_t size = 6000;
static char *buf;

static void die(const char *what, int err)
{
	fprintf(stderr, "grant_idle: %s: %s\n", what, rmsg_strerror(err));
	exit(1);
}

static long long reg_held(struct rmsg_ctx *ctx)
{
	struct rmsg_stats st;

	memset(&st, 0, sizeof(st));
	if (rmsg_ctx_stats(ctx, &st, sizeof(st)) < 0)
		return -1;
	return (long long)(st.reg_taken - st.reg_given);
}

static void report(const char *when)
{
	printf("grant_idle %-28s server_reg_kib=%lld rss_kib=%ld\n", when,
	       reg_held(sctx) / 1024, bench_rss_kib());
	fflush(stdout);
}

static void pump(int i)
{
	struct iovec iov = {buf, size};
	int ret;

	while (sent[i] < burst) {
		ret = rmsg_send(conns[i], &iov, 1, NULL, NULL);
		if (ret == -EAGAIN)
			return;
		if (ret)
			die("rmsg_send", ret);
		sent[i]++;
	}
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	est++;
	pump((int)(intptr_t)arg);
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	pump((int)(intptr_t)arg);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason)
		die("a connection closed", reason);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	recvd++;
}

static void stop_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	ev_break(l, EVBREAK_ONE);
}

static void run_for(double secs)
{
	ev_timer t;

	ev_timer_init(&t, stop_cb, secs, 0);
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
}

static void wave(const char *uri, int first, double idle, const char *name)
{
	struct rmsg_conn_ops ops = {.on_established = cli_est,
				    .on_writable = cli_writable,
				    .on_close = cli_close};
	char when[64];
	double t0 = ev_time();
	int i, ret;

	goal += (long)nconn * burst;
	for (i = first; i < first + nconn; i++) {
		ret = rmsg_connect(cctx, uri, NULL, &ops, (void *)(intptr_t)i,
				   &conns[i]);
		if (ret)
			die("rmsg_connect", ret);
	}
	while (recvd < goal) {
		ev_run(loop, EVRUN_ONCE);
		if (ev_time() - t0 > 300)
			die("the wave did not finish", ETIMEDOUT);
	}
	snprintf(when, sizeof(when), "%s done", name);
	report(when);
	run_for(idle);
	snprintf(when, sizeof(when), "%s, %.0f s idle", name, idle);
	report(when);
}

int main(int argc, char **argv)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg};
	struct rmsg_listener *l;
	const char *base = NULL;
	char uri[160];
	double idle = 5;
	uint16_t port;
	int opt, ret;

	while ((opt = getopt(argc, argv, "u:n:b:s:i:")) != -1) {
		switch (opt) {
		case 'u':
			base = optarg;
			break;
		case 'n':
			nconn = atoi(optarg);
			break;
		case 'b':
			burst = atoi(optarg);
			break;
		case 's':
			size = (size_t)atol(optarg);
			break;
		case 'i':
			idle = atof(optarg);
			break;
		default:
			base = NULL;
			optind = argc;
			break;
		}
	}
	if (!base || nconn < 1 || burst < 1 || !size) {
		fprintf(stderr, "usage: grant_idle -u SCHEME://ADDR [-n CONNS] "
				"[-b BURST] [-s SIZE] [-i IDLE_SECS]\n");
		return 2;
	}
	loop = ev_default_loop(0);
	buf = calloc(1, size);
	conns = calloc((size_t)nconn * 2, sizeof(*conns));
	sent = calloc((size_t)nconn * 2, sizeof(*sent));
	if (!buf || !conns || !sent)
		die("calloc", ENOMEM);
	if ((ret = rmsg_ctx_create(loop, NULL, &sctx)) ||
	    (ret = rmsg_ctx_create(loop, NULL, &cctx)))
		die("rmsg_ctx_create", ret);
	snprintf(uri, sizeof(uri), "%s:0", base);
	if ((ret = rmsg_listen(sctx, uri, NULL, &sops, NULL, NULL, &l)) ||
	    (ret = rmsg_listener_port(l, &port)))
		die("rmsg_listen", ret);
	snprintf(uri, sizeof(uri), "%s:%u", base, port);
	printf("grant_idle %s: %s, waves of %d connections x %d messages of "
	       "%zu B\n",
	       rmsg_version(NULL, NULL, NULL), base, nconn, burst, size);
	report("start");
	wave(uri, 0, idle, "wave 1");
	wave(uri, nconn, idle, "wave 2");
	return 0;
}
