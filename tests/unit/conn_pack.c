// SPDX-License-Identifier: MIT
/*
 * conn_pack.c - unit tests of packing (PACK frames, src/proto.h) against
 * the fake transport (fake_tr.h): small messages that queue up go to a
 * peer that takes PACK frames in one frame no larger than its eager size,
 * one credit for all, each callback once, in order, with the frame's
 * status; a lone message, and everything toward a peer without the hello
 * flag, goes as a plain DATA frame. Received PACK frames are checked
 * whole before anything is delivered; each message in one is held and
 * released on its own, and the frame's buffer (its credit) goes back
 * with the last.
 */
#include "conn_t.h"

/* the hello of a peer that takes PACK frames */
static void establish_pack(struct t *t, uint16_t credits, uint32_t eager)
{
	struct rmsgi_hello h = {.credits = credits,
				.eager_size = eager,
				.flags = RMSGI_HELLO_F_PACK};

	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
}

/* the messages of a posted PACK frame, decoded as the peer would: checks
 * the frame, then each entry against "m<first + i>" */
static void check_pack(const struct fake_posted *p, int first)
{
	const struct rmsgi_op *op = p->op;
	const uint8_t *b;
	size_t off = 0;
	uint32_t i;

	assert_int_equal(p->type, RMSGI_T_PACK);
	assert_int_equal(op->iovcnt, 1);
	b = op->iov[0].iov_base;
	assert_int_equal(op->iov[0].iov_len, p->len);
	assert_int_equal(rmsgi_pack_check(b, p->len, p->aux, 1 << 20), 0);
	for (i = 0; i < p->aux; i++) {
		char want[16];
		uint32_t len = rmsgi_get32(b + off);

		snprintf(want, sizeof(want), "m%d", first + (int)i);
		assert_int_equal(len, strlen(want));
		assert_memory_equal(b + off + RMSGI_PACK_ENT_SIZE, want, len);
		off += RMSGI_PACK_ENT(len);
	}
	assert_int_equal(off, p->len);
}

/* sends "m<i>" from memory that stays until the send completes */
static int send_m(struct t *t, int i)
{
	static char s[64][16];

	assert_true(i < 64);
	snprintf(s[i], sizeof(s[i]), "m%d", i);
	return send_str(t, s[i], i);
}

/* every callback 1..n ran once with @status, in order */
static void check_done_in_order(const struct t *t, int n, int status)
{
	int i, k = 0, st;

	for (i = 0; i < t->nlog; i++) {
		if (t->log[i].kind != 'S')
			continue;
		k++;
		assert_int_equal(t->log[i].arg, k);
		assert_int_equal(t->log[i].status, status);
	}
	assert_int_equal(k, n);
	for (i = 1; i <= n; i++) {
		assert_int_equal(done_count(t, i, &st), 1);
		assert_int_equal(st, status);
	}
}

/* ------------------------------------------------------------------ */
/* sending                                                              */

