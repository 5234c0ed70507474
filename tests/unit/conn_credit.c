// SPDX-License-Identifier: MIT
/*
 * conn_credit.c - unit tests of the connection state machine (src/conn.c)
 * against the fake transport (fake_tr.h): credits: what the peer granted
 * bounds what we send, what we grant bounds what it may send, credits go
 * back piggybacked or in CREDIT frames, and the answers we owe stay within
 * them.
 */
#include "conn_t.h"

/* ------------------------------------------------------------------ */
/* credits                                                              */

static void conn_credit__sends_stop_at_one(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 10; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(t->c->cr.avail, 1);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	/* the peer returns 2: two more go, the first returning the buffer
	 * the CREDIT frame used */
	assert_int_equal(rx_credit(t->c, 2), 0);
	flush(t);
	assert_int_equal(ft.nposted, 5);
	assert_int_equal(ft.posted[3].credits, 1);
	assert_int_equal(ft.posted[4].credits, 0);
	assert_int_equal(t->c->cr.avail, 1);
	/* a message returns 3: three more */
	assert_int_equal(rx_data(t->c, "m", 3), 0);
	assert_int_equal(t->msgs, 1);
	flush(t);
	assert_int_equal(ft.nposted, 8);
	assert_int_equal(ft.posted[5].credits, 1);
	assert_int_equal(ft.posted[6].credits, 0);
	assert_int_equal(ft.posted[7].credits, 0);
	/* order kept */
	for (i = 0; i < 8; i++)
		assert_int_equal((intptr_t)ft.posted[i].op->arg, i + 1);
	assert_int_equal(ft.npost, 8);
}

static void conn_credit__explicit_frame(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	assert_int_equal(t->c->cr.threshold, 8);
	for (i = 0; i < 7; i++)
		assert_int_equal(rx_data(t->c, "m", 0), 0);
	assert_int_equal(msgs_freed, 7);
	assert_int_equal(t->c->cr.to_return, 7);
	flush(t);
	assert_int_equal(ft.npost, 0);
	assert_int_equal(rx_data(t->c, "m", 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_ptr_equal(ft.posted[0].op, &t->c->tx.credit_op);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].kind, RMSGI_OP_CTRL);
	assert_int_equal(ft.posted[0].credits, 8);
	assert_int_equal(t->c->cr.to_return, 0);
	assert_int_equal(t->c->cr.avail, 31);
	/* one CREDIT frame at a time */
	for (i = 0; i < 9; i++)
		assert_int_equal(rx_data(t->c, "m", 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].credits, 9);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(ft.npost, 2);
	/* no send callback for it */
	assert_int_equal(count(t, 'S'), 0);
}

/* with a message to carry them, credits ride along */
static void conn_credit__piggyback(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	for (i = 0; i < 10; i++)
		assert_int_equal(rx_data(t->c, "m", 0), 0);
	assert_int_equal(send_str(t, "reply", 1), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[0].credits, 10);
	assert_int_equal(t->c->cr.to_return, 0);
}

/* out of message credits, the CREDIT frame takes the reserved one */
static void conn_credit__frame_uses_reserve(void **state)
{
	struct rmsgi_cfgv cfg;
	struct t *t;
	int i;

	rmsgi_cfg_defaults(&cfg);
	cfg.credits = 4; /* both sides grant 4 */
	t = replace_t(state, &cfg, 0);
	establish(t, 4, 8192);
	assert_int_equal(t->c->cr.threshold, 2);
	for (i = 1; i <= 4; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(t->c->cr.avail, 1);
	assert_int_equal(rx_data(t->c, "m", 0), 0);
	assert_int_equal(rx_data(t->c, "m", 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(ft.posted[3].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[3].credits, 2);
	assert_int_equal(t->c->cr.avail, 0);
	/* the message still waits */
	assert_int_equal(done_count(t, 4, NULL), 0);
	assert_int_equal(rx_credit(t->c, 4), 0);
	flush(t);
	assert_int_equal(ft.nposted, 5);
	assert_int_equal((intptr_t)ft.posted[4].op->arg, 4);
}

static void conn_credit__returned_beyond_grant(void **state)
{
	struct t *t = *state;
	int freed;

	establish(t, 8, 8192);
	freed = msgs_freed;
	assert_int_equal(rx_credit(t->c, 1), -EPROTO);
	assert_int_equal(msgs_freed, freed + 1);
	/* a protocol error is worth a line in the log */
	assert_int_equal(t->warnings, 1);
	assert_int_equal(ft.ndisconnect, 1);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* the peer may use every credit we granted, not one more; a message the
 * app holds keeps its credit until released */
static void conn_credit__rx_beyond_grant(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	t->hold = true;
	assert_int_equal(rx_data(t->c, "held", 0), 0);
	t->hold = false;
	for (i = 1; i < 32; i++)
		assert_int_equal(rx_data(t->c, "x", 0), 0);
	/* the 31 freed credits go back with a CREDIT frame ... */
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].credits, 31);
	/* ... so 31 more are fine; the held one's is still out */
	for (i = 0; i < 31; i++)
		assert_int_equal(rx_data(t->c, "y", 0), 0);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	assert_int_equal(rx_data(t->c, "one too many", 0), -EPROTO);
	assert_int_equal(t->msgs, 63);
	assert_int_equal(ft.ndisconnect, 1);
	tr_complete_all(t->c, 0);
	rmsg_msg_release(t->held);
	t->held = NULL;
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_int_equal(t->closed, 1);
}

/* a close that finds our last credit spent (on a CREDIT frame whose
 * answer is on its way) still says BYE, so that the peer reports a close,
 * not a reset */
static void conn_close__bye_without_credit(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	/* a message never takes the last credit */
	assert_int_equal(ft.nposted, 3);
	/* the peer's frames make us owe it credits: the CREDIT frame that
	 * returns them takes our last one */
	while (t->c->cr.avail)
		assert_int_equal(rx_data(t->c, "y", 0), 0), flush(t);
	assert_int_equal(ft.posted[ft.nposted - 1].type, RMSGI_T_CREDIT);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	flush(t);
	assert_int_equal(ft.posted[ft.nposted - 1].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[ft.nposted - 1].aux, RMSGI_CREDIT_BYE);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
}

/* an open connection whose peer used every credit we granted (32) */
static void peer_spent_grant(struct t *t)
{
	int i;

	establish(t, 32, 8192);
	for (i = 0; i < 32; i++)
		assert_int_equal(rx_data(t->c, "x", 0), 0);
}

/* the peer's BYE may be the one frame beyond its credits, once: the close
 * reads as the peer's (-ESHUTDOWN); any frame after it is refused */
static void conn_credit__bye_beyond_grant(void **state)
{
	struct t *t = *state;

	peer_spent_grant(t);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 0);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ESHUTDOWN);
}

