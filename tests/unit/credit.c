// SPDX-License-Identifier: MIT
/* unit tests of receive credit accounting (src/credit.c) */
#include "unit.h"

#include "credit.h"

/* rmsg_cfg_set_credits.3: credits go back in a CREDIT frame of their own
 * once a quarter of the grant, and at least two, have piled up (a frame
 * returning one credit would cost the peer the buffer it returns, and the
 * two sides could trade CREDIT frames for ever); over the whole
 * documented range of grants, 4 to 4096 */
static void credit_init__thresholds(void **state)
{
	struct rmsgi_credit cr = {0};
	uint32_t grant, lo, hi;

	(void)state;
	for (grant = 4; grant <= 4096; grant++) {
		memset(&cr, 0xaa, sizeof(cr));
		rmsgi_credit_init(&cr, grant + 1, grant);
		assert_int_equal(cr.avail, grant + 1);
		assert_int_equal(cr.to_return, 0);
		/* a quarter, rounded either way, and at least two */
		lo = grant / 4 < 2 ? 2 : grant / 4;
		hi = (grant + 3) / 4 < 2 ? 2 : (grant + 3) / 4;
		if (cr.threshold < lo || cr.threshold > hi)
			fail_msg("grant %u: threshold %u, not in [%u, %u]",
				 grant, cr.threshold, lo, hi);
	}
}

/* a message never takes the last credit; a CREDIT frame may */
static void credit_can_send__reserve(void **state)
{
	struct rmsgi_credit cr = {0};

	(void)state;
	rmsgi_credit_init(&cr, 4, 4);
	cr.avail = 0;
	assert_false(rmsgi_credit_can_send(&cr, true));
	assert_false(rmsgi_credit_can_send(&cr, false));
	cr.avail = 1;
	assert_false(rmsgi_credit_can_send(&cr, true));
	assert_true(rmsgi_credit_can_send(&cr, false));
	cr.avail = 2;
	assert_true(rmsgi_credit_can_send(&cr, true));
	assert_true(rmsgi_credit_can_send(&cr, false));
}

/* sending a window of messages stops with exactly one credit left */
static void credit_can_send__window(void **state)
{
	struct rmsgi_credit cr = {0};
	int sent = 0;

	(void)state;
	rmsgi_credit_init(&cr, 32, 32);
	while (rmsgi_credit_can_send(&cr, true)) {
		rmsgi_credit_take(&cr);
		sent++;
	}
	assert_int_equal(sent, 31);
	assert_int_equal(cr.avail, 1);
	assert_true(rmsgi_credit_can_send(&cr, false));
	rmsgi_credit_take(&cr);
	assert_int_equal(cr.avail, 0);
	assert_false(rmsgi_credit_can_send(&cr, false));
}

static void credit_take__piggybacks_to_return(void **state)
{
	struct rmsgi_credit cr = {0};
	int i;

	(void)state;
	rmsgi_credit_init(&cr, 8, 8);
	for (i = 0; i < 5; i++)
		rmsgi_credit_freed(&cr);
	assert_int_equal(cr.to_return, 5);
	assert_int_equal(rmsgi_credit_take(&cr), 5);
	assert_int_equal(cr.avail, 7);
	assert_int_equal(cr.to_return, 0);
	assert_int_equal(rmsgi_credit_take(&cr), 0);
	assert_int_equal(cr.avail, 6);
}

/* the wire field is 16 bits: the rest waits for the next frame */
static void credit_take__capped_0xffff(void **state)
{
	struct rmsgi_credit cr = {0};

	(void)state;
	rmsgi_credit_init(&cr, 8, 8);
	cr.to_return = 70000;
	assert_int_equal(rmsgi_credit_take(&cr), 0xffff);
	assert_int_equal(cr.to_return, 70000 - 0xffff);
	assert_int_equal(rmsgi_credit_take(&cr), 70000 - 0xffff);
	assert_int_equal(cr.to_return, 0);
	cr.to_return = 0xffff;
	assert_int_equal(rmsgi_credit_take(&cr), 0xffff);
	assert_int_equal(cr.to_return, 0);
}

