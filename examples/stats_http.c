// SPDX-License-Identifier: MIT
/*
 * stats_http - a librmsg server whose counters a monitoring system can
 * scrape over HTTP: rmsg_ctx_stats_export(3) behind a tiny HTTP/1.0
 * endpoint on loopback, on the same libev loop as the messages.
 *
 *   stats_http URI [HTTP_PORT] [--requests N]
 *
 * Echoes messages at URI (tcp://, rdma://, shm:// or auto://HOST:PORT;
 * port 0 takes a free one) and, so that there is something to see, connects to
 * itself and sends a message a second. GET /metrics answers in the Prometheus text format,
 * GET /metrics.json in JSON. HTTP_PORT 0 (the default) takes a free port;
 * the first line printed names the address, a second line says when the
 * first echo came back. --requests N: exit 0 after
 * serving N HTTP requests (the tests' bounded mode).
 *
 * The HTTP side is plain sockets and one ev_io per client, enough for a
 * scraper on the same machine; it listens on 127.0.0.1 only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <ev.h>
#include <rmsg.h>

#define REQ_MAX 2048

struct http_client {
	ev_io w;
	char req[REQ_MAX];
	size_t len;
};

static struct rmsg_ctx *ctx;
static struct rmsg_conn *self_conn;
static long requests_left = -1; /* -1: serve for ever */

/* ---- the messages: an echo server, and a client of it ---- */

static void release(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void echo_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec v = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	/* the echo copies nothing: the buffer stays held until the send
	 * is done (a full queue drops the message: this is a demo) */
	if (rmsg_msg_hold(m))
		return;
	if (rmsg_send(c, &v, 1, release, m))
		rmsg_msg_release(m);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason)
		fprintf(stderr, "connection closed: %s\n",
			rmsg_conn_close_reason(c));
	if (c == self_conn)
		self_conn = NULL;
}

/* our own message came back: said once (the tests wait for it) */
static void echoed(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	static int said;

	if (!said++) {
		printf("first echo received over %s\n", rmsg_conn_transport(c));
		fflush(stdout);
	}
}

static const struct rmsg_conn_ops srv_ops = {.on_msg = echo_msg,
					     .on_close = on_close};
static const struct rmsg_conn_ops cli_ops = {.on_msg = echoed,
					     .on_close = on_close};

static void tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct iovec v = {"ping", 4};

	if (self_conn)
		rmsg_send(self_conn, &v, 1, NULL, NULL);
}

/* ---- HTTP ---- */

static void http_reply(int fd, const char *type, const char *body, size_t n)
{
	char head[256];
	int h = snprintf(head, sizeof(head),
			 "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 body ? "200 OK" : "404 Not Found", type, n);

	/* small answers to a local scraper: a blocking write is fine */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (write(fd, head, (size_t)h) == h && body)
		(void)!write(fd, body, n);
}

/* the counters as text, in a buffer measured first (the rule of
 * rmsg_ctx_stats_export: the length of the whole text is returned) */
static void serve_metrics(int fd, int format)
{
	int n = rmsg_ctx_stats_export(ctx, format, NULL, 0);
	char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;

	if (!text) {
		http_reply(fd, "text/plain", NULL, 0);
		return;
	}
	rmsg_ctx_stats_export(ctx, format, text, (size_t)n + 1);
	http_reply(fd,
		   format == RMSG_STATS_JSON
			   ? "application/json"
			   : "text/plain; version=0.0.4; charset=utf-8",
		   text, (size_t)n);
	free(text);
}

static void http_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_client *hc = (struct http_client *)w;
	ssize_t r =
		read(w->fd, hc->req + hc->len, sizeof(hc->req) - 1 - hc->len);

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r > 0) {
		hc->len += (size_t)r;
		hc->req[hc->len] = 0;
		if (!strstr(hc->req, "\r\n\r\n") && !strstr(hc->req, "\n\n") &&
		    hc->len < sizeof(hc->req) - 1)
			return; /* the request is not whole yet */
		if (!strncmp(hc->req, "GET /metrics.json ", 18))
			serve_metrics(w->fd, RMSG_STATS_JSON);
		else if (!strncmp(hc->req, "GET /metrics ", 13))
			serve_metrics(w->fd, RMSG_STATS_PROMETHEUS);
		else
			http_reply(w->fd, "text/plain", NULL, 0);
		if (requests_left > 0 && --requests_left == 0)
			ev_break(loop, EVBREAK_ALL);
	}
	ev_io_stop(loop, w);
	close(w->fd);
	free(hc);
}

static void http_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_client *hc;
	int fd = accept(w->fd, NULL, NULL);

	if (fd < 0)
		return;
	hc = calloc(1, sizeof(*hc));
	if (!hc) {
		close(fd);
		return;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	ev_io_init(&hc->w, http_read, fd, EV_READ);
	ev_io_start(loop, &hc->w);
}

static int http_listen(uint16_t port, uint16_t *bound)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&a, &alen)) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	*bound = ntohs(a.sin_port);
	return fd;
}

int main(int argc, char **argv)
{
	struct ev_loop *loop = EV_DEFAULT;
	struct rmsg_listener *l;
	ev_io http_w;
	ev_timer t;
	uint16_t port = 0, hport;
	int i, fd, ret;

	if (argc < 2) {
		fprintf(stderr, "usage: %s URI [HTTP_PORT] [--requests N]\n",
			argv[0]);
		return 2;
	}
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--requests") && i + 1 < argc)
			requests_left = atol(argv[++i]);
		else
			port = (uint16_t)atoi(argv[i]);
	}
	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (!ret)
		ret = rmsg_listen(ctx, argv[1], NULL, &srv_ops, NULL, NULL, &l);
	if (!ret) {
		/* to our own listener, on the port it got ("...:0") */
		char uri[300];
		const char *colon = strrchr(argv[1], ':');
		uint16_t lport = 0;

		rmsg_listener_port(l, &lport);
		snprintf(uri, sizeof(uri), "%.*s:%u",
			 (int)(colon ? colon - argv[1] : 0), argv[1], lport);
		ret = rmsg_connect(ctx, uri, NULL, &cli_ops, NULL, &self_conn);
	}
	if (ret) {
		fprintf(stderr, "%s: %s\n", argv[1], rmsg_strerror(ret));
		return 1;
	}
	fd = http_listen(port, &hport);
	if (fd < 0) {
		perror("http listen");
		return 1;
	}
	printf("metrics at http://127.0.0.1:%u/metrics (and /metrics.json)\n",
	       hport);
	fflush(stdout);
	ev_io_init(&http_w, http_accept, fd, EV_READ);
	ev_io_start(loop, &http_w);
	ev_timer_init(&t, tick, 0.0, 1.0);
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
	ev_io_stop(loop, &http_w);
	close(fd);
	rmsg_ctx_destroy(ctx);
	return 0;
}
