// SPDX-License-Identifier: MIT
/*
 * ctx.c - the TCP backend's context: socket helpers and the errno
 * mapping, the per-context state, the receive memory of large frames
 * (cfg.tcp_rx_limit; tcp_rx_take is inline in tcp.h) and the op tables.
 */
#define _GNU_SOURCE
#include "tcp.h"

/* ------------------------------------------------------------------ */
/* sockets                                                              */

/* small frames must not wait for the ACK of the previous one */
void tcp_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * On an established socket, with keepalive on: data the peer's kernel
 * leaves unacknowledged for the keepalive bound fails the socket
 * (ETIMEDOUT), so a peer that cannot answer our probes (we hold all its
 * credits) is still found dead through the acknowledgements of what we
 * send it. A live peer's kernel acknowledges even when its application
 * stalls (a window closed for longer than the bound also ends it, as
 * keepalive would). Not before connect(): it would cut the handshake's
 * retries short of the connection timeout.
 */
void tcp_user_timeout(int fd, const struct rmsgi_cfgv *cfg)
{
	unsigned bound = cfg->keepalive_ms * cfg->keepalive_misses;

	if (bound)
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &bound,
			   sizeof(bound));
}

static void tcp_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents);

struct tcp_ctx *tcp_ctx_get(struct rmsg_ctx *ctx)
{
	void **slot = rmsgi_ctx_tr_slot(ctx, &rmsgi_tr_tcp);
	struct tcp_ctx *t = *slot;

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ctx = ctx;
	t->env = rmsgi_ctx_env(ctx);
	t->rp = t->env->reaper;
	rmsgi_list_init(&t->conns);
	rmsgi_list_init(&t->listeners);
	rmsgi_list_init(&t->stalled);
	rmsgi_quar_init(&t->msg_free, TCP_MSG_CACHE);
	rmsgi_timer_init(&t->sweep, t->env->timers, tcp_sweep_cb);
	*slot = t;
	return t;
}

/* ------------------------------------------------------------------ */
/* receive memory of large frames (cfg.tcp_rx_limit)                    */

/* memory came back: stalled connections try again from the loop (a
 * release may run inside any callback) */
void tcp_rx_give(struct tcp_ctx *t, size_t n)
{
	struct ev_loop *loop = t->env->loop;
	struct rmsgi_list *l;

	t->rx_bytes -= n;
	while ((l = rmsgi_list_pop(&t->stalled))) {
		struct tcp_conn *tc =
			rmsgi_list_entry(l, struct tcp_conn, stall_link);

		tc->stalled = false;
		/* (a lingering close owns the timer: its bound stays) */
		if (tc->stall_tmo && !tc->lingering) {
			tc->stall_tmo = false;
			tcp_timer_stop(loop, &tc->tmo);
		}
		tcp_io_start(tc->t->env, &tc->rw);
		ev_feed_event(loop, &tc->rw, EV_READ);
		rmsgi_timers_touch(tc->t->env->timers); /* a pass must run it */
	}
}

/*
 * No room for more of this connection's frame: it is beyond its share
 * (TCP_RX_SHARE; within it a take never fails) and the context's limit
 * is full. Stop reading it until
 * memory comes back, for its timeout at most (tcp_tmo_cb, -ENOBUFS), or
 * half the keepalive bound if shorter: the peer's answers to our probes
 * wait behind the frame, and the keepalive must not take our own stall
 * for the peer's death (-ETIMEDOUT); its bytes just arrived.
 */
void tcp_rx_stall(struct tcp_conn *tc)
{
	struct ev_loop *loop = tc->t->env->loop;
	const struct rmsgi_cfgv *cfg = tc->ci->cfg;
	double bound = cfg->timeout_ms / 1000.0;
	double ka = cfg->keepalive_ms * (double)cfg->keepalive_misses / 1000.0;

	if (tc->stalled)
		return;
	rmsgi_tr_dbg(tc->t->env,
		     "conn %u: tcp receive memory %zu of %zu bytes in use: "
		     "reading stops",
		     tc->ci->id, tc->t->rx_bytes,
		     tc->t->env->cfg->tcp_rx_limit);
	tc->stalled = true;
	rmsgi_list_add_tail(&tc->t->stalled, &tc->stall_link);
	/* (shm://: the socket also says when our ring has room: it stays
	 * watched, tcp_shm_cb reads nothing while stalled) */
	if (!tc->shm_pipe)
		tcp_io_stop(loop, &tc->rw);
	if (ka > 0 && ka / 2 < bound)
		bound = ka / 2;
	rmsgi_conn_heard(tc->c);
	if (!rmsgi_timer_active(&tc->tmo)) {
		tc->stall_tmo = true;
		tcp_timer_start(loop, &tc->tmo, bound);
	}
}

