/* SPDX-License-Identifier: MIT */
/*
 * reclaim.h - a grown grant that comes back when the peer stops using it
 * (struct rmsg_conn.rcl; reclaim.c owns it, credit.h tells the rule).
 */
#ifndef RMSG_RECLAIM_H
#define RMSG_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include "timer.h" /* struct rmsgi_timer */

/* how often a grown grant is looked at; how many looks in a row must
 * find the peer quiet before it is asked; how long it has to answer a
 * request before it is taken for one that does not know it */
#define RMSGI_RECLAIM_MS 1000
#define RMSGI_RECLAIM_QUIET 2
#define RMSGI_RECLAIM_WAITS 5

struct rmsgi_reclaim {
	struct rmsgi_timer t; /* runs while the grant is above its start */
	bool on;
	bool asked;    /* a TAKE went, its GIVE has not come */
	bool never;    /* the peer never answered one: not asked again */
	uint8_t waits; /* looks since the TAKE went */
	uint8_t quiet; /* looks in a row that found the peer quiet */
	uint32_t seen; /* the peer's frames at the last look */
	uint32_t credit_frames; /* of them, CREDIT frames (rx.c) */
};

#endif
