// SPDX-License-Identifier: MIT
/*
 * session.c - resumable connections (rmsg_cfg_set_resume_ms(3), rmsg.7
 * "Resumable connections"): a transport failure suspends a connection
 * instead of ending it; the client dials again, the server matches the
 * new transport to the suspended connection, and each side sends again
 * what the other had not received. Every message is delivered once, in
 * order, or the connection ends with an error.
 *
 * Numbers. Each side numbers the messages it hands to the transport
 * (op->seq: 1, 2, ..., given when the backend took the frame) and counts
 * those it received (st.msgs_recv counts exactly the frames that carry
 * messages: DATA, and each entry of a PACK). A stream transport delivers
 * in order and loses only a suffix at a break, so a count is all a
 * sender needs to know what arrived. The receiver says how far its count
 * grew since it last said so in the acks field of every header it sends
 * (a CREDIT frame when nothing else goes), and the whole count in its
 * resume hello. A send's callback runs once the peer acknowledged it
 * (RMSGI_OS_UNACKED until then): "sent" means the peer's library has it.
 *
 * Handshake (the hello's session part, proto.h):
 *   client, first hello:   RMSGI_HELLO_F_RESUME, no part
 *   server, its reply:     sid (u64) || secret (32 bytes)      (a session)
 *   client, resume hello:  sid || attempt (u32) || rx_c (u64) || M_c
 *   server, resume reply:  rx_s (u64) || M_s
 * M_c = HMAC-SHA-256(K, "rmsg-resume-1 client" || sid || attempt ||
 * rx_c), M_s = HMAC-SHA-256(K, "rmsg-resume-1 server" || sid || attempt
 * || rx_s || rx_c), both cut to 16 bytes; rx is the sender's message
 * count; K is the secret, or with a pre-shared key HMAC-SHA-256(psk,
 * "rmsg-resume-1 key" || secret), so that one who read the secret off
 * the wire still cannot resume a keyed session. The attempt grows with
 * each request; the server takes only one above the last it accepted.
 * Refusals (a REJECT's status): -ESTALE no such session here (the server
 * restarted, or the session ended), -EACCES a wrong proof or a replayed
 * attempt, -EAGAIN the old transport is still going down (try again).
 *
 * What a peer can do with it: a resume request is checked before
 * anything is kept for it; a session exists only for a connection the
 * app accepted (and, with a key, that proved it), so suspended sessions
 * count against the listener's max_conns like open ones; the replay
 * holds the app's own buffers (the ops count against the send queue
 * bound, rmsg_cfg_set_send_queue), never copies.
 */
#include <stdlib.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "conn_int.h"

#define S_NEW_LEN (8 + RMSGI_SESS_KEY)
#define S_REQ_LEN (8 + 4 + 8 + S_MAC)
#define S_ACK_LEN (8 + S_MAC)
#define S_MAC 16
/* redials: the first at once, then waits that double up to this */
#define S_BACKOFF_MIN_MS 20u
#define S_BACKOFF_MAX_MS 1000u

static void sess_mac(const struct rmsgi_session *ss, bool server,
		     uint32_t attempt, uint64_t rx_s, uint64_t rx_c,
		     uint8_t out[S_MAC])
{
	static const char lc[] = "rmsg-resume-1 client";
	static const char ls[] = "rmsg-resume-1 server";
	struct hmac_sha256_ctx h;
	uint8_t buf[8 + 4 + 8 + 8], mac[RMSGI_MAC_SIZE];
	size_t n = 0;

	rmsgi_put64(buf, ss->sid);
	rmsgi_put32(buf + 8, attempt);
	n = 12;
	if (server) {
		rmsgi_put64(buf + n, rx_s);
		n += 8;
	}
	rmsgi_put64(buf + n, rx_c);
	n += 8;
	hmac_sha256_set_key(&h, sizeof(ss->key), ss->key);
	if (server)
		hmac_sha256_update(&h, sizeof(ls) - 1, (const uint8_t *)ls);
	else
		hmac_sha256_update(&h, sizeof(lc) - 1, (const uint8_t *)lc);
	hmac_sha256_update(&h, n, buf);
	hmac_sha256_digest(&h, sizeof(mac), mac);
	memcpy(out, mac, S_MAC);
}

