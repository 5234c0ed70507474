// SPDX-License-Identifier: MIT
/*
 * conn.c - the connection object and THE connection state machine.
 *
 * Transport-free: backends report events, this file decides.
 *
 *  state         event                      action -> next state
 *  ------------  -------------------------  ---------------------------------
 *  CONNECTING    tr established (hello ok)  on_established   -> ESTABLISHED
 *  CONNECTING    ... with a key, N_s in it  send AUTH(N_c,P_c) -> AUTH
 *  CONNECTING    ... key, no N_s in reply   abort(-EACCES)   -> CLOSING
 *  CONNECTING    tr failed (reject, ...)    fail queued ops  -> CLOSING
 *  (server)      tr request                 app accept cb:
 *                                           accept           -> ACCEPTING
 *                                           reject: never seen again
 *  (server)      tr request, key on one     refuse -EACCES, no accept cb:
 *                side only                  never seen again
 *  (server)      tr request, key on both    reply with N_s, no accept cb
 *                                           yet              -> ACCEPTING
 *  ACCEPTING     tr established             on_established   -> ESTABLISHED
 *  ACCEPTING     ... with a key             wait for AUTH    -> AUTH
 *  ACCEPTING     tr failed                  fail queued ops  -> CLOSING
 *  AUTH (server) AUTH, P_c right            app accept cb, send AUTH(status,
 *                                           P_s, pdata): accept:
 *                                           on_established   -> ESTABLISHED
 *                                           reject: linger   -> CLOSING
 *  AUTH (server) AUTH, P_c wrong            send AUTH(EACCES), linger; the
 *                                           app never saw it -> CLOSING
 *  AUTH (client) AUTH, P_s right, status 0  on_established   -> ESTABLISHED
 *  AUTH (client) AUTH, P_s right, reject    as a reject      -> CLOSING
 *  AUTH (client) AUTH, P_s wrong or absent  abort(-EACCES)   -> CLOSING
 *  AUTH          any other frame, an AUTH   abort(-EACCES)   -> CLOSING
 *                of a wrong size
 *  AUTH          cfg.timeout_ms passed      abort(-ETIMEDOUT) -> CLOSING
 *  AUTH          tr failed                  fail queued ops  -> CLOSING
 *  ESTABLISHED   an AUTH frame              abort(-EACCES)   -> CLOSING
 *  ESTABLISHED   frame received             on_msg / credits / acks
 *  ESTABLISHED   bad frame                  abort(-EPROTO)   -> CLOSING
 *  ESTABLISHED   tr failed (peer gone)      fail queued ops  -> CLOSING
 *  ESTABLISHED   ... resumable (session.c), suspend: keep sends,
 *                a failure of the path          fail one-sided ops
 *                                           in flight        -> SUSPENDED
 *  SUSPENDED     tr down                    client: dial again (backoff)
 *  SUSPENDED     a dial fails               dial again; a refusal of the
 *                                           session (ESTALE, EACCES)
 *                                           fails all        -> CLOSING
 *  SUSPENDED     new tr established         send again what the peer
 *                (server: a resume request  lacks            -> ESTABLISHED
 *                matched, its tr rebound)
 *  SUSPENDED     resume window passed       abort(-ETIMEDOUT) -> CLOSING
 *  any open      rmsg_conn_close()          cancel, tr disconnect -> CLOSING
 *  CLOSING       tr down (all ops done)     on_close(reason) -> CLOSED
 *  CLOSED        last reference dropped     free
 *
 * One-sided operations (rmsg_write_imm, rmsg_write, rmsg_read) are ops on
 * the same send queue as messages, so order and the queue bound hold for
 * them too. A write-with-immediate takes a credit (it consumes a receive
 * at the peer); on a transport with native one-sided ops (RDMA) writes
 * and reads take none. Without it (TCP) they are frames the peer checks
 * against its regions and acknowledges, and the op completes on that
 * answer, like a rendezvous send (rndvq).
 *
 * Authentication (rmsg_cfg_set_psk, rmsg.7 "Authentication"): ops the app
 * queues before ESTABLISHED wait as before; in AUTH only the AUTH frame
 * goes (send.c), queued ahead of them, taking a credit like any frame
 * that lands in a receive buffer. Until the peer's proof checked out
 * (auth_wait) every frame goes to rmsgi_conn_auth_rx() (auth.c): nothing of it
 * reaches delivery, credits, rendezvous or one-sided handling. A server
 * connection refused there never reaches the app (no accept callback,
 * no on_close); ctx->st.auth_failures counts the refusals of both sides.
 *
 * A failure after a local close keeps reason 0. Callbacks of completed ops
 * run from the context flush (never inside the API call that queued them),
 * and always before on_close.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "conn_int.h"

/* every state change goes through here: the direct-send limit follows */
void rmsgi_conn_set_state(struct rmsg_conn *c, enum rmsgi_conn_state s)
{
	size_t max;

	if (c->state == RMSGI_CS_AUTH && s != RMSGI_CS_AUTH)
		rmsgi_auth_stop(c);
	if (s >= RMSGI_CS_CLOSING && c->state < RMSGI_CS_CLOSING)
		rmsgi_conn_why_fix(c);
	c->state = s;
	c->tx.direct_lim = 0;
	if (c->lst)
		rmsgi_listener_track(c, s);
	/* a resumable connection's messages are all numbered (session.c) */
	if (s != RMSGI_CS_ESTABLISHED || !rmsgi_tr_has_direct(c->tops) || c->ss)
		return;
	max = c->tops->direct_max(c->tr_priv);
	/* a rendezvous is never sent directly */
	if (c->tr->caps & RMSGI_TR_CAP_RNDV)
		max = RMSGI_MIN(max, (size_t)c->tx.peer_eager);
	c->tx.direct_lim = max == SIZE_MAX ? SIZE_MAX : max + 1;
}

