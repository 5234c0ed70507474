// SPDX-License-Identifier: MIT
/*
 * stats.c - counters per connection and per context (struct rmsg_stats).
 *
 * The counting itself is plain increments where the core already is
 * (send.c, rx.c, rma.c, keepalive.c, conn.c, listener.c), on the loop
 * thread. A context keeps the sums of its closed connections and its own
 * counters; reading it adds those of the live ones.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "rmsg_int.h"
#include "stats.h"

#define NCOUNT (sizeof(struct rmsg_stats) / sizeof(uint64_t))

/* the names and meanings at run time (rmsg_stat_info), in the order of
 * struct rmsg_stats; rmsg.h's comment on the struct is the long form */
#define C_ RMSG_STAT_COUNTER
#define X_ (RMSG_STAT_COUNTER | RMSG_STAT_CTX_ONLY)
static const struct {
	const char *name, *desc;
	unsigned flags;
} stat_info[] = {
	{"msgs_sent", "messages handed to the transport, RPC included", C_},
	{"bytes_sent", "payload bytes of msgs_sent", C_},
	{"msgs_recv", "messages that arrived whole, RPC included", C_},
	{"bytes_recv", "payload bytes of msgs_recv", C_},
	{"eager_sent", "messages sent with their bytes in the frame", C_},
	{"rndv_sent", "messages sent that the peer read (rendezvous)", C_},
	{"eager_recv", "messages received with their bytes in the frame", C_},
	{"rndv_recv", "messages received by reading them from the peer", C_},
	{"writes", "rmsg_write() operations handed to the transport", C_},
	{"writes_imm", "rmsg_write_imm() operations handed to the transport",
	 C_},
	{"reads", "rmsg_read() operations handed to the transport", C_},
	{"writes_served", "the peer's writes carried out here (TCP)", C_},
	{"reads_served", "the peer's reads answered here (TCP)", C_},
	{"imm_recv", "the peer's writes with immediate that landed", C_},
	{"credit_stalls", "operations that waited for a credit from the peer",
	 C_},
	{"sendq_full", "calls refused with EAGAIN: the send queue was full",
	 C_},
	{"ka_probes", "keepalive probes sent to a silent peer", C_},
	{"ka_timeouts", "connections the keepalive closed (peer silent)", C_},
	{"refused_peer", "one-sided requests of the peer refused here", C_},
	{"refused_ours", "our one-sided operations the peer refused", C_},
	{"proto_errors",
	 "connections ended because the peer broke the "
	 "protocol",
	 C_},
	{"fallbacks", "auto:// connections that fell back to TCP", C_},
	{"conns_opened", "rmsg_connect() calls that returned 0", X_},
	{"conns_accepted", "incoming connections accepted", X_},
	{"conns_refused",
	 "incoming connections refused (limits, accept "
	 "callback, authentication)",
	 X_},
	{"conns_closed", "connections that ended", X_},
	{"auth_failures", "handshakes that failed authentication", X_},
	{"packs_sent", "frames sent that packed several messages", C_},
	{"packed_sent", "messages sent in packed frames", C_},
	{"packs_recv", "frames received that packed several messages", C_},
	{"packed_recv", "messages received in packed frames", C_},
	{"reg_taken", "bytes charged to the registered-memory budget", X_},
	{"reg_given", "bytes given back to the registered-memory budget", X_},
	{"suspends", "resumable connections suspended: their transport failed",
	 C_},
	{"resumes", "suspended connections resumed on a new transport", C_},
	{"replayed", "messages sent again after a resume", C_},
	{"resume_refused", "resume requests refused (session, proof)", X_},
	{"failbacks", "auto:// connections moved back to RDMA from TCP", C_},
	{"credits_given", "credits given back to an idle peer that asked", C_},
	{"credits_reclaimed", "credits an idle peer gave back when asked", C_},
};
#undef C_
#undef X_

_Static_assert(sizeof(stat_info) / sizeof(stat_info[0]) == NCOUNT,
	       "every member of struct rmsg_stats has a name here");

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

int rmsg_stat_count(void)
{
	return (int)NCOUNT;
}

int rmsg_stat_info(int i, const char **name_p, const char **desc_p,
		   unsigned *flags_p)
{
	if (i < 0 || (size_t)i >= NCOUNT)
		return -EINVAL;
	if (name_p)
		*name_p = stat_info[i].name;
	if (desc_p)
		*desc_p = stat_info[i].desc;
	if (flags_p)
		*flags_p = stat_info[i].flags;
	return 0;
}

/* ------------------------------------------------------------------ */
/* export (rmsg_ctx_stats_export): snprintf's rule over the whole text  */

struct out {
	char *buf;
	size_t len, pos; /* pos counts what did not fit too */
};

