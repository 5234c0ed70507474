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
 *
 * The other direction too: what the peer may still send us, so that a
 * frame beyond our grant is refused (-EPROTO), with one exception, the
 * BYE of a closing peer (rmsgi_credit_take_beyond).
 *
 * Only credit.c and this file touch the fields; the connection (conn.c,
 * send.c, rx.c) and keepalive.c go through the functions below.
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
	/* credits the peer can still use, as we see it: never below what
	 * it really has (we count a return when we post it); a frame that
	 * finds it at 0 is beyond the grant: -EPROTO */
	int32_t peer_avail;
};

/* what we grant the peer (@my_grant receive buffers), set when the
 * connection is made: its frames can come before its hello is known
 * (RDMA) and are counted from the start. Nothing else is set. */
void rmsgi_credit_grant(struct rmsgi_credit *cr, uint32_t my_grant);

/* the peer's hello is known. @peer_grant: buffers the peer gave us;
 * @my_grant: buffers we gave it. What the peer may still send
 * (rmsgi_credit_grant, less the frames that came since) is kept. */
void rmsgi_credit_init(struct rmsgi_credit *cr, uint32_t peer_grant,
		       uint32_t my_grant);

/* takes a credit for our BYE, the last frame of a local close, even when
 * none is left (our last one went on a CREDIT frame whose answer is still
 * on its way): the peer takes this one frame beyond its grant, once
 * (rmsgi_credit_bye_beyond). Returns the count to piggyback, as
 * rmsgi_credit_take. */
uint16_t rmsgi_credit_take_beyond(struct rmsgi_credit *cr);

/* the per-frame ones are inline: they run for every message */

/* may a message (true) or a CREDIT frame (false) be sent now? */
static inline bool rmsgi_credit_can_send(const struct rmsgi_credit *cr,
					 bool message)
{
	return message ? cr->avail >= 2 : cr->avail >= 1;
}

/* takes one credit for a frame and returns the count to piggyback on it,
 * which the peer may use from now on (counted at once: the peer can
 * never have more than we think) */
static inline uint16_t rmsgi_credit_take(struct rmsgi_credit *cr)
{
	uint32_t n = cr->to_return > 0xffff ? 0xffff : cr->to_return;

	cr->avail--;
	cr->to_return -= n;
	cr->peer_avail += (int32_t)n;
	return (uint16_t)n;
}

/* takes one credit for a frame that has no header to piggyback returned
 * credits on (a native RDMA write with immediate) */
static inline void rmsgi_credit_spend(struct rmsgi_credit *cr)
{
	cr->avail--;
}

/* a frame that took a credit (rmsgi_credit_take, returning @n, or
 * rmsgi_credit_spend, @n 0) was not sent: the credit and the returns
 * come back. Unless @sure (the transport took none of it), the peer is
 * still counted as having the returns: it might, and it is never counted
 * below what it has */
static inline void rmsgi_credit_untake(struct rmsgi_credit *cr, uint16_t n,
				       bool sure)
{
	cr->avail++;
	cr->to_return += n;
	if (sure)
		cr->peer_avail -= (int32_t)n;
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

/* should an explicit CREDIT frame go out? Past the threshold, or
 * whenever the peer is down to its last credit and we owe it some */
static inline bool rmsgi_credit_want_update(const struct rmsgi_credit *cr)
{
	uint32_t n = cr->to_return;

	return n >= cr->threshold || (n && cr->peer_avail <= 1);
}

/* a frame from the peer arrived and used one of its credits: 0, or
 * -EPROTO if it had none left, a frame beyond the grant (held messages
 * count until released) */
static inline int rmsgi_credit_arrived(struct rmsgi_credit *cr)
{
	return --cr->peer_avail < 0 ? -EPROTO : 0;
}

/* rmsgi_credit_arrived refused a frame: may it be the peer's BYE, the one
 * frame a closing peer may send beyond the grant (rmsgi_credit_take_beyond)?
 * Only the first one beyond: any frame after it is beyond again. The caller
 * checks that the frame is the peer's first BYE. */
static inline bool rmsgi_credit_bye_beyond(const struct rmsgi_credit *cr)
{
	return cr->peer_avail == -1;
}

/* can the peer not talk for want of credits, with none on their way to it
 * (we have nothing to return: our app holds every message it sent)? */
static inline bool rmsgi_credit_peer_held(const struct rmsgi_credit *cr)
{
	return cr->peer_avail <= 0 && cr->to_return == 0;
}

#endif /* RMSG_CREDIT_H */
