// SPDX-License-Identifier: MIT
/*
 * reclaim.c - a grown grant comes back from an idle peer (issue 32).
 *
 * The grant follows use (credit.h): it doubles while the peer's frames
 * find it at its last credit, and an epoch of frames that used less than
 * half of it withholds returns until it is twice that use. Both need the
 * peer's frames; a peer that goes idle after a burst holds every credit
 * of the grown grant, and its receive buffers stay with it (RDMA: posted
 * in the shared receive queue and counted against the registered-memory
 * budget) for as long as the connection lives.
 *
 * So while the grant is above its start (by more than one), a timer
 * looks every RMSGI_RECLAIM_MS. The peer is quiet over a look if it sent
 * no more frames than half the start (its CREDIT frames do not count:
 * keepalive sends them; its answers to ours do). Once
 * RMSGI_RECLAIM_QUIET looks in a row found it quiet and it holds enough
 * to give some, it is asked for what is above the start plus one: a
 * CREDIT frame marked RMSGI_CREDIT_TAKE, id = how many. The peer answers
 * with one marked RMSGI_CREDIT_GIVE, id = what it gives (credit.h: what
 * was asked, keeping at least two and its frame's credit; nothing while
 * it has messages waiting to go), dropped from its own credits as the
 * frame goes; here the grant drops by as many and the backend is told
 * (RDMA: the shared receive queue's target drops, the buffers are kept
 * unposted as they come back, and their memory goes back to the pool
 * when whole chunks of them are). An idle peer ends with the start in
 * hand and the GIVE frame's credit on its way back to it: the start
 * plus one, so that a burst afterwards finds it as a new connection
 * would, and grows the grant again as at the start.
 *
 * A peer that has not answered after RMSGI_RECLAIM_WAITS looks (an older
 * librmsg ignores the mark) is not asked again on this connection, unless
 * a GIVE still comes. GIVE is accepted whenever it comes and whatever was
 * asked, as long as the peer gives no more than it holds (else -EPROTO):
 * giving back only ever lowers what it may send. This is not a bound
 * against a hostile peer, which may keep what it was given: the
 * configured credits (rmsg_cfg_set_credits) are that bound.
 */
#include "conn_int.h"

void rmsgi_reclaim_stop(struct rmsg_conn *c)
{
	struct rmsgi_reclaim *r = &c->rcl;

	if (!r->on)
		return;
	/* the connection keeps the loop alive, not this timer */
	ev_ref(c->ctx->loop);
	rmsgi_timer_stop(c->ctx->loop, &r->t);
	r->on = false;
}

/* the peer's frames but its CREDIT frames (keepalive sends those) */
static uint32_t peer_activity(const struct rmsg_conn *c)
{
	return c->cr.frames - c->rcl.credit_frames;
}

/* one look at the grant (the timer's, and the unit tests') */
void rmsgi_reclaim_look(struct rmsg_conn *c)
{
	struct rmsgi_reclaim *r = &c->rcl;
	struct rmsgi_credit *cr = &c->cr;
	uint32_t now = peer_activity(c), did = now - r->seen;

	r->seen = now;
	if (c->state != RMSGI_CS_ESTABLISHED)
		return;
	if (cr->grant <= cr->grant_min + 1 || r->never) {
		rmsgi_reclaim_stop(c);
		return;
	}
	if (r->asked) {
		if (++r->waits < RMSGI_RECLAIM_WAITS)
			return;
		rmsgi_dbg(c->ctx,
			  "conn %u: the peer gave no credits back in %u s "
			  "(an older librmsg?): its grant stays at %u",
			  c->id, RMSGI_RECLAIM_WAITS * RMSGI_RECLAIM_MS / 1000,
			  cr->grant);
		r->never = true;
		rmsgi_reclaim_stop(c);
		return;
	}
	/* busy since the last look, or not quiet for long enough yet, or
	 * holding too few to give any */
	if (did * 2 > cr->grant_min) {
		r->quiet = 0;
		return;
	}
	if (r->quiet < RMSGI_RECLAIM_QUIET)
		r->quiet++;
	if (r->quiet < RMSGI_RECLAIM_QUIET || cr->peer_avail < 4)
		return;
	if (!rmsgi_conn_send_credit_id(c, RMSGI_CREDIT_TAKE,
				       cr->grant - cr->grant_min - 1))
		return; /* our CREDIT frame is busy: the next look */
	r->asked = true;
	r->waits = 0;
	rmsgi_ctx_flush(c->ctx);
}

static void rcl_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	rmsgi_reclaim_look(w->data);
}

void rmsgi_reclaim_start(struct rmsg_conn *c)
{
	struct rmsgi_reclaim *r = &c->rcl;
	double iv = RMSGI_RECLAIM_MS / 1000.0;

	if (r->on || r->never)
		return;
	r->seen = peer_activity(c);
	r->quiet = 0;
	r->asked = false;
	rmsgi_timer_init(&r->t, c->ctx->env.timers, rcl_cb);
	r->t.w.data = c;
	rmsgi_timer_start(c->ctx->loop, &r->t, iv, iv);
	ev_unref(c->ctx->loop);
	r->on = true;
}

void rmsgi_reclaim_asked(struct rmsg_conn *c, uint64_t n)
{
	rmsgi_credit_give_asked(&c->cr, n);
	if (c->state == RMSGI_CS_ESTABLISHED)
		rmsgi_ctx_mark_dirty(c->ctx, c);
}

int rmsgi_reclaim_given(struct rmsg_conn *c, uint64_t n)
{
	struct rmsgi_credit *cr = &c->cr;
	uint32_t was = cr->grant;
	/* closing: the grant could not grow back to its start afterwards
	 * (rmsgi_conn_grant grows only established connections), so what
	 * the peer gives is only checked; keeping it counted as the peer's
	 * bounds the peer as loosely, never beyond the grant */
	bool keep = c->state != RMSGI_CS_ESTABLISHED &&
		    n <= (uint64_t)(cr->peer_avail > 0 ? cr->peer_avail : 0) &&
		    n <= cr->grant;

	if (keep)
		return 0;
	if (rmsgi_credit_given_back(cr, n)) {
		rmsgi_warn(c->ctx,
			   "conn %u: the peer gave back %llu credits, more "
			   "than the %d it holds",
			   c->id, (unsigned long long)n, cr->peer_avail);
		rmsgi_conn_why(c,
			       "the peer gave back %llu credits, more than "
			       "the %d it holds",
			       (unsigned long long)n, cr->peer_avail);
		return -EPROTO;
	}
	/* an answer, even a late one: the peer takes part */
	c->rcl.asked = false;
	c->rcl.never = false;
	c->rcl.quiet = 0;
	if (!n) {
		if (cr->grant > cr->grant_min + 1)
			rmsgi_reclaim_start(c);
		return 0;
	}
	c->st.credits_reclaimed += n;
	rmsgi_dbg(c->ctx,
		  "conn %u: the idle peer gave %llu credits back: "
		  "grant %u -> %u",
		  c->id, (unsigned long long)n, was, cr->grant);
	/* the backend takes the buffers back (fewer: it cannot fail) */
	rmsgi_conn_grant(c, cr->grant);
	/* an epoch shrank it meanwhile: back to the start */
	if (cr->grant < cr->grant_min)
		rmsgi_conn_grant(c, cr->grant_min);
	/* given less than asked (it was busy): the next looks ask again */
	if (cr->grant > cr->grant_min + 1)
		rmsgi_reclaim_start(c);
	return 0;
}
