// SPDX-License-Identifier: MIT
/*
 * keepalive.c - heartbeats and peer-death detection with a time bound.
 *
 * RDMA alone does not bound it (tests/vm/README.md, Background): a side
 * with only receives posted never notices a dead peer, and DISCONNECTED
 * can come a minute late. So a side that has heard nothing for one
 * interval probes: it sends a CREDIT frame marked RMSGI_CREDIT_PROBE,
 * which the peer answers at once with a CREDIT frame of its own. A connection that heard nothing
 * for interval x misses closes with -ETIMEDOUT, failing everything
 * outstanding. Probes are answered whatever the peer's own interval, so
 * the two ends need not agree on it.
 *
 * Liveness means progress. A peer that has no credit left cannot answer;
 * its silence is not held against it only while that is our app's doing
 * (it holds every message the peer sent). A frame in progress counts
 * only while it advances (rmsgi_conn_rx_progress), and a rendezvous or
 * emulated one-sided op must be answered within the bound plus its size
 * at RMSGI_KA_MIN_RATE: no frame, op or credit state keeps a connection
 * alive for good.
 */
#include "rmsg_int.h"

/* ------------------------------------------------------------------ */
/* liveness (struct rmsgi_live, keepalive.h)                            */

void rmsgi_conn_heard(struct rmsg_conn *c)
{
	rmsgi_live_rx(&c->live, ev_now(c->ctx->loop));
}

void rmsgi_conn_rx_progress(struct rmsg_conn *c, size_t got)
{
	struct rmsgi_live *l = &c->live;

	if (got < l->rx_mark)
		l->rx_mark = 0; /* a new frame */
	if (got - l->rx_mark < RMSGI_KA_PROGRESS)
		return;
	l->rx_mark = got;
	l->last_rx = ev_now(c->ctx->loop);
}

/* how long the peer has been silent by its own doing at @now: while it
 * cannot talk because our app holds every message it sent (no credit
 * left, none to return) its silence restarts */
static ev_tstamp rx_idle(struct rmsg_conn *c, ev_tstamp now)
{
	if (rmsgi_credit_peer_held(&c->cr))
		c->live.last_rx = now;
	return now - c->live.last_rx;
}

/*
 * How long our send queue, with answers for the peer in it (RPC replies,
 * READ_RESP, RNDV_ACK), has let nothing out, at @now: 0 while it moves.
 * A peer that keeps asking while it returns no credits or window bytes
 * for our answers (only the one our CREDIT frame costs) would have us
 * queue answers without end; one whose app just holds our messages has
 * stopped reading. Either ends within the keepalive bound.
 */
static ev_tstamp answers_stuck(struct rmsg_conn *c, ev_tstamp now)
{
	struct rmsgi_live *l = &c->live;

	if (!c->tx.ans_n || rmsgi_list_empty(&c->tx.sendq) ||
	    c->tx.posts != l->posts_seen) {
		l->posts_seen = c->tx.posts;
		l->stuck_since = 0;
		return 0;
	}
	if (!l->stuck_since)
		l->stuck_since = now;
	return now - l->stuck_since;
}

/* ------------------------------------------------------------------ */
/* probes                                                               */

void rmsgi_keepalive_answer(struct rmsg_conn *c)
{
	rmsgi_conn_send_credit(c, 0);
}

/* what a rule below does to the connection (rmsgi_conn_lost): a path
 * that broke and a peer that stopped answering look alike */
static const char *ka_verb(const struct rmsg_conn *c)
{
	return rmsg_conn_resume_state(c) == RMSG_RESUME_ON
		       ? "suspending (resumable)"
		       : "closing";
}

