// SPDX-License-Identifier: MIT
/*
 * send.c - the TCP output path: post() queues a frame behind a header
 * slot, kick() writes a batch with one sendmsg(), send_direct() writes an
 * idle connection's frame at once. The per-message path (tcp_post,
 * tcp_send_direct, tcp_kick, tcp_write) and the helpers it inlines stay
 * in this file.
 */
#define _GNU_SOURCE
#include "tcp.h"

/* ------------------------------------------------------------------ */
/* output                                                               */

/* bytes of @op's frame that come from its header slot: the header and
 * what the core put between it and the payload (op->pre) */
static size_t tcp_pre(const struct rmsgi_op *op)
{
	return RMSGI_HDR_SIZE + op->pre_len;
}

/* bytes of @op's whole frame; a local-only iovec is not sent */
static size_t tcp_frame_len(const struct rmsgi_op *op)
{
	return tcp_pre(op) + (op->iov_local ? 0 : op->len);
}

/* appends @op's frame minus its first @skip bytes to @iov */
static int tcp_op_iov(const struct rmsgi_op *op, size_t skip, struct iovec *iov,
		      int n, size_t *want)
{
	size_t pre = tcp_pre(op);
	int i;

	if (skip < pre) {
		iov[n].iov_base = (uint8_t *)op->tr_priv + skip;
		iov[n].iov_len = pre - skip;
		*want += iov[n].iov_len;
		n++;
		skip = 0;
	} else {
		skip -= pre;
	}
	if (op->iov_local)
		return n;
	for (i = 0; i < op->iovcnt && n < TCP_WIOV; i++) {
		size_t len = op->iov[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		iov[n].iov_base = (uint8_t *)op->iov[i].iov_base + skip;
		iov[n].iov_len = len - skip;
		*want += iov[n].iov_len;
		n++;
		skip = 0;
	}
	return n;
}

/* accounts @done bytes written: finishes the handshake frame, then
 * completes every op whose last byte left */
static void tcp_written(struct tcp_conn *tc, size_t done)
{
	struct rmsg_conn *c = tc->c;
	struct rmsgi_list *n;

	if (tc->hs_off < tc->hs_len) {
		size_t k = RMSGI_MIN(done, tc->hs_len - tc->hs_off);

		tc->hs_off += k;
		done -= k;
	}
	while (done && (n = tc->outq.next) != &tc->outq) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);
		size_t rest = tcp_frame_len(op) - tc->out_off;

		if (done < rest) {
			tc->out_off += done;
			break;
		}
		done -= rest;
		tc->out_off = 0;
		rmsgi_list_del(&op->link);
		tc->outq_len--;
		tc->outq_bytes -= tcp_frame_len(op);
		op->tr_priv = NULL;
		rmsgi_conn_op_done(c, op, 0);
	}
	if (tc->want_room && tc->outq_len <= (tc->hdr_mask + 1) / 2 &&
	    tc->outq_bytes < TCP_MAX_QBYTES / 2) {
		tc->want_room = false;
		rmsgi_conn_tr_room(c);
	}
}

/* lingering: once everything posted is written, the FIN; the end comes
 * with the peer's FIN (tcp_read) or the linger timer */
void tcp_linger_step(struct tcp_conn *tc)
{
	if (tc->outq_len || tc->hs_off < tc->hs_len || tc->fin_sent)
		return;
	tc->fin_sent = true;
	shutdown(tc->fd, SHUT_WR);
}

/* the pipe is full: a TCP socket says when it has room (EV_WRITE); the
 * reader of a shm ring wakes us through the socket's read side
 * (tcp_shm_cb), as the ring's writer asked it to */
static void tcp_wait_room(struct tcp_conn *tc)
{
	tc->blocked = true;
	if (!tc->shm_pipe)
		tcp_io_start(tc->t->env, &tc->ww);
}

/* writes what the socket takes, gathering many frames per sendmsg() */
size_t tcp_write(struct tcp_conn *tc)
{
	struct ev_loop *loop = tc->t->env->loop;
	struct iovec *iov = tc->t->wiov;
	struct msghdr mh;
	size_t sent = 0;

	while (!tc->ended) {
		struct rmsgi_list *n;
		size_t skip = tc->out_off, want = 0;
		ssize_t w;
		int cnt = 0;

		if (tc->hs_off < tc->hs_len) {
			iov[0].iov_base = tc->hs + tc->hs_off;
			iov[0].iov_len = tc->hs_len - tc->hs_off;
			want = iov[0].iov_len;
			cnt = 1;
		}
		for (n = tc->outq.next; n != &tc->outq && cnt < TCP_WIOV;
		     n = n->next) {
			cnt = tcp_op_iov(
				rmsgi_list_entry(n, struct rmsgi_op, link),
				skip, iov, cnt, &want);
			skip = 0;
		}
		if (!cnt) {
			tc->blocked = false;
			tcp_io_stop(loop, &tc->ww);
			if (tc->lingering)
				tcp_linger_step(tc);
			return sent;
		}
		mh = (struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)cnt};
		w = tcp_pipe_send(tc, &mh);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				tcp_wait_room(tc);
				return sent;
			}
			tcp_conn_fail(tc, tcp_errno(errno));
			return sent;
		}
		tcp_written(tc, (size_t)w);
		sent += (size_t)w;
		if ((size_t)w < want) {
			/* a short write means the socket buffer is full */
			tcp_wait_room(tc);
			return sent;
		}
		if (n == &tc->outq && cnt < TCP_WIOV) {
			/* all written (completions queue nothing new) */
			tc->blocked = false;
			tcp_io_stop(loop, &tc->ww);
			if (tc->lingering)
				tcp_linger_step(tc);
			return sent;
		}
	}
	return sent;
}

