/* SPDX-License-Identifier: MIT */
/*
 * transport.h - the boundary between the core and a transport backend.
 *
 * A backend (transport/rdma/, transport/tcp/) includes this header and the
 * wire codec (proto.h) and nothing else of the library: the core's
 * objects (struct rmsg_ctx, rmsg_listener, rmsg_conn) are opaque to it.
 * It sees
 *  - what a context lends it (struct rmsgi_tr_env) and what a connection
 *    is (struct rmsgi_tr_conn_info), both fixed for their object's life;
 *  - the data it moves (struct rmsgi_op, struct rmsg_msg) and the memory
 *    services it uses (pool.h, rmsgi_mr_pin, the registration hooks);
 *  - three op tables it fills in, one per object (context, listener,
 *    connection), each op's contract stated at its declaration;
 *  - the up-calls into the core (rmsgi_tr_incoming, rmsgi_conn_ev_*,
 *    rmsgi_conn_rx*, rmsgi_conn_op_done, ...), declared at the end.
 * The core reaches a backend only through the registry (registry.c) and
 * these tables; it names no backend.
 *
 * Policy lives in the core, mechanism in the backend: the core decides
 * whether a peer is admitted and accepted and with which status it is
 * refused (the reply hello it fills), whether a close lingers and for how
 * long (disconnect's @linger_ms), which frames are legal (rmsgi_conn_rx,
 * rmsgi_tr_frame_ok), how a header is built from an op (rmsgi_op_hdr) and
 * when auto:// falls back to TCP. A backend moves frames, reports what
 * happened, and never edits a connection's state.
 */
#ifndef RMSG_TRANSPORT_H
#define RMSG_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <ev.h>

#include "rmsg.h"
#include "../list.h"
#include "../pool.h"
#include "../proto.h"
#include "../timer.h"

struct rmsg_ctx;
struct rmsg_conn;
struct rmsg_listener;
struct rmsg_mr;
struct rmsgi_rc_ent;

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
	unsigned credits; /* the most granted to a peer that grows */
	/* granted at the start (rmsgi_credits_start: at most credits) */
	unsigned credits_initial;
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
	/* the pre-shared key (rmsg_cfg_set_psk), psk_len 0: none; the
	 * core's alone, no backend reads it */
	uint8_t psk_len;
	uint8_t psk[64];
	size_t reg_limit;     /* registered bytes per context */
	size_t tcp_rx_limit;  /* TCP large-frame receive memory per context */
	unsigned max_conns;   /* per listener: open and in handshake */
	unsigned max_pending; /* per listener: in handshake */
};

/* the credits a connection grants its peer at the start (the hello's):
 * rmsg_cfg_set_credits_initial, at most rmsg_cfg_set_credits */
static inline unsigned rmsgi_credits_start(const struct rmsgi_cfgv *cfg)
{
	return cfg->credits_initial < cfg->credits ? cfg->credits_initial
						   : cfg->credits;
}

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

/* the one place where librdmacm's -1+errno and verbs' positive errno
 * become the library's negative errno */
int rmsgi_err_cm(int ret);	 /* librdmacm: -1 and errno */
int rmsgi_err_verbs(int ret);	 /* libibverbs: positive errno */
int rmsgi_err_wc(int wc_status); /* enum ibv_wc_status */
/* getaddrinfo()'s EAI_* (@sys_err: errno, for EAI_SYSTEM); a name that
 * does not resolve (no such name, no address, no usable answer) is
 * @unknown: -ENXIO for a connection's host, -EADDRNOTAVAIL for a
 * listener's address */
int rmsgi_err_gai(int gai_err, int sys_err, int unknown);

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

/* the addresses a client connects to, resolved by the core (resolve.c)
 * before any backend starts: in the resolver's order, each with the
 * URI's port; never empty */
