// SPDX-License-Identifier: MIT
/*
 * conn_mem.c - memory per idle connection, and the RPC rate against the
 * number of connections (issue 20). One program, two roles:
 *
 *   conn_mem server -u URI [-n MAX_CONNS] [-v]
 *   conn_mem client -u URI -n CONNS [-c CONCURRENT] [-C CONTEXTS]
 *                   [-f MAXFAIL] [-r SECS] [-W WINDOW]
 *
 * The client opens CONNS connections to the server, at most CONCURRENT
 * connects outstanding (64 by default: rdma_cm and a listener's backlog
 * are not flooded), from CONTEXTS contexts on its one loop (1; connection
 * i on context i % CONTEXTS: a context's own limits, such as the RDMA
 * SRQ's size, then do not stop the client before the server), and sends
 * one 64 B message on each; the server echoes
 * it. Once every connection has its echo (or has failed), all of them
 * are idle: the client asks the server, on its first connection, for its
 * report. Both sides print one line:
 *
 *   conn_mem side=server conns=N rss0_kib=.. rss1_kib=.. reg0=.. reg1=..
 *            rss_per_conn_kib=.. reg_per_conn_kib=.. mem_per_conn_kib=..
 *
 * rss0 is VmRSS (/proc/self/status) with the context created, before
 * listening (the client: before connecting); rss1 with the connections
 * idle. reg is what the context holds registered (rmsg_ctx_stats:
 * reg_taken - reg_given), on RDMA pinned memory that RSS also counts once
 * touched. Per connection = (after - before) / connections that carried
 * their message; mem_per_conn_kib is the RSS figure (registered memory
 * the process touched is in it). The client also prints how many
 * connections failed and the first reason (rmsg_strerror; the server's
 * log on stderr says more, e.g. which limit refused). Once MAXFAIL
 * connects failed (64; 0: no limit) the rest are not tried (untried=):
 * under TCG a server busy refusing a thousand more connects starved the
 * keepalive of the established ones, which then died.
 *
 * -r SECS: then RPC calls (method 1, 64 B request, 64 B reply), WINDOW
 * outstanding (32 by default), each next call on the next connection in
 * turn, for SECS seconds; the client prints
 *
 *   conn_mem side=client rpc conns=N window=W calls=.. secs=.. rate=..
 *
 * and the server the calls it served between the client's 'Z' and 'D'
 * messages. Under valgrind --tool=callgrind --collect-atstart=no the
 * server collects exactly that span (CALLGRIND_TOGGLE_COLLECT on 'Z' and
 * 'D'), so instructions per RPC = the dump's total / calls served.
 *
 * Exit status 0 when the run finished (also when connections failed:
 * that is a result), 1 on an unexpected error, 2 on usage.
 */
#define _GNU_SOURCE
#include "bench_common.h"

#include <sys/resource.h>
#include <valgrind/callgrind.h>
#include <ev.h>
#include <rmsg.h>

#define MSG_LEN 64
#define METHOD 1

struct conn {
	struct rmsg_conn *c;
	int idx, up, echoed, failed, busy;
	uint8_t buf[MSG_LEN];
};

static struct ev_loop *loop;
static struct rmsg_ctx *ctx;	/* the server's; the client's first */
static struct rmsg_ctx **cctxs; /* the client's -C contexts */
static int nctx = 1;
static const char *uri;
static int verbose;
static int opt_n = 1; /* -n */

static void die(const char *what, int err)
{
	fprintf(stderr, "conn_mem: %s: %s\n", what,
		err < 0 ? rmsg_strerror(err) : strerror(err));
	exit(1);
}

static long rss_kib(void)
{
	return bench_rss_kib();
}

