/* SPDX-License-Identifier: MIT */
/*
 * rdma.h - the rdma_cm + verbs RC backend (transport/rdma/): its private
 * header, the only one its files include (with system headers). It holds
 * the constants, the objects, the prototypes that cross files and the
 * helpers that hot paths of several files inline.
 *
 * Per context: one event channel (ev_io), and on the first device seen one
 * PD and one completion channel (ev_io); then receive groups (struct
 * rdma_rxq), each a CQ and an SRQ, made as connections need them: a new
 * connection's QP goes on a group with room, and a group has room while
 * its SRQ can take the connection's credits (plus RX_SPARE) and its CQ
 * can take every completion its QPs and SRQ can make at once (SRQ size
 * plus SQ_DEPTH per QP: a QP that fails flushes its whole send queue, and
 * a CQ overrun would take every QP on it down). No group with room and
 * no new one allowed (the device's max_cq or max_srq, the registration
 * budget): the connection fails with -ENOBUFS, and the log says
 * which limit. Receive buffers are carved from the registered pool; each
 * SRQ always holds at least as many buffers as the credits granted to
 * its live peers, plus RX_SPARE, so a peer that keeps to its credits
 * never meets RNR while the others do.
 * A connection starts with the few credits of rmsgi_credits_start() and
 * the core grows or shrinks its grant with use (rdma_grant_op): the SRQ
 * follows, growth as far as its size and the registration budget allow,
 * and buffers beyond the target are not reposted but kept; chunks of
 * them wholly kept go back to the budget, all but one (rdma_rx_sweep).
 * A peer that sends beyond its credits could still drain the shared SRQ
 * (the device takes its frames before the library sees them): conn.c
 * counts every frame against the credits granted and returned
 * (rmsgi_conn_rx), and the first frame beyond them closes the connection
 * with -EPROTO; until then the others' sends wait out RNR (rnr_retry 6
 * with the RNR timer MIN_RNR_TIMER we advertise: ~1.5 s) instead of
 * failing.
 *
 * Per connection: an RC QP on the shared CQ/SRQ and a ring of send slots.
 * post() fills a slot; kick() posts the new slots as one chain with only
 * the last one signalled (and every SIG_EVERY-th), so a burst costs one
 * doorbell and one completion. A signalled completion retires every slot
 * before it, in order. The ring's storage follows use (send.c): 16 slots
 * and their registered header slots at first, doubled when a post needs
 * more, up to the QP's depth, and halved again after RING_IDLE_MS in
 * which no more than half of it was used. The QP's own send queue cannot
 * follow: verbs fix its depth at creation (rxe refuses IBV_QP_CAP in
 * ibv_modify_qp, in INIT as in RTS: docs/performance.md).
 *
 * Rendezvous: the sender registers its pieces (through the registration
 * cache of mr.c, without remote rights), binds a type-2 memory window
 * for remote read over each on this connection's QP, and sends their
 * segments (a piece over SEG_MAX bytes in several) after the binds,
 * which kick() posts only onto an empty send queue (rxe executes a bind
 * again when a SEND before it is retransmitted, and a type-2 window's
 * second bind fails); the receiver reads them (split at the device's message size limit) into a
 * pool buffer and then acknowledges, and the windows go. No other
 * connection can read them.
 * What a connection reads at a time is bounded by its share of the
 * context's registered-memory budget (rndv_share): a request that does
 * not fit waits, in order, holding its receive buffer (and so the peer's
 * credit) until the reads before it are done; with nothing else being
 * read, one message up to the share of a single connection (reg_limit /
 * 2, rndv_alone) may start however many connections are open, so idle
 * connections do not lower the largest message accepted. One larger
 * than that fails alone with -ENOMEM, as when the pool has no memory.
 *
 * Exports (mr.c): a per-connection export is a type-2 window bound on
 * the connection's QP by a work request in its ring, so everything the
 * app sends on that connection afterwards (the descriptor) is ordered
 * after the bind. The app's regions are registered with local rights and
 * MW_BIND only.
 *
 * One-sided ops: RDMA WRITE (WITH_IMM) and READ work requests straight
 * from and into the caller's iovec, split at the device's message size
 * and SGE limits. While one op is being posted piece by piece nothing
 * else is posted, so ops stay in order. A write-with-immediate that needs
 * one work request is exactly that; a longer one is plain writes followed
 * by an IMM frame (SEND) that carries the immediate and the total length,
 * which RC orders after the writes. The library itself uses no immediate
 * data: every IBV_WC_RECV_RDMA_WITH_IMM is the app's.
 *
 * The files, by concern:
 *  rdma.c      the op tables, what the core reaches (registry.c)
 *  dev.c       the context and its device: event channel, PD, CQ, SRQ
 *              (filled as peers are granted credits); the context's end
 *  mem.c       registration hooks (the pool's, mr.c's) and type-2 memory
 *              windows (exports, rendezvous pieces)
 *  cm.c        connection management: resolve, connect, listen, a peer's
 *              request, the connection's timer, rdma_cm events,
 *              the cm id's addresses (addrs)
 *  qp.c        the connection's QP: ours, not rdma_cm's, moved through
 *              its states by the library, remote rights only as the key
 *              allows; the RNR timer once up
 *  send.c      the send ring: post (eager and rendezvous), send_direct,
 *              kick, and the retirement of completed slots
 *  recv.c      receiving: the CQ drain, eager frames, buffer reposts,
 *              rendezvous receives (reads, quarantine)
 *  rma.c       one-sided operations (RDMA WRITE, WRITE_WITH_IMM, READ)
 *  teardown.c  the end of a connection: linger, drain, the reaper
 */
