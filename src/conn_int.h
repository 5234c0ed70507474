/* SPDX-License-Identifier: MIT */
/*
 * conn_int.h - what the connection's files share (conn.c, start.c,
 * send.c, rx.c, pack.c, rma.c, auth.c); nothing outside them includes it.
 *
 *  conn.c  the one state machine: creation and lifetime, the backends'
 *          events, close and abort, accessors
 *  start.c the transport started: the scheme's backends, the name
 *          resolved first, auto:// fallback (its state on auto:// only)
 *  send.c  the op queue: credits, posting, the direct send, rmsg_send,
 *          op completion and cancellation
 *  rx.c    received frames: in-order delivery, held messages, control
 *          frames, rendezvous acknowledgements
 *  pack.c  PACK frames both ways: small queued messages sent as one,
 *          a received one unpacked into messages of their own
 *  rma.c   rmsg_write/write_imm/read, and the receiving half of one-sided
 *          ops emulated in frames (TCP)
 *  auth.c  authentication with a pre-shared key: the AUTH state of the
 *          state machine (conn.c's table names it), nonces, proofs
 *
 * The per-message helpers are static inline here, so that each file's hot
 * path keeps them inline (there is no LTO).
 */
#ifndef RMSG_CONN_INT_H
#define RMSG_CONN_INT_H

#include "rmsg_int.h"

/*
 * Credits go back to the peer as buffers free up. Withholding them while
 * our answers to it wait (tried: keep the peer at its last credit once
 * answers reach a bound) deadlocked two honest peers that both asked
 * more of each other than their credits, each waiting for credits the
 * other held back. What bounds the answers a peer can make us queue is
 * that it can only send what we returned, in frames we could post (see
 * "What a peer may make us hold" in rmsg_int.h).
 */

/* takes a credit for a frame and what it returns to the peer, which we
 * count at once: the peer can never have more than we think */
static inline uint16_t credit_take(struct rmsg_conn *c)
{
	return rmsgi_credit_take(&c->cr);
}

/*
 * A resumable connection's session (session.c): only on a connection
 * whose ends agreed to it (rmsg_cfg_set_resume_ms), else c->ss is NULL.
 */
#define RMSGI_SESS_KEY 32
struct rmsgi_session {
	struct rmsgi_list link; /* server: ctx->sess_b, once on */
	struct rmsg_conn *c;
	bool on;     /* both ends took it: the connection is resumable */
	bool listed; /* on link (the server's, while it may be resumed) */
	uint64_t sid;
	uint8_t secret[RMSGI_SESS_KEY]; /* server: until established */
	uint8_t key[RMSGI_SESS_KEY];	/* K (session.c) */
	/* client: the last resume request made; server: the last taken */
	uint32_t attempt;
	uint64_t tx_seq;  /* messages handed to the transport (numbered) */
	uint64_t peer_rx; /* of them, acknowledged by the peer */
	uint64_t rx_told; /* our count (st.msgs_recv) the peer knows */
	/* the peer asked for our acks (RMSGI_HDR_F_ACKREQ), or a message
	 * read by rendezvous came in: they go at once */
	bool ack_now;
	/* rx.c: rendezvous messages in rxq still being read, the messages
	 * counted in st.msgs_recv behind the first of them (not had in
	 * order yet), and those refused for want of memory (numbered by
	 * the peer, never counted): rmsgi_session_rx() */
	uint32_t rx_unready;
	uint64_t rx_behind;
	uint64_t rx_refused;
	uint64_t req_rx; /* server: the count in the client's request */
	/* messages the transport is done with, in order, until the peer
	 * acknowledges them (or, suspended, until they go again) */
	struct rmsgi_list unacked;
	struct rmsgi_timer window; /* the resume window, while suspended */
	struct rmsgi_timer redial; /* client: the next dial */
	unsigned backoff_ms;
	/* the peer last acknowledged something, or the first message it
	 * owes an acknowledgement was done (keepalive: rmsgi_session_stuck) */
	ev_tstamp ack_mark;
};

/* the messages of the peer's we have in order, which our acks and
 * resume hellos tell it: st.msgs_recv counts a message when it arrived
 * whole, also behind a rendezvous still being read */
