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
 * The grant follows use (issue 20): a connection starts with a few
 * credits (rmsg_cfg_set_credits_initial) and, toward a peer whose hello
 * says it takes them (RMSGI_HELLO_F_GROW), the receiver grants more by
 * returning more than was consumed whenever the peer's frames find it
 * down to its last credit (doubling, up to rmsg_cfg_set_credits), and
 * takes them back by returning fewer than were consumed: the receiver
 * looks at the peer's use over each epoch of as many frames as the grant
 * (the most credits it had in use at once); one that never used more than
 * half of its grant shrinks to twice that use, never below the start.
 * The peer can never hold more than we counted (peer_avail), so the
 * hostile-peer rule is unchanged: the first frame beyond it is -EPROTO.
 *
 * A grown grant also comes back when the peer stops using it (issue 32;
 * reclaim.c): the epoch rule above needs the peer's frames to withhold
 * their returns, and an idle peer holds all its credits. So the receiver
 * asks (a CREDIT frame marked RMSGI_CREDIT_TAKE, id = how many) and the
 * peer gives back what it holds beyond the two a message needs (a CREDIT
 * frame marked RMSGI_CREDIT_GIVE, id = how many, dropped from its avail
 * as the frame goes); the receiver then lowers the grant and its view of
 * the peer by that many (rmsgi_credit_given_back). A peer that gives more
 * than it can hold is refused (-EPROTO). A peer that does not know TAKE
 * ignores it (an older librmsg reads an unknown aux as a plain CREDIT
 * frame), and is never sent GIVE, which only answers a TAKE.
 *
 * The byte window (issue 32): toward a peer whose hello grants one
 * (RMSGI_HELLO_WIN, TCP), a frame also costs bytes: its payload's
 * length, at most half the window (a larger frame costs half, so one
 * can always go once the receiver has freed what it holds). The sender
 * may have at most the window's bytes in flight or unreleased, however
 * many frames that is; the receiver returns bytes as it frees frames,
 * piggybacked in the header (RMSGI_HDR bytes) or in a CREDIT frame, and
 * refuses a frame that costs more than the peer has left (-EPROTO). The
 * window does not grow or shrink: it bounds bytes, the frame grant
 * (above) still bounds how many frames a flood of small ones may take.
 *
 * Only credit.c and this file touch the fields; the connection (conn.c,
 * send.c, rx.c) and keepalive.c go through the functions below.
 */
#ifndef RMSG_CREDIT_H
#define RMSG_CREDIT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rmsgi_credit {
	uint32_t avail;	    /* frames we may still send */
	uint32_t to_return; /* buffers reposted, not yet told to the peer */
	uint32_t threshold; /* explicit CREDIT frame at this many */
	/* credits the peer can still use, as we see it: never below what
	 * it really has (we count a return when we post it); a frame that
	 * finds it at 0 is beyond the grant: -EPROTO */
	int32_t peer_avail;
	/* receive buffers granted to the peer now: what it may hold, in
	 * flight, in our hands or still to be returned */
	uint32_t grant;
	uint32_t grant_min; /* the start: never shrunk below */
	/* the backend returns the credits of buffers (it reposts them
	 * first: RMSGI_TR_CAP_CREDIT_LATE), not rmsgi_conn_rx() */
	bool late;
	uint32_t grant_max; /* not grown beyond (the cap, or lower) */
	uint32_t grant_cap; /* the configured maximum */
	uint32_t shrink_to; /* freed buffers are withheld while above */
	uint32_t epoch_n;   /* frames that came this epoch */
	int32_t epoch_low;  /* the least peer_avail they left */
	uint32_t give_want; /* credits the peer asked back, not yet given */
	uint32_t frames;    /* frames that came (reclaim.c) */
	/* the byte window; all 0 while off (a peer without one, RDMA) */
	uint32_t win_out;    /* the peer's window to us */
	uint32_t wavail;     /* bytes we may still send */
	uint32_t wcap_out;   /* the most a frame costs us: win_out / 2 */
	uint32_t win_in;     /* our window to the peer */
	uint32_t wcap_in;    /* the most a frame costs the peer: win_in / 2 */
	uint32_t wq_in;	     /* a quarter of win_in: returns go out at it */
	uint32_t wto_return; /* bytes of freed frames, not yet returned */
	/* bytes the peer can still send, as we see it (never below what
	 * it really has); a frame that costs more is -EPROTO */
	uint32_t wpeer_avail;
};