#ifndef RMSG_TRANSPORT_RDMA_H
#define RMSG_TRANSPORT_RDMA_H

#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#include "../transport.h"

#define SQ_DEPTH 128
/* the QP's send queue: one less than the ring, so that a provider that
 * adds a slot and rounds up to a power of two (rxe: its queue is mapped
 * into the process, all of it resident) makes 128 slots, not 256 (64 KiB
 * less per connection on rxe, measured); the ring never holds more */
#define SQ_MAX_WR (SQ_DEPTH - 1)
/* the ring's storage (slots and registered header slots) starts at
 * RING_MIN slots and doubles with use up to SQ_DEPTH; a ring that
 * needed no more than half of it for RING_IDLE_MS shrinks back
 * (send.c: rdma_ring_grow, ring_timer_cb) */
#define RING_MIN 16
#define RING_GROWTHS 3 /* log2(SQ_DEPTH / RING_MIN) */
#define RING_IDLE_MS 1000
#define SIG_EVERY 16
#define MAX_SGE 16
#define REPOST_BATCH 16
#define RD_ATOM_MAX 16
#define ACK_TIMEOUT 16 /* 4.096 us * 2^16: ~0.27 s per retry */
#define RETRY_COUNT 6  /* 7 would retry forever on rxe */
#define TEARDOWN_MS 2000
/* rendezvous for large messages, native one-sided operations */
#define RDMA_CAPS \
	(RMSGI_TR_CAP_RNDV | RMSGI_TR_CAP_RMA | RMSGI_TR_CAP_CREDIT_LATE)
/*
 * Address resolution runs in slices, retried until the connection's own
 * timeout. The kernel (seen on 6.1) can miss a neighbour reply that
 * arrives before it queued the request (a veth peer answers at once);
 * the request then sleeps for its whole timeout although the neighbour
 * is known. A short slice makes it look again soon.
 */
#define RESOLVE_SLICE_MS 500
/* receive buffers each SRQ holds beyond the credits granted */
#define RX_SPARE 32
/* a receive group's SRQ: at most this many receives (the device's
 * max_srq_wr if lower); its CQ is sized for it and RXQ_CONNS QPs */
#define RXQ_SRQ_WR 4095
#define RXQ_CONNS 96
/* (4095 and 4095 + 96 x 128 = 16383 entries: a provider that adds one
 * and rounds up to a power of two, as rxe does for the queues it maps
 * into the process, makes 4096 and 16384) */
/* the peer's RNR NAKs wait 245.76 ms (IB encoding 29) before a retry;
 * with RNR_RETRY 6 a sender meeting our empty SRQ gives up after ~1.5 s,
 * long enough to outlast a flooding peer (closed at its first frame
 * beyond its credits) draining it. The rdma_cm default (0) means 655 ms */
#define MIN_RNR_TIMER 29
/* finite: 7 would retry forever, and a raw peer that grants credits but
 * never posts receives would stall our sends while its CREDIT frames
 * keep keepalive happy. A hostile receiver's own timer (at most 655 ms)
 * bounds the wait to ~4 s. */
