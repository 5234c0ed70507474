// SPDX-License-Identifier: MIT
/*
 * conn_hostile.c - unit tests of the connection state machine (src/conn.c)
 * against the fake transport (fake_tr.h): a peer that lies in ways the
 * frame checks cannot see. A reply to an RPC whose request has not gone
 * out yet; answers to all of our rendezvous sends but the oldest; a peer
 * that keeps us queueing answers (-ENOSYS replies, acknowledgements) by
 * returning just the credit our CREDIT frames cost.
 */
#include "conn_t.h"
#include "conn_int.h"

#include "proto.h"

/* ------------------------------------------------------------------ */
/* RPC                                                                  */

struct call_rec {
	int n;
	int status;
	char data[64];
};

static void reply_cb(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		     void *arg)
{
	struct call_rec *r = arg;
	size_t len = reply ? rmsg_msg_len(reply) : 0;

	(void)c;
	r->n++;
	r->status = status;
	assert_true(len < sizeof(r->data));
	if (len)
		memcpy(r->data, rmsg_msg_data(reply), len);
	r->data[len] = 0;
}

/* an RPC frame from the peer: its 16-byte header (@word: the method of a
 * request, the status of a reply; the call id), then @body */
static struct rmsg_msg *rpc_frame(struct rmsg_conn *c, uint32_t word,
				  uint64_t id, const char *body)
{
	struct rmsg_msg *m = tmsg_new(c, NULL);
	struct tmsg *tm = RMSGI_CONTAINER_OF(m, struct tmsg, m);
	size_t n = strlen(body);

	assert_true(16 + n <= sizeof(tm->data));
	rmsgi_put32(tm->data, word);
	rmsgi_put32(tm->data + 4, 0);
	rmsgi_put32(tm->data + 8, (uint32_t)id);
	rmsgi_put32(tm->data + 12, (uint32_t)(id >> 32));
	memcpy(tm->data + 16, body, n);
	m->data = tm->data;
	m->len = 16 + n;
	return m;
}

/* a reply that names a call whose request is still queued (no credit to
 * send it) is not delivered then: the callback would tell the app that
 * the request's memory is free again, and the request would later go out
 * of whatever the app put there. It is kept until the request's send
 * completes, and delivered then, once */
static void conn_hostile__reply_before_request_sent(void **state)
{
	struct t *t = *state;
	char req[] = "request";
	struct iovec iov = {req, sizeof(req) - 1};
	struct call_rec r = {0};
	uint64_t id = 0;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(t->c->cr.avail, 1); /* the last: never a message */
	assert_int_equal(rmsg_call(t->c, 7, &iov, 1, 0, reply_cb, &r, &id), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3); /* the request waits for credit */
	assert_int_equal(rx(t->c, RMSGI_T_DATA, 0, RMSGI_AUX_RPC_REP, 0,
			    rpc_frame(t->c, 0, id, "forged")),
			 0);
	flush(t);
	assert_int_equal(r.n, 0);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	/* credits back: the request goes, and completes */
	tr_complete_all(t->c, 0);
	assert_int_equal(rx_credit(t->c, 3), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1); /* (completed ones leave the list) */
	assert_int_equal(ft.posted[0].aux, RMSGI_AUX_RPC_REQ);
	assert_int_equal(r.n, 0);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.data, "forged");
	/* the kept message went back with its credit */
	rmsg_conn_close(t->c);
	flush(t);
	assert_int_equal(r.n, 1);
}

/* the same reply kept while the connection closes: delivered once, by
 * the close, and its message freed */
static void conn_hostile__kept_reply_at_close(void **state)
{
	struct t *t = *state;
	char req[] = "request";
	struct iovec iov = {req, sizeof(req) - 1};
	struct call_rec r = {0};
	int freed, i;
	uint64_t id = 0;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(rmsg_call(t->c, 7, &iov, 1, 0, reply_cb, &r, &id), 0);
	flush(t);
	assert_int_equal(rx(t->c, RMSGI_T_DATA, 0, RMSGI_AUX_RPC_REP, 0,
			    rpc_frame(t->c, 0, id, "early")),
			 0);
	freed = msgs_freed;
	tr_down(t->c);
	flush(t);
	assert_int_equal(r.n, 1);
	assert_int_equal(msgs_freed, freed + 1);
	assert_int_equal(t->closed, 1);
}