/* summed over the process's contexts */
static long long reg_held(void)
{
	struct rmsg_stats st;
	long long sum = 0;
	int i;

	for (i = 0; i < nctx; i++) {
		memset(&st, 0, sizeof(st));
		if (rmsg_ctx_stats(cctxs[i], &st, sizeof(st)) < 0)
			return -1;
		sum += (long long)(st.reg_taken - st.reg_given);
	}
	return sum;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void mem_line(char *buf, size_t len, const char *side, int n, long rss0,
		     long rss1, long long reg0, long long reg1)
{
	double d = n ? n : 1;

	snprintf(buf, len,
		 "conn_mem side=%s conns=%d rss0_kib=%ld rss1_kib=%ld "
		 "reg0=%lld reg1=%lld rss_per_conn_kib=%.1f "
		 "reg_per_conn_kib=%.1f mem_per_conn_kib=%.1f",
		 side, n, rss0, rss1, reg0, reg1, (rss1 - rss0) / d,
		 (reg1 - reg0) / 1024.0 / d, (rss1 - rss0) / d);
}

/* ------------------------------------------------------------------ */
/* server                                                               */

static struct {
	long rss0;
	long long reg0;
	int live, seen, reported, closes;
	unsigned long long calls;
	int collecting;
	char report[512];
} srv;

static void srv_echo_done(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_send_text(struct rmsg_conn *c, const char *text)
{
	static char out[512];
	struct iovec iov = {out, strlen(text) + 1};
	int ret;

	snprintf(out, sizeof(out), "%s", text);
	ret = rmsg_send(c, &iov, 1, NULL, NULL);
	if (ret)
		die("send report", ret);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const char *p = rmsg_msg_data(m);
	struct iovec iov = {(void *)p, rmsg_msg_len(m)};
	char text[128];
	int ret;

	if (!iov.iov_len)
		return;
	switch (p[0]) {
	case 'M': /* echo, zero copy */
		rmsg_msg_hold(m);
		ret = rmsg_send(c, &iov, 1, srv_echo_done, m);
		if (ret)
			die("echo", ret);
		break;
	case 'R': /* all idle: report */
		mem_line(srv.report, sizeof(srv.report), "server", srv.live,
			 srv.rss0, rss_kib(), srv.reg0, reg_held());
		printf("%s\n", srv.report);
		fflush(stdout);
		srv.reported = 1;
		srv_send_text(c, srv.report);
		break;
	case 'Z': /* the measured span starts */
		srv.calls = 0;
		if (!srv.collecting) {
			CALLGRIND_TOGGLE_COLLECT;
			srv.collecting = 1;
		}
		srv_send_text(c, "z");
		break;
	case 'D': /* and ends */
		if (srv.collecting) {
			CALLGRIND_TOGGLE_COLLECT;
			srv.collecting = 0;
		}
		snprintf(text, sizeof(text),
			 "conn_mem side=server rpc conns=%d calls=%llu",
			 srv.live, srv.calls);
		printf("%s\n", text);
		fflush(stdout);
		srv_send_text(c, text);
		break;
	}
}

static void srv_call(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *request, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(request),
			    rmsg_msg_len(request)};
	int ret;

	srv.calls++;
	ret = rmsg_reply(req, &iov, 1);
	if (ret)
		die("rmsg_reply", ret);
}

/* an established connection's arg becomes &srv: only those count down */
static void srv_est(struct rmsg_conn *c, void *arg)
{
	srv.live++;
	srv.seen++;
	rmsg_conn_set_arg(c, &srv);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	srv.closes++;
	if (arg == &srv)
		srv.live--;
	else if (verbose)
		fprintf(stderr,
			"conn_mem: server: on_close (%s) of a "
			"connection never established\n",
			rmsg_strerror(reason));
	/* the client closed everything after the report: done */
	if (srv.reported && !srv.live)
		ev_break(loop, EVBREAK_ALL);
}

static int run_server(void)
{
	struct rmsg_conn_ops ops = {.on_established = srv_est,
				    .on_msg = srv_msg,
				    .on_close = srv_close};
	struct rmsg_listener *l;
	struct rmsg_cfg *cfg;
	int ret;

	/* the listener's default limit (4096 connections) would stop
	 * the larger counts: lifted to what -n says (at least the default) */
	ret = rmsg_cfg_create(&cfg);
	if (!ret && opt_n > 4096)
		ret = rmsg_cfg_set_max_conns(cfg, (unsigned)opt_n);
	if (ret)
		die("cfg", ret);
	srv.rss0 = rss_kib();
	srv.reg0 = reg_held();
	ret = rmsg_handle(ctx, METHOD, srv_call, NULL);
	if (ret)
		die("rmsg_handle", ret);
	ret = rmsg_listen(ctx, uri, cfg, &ops, NULL, NULL, &l);
	rmsg_cfg_destroy(cfg);
	if (ret)
		die("rmsg_listen", ret);
	printf("conn_mem side=server listening\n");
	fflush(stdout);
	ev_run(loop, 0);
	rmsg_listener_close(l);
	return 0;
}

/* ------------------------------------------------------------------ */
/* client                                                               */

static struct {
	struct conn *conns;
	int n, conc, window, next, pending, up, echoed, failed, closed;
	int first_err, maxfail, untried;
	long rss0;
	long long reg0;
	double secs;
	/* rpc phase */
	int rpc_on, outstanding, rr;
	unsigned long long calls;
	double t0, t1;
	struct conn *ctl; /* where reports are asked for */
	ev_timer stop;
	int phase; /* 0 connecting, 1 report asked, 2 z asked, 3 rpc, 4 d */
	uint8_t req[MSG_LEN];
} cli;

static const struct rmsg_conn_ops cli_ops;

static void cli_connect_more(void)
{
	/* a server that refuses: the rest are not tried (-f) */
	if (cli.maxfail && cli.failed >= cli.maxfail && cli.next < cli.n) {
		cli.untried = cli.n - cli.next;
		cli.next = cli.n;
	}
	while (cli.next < cli.n && cli.pending < cli.conc) {
		struct conn *k = &cli.conns[cli.next++];
		int ret;

		ret = rmsg_connect(cctxs[k->idx % nctx], uri, NULL, &cli_ops, k,
				   &k->c);
		if (ret) {
			/* refused at once (a local limit): a result */
			k->failed = 1;
			cli.failed++;
			if (!cli.first_err)
				cli.first_err = ret;
			continue;
		}
		cli.pending++;
	}
}

static void cli_ask(const char *what)
{
	struct iovec iov = {(void *)what, 1};
	int ret = rmsg_send(cli.ctl->c, &iov, 1, NULL, NULL);

	if (ret)
		die("send control", ret);
}

/* -i: the connections stay idle this long before both sides measure
 * (what an idle connection gives back after a while: shm:// rings) */
static double idle_s;
static int idle_state; /* 1 waiting, 2 waited */
static ev_timer idle_t;

static void cli_maybe_idle(void);

static void idle_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
	idle_state = 2;
	cli_maybe_idle();
}

