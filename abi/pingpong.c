// SPDX-License-Identifier: MIT
/*
 * pingpong - a program built as a user of an older release would have
 * built it: scripts/abi-check.sh compiles it against the header stored
 * with each baseline (abi/VERSION/rmsg.h, found as <rmsg.h>) and links it
 * against a stub library carrying only that release's symbols and
 * version nodes (abi/VERSION/librmsg.map), so it binds to the symbol
 * versions that release exported. It then runs against the library of
 * this tree and must work as it did then.
 *
 * Over tcp:// on 127.0.0.1: a server and a client in one context and one
 * loop. The client sends ROUNDS messages, each echoed by the server's
 * on_msg and checked by the client's, then makes one RPC call answered
 * by a handler, then closes. Every callback of struct rmsg_conn_ops that
 * TCP can deliver here (on_established, on_msg, on_close) is used on
 * both sides, so a struct laid out differently by the library calls
 * nothing or the wrong function. Exits 0 when all of it happened.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <rmsg.h>

#define ROUNDS 100
#define METHOD 7

static int failed;
static int srv_established, srv_closed, cli_established, cli_closed;
static int cli_reason = 1;
static int rounds, replied;
static struct rmsg_conn *cli;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "pingpong: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                          \
			failed = 1;                                        \
		}                                                          \
	} while (0)

static void srv_est(struct rmsg_conn *c, void *arg)
{
	srv_established++;
}

/* the echo sends the received bytes in place: the message is held until
 * the send is done with them */
static void srv_sent(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	CHECK(rmsg_msg_hold(m) == 0);
	if (rmsg_send(c, &iov, 1, srv_sent, m) != 0) {
		CHECK(!"server send");
		rmsg_msg_release(m);
	}
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	srv_closed++;
}

static void handler(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *request, void *arg)
{
	char out[64];
	int n = snprintf(out, sizeof(out), "re:%.*s",
			 (int)rmsg_msg_len(request),
			 (const char *)rmsg_msg_data(request));
	struct iovec iov = {out, (size_t)n};

	CHECK(rmsg_reply(req, &iov, 1) == 0);
}

static char sendbuf[32];

static int send_round(struct rmsg_conn *c)
{
	int n = snprintf(sendbuf, sizeof(sendbuf), "ping %d", rounds);
	struct iovec iov = {sendbuf, (size_t)n};

	return rmsg_send(c, &iov, 1, NULL, NULL);
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	cli_established++;
	CHECK(send_round(c) == 0);
}

static void on_reply(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		     void *arg)
{
	CHECK(status == 0);
	if (status == 0) {
		CHECK(rmsg_msg_len(reply) == 7 &&
		      memcmp(rmsg_msg_data(reply), "re:ping", 7) == 0);
		replied++;
	}
	rmsg_conn_close(c);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	char want[32];
	int n = snprintf(want, sizeof(want), "ping %d", rounds);
	static struct iovec req = {"ping", 4};

	CHECK(rmsg_msg_len(m) == (size_t)n &&
	      memcmp(rmsg_msg_data(m), want, (size_t)n) == 0);
	if (++rounds < ROUNDS) {
		CHECK(send_round(c) == 0);
		return;
	}
	CHECK(rmsg_call(c, METHOD, &req, 1, 0, on_reply, NULL, NULL) == 0);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	cli_closed++;
	cli_reason = reason;
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	fprintf(stderr, "pingpong: timed out after %d rounds\n", rounds);
	failed = 1;
	ev_break(loop, EVBREAK_ALL);
}

int main(void)
{
	static const struct rmsg_conn_ops sops = {.on_established = srv_est,
						  .on_msg = srv_msg,
						  .on_close = srv_close};
	static const struct rmsg_conn_ops cops = {.on_established = cli_est,
						  .on_msg = cli_msg,
						  .on_close = cli_close};
	const char *scale = getenv("RMSG_TEST_SCALE");
	struct ev_loop *loop = EV_DEFAULT;
	unsigned major = 99, minor = 99, patch = 99;
	struct rmsg_ctx *ctx;
	struct rmsg_listener *l;
	uint16_t port = 0;
	char uri[64];
	ev_timer timer;

	printf("pingpong: built against %d.%d, running on librmsg %s\n",
	       RMSG_VERSION_MAJOR, RMSG_VERSION_MINOR,
	       rmsg_version(&major, &minor, &patch));
	/* the same soname: a release of the same major version */
	CHECK(major == RMSG_VERSION_MAJOR);
	if (RMSG_VERSION_MAJOR == 0)
		CHECK(minor >= RMSG_VERSION_MINOR);

	CHECK(rmsg_ctx_create(loop, NULL, &ctx) == 0);
	if (failed)
		return 1;
	CHECK(rmsg_handle(ctx, METHOD, handler, NULL) == 0);
	CHECK(rmsg_listen(ctx, "tcp://127.0.0.1:0", NULL, &sops, NULL, NULL,
			  &l) == 0);
	if (failed)
		return 1;
	CHECK(rmsg_listener_port(l, &port) == 0 && port != 0);
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	CHECK(rmsg_connect(ctx, uri, NULL, &cops, NULL, &cli) == 0);

	ev_timer_init(&timer, on_timeout, 30.0 * (scale ? atof(scale) : 1.0),
		      0.0);
	ev_timer_start(loop, &timer);
	ev_run(loop, 0);
	ev_timer_stop(loop, &timer);
	/* the server's side ends once the client's close reaches it */
	if (!failed && !srv_closed) {
		ev_timer_set(&timer, 10.0 * (scale ? atof(scale) : 1.0), 0.0);
		ev_timer_start(loop, &timer);
		while (!failed && !srv_closed)
			ev_run(loop, EVRUN_ONCE);
		ev_timer_stop(loop, &timer);
	}
	CHECK(rmsg_ctx_destroy(ctx) == 0);

	CHECK(srv_established == 1 && cli_established == 1);
	CHECK(rounds == ROUNDS && replied == 1);
	CHECK(cli_closed == 1 && cli_reason == 0);
	CHECK(srv_closed == 1);
	printf("pingpong: %d rounds, %d call, %s\n", rounds, replied,
	       failed ? "FAILED" : "ok");
	return failed;
}