/* a connection that read fewer than TCP_RBUF_BUSY_READS times since the
 * last pass is idle: its read buffer goes back to the cache (or to the
 * held messages that pin it) now and after each of its reads, unless a
 * partial frame waits in it; so an idle connection holds none (issue 30:
 * 256 KiB each, outside the cap) while a busy one keeps its own. Returns
 * whether the sweep must come again for it. */
static bool tcp_sweep_rb(struct tcp_conn *tc)
{
	tc->rb_idle = tc->rb_reads < TCP_RBUF_BUSY_READS;
	tc->rb_reads = 0;
	if (!tc->rb_idle)
		return true;
	tcp_rbuf_drop_idle(tc);
	/* (shm://: the pages of its ring too, once the peer read them) */
	return tc->rb != NULL || tcp_shm_trim(tc);
}

/* every TCP_SPARE_IDLE_S: a spare or read buffer unused since the last
 * pass goes */
static void tcp_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_ctx *t = RMSGI_CONTAINER_OF(w, struct tcp_ctx, sweep.w);
	struct rmsgi_list *n;
	bool any = false;

	(void)revents;
	for (n = t->conns.next; n != &t->conns; n = n->next) {
		struct tcp_conn *tc =
			rmsgi_list_entry(n, struct tcp_conn, link);

		if (tcp_sweep_rb(tc))
			any = true;
		if (!tc->spare)
			continue;
		if (tc->spare_used) {
			tc->spare_used = false;
			any = true;
		} else {
			tcp_spare_drop(tc);
		}
	}
	if (!any) {
		ev_ref(loop);
		rmsgi_timer_stop(loop, &t->sweep);
	}
}

void tcp_sweep_arm(struct tcp_ctx *t)
{
	if (rmsgi_timer_active(&t->sweep))
		return;
	rmsgi_timer_start(t->env->loop, &t->sweep, TCP_SPARE_IDLE_S,
			  TCP_SPARE_IDLE_S);
	ev_unref(t->env->loop);
}

/* keeps one large buffer so a stream of large frames does not map and
 * fault in fresh memory for each; it stays counted in rx_bytes, and goes
 * once idle (tcp_sweep_cb) or when a small message comes next */
void tcp_big_recycle(struct tcp_conn *tc, uint8_t *p, size_t cap)
{
	if (cap <= TCP_SPARE_MAX && (!tc->spare || tc->spare_cap < cap)) {
		if (tc->spare)
			tcp_spare_drop(tc);
		tc->spare = p;
		tc->spare_cap = cap;
		tc->spare_used = true;
		tcp_sweep_arm(tc->t);
		return;
	}
	free(p);
	tcp_rx_give(tc->t, cap);
}

/* ------------------------------------------------------------------ */
/* context                                                              */

/* ends listeners and connections; the message and read-buffer caches
 * stay for the releases the core's callbacks make next */
static void tcp_ctx_stop(void *p)
{
	struct tcp_ctx *t = p;
	struct rmsgi_list *n, *tmp;

	while ((n = t->listeners.next) != &t->listeners) {
		struct tcp_listener *tl =
			rmsgi_list_entry(n, struct tcp_listener, link);

		tcp_listener_free(tl);
	}
	/* one bracket: the list holds until every end is queued */
	rmsgi_tr_enter(t->env->reaper);
	rmsgi_list_for_each_safe (n, tmp, &t->conns)
		tcp_conn_end(rmsgi_list_entry(n, struct tcp_conn, link), 0,
			     NULL);
	rmsgi_tr_leave(t->env->reaper);
}