static inline uint64_t rmsgi_session_rx(const struct rmsg_conn *c)
{
	return c->st.msgs_recv - c->ss->rx_behind + c->ss->rx_refused;
}

/* acks owed that go in a CREDIT frame of their own when no other frame
 * carries them; fewer wait for one, or for the peer's ack request (it
 * sets it on its last frame when nothing more is queued: session.c) */
#define RMSGI_ACK_EVERY 8

/* should a CREDIT frame go out? (rmsgi_credit_want_update, or acks the
 * peer asked for or that reached RMSGI_ACK_EVERY) */
static inline bool credit_due(const struct rmsg_conn *c)
{
	return rmsgi_credit_want_update(&c->cr) ||
	       RMSGI_UNLIKELY(c->ss && c->ss->on &&
			      rmsgi_session_rx(c) != c->ss->rx_told &&
			      (c->ss->ack_now ||
			       rmsgi_session_rx(c) - c->ss->rx_told >=
				       RMSGI_ACK_EVERY));
}

/* an op generated for the peer: counted until recycled */
static inline void op_answer(struct rmsg_conn *c, struct rmsgi_op *op)
{
	op->answer = 1;
	c->tx.ans_n++;
}

/* the checks every queued operation starts with; writes the total */
static inline int check_iov(const struct rmsg_conn *c, const struct iovec *iov,
			    int iovcnt, size_t *len_p)
{
	size_t len = 0;
	int i;

	if (!c || iovcnt < 0 || iovcnt > RMSG_IOV_MAX || (iovcnt && !iov))
		return -EINVAL;
	if (c->state >= RMSGI_CS_CLOSING)
		return -ENOTCONN;
	if (iovcnt == 1) {
		/* the common case: one piece cannot overflow */
		len = iov[0].iov_len;
		if (len && !iov[0].iov_base)
			return -EINVAL;
		iovcnt = 0;
	}
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		len += iov[i].iov_len;
		if (len < iov[i].iov_len)
			return -EMSGSIZE;
	}
	if (len > c->cfg.max_msg_size)
		return -EMSGSIZE;
	*len_p = len;
	return 0;
}

/*
 * An op's life (enum rmsgi_op_state); every move goes through
 * op_state(), which checks it against this table and logs it at debug
 * level. An illegal move is a bug: fatal in unit and fuzz builds
 * (-DRMSGI_STRICT: checked always), logged as an error in a release
 * build (checked while debug logging is on, which keeps the fast path
 * at one compare):
 *
 *   from        to          when
 *   NEW         QUEUED      queued (op_queue)
 *   NEW         POSTED      the BYE; the rest of a direct send
 *   NEW         DONE        a direct send written whole, or failed
 *   QUEUED      POSTED      handed to the transport (post_queued)
 *   QUEUED      DONE        cancelled
 *   POSTED      QUEUED      the transport had no room (-EAGAIN)
 *   POSTED      DONE        completed, or refused by the transport
 *   POSTED      AWAIT_PEER  rndv: completed, the peer's answer not in yet
 *   POSTED      ANSWERED    rndv: the peer answered (or it failed) first
 *   AWAIT_PEER  DONE        rndv: the peer answered, or it failed
 *   ANSWERED    DONE        rndv: the transport completed it
 *   DONE        QUEUED      the connection's own CREDIT op, reused
 *   QUEUED      UNACKED     resumable: a packed message's frame went out
 *   POSTED      UNACKED     resumable: the transport is done, the peer
 *                           has not acknowledged it (or it failed with
 *                           the transport: it goes again)
 *   UNACKED     DONE        acknowledged, or the connection ended
 *   UNACKED     QUEUED      resumed: it goes again
 *
 * An op enters POSTED only with its protocol chosen (rmsgi_conn_op_proto).
 */
#define OS_BIT(s) (1u << (s))

