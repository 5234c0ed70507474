// SPDX-License-Identifier: MIT
/*
 * rmsg-perf - latency, bandwidth and message rate of librmsg, in the
 * spirit of perftest (man/man1/rmsg-perf.1).
 *
 *   rmsg-perf [-L LOOP] [-b US] [-c CREDITS] [-R MS] [-k] server URI
 *   rmsg-perf [-o OP] [-m MODE] [-s SIZES | -a] [-n ITERS] [-w WARMUP]
 *             [-W WINDOW] [-L LOOP] [-b US] [-c CREDITS] [-R MS] [-P]
 *             client URI
 *
 * OP is send, write_imm or rpc; MODE is lat (ping-pong, half round trip),
 * bw (one-way stream) or rate (the same stream, small messages by
 * default, reported as messages per second). LOOP is ev (the context on
 * the tool's libev loop, rmsg_ctx_create()) or epoll (a context of
 * rmsg_ctx_create_fd() driven by a plain epoll_wait() loop on
 * rmsg_ctx_fd() that calls rmsg_ctx_progress()).
 *
 * One connection carries the whole size sweep. Before each size the
 * client sends a control message ('C': operation, mode, size, how many
 * messages to expect, its region descriptor) and waits for the server's
 * answer ('R': the server's region descriptor). In the bandwidth modes
 * the server answers the last message it expects with 'D', which stops
 * the client's clock: the time covers delivery, not only posting.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <ev.h>
#include <rmsg.h>

enum {
	OP_SEND,
	OP_WRITE_IMM,
	OP_RPC
};
enum {
	MODE_LAT,
	MODE_BW,
	MODE_RATE
};
static const char *const op_names[] = {"send", "write_imm", "rpc"};
static const char *const mode_names[] = {"lat", "bw", "rate"};
enum {
	LOOP_EV,   /* rmsg_ctx_create() on the tool's libev loop */
	LOOP_EPOLL /* rmsg_ctx_create_fd(), driven by epoll_loop() */
};
static const char *const loop_names[] = {"ev", "epoll"};

#define PERF_METHOD 0x7066u /* the rpc method the server serves */
#define MAX_SIZES 64
#define MAX_LINE 384

/* client to server before each size */
struct ctl {
	char tag; /* 'C' */
	uint8_t op, mode, pad[5];
	uint64_t size;	 /* bytes per message */
	uint64_t expect; /* bw and rate: messages the server answers 'D' to */
	uint64_t region; /* bytes of the client's region (write_imm) */
	unsigned char desc[RMSG_MR_DESC_SIZE]; /* the client's region */
};

/* server to client: 'R' and the server's region descriptor */
struct ready {
	char tag;
	unsigned char desc[RMSG_MR_DESC_SIZE];
};

static struct ev_loop *loop;
static struct rmsg_ctx *ctx;
static unsigned poll_us;
static int loop_mode; /* -L */
static int stop;      /* the run is over: the loop returns */
static int verbose;   /* -v: counters at the end */
static int json_out;  /* --json: one JSON object a line, no table */
static const char *prog = "rmsg-perf";

static void die(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, rmsg_strerror(err));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* from a callback: the loop returns once the callback has */
static void stop_loop(void)
{
	stop = 1;
	if (loop_mode == LOOP_EV)
		ev_break(loop, EVBREAK_ALL);
}

/* -L epoll: events handled, or the end of the tool */
static int progress(void)
{
	int ret = rmsg_ctx_progress(ctx);

	if (ret < 0)
		die("rmsg_ctx_progress", ret);
	return ret;
}

/*
 * -L epoll: what an application with a loop of its own does. The
 * context's descriptor sits in an epoll set of the application's;
 * readable means rmsg_ctx_progress(). The descriptor is level-triggered
 * and also becomes readable when one of the context's timers is due, so
 * the loop blocks without a timeout (rmsg_ctx_timeout() is for loops
 * that want one). With -b US, after each wake-up the loop spins on
 * rmsg_ctx_progress() until it has found no work for US microseconds,
 * and only then blocks again (the clock is read every 16th empty round).
 * Not inlined: compare-tcp.sh counts instructions inside it, as inside
 * ev_run() in the libev mode.
 */