/* a frame of @len payload bytes costs this much of a window whose half
 * is @cap (0: none, no window) */
static inline uint32_t rmsgi_win_cost(uint64_t len, uint32_t cap)
{
	return len < cap ? (uint32_t)len : cap;
}

/* the byte windows, once both hellos are known: @out the peer's window
 * to us, @in ours to the peer; either 0 turns both off (a peer that
 * does not know them) */
void rmsgi_credit_window(struct rmsgi_credit *cr, uint32_t out, uint32_t in);

/* may a frame of @len payload bytes be sent now, by the byte window? */
static inline bool rmsgi_credit_can_bytes(const struct rmsgi_credit *cr,
					  uint64_t len)
{
	return rmsgi_win_cost(len, cr->wcap_out) <= cr->wavail;
}

/* the most payload bytes a frame sent now may have without waiting
 * for the window (SIZE_MAX without one) */
static inline size_t rmsgi_credit_room(const struct rmsgi_credit *cr)
{
	return cr->win_out ? cr->wavail : SIZE_MAX;
}

/* a frame of @len payload bytes goes: takes its bytes and returns the
 * freed bytes to piggyback on it (the peer may use them from now on) */
static inline uint32_t rmsgi_credit_take_bytes(struct rmsgi_credit *cr,
					       uint64_t len)
{
	uint32_t n = cr->wto_return;

	cr->wavail -= rmsgi_win_cost(len, cr->wcap_out);
	cr->wto_return = 0;
	cr->wpeer_avail += n;
	return n;
}

/* rmsgi_credit_take_bytes undone (as rmsgi_credit_untake, @sure) */
static inline void rmsgi_credit_untake_bytes(struct rmsgi_credit *cr,
					     uint64_t len, uint32_t n,
					     bool sure)
{
	cr->wavail += rmsgi_win_cost(len, cr->wcap_out);
	cr->wto_return += n;
	if (sure)
		cr->wpeer_avail -= n;
}

/* a frame of @len payload bytes arrived: its cost (the caller keeps it
 * for rmsgi_credit_freed_bytes), or -EPROTO (as a negative int64) if the
 * peer had not that many bytes left: beyond the window */
static inline int64_t rmsgi_credit_arrived_bytes(struct rmsgi_credit *cr,
						 uint64_t len)
{
	uint32_t cost = rmsgi_win_cost(len, cr->wcap_in);

	if (cost > cr->wpeer_avail)
		return -EPROTO;
	cr->wpeer_avail -= cost;
	return cost;
}

/* a frame that cost @cost bytes was freed: they go back to the peer */
static inline void rmsgi_credit_freed_bytes(struct rmsgi_credit *cr,
					    uint32_t cost)
{
	cr->wto_return += cost;
}

/* the peer returned @n bytes; -EPROTO if it has none of our window
 * (off) or that exceeds it */
static inline int rmsgi_credit_returned_bytes(struct rmsgi_credit *cr,
					      uint32_t n)
{
	if (n > cr->win_out - cr->wavail)
		return -EPROTO;
	cr->wavail += n;
	return 0;
}

/* the most credits a peer that grows its grant (RMSGI_HELLO_F_GROW)
 * may give: rmsg_cfg_set_credits()'s upper bound */
#define RMSGI_CREDITS_MAX 4096

/* what we grant the peer (@my_grant receive buffers), set when the
 * connection is made: its frames can come before its hello is known
 * (RDMA) and are counted from the start. Nothing else is set. The grant
 * stays fixed unless rmsgi_credit_limit() allows more. */
void rmsgi_credit_grant(struct rmsgi_credit *cr, uint32_t my_grant);

/* the grant may grow up to @max (at least the start; a peer without
 * RMSGI_HELLO_F_GROW: the start, it takes no more) */
void rmsgi_credit_limit(struct rmsgi_credit *cr, uint32_t max);

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

/* the quarter of the grant (at least 2) at which returns go out in a
 * CREDIT frame of their own */
static inline uint32_t rmsgi_credit_threshold(uint32_t grant)
{
	return grant / 4 < 2 ? 2 : grant / 4;
}

/* a receive buffer was reposted: true if its credit goes back to the
 * peer, false if the grant shrank by it instead (an epoch found the
 * peer using less than half of it: rmsgi_credit_epoch) */