static inline bool op_move_ok(const struct rmsg_conn *c,
			      const struct rmsgi_op *op, enum rmsgi_op_state s)
{
	static const uint8_t next[8] = {
		[RMSGI_OS_NEW] = OS_BIT(RMSGI_OS_QUEUED) |
				 OS_BIT(RMSGI_OS_POSTED) |
				 OS_BIT(RMSGI_OS_DONE),
		[RMSGI_OS_QUEUED] = OS_BIT(RMSGI_OS_POSTED) |
				    OS_BIT(RMSGI_OS_DONE) |
				    OS_BIT(RMSGI_OS_UNACKED),
		[RMSGI_OS_POSTED] =
			OS_BIT(RMSGI_OS_QUEUED) | OS_BIT(RMSGI_OS_AWAIT_PEER) |
			OS_BIT(RMSGI_OS_ANSWERED) | OS_BIT(RMSGI_OS_DONE) |
			OS_BIT(RMSGI_OS_UNACKED),
		[RMSGI_OS_AWAIT_PEER] = OS_BIT(RMSGI_OS_DONE),
		[RMSGI_OS_ANSWERED] = OS_BIT(RMSGI_OS_DONE),
		[RMSGI_OS_DONE] = OS_BIT(RMSGI_OS_QUEUED),
		[RMSGI_OS_UNACKED] =
			OS_BIT(RMSGI_OS_DONE) | OS_BIT(RMSGI_OS_QUEUED),
	};

	if (!(next[op->state & 7] & OS_BIT(s)))
		return false;
	switch (s) {
	case RMSGI_OS_POSTED:
		return op->proto != RMSGI_OP_P_NONE;
	case RMSGI_OS_AWAIT_PEER:
	case RMSGI_OS_ANSWERED:
		return op->rndv;
	case RMSGI_OS_QUEUED:
		return op->state != RMSGI_OS_DONE || op == &c->tx.credit_op;
	case RMSGI_OS_UNACKED:
		return op->seq != 0;
	default:
		return true;
	}
}

/* send.c, off the fast path: an illegal move (logged as an error; aborts
 * under RMSGI_STRICT), or the debug line of a legal one */
void rmsgi_conn_op_move(const struct rmsg_conn *c, const struct rmsgi_op *op,
			enum rmsgi_op_state s);

#ifdef RMSGI_STRICT
#define OP_CHECK 1
#else
#define OP_CHECK 0
#endif

/* the one place an op's state changes: on the fast path of a release
 * build one compare (is debug logging on?), like rmsgi_dbg */
static inline __attribute__((always_inline)) void
op_state(struct rmsg_conn *c, struct rmsgi_op *op, enum rmsgi_op_state s)
{
	if (RMSGI_UNLIKELY((OP_CHECK && !op_move_ok(c, op, s)) ||
			   c->ctx->log_max >= RMSG_LOG_DEBUG))
		rmsgi_conn_op_move(c, op, s);
	op->state = s;
}

/* is the connection's CREDIT frame queued or posted? */
static inline bool credit_op_busy(const struct rmsg_conn *c)
{
	return c->tx.credit_op.state == RMSGI_OS_QUEUED ||
	       c->tx.credit_op.state == RMSGI_OS_POSTED;
}

/* conn.c */
/* CLOSING -> CLOSED: on_close, then the connection's reference goes */
void rmsgi_conn_finalize(struct rmsg_conn *c);

/* send.c */
/* chooses how @op goes (enum rmsgi_op_proto), once: the protocol, and
 * with it the frame type and rendezvous id. @direct: the rest of a frame
 * begun inside rmsg_send. Only on an established connection for messages
 * and one-sided ops (they depend on the backend and the peer). */
void rmsgi_conn_op_proto(struct rmsg_conn *c, struct rmsgi_op *op, bool direct);
/* queues @op on the send queue (its protocol chosen if the connection is
 * established, else when it becomes so) */
void rmsgi_conn_op_queue(struct rmsg_conn *c, struct rmsgi_op *op);
/* the connection became established: chooses for what was queued */
void rmsgi_conn_proto_queued(struct rmsg_conn *c);
/* undoes @op's choice of a path (a rendezvous, an emulated one-sided
 * op): it waits for a new transport, which may differ (session.c) */
void rmsgi_conn_op_unproto(struct rmsgi_op *op);
/* @op leaves rndvq (the keepalive bound restarts only if it was the
 * oldest); then rmsgi_conn_rndv_settle() */
