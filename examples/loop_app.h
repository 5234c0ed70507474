/* SPDX-License-Identifier: MIT */
/*
 * loop_app.h - the librmsg half of loop_epoll.c, loop_uv.c and
 * loop_glib.c, which differ only in the event loop that drives it.
 *
 * One process runs an echo server and its client, each on a context of
 * its own made by rmsg_ctx_create_fd(): a context that owns a private
 * libev loop and shows the outside world one file descriptor. The loop
 * glue in each program does the same two things for each context:
 * watch rmsg_ctx_fd() for reading and call rmsg_ctx_progress() when it
 * is readable (plus, optionally, wake up after rmsg_ctx_timeout()).
 * Every callback below runs inside rmsg_ctx_progress(), on the loop's
 * thread.
 *
 * The client makes NCALLS calls of the method METHOD_ECHO, INFLIGHT at a time,
 * and sends NMSGS plain messages one after the other, each after the
 * echo of the one before; it checks every reply and every echo, then
 * closes the connection. The program is done when both ends of the
 * connection have run on_close, the last callback of a connection.
 */
#ifndef LOOP_APP_H
#define LOOP_APP_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rmsg.h>

#define METHOD_ECHO 1 /* the server's one method */
#define NCALLS 64     /* calls the client makes */
#define INFLIGHT 4    /* of which at most this many at once */
#define NMSGS 16      /* plain messages, one after the other */
#define CALL_MS 30000 /* a call's deadline: a timer of the client's context */

struct call {
	struct app *app;
	char text[32]; /* the request, untouched until the reply is in */
};

struct app {
	const char *name; /* the program's name, for its output */
	struct rmsg_ctx *server, *client;
	struct rmsg_conn *conn; /* the client's end */
	struct call calls[NCALLS];
	char msgs[NMSGS][32];
	int calls_made, calls_done, calls_ok, msgs_sent, msgs_ok;
	int closed;   /* connection ends whose on_close has run */
	int failures; /* checks that did not pass */
	int done;     /* both ends closed: the loop may stop */
};

static void app_fail(struct app *a, const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s\n", a->name, what, rmsg_strerror(err));
	a->failures++;
}

/* ---- the server: echoes calls and messages ------------------------ */

/* a handler answers exactly once; rmsg_reply() copies the data */
static void echo_handler(struct rmsg_conn *c, struct rmsg_req *req,
			 struct rmsg_msg *request, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(request),
			    rmsg_msg_len(request)};
	int ret = rmsg_reply(req, &iov, 1);

	if (ret)
		app_fail(arg, "reply", ret);
}

static void echoed(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg); /* the echo is out: free the receive buffer */
}

/* a message is sent back straight from its receive buffer, held until
 * the send is done */
static void server_on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};
	int ret;

	rmsg_msg_hold(m);
	ret = rmsg_send(c, &iov, 1, echoed, m);
	if (ret) {
		rmsg_msg_release(m);
		app_fail(arg, "echo", ret);
	}
}

static void server_on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct app *a = arg;

	/* the client closing on purpose shows as -ESHUTDOWN here */
	if (reason && reason != -ESHUTDOWN)
		app_fail(a, "server connection", reason);
	a->done = ++a->closed == 2;
}

static const struct rmsg_conn_ops server_ops = {
	.on_msg = server_on_msg,
	.on_close = server_on_close,
};

/* ---- the client: calls, messages, checks -------------------------- */

static void client_maybe_close(struct app *a)
{
	if (a->calls_done == NCALLS && a->msgs_ok == NMSGS)
		rmsg_conn_close(a->conn);
}

static void call_next(struct app *a);

static void replied(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		    void *arg)
{
	struct call *call = arg;
	struct app *a = call->app;
	size_t len = strlen(call->text);

	a->calls_done++;
	if (status) {
		/* a deadline passed (-ETIMEDOUT), or the connection ended */
		app_fail(a, "call", status);
		rmsg_conn_close(c);
		return;
	}
	if (rmsg_msg_len(reply) != len ||
	    memcmp(rmsg_msg_data(reply), call->text, len)) {
		app_fail(a, "call: the reply is not the request", -EPROTO);
		rmsg_conn_close(c);
		return;
	}
	a->calls_ok++;
	call_next(a);
	client_maybe_close(a);
}