/* K from the secret (and the pre-shared key, if any) */
static void sess_key(struct rmsgi_session *ss, const struct rmsgi_cfgv *cfg,
		     const uint8_t secret[RMSGI_SESS_KEY])
{
	static const char lk[] = "rmsg-resume-1 key";
	struct hmac_sha256_ctx h;

	if (!cfg->psk_len) {
		memcpy(ss->key, secret, RMSGI_SESS_KEY);
		return;
	}
	hmac_sha256_set_key(&h, cfg->psk_len, cfg->psk);
	hmac_sha256_update(&h, sizeof(lk) - 1, (const uint8_t *)lk);
	hmac_sha256_update(&h, RMSGI_SESS_KEY, secret);
	hmac_sha256_digest(&h, RMSGI_SESS_KEY, ss->key);
}

static void window_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void redial_cb(struct ev_loop *loop, ev_timer *w, int revents);

static struct rmsgi_session *sess_new(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->c = c;
	rmsgi_list_init(&ss->link);
	rmsgi_list_init(&ss->unacked);
	rmsgi_timer_init(&ss->window, c->ctx->env.timers, window_cb);
	ss->window.w.data = c;
	rmsgi_timer_init(&ss->redial, c->ctx->env.timers, redial_cb);
	ss->redial.w.data = c;
	c->ss = ss;
	return ss;
}

static bool can_resume(const struct rmsg_conn *c)
{
	return c->cfg.resume_ms && c->tops && c->tops->rebind;
}

void rmsgi_session_free(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = c->ss;

	if (!ss)
		return;
	rmsgi_timer_stop(c->ctx->loop, &ss->window);
	rmsgi_timer_stop(c->ctx->loop, &ss->redial);
	rmsgi_list_del(&ss->link);
	explicit_bzero(ss, sizeof(*ss));
	free(ss);
	c->ss = NULL;
}

/* ------------------------------------------------------------------ */
/* the handshake                                                        */

/* flow control starts again on the new transport, from the hellos: the
 * grants each side gives the other, byte windows, packing */
static void flow_reset(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	rmsgi_credit_grant(&c->cr, rmsgi_credits_start(&c->cfg));
	rmsgi_conn_flow(c, h);
}

void rmsgi_session_hello(const struct rmsg_conn *c, struct rmsgi_hello *h)
{
	const struct rmsgi_session *ss = c->ss;
	uint8_t *p = h->sess;

	if (!can_resume(c) || (c->is_server && !ss))
		return;
	h->flags |= RMSGI_HELLO_F_RESUME;
	if (c->is_server && c->state == RMSGI_CS_SUSPENDED) {
		/* the answer to a resume request: our count, our proof */
		h->flags &= (uint8_t)~RMSGI_HELLO_F_AUTH;
		h->pdata_len = 0;
		h->nonce_len = 0;
		rmsgi_put64(p, c->st.msgs_recv);
		sess_mac(ss, true, ss->attempt, c->st.msgs_recv, ss->req_rx,
			 p + 8);
		h->sess_len = S_ACK_LEN;
	} else if (c->is_server) {
		rmsgi_put64(p, ss->sid);
		memcpy(p + 8, ss->secret, RMSGI_SESS_KEY);
		h->sess_len = S_NEW_LEN;
	} else if (ss && ss->on) {
		/* a resume request: no private data, no key flag (the
		 * proof is the key's) */
		h->flags &= (uint8_t)~RMSGI_HELLO_F_AUTH;
		h->pdata_len = 0;
		rmsgi_put64(p, ss->sid);
		rmsgi_put32(p + 8, ss->attempt);
		rmsgi_put64(p + 12, c->st.msgs_recv);
		sess_mac(ss, false, ss->attempt, 0, c->st.msgs_recv, p + 20);
		h->sess_len = S_REQ_LEN;
	}
}