static __attribute__((noinline)) void epoll_loop(void)
{
	struct epoll_event ev = {.events = EPOLLIN};
	uint64_t budget = (uint64_t)poll_us * 1000, start;
	unsigned spins;
	int epfd, fd, ret;

	fd = rmsg_ctx_fd(ctx);
	if (fd < 0)
		die("rmsg_ctx_fd", fd);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1", -errno);
	ev.data.fd = fd;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev))
		die("epoll_ctl", -errno);
	while (!stop) {
		ret = epoll_wait(epfd, &ev, 1, -1);
		if (ret < 0 && errno != EINTR)
			die("epoll_wait", -errno);
		progress();
		if (!budget)
			continue;
		spins = 0;
		start = now_ns();
		while (!stop) {
			if (progress() > 0) {
				spins = 0;
				start = now_ns();
			} else if (!(++spins & 15) &&
				   now_ns() - start >= budget) {
				break;
			}
		}
	}
	close(epfd);
}

/* until a callback calls stop_loop() */
static void run_loop(void)
{
	if (loop_mode == LOOP_EV)
		ev_run(loop, 0);
	else
		epoll_loop();
}

/* a region peers may write, also the local source of writes */
struct region {
	void *buf;
	size_t len;
	struct rmsg_mr *mr;
	bool exported; /* desc holds a live export */
	unsigned char desc[RMSG_MR_DESC_SIZE];
};

static void region_ensure(struct region *r, size_t len)
{
	int ret;

	if (r->len >= len)
		return;
	if (r->mr) {
		ret = rmsg_mr_dereg(r->mr);
		if (ret)
			die("rmsg_mr_dereg", ret);
		free(r->buf);
		r->exported = false;
	}
	r->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!r->buf)
		die("aligned_alloc", -ENOMEM);
	memset(r->buf, 0, len);
	ret = rmsg_mr_reg(ctx, r->buf, len, RMSG_ACCESS_REMOTE_WRITE, &r->mr);
	if (ret)
		die("rmsg_mr_reg", ret);
	r->len = len;
}

/* the region for the peer of @c only (over RDMA a memory window bound
 * to its queue pair, once per run: nothing per operation); the export of
 * the previous run goes */
static void region_export(struct region *r, struct rmsg_conn *c)
{
	int ret;

	if (!r->mr)
		return;
	if (r->exported)
		rmsg_mr_revoke(r->mr, r->desc);
	ret = rmsg_mr_export(r->mr, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE, r->desc);
	if (ret)
		die("rmsg_mr_export", ret);
	r->exported = true;
}

