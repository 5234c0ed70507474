// SPDX-License-Identifier: MIT
/* credit.c - receive credit accounting (see credit.h for the rules) */
#include <errno.h>

#include "credit.h"

void rmsgi_credit_grant(struct rmsgi_credit *cr, uint32_t my_grant)
{
	cr->peer_avail = (int32_t)my_grant;
	cr->grant = my_grant;
	cr->grant_min = my_grant;
	cr->grant_max = my_grant;
	cr->grant_cap = my_grant;
	cr->shrink_to = my_grant;
	cr->epoch_n = 0;
	cr->epoch_low = (int32_t)my_grant;
	cr->give_want = 0;
	/* no byte window until both hellos say so (rmsgi_credit_window) */
	rmsgi_credit_window(cr, 0, 0);
}

void rmsgi_credit_epoch(struct rmsgi_credit *cr)
{
	int32_t used = (int32_t)cr->grant - cr->epoch_low;

	if (cr->grant > cr->grant_min && used >= 0 &&
	    (uint32_t)used * 2 < cr->grant) {
		uint32_t to = (uint32_t)used * 2;

		cr->shrink_to = to > cr->grant_min ? to : cr->grant_min;
	}
	cr->epoch_n = 0;
	cr->epoch_low = cr->peer_avail;
}

void rmsgi_credit_limit(struct rmsgi_credit *cr, uint32_t max)
{
	if (max < cr->grant_min)
		max = cr->grant_min;
	cr->grant_max = max;
	cr->grant_cap = max;
}

void rmsgi_credit_init(struct rmsgi_credit *cr, uint32_t peer_grant,
		       uint32_t my_grant)
{
	cr->avail = peer_grant;
	cr->to_return = 0;
	/* we owe at most what we granted: return it in quarters so a
	 * streaming peer never drains its window */
	cr->threshold = rmsgi_credit_threshold(my_grant);
}

uint16_t rmsgi_credit_take_beyond(struct rmsgi_credit *cr)
{
	if (!rmsgi_credit_can_send(cr, false))
		cr->avail = 1; /* the one beyond the grant; ours are gone */
	return rmsgi_credit_take(cr);
}

void rmsgi_credit_window(struct rmsgi_credit *cr, uint32_t out, uint32_t in)
{
	if (!out || !in)
		out = in = 0;
	cr->win_out = out;
	cr->wavail = out;
	cr->wcap_out = out / 2;
	cr->win_in = in;
	cr->wcap_in = in / 2;
	cr->wq_in = in / 4;
	cr->wpeer_avail = in;
	cr->wto_return = 0;
}

int rmsgi_credit_given_back(struct rmsgi_credit *cr, uint64_t n)
{
	if (n > (uint64_t)(cr->peer_avail > 0 ? cr->peer_avail : 0) ||
	    n > cr->grant)
		return -EPROTO;
	if (!n)
		return 0; /* (no new epoch: that would stop its shrinking) */
	cr->peer_avail -= (int32_t)n;
	cr->grant -= (uint32_t)n;
	if (cr->shrink_to > cr->grant)
		cr->shrink_to = cr->grant;
	cr->threshold = rmsgi_credit_threshold(cr->grant);
	/* a new epoch and a new look, from what the peer holds now */
	cr->epoch_n = 0;
	cr->epoch_low = cr->peer_avail;
	return 0;
}
