// SPDX-License-Identifier: MIT
/*
 * frame_walk - the two ends of bench/frame-walk.sh: a TCP server that
 * gdb follows through one received 64-byte message, and a client that
 * sends it. Public API only, so that it builds against any tree.
 *
 *   frame_walk server PORTFILE [WARM]   listen on 127.0.0.1, port into
 *                                       PORTFILE
 *   frame_walk client PORTFILE [WARM]   connect, send WARM 64 B messages
 *                                       2 ms apart, then, 0.2 s later,
 *                                       one more
 *
 * The server calls fw_armed() once its connection is established and the
 * WARM messages arrived (gdb starts watching the read callback there):
 * the next read brings the last message alone, the one the walk follows.
 * WARM 32 (frame-walk.sh's default) makes that a busy connection's read:
 * 32 reads within the TCP backend's first sweep period (1 s), so it keeps
 * its read buffer (a connection with fewer than 16 reads in a period
 * gives it back after each read), and its message objects are recycled.
 * WARM 0 follows the connection's first message. fw_on_msg() is the
 * user's callback the walk ends after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ev.h>
#include <rmsg.h>

static struct ev_loop *loop;
static int msgs, warm;
static char payload[64];

static void die(const char *what, int err)
{
	fprintf(stderr, "frame_walk: %s: %s\n", what, rmsg_strerror(err));
	exit(1);
}

/* gdb's marker: the handshake is over, the next frames carry data */
__attribute__((noinline)) void fw_armed(void);
__attribute__((noinline)) void fw_armed(void)
{
	__asm__ volatile("" ::: "memory");
}

static void fw_established(struct rmsg_conn *c, void *arg)
{
	(void)c, (void)arg;
	if (!warm)
		fw_armed();
}

static void fw_on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)c, (void)m, (void)arg;
	if (++msgs == warm)
		fw_armed();
}

static void fw_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c, (void)reason, (void)arg;
	ev_break(loop, EVBREAK_ALL);
}

static struct rmsg_conn *cli;
static ev_timer tick, later;
static int sent;

static void cli_send(void)
{
	struct iovec iov = {payload, sizeof(payload)};
	int ret = rmsg_send(cli, &iov, 1, NULL, NULL);

	if (ret)
		die("rmsg_send", ret);
}

static void cli_last(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l, (void)w, (void)revents;
	cli_send();
}

/* the warm-up, one message a tick; then the last one, alone */
static void cli_tick(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)revents;
	if (sent < warm) {
		cli_send();
		sent++;
		return;
	}
	ev_timer_stop(l, w);
	ev_timer_init(&later, cli_last, 0.2, 0.);
	ev_timer_start(l, &later);
}

static void cli_established(struct rmsg_conn *c, void *arg)
{
	(void)arg;
	cli = c;
	ev_timer_init(&tick, cli_tick, 0.002, 0.002);
	ev_timer_start(loop, &tick);
}

static void give_up(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)w, (void)revents;
	ev_break(l, EVBREAK_ALL);
}

int main(int argc, char **argv)
{
	struct rmsg_conn_ops sops = {.on_established = fw_established,
				     .on_msg = fw_on_msg,
				     .on_close = fw_close};
	struct rmsg_conn_ops cops = {.on_established = cli_established,
				     .on_close = fw_close};
	struct rmsg_listener *l;
	struct rmsg_conn *c;
	struct rmsg_ctx *ctx;
	char uri[64];
	unsigned port = 0;
	uint16_t p16;
	ev_timer tmo;
	FILE *f;
	int ret, i;

	if (argc < 3 || argc > 4 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s server|client PORTFILE [WARM]\n",
			argv[0]);
		return 2;
	}
	warm = argc > 3 ? atoi(argv[3]) : 0;
	loop = EV_DEFAULT;
	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (ret)
		die("rmsg_ctx_create", ret);
	if (!strcmp(argv[1], "server")) {
		ret = rmsg_listen(ctx, "tcp://127.0.0.1:0", NULL, &sops, NULL,
				  NULL, &l);
		if (ret)
			die("rmsg_listen", ret);
		ret = rmsg_listener_port(l, &p16);
		if (ret)
			die("rmsg_listener_port", ret);
		f = fopen(argv[2], "w");
		if (!f || fprintf(f, "%u\n", p16) < 0 || fclose(f))
			die("port file", -5);
	} else {
		/* the server starts under gdb: wait for its port (bounded) */
		for (i = 0; i < 600 && !port; i++) {
			f = fopen(argv[2], "r");
			if (f) {
				if (fscanf(f, "%u", &port) != 1)
					port = 0;
				fclose(f);
			}
			if (!port)
				usleep(100000);
		}
		if (!port)
			die("no port", -110);
		snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
		ret = rmsg_connect(ctx, uri, NULL, &cops, NULL, &c);
		if (ret)
			die("rmsg_connect", ret);
	}
	/* neither end runs for ever, whatever happens to the other */
	ev_timer_init(&tmo, give_up, 120., 0.);
	ev_timer_start(loop, &tmo);
	ev_run(loop, 0);
	printf("frame_walk %s: %d message(s)\n", argv[1], msgs);
	return 0;
}