void rmsgi_session_offer(struct rmsg_conn *c, const struct rmsg_listener *l)
{
	uint8_t rnd[RMSGI_NONCE_SIZE];
	struct rmsgi_session *ss;

	/* a group's peers land on any member: one could not find its
	 * session again (rmsg_listen_group(3)) */
	if (!can_resume(c) || l->group || c->ss)
		return;
	ss = sess_new(c);
	if (!ss)
		return; /* no memory: the connection is not resumable */
	if (rmsgi_auth_nonce(rnd) || rmsgi_auth_nonce(ss->secret)) {
		rmsgi_session_free(c);
		return;
	}
	memcpy(&ss->sid, rnd, sizeof(ss->sid));
	sess_key(ss, &c->cfg, ss->secret);
}

void rmsgi_session_established(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	struct rmsgi_session *ss = c->ss;

	if (c->is_server) {
		if (!ss || ss->on)
			return;
		ss->on = true;
		explicit_bzero(ss->secret, sizeof(ss->secret));
		rmsgi_list_add_tail(&c->ctx->sessions, &ss->link);
		return;
	}
	/* the server took it: its id and secret */
	if (!h || !(h->flags & RMSGI_HELLO_F_RESUME) ||
	    h->sess_len < S_NEW_LEN || !can_resume(c) || ss)
		return;
	ss = sess_new(c);
	if (!ss)
		return;
	ss->sid = rmsgi_get64(h->sess);
	sess_key(ss, &c->cfg, h->sess + 8);
	ss->on = true;
}

/* a request refused: counted, logged at most once a second per
 * context (a peer that guesses may try often) */
static int refuse(struct rmsg_conn *c, int err, struct rmsgi_hello *reply,
		  const char *what)
{
	struct rmsg_ctx *ctx = c->ctx;
	ev_tstamp now = ev_now(ctx->loop);

	ctx->st.resume_refused++;
	if (now - ctx->resume_warned >= 1.0) {
		rmsgi_warn(ctx,
			   "conn %u: a resume request refused: %s (%llu "
			   "refused so far)",
			   c->id, what,
			   (unsigned long long)ctx->st.resume_refused);
		ctx->resume_warned = now;
	}
	rmsgi_conn_why(c, "a resume request refused: %s", what);
	return rmsgi_conn_refuse(c, err, reply);
}

int rmsgi_session_request(struct rmsg_conn *c, const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply)
{
	const uint8_t *p = h->sess;
	struct rmsgi_session *ss = NULL;
	struct rmsgi_list *n;
	struct rmsg_conn *old;
	uint8_t mac[S_MAC];
	uint64_t sid, rx;
	uint32_t attempt;

	if (h->sess_len < S_REQ_LEN || !c->tops->rebind)
		return refuse(c, -EPROTO, reply, "malformed");
	sid = rmsgi_get64(p);
	attempt = rmsgi_get32(p + 8);
	rx = rmsgi_get64(p + 12);
	rmsgi_list_for_each(n, &c->ctx->sessions)
	{
		struct rmsgi_session *s =
			rmsgi_list_entry(n, struct rmsgi_session, link);

		if (s->sid == sid) {
			ss = s;
			break;
		}
	}
	if (!ss)
		return refuse(c, -ESTALE, reply, "no such session");
	sess_mac(ss, false, attempt, 0, rx, mac);
	if (!memeql_sec(mac, p + 20, S_MAC))
		return refuse(c, -EACCES, reply, "a wrong proof");
	if (attempt <= ss->attempt)
		return refuse(c, -EACCES, reply, "a replayed attempt");
	old = ss->c;
	if (rx < ss->peer_rx || rx > ss->tx_seq)
		return refuse(c, -EPROTO, reply,
			      "a count of messages it cannot have");
	ss->attempt = attempt;
	if (old->state == RMSGI_CS_ESTABLISHED) {
		/* the client saw the break first: our side of it goes */
		rmsgi_session_suspend(old, -ECONNRESET);
		if (old->tr_priv)
			old->tops->disconnect(old->tr_priv, 0);
	}
	if (old->state != RMSGI_CS_SUSPENDED)
		return refuse(c, -ESTALE, reply, "the session is ending");
	if (old->tr_priv) {
		rmsgi_conn_why(c, "the session's old transport is still "
				  "going down");
		return rmsgi_conn_refuse(c, -EAGAIN, reply);
	}
	/* the new transport is the session's from now on */
	ss->req_rx = rx;
	rmsgi_conn_set_tr(old, c->tr);
	old->tr_priv = c->tr_priv;
	old->tr_down = false;
	old->tops->rebind(old->tr_priv, old, &old->ti);
	c->tr_priv = NULL;
	flow_reset(old, h);
	rmsgi_conn_hello(old, reply);
	rmsgi_conn_why(c, "its transport resumed conn %u", old->id);
	rmsgi_conn_discard(c);
	return 0;
}

