// SPDX-License-Identifier: MIT
/*
 * rmsg_bench - the librmsg side of the raw baselines: the same ping-pong
 * and one-way stream as raw_pingpong and raw_stream, over rmsg_send().
 *
 *   rmsg_bench [opts] server URI
 *       echo pings and end marks, discard stream messages; exits when
 *       its first client leaves
 *   rmsg_bench [opts] pingpong URI SIZE ITERS
 *       WARMUP untimed round trips, then ITERS timed ones; prints
 *       "rmsg_pingpong size=S iters=N lat_us=MEDIAN mean_us=... "
 *       with half round trips
 *   rmsg_bench [opts] stream URI SIZE BYTES
 *       BYTES (rounded up to whole SIZE messages) with at most WINDOW
 *       sends outstanding, then a one-byte mark whose echo stops the
 *       clock; prints "rmsg_stream size=S bytes=N mbps=X secs=T"
 *
 *   -b US      busy-poll US microseconds (rmsg_cfg_set_busy_poll_us)
 *   -w N       warm-up round trips before the timed ones (default 1000)
 *   -W N       stream window (default 16)
 *   -c N       credits per connection (default: the library's)
 *
 * URI is tcp://, rdma:// or auto://host:port. The first byte of each
 * message tells the server what to do with it: 'P' ping and 'M' mark are
 * echoed, 'S' stream is dropped.
 */
#include "bench_common.h"
#include <ev.h>
#include <rmsg.h>

static struct ev_loop *loop;
static struct rmsg_ctx *ctx;
static struct rmsg_conn *conn;
static int failed;

static void die(const char *what, int err)
{
	fprintf(stderr, "rmsg_bench: %s: %s\n", what, rmsg_strerror(err));
	exit(1);
}

/* ---- server ---- */

static void echo_done(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const char *p = rmsg_msg_data(m);
	struct iovec iov = {(void *)p, rmsg_msg_len(m)};
	int ret;

	if (iov.iov_len && p[0] == 'S')
		return;
	/* zero copy: the reply points into the held receive buffer */
	rmsg_msg_hold(m);
	ret = rmsg_send(c, &iov, 1, echo_done, m);
	if (ret) {
		rmsg_msg_release(m);
		die("echo", ret);
	}
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	ev_break(loop, EVBREAK_ALL);
}

/* ---- client ---- */

static size_t size;
static long warmup = 1000, iters, done;
static uint64_t t0, t1, *rtt;
static char *pbuf; /* ping, from rmsg_buf_alloc */
static char *sbuf; /* stream message */
static char *mbuf; /* end mark */
static uint64_t stream_msgs, stream_posted, stream_done;
static unsigned window = 16;
static int mode_stream;
static const char *transport = "none";

static void send_ping(void)
{
	struct iovec iov = {pbuf, size};
	int ret;

	t0 = bench_now_ns();
	/* the next ping only follows the echo, so pbuf is free again */
	ret = rmsg_send(conn, &iov, 1, NULL, NULL);
	if (ret)
		die("send", ret);
}

static void stream_sent(struct rmsg_conn *c, int status, void *arg);

static void send_mark(void)
{
	struct iovec iov = {mbuf, 1};
	int ret = rmsg_send(conn, &iov, 1, NULL, NULL);

	if (ret)
		die("send mark", ret);
}

static void pump(void)
{
	struct iovec iov = {sbuf, size};

	while (stream_posted - stream_done < window &&
	       stream_posted < stream_msgs) {
		int ret = rmsg_send(conn, &iov, 1, stream_sent, NULL);

		if (ret == -EAGAIN)
			return; /* on_writable follows */
		if (ret)
			die("send", ret);
		stream_posted++;
	}
}