static void region_free(struct region *r)
{
	if (r->mr)
		rmsg_mr_dereg(r->mr);
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------------ */
/* server                                                               */

static struct {
	int keep, mode;
	uint64_t size, expect, got;
	struct region reg;
	unsigned char peer_desc[RMSG_MR_DESC_SIZE];
	struct ready ready; /* stays untouched while it is sent */
	char done;
} srv;

static void echo_done(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_count(struct rmsg_conn *c)
{
	struct iovec iov = {&srv.done, 1};
	int ret;

	if (++srv.got != srv.expect)
		return;
	srv.done = 'D';
	ret = rmsg_send(c, &iov, 1, NULL, NULL);
	if (ret)
		die("send D", ret);
}

static void srv_ctl(struct rmsg_conn *c, const void *p, size_t len)
{
	struct iovec iov = {&srv.ready, sizeof(srv.ready)};
	struct ctl ctl;
	int ret;

	if (len < sizeof(ctl)) {
		fprintf(stderr, "%s: short control message\n", prog);
		exit(1);
	}
	memcpy(&ctl, p, sizeof(ctl));
	srv.mode = ctl.mode;
	srv.size = ctl.size;
	srv.expect = ctl.expect;
	srv.got = 0;
	if (ctl.op == OP_WRITE_IMM) {
		region_ensure(&srv.reg, ctl.region);
		memcpy(srv.peer_desc, ctl.desc, sizeof(srv.peer_desc));
	}
	srv.ready.tag = 'R';
	region_export(&srv.reg, c);
	memcpy(srv.ready.desc, srv.reg.desc, sizeof(srv.ready.desc));
	ret = rmsg_send(c, &iov, 1, NULL, NULL);
	if (ret)
		die("send R", ret);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const char *p = rmsg_msg_data(m);
	struct iovec iov = {(void *)p, rmsg_msg_len(m)};
	int ret;

	if (!iov.iov_len)
		return;
	switch (p[0]) {
	case 'C':
		srv_ctl(c, p, iov.iov_len);
		break;
	case 'S':
		srv_count(c);
		break;
	case 'P':
		/* zero copy: the echo points into the held receive buffer */
		rmsg_msg_hold(m);
		ret = rmsg_send(c, &iov, 1, echo_done, m);
		if (ret) {
			rmsg_msg_release(m);
			die("echo", ret);
		}
		break;
	}
}

static void srv_imm(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	struct iovec iov = {srv.reg.buf, len};
	int ret;

	if (srv.mode != MODE_LAT) {
		srv_count(c);
		return;
	}
	ret = rmsg_write_imm(c, &iov, 1, srv.peer_desc, 0, imm, NULL, NULL);
	if (ret)
		die("write_imm echo", ret);
}

static void srv_call(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *request, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(request),
			    rmsg_msg_len(request)};
	int ret;

	/* ping-pong: the reply is as big as the call; else it is empty */
	ret = rmsg_reply(req, &iov, srv.mode == MODE_LAT ? 1 : 0);
	if (ret)
		die("rmsg_reply", ret);
}

/* -v: one "name value" line per counter of @st, under @what */
static void print_stats(const char *what, const struct rmsg_stats *st)
{
#define STAT(f)                                    \
	{                                          \
#f, offsetof(struct rmsg_stats, f) \
	}
	static const struct {
		const char *name;
		size_t off;
	} f[] = {
		STAT(msgs_sent),     STAT(bytes_sent),	 STAT(msgs_recv),
		STAT(bytes_recv),    STAT(eager_sent),	 STAT(rndv_sent),
		STAT(eager_recv),    STAT(rndv_recv),	 STAT(writes),
		STAT(writes_imm),    STAT(reads),	 STAT(writes_served),
		STAT(reads_served),  STAT(imm_recv),	 STAT(credit_stalls),
		STAT(sendq_full),    STAT(ka_probes),	 STAT(ka_timeouts),
		STAT(refused_peer),  STAT(refused_ours), STAT(proto_errors),
		STAT(fallbacks),     STAT(conns_opened), STAT(conns_accepted),
		STAT(conns_refused), STAT(conns_closed), STAT(auth_failures),
		STAT(packs_sent),    STAT(packed_sent),	 STAT(packs_recv),
		STAT(packed_recv),   STAT(reg_taken),	 STAT(reg_given),
	};
#undef STAT
	size_t i;

	if (json_out)
		printf("{\"counters_of\":\"%s\",\"counters\":{", what);
	else
		printf("# %s counters\n", what);
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		printf(json_out ? "%s\"%s\":%llu" : "%s#   %-15s %llu\n",
		       json_out && i ? "," : "", f[i].name,
		       (unsigned long long)*(
			       const uint64_t *)((const char *)st + f[i].off));
	if (json_out)
		printf("}}\n");
	fflush(stdout);
}

static void print_conn_stats(const char *who, struct rmsg_conn *c)
{
	struct rmsg_stats st;
	char what[64];

	if (!verbose || rmsg_conn_stats(c, &st, sizeof(st)) < 0)
		return;
	snprintf(what, sizeof(what), "%s connection (%s)", who,
		 rmsg_conn_transport(c));
	print_stats(what, &st);
}

static void print_ctx_stats(const char *who)
{
	struct rmsg_stats st;
	char what[64];

	if (!verbose || rmsg_ctx_stats(ctx, &st, sizeof(st)) < 0)
		return;
	snprintf(what, sizeof(what), "%s context", who);
	print_stats(what, &st);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	print_conn_stats("server", c);
	if (!srv.keep)
		stop_loop();
}

static int run_server(const char *uri)
{
	struct rmsg_conn_ops ops = {
		.on_msg = srv_msg, .on_imm = srv_imm, .on_close = srv_close};
	struct rmsg_listener *l;
	uint16_t port = 0;
	int ret;

	ret = rmsg_handle(ctx, PERF_METHOD, srv_call, NULL);
	if (ret)
		die("rmsg_handle", ret);
	ret = rmsg_listen(ctx, uri, NULL, &ops, NULL, NULL, &l);
	if (ret)
		die(uri, ret);
	rmsg_listener_port(l, &port);
	/* scripts wait for this line before they start the client */
	printf("rmsg-perf server port=%u\n", (unsigned)port);
	fflush(stdout);
	run_loop();
	print_ctx_stats("server");
	region_free(&srv.reg);
	return 0;
}

/* ------------------------------------------------------------------ */
/* client                                                               */

static struct {
	int op, mode, parseable;
	size_t sizes[MAX_SIZES];
	int nsizes, idx;
	long iters, warmup;
	unsigned window;
	size_t max_size;
	struct rmsg_conn *conn;
	const char *transport;
	int failed;
	/* the current size */
	size_t size;
	long done; /* round trips, or messages completed */
	uint64_t posted, total;
	int got_done;
	uint64_t t0, t1, *rtt;
	char *sbuf; /* send and rpc payload, from rmsg_buf_alloc */
	struct region reg;
	unsigned char peer_desc[RMSG_MR_DESC_SIZE];
	struct ctl ctl;
	char lines[MAX_SIZES][MAX_LINE];
	int nlines;
} cli;

static void start_size(void);
static void pump(void);

static void print_lines(void)
{
	int i;

	if (!cli.parseable && cli.nlines)
		printf("\n");
	for (i = 0; i < cli.nlines; i++)
		printf("%s\n", cli.lines[i]);
	fflush(stdout);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(void)
{
	char *line = cli.lines[cli.nlines++];
	const char *op = op_names[cli.op], *mode = mode_names[cli.mode];

	if (cli.mode == MODE_LAT) {
		long n = cli.iters, i;
		double sum = 0, med, p99;

		qsort(cli.rtt, (size_t)n, sizeof(*cli.rtt), cmp_u64);
		for (i = 0; i < n; i++)
			sum += (double)cli.rtt[i];
		med = n % 2 ? (double)cli.rtt[n / 2]
			    : ((double)cli.rtt[n / 2 - 1] +
			       (double)cli.rtt[n / 2]) /
				      2;
		p99 = (double)cli.rtt[(long)((double)(n - 1) * 0.99)];
		/* half round trips, in microseconds */
		med /= 2e3;
		sum /= (double)n * 2e3;
		p99 /= 2e3;
		if (!cli.parseable)
			printf(" %-10zu %-8ld %-13.3f %-11.3f %-10.3f %.3f\n",
			       cli.size, n, med, sum, (double)cli.rtt[0] / 2e3,
			       p99);
		snprintf(line, MAX_LINE,
			 json_out
				 ? "{\"op\":\"%s\",\"mode\":\"%s\","
				   "\"size\":%zu,\"iters\":%ld,"
				   "\"lat_us\":%.3f,\"mean_us\":%.3f,"
				   "\"min_us\":%.3f,\"p99_us\":%.3f,"
				   "\"poll_us\":%u,\"loop\":\"%s\","
				   "\"transport\":\"%s\"}"
				 : "rmsg-perf op=%s mode=%s size=%zu iters=%ld "
				   "lat_us=%.3f mean_us=%.3f min_us=%.3f "
				   "p99_us=%.3f poll_us=%u loop=%s "
				   "transport=%s",
			 op, mode, cli.size, n, med, sum,
			 (double)cli.rtt[0] / 2e3, p99, poll_us,
			 loop_names[loop_mode], cli.transport);
	} else {
		double secs = (double)(cli.t1 - cli.t0) / 1e9;
		double bytes = (double)cli.total * (double)cli.size;
		double mbps = bytes / secs / 1e6;
		double mmsgs = (double)cli.total / secs / 1e6;

		if (!cli.parseable)
			printf(" %-10zu %-8llu %-13.1f %-15.4f %.4f\n",
			       cli.size, (unsigned long long)cli.total, mbps,
			       mmsgs, secs);
		snprintf(line, MAX_LINE,
			 json_out ? "{\"op\":\"%s\",\"mode\":\"%s\","
				    "\"size\":%zu,\"iters\":%llu,"
				    "\"window\":%u,\"mbps\":%.1f,"
				    "\"mmsgs\":%.4f,\"secs\":%.4f,"
				    "\"poll_us\":%u,\"loop\":\"%s\","
				    "\"transport\":\"%s\"}"
				  : "rmsg-perf op=%s mode=%s size=%zu "
				    "iters=%llu window=%u mbps=%.1f "
				    "mmsgs=%.4f secs=%.4f poll_us=%u loop=%s "
				    "transport=%s",
			 op, mode, cli.size, (unsigned long long)cli.total,
			 cli.window, mbps, mmsgs, secs, poll_us,
			 loop_names[loop_mode], cli.transport);
	}
	fflush(stdout);
}

static void next_size(void)
{
	report();
	if (++cli.idx < cli.nsizes)
		start_size();
	else
		rmsg_conn_close(cli.conn);
}

/* lat: one round trip ended */
static void lat_step(void)
{
	if (cli.done >= cli.warmup)
		cli.rtt[cli.done - cli.warmup] = now_ns() - cli.t0;
	if (++cli.done == cli.warmup + cli.iters) {
		next_size();
		return;
	}
	pump();
}

/* bw and rate: the end needs the server's 'D' and every completion */
static void bw_check(void)
{
	if (cli.got_done && cli.done == (long)cli.total) {
		cli.t1 = now_ns();
		next_size();
	}
}

static void sent(struct rmsg_conn *c, int status, void *arg)
{
	if (status)
		die(op_names[cli.op], status);
	cli.done++;
	if (cli.got_done)
		bw_check();
	else
		pump();
}

static void replied(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		    void *arg)
{
	if (status)
		die("rmsg_call", status);
	if (cli.mode == MODE_LAT) {
		lat_step();
		return;
	}
	cli.done++;
	if (cli.done == (long)cli.total) {
		cli.got_done = 1; /* every reply is in */
		bw_check();
	} else {
		pump();
	}
}

/* one operation of the current kind; -EAGAIN is passed back */
static int post_one(void)
{
	struct iovec iov = {cli.sbuf, cli.size};
	int lat = cli.mode == MODE_LAT;

	switch (cli.op) {
	case OP_SEND:
		return rmsg_send(cli.conn, &iov, 1, lat ? NULL : sent, NULL);
	case OP_WRITE_IMM:
		iov.iov_base = cli.reg.buf;
		return rmsg_write_imm(cli.conn, &iov, 1, cli.peer_desc, 0,
				      (uint32_t)cli.posted, lat ? NULL : sent,
				      NULL);
	default:
		return rmsg_call(cli.conn, PERF_METHOD, &iov, 1, 0, replied,
				 NULL, NULL);
	}
}

static void pump(void)
{
	int ret;

	if (cli.mode == MODE_LAT) {
		cli.t0 = now_ns();
		ret = post_one();
		if (ret)
			die(op_names[cli.op], ret);
		cli.posted++;
		return;
	}
	while (cli.posted - (uint64_t)cli.done < cli.window &&
	       cli.posted < cli.total) {
		ret = post_one();
		if (ret == -EAGAIN)
			return; /* on_writable follows */
		if (ret)
			die(op_names[cli.op], ret);
		cli.posted++;
	}
}

static void start_size(void)
{
	struct iovec iov = {&cli.ctl, sizeof(cli.ctl)};
	int ret;

	cli.size = cli.sizes[cli.idx];
	cli.done = 0;
	cli.posted = 0;
	cli.got_done = 0;
	cli.total = cli.mode == MODE_LAT ? (uint64_t)(cli.warmup + cli.iters)
					 : (uint64_t)cli.iters;
	if (cli.op == OP_SEND)
		cli.sbuf[0] = cli.mode == MODE_LAT ? 'P' : 'S';
	memset(&cli.ctl, 0, sizeof(cli.ctl));
	cli.ctl.tag = 'C';
	cli.ctl.op = (uint8_t)cli.op;
	cli.ctl.mode = (uint8_t)cli.mode;
	cli.ctl.size = cli.size;
	/* rpc streams end on the last reply; the others on 'D' */
	cli.ctl.expect =
		cli.mode == MODE_LAT || cli.op == OP_RPC ? 0 : cli.total;
	cli.ctl.region = cli.max_size;
	region_export(&cli.reg, cli.conn);
	memcpy(cli.ctl.desc, cli.reg.desc, sizeof(cli.ctl.desc));
	ret = rmsg_send(cli.conn, &iov, 1, NULL, NULL);
	if (ret)
		die("send C", ret);
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	cli.transport = rmsg_conn_transport(c);
	if (!cli.parseable) {
		printf("# rmsg-perf %s %s over %s, %s", op_names[cli.op],
		       mode_names[cli.mode], cli.transport,
		       poll_us ? "busy-poll" : "event mode");
		if (poll_us)
			printf(" %u us", poll_us);
		printf(", %s", loop_mode == LOOP_EV ? "libev loop"
						    : "epoll loop (fd mode)");
		if (cli.mode != MODE_LAT)
			printf(", window %u", cli.window);
		printf("\n");
		if (cli.mode == MODE_LAT)
			printf(" %-10s %-8s %-13s %-11s %-10s %s\n", "#bytes",
			       "iters", "t_median[us]", "t_mean[us]",
			       "t_min[us]", "t_p99[us]");
		else
			printf(" %-10s %-8s %-13s %-15s %s\n", "#bytes",
			       "iters", "BW[MB/s]", "rate[Mmsg/s]", "secs");
		fflush(stdout);
	}
	start_size();
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const char *p = rmsg_msg_data(m);
	size_t len = rmsg_msg_len(m);

	if (!len)
		return;
	switch (p[0]) {
	case 'R':
		if (len >= sizeof(struct ready))
			memcpy(cli.peer_desc, ((const struct ready *)p)->desc,
			       sizeof(cli.peer_desc));
		if (cli.mode != MODE_LAT)
			cli.t0 = now_ns();
		pump();
		break;
	case 'D':
		cli.got_done = 1;
		bw_check();
		break;
	case 'P':
		lat_step();
		break;
	}
}

static void cli_imm(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	if (cli.mode == MODE_LAT && cli.op == OP_WRITE_IMM)
		lat_step();
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	if (cli.mode != MODE_LAT)
		pump();
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	print_conn_stats("client", c);
	cli.failed = reason;
	stop_loop();
}

static int run_client(const char *uri)
{
	struct rmsg_conn_ops ops = {.on_established = cli_est,
				    .on_msg = cli_msg,
				    .on_imm = cli_imm,
				    .on_writable = cli_writable,
				    .on_close = cli_close};
	int ret, i;

	cli.transport = "none";
	for (i = 0; i < cli.nsizes; i++)
		if (cli.sizes[i] > cli.max_size)
			cli.max_size = cli.sizes[i];
	ret = rmsg_buf_alloc(ctx, cli.max_size, (void **)&cli.sbuf);
	if (ret)
		die("rmsg_buf_alloc", ret);
	memset(cli.sbuf, 0, cli.max_size);
	if (cli.op == OP_WRITE_IMM)
		region_ensure(&cli.reg, cli.max_size);
	if (cli.mode == MODE_LAT) {
		cli.rtt = calloc((size_t)cli.iters, sizeof(*cli.rtt));
		if (!cli.rtt)
			die("calloc", -ENOMEM);
	}
	ret = rmsg_connect(ctx, uri, NULL, &ops, NULL, &cli.conn);
	if (ret)
		die(uri, ret);
	run_loop();
	print_lines();
	print_ctx_stats("client");
	if (cli.failed)
		die("connection", cli.failed);
	if (cli.idx != cli.nsizes) {
		fprintf(stderr,
			"%s: the connection ended early (%d of %d "
			"sizes)\n",
			prog, cli.idx, cli.nsizes);
		return 1;
	}
	region_free(&cli.reg);
	rmsg_buf_free(ctx, cli.sbuf);
	free(cli.rtt);
	return 0;
}

/* ------------------------------------------------------------------ */

/* usage(0): the help on stdout; otherwise the synopsis on stderr */
static void usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: %s [-L ev|epoll] [-b US] [-c CREDITS] [-R MS] [-k] "
		"[-v] "
		"server URI\n"
		"       %s [-o send|write_imm|rpc] [-m lat|bw|rate]\n"
		"                 [-s SIZE,... | -a] [-n ITERS] [-w WARMUP] "
		"[-W WINDOW]\n"
		"                 [-L ev|epoll] [-b US] [-c CREDITS] [-R MS] "
		"[-P | "
		"--json] "
		"[-v] client URI\n"
		"       %s -h | --help | --version\n"
		"URI: rdma://HOST:PORT, tcp://HOST:PORT, shm://HOST:PORT,\n"
		"     auto://HOST:PORT (shm on one host) or "
		"rdma+tcp://HOST:PORT\n",
		prog, prog, prog);
	if (status) {
		fprintf(stderr, "Try '%s --help' for more.\n", prog);
		exit(status);
	}
	fputs("Measures librmsg latency, bandwidth and message rate between\n"
	      "a server and a client (rmsg-perf(1)).\n"
	      "  -o OP       send (default), write_imm or rpc\n"
	      "  -m MODE     lat (default: half round trips), bw (stream) "
	      "or rate\n"
	      "  -s SIZES    message sizes, e.g. 64,4k,1m (default 64; 64k "
	      "in bw mode)\n"
	      "  -a          every power of two from 2 B to 8 MiB\n"
	      "  -n ITERS    round trips or messages per size (1000; 10000 "
	      "in rate mode)\n"
	      "  -w WARMUP   untimed round trips in lat mode (100)\n"
	      "  -W WINDOW   operations outstanding in bw and rate mode (16; "
	      "64 in rate mode)\n"
	      "  -L LOOP     ev (default: the context on a libev loop) or "
	      "epoll (fd mode:\n"
	      "              rmsg_ctx_create_fd, epoll_wait on rmsg_ctx_fd, "
	      "rmsg_ctx_progress)\n"
	      "  -b US       busy-poll for US microseconds (0: event mode); "
	      "with -L epoll\n"
	      "              the loop spins on rmsg_ctx_progress\n"
	      "  -c CREDITS  receive buffers granted to the peer\n"
	      "  -R MS       resumable connections, with this resume window "
	      "(give it\n"
	      "              to both sides)\n"
	      "  -P          print only the result lines, no table\n"
	      "  --json      print each result (and -v's counters) as one "
	      "JSON object a line\n"
	      "  -k          server: keep serving after a client leaves\n"
	      "  -v          print the connection's and the context's "
	      "counters at the end\n"
	      "  -h, --help  print this help and exit\n"
	      "  --version   print the tool's and librmsg's version and "
	      "exit\n"
	      "Exit status: 0 every size measured, 1 a failure, 2 usage "
	      "error.\n",
	      stdout);
	exit(0);
}

