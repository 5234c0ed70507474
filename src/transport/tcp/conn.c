// SPDX-License-Identifier: MIT
/*
 * conn.c - TCP connections: the object and its end, the handshake,
 * connect and its address walk, the timeouts, disconnect and its linger,
 * the socket's addresses.
 */
#define _GNU_SOURCE
#include "tcp.h"

#include <fcntl.h>

/* ------------------------------------------------------------------ */
/* connection objects                                                   */

static void tcp_ww_cb(struct ev_loop *loop, ev_io *w, int revents);
static void tcp_tmo_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* @c and @ci come later for a server connection (rmsgi_tr_incoming) */
struct tcp_conn *tcp_conn_new(struct tcp_ctx *t, struct rmsg_conn *c,
			      const struct rmsgi_tr_conn_info *ci)
{
	struct tcp_conn *tc = calloc(1, sizeof(*tc));

	if (!tc)
		return NULL;
	tc->t = t;
	tc->rp = t->rp;
	tc->c = c;
	tc->ci = ci;
	tc->fd = -1;
	/* idle until the sweep sees it busy: a new connection, one still
	 * proving the key included, holds a read buffer only while reading */
	tc->rb_idle = true;
	rmsgi_list_init(&tc->outq);
	ev_io_init(&tc->rw, tcp_rw_cb, -1, EV_READ);
	ev_io_init(&tc->ww, tcp_ww_cb, -1, EV_WRITE);
	rmsgi_timer_init(&tc->tmo, t->env->timers, tcp_tmo_cb);
	rmsgi_list_add_tail(&t->conns, &tc->link);
	return tc;
}

void tcp_conn_set_fd(struct tcp_conn *tc, int fd)
{
	tc->fd = fd;
	ev_io_set(&tc->rw, fd, EV_READ);
	ev_io_set(&tc->ww, fd, EV_WRITE);
}

static void tcp_conn_close_fd(struct tcp_conn *tc)
{
	struct ev_loop *loop = tc->t->env->loop;

	tcp_io_stop(loop, &tc->rw);
	tcp_io_stop(loop, &tc->ww);
	tc->blocked = false;
	if (tc->stalled) {
		tc->stalled = false;
		rmsgi_list_del(&tc->stall_link);
	}
	if (tc->fd >= 0) {
		close(tc->fd);
		tc->fd = -1;
	}
}

/* releases the memory; the caller reports (or undoes) the conn */
void tcp_conn_release(struct tcp_conn *tc)
{
	tcp_timer_stop(tc->t->env->loop, &tc->tmo);
	tcp_conn_close_fd(tc);
	rmsgi_list_del(&tc->link);
	free(tc->to);
	free(tc->hdr);
	if (tc->rb)
		tcp_rbuf_put(tc->t, tc->rb);
	if (tc->big) {
		free(tc->big);
		tcp_rx_give(tc->t, tc->big_cap);
	}
	if (tc->spare)
		tcp_spare_drop(tc);
	if (tc->rxm)
		tcp_msg_put(tc->rxm);
	tcp_shm_free(tc);
	free(tc);
}

/* the reaper's turn: the memory goes, then the core hears it is down */
static void tcp_conn_reaped(struct rmsgi_reap *r)
{
	struct tcp_conn *tc = RMSGI_CONTAINER_OF(r, struct tcp_conn, reap);
	struct rmsg_conn *c = tc->c;

	tcp_conn_release(tc);
	rmsgi_conn_ev_down(c);
}

/*
 * Ends the transport side: a @reason reports a failure first (@h: a
 * reject's hello), the socket closes, every queued op completes. The
 * memory and rmsgi_conn_ev_down() wait for the reaper.
 */
void tcp_conn_end(struct tcp_conn *tc, int reason, const struct rmsgi_hello *h)
{
	struct rmsg_conn *c = tc->c;
	struct rmsgi_list *n;

	if (tc->ended)
		return;
	tc->ended = true;
	if (tc->lingering)
		reason = 0; /* a local close: what is left is cancelled */
	if (reason)
		rmsgi_conn_ev_failed(c, reason, h);
	tcp_timer_stop(tc->t->env->loop, &tc->tmo);
	tcp_conn_close_fd(tc);
	while ((n = rmsgi_list_pop(&tc->outq))) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		op->tr_priv = NULL;
		rmsgi_conn_op_done(c, op, reason ? reason : -ECANCELED);
	}
	tc->outq_len = 0;
	tc->outq_bytes = 0;
	tc->out_off = 0;
	rmsgi_reap(tc->rp, &tc->reap, tcp_conn_reaped);
}

