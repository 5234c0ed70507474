// SPDX-License-Identifier: MIT
/*
 * mixed_loop - librmsg as one part of a libev program.
 *
 *   mixed_loop server URI [--once]   answers every message in upper case
 *   mixed_loop client URI [TICKS]    see below (TICKS default 10)
 *
 * The client's loop has watchers of its own next to the library's:
 *  - an ev_timer that sends "tick N" every 200 ms and prints the round
 *    trip when the answer comes, TICKS times;
 *  - an ev_io on standard input: every line typed (or piped) is sent and
 *    its answer printed;
 *  - an ev_signal for SIGINT that closes the connection cleanly.
 * It exits when the ticks are done, standard input is at its end and
 * every answer is in. All of it runs on one thread, in one ev_run().
 *
 *   printf 'hello\nworld\n' | mixed_loop client tcp://127.0.0.1:7000 3
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ev.h>
#include <rmsg.h>

#define TICK_S 0.2
#define LINE_MAX_LEN 4096

/* ---- server ---- */

static int once;
static struct rmsg_listener *lis;

static void upper_done(struct rmsg_conn *c, int status, void *arg)
{
	free(arg); /* the send is over: its memory may go */
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	size_t len = rmsg_msg_len(m), i;
	char *out = malloc(len ? len : 1);
	struct iovec iov = {out, len};

	if (!out)
		return;
	memcpy(out, rmsg_msg_data(m), len);
	for (i = 0; i < len; i++)
		out[i] = (char)toupper((unsigned char)out[i]);
	if (rmsg_send(c, &iov, 1, upper_done, out))
		free(out); /* an error: upper_done will not run */
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (once && lis) {
		rmsg_listener_close(lis);
		lis = NULL;
	}
}

/* ---- client ---- */

static struct ev_loop *loop;
static struct rmsg_conn *conn;
static ev_timer tick_w;
static ev_io stdin_w;
static ev_signal int_w;
static int ticks_left = 10, tick_no, stdin_open = 1, closing;
static long outstanding, answers;
static char line[LINE_MAX_LEN];
static size_t line_len;

static void maybe_finish(void)
{
	if (closing || ticks_left || stdin_open || outstanding)
		return;
	closing = 1;
	printf("client: done, %ld answers\n", answers);
	/* on_close follows; then no watcher of ours is left active and
	 * ev_run() returns */
	ev_signal_stop(loop, &int_w);
	rmsg_conn_close(conn);
}

static void sent(struct rmsg_conn *c, int status, void *arg)
{
	free(arg);
}

/* sends a copy of @text: the caller's buffer is reused at once, but the
 * memory of a send must stay untouched until its callback */
static void send_text(const char *text, size_t len)
{
	char *copy = malloc(len ? len : 1);
	struct iovec iov = {copy, len};
	int ret;

	if (!copy)
		return;
	memcpy(copy, text, len);
	ret = rmsg_send(conn, &iov, 1, sent, copy);
	if (ret) {
		free(copy);
		/* -EAGAIN would mean 1024 sends queued: this program
		 * sends far less, so it treats every error as fatal */
		fprintf(stderr, "client: send: %s\n", rmsg_strerror(ret));
		rmsg_conn_close(conn);
		return;
	}
	outstanding++;
}

static void tick_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "tick %d %.6f", ++tick_no,
			 ev_now(l));

	send_text(buf, (size_t)n);
	if (--ticks_left == 0)
		ev_timer_stop(l, w);
}

static void stdin_cb(struct ev_loop *l, ev_io *w, int revents)
{
	ssize_t n = read(w->fd, line + line_len, sizeof(line) - line_len);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (line_len) /* a last line without a newline */
			send_text(line, line_len);
		line_len = 0;
		ev_io_stop(l, w);
		stdin_open = 0;
		maybe_finish();
		return;
	}
	line_len += (size_t)n;
	while ((nl = memchr(line, '\n', line_len))) {
		size_t len = (size_t)(nl - line);

		send_text(line, len);
		memmove(line, nl + 1, line_len - len - 1);
		line_len -= len + 1;
	}
	if (line_len == sizeof(line)) { /* too long: send what we have */
		send_text(line, line_len);
		line_len = 0;
	}
}

static void int_cb(struct ev_loop *l, ev_signal *w, int revents)
{
	printf("client: interrupted\n");
	ev_timer_stop(l, &tick_w);
	ev_io_stop(l, &stdin_w);
	ev_signal_stop(l, w);
	closing = 1;
	rmsg_conn_close(conn);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const char *p = rmsg_msg_data(m);
	int len = (int)rmsg_msg_len(m), no;
	double sent_at;
	char head[64];

	outstanding--;
	answers++;
	/* message bytes are not a C string: copy before parsing */
	snprintf(head, sizeof(head), "%.*s", len, p);
	if (sscanf(head, "TICK %d %lf", &no, &sent_at) == 2)
		printf("client: tick %d answered in %.3f ms\n", no,
		       (ev_time() - sent_at) * 1e3);
	else
		printf("client: answer: %.*s\n", len, p);
	fflush(stdout);
	maybe_finish();
}

static void cli_established(struct rmsg_conn *c, void *arg)
{
	printf("client: connected over %s\n", rmsg_conn_transport(c));
	/* our own watchers start once the connection is up */
	if (ticks_left)
		ev_timer_start(loop, &tick_w);
	ev_io_start(loop, &stdin_w);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason)
		fprintf(stderr, "client: connection: %s\n",
			rmsg_strerror(reason));
	/* whatever the reason, stop our watchers so that ev_run() returns */
	ev_timer_stop(loop, &tick_w);
	ev_io_stop(loop, &stdin_w);
	ev_signal_stop(loop, &int_w);
	if (!closing || outstanding)
		exit(1);
}

int main(int argc, char **argv)
{
	const struct rmsg_conn_ops sops = {.on_msg = srv_msg,
					   .on_close = srv_close};
	const struct rmsg_conn_ops cops = {.on_established = cli_established,
					   .on_msg = cli_msg,
					   .on_close = cli_close};
	struct rmsg_ctx *ctx;
	int ret;

	if (argc < 3 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr,
			"usage: %s server URI [--once] | client URI [TICKS]\n",
			argv[0]);
		return 2;
	}
	loop = EV_DEFAULT;
	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (ret)
		goto fail;
	if (!strcmp(argv[1], "server")) {
		once = argc > 3 && !strcmp(argv[3], "--once");
		ret = rmsg_listen(ctx, argv[2], NULL, &sops, NULL, NULL, &lis);
		if (ret)
			goto fail;
		printf("server: listening on %s\n", argv[2]);
		fflush(stdout);
		ev_run(loop, 0);
		rmsg_ctx_destroy(ctx);
		return 0;
	}
	if (argc > 3)
		ticks_left = atoi(argv[3]);
	if (ticks_left < 0)
		ticks_left = 0;
	ev_timer_init(&tick_w, tick_cb, TICK_S, TICK_S);
	ev_io_init(&stdin_w, stdin_cb, STDIN_FILENO, EV_READ);
	ev_signal_init(&int_w, int_cb, SIGINT);
	ev_signal_start(loop, &int_w);
	ret = rmsg_connect(ctx, argv[2], NULL, &cops, NULL, &conn);
	if (ret)
		goto fail;
	ev_run(loop, 0);
	rmsg_ctx_destroy(ctx);
	return 0;
fail:
	fprintf(stderr, "mixed_loop: %s: %s\n", argv[2], rmsg_strerror(ret));
	return 1;
}