static void conn_credit__bye_beyond_grant_once(void **state)
{
	struct t *t = *state;

	peer_spent_grant(t);
	/* a plain CREDIT frame is no exception */
	assert_int_equal(rx_credit(t->c, 0), -EPROTO);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

static void conn_credit__nothing_after_bye(void **state)
{
	struct t *t = *state;

	peer_spent_grant(t);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 0);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 -EPROTO);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* frames that make us answer (here rendezvous requests, each acked) from
 * a peer that grants us 4 credits and never returns one: it can send
 * only what our 4 frames returned, so the answers stop at 32 + 4 x 32;
 * once it returns our credits everything drains */
static void conn_ans__bounded_by_credits(void **state)
{
	struct t *t = *state;
	int peer_avail = 32, sent = 0, i, seen = 0;
	uint64_t id = 0;

	establish(t, 4, 8192);
	/* a peer that asks whenever it has a credit to spare (it keeps
	 * the last one for a CREDIT frame, as librmsg does) */
	while (peer_avail > 1 && sent < 10000) {
		struct rmsg_msg *m = tmsg_new(t->c, "r");

		m->ready = 0;
		assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, ++id, m), 0);
		rmsgi_conn_rx_ready(t->c, m, 0);
		peer_avail--;
		sent++;
		flush(t);
		for (; seen < ft.nposted; seen++)
			peer_avail += ft.posted[seen].credits;
	}
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	assert_int_equal(t->msgs, sent);
	assert_true(sent <= 32 + 4 * 32);
	assert_true(t->c->tx.ans_n <= (unsigned)sent);
	/* our 4 credits are spent: 3 acks and a CREDIT frame */
	assert_int_equal(ft.nposted, 4);
	/* it takes them and returns our credits: the rest drains */
	for (i = 0; i < 200 && t->c->tx.ans_n; i++) {
		tr_complete_all(t->c, 0);
		assert_int_equal(
			rx_credit(t->c, (uint16_t)(4 - t->c->cr.avail)), 0);
		flush(t);
	}
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(t->c->tx.ans_n, 0);
}

/* a message never takes the last credit: not an RNDV_ACK either, or two
 * sides that both ran dry could not tell each other about freed buffers */
static void conn_credit__ack_keeps_reserve(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *m;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(t->c->cr.avail, 1);
	m = tmsg_new(t->c, "rendezvous");
	m->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 5, m), 0);
	rmsgi_conn_rx_ready(t->c, m, 0);
	assert_int_equal(t->msgs, 1);
	flush(t);
	assert_int_equal(t->c->cr.avail, 1);
	assert_int_equal(ft.nposted, 3);
}

/* ------------------------------------------------------------------ */
/* a grant that follows use (issue 20; rmsg_cfg_set_credits_initial.3)  */

/* the peer as the test plays it: the credits it holds from us, and the
 * frames of ours it received and returns on its next frame */
struct gpeer {
	int have;
	unsigned owe;
	unsigned sent;	   /* its frames */
	unsigned returned; /* credits we returned to it */
};

/* the most granted in these tests: not a power of two times the start,
 * so that doubling meets the bound */
#define GMAX 24

/* a connection granting 4 at the start, at most GMAX, over the fake, to a
 * peer whose hello takes a growing grant (@grows) */