/* ------------------------------------------------------------------ */
/* answers out of order                                                 */

#define DRIP_N 12

struct drip {
	struct t *t;
	uint64_t ids[DRIP_N];
	int n, next;
};

/* the peer answers one more of our rendezvous sends per tick */
static void drip_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	struct drip *d = w->data;

	(void)revents;
	if (d->t->c->state >= RMSGI_CS_CLOSING || d->next == d->n) {
		ev_timer_stop(l, w);
		ev_break(l, EVBREAK_ONE);
		return;
	}
	assert_int_equal(rx(d->t->c, RMSGI_T_RNDV_ACK, 0, 0, d->ids[d->next++],
			    tmsg_new(d->t->c, NULL)),
			 0);
	flush(d->t);
}

/* the keepalive bound on our oldest rendezvous send holds while the peer
 * answers the newer ones, one per 1.5 keepalive intervals: it starts
 * again only when the oldest is answered. Before, any answer restarted
 * it, and the oldest send (its buffer, its window) waited for as long as
 * the peer kept answering others */
static void conn_hostile__oldest_unanswered(void **state)
{
	struct rmsgi_cfgv v;
	struct drip d = {0};
	struct t *t;
	ev_timer w;
	int i, st = 0;

	rmsgi_cfg_defaults(&v);
	v.credits_initial = v.credits;
	v.keepalive_ms = 100;
	v.keepalive_misses = 2;
	t = replace_t(state, &v, RMSGI_TR_CAP_RNDV);
	establish(t, 32, 64);
	for (i = 0; i < DRIP_N; i++)
		assert_int_equal(send_len(t, 65, i + 1), 0);
	flush(t);
	assert_int_equal(ft.nposted, DRIP_N);
	d.t = t;
	for (i = 1; i < DRIP_N; i++) /* every one but the first */
		d.ids[d.n++] = ft.posted[i].id;
	tr_complete_all(t->c, 0);
	flush(t);
	w.data = &d;
	ev_timer_init(&w, drip_cb, 0.15, 0.15);
	ev_timer_start(t->loop, &w);
	ev_run(t->loop, 0);
	ev_timer_stop(t->loop, &w);
	assert_true(t->c->state >= RMSGI_CS_CLOSING);
	assert_int_equal(t->c->close_reason, -ETIMEDOUT);
	/* closed while the peer still answered the others */
	assert_true(d.next < d.n);
	/* and the oldest send failed with it, once */
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 1, &st), 1);
	assert_int_equal(st, -ETIMEDOUT);
}

/* ------------------------------------------------------------------ */
/* answers the peer makes us queue                                      */

struct asker {
	struct t *t;
	int rounds;
	uint64_t id;
};

/* one round of a peer that asks (RPC requests for a method nobody
 * handles: each makes us queue an -ENOSYS reply) with every credit it
 * has (as our side counts them: cr.peer_avail), and returns just the
 * one credit our CREDIT frame cost: never enough for our answers */
static void ask_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	struct asker *a = w->data;
	struct t *t = a->t;
	bool credit_frame = false;
	int i;

	(void)revents;
	if (t->c->state >= RMSGI_CS_CLOSING || ++a->rounds > 60) {
		ev_timer_stop(l, w);
		ev_break(l, EVBREAK_ONE);
		return;
	}
	for (i = 0; i < ft.nposted; i++)
		credit_frame |= ft.posted[i].type == RMSGI_T_CREDIT;
	tr_complete_all(t->c, 0);
	if (credit_frame)
		assert_int_equal(rx_credit(t->c, 1), 0);
	while (t->c->cr.peer_avail > 1) {
		assert_int_equal(rx(t->c, RMSGI_T_DATA, 0, RMSGI_AUX_RPC_REQ, 0,
				    rpc_frame(t->c, 99, ++a->id, "")),
				 0);
	}
	flush(t);
}

