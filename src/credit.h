/* SPDX-License-Identifier: MIT */
/*
 * credit.h - receive credits.
 *
 * Each side grants its peer a number of receive buffers (credits). A frame
 * that lands in a receive buffer costs the sender one credit. The receiver
 * counts buffers it has reposted and returns them, piggybacked on any
 * outgoing header or, past a threshold, in a CREDIT frame. A message never
 * takes the last credit: it is kept for CREDIT frames, so two sides that
 * both ran dry can always tell each other about freed buffers.
 */
#ifndef RMSG_CREDIT_H
#define RMSG_CREDIT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

struct rmsgi_credit {
	uint32_t avail;	    /* frames we may still send */
	uint32_t to_return; /* buffers reposted, not yet told to the peer */
	uint32_t threshold; /* explicit CREDIT frame at this many */
};

/* @peer_grant: buffers the peer gave us; @my_grant: buffers we gave it */
void rmsgi_credit_init(struct rmsgi_credit *cr, uint32_t peer_grant,
		       uint32_t my_grant);

/* the per-frame ones are inline: they run for every message */

/* may a message (true) or a CREDIT frame (false) be sent now? */
static inline bool rmsgi_credit_can_send(const struct rmsgi_credit *cr,
					 bool message)
{
	return message ? cr->avail >= 2 : cr->avail >= 1;
}

/* takes one credit and returns the count to piggyback */
static inline uint16_t rmsgi_credit_take(struct rmsgi_credit *cr)
{
	uint32_t n = cr->to_return > 0xffff ? 0xffff : cr->to_return;

	cr->avail--;
	cr->to_return -= n;
	return (uint16_t)n;
}

/* a receive buffer was reposted */
static inline void rmsgi_credit_freed(struct rmsgi_credit *cr)
{
	cr->to_return++;
}

/* the peer returned @n credits; -EPROTO if that exceeds the grant */
static inline int rmsgi_credit_returned(struct rmsgi_credit *cr, uint32_t n,
					uint32_t grant)
{
	if (cr->avail > grant || n > grant - cr->avail)
		return -EPROTO;
	cr->avail += n;
	return 0;
}

/* should an explicit CREDIT frame go out? */
static inline bool rmsgi_credit_want_update(const struct rmsgi_credit *cr)
{
	return cr->to_return >= cr->threshold;
}

#endif /* RMSG_CREDIT_H */