static struct t *grant_t(void **state, bool grows, struct gpeer *p)
{
	struct rmsgi_cfgv v;
	struct rmsgi_hello h = {.credits = 4, .eager_size = 8192};
	struct t *t;

	rmsgi_cfg_defaults(&v);
	v.credits = GMAX;
	v.credits_initial = 4;
	t = replace_t(state, &v, 0);
	h.flags = grows ? RMSGI_HELLO_F_GROW : 0;
	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	memset(p, 0, sizeof(*p));
	p->have = 4;
	return t;
}

/* our posted frames reach the peer: it counts the credits they return
 * and owes a buffer back for each */
static void gpeer_take(struct t *t, struct gpeer *p)
{
	int i, rounds = 0;

	/* a completed CREDIT frame may queue the next one at once */
	for (flush(t); ft.nposted; flush(t)) {
		assert_true(++rounds < 100);
		for (i = 0; i < ft.nposted; i++) {
			p->have += ft.posted[i].credits;
			p->returned += ft.posted[i].credits;
			p->owe++;
		}
		tr_complete_all(t->c, 0);
	}
}

/* the peer sends one message, returning what it owes */
static int gpeer_send(struct t *t, struct gpeer *p)
{
	uint16_t back = (uint16_t)p->owe;

	p->owe = 0;
	p->have--;
	p->sent++;
	return rx_data(t->c, "g", back);
}

/* the peer sends as long as it may (a message never takes the last
 * credit), then hears from us */
static void gpeer_burst(struct t *t, struct gpeer *p)
{
	while (p->have >= 2)
		assert_int_equal(gpeer_send(t, p), 0);
	gpeer_take(t, p);
}

/* our hello grants the initial credits and says the grant grows */
static void conn_grant__hello_initial(void **state)
{
	struct gpeer p;
	struct t *t = grant_t(state, true, &p);
	struct rmsgi_hello h;

	rmsgi_conn_hello(t->c, &h);
	assert_int_equal(h.credits, 4);
	assert_true(h.flags & RMSGI_HELLO_F_GROW);
	/* a peer that grows may return up to 4096 in all, not just the 4
	 * of its hello */
	assert_int_equal(rx_data(t->c, "x", 3), 0);
	assert_int_equal(t->closed, 0);
}

/* a peer that keeps running out is granted twice as much each time, up
 * to the credits and never beyond, and the backend is asked for it */
static void conn_grant__grows_to_max(void **state)
{
	struct gpeer p;
	struct t *t = grant_t(state, true, &p);
	int round, expect = 4;

	for (round = 0; round < 8; round++) {
		unsigned sent = p.sent, returned = p.returned;
		int before = expect;

		gpeer_burst(t, &p);
		/* it used all it could and got back more than that while
		 * below the maximum, exactly that once there */
		expect = expect * 2 > GMAX ? GMAX : expect * 2;
		assert_int_equal(p.have, expect);
		if (before < GMAX)
			assert_true(p.returned - returned > p.sent - sent);
		else
			assert_int_equal(p.returned - returned, p.sent - sent);
		assert_true(ft.last_grant <= GMAX);
	}
	assert_int_equal(ft.ngrant, 3); /* 8, 16, GMAX */
	assert_int_equal(ft.last_grant, GMAX);
	assert_int_equal(t->closed, 0);
}

/* grown or not, a frame beyond what the peer was granted and told
 * closes the connection with -EPROTO before it reaches the app */
static void conn_grant__bound_after_growth(void **state)
{
	struct gpeer p;
	struct t *t = grant_t(state, true, &p);
	int i, round, msgs;

	for (round = 0; round < 4; round++)
		gpeer_burst(t, &p);
	assert_int_equal(p.have, GMAX);
	msgs = t->msgs;
	/* all GMAX, none returned in between (nothing is flushed), then
	 * one more */
	for (i = 0; i < GMAX; i++)
		assert_int_equal(gpeer_send(t, &p), 0);
	assert_int_equal(gpeer_send(t, &p), -EPROTO);
	assert_int_equal(t->msgs, msgs + GMAX);
	assert_int_equal(ft.ndisconnect, 1);
}

/* a peer that never returns our credits: our CREDIT frames stop at our
 * last credit, so the credits a growth adds never reach it, and what it
 * may send stays what it was told */
static void conn_grant__peer_never_returns(void **state)
{
	struct gpeer p;
	struct t *t = grant_t(state, true, &p);
	int i;

	for (i = 0; i < 10; i++) {
		while (p.have >= 2) {
			p.owe = 0; /* it returns nothing */
			assert_int_equal(gpeer_send(t, &p), 0);
		}
		p.owe = 0;
		gpeer_take(t, &p);
	}
	/* our 4 credits went on CREDIT frames (the last one too) */
	assert_int_equal(t->c->cr.avail, 0);
	assert_true(t->c->cr.grant <= GMAX);
	/* it holds what those frames told it, and not one frame more */
	for (i = 0; i < p.have; i++)
		assert_int_equal(gpeer_send(t, &p), 0);
	assert_int_equal(gpeer_send(t, &p), -EPROTO);
	assert_int_equal(ft.ndisconnect, 1);
}