/* such a peer would have us queue answers without end (one grant more
 * per round): our queue, with answers for it, that lets nothing out ends
 * the connection within the keepalive bound */
static void conn_hostile__answers_never_let_out(void **state)
{
	struct rmsgi_cfgv v;
	struct asker a = {0};
	struct t *t;
	ev_timer w;

	rmsgi_cfg_defaults(&v);
	v.credits_initial = v.credits;
	v.keepalive_ms = 100;
	v.keepalive_misses = 2;
	t = replace_t(state, &v, 0);
	establish(t, 4, 8192);
	a.t = t;
	w.data = &a;
	ev_timer_init(&w, ask_cb, 0.05, 0.05);
	ev_timer_start(t->loop, &w);
	ev_run(t->loop, 0);
	ev_timer_stop(t->loop, &w);
	assert_true(t->c->state >= RMSGI_CS_CLOSING);
	assert_int_equal(t->c->close_reason, -ETIMEDOUT);
	assert_true(a.rounds <= 60); /* while the peer still asked */
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
}

/* ------------------------------------------------------------------ */
/* one-sided: a revoke with an answer queued                            */

/* a region exported to @t's connection, our credits spent (the last is
 * never a message's) and the peer's read through it answered: the answer
 * waits in the queue. Returns the region; @desc its export */
static struct rmsg_mr *answer_queued(struct t *t, uint8_t *region, size_t len,
				     uint8_t *desc)
{
	struct rmsgi_rma r = {.off = 0, .len = 16};
	struct rmsgi_desc d;
	struct rmsg_msg *m;
	struct rmsg_mr *mr;
	int i;

	establish(t, 4, 8192);
	assert_int_equal(
		rmsg_mr_reg(t->ctx, region, len, RMSG_ACCESS_REMOTE_READ, &mr),
		0);
	assert_int_equal(
		rmsg_mr_export(mr, t->c, 0, 0, RMSG_ACCESS_REMOTE_READ, desc),
		0);
	assert_int_equal(rmsgi_desc_decode(desc, &d), 0);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(t->c->cr.avail, 1);
	r.token = d.token;
	m = tmsg_new(t->c, NULL);
	rmsgi_rma_encode(&r, 1, RMSGI_CONTAINER_OF(m, struct tmsg, m)->data);
	m->len = RMSGI_READ_REQ_SIZE;
	assert_int_equal(rx(t->c, RMSGI_T_READ_REQ, 0, 0, 9, m), 0);
	flush(t);
	assert_int_equal(t->c->tx.ans_n, 1);
	return mr;
}

/* the answer to a peer's read is written from the region when it goes,
 * not copied when it is queued: while one waits (no credit here), a
 * revoke says -EBUSY and the export stays, as the access has not
 * stopped; else what the app writes there after the revoke went to the
 * peer. Once it went, the revoke succeeds */
static void conn_hostile__revoke_with_answer_queued(void **state)
{
	struct t *t = *state;
	static uint8_t region[64] = "before the revoke";
	uint8_t desc[RMSG_MR_DESC_SIZE];
	struct rmsg_mr *mr = answer_queued(t, region, sizeof(region), desc);

	assert_int_equal(rmsg_mr_revoke(mr, desc), -EBUSY);
	assert_int_equal(rmsg_mr_dereg(mr), -EBUSY);
	/* credits back: the answer goes, from the region */
	tr_complete_all(t->c, 0);
	assert_int_equal(rx_credit(t->c, 3), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_READ_RESP);
	assert_int_equal(rmsg_mr_revoke(mr, desc), -EBUSY);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(rmsg_mr_revoke(mr, desc), 0);
	assert_int_equal(rmsg_mr_revoke(mr, desc), -ENOENT);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
}

/* an answer still queued when its connection ends: the export goes with
 * the connection, its object once the answer was cancelled (no leak, no
 * use after free: ASan and valgrind run this) */
