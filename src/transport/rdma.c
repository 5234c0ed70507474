// SPDX-License-Identifier: MIT
/*
 * rdma.c - the rdma_cm + verbs RC backend.
 *
 * Per context: one event channel (ev_io), and on the first device seen one
 * PD, one completion channel (ev_io), one CQ and one SRQ. Receive buffers
 * are carved from the registered pool; the SRQ always holds at least as
 * many buffers as the credits granted to live peers, plus RX_SPARE, so a
 * peer that keeps to its credits never meets RNR while the others do.
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
 * before it, in order.
 *
 * Rendezvous: the sender registers its pieces (through the registration
 * cache of mr.c, without remote rights), binds a type-2 memory window
 * for remote read over each on this connection's QP, and sends their
 * segments (a piece over SEG_MAX bytes in several) after the binds; the
 * receiver reads them (split at the device's message size limit) into a
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
 */
#include <sys/resource.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#include "transport.h"

#define SQ_DEPTH 128
#define SIG_EVERY 16
#define MAX_SGE 16
#define REPOST_BATCH 16
#define RD_ATOM_MAX 16
#define ACK_TIMEOUT 16 /* 4.096 us * 2^16: ~0.27 s per retry */
#define RETRY_COUNT 6  /* 7 would retry forever on rxe */
#define TEARDOWN_MS 2000
/* rendezvous for large messages, native one-sided operations */
#define RDMA_CAPS (RMSGI_TR_CAP_RNDV | RMSGI_TR_CAP_RMA)
/*
 * Address resolution runs in slices, retried until the connection's own
 * timeout. The kernel (seen on 6.1) can miss a neighbour reply that
 * arrives before it queued the request (a veth peer answers at once);
 * the request then sleeps for its whole timeout although the neighbour
 * is known. A short slice makes it look again soon.
 */
#define RESOLVE_SLICE_MS 500
/* receive buffers the SRQ holds beyond the credits granted */
#define RX_SPARE 32
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

/* one receive buffer of the SRQ; the message object lives inside it */
struct rxbuf {
	struct rmsg_msg m;
	struct rxbuf *next;
	struct rdma_ctx *r;
	uint8_t *buf;
	uint32_t lkey;
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
	struct rmsgi_list qlink; /* rndv_rx_free()'s quarantine */
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
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	struct rdma_conn *hnext; /* qpn hash chain */
	enum rc_state state;
	uint32_t qpn;
	uint32_t granted; /* receive buffers this conn added to the SRQ */
	struct sq_slot ring[SQ_DEPTH];
	uint8_t *hdrs; /* registered header slots, 64 B each */
	uint32_t hdrs_lkey;
	uint32_t head;	   /* next slot to fill */
	uint32_t unposted; /* first filled slot not yet posted */
	uint32_t tail;	   /* oldest slot not yet retired */
	uint32_t since_sig;
	uint32_t reads_out;
	uint64_t rndv_bytes; /* rendezvous buffers being read into */
	uint32_t max_inline;
	uint32_t max_sge;
	struct rndv_rx *pending_reads, *pending_tail;
	struct rmsgi_op *rma_op; /* one-sided op still being posted */
	struct rmsgi_list mws;	 /* memory windows bound on the QP */
	ev_timer timer;		 /* connect bound, then teardown bound */
	bool timer_on;
	bool room_wanted;
	bool silent; /* rejected before the app saw it */
	bool buried; /* torn down; only memory is left */
	struct rdma_conn *dead_next;
};

struct rdma_listener {
	struct rmsgi_list link; /* rdma_ctx.listeners */
	struct rdma_ctx *r;
	struct rdma_cm_id *id;
	struct rmsg_listener *l; /* the core's, for rmsgi_tr_incoming */
};

struct rdma_ctx {
	struct rmsg_ctx *ctx; /* opaque: up-calls, logs */
	const struct rmsgi_tr_env *env;
	struct rmsgi_list listeners;
	struct rdma_event_channel *ech;
	ev_io cm_io;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	ev_io cq_io;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	uint32_t cq_events; /* to acknowledge in batches */
	bool mw_ok;	    /* type-2 memory windows (2A or 2B) */
	uint64_t max_msg_sz;
	uint32_t rd_atom;
	uint32_t srq_max;
	uint32_t srq_posted;
	uint32_t srq_target; /* sum of credits granted to live peers */
	size_t eager;
	size_t stride;
	struct rxbuf *rx_free; /* allocated, not posted */
	struct rxbuf *repost;  /* released, waiting for the next batch */
	/* freed rendezvous messages, oldest first (RNDV_QUARANTINE) */
	struct rmsgi_list rq;
	uint32_t rq_n;
	uint32_t repost_n;
	void **rx_chunks;
	uint32_t nchunks;
	struct rdma_conn *qpn_hash[QPN_BUCKETS];
	uint32_t nconns;
	/* torn-down conns, freed outside any dispatch that may still
	 * hold a pointer to them */
	struct rdma_conn *graveyard;
};

static void rc_teardown(struct rdma_conn *rc, int reason);
static void rc_post_reads(struct rdma_conn *rc);
static void bury(struct rdma_ctx *r);

extern const struct rmsgi_tr rmsgi_tr_rdma;

/* ------------------------------------------------------------------ */
/* qpn -> connection                                                    */

static void qpn_add(struct rdma_ctx *r, struct rdma_conn *rc)
{
	struct rdma_conn **b = &r->qpn_hash[rc->qpn % QPN_BUCKETS];

	rc->hnext = *b;
	*b = rc;
}

static void qpn_del(struct rdma_ctx *r, struct rdma_conn *rc)
{
	struct rdma_conn **p = &r->qpn_hash[rc->qpn % QPN_BUCKETS];

	for (; *p; p = &(*p)->hnext)
		if (*p == rc) {
			*p = rc->hnext;
			return;
		}
}

static struct rdma_conn *qpn_find(struct rdma_ctx *r, uint32_t qpn)
{
	struct rdma_conn *rc = r->qpn_hash[qpn % QPN_BUCKETS];

	while (rc && rc->qpn != qpn)
		rc = rc->hnext;
	return rc;
}

/* ------------------------------------------------------------------ */
/* device, pool registration, SRQ                                       */

/* ibv_reg_mr failed with errno @err: logs why, naming the memlock limit
 * when that is the likely cause, and returns the library's error */
static int reg_failed(struct rdma_ctx *r, size_t len, int err)
{
	struct rlimit rl;

	if (err == -ENOMEM || err == -EPERM || err == -EFAULT) {
		char lim[32] = "unlimited";

		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY)
			snprintf(lim, sizeof(lim), "%llu KiB",
				 (unsigned long long)rl.rlim_cur / 1024);
		rmsgi_err(r->ctx,
			  "registering %zu bytes with the RDMA device failed "
			  "(%s): the memlock limit is %s; check 'ulimit -l' "
			  "and raise it ('ulimit -l unlimited', or memlock in "
			  "/etc/security/limits.conf)",
			  len, strerror(-err), lim);
		return -ENOMEM;
	}
	rmsgi_err(r->ctx, "registering %zu bytes failed: %s", len,
		  rmsg_strerror(err));
	return err;
}