/* once busy, a peer that then sends one message at a time gets fewer
 * credits back than it spends, down to the initial grant, and the
 * backend hears of each step down */
static void conn_grant__shrinks_when_idle(void **state)
{
	struct gpeer p;
	struct t *t = grant_t(state, true, &p);
	unsigned sent, returned;
	int round;

	for (round = 0; round < 4; round++)
		gpeer_burst(t, &p);
	assert_int_equal(p.have, GMAX);
	sent = p.sent;
	returned = p.returned;
	for (round = 0; round < 200; round++) {
		assert_int_equal(gpeer_send(t, &p), 0);
		gpeer_take(t, &p);
	}
	assert_true(p.returned - returned < p.sent - sent);
	assert_int_equal(t->c->cr.grant, 4);
	assert_int_equal(ft.last_grant, 4);
	/* what it holds plus what is on its way is the grant: nothing lost
	 * (4: the CREDIT frames carrying the returns came back too) */
	assert_true(p.have <= 4);
	assert_true(p.have >= 2);
	/* and busy again, it grows again */
	for (round = 0; round < 4; round++)
		gpeer_burst(t, &p);
	assert_int_equal(p.have, GMAX);
	assert_int_equal(t->closed, 0);
}

/* a peer without RMSGI_HELLO_F_GROW (an older librmsg) keeps the initial
 * grant: never more returned than it spent, the backend never asked */
static void conn_grant__old_peer_fixed(void **state)
{
	struct gpeer p;
	struct t *t = grant_t(state, false, &p);
	int round;

	for (round = 0; round < 6; round++) {
		unsigned sent = p.sent, returned = p.returned;

		gpeer_burst(t, &p);
		assert_int_equal(p.returned - returned, p.sent - sent);
		assert_int_equal(p.have, 4);
	}
	assert_int_equal(ft.ngrant, 0);
	/* and it may not return more than its hello's 4 to us */
	assert_int_equal(rx_data(t->c, "x", 5), -EPROTO);
}

/* the backend backs fewer buffers than wanted: the grant grows only that
 * far, and the backend is not asked again while it is at that bound */
static void conn_grant__backend_bound(void **state)
{
	struct gpeer p;
	struct t *t;
	int round;

	ft.grant_cap = 6;
	t = grant_t(state, true, &p);
	ft.grant_cap = 6;
	for (round = 0; round < 5; round++)
		gpeer_burst(t, &p);
	assert_int_equal(p.have, 6);
	assert_int_equal(t->c->cr.grant, 6);
	assert_int_equal(ft.ngrant, 2); /* 8 (got 6), then 12 (got 6) */
	assert_int_equal(t->closed, 0);
}

/* ------------------------------------------------------------------ */
/* a grown grant back from an idle peer (issue 32; reclaim.c)           */

/* flushes and returns the last CREDIT frame posted with @aux (NULL if
 * none), completing everything posted */
static const struct fake_posted *credit_posted(struct t *t, struct gpeer *p,
					       uint32_t aux)
{
	static struct fake_posted got;
	bool found = false;
	int i;

	flush(t);
	for (i = 0; i < ft.nposted; i++)
		if (ft.posted[i].type == RMSGI_T_CREDIT &&
		    ft.posted[i].aux == aux) {
			got = ft.posted[i];
			found = true;
		}
	gpeer_take(t, p);
	return found ? &got : NULL;
}

/* the grant grown to GMAX by a busy peer, then a look with the peer
 * still busy (it asks nothing), then idle */
static struct t *grown_t(void **state, struct gpeer *p)
{
	struct t *t = grant_t(state, true, p);
	int round;

	for (round = 0; round < 4; round++)
		gpeer_burst(t, p);
	assert_int_equal(p->have, GMAX);
	assert_true(t->c->rcl.on);
	rmsgi_reclaim_look(t->c); /* the bursts were since the start */
	assert_null(credit_posted(t, p, RMSGI_CREDIT_TAKE));
	return t;
}

/* the looks that find the peer quiet until it is asked: its TAKE */
static const struct fake_posted *quiet_looks(struct t *t, struct gpeer *p)
{
	int i;

	for (i = 1; i < RMSGI_RECLAIM_QUIET; i++) {
		rmsgi_reclaim_look(t->c);
		assert_null(credit_posted(t, p, RMSGI_CREDIT_TAKE));
	}
	rmsgi_reclaim_look(t->c);
	return credit_posted(t, p, RMSGI_CREDIT_TAKE);
}

/* the peer gives @n back as it would: a CREDIT frame with what it owes */
static int gpeer_give(struct t *t, struct gpeer *p, uint64_t n)
{
	uint16_t back = (uint16_t)p->owe;

	p->owe = 0;
	p->have -= 1 + (int)n;
	p->sent++;
	return rx(t->c, RMSGI_T_CREDIT, back, RMSGI_CREDIT_GIVE, n,
		  tmsg_new(t->c, NULL));
}

/* idle for a look: asked for what is above the start; given it, the
 * grant is back at the start, the backend is told, and the peer's
 * bound is the new grant; busy again, it grows again */
