/* SPDX-License-Identifier: MIT */
/*
 * quar.h - the quarantine of released objects, one helper for every
 * object an app may release twice: TCP's message objects, RDMA's
 * rendezvous messages, unpacked PACK frames and RPC requests.
 *
 * A released object keeps its "released" mark (so a second release, or
 * a reply to an answered request, sees it and does nothing) and stays
 * readable memory: it waits at the tail of a FIFO until objects worth
 * more than the quarantine's bound were released after it. Only then is
 * it freed, or reused by its owner. An app that releases twice within
 * that window gets a harmless no-op; never freed memory or another live
 * object.
 */
#ifndef RMSG_QUAR_H
#define RMSG_QUAR_H

#include <stddef.h>

#include "list.h"

/* what an object embeds to wait in a quarantine */
struct rmsgi_quar_ent {
	struct rmsgi_list link;
	size_t weight; /* what it counts against the bound (messages) */
};

struct rmsgi_quar {
	struct rmsgi_list fifo; /* oldest first */
	size_t weight;		/* of all that wait */
	size_t keep;		/* the bound */
};

static inline void rmsgi_quar_init(struct rmsgi_quar *q, size_t keep)
{
	rmsgi_list_init(&q->fifo);
	q->weight = 0;
	q->keep = keep;
}

/* @e, just released, waits at the tail with @weight */
static inline void rmsgi_quar_put(struct rmsgi_quar *q,
				  struct rmsgi_quar_ent *e, size_t weight)
{
	e->weight = weight;
	rmsgi_list_add_tail(&q->fifo, &e->link);
	q->weight += weight;
}

/* the oldest entry, out of the quarantine, if the weight after it
 * still reaches @keep (it has waited long enough); else NULL */
static inline struct rmsgi_quar_ent *rmsgi_quar_due(struct rmsgi_quar *q,
						    size_t keep)
{
	struct rmsgi_quar_ent *o;

	if (rmsgi_list_empty(&q->fifo))
		return NULL;
	o = rmsgi_list_entry(q->fifo.next, struct rmsgi_quar_ent, link);
	if (q->weight - o->weight < keep)
		return NULL;
	rmsgi_list_del(&o->link);
	q->weight -= o->weight;
	return o;
}

/* an entry that waited out the bound, for its owner to free: call
 * after each put until NULL */
static inline struct rmsgi_quar_ent *rmsgi_quar_over(struct rmsgi_quar *q)
{
	return rmsgi_quar_due(q, q->keep);
}

/* an entry its owner may reuse instead of allocating: one that has
 * waited for keep - 1 releases after it (the quarantine is full) */
static inline struct rmsgi_quar_ent *rmsgi_quar_reuse(struct rmsgi_quar *q)
{
	return q->keep ? rmsgi_quar_due(q, q->keep - 1) : NULL;
}

/* any entry, to free them all (the owner's end); NULL once empty */
static inline struct rmsgi_quar_ent *rmsgi_quar_drain(struct rmsgi_quar *q)
{
	return rmsgi_quar_due(q, 0);
}

#endif /* RMSG_QUAR_H */
