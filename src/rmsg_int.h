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
#include "list.h"
#include "proto.h"
#include "credit.h"

#define RMSGI_ALIGN(x, a) (((x) + ((a)-1)) & ~((size_t)(a)-1))
#define RMSGI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RMSGI_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RMSGI_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RMSGI_CONTAINER_OF(p, type, member) \
	((type *)((char *)(p)-offsetof(type, member)))
#define RMSGI_LIKELY(x) __builtin_expect(!!(x), 1)
#define RMSGI_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* configuration values, copied into every object that uses them */
struct rmsgi_cfgv {
	size_t eager_size;
	size_t max_msg_size;
	unsigned credits;
	unsigned send_queue;
	unsigned busy_poll_us;
	unsigned timeout_ms;
	unsigned keepalive_ms;	   /* 0: off */
	unsigned keepalive_misses; /* silent intervals before death */
	int log_level;
	rmsg_log_cb log_fn;
	void *log_arg;
	uint8_t pdata[RMSG_PRIVATE_DATA_MAX];
	uint8_t pdata_len;
	size_t reg_limit;     /* registered bytes per context */
	size_t tcp_rx_limit;  /* TCP large-frame receive memory per context */
	unsigned max_conns;   /* per listener: open and in handshake */
	unsigned max_pending; /* per listener: in handshake */
};

struct rmsg_cfg {
	struct rmsgi_cfgv v;
};

void rmsgi_cfg_defaults(struct rmsgi_cfgv *v);

/* ------------------------------------------------------------------ */
/* logging (log.c) and errors (err.c)                                   */