static void credit_returned__within_grant(void **state)
{
	struct rmsgi_credit cr = {0};
	int i;

	(void)state;
	rmsgi_credit_init(&cr, 8, 8);
	for (i = 0; i < 6; i++)
		rmsgi_credit_take(&cr);
	assert_int_equal(rmsgi_credit_returned(&cr, 0, 8), 0);
	assert_int_equal(cr.avail, 2);
	assert_int_equal(rmsgi_credit_returned(&cr, 4, 8), 0);
	assert_int_equal(cr.avail, 6);
	assert_int_equal(rmsgi_credit_returned(&cr, 2, 8), 0);
	assert_int_equal(cr.avail, 8);
}

/* a peer that returns more than it was ever given is broken or hostile */
static void credit_returned__beyond_grant(void **state)
{
	struct rmsgi_credit cr = {0};

	(void)state;
	rmsgi_credit_init(&cr, 8, 8);
	rmsgi_credit_take(&cr);
	rmsgi_credit_take(&cr);
	assert_int_equal(rmsgi_credit_returned(&cr, 3, 8), -EPROTO);
	assert_int_equal(cr.avail, 6);
	assert_int_equal(rmsgi_credit_returned(&cr, 9, 8), -EPROTO);
	assert_int_equal(rmsgi_credit_returned(&cr, 0xffff, 8), -EPROTO);
	assert_int_equal(rmsgi_credit_returned(&cr, UINT32_MAX, 8), -EPROTO);
	assert_int_equal(cr.avail, 6);
	/* at full window, not a single one more */
	assert_int_equal(rmsgi_credit_returned(&cr, 2, 8), 0);
	assert_int_equal(rmsgi_credit_returned(&cr, 1, 8), -EPROTO);
	assert_int_equal(cr.avail, 8);
}

static void credit_want_update__threshold(void **state)
{
	struct rmsgi_credit cr = {0};
	uint32_t i;

	(void)state;
	rmsgi_credit_grant(&cr, 32);
	rmsgi_credit_init(&cr, 32, 32);
	assert_false(rmsgi_credit_want_update(&cr));
	for (i = 0; i < cr.threshold - 1; i++)
		rmsgi_credit_freed(&cr);
	assert_false(rmsgi_credit_want_update(&cr));
	rmsgi_credit_freed(&cr);
	assert_true(rmsgi_credit_want_update(&cr));
	rmsgi_credit_take(&cr);
	assert_false(rmsgi_credit_want_update(&cr));
}

/* a connection as conn.c makes it: our grant at creation, the peer's
 * when its hello is known */
static void cr_new(struct rmsgi_credit *cr, uint32_t peer_grant,
		   uint32_t my_grant)
{
	memset(cr, 0xaa, sizeof(*cr));
	rmsgi_credit_grant(cr, my_grant);
	rmsgi_credit_init(cr, peer_grant, my_grant);
}

/* rmsg.7: a peer down to its last credit cannot send a message (it keeps
 * that one for a CREDIT frame): whatever we owe it goes back at once,
 * below the threshold too, or it could wait for ever */
static void credit_want_update__peer_at_last(void **state)
{
	struct rmsgi_credit cr = {0};
	uint32_t i;

	(void)state;
	cr_new(&cr, 32, 32);
	/* the peer sends 30 messages of its 32: 2 left */
	for (i = 0; i < 30; i++)
		assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	rmsgi_credit_freed(&cr);
	assert_true(cr.threshold > 1);
	assert_false(rmsgi_credit_want_update(&cr));
	/* one more message: it is down to its last credit */
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_true(rmsgi_credit_want_update(&cr));
	/* nothing owed: nothing to send, whatever the peer has left */
	rmsgi_credit_take(&cr);
	assert_false(rmsgi_credit_want_update(&cr));
}

/* rmsg.7: the receiver counts every frame against the credits it gave,
 * and the first one beyond closes the connection (-EPROTO) */