/* a read or write on the socket failed with @err (tcp_errno): the
 * connection ends with it. ETIMEDOUT there is the kernel's user timeout
 * (tcp_user_timeout): said in words, as "timed out" alone names no
 * cause */
void tcp_conn_fail(struct tcp_conn *tc, int err)
{
	const struct rmsgi_cfgv *cfg = tc->ci->cfg;
	unsigned bound = cfg->keepalive_ms * cfg->keepalive_misses;

	if (err == -ETIMEDOUT && bound)
		rmsgi_conn_why(tc->c,
			       "our data stayed unacknowledged, or the peer's "
			       "window closed, for %u ms (TCP_USER_TIMEOUT): "
			       "peer dead, link down, or not reading",
			       bound);
	else if (err == -ETIMEDOUT) /* keepalive off: no user timeout */
		rmsgi_conn_why(tc->c,
			       "our data stayed unacknowledged through the "
			       "kernel's retransmissions (tcp_retries2): peer "
			       "dead or link down");
	tcp_conn_end(tc, err, NULL);
}

/* ------------------------------------------------------------------ */
/* handshake                                                            */

/* a handshake frame goes out ahead of any queued frame */
static void tcp_send_hs(struct tcp_conn *tc, uint8_t type,
			const struct rmsgi_hello *hello)
{
	struct rmsgi_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = type;
	h.len = rmsgi_hello_encode(hello, tc->hs + RMSGI_HDR_SIZE);
	rmsgi_hdr_encode(&h, tc->hs);
	tc->hs_len = RMSGI_HDR_SIZE + (size_t)h.len;
	tc->hs_off = 0;
	tcp_write(tc);
}

void tcp_srv_hello(struct tcp_conn *tc, const struct rmsgi_hello *peer)
{
	struct tcp_listener *tl = tc->tl;
	struct rmsg_conn *c = tc->c;
	struct rmsgi_hello mine;
	int ret;

	tcp_timer_stop(tc->t->env->loop, &tc->tmo);
	if (!tl && !tc->adopted) {
		tcp_conn_end(tc, -ECONNABORTED, NULL);
		return;
	}
	tc->in_accept = true;
	/* adopted: the core's listener, or a refusal if it closed */
	ret = rmsgi_conn_ev_request(c, tl ? tl->l : NULL, peer, &mine);
	/* a resume: the suspended connection's object (tcp_rebind) */
	c = tc->c;
	tc->in_accept = false;
	tc->tl = NULL; /* the listener may be gone after the callback */
	if (tc->ended)
		return; /* closed from the accept callback */
	tcp_send_hs(tc, ret ? RMSGI_T_REJECT : RMSGI_T_HELLO_ACK, &mine);
	if (ret) {
		/* best effort: the REJECT fits any fresh socket buffer */
		tcp_conn_end(tc, ret, NULL);
		return;
	}
	if (tc->ended)
		return;
	tc->peer_credits = peer->credits;
	tc->phase = TCP_PH_OPEN;
	rmsgi_conn_ev_established(c, NULL);
}

void tcp_cli_answer(struct tcp_conn *tc, uint8_t type,
		    const struct rmsgi_hello *peer)
{
	tcp_timer_stop(tc->t->env->loop, &tc->tmo);
	if (type == RMSGI_T_REJECT) {
		/* every reject reads the same; the reason is in pdata */
		tcp_conn_end(tc, -ECONNREFUSED, peer);
		return;
	}
	tc->peer_credits = peer->credits;
	tc->phase = TCP_PH_OPEN;
	rmsgi_conn_ev_established(tc->c, peer);
}

void tcp_rebind(void *tcp, struct rmsg_conn *c,
		const struct rmsgi_tr_conn_info *ci)
{
	struct tcp_conn *tc = tcp;

	tc->c = c;
	tc->ci = ci;
}

/* ------------------------------------------------------------------ */
/* connection setup                                                     */

void tcp_connected(struct tcp_conn *tc)
{
	struct ev_loop *loop = tc->t->env->loop;
	struct rmsgi_hello h;

	tcp_io_stop(loop, &tc->ww);
	tcp_user_timeout(tc->fd, tc->ci->cfg);
	free(tc->to);
	tc->to = NULL;
	tc->phase = TCP_PH_HELLO;
	tcp_io_start(tc->t->env, &tc->rw);
	rmsgi_conn_hello(tc->c, &h);
	tcp_send_hs(tc, RMSGI_T_HELLO, &h);
}