static void conn_reclaim__idle_peer_gives_back(void **state)
{
	struct gpeer p;
	struct t *t = grown_t(state, &p);
	const struct fake_posted *take;
	struct rmsg_stats st;
	int i;

	take = quiet_looks(t, &p);
	assert_non_null(take);
	/* what is above the start and one: the GIVE frame's credit, which
	 * comes back to it */
	assert_int_equal(take->id, GMAX - 5);
	assert_int_equal(gpeer_give(t, &p, GMAX - 5), 0);
	assert_int_equal(t->c->cr.grant, 5);
	assert_int_equal(ft.last_grant, 5);
	assert_int_equal(p.have, 4);
	assert_int_equal(rmsg_conn_stats(t->c, &st, sizeof(st)),
			 (int)sizeof(st));
	assert_int_equal(st.credits_reclaimed, GMAX - 5);
	/* at the start now: not asked again, and the timer is off */
	gpeer_take(t, &p);
	rmsgi_reclaim_look(t->c);
	assert_null(credit_posted(t, &p, RMSGI_CREDIT_TAKE));
	assert_false(t->c->rcl.on);
	/* the GIVE frame's credit goes back with the next returns: it
	 * holds 4 and may send those, not one more */
	assert_int_equal(p.have, 4);
	assert_int_equal(t->c->cr.to_return, 1);
	for (i = 0; i < 4; i++)
		assert_int_equal(gpeer_send(t, &p), 0);
	assert_int_equal(gpeer_send(t, &p), -EPROTO);
	assert_int_equal(ft.ndisconnect, 1);
}

/* and busy again after giving back, the grant grows again */
static void conn_reclaim__grows_again(void **state)
{
	struct gpeer p;
	struct t *t = grown_t(state, &p);
	int round;

	assert_non_null(quiet_looks(t, &p));
	assert_int_equal(gpeer_give(t, &p, GMAX - 5), 0);
	gpeer_take(t, &p);
	for (round = 0; round < 4; round++)
		gpeer_burst(t, &p);
	assert_int_equal(p.have, GMAX);
	assert_true(t->c->rcl.on);
	assert_int_equal(t->closed, 0);
}

/* a peer that used more than half the start since the last look is not
 * asked; one that has too few to give, neither */
static void conn_reclaim__busy_peer_not_asked(void **state)
{
	struct gpeer p;
	struct t *t = grown_t(state, &p);
	int i;

	for (i = 0; i < 3; i++) {
		gpeer_burst(t, &p);
		rmsgi_reclaim_look(t->c);
		assert_null(credit_posted(t, &p, RMSGI_CREDIT_TAKE));
	}
	/* a quiet look, then three messages, one at a time: more than
	 * half the start (4), so not quiet, and the count starts again */
	rmsgi_reclaim_look(t->c);
	assert_null(credit_posted(t, &p, RMSGI_CREDIT_TAKE));
	for (i = 0; i < 3; i++) {
		assert_int_equal(gpeer_send(t, &p), 0);
		gpeer_take(t, &p);
	}
	rmsgi_reclaim_look(t->c);
	assert_null(credit_posted(t, &p, RMSGI_CREDIT_TAKE));
	/* then two per look (its keepalive, say): quiet; asked */
	for (i = 0; i < 2; i++) {
		assert_int_equal(gpeer_send(t, &p), 0);
		gpeer_take(t, &p);
	}
	assert_non_null(quiet_looks(t, &p));
	assert_int_equal(t->closed, 0);
}

/* a peer that gives back more than it holds breaks the protocol */
static void conn_reclaim__give_beyond_held(void **state)
{
	struct gpeer p;
	struct t *t = grown_t(state, &p);

	/* it holds GMAX; its GIVE frame takes one */
	assert_int_equal(gpeer_give(t, &p, GMAX), -EPROTO);
	assert_int_equal(ft.ndisconnect, 1);
	assert_int_equal(t->c->st.proto_errors, 1);
}

/* unasked, a give within what it holds is taken (it only lowers what it
 * may send), down to the start; below it, the start comes back */
static void conn_reclaim__give_unasked(void **state)
{
	struct gpeer p;
	struct t *t = grown_t(state, &p);

	assert_int_equal(gpeer_give(t, &p, GMAX - 2), 0);
	assert_int_equal(t->c->cr.grant, 4);
	gpeer_take(t, &p);
	/* 24 - 1 - 22 = 1, its GIVE frame's credit and the 2 below the
	 * start come back */
	assert_int_equal(p.have, 4);
	assert_int_equal(t->closed, 0);
}

/* an older peer never answers: after RMSGI_RECLAIM_WAITS looks it is
 * not asked again */