#define RMSGI_ADDRS_MAX 8
struct rmsgi_addrs {
	unsigned n; /* 1..RMSGI_ADDRS_MAX */
	socklen_t len[RMSGI_ADDRS_MAX];
	struct sockaddr_storage a[RMSGI_ADDRS_MAX];
};

/* ------------------------------------------------------------------ */
/* operations queued on a connection                                    */

enum rmsgi_op_kind {
	RMSGI_OP_SEND,	/* user message (eager or rendezvous) */
	RMSGI_OP_CTRL,	/* header-only control frame (credit, ack) */
	RMSGI_OP_WRITE, /* one-sided write (type WRITE or WRITE_IMM) */
	RMSGI_OP_READ,	/* one-sided read */
	RMSGI_OP_RESP,	/* TCP: the answer to a peer's read, heap payload */
	/* a PACK frame the core built from several queued messages: to a
	 * backend a frame like a message's (header, payload in iov) */
	RMSGI_OP_PACK,
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
/* the largest descriptor between a frame's header and its payload */
#define RMSGI_OP_PRE_MAX RMSGI_READ_REQ_SIZE

/* how an op goes out, chosen once by the core: when it is queued on an
 * established connection, or, queued before, when the connection becomes
 * established (the backend and the peer's eager size are known then) */
enum rmsgi_op_proto {
	RMSGI_OP_P_NONE,  /* not chosen yet (queued before establishment) */
	RMSGI_OP_P_EAGER, /* one frame with the payload */
	RMSGI_OP_P_RNDV,  /* a RNDV_REQ: the peer reads the payload, RNDV_ACK */
	RMSGI_OP_P_RMA,	  /* native one-sided (RMSGI_TR_CAP_RMA) */
	RMSGI_OP_P_RMA_EMU, /* one-sided in frames; the peer answers */
	RMSGI_OP_P_CTRL,    /* header-only control frame */
	RMSGI_OP_P_DIRECT,  /* the rest of a frame begun inside rmsg_send */
};

/* where an op is; only the core moves it (every move checked and logged,
 * conn_int.h), a backend may read it */
enum rmsgi_op_state {
	RMSGI_OS_NEW,	     /* fresh (rmsgi_op_get) */
	RMSGI_OS_QUEUED,     /* on the connection's send queue */
	RMSGI_OS_POSTED,     /* the transport owns it (rndv: on rndvq too) */
	RMSGI_OS_AWAIT_PEER, /* rndv: the transport is done, the peer not */
	RMSGI_OS_ANSWERED,   /* rndv: the peer answered, the transport not */
	RMSGI_OS_DONE,	     /* finished: callback due; the CREDIT op: idle */
};

struct rmsgi_op {
	struct rmsgi_list link;	 /* sendq, doneq, or the transport's */
	struct rmsgi_list rlink; /* rndvq: waits for the peer's answer */
	uint8_t kind;
	uint8_t type;  /* RMSGI_T_* of the frame */
	uint8_t proto; /* enum rmsgi_op_proto */
	uint8_t state; /* enum rmsgi_op_state */
	/* waits for the peer's answer (proto RNDV or RMA_EMU): RNDV_ACK,
	 * or READ_RESP for a read; set with proto */
	uint8_t rndv;
	uint8_t answer; /* generated for the peer: counted (ans_n) */
	/* a frame's bytes between its header and its payload: an emulated
	 * one-sided op's descriptor, encoded in pre[] by the core when it
	 * chooses RMSGI_OP_P_RMA_EMU; 0 for every other op */
	uint8_t pre_len;
	/* the iovec is local only, not sent: an emulated read's
	 * destination, which the peer's READ_RESP fills */
	uint8_t iov_local;
	int status;
	uint16_t credits; /* piggybacked, set when posted */
	/* the core's alone: counted once as a credit stall (send.c) */
	uint8_t stalled;
	size_t tr_off; /* frame bytes send_direct() already wrote */
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
	uint8_t pre[RMSGI_OP_PRE_MAX]; /* valid for pre_len bytes */
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

/* ------------------------------------------------------------------ */
/* memory services (mr.c)                                               */

#define RMSGI_ACCESS_ALL (RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ)
#define RMSGI_ACCESS_LOCAL_WRITE 0x100 /* the device writes the memory */
/* a registration a memory window may be bound to (no remote rights) */
#define RMSGI_ACCESS_MW_BIND 0x200
/* refusals of a peer's one-sided access that end its connection */
#define RMSGI_REFUSALS_MAX 8
/* resolver threads a context runs at once (resolve.c, rmsg_connect.3) */
#define RMSGI_RESOLVE_THREADS 8
/* distinct refused tokens remembered per connection (rma.c) */
#define RMSGI_REFUSED_RECENT 4

/* how a transport registers memory; @access: RMSG_ACCESS_* and
 * RMSGI_ACCESS_LOCAL_WRITE bits */
struct rmsgi_reg_ops {
	int (*reg)(void *priv, void *addr, size_t len, int access, void **h_p,
		   uint32_t *lkey_p, uint32_t *rkey_p);
	void (*dereg)(void *priv, void *h);
	/* a memory window over [addr, addr+len) of registration @h with
	 * @access, bound to the queue pair of connection @tc (the backend's
	 * state, NULL if it has none): the bind is posted on its send queue
	 * before this returns, so what the app sends later arrives after it.
	 * -EOPNOTSUPP: the device has no type-2 windows; -ENOTCONN */
	int (*bind)(void *priv, void *tc, void *h, void *addr, size_t len,
		    int access, void **w_p, uint32_t *rkey_p);
	/* the window goes (at once, or when its bind completed) */
	void (*unbind)(void *priv, void *w);
	/* is its bind still on the send queue? */
	bool (*bind_pending)(void *priv, void *w);
};

/* a transport that registers memory arrived: registers every region */
void rmsgi_mr_set_reg(struct rmsg_ctx *ctx, const struct rmsgi_reg_ops *ops,
		      void *priv);
/* the transport goes: deregisters every region and cache entry */
void rmsgi_mr_clear_reg(struct rmsg_ctx *ctx);
/* @c ends: every export to it is revoked (a backend calls it before its
 * endpoint goes, so that windows are unbound first) */
void rmsgi_mr_conn_gone(struct rmsg_conn *c);

/* what a local piece of memory is registered through */
struct rmsgi_pin {
	struct rmsg_mr *mr;
	struct rmsgi_rc_ent *ent;
	void *h; /* a short-lived registration's handle (reg ops), or NULL */
};

/* keys for local memory [addr, addr+len): from a region of the app or a
 * short-lived registration; @need: RMSG_ACCESS_REMOTE_READ if the peer
 * reads it (rendezvous), RMSGI_ACCESS_LOCAL_WRITE if the device writes it
 * (read target); the pin is released with rmsgi_mr_unpin() */
int rmsgi_mr_pin(struct rmsg_ctx *ctx, const void *addr, size_t len, int need,
		 struct rmsgi_pin *pin, uint32_t *lkey_p, uint32_t *rkey_p);
void rmsgi_mr_unpin(struct rmsg_ctx *ctx, struct rmsgi_pin *pin);
/* the largest export @c's peer may reach with @access (its own and the
 * any-peer ones; 0 without one) */
size_t rmsgi_mr_conn_max_len(const struct rmsg_conn *c, int access);

/* ------------------------------------------------------------------ */
/* what the core lends a backend                                        */

/* per context, fixed for its life (rmsgi_ctx_env) */
struct rmsgi_tr_env {
	struct rmsg_ctx *ctx; /* opaque: for up-calls and logging */
	struct ev_loop *loop;
	const struct rmsgi_cfgv *cfg;
	struct rmsgi_pool *pool; /* registered buffers */
	int log_max;		 /* rmsgi_log_max(cfg) */
	/* a private loop's deadlines (timer.h): NULL on the app's loop */
	struct rmsgi_timers *timers;
};

const struct rmsgi_tr_env *rmsgi_ctx_env(struct rmsg_ctx *ctx);
/* the backend's per-context state, NULL until it sets it */
void **rmsgi_ctx_tr_slot(struct rmsg_ctx *ctx, unsigned tr_id);

/* debug lines on hot paths test the level before the call */
#define rmsgi_tr_dbg(env, ...)                                              \
	do {                                                                \
		if ((env)->log_max >= RMSG_LOG_DEBUG)                       \
			rmsgi_log((env)->ctx, RMSG_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

/* per connection, fixed for its life (rmsgi_conn_info); valid until the
 * backend's rmsgi_conn_ev_down() or rmsgi_conn_discard() */
struct rmsgi_tr_conn_info {
	struct rmsg_ctx *ctx;
	const struct rmsgi_cfgv *cfg;
	uint32_t id; /* for log lines: "conn %u" */
	bool is_server;
};

/* ------------------------------------------------------------------ */
/* the op tables                                                        */

/* capabilities */
#define RMSGI_TR_CAP_RNDV 0x1 /* large messages go by rendezvous read */
/* one-sided ops are native: write and read consume no receive (no
 * credit) and complete without the peer's acknowledgement. Without it
 * the core sends them as frames (credit each) that the peer acknowledges
 * (RNDV_ACK for writes, READ_RESP for reads). post() of a one-sided op
 * may fail with -EINVAL, -EACCES or -ENOMEM: only that op fails. */
#define RMSGI_TR_CAP_RMA 0x2

/*
 * Context ops. @tctx is the backend's per-context state (its slot,
 * rmsgi_ctx_tr_slot), which the backend creates on first use (a listen or
 * a connect); the core calls these only while the slot is set.
 */
struct rmsgi_tr_ctx_ops {
	/* the context goes, first step: ends every listener and connection
	 * (every posted op completed, every connection reported down,
	 * synchronously) but keeps what messages it handed up use, so the
	 * callbacks the core then runs may still release them. NULL: fini
	 * does it all. */
	void (*stop)(void *tctx);
	/* the context goes: aborts whatever is left (as stop), frees the
	 * state and clears the slot. Never blocks for long. */
	void (*fini)(void *tctx);
	/* polls completions without blocking and returns how many ran;
	 * with @arm, also re-arms event notification before the loop sleeps
	 * (then polls once more, closing the notify race). May call back
	 * into the core (the up-calls below). NULL if purely event driven. */
	int (*poll)(void *tctx, bool arm);
};

/*
 * Listener ops. A backend listener reports peers with rmsgi_tr_incoming()
 * and never calls the app.
 */
struct rmsgi_tr_listener_ops {
	/* listens on @u (u->port 0: any; *port_p: the port it got) for the
	 * core's listener @l, which it passes to rmsgi_tr_incoming(). 0 and
	 * *tl_p, or a negative errno with nothing left behind. Resolves
	 * numerically or from local files; does not call back. */
	int (*listen)(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		      const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p);
	/* stops listening and frees @tl; connections it reported live on.
	 * Does not call back. */
	void (*close)(void *tl);
	/*
	 * Group listeners (rmsg_listen_group, src/group.c). For a listener
	 * whose rmsgi_tr_group() is true the backend does not make a
	 * connection of a new peer: it detaches the peer from its context
	 * (@h: what it needs to go on, owning no state of the context and
	 * bound to no thread: TCP a socket, RDMA a cm id moved off the
	 * context's event channel, with the peer's hello decoded) and gives
	 * @h to rmsgi_tr_handoff(). The core then calls exactly one of
	 * adopt() and drop() for @h, possibly on another thread. May be
	 * NULL both: the backend serves no group (-EOPNOTSUPP).
	 */
	/* on @ctx's thread: @h becomes a connection of @ctx for the core's
	 * listener @l, exactly as a peer of listen() does (through
	 * rmsgi_tr_incoming() on @l; every outcome reported by the
	 * up-calls; a failure here refuses the peer, with rmsgi_conn_discard
	 * once the core made a connection). The backend keeps no pointer to
	 * @l: a later rmsgi_conn_ev_request() passes NULL (the core uses the
	 * listener @c counts against). Frees @h. */
	void (*adopt)(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *h);
	/* on any thread: refuses the peer @h with @refusal (sent as the
	 * backend sends a refusal) and frees @h. Touches no context. */
	void (*drop)(void *h, const struct rmsgi_hello *refusal);
};

/*
 * Connection ops. @tc is the backend's state for one connection, which it
 * hands to the core with rmsgi_conn_set_tc() (client) or
 * rmsgi_tr_incoming() (server). The core calls none of them after the
 * backend's rmsgi_conn_ev_down() or rmsgi_conn_discard().
 */
struct rmsgi_tr_conn_ops {
	/* client: starts connecting and the hello for @c, whose fixed facts
	 * are @ci, to the addresses @to (the core resolved u->host: the
	 * backend never resolves a name and never blocks; @to is valid
	 * only during the call). TCP tries them in order; RDMA takes the
	 * first of the ?src= address's family (any without one). None of
	 * that family: the failure is -EHOSTUNREACH. @u gives the ?src=
	 * address (u->src_len 0: none) and the names for log lines.
	 * Returns 0 once started (having called rmsgi_conn_set_tc()); from
	 * then on every outcome is reported through the up-calls, from the
	 * loop or from inside this call (a failure found at once:
	 * rmsgi_conn_ev_failed + ev_down). A negative errno (no device, no
	 * memory, no socket) means nothing started and nothing was
	 * reported: the core may try another backend. */
	int (*connect)(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		       const struct rmsgi_uri *u, const struct rmsgi_addrs *to);
	/* a local close (the core's decision): with @linger_ms > 0 what was
	 * posted (the BYE last) still goes out and the peer's answers still
	 * come in, for at most that long; with 0, at once. Either way the
	 * backend completes every posted op and ends in
	 * rmsgi_conn_ev_down(), now or later; no ev_failed. */
	void (*disconnect)(void *tc, unsigned linger_ms);
	/* hands over @op (rules in "Posting" below). 0, -EAGAIN (no room:
	 * rmsgi_conn_tr_room() follows), -ENOMEM or, for one-sided ops,
	 * -EINVAL/-EACCES (only this op fails, nothing posted). May not call
	 * back into the core. */
	int (*post)(void *tc, struct rmsgi_op *op);
	/* May be NULL. An idle connection's first send of a loop iteration
	 * may be written inside rmsg_send() without an op (TCP writes it to
	 * the socket, RDMA posts it inline): writes the frame @h + @iov now
	 * if nothing is queued ahead of it. Returns the bytes written: the
	 * whole frame (done), 0 (nothing written: post() it as usual), or a
	 * part; then the caller posts it as an op whose tr_off says how much
	 * already left. A negative errno means the connection failed; the
	 * backend reports it later, from the loop. Does not call back. */
	ssize_t (*send_direct)(void *tc, const struct rmsgi_hdr *h,
			       const struct iovec *iov, int iovcnt);
	/* with send_direct: the largest payload it takes on this
	 * established connection, so that larger sends skip the attempt */
	size_t (*direct_max)(const void *tc);
	/* end of a batch of post() calls: ring the doorbell; may be NULL.
	 * May report a failure (the up-calls) but completes no op. */
	void (*kick)(void *tc);
	/* a rendezvous send was acknowledged: release what post() pinned.
	 * May be NULL (a backend without RMSGI_TR_CAP_RNDV). */
	void (*rndv_release)(void *tc, struct rmsgi_op *op);
	/* the connection's own address (@local) and its peer's (@peer), each
	 * an AF_INET or AF_INET6 address with its port, as the endpoint has
	 * them now (the socket's getsockname/getpeername, the cm id's
	 * addresses): 0 with both written, or a negative errno with neither
	 * written (-ENOTCONN: the endpoint has none, or not both;
	 * -EAFNOSUPPORT: they are not IP addresses). The core calls it on a
	 * server connection inside rmsgi_conn_ev_request(), before the
	 * accept callback, and on both sides inside
	 * rmsgi_conn_ev_established(); it keeps what it got
	 * (rmsg_conn_peer_addr), so a backend need not keep them after its
	 * endpoint goes. Required. Never blocks; does not call back. */
	int (*addrs)(void *tc, struct sockaddr_storage *local,
		     struct sockaddr_storage *peer);
	/* May be NULL: the backend backs any grant (TCP reads each frame
	 * into memory of its own). The core changes what it grants the
	 * peer on this established connection to @credits receive buffers
	 * (the start, rmsgi_credits_start(), the backend set up itself for
	 * the hello). Above the current grant it asks for more: the backend
	 * returns the grant it backs from now on, between the current one
	 * and @credits (what its shared receive queue, the device's limits
	 * and the registration budget allow; the current one: none to
	 * spare). Below it, the peer can no longer use the difference and
	 * the backend may take those buffers back; it returns @credits.
	 * Never fails the connection; does not call back. */
	uint32_t (*grant)(void *tc, uint32_t credits);
	/* May be NULL: the backend checks no one-sided access itself (TCP:
	 * rmsgi_mr_target() does, in the core, by state). Opens this
	 * connection's endpoint to the peer's one-sided operations: until
	 * then a backend whose device checks keys (RDMA) keeps the peer
	 * from reaching any export, any-peer ones included, while the
	 * pre-shared key is not proven. The core calls it once the proof
	 * is complete, before it tells the peer so. 0, or a negative errno
	 * (the connection then fails). Does not call back. */
	int (*rma_open)(void *tc);
};

/*
 * Posting. post() is called only for an established connection, with a
 * credit already taken for frames that land in a peer's receive buffer.
 *  - Every op accepted by post() is completed exactly once with
 *    rmsgi_conn_op_done(), also when the connection fails (status
 *    -ECANCELED on a local close, else the failure).
 *  - A failure or a peer disconnect is reported once with
 *    rmsgi_conn_ev_failed(); after every posted op has completed and the
 *    endpoint is released, the backend calls rmsgi_conn_ev_down().
 *  - Received frames go to rmsgi_conn_rx() in order, with a struct
 *    rmsg_msg whose free_fn gives the buffer back and calls
 *    rmsgi_conn_credit_freed() for a buffer that carried a credit.
 *  - A rendezvous request whose payload finds no memory at the receiver
 *    still goes to rmsgi_conn_rx() (not ready), then at once to
 *    rmsgi_conn_rx_ready() with -ENOMEM: that message fails, the
 *    connection does not.
 */

/* a backend: its name (rmsg_conn_transport), registry id, capabilities
 * and op tables; the registry (registry.c) lists every backend */
struct rmsgi_tr {
	const char *name;
	unsigned id; /* index in the registry, RMSGI_TR_* */
	unsigned caps;
	const struct rmsgi_tr_ctx_ops *ctx;
	const struct rmsgi_tr_listener_ops *lst;
	const struct rmsgi_tr_conn_ops *conn;
};

enum rmsgi_tr_id {
	RMSGI_TR_RDMA = 0,
	RMSGI_TR_TCP = 1,
	RMSGI_TR_COUNT = 2,
};

/* ------------------------------------------------------------------ */
/* up-calls: from a backend into the core                               */

/*
 * Server side, a peer knocks on the core's listener @l through backend
 * @tr (whose state for the new connection is @tc). The core admits it
 * against the listener's limits and makes a connection the app does not
 * see yet. Returns 0, *c_p and *ci_p; or a negative errno, having filled
 * @refusal: the hello the backend sends before it drops the peer.
 * Does not call the app.
 */
int rmsgi_tr_incoming(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      void *tc, struct rmsg_conn **c_p,
		      const struct rmsgi_tr_conn_info **ci_p,
		      struct rmsgi_hello *refusal);
/* is @l a group listener (rmsg_listen_group)? Then its backends hand
 * new peers to rmsgi_tr_handoff() (see the listener ops' adopt/drop) */
bool rmsgi_tr_group(const struct rmsg_listener *l);
/* a peer at @peer knocked on the group listener @l (on its home's
 * thread): the core picks a context and takes @h; it calls @tr's adopt()
 * for it there (at once, inside this call, for the home) or drop(),
 * exactly once either way. Does not call the app, the pick callback
 * aside. */
void rmsgi_tr_handoff(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      const struct sockaddr *peer, void *h);
/* the peer's hello @h arrived at the server: validates it and asks the
 * app (the accept callback runs inside). Fills @reply, the hello to
 * answer with (status 0: accepted; else the refusal's status), and
 * returns 0 if accepted (the backend then finishes the handshake and
 * reports established) or a negative errno (the backend sends @reply
 * and drops the connection, with rmsgi_conn_discard() or as a failure:
 * ev_failed and ev_down; the app hears nothing either way). @l NULL:
 * the listener @c counts against (an adopted peer's); none left (it
 * closed): refused with -ECONNABORTED. */
int rmsgi_conn_ev_request(struct rmsg_conn *c, struct rmsg_listener *l,
			  const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply);
/* the hello that refuses @c with @err (clamped to an errno: the app's
 * odd values read -ECONNREFUSED), for a backend that fails a server
 * connection before or after rmsgi_conn_ev_request() */
void rmsgi_conn_refusal(const struct rmsg_conn *c, int err,
			struct rmsgi_hello *reply);
/* client: the backend's state for @c, before any other up-call */
void rmsgi_conn_set_tc(struct rmsg_conn *c, void *tc);
/* fills the hello this side sends (status 0); a server accepting a key
 * holder: with the flag and its nonce, as the accepting reply needs */
void rmsgi_conn_hello(const struct rmsg_conn *c, struct rmsgi_hello *h);
/* the handshake finished; client: the peer accepted with @h (validated
 * here), server: @h is NULL. Calls the app's on_established. */
void rmsgi_conn_ev_established(struct rmsg_conn *c,
			       const struct rmsgi_hello *h);
/* the backend failed or the peer left; @reason is a negative errno.
 * @h carries a reject's private data if any. The backend still owns its
 * posted ops and completes them before calling rmsgi_conn_ev_down().
 * Idempotent. */
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
/* instead of ev_down for a server connection the app never saw
 * (refused, or failed before the accept): no callbacks */
void rmsgi_conn_discard(struct rmsg_conn *c);
/* does the peer still owe answers (rendezvous reads, emulated one-sided
 * ops)? A lingering close waits for them */
bool rmsgi_conn_awaits_peer(const struct rmsg_conn *c);
/* a posted op finished (status 0 or -errno) */
void rmsgi_conn_op_done(struct rmsg_conn *c, struct rmsgi_op *op, int status);
/* a frame arrived; @m->ready says whether its payload is complete; the
 * backend has decoded the header (rmsgi_hdr_decode). Returns 0, or a
 * negative errno: the core closes the connection with it (-EPROTO: an
 * illegal frame; -ENOMEM: no memory to unpack a PACK frame). */
int rmsgi_conn_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *m);
/* is a frame of type @type legal on an open connection of a backend with
 * @caps? (the handshake's frames, and RDMA-only frames over a backend
 * without them, are not). The core's rule, inline: it runs per frame */
static inline bool rmsgi_tr_frame_ok(unsigned caps, uint8_t type)
{
	switch (type) {
	case RMSGI_T_DATA:
	case RMSGI_T_PACK: /* the core checks its entries */
	case RMSGI_T_CREDIT:
	case RMSGI_T_RNDV_ACK:
		return true;
	case RMSGI_T_AUTH: /* the core checks it is authenticating */
		return true;
	case RMSGI_T_RNDV_REQ:
		return caps & RMSGI_TR_CAP_RNDV;
	case RMSGI_T_IMM: /* the immediate of a native split write */
		return caps & RMSGI_TR_CAP_RMA;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
	case RMSGI_T_READ_REQ:
	case RMSGI_T_READ_RESP:
		/* one-sided ops emulated in frames */
		return !(caps & RMSGI_TR_CAP_RMA);
	default: /* the handshake's, and unknown types */
		return false;
	}
}
/* a rendezvous payload read into @m is complete (or failed). -ENOMEM:
 * the backend found no memory for the payload and read nothing; only
 * this message fails (the peer's send completes with -ENOMEM) and the
 * connection stays up. Any other failure closes the connection. */
void rmsgi_conn_rx_ready(struct rmsg_conn *c, struct rmsg_msg *m, int status);
/* the backend has room to post again */
void rmsgi_conn_tr_room(struct rmsg_conn *c);
/* a receive buffer whose credit belongs to @c went back to the peer */
void rmsgi_conn_credit_freed(struct rmsg_conn *c);
/* may the backend buffer a frame of @len payload bytes on @c now? To be
 * asked from the header, before the body is read. While the peer has not
 * proven the pre-shared key (rmsg_cfg_set_psk) only the handshake's AUTH
 * frame fits (RMSGI_AUTH_MAX bytes). Returns 1: yes, and any frame the
 * header decode passes from now on (the answer never changes back, the
 * backend may stop asking); 0: yes, this one; -EACCES: no (logged and
 * counted): the backend ends the connection with it, payload unread.
 * Frames of other types are refused by rmsgi_conn_rx() before the proof. */
int rmsgi_conn_rx_admit(struct rmsg_conn *c, size_t len);
/* the peer counts as heard from now (e.g. the backend stopped reading
 * it: its silence from here on is our doing) */
void rmsgi_conn_heard(struct rmsg_conn *c);
/* part of a large frame arrived (@got of its payload so far): the peer
 * is alive if it advanced by RMSGI_KA_PROGRESS since the last call */
void rmsgi_conn_rx_progress(struct rmsg_conn *c, size_t got);
/* a frame in progress counts as life only while it advances this much
 * per keepalive interval */
#define RMSGI_KA_PROGRESS ((size_t)64 << 10)
/* closes from inside the library with @reason (e.g. -EPROTO) */
void rmsgi_conn_abort(struct rmsg_conn *c, int reason);
/* references that keep @c's memory while a backend holds it in a buffer
 * (a message's conn) */
void rmsgi_conn_get(struct rmsg_conn *c);
void rmsgi_conn_put(struct rmsg_conn *c);
/* runs the core's queued work now (after a backend's own event) */
void rmsgi_ctx_flush(struct rmsg_ctx *ctx);

/* the frame header an op goes out with (type, aux, id, credits, length
 * of payload and descriptors); one place for every backend, inline: it
 * runs per frame */
static inline void rmsgi_op_hdr(const struct rmsgi_op *op, struct rmsgi_hdr *h)
{
	h->type = op->type;
	h->flags = 0;
	h->credits = op->credits;
	h->aux = op->aux;
	/* emulated one-sided ops: the descriptor, and a write's bytes */
	h->len = op->pre_len + (op->iov_local ? 0 : op->len);
	h->id = op->id;
}

#endif /* RMSG_TRANSPORT_H */