/*
 * Tries the remaining addresses in turn. Returns 0 once an attempt runs
 * or the failure has been reported, or the socket() error if no attempt
 * could even start (then nothing was reported).
 */
static int tcp_connect_next(struct tcp_conn *tc)
{
	const struct sockaddr_storage *sa;
	socklen_t salen;
	int fd;

	while (tc->to && tc->to_next < tc->to->n) {
		sa = &tc->to->a[tc->to_next];
		salen = tc->to->len[tc->to_next];
		tc->to_next++;
		if (tc->src_len && sa->ss_family != tc->src.ss_family) {
			tc->sock_err = -EAFNOSUPPORT;
			continue;
		}
		fd = socket(sa->ss_family,
			    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			tc->sock_err = -errno;
			continue;
		}
		tcp_nodelay(fd);
		tcp_conn_set_fd(tc, fd);
		if (tc->src_len &&
		    bind(fd, (struct sockaddr *)&tc->src, tc->src_len) < 0) {
			tc->conn_err = -errno; /* EADDRNOTAVAIL: not ours */
			tcp_conn_close_fd(tc);
			continue;
		}
		if (connect(fd, (const struct sockaddr *)sa, salen) == 0) {
			tcp_connected(tc);
			return 0;
		}
		if (errno == EINPROGRESS) {
			tcp_io_start(tc->t->env, &tc->ww);
			return 0;
		}
		tc->conn_err = tcp_errno(errno);
		tcp_conn_close_fd(tc);
	}
	/* no address of the ?src= family: no route, which the network
	 * (the name's addresses) decides; on_close, as over RDMA */
	if (!tc->conn_err && tc->src_len && tc->sock_err == -EAFNOSUPPORT)
		tc->conn_err = -EHOSTUNREACH;
	if (!tc->conn_err)
		return tc->sock_err ? tc->sock_err : -EHOSTUNREACH;
	tcp_conn_end(tc, tc->conn_err, NULL);
	return 0;
}

static void tcp_connect_done(struct tcp_conn *tc)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(tc->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == EINPROGRESS || err == EALREADY)
		return;
	if (!err) {
		tcp_connected(tc);
		return;
	}
	tc->conn_err = tcp_errno(err);
	tcp_conn_close_fd(tc);
	/* with conn_err set it reports the failure itself */
	tcp_connect_next(tc);
}

static void tcp_ww_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *tc = RMSGI_CONTAINER_OF(w, struct tcp_conn, ww);

	(void)loop;
	(void)revents;
	tcp_enter(tc);
	if (tc->phase == TCP_PH_CONNECT) {
		tcp_connect_done(tc);
	} else {
		tc->blocked = false;
		tcp_write(tc);
	}
	tcp_leave(tc);
}

static void tcp_tmo_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_conn *tc = RMSGI_CONTAINER_OF(w, struct tcp_conn, tmo.w);

	(void)revents;
	/* libev stopped the one-shot timer itself: give back its unref */
	ev_ref(loop);
	tcp_enter(tc);
	if (tc->stall_tmo) {
		/* the receive memory limit stayed full for the timeout */
		tc->stall_tmo = false;
		rmsgi_warn(tc->t->ctx, "conn %u: closing: %s", tc->ci->id,
			   rmsg_strerror(-ENOBUFS));
		rmsgi_conn_why(tc->c, "no TCP receive memory came back in "
				      "time (rmsg_cfg_set_tcp_rx_limit)");
		tcp_conn_end(tc, -ENOBUFS, NULL);
	} else {
		tcp_conn_end(tc, -ETIMEDOUT, NULL);
	}
	tcp_leave(tc);
}

/* a client connection's object, handed to the core, in TCP_PH_CONNECT */
struct tcp_conn *tcp_client_new(struct rmsg_ctx *ctx, struct rmsg_conn *c,
				const struct rmsgi_tr_conn_info *ci)
{
	struct tcp_ctx *t = tcp_ctx_get(ctx);
	struct tcp_conn *tc = t ? tcp_conn_new(t, c, ci) : NULL;

	if (!tc)
		return NULL;
	rmsgi_conn_set_tc(c, tc);
	tc->phase = TCP_PH_CONNECT;
	return tc;
}

