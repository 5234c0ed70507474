/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - small helpers shared by the benchmark programs:
 * monotonic time, per-iteration statistics, socket setup.
 * Header-only so every program is one gcc command.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* the process's resident set, KiB (-1 if /proc says nothing) */
static inline long bench_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Prints the statistics of @n round-trip times (ns) as half round trips
 * in microseconds: lat_us is the median, then mean, min and p99.
 * Sorts @rtt in place.
 */
static inline void bench_print_lat(const char *name, size_t size, long iters,
				   uint64_t *rtt, long n, const char *extra)
{
	double sum = 0, med, p99;
	long i;

	qsort(rtt, (size_t)n, sizeof(*rtt), bench_cmp_u64);
	for (i = 0; i < n; i++)
		sum += (double)rtt[i];
	med = n % 2 ? (double)rtt[n / 2]
		    : ((double)rtt[n / 2 - 1] + (double)rtt[n / 2]) / 2;
	p99 = (double)rtt[(long)((double)(n - 1) * 0.99)];
	printf("%s size=%zu iters=%ld lat_us=%.3f mean_us=%.3f min_us=%.3f "
	       "p99_us=%.3f%s\n",
	       name, size, iters, med / 2e3, sum / (double)n / 2e3,
	       (double)rtt[0] / 2e3, p99 / 2e3, extra ? extra : "");
	fflush(stdout);
}

static inline void bench_print_bw(const char *name, size_t size,
				  uint64_t bytes, uint64_t ns,
				  const char *extra)
{
	/* mbps: 10^6 bytes per second (MB/s) */
	printf("%s size=%zu bytes=%llu mbps=%.1f secs=%.4f%s\n", name, size,
	       (unsigned long long)bytes, (double)bytes * 1e3 / (double)ns,
	       (double)ns / 1e9, extra ? extra : "");
	fflush(stdout);
}

static inline void bench_die(const char *what)
{
	perror(what);
	exit(1);
}

static inline void bench_nonblock_nodelay(int fd)
{
	int one = 1;

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		bench_die("fcntl");
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		bench_die("TCP_NODELAY");
}

/* a listening socket on every address of the wildcard, IPv4 or IPv6 */
static inline int bench_listen(const char *port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*ai, *p;
	int fd = -1, one = 1, ret;

	ret = getaddrinfo(NULL, port, &hints, &ai);
	if (ret) {
		fprintf(stderr, "getaddrinfo: %s\n", gai_strerror(ret));
		exit(1);
	}
	/* prefer IPv4 so 127.0.0.1 reaches us even without dual-stack */
	for (p = ai; p; p = p->ai_next)
		if (p->ai_family == AF_INET)
			break;
	if (!p)
		p = ai;
	fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC,
		    p->ai_protocol);
	if (fd < 0)
		bench_die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, p->ai_addr, p->ai_addrlen) < 0)
		bench_die("bind");
	if (listen(fd, 16) < 0)
		bench_die("listen");
	freeaddrinfo(ai);
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		bench_die("fcntl");
	return fd;
}

/* a blocking connect, then non-blocking with TCP_NODELAY */
static inline int bench_connect(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM},
			*ai, *p;
	int fd = -1, ret;

	ret = getaddrinfo(host, port, &hints, &ai);
	if (ret) {
		fprintf(stderr, "getaddrinfo: %s\n", gai_strerror(ret));
		exit(1);
	}
	for (p = ai; p; p = p->ai_next) {
		fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC,
			    p->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, p->ai_addr, p->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		bench_die("connect");
	bench_nonblock_nodelay(fd);
	return fd;
}

#endif /* BENCH_COMMON_H */