static inline bool rmsgi_credit_freed(struct rmsgi_credit *cr)
{
	if (cr->grant > cr->shrink_to) {
		cr->grant--;
		cr->threshold = rmsgi_credit_threshold(cr->grant);
		/* the cap may have been lowered by a backend out of
		 * buffers: with one fewer in use, ask again later */
		cr->grant_max = cr->grant_cap;
		return false;
	}
	cr->to_return++;
	return true;
}

/* should the grant grow? The peer's frame just found it down to its last
 * credit (it cannot send a message) and the grant is below its maximum.
 * Returns the grant wanted (double, at most the maximum), or 0 */
static inline uint32_t rmsgi_credit_grow_want(const struct rmsgi_credit *cr)
{
	if (cr->peer_avail > 1 || cr->grant >= cr->grant_max)
		return 0;
	return cr->grant * 2 < cr->grant_max ? cr->grant * 2 : cr->grant_max;
}

/* the grant is now @grant (rmsgi_credit_grow_want's answer, or less: what
 * the buffers allow; no more than the current grant: the maximum drops
 * to it until the grant shrinks); the new credits go back to the peer
 * with the next returns */
static inline void rmsgi_credit_grown(struct rmsgi_credit *cr, uint32_t grant)
{
	if (grant <= cr->grant) {
		cr->grant_max = cr->grant;
		return;
	}
	cr->to_return += grant - cr->grant;
	cr->grant = grant;
	cr->shrink_to = grant;
	cr->threshold = rmsgi_credit_threshold(grant);
}

/* an epoch of the peer's frames (as many as the grant) ended: a peer that
 * never had more than half of its grant in use gets twice its use, at
 * least the start (the buffers are withheld as they come back) */
void rmsgi_credit_epoch(struct rmsgi_credit *cr);

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
 * whenever the peer is down to its last credit and we owe it some; of
 * the byte window alike: a quarter of it freed, or the peer down to less
 * than half of it (the most a frame costs) and bytes owed */
static inline bool rmsgi_credit_want_update(const struct rmsgi_credit *cr)
{
	uint32_t n = cr->to_return, b = cr->wto_return;

	return n >= cr->threshold || (n && cr->peer_avail <= 1) ||
	       (b && (b >= cr->wq_in || cr->wpeer_avail < cr->wcap_in)) ||
	       cr->give_want != 0;
}

/* a frame from the peer arrived and used one of its credits: 0, or
 * -EPROTO if it had none left, a frame beyond the grant (held messages
 * count until released) */
static inline int rmsgi_credit_arrived(struct rmsgi_credit *cr)
{
	if (--cr->peer_avail < cr->epoch_low)
		cr->epoch_low = cr->peer_avail;
	cr->frames++;
	if (++cr->epoch_n >= cr->grant)
		rmsgi_credit_epoch(cr);
	return cr->peer_avail < 0 ? -EPROTO : 0;
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

/* giving credits back (reclaim.c). The peer asked for @n of ours back
 * (RMSGI_CREDIT_TAKE): they go on our next CREDIT frame */
static inline void rmsgi_credit_give_asked(struct rmsgi_credit *cr, uint64_t n)
{
	cr->give_want = n > RMSGI_CREDITS_MAX ? RMSGI_CREDITS_MAX : (uint32_t)n;
}

/* how many our CREDIT frame gives back now, before it takes its own
 * credit: what was asked, keeping the frame's credit and the two a
 * message needs */
static inline uint32_t rmsgi_credit_give_count(const struct rmsgi_credit *cr)
{
	uint32_t can = cr->avail > 3 ? cr->avail - 3 : 0;

	return cr->give_want < can ? cr->give_want : can;
}

/* the frame giving @n back went: they are no longer ours */
static inline void rmsgi_credit_gave(struct rmsgi_credit *cr, uint32_t n)
{
	cr->avail -= n;
	cr->give_want = 0;
}

/* the peer gave @n of our grant back (RMSGI_CREDIT_GIVE): the grant and
 * what the peer holds drop by @n. -EPROTO if it holds fewer. The grant
 * may end below the start (an epoch shrank it meanwhile): the caller
 * grows it back to the start */
int rmsgi_credit_given_back(struct rmsgi_credit *cr, uint64_t n);

#endif /* RMSG_CREDIT_H */