#define RNR_RETRY 6
/* largest segment of a rendezvous request (the wire's length is u32) */
#define SEG_MAX ((uint64_t)1 << 31)
#define QPN_BUCKETS 256
/* send wr_ids carry this bit over a ring counter; receive wr_ids are
 * buffer addresses, which never have it in user space */
#define SEND_TAG ((uint64_t)1 << 63)
/* a freed rendezvous message's object stays this many frees (its payload
 * goes at once): a second rmsg_msg_release() of it finds it not held */
#define RNDV_QUARANTINE 256

struct rdma_ctx;
struct rdma_conn;

/* a receive group: a CQ and an SRQ, shared by up to RXQ_CONNS QPs */
struct rdma_rxq {
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	uint32_t srq_max;
	uint32_t srq_posted;
	uint32_t srq_target; /* sum of credits granted to its live peers */
	uint32_t cqe;	     /* the CQ's entries */
	uint32_t cq_used;    /* reserved: srq_max + SQ_DEPTH per QP */
	uint32_t cq_events;  /* to acknowledge in batches */
	uint32_t nconns;
	struct rxbuf *repost; /* released, waiting for the next batch */
	uint32_t repost_n;
};

/* one receive buffer of an SRQ; the message object lives inside it */
struct rxbuf {
	struct rmsg_msg m;
	struct rxbuf *next;
	struct rdma_ctx *r;
	struct rdma_rxq *q; /* the group whose SRQ it was posted to */
	struct rx_chunk *ch;
	uint8_t *buf;
	uint32_t lkey;
};

/* receive buffers carved at once from a slab of their own (dev.c) */
struct rx_chunk {
	uint32_t cnt, nfree;   /* buffers; of them in rdma_ctx.rx_free */
	bool dying, cold;      /* memory to the pool; idle at a look */
	struct rx_chunk *next; /* in rdma_ctx.rx_spare */
	struct rxbuf rbs[];
};

/* a rendezvous receive: read segments into buf, then deliver */
struct rndv_rx {
	struct rmsg_msg m;
	struct rdma_ctx *r; /* outlives the connection if held */
	uint8_t *buf;
	uint32_t lkey;
	uint32_t nseg;
	uint32_t seg_idx; /* next segment to read */
	uint64_t seg_off; /* offset in it */
	uint64_t dst_off;
	uint32_t reads_out;
	int status;
	bool charged;	   /* counted in the conn's rndv_bytes */
	struct rxbuf *req; /* its request's buffer, until reads start */
	struct rndv_rx *next_pending;
	struct rmsgi_quar_ent q; /* freed: rdma_ctx.rq (rndv_rx_free) */
	struct rmsgi_seg segs[];
};

/*
 * A type-2 memory window (an export's, or one rendezvous piece's with the
 * piece's pin). Its bind is a slot in the ring; while that slot has not
 * retired the window cannot go (the bind would then fail and take the
 * QP down), so a release before that only marks it dead.
 */
struct rdma_mw {
	struct rmsgi_list link; /* its connection's windows, while bound */
	struct rmsg_ctx *ctx;
	struct ibv_mw *mw; /* NULL: a pin with remote rights only */
	struct rmsgi_pin pin;
	bool pinned;
	bool pending; /* bind slot not retired */
	bool dead;    /* released while pending */
	void *copy;   /* gathered pieces (rndv_prepare), freed once unpinned */
};

/* rendezvous pieces with more windows than this at once are registered
 * with remote read rights instead (any QP of the PD could read them) */
#define RNDV_MW_MAX 64

/* a rendezvous send: what the peer may read, until it acknowledges */
struct rndv_tx {
	int n;
	struct rdma_mw *w[];
};

/* a one-sided op being posted: where the next work request starts */
struct rma_tx {
	int idx;       /* iov piece */
	size_t ioff;   /* offset in it */
	uint64_t done; /* bytes posted */
	bool started;  /* a work request went */
	bool split;    /* write-with-immediate ends with an IMM frame */
	int npin;
	uint32_t *lkey; /* per iov piece */
	struct rmsgi_pin pin[];
};

enum slot_kind {
	SLOT_SEND,
	SLOT_READ,
	SLOT_RMA,  /* a one-sided work request; op set on its last */
	SLOT_BIND, /* binds a memory window (mw) */
};

