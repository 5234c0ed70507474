// SPDX-License-Identifier: MIT
/*
 * raw_stream - the raw TCP bandwidth baseline for librmsg: a one-way
 * stream of SIZE-byte messages on a non-blocking TCP_NODELAY socket
 * driven by libev, gathered BATCH per writev(); the server reads into one
 * buffer, discards and counts, and answers a final ack once it has every
 * byte, which stops the client's clock.
 *
 *   raw_stream [-r READSIZE] [-R RCVBUF] server PORT
 *       count and discard; exits when its first client leaves
 *   raw_stream [-B BATCH] [-W WINDOW] client HOST PORT SIZE BYTES
 *       sends BYTES (rounded up to whole SIZE messages) and prints
 *       "raw_stream size=S bytes=N mbps=X secs=T" (mbps: 10^6 bytes/s)
 *
 *   -r  bytes per read() on the server (default 256 KiB)
 *   -R  SO_RCVBUF of the server socket (default: the kernel's autotuning)
 *   -B  messages per writev() (default 4; 1 is one write() per message)
 *   -W  application window: at most WINDOW bytes unacknowledged, the
 *       server acks every WINDOW/4 bytes (default 768 KiB; 0 is no
 *       window, the socket buffers alone limit the sender)
 *
 * The defaults are the fastest of a sweep on this project's 2-vCPU VM
 * with both ends on one CPU: a bounded window keeps the receiver's data
 * in cache and lets it run; the naive "-B 1 -W 0" was about 40% slower.
 *
 * Wire: a 16-byte header (little-endian byte count, ack interval or 0),
 * then the stream; back: 'a' per ack interval, 'F' at the end.
 */
#include "bench_common.h"
#include <ev.h>
#include <sys/uio.h>

#define BATCH_MAX 64
#define HDR 16

static struct ev_loop *loop;
static ev_io rw, ww;
static int fd;
static char *buf;
/* defaults: the fastest found in a sweep on a 2-vCPU VM (bench/README.md) */
static size_t rbuf_size = 256 * 1024;
static int rcvbuf;
static int batch = 4;
static uint64_t window = 768 * 1024;

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ---- server ---- */

static unsigned char shdr[HDR];
static uint64_t have, total, ack_every, next_ack;

static void srv_ack(char what)
{
	while (write(fd, &what, 1) != 1)
		if (errno != EINTR)
			bench_die("write ack");
}

static void srv_read_cb(struct ev_loop *l, ev_io *w, int revents)
{
	for (;;) {
		ssize_t n = read(fd, buf, rbuf_size);
		size_t skip = 0;

		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			ev_break(l, EVBREAK_ALL);
			return;
		}
		if (have < HDR) {
			/* the header, however the reads split it */
			while (skip < (size_t)n && have < HDR)
				shdr[have++] = (unsigned char)buf[skip++];
			if (have < HDR)
				continue;
			total = get64(shdr) + HDR;
			ack_every = get64(shdr + 8);
			next_ack = HDR + ack_every;
		}
		have += (uint64_t)n - skip;
		while (ack_every && have >= next_ack && next_ack < total) {
			srv_ack('a');
			next_ack += ack_every;
		}
		if (have == total)
			srv_ack('F');
		if ((size_t)n < rbuf_size)
			return; /* drained: a further read would say EAGAIN */
	}
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
	ev_io_start(l, &rw);
}

/* ---- client ---- */

static size_t size, off; /* off: position inside the current message */
static uint64_t left, sent, acked, t0, t1, ack_iv;
static unsigned char hdr[HDR];
static size_t hdr_off;

