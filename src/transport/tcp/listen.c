// SPDX-License-Identifier: MIT
/*
 * listen.c - TCP listeners: listening sockets on every address of a host,
 * accepting (paused while out of descriptors or memory), and refusing
 * peers over the listener's limits.
 */
#define _GNU_SOURCE
#include "tcp.h"

/* ------------------------------------------------------------------ */
/* listeners                                                            */

/* a connection over the listener's limits: a REJECT frame saying why
 * (the peer reports -ECONNREFUSED and logs the reason), then close. Its
 * HELLO may be in already: read first, so the close sends a FIN after
 * the REJECT, not a reset that could overtake it. */
static void tcp_refuse(int fd, int why, bool shm)
{
	uint8_t buf[TCP_HS_MAX];
	struct rmsgi_hello hello;
	struct rmsgi_hdr h;
	ssize_t r;

	memset(&hello, 0, sizeof(hello));
	hello.status = (int16_t)why;
	memset(&h, 0, sizeof(h));
	h.type = RMSGI_T_REJECT;
	h.len = rmsgi_hello_encode(&hello, buf + RMSGI_HDR_SIZE);
	rmsgi_hdr_encode(&h, buf);
	if (shm) {
		/* through the peer's ring (shm.c), then the close */
		tcp_shm_refuse(fd, buf, RMSGI_HDR_SIZE + (size_t)h.len);
		close(fd);
		return;
	}
	r = recv(fd, buf + RMSGI_HDR_SIZE + h.len,
		 sizeof(buf) - RMSGI_HDR_SIZE - h.len, MSG_DONTWAIT);
	(void)r;
	r = send(fd, buf, RMSGI_HDR_SIZE + (size_t)h.len,
		 MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)r;
	close(fd);
}

/* a new peer of the core's listener @l on context @t through backend
 * @tr: of the backend listener @tl, or (NULL) adopted from a group's
 * home */
static void tcp_accept_one(struct tcp_ctx *t, const struct rmsgi_tr *tr,
			   struct tcp_listener *tl, struct rmsg_listener *l,
			   int fd, uint16_t port)
{
	const struct rmsgi_tr_conn_info *ci;
	struct rmsgi_hello refusal;
	struct ev_loop *loop = t->env->loop;
	struct rmsg_conn *c;
	struct tcp_conn *tc;

	tc = tcp_conn_new(t, NULL, NULL);
	if (!tc) {
		close(fd);
		return;
	}
	if (tr == &rmsgi_tr_shm) {
		/* its mapping comes with the peer's first byte */
		tc->shm_pipe = true;
		tc->lport = port;
		ev_set_cb(&tc->rw, tcp_shm_cb);
	}
	if (rmsgi_tr_incoming(l, tr, tc, &c, &ci, &refusal)) {
		rmsgi_list_del(&tc->link);
		free(tc);
		tcp_refuse(fd, refusal.status, tr == &rmsgi_tr_shm);
		return;
	}
	tc->c = c;
	tc->ci = ci;
	tcp_nodelay(fd);
	tcp_user_timeout(fd, ci->cfg);
	tc->server = true;
	tc->tl = tl;
	tc->adopted = !tl;
	tc->phase = TCP_PH_HELLO;
	tcp_conn_set_fd(tc, fd);
	tcp_io_start(t->env, &tc->rw);
	tcp_timer_start(loop, &tc->tmo, ci->cfg->timeout_ms / 1000.0);
}

/* a group listener's peer, detached: the socket alone */
struct tcp_handoff {
	int fd;
	uint16_t port; /* the listener's */
	bool shm;      /* of a shm:// listener */
};

static void tcp_handoff(struct tcp_listener *tl, int fd,
			const struct sockaddr_storage *peer)
{
	struct tcp_handoff *ho = malloc(sizeof(*ho));
	struct sockaddr_storage sp;

	if (!ho) {
		tcp_refuse(fd, -ENOMEM, tl->tr == &rmsgi_tr_shm);
		return;
	}
	ho->fd = fd;
	ho->port = tl->port;
	ho->shm = tl->tr == &rmsgi_tr_shm;
	if (tl->tr == &rmsgi_tr_shm) {
		/* the address the client says it dialed (shm.c) */
		tcp_shm_peek(fd, &sp);
		peer = &sp;
	}
	rmsgi_tr_handoff(tl->l, tl->tr, (const struct sockaddr *)peer, ho);
}

static void tcp_adopt_tr(struct rmsg_ctx *ctx, const struct rmsgi_tr *tr,
			 struct rmsg_listener *l, void *h)
{
	struct tcp_handoff *ho = h;
	struct tcp_ctx *t = tcp_ctx_get(ctx);
	int fd = ho->fd;
	uint16_t port = ho->port;