static int pool_reg(void *priv, void *addr, size_t len, void **mr_p,
		    uint32_t *lkey_p)
{
	struct rdma_ctx *r = priv;
	struct ibv_mr *mr =
		ibv_reg_mr(r->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		return reg_failed(r, len, errno ? -errno : -ENOMEM);
	*mr_p = mr;
	*lkey_p = mr->lkey;
	return 0;
}

static void pool_dereg(void *priv, void *mr)
{
	ibv_dereg_mr(mr);
}

static const struct rmsgi_pool_reg pool_reg_ops = {
	.reg = pool_reg,
	.dereg = pool_dereg,
};

/* registrations of mr.c: the app's regions and the cache */
static int mr_reg(void *priv, void *addr, size_t len, int access, void **h_p,
		  uint32_t *lkey_p, uint32_t *rkey_p)
{
	struct rdma_ctx *r = priv;
	int flags = 0;
	struct ibv_mr *mr;

	if (access & (RMSGI_ACCESS_LOCAL_WRITE | RMSG_ACCESS_REMOTE_WRITE))
		flags |= IBV_ACCESS_LOCAL_WRITE;
	if (access & RMSG_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (access & RMSG_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if ((access & RMSGI_ACCESS_MW_BIND) && r->mw_ok)
		flags |= IBV_ACCESS_MW_BIND;
	mr = ibv_reg_mr(r->pd, addr, len, flags);
	if (!mr)
		return reg_failed(r, len, errno ? -errno : -ENOMEM);
	*h_p = mr;
	*lkey_p = mr->lkey;
	*rkey_p = mr->rkey;
	return 0;
}

static void mr_dereg(void *priv, void *h)
{
	(void)priv;
	ibv_dereg_mr(h);
}

static struct sq_slot *slot_fill(struct rdma_conn *rc, uint8_t kind);
static uint32_t ring_used(const struct rdma_conn *rc);
static void rdma_kick(void *p);

static void mw_free(struct rdma_mw *w)
{
	if (w->mw) {
		rmsgi_list_del(&w->link);
		ibv_dealloc_mw(w->mw);
	}
	if (w->pinned)
		rmsgi_mr_unpin(w->ctx, &w->pin);
	/* only now: a registration of freed memory could be shared */
	free(w->copy);
	free(w);
}

/* the peer loses access now, or as soon as the bind has retired */
static void mw_release(struct rdma_mw *w)
{
	if (w->pending)
		w->dead = true;
	else
		mw_free(w);
}

/* the bind slot of @w retired (or was dropped unposted) */
static void mw_bind_retired(struct rdma_mw *w)
{
	w->pending = false;
	if (w->dead)
		mw_free(w);
}

/* fills a ring slot that binds a new type-2 window over [addr, addr+len)
 * of @mr for @access on @rc's QP; the caller kicks */
static int mw_bind_slot(struct rdma_conn *rc, struct rdma_mw *w,
			struct ibv_mr *mr, void *addr, size_t len, int access,
			uint32_t *rkey_p)
{
	struct sq_slot *s;
	uint32_t rkey;

	w->mw = ibv_alloc_mw(rc->r->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		int err = errno ? -errno : -ENOMEM;

		rmsgi_err(rc->r->ctx, "conn %u: ibv_alloc_mw: %s", rc->ci->id,
			  strerror(-err));
		return err;
	}
	rmsgi_list_add_tail(&rc->mws, &w->link);
	rkey = ibv_inc_rkey(w->mw->rkey);
	s = slot_fill(rc, SLOT_BIND);
	s->mw = w;
	s->wr.opcode = IBV_WR_BIND_MW;
	/* runs once everything before it completed: on rxe (6.1) a bind
	 * executed but not yet retired when the SEND before it needs a
	 * retransmit stalls the retries for good, so a cut link was never
	 * noticed by the side sending rendezvous (link_cut) */
	s->wr.send_flags = IBV_SEND_FENCE;
	s->wr.num_sge = 0;
	s->wr.bind_mw.mw = w->mw;
	s->wr.bind_mw.rkey = rkey;
	s->wr.bind_mw.bind_info.mr = mr;
	s->wr.bind_mw.bind_info.addr = (uintptr_t)addr;
	s->wr.bind_mw.bind_info.length = len;
	s->wr.bind_mw.bind_info.mw_access_flags =
		(access & RMSG_ACCESS_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE
						   : 0) |
		(access & RMSG_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0);
	/* mw->rkey stays the current key until the bind ran: the provider
	 * names the window by it when the slot is posted (rxe checks it) */
	w->pending = true;
	*rkey_p = rkey;
	return 0;
}

/* an export to one connection (mr.c): a window bound on its QP */
static int export_bind(void *priv, void *tc, void *h, void *addr, size_t len,
		       int access, void **w_p, uint32_t *rkey_p)
{
	struct rdma_ctx *r = priv;
	struct rdma_conn *rc = tc;
	struct rdma_mw *w;
	int ret;

	if (!r->mw_ok) {
		rmsgi_err(r->ctx,
			  "export: RDMA device %s has no type-2 memory "
			  "windows, which per-connection export needs; "
			  "export with RMSG_EXPORT_ANY_PEER to let any "
			  "connected peer use the region",
			  ibv_get_device_name(r->verbs->device));
		return -EOPNOTSUPP;
	}
	if (!rc || rc->state != RC_UP)
		return -ENOTCONN;
	if (ring_used(rc) >= SQ_DEPTH - 2) {
		rc->room_wanted = true; /* on_writable follows */
		return -EAGAIN;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = r->ctx;
	ret = mw_bind_slot(rc, w, h, addr, len, access, rkey_p);
	if (ret) {
		free(w);
		return ret;
	}
	/* posted now: whatever the app sends next comes after it */
	rdma_kick(rc);
	if (rc->buried || rc->state != RC_UP) {
		mw_release(w);
		return -ENOTCONN;
	}
	*w_p = w;
	return 0;
}

static void export_unbind(void *priv, void *w)
{
	(void)priv;
	mw_release(w);
}

static bool export_bind_pending(void *priv, void *w)
{
	(void)priv;
	return ((struct rdma_mw *)w)->pending;
}

static const struct rmsgi_reg_ops mr_reg_ops = {
	.reg = mr_reg,
	.dereg = mr_dereg,
	.bind = export_bind,
	.unbind = export_unbind,
	.bind_pending = export_bind_pending,
};

static void cq_cb(struct ev_loop *loop, ev_io *w, int revents);

/* adds buffers to the SRQ until it holds the target */
static int srq_fill(struct rdma_ctx *r)
{
	struct ibv_recv_wr wrs[REPOST_BATCH], *bad;
	struct ibv_sge sges[REPOST_BATCH];
	uint32_t i, n;
	int ret;

	uint32_t target = r->srq_target + RX_SPARE;

	/* buffers waiting for their batched repost count as posted */
	while (r->srq_posted + r->repost_n < target) {
		if (!r->rx_free) {
			uint32_t cnt = 64, k;
			struct rxbuf *rbs;
			uint8_t *mem;
			void **chunks;

			ret = rmsgi_pool_alloc(r->env->pool, cnt * r->stride,
					       (void **)&mem);
			if (ret)
				return ret;
			rbs = calloc(cnt, sizeof(*rbs));
			chunks = realloc(r->rx_chunks,
					 (r->nchunks + 2) * sizeof(void *) * 2);
			if (!rbs || !chunks) {
				free(rbs);
				if (chunks)
					r->rx_chunks = chunks;
				rmsgi_pool_free(r->env->pool, mem);
				return -ENOMEM;
			}
			r->rx_chunks = chunks;
			r->rx_chunks[2 * r->nchunks] = mem;
			r->rx_chunks[2 * r->nchunks + 1] = rbs;
			r->nchunks++;
			for (k = 0; k < cnt; k++) {
				rbs[k].r = r;
				rbs[k].buf = mem + k * r->stride;
				rmsgi_pool_lookup(r->env->pool, rbs[k].buf,
						  r->stride, &rbs[k].lkey);
				rbs[k].next = r->rx_free;
				r->rx_free = &rbs[k];
			}
		}
		n = RMSGI_MIN(target - r->srq_posted - r->repost_n,
			      REPOST_BATCH);
		for (i = 0; i < n && r->rx_free; i++) {
			struct rxbuf *rb = r->rx_free;

			r->rx_free = rb->next;
			sges[i].addr = (uintptr_t)rb->buf;
			sges[i].length = (uint32_t)r->stride;
			sges[i].lkey = rb->lkey;
			wrs[i].wr_id = (uintptr_t)rb;
			wrs[i].sg_list = &sges[i];
			wrs[i].num_sge = 1;
			wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		}
		wrs[i - 1].next = NULL;
		ret = ibv_post_srq_recv(r->srq, wrs, &bad);
		if (ret)
			return rmsgi_err_verbs(ret);
		r->srq_posted += i;
	}
	return 0;
}

/* reposts released receive buffers and returns their credits */
static void rx_repost(struct rdma_ctx *r)
{
	struct ibv_recv_wr wrs[REPOST_BATCH], *bad;
	struct ibv_sge sges[REPOST_BATCH];
	struct rxbuf *done[REPOST_BATCH];
	uint32_t i, n;
	int ret;

	while (r->repost) {
		for (n = 0; n < REPOST_BATCH && r->repost; n++) {
			struct rxbuf *rb = r->repost;

			r->repost = rb->next;
			r->repost_n--;
			done[n] = rb;
			sges[n].addr = (uintptr_t)rb->buf;
			sges[n].length = (uint32_t)r->stride;
			sges[n].lkey = rb->lkey;
			wrs[n].wr_id = (uintptr_t)rb;
			wrs[n].sg_list = &sges[n];
			wrs[n].num_sge = 1;
			wrs[n].next = &wrs[n + 1];
		}
		wrs[n - 1].next = NULL;
		ret = ibv_post_srq_recv(r->srq, wrs, &bad);
		if (ret) {
			rmsgi_err(r->ctx, "SRQ repost failed: %s",
				  rmsg_strerror(rmsgi_err_verbs(ret)));
			for (i = 0; i < n; i++) {
				done[i]->next = r->rx_free;
				r->rx_free = done[i];
				if (done[i]->m.conn)
					rmsgi_conn_put(done[i]->m.conn);
			}
			continue;
		}
		r->srq_posted += n;
		for (i = 0; i < n; i++) {
			struct rmsg_conn *c = done[i]->m.conn;

			if (c) {
				rmsgi_conn_credit_freed(c);
				rmsgi_conn_put(c);
			}
		}
	}
}

/* free_fn of an eager receive: batch the repost */
static void rxbuf_release(struct rmsg_msg *m)
{
	struct rxbuf *rb = RMSGI_CONTAINER_OF(m, struct rxbuf, m);
	struct rdma_ctx *r = rb->r;

	rb->next = r->repost;
	r->repost = rb;
	if (++r->repost_n >= REPOST_BATCH)
		rx_repost(r);
}

static int dev_open(struct rdma_ctx *r, struct ibv_context *verbs)
{
	struct ibv_device_attr attr;
	struct ibv_port_attr pattr;
	struct ibv_srq_init_attr sattr;
	int ret, cqe;

	if (r->verbs) {
		if (r->verbs == verbs)
			return 0;
		rmsgi_err(r->ctx,
			  "a context uses one RDMA device; %s is a "
			  "second one",
			  ibv_get_device_name(verbs->device));
		return -ENODEV;
	}
	ret = ibv_query_device(verbs, &attr);
	if (ret)
		return rmsgi_err_verbs(ret);
	r->max_msg_sz = 1u << 30;
	if (ibv_query_port(verbs, 1, &pattr) == 0 && pattr.max_msg_sz)
		r->max_msg_sz = pattr.max_msg_sz;
	/* work requests are split at this size: their lengths stay well
	 * inside an SGE's u32 */
	if (r->max_msg_sz > SEG_MAX)
		r->max_msg_sz = SEG_MAX;
	r->rd_atom = (uint32_t)RMSGI_MIN(attr.max_qp_rd_atom, RD_ATOM_MAX);
	r->mw_ok = attr.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
					    IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	if (r->rd_atom == 0)
		r->rd_atom = 1;
	r->pd = ibv_alloc_pd(verbs);
	if (!r->pd)
		return -ENOMEM;
	r->cch = ibv_create_comp_channel(verbs);
	if (!r->cch) {
		ret = -errno;
		goto undo_pd;
	}
	fcntl(r->cch->fd, F_SETFL, fcntl(r->cch->fd, F_GETFL) | O_NONBLOCK);
	cqe = RMSGI_MIN(attr.max_cqe, 32767);
	r->cq = ibv_create_cq(verbs, cqe, r, r->cch, 0);
	if (!r->cq) {
		ret = errno ? -errno : -ENOMEM;
		goto undo_cch;
	}
	memset(&sattr, 0, sizeof(sattr));
	r->srq_max = (uint32_t)RMSGI_MIN(attr.max_srq_wr, 16384);
	sattr.attr.max_wr = r->srq_max;
	sattr.attr.max_sge = 1;
	r->srq = ibv_create_srq(r->pd, &sattr);
	if (!r->srq) {
		ret = errno ? -errno : -ENOMEM;
		goto undo_cq;
	}
	r->srq_max = sattr.attr.max_wr;
	r->pd->context = verbs;
	ret = rmsgi_pool_set_reg(r->env->pool, &pool_reg_ops, r);
	if (ret)
		goto undo_srq;
	ret = rmsgi_err_verbs(ibv_req_notify_cq(r->cq, 0));
	if (ret)
		goto undo_reg;
	r->verbs = verbs;
	rmsgi_mr_set_reg(r->ctx, &mr_reg_ops, r);
	ev_io_init(&r->cq_io, cq_cb, r->cch->fd, EV_READ);
	r->cq_io.data = r;
	ev_io_start(r->env->loop, &r->cq_io);
	ev_unref(r->env->loop);
	rmsgi_info(r->ctx,
		   "RDMA device %s: max_msg_sz %llu, rd_atom %u, type-2 "
		   "memory windows %s",
		   ibv_get_device_name(verbs->device),
		   (unsigned long long)r->max_msg_sz, r->rd_atom,
		   r->mw_ok ? "yes" : "no (per-connection export refused)");
	return 0;

undo_reg:
	rmsgi_pool_clear_reg(r->env->pool);
undo_srq:
	ibv_destroy_srq(r->srq);
	r->srq = NULL;
undo_cq:
	ibv_destroy_cq(r->cq);
	r->cq = NULL;
undo_cch:
	ibv_destroy_comp_channel(r->cch);
	r->cch = NULL;
undo_pd:
	ibv_dealloc_pd(r->pd);
	r->pd = NULL;
	return ret;
}

static void cm_cb(struct ev_loop *loop, ev_io *w, int revents);

static int ctx_get(struct rmsg_ctx *ctx, struct rdma_ctx **r_p)
{
	void **slot = rmsgi_ctx_tr_slot(ctx, RMSGI_TR_RDMA);
	struct rdma_ctx *r = *slot;

	if (r) {
		*r_p = r;
		return 0;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ctx = ctx;
	r->env = rmsgi_ctx_env(ctx);
	rmsgi_list_init(&r->rq);
	rmsgi_list_init(&r->listeners);
	r->ech = rdma_create_event_channel();
	if (!r->ech) {
		int err = errno ? -errno : -ENODEV;

		free(r);
		/* no /dev/infiniband/rdma_cm: this host has no RDMA stack */
		return err == -ENOENT || err == -ENXIO ? -ENODEV : err;
	}
	fcntl(r->ech->fd, F_SETFL, fcntl(r->ech->fd, F_GETFL) | O_NONBLOCK);
	r->eager = r->env->cfg->eager_size;
	r->stride = RMSGI_ALIGN(RMSGI_HDR_SIZE + r->eager, 64);
	ev_io_init(&r->cm_io, cm_cb, r->ech->fd, EV_READ);
	r->cm_io.data = r;
	ev_io_start(r->env->loop, &r->cm_io);
	ev_unref(r->env->loop);
	*slot = r;
	*r_p = r;
	return 0;
}

/* ------------------------------------------------------------------ */
/* connection setup                                                     */

static void rc_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* a client's: @c and @ci now; a server's: from rmsgi_tr_incoming */
static int rc_new(struct rdma_ctx *r, struct rmsg_conn *c,
		  const struct rmsgi_tr_conn_info *ci, struct rdma_conn **rc_p)
{
	struct rdma_conn *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return -ENOMEM;
	rc->c = c;
	rc->ci = ci;
	rc->r = r;
	rmsgi_list_init(&rc->mws);
	ev_timer_init(&rc->timer, rc_timer_cb, 0, 0);
	rc->timer.data = rc;
	if (c)
		rmsgi_conn_set_tc(c, rc);
	r->nconns++;
	*rc_p = rc;
	return 0;
}

static void rc_timer(struct rdma_conn *rc, unsigned ms)
{
	struct ev_loop *loop = rc->r->env->loop;

	if (rc->timer_on) {
		ev_ref(loop);
		ev_timer_stop(loop, &rc->timer);
	}
	ev_timer_set(&rc->timer, ms / 1000.0, 0);
	ev_timer_start(loop, &rc->timer);
	ev_unref(loop);
	rc->timer_on = true;
}

static void rc_timer_stop(struct rdma_conn *rc)
{
	if (!rc->timer_on)
		return;
	ev_ref(rc->r->env->loop);
	ev_timer_stop(rc->r->env->loop, &rc->timer);
	rc->timer_on = false;
}

/* QP on the shared CQ and SRQ, header slots, and this peer's buffers */
static int rc_setup_qp(struct rdma_conn *rc)
{
	struct rdma_ctx *r = rc->r;
	struct ibv_qp_init_attr qa;
	uint8_t timeout = ACK_TIMEOUT;
	int ret;

	ret = dev_open(r, rc->id->verbs);
	if (ret)
		return ret;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = rc;
	qa.send_cq = r->cq;
	qa.recv_cq = r->cq;
	qa.srq = r->srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = SQ_DEPTH;
	qa.cap.max_send_sge = MAX_SGE + 1;
	qa.cap.max_inline_data = 256;
	ret = rdma_create_qp(rc->id, r->pd, &qa);
	if (ret) {
		/* providers differ in inline and SGE limits: ask for less */
		qa.cap.max_inline_data = 0;
		qa.cap.max_send_sge = 4;
		ret = rdma_create_qp(rc->id, r->pd, &qa);
	}
	if (ret)
		return rmsgi_err_cm(ret);
	rc->qp = rc->id->qp;
	rc->qpn = rc->qp->qp_num;
	rc->max_inline = qa.cap.max_inline_data;
	rc->max_sge = RMSGI_MIN(qa.cap.max_send_sge, MAX_SGE + 1);
	qpn_add(r, rc);
	rdma_set_option(rc->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			&timeout, sizeof(timeout));
	ret = rmsgi_pool_alloc(r->env->pool, SQ_DEPTH * 64, (void **)&rc->hdrs);
	if (ret)
		return ret;
	rmsgi_pool_lookup(r->env->pool, rc->hdrs, SQ_DEPTH * 64,
			  &rc->hdrs_lkey);
	if (r->srq_target + rc->ci->cfg->credits + RX_SPARE > r->srq_max) {
		rmsgi_err(r->ctx,
			  "SRQ full: %u receive buffers granted (and %u "
			  "spare), the device allows %u",
			  r->srq_target, RX_SPARE, r->srq_max);
		return -ENOBUFS;
	}
	rc->granted = rc->ci->cfg->credits;
	r->srq_target += rc->granted;
	return srq_fill(r);
}

/*
 * The connection is up: the QP is in RTS. Its RNR timer is what the
 * peer waits before resending into an SRQ found empty; rdma_cm leaves it
 * at 655 ms. Best effort: a device that refuses keeps the default.
 */
static void rc_up(struct rdma_conn *rc)
{
	struct ibv_qp_attr qattr = {.min_rnr_timer = MIN_RNR_TIMER};

	rc->state = RC_UP;
	if (rc->qp && ibv_modify_qp(rc->qp, &qattr, IBV_QP_MIN_RNR_TIMER))
		rmsgi_tr_dbg(rc->r->env, "conn %u: RNR timer not set",
			     rc->ci->id);
}

/*
 * The peer's hello: its eager size is what it receives into; ours is
 * what we receive into and what we are prepared to copy per frame. We
 * never send it eager frames larger than our own, however large its
 * announcement (rendezvous requests and segment lists included).
 */
static void hello_clamp(const struct rdma_ctx *r, struct rmsgi_hello *h)
{
	if (h->eager_size > r->eager)
		h->eager_size = (uint32_t)r->eager;
}

static void rc_conn_param(struct rdma_conn *rc, struct rdma_conn_param *p,
			  uint8_t *buf)
{
	struct rmsgi_hello h;

	rmsgi_conn_hello(rc->c, &h);
	h.eager_size = (uint32_t)rc->r->eager;
	h.credits = (uint16_t)rc->granted;
	memset(p, 0, sizeof(*p));
	p->private_data = buf;
	p->private_data_len = (uint8_t)rmsgi_hello_encode(&h, buf);
	p->responder_resources = (uint8_t)rc->r->rd_atom;
	p->initiator_depth = (uint8_t)rc->r->rd_atom;
	p->retry_count = RETRY_COUNT;
	/* credits make RNR a peer's fault: one over its credits can drain
	 * the shared SRQ before it is closed, and the others then wait for
	 * reposted buffers rather than fail, for RNR_RETRY retries of the
	 * receiver's RNR timer (ours: MIN_RNR_TIMER, ~1.5 s in all); not 7,
	 * which retries forever: a live receiver that never reposts would
	 * stall our sends for good */
	p->rnr_retry_count = RNR_RETRY;
}

static int rdma_resolve(const struct rmsgi_uri *u, bool passive,
			struct rdma_addrinfo **res_p)
{
	struct rdma_addrinfo hints = {0};
	char port[8];
	int ret;

	hints.ai_port_space = RDMA_PS_TCP;
	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	if (u->src_len) /* a destination of the source's family */
		hints.ai_family = u->src.ss_family;
	snprintf(port, sizeof(port), "%u", u->port);
	ret = rdma_getaddrinfo(u->host, port, &hints, res_p);
	if (ret)
		return errno == ENODEV ? -ENODEV : -EHOSTUNREACH;
	return 0;
}

static int rdma_connect_op(struct rmsg_conn *c,
			   const struct rmsgi_tr_conn_info *ci,
			   const struct rmsgi_uri *u)
{
	struct rdma_addrinfo *res;
	struct rdma_conn *rc;
	struct rdma_ctx *r;
	int ret;

	ret = ctx_get(ci->ctx, &r);
	if (ret)
		return ret;
	ret = rdma_resolve(u, false, &res);
	if (ret == -EHOSTUNREACH) {
		/* the network's answer, not a misuse: like every later
		 * failure (and like TCP) it reaches the core as one (for
		 * the app, on_close from the loop; auto:// falls back) */
		ret = rc_new(r, c, ci, &rc);
		if (ret)
			return ret;
		rc_teardown(rc, -EHOSTUNREACH);
		return 0;
	}
	if (ret)
		return ret;
	ret = rc_new(r, c, ci, &rc);
	if (ret)
		goto undo_res;
	ret = rmsgi_err_cm(rdma_create_id(r->ech, &rc->id, rc, RDMA_PS_TCP));
	if (ret)
		goto undo_rc;
	/* "?src=": without it the source is the one the route picks, which
	 * for two local devices is always the same device */
	ret = rmsgi_err_cm(rdma_resolve_addr(
		rc->id,
		u->src_len ? (struct sockaddr *)&u->src : res->ai_src_addr,
		res->ai_dst_addr,
		(int)RMSGI_MIN(ci->cfg->timeout_ms, RESOLVE_SLICE_MS)));
	if (ret && ret != -ENODEV && ret != -ENOENT && ret != -ENOMEM) {
		/* e.g. a ?src= that is no address of this host, or no
		 * route: on_close, as for TCP */
		rdma_freeaddrinfo(res);
		rc_teardown(rc, ret);
		return 0;
	}
	if (ret)
		goto undo_id;
	rdma_freeaddrinfo(res);
	rc->state = RC_RESOLVING;
	rc_timer(rc, ci->cfg->timeout_ms);
	return 0;

undo_id:
	rdma_destroy_id(rc->id);
undo_rc:
	r->nconns--;
	free(rc);
undo_res:
	rdma_freeaddrinfo(res);
	return ret == -ENOENT ? -ENODEV : ret;
}

static int rdma_listen_op(struct rmsg_ctx *ctx, struct rmsg_listener *l,
			  const struct rmsgi_uri *u, uint16_t *port_p,
			  void **tl_p)
{
	struct rdma_listener *rl;
	struct rdma_addrinfo *res;
	struct rdma_ctx *r;
	int ret;

	ret = ctx_get(ctx, &r);
	if (ret)
		return ret;
	ret = rdma_resolve(u, true, &res);
	if (ret)
		return ret == -EHOSTUNREACH ? -EADDRNOTAVAIL : ret;
	rl = calloc(1, sizeof(*rl));
	if (!rl) {
		ret = -ENOMEM;
		goto undo_res;
	}
	rl->l = l;
	rl->r = r;
	ret = rmsgi_err_cm(rdma_create_id(r->ech, &rl->id, NULL, RDMA_PS_TCP));
	if (ret)
		goto undo_rl;
	rl->id->context = NULL; /* marks a listening id */
	ret = rmsgi_err_cm(rdma_bind_addr(rl->id, res->ai_src_addr));
	if (ret)
		goto undo_id;
	/* bound to one device's address: open it now, so that regions get
	 * their keys before the first connection (rmsg_mr_export) */
	if (rl->id->verbs) {
		ret = dev_open(r, rl->id->verbs);
		if (ret)
			goto undo_id;
	}
	ret = rmsgi_err_cm(rdma_listen(rl->id, 128));
	if (ret)
		goto undo_id;
	*port_p = ntohs(rdma_get_src_port(rl->id));
	*tl_p = rl;
	rmsgi_list_add_tail(&r->listeners, &rl->link);
	rdma_freeaddrinfo(res);
	return 0;

undo_id:
	rdma_destroy_id(rl->id);
undo_rl:
	free(rl);
undo_res:
	rdma_freeaddrinfo(res);
	if (ret == -ENODEV || ret == -EADDRNOTAVAIL)
		rmsgi_info(ctx, "rdma listen on %s: %s", u->host,
			   rmsg_strerror(ret));
	return ret;
}

static void rdma_listen_close(void *p)
{
	struct rdma_listener *rl = p;

	rmsgi_list_del(&rl->link);
	rdma_destroy_id(rl->id);
	free(rl);
}

/* a peer asks to connect: the core admits it and asks the app; accept
 * or reject with the hello it fills */
static void on_connect_request(struct rdma_ctx *r, struct rdma_cm_event *ev,
			       struct rdma_listener *rl)
{
	const struct rmsgi_tr_conn_info *ci;
	struct rdma_conn_param param;
	struct rmsgi_hello h, reply;
	uint8_t buf[64];
	struct rdma_conn *rc;
	struct rmsg_conn *c;
	int ret;

	if (rmsgi_hello_decode(ev->param.conn.private_data,
			       ev->param.conn.private_data_len, &h)) {
		rmsgi_warn(r->ctx, "rdma: connect request without a valid "
				   "hello: rejected");
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return;
	}
	hello_clamp(r, &h);
	ret = rc_new(r, NULL, NULL, &rc);
	if (ret) {
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return;
	}
	if (rmsgi_tr_incoming(rl->l, &rmsgi_tr_rdma, rc, &c, &ci, &reply)) {
		/* over the listener's limits (the peer logs why), or no
		 * memory */
		rdma_reject(ev->id, buf,
			    (uint8_t)rmsgi_hello_encode(&reply, buf));
		rdma_destroy_id(ev->id);
		r->nconns--;
		free(rc);
		return;
	}
	rc->c = c;
	rc->ci = ci;
	rc->is_server = true;
	rc->id = ev->id;
	rc->id->context = rc;
	rc->state = RC_CONNECTING;
	ret = rc_setup_qp(rc);
	if (ret == 0)
		ret = rmsgi_conn_ev_request(c, rl->l, &h, &reply);
	else
		rmsgi_conn_refusal(c, ret, &reply);
	if (ret == 0) {
		rc->peer_eager = h.eager_size;
		rc_conn_param(rc, &param, buf);
		ret = rmsgi_err_cm(rdma_accept(rc->id, &param));
		if (ret == 0) {
			rc_timer(rc, ci->cfg->timeout_ms);
			return;
		}
		rmsgi_conn_refusal(c, ret, &reply);
	}
	/* rejected or failed: the app never sees this connection */
	rdma_reject(rc->id, buf, (uint8_t)rmsgi_hello_encode(&reply, buf));
	rc->state = RC_DEAD;
	rc->silent = true;
	rc_teardown(rc, 0);
}

static int cm_status_err(int status, int dflt)
{
	return status < 0 && status > -4096 ? status : dflt;
}

static int cq_drain(struct rdma_ctx *r);

static void on_cm_event(struct rdma_ctx *r, struct rdma_cm_event *ev)
{
	struct rdma_conn *rc = ev->id->context;
	struct rdma_conn_param param;
	struct rmsgi_hello h;
	uint8_t buf[64];
	int ret;

	if (!rc)
		return; /* a listening id's own events */
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rmsgi_err_cm(rdma_resolve_route(
			rc->id, (int)rc->ci->cfg->timeout_ms));
		if (ret)
			rc_teardown(rc, ret);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = rc_setup_qp(rc);
		if (ret == 0) {
			rc_conn_param(rc, &param, buf);
			ret = rmsgi_err_cm(rdma_connect(rc->id, &param));
		}
		if (ret)
			rc_teardown(rc, ret);
		else
			rc->state = RC_CONNECTING;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rc->state != RC_CONNECTING)
			break; /* a receive already showed it (on_recv) */
		rc_timer_stop(rc);
		rc_up(rc);
		if (rc->is_server) {
			rmsgi_conn_ev_established(rc->c, NULL);
		} else if (rmsgi_hello_decode(ev->param.conn.private_data,
					      ev->param.conn.private_data_len,
					      &h) == 0) {
			hello_clamp(r, &h);
			rc->peer_eager = h.eager_size;
			rmsgi_conn_ev_established(rc->c, &h);
		} else {
			rc_teardown(rc, -EPROTO);
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (rmsgi_hello_decode(ev->param.conn.private_data,
				       ev->param.conn.private_data_len,
				       &h) == 0 &&
		    h.status < 0) {
			/* every reject reads the same; the reason is in pdata */
			rmsgi_conn_ev_failed(rc->c, -ECONNREFUSED, &h);
			rc_teardown(rc, -ECONNREFUSED);
		} else {
			rc_teardown(rc, -ECONNREFUSED);
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		/* a slice ran out (see RESOLVE_SLICE_MS): look again; the
		 * connection's timer bounds the whole */
		/* (the id stays bound, "?src=" included: no source again;
		 * librdmacm has not filled the local address yet) */
		if (rc->state == RC_RESOLVING && ev->status == -ETIMEDOUT &&
		    rdma_resolve_addr(rc->id, NULL, rdma_get_peer_addr(rc->id),
				      RESOLVE_SLICE_MS) == 0)
			break;
		rc_teardown(rc, cm_status_err(ev->status, -EHOSTUNREACH));
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		rc_teardown(rc, cm_status_err(ev->status, -EHOSTUNREACH));
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rc_teardown(rc, cm_status_err(ev->status, -ECONNREFUSED));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* what the peer sent before it left (its BYE among it) is
		 * in the CQ, which this channel does not order against */
		cq_drain(r);
		if (!rc->buried)
			rc_teardown(rc, -ECONNRESET);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rc_teardown(rc, -ENODEV);
		break;
	default:
		break;
	}
}

static void cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_ctx *r = w->data;
	struct rdma_cm_event *ev, copy;

	while (rdma_get_cm_event(r->ech, &ev) == 0) {
		uint8_t pdata[256];

		/* ack first: a handler may destroy the id */
		copy = *ev;
		if (ev->param.conn.private_data_len &&
		    ev->param.conn.private_data) {
			memcpy(pdata, ev->param.conn.private_data,
			       RMSGI_MIN(ev->param.conn.private_data_len,
					 sizeof(pdata)));
			copy.param.conn.private_data = pdata;
		}
		if (copy.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			/* the listener is known from the listen id's owner */
			struct rmsgi_list *n;
			struct rdma_listener *rl = NULL;

			for (n = r->listeners.next; n != &r->listeners;
			     n = n->next) {
				struct rdma_listener *x = rmsgi_list_entry(
					n, struct rdma_listener, link);

				if (x->id == copy.listen_id)
					rl = x;
			}
			rdma_ack_cm_event(ev);
			if (rl) {
				on_connect_request(r, &copy, rl);
			} else {
				rdma_reject(copy.id, NULL, 0);
				rdma_destroy_id(copy.id);
			}
			continue;
		}
		rdma_ack_cm_event(ev);
		rmsgi_tr_dbg(r->env, "cm event %s status %d",
			     rdma_event_str(copy.event), copy.status);
		on_cm_event(r, &copy);
	}
	rmsgi_ctx_flush(r->ctx);
}

/* ------------------------------------------------------------------ */
/* sending                                                              */

static uint32_t ring_used(const struct rdma_conn *rc)
{
	return rc->head - rc->tail;
}

static struct sq_slot *slot_fill(struct rdma_conn *rc, uint8_t kind)
{
	struct sq_slot *s = &rc->ring[rc->head % SQ_DEPTH];

	memset(s, 0, offsetof(struct sq_slot, sge));
	s->kind = kind;
	s->wr.wr_id = SEND_TAG | rc->head;
	s->wr.sg_list = s->sge;
	rc->head++;
	return s;
}

/* segments a rendezvous request lists for @op */
static size_t rndv_nseg(const struct rmsgi_op *op)
{
	size_t n = 0;
	int i;

	for (i = 0; i < op->iovcnt; i++)
		n += (op->iov[i].iov_len + SEG_MAX - 1) / SEG_MAX;
	return n;
}

/* the peer may read each non-empty piece: a window bound on this QP
 * over a local-only pin (or, without windows, a pin with remote read);
 * the bind slots go before the frame's, so RC orders them first */
static int rndv_prepare(struct rdma_conn *rc, struct rmsgi_op *op,
			uint8_t *frame, size_t *flen_p)
{
	struct rmsg_ctx *ctx = rc->r->ctx;
	const struct iovec *iov = op->iov;
	int i, pieces = 0, iovcnt = op->iovcnt;
	size_t off = RMSGI_HDR_SIZE;
	struct rndv_tx *tx;
	struct iovec one;
	void *copy = NULL;
	bool mw, gather;

	/* the request lists a segment per piece and goes into one of the
	 * peer's eager buffers: pieces too many for it (5 for an eager
	 * size of 64) are gathered into one copy, as rmsg_send(3) takes
	 * any number of pieces up to RMSG_IOV_MAX */
	gather = rndv_nseg(op) * RMSGI_SEG_SIZE > rc->peer_eager;
	for (i = 0; i < op->iovcnt; i++)
		pieces += op->iov[i].iov_len != 0;
	if (gather)
		pieces = 1;
	mw = rc->r->mw_ok && pieces <= RNDV_MW_MAX;
	if (mw && ring_used(rc) + (uint32_t)pieces + 1 > SQ_DEPTH - 8)
		return -EAGAIN;
	if (gather) {
		copy = malloc(op->len);
		if (!copy)
			return -ENOMEM;
		for (i = 0; i < op->iovcnt; i++) {
			if (op->iov[i].iov_len)
				memcpy((uint8_t *)copy + off - RMSGI_HDR_SIZE,
				       op->iov[i].iov_base, op->iov[i].iov_len);
			off += op->iov[i].iov_len;
		}
		off = RMSGI_HDR_SIZE;
		one.iov_base = copy;
		one.iov_len = op->len;
		iov = &one;
		iovcnt = 1;
	}
	tx = calloc(1, sizeof(*tx) + sizeof(tx->w[0]) * (size_t)pieces);
	if (!tx) {
		free(copy);
		return -ENOMEM;
	}
	op->tr_priv = tx;
	for (i = 0; i < iovcnt; i++) {
		void *base = iov[i].iov_base;
		size_t len = iov[i].iov_len;
		struct rmsgi_seg seg;
		struct rdma_mw *w;
		uint32_t lkey, rkey;
		uint64_t done;
		int ret;

		if (!len)
			continue;
		w = calloc(1, sizeof(*w));
		if (!w) {
			free(copy);
			return -ENOMEM;
		}
		w->ctx = ctx;
		/* the copy goes with the window over it (mw_free) */
		w->copy = copy;
		copy = NULL;
		tx->w[tx->n++] = w;
		ret = rmsgi_mr_pin(ctx, base, len,
				   mw ? RMSGI_ACCESS_MW_BIND
				      : RMSG_ACCESS_REMOTE_READ,
				   &w->pin, &lkey, &rkey);
		if (ret)
			return ret;
		w->pinned = true;
		if (mw) {
			ret = mw_bind_slot(rc, w, w->pin.h, base, len,
					   RMSG_ACCESS_REMOTE_READ, &rkey);
			if (ret)
				return ret;
		}
		/* a segment's length is u32 on the wire: a larger piece
		 * goes as several (rndv_nseg counted them), all under the
		 * piece's one key */
		for (done = 0; done < len; done += seg.len) {
			seg.addr = (uintptr_t)base + done;
			seg.len = (uint32_t)RMSGI_MIN(len - done, SEG_MAX);
			seg.rkey = rkey;
			rmsgi_seg_encode(&seg, frame + off);
			off += RMSGI_SEG_SIZE;
		}
	}
	*flen_p = off;
	return 0;
}

static void rdma_rndv_release(void *p, struct rmsgi_op *op)
{
	struct rndv_tx *tx = op->tr_priv;
	int i;

	(void)p;
	if (!tx)
		return;
	for (i = 0; i < tx->n; i++)
		mw_release(tx->w[i]);
	free(tx);
	op->tr_priv = NULL;
}

/* ------------------------------------------------------------------ */
/* one-sided operations                                                 */

static void rma_release(struct rmsg_ctx *ctx, struct rmsgi_op *op)
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

/* keys for every piece: the pools, the app's regions, or the cache */
static int rma_prepare(struct rdma_conn *rc, struct rmsgi_op *op)
{
	struct rmsg_ctx *ctx = rc->r->ctx;
	int need = op->kind == RMSGI_OP_READ ? RMSGI_ACCESS_LOCAL_WRITE : 0;
	struct rma_tx *tx;
	uint32_t rkey;
	int i, ret;

	if (!op->rma.has_rkey) {
		rmsgi_err(ctx,
			  "conn %u: the peer's descriptor has no rkey: it was "
			  "exported to a TCP connection, or to any peer before "
			  "its context opened an RDMA device",
			  rc->ci->id);
		return -EINVAL;
	}
	tx = calloc(1, sizeof(*tx) + sizeof(tx->pin[0]) * (size_t)op->iovcnt +
			       sizeof(uint32_t) * (size_t)op->iovcnt);
	if (!tx)
		return -ENOMEM;
	tx->lkey = (uint32_t *)(tx->pin + op->iovcnt);
	op->tr_priv = tx;
	for (i = 0; i < op->iovcnt; i++) {
		const struct iovec *v = &op->iov[i];

		if (!v->iov_len ||
		    rmsgi_pool_lookup(rc->r->env->pool, v->iov_base, v->iov_len,
				      &tx->lkey[i]) == 0)
			continue;
		ret = rmsgi_mr_pin(ctx, v->iov_base, v->iov_len, need,
				   &tx->pin[tx->npin], &tx->lkey[i], &rkey);
		if (ret) {
			rma_release(ctx, op);
			return ret;
		}
		tx->npin++;
	}
	tx->split =
		op->type == RMSGI_T_WRITE_IMM &&
		(op->len > rc->r->max_msg_sz || op->iovcnt > (int)rc->max_sge);
	return 0;
}

/* fills slots with the pieces of rc->rma_op while room lasts; the op
 * completes with its last slot */
static void rc_post_rma(struct rdma_conn *rc)
{
	struct rdma_ctx *r = rc->r;
	struct rmsgi_op *op;

	while ((op = rc->rma_op) && rc->state == RC_UP &&
	       ring_used(rc) < SQ_DEPTH - 8) {
		struct rma_tx *tx = op->tr_priv;
		bool rd = op->kind == RMSGI_OP_READ;
		struct sq_slot *s;
		uint64_t bytes = 0;
		int nsge = 0;

		if (rd && rc->reads_out >= r->rd_atom)
			break;
		if (tx->split && tx->done == op->len && tx->started) {
			/* the writes went: the immediate follows in order */
			struct rmsgi_hdr h = {.type = RMSGI_T_IMM,
					      .aux = op->aux,
					      .id = op->len};
			uint8_t *hdr;

			s = slot_fill(rc, SLOT_RMA);
			hdr = rc->hdrs + (size_t)(rc->head - 1) % SQ_DEPTH * 64;
			rmsgi_hdr_encode(&h, hdr);
			s->wr.opcode = IBV_WR_SEND;
			s->sge[0].addr = (uintptr_t)hdr;
			s->sge[0].length = RMSGI_HDR_SIZE;
			s->sge[0].lkey = rc->hdrs_lkey;
			s->wr.num_sge = 1;
			s->op = op;
			rc->rma_op = NULL;
			break;
		}
		s = slot_fill(rc, SLOT_RMA);
		while (tx->idx < op->iovcnt && nsge < (int)rc->max_sge &&
		       bytes < r->max_msg_sz) {
			const struct iovec *v = &op->iov[tx->idx];
			uint64_t take = RMSGI_MIN(v->iov_len - tx->ioff,
						  r->max_msg_sz - bytes);

			if (!take) {
				tx->idx++;
				tx->ioff = 0;
				continue;
			}
			s->sge[nsge].addr =
				(uintptr_t)((uint8_t *)v->iov_base + tx->ioff);
			s->sge[nsge].length = (uint32_t)take;
			s->sge[nsge].lkey = tx->lkey[tx->idx];
			nsge++;
			bytes += take;
			tx->ioff += take;
			if (tx->ioff == v->iov_len) {
				tx->idx++;
				tx->ioff = 0;
			}
		}
		s->wr.num_sge = nsge;
		s->wr.wr.rdma.remote_addr = op->rma.addr + tx->done;
		s->wr.wr.rdma.rkey = op->rma.rkey;
		tx->done += bytes;
		tx->started = true;
		if (rd) {
			s->wr.opcode = IBV_WR_RDMA_READ;
			s->is_read = 1;
			rc->reads_out++;
		} else if (op->type == RMSGI_T_WRITE_IMM && !tx->split) {
			s->wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			s->wr.imm_data = htonl(op->aux);
		} else {
			s->wr.opcode = IBV_WR_RDMA_WRITE;
		}
		if (tx->done == op->len && !tx->split) {
			s->op = op;
			rc->rma_op = NULL;
		}
	}
	if (!rc->rma_op && rc->room_wanted) {
		rc->room_wanted = false;
		rmsgi_conn_tr_room(rc->c);
	}
}

static int rdma_post_rma(struct rdma_conn *rc, struct rmsgi_op *op)
{
	int ret = rma_prepare(rc, op);

	if (ret)
		return ret;
	rc->rma_op = op;
	rc_post_rma(rc);
	return 0;
}

/* a rendezvous request: the windows' binds, then the frame listing them */
static int rdma_post_rndv(struct rdma_conn *rc, struct rmsgi_op *op,
			  const struct rmsgi_hdr *h)
{
	size_t need = RMSGI_HDR_SIZE + rndv_nseg(op) * RMSGI_SEG_SIZE;
	uint32_t head0 = rc->head, lkey = 0, i;
	struct sq_slot *s;
	void *buf = NULL;
	size_t flen;
	int ret;

	ret = rmsgi_pool_alloc(rc->r->env->pool, need, &buf);
	if (ret)
		return ret;
	ret = rndv_prepare(rc, op, buf, &flen);
	if (!ret && flen - RMSGI_HDR_SIZE > rc->peer_eager)
		ret = -EMSGSIZE;
	if (ret)
		goto undo;
	rmsgi_hdr_encode(h, buf);
	rmsgi_pool_lookup(rc->r->env->pool, buf, flen, &lkey);
	s = slot_fill(rc, SLOT_SEND);
	s->op = op;
	s->copybuf = buf;
	s->wr.opcode = IBV_WR_SEND;
	s->sge[0].addr = (uintptr_t)buf;
	s->sge[0].length = (uint32_t)flen;
	s->sge[0].lkey = lkey;
	s->wr.num_sge = 1;
	if (flen <= rc->max_inline)
		s->wr.send_flags |= IBV_SEND_INLINE;
	return 0;

undo:
	if (ret == -EAGAIN)
		rc->room_wanted = true;
	/* bind slots filled so far were never posted: drop them */
	for (i = head0; i != rc->head; i++)
		rc->ring[i % SQ_DEPTH].mw->pending = false;
	rc->head = head0;
	rdma_rndv_release(rc, op);
	rmsgi_pool_free(rc->r->env->pool, buf);
	return ret;
}

static int rdma_post(void *p, struct rmsgi_op *op)
{
	struct rdma_conn *rc = p;
	struct rdma_ctx *r = rc->r;
	struct rmsgi_hdr h;
	struct sq_slot *s;
	uint8_t *hdr;
	size_t total, flen;
	uint32_t lkey = 0;
	int i, ret, nsge;
	bool zc = true;

	if (rc->state != RC_UP)
		return -ENOTCONN;
	/* keep room for rendezvous reads of the other direction; and
	 * nothing overtakes a one-sided op still being posted */
	if (ring_used(rc) >= SQ_DEPTH - 8 || rc->rma_op) {
		rc->room_wanted = true;
		return -EAGAIN;
	}
	if (op->kind == RMSGI_OP_WRITE || op->kind == RMSGI_OP_READ)
		return rdma_post_rma(rc, op);
	rmsgi_op_hdr(op, &h);
	if (op->rndv)
		return rdma_post_rndv(rc, op, &h);
	s = slot_fill(rc, SLOT_SEND);
	s->op = op;
	hdr = rc->hdrs + (size_t)(rc->head - 1) % SQ_DEPTH * 64;
	s->wr.opcode = IBV_WR_SEND;

	rmsgi_hdr_encode(&h, hdr);
	total = RMSGI_HDR_SIZE + op->len;
	s->sge[0].addr = (uintptr_t)hdr;
	s->sge[0].length = RMSGI_HDR_SIZE;
	s->sge[0].lkey = rc->hdrs_lkey;
	nsge = 1;
	if (op->iovcnt + 1 > (int)rc->max_sge)
		zc = false;
	for (i = 0; zc && i < op->iovcnt; i++) {
		if (!op->iov[i].iov_len)
			continue;
		s->sge[nsge].addr = (uintptr_t)op->iov[i].iov_base;
		s->sge[nsge].length = (uint32_t)op->iov[i].iov_len;
		/* inline sends copy at post time; keys do not matter */
		if (total > rc->max_inline &&
		    rmsgi_pool_lookup(r->env->pool, op->iov[i].iov_base,
				      op->iov[i].iov_len, &lkey))
			zc = false;
		s->sge[nsge].lkey = lkey;
		nsge++;
	}
	if (zc) {
		s->wr.num_sge = nsge;
		if (total <= rc->max_inline)
			s->wr.send_flags |= IBV_SEND_INLINE;
		return 0;
	}
	/* unregistered memory: one copy into a registered buffer */
	ret = rmsgi_pool_alloc(r->env->pool, total, &s->copybuf);
	if (ret)
		goto undo;
	memcpy(s->copybuf, hdr, RMSGI_HDR_SIZE);
	flen = RMSGI_HDR_SIZE;
	for (i = 0; i < op->iovcnt; i++) {
		memcpy((uint8_t *)s->copybuf + flen, op->iov[i].iov_base,
		       op->iov[i].iov_len);
		flen += op->iov[i].iov_len;
	}
	rmsgi_pool_lookup(r->env->pool, s->copybuf, total, &lkey);
	s->sge[0].addr = (uintptr_t)s->copybuf;
	s->sge[0].length = (uint32_t)total;
	s->sge[0].lkey = lkey;
	s->wr.num_sge = 1;
	return 0;

undo:
	rmsgi_pool_free(r->env->pool, s->copybuf);
	rc->head--;
	return ret;
}

/*
 * send_direct (transport.h): a frame small enough to go inline is posted
 * now, as a work request of its own, when nothing waits to be posted
 * ahead of it. The device copies inline data at post time, so nothing of
 * the caller's is kept: no op, and the memory is free at once. Anything
 * else returns 0 and takes the queue. A failed post also returns 0: the
 * queued path fails it again from the loop, where teardown may run.
 */
/* what goes inline, header included */
static size_t rdma_direct_max(const void *p)
{
	const struct rdma_conn *rc = p;

	return rc && rc->max_inline > RMSGI_HDR_SIZE
		       ? rc->max_inline - RMSGI_HDR_SIZE
		       : 0;
}

static ssize_t rdma_send_direct(void *p, const struct rmsgi_hdr *h,
				const struct iovec *iov, int iovcnt)
{
	struct rdma_conn *rc = p;
	size_t total = RMSGI_HDR_SIZE + h->len;
	struct ibv_send_wr *bad;
	struct sq_slot *s;
	uint8_t *hdr;
	int i, nsge = 1;

	if (RMSGI_UNLIKELY(!rc || rc->state != RC_UP ||
			   total > rc->max_inline ||
			   iovcnt + 1 > (int)rc->max_sge ||
			   ring_used(rc) >= SQ_DEPTH - 8 || rc->rma_op ||
			   rc->unposted != rc->head))
		return 0;
	s = slot_fill(rc, SLOT_SEND);
	hdr = rc->hdrs + (size_t)(rc->head - 1) % SQ_DEPTH * 64;
	rmsgi_hdr_encode(h, hdr);
	s->sge[0].addr = (uintptr_t)hdr;
	s->sge[0].length = RMSGI_HDR_SIZE;
	s->sge[0].lkey = rc->hdrs_lkey;
	for (i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		s->sge[nsge].addr = (uintptr_t)iov[i].iov_base;
		s->sge[nsge].length = (uint32_t)iov[i].iov_len;
		s->sge[nsge].lkey = 0; /* inline: keys do not matter */
		nsge++;
	}
	s->wr.opcode = IBV_WR_SEND;
	s->wr.num_sge = nsge;
	/* the last of its burst: signalled, as rdma_kick() does */
	s->wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	s->wr.next = NULL;
	s->signaled = 1;
	rc->since_sig = 0;
	if (RMSGI_UNLIKELY(ibv_post_send(rc->qp, &s->wr, &bad))) {
		rc->head--;
		return 0;
	}
	rc->unposted = rc->head;
	return (ssize_t)total;
}

/* posts every filled slot as one chain */
static void rdma_kick(void *p)
{
	struct rdma_conn *rc = p;
	struct ibv_send_wr *first = NULL, *prev = NULL, *bad;
	uint32_t i;
	int ret;

	if (rc->state != RC_UP || rc->unposted == rc->head)
		return;
	for (i = rc->unposted; i != rc->head; i++) {
		struct sq_slot *s = &rc->ring[i % SQ_DEPTH];

		if (++rc->since_sig >= SIG_EVERY || i + 1 == rc->head ||
		    s->kind == SLOT_READ || s->is_read) {
			s->wr.send_flags |= IBV_SEND_SIGNALED;
			s->signaled = 1;
			rc->since_sig = 0;
		}
		s->wr.next = NULL;
		if (prev)
			prev->next = &s->wr;
		else
			first = &s->wr;
		prev = &s->wr;
	}
	rmsgi_tr_dbg(rc->r->env, "conn %u: post slots %u..%u", rc->ci->id,
		     rc->unposted, rc->head - 1);
	ret = ibv_post_send(rc->qp, first, &bad);
	if (ret) {
		ret = rmsgi_err_verbs(ret);
		rmsgi_err(rc->r->ctx, "ibv_post_send: %s", rmsg_strerror(ret));
		/* slots from bad on were not posted: teardown retires them */
		rc->unposted = (uint32_t)(bad->wr_id & ~SEND_TAG);
		rc_teardown(rc, ret);
		return;
	}
	rc->unposted = rc->head;
}

/* ------------------------------------------------------------------ */
/* rendezvous receive                                                   */

static void rndv_rx_free(struct rmsg_msg *m)
{
	struct rndv_rx *rx = RMSGI_CONTAINER_OF(m, struct rndv_rx, m);
	struct rdma_ctx *r = rx->r;

	if (rx->req)
		rxbuf_release(&rx->req->m);
	rx->req = NULL;
	rmsgi_pool_free(r->env->pool, rx->buf);
	rx->buf = NULL;
	/* the object waits in the quarantine: an app that releases a held
	 * message twice hits a message that is not held (msg.c), not freed
	 * memory or another message */
	rmsgi_list_add_tail(&r->rq, &rx->qlink);
	if (++r->rq_n > RNDV_QUARANTINE) {
		r->rq_n--;
		free(rmsgi_list_entry(rmsgi_list_pop(&r->rq), struct rndv_rx,
				      qlink));
	}
}

static void rndv_quarantine_clear(struct rdma_ctx *r)
{
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&r->rq)))
		free(rmsgi_list_entry(n, struct rndv_rx, qlink));
	r->rq_n = 0;
}

/*
 * What one connection may read into at a time: its share of the
 * context's registered-memory budget, reg_limit / (connections + 1), so
 * that a peer announcing large messages leaves room for every other
 * connection and one more; never less than its eager buffers.
 */
static uint64_t rndv_share(const struct rdma_conn *rc)
{
	const struct rdma_ctx *r = rc->r;
	uint64_t share = r->env->cfg->reg_limit / ((uint64_t)r->nconns + 1);
	uint64_t floor = (uint64_t)r->stride * rc->granted;

	return RMSGI_MAX(share, floor);
}

/*
 * The largest message a connection may ever read: with nothing else being
 * read on it, one message up to the share of a single connection
 * (reg_limit / 2), however many others (idle ones included) are open.
 */
static uint64_t rndv_alone(const struct rdma_conn *rc)
{
	uint64_t alone = rc->r->env->cfg->reg_limit / 2;
	uint64_t floor = (uint64_t)rc->r->stride * rc->granted;

	return RMSGI_MAX(alone, floor);
}

/* a rendezvous receive's reads are done (or will never be): its bytes
 * leave the connection's share, and the connection hears of it */
static void rndv_rx_done(struct rdma_conn *rc, struct rndv_rx *rx, int status)
{
	if (rx->charged) {
		rc->rndv_bytes -= rx->m.len;
		rx->charged = false;
	}
	rmsgi_conn_rx_ready(rc->c, &rx->m, status);
}

/*
 * Gives the next pending receive its buffer: 0 when it has one, 1 when
 * it must wait for the reads before it (the share is taken), or -ENOMEM
 * when it can have none (larger than rndv_alone(), or no memory).
 */
static int rndv_rx_alloc(struct rdma_conn *rc, struct rndv_rx *rx)
{
	struct rmsg_ctx *ctx = rc->r->ctx;
	uint64_t share = rndv_share(rc), alone = rndv_alone(rc);
	uint64_t len = rx->m.len;
	int ret;

	if (len > alone) {
		rmsgi_warn(ctx,
			   "conn %u: the peer's rendezvous of %llu bytes is "
			   "larger than one connection may read of the "
			   "registered-memory budget (%llu bytes): refused",
			   rc->ci->id, (unsigned long long)len,
			   (unsigned long long)alone);
		return -ENOMEM;
	}
	/* with nothing being read, one message up to alone may start;
	 * beside others, the reads stay within the share */
	if (rc->rndv_bytes && rc->rndv_bytes + len > share)
		return 1;
	ret = rmsgi_pool_alloc(rc->r->env->pool, len, (void **)&rx->buf);
	if (ret)
		return -ENOMEM;
	rmsgi_pool_lookup(rc->r->env->pool, rx->buf, len, &rx->lkey);
	rx->m.data = rx->buf;
	rx->charged = true;
	rc->rndv_bytes += len;
	/* reading: the request's buffer (the peer's credit) goes back */
	rxbuf_release(&rx->req->m);
	rx->req = NULL;
	return 0;
}

/* posts reads for pending rendezvous receives while room lasts */
static void rc_post_reads(struct rdma_conn *rc)
{
	struct rdma_ctx *r = rc->r;
	bool any = false;

	while (rc->pending_reads && rc->state == RC_UP) {
		struct rndv_rx *rx = rc->pending_reads;
		struct rmsgi_seg *seg = &rx->segs[rx->seg_idx];
		uint64_t chunk;
		struct sq_slot *s;
		int ret;

		if (ring_used(rc) >= SQ_DEPTH || rc->reads_out >= r->rd_atom)
			break;
		if (!rx->buf) {
			ret = rndv_rx_alloc(rc, rx);
			if (ret > 0)
				break; /* waits for the reads before it */
			if (ret < 0) {
				/* only this message fails: the ACK tells the
				 * sender, the messages behind it go on */
				rc->pending_reads = rx->next_pending;
				if (!rc->pending_reads)
					rc->pending_tail = NULL;
				rndv_rx_done(rc, rx, ret);
				continue;
			}
		}
		/* 1 MiB reads: small frames posted behind them (credits,
		 * probe answers) wait for at most a few of them */
		chunk = RMSGI_MIN(seg->len - rx->seg_off,
				  RMSGI_MIN(r->max_msg_sz, (uint64_t)1 << 20));
		s = slot_fill(rc, SLOT_READ);
		s->rx = rx;
		s->wr.opcode = IBV_WR_RDMA_READ;
		s->wr.num_sge = 1;
		s->sge[0].addr = (uintptr_t)(rx->buf + rx->dst_off);
		s->sge[0].length = (uint32_t)chunk;
		s->sge[0].lkey = rx->lkey;
		s->wr.wr.rdma.remote_addr = seg->addr + rx->seg_off;
		s->wr.wr.rdma.rkey = seg->rkey;
		rx->reads_out++;
		rc->reads_out++;
		rx->dst_off += chunk;
		rx->seg_off += chunk;
		if (rx->seg_off == seg->len) {
			rx->seg_idx++;
			rx->seg_off = 0;
		}
		if (rx->seg_idx == rx->nseg) {
			rc->pending_reads = rx->next_pending;
			if (!rc->pending_reads)
				rc->pending_tail = NULL;
		}
		any = true;
	}
	/* a refused message's callbacks may have closed the connection */
	if (any && rc->state == RC_UP)
		rdma_kick(rc);
}

/*
 * A rendezvous request (in @rb) arrived: queued behind the ones before
 * it; its buffer comes when its turn and the connection's share allow
 * (rc_post_reads). The request's receive buffer is kept until then, so
 * the requests a peer can have waiting are bounded by its credits.
 * Takes @rb in every case.
 */
static int rndv_rx_start(struct rdma_conn *rc, const struct rmsgi_hdr *h,
			 struct rxbuf *rb, const uint8_t *payload, size_t plen)
{
	struct rmsg_conn *c = rc->c;
	struct rndv_rx *rx;
	uint32_t i, nseg;
	uint64_t sum = 0;

	if (plen == 0 || plen % RMSGI_SEG_SIZE || h->len <= 0)
		goto proto;
	nseg = (uint32_t)(plen / RMSGI_SEG_SIZE);
	rx = calloc(1, sizeof(*rx) + nseg * sizeof(rx->segs[0]));
	if (!rx) {
		rxbuf_release(&rb->m);
		return -ENOMEM;
	}
	for (i = 0; i < nseg; i++) {
		rmsgi_seg_decode(payload + i * RMSGI_SEG_SIZE, &rx->segs[i]);
		if (rx->segs[i].len == 0)
			break;
		sum += rx->segs[i].len;
	}
	if (i < nseg || sum != h->len) {
		free(rx);
		goto proto;
	}
	rx->r = rc->r;
	rx->nseg = nseg;
	rx->req = rb;
	rmsgi_msg_init(&rx->m, c, NULL, h->len);
	rx->m.ready = 0;
	rx->m.free_fn = rndv_rx_free;
	if (rmsgi_conn_rx(c, h, &rx->m))
		return 0; /* the conn freed rx and is closing */
	if (rc->pending_tail)
		rc->pending_tail->next_pending = rx;
	else
		rc->pending_reads = rx;
	rc->pending_tail = rx;
	rc_post_reads(rc);
	return 0;

proto:
	rxbuf_release(&rb->m);
	return -EPROTO;
}

/* ------------------------------------------------------------------ */
/* completions                                                          */

/* retires slots up to and including @upto; @status applies to @upto */
static void rc_retire(struct rdma_conn *rc, uint32_t upto, int status)
{
	struct rmsg_conn *c = rc->c;

	while ((int32_t)(upto - rc->tail) >= 0 && rc->tail != rc->head) {
		struct sq_slot *s = &rc->ring[rc->tail % SQ_DEPTH];
		int st = rc->tail == upto ? status : 0;

		rc->tail++;
		if (s->copybuf) {
			rmsgi_pool_free(rc->r->env->pool, s->copybuf);
			s->copybuf = NULL;
		}
		if (s->kind == SLOT_READ) {
			struct rndv_rx *rx = s->rx;

			rc->reads_out--;
			if (st && !rx->status)
				rx->status = st;
			if (--rx->reads_out == 0 && rx->seg_idx == rx->nseg)
				rndv_rx_done(rc, rx, rx->status);
		} else if (s->kind == SLOT_BIND) {
			if (st)
				rmsgi_warn(rc->r->ctx,
					   "conn %u: binding a memory window "
					   "failed: %s",
					   rc->ci->id, rmsg_strerror(st));
			mw_bind_retired(s->mw);
		} else if (s->op) {
			if (s->kind == SLOT_RMA)
				rma_release(rc->r->ctx, s->op);
			rmsgi_conn_op_done(c, s->op, st);
		}
		if (s->is_read)
			rc->reads_out--;
	}
	if (rc->room_wanted && ring_used(rc) < SQ_DEPTH / 2) {
		rc->room_wanted = false;
		rmsgi_conn_tr_room(c);
	}
}

static void on_recv(struct rdma_ctx *r, struct ibv_wc *wc)
{
	struct rxbuf *rb = (struct rxbuf *)(uintptr_t)wc->wr_id;
	struct rdma_conn *rc = qpn_find(r, wc->qp_num);
	struct rmsgi_hdr h;
	int ret;

	rmsgi_tr_dbg(r->env, "recv qpn %u status %d len %u conn %u", wc->qp_num,
		     wc->status, wc->byte_len, rc ? rc->ci->id : 0);
	r->srq_posted--;
	rmsgi_msg_init(&rb->m, NULL, NULL, 0);
	rb->m.free_fn = rxbuf_release;
	/* (a server's RC_CONNECTING: the app accepted it) */
	if (rc && rc->state == RC_CONNECTING && rc->is_server &&
	    wc->status == IBV_WC_SUCCESS) {
		/* the peer's first frame can beat RDMA_CM_EVENT_ESTABLISHED:
		 * the connection is up, the event will only confirm it */
		rc_timer_stop(rc);
		rc_up(rc);
		rmsgi_conn_ev_established(rc->c, NULL);
	}
	/* a local close lingers for the acknowledgements of its rendezvous
	 * sends: frames still count then (the rest is dropped by conn.c) */
	if (wc->status != IBV_WC_SUCCESS || !rc ||
	    (rc->state != RC_UP && rc->state != RC_LINGER)) {
		rxbuf_release(&rb->m);
		if (rc && wc->status != IBV_WC_SUCCESS &&
		    wc->status != IBV_WC_WR_FLUSH_ERR) {
			rmsgi_warn(r->ctx, "conn %u: receive failed: %s",
				   rc->ci->id, ibv_wc_status_str(wc->status));
			rc_teardown(rc, rmsgi_err_wc(wc->status));
		}
		return;
	}
	/* the buffer carries one of this conn's credits until reposted */
	rb->m.conn = rc->c;
	rmsgi_conn_get(rc->c);
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		/* the peer's write-with-immediate: nothing is in the buffer */
		memset(&h, 0, sizeof(h));
		h.type = RMSGI_T_IMM;
		h.aux = ntohl(wc->imm_data);
		h.id = wc->byte_len;
		rmsgi_conn_rx(rc->c, &h, &rb->m);
		return;
	}
	/* DATA fits the buffer (byte_len checks it); RNDV_REQ announces up
	 * to the configured maximum */
	ret = rmsgi_hdr_decode(rb->buf, wc->byte_len, rc->ci->cfg->max_msg_size,
			       &h);
	if (ret == 0 && h.type == RMSGI_T_DATA &&
	    h.len != wc->byte_len - RMSGI_HDR_SIZE)
		ret = -EPROTO;
	if (ret == 0 && !rmsgi_tr_frame_ok(RDMA_CAPS, h.type))
		ret = -EPROTO;
	if (ret == 0 && h.type != RMSGI_T_DATA && h.type != RMSGI_T_RNDV_REQ &&
	    wc->byte_len != RMSGI_HDR_SIZE)
		ret = -EPROTO;
	/* the device never completes more than the buffer; trust nothing */
	if (ret == 0 && wc->byte_len > r->stride)
		ret = -EPROTO;
	/* an IMM frame's length is only the peer's word for what it wrote
	 * (a split write-with-immediate): one write reaches one region, so
	 * no more than the largest the peer may write */
	if (ret == 0 && h.type == RMSGI_T_IMM &&
	    h.id > rmsgi_mr_max_len(r->ctx, RMSG_ACCESS_REMOTE_WRITE)) {
		rmsgi_warn(r->ctx,
			   "conn %u: the peer claims a write of %llu bytes, "
			   "more than any region it may write: closing",
			   rc->ci->id, (unsigned long long)h.id);
		ret = -EPROTO;
	}
	if (ret == 0 && h.type == RMSGI_T_RNDV_REQ && rc->state == RC_LINGER) {
		rxbuf_release(&rb->m); /* closing: not worth reading */
		return;
	}
	if (ret == 0 && h.type == RMSGI_T_RNDV_REQ) {
		/* the request frame is consumed here; its buffer goes back
		 * when its reads start */
		ret = rndv_rx_start(rc, &h, rb, rb->buf + RMSGI_HDR_SIZE,
				    wc->byte_len - RMSGI_HDR_SIZE);
		if (ret)
			rmsgi_conn_abort(rc->c, ret);
		return;
	}
	if (ret) {
		rxbuf_release(&rb->m);
		rmsgi_conn_abort(rc->c, ret);
		return;
	}
	rb->m.data = rb->buf + RMSGI_HDR_SIZE;
	rb->m.len = h.len;
	rmsgi_conn_rx(rc->c, &h, &rb->m);
	/* lingering: that may have been the last acknowledgement */
	if (rc->state == RC_LINGER && rc->tail == rc->head &&
	    !rmsgi_conn_awaits_peer(rc->c))
		rc_teardown(rc, 0);
}