struct sq_slot {
	struct rmsgi_op *op;
	struct rndv_rx *rx;
	struct rdma_mw *mw;
	void *copybuf;
	uint8_t kind;
	uint8_t signaled;
	uint8_t is_read; /* SLOT_RMA: counts in reads_out */
	struct ibv_send_wr wr;
	struct ibv_sge sge[MAX_SGE + 1];
};

/* LINGER: a local close waits for posted work to finish before the QP
 * goes to error, so messages handed to the device still arrive */
enum rc_state {
	RC_RESOLVING,
	RC_CONNECTING,
	RC_UP,
	RC_LINGER,
	RC_DRAINING,
	RC_DEAD,
};

struct rdma_conn {
	struct rmsg_conn *c; /* the core's, for up-calls */
	const struct rmsgi_tr_conn_info *ci;
	uint32_t peer_eager; /* from the peer's hello, clamped */
	unsigned linger_ms;  /* the core's bound for a local close */
	bool is_server;
	struct rdma_ctx *r;
	struct rdma_rxq *q; /* its receive group, once the QP is made */
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	struct rdma_conn *hnext; /* qpn hash chain */
	enum rc_state state;
	uint32_t qpn;
	uint32_t granted;     /* receive buffers this conn added to its SRQ */
	struct sq_slot *ring; /* cap slots; slot i at i & (cap - 1) */
	uint32_t cap;	      /* RING_MIN..SQ_DEPTH, a power of two */
	bool ring_busy;	      /* used more than half of it since the check */
	uint8_t *hdrs; /* registered header slots, 64 B each, cap of them */
	uint32_t hdrs_lkey;
	/* a grown ring's old header slots: posted work may still read
	 * those of hdrs_old[k] until the slot before hdrs_old_until[k]
	 * retires; one per growth at most (16 -> 128 is 3 of them), as a
	 * ring shrinks only when empty */
	uint8_t *hdrs_old[RING_GROWTHS];
	uint32_t hdrs_old_until[RING_GROWTHS];
	uint8_t nold;
	struct rmsgi_timer ring_timer; /* the shrink check, while grown */
	bool ring_timer_on;
	uint32_t head;	   /* next slot to fill */
	uint32_t unposted; /* first filled slot not yet posted */
	uint32_t tail;	   /* oldest slot not yet retired */
	uint32_t since_sig;
	uint32_t reads_out;
	uint64_t rndv_bytes; /* rendezvous buffers being read into */
	uint32_t max_inline;
	uint32_t max_sge;
	struct rndv_rx *pending_reads, *pending_tail;
	struct rmsgi_op *rma_op;  /* one-sided op still being posted */
	struct rmsgi_list mws;	  /* memory windows bound on the QP */
	struct rmsgi_timer timer; /* connect bound, then teardown bound */
	bool timer_on;
	bool room_wanted;
	bool rma_open; /* the QP's remote rights granted (qp.c) */
	bool silent;   /* rejected before the app saw it */
	bool buried;   /* torn down, on the context's reaper: only memory */
	struct rmsgi_reap reap;
};

struct rdma_listener {
	struct rmsgi_list link; /* rdma_ctx.listeners */
	struct rdma_ctx *r;
	struct rdma_cm_id *id;	      /* NULL: its device was removed */
	struct rmsg_listener *l;      /* the core's, for rmsgi_tr_incoming */
	struct sockaddr_storage addr; /* bound (with the port) */
};

struct rdma_ctx {
	struct rmsg_ctx *ctx; /* opaque: up-calls, logs */
	/* written over both ends of each rendezvous read's destination
	 * before it is posted (recv.c, rndv_unwritten) */
	uint64_t canary;
	const struct rmsgi_tr_env *env;
	struct rmsgi_list listeners;
	struct rdma_event_channel *ech;
	ev_io cm_io;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	ev_io cq_io;
	struct rdma_rxq **q; /* receive groups, nq of them */
	uint32_t nq;
	uint32_t q_srq_wr; /* a group's SRQ size */
	uint32_t q_cqe;	   /* a group's CQ size */
	uint32_t q_max;	   /* groups at most: the device's max_cq, max_srq */
	bool q_full_said;  /* the limit was logged */
	bool mw_ok;	   /* type-2 memory windows (2A or 2B) */
	uint64_t max_msg_sz;
	uint32_t rd_atom;
	size_t eager;
	size_t stride;
	struct rxbuf *rx_free;	   /* allocated, not posted */
	uint32_t rx_idle;	   /* chunks whose buffers are all there */
	struct rx_chunk *rx_spare; /* memory gone: for the next carve */
	ev_tstamp sweep_next;	   /* rdma_rx_sweep looks from then on */
	/* freed rendezvous messages, oldest first (RNDV_QUARANTINE) */
	struct rmsgi_quar rq;
	void **rx_chunks; /* pairs: the pool buffer, its struct rx_chunk */
	uint32_t nchunks;
	struct rdma_conn *qpn_hash[QPN_BUCKETS];
	uint32_t nconns;
	/* the device was removed (DEVICE_REMOVAL): no connection starts
	 * on it, and what the context holds on it goes once its
	 * connections are down (dev.c: rdma_dev_lost) */
	bool lost;
	struct rmsgi_timer lost_t;
	/* listeners whose device was removed listen again once an RDMA
	 * device serves their address (dev.c) */
	struct rmsgi_timer relisten_t;
	/* a removed device's receive groups (no CQ, no SRQ) and buffer
	 * chunks: held messages may still name them; freed at the end */
	struct rdma_rxq **q_dead;
	uint32_t nq_dead;
	void **dead_chunks;
	uint32_t ndead;
};