static void conn_reclaim__old_peer_asked_once(void **state)
{
	struct gpeer p;
	struct t *t = grown_t(state, &p);
	int i;

	assert_non_null(quiet_looks(t, &p));
	for (i = 0; i < RMSGI_RECLAIM_WAITS + 3; i++) {
		rmsgi_reclaim_look(t->c);
		assert_null(credit_posted(t, &p, RMSGI_CREDIT_TAKE));
	}
	assert_false(t->c->rcl.on);
	assert_true(t->c->rcl.never);
	assert_int_equal(t->c->cr.grant, GMAX);
	/* nothing lost: it still sends what it holds */
	gpeer_burst(t, &p);
	assert_int_equal(t->closed, 0);
	/* a late answer (a GIVE of none, it was busy) resumes asking */
	gpeer_take(t, &p);
	assert_int_equal(gpeer_give(t, &p, 0), 0);
	assert_false(t->c->rcl.never);
	assert_true(t->c->rcl.on);
	assert_int_equal(t->c->cr.grant, GMAX);
}

/* the timer runs while the grant is grown: a close stops it, and the
 * loop then runs past its time with nothing of the connection left
 * (under ASan, a timer left on freed memory is reported) */
static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	ev_break(loop, EVBREAK_ALL);
}

static void conn_reclaim__close_stops_timer(void **state)
{
	struct gpeer p;
	struct t *t = grown_t(state, &p);
	ev_timer w;

	assert_true(t->c->rcl.on);
	ft.auto_down = true;
	assert_int_equal(rmsg_conn_close(t->c), 0);
	flush(t);
	assert_int_equal(t->closed, 1);
	ev_timer_init(&w, stop_cb, 1.5 * RMSGI_RECLAIM_MS / 1000.0, 0);
	ev_timer_start(t->loop, &w);
	ev_run(t->loop, 0);
	ev_timer_stop(t->loop, &w);
	assert_int_equal(t->closed, 1);
}

/* asked while messages wait to go (a burst starts): a GIVE of none */
static void conn_reclaim__busy_sender_gives_none(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {
		.credits = 4, .eager_size = 8192, .flags = RMSGI_HELLO_F_GROW};
	int i;

	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(rx_credit(t->c, 28), 0);
	flush(t);
	tr_complete_all(t->c, 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(send_str(t, "burst", i), 0);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_TAKE, 28,
			    tmsg_new(t->c, NULL)),
			 0);
	flush(t);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].aux, RMSGI_CREDIT_GIVE);
	assert_int_equal(ft.posted[0].id, 0);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(t->c->cr.avail, 32 - 4);
	assert_int_equal(t->closed, 0);
}

/* the other side: asked for credits, we give back what we hold beyond
 * three on our next CREDIT frame, and no more than asked */
static void conn_reclaim__we_give_when_asked(void **state)
{
	struct t *t = *state;
	struct rmsg_stats st;
	int i;

	struct rmsgi_hello h = {
		.credits = 4, .eager_size = 8192, .flags = RMSGI_HELLO_F_GROW};

	/* the peer grants 4, and returns more as its grant grows */
	rmsgi_conn_ev_established(t->c, &h);
	/* it grew its grant to us: 28 more */
	assert_int_equal(rx_credit(t->c, 28), 0);
	flush(t);
	tr_complete_all(t->c, 0);
	assert_int_equal(t->c->cr.avail, 32);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_TAKE, 40,
			    tmsg_new(t->c, NULL)),
			 0);
	flush(t);
	for (i = 0; i < ft.nposted; i++)
		if (ft.posted[i].aux == RMSGI_CREDIT_GIVE)
			break;
	assert_true(i < ft.nposted);
	assert_int_equal(ft.posted[i].type, RMSGI_T_CREDIT);
	/* 32 less its own and the two a message needs */
	assert_int_equal(ft.posted[i].id, 29);
	assert_int_equal(t->c->cr.avail, 2);
	assert_int_equal(t->c->cr.give_want, 0);
	assert_int_equal(rmsg_conn_stats(t->c, &st, sizeof(st)),
			 (int)sizeof(st));
	assert_int_equal(st.credits_given, 29);
	tr_complete_all(t->c, 0);
	/* messages still go */
	assert_int_equal(send_str(t, "after", 1), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	/* asked again with too few to spare: a GIVE of 0 answers */
	tr_complete_all(t->c, 0);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_TAKE, 5,
			    tmsg_new(t->c, NULL)),
			 0);
	flush(t);
	assert_int_equal(ft.posted[ft.nposted - 1].aux, RMSGI_CREDIT_GIVE);
	assert_int_equal(ft.posted[ft.nposted - 1].id, 0);
	assert_int_equal(t->closed, 0);
}

/* ------------------------------------------------------------------ */
/* the byte window (issue 32; credit.h)                                 */

#define KIB64 65536u

/* a connection over a backend with a byte window (TCP's
 * RMSGI_TR_CAP_WINDOW), the peer granting 32 frames and @win bytes (0:
 * a peer without one, an older librmsg) */
static struct t *win_t(void **state, uint32_t win)
{
	struct rmsgi_hello h = {.credits = 32, .eager_size = 8192};
	struct t *t = replace_t(state, NULL, RMSGI_TR_CAP_WINDOW);

	h.flags = RMSGI_HELLO_F_PACK | RMSGI_HELLO_F_GROW |
		  rmsgi_hello_win_flags(win);
	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	return t;
}

/* a frame from the peer of @len payload bytes (the first ones "w"),
 * returning @credits and @bytes */