static int lookup(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	fprintf(stderr, "%s: unknown name %s\n", prog, s);
	usage(2);
	return -1;
}

/* "64,4k,1m": sizes with an optional k or m (KiB, MiB) suffix */
static void parse_sizes(const char *arg)
{
	const char *p = arg;
	char *end;

	cli.nsizes = 0;
	while (*p) {
		unsigned long long v = strtoull(p, &end, 0);

		if (end == p)
			usage(2);
		if (*end == 'k' || *end == 'K')
			v <<= 10, end++;
		else if (*end == 'm' || *end == 'M')
			v <<= 20, end++;
		if (v < 1 || v > (1ull << 30) || cli.nsizes == MAX_SIZES ||
		    (*end && *end != ','))
			usage(2);
		cli.sizes[cli.nsizes++] = (size_t)v;
		p = *end ? end + 1 : end;
	}
	if (!cli.nsizes)
		usage(2);
}

int main(int argc, char **argv)
{
	long iters = -1, warmup = -1, window = -1;
	int opt, ret, all = 0, keep = 0, i;
	struct rmsg_cfg *cfg;
	const char *sizes = NULL;
	enum {
		OPT_VERSION = 256,
		OPT_JSON
	};
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0},
	};

	ret = rmsg_cfg_create(&cfg);
	if (ret)
		die("rmsg_cfg_create", ret);
	while ((opt = getopt_long(argc, argv, "+ab:c:hkL:m:n:o:PR:s:vw:W:",
				  longopts, NULL)) != -1) {
		switch (opt) {
		case 'a':
			all = 1;
			break;
		case 'b':
			poll_us = (unsigned)atoi(optarg);
			/* checks the value; with -L epoll the tool spins */
			ret = rmsg_cfg_set_busy_poll_us(cfg, poll_us);
			if (ret)
				die("-b", ret);
			break;
		case 'c':
			ret = rmsg_cfg_set_credits(cfg, (unsigned)atoi(optarg));
			if (ret)
				die("-c", ret);
			break;
		case 'R':
			ret = rmsg_cfg_set_resume_ms(cfg,
						     (unsigned)atoi(optarg));
			if (ret)
				die("-R", ret);
			break;
		case 'h':
			usage(0);
			break;
		case OPT_VERSION:
			printf("%s (librmsg) %s\n", prog,
			       rmsg_version(NULL, NULL, NULL));
			rmsg_cfg_destroy(cfg);
			return 0;
		case 'k':
			keep = 1;
			break;
		case OPT_JSON:
			/* the results alone, as JSON (no table) */
			json_out = 1;
			cli.parseable = 1;
			break;
		case 'L':
			loop_mode = lookup(optarg, loop_names, 2);
			break;
		case 'm':
			cli.mode = lookup(optarg, mode_names, 3);
			break;
		case 'n':
			iters = atol(optarg);
			break;
		case 'o':
			cli.op = lookup(optarg, op_names, 3);
			break;
		case 'P':
			cli.parseable = 1;
			break;
		case 's':
			sizes = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'w':
			warmup = atol(optarg);
			break;
		case 'W':
			window = atol(optarg);
			break;
		default:
			usage(2);
		}
	}
	if (argc - optind != 2)
		usage(2);
	if (loop_mode == LOOP_EV) {
		loop = EV_DEFAULT;
		ret = rmsg_ctx_create(loop, cfg, &ctx);
		if (ret)
			die("rmsg_ctx_create", ret);
	} else {
		/* busy polling is the loop's (epoll_loop), not the
		 * context's: progress never blocks */
		ret = rmsg_cfg_set_busy_poll_us(cfg, 0);
		if (ret)
			die("rmsg_cfg_set_busy_poll_us", ret);
		ret = rmsg_ctx_create_fd(cfg, &ctx);
		if (ret)
			die("rmsg_ctx_create_fd", ret);
	}

	if (!strcmp(argv[optind], "server")) {
		srv.keep = keep;
		ret = run_server(argv[optind + 1]);
	} else if (!strcmp(argv[optind], "client")) {
		if (all) {
			/* as perftest -a: 2 B to 8 MiB */
			for (i = 1; i <= 23; i++)
				cli.sizes[cli.nsizes++] = (size_t)1 << i;
		} else if (sizes) {
			parse_sizes(sizes);
		} else {
			cli.sizes[cli.nsizes++] =
				cli.mode == MODE_BW ? 65536 : 64;
		}
		cli.iters = iters >= 0		    ? iters
			    : cli.mode == MODE_RATE ? 10000
						    : 1000;
		cli.warmup = warmup >= 0 ? warmup : 100;
		cli.window = window >= 0	     ? (unsigned)window
			     : cli.mode == MODE_RATE ? 64
						     : 16;
		if (cli.iters < 1 || cli.window < 1)
			usage(2);
		ret = run_client(argv[optind + 1]);
	} else {
		usage(2);
	}
	rmsg_ctx_destroy(ctx);
	rmsg_cfg_destroy(cfg);
	return ret;
}
