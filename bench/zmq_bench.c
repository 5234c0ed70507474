// SPDX-License-Identifier: MIT
/*
 * zmq_bench - the ZeroMQ (libzmq) baseline beside librmsg on TCP: every
 * socket keeps libzmq's default options (no HWM, buffer or batching
 * tuning), endpoints tcp://HOST:PORT.
 *
 *   zmq_bench server pair PORT
 *       PAIR, bound: echoes every message back; exits on an empty one
 *   zmq_bench [-w WARMUP] client pair HOST PORT SIZE ITERS
 *       PAIR, connected: WARMUP untimed round trips (default 1000), then
 *       ITERS timed ones, then an empty message; prints
 *       "zmq_pair size=S iters=N lat_us=MEDIAN mean_us=..." (half round
 *       trips, as raw_pingpong)
 *   zmq_bench [-o FILE] server pull PORT SIZE COUNT
 *       PULL, bound: receives COUNT messages of SIZE bytes, then prints
 *       "zmq_pull size=S msgs=N mmsgs=RATE mbps=BW secs=T" to FILE (or
 *       stdout) and exits. The clock runs from the first message to the
 *       last, so RATE is (COUNT - 1) / T
 *   zmq_bench client push HOST PORT SIZE COUNT
 *       PUSH, connected: sends COUNT messages of SIZE bytes, closes (the
 *       default linger waits until libzmq handed them all to TCP)
 */
#include "bench_common.h"
#include <zmq.h>

static void zdie(const char *what)
{
	fprintf(stderr, "zmq_bench: %s: %s\n", what, zmq_strerror(zmq_errno()));
	exit(1);
}

static void *zsock(void *ctx, int type, const char *host, const char *port,
		   bool bind)
{
	char ep[256];
	void *s = zmq_socket(ctx, type);

	if (!s)
		zdie("zmq_socket");
	snprintf(ep, sizeof(ep), "tcp://%s:%s", host, port);
	if ((bind ? zmq_bind(s, ep) : zmq_connect(s, ep)) != 0)
		zdie(bind ? "zmq_bind" : "zmq_connect");
	return s;
}

static size_t zrecv(void *s, char *buf, size_t cap)
{
	int n;

	do
		n = zmq_recv(s, buf, cap, 0);
	while (n < 0 && zmq_errno() == EINTR);
	if (n < 0)
		zdie("zmq_recv");
	return (size_t)n;
}

static void zsend(void *s, const char *buf, size_t len)
{
	int n;

	do
		n = zmq_send(s, buf, len, 0);
	while (n < 0 && zmq_errno() == EINTR);
	if (n < 0)
		zdie("zmq_send");
}

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s server pair PORT\n"
		"       %s [-w WARMUP] client pair HOST PORT SIZE ITERS\n"
		"       %s [-o FILE] server pull PORT SIZE COUNT\n"
		"       %s client push HOST PORT SIZE COUNT\n",
		argv0, argv0, argv0, argv0);
	return 2;
}

int main(int argc, char **argv)
{
	long warmup = 1000, i;
	const char *outf = NULL;
	void *ctx, *s;
	char *buf;
	size_t size;
	long n;
	int c;

	while ((c = getopt(argc, argv, "w:o:")) != -1) {
		switch (c) {
		case 'w':
			warmup = atol(optarg);
			break;
		case 'o':
			outf = optarg;
			break;
		default:
			return usage(argv[0]);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 3)
		return usage("zmq_bench");
	ctx = zmq_ctx_new();
	if (!ctx)
		zdie("zmq_ctx_new");

	if (!strcmp(argv[0], "server") && !strcmp(argv[1], "pair") &&
	    argc == 3) {
		buf = malloc(1 << 20);
		if (!buf)
			bench_die("malloc");
		s = zsock(ctx, ZMQ_PAIR, "127.0.0.1", argv[2], true);
		for (;;) {
			size_t len = zrecv(s, buf, 1 << 20);

			if (len == 0)
				break;
			zsend(s, buf, len);
		}
	} else if (!strcmp(argv[0], "client") && !strcmp(argv[1], "pair") &&
		   argc == 6) {
		uint64_t *rtt, t0;

		size = (size_t)atol(argv[4]);
		n = atol(argv[5]);
		buf = calloc(1, size ? size : 1);
		rtt = calloc((size_t)n, sizeof(*rtt));
		if (!buf || !rtt || size == 0 || n <= 0)
			return usage("zmq_bench");
		s = zsock(ctx, ZMQ_PAIR, argv[2], argv[3], false);
		for (i = 0; i < warmup + n; i++) {
			t0 = bench_now_ns();
			zsend(s, buf, size);
			if (zrecv(s, buf, size) != size) {
				fprintf(stderr, "zmq_bench: short echo\n");
				return 1;
			}
			if (i >= warmup)
				rtt[i - warmup] = bench_now_ns() - t0;
		}
		zsend(s, buf, 0);
		bench_print_lat("zmq_pair", size, n, rtt, n, NULL);
	} else if (!strcmp(argv[0], "server") && !strcmp(argv[1], "pull") &&
		   argc == 5) {
		uint64_t t0 = 0, ns;
		double secs;
		FILE *f = stdout;

		size = (size_t)atol(argv[3]);
		n = atol(argv[4]);
		buf = malloc(size ? size : 1);
		if (!buf || size == 0 || n < 2)
			return usage("zmq_bench");
		s = zsock(ctx, ZMQ_PULL, "127.0.0.1", argv[2], true);
		for (i = 0; i < n; i++) {
			if (zrecv(s, buf, size) != size) {
				fprintf(stderr, "zmq_bench: wrong size\n");
				return 1;
			}
			if (i == 0)
				t0 = bench_now_ns();
		}
		ns = bench_now_ns() - t0;
		secs = (double)ns / 1e9;
		if (outf && !(f = fopen(outf, "w")))
			bench_die(outf);
		fprintf(f,
			"zmq_pull size=%zu msgs=%ld mmsgs=%.4f mbps=%.1f "
			"secs=%.4f\n",
			size, n, (double)(n - 1) / secs / 1e6,
			(double)(n - 1) * (double)size / secs / 1e6, secs);
		fclose(f);
	} else if (!strcmp(argv[0], "client") && !strcmp(argv[1], "push") &&
		   argc == 6) {
		uint64_t t0;

		size = (size_t)atol(argv[4]);
		n = atol(argv[5]);
		buf = calloc(1, size ? size : 1);
		if (!buf || size == 0 || n <= 0)
			return usage("zmq_bench");
		s = zsock(ctx, ZMQ_PUSH, argv[2], argv[3], false);
		t0 = bench_now_ns();
		for (i = 0; i < n; i++)
			zsend(s, buf, size);
		printf("zmq_push size=%zu msgs=%ld send_secs=%.4f\n", size, n,
		       (double)(bench_now_ns() - t0) / 1e9);
	} else {
		return usage("zmq_bench");
	}
	zmq_close(s);
	zmq_ctx_term(ctx);
	return 0;
}
