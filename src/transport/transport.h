/* SPDX-License-Identifier: MIT */
/*
 * transport.h - the ops table every backend fills in.
 *
 * The connection state machine (conn.c) knows nothing of verbs or sockets:
 * it hands whole frames to a backend through these ops and hears back
 * through the rmsgi_conn_ev_*() and rmsgi_conn_op_done() functions.
 *
 * Rules a backend keeps:
 *  - post() is called only in RMSGI_CS_ESTABLISHED, with a credit already
 *    taken for frames that land in a peer's receive buffer. It returns
 *    -EAGAIN when the backend has no room; it then calls
 *    rmsgi_conn_tr_room() when room returns. It returns -ENOMEM, having
 *    posted nothing, when it finds no memory for this op (a copy buffer,
 *    a rendezvous registration): only that op fails.
 *  - Every op accepted by post() is completed exactly once with
 *    rmsgi_conn_op_done(), also when the connection fails (status
 *    -ECANCELED on a local close, else the failure).
 *  - A failure or a peer disconnect is reported once with
 *    rmsgi_conn_ev_failed(); after every posted op has completed and the
 *    endpoint is released, the backend calls rmsgi_conn_ev_down().
 *  - disconnect() starts a local close; it leads to the same
 *    rmsgi_conn_ev_down() (without ev_failed).
 *  - Received frames go to rmsgi_conn_rx() in order, with a struct rmsg_msg
 *    whose free_fn gives the buffer back and calls
 *    rmsgi_conn_credit_freed() for a buffer that carried a credit.
 *  - A rendezvous request whose payload finds no memory at the receiver
 *    still goes to rmsgi_conn_rx() (not ready), then at once to
 *    rmsgi_conn_rx_ready() with -ENOMEM: that message fails, the
 *    connection does not.
 */
#ifndef RMSG_TRANSPORT_H
#define RMSG_TRANSPORT_H

struct rmsg_ctx;
struct rmsg_conn;
struct rmsg_listener;
struct rmsgi_uri;
struct rmsgi_op;
struct rmsg_msg;

enum rmsgi_tr_id {
	RMSGI_TR_RDMA = 0,
	RMSGI_TR_TCP = 1,
	RMSGI_TR_COUNT = 2,
};

/* capabilities */
#define RMSGI_TR_CAP_RNDV 0x1 /* large messages go by rendezvous read */
/* one-sided ops are native: write and read consume no receive (no
 * credit) and complete without the peer's acknowledgement. Without it
 * conn.c sends them as frames (credit each) that the peer acknowledges
 * (RNDV_ACK for writes, READ_RESP for reads). post() of a one-sided op
 * may fail with -EINVAL, -EACCES or -ENOMEM: only that op fails. */
#define RMSGI_TR_CAP_RMA 0x2

struct rmsgi_tr_ops {
	const char *name;
	enum rmsgi_tr_id id;
	unsigned caps;

	/* per-context state; ctx_fini aborts what is left */
	void (*ctx_fini)(struct rmsg_ctx *ctx);

	int (*listen)(struct rmsg_listener *l, const struct rmsgi_uri *u);
	void (*listen_close)(struct rmsg_listener *l);

	/* client: resolve, connect and send the hello */
	int (*connect)(struct rmsg_conn *c, const struct rmsgi_uri *u);
	/* local close; ends in rmsgi_conn_ev_down() */
	void (*disconnect)(struct rmsg_conn *c);

	int (*post)(struct rmsg_conn *c, struct rmsgi_op *op);
	/* May be NULL. An idle connection's first send of a loop iteration
	 * may be written inside rmsg_send() without an op (TCP writes it to
	 * the socket, RDMA posts it inline): writes the frame @h + @iov now
	 * if nothing is queued ahead of it. Returns the bytes written: the whole frame (done), 0 (nothing
	 * written: post() it as usual), or a part; then the caller posts it
	 * as an op whose tr_off says how much already left. A negative errno
	 * means the connection failed, reported like any failure. */
	ssize_t (*send_direct)(struct rmsg_conn *c, const struct rmsgi_hdr *h,
			       const struct iovec *iov, int iovcnt);
	/* with send_direct: the largest payload it takes on this
	 * established connection, so that larger sends skip the attempt */
	size_t (*direct_max)(const struct rmsg_conn *c);
	/* end of a batch of post() calls: ring the doorbell; may be NULL */
	void (*kick)(struct rmsg_conn *c);
	/* a rendezvous send was acknowledged: release what post() pinned */
	void (*rndv_release)(struct rmsg_conn *c, struct rmsgi_op *op);

	/* polls completions without blocking and returns how many ran;
	 * with @arm, also re-arms event notification before the loop sleeps
	 * (then polls once more, closing the notify race). NULL if the
	 * backend is purely event driven. */
	int (*poll)(struct rmsg_ctx *ctx, bool arm);

	/* a pointer's registered-memory key, for zero-copy decisions */
	int (*buf_key)(struct rmsg_ctx *ctx, const void *addr, size_t len,
		       uint32_t *lkey_p);
};

extern const struct rmsgi_tr_ops rmsgi_tr_rdma;
extern const struct rmsgi_tr_ops rmsgi_tr_tcp;

#endif /* RMSG_TRANSPORT_H */
