// SPDX-License-Identifier: MIT
/*
 * echo_rmsg - AFTER: echo_socket.c ported to librmsg. rmsg-porting(7)
 * walks through the changes.
 *
 *   echo_rmsg server URI [--once]
 *   echo_rmsg client URI [N]      N messages (default 200)
 *
 * URI is tcp://, rdma://, shm:// or auto://HOST:PORT. The messages are
 * the ones echo_socket sends; what changed:
 *  - no framing: librmsg keeps message boundaries;
 *  - no blocking calls: one libev loop, and callbacks;
 *  - the client keeps WINDOW messages in flight instead of one, since
 *    nothing blocks; echoes come back in order;
 *  - the server echoes straight from the receive buffer (no copy), and
 *    handles backpressure: when the send queue is full (-EAGAIN) it keeps
 *    the messages and sends them from on_writable.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

#define MSG_MAX 70000
#define WINDOW 8
#define BACKLOG 64

/* the size and contents of message @i: the same in echo_socket.c */
static size_t msg_size(unsigned i)
{
	return (size_t)(i * 2654435761u % MSG_MAX);
}

static void msg_fill(unsigned char *p, size_t len, unsigned i)
{
	size_t k;

	for (k = 0; k < len; k++)
		p[k] = (unsigned char)(i * 31 + k);
}

/* ---- server ---- */

/* per connection: held messages waiting for room in the send queue */
struct peer {
	struct rmsg_msg *wait[BACKLOG];
	unsigned head, count;
	unsigned long echoed;
};

static int once;
static struct rmsg_listener *lis;

static void echoed(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg); /* the receive buffer goes back to the pool */
}

/* 0 if sent (or dropped on a fatal error), -EAGAIN if the queue is full */
static int echo(struct rmsg_conn *c, struct peer *p, struct rmsg_msg *m)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};
	int ret = rmsg_send(c, &iov, 1, echoed, m);

	if (ret == -EAGAIN)
		return ret;
	if (ret) {
		rmsg_msg_release(m);
		fprintf(stderr, "server: send: %s\n", rmsg_strerror(ret));
		rmsg_conn_close(c);
		return 0;
	}
	p->echoed++;
	return 0;
}

static int srv_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		      const void *pdata, size_t pdata_len, void *arg)
{
	struct peer *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	return rmsg_conn_set_arg(c, p);
}

static void srv_established(struct rmsg_conn *c, void *arg)
{
	printf("server: client connected over %s\n", rmsg_conn_transport(c));
	fflush(stdout);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct peer *p = arg;

	/* the message is a view of the receive buffer, valid during this
	 * callback; holding it keeps it until the echo has gone out */
	if (rmsg_msg_hold(m))
		return;
	if (!p->count && echo(c, p, m) == 0)
		return;
	if (p->count == BACKLOG) { /* cannot happen: credits bound it */
		rmsg_msg_release(m);
		rmsg_conn_close(c);
		return;
	}
	p->wait[(p->head + p->count++) % BACKLOG] = m;
}

static void srv_writable(struct rmsg_conn *c, void *arg)
{
	struct peer *p = arg;

	while (p->count && echo(c, p, p->wait[p->head]) == 0) {
		p->head = (p->head + 1) % BACKLOG;
		p->count--;
	}
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct peer *p = arg;

	printf("server: client left after %lu messages (%s)\n", p->echoed,
	       reason ? rmsg_strerror(reason) : "closed");
	fflush(stdout);
	while (p->count--) {
		rmsg_msg_release(p->wait[p->head]);
		p->head = (p->head + 1) % BACKLOG;
	}
	free(p);
	if (once && lis) {
		rmsg_listener_close(lis);
		lis = NULL;
	}
}

/* ---- client ---- */

static struct rmsg_conn *conn;
static unsigned char *slots[WINDOW]; /* message i uses slots[i % WINDOW] */
static int in_send[WINDOW];
static unsigned count = 200, sent, echoes;
static unsigned long long bytes;
static int exit_code = 1;

