/* SPDX-License-Identifier: MIT */
/*
 * rmsg_int.h - internal objects shared by the library's files.
 *
 * Internal non-static names carry the rmsgi_ prefix. Nothing here is
 * exported (the version script exports rmsg_* only).
 */
#ifndef RMSG_INT_H
#define RMSG_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <ev.h>

#include "rmsg.h"
#include "transport/transport.h"
#include "registry.h"
#include "credit.h"
#include "keepalive.h"
#include "reclaim.h"

struct rmsg_cfg {
	struct rmsgi_cfgv v;
};

void rmsgi_cfg_defaults(struct rmsgi_cfgv *v);

/* the core's debug lines (a backend: rmsgi_tr_dbg) */
#define rmsgi_dbg(ctx, ...)                                          \
	do {                                                         \
		if ((ctx)->log_max >= RMSG_LOG_DEBUG)                \
			rmsgi_log(ctx, RMSG_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

/* ------------------------------------------------------------------ */
/* memory regions (mr.c) and the registration cache (regcache.c)        */

#define RMSGI_DESC_MAGIC 0xa8
/* 2: per-connection exports; a 64-bit token, offsets relative to the
 * export, no address on TCP */
#define RMSGI_DESC_VERSION 2
#define RMSGI_DESC_F_RKEY 0x1 /* rkey and addr are valid (RDMA) */

/* an exported descriptor, decoded */
struct rmsgi_desc {
	uint8_t access;
	uint8_t flags;
	uint32_t rkey;
	uint64_t token;
	uint64_t addr; /* RDMA: virtual address of the export's byte 0 */
	uint64_t len;
};

void rmsgi_desc_encode(const struct rmsgi_desc *d, void *buf);
/* -EINVAL for anything but a well-formed descriptor */
int rmsgi_desc_decode(const void *buf, struct rmsgi_desc *d);
/* may @len bytes at @off be accessed with @access? -EACCES for rights,
 * -EINVAL for bounds (overflow included) */
int rmsgi_desc_check(const struct rmsgi_desc *d, uint64_t off, uint64_t len,
		     int access);

/* one export of a region: to one connection, or to any peer */
struct rmsgi_export {
	struct rmsgi_list mlink;    /* the region's exports */
	struct rmsgi_list clink;    /* the connection's, or the any-peer list */
	struct rmsgi_export *hnext; /* token hash chain */
	struct rmsg_mr *mr;
	struct rmsg_conn *conn; /* NULL: any connected peer */
	uint64_t token;
	uint64_t off, len;
	int access;
	void *w; /* RDMA: memory window (conn) */
	/* RDMA: a registration of exactly the range: with remote rights
	 * (any peer), or local-only under a sub-range's window */
	void *h;
	uint32_t rkey;
	/* TCP: READ_RESP answers queued from it, not yet written: a revoke
	 * waits for them (-EBUSY), and a drop keeps the object (dead) until
	 * the last goes (rmsgi_mr_unbusy) */
	unsigned busy;
	bool dead;
};

struct rmsg_mr {
	struct rmsgi_list link; /* ctx's regions */
	struct rmsgi_list exports;
	struct rmsg_ctx *ctx;
	uint8_t *addr;
	size_t len;
	size_t charged; /* page-rounded bytes counted in the budget */
	int access;
	void *h; /* transport registration (local rights only), or NULL */
	uint32_t lkey;
	unsigned busy; /* local operations using the memory */
};

/* a short-lived registration of user memory, shared while in use */
struct rmsgi_rc_ent {
	struct rmsgi_list link;
	uintptr_t start, end;
	int access;
	unsigned refs;
	size_t charged;
	void *h;
	uint32_t lkey, rkey;
};

#define RMSGI_MR_HASH 256

struct rmsgi_mrtab {
	struct rmsgi_list regions;
	struct rmsgi_export *hash[RMSGI_MR_HASH]; /* exports by token */
	struct rmsgi_list any_peer;		  /* exports without a conn */
	struct rmsgi_list rc; /* registration cache entries in use */
	unsigned rc_n;
	size_t bytes; /* regions + cache, page-rounded */
	size_t limit;
	const struct rmsgi_reg_ops *ops;
	void *priv;
};

void rmsgi_mr_init(struct rmsg_ctx *ctx);
/* frees every region left; the transports are gone */
void rmsgi_mr_fini(struct rmsg_ctx *ctx);
/* a peer's access on @c through export @token: 0 and the memory, or
 * -EACCES (no such export, exported to another connection, or rights),
 * -EINVAL (bounds of the export). With @e_p the export and its region
 * are kept busy (rmsg_mr_revoke, rmsg_mr_dereg: -EBUSY) until
 * rmsgi_mr_unbusy(): an answer that reads the memory later */
int rmsgi_mr_target(struct rmsg_conn *c, uint64_t token, uint64_t off,
		    uint64_t len, int access, uint8_t **p,
		    struct rmsgi_export **e_p);
void rmsgi_mr_unbusy(struct rmsg_ctx *ctx, struct rmsgi_export *e);
/* the context's budget of registered bytes (cfg reg_limit), shared by
 * regions, the registration cache and the pools: -ENOMEM, logged with
 * the limit, when @bytes do not fit even after idle pool slabs went */
int rmsgi_budget_take(struct rmsg_ctx *ctx, size_t bytes);
void rmsgi_budget_give(struct rmsg_ctx *ctx, size_t bytes);
/* the system's page size, and the bytes of the pages [addr, addr+len)
 * spans: what registering it pins (mr.c) */
size_t rmsgi_page_size(void);
size_t rmsgi_page_span(const void *addr, size_t len);

/* ------------------------------------------------------------------ */
/* context (ctx.c)                                                      */

struct rmsgi_pool;
struct rmsgi_fallback;
struct rmsgi_auth;
struct rmsgi_session;

struct rmsg_ctx {
	struct ev_loop *loop;
	struct rmsgi_cfgv cfg;
	int log_max;	    /* rmsgi_log_max(&cfg) */
	ev_prepare prepare; /* flushes queues before the loop blocks */
	ev_idle idle; /* no blocking while completions may remain (ctx.c) */
	struct rmsgi_list conns; /* every live connection */
	struct rmsgi_list listeners;
	struct rmsgi_list dirty; /* connections with queued work */
	/* messages the app holds (their link is free once delivered):
	 * rmsg_ctx_destroy() releases those it never will */
	struct rmsgi_list held;
	struct rmsgi_pool *pool;
	struct rmsgi_tr_env env; /* what the backends see of it */
	/* backend objects that ended, freed once no backend entry point is
	 * on the stack (transport.h: end of life) */
	struct rmsgi_reaper reaper;
	void *tr_priv[RMSGI_TR_MAX]; /* per-backend context state, by slot */
	struct rmsgi_list op_free;   /* recycled struct rmsgi_op */
	unsigned op_free_len;
	/* unpacked PACK frames (pack.c): those with messages still in use,
	 * and those whose messages are all freed, oldest first, kept a
	 * while so that a late second release stays harmless */
	struct rmsgi_list pack_live;
	struct rmsgi_quar pack_done; /* weighed in messages */
	int in_cb;		     /* depth of user callbacks on the stack */
	bool destroying;
	struct rmsgi_rpc_ctx *rpc; /* RPC handlers (rpc.c) */
	struct rmsgi_async *async; /* cross-thread queue (async.c) */
	bool flushing;
	/* name resolutions the loop holds (resolve.c) */
	struct rmsgi_list resolves;
	/* resolve.c, under its resolve_mu: names waiting for one of the
	 * context's at most RMSGI_RESOLVE_THREADS resolver threads */
	struct rmsgi_list rsv_wait;
	unsigned rsv_threads;
	uint32_t next_conn_id;
	struct rmsgi_mrtab mrt;
	/* closed connections' counters, summed, and the context-only ones
	 * (stats.c) */
	struct rmsg_stats st;
	/* server sessions that may be resumed, by id (session.c: sess_nb
	 * buckets, a power of two, NULL until the first; sess_n of them),
	 * and when a refused resume request was last logged */
	struct rmsgi_list *sess_b;
	uint32_t sess_nb, sess_n;
	ev_tstamp resume_warned;
	/* the private loop of rmsg_ctx_create_fd(3) (ownloop.c); NULL on
	 * the application's loop */
	struct rmsgi_ownloop *own;
};

/* op objects, recycled per context */
struct rmsgi_op *rmsgi_op_get(struct rmsg_ctx *ctx);
void rmsgi_op_put(struct rmsg_ctx *ctx, struct rmsgi_op *op);

/* unpacked PACK frames are kept after their last message went: a
 * message object stays readable (released, so a second release does
 * nothing) until this many more messages that came packed were freed
 * (rmsg_msg_release(3)) */
#define RMSGI_PACK_DONE_KEEP 255
/* pack.c: frees what pack_done keeps (the context goes) */
void rmsgi_pack_fini(struct rmsg_ctx *ctx);

/* the core is done with a received message: inside rmsgi_conn_rx() for
 * it, that call hands it back (RMSGI_RX_DONE); after, its free_fn runs
 * (transport.h, "Posting": one ownership rule) */
static inline __attribute__((always_inline)) void
rmsgi_msg_free(struct rmsg_msg *m)
{
	if (RMSGI_LIKELY(m->in_rx == RMSGI_MSG_IN_RX))
		m->in_rx = RMSGI_MSG_DONE;
	else
		m->free_fn(m);
}

/* marks @c as having queued work; flushed before the loop blocks */
void rmsgi_ctx_mark_dirty(struct rmsg_ctx *ctx, struct rmsg_conn *c);
/* runs one flush pass; used by busy polling too */
void rmsgi_ctx_flush(struct rmsg_ctx *ctx);
/* flushes, polls completions (spinning for cfg.busy_poll_us if @spin,
 * re-arming their notification if @arm) and flushes again, for a bounded
 * number of rounds; returns the completions handled, *more_p whether
 * some may remain */
unsigned rmsgi_ctx_work(struct rmsg_ctx *ctx, bool spin, bool arm,
			bool *more_p);
int rmsgi_ctx_new(struct ev_loop *loop, const struct rmsg_cfg *cfg,
		  struct rmsgi_ownloop *own, struct rmsgi_timers *ts,
		  struct rmsg_ctx **ctx_p);

/* a context on a private loop (ownloop.c) */
struct rmsgi_ownloop;
/* work was queued: makes the context's fd readable unless the context
 * is inside rmsg_ctx_progress() (which flushes before it returns) */
void rmsgi_own_dirty(struct rmsgi_ownloop *own);
/* inside rmsg_ctx_progress() */
bool rmsgi_own_busy(const struct rmsgi_ownloop *own);
/* makes the fd readable; from any thread */
void rmsgi_own_wake(struct rmsgi_ownloop *own);
void rmsgi_own_destroy(struct rmsgi_ownloop *own);

/* ------------------------------------------------------------------ */
/* listeners (listener.c)                                               */

struct rmsg_listener {
	struct rmsgi_list link;
	struct rmsg_ctx *ctx;
	struct rmsgi_cfgv cfg;
	struct rmsg_conn_ops ops;
	rmsg_accept_cb accept;
	void *arg;
	/* listening backends and their state, by slot (registry.h) */
	const struct rmsgi_tr *tr[RMSGI_TR_MAX];
	void *tr_priv[RMSGI_TR_MAX];
	uint16_t port;
	unsigned nconns;   /* connections counted against cfg.max_conns */
	unsigned npending; /* of which in handshake (cfg.max_pending) */
	/* of which suspended (resumable, session.c): their resume requests
	 * are admitted beyond max_conns, new connections never are */
	unsigned nsuspended;
	uint64_t refused; /* connections refused over a limit */
	/* rmsg_listen_group (group.c): the group; on the home's listener
	 * and on each member's stand-in (@member: made by the group for a
	 * member context, no backend listens on it; freed by the group) */
	struct rmsgi_group *group;
	bool member;
	/* inside the group's pick callback: rmsg_listener_close says
	 * -EBUSY (the backend's accept loop still runs on it) */
	bool in_pick;
};

/* group.c: the group listener @l closes (on its home's thread, its
 * backends stopped): peers on their way are refused, the members'
 * stand-ins go on their threads, the group goes with its last user */
void rmsgi_group_close(struct rmsg_listener *l);
/* group.c: the member context of the stand-in @l is being destroyed
 * (its queue closed): the group stops handing it peers, @l goes */
void rmsgi_group_member_gone(struct rmsg_listener *l);

/* may @l take one more connection? 0, or -EUSERS (max_conns) or -EAGAIN
 * (max_pending), counted and logged (rate-limited) */
int rmsgi_listener_admit(struct rmsg_listener *l);
/* @c, just created for @l, counts against its limits until it ends */
void rmsgi_listener_attach(struct rmsg_listener *l, struct rmsg_conn *c);
/* @c changes state: its handshake or its life may end */
void rmsgi_listener_track(struct rmsg_conn *c, int state);

/*
 * The one way into user code: every callback the library makes runs as
 * RMSGI_USER_CB(ctx, call). The depth it keeps is the re-entry guard:
 * rmsg_ctx_destroy() refuses inside (-EBUSY), and work that must not
 * run inside a user callback (the flush from the fd mode's progress,
 * a submit's drain) waits until the depth is 0. Nothing else writes
 * ctx->in_cb (tests/check-layout.sh).
 */
#define RMSGI_USER_CB(ctx, call)                   \
	do {                                       \
		struct rmsg_ctx *ucb_ctx_ = (ctx); \
		ucb_ctx_->in_cb++;                 \
		call;                              \
		ucb_ctx_->in_cb--;                 \
	} while (0)

/* ------------------------------------------------------------------ */
/* connections (conn.c and the files conn_int.h lists): one state machine */

enum rmsgi_conn_state {
	RMSGI_CS_CONNECTING,  /* client: transport handshake running */
	RMSGI_CS_ACCEPTING,   /* server: app accepted, handshake finishing */
	RMSGI_CS_AUTH,	      /* transport up, proving the key (AUTH frames) */
	RMSGI_CS_ESTABLISHED, /* messages flow */
	/* resumable: the transport failed, a new one is awaited (session.c);
	 * sends queue, nothing is posted */
	RMSGI_CS_SUSPENDED,
	RMSGI_CS_CLOSING, /* local close: transport tearing down */
	RMSGI_CS_CLOSED,  /* on_close delivered; waits for last ref */
};

/* the longest reason text rmsg_conn_close_reason() gives, NUL included */
#define RMSGI_WHY_MAX 160

/* what the two ends said in the handshake and where they are: conn.c
 * fills it (auth.c the peer's data after a proof), the accessors read
 * it */
struct rmsgi_conn_ep {
	uint8_t peer_pdata[RMSG_PRIVATE_DATA_MAX];
	uint8_t peer_pdata_len;
	uint8_t my_pdata[RMSG_PRIVATE_DATA_MAX]; /* accept/reject reply */
	uint8_t my_pdata_len;
	/* the endpoint's addresses, from the backend's addrs op at the
	 * request (server) and at establishment: kept for the app until
	 * the connection is freed (rmsg_conn_peer_addr) */
	bool addrs_known;
	struct sockaddr_storage local_addr, peer_addr;
	/* made (rmsg_connect, or the listener's accept): cfg.timeout_ms
	 * bounds the whole setup from here, the proof of a key included */
	ev_tstamp t_start;
};

/* a connection's send side: send.c owns it (pack.c builds PACK ops in
 * its queue); conn.c starts and cancels it */
struct rmsgi_conn_tx {
	struct rmsgi_list sendq; /* ops not yet handed to the transport */
	unsigned sendq_len;	 /* user ops queued or posted, not completed */
	struct rmsgi_list rndvq; /* rendezvous sends waiting for ACK */
	struct rmsgi_list doneq; /* completed ops whose cb is due */
	uint64_t next_rndv_id;
	/* answers generated for the peer (READ_RESP, RNDV_ACK, RPC replies)
	 * queued or posted (see "What a peer may make us hold" below) */
	unsigned ans_n;
	/* frames handed to the transport, CREDIT frames aside: keepalive.c
	 * sees from it whether a queue with answers in it moves */
	uint64_t posts;
	/* the CREDIT frame's op, reused: queued or posted, or idle (DONE) */
	struct rmsgi_op credit_op;
	/* rmsg_send may write a message of fewer bytes than this inside the
	 * call (send_direct); 0 outside ESTABLISHED or on a transport
	 * without send_direct. Follows state (set_state). */
	size_t direct_lim;
	/* a flush handed everything queued to the transport since the last
	 * direct send: the next send starts a burst (send.c send_now) */
	bool burst;
	uint32_t peer_eager; /* the peer's eager size (its hello) */
	/* the peer's hello had RMSGI_HELLO_F_PACK: queued small messages
	 * may go to it packed (pack.c) */
	bool peer_pack;
	bool want_writable; /* on_writable is due once the queue has room */
};

/* a connection's one-sided side: mr.c owns the exports, rma.c the
 * refusals of the peer's accesses */
struct rmsgi_conn_rma {
	struct rmsgi_list exports; /* regions exported to this conn (mr.c) */
	unsigned refusals;	   /* the peer's refused one-sided accesses */
	/* the last distinct tokens refused (rma.c): naming one again is
	 * not a new guess */
	uint64_t refused_tok[RMSGI_REFUSED_RECENT];
	unsigned refused_next;
	unsigned refusals_unlogged;
	ev_tstamp refusal_logged;
	/* the peer's exports bound again after a resume (rekey.c); NULL
	 * until one over RDMA */
	struct rmsgi_rekey *rk;
};

struct rmsg_conn {
	struct rmsgi_list link;	      /* ctx->conns */
	struct rmsgi_list dirty_link; /* ctx->dirty */
	struct rmsg_ctx *ctx;
	const struct rmsgi_tr *tr;	      /* the backend, or NULL */
	const struct rmsgi_tr_conn_ops *tops; /* tr->conn */
	void *tr_priv; /* the backend's state; NULL once it is down */
	struct rmsgi_cfgv cfg;
	struct rmsgi_tr_conn_info ti; /* what the backend knows of it */
	struct rmsg_conn_ops ops;
	void *arg;
	enum rmsgi_conn_state state;
	int refs;
	uint32_t id;
	bool is_server;
	bool in_accept;
	bool dirty;
	bool tr_down;  /* transport reported it is gone */
	bool peer_bye; /* the peer said it closes (RMSGI_CREDIT_BYE) */
	bool was_established;
	bool app_accepted; /* the accept callback said yes */
	/* what it connects to (start.c): a client's, kept for its life (a
	 * name resolves from it, a resumable one dials it again) */
	struct rmsgi_uri uri;
	struct rmsgi_fallback *fb; /* auto:// only (start.c) */
	/* its host name being resolved (resolve.c), or NULL */
	struct rmsgi_rsv *rsv;
	struct rmsgi_rpc_conn *rpc; /* calls in flight (rpc.c) */
	struct rmsg_listener *lst;  /* counts against its limits (listener.c) */
	bool lst_pending;	    /* ... as a handshake too */
	bool lst_suspended;	    /* ... as suspended (l->nsuspended) */
	struct rmsgi_live live;	    /* liveness and keepalive (keepalive.h) */
	struct rmsgi_reclaim rcl;   /* a grown grant's return (reclaim.h) */
	int close_reason;
	/* why it closed or was refused, for rmsg_conn_close_reason(): the
	 * first reason given while open (rmsgi_conn_why), else the text of
	 * close_reason as the connection enters CLOSING; fixed from then on,
	 * so that the app may keep the pointer while it holds the handle */
	char why[RMSGI_WHY_MAX];

	struct rmsgi_credit cr;	   /* flow control (credit.h) */
	struct rmsgi_conn_tx tx;   /* the send side (send.c, pack.c) */
	struct rmsgi_conn_rma rma; /* one-sided (mr.c, rma.c) */
	struct rmsgi_list rxq;	   /* received, not yet delivered, in order */
	/* the bound on what the peer may return in all: its hello's
	 * credits, or RMSGI_CREDITS_MAX if its grant grows */
	uint16_t peer_credits;

	struct rmsgi_conn_ep ep; /* handshake data and addresses (conn.c) */
	/* counters (rmsg_conn_stats): plain increments on the loop thread;
	 * added to the context's when the connection leaves it; eager_*
	 * are derived when read (stats.c) */
	struct rmsg_stats st;
	/* authentication (rmsg_cfg_set_psk; auth.c, the AUTH state): set
	 * from the handshake until the peer's proof checked out; every
	 * frame goes to rmsgi_conn_auth_rx() meanwhile */
	bool auth_wait;
	struct rmsgi_auth *auth;  /* only with a key (auth.c) */
	struct rmsgi_session *ss; /* only if resumable (session.c) */
};

/* creation, used by rmsg_connect and rmsgi_tr_incoming */
/* @c goes over backend @tr from now on (its ops, its credit rule) */
void rmsgi_conn_set_tr(struct rmsg_conn *c, const struct rmsgi_tr *tr);
int rmsgi_conn_new(struct rmsg_ctx *ctx, const struct rmsgi_cfgv *cfg,
		   const struct rmsg_conn_ops *ops, void *arg,
		   struct rmsg_conn **c_p);
/* rmsg_connect: picks the backend for @u's scheme and starts it; auto://
 * falls back to TCP here when RDMA cannot even start, and later
 * (rmsgi_conn_ev_failed/ev_down) when it fails to connect. 0, or the
 * negative errno rmsg_connect returns (nothing reported) */
int rmsgi_conn_start(struct rmsg_conn *c, const struct rmsgi_uri *u);
/* auto:// (start.c): the connect failed with @reason (@h: the peer's
 * reply, if it made one); true if TCP is to be tried instead, once the
 * backend is down */
bool rmsgi_fallback_failed(struct rmsg_conn *c, int reason,
			   const struct rmsgi_hello *h);
/* the backend is down: true if TCP took over the connection */
bool rmsgi_fallback_down(struct rmsg_conn *c);
/* the connection is up: a later failure is no auto:// fallback's; a
 * resumable client that is up over TCP after a fallback probes RDMA */
void rmsgi_fallback_done(struct rmsg_conn *c);
/* no probe of RDMA now (the connection suspends or ends) */
void rmsgi_failback_stop(struct rmsg_conn *c);
/* an export to @c made now may be bound to a window at a later resume
 * (rekey.c): its descriptor carries the address, the key comes then */
bool rmsgi_rekey_later(const struct rmsg_conn *c);
/* the connection's auto:// state goes (conn_free) */
void rmsgi_fallback_free(struct rmsg_conn *c);
/* @c is a probe (hidden: no callbacks, no counts); *_probed: its result
 * (@h: the peer's answer) goes to the connection it probed for, once;
 * true if @c is a probe */
bool rmsgi_conn_is_probe(const struct rmsg_conn *c);
/* no event lines for it: a probe, or a probe's answer (their own debug
 * lines say what happened) */
bool rmsgi_conn_quiet(const struct rmsg_conn *c);
bool rmsgi_failback_probed(struct rmsg_conn *c, int reason,
			   const struct rmsgi_hello *h);
/* resume.c: does @h, the answer to @c's probe of @attempt, prove the
 * session? */
bool rmsgi_session_probe_answer(const struct rmsg_conn *c, uint32_t attempt,
				const struct rmsgi_hello *h);
/* session.c: the resume window starts again, @extra_ms longer (a
 * suspend on purpose) */
void rmsgi_session_window_from(struct rmsg_conn *c, unsigned extra_ms);
/* a probe's connection and the attempt it proves (resume.c), or NULL */
const struct rmsg_conn *rmsgi_probe_of(const struct rmsg_conn *c,
				       uint32_t *attempt);
/* why the connection runs on its transport (the scheme, auto:// found
 * RDMA, or why it did not), for the log */
const char *rmsgi_fallback_why(const struct rmsg_conn *c);
/* the longest a resume's dial waits for its transport (start.c) */
#define RMSGI_RESUME_DIAL_MS 1000u
/* how long a local close lingers for posted work and the peer's answers
 * (both backends) */
#define RMSGI_LINGER_MS 2000u

/*
 * What a peer may make us hold. Answers the library generates for a peer
 * (READ_RESP, RNDV_ACK, RPC replies and -ENOSYS answers) are counted per
 * connection (ans_n); an answer holds an op, not a copy. A peer can only
 * send as many frames as we returned credits for; but a CREDIT frame
 * returns them without an answer, and a peer that gives back just the
 * credit it cost could ask for ever while our answers wait. The bound is
 * time (keepalive.c answers_stuck): a queue with answers in it that lets
 * nothing out for the keepalive bound ends the connection.
 */
/* a rendezvous or emulated one-sided op must be answered within the
 * keepalive bound plus its size at this rate (bytes per second) */
#define RMSGI_KA_MIN_RATE (1024.0 * 1024.0)

/* what we grant the peer changes to @credits receive buffers (conn.c):
 * more if the backend backs them (rmsgi_credit_grown), or fewer (the
 * shrink rmsgi_credit_freed made) */
void rmsgi_conn_grant(struct rmsg_conn *c, uint32_t credits);
/* posts what credits and transport room allow; called from the ctx flush */
void rmsgi_conn_flush(struct rmsg_conn *c);
/* rmsg_send with a frame aux value; @unbounded skips the queue bound */
int rmsgi_conn_send(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
		    uint32_t aux, bool unbounded, rmsg_done_cb cb, void *arg);

/* RPC (rpc.c): DATA frames with these aux values carry calls */
#define RMSGI_AUX_RPC_REQ 1
#define RMSGI_AUX_RPC_REP 2
int rmsgi_rpc_rx(struct rmsg_conn *c, struct rmsg_msg *m);
/* replies kept for calls whose callback is still due came over a
 * transport that is gone (session.c, a suspend): their credits are not
 * returned to the next */
void rmsgi_rpc_stale(struct rmsg_conn *c);
void rmsgi_rpc_conn_closed(struct rmsg_conn *c, int reason);
void rmsgi_rpc_conn_free(struct rmsg_conn *c);
void rmsgi_rpc_ctx_fini(struct rmsg_ctx *ctx);

/* keepalive (keepalive.c) */
void rmsgi_keepalive_start(struct rmsg_conn *c);
void rmsgi_keepalive_stop(struct rmsg_conn *c);
/* a CREDIT frame with this aux asks the peer to answer at once */
#define RMSGI_CREDIT_PROBE 1
/* ... and with this one is the last frame of a local close: the peer's
 * on_close then says -ESHUTDOWN, not -ECONNRESET (older peers see a
 * plain CREDIT frame) */
#define RMSGI_CREDIT_BYE 2
/* ... asks the peer to give back id of our grant to it, and with this
 * one gives back id of the peer's grant to us (reclaim.c) */
#define RMSGI_CREDIT_TAKE 3
#define RMSGI_CREDIT_GIVE 4
/* reclaim.c: a grown grant comes back from an idle peer */
void rmsgi_reclaim_start(struct rmsg_conn *c);
void rmsgi_reclaim_stop(struct rmsg_conn *c);
void rmsgi_reclaim_look(struct rmsg_conn *c);
/* the peer asked for @n of ours (TAKE), gave back @n of its (GIVE: 0,
 * or -EPROTO: more than it holds) */
void rmsgi_reclaim_asked(struct rmsg_conn *c, uint64_t n);
int rmsgi_reclaim_given(struct rmsg_conn *c, uint64_t n);
void rmsgi_keepalive_answer(struct rmsg_conn *c);
/* session.c, for keepalive.c: the peer of a resumable connection (c->ss
 * set) acknowledged none of our messages for @bound seconds (@heard: it
 * was heard from within the interval): true, the reason given */
bool rmsgi_session_stuck(struct rmsg_conn *c, ev_tstamp now, double bound,
			 bool heard);
/* ... and its acknowledgements are awaited afresh from @now (our loop
 * stalled: they may be waiting unread) */
void rmsgi_session_mark(struct rmsg_conn *c, ev_tstamp now);
/* what keepalive.c asks of the rest of a connection (conn.c, send.c) */
bool rmsgi_conn_is_established(const struct rmsg_conn *c);
/* established, or suspended (resumable: what is queued goes once it
 * resumes): may the app answer and export on it? */
static inline bool rmsgi_conn_takes_sends(const struct rmsg_conn *c)
{
	return c->state == RMSGI_CS_ESTABLISHED ||
	       c->state == RMSGI_CS_SUSPENDED;
}
/* the transport of an established connection is lost (@reason): a
 * resumable one is suspended (its transport ends), another closes */
void rmsgi_conn_lost(struct rmsg_conn *c, int reason);
/* queues the connection's one CREDIT frame with @aux, unless it is on
 * its way already (that tells the peer too) or @c is not established;
 * true if it was queued */
bool rmsgi_conn_send_credit(struct rmsg_conn *c, uint32_t aux);
/* ... with @id in its header */
bool rmsgi_conn_send_credit_id(struct rmsg_conn *c, uint32_t aux, uint64_t id);
/* our CREDIT frame @op is posted now: it gives back what the peer asked
 * for (rmsgi_reclaim_asked), as much as we can spare; once it went,
 * rmsgi_conn_credit_gave() drops them from our credits */
void rmsgi_conn_credit_give(struct rmsg_conn *c, struct rmsgi_op *op);
void rmsgi_conn_credit_gave(struct rmsg_conn *c, const struct rmsgi_op *op);
/* the oldest rendezvous (or emulated one-sided op) waiting for the
 * peer's answer, or NULL (send.c) */
const struct rmsgi_op *rmsgi_conn_oldest_wait(const struct rmsg_conn *c);

/*
 * Name resolution (resolve.c). rmsgi_resolve() fills @to at once for a
 * numeric host (0), or returns -EINPROGRESS having started a resolver
 * thread for @c's name: the result then comes from the loop, through
 * the context's ev_async, as rmsgi_conn_resolved(); so does -ETIMEDOUT
 * after the connection's timeout. Other negative errnos: nothing
 * started. rmsgi_resolve_cancel() forgets @c's resolution (the thread
 * finishes on its own); rmsgi_resolve_ctx_fini() before the context's
 * ev_async goes: no thread reaches the context after it.
 */
int rmsgi_resolve(struct rmsg_conn *c, const struct rmsgi_uri *u,
		  struct rmsgi_addrs *to);
void rmsgi_resolve_cancel(struct rmsg_conn *c);
void rmsgi_resolve_ctx_fini(struct rmsg_ctx *ctx);
/* conn.c: @c's name resolved (@err 0, @to) or not (@err): connects or
 * fails; from the loop */
void rmsgi_conn_resolved(struct rmsg_conn *c, int err,
			 const struct rmsgi_addrs *to);
/* counters (stats.c): adds @c's to its context's totals, once, when it
 * leaves the context's list */
void rmsgi_stats_fold(struct rmsg_conn *c);

/* cross-thread submission (async.c) */
struct rmsgi_work {
	struct rmsgi_work *next;
	rmsg_work_cb fn;
	void *arg;
	bool heap; /* freed after it ran (rmsg_ctx_submit's) */
};
/* queues @wk (the caller's memory, which @fn may free) on the loop of
 * @a's context from any thread, as rmsg_ctx_submit() does; fails only
 * with -ESHUTDOWN once the context's destroy has closed the queue */
int rmsgi_async_push(struct rmsgi_async *a, struct rmsgi_work *wk);
/* a reference to @ctx's queue that outlives the context (group.c) */
struct rmsgi_async *rmsgi_async_get(struct rmsg_ctx *ctx);
void rmsgi_async_put(struct rmsgi_async *a);
int rmsgi_async_init(struct rmsg_ctx *ctx);
/* closes the queue (pushes fail from here on) and runs what is queued */
void rmsgi_async_fini(struct rmsg_ctx *ctx);
/* drops the context's reference, at the end of its destroy */
void rmsgi_async_free(struct rmsg_ctx *ctx);
/* the destroy has closed the queue (loop thread) */
bool rmsgi_async_closed(const struct rmsg_ctx *ctx);
/* fd mode: the eventfd was drained; runs what is queued (ownloop.c) */
void rmsgi_async_poll(struct rmsg_ctx *ctx);

/* log.c: "ADDR:PORT" or "[ADDR6]:PORT" of @ss, "-" if not an address */
void rmsgi_addr_fmt(const struct sockaddr_storage *ss, char *buf, size_t len);
/* why.c: fixes the close reason as @c starts to close (conn.c's
 * set_state), from its errno unless someone gave one */
void rmsgi_conn_why_fix(struct rmsg_conn *c);
/* why.c: the connection events logged at info (from conn.c, listener.c,
 * auth.c): one line each, "conn=ID event=NAME local=ADDR peer=ADDR" and
 * @fmt's key=value pairs; nothing is formatted below info */
void rmsgi_conn_event(const struct rmsg_conn *c, const char *event,
		      const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* RMSG_INT_H */