/* the backend (rdma.c) */
extern const struct rmsgi_tr rmsgi_tr_rdma;

/* ------------------------------------------------------------------ */
/* qpn -> connection                                                    */

static inline void qpn_add(struct rdma_ctx *r, struct rdma_conn *rc)
{
	struct rdma_conn **b = &r->qpn_hash[rc->qpn % QPN_BUCKETS];

	rc->hnext = *b;
	*b = rc;
}

static inline void qpn_del(struct rdma_ctx *r, struct rdma_conn *rc)
{
	struct rdma_conn **p = &r->qpn_hash[rc->qpn % QPN_BUCKETS];

	for (; *p; p = &(*p)->hnext)
		if (*p == rc) {
			*p = rc->hnext;
			return;
		}
}

static inline struct rdma_conn *qpn_find(struct rdma_ctx *r, uint32_t qpn)
{
	struct rdma_conn *rc = r->qpn_hash[qpn % QPN_BUCKETS];

	while (rc && rc->qpn != qpn)
		rc = rc->hnext;
	return rc;
}

/* ------------------------------------------------------------------ */
/* dev.c: the context and its device                                    */

/* the context's state, made on first use (a listen or a connect) */
int rdma_ctx_get(struct rmsg_ctx *ctx, struct rdma_ctx **r_p);
/* PD, completion channel, CQ and SRQ on the first device seen; the
 * pool's and mr.c's registration hooks */
int rdma_dev_open(struct rdma_ctx *r, struct ibv_context *verbs);
/* adds buffers to the group's SRQ until it holds its target */
int rdma_srq_fill(struct rdma_ctx *r, struct rdma_rxq *q);
/* a receive buffer kept unposted, and one taken to be posted */
void rx_free_push(struct rdma_ctx *r, struct rxbuf *rb);
struct rxbuf *rx_free_pop(struct rdma_ctx *r);
/* a receive group with room for a connection granting @credits (made if
 * none has room and the limits allow): 0 and *q_p, counted in its
 * nconns and cq_used; -ENOBUFS at the limits, or another errno */
int rdma_rxq_get(struct rdma_ctx *r, uint32_t credits, struct rdma_rxq **q_p);
/* a connection left group @q */
void rdma_rxq_put(struct rdma_rxq *q);
/* conn op: the connection's share of the SRQ follows the core's grant */
uint32_t rdma_grant_op(void *p, uint32_t credits);
/* cm.c: a listening id for @rl bound to @sa (with its port), the device
 * that serves it opened; 0, or rl->id NULL and the error */
int rdma_rl_listen(struct rdma_listener *rl, const struct sockaddr *sa);
/* a DEVICE_REMOVAL event for the context's device: its listeners stop
 * taking RDMA connections, no connection starts on it, and once its
 * connections are down everything held on it is released, so that the
 * kernel can finish the removal (rxe cannot take a device from a process
 * that holds it) and a device added later can be opened */
void rdma_dev_lost(struct rdma_ctx *r);
/* ctx op */
void rdma_ctx_stop(void *p);
void rdma_ctx_fini(void *p);

/* ------------------------------------------------------------------ */
/* mem.c: registrations and memory windows                              */

extern const struct rmsgi_pool_reg rdma_pool_reg_ops;
extern const struct rmsgi_reg_ops rdma_mr_reg_ops;