static void cli_maybe_idle(void)
{
	char line[512];
	int i;

	if (cli.phase != 0 || cli.echoed + cli.failed + cli.untried < cli.n)
		return;
	if (idle_s > 0 && idle_state < 2) {
		if (!idle_state) {
			idle_state = 1;
			ev_timer_init(&idle_t, idle_cb, idle_s, 0);
			ev_timer_start(loop, &idle_t);
		}
		return;
	}
	mem_line(line, sizeof(line), "client", cli.echoed, cli.rss0, rss_kib(),
		 cli.reg0, reg_held());
	printf("%s failed=%d untried=%d first_error=\"%s\"\n", line, cli.failed,
	       cli.untried, cli.first_err ? rmsg_strerror(cli.first_err) : "");
	fflush(stdout);
	for (i = 0; i < cli.n && !cli.ctl; i++)
		if (cli.conns[i].echoed)
			cli.ctl = &cli.conns[i];
	if (!cli.ctl) {
		fprintf(stderr, "conn_mem: no connection carried its "
				"message\n");
		exit(1);
	}
	cli.phase = 1;
	cli_ask("R");
}

static void cli_close_all(void)
{
	int i;

	for (i = 0; i < cli.n; i++)
		if (cli.conns[i].up)
			rmsg_conn_close(cli.conns[i].c);
}

static void cli_reply(struct rmsg_conn *c, int status, struct rmsg_msg *m,
		      void *arg);

static void cli_issue(void)
{
	struct iovec iov = {cli.req, MSG_LEN};

	while (cli.rpc_on && cli.outstanding < cli.window) {
		struct conn *k;
		int tries = 0, ret;

		/* the next live connection in turn */
		do {
			k = &cli.conns[cli.rr];
			cli.rr = (cli.rr + 1) % cli.n;
		} while (!k->up && ++tries < cli.n);
		if (!k->up)
			die("no connection left", ENOTCONN);
		ret = rmsg_call(k->c, METHOD, &iov, 1, 0, cli_reply, k, NULL);
		if (ret == -EAGAIN)
			return; /* on_writable */
		if (ret)
			die("rmsg_call", ret);
		cli.outstanding++;
	}
}

static void cli_reply(struct rmsg_conn *c, int status, struct rmsg_msg *m,
		      void *arg)
{
	cli.outstanding--;
	if (status)
		die("call", status);
	cli.calls++;
	if (cli.rpc_on) {
		cli_issue();
	} else if (!cli.outstanding && cli.phase == 3) {
		cli.t1 = ev_time();
		cli.phase = 4;
		cli_ask("D");
	}
}

