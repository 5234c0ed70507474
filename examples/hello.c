// SPDX-License-Identifier: MIT
/*
 * hello - the quick-start demo: a server and a client that exchange
 * messages through librmsg and report the transport, the half round
 * trip (a 64-byte round trip halved, as perftest reports latency) and the
 * streaming throughput.
 *
 *   hello server URI            echo every message back
 *   hello client URI [SECONDS]  measure against a server
 *
 * URI is rdma://, tcp://, shm:// (two processes on this host) or auto://
 * (RDMA when the machine has it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

#define PING_SIZE 64
#define PINGS 2000
#define STREAM_SIZE 65536
#define WINDOW 16
#define RATE_SIZE 32
#define RATE_MSGS 20000
#define RATE_WINDOW 64

static struct ev_loop *loop;
static struct rmsg_conn *conn;
static int pings, streamed, inflight, stream_target, failed;
static int rated, rate_inflight, phase;
static ev_tstamp t_start, lat_us, stream_s, rate_s;
static char ping[PING_SIZE];
static char *chunk;

static void die(const char *what, int err)
{
	fprintf(stderr, "hello: %s: %s\n", what, rmsg_strerror(err));
	exit(1);
}

/* ---- server: echo ---- */

static void echo_done(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};
	int ret;

	/* stream and rate messages are not echoed; pings and marks are */
	if (rmsg_msg_len(m) == STREAM_SIZE || rmsg_msg_len(m) == RATE_SIZE)
		return;
	rmsg_msg_hold(m);
	ret = rmsg_send(c, &iov, 1, echo_done, m);
	if (ret)
		rmsg_msg_release(m);
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	printf("server: client connected over %s\n", rmsg_conn_transport(c));
	fflush(stdout);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	printf("server: client left (%s)\n",
	       reason ? rmsg_strerror(reason) : "closed");
	fflush(stdout);
}

/* ---- client: ping-pong, then a stream ---- */

static void send_ping(void)
{
	struct iovec iov = {ping, sizeof(ping)};
	int ret = rmsg_send(conn, &iov, 1, NULL, NULL);

	if (ret)
		die("send", ret);
}

static void stream_done(struct rmsg_conn *c, int status, void *arg);

static void pump_stream(void)
{
	struct iovec iov = {chunk, STREAM_SIZE};

	while (inflight < WINDOW && streamed + inflight < stream_target) {
		int ret = rmsg_send(conn, &iov, 1, stream_done, NULL);

		if (ret == -EAGAIN)
			return;
		if (ret)
			die("send", ret);
		inflight++;
	}
}

static void stream_done(struct rmsg_conn *c, int status, void *arg)
{
	if (status)
		die("stream", status);
	inflight--;
	streamed++;
	if (streamed == stream_target) {
		/* a final ping marks the end: its echo follows every chunk */
		send_ping();
		return;
	}
	pump_stream();
}

static void rate_done(struct rmsg_conn *c, int status, void *arg);

/* small messages as fast as the window allows */
static void pump_rate(void)
{
	static char small[RATE_SIZE];
	struct iovec iov = {small, sizeof(small)};

	while (rate_inflight < RATE_WINDOW &&
	       rated + rate_inflight < RATE_MSGS) {
		int ret = rmsg_send(conn, &iov, 1, rate_done, NULL);

		if (ret == -EAGAIN)
			return;
		if (ret)
			die("send", ret);
		rate_inflight++;
	}
}

static void rate_done(struct rmsg_conn *c, int status, void *arg)
{
	if (status)
		die("rate", status);
	rate_inflight--;
	if (++rated == RATE_MSGS) {
		send_ping();
		return;
	}
	pump_rate();
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	if (pings < PINGS) {
		if (++pings == PINGS) {
			lat_us = (ev_time() - t_start) * 1e6 / PINGS / 2;
			t_start = ev_time();
			pump_stream();
			return;
		}
		send_ping();
		return;
	}
	if (phase++ == 0) {
		stream_s = ev_time() - t_start;
		t_start = ev_time();
		pump_rate();
		return;
	}
	rate_s = ev_time() - t_start;
	rmsg_conn_close(c);
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	if (phase == 0)
		pump_stream();
	else
		pump_rate();
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	const char *why = rmsg_conn_fallback_reason(c);

	printf("client: connected over %s%s%s%s\n", rmsg_conn_transport(c),
	       why ? " (not RDMA: " : "", why ? why : "", why ? ")" : "");
	t_start = ev_time();
	send_ping();
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason) {
		failed = reason;
		return;
	}
	printf("client: transport %s, half round trip %.1f us (64 B, mean "
	       "of %d round trips, halved), throughput %.1f MB/s (64 KiB "
	       "messages, %d MB), rate %.0f msg/s (32 B, window %d)\n",
	       rmsg_conn_transport(c), lat_us, PINGS,
	       (double)streamed * STREAM_SIZE / stream_s / 1e6,
	       (int)((double)streamed * STREAM_SIZE / 1e6), RATE_MSGS / rate_s,
	       RATE_WINDOW);
}

int main(int argc, char **argv)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_msg = srv_msg,
				     .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_writable = cli_writable,
				     .on_close = cli_close};
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx;
	struct rmsg_cfg *cfg;
	int ret;

	if (argc < 3 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s server|client URI [MB]\n", argv[0]);
		return 2;
	}
	loop = EV_DEFAULT;
	ret = rmsg_cfg_create(&cfg);
	if (ret)
		die("rmsg_cfg_create", ret);
	/* HELLO_BUSY_POLL_US=N spins N us before sleeping (default: events) */
	if (getenv("HELLO_BUSY_POLL_US"))
		rmsg_cfg_set_busy_poll_us(
			cfg, (unsigned)atoi(getenv("HELLO_BUSY_POLL_US")));
	ret = rmsg_ctx_create(loop, cfg, &ctx);
	if (ret)
		die("rmsg_ctx_create", ret);
	if (!strcmp(argv[1], "server")) {
		ret = rmsg_listen(ctx, argv[2], NULL, &sops, NULL, NULL, &l);
		if (ret)
			die(argv[2], ret);
		printf("server: listening on %s\n", argv[2]);
		fflush(stdout);
		ev_run(loop, 0);
		return 0;
	}
	stream_target = (argc > 3 ? atoi(argv[3]) : 256) * 16;
	chunk = calloc(1, STREAM_SIZE);
	ret = rmsg_connect(ctx, argv[2], NULL, &cops, NULL, &conn);
	if (ret)
		die(argv[2], ret);
	ev_run(loop, 0);
	rmsg_ctx_destroy(ctx);
	rmsg_cfg_destroy(cfg);
	free(chunk);
	if (failed)
		die("connection", failed);
	return 0;
}
