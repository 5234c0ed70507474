/* SPDX-License-Identifier: MIT */
/*
 * stats.h - the send side's counters (rmsg_conn_stats), kept by send.c
 * on its hot path (inline) and by stats.c.
 */
#ifndef RMSG_STATS_H
#define RMSG_STATS_H

#include "rmsg_int.h"

/* counters: an op handed to the transport */
static inline void rmsgi_stats_posted(struct rmsg_conn *c,
				      const struct rmsgi_op *op)
{
	switch (op->kind) {
	case RMSGI_OP_SEND:
		if (RMSGI_UNLIKELY(op->type == RMSGI_T_AUTH))
			break; /* the handshake's proof, not a message */
		c->st.msgs_sent++;
		c->st.bytes_sent += op->len;
		if (op->proto == RMSGI_OP_P_RNDV)
			c->st.rndv_sent++; /* eager_sent: the rest (stats.c) */
		break;
	case RMSGI_OP_WRITE:
		if (op->type == RMSGI_T_WRITE_IMM)
			c->st.writes_imm++;
		else
			c->st.writes++;
		break;
	case RMSGI_OP_READ:
		c->st.reads++;
		break;
	case RMSGI_OP_PACK: {
		const struct rmsgi_list *n;

		c->st.packs_sent++;
		c->st.packed_sent += op->aux;
		c->st.msgs_sent += op->aux;
		for (n = op->rlink.next; n != &op->rlink; n = n->next)
			c->st.bytes_sent +=
				rmsgi_list_entry(n, struct rmsgi_op, link)->len;
		break;
	}
	default:
		break;
	}
}

/* counters: a message sent directly (always eager) */
static inline void rmsgi_stats_direct(struct rmsg_conn *c, size_t len)
{
	c->st.msgs_sent++;
	c->st.bytes_sent += len;
}

/* counters: no credit for the op at the head of the queue; it and every
 * user op behind it wait for the peer's, each counted once (stats.c) */
void rmsgi_stats_stall(struct rmsg_conn *c);

#endif /* RMSG_STATS_H */
