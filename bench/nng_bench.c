// SPDX-License-Identifier: MIT
/*
 * nng_bench - the nng (NNG, nanomsg-next-gen) baseline beside librmsg on
 * TCP, with the same command line and output as zmq_bench so
 * compare-tcp.sh drives both the same way. Every socket keeps nng's
 * default options; endpoints tcp://HOST:PORT.
 *
 *   nng_bench server pair PORT
 *       PAIR (v1), listening: echoes every message back; exits on an
 *       empty one
 *   nng_bench [-w WARMUP] client pair HOST PORT SIZE ITERS
 *       PAIR, dialing: WARMUP untimed round trips (default 1000), then
 *       ITERS timed ones, then an empty message; prints
 *       "nng_pair size=S iters=N lat_us=MEDIAN ..." (half round trips)
 *   nng_bench [-o FILE] server pull PORT SIZE COUNT
 *       PULL, listening: receives COUNT messages of SIZE bytes, then
 *       prints "nng_pull size=S msgs=N mmsgs=RATE mbps=BW secs=T" to
 *       FILE (or stdout), answers on the side channel PORT+1 and exits.
 *       The clock runs from the first message to the last
 *   nng_bench client push HOST PORT SIZE COUNT
 *       PUSH, dialing: sends COUNT messages of SIZE bytes, then waits
 *       for the puller's one-byte answer on a PAIR socket at PORT+1
 *       before closing: nng_close() drops what is still queued (it has
 *       no linger), so leaving earlier would lose the tail
 */
#include "bench_common.h"
#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <nng/supplemental/util/platform.h>

static void ndie(const char *what, int rv)
{
	fprintf(stderr, "nng_bench: %s: %s\n", what, nng_strerror(rv));
	exit(1);
}

/* a socket of @type listening on (or dialing) tcp://@host:@port */
static nng_socket nsock(int (*open)(nng_socket *), const char *host, long port,
			bool listen)
{
	char url[256];
	nng_socket s;
	int rv;

	rv = open(&s);
	if (rv)
		ndie("open", rv);
	snprintf(url, sizeof(url), "tcp://%s:%ld", host, port);
	/* a dial before the listener is up fails: retry for 10 s */
	for (int i = 0; i < 1000; i++) {
		rv = listen ? nng_listen(s, url, NULL, 0)
			    : nng_dial(s, url, NULL, 0);
		if (listen || rv != NNG_ECONNREFUSED)
			break;
		nng_msleep(10);
	}
	if (rv)
		ndie(listen ? "nng_listen" : "nng_dial", rv);
	return s;
}

static size_t nrecv(nng_socket s, char *buf, size_t cap)
{
	size_t n = cap;
	int rv = nng_recv(s, buf, &n, 0);

	if (rv)
		ndie("nng_recv", rv);
	return n;
}

static void nsend(nng_socket s, const char *buf, size_t len)
{
	int rv = nng_send(s, (void *)buf, len, 0);

	if (rv)
		ndie("nng_send", rv);
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
	const char *outf = NULL;
	long warmup = 1000, i, n, port;
	nng_socket s, side;
	size_t size;
	char *buf;
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
		return usage("nng_bench");

	if (!strcmp(argv[0], "server") && !strcmp(argv[1], "pair") &&
	    argc == 3) {
		buf = malloc(1 << 20);
		if (!buf)
			bench_die("malloc");
		s = nsock(nng_pair1_open, "127.0.0.1", atol(argv[2]), true);
		for (;;) {
			size_t len = nrecv(s, buf, 1 << 20);

			if (len == 0)
				break;
			nsend(s, buf, len);
		}
	} else if (!strcmp(argv[0], "client") && !strcmp(argv[1], "pair") &&
		   argc == 6) {
		uint64_t *rtt, t0;

		size = (size_t)atol(argv[4]);
		n = atol(argv[5]);
		buf = calloc(1, size ? size : 1);
		rtt = calloc(n > 0 ? (size_t)n : 1, sizeof(*rtt));
		if (!buf || !rtt || size == 0 || n <= 0)
			return usage("nng_bench");
		s = nsock(nng_pair1_open, argv[2], atol(argv[3]), false);
		for (i = 0; i < warmup + n; i++) {
			t0 = bench_now_ns();
			nsend(s, buf, size);
			if (nrecv(s, buf, size) != size) {
				fprintf(stderr, "nng_bench: short echo\n");
				return 1;
			}
			if (i >= warmup)
				rtt[i - warmup] = bench_now_ns() - t0;
		}
		nsend(s, buf, 0);
		/* the empty message must leave before the close drops it */
		nng_msleep(100);
		bench_print_lat("nng_pair", size, n, rtt, n, NULL);
	} else if (!strcmp(argv[0], "server") && !strcmp(argv[1], "pull") &&
		   argc == 5) {
		uint64_t t0 = 0, ns;
		FILE *f = stdout;
		double secs;

		port = atol(argv[2]);
		size = (size_t)atol(argv[3]);
		n = atol(argv[4]);
		buf = malloc(size ? size : 1);
		if (!buf || size == 0 || n < 2)
			return usage("nng_bench");
		s = nsock(nng_pull0_open, "127.0.0.1", port, true);
		side = nsock(nng_pair1_open, "127.0.0.1", port + 1, true);
		for (i = 0; i < n; i++) {
			if (nrecv(s, buf, size) != size) {
				fprintf(stderr, "nng_bench: wrong size\n");
				return 1;
			}
			if (i == 0)
				t0 = bench_now_ns();
		}
		ns = bench_now_ns() - t0;
		secs = (double)ns / 1e9;
		nsend(side, "k", 1);
		nng_msleep(100);
		nng_close(side);
		if (outf && !(f = fopen(outf, "w")))
			bench_die(outf);
		fprintf(f,
			"nng_pull size=%zu msgs=%ld mmsgs=%.4f mbps=%.1f "
			"secs=%.4f\n",
			size, n, (double)(n - 1) / secs / 1e6,
			(double)(n - 1) * (double)size / secs / 1e6, secs);
		fclose(f);
	} else if (!strcmp(argv[0], "client") && !strcmp(argv[1], "push") &&
		   argc == 6) {
		uint64_t t0;

		port = atol(argv[3]);
		size = (size_t)atol(argv[4]);
		n = atol(argv[5]);
		buf = calloc(1, size ? size : 1);
		if (!buf || size == 0 || n <= 0)
			return usage("nng_bench");
		side = nsock(nng_pair1_open, argv[2], port + 1, false);
		s = nsock(nng_push0_open, argv[2], port, false);
		t0 = bench_now_ns();
		for (i = 0; i < n; i++)
			nsend(s, buf, size);
		printf("nng_push size=%zu msgs=%ld send_secs=%.4f\n", size, n,
		       (double)(bench_now_ns() - t0) / 1e9);
		nrecv(side, buf, size);
		nng_close(side);
	} else {
		return usage("nng_bench");
	}
	nng_close(s);
	return 0;
}
