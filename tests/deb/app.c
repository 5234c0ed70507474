// SPDX-License-Identifier: MIT
/*
 * app - a program of a user of the Debian packages (scripts/deb-check.sh
 * compiles it with nothing but `pkg-config --cflags --libs librmsg`): a
 * server and a client on one loop over tcp://127.0.0.1, the client sends
 * one message, the server echoes it, the client checks it. It prints
 * the version rmsg_version() reports and exits 0 on success, 1 on any
 * error or after 10 seconds without the echo.
 */
#include <stdio.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

static const char text[] = "hello from a packaged librmsg";
static int echoed;

static void fail(const char *what, int err)
{
	fprintf(stderr, "app: %s: %s\n", what, rmsg_strerror(err));
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static void server_sent(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg); /* the echo is out: free the receive buffer */
}

static void server_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};
	int err;

	/* the send reads the receive buffer until server_sent() runs */
	rmsg_msg_hold(m);
	err = rmsg_send(c, &iov, 1, server_sent, m);
	if (err) {
		rmsg_msg_release(m);
		fail("server send", err);
	}
}

static void client_up(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {(void *)text, sizeof(text)};
	int err = rmsg_send(c, &iov, 1, NULL, NULL);

	if (err)
		fail("client send", err);
}

static void client_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	if (rmsg_msg_len(m) == sizeof(text) &&
	    !memcmp(rmsg_msg_data(m), text, sizeof(text)))
		echoed = 1;
	else
		fprintf(stderr, "app: the echo differs from the message\n");
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static void client_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (!echoed)
		fail("client connection closed", reason);
}

static void timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	fprintf(stderr, "app: no echo within 10 s\n");
	ev_break(loop, EVBREAK_ALL);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = server_msg};
	struct rmsg_conn_ops cops = {.on_established = client_up,
				     .on_msg = client_msg,
				     .on_close = client_close};
	struct rmsg_listener *l;
	struct rmsg_conn *c;
	struct rmsg_ctx *ctx;
	unsigned major, minor, patch;
	const char *v = rmsg_version(&major, &minor, &patch);
	char uri[64];
	uint16_t port;
	ev_timer t;
	int err;

	printf("librmsg %s (%u.%u.%u)\n", v, major, minor, patch);
	err = rmsg_ctx_create(EV_DEFAULT, NULL, &ctx);
	if (err)
		return fail("rmsg_ctx_create", err), 1;
	err = rmsg_listen(ctx, "tcp://127.0.0.1:0", NULL, &sops, NULL, NULL,
			  &l);
	if (!err)
		err = rmsg_listener_port(l, &port);
	if (err)
		return fail("rmsg_listen", err), 1;
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	err = rmsg_connect(ctx, uri, NULL, &cops, NULL, &c);
	if (err)
		return fail("rmsg_connect", err), 1;
	ev_timer_init(&t, timeout, 10., 0.);
	ev_timer_start(EV_DEFAULT, &t);
	ev_run(EV_DEFAULT, 0);
	ev_timer_stop(EV_DEFAULT, &t);
	rmsg_ctx_destroy(ctx);
	puts(echoed ? "app: echo received" : "app: FAIL");
	return echoed ? 0 : 1;
}