static void __attribute__((format(printf, 2, 3)))
put(struct out *o, const char *fmt, ...)
{
	size_t room = o->pos < o->len ? o->len - o->pos : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->pos : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

static void conn_labels(const struct rmsg_conn *c, char *buf, size_t len)
{
	char local[64], peer[64];

	rmsgi_addr_fmt(c->ep.addrs_known ? &c->ep.local_addr : NULL, local,
		       sizeof(local));
	rmsgi_addr_fmt(c->ep.addrs_known ? &c->ep.peer_addr : NULL, peer,
		       sizeof(peer));
	snprintf(buf, len,
		 "conn=\"%u\",transport=\"%s\",local=\"%s\",peer=\"%s\"", c->id,
		 rmsg_conn_transport(c), local, peer);
}

/* one family per counter and scope: rmsg_ctx_NAME_total, and
 * rmsg_conn_NAME_total with a sample per live connection (summing the
 * two would count the live ones twice) */
static void prom(struct out *o, const struct rmsg_ctx *ctx, const uint64_t *sum)
{
	const struct rmsgi_list *n;
	unsigned live = 0;
	char lab[256];
	size_t i;

	for (n = ctx->conns.next; n != &ctx->conns; n = n->next)
		live += !rmsgi_conn_is_probe(
			rmsgi_list_entry(n, struct rmsg_conn, link));
	put(o,
	    "# HELP rmsg_ctx_connections connections open now\n"
	    "# TYPE rmsg_ctx_connections gauge\n"
	    "rmsg_ctx_connections %u\n",
	    live);
	for (i = 0; i < NCOUNT; i++)
		put(o,
		    "# HELP rmsg_ctx_%s_total %s\n"
		    "# TYPE rmsg_ctx_%s_total counter\n"
		    "rmsg_ctx_%s_total %llu\n",
		    stat_info[i].name, stat_info[i].desc, stat_info[i].name,
		    stat_info[i].name, (unsigned long long)sum[i]);
	if (!live)
		return;
	for (i = 0; i < NCOUNT; i++) {
		if (stat_info[i].flags & RMSG_STAT_CTX_ONLY)
			continue;
		put(o,
		    "# HELP rmsg_conn_%s_total %s\n"
		    "# TYPE rmsg_conn_%s_total counter\n",
		    stat_info[i].name, stat_info[i].desc, stat_info[i].name);
		for (n = ctx->conns.next; n != &ctx->conns; n = n->next) {
			const struct rmsg_conn *c =
				rmsgi_list_entry(n, struct rmsg_conn, link);
			struct rmsg_stats st, v = c->st;

			if (rmsgi_conn_is_probe(c))
				continue; /* (hidden: start.c) */
			fill(&st, sizeof(st), &v);
			conn_labels(c, lab, sizeof(lab));
			put(o, "rmsg_conn_%s_total{%s} %llu\n",
			    stat_info[i].name, lab,
			    (unsigned long long)((uint64_t *)&st)[i]);
		}
	}
}

static void json_counters(struct out *o, const uint64_t *v, bool conn)
{
	const char *sep = "";
	size_t i;

	put(o, "{");
	for (i = 0; i < NCOUNT; i++) {
		if (conn && (stat_info[i].flags & RMSG_STAT_CTX_ONLY))
			continue;
		put(o, "%s\"%s\":%llu", sep, stat_info[i].name,
		    (unsigned long long)v[i]);
		sep = ",";
	}
	put(o, "}");
}

static void json(struct out *o, const struct rmsg_ctx *ctx, const uint64_t *sum)
{
	const struct rmsgi_list *n;
	const char *sep = "";

	put(o, "{\"counters\":");
	json_counters(o, sum, false);
	put(o, ",\"connections\":[");
	for (n = ctx->conns.next; n != &ctx->conns; n = n->next) {
		const struct rmsg_conn *c =
			rmsgi_list_entry(n, struct rmsg_conn, link);
		struct rmsg_stats st, v = c->st;
		char local[64], peer[64];

		if (rmsgi_conn_is_probe(c))
			continue; /* (hidden: start.c) */
		fill(&st, sizeof(st), &v);
		rmsgi_addr_fmt(c->ep.addrs_known ? &c->ep.local_addr : NULL,
			       local, sizeof(local));
		rmsgi_addr_fmt(c->ep.addrs_known ? &c->ep.peer_addr : NULL,
			       peer, sizeof(peer));
		put(o,
		    "%s{\"id\":%u,\"transport\":\"%s\",\"local\":\"%s\","
		    "\"peer\":\"%s\",\"counters\":",
		    sep, c->id, rmsg_conn_transport(c), local, peer);
		json_counters(o, (const uint64_t *)&st, true);
		put(o, "}");
		sep = ",";
	}
	put(o, "]}\n");
}

int rmsg_ctx_stats_export(const struct rmsg_ctx *ctx, int format, char *buf,
			  size_t len)
{
	struct out o = {.buf = buf, .len = len, .pos = 0};
	struct rmsg_stats sum;

	if (!ctx || (!buf && len) ||
	    (format != RMSG_STATS_PROMETHEUS && format != RMSG_STATS_JSON))
		return -EINVAL;
	rmsg_ctx_stats(ctx, &sum, sizeof(sum));
	if (len)
		buf[0] = 0;
	if (format == RMSG_STATS_PROMETHEUS)
		prom(&o, ctx, (const uint64_t *)&sum);
	else
		json(&o, ctx, (const uint64_t *)&sum);
	if (o.pos > INT_MAX)
		return -EOVERFLOW;
	return (int)o.pos;
}

/* counters: no credit for the op at the head of the queue; it and every
 * user op behind it wait for the peer's, each counted once. Newest
 * first, stopping at one counted already: every op ahead of that one was
 * counted in the same walk, so each op is looked at once. */
void __attribute__((cold)) rmsgi_stats_stall(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	for (n = c->tx.sendq.prev; n != &c->tx.sendq; n = n->prev) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		if (op->stalled)
			break;
		if ((op->kind == RMSGI_OP_SEND && op->type != RMSGI_T_AUTH) ||
		    op->kind == RMSGI_OP_WRITE || op->kind == RMSGI_OP_READ) {
			op->stalled = 1;
			c->st.credit_stalls++;
		}
	}
}