	free(ho);
	if (!t) {
		tcp_refuse(fd, -ENOMEM, tr == &rmsgi_tr_shm);
		return;
	}
	tcp_accept_one(t, tr, NULL, l, fd, port);
}

void tcp_adopt(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *h)
{
	tcp_adopt_tr(ctx, &rmsgi_tr_tcp, l, h);
}

void tcp_shm_adopt(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *h)
{
	tcp_adopt_tr(ctx, &rmsgi_tr_shm, l, h);
}

void tcp_drop(void *h, const struct rmsgi_hello *refusal)
{
	struct tcp_handoff *ho = h;

	tcp_refuse(ho->fd, refusal->status, ho->shm);
	free(ho);
}

static void tcp_listener_resume(struct tcp_listener *tl)
{
	int i;

	for (i = 0; i < tl->nsock; i++)
		tcp_io_start(tl->t->env, &tl->sock[i].w);
}

static void tcp_pause_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_listener *tl =
		RMSGI_CONTAINER_OF(w, struct tcp_listener, pause.w);

	(void)revents;
	ev_ref(loop); /* the one-shot timer stopped itself */
	tcp_listener_resume(tl);
}

/*
 * accept() failed for want of descriptors or memory: the pending
 * connection stays in the backlog and a level-triggered watcher would
 * spin, so accepting pauses, longer each time while the episode lasts.
 * One line when it starts and one when it ends, not one per pause.
 */
static void tcp_accept_pause(struct tcp_listener *tl, int err)
{
	struct ev_loop *loop = tl->t->env->loop;
	int j;

	if (!tl->backoff) {
		tl->backoff = TCP_ACCEPT_PAUSE_MIN;
		tl->episode_t0 = ev_now(loop);
		tl->episode_fails = 0;
		rmsgi_warn(tl->t->ctx,
			   "tcp listener on port %u: accept: %s; accepting "
			   "pauses (%.0f ms, doubling up to %.0f ms) until "
			   "it works again",
			   tl->port, rmsg_strerror(err),
			   TCP_ACCEPT_PAUSE_MIN * 1000,
			   TCP_ACCEPT_PAUSE_MAX * 1000);
	} else {
		tl->backoff = RMSGI_MIN(tl->backoff * 2, TCP_ACCEPT_PAUSE_MAX);
	}
	tl->episode_fails++;
	for (j = 0; j < tl->nsock; j++)
		tcp_io_stop(loop, &tl->sock[j].w);
	tcp_timer_start(loop, &tl->pause, tl->backoff);
}

static void tcp_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_lsock *ls = RMSGI_CONTAINER_OF(w, struct tcp_lsock, w);
	struct tcp_listener *tl = ls->tl;
	bool group = rmsgi_tr_group(tl->l);
	struct sockaddr_storage peer;
	socklen_t plen;
	int i, fd;

	(void)revents;
	for (i = 0; i < TCP_ACCEPT_BATCH; i++) {
		plen = sizeof(peer);
		fd = accept4(ls->fd, group ? (struct sockaddr *)&peer : NULL,
			     group ? &plen : NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			if (tl->backoff) {
				rmsgi_warn(
					tl->t->ctx,
					"tcp listener on port %u: accepting "
					"again after %.1f s (%llu pauses)",
					tl->port, ev_now(loop) - tl->episode_t0,
					(unsigned long long)tl->episode_fails);
				tl->backoff = 0;
			}
			if (group)
				tcp_handoff(tl, fd, &peer);
			else
				tcp_accept_one(tl->t, tl->tr, tl, tl->l, fd,
					       tl->port);
			continue;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
			continue;
		case EAGAIN:
#if EWOULDBLOCK != EAGAIN
		case EWOULDBLOCK:
#endif
			return;
		default:
			/* EMFILE, ENFILE, ENOBUFS, ENOMEM */
			tcp_accept_pause(tl, -errno);
			return;
		}
	}
}

void tcp_listener_free(struct tcp_listener *tl)
{
	struct ev_loop *loop = tl->t->env->loop;
	int i;

	tcp_timer_stop(loop, &tl->pause);
	for (i = 0; i < tl->nsock; i++) {
		tcp_io_stop(loop, &tl->sock[i].w);
		close(tl->sock[i].fd);
	}
	rmsgi_list_del(&tl->link);
	free(tl);
}

static bool tcp_same_addr(const struct addrinfo *a, const struct addrinfo *b)
{
	return a->ai_family == b->ai_family && a->ai_addrlen == b->ai_addrlen &&
	       !memcmp(a->ai_addr, b->ai_addr, a->ai_addrlen);
}