static int cq_drain(struct rdma_ctx *r)
{
	struct ibv_wc wcs[32];
	int n, i, total = 0;

	while ((n = ibv_poll_cq(r->cq, 32, wcs)) > 0) {
		for (i = 0; i < n; i++) {
			struct ibv_wc *wc = &wcs[i];
			struct rdma_conn *rc;

			if (!(wc->wr_id & SEND_TAG)) {
				on_recv(r, wc);
				continue;
			}
			rc = qpn_find(r, wc->qp_num);
			rmsgi_tr_dbg(r->env, "send wc qpn %u slot %u status %d",
				     wc->qp_num, (uint32_t)wc->wr_id,
				     wc->status);
			if (!rc)
				continue;
			rc_retire(rc, (uint32_t)wc->wr_id,
				  rmsgi_err_wc(wc->status));
			if (wc->status != IBV_WC_SUCCESS &&
			    wc->status != IBV_WC_WR_FLUSH_ERR) {
				rmsgi_warn(r->ctx,
					   "conn %u: work completion "
					   "error: %s",
					   rc->ci->id,
					   ibv_wc_status_str(wc->status));
				rc_teardown(rc, rmsgi_err_wc(wc->status));
			} else if ((rc->state == RC_DRAINING ||
				    rc->state == RC_LINGER) &&
				   rc->tail == rc->head) {
				rc_teardown(rc, 0);
			} else {
				if (rc->pending_reads)
					rc_post_reads(rc);
				if (rc->rma_op) {
					rc_post_rma(rc);
					rdma_kick(rc);
				}
			}
		}
		total += n;
	}
	return total;
}

