// SPDX-License-Identifier: MIT
/*
 * app.c - a program that uses librmsg as an installed dependency: only
 * <ev.h>, <rmsg.h> and what `pkg-config --cflags --libs librmsg` gives.
 * tests/consumer/run.sh builds it with a plain cc line and with CMake
 * (CMakeLists.txt next to it) against an installed prefix, and runs it.
 *
 * A server and a client in one process, on one libev loop, over
 * tcp://127.0.0.1 with a port the system picks:
 *   1. the client calls method UPPER with a deadline; the server's
 *      handler answers with the request in capitals;
 *   2. the client sends one message; the server checks it and closes.
 * Exits 0 when both worked, 1 otherwise (with the reason on stderr).
 * A guard timer ends a run that hangs.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

#define METHOD_UPPER 1
#define DEADLINE_MS 10000 /* generous: a deadline, not a measurement */
#define GUARD_S 60.0

static const char request[] = "hello, librmsg";
static const char message[] = "one message";
static int rpc_ok, msg_ok;
static const char *failure;

static void fail(const char *what, int err)
{
	if (err)
		fprintf(stderr, "app: %s: %s\n", what, rmsg_strerror(err));
	else
		fprintf(stderr, "app: %s\n", what);
	if (!failure)
		failure = what;
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

/* ---- server ---- */

static void upper(struct rmsg_conn *c, struct rmsg_req *req, struct rmsg_msg *m,
		  void *arg)
{
	char out[64];
	size_t i, len = rmsg_msg_len(m);
	const char *in = rmsg_msg_data(m);
	struct iovec iov = {out, len};
	int ret;

	if (len > sizeof(out)) {
		ret = rmsg_reply_error(req, -EMSGSIZE);
	} else {
		for (i = 0; i < len; i++)
			out[i] = (char)toupper((unsigned char)in[i]);
		ret = rmsg_reply(req, &iov, 1);
	}
	if (ret)
		fail("rmsg_reply", ret);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	if (rmsg_msg_len(m) != strlen(message) ||
	    memcmp(rmsg_msg_data(m), message, strlen(message))) {
		fail("server: the message differs from the one sent", 0);
		return;
	}
	printf("server: message \"%.*s\"\n", (int)rmsg_msg_len(m),
	       (const char *)rmsg_msg_data(m));
	msg_ok = 1;
	rmsg_conn_close(c); /* the client's on_close follows */
}

/* ---- client ---- */

static void sent(struct rmsg_conn *c, int status, void *arg)
{
	if (status)
		fail("rmsg_send completion", status);
}

static void on_reply(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		     void *arg)
{
	static struct iovec iov = {(void *)message, sizeof(message) - 1};
	char want[sizeof(request)];
	size_t i;
	int ret;

	if (status) {
		fail("the call", status);
		return;
	}
	for (i = 0; i < sizeof(request); i++)
		want[i] = (char)toupper((unsigned char)request[i]);
	if (rmsg_msg_len(reply) != strlen(want) ||
	    memcmp(rmsg_msg_data(reply), want, strlen(want))) {
		fail("client: the reply is not the request in capitals", 0);
		return;
	}
	printf("client: reply \"%.*s\"\n", (int)rmsg_msg_len(reply),
	       (const char *)rmsg_msg_data(reply));
	rpc_ok = 1;
	ret = rmsg_send(c, &iov, 1, sent, NULL);
	if (ret)
		fail("rmsg_send", ret);
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	static struct iovec iov = {(void *)request, sizeof(request) - 1};
	int ret;

	printf("client: connected over %s\n", rmsg_conn_transport(c));
	ret = rmsg_call(c, METHOD_UPPER, &iov, 1, DEADLINE_MS, on_reply, NULL,
			NULL);
	if (ret)
		fail("rmsg_call", ret);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	/* the server closed after the message (any reason is fine then) */
	if (!msg_ok)
		fail("the connection closed early", reason);
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static void guard(struct ev_loop *loop, ev_timer *w, int revents)
{
	fail("no result in time", 0);
}

int main(void)
{
	static const struct rmsg_conn_ops sops = {.on_msg = srv_msg};
	static const struct rmsg_conn_ops cops = {.on_established = cli_est,
						  .on_close = cli_close};
	struct ev_loop *loop = EV_DEFAULT;
	struct rmsg_listener *l;
	struct rmsg_conn *conn;
	struct rmsg_ctx *ctx;
	unsigned major;
	char uri[64];
	uint16_t port;
	ev_timer timer;
	int ret;

	printf("librmsg %s at run time, header %d.%d.%d\n",
	       rmsg_version(&major, NULL, NULL), RMSG_VERSION_MAJOR,
	       RMSG_VERSION_MINOR, RMSG_VERSION_PATCH);
	if (major != RMSG_VERSION_MAJOR) {
		fprintf(stderr, "app: library major %u, header %d\n", major,
			RMSG_VERSION_MAJOR);
		return 1;
	}
	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (ret) {
		fail("rmsg_ctx_create", ret);
		return 1;
	}
	ret = rmsg_handle(ctx, METHOD_UPPER, upper, NULL);
	if (!ret)
		ret = rmsg_listen(ctx, "tcp://127.0.0.1:0", NULL, &sops, NULL,
				  NULL, &l);
	if (!ret)
		ret = rmsg_listener_port(l, &port);
	if (!ret) {
		snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
		ret = rmsg_connect(ctx, uri, NULL, &cops, NULL, &conn);
	}
	if (ret) {
		fail("setup", ret);
	} else {
		ev_timer_init(&timer, guard, GUARD_S, 0);
		ev_timer_start(loop, &timer);
		ev_run(loop, 0);
		ev_timer_stop(loop, &timer);
	}
	rmsg_ctx_destroy(ctx);
	if (failure || !rpc_ok || !msg_ok) {
		fprintf(stderr, "app: FAIL (call %s, message %s)\n",
			rpc_ok ? "ok" : "failed", msg_ok ? "ok" : "failed");
		return 1;
	}
	printf("app: ok\n");
	return 0;
}