void rmsgi_conn_rndv_unlink(struct rmsg_conn *c, struct rmsgi_op *op);
/* a rendezvous send (or emulated one-sided op) left rndvq: acknowledged
 * with @status or failed */
void rmsgi_conn_rndv_settle(struct rmsg_conn *c, struct rmsgi_op *op,
			    int status);
/* fails what was not handed to the transport / what waits for the peer's
 * answer / both, with @status */
void rmsgi_conn_cancel_sendq(struct rmsg_conn *c, int status);
void rmsgi_conn_cancel_rndv(struct rmsg_conn *c, int status);
/* rmsgi_conn_cancel_rndv() but for a resumable connection's messages
 * the peer has not acknowledged (they go again after a resume) */
void rmsgi_conn_cancel_answers(struct rmsg_conn *c, int status);
void rmsgi_conn_cancel_queued(struct rmsg_conn *c, int status);
/* an op carrying a copy of the caller's iovec array (not of the data) */
struct rmsgi_op *rmsgi_conn_op_with_iov(struct rmsg_conn *c,
					const struct iovec *iov, int iovcnt);
/* queues a header-only control frame (an answer to the peer): 0 or
 * -ENOMEM */
int rmsgi_conn_send_ctrl(struct rmsg_conn *c, uint8_t type, uint32_t aux,
			 uint64_t id);
/* queues the connection's CREDIT frame (not busy: credit_op_busy) at
 * the head of the send queue */
void rmsgi_conn_credit_first(struct rmsg_conn *c, uint32_t aux);
/* the same ahead of what is queued: after *@after (&c->tx.sendq for the
 * head), which becomes the new frame, so that several keep their order */
int rmsgi_conn_send_ctrl_first(struct rmsg_conn *c, uint8_t type, uint32_t aux,
			       uint64_t id, struct rmsgi_list **after);
/* hands queued frames to the transport as far as credits and room go */
void rmsgi_conn_post_queued(struct rmsg_conn *c);

/* rx.c */
/* drops received messages that can no longer be delivered */
void rmsgi_conn_drop_rx(struct rmsg_conn *c);
/* the op waiting on rndvq for the peer's answer @id, or NULL */
struct rmsgi_op *rmsgi_conn_rndv_find(struct rmsg_conn *c, uint64_t id);
/* queues a message-like object for in-order delivery */
void rmsgi_conn_rx_enqueue(struct rmsg_conn *c, struct rmsg_msg *m);

/* rekey.c: one-sided access across a resume. Resumed (ESTABLISHED
 * again): our exports bound again and told to the peer, the peer's
 * awaited */
void rmsgi_rekey_resume(struct rmsg_conn *c);
/* a REKEY frame: 0, or -EPROTO/-ENOMEM (the connection aborted) */
int rmsgi_rekey_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h);
/* a native one-sided op about to be posted (c->rma.rk set): true while
 * it must wait for the peer's list, else its rkey is the new one */
bool rmsgi_rekey_post(struct rmsg_conn *c, struct rmsgi_op *op);
void rmsgi_rekey_free(struct rmsg_conn *c);

/* rx.c: received messages the core or the app still holds came over a
 * transport that is gone: their credits are not returned to the next */
void rmsgi_conn_rx_stale(struct rmsg_conn *c);
/* pack.c: the same for unpacked PACK frames */
void rmsgi_pack_stale(struct rmsg_conn *c);

/* hello.c: the handshake's data */
/* the flow control the peer's hello @h sets up (credits, byte window,
 * packing), without its private data: a resumed session's new transport */
void rmsgi_conn_flow(struct rmsg_conn *c, const struct rmsgi_hello *h);
/* the peer's hello @h: its private data and flow control */
void rmsgi_conn_set_peer(struct rmsg_conn *c, const struct rmsgi_hello *h);
/* asks the backend for the endpoint's addresses and keeps them */
void rmsgi_conn_addrs(struct rmsg_conn *c);

/* session.c: resumable connections; resume.c their handshake */
/* @c's session object (c->ss), not on yet: NULL if no memory */
struct rmsgi_session *rmsgi_session_new(struct rmsg_conn *c);
/* client: the server's answer @h to our resume request: proved? Its
 * count of our messages in *@rx_p, and flow control set up anew; or the
 * error that ends the connection (why given) */