static int rdma_poll(void *p, bool arm)
{
	struct rdma_ctx *r = p;
	int n;

	bury(r);
	if (!r->cq)
		return 0;
	/* released receive buffers go back when the CQ is found empty (off
	 * the critical path: while waiting for the peer) or by the batch
	 * (rxbuf_release) */
	/* released receive buffers go back before the loop sleeps; while
	 * it spins (busy poll), only when the CQ is found empty, off the
	 * critical path. (Reposting after the drain before sleeping too
	 * made event-mode round trips 2.4x slower on rxe, measured.) */
	if (r->repost && arm)
		rx_repost(r);
	n = cq_drain(r);
	if (r->repost && !arm && n == 0)
		rx_repost(r);
	if (arm) {
		ibv_req_notify_cq(r->cq, 0);
		n += cq_drain(r);
	}
	return n;
}

static void cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_ctx *r = w->data;
	struct ibv_cq *cq;
	void *cq_ctx;

	while (ibv_get_cq_event(r->cch, &cq, &cq_ctx) == 0) {
		if (++r->cq_events >= 64) {
			ibv_ack_cq_events(r->cq, r->cq_events);
			r->cq_events = 0;
		}
	}
	ibv_req_notify_cq(r->cq, 0);
	cq_drain(r);
	rmsgi_ctx_flush(r->ctx);
}