/* one listening socket; @port is the port to force (0: the address's) */
static int tcp_listen_sock(const struct addrinfo *ai, uint16_t port,
			   bool v6only, int *fd_p)
{
	struct sockaddr_storage ss;
	int one = 1, fd, ret;

	if (ai->ai_addrlen > sizeof(ss))
		return -EAFNOSUPPORT;
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	if (port && ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
	else if (port && ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* a dual-stack socket would take the IPv4 port from its sibling */
	if (v6only && ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	*fd_p = fd;
	return 0;
}

static uint16_t tcp_sock_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/*
 * Listens on every address the host resolves to ("localhost" may give
 * ::1 and 127.0.0.1), all on one port. An address family the host lacks
 * is skipped as long as one address works.
 */
int tcp_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
	       const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p)
{
	struct tcp_ctx *t = tcp_ctx_get(ctx);
	struct addrinfo hints, *res, *ai, *prev;
	struct tcp_listener *tl;
	bool has4 = false, has6 = false;
	uint16_t port = u->port;
	char pstr[8];
	int ret, skipped = -EADDRNOTAVAIL, i, fd = -1;

	if (!t)
		return -ENOMEM;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(pstr, sizeof(pstr), "%u", u->port);
	ret = getaddrinfo(u->host, pstr, &hints, &res);
	if (ret)
		/* an unknown name: no such local address */
		return rmsgi_err_gai(ret, errno, -EADDRNOTAVAIL);
	tl = calloc(1, sizeof(*tl));
	if (!tl) {
		ret = -ENOMEM;
		goto free_res;
	}
	tl->t = t;
	tl->l = l;
	tl->tr = &rmsgi_tr_tcp;
	rmsgi_list_init(&tl->link);
	rmsgi_timer_init(&tl->pause, t->env->timers, tcp_pause_cb);
	for (ai = res; ai; ai = ai->ai_next) {
		has4 |= ai->ai_family == AF_INET;
		has6 |= ai->ai_family == AF_INET6;
	}
	for (ai = res; ai && tl->nsock < TCP_LISTEN_MAX; ai = ai->ai_next) {
		for (prev = res; prev != ai; prev = prev->ai_next)
			if (tcp_same_addr(prev, ai))
				break;
		if (prev != ai)
			continue;
		ret = tcp_listen_sock(ai, port, has4 && has6, &fd);
		if (ret == -EAFNOSUPPORT || ret == -EADDRNOTAVAIL) {
			skipped = ret;
			continue;
		}
		if (ret)
			goto close_socks;
		if (!port)
			port = tcp_sock_port(fd);
		tl->sock[tl->nsock].fd = fd;
		tl->sock[tl->nsock].tl = tl;
		ev_io_init(&tl->sock[tl->nsock].w, tcp_accept_cb, fd, EV_READ);
		tl->nsock++;
	}
	if (!tl->nsock) {
		ret = skipped;
		goto close_socks;
	}
	freeaddrinfo(res);
	tl->port = port;
	*port_p = port;
	*tl_p = tl;
	rmsgi_list_add_tail(&t->listeners, &tl->link);
	tcp_listener_resume(tl);
	return 0;

close_socks:
	for (i = 0; i < tl->nsock; i++)
		close(tl->sock[i].fd);
	free(tl);
free_res:
	freeaddrinfo(res);
	return ret;
}

int tcp_listener_new(struct tcp_ctx *t, struct rmsg_listener *l,
		     const struct rmsgi_tr *tr, const int *fds, int n,
		     uint16_t port, void **tl_p)
{
	struct tcp_listener *tl = calloc(1, sizeof(*tl));
	int i;

	if (!tl)
		return -ENOMEM;
	tl->t = t;
	tl->l = l;
	tl->tr = tr;
	rmsgi_list_init(&tl->link);
	rmsgi_timer_init(&tl->pause, t->env->timers, tcp_pause_cb);
	for (i = 0; i < n && i < TCP_LISTEN_MAX; i++) {
		tl->sock[i].fd = fds[i];
		tl->sock[i].tl = tl;
		ev_io_init(&tl->sock[i].w, tcp_accept_cb, fds[i], EV_READ);
	}
	tl->nsock = i;
	tl->port = port;
	*tl_p = tl;
	rmsgi_list_add_tail(&t->listeners, &tl->link);
	tcp_listener_resume(tl);
	return 0;
}

void tcp_listen_close(void *p)
{
	struct tcp_listener *tl = p;
	struct rmsgi_reaper *rp;
	struct rmsgi_list *n, *tmp;

	if (!tl)
		return;
	rp = tl->t->env->reaper;
	/* handshakes still waiting for their HELLO die with the listener;
	 * one inside the accept callback goes on without it */
	rmsgi_tr_enter(rp);
	rmsgi_list_for_each_safe (n, tmp, &tl->t->conns) {
		struct tcp_conn *tc =
			rmsgi_list_entry(n, struct tcp_conn, link);

		if (tc->tl != tl)
			continue;
		tc->tl = NULL;
		if (!tc->in_accept)
			tcp_conn_end(tc, -ECONNABORTED, NULL);
	}
	tcp_listener_free(tl);
	rmsgi_tr_leave(rp);
}
