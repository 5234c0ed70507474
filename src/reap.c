// SPDX-License-Identifier: MIT
/*
 * reap.c - the context's reaper: backend objects that ended are freed
 * once no backend entry point is on the stack (transport.h: end of life).
 * The context owns one (ctx.c runs it from its flush and destroy); the
 * backends queue on it and bracket their entry points.
 */
#include "transport/transport.h"

void rmsgi_reap_run(struct rmsgi_reaper *rp)
{
	struct rmsgi_reap *r;

	/* an item's up-calls may enter and leave a backend: no nested run */
	rp->depth++;
	while ((r = rp->head)) {
		rp->head = r->next;
		if (!rp->head)
			rp->tail = &rp->head;
		r->fn(r);
	}
	rp->depth--;
}