/* ------------------------------------------------------------------ */
/* teardown                                                             */

/* fails the connection (reason < 0) or continues a drain (reason 0); the
 * endpoint goes once every posted slot has retired */
static void rc_teardown(struct rdma_conn *rc, int reason)
{
	struct rdma_ctx *r = rc->r;
	struct rmsg_conn *c = rc->c;

	if (rc->buried)
		return;
	if (reason && !rc->silent)
		rmsgi_conn_ev_failed(c, reason, NULL);
	/* a close the core lets linger (the app's) waits for its posted
	 * work, and for the peer's acknowledgements of rendezvous sends it
	 * may be reading; a failure goes to the drain */
	if (!reason && rc->state == RC_UP &&
	    (rc->tail != rc->head || rmsgi_conn_awaits_peer(c)) &&
	    rc->linger_ms) {
		rc->state = RC_LINGER;
		rc_timer(rc, rc->linger_ms);
		return;
	}
	if (rc->state == RC_LINGER && !reason &&
	    (rc->tail != rc->head || rmsgi_conn_awaits_peer(c)) && rc->timer_on)
		return; /* still lingering */
	if (rc->state != RC_DRAINING && rc->state != RC_DEAD) {
		struct ibv_qp_attr qattr = {.qp_state = IBV_QPS_ERR};

		if (rc->state == RC_UP || rc->state == RC_CONNECTING ||
		    rc->state == RC_LINGER)
			rdma_disconnect(rc->id);
		rc->state = RC_DRAINING;
		if (rc->qp)
			ibv_modify_qp(rc->qp, &qattr, IBV_QP_STATE);
		/* slots filled but never posted will not complete */
		while (rc->unposted != rc->head) {
			struct sq_slot *s = &rc->ring[--rc->head % SQ_DEPTH];

			if (s->copybuf)
				rmsgi_pool_free(r->env->pool, s->copybuf);
			if (s->kind == SLOT_BIND)
				mw_bind_retired(s->mw);
			if (s->op && s->kind == SLOT_RMA)
				rma_release(r->ctx, s->op);
			if (s->op)
				rmsgi_conn_op_done(c, s->op, -ECANCELED);
			if (s->kind == SLOT_READ) {
				struct rndv_rx *rx = s->rx;

				rc->reads_out--;
				/* all its reads issued, none posted: no
				 * completion will finish it; back on
				 * pending_reads, which ends it below */
				if (--rx->reads_out == 0 &&
				    rx->seg_idx == rx->nseg) {
					rx->next_pending = rc->pending_reads;
					rc->pending_reads = rx;
					if (!rc->pending_tail)
						rc->pending_tail = rx;
				}
			}
			if (s->is_read)
				rc->reads_out--;
		}
		rc_timer(rc, TEARDOWN_MS);
	} else if (rc->state == RC_DEAD) {
		/* a rejected request: nothing was posted */
		rc->tail = rc->head;
	}
	if (rc->tail != rc->head)
		return; /* flush completions still to come */

	rc_timer_stop(rc);
	if (rc->rma_op) {
		/* posted in part: its last piece never will be */
		struct rmsgi_op *op = rc->rma_op;

		rc->rma_op = NULL;
		rma_release(r->ctx, op);
		rmsgi_conn_op_done(c, op, -ECANCELED);
	}
	while (rc->pending_reads) {
		struct rndv_rx *rx = rc->pending_reads;

		rc->pending_reads = rx->next_pending;
		if (rx->reads_out == 0)
			rndv_rx_done(rc, rx, -ECANCELED);
		else
			rx->seg_idx = rx->nseg;
	}
	rc->pending_tail = NULL;
	/*
	 * Every memory window bound on the QP goes before it: destroying a
	 * QP with type-2 windows still bound blocked for ~51 s on rxe (6.1).
	 * The exports end with the connection anyway; rendezvous windows
	 * keep only their pins until their ops are released.
	 */
	rmsgi_mr_conn_gone(c);
	while (!rmsgi_list_empty(&rc->mws)) {
		struct rdma_mw *w =
			rmsgi_list_entry(rc->mws.next, struct rdma_mw, link);

		rmsgi_list_del(&w->link);
		ibv_dealloc_mw(w->mw);
		w->mw = NULL;
	}
	if (rc->qp) {
		qpn_del(r, rc);
		rdma_destroy_qp(rc->id);
		rc->qp = NULL;
	}
	if (rc->id)
		rdma_destroy_id(rc->id);
	rc->id = NULL;
	if (rc->hdrs)
		rmsgi_pool_free(r->env->pool, rc->hdrs);
	r->srq_target -= rc->granted;
	r->nconns--;
	rc->state = RC_DEAD;
	rc->buried = true;
	rc->dead_next = r->graveyard;
	r->graveyard = rc;
	if (rc->silent) {
		/* never reached the app: no callbacks, just free */
		rmsgi_conn_discard(c);
		return;
	}
	rmsgi_conn_ev_down(c);
}

