// SPDX-License-Identifier: MIT
/*
 * stats.c - counters per connection and per context (struct rmsg_stats).
 *
 * The counting itself is plain increments where the core already is
 * (send.c, rx.c, rma.c, keepalive.c, conn.c, listener.c), on the loop
 * thread. A context keeps the sums of its closed connections and its own
 * counters; reading it adds those of the live ones.
 */
#include "rmsg_int.h"

#define NCOUNT (sizeof(struct rmsg_stats) / sizeof(uint64_t))

static void add(struct rmsg_stats *to, const struct rmsg_stats *from)
{
	uint64_t *t = (uint64_t *)to;
	const uint64_t *f = (const uint64_t *)from;
	size_t i;

	for (i = 0; i < NCOUNT; i++)
		t[i] += f[i];
}

/* eager_sent and eager_recv stay 0 in the stored counters (fill) */
void rmsgi_stats_fold(struct rmsg_conn *c)
{
	add(&c->ctx->st, &c->st);
}

/* the first min(@size, ours) bytes of @src go to @st; what is derived
 * is filled in here, not counted per message: every message that did
 * not go by rendezvous went eager */
static int fill(struct rmsg_stats *st, size_t size, struct rmsg_stats *src)
{
	src->eager_sent = src->msgs_sent - src->rndv_sent;
	src->eager_recv = src->msgs_recv - src->rndv_recv;
	if (size > sizeof(*src))
		size = sizeof(*src);
	memcpy(st, src, size);
	return (int)size;
}

int rmsg_conn_stats(const struct rmsg_conn *c, struct rmsg_stats *st,
		    size_t size)
{
	struct rmsg_stats v;

	if (!c || !st || size < sizeof(uint64_t))
		return -EINVAL;
	v = c->st;
	return fill(st, size, &v);
}

int rmsg_ctx_stats(const struct rmsg_ctx *ctx, struct rmsg_stats *st,
		   size_t size)
{
	struct rmsg_stats sum;
	const struct rmsgi_list *n;

	if (!ctx || !st || size < sizeof(uint64_t))
		return -EINVAL;
	sum = ctx->st;
	for (n = ctx->conns.next; n != &ctx->conns; n = n->next)
		add(&sum, &rmsgi_list_entry(n, struct rmsg_conn, link)->st);
	return fill(st, size, &sum);
}