static int rx_len(struct t *t, uint8_t type, size_t len, uint16_t credits,
		  uint32_t bytes)
{
	static const uint8_t big[1 << 17];
	struct rmsg_msg *m = tmsg_new(t->c, NULL);
	struct rmsgi_hdr h = {.type = type, .credits = credits, .bytes = bytes};

	assert_true(len <= sizeof(big));
	m->data = big;
	m->len = len;
	h.len = len;
	return rx_hdr(t->c, &h, m);
}

/* the hello grants a window where the backend takes one, not elsewhere */
static void conn_window__hello(void **state)
{
	struct rmsgi_hello h;
	struct t *t = *state;

	rmsgi_conn_hello(t->c, &h);
	assert_int_equal(rmsgi_hello_win(h.flags), 0);
	t = win_t(state, 256 << 10);
	rmsgi_conn_hello(t->c, &h);
	assert_int_equal(rmsgi_hello_win(h.flags), RMSGI_WINDOW_DEFAULT);
	assert_int_equal(t->c->cr.win_in, RMSGI_WINDOW_DEFAULT);
	assert_int_equal(t->c->cr.win_out, 256 << 10);
}

/* large messages: as many in flight as the peer's bytes allow, not as
 * its 32 frames would; returned bytes let the next ones go */
static void conn_window__bounds_bytes_in_flight(void **state)
{
	struct t *t = win_t(state, 256 << 10);
	int i;

	for (i = 1; i <= 10; i++)
		assert_int_equal(send_len(t, KIB64, i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(t->c->cr.wavail, 0);
	assert_true(t->c->cr.avail > 20); /* frames were not the bound */
	assert_true(t->c->st.credit_stalls > 0);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(ft.nposted, 0);
	/* the peer freed two: two more go */
	assert_int_equal(rx_len(t, RMSGI_T_CREDIT, 0, 0, 2 * KIB64), 0);
	flush(t);
	assert_int_equal(ft.nposted, 2);
	for (i = 0; i < 2; i++)
		assert_int_equal((intptr_t)ft.posted[i].op->arg, 5 + i);
	/* small ones fit what is left, however few bytes that is */
	assert_int_equal(rx_len(t, RMSGI_T_CREDIT, 0, 0, 100), 0);
	assert_int_equal(t->c->cr.wavail, 100);
}

/* a frame larger than half the window costs half: it can always go once
 * the receiver freed what it held */
static void conn_window__large_frame_costs_half(void **state)
{
	struct t *t = win_t(state, 64 << 10);
	int i;

	for (i = 1; i <= 3; i++)
		assert_int_equal(send_len(t, KIB64, i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 2);
	assert_int_equal(t->c->cr.wavail, 0);
}

/* small messages go packed only as far as the window lets them: a PACK
 * frame never takes more bytes than are left */
static void conn_window__pack_within_window(void **state)
{
	struct t *t = win_t(state, 64 << 10);

	assert_int_equal(send_len(t, 32768, 1), 0); /* costs the half */
	assert_int_equal(send_len(t, 27768, 2), 0);
	assert_int_equal(send_len(t, 4000, 3), 0);
	assert_int_equal(send_len(t, 4000, 4), 0);
	flush(t);
	/* two of 4000 would pack into 8016 bytes, more than the 5000 left:
	 * the first goes alone, the second waits */
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(ft.posted[2].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[2].len, 4000);
	assert_int_equal(t->c->cr.wavail, 1000);
	/* with room again the rest goes */
	assert_int_equal(rx_len(t, RMSGI_T_CREDIT, 0, 0, 32768), 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(t->c->cr.wavail, 29768);
}

/* the peer returns more bytes than it holds of our window: -EPROTO */
static void conn_window__returned_beyond(void **state)
{
	struct t *t = win_t(state, 256 << 10);

	assert_int_equal(send_len(t, 1000, 1), 0);
	flush(t);
	assert_int_equal(rx_len(t, RMSGI_T_CREDIT, 0, 0, 1000), 0);
	assert_int_equal(rx_len(t, RMSGI_T_CREDIT, 0, 0, 1), -EPROTO);
	assert_int_equal(ft.ndisconnect, 1);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* rmsg.7: the peer may have at most the window's bytes in frames we did
 * not return, whatever its frame credits: the first frame beyond it is
 * -EPROTO, even of one byte */
static void conn_window__rx_beyond_window(void **state)
{
	struct t *t = win_t(state, 256 << 10);
	uint32_t win = t->c->cr.win_in;
	uint32_t i, n = win / KIB64;

	for (i = 0; i < n; i++)
		assert_int_equal(rx_len(t, RMSGI_T_DATA, KIB64, 0, 0), 0);
	assert_int_equal(t->msgs, (int)n);
	assert_int_equal(t->c->cr.wpeer_avail, 0);
	assert_true(t->c->cr.peer_avail > 1); /* frames are left */
	assert_int_equal(rx_len(t, RMSGI_T_DATA, 1, 0, 0), -EPROTO);
	assert_int_equal(t->msgs, (int)n);
	assert_int_equal(ft.ndisconnect, 1);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* a held message keeps its bytes until released; freed bytes go back
 * in a CREDIT frame once a quarter of the window is free */
static void conn_window__returns(void **state)
{
	struct t *t = win_t(state, 256 << 10);
	uint32_t win = t->c->cr.win_in, q = win / 4 / KIB64;
	uint32_t i;

	t->hold = true;
	assert_int_equal(rx_len(t, RMSGI_T_DATA, KIB64, 0, 0), 0);
	t->hold = false;
	for (i = 1; i < q; i++)
		assert_int_equal(rx_len(t, RMSGI_T_DATA, KIB64, 0, 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 0); /* less than a quarter freed */
	assert_int_equal(rx_len(t, RMSGI_T_DATA, KIB64, 0, 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].wret, q * KIB64);
	assert_int_equal(t->c->cr.wpeer_avail, win - KIB64);
	/* and piggybacked on what we send */
	tr_complete_all(t->c, 0);
	rmsg_msg_release(t->held);
	t->held = NULL;
	assert_int_equal(t->c->cr.wto_return, KIB64);
	assert_int_equal(send_str(t, "x", 1), 0);
	flush(t);
	assert_int_equal(ft.posted[0].wret, KIB64);
	assert_int_equal(t->c->cr.wpeer_avail, win);
}

/* a peer without a window (an older librmsg): none either way, and
 * window bytes from it are refused */
static void conn_window__old_peer(void **state)
{
	struct t *t = win_t(state, 0);
	int i;

	assert_int_equal(t->c->cr.win_in, 0);
	assert_int_equal(t->c->cr.win_out, 0);
	for (i = 1; i <= 10; i++)
		assert_int_equal(send_len(t, KIB64, i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 10);
	tr_complete_all(t->c, 0);
	for (i = 0; i < 10; i++)
		assert_int_equal(rx_len(t, RMSGI_T_DATA, KIB64, 0, 0), 0);
	assert_int_equal(rx_len(t, RMSGI_T_CREDIT, 0, 0, 64), -EPROTO);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* two sides that stream large messages at each other: ours waits for
 * bytes of the peer's window, the peer's for ours. Our queued frames
 * would carry the bytes we owe, but they cannot go: a CREDIT frame
 * carries them (else both wait for ever, or for a keepalive) */
static void conn_window__both_streaming(void **state)
{
	struct t *t = win_t(state, 256 << 10);
	uint32_t i, owed;

	for (i = 1; i <= 10; i++)
		assert_int_equal(send_len(t, KIB64, i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(t->c->cr.wavail, 0);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(ft.nposted, 0);
	/* the peer did the same: its window's worth arrives and is freed */
	for (i = 0; i < t->c->cr.win_in / KIB64; i++)
		assert_int_equal(rx_len(t, RMSGI_T_DATA, KIB64, 0, 0), 0);
	owed = t->c->cr.wto_return;
	assert_true(owed > 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].wret, owed);
	/* its bytes back: our messages go on */
	tr_complete_all(t->c, 0);
	assert_int_equal(rx_len(t, RMSGI_T_CREDIT, 0, 4, 4 * KIB64), 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_credit__sends_stop_at_one),
		CONN_T(conn_credit__explicit_frame),
		CONN_T(conn_credit__piggyback),
		CONN_T(conn_credit__frame_uses_reserve),
		CONN_T(conn_credit__returned_beyond_grant),
		CONN_T(conn_credit__rx_beyond_grant),
		CONN_T(conn_close__bye_without_credit),
		CONN_T(conn_credit__bye_beyond_grant),
		CONN_T(conn_credit__bye_beyond_grant_once),
		CONN_T(conn_credit__nothing_after_bye),
		CONN_T(conn_ans__bounded_by_credits),
		CONN_T(conn_credit__ack_keeps_reserve),
		CONN_T(conn_window__hello),
		CONN_T(conn_window__bounds_bytes_in_flight),
		CONN_T(conn_window__large_frame_costs_half),
		CONN_T(conn_window__pack_within_window),
		CONN_T(conn_window__returned_beyond),
		CONN_T(conn_window__rx_beyond_window),
		CONN_T(conn_window__returns),
		CONN_T(conn_window__old_peer),
		CONN_T(conn_window__both_streaming),
		CONN_T(conn_grant__hello_initial),
		CONN_T(conn_grant__grows_to_max),
		CONN_T(conn_grant__bound_after_growth),
		CONN_T(conn_grant__peer_never_returns),
		CONN_T(conn_grant__shrinks_when_idle),
		CONN_T(conn_grant__old_peer_fixed),
		CONN_T(conn_grant__backend_bound),
		CONN_T(conn_reclaim__idle_peer_gives_back),
		CONN_T(conn_reclaim__grows_again),
		CONN_T(conn_reclaim__busy_peer_not_asked),
		CONN_T(conn_reclaim__give_beyond_held),
		CONN_T(conn_reclaim__give_unasked),
		CONN_T(conn_reclaim__old_peer_asked_once),
		CONN_T(conn_reclaim__we_give_when_asked),
		CONN_T(conn_reclaim__close_stops_timer),
		CONN_T(conn_reclaim__busy_sender_gives_none),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