static void bury(struct rdma_ctx *r)
{
	while (r->graveyard) {
		struct rdma_conn *rc = r->graveyard;

		r->graveyard = rc->dead_next;
		free(rc);
	}
}

static void rc_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rdma_conn *rc = w->data;

	rc->timer_on = false;
	ev_ref(loop);
	if (rc->state == RC_LINGER) {
		rmsgi_warn(rc->r->ctx,
			   "conn %u: %u work requests still "
			   "posted after %u ms: closing anyway",
			   rc->ci->id, rc->head - rc->tail, rc->linger_ms);
		rc_teardown(rc, 0);
	} else if (rc->state == RC_DRAINING) {
		/* the device never flushed: retire by force, QP first */
		rmsgi_warn(rc->r->ctx,
			   "conn %u: %u work requests never "
			   "flushed; destroying the QP",
			   rc->ci->id, rc->head - rc->tail);
		if (rc->qp) {
			qpn_del(rc->r, rc);
			rdma_destroy_qp(rc->id);
			rc->qp = NULL;
		}
		rc->unposted = rc->head;
		while (rc->tail != rc->head)
			rc_retire(rc, rc->tail, -ECANCELED);
		rc_teardown(rc, 0);
	} else if (rc->state != RC_UP) {
		rc_teardown(rc, -ETIMEDOUT);
	}
	rmsgi_ctx_flush(rc->r->ctx);
}