/* the ring is sized once the peer's credits, which bound the frames in
 * flight, are known: its first grant, or, since a grant grows with use,
 * what we would grow ours to (a full ring only makes post() wait) */
static int tcp_hdr_alloc(struct tcp_conn *tc)
{
	unsigned want = RMSGI_MIN(
		RMSGI_MAX(RMSGI_MAX(tc->peer_credits, tc->ci->cfg->credits),
			  4u),
		TCP_MAX_FRAMES);
	unsigned size = 4;

	while (size < want)
		size <<= 1;
	tc->hdr = malloc((size_t)size * TCP_SLOT);
	if (!tc->hdr)
		return -ENOMEM;
	tc->hdr_mask = size - 1;
	return 0;
}

int tcp_post(void *tcp, struct rmsgi_op *op)
{
	struct tcp_conn *tc = tcp;
	struct rmsgi_hdr h;
	uint8_t *slot;

	if (RMSGI_UNLIKELY(!tc || tc->ended))
		return -ENOTCONN;
	if (RMSGI_UNLIKELY(!tc->hdr) && tcp_hdr_alloc(tc))
		return -ENOMEM;
	if (tc->outq_len > tc->hdr_mask ||
	    (tc->outq_len && tc->outq_bytes >= TCP_MAX_QBYTES) ||
	    (!tc->blocked && (tc->outq_len >= TCP_BATCH_FRAMES ||
			      tc->outq_bytes >= TCP_BATCH_BYTES))) {
		tc->want_room = true;
		return -EAGAIN;
	}
	rmsgi_op_hdr(op, &h);
	slot = tc->hdr[tc->hdr_seq++ & tc->hdr_mask];
	if (op->pre_len)
		memcpy(slot + RMSGI_HDR_SIZE, op->pre, op->pre_len);
	rmsgi_hdr_encode(&h, slot);
	op->tr_priv = slot;
	if (op->tr_off) {
		/* the rest of a frame tcp_send_direct() began: it found the
		 * queue empty, so this op heads it */
		tc->out_off = op->tr_off;
	}
	rmsgi_list_add_tail(&tc->outq, &op->link);
	tc->outq_len++;
	tc->outq_bytes += tcp_frame_len(op);
	/* EV_WRITE carries it when the socket is full; else conn.c follows
	 * every batch of posts with kick(), which writes it */
	return 0;
}

/* a frame written at once, from the caller's iovec, when nothing waits
 * ahead of it (transport.h, send_direct) */
/* any size: what does not fit the socket goes on as a posted op */
size_t tcp_direct_max(const void *tcp)
{
	(void)tcp;
	return SIZE_MAX;
}

ssize_t tcp_send_direct(void *tcp, const struct rmsgi_hdr *h,
			const struct iovec *iov, int iovcnt)
{
	struct tcp_conn *tc = tcp;
	struct iovec v[1 + RMSGI_OP_IOV_INLINE];
	uint8_t hdr[RMSGI_HDR_SIZE];
	struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)iovcnt + 1};
	ssize_t w;
	int err, i;

	if (RMSGI_UNLIKELY(!tc || tc->ended || tc->blocked || tc->outq_len ||
			   tc->hs_off < tc->hs_len ||
			   iovcnt > RMSGI_OP_IOV_INLINE))
		return 0;
	rmsgi_hdr_encode(h, hdr);
	v[0].iov_base = hdr;
	v[0].iov_len = RMSGI_HDR_SIZE;
	for (i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i]; /* one or two pieces, mostly: no memcpy */
	do {
		w = tcp_pipe_send(tc, &mh);
	} while (w < 0 && errno == EINTR);
	if (RMSGI_LIKELY(w > 0))
		return w;
	if (w == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
		return 0;
	err = tcp_errno(errno);
	tcp_enter(tc);
	tcp_conn_fail(tc, err);
	tcp_leave(tc);
	return err;
}

void tcp_kick(void *tcp)
{
	struct tcp_conn *tc = tcp;

	if (!tc || tc->ended || tc->blocked)
		return;
	tcp_enter(tc);
	tcp_write(tc);
	tcp_leave(tc);
}