void rmsgi_conn_set_tr(struct rmsg_conn *c, const struct rmsgi_tr *tr)
{
	c->tr = tr;
	c->tops = tr->conn;
	c->cr.late = tr->caps & RMSGI_TR_CAP_CREDIT_LATE;
}

int rmsgi_conn_new(struct rmsg_ctx *ctx, const struct rmsgi_cfgv *cfg,
		   const struct rmsg_conn_ops *ops, void *arg,
		   struct rmsg_conn **c_p)
{
	struct rmsg_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->ctx = ctx;
	c->cfg = *cfg;
	if (ops)
		c->ops = *ops;
	c->arg = arg;
	c->refs = 1;
	c->id = ++ctx->next_conn_id;
	c->ti.ctx = ctx;
	c->ti.cfg = &c->cfg;
	c->ti.id = c->id;
	c->ep.t_start = ev_time();
	rmsgi_conn_set_state(c, RMSGI_CS_CONNECTING);
	rmsgi_list_init(&c->tx.sendq);
	rmsgi_list_init(&c->tx.rndvq);
	rmsgi_list_init(&c->rxq);
	rmsgi_list_init(&c->rma.exports);
	rmsgi_list_init(&c->tx.doneq);
	rmsgi_list_init(&c->dirty_link);
	rmsgi_list_add_tail(&ctx->conns, &c->link);
	c->tx.burst = true; /* the first send may go direct */
	c->tx.credit_op.kind = RMSGI_OP_CTRL;
	c->tx.credit_op.type = RMSGI_T_CREDIT;
	c->tx.credit_op.iov = c->tx.credit_op.iov_inline;
	c->tx.credit_op.state = RMSGI_OS_DONE; /* idle until queued */
	rmsgi_conn_op_proto(c, &c->tx.credit_op, false);
	/* what we grant; frames can beat the established event (RDMA) */
	rmsgi_credit_grant(&c->cr, rmsgi_credits_start(cfg));
	ev_ref(ctx->loop);
	*c_p = c;
	return 0;
}

/* undoes rmsgi_conn_new() for a connection the app never saw: no
 * callbacks, nothing posted */
