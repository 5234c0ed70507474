/* SPDX-License-Identifier: MIT */
/*
 * transport.h - the contract between the core and a transport backend:
 * the op tables a backend fills in, the rules of posting, and the
 * up-calls it makes into the core. Nothing else lives here.
 *
 * A backend (transport/<name>/) includes its own header, which includes
 * this one, and system headers: the core's objects (struct rmsg_ctx,
 * rmsg_listener, rmsg_conn) stay opaque to it. The data it moves and the
 * capabilities (op.h), the memory services (mem.h, pool.h), the wire
 * codec (proto.h), configuration, logging and URIs are the core's headers,
 * included here.
 * The core reaches a backend only through its row in the registry
 * (transport/registry.c, registry.h) and these tables.
 *
 * Policy lives in the core, mechanism in the backend: the core decides
 * whether a peer is admitted and accepted and with which status it is
 * refused (the reply hello it fills), whether a close lingers and for how
 * long, which frames are legal (rmsgi_conn_rx; rmsgi_tr_frame_ok), how a
 * header is built from an op (rmsgi_op_hdr, both op.h) and when auto://
 * falls back.
 * A backend moves frames, reports what happened, and never edits a
 * connection's state.
 */
#ifndef RMSG_TRANSPORT_H
#define RMSG_TRANSPORT_H

#include "../base.h"
#include "../cfg.h"
#include "../log.h"
#include "../mem.h"
#include "../op.h"
#include "../pool.h"
#include "../proto.h"
#include "../quar.h"
#include "../timer.h"
#include "../uri.h"

/* what a context lends a backend, fixed for its life (rmsgi_ctx_env) */
struct rmsgi_tr_env {
	struct rmsg_ctx *ctx; /* opaque: for up-calls and logging */
	struct ev_loop *loop;
	const struct rmsgi_cfgv *cfg;
	struct rmsgi_pool *pool; /* registered buffers */
	int log_max;		 /* rmsgi_log_max(cfg) */
	/* a private loop's deadlines (timer.h): NULL on the app's loop */
	struct rmsgi_timers *timers;
	struct rmsgi_reaper *reaper; /* the context's end of life (below) */
};
const struct rmsgi_tr_env *rmsgi_ctx_env(struct rmsg_ctx *ctx);
struct rmsgi_tr;
/* backend @tr's per-context state, NULL until it sets it (its slot comes
 * from the registry's rows; call it when the state is made or freed, not
 * per frame) */