/* ------------------------------------------------------------------ */
/* numbers and acknowledgements                                         */

uint16_t rmsgi_session_ack_take(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = c->ss;
	uint64_t d;

	if (!ss->on)
		return 0;
	d = c->st.msgs_recv - ss->rx_told;
	if (d > UINT16_MAX)
		d = UINT16_MAX;
	ss->rx_told += d;
	return (uint16_t)d;
}

void rmsgi_session_posted(struct rmsg_conn *c, struct rmsgi_op *op)
{
	struct rmsgi_session *ss = c->ss;
	struct rmsgi_list *n;

	if (!ss->on)
		return;
	if (op->kind == RMSGI_OP_SEND) {
		op->seq = ++ss->tx_seq;
		return;
	}
	if (op->kind != RMSGI_OP_PACK)
		return;
	rmsgi_list_for_each(n, &op->rlink)
		rmsgi_list_entry(n, struct rmsgi_op, link)
			->seq = ++ss->tx_seq;
}

/* in order of numbers (completions come in order; failures may follow
 * ops already held) */
static void unacked_add(struct rmsgi_session *ss, struct rmsgi_op *op)
{
	struct rmsgi_list *n = ss->unacked.prev;

	while (n != &ss->unacked &&
	       rmsgi_list_entry(n, struct rmsgi_op, link)->seq > op->seq)
		n = n->prev;
	rmsgi_list_add_head(n, &op->link); /* after @n */
	ss->n_unacked++;
}

bool rmsgi_session_hold(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	struct rmsgi_session *ss = c->ss;

	if (!ss)
		return false;
	if (status == 0 && op->seq <= ss->peer_rx)
		return false; /* the peer's ack came first */
	if (status && c->state != RMSGI_CS_SUSPENDED)
		return false;
	op_state(c, op, RMSGI_OS_UNACKED);
	unacked_add(ss, op);
	return true;
}

/* the peer has the messages up to @rx: their callbacks run, status 0 */
static void acked_through(struct rmsg_conn *c, uint64_t rx)
{
	struct rmsgi_session *ss = c->ss;

	ss->peer_rx = rx;
	while (!rmsgi_list_empty(&ss->unacked)) {
		struct rmsgi_op *op = rmsgi_list_entry(ss->unacked.next,
						       struct rmsgi_op, link);

		if (op->seq > rx)
			break;
		rmsgi_list_del(&op->link);
		ss->n_unacked--;
		rmsgi_conn_op_finish(c, op, 0);
	}
}

int rmsgi_session_acked(struct rmsg_conn *c, uint16_t n)
{
	struct rmsgi_session *ss = c->ss;

	if (!ss || !ss->on) {
		rmsgi_conn_why(c, "the peer acknowledged messages on a "
				  "connection that is not resumable");
		return -EPROTO;
	}
	if (ss->peer_rx + n > ss->tx_seq) {
		rmsgi_conn_why(
			c,
			"the peer acknowledged %llu messages, %llu "
			"more than we sent",
			(unsigned long long)(ss->peer_rx + n),
			(unsigned long long)(ss->peer_rx + n - ss->tx_seq));
		return -EPROTO;
	}
	acked_through(c, ss->peer_rx + n);
	return 0;
}