/* the window goes now, then its pin and its copy */
void rdma_mw_free(struct rdma_mw *w);
/* a ring slot binding a new window for @access on @rc's QP; the caller
 * kicks */
int rdma_mw_bind_slot(struct rdma_conn *rc, struct rdma_mw *w,
		      struct ibv_mr *mr, void *addr, size_t len, int access,
		      uint32_t *rkey_p);

/* the peer loses access now, or as soon as the bind has retired */
static inline void mw_release(struct rdma_mw *w)
{
	if (w->pending)
		w->dead = true;
	else
		rdma_mw_free(w);
}

/* the bind slot of @w retired (or was dropped unposted) */
static inline void mw_bind_retired(struct rdma_mw *w)
{
	w->pending = false;
	if (w->dead)
		rdma_mw_free(w);
}

/* ------------------------------------------------------------------ */
/* cm.c: connection management                                          */

/* the event channel's watcher: handles every pending rdma_cm event */
void rdma_cm_cb(struct ev_loop *loop, ev_io *w, int revents);
/* (re)starts the connection's timer: @ms from now */
void rdma_rc_timer(struct rdma_conn *rc, unsigned ms);

/* ------------------------------------------------------------------ */
/* qp.c: the connection's queue pair                                    */

/* the QP on a receive group (INIT), header slots, the first credits */
int rdma_qp_setup(struct rdma_conn *rc);
/* INIT, RTR, RTS with rdma_cm's attributes (@p: the server's read
 * depths, NULL on the client); remote rights only without a key */
int rdma_qp_ready(struct rdma_conn *rc, const struct rdma_conn_param *p);
/* the connection is up (RC_UP), its RNR timer set */
void rdma_rc_up(struct rdma_conn *rc);
/* conn op rma_open: gives the QP its remote rights (qp.c) */
int rdma_rma_open_op(void *tc);

/* ------------------------------------------------------------------ */
/* cm.c, continued                                                      */

/* conn and listener ops */
int rdma_connect_op(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		    const struct rmsgi_uri *u, const struct rmsgi_addrs *to);
int rdma_addrs_op(void *p, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer);
void rdma_rebind_op(void *p, struct rmsg_conn *c,
		    const struct rmsgi_tr_conn_info *ci);
int rdma_listen_op(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		   const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p);
void rdma_listen_close(void *p);
/* group listeners: listener ops adopt and drop (transport.h) */
void rdma_adopt_op(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *p);
void rdma_drop_op(void *p, const struct rmsgi_hello *refusal);

static inline void rc_timer_stop(struct rdma_conn *rc)
{
	if (!rc->timer_on)
		return;
	ev_ref(rc->r->env->loop);
	rmsgi_timer_stop(rc->r->env->loop, &rc->timer);
	rc->timer_on = false;
}

/* ------------------------------------------------------------------ */
/* send.c: the send ring                                                */

/* retires slots up to and including @upto (a signalled completion) */
void rdma_rc_retire(struct rdma_conn *rc, uint32_t upto, int status);
/* conn ops */
int rdma_post(void *p, struct rmsgi_op *op);
ssize_t rdma_send_direct(void *p, const struct rmsgi_hdr *h,
			 const struct iovec *iov, int iovcnt);
size_t rdma_direct_max(const void *p);
void rdma_kick(void *p);
void rdma_rndv_release(void *p, struct rmsgi_op *op);

static inline uint32_t ring_used(const struct rdma_conn *rc)
{
	return rc->head - rc->tail;
}

static inline struct sq_slot *ring_slot(const struct rdma_conn *rc, uint32_t i)
{
	return &rc->ring[i & (rc->cap - 1)];
}

/* slot i's registered header slot */
static inline uint8_t *ring_hdr(const struct rdma_conn *rc, uint32_t i)
{
	return rc->hdrs + (size_t)(i & (rc->cap - 1)) * 64;
}

/* grows the ring to hold @want slots (at most SQ_DEPTH): 0 or -ENOMEM */
int rdma_ring_grow(struct rdma_conn *rc, uint32_t want);
/* the ring's storage at RING_MIN (rdma_qp_setup) */
int rdma_ring_init(struct rdma_conn *rc);
/* frees the ring's storage (the QP is gone) */
void rdma_ring_free(struct rdma_conn *rc);