static void stream_sent(struct rmsg_conn *c, int status, void *arg)
{
	if (status)
		die("stream", status);
	if (++stream_done == stream_msgs) {
		/* its echo follows every stream byte */
		send_mark();
		return;
	}
	pump();
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	transport = rmsg_conn_transport(c);
	if (mode_stream) {
		t0 = bench_now_ns();
		pump();
	} else {
		send_ping();
	}
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	if (mode_stream) {
		t1 = bench_now_ns();
		rmsg_conn_close(c);
		return;
	}
	if (done >= warmup)
		rtt[done - warmup] = bench_now_ns() - t0;
	if (++done == warmup + iters) {
		rmsg_conn_close(c);
		return;
	}
	send_ping();
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	pump();
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	failed = reason;
	ev_break(loop, EVBREAK_ALL);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-b US] [-c CREDITS] server URI\n"
		"       %s [-b US] [-c CREDITS] [-w WARMUP] pingpong URI "
		"SIZE ITERS\n"
		"       %s [-b US] [-c CREDITS] [-W WINDOW] stream URI SIZE "
		"BYTES\n",
		argv0, argv0, argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg,
				     .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_writable = cli_writable,
				     .on_close = cli_close};
	struct rmsg_listener *l;
	struct rmsg_cfg *cfg;
	uint64_t total = 0;
	char extra[64];
	int opt, ret;

	ret = rmsg_cfg_create(&cfg);
	if (ret)
		die("rmsg_cfg_create", ret);
	while ((opt = getopt(argc, argv, "+b:c:w:W:")) != -1) {
		switch (opt) {
		case 'b':
			ret = rmsg_cfg_set_busy_poll_us(cfg,
							(unsigned)atoi(optarg));
			if (ret)
				die("-b", ret);
			break;
		case 'c':
			ret = rmsg_cfg_set_credits(cfg, (unsigned)atoi(optarg));
			if (ret)
				die("-c", ret);
			break;
		case 'w':
			warmup = atol(optarg);
			break;
		case 'W':
			window = (unsigned)atoi(optarg);
			break;
		default:
			usage(argv[0]);
		}
	}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 3)
		usage(argv[0]);
	loop = EV_DEFAULT;
	ret = rmsg_ctx_create(loop, cfg, &ctx);
	if (ret)
		die("rmsg_ctx_create", ret);

	if (argc == 3 && !strcmp(argv[1], "server")) {
		ret = rmsg_listen(ctx, argv[2], NULL, &sops, NULL, NULL, &l);
		if (ret)
			die(argv[2], ret);
		ev_run(loop, 0);
		rmsg_ctx_destroy(ctx);
		rmsg_cfg_destroy(cfg);
		return 0;
	}
	if (argc != 5)
		usage(argv[0]);
	if (!strcmp(argv[1], "stream"))
		mode_stream = 1;
	else if (strcmp(argv[1], "pingpong"))
		usage(argv[0]);
	size = strtoul(argv[3], NULL, 0);
	if (size < 1 || warmup < 0 || window < 1)
		usage(argv[0]);
	if (mode_stream) {
		total = strtoull(argv[4], NULL, 0);
		if (total < 1)
			usage(argv[0]);
		stream_msgs = (total + size - 1) / size;
		total = stream_msgs * size;
		ret = rmsg_buf_alloc(ctx, size, (void **)&sbuf);
		if (!ret)
			ret = rmsg_buf_alloc(ctx, 64, (void **)&mbuf);
		if (ret)
			die("rmsg_buf_alloc", ret);
		memset(sbuf, 0, size);
		sbuf[0] = 'S';
		mbuf[0] = 'M';
	} else {
		iters = atol(argv[4]);
		if (iters < 1)
			usage(argv[0]);
		rtt = calloc((size_t)iters, sizeof(*rtt));
		if (!rtt)
			die("calloc", -ENOMEM);
		ret = rmsg_buf_alloc(ctx, size, (void **)&pbuf);
		if (ret)
			die("rmsg_buf_alloc", ret);
		memset(pbuf, 0, size);
		pbuf[0] = 'P';
	}
	ret = rmsg_connect(ctx, argv[2], NULL, &cops, NULL, &conn);
	if (ret)
		die(argv[2], ret);
	ev_run(loop, 0);
	if (failed)
		die("connection", failed);
	if (mode_stream && stream_done != stream_msgs) {
		fprintf(stderr, "rmsg_bench: stream ended early\n");
		return 1;
	}
	if (!mode_stream && done != warmup + iters) {
		fprintf(stderr, "rmsg_bench: ping-pong ended early\n");
		return 1;
	}
	snprintf(extra, sizeof(extra), " transport=%s", transport);
	if (mode_stream)
		bench_print_bw("rmsg_stream", size, total, t1 - t0, extra);
	else
		bench_print_lat("rmsg_pingpong", size, iters, rtt, iters,
				extra);
	rmsg_ctx_destroy(ctx);
	rmsg_cfg_destroy(cfg);
	free(rtt);
	return 0;
}
