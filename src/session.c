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
 * those it has in order (rmsgi_session_rx: st.msgs_recv, the frames
 * that carry messages, DATA and each entry of a PACK, less those behind
 * a rendezvous still being read). A stream transport delivers
 * in order and loses only a suffix at a break, so a count is all a
 * sender needs to know what arrived. The receiver says how far its count
 * grew since it last said so in the acks field of every header it sends
 * (a CREDIT frame when nothing else goes), and the whole count in its
 * resume hello. A send's callback runs once the peer acknowledged it
 * (RMSGI_OS_UNACKED until then): "sent" means the peer's library has it.
 *
 * The handshake that proves and matches a session is resume.c's.
 * What a peer can do with it: a resume request is checked before
 * anything is kept for it; a session exists only for a connection the
 * app accepted (and, with a key, that proved it), so suspended sessions
 * count against the listener's max_conns like open ones; the replay
 * holds the app's own buffers (the ops count against the send queue
 * bound, rmsg_cfg_set_send_queue), never copies.
 */
#include <stdlib.h>

#include "conn_int.h"

/* redials: the first at once, then waits that double up to this */
#define S_BACKOFF_MIN_MS 20u
#define S_BACKOFF_MAX_MS 1000u

static void window_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void redial_cb(struct ev_loop *loop, ev_timer *w, int revents);

struct rmsgi_session *rmsgi_session_new(struct rmsg_conn *c)
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

void rmsgi_session_free(struct rmsg_conn *c)
{
	rmsgi_rekey_free(c);
	if (!c->ss)
		return;
	rmsgi_session_end(c);
	explicit_bzero(c->ss, sizeof(*c->ss));
	free(c->ss);
	c->ss = NULL;
}

/* ------------------------------------------------------------------ */
/* the server's sessions by id                                          */

/* a resume request's lookup costs the same whatever the number of
 * sessions: a peer that sends them unproved cannot make each walk all
 * of them (max_conns can be 16 M) */
#define S_BUCKETS_MIN 64u

static struct rmsgi_list *sess_bucket(const struct rmsg_ctx *ctx, uint64_t sid)
{
	/* ids are random: any bits do */
	return &ctx->sess_b[(sid ^ sid >> 32) & (ctx->sess_nb - 1)];
}

/* twice the buckets (or the first ones); false without memory */
static bool sess_grow(struct rmsg_ctx *ctx)
{
	uint32_t nb = ctx->sess_nb ? ctx->sess_nb * 2 : S_BUCKETS_MIN;
	uint32_t old_nb = ctx->sess_nb, i;
	struct rmsgi_list *old = ctx->sess_b, *n;

	if (nb < old_nb || !(ctx->sess_b = malloc(nb * sizeof(*ctx->sess_b)))) {
		ctx->sess_b = old;
		return false;
	}
	ctx->sess_nb = nb;
	for (i = 0; i < nb; i++)
		rmsgi_list_init(&ctx->sess_b[i]);
	for (i = 0; i < old_nb; i++)
		while ((n = rmsgi_list_pop(&old[i])))
			rmsgi_list_add_tail(
				sess_bucket(
					ctx,
					rmsgi_list_entry(
						n, struct rmsgi_session, link)
						->sid),
				n);
	free(old);
	return true;
}

struct rmsgi_session *rmsgi_session_find(const struct rmsg_ctx *ctx,
					 uint64_t sid)
{
	struct rmsgi_list *h, *n;

	if (!ctx->sess_nb)
		return NULL;
	h = sess_bucket(ctx, sid);
	for (n = h->next; n != h; n = n->next) {
		struct rmsgi_session *s =
			rmsgi_list_entry(n, struct rmsgi_session, link);

		if (s->sid == sid)
			return s;
	}
	return NULL;
}

void rmsgi_session_on(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = c->ss;

	/* established: the app accepted, a key was proven */
	if (ss->on)
		return;
	ss->on = true;
	/* up: a later failure suspends, it is no auto:// fallback */
	rmsgi_fallback_done(c);
	ss->ack_mark = ev_now(c->ctx->loop);
	explicit_bzero(ss->secret, sizeof(ss->secret));
	if (!c->is_server)
		return;
	/* (without memory for more buckets, chains grow longer) */
	if ((!c->ctx->sess_nb || c->ctx->sess_n >= 2 * c->ctx->sess_nb) &&
	    !sess_grow(c->ctx) && !c->ctx->sess_nb) {
		ss->on = false; /* not resumable: nowhere to find it */
		return;
	}
	rmsgi_list_add_tail(sess_bucket(c->ctx, ss->sid), &ss->link);
	ss->listed = true;
	c->ctx->sess_n++;
}

