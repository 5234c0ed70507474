// SPDX-License-Identifier: MIT
/*
 * memcpy_bw SIZE - the memcpy bound of compare-shm.sh: copies SIZE-byte
 * blocks from a 64 MiB source into a 256 KiB destination (the shm ring's
 * size, as a ring's writer does) for about a second and prints MB/s
 * (10^6 bytes per second), the median of 5 runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SRC ((size_t)64 << 20)
#define DST ((size_t)256 << 10)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
	char *src = malloc(SRC), *dst = malloc(DST > size ? DST : size);
	double r[5];
	int k;

	if (!src || !dst || !size || size > SRC)
		return 1;
	memset(src, 1, SRC);
	memset(dst, 2, DST > size ? DST : size);
	for (k = 0; k < 5; k++) {
		size_t so = 0, d = 0, bytes = 0;
		double t0 = now(), t;

		do {
			memcpy(dst + d, src + so, size);
			bytes += size;
			so = (so + size) % (SRC - size + 1);
			d = size < DST ? (d + size) % (DST - size + 1) : 0;
			t = now();
		} while (t - t0 < 0.2);
		r[k] = (double)bytes / (t - t0) / 1e6;
	}
	qsort(r, 5, sizeof(r[0]), cmp);
	printf("%.1f\n", r[2] + (double)(dst[size / 2] == 9));
	return 0;
}
