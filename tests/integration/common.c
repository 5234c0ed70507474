// SPDX-License-Identifier: MIT
/* common.c - integration test helpers (see common.h) */
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

const char *t_transport(void)
{
	const char *t = getenv("RMSG_TEST_TRANSPORT");

	return t && *t ? t : "tcp";
}

static const char *t_addr(void)
{
	const char *a = getenv("RMSG_TEST_ADDR");

	return a && *a ? a : "127.0.0.1";
}

void t_uri(char *buf, size_t len, uint16_t port)
{
	snprintf(buf, len, "%s://%s:%u", t_transport(), t_addr(), port);
}

void t_listen(struct rmsg_ctx *ctx, const struct rmsg_cfg *cfg,
	      const struct rmsg_conn_ops *ops, rmsg_accept_cb accept, void *arg,
	      struct rmsg_listener **l_p, char *uri, size_t len)
{
	uint16_t port;

	t_uri(uri, len, 0);
	T_OK(rmsg_listen(ctx, uri, cfg, ops, accept, arg, l_p));
	T_OK(rmsg_listener_port(*l_p, &port));
	t_uri(uri, len, port);
}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	T_FAIL("deadline of %.0f s passed", w->repeat);
}

void t_deadline(struct ev_loop *loop, double seconds)
{
	static ev_timer w;

	seconds *= t_scale();
	ev_timer_init(&w, deadline_cb, seconds, 0);
	w.repeat = seconds;
	ev_timer_start(loop, &w);
	ev_unref(loop); /* the deadline alone must not keep the loop up */
}

void t_require_transport(void)
{
	struct stat st;

	if (!strcmp(t_transport(), "rdma") &&
	    stat("/dev/infiniband/rdma_cm", &st) != 0) {
		printf("SKIP: no RDMA stack on this machine "
		       "(/dev/infiniband/rdma_cm missing); "
		       "'make check-rxe' runs this test in the VM\n");
		exit(T_SKIP);
	}
}

void t_seed(uint64_t seed)
{
	rng = seed ? seed : 1;
}

uint64_t t_rand(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

size_t t_size_log(size_t lo, size_t hi)
{
	int lo_b = 0, hi_b = 0, b;
	size_t base, v;

	while (((size_t)1 << lo_b) < lo)
		lo_b++;
	while (((size_t)1 << hi_b) < hi)
		hi_b++;
	b = lo_b + (int)(t_rand() % (uint64_t)(hi_b - lo_b + 1));
	base = (size_t)1 << b;
	v = base / 2 + t_rand() % (base / 2 + 1);
	if (v < lo)
		v = lo;
	if (v > hi)
		v = hi;
	return v;
}

static uint64_t word(uint64_t seed, size_t k)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + k * 0xbf58476d1ce4e5b9ull;

	return x ^ (x >> 29);
}

/* word-wise pattern: fast enough to check gigabytes */
void t_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	size_t k, n = len / 8;

	for (k = 0; k < n; k++) {
		uint64_t w = word(seed, k);

		memcpy(p + 8 * k, &w, 8);
	}
	for (k = 8 * n; k < len; k++)
		p[k] = (uint8_t)word(seed, k);
}

int t_check(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;
	size_t k, n = len / 8;

	for (k = 0; k < n; k++) {
		uint64_t w = word(seed, k), v;

		memcpy(&v, p + 8 * k, 8);
		if (v != w)
			return -1;
	}
	for (k = 8 * n; k < len; k++)
		if (p[k] != (uint8_t)word(seed, k))
			return -1;
	return 0;
}

int t_split(void *buf, size_t len, struct iovec *iov, int max)
{
	int n = 1 + (int)(t_rand() % (uint64_t)max), i;
	size_t off = 0;

	for (i = 0; i < n - 1; i++) {
		size_t piece = len - off ? t_rand() % (len - off + 1) : 0;

		iov[i].iov_base = (uint8_t *)buf + off;
		iov[i].iov_len = piece;
		off += piece;
	}
	iov[n - 1].iov_base = (uint8_t *)buf + off;
	iov[n - 1].iov_len = len - off;
	return n;
}

double t_scale(void)
{
	const char *s = getenv("RMSG_TEST_SCALE");
	double v = s ? atof(s) : 1.0;

	return v > 0 ? v : 1.0;
}

static void run_for_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	ev_break(loop, EVBREAK_ONE);
}

void t_run_for(struct ev_loop *loop, double secs)
{
	ev_timer w;

	ev_timer_init(&w, run_for_cb, secs, 0);
	ev_timer_start(loop, &w);
	ev_run(loop, 0);
	ev_timer_stop(loop, &w);
}

static void t_stalls_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct t_stalls *s = w->data;
	ev_tstamp now = ev_now(loop);

	if (now - s->prev > s->gap) {
		s->end = now;
		s->n++;
		if (now - s->prev > s->longest)
			s->longest = now - s->prev;
	}
	s->prev = now;
}

void t_stalls_watch(struct ev_loop *loop, struct t_stalls *s, double gap)
{
	memset(s, 0, sizeof(*s));
	s->gap = gap;
	ev_now_update(loop);
	s->prev = ev_now(loop);
	ev_timer_init(&s->w, t_stalls_cb, 0.02, 0.02);
	s->w.data = s;
	ev_timer_start(loop, &s->w);
	ev_unref(loop);
}

int t_revoke(struct ev_loop *loop, struct rmsg_mr *mr, const void *desc)
{
	double t0 = ev_time();
	int ret;

	while ((ret = rmsg_mr_revoke(mr, desc)) == -EBUSY &&
	       ev_time() - t0 < 60 * t_scale())
		t_run_for(loop, 0.01);
	return ret;
}

static void t_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	struct t_child *c = w->data;

	ev_child_stop(loop, w);
	T_ASSERT(WIFEXITED(w->rstatus) && WEXITSTATUS(w->rstatus) == 0,
		 "raw peer failed with status %d", w->rstatus);
	*c->done = 1;
	if (c->then)
		c->then();
}

void t_child_watch(struct ev_loop *loop, struct t_child *c, pid_t pid,
		   int *done, void (*then)(void))
{
	c->done = done;
	c->then = then;
	ev_child_init(&c->w, t_child_cb, pid, 0);
	c->w.data = c;
	ev_child_start(loop, &c->w);
}

const char *t_need_env(const char *name, const char *script)
{
	const char *v = getenv(name);

	if (!v || !*v) {
		fprintf(stderr, "SKIP: %s is not set: run %s\n", name, script);
		exit(T_SKIP);
	}
	return v;
}
