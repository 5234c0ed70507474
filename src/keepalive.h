/* SPDX-License-Identifier: MIT */
/*
 * keepalive.h - a connection's liveness (struct rmsg_conn.live): when the
 * peer was last heard and we last spoke, the probe timer, and how far a
 * large frame or the oldest unanswered rendezvous had got. keepalive.c
 * owns it; the per-frame paths (rx.c, send.c) mark it through the inline
 * helpers here, so no other file touches its fields.
 */
#ifndef RMSG_KEEPALIVE_H
#define RMSG_KEEPALIVE_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>

#include "timer.h" /* struct rmsgi_timer */

struct rmsgi_live {
	struct rmsgi_timer ka; /* the probe timer, while on */
	bool on;
	ev_tstamp last_rx;   /* the peer last heard (a frame, or progress) */
	ev_tstamp last_tx;   /* our last frame posted */
	ev_tstamp tick;	     /* the timer's last run: a stalled loop shows */
	ev_tstamp wait_mark; /* rndvq last moved (an answer, or first op) */
	size_t rx_mark;	     /* payload bytes of a large frame at last life */
	/* our send queue, with answers for the peer in it, stuck since
	 * (0: not stuck), and the tx.posts count it was last seen at */
	ev_tstamp stuck_since;
	uint64_t posts_seen;
};

/* a frame from the peer, at @now */
static inline void rmsgi_live_rx(struct rmsgi_live *l, ev_tstamp now)
{
	l->last_rx = now;
}

/* we posted a frame at @now */
static inline void rmsgi_live_tx(struct rmsgi_live *l, ev_tstamp now)
{
	l->last_tx = now;
}

/* has nothing been posted at @now yet (the loop time)? */
static inline bool rmsgi_live_tx_before(const struct rmsgi_live *l,
					ev_tstamp now)
{
	return l->last_tx != now;
}

/* the rendezvous queue moved (an answer came, or its first op went) */
static inline void rmsgi_live_wait_moved(struct rmsgi_live *l, ev_tstamp now)
{
	l->wait_mark = now;
}

#endif /* RMSG_KEEPALIVE_H */