static void credit_arrived__beyond_grant(void **state)
{
	static const uint32_t grants[] = {4, 5, 32, 4096};
	struct rmsgi_credit cr = {0};
	uint32_t i, g;
	size_t k;

	(void)state;
	for (k = 0; k < UNIT_ARRAY_SIZE(grants); k++) {
		g = grants[k];
		cr_new(&cr, 8, g);
		for (i = 0; i < g; i++)
			assert_int_equal(rmsgi_credit_arrived(&cr), 0);
		assert_int_equal(rmsgi_credit_arrived(&cr), -EPROTO);
		assert_int_equal(rmsgi_credit_arrived(&cr), -EPROTO);
	}
}

/* frames can come before the peer's hello is known (RDMA): they count
 * against the grant, and learning the hello does not give them back */
static void credit_arrived__before_hello(void **state)
{
	struct rmsgi_credit cr = {0};
	int i;

	(void)state;
	memset(&cr, 0xaa, sizeof(cr));
	rmsgi_credit_grant(&cr, 4);
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	rmsgi_credit_init(&cr, 16, 4);
	for (i = 0; i < 2; i++)
		assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_int_equal(rmsgi_credit_arrived(&cr), -EPROTO);
}

/* what we return (piggybacked on a frame we send) the peer may use at
 * once, and not one frame more; held messages count until released */