static void ka_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsg_conn *c = w->data;
	ev_tstamp now = ev_now(loop);
	ev_tstamp iv = c->cfg.keepalive_ms / 1000.0;
	bool reading = false;
	const struct rmsgi_op *op;
	ev_tstamp since = 0, idle;

	if (!rmsgi_conn_is_established(c))
		return;
	if (now - c->live.tick > iv) {
		/* this loop was stalled (a long callback, a debugger, a
		 * paused VM): frames may be waiting unread, so the silence
		 * proves nothing; start fresh windows for the peer's silence
		 * and for its unanswered rendezvous */
		c->live.last_rx = now;
		c->live.wait_mark = now;
		c->live.stuck_since = 0;
		if (c->ss)
			rmsgi_session_mark(c, now);
	}
	c->live.tick = now;
	op = rmsgi_conn_oldest_wait(c);
	since = c->live.wait_mark;
	if (op) {
		/* the oldest rendezvous (or emulated one-sided op) must be
		 * answered within the bound plus its size at
		 * RMSGI_KA_MIN_RATE */
		ev_tstamp lim = iv * c->cfg.keepalive_misses +
				(double)op->len / RMSGI_KA_MIN_RATE;

		if (now - since > lim) {
			rmsgi_warn(c->ctx,
				   "conn %u: the peer left a %s of %zu bytes "
				   "unanswered for %.1f s: %s",
				   c->id,
				   op->kind == RMSGI_OP_READ	? "read"
				   : op->kind == RMSGI_OP_WRITE ? "write"
								: "large send",
				   op->len, now - since, ka_verb(c));
			c->st.ka_timeouts++;
			rmsgi_conn_why(c,
				       "keepalive: the peer left a %s of %zu "
				       "bytes unanswered for %.1f s",
				       op->kind == RMSGI_OP_READ ? "read"
				       : op->kind == RMSGI_OP_WRITE
					       ? "write"
					       : "large send",
				       op->len, now - since);
			rmsgi_conn_lost(c, -ETIMEDOUT);
			rmsgi_ctx_flush(c->ctx);
			return;
		}
		/* a peer reading our rendezvous data over RDMA may have its
		 * answers queued behind those reads: its silence alone does
		 * not end the connection then, but probes still go, and a
		 * dead reader fails them (the QP's retries). Over TCP an
		 * answer in progress shows as bytes (rmsgi_conn_rx_progress)
		 * and a silent peer is silent */
		reading = op->kind == RMSGI_OP_SEND;
	}
	idle = answers_stuck(c, now);
	if (idle > iv * c->cfg.keepalive_misses) {
		rmsgi_warn(c->ctx,
			   "conn %u: %u answers for the peer waited %.1f s "
			   "with nothing of ours let out: %s",
			   c->id, c->tx.ans_n, idle, ka_verb(c));
		c->st.ka_timeouts++;
		rmsgi_conn_why(c,
			       "keepalive: the peer let none of our frames out "
			       "for %.1f s (no credits or window bytes back) "
			       "while %u answers for it waited",
			       idle, c->tx.ans_n);
		rmsgi_conn_lost(c, -ETIMEDOUT);
		rmsgi_ctx_flush(c->ctx);
		return;
	}
	/* a peer cannot talk while our app holds every message it sent
	 * (nothing to return): do not count that. A peer that keeps us
	 * from returning credits (it returns none of ours) is silent by
	 * its own doing: that counts */
	idle = rx_idle(c, now);
	if (!reading && idle > iv * c->cfg.keepalive_misses) {
		rmsgi_warn(c->ctx,
			   "conn %u: nothing heard for %.1f s "
			   "(keepalive %u ms x %u): %s",
			   c->id, idle, c->cfg.keepalive_ms,
			   c->cfg.keepalive_misses,
			   rmsg_conn_resume_state(c) == RMSG_RESUME_ON
				   ? "path or peer lost, suspending "
				     "(resumable)"
				   : "peer dead");
		c->st.ka_timeouts++;
		rmsgi_conn_why(c,
			       "keepalive: nothing heard from the peer for "
			       "%.1f s (keepalive %u ms x %u misses): peer "
			       "dead or unreachable",
			       idle, c->cfg.keepalive_ms,
			       c->cfg.keepalive_misses);
		/* a resumable connection waits for a new path instead */
		rmsgi_conn_lost(c, -ETIMEDOUT);
		rmsgi_ctx_flush(c->ctx);
		return;
	}
	/* a resumable connection's peer that is heard (the silence
	 * above did not end it) but acknowledges
	 * none of our messages holds them (and our buffers) for ever */
	if (c->ss && rmsgi_session_stuck(c, now, iv * c->cfg.keepalive_misses,
					 idle < iv)) {
		c->st.ka_timeouts++;
		/* not heard either (a rendezvous of ours being read keeps
		 * the silence rule off): the path, maybe */
		if (idle < iv)
			rmsgi_conn_abort(c, -ETIMEDOUT);
		else
			rmsgi_conn_lost(c, -ETIMEDOUT);
		rmsgi_ctx_flush(c->ctx);
		return;
	}
	if (idle >= iv) {
		if (rmsgi_conn_send_credit(c, RMSGI_CREDIT_PROBE))
			c->st.ka_probes++;
		rmsgi_ctx_flush(c->ctx);
	} else if (now - c->live.last_tx >= iv) {
		/* we said nothing for an interval: tell the peer we live.
		 * Over TCP its probes can be stuck behind a large frame it
		 * is still sending us, which it cannot tell from silence */
		rmsgi_conn_send_credit(c, 0);
		rmsgi_ctx_flush(c->ctx);
	}
}

void rmsgi_keepalive_start(struct rmsg_conn *c)
{
	ev_tstamp iv;

	c->live.tick = ev_now(c->ctx->loop);
	/* heard from, and spoken, now */
	c->live.last_rx = c->live.last_tx = c->live.tick;
	if (!c->cfg.keepalive_ms || c->live.on)
		return;
	iv = c->cfg.keepalive_ms / 1000.0;
	rmsgi_timer_init(&c->live.ka, c->ctx->env.timers, ka_cb);
	c->live.ka.w.data = c;
	rmsgi_timer_start(c->ctx->loop, &c->live.ka, iv / 2, iv / 2);
	/* the connection itself keeps the loop alive, not its heartbeat */
	ev_unref(c->ctx->loop);
	c->live.on = true;
}

void rmsgi_keepalive_stop(struct rmsg_conn *c)
{
	if (!c->live.on)
		return;
	ev_ref(c->ctx->loop);
	rmsgi_timer_stop(c->ctx->loop, &c->live.ka);
	c->live.on = false;
}