void rmsgi_session_end(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = c->ss;

	if (!ss)
		return;
	rmsgi_timer_stop(c->ctx->loop, &ss->window);
	rmsgi_timer_stop(c->ctx->loop, &ss->redial);
	rmsgi_failback_stop(c);
	if (ss->listed) {
		/* no resume finds it now */
		rmsgi_list_del(&ss->link);
		ss->listed = false;
		c->ctx->sess_n--;
	}
}

/* ------------------------------------------------------------------ */
/* numbers and acknowledgements                                         */

uint16_t rmsgi_session_ack_take(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = c->ss;
	uint64_t d;

	if (!ss->on)
		return 0;
	ss->ack_now = false;
	d = rmsgi_session_rx(c) - ss->rx_told;
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
	/* the frames the peer counts in its st.msgs_recv: messages (RPC
	 * included), not the AUTH frame, which is a send too */
	if (op->kind == RMSGI_OP_SEND) {
		if (op->type == RMSGI_T_DATA || op->type == RMSGI_T_RNDV_REQ)
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

	if (rmsgi_list_empty(&ss->unacked))
		ss->ack_mark = ev_now(ss->c->ctx->loop);
	while (n != &ss->unacked &&
	       rmsgi_list_entry(n, struct rmsgi_op, link)->seq > op->seq)
		n = n->prev;
	rmsgi_list_add_head(n, &op->link); /* after @n */
}

static bool path_failure(int reason);

bool rmsgi_session_hold(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	struct rmsgi_session *ss = c->ss;

	if (!ss)
		return false;
	if (status == 0 && op->seq <= ss->peer_rx)
		return false; /* the peer's ack came first */
	/* failed by the transport: kept to go again if the connection is
	 * suspended, or about to be (a backend may fail its frames before
	 * it reports the failure of the path: RDMA's retries ran out) */
	if (status && c->state != RMSGI_CS_SUSPENDED &&
	    !(ss->on && c->state == RMSGI_CS_ESTABLISHED &&
	      path_failure(status)))
		return false;
	op_state(c, op, RMSGI_OS_UNACKED);
	unacked_add(ss, op);
	return true;
}

/* the peer has the messages up to @rx: their callbacks run, status 0 */
static void acked_through(struct rmsg_conn *c, uint64_t rx)
{
	struct rmsgi_session *ss = c->ss;

	if (rx > ss->peer_rx) {
		/* progress: the peer takes what we send */
		ss->ack_mark = ev_now(c->ctx->loop);
		if (c->state == RMSGI_CS_ESTABLISHED) {
			rmsgi_timer_stop(c->ctx->loop, &ss->window);
			ss->backoff_ms = 0;
		}
	}
	ss->peer_rx = rx;
	while (!rmsgi_list_empty(&ss->unacked)) {
		struct rmsgi_op *op = rmsgi_list_entry(ss->unacked.next,
						       struct rmsgi_op, link);

		if (op->seq > rx)
			break;
		rmsgi_list_del(&op->link);
		rmsgi_conn_op_finish(c, op, 0);
	}
}

/*
 * The last frame posted while nothing more is queued asks the peer for
 * its acks when some of ours are outstanding: a sender that waits for
 * its callbacks (or for room in its send queue) is not left waiting for
 * RMSGI_ACK_EVERY messages or a keepalive. A CREDIT frame asks only for
 * messages already sent, so two idle peers never ask each other in
 * turn. A stream that keeps the queue full gets acks every
 * RMSGI_ACK_EVERY messages and with returned credits.
 */
uint8_t rmsgi_session_ackreq(const struct rmsg_conn *c,
			     const struct rmsgi_op *op)
{
	const struct rmsgi_session *ss = c->ss;
	bool msg =
		(op->kind == RMSGI_OP_SEND &&
		 (op->type == RMSGI_T_DATA || op->type == RMSGI_T_RNDV_REQ)) ||
		op->kind == RMSGI_OP_PACK;

	if (!ss->on || op->link.next != &c->tx.sendq)
		return 0;
	return msg || ss->tx_seq > ss->peer_rx ? RMSGI_HDR_F_ACKREQ : 0;
}

int rmsgi_session_acked(struct rmsg_conn *c, uint16_t n, uint8_t flags)
{
	struct rmsgi_session *ss = c->ss;

	if (!ss || !ss->on) {
		if (!n)
			return 0; /* a request for acks we do not give */
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
	if (flags & RMSGI_HDR_F_ACKREQ) {
		ss->ack_now = true;
		rmsgi_ctx_mark_dirty(c->ctx, c);
	}
	if (n)
		acked_through(c, ss->peer_rx + n);
	return 0;
}

void rmsgi_session_cancel(struct rmsg_conn *c, int status)
{
	struct rmsgi_session *ss = c->ss;
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&ss->unacked))) {
		rmsgi_conn_op_finish(
			c, rmsgi_list_entry(n, struct rmsgi_op, link), status);
	}
}