/* writes until the socket or the window is full, or everything is out */
static void cli_pump(void)
{
	while (hdr_off < HDR) {
		ssize_t n = write(fd, hdr + hdr_off, HDR - hdr_off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				goto full;
			bench_die("write");
		}
		hdr_off += (size_t)n;
	}
	while (left) {
		struct iovec iov[BATCH_MAX];
		uint64_t want = 0, room = left;
		ssize_t n;
		int k;

		if (window) {
			if (sent - acked >= window) {
				/* the ack reader resumes us */
				if (ev_is_active(&ww))
					ev_io_stop(loop, &ww);
				return;
			}
			if (room > window - (sent - acked))
				room = window - (sent - acked);
		}
		/* up to BATCH messages per syscall, the first maybe partial */
		for (k = 0; k < batch && want < room; k++) {
			size_t o = k ? 0 : off, len = size - o;

			if (len > room - want)
				len = (size_t)(room - want);
			iov[k].iov_base = buf + o;
			iov[k].iov_len = len;
			want += len;
		}
		n = k == 1 ? write(fd, iov[0].iov_base, iov[0].iov_len)
			   : writev(fd, iov, k);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				goto full;
			bench_die("write");
		}
		left -= (uint64_t)n;
		sent += (uint64_t)n;
		off = (off + (size_t)n) % size;
		if ((uint64_t)n < want)
			goto full; /* short write: the socket is full */
	}
	if (ev_is_active(&ww))
		ev_io_stop(loop, &ww);
	return;
full:
	if (!ev_is_active(&ww))
		ev_io_start(loop, &ww);
}

static void cli_write_cb(struct ev_loop *l, ev_io *w, int revents)
{
	cli_pump();
}

static void cli_read_cb(struct ev_loop *l, ev_io *w, int revents)
{
	char a[256];
	ssize_t n = read(fd, a, sizeof(a)), i;
	bool resume = window && sent - acked >= window;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		fprintf(stderr, "raw_stream: no ack\n");
		exit(1);
	}
	for (i = 0; i < n; i++) {
		if (a[i] == 'F') {
			t1 = bench_now_ns();
			ev_break(l, EVBREAK_ALL);
			return;
		}
		acked += ack_iv;
	}
	if (resume && left)
		cli_pump();
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-r READSIZE] [-R RCVBUF] server PORT\n"
		"       %s [-B BATCH] [-W WINDOW] client HOST PORT SIZE "
		"BYTES\n",
		argv0, argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t bytes;
	int i, opt;

	while ((opt = getopt(argc, argv, "+r:R:B:W:")) != -1) {
		if (opt == 'r')
			rbuf_size = strtoul(optarg, NULL, 0);
		else if (opt == 'R')
			rcvbuf = atoi(optarg);
		else if (opt == 'B')
			batch = atoi(optarg);
		else if (opt == 'W')
			window = strtoull(optarg, NULL, 0);
		else
			usage(argv[0]);
	}
	if (rbuf_size < 1 || batch < 1 || batch > BATCH_MAX ||
	    (window && window < 4))
		usage(argv[0]);
	argc -= optind - 1;
	argv += optind - 1;
	loop = EV_DEFAULT;
	if (argc == 3 && !strcmp(argv[1], "server")) {
		ev_io aw;

		buf = malloc(rbuf_size);
		if (!buf)
			bench_die("malloc");
		ev_io_init(&aw, srv_accept_cb, bench_listen(argv[2]), EV_READ);
		/* accepted sockets inherit it; set before the handshake so
		 * the window scale fits */
		if (rcvbuf && setsockopt(aw.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
					 sizeof(rcvbuf)) < 0)
			bench_die("SO_RCVBUF");
		ev_io_start(loop, &aw);
		ev_run(loop, 0);
		return 0;
	}
	if (argc != 6 || strcmp(argv[1], "client"))
		usage(argv[0]);
	size = strtoul(argv[4], NULL, 0);
	bytes = strtoull(argv[5], NULL, 0);
	if (size < 1 || bytes < 1)
		usage(argv[0]);
	bytes = (bytes + size - 1) / size * size;
	left = bytes;
	ack_iv = window / 4;
	for (i = 0; i < 8; i++) {
		hdr[i] = (unsigned char)(bytes >> (8 * i));
		hdr[8 + i] = (unsigned char)(ack_iv >> (8 * i));
	}
	buf = calloc(1, size);
	if (!buf)
		bench_die("calloc");
	fd = bench_connect(argv[2], argv[3]);
	ev_io_init(&rw, cli_read_cb, fd, EV_READ);
	ev_io_init(&ww, cli_write_cb, fd, EV_WRITE);
	ev_io_start(loop, &rw);
	t0 = bench_now_ns();
	cli_pump();
	ev_run(loop, 0);
	close(fd);
	bench_print_bw("raw_stream", size, bytes, t1 - t0, NULL);
	free(buf);
	return 0;
}