static void cli_pump(void);

static void cli_sent(struct rmsg_conn *c, int status, void *arg)
{
	in_send[(unsigned)(uintptr_t)arg] = 0; /* the slot's memory is ours */
	if (!status)
		cli_pump();
}

static void cli_pump(void)
{
	/* a slot is free again once its send has completed (the completion
	 * rule) and its echo has been checked */
	while (sent < count && sent - echoes < WINDOW &&
	       !in_send[sent % WINDOW]) {
		unsigned slot = sent % WINDOW;
		struct iovec iov = {slots[slot], msg_size(sent)};
		int ret;

		msg_fill(slots[slot], iov.iov_len, sent);
		ret = rmsg_send(conn, &iov, 1, cli_sent,
				(void *)(uintptr_t)slot);
		if (ret == -EAGAIN)
			return; /* on_writable follows */
		if (ret) {
			fprintf(stderr, "client: send: %s\n",
				rmsg_strerror(ret));
			rmsg_conn_close(conn);
			return;
		}
		in_send[slot] = 1;
		sent++;
	}
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	size_t len = msg_size(echoes);

	if (rmsg_msg_len(m) != len ||
	    memcmp(rmsg_msg_data(m), slots[echoes % WINDOW], len)) {
		fprintf(stderr, "client: echo %u differs\n", echoes);
		rmsg_conn_close(c);
		return;
	}
	bytes += len;
	if (++echoes == count) {
		printf("client: %u messages echoed, %llu bytes\n", count,
		       bytes);
		exit_code = 0;
		rmsg_conn_close(c);
		return;
	}
	cli_pump();
}

static void cli_established(struct rmsg_conn *c, void *arg)
{
	printf("client: connected over %s\n", rmsg_conn_transport(c));
	cli_pump();
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	cli_pump();
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason)
		fprintf(stderr, "client: connection: %s\n",
			rmsg_strerror(reason));
}

int main(int argc, char **argv)
{
	const struct rmsg_conn_ops sops = {.on_established = srv_established,
					   .on_msg = srv_msg,
					   .on_writable = srv_writable,
					   .on_close = srv_close};
	const struct rmsg_conn_ops cops = {.on_established = cli_established,
					   .on_msg = cli_msg,
					   .on_writable = cli_writable,
					   .on_close = cli_close};
	struct ev_loop *loop = EV_DEFAULT;
	struct rmsg_ctx *ctx;
	int i, ret;

	if (argc < 3 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr,
			"usage: %s server URI [--once] | client URI [N]\n",
			argv[0]);
		return 2;
	}
	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (ret)
		goto fail;
	if (!strcmp(argv[1], "server")) {
		once = argc > 3 && !strcmp(argv[3], "--once");
		ret = rmsg_listen(ctx, argv[2], NULL, &sops, srv_accept, NULL,
				  &lis);
		if (ret)
			goto fail_ctx;
		printf("server: listening on %s\n", argv[2]);
		fflush(stdout);
		ev_run(loop, 0); /* until the listener and its clients close */
		rmsg_ctx_destroy(ctx);
		return 0;
	}
	if (argc > 3)
		count = (unsigned)atoi(argv[3]);
	for (i = 0; i < WINDOW; i++) {
		slots[i] = malloc(MSG_MAX);
		if (!slots[i]) {
			ret = -ENOMEM;
			goto fail_ctx;
		}
	}
	ret = rmsg_connect(ctx, argv[2], NULL, &cops, NULL, &conn);
	if (ret)
		goto fail_ctx;
	if (!count) {
		exit_code = 0;
		rmsg_conn_close(conn);
	}
	ev_run(loop, 0); /* returns after on_close */
	rmsg_ctx_destroy(ctx);
	for (i = 0; i < WINDOW; i++)
		free(slots[i]);
	return exit_code;

fail_ctx:
	rmsg_ctx_destroy(ctx);
fail:
	fprintf(stderr, "echo_rmsg: %s: %s\n", argv[2], rmsg_strerror(ret));
	return 1;
}