void **rmsgi_ctx_tr_slot(struct rmsg_ctx *ctx, const struct rmsgi_tr *tr);
/* debug lines on hot paths test the level before the call */
#define rmsgi_tr_dbg(env, ...)                                              \
	do {                                                                \
		if ((env)->log_max >= RMSG_LOG_DEBUG)                       \
			rmsgi_log((env)->ctx, RMSG_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

/*
 * End of life: one rule for every connection object a backend frees.
 *
 * A user callback runs inside a backend's handler and may end the very
 * object the handler is working on (a close from on_msg), or another one
 * the handler reaches next. So a backend never frees a connection object
 * where it ends it: it queues it with rmsgi_reap(), and the core runs
 * its @fn once no backend entry point is on the context's stack: at the
 * outermost rmsgi_tr_leave(), from the context's flush outside every
 * entry point, and in rmsg_ctx_destroy() before each backend's fini.
 * Every backend entry point that can make up-calls or end an object (its
 * io, timer and completion callbacks, poll(), and the ops that can end
 * the connection) is bracketed by rmsgi_tr_enter() and rmsgi_tr_leave(),
 * and touches nothing after its leave. Until @fn runs the object stays
 * readable, so a handler that comes back from a callback tests its own
 * "ended" flag and stops. Items run in the order they were queued (so
 * connections go down in the order they ended); @fn frees the object and
 * may make up-calls (rmsgi_conn_ev_down()), never calls the app, and may
 * queue more.
 */
struct rmsgi_reap {
	struct rmsgi_reap *next;
	void (*fn)(struct rmsgi_reap *r);
};
struct rmsgi_reaper {
	unsigned depth; /* backend entry points on the stack */
	struct rmsgi_reap *head, **tail;
};
/* runs every queued item (depth 0 only) */
void rmsgi_reap_run(struct rmsgi_reaper *rp);
static inline void rmsgi_reap(struct rmsgi_reaper *rp, struct rmsgi_reap *r,
			      void (*fn)(struct rmsgi_reap *r))
{
	r->fn = fn;
	r->next = NULL;
	*rp->tail = r;
	rp->tail = &r->next;
}
static inline void rmsgi_tr_enter(struct rmsgi_reaper *rp)
{
	rp->depth++;
}
static inline void rmsgi_tr_leave(struct rmsgi_reaper *rp)
{
	if (--rp->depth == 0 && RMSGI_UNLIKELY(rp->head != NULL))
		rmsgi_reap_run(rp);
}

/* what a connection is, fixed for its life (rmsgi_conn_info); valid until
 * the backend's rmsgi_conn_ev_down() or rmsgi_conn_discard() */
struct rmsgi_tr_conn_info {
	struct rmsg_ctx *ctx;
	const struct rmsgi_cfgv *cfg;
	uint32_t id; /* for log lines: "conn %u" */
	bool is_server;
	/* connect: how long the dial may take until the connection is up
	 * (the setup timeout, cfg->timeout_ms; shorter for a resume's dial,
	 * start.c), set before each connect */
	unsigned dial_ms;
	/* connect, of a RMSGI_TR_CAP_LOCAL backend: others follow in the
	 * chain, so a peer this backend cannot reach now (not on this host,
	 * not listening through it) is a negative errno at once, nothing
	 * started or reported (op.h) */
	bool try_first;
};

/*
 * Context ops. @tctx is the backend's per-context state (its slot), made
 * on first use (a listen or a connect); called only while the slot is set.
 */
struct rmsgi_tr_ctx_ops {
	/* May be NULL (fini does it all). First step of the context's end:
	 * ends every listener and connection synchronously (ops completed,
	 * connections reported down) but keeps the memory of messages it
	 * handed up, which the callbacks that follow may still release. */
	void (*stop)(void *tctx);
	/* required: aborts what is left (as stop), frees the state, clears
	 * the slot. Never blocks for long. */
	void (*fini)(void *tctx);
	/* May be NULL (purely event driven). Polls completions without
	 * blocking, returns how many ran; with @arm also re-arms their
	 * notification and polls once more. May make up-calls. */
	int (*poll)(void *tctx, bool arm);
	/* May be NULL. For a backend without completions to poll: one
	 * pass over what it would otherwise wait on (a read attempt on each
	 * connection's socket), made only while the context busy-polls
	 * (cfg.busy_poll_us), never otherwise. Returns how many found
	 * something; never blocks. May make up-calls. A pass costs a
	 * system call per connection: the core reads its clock after each
	 * one, so busy_poll_us stays a bound at any number of them. */
	int (*spin)(void *tctx);
};

/* Listener ops. A backend listener reports peers with rmsgi_tr_incoming()
 * and never calls the app. */
struct rmsgi_tr_listener_ops {
	/* required: listens on @u (port 0: any; *port_p: the port it got)
	 * for the core's listener @l. 0 and *tl_p, or a negative errno with
	 * nothing left. Resolves numerically or from local files only;
	 * does not call back. */
	int (*listen)(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		      const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p);
	/* required: stops listening, frees @tl; its connections live on */
	void (*close)(void *tl);
	/* Both or neither (then the backend serves no group: -EOPNOTSUPP).
	 * For a group listener (rmsgi_tr_group(), src/group.c) a new peer is
	 * detached from the context as @h (owning no context state, bound to
	 * no thread, its hello decoded) and given to rmsgi_tr_handoff(); the
	 * core then calls exactly one of these for @h, maybe on another
	 * thread. adopt(), on @ctx's thread: @h becomes a connection of @ctx
	 * for @l as a peer of listen() does (rmsgi_tr_incoming(), every
	 * outcome reported by up-calls); it keeps no pointer to @l (a later
	 * rmsgi_conn_ev_request() passes NULL) and frees @h. drop(), on any
	 * thread: refuses @h with @refusal, frees it, touches no context. */
	void (*adopt)(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *h);
	void (*drop)(void *h, const struct rmsgi_hello *refusal);
};

/* Connection ops. @tc is the backend's state for one connection, handed
 * over with rmsgi_conn_set_tc() (client) or rmsgi_tr_incoming() (server).
 * None is called after the backend's ev_down() or discard(). */
struct rmsgi_tr_conn_ops {
	/* required. Client: starts connecting @c (fixed facts @ci) to the
	 * addresses @to the core resolved (valid during the call only; the
	 * backend never resolves a name nor blocks), with the ?src= address
	 * of @u (src_len 0: none; its names: for log lines). TCP tries them in order; RDMA the first
	 * of the source's family; none of it: -EHOSTUNREACH, reported. 0
	 * once started (rmsgi_conn_set_tc() called): every outcome comes by
	 * up-calls, maybe from inside this call. A negative errno: nothing
	 * started or reported, the core may try another backend. */
	int (*connect)(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		       const struct rmsgi_uri *u, const struct rmsgi_addrs *to);
	/* required: a local close. With @linger_ms > 0 what was posted (the
	 * BYE last) still goes out and answers still come in, that long at
	 * most; 0: at once. Every posted op completes, then ev_down(), now
	 * or later; no ev_failed. */
	void (*disconnect)(void *tc, unsigned linger_ms);
	/* required: takes @op ("Posting" below). 0; -EAGAIN (no room:
	 * rmsgi_conn_tr_room() follows); -ENOMEM; for one-sided ops -EINVAL
	 * or -EACCES (that op fails, nothing posted). No up-calls. */
	int (*post)(void *tc, struct rmsgi_op *op);
	/* May be NULL. Writes frame @h + @iov now, inside rmsg_send(), if
	 * nothing is queued ahead. Returns the bytes written: all (done), 0
	 * (post() it), or a part (post it, tr_off says how much left). A
	 * negative errno: failed, reported later from the loop. No up-calls */
	ssize_t (*send_direct)(void *tc, const struct rmsgi_hdr *h,
			       const struct iovec *iov, int iovcnt);
	/* required with send_direct: the largest payload it takes on this
	 * established connection (larger sends skip the attempt) */
	size_t (*direct_max)(const void *tc);
	/* May be NULL. End of a batch of post()s: rings the doorbell. May
	 * complete ops (TCP writes them), report room or a failure: the
	 * core touches no op of the batch after it. */
	void (*kick)(void *tc);
	/* May be NULL (no RMSGI_TR_CAP_RNDV). A rendezvous send was
	 * acknowledged: releases what post() pinned. */
	void (*rndv_release)(void *tc, struct rmsgi_op *op);
	/* required: the endpoint's own (@local) and peer (@peer) IP address
	 * and port as it has them now: 0 with both written, or -ENOTCONN /
	 * -EAFNOSUPPORT with neither. Called on a server connection inside
	 * ev_request() and on both sides inside ev_established(); the core
	 * keeps the result. Never blocks; no up-calls. */
	int (*addrs)(void *tc, struct sockaddr_storage *local,
		     struct sockaddr_storage *peer);
	/* May be NULL (the backend backs any grant). The core changes what
	 * it grants the peer on this established connection to @credits
	 * receive buffers (the start, rmsgi_credits_start(), the backend set
	 * up itself for the hello). More than now: returns what it backs from
	 * now on (its shared receive queue, device limits and registration
	 * budget allowing), between the current grant and @credits. Fewer: the backend may
	 * take the difference back, returns @credits. Never fails the
	 * connection; no up-calls. */
	uint32_t (*grant)(void *tc, uint32_t credits);
	/* May be NULL (the core checks one-sided access itself). Opens the
	 * endpoint to the peer's one-sided ops once the pre-shared key is
	 * proven, before the peer is told; until then a backend whose device
	 * checks keys keeps every export out of reach. 0, or a negative
	 * errno (the connection fails). No up-calls. */
	int (*rma_open)(void *tc);
	/* May be NULL: the backend's connections cannot be resumed
	 * (rmsg_cfg_set_resume_ms; the core offers no session over it).
	 * Called inside rmsgi_conn_ev_request() for the connection the
	 * backend reported: its peer resumed a suspended connection, whose
	 * object @c (and fixed facts @ci) the endpoint @tc serves from now
	 * on, as if rmsgi_tr_incoming() had given them; the object it had
	 * is gone when ev_request returns (0: the accepting reply follows,
	 * then ev_established for @c). No up-calls. */
	void (*rebind)(void *tc, struct rmsg_conn *c,
		       const struct rmsgi_tr_conn_info *ci);
};

/*
 * Posting. post() is called only on an established connection, with a
 * credit already taken for frames that land in a peer's receive buffer.
 *  - Every op post() accepted completes exactly once with
 *    rmsgi_conn_op_done(), also when the connection fails (-ECANCELED on
 *    a local close, else the failure).
 *  - A failure or the peer's leaving is reported once with
 *    rmsgi_conn_ev_failed(); once every posted op completed and the
 *    endpoint is released, the backend calls rmsgi_conn_ev_down().
 *  - Received buffers have one ownership rule. A frame goes up to
 *    rmsgi_conn_rx() in order, in a struct rmsg_msg (the buffer's
 *    handle), and comes back exactly once: at once, when
 *    rmsgi_conn_rx() returns RMSGI_RX_DONE (the core is done with it:
 *    the usual case, no indirect call), or later through its free_fn,
 *    when it returned RMSGI_RX_KEPT (queued, or held by the app). The
 *    backend sets @m up with rmsgi_msg_init() for every frame and then
 *    never reads or writes the core's fields of it.
 *  - The credit a buffer carried goes back once that buffer can take a
 *    frame again. For a frame the core is done with inside
 *    rmsgi_conn_rx() the core returns it itself, unless the backend has
 *    RMSGI_TR_CAP_CREDIT_LATE; otherwise (a kept frame's free_fn, or a
 *    backend that must repost first) the backend calls
 *    rmsgi_conn_credit_freed(). RDMA reposts to a shared receive queue
 *    first: a credit granted before that could let the peer meet an empty
 *    queue (receiver-not-ready, 245 ms per retry).
 *  - A rendezvous request whose payload finds no memory still goes to
 *    rmsgi_conn_rx() (not ready), then to rmsgi_conn_rx_ready() with
 *    -ENOMEM: that message fails, the connection does not.
 */

/* a backend: its name (rmsg_conn_transport), its capabilities and op
 * tables; registered by a row in the registry, which gives it its slot in
 * a context */
struct rmsgi_tr {
	const char *name;
	unsigned caps;
	const struct rmsgi_tr_ctx_ops *ctx;
	const struct rmsgi_tr_listener_ops *lst;
	const struct rmsgi_tr_conn_ops *conn;
};

/* ------------------------------------------------------------------ */
/* up-calls: from a backend into the core; none calls the app unless said */

/* server: a peer knocks on listener @l through @tr (its state @tc); the
 * core admits it against @l's limits and makes a connection the app does
 * not see yet: 0, *c_p, *ci_p; or a negative errno, @refusal filled (the
 * hello the backend sends before it drops the peer) */
int rmsgi_tr_incoming(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      void *tc, struct rmsg_conn **c_p,
		      const struct rmsgi_tr_conn_info **ci_p,
		      struct rmsgi_hello *refusal);
/* is @l a group listener? Then new peers go to rmsgi_tr_handoff() */
bool rmsgi_tr_group(const struct rmsg_listener *l);
/* a peer at @peer knocked on group listener @l (home's thread): the core
 * picks a context and calls @tr's adopt() or drop() for @h, once (adopt
 * for the home inside this call). Calls the app's pick callback only. */
void rmsgi_tr_handoff(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      const struct sockaddr *peer, void *h);
/* server: the peer's hello @h arrived: validated, the accept callback
 * runs. Fills @reply (status 0: accepted) and returns 0 (the backend
 * finishes the handshake, reports established) or a negative errno (it
 * sends @reply and drops the connection: discard(), or ev_failed and
 * ev_down; the app hears nothing). @l NULL: the listener @c counts
 * against; none left: -ECONNABORTED. */
int rmsgi_conn_ev_request(struct rmsg_conn *c, struct rmsg_listener *l,
			  const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply);
/* the hello that refuses @c with @err (odd values: -ECONNREFUSED) */
void rmsgi_conn_refusal(const struct rmsg_conn *c, int err,
			struct rmsgi_hello *reply);
/* client: the backend's state for @c, before any other up-call */
void rmsgi_conn_set_tc(struct rmsg_conn *c, void *tc);
/* the hello this side sends (status 0), with the key holder's flag and
 * nonce where the accepting reply needs them */
void rmsgi_conn_hello(const struct rmsg_conn *c, struct rmsgi_hello *h);
/* handshake done; client: the peer accepted with @h (validated here),
 * server: @h NULL. Calls on_established. */
void rmsgi_conn_ev_established(struct rmsg_conn *c,
			       const struct rmsgi_hello *h);
/* the backend failed or the peer left (@reason: negative errno; @h: a
 * reject's private data, or NULL). The backend still completes its posted
 * ops, then calls ev_down(). Idempotent. */
void rmsgi_conn_ev_failed(struct rmsg_conn *c, int reason,
			  const struct rmsgi_hello *h);
/* says why @c is about to end (rmsg_conn_close_reason()), just before
 * the rmsgi_conn_ev_failed() that ends it; the first reason given
 * counts, and none once the connection is closing */
void rmsgi_conn_why(struct rmsg_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* the backend has completed every posted op and released the endpoint:
 * it forgets @c (the core may start another backend for it) */
void rmsgi_conn_ev_down(struct rmsg_conn *c);
/* instead of ev_down for a server connection the app never saw */
void rmsgi_conn_discard(struct rmsg_conn *c);
/* did the app accept @c (ev_request returned 0)? Then it ends with
 * ev_failed and ev_down, whatever fails after that, never discard() */
bool rmsgi_conn_app_accepted(const struct rmsg_conn *c);
/* does the peer still owe answers? A lingering close waits for them */
bool rmsgi_conn_awaits_peer(const struct rmsg_conn *c);
/* a posted op finished (status 0 or -errno) */
void rmsgi_conn_op_done(struct rmsg_conn *c, struct rmsgi_op *op, int status);
/* a frame arrived, header decoded; @m->ready: its payload is complete.
 * RMSGI_RX_KEPT: the core keeps @m, its free_fn runs once later;
 * RMSGI_RX_DONE (0): @m is the backend's again; a negative errno: done
 * with too, and the core closes with it (-EPROTO: illegal frame; -ENOMEM:
 * no memory to unpack a PACK frame). "Posting" tells the rule. */
int rmsgi_conn_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *m);
#define RMSGI_RX_DONE 0
#define RMSGI_RX_KEPT 1
/* a rendezvous payload read into @m is complete, or failed: -ENOMEM (no
 * memory, nothing read) fails that message only, else the connection */
void rmsgi_conn_rx_ready(struct rmsg_conn *c, struct rmsg_msg *m, int status);
/* the backend has room to post again */
void rmsgi_conn_tr_room(struct rmsg_conn *c);
/* a receive buffer whose credit belongs to @c went back to the peer;
 * @wcost: the byte window's bytes its frame took (the message's wcost,
 * as rmsgi_conn_rx() set it) */
void rmsgi_conn_credit_freed(struct rmsg_conn *c, uint32_t wcost);
/* may the backend read the frame of header @h now? Asked from the
 * header, before the body. Until the peer proved the pre-shared key only
 * an AUTH frame of at most RMSGI_AUTH_MAX bytes is. 1: yes, and every
 * later frame (no need to ask again); 0: yes, this one; -EACCES: no
 * (logged, counted): the backend ends the connection with it, payload
 * unread. */
int rmsgi_conn_rx_admit(struct rmsg_conn *c, const struct rmsgi_hdr *h);
/* the peer counts as heard from now (e.g. the backend stopped reading) */
void rmsgi_conn_heard(struct rmsg_conn *c);
/* @got payload bytes of a large frame so far: the peer is alive if it
 * advanced by RMSGI_KA_PROGRESS since the last call */
void rmsgi_conn_rx_progress(struct rmsg_conn *c, size_t got);
#define RMSGI_KA_PROGRESS ((size_t)64 << 10)
/* closes from inside the library with @reason (e.g. -EPROTO) */
void rmsgi_conn_abort(struct rmsg_conn *c, int reason);
/* keep @c's memory while a backend holds it (a message's conn) */
void rmsgi_conn_get(struct rmsg_conn *c);
void rmsgi_conn_put(struct rmsg_conn *c);
/* runs the core's queued work now (after a backend's own event) */
void rmsgi_ctx_flush(struct rmsg_ctx *ctx);

#endif /* RMSG_TRANSPORT_H */