static void cli_stop(struct ev_loop *l, ev_timer *w, int revents)
{
	cli.rpc_on = 0;
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	cli_issue();
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct conn *k = arg;
	struct iovec iov = {k->buf, MSG_LEN};
	int ret;

	k->up = 1;
	cli.up++;
	cli.pending--;
	memset(k->buf, 0, sizeof(k->buf));
	k->buf[0] = 'M';
	memcpy(k->buf + 1, &k->idx, sizeof(k->idx));
	ret = rmsg_send(c, &iov, 1, NULL, NULL);
	if (ret)
		die("send", ret);
	cli_connect_more();
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct conn *k = arg;
	const char *p = rmsg_msg_data(m);

	if (p[0] == 'M') {
		k->echoed = 1;
		cli.echoed++;
		cli_maybe_idle();
		return;
	}
	if (k != cli.ctl)
		return;
	if (cli.phase == 1) { /* the server's memory report */
		printf("%s\n", p);
		fflush(stdout);
		if (cli.secs <= 0) {
			cli_close_all();
			return;
		}
		cli.phase = 2;
		cli_ask("Z");
	} else if (cli.phase == 2) { /* 'z': the span started */
		cli.phase = 3;
		cli.rpc_on = 1;
		cli.t0 = ev_time();
		ev_timer_init(&cli.stop, cli_stop, cli.secs, 0);
		ev_timer_start(loop, &cli.stop);
		cli_issue();
	} else if (cli.phase == 4) { /* the server's count */
		double s = cli.t1 - cli.t0;

		printf("%s\n", p);
		printf("conn_mem side=client rpc conns=%d window=%d "
		       "calls=%llu secs=%.3f rate=%.0f\n",
		       cli.up, cli.window, cli.calls, s, cli.calls / s);
		fflush(stdout);
		cli.phase = 5;
		cli_close_all();
	}
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct conn *k = arg;

	if (!k->up) {
		/* a connect that failed */
		cli.pending--;
		k->failed = 1;
		cli.failed++;
		if (!cli.first_err)
			cli.first_err = reason ? reason : -ECONNABORTED;
		if (verbose)
			fprintf(stderr, "conn_mem: conn %d: %s\n", k->idx,
				rmsg_strerror(reason));
		cli_connect_more();
		cli_maybe_idle();
		return;
	}
	k->up = 0;
	cli.up--;
	cli.closed++;
	if (cli.phase < 5 && !(cli.phase >= 1 && cli.secs <= 0))
		die("a connection closed early", reason ? reason : EPIPE);
	if (!cli.up)
		ev_break(loop, EVBREAK_ALL);
}

static const struct rmsg_conn_ops cli_ops = {.on_established = cli_est,
					     .on_msg = cli_msg,
					     .on_writable = cli_writable,
					     .on_close = cli_close};

static int run_client(void)
{
	int i;

	cli.conns = calloc((size_t)cli.n, sizeof(*cli.conns));
	if (!cli.conns)
		die("calloc", ENOMEM);
	for (i = 0; i < cli.n; i++)
		cli.conns[i].idx = i;
	memset(cli.req, 'q', sizeof(cli.req));
	cli.rss0 = rss_kib();
	cli.reg0 = reg_held();
	cli_connect_more();
	cli_maybe_idle();
	ev_run(loop, 0);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: conn_mem server -u URI [-n MAX_CONNS] [-v]\n"
		"       conn_mem client -u URI -n CONNS [-c CONCURRENT] "
		"[-C CONTEXTS] [-f MAXFAIL] [-r SECS] [-W WINDOW] [-i IDLE_S] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int server, opt, ret, i;

	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "server"))
		server = 1;
	else if (!strcmp(argv[1], "client"))
		server = 0;
	else
		usage();
	cli.conc = 64;
	cli.window = 32;
	cli.maxfail = 64;
	optind = 2;
	while ((opt = getopt(argc, argv, "u:n:c:C:f:r:W:vi:")) != -1) {
		switch (opt) {
		case 'i':
			idle_s = atof(optarg);
			break;
		case 'C':
			nctx = atoi(optarg);
			break;
		case 'f':
			cli.maxfail = atoi(optarg);
			break;
		case 'u':
			uri = optarg;
			break;
		case 'n':
			opt_n = atoi(optarg);
			break;
		case 'c':
			cli.conc = atoi(optarg);
			break;
		case 'r':
			cli.secs = atof(optarg);
			break;
		case 'W':
			cli.window = atoi(optarg);
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage();
		}
	}
	cli.n = opt_n;
	if (!uri || cli.n < 1 || cli.conc < 1 || cli.window < 1 || nctx < 1)
		usage();
	raise_nofile();
	loop = ev_default_loop(0);
	if (server)
		nctx = 1;
	cctxs = calloc((size_t)nctx, sizeof(*cctxs));
	if (!cctxs)
		die("calloc", ENOMEM);
	for (i = 0; i < nctx; i++) {
		ret = rmsg_ctx_create(loop, NULL, &cctxs[i]);
		if (ret)
			die("rmsg_ctx_create", ret);
	}
	ctx = cctxs[0];
	ret = server ? run_server() : run_client();
	for (i = 0; i < nctx; i++)
		rmsg_ctx_destroy(cctxs[i]);
	return ret;
}
