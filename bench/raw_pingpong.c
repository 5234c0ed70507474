// SPDX-License-Identifier: MIT
/*
 * raw_pingpong - the raw TCP latency baseline for librmsg: a libev
 * ping-pong over one non-blocking TCP_NODELAY socket, as lean as the
 * machine allows (one read and one write per message in the callback,
 * straight from and into one buffer, no framing, no copies).
 *
 *   raw_pingpong [-s] server PORT
 *       echo every byte back; exits when its first client leaves
 *   raw_pingpong [-s] [-w WARMUP] client HOST PORT SIZE ITERS
 *       WARMUP untimed round trips (default 1000), then ITERS timed ones;
 *       prints "raw_pingpong size=S iters=N lat_us=MEDIAN mean_us=..."
 *       where the times are half round trips
 *
 * With -s neither side uses libev: each spins on non-blocking read()
 * and write() without ever sleeping, the baseline for busy polling
 * over TCP (rmsg-perf -b).
 */
#include "bench_common.h"
#include <ev.h>

#define SRV_BUF (256 * 1024)

static struct ev_loop *loop;
static ev_io rw, ww;
static int fd;
static char *buf;

/* ---- server: echo whatever arrives ---- */

static size_t pend_off, pend_len; /* echo bytes not yet written */

static void srv_flush(void)
{
	while (pend_off < pend_len) {
		ssize_t n = write(fd, buf + pend_off, pend_len - pend_off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				/* socket full: stop reading until it drains */
				ev_io_stop(loop, &rw);
				ev_io_start(loop, &ww);
				return;
			}
			bench_die("write");
		}
		pend_off += (size_t)n;
	}
	pend_off = pend_len = 0;
	if (ev_is_active(&ww)) {
		ev_io_stop(loop, &ww);
		ev_io_start(loop, &rw);
	}
}

static void srv_read_cb(struct ev_loop *l, ev_io *w, int revents)
{
	ssize_t n = read(fd, buf, SRV_BUF);

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		ev_break(l, EVBREAK_ALL);
		return;
	}
	pend_off = 0;
	pend_len = (size_t)n;
	srv_flush();
}

static void srv_write_cb(struct ev_loop *l, ev_io *w, int revents)
{
	srv_flush();
}

static void srv_accept_cb(struct ev_loop *l, ev_io *w, int revents)
{
	fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		bench_die("accept");
	}
	bench_nonblock_nodelay(fd);
	ev_io_stop(l, w); /* one client */
	ev_io_init(&rw, srv_read_cb, fd, EV_READ);
	ev_io_init(&ww, srv_write_cb, fd, EV_WRITE);
	ev_io_start(l, &rw);
}

/* ---- client ---- */

static size_t size;
static long warmup, iters, done;
static size_t got, sent;
static uint64_t t0, *rtt;

static void cli_send(void)
{
	t0 = bench_now_ns();
	sent = 0;
	while (sent < size) {
		ssize_t n = write(fd, buf + sent, size - sent);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				ev_io_start(loop, &ww);
				return;
			}
			bench_die("write");
		}
		sent += (size_t)n;
	}
}

static void cli_write_cb(struct ev_loop *l, ev_io *w, int revents)
{
	while (sent < size) {
		ssize_t n = write(fd, buf + sent, size - sent);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			bench_die("write");
		}
		sent += (size_t)n;
	}
	ev_io_stop(l, w);
}

static void cli_read_cb(struct ev_loop *l, ev_io *w, int revents)
{
	/* one message in flight: never read past it */
	ssize_t n = read(fd, buf + got, size - got);

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		fprintf(stderr, "raw_pingpong: server closed\n");
		exit(1);
	}
	got += (size_t)n;
	if (got < size)
		return;
	got = 0;
	if (done >= warmup)
		rtt[done - warmup] = bench_now_ns() - t0;
	if (++done == warmup + iters) {
		ev_break(l, EVBREAK_ALL);
		return;
	}
	cli_send();
}

/* ---- -s: spinning, no event loop ---- */

/* moves @len bytes of @b through @fd, spinning on EAGAIN; 0 at EOF */
static int spin_io(bool rd, char *b, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = rd ? read(fd, b + off, len - off)
			       : write(fd, b + off, len - off);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			bench_die(rd ? "read" : "write");
		if (n == 0)
			return 0;
		off += (size_t)n;
	}
	return 1;
}

static void spin_server(int lfd)
{
	ssize_t n;

	for (;;) {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			break;
		if (errno != EAGAIN && errno != EINTR)
			bench_die("accept");
	}
	bench_nonblock_nodelay(fd);
	for (;;) {
		n = read(fd, buf, SRV_BUF);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return;
		if (!spin_io(false, buf, (size_t)n))
			return;
	}
}

static void spin_client(void)
{
	for (done = 0; done < warmup + iters; done++) {
		t0 = bench_now_ns();
		if (!spin_io(false, buf, size) || !spin_io(true, buf, size)) {
			fprintf(stderr, "raw_pingpong: server closed\n");
			exit(1);
		}
		if (done >= warmup)
			rtt[done - warmup] = bench_now_ns() - t0;
	}
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-s] server PORT\n"
		"       %s [-s] [-w WARMUP] client HOST PORT SIZE ITERS\n",
		argv0, argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	bool spin = false;
	int opt;

	warmup = 1000;
	while ((opt = getopt(argc, argv, "+sw:")) != -1) {
		if (opt == 'w')
			warmup = atol(optarg);
		else if (opt == 's')
			spin = true;
		else
			usage(argv[0]);
	}
	argc -= optind - 1;
	argv += optind - 1;
	loop = EV_DEFAULT;
	if (argc == 3 && !strcmp(argv[1], "server")) {
		ev_io aw;

		buf = malloc(SRV_BUF);
		if (!buf)
			bench_die("malloc");
		if (spin) {
			spin_server(bench_listen(argv[2]));
			return 0;
		}
		ev_io_init(&aw, srv_accept_cb, bench_listen(argv[2]), EV_READ);
		ev_io_start(loop, &aw);
		ev_run(loop, 0);
		return 0;
	}
	if (argc != 6 || strcmp(argv[1], "client"))
		usage(argv[0]);
	size = strtoul(argv[4], NULL, 0);
	iters = atol(argv[5]);
	if (size < 1 || iters < 1 || warmup < 0)
		usage(argv[0]);
	buf = calloc(1, size);
	rtt = calloc((size_t)iters, sizeof(*rtt));
	if (!buf || !rtt)
		bench_die("calloc");
	fd = bench_connect(argv[2], argv[3]);
	if (spin) {
		spin_client();
		goto out;
	}
	ev_io_init(&rw, cli_read_cb, fd, EV_READ);
	ev_io_init(&ww, cli_write_cb, fd, EV_WRITE);
	ev_io_start(loop, &rw);
	cli_send();
	ev_run(loop, 0);
out:
	close(fd);
	bench_print_lat("raw_pingpong", size, iters, rtt, iters, NULL);
	free(rtt);
	free(buf);
	return 0;
}
