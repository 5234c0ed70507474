// SPDX-License-Identifier: MIT
/*
 * resume_stream.c - a stream that survives a broken link
 * (rmsg_cfg_set_resume_ms(3)).
 *
 *   resume_stream server URI [--once]
 *   resume_stream client URI [SECONDS]
 *
 * The client streams numbered 1 KiB messages for SECONDS (default 2)
 * and then closes; the server checks that the numbers arrive in order,
 * each once. Both set a resume window, so when the TCP connection
 * breaks (try `ss -K dst 127.0.0.1 dport = 7000` while it runs) the
 * connection is suspended instead of closed, the client dials again,
 * and the stream goes on where it stopped: the application code below
 * does nothing for it. The client prints how often that happened; it
 * exits 0 only if every send completed, the server (with --once) only
 * if every message arrived in order.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <ev.h>
#include <rmsg.h>

#define MSG 1024
#define QUEUED 64 /* sends in flight */
#define RESUME_MS 30000

static struct ev_loop *loop;
static int once, failed;
static uint64_t next_in, next_out, done_ok;
static double until;
static uint8_t buf[QUEUED][MSG];
static struct rmsg_conn *conn;

static void server_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	uint64_t n;

	(void)c;
	(void)arg;
	if (rmsg_msg_len(m) != MSG) {
		failed = 1;
		return;
	}
	memcpy(&n, rmsg_msg_data(m), 8);
	if (n != next_in && !failed) {
		fprintf(stderr, "server: message %llu, expected %llu\n",
			(unsigned long long)n, (unsigned long long)next_in);
		failed = 1;
	}
	next_in = n + 1;
}

static void server_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	printf("server: %llu messages %s; the client left (%s)\n",
	       (unsigned long long)next_in,
	       failed ? "NOT in order" : "in order, each once",
	       reason ? rmsg_err_name(reason) : "closed");
	if (once)
		ev_break(loop, EVBREAK_ALL);
	next_in = 0;
}

static void pump(void);

static void sent(struct rmsg_conn *c, int status, void *arg)
{
	(void)c;
	(void)arg;
	if (status) {
		fprintf(stderr, "client: a send failed: %s\n",
			rmsg_strerror(status));
		failed = 1;
		return;
	}
	done_ok++; /* the server's library has it */
	pump();
}

/* keeps QUEUED messages in flight until the time is up, then closes */
static void pump(void)
{
	while (next_out - done_ok < QUEUED && ev_now(loop) < until) {
		uint8_t *p = buf[next_out % QUEUED];
		struct iovec iov = {p, MSG};

		memcpy(p, &next_out, 8);
		if (rmsg_send(conn, &iov, 1, sent, NULL))
			return; /* queue full: on_writable calls again */
		next_out++;
	}
	if (ev_now(loop) >= until && done_ok == next_out)
		rmsg_conn_close(conn);
}

static void client_up(struct rmsg_conn *c, void *arg)
{
	(void)arg;
	conn = c;
	pump();
}

static void client_writable(struct rmsg_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	pump();
}

static void client_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct rmsg_stats st;

	(void)arg;
	if (rmsg_conn_stats(c, &st, sizeof(st)) < 0)
		memset(&st, 0, sizeof(st));
	printf("client: %llu messages sent and acknowledged over %s; the "
	       "connection was suspended %llu times and resumed %llu times "
	       "(%llu messages sent again)\n",
	       (unsigned long long)done_ok, rmsg_conn_transport(c),
	       (unsigned long long)st.suspends, (unsigned long long)st.resumes,
	       (unsigned long long)st.replayed);
	if (reason) {
		fprintf(stderr, "client: closed: %s\n",
			rmsg_conn_close_reason(c));
		failed = 1;
	}
	ev_break(loop, EVBREAK_ALL);
}

/* the stream goes on while the connection is suspended: sends queue */
static void tick(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
	if (conn)
		pump();
}

int main(int argc, char **argv)
{
	struct rmsg_conn_ops sops = {.on_msg = server_msg,
				     .on_close = server_close};
	struct rmsg_conn_ops cops = {.on_established = client_up,
				     .on_writable = client_writable,
				     .on_close = client_close};
	struct rmsg_listener *l;
	struct rmsg_cfg *cfg;
	struct rmsg_ctx *ctx;
	struct rmsg_conn *c;
	ev_timer t;
	int ret;

	if (argc < 3 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr,
			"usage: %s server URI [--once]\n"
			"       %s client URI [SECONDS]\n",
			argv[0], argv[0]);
		return 2;
	}
	loop = EV_DEFAULT;
	if (rmsg_cfg_create(&cfg) || rmsg_cfg_set_resume_ms(cfg, RESUME_MS) ||
	    rmsg_ctx_create(loop, cfg, &ctx))
		return 1;
	if (!strcmp(argv[1], "server")) {
		once = argc > 3 && !strcmp(argv[3], "--once");
		ret = rmsg_listen(ctx, argv[2], cfg, &sops, NULL, NULL, &l);
		if (ret) {
			fprintf(stderr, "listen: %s\n", rmsg_strerror(ret));
			return 1;
		}
		printf("server: listening on %s\n", argv[2]);
		fflush(stdout);
	} else {
		until = ev_now(loop) + (argc > 3 ? atof(argv[3]) : 2.0);
		ret = rmsg_connect(ctx, argv[2], cfg, &cops, NULL, &c);
		if (ret) {
			fprintf(stderr, "connect: %s\n", rmsg_strerror(ret));
			return 1;
		}
		ev_timer_init(&t, tick, 0.05, 0.05);
		ev_timer_start(loop, &t);
		ev_unref(loop); /* the connection keeps the loop alive */
	}
	ev_run(loop, 0);
	rmsg_ctx_destroy(ctx);
	rmsg_cfg_destroy(cfg);
	return failed;
}