void rmsgi_log(const struct rmsg_ctx *ctx, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define rmsgi_err(ctx, ...) rmsgi_log(ctx, RMSG_LOG_ERROR, __VA_ARGS__)
#define rmsgi_warn(ctx, ...) rmsgi_log(ctx, RMSG_LOG_WARN, __VA_ARGS__)
#define rmsgi_info(ctx, ...) rmsgi_log(ctx, RMSG_LOG_INFO, __VA_ARGS__)
/* the level a context logs up to: its cfg, or RMSG_LOG from the
 * environment; debug lines on hot paths test it before the call */
int rmsgi_log_max(const struct rmsgi_cfgv *cfg);
#define rmsgi_dbg(ctx, ...)                                          \
	do {                                                         \
		if ((ctx)->log_max >= RMSG_LOG_DEBUG)                \
			rmsgi_log(ctx, RMSG_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

/* the one place where librdmacm's -1+errno and verbs' positive errno
 * become the library's negative errno */
int rmsgi_err_cm(int ret);	 /* librdmacm: -1 and errno */
int rmsgi_err_verbs(int ret);	 /* libibverbs: positive errno */
int rmsgi_err_wc(int wc_status); /* enum ibv_wc_status */

/* ------------------------------------------------------------------ */
/* URIs (uri.c)                                                         */

enum rmsgi_scheme {
	RMSGI_SCHEME_RDMA,
	RMSGI_SCHEME_TCP,
	RMSGI_SCHEME_AUTO
};

struct rmsgi_uri {
	enum rmsgi_scheme scheme;
	char host[256];
	uint16_t port;
	/* "?src=ADDR": numeric source address a connection binds to
	 * (port 0); src_len is 0 without one */
	struct sockaddr_storage src;
	socklen_t src_len;
};

int rmsgi_uri_parse(const char *uri, struct rmsgi_uri *u);

/* ------------------------------------------------------------------ */
/* operations queued on a connection                                    */

enum rmsgi_op_kind {
	RMSGI_OP_SEND,	/* user message (eager or rendezvous) */
	RMSGI_OP_CTRL,	/* header-only control frame (credit, ack) */
	RMSGI_OP_WRITE, /* one-sided write (type WRITE or WRITE_IMM) */
	RMSGI_OP_READ,	/* one-sided read */
	RMSGI_OP_RESP,	/* TCP: the answer to a peer's read, heap payload */
};

/* the remote side of a one-sided op, from the peer's descriptor */
struct rmsgi_op_rma {
	uint64_t addr;	/* remote address of byte 0 (RDMA) */
	uint64_t off;	/* offset in the export */
	uint64_t token; /* the export (TCP) */
	uint32_t rkey;
	bool has_rkey;
};

#define RMSGI_OP_IOV_INLINE 4

struct rmsgi_op {
	struct rmsgi_list link;	 /* sendq, doneq, or the transport's */
	struct rmsgi_list rlink; /* rndvq: waits for the peer's answer */
	uint8_t kind;
	uint8_t type;	/* RMSGI_T_* of the frame */
	uint8_t rndv;	/* sent as rendezvous, waits for RNDV_ACK */
	uint8_t posted; /* the transport owns it */
	uint8_t acked;	/* rendezvous acknowledged or failed */
	uint8_t answer; /* generated for the peer: counts in c->ans_n */
	int status;
	uint16_t credits; /* piggybacked, set when posted */
	size_t tr_off;	  /* frame bytes send_direct() already wrote */
	uint32_t aux;
	uint64_t id; /* rendezvous cookie */
	size_t len;  /* payload bytes */
	struct rmsgi_op_rma rma;
	int iovcnt;
	struct iovec *iov; /* points to iov_inline or heap */
	struct iovec iov_inline[RMSGI_OP_IOV_INLINE];
	rmsg_done_cb cb;
	void *arg;
	void *tr_priv; /* transport state: copy buffer, MRs, ... */
};

/* ------------------------------------------------------------------ */
/* received messages (msg.c)                                            */

struct rmsg_msg {
	struct rmsgi_list link; /* conn's in-order receive queue */
	struct rmsg_conn *conn;
	const uint8_t *data;
	size_t len;
	uint8_t type;
	uint8_t ready; /* payload complete (rendezvous read done) */
	uint8_t held;
	uint8_t in_cb;
	/* set by a transport that takes the message back itself once
	 * rmsgi_conn_rx() returns; conn.c, done with it before that, clears
	 * it and returns the credit instead of calling free_fn. Still set
	 * on return: the app holds it (the transport then clears it, and
	 * free_fn runs on release). */
	uint8_t lent;
	uint32_t aux;
	uint64_t id;
	/* gives the memory back to the transport that owns it */
	void (*free_fn)(struct rmsg_msg *m);
	void *tr_priv;
};

/* ------------------------------------------------------------------ */
/* transports                                                           */

#include "transport/transport.h"

/* ------------------------------------------------------------------ */
/* memory regions and the registration cache (mr.c)                     */

#define RMSGI_DESC_MAGIC 0xa8
/* 2: per-connection exports; a 64-bit token, offsets relative to the
 * export, no address on TCP */
#define RMSGI_DESC_VERSION 2
#define RMSGI_DESC_F_RKEY 0x1 /* rkey and addr are valid (RDMA) */
#define RMSGI_ACCESS_ALL (RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ)
#define RMSGI_ACCESS_LOCAL_WRITE 0x100 /* the device writes the memory */
/* a registration a memory window may be bound to (no remote rights) */
#define RMSGI_ACCESS_MW_BIND 0x200
/* refusals of a peer's one-sided access that end its connection */
#define RMSGI_REFUSALS_MAX 8

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

/* how a transport registers memory; @access: RMSG_ACCESS_* and
 * RMSGI_ACCESS_LOCAL_WRITE bits */
struct rmsgi_reg_ops {
	int (*reg)(void *priv, void *addr, size_t len, int access, void **h_p,
		   uint32_t *lkey_p, uint32_t *rkey_p);
	void (*dereg)(void *priv, void *h);
	/* a memory window over [addr, addr+len) of registration @h with
	 * @access, bound to @c's queue pair: the bind is posted on its send
	 * queue before this returns, so what the app sends on @c later
	 * arrives after it. -EOPNOTSUPP: the device has no type-2 windows */
	int (*bind)(void *priv, struct rmsg_conn *c, void *h, void *addr,
		    size_t len, int access, void **w_p, uint32_t *rkey_p);
	/* the window goes (at once, or when its bind completed) */
	void (*unbind)(void *priv, void *w);
	/* is its bind still on the send queue? */
	bool (*bind_pending)(void *priv, void *w);
};

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

/* what a local piece of memory is registered through */
struct rmsgi_pin {
	struct rmsg_mr *mr;
	struct rmsgi_rc_ent *ent;
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
/* a transport that registers memory arrived: registers every region */
void rmsgi_mr_set_reg(struct rmsg_ctx *ctx, const struct rmsgi_reg_ops *ops,
		      void *priv);
/* the transport goes: deregisters every region and cache entry */
void rmsgi_mr_clear_reg(struct rmsg_ctx *ctx);
/* a peer's access on @c through export @token: 0 and the memory, or
 * -EACCES (no such export, exported to another connection, or rights),
 * -EINVAL (bounds of the export). With @mr_p the region is kept busy
 * (rmsg_mr_dereg: -EBUSY) until rmsgi_mr_unbusy() */
int rmsgi_mr_target(struct rmsg_conn *c, uint64_t token, uint64_t off,
		    uint64_t len, int access, uint8_t **p,
		    struct rmsg_mr **mr_p);
void rmsgi_mr_unbusy(struct rmsg_ctx *ctx, struct rmsg_mr *mr);
/* @c ends: every export to it is revoked */
void rmsgi_mr_conn_gone(struct rmsg_conn *c);
/* keys for local memory [addr, addr+len): from a region of the app or a
 * short-lived registration; @need: RMSG_ACCESS_REMOTE_READ if the peer
 * reads it (rendezvous), RMSGI_ACCESS_LOCAL_WRITE if the device writes it
 * (read target); the pin is released with rmsgi_mr_unpin() */
/* the largest region granting @access (0 without one) */
size_t rmsgi_mr_max_len(const struct rmsg_ctx *ctx, int access);
int rmsgi_mr_pin(struct rmsg_ctx *ctx, const void *addr, size_t len, int need,
		 struct rmsgi_pin *pin, uint32_t *lkey_p, uint32_t *rkey_p);
void rmsgi_mr_unpin(struct rmsg_ctx *ctx, struct rmsgi_pin *pin);
/* the context's budget of registered bytes (cfg reg_limit), shared by
 * regions, the registration cache and the pools: -ENOMEM, logged with
 * the limit, when @bytes do not fit even after idle pool slabs went */
int rmsgi_budget_take(struct rmsg_ctx *ctx, size_t bytes);
void rmsgi_budget_give(struct rmsg_ctx *ctx, size_t bytes);

/* ------------------------------------------------------------------ */
/* context (ctx.c)                                                      */

struct rmsgi_pool;

struct rmsg_ctx {
	struct ev_loop *loop;
	struct rmsgi_cfgv cfg;
	int log_max;		 /* rmsgi_log_max(&cfg) */
	ev_prepare prepare;	 /* flushes queues before the loop blocks */
	ev_idle idle;		 /* keeps the loop turning while work remains */
	struct rmsgi_list conns; /* every live connection */
	struct rmsgi_list listeners;
	struct rmsgi_list dirty; /* connections with queued work */
	struct rmsgi_pool *pool;
	void *tr_priv[RMSGI_TR_COUNT]; /* per-transport context state */
	struct rmsgi_list op_free;     /* recycled struct rmsgi_op */
	unsigned op_free_len;
	int in_cb; /* depth of user callbacks on the stack */
	bool destroying;
	struct rmsgi_rpc_ctx *rpc; /* RPC handlers (rpc.c) */
	struct rmsgi_async *async; /* cross-thread queue (async.c) */
	bool flushing;
	uint32_t next_conn_id;
	struct rmsgi_mrtab mrt;
};

/* op objects, recycled per context */
struct rmsgi_op *rmsgi_op_get(struct rmsg_ctx *ctx);
void rmsgi_op_put(struct rmsg_ctx *ctx, struct rmsgi_op *op);

/* marks @c as having queued work; flushed before the loop blocks */
void rmsgi_ctx_mark_dirty(struct rmsg_ctx *ctx, struct rmsg_conn *c);
/* runs one flush pass; used by busy polling too */
void rmsgi_ctx_flush(struct rmsg_ctx *ctx);

/* ------------------------------------------------------------------ */
/* listeners (listener.c)                                               */

struct rmsg_listener {
	struct rmsgi_list link;
	struct rmsg_ctx *ctx;
	struct rmsgi_cfgv cfg;
	struct rmsg_conn_ops ops;
	rmsg_accept_cb accept;
	void *arg;
	const struct rmsgi_tr_ops *tr[RMSGI_TR_COUNT]; /* listening backends */
	void *tr_priv[RMSGI_TR_COUNT];
	uint16_t port;
	unsigned nconns;   /* connections counted against cfg.max_conns */
	unsigned npending; /* of which in handshake (cfg.max_pending) */
	uint64_t refused;  /* connections refused over a limit */
};

/* may @l take one more connection? 0, or -EUSERS (max_conns) or -EAGAIN
 * (max_pending), counted and logged (rate-limited) */
int rmsgi_listener_admit(struct rmsg_listener *l);
/* @c, just created for @l, counts against its limits until it ends */
void rmsgi_listener_attach(struct rmsg_listener *l, struct rmsg_conn *c);
/* @c changes state: its handshake or its life may end */
void rmsgi_listener_track(struct rmsg_conn *c, int state);

/* ------------------------------------------------------------------ */
/* connections (conn.c): the one state machine                          */

enum rmsgi_conn_state {
	RMSGI_CS_CONNECTING,  /* client: transport handshake running */
	RMSGI_CS_ACCEPTING,   /* server: app accepted, handshake finishing */
	RMSGI_CS_ESTABLISHED, /* messages flow */
	RMSGI_CS_CLOSING,     /* local close: transport tearing down */
	RMSGI_CS_CLOSED,      /* on_close delivered; waits for last ref */
};

struct rmsg_conn {
	struct rmsgi_list link;	      /* ctx->conns */
	struct rmsgi_list dirty_link; /* ctx->dirty */
	struct rmsg_ctx *ctx;
	const struct rmsgi_tr_ops *tr;
	void *tr_priv;
	struct rmsgi_cfgv cfg;
	struct rmsg_conn_ops ops;
	void *arg;
	enum rmsgi_conn_state state;
	/* rmsg_send may write a message of fewer bytes than this inside the
	 * call (send_direct); 0 outside ESTABLISHED or on a transport
	 * without send_direct. Follows state (set_state). */
	size_t direct_lim;
	int refs;
	uint32_t id;
	bool is_server;
	bool in_accept;
	bool want_writable;
	bool dirty;
	bool tr_down;  /* transport reported it is gone */
	bool peer_bye; /* the peer said it closes (RMSGI_CREDIT_BYE) */
	bool was_established;
	bool app_accepted;  /* the accept callback said yes */
	bool auto_fallback; /* auto://: TCP if RDMA cannot connect */
	bool fallback_pending;
	int fallback_reason; /* why RDMA was not used, or 0 */
	struct rmsgi_uri auto_uri;
	struct rmsgi_rpc_conn *rpc; /* calls in flight (rpc.c) */
	struct rmsg_listener *lst;  /* counts against its limits (listener.c) */
	bool lst_pending;	    /* ... as a handshake too */
	ev_timer ka;		    /* keepalive (keepalive.c) */
	bool ka_on;
	ev_tstamp last_rx, last_tx, ka_tick;
	/* answers generated for the peer (READ_RESP, RNDV_ACK, RPC replies)
	 * queued or posted (see "What a peer may make us hold" below) */
	unsigned ans_n;
	ev_tstamp rndv_mark; /* rndvq last moved (an answer, or first op) */
	size_t ka_mark;	     /* payload bytes of a large frame at last life */
	bool credit_op_busy; /* the CREDIT frame is queued or posted */
	int close_reason;
	struct rmsgi_op credit_op;

	struct rmsgi_credit cr;
	struct rmsgi_list sendq; /* ops not yet handed to the transport */
	unsigned sendq_len;	 /* user ops queued or posted, not completed */
	struct rmsgi_list rndvq; /* rendezvous sends waiting for ACK */
	struct rmsgi_list rxq;	 /* received, not yet delivered, in order */
	struct rmsgi_list exports; /* regions exported to this conn (mr.c) */
	unsigned refusals;	   /* the peer's refused one-sided accesses */
	unsigned refusals_unlogged;
	ev_tstamp refusal_logged;
	struct rmsgi_list doneq; /* completed ops whose cb is due */
	uint64_t next_rndv_id;
	uint32_t peer_eager;
	uint16_t peer_credits;

	uint8_t peer_pdata[RMSG_PRIVATE_DATA_MAX];
	uint8_t peer_pdata_len;
	uint8_t my_pdata[RMSG_PRIVATE_DATA_MAX]; /* accept/reject reply */
	uint8_t my_pdata_len;
};

/* creation, used by rmsg_connect and by listener backends */
int rmsgi_conn_new(struct rmsg_ctx *ctx, const struct rmsgi_cfgv *cfg,
		   const struct rmsg_conn_ops *ops, void *arg,
		   struct rmsg_conn **c_p);
void rmsgi_conn_get(struct rmsg_conn *c);
void rmsgi_conn_discard(struct rmsg_conn *c);
void rmsgi_conn_put(struct rmsg_conn *c);

/* fills the handshake this side sends */
void rmsgi_conn_hello(const struct rmsg_conn *c, struct rmsgi_hello *h);

/*
 * Events from a transport into the state machine.
 */
/* server side: a peer asks to connect with @h; asks the app. Returns 0 if
 * accepted (transport then finishes the handshake and reports
 * established), or the negative errno the app rejected with. */
int rmsgi_conn_ev_request(struct rmsg_conn *c, struct rmsg_listener *l,
			  const struct rmsgi_hello *h);
/* client side: the peer accepted with @h (NULL if it was carried before) */
void rmsgi_conn_ev_established(struct rmsg_conn *c,
			       const struct rmsgi_hello *h);
/* the transport failed or the peer left; @reason is a negative errno.
 * @h carries a reject's private data if any. The transport still owns its
 * posted ops and completes them before calling rmsgi_conn_ev_down(). */
void rmsgi_conn_ev_failed(struct rmsg_conn *c, int reason,
			  const struct rmsgi_hello *h);
/* the transport has completed every posted op and released the endpoint */
void rmsgi_conn_ev_down(struct rmsg_conn *c);
/* does the peer still owe answers (rendezvous reads, emulated one-sided
 * ops)? A local close lingers for them */
bool rmsgi_conn_awaits_peer(const struct rmsg_conn *c);
/* a posted op finished (status 0 or -errno) */
void rmsgi_conn_op_done(struct rmsg_conn *c, struct rmsgi_op *op, int status);
/* a frame arrived; @m->ready says whether its payload is complete; the
 * caller has validated the header. Returns 0, or -EPROTO to close. */
int rmsgi_conn_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *m);
/* a rendezvous payload read into @m is complete (or failed). -ENOMEM:
 * the transport found no memory for the payload and read nothing; only
 * this message fails (the peer's send completes with -ENOMEM) and the
 * connection stays up. Any other failure closes the connection. */
void rmsgi_conn_rx_ready(struct rmsg_conn *c, struct rmsg_msg *m, int status);
/* the transport has room to post again */
void rmsgi_conn_tr_room(struct rmsg_conn *c);
/* a receive buffer whose credit belongs to @c went back to the peer */
void rmsgi_conn_credit_freed(struct rmsg_conn *c);
/* the peer counts as heard from now (e.g. the transport stopped reading
 * it: its silence from here on is our doing) */
void rmsgi_conn_heard(struct rmsg_conn *c);
/* part of a large frame arrived (@got of its payload so far): the peer
 * is alive if it advanced by RMSGI_KA_PROGRESS since the last call */
void rmsgi_conn_rx_progress(struct rmsg_conn *c, size_t got);

/*
 * What a peer may make us hold. Answers the library generates for a peer
 * (READ_RESP, RNDV_ACK, RPC replies and -ENOSYS answers) are counted per
 * connection (ans_n). A peer can only send as many frames as we returned
 * credits for, and we return them only in frames we post; the transport
 * takes a bounded number of posted frames (TCP: 4096 frames or 4 MiB
 * queued; RDMA: its send ring), and an answer holds an op, not a copy:
 * ans_n stays below the credits x (1 + frames the transport queues).
 */
/* a frame in progress counts as life only while it advances this much
 * per keepalive interval */
#define RMSGI_KA_PROGRESS ((size_t)64 << 10)
/* a rendezvous or emulated one-sided op must be answered within the
 * keepalive bound plus its size at this rate (bytes per second) */
#define RMSGI_KA_MIN_RATE (1024.0 * 1024.0)

/* posts what credits and transport room allow; called from the ctx flush */
void rmsgi_conn_flush(struct rmsg_conn *c);
/* closes from inside the library with @reason (e.g. -EPROTO) */
void rmsgi_conn_abort(struct rmsg_conn *c, int reason);
/* rmsg_send with a frame aux value; @unbounded skips the queue bound */
int rmsgi_conn_send(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
		    uint32_t aux, bool unbounded, rmsg_done_cb cb, void *arg);

/* RPC (rpc.c): DATA frames with these aux values carry calls */
#define RMSGI_AUX_RPC_REQ 1
#define RMSGI_AUX_RPC_REP 2
int rmsgi_rpc_rx(struct rmsg_conn *c, struct rmsg_msg *m);
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
void rmsgi_keepalive_answer(struct rmsg_conn *c);
/* keepalive.c acts on a connection only through these (conn.c) */
bool rmsgi_conn_is_established(const struct rmsg_conn *c);
/* queues the connection's one CREDIT frame with @aux, unless it is on
 * its way already (that tells the peer too) or @c is not established */
void rmsgi_conn_send_credit(struct rmsg_conn *c, uint32_t aux);
/* the peer counts as heard from, and we as having spoken, at @now */
void rmsgi_conn_ka_begin(struct rmsg_conn *c, ev_tstamp now);
/* the loop stalled: the silence so far proves nothing; restarts the
 * windows of the peer's silence and of its unanswered rendezvous */
void rmsgi_conn_ka_stalled(struct rmsg_conn *c, ev_tstamp now);
/* the oldest rendezvous (or emulated one-sided op) waiting for the
 * peer's answer, or NULL; @since: when the queue last moved */
const struct rmsgi_op *rmsgi_conn_oldest_wait(const struct rmsg_conn *c,
					      ev_tstamp *since);
/* how long the peer has been silent by its own doing at @now: while it
 * cannot talk because our app holds every message it sent (no credit
 * left, none to return) its silence restarts */
ev_tstamp rmsgi_conn_rx_idle(struct rmsg_conn *c, ev_tstamp now);
/* how long since we last posted a frame, at @now */
ev_tstamp rmsgi_conn_tx_idle(const struct rmsg_conn *c, ev_tstamp now);

/* cross-thread submission (async.c) */
int rmsgi_async_init(struct rmsg_ctx *ctx);
void rmsgi_async_fini(struct rmsg_ctx *ctx);

/* text of why auto:// fell back to TCP */
const char *rmsgi_fallback_text(int reason);

/* message objects (msg.c); runs for every received frame */
static inline void rmsgi_msg_init(struct rmsg_msg *m, struct rmsg_conn *c,
				  const void *data, size_t len)
{
	rmsgi_list_init(&m->link);
	m->conn = c;
	m->data = data;
	m->len = len;
	m->ready = 1;
	m->held = 0;
	m->in_cb = 0;
	m->lent = 0;
}

#endif /* RMSG_INT_H */