void rmsgi_session_bye(struct rmsg_conn *c)
{
	/* the peer closes: what it sent last is acknowledged at once (it
	 * lingers for it), while our transport still takes frames */
	if (c->ss->on && rmsgi_session_rx(c) != c->ss->rx_told &&
	    rmsgi_conn_send_credit(c, 0))
		rmsgi_conn_post_queued(c);
}

/* ------------------------------------------------------------------ */
/* suspend and resume                                                   */

/* a failure of the path, which a new transport may not meet again:
 * not a peer that broke the protocol or said goodbye, nor a message
 * the peer cannot take (that would fail again after every resume) */
static bool path_failure(int reason)
{
	switch (reason) {
	case 0:
	case -ECONNRESET:
	case -ETIMEDOUT:
	case -EPIPE:
	case -ECONNABORTED:
	case -ENETDOWN:
	case -ENETUNREACH:
	case -EHOSTUNREACH:
	case -EHOSTDOWN:
	case -EIO:    /* the device misbehaved: a new endpoint may not */
	case -ENODEV: /* the device was removed: auto:// has TCP */
		return true;
	default:
		return false;
	}
}

bool rmsgi_session_suspend(struct rmsg_conn *c, int reason)
{
	struct rmsgi_session *ss = c->ss;
	struct rmsgi_list *n, *t;

	if (!ss || !ss->on || c->state != RMSGI_CS_ESTABLISHED || c->peer_bye ||
	    !path_failure(reason))
		return false;
	rmsgi_conn_set_state(c, RMSGI_CS_SUSPENDED);
	rmsgi_keepalive_stop(c);
	rmsgi_reclaim_stop(c);
	rmsgi_failback_stop(c);
	c->st.suspends++;
	rmsgi_conn_event(c, "suspended", "err=%s why=\"%s\" resume_ms=%u",
			 rmsg_err_name(reason), c->why, c->cfg.resume_ms);
	/* the reason of the break is not the connection's: if it ends,
	 * the end says why */
	c->why[0] = 0;
	/* one-sided ops waiting for the peer's answer may or may not
	 * have taken effect: they fail */
	rmsgi_conn_cancel_answers(c, -ECONNABORTED);
	/* answers and control frames queued for the old transport go;
	 * messages and one-sided ops queued wait for the new one */
	rmsgi_list_for_each_safe (n, t, &c->tx.sendq) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		if (op->kind != RMSGI_OP_CTRL && op->kind != RMSGI_OP_RESP) {
			rmsgi_conn_op_unproto(op);
			continue;
		}
		rmsgi_list_del(&op->link);
		if (op == &c->tx.credit_op)
			op_state(c, op, RMSGI_OS_DONE);
		else
			rmsgi_conn_op_finish(c, op, -ECONNABORTED);
	}
	/* what we received stays ours to deliver; their buffers' credits
	 * belonged to the old transport */
	rmsgi_conn_rx_stale(c);
	/* the window runs from the first break after progress: a
	 * connection that resumes but moves nothing (a path that breaks
	 * again at once) still ends within it */
	if (!rmsgi_timer_active(&ss->window))
		rmsgi_timer_start(c->ctx->loop, &ss->window,
				  c->cfg.resume_ms / 1000.0, 0);
	return true;
}

void rmsgi_session_window_from(struct rmsg_conn *c, unsigned extra_ms)
{
	rmsgi_timer_start(c->ctx->loop, &c->ss->window,
			  (c->cfg.resume_ms + extra_ms) / 1000.0, 0);
}