void rmsgi_session_cancel(struct rmsg_conn *c, int status)
{
	struct rmsgi_session *ss = c->ss;
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&ss->unacked))) {
		ss->n_unacked--;
		rmsgi_conn_op_finish(
			c, rmsgi_list_entry(n, struct rmsgi_op, link), status);
	}
}

void rmsgi_session_bye(struct rmsg_conn *c)
{
	/* the peer closes: what it sent last is acknowledged at once (it
	 * lingers for it), while our transport still takes frames */
	if (c->ss->on && c->st.msgs_recv != c->ss->rx_told &&
	    rmsgi_conn_send_credit(c, 0))
		rmsgi_conn_post_queued(c);
}

/* ------------------------------------------------------------------ */
/* suspend and resume                                                   */

bool rmsgi_session_suspend(struct rmsg_conn *c, int reason)
{
	struct rmsgi_session *ss = c->ss;
	struct rmsgi_list *n, *t;

	/* a peer that said goodbye, or broke the protocol, is not waited
	 * for */
	if (!ss || !ss->on || c->state != RMSGI_CS_ESTABLISHED || c->peer_bye ||
	    reason == -EPROTO || reason == -EACCES)
		return false;
	rmsgi_conn_set_state(c, RMSGI_CS_SUSPENDED);
	rmsgi_keepalive_stop(c);
	c->st.suspends++;
	rmsgi_conn_event(c, "suspended", "err=%s resume_ms=%u",
			 rmsg_err_name(reason), c->cfg.resume_ms);
	/* one-sided ops waiting for the peer's answer may or may not
	 * have taken effect: they fail */
	rmsgi_conn_cancel_answers(c, -ECONNABORTED);
	/* answers and control frames queued for the old transport go;
	 * messages and one-sided ops queued wait for the new one */
	rmsgi_list_for_each_safe (n, t, &c->tx.sendq) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		if (op->kind != RMSGI_OP_CTRL && op->kind != RMSGI_OP_RESP)
			continue;
		rmsgi_list_del(&op->link);
		if (op == &c->tx.credit_op)
			op_state(c, op, RMSGI_OS_DONE);
		else
			rmsgi_conn_op_finish(c, op, -ECONNABORTED);
	}
	/* what we received stays ours to deliver; their buffers' credits
	 * belonged to the old transport */
	rmsgi_conn_rx_stale(c);
	rmsgi_timer_start(c->ctx->loop, &ss->window, c->cfg.resume_ms / 1000.0,
			  0);
	ss->backoff_ms = 0;
	return true;
}

int rmsgi_session_failed(struct rmsg_conn *c, int reason,
			 const struct rmsgi_hello *h)
{
	(void)reason;
	if (!h || h->status == -EAGAIN || h->status == -EUSERS)
		return 0; /* dial again once the backend is down */
	switch (h->status) {
	case -ESTALE:
		rmsgi_conn_why(c, "the peer has no such session (it "
				  "restarted, or ended the session)");
		break;
	case -EACCES:
		rmsgi_conn_why(c, "the peer refused our proof of the session");
		break;
	default:
		rmsgi_conn_why(c,
			       "the peer refused to resume the session "
			       "(%s)",
			       rmsg_err_name(h->status));
		break;
	}
	return h->status < 0 ? h->status : -ECONNREFUSED;
}

void rmsgi_session_down(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = c->ss;

	if (c->is_server)
		return; /* the client dials again */
	rmsgi_timer_start(c->ctx->loop, &ss->redial, ss->backoff_ms / 1000.0,
			  0);
	ss->backoff_ms = ss->backoff_ms ? ss->backoff_ms * 2 : S_BACKOFF_MIN_MS;
	if (ss->backoff_ms > S_BACKOFF_MAX_MS)
		ss->backoff_ms = S_BACKOFF_MAX_MS;
}

static void redial_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsg_conn *c = w->data;
	int err;

	(void)loop;
	(void)revents;
	if (c->state != RMSGI_CS_SUSPENDED || c->tr_priv)
		return;
	c->ss->attempt++;
	c->tr_down = false;
	rmsgi_conn_get(c);
	err = rmsgi_conn_start(c, &c->uri);
	if (err) {
		/* nothing started: the next attempt later */
		c->tr_down = true;
		rmsgi_session_down(c);
	}
	rmsgi_ctx_flush(c->ctx);
	rmsgi_conn_put(c);
}

