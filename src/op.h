/* SPDX-License-Identifier: MIT */
/*
 * op.h - the data a connection moves: operations queued on it (send.c
 * builds and tracks them, a backend carries them) and the messages it
 * receives (msg.c, rx.c).
 */
#ifndef RMSG_OP_H
#define RMSG_OP_H

#include "base.h"
#include "list.h"
#include "proto.h"

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

/* a backend's capabilities (struct rmsgi_tr's caps) decide how ops go */
/* large messages go by rendezvous read */
#define RMSGI_TR_CAP_RNDV 0x1
/* one-sided ops are native: they consume no receive (no credit) and
 * complete without the peer's answer. Without it the core sends them as
 * frames the peer answers (RNDV_ACK for writes, READ_RESP for reads) */
#define RMSGI_TR_CAP_RMA 0x2
/* a received buffer takes a frame again only once the backend reposted
 * it: the backend returns its credit then (rmsgi_conn_credit_freed).
 * Without it the core returns the credit of a frame it is done with
 * inside rmsgi_conn_rx() itself (transport.h, "Posting") */
#define RMSGI_TR_CAP_CREDIT_LATE 0x4
/* frames also take bytes of a window the receiver grants (credit.h, the
 * byte window): receive memory that follows bytes, not frame counts */
#define RMSGI_TR_CAP_WINDOW 0x8
/* reaches peers on this host only (shm://). Ahead of others in a
 * scheme's chain (auto://) it is tried first, with no fallback from it:
 * told so (rmsgi_tr_conn_info.try_first), its connect() fails at once,
 * nothing started or reported, when the peer is elsewhere or does not
 * listen through it; the chain's others then start as without it */
#define RMSGI_TR_CAP_LOCAL 0x10

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
	/* a message of a resumable session the transport is done with,
	 * kept until the peer acknowledges it (session.c) */
	RMSGI_OS_UNACKED,
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
	uint16_t acks;	  /* messages acknowledged, set when posted */
	uint32_t wret;	  /* window bytes piggybacked, set when posted */
	/* a resumable session's message: its number (1, 2, ...) once
	 * posted, 0 before (session.c) */
	uint64_t seq;
	/* the core's alone: counted once as a credit stall (send.c) */
	uint8_t stalled;
	/* the header's flags (RMSGI_HDR_F_ACKREQ), set when posted */
	uint8_t hflags;
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

struct rmsg_msg {
	struct rmsgi_list link; /* conn's in-order receive queue */
	struct rmsg_conn *conn;
	const uint8_t *data;
	size_t len;
	uint8_t type;
	uint8_t ready; /* payload complete (rendezvous read done) */
	uint8_t held;
	uint8_t in_deliver; /* inside on_msg or on_request: it may be held */
	/* the core's own, never a backend's: RMSGI_MSG_IN_RX while
	 * rmsgi_conn_rx() runs for it, RMSGI_MSG_DONE once the core is done
	 * with it inside that call (rmsgi_msg_free: no free_fn then) */
	uint8_t in_rx;
	/* given up at a suspend before its rendezvous read ended
	 * (rmsgi_conn_rx_stale): freed when it ends, never delivered */
	uint8_t cut;
	uint32_t aux;
	/* the byte window's bytes this frame cost (rmsgi_conn_rx sets it;
	 * they go back with its credit) */
	uint32_t wcost;
#define RMSGI_WCOST_STALE UINT32_MAX /* a gone transport's (session.c) */
	uint64_t id;
	/* gives the memory back to the transport that owns it: runs once,
	 * only for a message rmsgi_conn_rx() kept (transport.h) */
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
	m->in_deliver = 0;
	m->in_rx = 0;
	m->cut = 0;
	m->wcost = 0;
}
#define RMSGI_MSG_IN_RX 1
#define RMSGI_MSG_DONE 2
/* the frame header an op goes out with (type, aux, id, credits, length
 * of payload and descriptors); one place for every backend, inline: it
 * runs per frame */
/* the payload bytes of the frame an op goes out as: emulated one-sided
 * ops add the descriptor, a read's iovec is not sent */
static inline uint64_t rmsgi_op_frame_len(const struct rmsgi_op *op)
{
	return op->pre_len + (op->iov_local ? 0 : op->len);
}

static inline void rmsgi_op_hdr(const struct rmsgi_op *op, struct rmsgi_hdr *h)
{
	h->type = op->type;
	h->flags = op->hflags;
	h->credits = op->credits;
	h->acks = op->acks;
	h->aux = op->aux;
	h->bytes = op->wret;
	h->len = rmsgi_op_frame_len(op);
	h->id = op->id;
}

/* is a frame of @type legal on an open connection of a backend with
 * @caps? (not the handshake's, nor RDMA-only frames on a backend without
 * them). The core's rule, inline: it runs per frame */
static inline bool rmsgi_tr_frame_ok(unsigned caps, uint8_t type)
{
	switch (type) {
	case RMSGI_T_DATA:
	case RMSGI_T_PACK: /* the core checks its entries */
	case RMSGI_T_CREDIT:
	case RMSGI_T_RNDV_ACK:
	case RMSGI_T_AUTH: /* the core checks it is authenticating */
		return true;
	case RMSGI_T_RNDV_REQ:
		return caps & RMSGI_TR_CAP_RNDV;
	case RMSGI_T_IMM:   /* the immediate of a native split write */
	case RMSGI_T_REKEY: /* windows bound again after a resume */
		return caps & RMSGI_TR_CAP_RMA;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
	case RMSGI_T_READ_REQ:
	case RMSGI_T_READ_RESP: /* one-sided ops emulated in frames */
		return !(caps & RMSGI_TR_CAP_RMA);
	default: /* the handshake's, and unknown types */
		return false;
	}
}

#endif /* RMSG_OP_H */
