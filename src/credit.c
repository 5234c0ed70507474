// SPDX-License-Identifier: MIT
/* credit.c - receive credit accounting (see credit.h for the rules) */
#include <errno.h>

#include "credit.h"

void rmsgi_credit_grant(struct rmsgi_credit *cr, uint32_t my_grant)
{
	cr->peer_avail = (int32_t)my_grant;
}

void rmsgi_credit_init(struct rmsgi_credit *cr, uint32_t peer_grant,
		       uint32_t my_grant)
{
	cr->avail = peer_grant;
	cr->to_return = 0;
	/* we owe at most what we granted: return it in quarters so a
	 * streaming peer never drains its window */
	cr->threshold = my_grant / 4 < 2 ? 2 : my_grant / 4;
}

uint16_t rmsgi_credit_take_beyond(struct rmsgi_credit *cr)
{
	if (!rmsgi_credit_can_send(cr, false))
		cr->avail = 1; /* the one beyond the grant; ours are gone */
	return rmsgi_credit_take(cr);
}