void rmsgi_conn_discard(struct rmsg_conn *c)
{
	/* a request refused before the app saw it (RDMA: no endpoint
	 * follows); logged as the other refusals are (finalize) */
	if (c->is_server && c->state < RMSGI_CS_CLOSING) {
		if (!c->close_reason)
			rmsgi_conn_why(c, "refused before the application "
					  "saw it");
		rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
		if (!rmsgi_conn_quiet(c))
			rmsgi_conn_event(c, "refused", "err=%s reason=\"%s\"",
					 rmsg_err_name(c->close_reason),
					 c->why);
	}
	c->tr = NULL;
	c->tops = NULL;
	c->tr_priv = NULL;
	rmsgi_conn_set_state(c, RMSGI_CS_CLOSED);
	rmsgi_list_del(&c->link);
	rmsgi_stats_fold(c);
	ev_unref(c->ctx->loop);
	rmsgi_conn_put(c);
}

void rmsgi_conn_get(struct rmsg_conn *c)
{
	c->refs++;
}

/* the last reference went: the object goes (kept out of the inline
 * fast path of rmsgi_conn_put) */
static void __attribute__((noinline)) conn_free(struct rmsg_conn *c)
{
	if (c->dirty)
		rmsgi_list_del(&c->dirty_link);
	rmsgi_mr_conn_gone(
		c); /* rmsgi_conn_finalize() did, unless it never ran */
	rmsgi_rpc_conn_free(c);
	rmsgi_session_free(c);
	rmsgi_fallback_free(c);
	rmsgi_auth_free(c);
	explicit_bzero(c->cfg.psk, sizeof(c->cfg.psk));
	free(c);
}

void rmsgi_conn_put(struct rmsg_conn *c)
{
	if (--c->refs > 0)
		return;
	conn_free(c);
}

int rmsgi_conn_ev_request(struct rmsg_conn *c, struct rmsg_listener *l,
			  const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply)
{
	int ret = 0;

	c->is_server = true;
	rmsgi_conn_set_peer(c, h);
	rmsgi_conn_addrs(c);
	if (h->credits < 4 || h->eager_size < 64) {
		rmsgi_conn_why(c,
			       "the peer's hello offers %u credits and "
			       "an eager size of %u (at least 4 and 64)",
			       h->credits, h->eager_size);
		return rmsgi_conn_refuse(c, -EPROTO, reply);
	}
	if (!l)
		l = c->lst;
	if (!l) /* a group's listener closed before the hello came */
		return rmsgi_conn_refuse(c, -ECONNABORTED, reply);
	if ((h->flags & RMSGI_HELLO_F_RESUME) && h->sess_len) {
		/* a suspended connection's new transport: @c goes */
		return rmsgi_session_request(c, h, reply);
	}
	/* admitted beside suspended connections (their resume requests may
	 * need the slot): a new one still keeps to max_conns */
	if (c->lst &&
	    c->lst->nconns - c->lst->npending >= c->lst->cfg.max_conns) {
		rmsgi_conn_why(c, "refused: the listener is at its "
				  "max_conns with suspended connections");
		return rmsgi_conn_refuse(c, -EUSERS, reply);
	}
	if (h->flags & RMSGI_HELLO_F_RESUME)
		rmsgi_session_offer(c, l);
	if (c->cfg.psk_len || (h->flags & RMSGI_HELLO_F_AUTH))
		return rmsgi_auth_request(c, h, reply);
	/* from here on the app may see the connection */
	c->ops = l->ops;
	if (l->accept) {
		c->in_accept = true;
		RMSGI_USER_CB(c->ctx, ret = l->accept(l, c, h->pdata,
						      h->pdata_len, l->arg));
		c->in_accept = false;
		if (ret > 0)
			ret = -ECONNREFUSED;
	}
	if (ret) {
		c->ctx->st.conns_refused++;
		memset(&c->ops, 0, sizeof(c->ops));
		rmsgi_conn_why(c, "refused by the accept callback (%s)",
			       rmsg_err_name(ret));
		return rmsgi_conn_refuse(c, ret, reply);
	}
	rmsgi_conn_set_state(c, RMSGI_CS_ACCEPTING);
	c->app_accepted = true;
	c->ctx->st.conns_accepted++;
	rmsgi_conn_event(c, "accepted", NULL);
	rmsgi_conn_hello(c, reply);
	return 0;
}