static void tcp_ctx_fini(void *p)
{
	struct tcp_ctx *t = p;
	struct ev_loop *loop = t->env->loop;
	struct rmsgi_quar_ent *e;

	tcp_ctx_stop(t);
	/* messages the app still holds become invalid here (rmsg.h) */
	while ((e = rmsgi_quar_drain(&t->msg_free)))
		free(RMSGI_CONTAINER_OF(e, struct tcp_msg, q));
	while (t->rb_free) {
		struct tcp_rbuf *rb = t->rb_free;

		t->rb_free = rb->next;
		free(rb);
	}
	if (rmsgi_timer_active(&t->sweep)) {
		ev_ref(loop);
		rmsgi_timer_stop(loop, &t->sweep);
	}
	*rmsgi_ctx_tr_slot(t->ctx, &rmsgi_tr_tcp) = NULL;
	free(t);
}

/*
 * The context's busy polling (rmsg_cfg_set_busy_poll_us): what the io
 * watchers would do, tried without waiting for the kernel to say so: a
 * read on every connection that waits for input, a write on every one
 * whose socket was full. One bracket: no connection is freed while the
 * list is walked. Returns how many moved bytes (or ended).
 */
static int tcp_spin(void *p)
{
	struct tcp_ctx *t = p;
	struct rmsgi_list *n;
	int got = 0;

	rmsgi_tr_enter(t->rp);
	for (n = t->conns.next; n != &t->conns; n = n->next) {
		struct tcp_conn *tc =
			rmsgi_list_entry(n, struct tcp_conn, link);

		if (!tc->ended && ev_is_active(&tc->rw))
			got += tcp_read_now(tc);
		if (!tc->ended && tc->blocked && tc->phase != TCP_PH_CONNECT)
			got += tcp_write(tc) > 0;
	}
	rmsgi_tr_leave(t->rp);
	return got;
}

static const struct rmsgi_tr_ctx_ops tcp_ctx_ops = {
	.stop = tcp_ctx_stop,
	.fini = tcp_ctx_fini,
	.poll = NULL,	  /* purely event driven */
	.spin = tcp_spin, /* but its sockets can be read while it spins */
};

static const struct rmsgi_tr_listener_ops tcp_listener_ops = {
	.listen = tcp_listen,
	.close = tcp_listen_close,
	.adopt = tcp_adopt,
	.drop = tcp_drop,
};

static const struct rmsgi_tr_conn_ops tcp_conn_ops = {
	.connect = tcp_connect,
	.disconnect = tcp_disconnect,
	.post = tcp_post,
	.send_direct = tcp_send_direct,
	.direct_max = tcp_direct_max,
	.kick = tcp_kick,
	.rndv_release = NULL, /* no rendezvous */
	.addrs = tcp_addrs,
	.rebind = tcp_rebind,
};

/* shm://: the same connections over shm.c's rings; the context's state
 * is the TCP backend's (its slot), so this row's own slot stays unset
 * and its context ops are never called */
static const struct rmsgi_tr_listener_ops shm_listener_ops = {
	.listen = tcp_shm_listen,
	.close = tcp_listen_close,
	.adopt = tcp_shm_adopt,
	.drop = tcp_drop,
};

static const struct rmsgi_tr_conn_ops shm_conn_ops = {
	.connect = tcp_shm_connect,
	.disconnect = tcp_disconnect,
	.post = tcp_post,
	.send_direct = tcp_send_direct,
	.direct_max = tcp_direct_max,
	.kick = tcp_kick,
	.rndv_release = NULL,
	.addrs = tcp_addrs,
	.rebind = tcp_rebind,
};

const struct rmsgi_tr rmsgi_tr_shm = {
	.name = "shm",
	.caps = TCP_CAPS | RMSGI_TR_CAP_LOCAL,
	.ctx = &tcp_ctx_ops,
	.lst = &shm_listener_ops,
	.conn = &shm_conn_ops,
};

const struct rmsgi_tr rmsgi_tr_tcp = {
	.name = "tcp",
	.caps = TCP_CAPS,
	.ctx = &tcp_ctx_ops,
	.lst = &tcp_listener_ops,
	.conn = &tcp_conn_ops,
};