/* storage for @n more slots, growing the ring if it has not */
static inline bool ring_fits(struct rdma_conn *rc, uint32_t n)
{
	uint32_t want = ring_used(rc) + n;

	if (RMSGI_LIKELY(want <= rc->cap / 2))
		return true;
	rc->ring_busy = true;
	return want <= rc->cap || !rdma_ring_grow(rc, want);
}

static inline struct sq_slot *slot_fill(struct rdma_conn *rc, uint8_t kind)
{
	struct sq_slot *s = ring_slot(rc, rc->head);

	memset(s, 0, offsetof(struct sq_slot, sge));
	s->kind = kind;
	s->wr.wr_id = SEND_TAG | rc->head;
	s->wr.sg_list = s->sge;
	rc->head++;
	return s;
}

/* ------------------------------------------------------------------ */
/* recv.c: receiving                                                    */

/* polls the CQ empty: receives handled, send slots retired; returns how
 * many completions ran */
int rdma_cq_drain(struct rdma_ctx *r);
/* the completion channel's watcher */
void rdma_cq_cb(struct ev_loop *loop, ev_io *w, int revents);
/* frees the quarantined rendezvous messages (the context's end) */
void rdma_rndv_quarantine_clear(struct rdma_ctx *r);
/* ctx op */
int rdma_poll(void *p, bool arm);

/*
 * A read the device completed without writing a byte of it: seen on rxe
 * (Linux 6.1, Soft-RoCE under load) about once in 15 runs of a stream
 * with large messages, the destination exactly as before the read (its
 * parameters right, its completion a success), and the queue pair
 * misbehaving after it. The canary written over both ends of the
 * destination before the read is still there: the read fails with -EIO
 * (a resumable connection suspends and goes on over a new queue pair;
 * another ends with -EIO), never a message of stale bytes. A peer whose
 * data equals the context's random canary at both ends breaks only its
 * own connection.
 */
static inline void rndv_canary_set(const struct rdma_ctx *r, uint8_t *dst,
				   uint32_t len)
{
	if (len < 16)
		return;
	memcpy(dst, &r->canary, 8);
	memcpy(dst + len - 8, &r->canary, 8);
}

static inline bool rndv_unwritten(const struct rdma_ctx *r, const uint8_t *dst,
				  uint32_t len)
{
	return len >= 16 && !memcmp(dst, &r->canary, 8) &&
	       !memcmp(dst + len - 8, &r->canary, 8);
}

/* a rendezvous receive's reads are done (or will never be): its bytes
 * leave the connection's share, and the connection hears of it */
static inline void rndv_rx_done(struct rdma_conn *rc, struct rndv_rx *rx,
				int status)
{
	if (rx->charged) {
		rc->rndv_bytes -= rx->m.len;
		rx->charged = false;
	}
	rmsgi_conn_rx_ready(rc->c, &rx->m, status);
}

/* ------------------------------------------------------------------ */
/* rma.c: one-sided operations                                          */

/* post() of a one-sided op: its keys, then as many pieces as fit */
int rdma_post_rma(struct rdma_conn *rc, struct rmsgi_op *op);
/* fills slots with rc->rma_op's pieces while room lasts */
void rdma_rc_post_rma(struct rdma_conn *rc);

static inline void rma_release(struct rmsg_ctx *ctx, struct rmsgi_op *op)
{
	struct rma_tx *tx = op->tr_priv;
	int i;

	if (!tx)
		return;
	for (i = 0; i < tx->npin; i++)
		rmsgi_mr_unpin(ctx, &tx->pin[i]);
	free(tx);
	op->tr_priv = NULL;
}

/* ------------------------------------------------------------------ */
/* teardown.c: the end of a connection                                  */

/* fails the connection (reason < 0) or continues a close (reason 0) */
void rdma_rc_teardown(struct rdma_conn *rc, int reason);
/* the connection's timer ran out: a connect, a linger or a drain */
void rdma_rc_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
/* conn op */
void rdma_disconnect_op(void *p, unsigned linger_ms);

/* every entry point (io, timer and CQ callbacks, poll) is bracketed by
 * these (transport.h: end of life): a torn-down rdma_conn stays readable
 * until the outermost leave */
static inline void rdma_enter(struct rdma_ctx *r)
{
	rmsgi_tr_enter(r->env->reaper);
}
static inline void rdma_leave(struct rdma_ctx *r)
{
	rmsgi_tr_leave(r->env->reaper);
}

#endif /* RMSG_TRANSPORT_RDMA_H */