int rmsgi_session_answer(struct rmsg_conn *c, const struct rmsgi_hello *h,
			 uint64_t *rx_p);
/* the session part of the hello @c sends (rmsgi_conn_hello) */
void rmsgi_session_hello(const struct rmsg_conn *c, struct rmsgi_hello *h);
/* server: a client that asks for a session, on listener @l */
void rmsgi_session_offer(struct rmsg_conn *c, const struct rmsg_listener *l);
/* client: the server's reply @h took a session: its id and key */
void rmsgi_session_established(struct rmsg_conn *c,
			       const struct rmsgi_hello *h);
/* established (app accepted, key proven): resumable from now on */
void rmsgi_session_on(struct rmsg_conn *c);
/* the connection closed: no timer runs, no resume finds it */
void rmsgi_session_end(struct rmsg_conn *c);

/* server: a resume request @h on the new connection @c: 0 and @reply
 * (@c is gone: its transport now serves the suspended connection), or
 * a refusal's status and @reply */
int rmsgi_session_request(struct rmsg_conn *c, const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply);
/* the transport of an established connection failed with @reason:
 * true if it is suspended (resumable), false if it ends */
bool rmsgi_session_suspend(struct rmsg_conn *c, int reason);
/* a dial of a suspended client failed (@h: the server's refusal): 0 to
 * dial again, or the error that ends the connection */
int rmsgi_session_failed(struct rmsg_conn *c, int reason,
			 const struct rmsgi_hello *h);
/* the backend of a suspended connection is down */
void rmsgi_session_down(struct rmsg_conn *c);
/* client: a new resume request goes (each is proved with its number) */
void rmsgi_session_attempt(struct rmsg_conn *c);
/* the server's session of id @sid, or NULL (session.c) */
struct rmsgi_session *rmsgi_session_find(const struct rmsg_ctx *ctx,
					 uint64_t sid);
/* a suspended connection's new transport is up (client: the reply @h) */
void rmsgi_session_resume(struct rmsg_conn *c, const struct rmsgi_hello *h);
/* the acks a frame posted now carries (c->ss set) */
uint16_t rmsgi_session_ack_take(struct rmsg_conn *c);
/* @op was taken by the transport: its number (c->ss set) */
void rmsgi_session_posted(struct rmsg_conn *c, struct rmsgi_op *op);
/* @op (numbered) finishes with @status: true if the session keeps it */
bool rmsgi_session_hold(struct rmsg_conn *c, struct rmsgi_op *op, int status);
/* the header's flags for @op, at the head of the send queue and posted
 * now (c->ss set) */
uint8_t rmsgi_session_ackreq(const struct rmsg_conn *c,
			     const struct rmsgi_op *op);
/* the peer acknowledged @n more messages, and may ask for ours
 * (@flags): 0 or -EPROTO (why given) */
int rmsgi_session_acked(struct rmsg_conn *c, uint16_t n, uint8_t flags);
/* fails every unacknowledged message with @status (the end) */
void rmsgi_session_cancel(struct rmsg_conn *c, int status);
/* the peer said BYE: our acks go at once */
void rmsgi_session_bye(struct rmsg_conn *c);
void rmsgi_session_free(struct rmsg_conn *c);

/* conn.c: the state machine's moves that auth.c makes too */
void rmsgi_conn_set_state(struct rmsg_conn *c, enum rmsgi_conn_state s);
/* -> ESTABLISHED: on_established */
void rmsgi_conn_up(struct rmsg_conn *c);
/* a refusal hello in @reply; returns its status */
int rmsgi_conn_refuse(struct rmsg_conn *c, int err, struct rmsgi_hello *reply);

/* auth.c: the pre-shared key's crypto (nettle) and the AUTH state of
 * conn.c's state machine */