/*
 * The grant follows use (credit.h): more when the peer's frames find it
 * at its last credit, as far as the backend has buffers; fewer as it
 * leaves them unused. The decision is here, the buffers the backend's.
 */
void rmsgi_conn_grant(struct rmsg_conn *c, uint32_t credits)
{
	bool live = c->tops && c->tr_priv;

	if (credits <= c->cr.grant) {
		/* a shrink (rmsgi_credit_freed counted it already) */
		if (live)
			rmsgi_tr_grant(c->tops, c->tr_priv, credits);
		return;
	}
	if (c->state != RMSGI_CS_ESTABLISHED)
		return;
	if (live)
		credits = rmsgi_tr_grant(c->tops, c->tr_priv, credits);
	if (credits > c->cr.grant)
		rmsgi_dbg(c->ctx, "conn %u: grant %u -> %u credits", c->id,
			  c->cr.grant, credits);
	rmsgi_credit_grown(&c->cr, credits);
	/* grown: it comes back if the peer stops using it (reclaim.c) */
	if (c->cr.grant > c->cr.grant_min)
		rmsgi_reclaim_start(c);
	if (credit_due(c))
		rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_set_tc(struct rmsg_conn *c, void *tc)
{
	c->tr_priv = tc;
}

void rmsgi_conn_ev_established(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	if (rmsgi_conn_is_probe(c)) {
		/* a probe is refused by a peer that takes it (start.c) */
		rmsgi_conn_why(c, "the peer accepted a probe of its path");
		rmsgi_failback_probed(c, -EPROTO, NULL);
		rmsgi_conn_abort(c, -EPROTO);
		return;
	}
	if (c->state == RMSGI_CS_SUSPENDED) {
		rmsgi_conn_addrs(c);
		rmsgi_session_resume(c, h);
		return;
	}
	if (c->state != RMSGI_CS_CONNECTING && c->state != RMSGI_CS_ACCEPTING)
		return;
	if (h) {
		if (h->credits < 4 || h->eager_size < 64) {
			rmsgi_conn_why(c,
				       "the peer's hello offers %u credits "
				       "and an eager size of %u (at least 4 "
				       "and 64)",
				       h->credits, h->eager_size);
			rmsgi_conn_abort(c, -EPROTO);
			return;
		}
		rmsgi_conn_set_peer(c, h);
	}
	rmsgi_conn_addrs(c);
	if (!c->is_server)
		rmsgi_session_established(c, h);
	if (c->cfg.psk_len || (h && (h->flags & RMSGI_HELLO_F_AUTH))) {
		rmsgi_auth_begin(c, h);
		return;
	}
	rmsgi_conn_up(c);
}

/* why this connection runs on its transport, for the info line */
static const char *transport_why(const struct rmsg_conn *c)
{
	if (c->is_server)
		return "the listener's";
	return rmsgi_fallback_why(c);
}

/* -> ESTABLISHED: on_established */
void rmsgi_conn_up(struct rmsg_conn *c)
{
	if (c->auth_wait)
		rmsgi_conn_event(c, "authenticated", NULL);
	rmsgi_conn_event(c, "established", "transport=%s why=\"%s\"",
			 c->tr ? c->tr->name : "none", transport_why(c));
	c->auth_wait = false;
	rmsgi_conn_set_state(c, RMSGI_CS_ESTABLISHED);
	/* resumable from now on, if both ends took it */
	if (c->ss)
		rmsgi_session_on(c);
	/* what was queued before goes by what is known now */
	rmsgi_conn_proto_queued(c);
	c->was_established = true;
	rmsgi_keepalive_start(c);
	rmsgi_conn_get(c);
	if (c->ops.on_established) {
		RMSGI_USER_CB(c->ctx, c->ops.on_established(c, c->arg));
	}
	rmsgi_ctx_mark_dirty(c->ctx, c);
	rmsgi_conn_put(c);
}

/* why the peer's end went: a reset after its BYE was a close on
 * purpose; so was a send of ours that its torn-down end never took
 * (RDMA: the retries of a frame posted after its BYE run out, which a
 * slow machine shows before the disconnect event) */
static int peer_reason(const struct rmsg_conn *c, int reason)
{
	if (!reason || reason == -ECONNRESET)
		return c->peer_bye ? -ESHUTDOWN : -ECONNRESET;
	if (reason == -ETIMEDOUT && c->peer_bye)
		return -ESHUTDOWN;
	return reason;
}

/*
 * The last frame of a local close, behind the work already posted (what
 * was only queued is cancelled): a CREDIT frame marked BYE, so that the
 * peer reports -ESHUTDOWN, not -ECONNRESET. It goes even when our last
 * credit was just spent on a CREDIT frame whose answer is still on its
 * way (two sides that returned credits to each other a moment before
 * the close): the peer takes this one frame beyond the grant
 * (rmsgi_conn_rx; the receive buffer is one of its spares). Without it
 * an honest close read as a reset whenever the timing was unlucky.
 */
static void send_bye(struct rmsg_conn *c)
{
	struct rmsgi_op *op;

	if (!c->tr_priv)
		return;
	op = rmsgi_op_get(c->ctx);
	if (!op)
		return;
	op->kind = RMSGI_OP_CTRL;
	op->type = RMSGI_T_CREDIT;
	op->aux = RMSGI_CREDIT_BYE;
	op->credits = rmsgi_credit_take_beyond(&c->cr);
	op->wret = 0; /* a BYE takes no bytes and returns none */
	/* what we received is acknowledged: the peer lingers for it */
	op->acks = c->ss ? rmsgi_session_ack_take(c) : 0;
	rmsgi_conn_op_proto(c, op, false);
	op_state(c, op, RMSGI_OS_POSTED);
	if (c->tops->post(c->tr_priv, op)) {
		op_state(c, op, RMSGI_OS_DONE);
		rmsgi_op_put(c->ctx, op);
		return;
	}
	rmsgi_tr_kick(c->tops, c->tr_priv);
}

void rmsgi_conn_ev_failed(struct rmsg_conn *c, int reason,
			  const struct rmsgi_hello *h)
{
	if (c->state >= RMSGI_CS_CLOSING)
		return;
	/* a probe of auto://'s way back tells its connection, and goes */
	rmsgi_failback_probed(c, reason, h);
	if (c->state == RMSGI_CS_SUSPENDED) {
		/* a dial of a resumable connection: auto://'s next backend,
		 * again, or the end */
		if (rmsgi_fallback_failed(c, reason, h))
			return;
		reason = rmsgi_session_failed(c, reason, h);
		if (!reason)
			return;
		h = NULL;
	} else if (rmsgi_session_suspend(c, reason)) {
		return; /* resumable: a new transport is awaited */
	}
	if (reason == -EPROTO)
		c->st.proto_errors++;
	if (rmsgi_fallback_failed(c, reason, h))
		return; /* auto://: TCP next, once the backend is down */
	if (h) {
		c->ep.peer_pdata_len = h->pdata_len;
		memcpy(c->ep.peer_pdata, h->pdata, h->pdata_len);
		/* a listener over its limits, not the app, said no */
		if (h->status == -EUSERS) {
			rmsgi_warn(c->ctx, "conn %u: refused: %s", c->id,
				   rmsg_strerror(-EUSERS));
			rmsgi_conn_why(c,
				       "refused by the peer's listener: over "
				       "its limits (max_conns, max_pending)");
		}
		/* the two sides disagree on authentication (auth_request) */
		if (h->status == -EACCES && (h->flags & RMSGI_HELLO_F_AUTH)) {
			const char *t =
				c->cfg.psk_len ? "the server has no pre-shared "
						 "key"
					       : "the server requires a "
						 "pre-shared key "
						 "(rmsg_cfg_set_psk)";

			c->ctx->st.auth_failures++;
			rmsgi_warn(c->ctx, "conn %u: refused: %s", c->id, t);
			rmsgi_conn_why(c, "authentication failed: %s", t);
			reason = -EACCES;
		}
		if (h->status == -ECONNABORTED)
			rmsgi_conn_why(c, "the peer's listener closed before "
					  "accepting");
		else if (h->status == -EPROTO)
			rmsgi_conn_why(c, "the peer found our hello malformed");
		rmsgi_conn_why(c, "rejected by the peer's accept callback");
	}
	c->close_reason = peer_reason(c, reason);
	/* the peer's goodbye explains what its end's teardown did */
	if (c->close_reason == -ESHUTDOWN && reason != -ESHUTDOWN)
		c->why[0] = 0;
	rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
	rmsgi_conn_cancel_queued(c, c->close_reason);
	rmsgi_conn_drop_rx(c);
}

bool rmsgi_conn_awaits_peer(const struct rmsg_conn *c)
{
	return !rmsgi_list_empty(&c->tx.rndvq) ||
	       (c->ss && !rmsgi_list_empty(&c->ss->unacked));
}

void rmsgi_conn_ev_down(struct rmsg_conn *c)
{
	if (rmsgi_fallback_down(c))
		return; /* auto://: TCP took over */
	c->tr_priv = NULL;
	c->tr_down = true;
	if (c->state == RMSGI_CS_SUSPENDED) {
		rmsgi_session_down(c); /* a new transport follows */
		return;
	}
	/* nobody will acknowledge these now, and nothing queued can go
	 * (answers to frames that arrived during a local close's linger) */
	rmsgi_conn_cancel_rndv(c,
			       c->close_reason ? c->close_reason : -ECANCELED);
	rmsgi_conn_cancel_sendq(c,
				c->close_reason ? c->close_reason : -ECANCELED);
	if (c->state < RMSGI_CS_CLOSING) {
		/* a backend that went down without saying why (or the
		 * auto:// fallback that could not start: start.c said) */
		if (!c->close_reason)
			c->close_reason = peer_reason(c, 0);
		rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
		rmsgi_conn_cancel_queued(c, c->close_reason);
	}
	rmsgi_conn_drop_rx(c);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_lost(struct rmsg_conn *c, int reason)
{
	if (c->tr_priv && rmsgi_session_suspend(c, reason)) {
		c->tops->disconnect(c->tr_priv, 0);
		return;
	}
	rmsgi_conn_abort(c, reason);
}

void rmsgi_conn_abort(struct rmsg_conn *c, int reason)
{
	if (c->state >= RMSGI_CS_CLOSING)
		return;
	if (reason == -EPROTO)
		c->st.proto_errors++;
	c->close_reason = reason;
	rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
	rmsgi_log(c->ctx, reason == -ECANCELED ? RMSG_LOG_DEBUG : RMSG_LOG_WARN,
		  "conn %u: closing: %s", c->id, c->why);
	rmsgi_conn_cancel_queued(c, reason);
	rmsgi_conn_drop_rx(c);
	/* a failure does not linger */
	if (c->tr_priv)
		c->tops->disconnect(c->tr_priv, 0);
	else {
		/* no backend (none yet, or suspended between dials): never
		 * waits for a resolver thread */
		rmsgi_resolve_cancel(c);
		rmsgi_conn_ev_down(c);
	}
}

int rmsg_conn_close(struct rmsg_conn *c)
{
	bool bye;

	if (!c)
		return -EINVAL;
	if (c->in_accept)
		return -EBUSY; /* reject by returning an error instead */
	if (c->state >= RMSGI_CS_CLOSING)
		return 0;
	c->close_reason = 0;
	/* a BYE goes over an open transport only (not a redial's) */
	bye = c->was_established && c->state != RMSGI_CS_SUSPENDED;
	rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
	/* what the peer was already asked to read (rendezvous) or answer
	 * (emulated one-sided ops) stays: the transport lingers for its
	 * acknowledgements; the rest fails with -ECANCELED when it is
	 * down (rmsgi_conn_ev_down) */
	rmsgi_conn_cancel_sendq(c, -ECANCELED);
	rmsgi_conn_drop_rx(c);
	if (bye)
		send_bye(c);
	/* the app's close lingers (the backend decides nothing of it) */
	if (c->tr_priv)
		c->tops->disconnect(c->tr_priv, RMSGI_LINGER_MS);
	else {
		/* no backend (none yet, or suspended between dials): never
		 * waits for a resolver thread */
		rmsgi_resolve_cancel(c);
		rmsgi_conn_ev_down(c);
	}
	return 0;
}

int rmsgi_conn_rx_admit(struct rmsg_conn *c, const struct rmsgi_hdr *h)
{
	if (!c->auth_wait)
		return 1;
	/* before the proof only the handshake's frame is read (auth.c),
	 * which any other would end anyway: a peer without the key makes
	 * us hold a few hundred bytes */
	if (h->type == RMSGI_T_AUTH && h->len <= RMSGI_AUTH_MAX)
		return 0;
	if (c->state < RMSGI_CS_CLOSING) {
		c->ctx->st.auth_failures++;
		rmsgi_warn(c->ctx,
			   "conn %u: the peer sends a %s frame of %llu bytes "
			   "before its proof of the pre-shared key",
			   c->id, rmsgi_frame_name(h->type),
			   (unsigned long long)h->len);
		rmsgi_conn_why(c,
			       "authentication failed: a %s frame before the "
			       "peer's proof",
			       rmsgi_frame_name(h->type));
	}
	return -EACCES;
}

bool rmsgi_conn_is_established(const struct rmsg_conn *c)
{
	return c->state == RMSGI_CS_ESTABLISHED;
}

void rmsgi_conn_finalize(struct rmsg_conn *c)
{
	/* (a probe of auto://'s way back nobody sees: start.c) */
	bool seen = (c->was_established || !c->is_server || c->app_accepted) &&
		    !rmsgi_conn_is_probe(c);

	rmsgi_conn_set_state(c, RMSGI_CS_CLOSED);
	rmsgi_list_del(&c->link);
	rmsgi_stats_fold(c);
	/* a connection the app never saw was refused (the server's side) */
	if (!rmsgi_conn_quiet(c))
		rmsgi_conn_event(
			c, seen ? "closed" : "refused",
			"err=%s reason=\"%s\" msgs_sent=%llu bytes_sent=%llu "
			"msgs_recv=%llu bytes_recv=%llu",
			rmsg_err_name(c->close_reason), c->why,
			(unsigned long long)c->st.msgs_sent,
			(unsigned long long)c->st.bytes_sent,
			(unsigned long long)c->st.msgs_recv,
			(unsigned long long)c->st.bytes_recv);
	rmsgi_keepalive_stop(c);
	rmsgi_reclaim_stop(c);
	rmsgi_session_end(c);
	/* what was exported to this connection ends with it */
	rmsgi_mr_conn_gone(c);
	/* calls still waiting end before on_close, which is last */
	rmsgi_rpc_conn_closed(c,
			      c->close_reason ? c->close_reason : -ECANCELED);
	/* a client always learns how its connect ended; on the accepting
	 * side, so does an app that accepted (it may hold state for it) */
	if (seen)
		c->ctx->st.conns_closed++;
	if (c->ops.on_close && seen) {
		RMSGI_USER_CB(c->ctx,
			      c->ops.on_close(c, c->close_reason, c->arg));
	}
	ev_unref(c->ctx->loop);
	rmsgi_conn_put(c);
}

const char *rmsg_conn_transport(const struct rmsg_conn *c)
{
	if (!c || !c->tr)
		return "none";
	return c->tr->name;
}

struct rmsg_ctx *rmsg_conn_ctx(const struct rmsg_conn *c)
{
	return c ? c->ctx : NULL;
}

int rmsg_conn_set_arg(struct rmsg_conn *c, void *arg)
{
	if (!c)
		return -EINVAL;
	c->arg = arg;
	return 0;
}