int rmsgi_session_failed(struct rmsg_conn *c, int reason,
			 const struct rmsgi_hello *h)
{
	(void)reason;
	if (!h || h->status == -EAGAIN || h->status == -EUSERS ||
	    h->status == -ENOMEM)
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

void rmsgi_session_attempt(struct rmsg_conn *c)
{
	c->ss->attempt++;
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
	rmsgi_session_attempt(c);
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
	if (c->state != RMSGI_CS_SUSPENDED && c->state != RMSGI_CS_ESTABLISHED)
		return;
	if (c->state == RMSGI_CS_SUSPENDED)
		rmsgi_conn_why(c,
			       "not resumed within the resume window (%u ms) "
			       "after its transport failed",
			       c->cfg.resume_ms);
	else
		rmsgi_conn_why(c,
			       "resumed, but the peer acknowledged nothing "
			       "within the resume window (%u ms) of the "
			       "first break",
			       c->cfg.resume_ms);
	rmsgi_conn_get(c);
	rmsgi_conn_abort(c, -ETIMEDOUT);
	rmsgi_ctx_flush(c->ctx);
	rmsgi_conn_put(c);
}

/* are messages (numbered once posted) queued? */
static bool sendq_has_msgs(const struct rmsg_conn *c)
{
	const struct rmsgi_list *n;

	for (n = c->tx.sendq.next; n != &c->tx.sendq; n = n->next) {
		const struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		if (op->kind == RMSGI_OP_SEND || op->kind == RMSGI_OP_PACK)
			return true;
	}
	return false;
}

void rmsgi_session_resume(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	struct rmsgi_session *ss = c->ss;
	uint64_t rx = ss->req_rx;
	unsigned replayed = 0;
	bool progress;
	int err = 0;

	if (!c->is_server)
		err = rmsgi_session_answer(c, h, &rx);
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
	progress = rx > ss->peer_rx;
	acked_through(c, rx);
	while (!rmsgi_list_empty(&ss->unacked)) {
		struct rmsgi_op *op = rmsgi_list_entry(ss->unacked.prev,
						       struct rmsgi_op, link);

		rmsgi_list_del(&op->link);
		op->seq = 0;
		rmsgi_conn_op_unproto(op);
		op_state(c, op, RMSGI_OS_QUEUED);
		rmsgi_list_add_head(&c->tx.sendq, &op->link);
		replayed++;
	}
	ss->tx_seq = rx;
	/* the hellos told each side the other's count */
	ss->rx_told = rmsgi_session_rx(c);
	rmsgi_timer_stop(c->ctx->loop, &ss->redial);
	/* the window waits for progress: the peer got more of ours since
	 * the last ack (the handshake proves it), or nothing of ours is
	 * left for it to acknowledge */
	if (progress || (!replayed && !sendq_has_msgs(c))) {
		rmsgi_timer_stop(c->ctx->loop, &ss->window);
		ss->backoff_ms = 0;
	}
	ss->ack_mark = ev_now(c->ctx->loop);
	c->why[0] = 0;
	rmsgi_fallback_done(c);
	c->st.resumes++;
	c->st.replayed += replayed;
	rmsgi_conn_set_state(c, RMSGI_CS_ESTABLISHED);
	rmsgi_conn_proto_queued(c);
	rmsgi_rekey_resume(c);
	if (c->state != RMSGI_CS_ESTABLISHED)
		return;
	rmsgi_keepalive_start(c);
	rmsgi_conn_event(c, "resumed", "transport=%s replayed=%u attempt=%u",
			 c->tr->name, replayed, ss->attempt);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_session_mark(struct rmsg_conn *c, ev_tstamp now)
{
	c->ss->ack_mark = now;
}

bool rmsgi_session_stuck(struct rmsg_conn *c, ev_tstamp now, double bound,
			 bool heard)
{
	struct rmsgi_session *ss = c->ss;
	const struct rmsgi_op *op;

	if (rmsgi_list_empty(&ss->unacked))
		return false;
	/* the oldest may still be crossing a slow path: its size at
	 * RMSGI_KA_MIN_RATE more, as for an unanswered rendezvous */
	op = rmsgi_list_entry(ss->unacked.next, struct rmsgi_op, link);
	if (now - ss->ack_mark <= bound + (double)op->len / RMSGI_KA_MIN_RATE)
		return false;
	rmsgi_conn_why(c,
		       "the peer acknowledged none of our messages for "
		       "%.1f s%s",
		       now - ss->ack_mark,
		       heard ? " while it was heard" : ", nor was heard");
	return true;
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