static void conn_pack__queued_behind_credits_go_packed(void **state)
{
	struct t *t = *state;
	struct rmsg_stats st;
	int i;

	establish_pack(t, 4, 8192);
	/* one message per loop iteration: each goes alone, as DATA */
	for (i = 1; i <= 3; i++) {
		assert_int_equal(send_m(t, i), 0);
		flush(t);
		assert_int_equal(ft.nposted, i);
		assert_int_equal(ft.posted[i - 1].type, RMSGI_T_DATA);
	}
	/* out of credits: the next ones queue up */
	for (i = 4; i <= 20; i++)
		assert_int_equal(send_m(t, i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	/* one credit back: all that waited go in one frame */
	assert_int_equal(rx_credit(t->c, 1), 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(ft.posted[3].aux, 17);
	check_pack(&ft.posted[3], 4);
	/* nothing runs before the frame completes */
	for (i = 0; i < 3; i++)
		tr_complete(t->c, 0, 0); /* the three plain ones */
	flush(t);
	assert_int_equal(count(t, 'S'), 3);
	assert_int_equal(ft.posted[0].type, RMSGI_T_PACK);
	tr_complete(t->c, 0, 0);
	flush(t);
	check_done_in_order(t, 20, 0);
	assert_int_equal(rmsg_conn_stats(t->c, &st, sizeof(st)), sizeof(st));
	assert_int_equal(st.msgs_sent, 20);
	assert_int_equal(st.packs_sent, 1);
	assert_int_equal(st.packed_sent, 17);
	assert_int_equal(st.bytes_sent, 3 * 2 + 6 * 2 + 11 * 3);
}

static void conn_pack__lone_message_goes_plain(void **state)
{
	struct t *t = *state;

	establish_pack(t, 32, 8192);
	assert_int_equal(send_m(t, 1), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[0].len, 2);
}

static void conn_pack__old_peer_never_gets_pack(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192); /* no RMSGI_HELLO_F_PACK */
	for (i = 1; i <= 10; i++)
		assert_int_equal(send_m(t, i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 10);
	for (i = 0; i < 10; i++)
		assert_int_equal(ft.posted[i].type, RMSGI_T_DATA);
}

/* a frame is never larger than the peer's eager size; what does not fit
 * goes in the next frame, order kept */
static void conn_pack__within_peer_eager(void **state)
{
	struct t *t = *state;
	int i, k, next = 1, msgs = 0;

	establish_pack(t, 32, 64);
	for (i = 1; i <= 9; i++)
		assert_int_equal(send_m(t, i), 0);
	flush(t);
	assert_true(ft.nposted < 9);
	for (k = 0; k < ft.nposted; k++) {
		const struct fake_posted *p = &ft.posted[k];

		assert_true(p->len <= 64);
		if (p->type == RMSGI_T_PACK) {
			check_pack(p, next);
			next += (int)p->aux;
			msgs += (int)p->aux;
		} else {
			assert_int_equal(p->type, RMSGI_T_DATA);
			assert_int_equal((intptr_t)p->op->arg, next);
			next++;
			msgs++;
		}
	}
	assert_int_equal(msgs, 9);
	tr_complete_all(t->c, 0);
	flush(t);
	check_done_in_order(t, 9, 0);
}

/* an RPC message (aux in its own header) is never packed: the plain
 * messages around it pack on either side of it, order kept */
static void conn_pack__rpc_goes_alone(void **state)
{
	static const char rpc[16] = {0};
	struct t *t = *state;
	struct iovec iov = {(void *)rpc, sizeof(rpc)};

	establish_pack(t, 32, 8192);
	assert_int_equal(send_m(t, 1), 0);
	assert_int_equal(send_m(t, 2), 0);
	assert_int_equal(rmsgi_conn_send(t->c, &iov, 1, RMSGI_AUX_RPC_REQ,
					 false, done_cb, (void *)(intptr_t)3),
			 0);
	assert_int_equal(send_m(t, 4), 0);
	assert_int_equal(send_m(t, 5), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	check_pack(&ft.posted[0], 1);
	assert_int_equal(ft.posted[0].aux, 2);
	assert_int_equal(ft.posted[1].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[1].aux, RMSGI_AUX_RPC_REQ);
	check_pack(&ft.posted[2], 4);
	assert_int_equal(ft.posted[2].aux, 2);
	tr_complete_all(t->c, 0);
	flush(t);
	check_done_in_order(t, 5, 0);
}

/* a failed frame fails each of its messages once, as a plain one would */
static void conn_pack__failed_frame_fails_each(void **state)
{
	struct t *t = *state;
	int i;

	establish_pack(t, 32, 8192);
	for (i = 1; i <= 5; i++)
		assert_int_equal(send_m(t, i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	check_pack(&ft.posted[0], 1);
	/* the transport fails it: the connection ends with that reason */
	rmsgi_conn_ev_failed(t->c, -ECONNRESET, NULL);
	tr_complete_all(t->c, -ECANCELED);
	tr_down(t->c);
	flush(t);
	check_done_in_order(t, 5, -ECONNRESET);
	assert_int_equal(t->closed, 1);
}

/* a frame the transport had no room for waits whole; a close cancels it
 * and so each of its messages, once */
static void conn_pack__cancelled_in_queue(void **state)
{
	struct t *t = *state;
	int i;

	establish_pack(t, 32, 8192);
	for (i = 1; i <= 4; i++)
		assert_int_equal(send_m(t, i), 0);
	ft.post_ret = -EAGAIN;
	ft.post_ret_calls = 1;
	flush(t);
	assert_int_equal(ft.nposted, 0);
	assert_int_equal(count(t, 'S'), 0);
	rmsg_conn_close(t->c);
	flush(t);
	if (!t->c->tr_down)
		tr_down(t->c);
	flush(t);
	check_done_in_order(t, 4, -ECANCELED);
}

/* ------------------------------------------------------------------ */
/* receiving                                                            */

/* a PACK frame in a test message (64 bytes at most) from @n strings */
static struct rmsg_msg *pack_new(struct rmsg_conn *c, const char *const *s,
				 int n)
{
	struct rmsg_msg *m = tmsg_new(c, NULL);
	struct tmsg *tm = RMSGI_CONTAINER_OF(m, struct tmsg, m);
	uint8_t *p = tm->data;
	int i;

	for (i = 0; i < n; i++) {
		size_t len = strlen(s[i]);

		assert_true(p + RMSGI_PACK_ENT(len) <= tm->data + 64);
		p = rmsgi_pack_ent_encode(p, (uint32_t)len);
		memcpy(p, s[i], len);
		p += RMSGI_PACK_ENT(len) - RMSGI_PACK_ENT_SIZE;
	}
	m->len = (size_t)(p - tm->data);
	return m;
}

static void conn_pack__rx_delivers_each_in_order(void **state)
{
	static const char *const s[] = {"one", "", "three", "four!!!!"};
	struct t *t = *state;
	struct rmsg_stats st;
	int i, k = 0;

	establish(t, 32, 8192);
	assert_int_equal(rx(t->c, RMSGI_T_PACK, 0, 4, 0, pack_new(t->c, s, 4)),
			 0);
	assert_int_equal(t->msgs, 4);
	assert_string_equal(t->last_msg, "four!!!!");
	for (i = 0; i < t->nlog; i++)
		k += t->log[i].kind == 'M';
	assert_int_equal(k, 4);
	/* none held: the frame's buffer and its credit went back */
	assert_int_equal(msgs_freed, 1);
	assert_int_equal(t->c->cr.to_return, 1);
	assert_int_equal(rmsg_conn_stats(t->c, &st, sizeof(st)), sizeof(st));
	assert_int_equal(st.msgs_recv, 4);
	assert_int_equal(st.bytes_recv, 3 + 0 + 5 + 8);
	assert_int_equal(st.packs_recv, 1);
	assert_int_equal(st.packed_recv, 4);
}

static char seen[4][16];
static struct rmsg_msg *kept[4];
static int nkept;

static void on_msg_hold(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct t *t = arg;

	assert_true(nkept < 4);
	snprintf(seen[nkept], sizeof(seen[0]), "%.*s", (int)rmsg_msg_len(m),
		 (const char *)rmsg_msg_data(m));
	t->msgs++;
	/* the first and the third are held */
	if (nkept == 0 || nkept == 2)
		assert_int_equal(rmsg_msg_hold(m), 0);
	kept[nkept++] = m;
}

static void conn_pack__held_keep_the_buffer(void **state)
{
	static const char *const s[] = {"a", "bb", "ccc"};
	struct t *t = *state;

	establish(t, 32, 8192);
	nkept = 0;
	t->c->ops.on_msg = on_msg_hold;
	assert_int_equal(rx(t->c, RMSGI_T_PACK, 0, 3, 0, pack_new(t->c, s, 3)),
			 0);
	assert_int_equal(t->msgs, 3);
	assert_string_equal(seen[0], "a");
	assert_string_equal(seen[1], "bb");
	assert_string_equal(seen[2], "ccc");
	/* two held: the buffer stays, its credit too */
	assert_int_equal(msgs_freed, 0);
	assert_int_equal(t->c->cr.to_return, 0);
	/* a held message's view still reads the same */
	assert_memory_equal(rmsg_msg_data(kept[2]), "ccc", 3);
	rmsg_msg_release(kept[2]);
	assert_int_equal(msgs_freed, 0);
	assert_int_equal(t->c->cr.to_return, 0);
	assert_memory_equal(rmsg_msg_data(kept[0]), "a", 1);
	rmsg_msg_release(kept[0]);
	assert_int_equal(msgs_freed, 1);
	assert_int_equal(t->c->cr.to_return, 1);
	/* a second release does nothing (rmsg_msg_release(3)) */
	rmsg_msg_release(kept[0]);
	rmsg_msg_release(kept[1]);
	assert_int_equal(msgs_freed, 1);
	assert_int_equal(t->c->cr.to_return, 1);
}

/* a malformed frame of @len bytes at @b: nothing delivered, -EPROTO
 * closes; @cfg: the connection's configuration (NULL: defaults) */
static void rx_bad(void **state, uint32_t aux, const uint8_t *b, size_t len,
		   const struct rmsgi_cfgv *cfg)
{
	struct t *t = *state;
	struct rmsg_msg *m;

	if (cfg)
		t = replace_t(state, cfg, 0);
	establish(t, 32, 8192);
	m = tmsg_new(t->c, NULL);
	m->data = b; /* the test's bytes */
	m->len = len;
	assert_int_equal(rx(t->c, RMSGI_T_PACK, 0, aux, 0, m), -EPROTO);
	assert_int_equal(t->msgs, 0);
	assert_int_equal(msgs_freed, 1);
	assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* two well-formed entries "ab" and "c" (16 + 16 bytes) */
static const uint8_t good[32] = {2, 0, 0,   0, 0, 0, 0, 0, 'a', 'b', 0,
				 0, 0, 0,   0, 0, 1, 0, 0, 0,	0,   0,
				 0, 0, 'c', 0, 0, 0, 0, 0, 0,	0};
static uint8_t bad[72];

/* the good frame as it is goes through: each case below fails only by
 * what it changes */
static void conn_pack__rx_good_frame(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *m;

	establish(t, 32, 8192);
	m = tmsg_new(t->c, NULL);
	m->data = good;
	m->len = sizeof(good);
	assert_int_equal(rx(t->c, RMSGI_T_PACK, 0, 2, 0, m), 0);
	assert_int_equal(t->msgs, 2);
	assert_string_equal(t->last_msg, "c");
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
}

static void conn_pack__rx_no_entries(void **state)
{
	rx_bad(state, 0, good, 0, NULL);
}

static void conn_pack__rx_more_announced(void **state)
{
	rx_bad(state, 3, good, sizeof(good), NULL);
}

static void conn_pack__rx_trailing_bytes(void **state)
{
	rx_bad(state, 1, good, sizeof(good), NULL);
}

static void conn_pack__rx_length_beyond_frame(void **state)
{
	memcpy(bad, good, sizeof(good));
	bad[16] = 17;
	rx_bad(state, 2, bad, sizeof(good), NULL);
}

static void conn_pack__rx_reserved_set(void **state)
{
	memcpy(bad, good, sizeof(good));
	bad[4] = 1;
	rx_bad(state, 2, bad, sizeof(good), NULL);
}

static void conn_pack__rx_padding_set(void **state)
{
	memcpy(bad, good, sizeof(good));
	bad[31] = 'x';
	rx_bad(state, 2, bad, sizeof(good), NULL);
}

static void conn_pack__rx_cut_in_header(void **state)
{
	rx_bad(state, 2, good, 20, NULL);
}

static void conn_pack__rx_entry_above_max_msg(void **state)
{
	struct rmsgi_cfgv v;

	rmsgi_cfg_defaults(&v);
	v.max_msg_size = 1; /* "ab" is one byte too many */
	rx_bad(state, 2, good, sizeof(good), &v);
}

/* more entries than a frame may carry (proto.h), each well-formed */
static void conn_pack__rx_too_many_entries(void **state)
{
	static uint8_t zeros[(RMSGI_PACK_MAX_ENT + 1) * RMSGI_PACK_ENT_SIZE];
	struct t *t = *state;
	struct rmsg_msg *m;

	/* the bound itself is fine: that many empty messages */
	establish(t, 32, 8192);
	m = tmsg_new(t->c, NULL);
	m->data = zeros;
	m->len = RMSGI_PACK_MAX_ENT * RMSGI_PACK_ENT_SIZE;
	assert_int_equal(rx(t->c, RMSGI_T_PACK, 0, RMSGI_PACK_MAX_ENT, 0, m),
			 0);
	assert_int_equal(t->msgs, RMSGI_PACK_MAX_ENT);
	t = replace_t(state, NULL, 0);
	rx_bad(state, RMSGI_PACK_MAX_ENT + 1, zeros, sizeof(zeros), NULL);
}

/* the sender never packs more than that either */
static void conn_pack__tx_entries_bounded(void **state)
{
	static const char e[1];
	struct t *t = *state;
	struct iovec iov = {(void *)e, 0};
	int i, k, total = 0;

	establish_pack(t, 32, 8192);
	for (i = 0; i < 300; i++)
		assert_int_equal(rmsg_send(t->c, &iov, 1, NULL, NULL), 0);
	flush(t);
	for (k = 0; k < ft.nposted; k++) {
		if (ft.posted[k].type == RMSGI_T_PACK) {
			assert_true(ft.posted[k].aux <= RMSGI_PACK_MAX_ENT);
			total += (int)ft.posted[k].aux;
		} else {
			total++;
		}
	}
	assert_int_equal(total, 300);
	assert_true(ft.nposted < 300);
}

static void conn_pack__rx_frame_above_eager(void **state)
{
	struct rmsgi_cfgv v;

	rmsgi_cfg_defaults(&v);
	v.eager_size = 64;
	/* one entry of 64 bytes: 72 in all, well-formed but too large */
	memset(bad, 0, sizeof(bad));
	bad[0] = 64;
	rx_bad(state, 1, bad, 72, &v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_pack__queued_behind_credits_go_packed),
		CONN_T(conn_pack__lone_message_goes_plain),
		CONN_T(conn_pack__old_peer_never_gets_pack),
		CONN_T(conn_pack__within_peer_eager),
		CONN_T(conn_pack__rpc_goes_alone),
		CONN_T(conn_pack__failed_frame_fails_each),
		CONN_T(conn_pack__cancelled_in_queue),
		CONN_T(conn_pack__rx_delivers_each_in_order),
		CONN_T(conn_pack__held_keep_the_buffer),
		CONN_T(conn_pack__rx_good_frame),
		CONN_T(conn_pack__rx_no_entries),
		CONN_T(conn_pack__rx_more_announced),
		CONN_T(conn_pack__rx_trailing_bytes),
		CONN_T(conn_pack__rx_length_beyond_frame),
		CONN_T(conn_pack__rx_reserved_set),
		CONN_T(conn_pack__rx_padding_set),
		CONN_T(conn_pack__rx_cut_in_header),
		CONN_T(conn_pack__rx_entry_above_max_msg),
		CONN_T(conn_pack__rx_frame_above_eager),
		CONN_T(conn_pack__rx_too_many_entries),
		CONN_T(conn_pack__tx_entries_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