static void conn_hostile__answer_queued_at_close(void **state)
{
	struct t *t = *state;
	static uint8_t region[64];
	uint8_t desc[RMSG_MR_DESC_SIZE];
	struct rmsg_mr *mr = answer_queued(t, region, sizeof(region), desc);

	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
}

/* ------------------------------------------------------------------ */
/* answers that answer nothing we asked                                 */

/* one of our reads (emulated: the peer answers with READ_RESP) of 16
 * bytes, posted; its id, as the peer saw it */
static uint64_t read_posted(struct t *t, uint8_t *dst)
{
	struct rmsgi_desc d = {
		.access = RMSG_ACCESS_REMOTE_READ, .token = 77, .len = 64};
	uint8_t desc[RMSG_MR_DESC_SIZE];
	struct iovec iov = {dst, 16};

	establish(t, 32, 8192);
	rmsgi_desc_encode(&d, desc);
	assert_int_equal(
		rmsg_read(t->c, &iov, 1, desc, 0, done_cb, (void *)(intptr_t)5),
		0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_READ_REQ);
	return ft.posted[0].id;
}

/* a READ_RESP frame of @len bytes for @id from the peer */
static int read_resp(struct t *t, uint64_t id, size_t len)
{
	struct rmsg_msg *m = tmsg_new(t->c, NULL);

	m->len = len;
	return rx(t->c, RMSGI_T_READ_RESP, 0, 0, id, m);
}

/* a READ_RESP for no read of ours, one shorter than the read (it would
 * leave the rest of the app's buffer as it was, reported as read), and
 * a second one for the same read: each ends the connection -EPROTO */
static void conn_hostile__read_resp_unasked(void **state)
{
	struct t *t = *state;
	uint8_t dst[16];
	uint64_t id = read_posted(t, dst);

	assert_int_equal(read_resp(t, id + 1, 16), -EPROTO);
	assert_int_equal(t->c->close_reason, -EPROTO);
}

static void conn_hostile__read_resp_short(void **state)
{
	struct t *t = *state;
	uint8_t dst[16];
	uint64_t id = read_posted(t, dst);

	assert_int_equal(read_resp(t, id, 15), -EPROTO);
	assert_int_equal(t->c->close_reason, -EPROTO);
}

static void conn_hostile__read_resp_twice(void **state)
{
	struct t *t = *state;
	uint8_t dst[16];
	uint64_t id = read_posted(t, dst);
	int st = 1;

	tr_complete_all(t->c, 0);
	assert_int_equal(read_resp(t, id, 16), 0);
	flush(t);
	assert_int_equal(done_count(t, 5, &st), 1);
	assert_int_equal(st, 0);
	assert_int_equal(read_resp(t, id, 16), -EPROTO);
	assert_int_equal(t->c->close_reason, -EPROTO);
}

/* an RNDV_ACK that names a read of ours (it answers sends and writes) */
static void conn_hostile__rndv_ack_for_read(void **state)
{
	struct t *t = *state;
	uint8_t dst[16];
	uint64_t id = read_posted(t, dst);

	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, id, tmsg_new(t->c, NULL)),
		-EPROTO);
	assert_int_equal(t->c->close_reason, -EPROTO);
}

/* ------------------------------------------------------------------ */
/* REKEY (rekey.c): one-sided access across a resume over RDMA         */

/* a connection over a fake with native one-sided ops, as if just
 * resumed: our (empty) list of rebound exports sent, the peer's
 * awaited */
static struct t *rekey_t(void **state)
{
	struct t *t = replace_t(state, NULL, RMSGI_TR_CAP_RMA);

	establish(t, 32, 8192);
	rmsgi_rekey_resume(t->c);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_REKEY);
	assert_int_equal(ft.posted[0].id, 0); /* the end, after 0 */
	assert_int_equal(ft.posted[0].aux, 0);
	return t;
}

static int rx_rekey(struct t *t, uint64_t token, uint32_t rkey)
{
	return rx(t->c, RMSGI_T_REKEY, 0, rkey, token, tmsg_new(t->c, NULL));
}