static void call_next(struct app *a)
{
	struct call *call = &a->calls[a->calls_made];
	struct iovec iov;
	int ret;

	if (a->calls_made == NCALLS)
		return;
	call->app = a;
	snprintf(call->text, sizeof(call->text), "call %d", a->calls_made);
	iov.iov_base = call->text;
	iov.iov_len = strlen(call->text);
	ret = rmsg_call(a->conn, METHOD_ECHO, &iov, 1, CALL_MS, replied, call,
			NULL);
	if (ret) {
		app_fail(a, "rmsg_call", ret);
		rmsg_conn_close(a->conn);
		return;
	}
	a->calls_made++;
}

static void send_next(struct app *a)
{
	struct iovec iov;
	int ret;

	snprintf(a->msgs[a->msgs_sent], sizeof(a->msgs[0]), "message %d",
		 a->msgs_sent);
	iov.iov_base = a->msgs[a->msgs_sent];
	iov.iov_len = strlen(a->msgs[a->msgs_sent]);
	/* the buffer stays as it is until the echo is in, so no callback */
	ret = rmsg_send(a->conn, &iov, 1, NULL, NULL);
	if (ret) {
		app_fail(a, "rmsg_send", ret);
		rmsg_conn_close(a->conn);
		return;
	}
	a->msgs_sent++;
}

static void client_on_established(struct rmsg_conn *c, void *arg)
{
	struct app *a = arg;
	int i;

	printf("%s: connected over %s\n", a->name, rmsg_conn_transport(c));
	for (i = 0; i < INFLIGHT; i++)
		call_next(a);
	send_next(a);
}

/* messages keep their order: the echo is of the last message sent */
static void client_on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct app *a = arg;
	const char *want = a->msgs[a->msgs_sent - 1];

	if (rmsg_msg_len(m) != strlen(want) ||
	    memcmp(rmsg_msg_data(m), want, strlen(want))) {
		app_fail(a, "message: the echo is not the message", -EPROTO);
		rmsg_conn_close(c);
		return;
	}
	if (++a->msgs_ok < NMSGS)
		send_next(a);
	client_maybe_close(a);
}

static void client_on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct app *a = arg;

	if (reason)
		app_fail(a, "client connection", reason);
	a->done = ++a->closed == 2;
}

static const struct rmsg_conn_ops client_ops = {
	.on_established = client_on_established,
	.on_msg = client_on_msg,
	.on_close = client_on_close,
};

/* ---- start and end ------------------------------------------------ */

/*
 * Creates both contexts, listens at @uri (port 0: any free port) and
 * connects to it. Nothing runs yet: the connection is made, and every
 * callback runs, when the loop calls rmsg_ctx_progress().
 */
static int app_start(struct app *a, const char *name, const char *uri)
{
	struct rmsg_listener *l;
	char to[256];
	uint16_t port;
	int ret, n;

	memset(a, 0, sizeof(*a));
	a->name = name;
	ret = rmsg_ctx_create_fd(NULL, &a->server);
	if (ret)
		goto err;
	ret = rmsg_ctx_create_fd(NULL, &a->client);
	if (ret)
		goto err_server;
	ret = rmsg_handle(a->server, METHOD_ECHO, echo_handler, a);
	if (ret)
		goto err_client;
	ret = rmsg_listen(a->server, uri, NULL, &server_ops, NULL, a, &l);
	if (ret)
		goto err_client;
	/* the client's URI: the listener's, with the port it got */
	ret = rmsg_listener_port(l, &port);
	if (ret)
		goto err_client;
	if (!strrchr(uri, ':')) {
		ret = -EINVAL;
		goto err_client;
	}
	n = (int)(strrchr(uri, ':') - uri);
	snprintf(to, sizeof(to), "%.*s:%u", n, uri, port);
	ret = rmsg_connect(a->client, to, NULL, &client_ops, a, &a->conn);
	if (ret)
		goto err_client;
	printf("%s: %s listening, client connecting\n", name, to);
	return 0;

err_client:
	rmsg_ctx_destroy(a->client);
err_server:
	rmsg_ctx_destroy(a->server);
err:
	fprintf(stderr, "%s: %s: %s\n", name, uri, rmsg_strerror(ret));
	return ret;
}

/*
 * Once a->done, both on_close callbacks have run; the loop has stopped
 * watching the descriptors, so the contexts can go. Returns the exit
 * status.
 */
static int app_end(struct app *a)
{
	rmsg_ctx_destroy(a->client);
	rmsg_ctx_destroy(a->server); /* closes the listener */
	printf("%s: %d of %d calls and %d of %d messages echoed, %d failures\n",
	       a->name, a->calls_ok, NCALLS, a->msgs_ok, NMSGS, a->failures);
	return a->failures || a->calls_ok != NCALLS || a->msgs_ok != NMSGS;
}

#endif