static void rdma_disconnect_op(void *p, unsigned linger_ms)
{
	struct rdma_conn *rc = p;

	rc->linger_ms = linger_ms;
	rc_teardown(rc, 0);
}

static void rdma_ctx_fini(void *p)
{
	struct rdma_ctx *r = p;
	struct ev_loop *loop = r->env->loop;
	uint32_t i;
	int spins;

	/* conns were told to close: give the device a moment to flush */
	for (spins = 0; r->nconns && spins < 100000; spins++)
		if (r->cq)
			cq_drain(r);
	for (i = 0; i < QPN_BUCKETS; i++) {
		while (r->qpn_hash[i]) {
			struct rdma_conn *rc = r->qpn_hash[i];

			qpn_del(r, rc);
			rdma_destroy_qp(rc->id);
			rc->qp = NULL;
			rc->unposted = rc->head;
			while (rc->tail != rc->head)
				rc_retire(rc, rc->tail, -ECANCELED);
			rc_teardown(rc, 0);
		}
	}
	/* buffers released since the last batch hold their connections
	 * until reposted, and the shared receive queue goes now: let the
	 * connections go (the last drain above may have left some) */
	while (r->repost) {
		struct rxbuf *rb = r->repost;

		r->repost = rb->next;
		r->repost_n--;
		if (rb->m.conn) {
			rmsgi_conn_put(rb->m.conn);
			rb->m.conn = NULL;
		}
	}
	if (r->verbs) {
		ev_ref(loop);
		ev_io_stop(loop, &r->cq_io);
		if (r->cq_events)
			ibv_ack_cq_events(r->cq, r->cq_events);
		ibv_destroy_srq(r->srq);
		ibv_destroy_cq(r->cq);
		ibv_destroy_comp_channel(r->cch);
	}
	bury(r);
	for (i = 0; i < r->nchunks; i++) {
		rmsgi_pool_free(r->env->pool, r->rx_chunks[2 * i]);
		free(r->rx_chunks[2 * i + 1]);
	}
	free(r->rx_chunks);
	rmsgi_pool_clear_reg(r->env->pool);
	rmsgi_mr_clear_reg(r->ctx);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	ev_ref(loop);
	ev_io_stop(loop, &r->cm_io);
	rdma_destroy_event_channel(r->ech);
	rndv_quarantine_clear(r);
	*rmsgi_ctx_tr_slot(r->ctx, RMSGI_TR_RDMA) = NULL;
	free(r);
}

static const struct rmsgi_tr_ctx_ops rdma_ctx_ops = {
	.fini = rdma_ctx_fini,
	.poll = rdma_poll,
};

static const struct rmsgi_tr_listener_ops rdma_listener_ops = {
	.listen = rdma_listen_op,
	.close = rdma_listen_close,
};

static const struct rmsgi_tr_conn_ops rdma_conn_ops = {
	.connect = rdma_connect_op,
	.disconnect = rdma_disconnect_op,
	.post = rdma_post,
	.send_direct = rdma_send_direct,
	.direct_max = rdma_direct_max,
	.kick = rdma_kick,
	.rndv_release = rdma_rndv_release,
};

const struct rmsgi_tr rmsgi_tr_rdma = {
	.name = "rdma",
	.id = RMSGI_TR_RDMA,
	.caps = RDMA_CAPS,
	.ctx = &rdma_ctx_ops,
	.lst = &rdma_listener_ops,
	.conn = &rdma_conn_ops,
};