/* a descriptor the peer gave before the resume: token @token, rkey @rkey */
static void old_desc(uint8_t desc[RMSG_MR_DESC_SIZE], uint64_t token,
		     uint32_t rkey)
{
	struct rmsgi_desc d = {.access = RMSG_ACCESS_REMOTE_WRITE,
			       .flags = RMSGI_DESC_F_RKEY,
			       .rkey = rkey,
			       .token = token,
			       .addr = 4096,
			       .len = 4096};

	rmsgi_desc_encode(&d, desc);
}

/* a native write waits for the peer's list, then goes with the rkey
 * it gave for the descriptor's token; one the list does not name keeps
 * its own */
static void conn_rekey__held_then_rekeyed(void **state)
{
	struct t *t = rekey_t(state);
	uint8_t desc[2][RMSG_MR_DESC_SIZE];
	char buf[8] = "12345678";
	struct iovec iov = {buf, sizeof(buf)};

	old_desc(desc[0], 5, 111);
	old_desc(desc[1], 6, 333);
	assert_int_equal(
		rmsg_write(t->c, &iov, 1, desc[0], 0, done_cb, (void *)1), 0);
	assert_int_equal(
		rmsg_write(t->c, &iov, 1, desc[1], 0, done_cb, (void *)2), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1); /* held */
	assert_int_equal(rx_rekey(t, 5, 222), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(rx_rekey(t, 0, 1), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(ft.posted[1].op->rma.rkey, 222);
	assert_int_equal(ft.posted[2].op->rma.rkey, 333);
	assert_int_equal(t->closed, 0);
}

/* a list outside a resume, an end that miscounts, and one entry beyond
 * the bound each break the protocol */
static void conn_rekey__hostile(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	assert_int_equal(rx_rekey(t, 5, 1), -EPROTO);
	assert_int_equal(t->c->close_reason, -EPROTO);
	assert_non_null(strstr(rmsg_conn_close_reason(t->c), "outside"));

	t = rekey_t(state);
	assert_int_equal(rx_rekey(t, 5, 1), 0);
	assert_int_equal(rx_rekey(t, 0, 2), -EPROTO);
	assert_non_null(strstr(rmsg_conn_close_reason(t->c), "after 1"));

	t = rekey_t(state);
	for (i = 0; i < 65536; i++) {
		assert_int_equal(rx_rekey(t, (uint64_t)i + 1, 7), 0);
		if (i % 16 == 15) {
			/* its credits back, in our CREDIT frames, and
			 * theirs for those */
			int n = ft.npost;

			flush(t);
			n = ft.npost - n;
			tr_complete_all(t->c, 0);
			if (n)
				assert_int_equal(rx_credit(t->c, (uint16_t)n),
						 0);
		}
	}
	assert_int_equal(rx_rekey(t, 1u << 20, 7), -EPROTO);
	assert_non_null(strstr(rmsg_conn_close_reason(t->c), "more than"));
}

/* the server's sessions by id: 3000 found each in a table that grew
 * (a resume request no longer walks every session), none after its end */
static void sessions__table(void **state)
{
	struct t *t = *state;
	enum {
		N = 3000
	};
	static struct rmsg_conn c[N];
	struct rmsg_ctx *ctx = t->c->ctx;
	int i;

	for (i = 0; i < N; i++) {
		c[i].ctx = ctx;
		c[i].is_server = true;
		assert_non_null(rmsgi_session_new(&c[i]));
		c[i].ss->sid = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		rmsgi_session_on(&c[i]);
	}
	assert_int_equal(ctx->sess_n, N);
	assert_true(ctx->sess_nb >= N / 2);
	for (i = 0; i < N; i++)
		assert_ptr_equal(rmsgi_session_find(ctx, c[i].ss->sid),
				 c[i].ss);
	assert_null(rmsgi_session_find(ctx, 12345));
	for (i = 0; i < N; i += 2)
		rmsgi_session_end(&c[i]);
	assert_int_equal(ctx->sess_n, N / 2);
	for (i = 0; i < N; i++)
		assert_true((rmsgi_session_find(ctx, c[i].ss->sid) != NULL) ==
			    (i % 2 == 1));
	for (i = 0; i < N; i++)
		rmsgi_session_free(&c[i]);
	assert_int_equal(ctx->sess_n, 0);
}

/* a peer that never ends its list: the ops held for it would wait for
 * ever; the connection ends with -EPROTO within the setup timeout of the
 * resume (it kept them on the old code) */
static void conn_rekey__list_never_ended(void **state)
{
	struct t *t = replace_t(state, NULL, RMSGI_TR_CAP_RMA);
	uint8_t desc[RMSG_MR_DESC_SIZE];
	char buf[8] = "12345678";
	struct iovec iov = {buf, sizeof(buf)};
	int i;

	establish(t, 32, 8192);
	t->c->cfg.timeout_ms = 50;
	rmsgi_rekey_resume(t->c);
	flush(t);
	old_desc(desc, 5, 111);
	assert_int_equal(rmsg_write(t->c, &iov, 1, desc, 0, done_cb, NULL), 0);
	assert_int_equal(rx_rekey(t, 5, 222), 0); /* and never the end */
	flush(t);
	assert_int_equal(ft.nposted, 1); /* our end frame only: held */
	for (i = 0; i < 400 && t->c->state < RMSGI_CS_CLOSING; i++) {
		ev_sleep(0.001);
		ev_run(t->loop, EVRUN_NOWAIT);
	}
	assert_true(t->c->state >= RMSGI_CS_CLOSING);
	assert_int_equal(t->c->close_reason, -EPROTO);
	assert_non_null(strstr(rmsg_conn_close_reason(t->c), "did not end"));
}

/* while a native op waits for the peer's REKEY list, our credits and
 * acks still go back to it (it may need them to send the list) */
static void conn_rekey__credits_pass_a_held_op(void **state)
{
	struct t *t = rekey_t(state);
	uint8_t desc[RMSG_MR_DESC_SIZE];
	char buf[8] = "12345678";
	struct iovec iov = {buf, sizeof(buf)};
	int i, before, k;

	old_desc(desc, 5, 111);
	assert_int_equal(rmsg_write(t->c, &iov, 1, desc, 0, done_cb, (void *)1),
			 0);
	flush(t);
	before = ft.npost;
	for (i = 0; i < 30; i++)
		assert_int_equal(rx_data(t->c, "peer", 0), 0);
	flush(t);
	assert_true(ft.npost > before);
	for (k = 0; k < ft.nposted; k++)
		assert_int_not_equal(ft.posted[k].kind, RMSGI_OP_WRITE);
}

/* our own list goes ahead of what was queued while suspended */
static void conn_rekey__list_first(void **state)
{
	struct t *t = replace_t(state, NULL, RMSGI_TR_CAP_RMA);

	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "queued", 1), 0);
	rmsgi_rekey_resume(t->c);
	flush(t);
	assert_true(ft.nposted >= 2);
	assert_int_equal(ft.posted[0].type, RMSGI_T_REKEY);
	assert_int_equal(ft.posted[1].type, RMSGI_T_DATA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_hostile__reply_before_request_sent),
		CONN_T(conn_hostile__kept_reply_at_close),
		CONN_T(conn_hostile__oldest_unanswered),
		CONN_T(conn_hostile__answers_never_let_out),
		CONN_T(conn_hostile__revoke_with_answer_queued),
		CONN_T(conn_hostile__answer_queued_at_close),
		CONN_T(conn_hostile__read_resp_unasked),
		CONN_T(conn_hostile__read_resp_short),
		CONN_T(conn_hostile__read_resp_twice),
		CONN_T(conn_hostile__rndv_ack_for_read),
		CONN_T(conn_rekey__held_then_rekeyed),
		CONN_T(conn_rekey__hostile),
		CONN_T(conn_rekey__list_never_ended),
		CONN_T(sessions__table),
		CONN_T(conn_rekey__credits_pass_a_held_op),
		CONN_T(conn_rekey__list_first),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