static void credit_arrived__returned_ones(void **state)
{
	struct rmsgi_credit cr = {0};
	int i;

	(void)state;
	cr_new(&cr, 8, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	/* two of the four buffers come free (the app holds the others) */
	rmsgi_credit_freed(&cr);
	rmsgi_credit_freed(&cr);
	/* not told yet: the peer still has none */
	assert_int_equal(rmsgi_credit_arrived(&cr), -EPROTO);
	cr_new(&cr, 8, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	rmsgi_credit_freed(&cr);
	rmsgi_credit_freed(&cr);
	assert_int_equal(rmsgi_credit_take(&cr), 2);
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_int_equal(rmsgi_credit_arrived(&cr), -EPROTO);
}

/* a frame that did not go: its credit comes back, and so do the returns
 * it carried; the peer, which never saw them, may not use them. Unless
 * we are not sure it did not go: then the peer keeps them (it is never
 * counted below what it has) */
static void credit_untake__frame_not_sent(void **state)
{
	struct rmsgi_credit cr = {0};
	uint16_t n;
	int i;

	(void)state;
	cr_new(&cr, 8, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	for (i = 0; i < 3; i++)
		rmsgi_credit_freed(&cr);
	n = rmsgi_credit_take(&cr);
	assert_int_equal(n, 3);
	rmsgi_credit_untake(&cr, n, true);
	assert_int_equal(cr.avail, 8);
	/* owed again, and the next frame carries them */
	assert_int_equal(rmsgi_credit_take(&cr), 3);
	rmsgi_credit_untake(&cr, 3, true);
	assert_int_equal(rmsgi_credit_arrived(&cr), -EPROTO);

	cr_new(&cr, 8, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	rmsgi_credit_freed(&cr);
	rmsgi_credit_untake(&cr, rmsgi_credit_take(&cr), false);
	assert_int_equal(cr.avail, 8);
	/* the peer may have the one from the failed frame, no more */
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_int_equal(rmsgi_credit_arrived(&cr), -EPROTO);
	/* and the returns are owed again */
	assert_int_equal(rmsgi_credit_take(&cr), 1);

	/* a frame without a header (rmsgi_credit_spend) carries nothing */
	cr_new(&cr, 8, 4);
	rmsgi_credit_freed(&cr);
	rmsgi_credit_spend(&cr);
	assert_int_equal(cr.avail, 7);
	rmsgi_credit_untake(&cr, 0, true);
	assert_int_equal(cr.avail, 8);
	assert_int_equal(rmsgi_credit_take(&cr), 1);
}

/* rmsg.7: the last frame of a close may come one beyond the credits,
 * once: the sender may take it with none left, the receiver takes the
 * first frame beyond the grant as that, and no second one */
static void credit_bye__one_beyond_once(void **state)
{
	struct rmsgi_credit a, b; /* a sends to b */
	int i;

	(void)state;
	cr_new(&a, 4, 4);
	cr_new(&b, 4, 4);
	/* a spends its last credit returning credits: 3 messages and a
	 * CREDIT frame */
	for (i = 0; i < 3; i++) {
		assert_true(rmsgi_credit_can_send(&a, true));
		rmsgi_credit_take(&a);
		assert_int_equal(rmsgi_credit_arrived(&b), 0);
	}
	assert_false(rmsgi_credit_can_send(&a, true));
	rmsgi_credit_freed(&a);
	assert_int_equal(rmsgi_credit_take(&a), 1);
	assert_int_equal(rmsgi_credit_arrived(&b), 0);
	assert_false(rmsgi_credit_can_send(&a, false));
	/* its BYE still goes, with what it owes since */
	rmsgi_credit_freed(&a);
	assert_int_equal(rmsgi_credit_take_beyond(&a), 1);
	assert_int_equal(a.avail, 0);
	assert_int_equal(rmsgi_credit_arrived(&b), -EPROTO);
	assert_true(rmsgi_credit_bye_beyond(&b));
	/* nothing after it */
	assert_int_equal(rmsgi_credit_arrived(&b), -EPROTO);
	assert_false(rmsgi_credit_bye_beyond(&b));
}

/* the BYE beyond the grant is only for a sender that has none left; one
 * with credits spends one of them like any frame */
static void credit_bye__within_grant(void **state)
{
	struct rmsgi_credit a, b;

	(void)state;
	cr_new(&a, 4, 4);
	cr_new(&b, 4, 4);
	rmsgi_credit_take(&a);
	assert_int_equal(rmsgi_credit_arrived(&b), 0);
	rmsgi_credit_take(&a);
	assert_int_equal(rmsgi_credit_arrived(&b), 0);
	rmsgi_credit_take_beyond(&a); /* the BYE, 2 left */
	assert_int_equal(a.avail, 1);
	assert_int_equal(rmsgi_credit_arrived(&b), 0);
	/* a frame beyond the grant while the peer still had credits is
	 * not the BYE exception */
	cr_new(&b, 4, 4);
	assert_false(rmsgi_credit_bye_beyond(&b));
	assert_int_equal(rmsgi_credit_arrived(&b), 0);
	assert_false(rmsgi_credit_bye_beyond(&b));
}

/* rmsg.7: a peer whose credits are all held by our app cannot send; one
 * we owe credits to (nothing held) could be told of them */
static void credit_peer_held(void **state)
{
	struct rmsgi_credit cr = {0};
	int i;

	(void)state;
	cr_new(&cr, 8, 4);
	assert_false(rmsgi_credit_peer_held(&cr));
	for (i = 0; i < 3; i++)
		assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_false(rmsgi_credit_peer_held(&cr));
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_true(rmsgi_credit_peer_held(&cr));
	/* one released: it is ours to return, so its silence is not
	 * ours any more */
	rmsgi_credit_freed(&cr);
	assert_false(rmsgi_credit_peer_held(&cr));
	/* returned: the peer can talk */
	rmsgi_credit_take(&cr);
	assert_false(rmsgi_credit_peer_held(&cr));
	assert_int_equal(rmsgi_credit_arrived(&cr), 0);
	assert_true(rmsgi_credit_peer_held(&cr));
}

/* ------------------------------------------------------------------ */
/* two sides exchanging frames under the rules conn.c applies           */

#define CHAN_MAX 8192

struct frame {
	uint8_t credit; /* a CREDIT frame, else a message */
	uint16_t credits;
};

struct side {
	struct rmsgi_credit cr; /* what we may send to the peer */
	uint32_t grant;		/* receive buffers we gave the peer */
	uint32_t inuse;		/* of those, holding a frame */
	uint32_t held;		/* of those, messages the app holds */
	bool streaming;		/* always has a message to send */
	bool credit_busy;	/* our CREDIT frame is in flight */
	unsigned long sent, received;
	struct frame chan[CHAN_MAX]; /* in flight to the peer */
	unsigned int head, n;
};

/* the only place that knows how conn.c initialises its credits */
static void side_init(struct side *s, uint32_t my_grant, uint32_t peer_grant,
		      bool streaming)
{
	memset(s, 0, sizeof(*s));
	rmsgi_credit_grant(&s->cr, my_grant);
	rmsgi_credit_init(&s->cr, peer_grant, my_grant);
	s->grant = my_grant;
	s->streaming = streaming;
}

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void chan_push(struct side *s, bool credit, uint16_t credits)
{
	assert_true(s->n < CHAN_MAX);
	s->chan[(s->head + s->n) % CHAN_MAX].credit = credit;
	s->chan[(s->head + s->n) % CHAN_MAX].credits = credits;
	s->n++;
}

static bool can_msg(const struct side *s)
{
	return s->streaming && rmsgi_credit_can_send(&s->cr, true);
}

/* conn.c: a CREDIT frame only when nothing else can carry the credits */
static bool can_credit(const struct side *s)
{
	return !s->credit_busy && rmsgi_credit_want_update(&s->cr) &&
	       (!s->streaming || !rmsgi_credit_can_send(&s->cr, true)) &&
	       rmsgi_credit_can_send(&s->cr, false);
}

/* frames @from's peer may still send + everything holding its credits
 * adds up to the grant: nothing is lost or made up. And @to counts what
 * @from may still send exactly: what it has, what it sent that has not
 * arrived, and what @to returned that has not reached it yet (never
 * below what it has, and not more) */
static void check_conservation(const struct side *from, const struct side *to)
{
	uint64_t sum = from->cr.avail + from->n + to->inuse + to->cr.to_return;
	int64_t may = (int64_t)from->cr.avail + from->n;
	unsigned int i;

	for (i = 0; i < to->n; i++) {
		sum += to->chan[(to->head + i) % CHAN_MAX].credits;
		may += to->chan[(to->head + i) % CHAN_MAX].credits;
	}
	assert_int_equal(sum, to->grant);
	assert_int_equal(may, to->cr.peer_avail);
}

/* delivers the oldest frame from @s to @peer */
static void deliver(struct side *s, struct side *peer)
{
	struct frame f = s->chan[s->head];

	s->head = (s->head + 1) % CHAN_MAX;
	s->n--;
	/* a frame never arrives without a posted buffer (no RNR), and
	 * never beyond the grant */
	assert_true(peer->inuse < peer->grant);
	assert_int_equal(rmsgi_credit_arrived(&peer->cr), 0);
	peer->inuse++;
	assert_int_equal(rmsgi_credit_returned(&peer->cr, f.credits, s->grant),
			 0);
	if (f.credit) {
		s->credit_busy = false;
		peer->inuse--;
		rmsgi_credit_freed(&peer->cr);
	} else {
		peer->received++;
		peer->held++;
	}
}

/* runs @steps random steps; fails on a stall or a broken invariant */
static void exchange(uint32_t grant_a, uint32_t grant_b, bool a_streams,
		     bool b_streams, unsigned int release_weight, uint64_t seed,
		     unsigned long steps)
{
	static struct side sides[2];
	struct side *a = &sides[0], *b = &sides[1];
	unsigned long step;

	rng = seed;
	side_init(a, grant_a, grant_b, a_streams);
	side_init(b, grant_b, grant_a, b_streams);
	for (step = 0; step < steps; step++) {
		/* enabled actions: 0/1 send, 2/3 credit, 4/5 deliver,
		 * 6/7 release, for side a/b */
		unsigned int w[8], total = 0, pick, k;

		w[0] = can_msg(a) ? 4 : 0;
		w[1] = can_msg(b) ? 4 : 0;
		w[2] = can_credit(a) ? 4 : 0;
		w[3] = can_credit(b) ? 4 : 0;
		w[4] = a->n ? 3 : 0;
		w[5] = b->n ? 3 : 0;
		w[6] = a->held ? release_weight : 0;
		w[7] = b->held ? release_weight : 0;
		for (k = 0; k < 8; k++)
			total += w[k];
		if (total == 0)
			fail_msg("stall after %lu steps: a avail %u ret %u, "
				 "b avail %u ret %u",
				 step, a->cr.avail, a->cr.to_return,
				 b->cr.avail, b->cr.to_return);
		pick = rnd(total);
		for (k = 0; pick >= w[k]; k++)
			pick -= w[k];
		{
			struct side *s = &sides[k % 2],
				    *peer = &sides[1 - k % 2];

			switch (k / 2) {
			case 0:
				chan_push(s, false, rmsgi_credit_take(&s->cr));
				s->sent++;
				break;
			case 1:
				chan_push(s, true, rmsgi_credit_take(&s->cr));
				s->credit_busy = true;
				break;
			case 2:
				deliver(s, peer);
				break;
			default:
				s->held--;
				s->inuse--;
				rmsgi_credit_freed(&s->cr);
				break;
			}
		}
		check_conservation(a, b);
		check_conservation(b, a);
		assert_true(a->cr.avail <= grant_b);
		assert_true(b->cr.avail <= grant_a);
	}
	/* and it went somewhere */
	if (a_streams)
		assert_true(b->received > steps / 20);
	if (b_streams)
		assert_true(a->received > steps / 20);
}

static void credit_exchange__both_stream(void **state)
{
	static const uint32_t grants[] = {4, 5, 8, 32, 100};
	size_t i;

	(void)state;
	for (i = 0; i < UNIT_ARRAY_SIZE(grants); i++) {
		exchange(grants[i], grants[i], true, true, 1, 0x5eed + i,
			 200000);
		exchange(grants[i], grants[i], true, true, 8, 0xbeef + i,
			 200000);
	}
}

/* the receiving side never sends a message: only CREDIT frames return
 * the window */
static void credit_exchange__one_way(void **state)
{
	static const uint32_t grants[] = {4, 5, 8, 32, 100};
	size_t i;

	(void)state;
	for (i = 0; i < UNIT_ARRAY_SIZE(grants); i++) {
		exchange(grants[i], grants[i], true, false, 1, 0xf00d + i,
			 200000);
		exchange(grants[i], grants[i], false, true, 3, 0xcafe + i,
			 200000);
	}
}

/* both ends may configure different credits (cfg.credits) */
static void credit_exchange__asymmetric_grants(void **state)
{
	(void)state;
	exchange(8, 32, true, true, 1, 0xa5a5, 200000);
	/* a streams into b, which grants 4 but is granted 64: b's threshold
	 * (16) is above anything it can ever have to return (3) */
	exchange(64, 4, true, false, 1, 0x5a5a, 200000);
	exchange(4, 64, false, true, 1, 0x5a5b, 200000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(credit_init__thresholds),
		cmocka_unit_test(credit_can_send__reserve),
		cmocka_unit_test(credit_can_send__window),
		cmocka_unit_test(credit_take__piggybacks_to_return),
		cmocka_unit_test(credit_take__capped_0xffff),
		cmocka_unit_test(credit_returned__within_grant),
		cmocka_unit_test(credit_returned__beyond_grant),
		cmocka_unit_test(credit_want_update__threshold),
		cmocka_unit_test(credit_want_update__peer_at_last),
		cmocka_unit_test(credit_arrived__beyond_grant),
		cmocka_unit_test(credit_arrived__before_hello),
		cmocka_unit_test(credit_arrived__returned_ones),
		cmocka_unit_test(credit_untake__frame_not_sent),
		cmocka_unit_test(credit_bye__one_beyond_once),
		cmocka_unit_test(credit_bye__within_grant),
		cmocka_unit_test(credit_peer_held),
		cmocka_unit_test(credit_exchange__both_stream),
		cmocka_unit_test(credit_exchange__one_way),
		cmocka_unit_test(credit_exchange__asymmetric_grants),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