/* RMSGI_NONCE_SIZE bytes from getrandom(2): 0 or a negative errno */
int rmsgi_auth_nonce(uint8_t nonce[RMSGI_NONCE_SIZE]);
/* P_c over @hello as the client's core built it (proto.h) */
void rmsgi_auth_client_mac(const struct rmsgi_cfgv *cfg,
			   const uint8_t ns[RMSGI_NONCE_SIZE],
			   const uint8_t nc[RMSGI_NONCE_SIZE],
			   const struct rmsgi_hello *hello,
			   uint8_t mac[RMSGI_MAC_SIZE]);
/* P_s over the status and the reply private data */
void rmsgi_auth_server_mac(const struct rmsgi_cfgv *cfg,
			   const uint8_t nc[RMSGI_NONCE_SIZE],
			   const uint8_t ns[RMSGI_NONCE_SIZE], uint32_t status,
			   const uint8_t *pdata, size_t len,
			   uint8_t mac[RMSGI_MAC_SIZE]);
/* timing-safe: are the two MACs equal? */
bool rmsgi_auth_mac_eq(const uint8_t *a, const uint8_t *b);
/* a request with a key on either side (rmsgi_conn_ev_request): a key on
 * one side only is refused (-EACCES, the flag in @reply); with both, the
 * reply carries our nonce and the app's accept waits for the proof */
int rmsgi_auth_request(struct rmsg_conn *c, const struct rmsgi_hello *h,
		       struct rmsgi_hello *reply);
/* the transport is up on a connection that authenticates: the client
 * sends its proof, the server waits for it (rmsgi_conn_ev_established) */
void rmsgi_auth_begin(struct rmsg_conn *c, const struct rmsgi_hello *h);
/* server: our reply's hello asks for the proof, with our nonce */
void rmsgi_auth_hello(const struct rmsg_conn *c, struct rmsgi_hello *h);
/* the handshake's nonces, server's and client's (NULL without one): for
 * the fuzzer, which plays the peer */
void rmsgi_auth_nonces(const struct rmsg_conn *c, const uint8_t **ns,
		       const uint8_t **nc);
/* stops the timer that bounds the AUTH state (leaving it) */
void rmsgi_auth_stop(struct rmsg_conn *c);
/* frees the handshake's state (the connection goes) */
void rmsgi_auth_free(struct rmsg_conn *c);
/* a frame while authenticating, or an AUTH frame (rmsgi_conn_rx) */
int rmsgi_conn_auth_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		       struct rmsg_msg *m);

/* rma.c: frames of one-sided ops emulated by the peer (TCP) */
int rmsgi_conn_rma_rx_write(struct rmsg_conn *c, const struct rmsgi_hdr *h,
			    struct rmsg_msg *m);
int rmsgi_conn_rma_rx_read(struct rmsg_conn *c, const struct rmsgi_hdr *h,
			   struct rmsg_msg *m);
int rmsgi_conn_rma_rx_read_resp(struct rmsg_conn *c, const struct rmsgi_hdr *h,
				struct rmsg_msg *m);

/* packing (pack.c). Can @op go packed with those queued behind it? */
static inline bool rmsgi_pack_want(const struct rmsg_conn *c,
				   const struct rmsgi_op *op)
{
	return op->kind == RMSGI_OP_SEND && op->type == RMSGI_T_DATA &&
	       op->proto == RMSGI_OP_P_EAGER && !op->aux && !op->pre_len &&
	       RMSGI_PACK_ENT(op->len) <= c->tx.peer_eager;
}
/* the op at @first and those after it packed into a PACK op that takes
 * their place at the head of the send queue; NULL (nothing changed) if
 * fewer than two fit or no memory */
struct rmsgi_op *rmsgi_pack_build(struct rmsg_conn *c, struct rmsgi_op *first);
/* the PACK op completed with @status: so does each message in it */
void rmsgi_pack_finish(struct rmsg_conn *c, struct rmsgi_op *pk, int status);
/* a received PACK frame @f: its messages delivered in order */
int rmsgi_pack_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *f);
/* send.c: @op is done with @status (its callback runs at the next flush) */
void rmsgi_conn_op_finish(struct rmsg_conn *c, struct rmsgi_op *op, int status);
/* rx.c: delivers what is ready in the receive queue, in order */
void rmsgi_conn_deliver(struct rmsg_conn *c);

#endif /* RMSG_CONN_INT_H */