static void window_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsg_conn *c = w->data;

	(void)loop;
	(void)revents;
	if (c->state != RMSGI_CS_SUSPENDED)
		return;
	rmsgi_conn_why(c,
		       "not resumed within the resume window (%u ms) after "
		       "its transport failed",
		       c->cfg.resume_ms);
	rmsgi_conn_get(c);
	rmsgi_conn_abort(c, -ETIMEDOUT);
	rmsgi_ctx_flush(c->ctx);
	rmsgi_conn_put(c);
}

/* client: the server's answer to our request is right? Its count */
static int check_ack(struct rmsg_conn *c, const struct rmsgi_hello *h,
		     uint64_t *rx_p)
{
	struct rmsgi_session *ss = c->ss;
	uint8_t mac[S_MAC];

	if (!h || !(h->flags & RMSGI_HELLO_F_RESUME) ||
	    h->sess_len < S_ACK_LEN) {
		rmsgi_conn_why(c, "the peer accepted our resume request "
				  "without resuming");
		return -EPROTO;
	}
	*rx_p = rmsgi_get64(h->sess);
	sess_mac(ss, true, ss->attempt, *rx_p, c->st.msgs_recv, mac);
	if (!memeql_sec(mac, h->sess + 8, S_MAC)) {
		rmsgi_conn_why(c, "the peer's resume answer does not prove "
				  "the session");
		return -EACCES;
	}
	return 0;
}

void rmsgi_session_resume(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	struct rmsgi_session *ss = c->ss;
	uint64_t rx = ss->req_rx;
	unsigned replayed = 0;
	int err = 0;

	if (!c->is_server) {
		err = check_ack(c, h, &rx);
		if (!err)
			flow_reset(c, h);
	}
	if (!err && (rx < ss->peer_rx || rx > ss->tx_seq)) {
		rmsgi_conn_why(c,
			       "the peer's count of our messages (%llu) is "
			       "not between %llu and %llu",
			       (unsigned long long)rx,
			       (unsigned long long)ss->peer_rx,
			       (unsigned long long)ss->tx_seq);
		err = -EPROTO;
	}
	if (err) {
		rmsgi_conn_abort(c, err);
		return;
	}
	/* what it has is done; the rest goes again, first and in order */
	acked_through(c, rx);
	while (!rmsgi_list_empty(&ss->unacked)) {
		struct rmsgi_op *op = rmsgi_list_entry(ss->unacked.prev,
						       struct rmsgi_op, link);

		rmsgi_list_del(&op->link);
		ss->n_unacked--;
		op->seq = 0;
		op->proto = RMSGI_OP_P_NONE;
		op_state(c, op, RMSGI_OS_QUEUED);
		rmsgi_list_add_head(&c->tx.sendq, &op->link);
		replayed++;
	}
	ss->tx_seq = rx;
	/* the hellos told each side the other's count */
	ss->rx_told = c->st.msgs_recv;
	ss->backoff_ms = 0;
	rmsgi_timer_stop(c->ctx->loop, &ss->window);
	rmsgi_timer_stop(c->ctx->loop, &ss->redial);
	c->st.resumes++;
	c->st.replayed += replayed;
	rmsgi_conn_set_state(c, RMSGI_CS_ESTABLISHED);
	rmsgi_conn_proto_queued(c);
	rmsgi_keepalive_start(c);
	rmsgi_conn_event(c, "resumed", "transport=%s replayed=%u attempt=%u",
			 c->tr->name, replayed, ss->attempt);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

int rmsg_conn_resume_state(const struct rmsg_conn *c)
{
	if (!c)
		return -EINVAL;
	if (!c->ss || !c->ss->on || c->state >= RMSGI_CS_CLOSING)
		return RMSG_RESUME_NONE;
	return c->state == RMSGI_CS_SUSPENDED ? RMSG_RESUME_SUSPENDED
					      : RMSG_RESUME_ON;
}