int tcp_connect(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		const struct rmsgi_uri *u, const struct rmsgi_addrs *to)
{
	struct rmsgi_reaper *rp;
	struct tcp_conn *tc;
	int ret;

	tc = tcp_client_new(ci->ctx, c, ci);
	if (!tc)
		return -ENOMEM;
	tc->to = malloc(sizeof(*tc->to));
	if (!tc->to) {
		tcp_conn_release(tc);
		return -ENOMEM;
	}
	*tc->to = *to;
	tc->src = u->src;
	tc->src_len = u->src_len;
	rp = tc->rp;
	tcp_enter(tc);
	tcp_timer_start(tc->t->env->loop, &tc->tmo, ci->dial_ms / 1000.0);
	ret = tcp_connect_next(tc);
	if (ret) {
		/* no socket at all: nothing was reported, rmsg_connect()
		 * fails and frees the conn; the bracket still closes (a
		 * depth left raised would stop the reaper for good) */
		tcp_conn_release(tc);
		rmsgi_tr_leave(rp);
		return ret;
	}
	tcp_leave(tc);
	return 0;
}

/*
 * A client connection over @fd, a stream socket already connected (one
 * end of a socketpair(), or later a socket the app hands over): what
 * connect() does once its connect() succeeded, so the handshake starts at
 * once with our HELLO, bounded by the connection timeout. The seam a
 * later fd hand-over can use; tests/unit/tcp.c drives the other end raw.
 * The socket options that only TCP has (TCP_NODELAY, the user timeout)
 * are tried and may fail harmlessly (a unix socket). Returns 0 having
 * called rmsgi_conn_set_tc() and taken @fd (closed when the connection
 * ends); every outcome follows through the up-calls. -ENOMEM or a
 * failing fcntl(): nothing started, @fd is still the caller's.
 */
int tcp_conn_adopt(struct rmsg_ctx *ctx, struct rmsg_conn *c,
		   const struct rmsgi_tr_conn_info *ci, int fd)
{
	struct tcp_conn *tc;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	tc = tcp_client_new(ctx, c, ci);
	if (!tc)
		return -ENOMEM;
	tcp_nodelay(fd);
	tcp_conn_set_fd(tc, fd);
	tcp_enter(tc);
	tcp_timer_start(tc->t->env->loop, &tc->tmo,
			ci->cfg->timeout_ms / 1000.0);
	tcp_connected(tc);
	tcp_leave(tc);
	return 0;
}

/* the socket's two ends (the addrs op): what getsockname() and
 * getpeername() say; -ENOTCONN before the socket is connected (or once
 * it is closed), -EAFNOSUPPORT for a socket that is not IP (an adopted
 * unix socket) */
int tcp_addrs(void *tcp, struct sockaddr_storage *local,
	      struct sockaddr_storage *peer)
{
	struct tcp_conn *tc = tcp;
	struct sockaddr_storage l, p;
	socklen_t ll = sizeof(l), pl = sizeof(p);

	if (tc->fd < 0 || tc->phase == TCP_PH_CONNECT)
		return -ENOTCONN;
	if (tc->shm_pipe)
		return tcp_shm_addrs(tc, local, peer);
	if (getsockname(tc->fd, (struct sockaddr *)&l, &ll) < 0 ||
	    getpeername(tc->fd, (struct sockaddr *)&p, &pl) < 0)
		return -errno;
	if ((l.ss_family != AF_INET && l.ss_family != AF_INET6) ||
	    p.ss_family != l.ss_family)
		return -EAFNOSUPPORT;
	*local = l;
	*peer = p;
	return 0;
}

/*
 * A local close of an open connection lingers: what was posted (the BYE
 * last) is written, then a FIN, and the end waits for the peer's FIN,
 * reading and dropping what still arrives. Closing at once could reset
 * the connection and cost the peer our last frames, its BYE included.
 * The core's @linger_ms bounds it (0: no linger, a failure); then what is
 * left is cancelled.
 */
void tcp_disconnect(void *tcp, unsigned linger_ms)
{
	struct tcp_conn *tc = tcp;

	if (!tc)
		return;
	tcp_enter(tc);
	if (tc->fd >= 0 && !tc->ended && tc->phase == TCP_PH_OPEN &&
	    !tc->lingering && linger_ms) {
		tc->lingering = true;
		/* a receive stall's timer gives way to the linger bound */
		if (tc->stall_tmo) {
			tc->stall_tmo = false;
			tcp_timer_stop(tc->t->env->loop, &tc->tmo);
		}
		tcp_timer_start(tc->t->env->loop, &tc->tmo, linger_ms / 1000.0);
		tcp_linger_step(tc);
		tcp_leave(tc);
		return;
	}
	if (tc->fd >= 0)
		shutdown(tc->fd, SHUT_RDWR);
	tcp_conn_end(tc, 0, NULL);
	tcp_leave(tc);
}
