// SPDX-License-Identifier: MIT
/*
 * tcp.c - the TCP backend: the frames and semantics of the RDMA backend
 * over a stream socket.
 *
 * Handshake: the client sends a HELLO frame, the server answers with
 * HELLO_ACK or REJECT; each carries a struct rmsgi_hello as payload. A
 * server-side connection gets its callbacks only once its HELLO reached the
 * accept decision, so one that dies earlier never reaches the app.
 *
 * Sending: post() queues the frame. Its header goes into a per-connection
 * ring of 32-byte slots (frames leave in order, so a ring as long as the
 * queue bound never overwrites a live slot); its payload is written
 * straight from the caller's iovec: no copy, any size, no rendezvous.
 * kick() ends a batch of posts and writes the whole batch with one
 * sendmsg(). An op completes once its last byte is in the socket.
 *
 * Receiving: frames are read into a 64 KiB buffer and delivered as views
 * into it; larger frames are read straight into memory of their own.
 * The app may keep the pointer it got in on_msg until it releases a held
 * message, so a payload never moves: a held message pins the buffer it
 * lives in (as on RDMA), and the read path goes on in a fresh buffer from
 * a small per-context cache instead of reusing a pinned one. Every frame,
 * control frames included, used one of our credits: the free_fn of its
 * message gives it back.
 *
 * Lifetimes: user callbacks (accept, on_established, on_msg) run inside
 * this file's handlers and may close the connection, which re-enters
 * disconnect(). Every entry point therefore counts itself in tc->busy.
 * Ending a connection closes the socket and completes its ops at once;
 * its memory goes, and rmsgi_conn_ev_down() is called, only when the
 * outermost entry point returns.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "transport.h"

/* one read takes up to this much: several 64 KiB frames per syscall (a
 * 64 KiB read buffer took one readv per frame of a 64 KiB stream, each
 * followed by a window update that ran the sender's transmit path) */
#define TCP_RBUF_SIZE (256 * 1024)
/* frames with larger payloads are read into memory of their own */
#define TCP_RBUF_FRAME_MAX (64 * 1024)
/* a read buffer with less room than this is compacted */
#define TCP_RBUF_MIN_ROOM (64 * 1024)
/* output queue bounds: post() says -EAGAIN beyond them */
#define TCP_MAX_FRAMES 4096
#define TCP_MAX_QBYTES ((size_t)4 << 20)
/* a batch this large is written without waiting for kick() */
#define TCP_BATCH_FRAMES 64
#define TCP_BATCH_BYTES ((size_t)256 << 10)
#define TCP_WIOV 1024
#define TCP_READ_ROUNDS 16
#define TCP_ACCEPT_BATCH 32
/* accept() out of descriptors (EMFILE, ENFILE) or memory: accepting
 * pauses, first for TCP_ACCEPT_PAUSE_MIN, doubling up to _MAX while the
 * episode lasts */
#define TCP_ACCEPT_PAUSE_MIN 0.01
#define TCP_ACCEPT_PAUSE_MAX 1.0
#define TCP_LISTEN_MAX 4
/* a released message object waits behind this many others before it
 * serves a new frame, so that a second rmsg_msg_release() on a stale
 * pointer finds it not held instead of releasing another message */
#define TCP_MSG_CACHE 256
#define TCP_RBUF_CACHE 8
#define TCP_SPARE_MAX ((size_t)16 << 20)
/* a spare buffer unused for one to two of these periods is freed */
#define TCP_SPARE_IDLE_S 1.0
/* a large frame's memory starts at this (or what already arrived) and
 * doubles as its bytes come, up to the frame's length */
#define TCP_BIG_FIRST ((size_t)256 << 10)
#define TCP_HS_MAX (RMSGI_HDR_SIZE + RMSGI_HELLO_SIZE + RMSG_PRIVATE_DATA_MAX)
/* no rendezvous, no native one-sided ops: the core emulates them */
#define TCP_CAPS 0u
/* a frame's header slot: the header and a one-sided op's RMA header */
#define TCP_SLOT 64

#if defined(IOV_MAX) && IOV_MAX < TCP_WIOV
#error "TCP_WIOV exceeds IOV_MAX"
#endif

struct tcp_msg;

/* a read buffer; held messages whose payload lies in it keep it alive */
struct tcp_rbuf {
	unsigned refs;
	struct tcp_rbuf *next; /* free list */
	uint8_t data[TCP_RBUF_SIZE];
};

/* per-context state (its slot: rmsgi_ctx_tr_slot) */
struct tcp_ctx {
	struct rmsg_ctx *ctx; /* opaque: up-calls, logs */
	const struct rmsgi_tr_env *env;
	struct rmsgi_list conns;
	struct rmsgi_list listeners;
	/* released message objects, oldest first (TCP_MSG_CACHE) */
	struct tcp_msg *msg_free, *msg_free_tail;
	unsigned msg_free_len;
	struct tcp_rbuf *rb_free; /* recycled read buffers */
	unsigned rb_free_len;
	/* large-frame memory: frames being read, held, spares; bounded by
	 * cfg.tcp_rx_limit */
	size_t rx_bytes;
	struct rmsgi_list stalled;   /* connections waiting for rx_bytes */
	ev_timer sweep;		     /* frees idle spare buffers */
	struct iovec wiov[TCP_WIOV]; /* sendmsg() scratch */
};

struct tcp_listener;

struct tcp_lsock {
	ev_io w;
	int fd;
	struct tcp_listener *tl;
};

struct tcp_listener {
	struct rmsgi_list link; /* tcp_ctx->listeners */
	struct tcp_ctx *t;
	struct rmsg_listener *l; /* the core's, for rmsgi_tr_incoming */
	uint16_t port;
	ev_timer pause; /* accepting paused after EMFILE */
	double backoff; /* the current pause; 0 outside an episode */
	ev_tstamp episode_t0;
	uint64_t episode_fails;
	int nsock;
	struct tcp_lsock sock[TCP_LISTEN_MAX];
};

enum tcp_phase {
	TCP_PH_CONNECT, /* client: connect() in progress */
	TCP_PH_HELLO,	/* waiting for the peer's HELLO or answer */
	TCP_PH_OPEN,	/* frames flow */
};

/* a received frame as conn.c and the app see it */
struct tcp_msg {
	struct rmsg_msg m;
	struct tcp_ctx *t;
	struct tcp_msg *next; /* free list */
	struct tcp_rbuf *rb;  /* held: the read buffer it pins */
	void *heap;	      /* held: payload memory it owns */
	size_t heap_cap;      /* ... counted in tcp_ctx.rx_bytes */
};

struct tcp_conn {
	struct rmsgi_list link; /* tcp_ctx->conns */
	struct tcp_ctx *t;
	struct rmsg_conn *c; /* the core's, for up-calls */
	const struct rmsgi_tr_conn_info *ci;
	struct tcp_listener *tl; /* server, until the accept decision */
	int fd;
	enum tcp_phase phase;
	int busy; /* entry points on the stack */
	bool ended;
	bool server;
	bool in_accept;
	bool blocked;	/* socket full: EV_WRITE drives the output */
	bool want_room; /* post() said -EAGAIN */
	bool lingering; /* local close: output, FIN, then the peer's FIN */
	uint16_t peer_credits; /* the peer's grant: sizes the header ring */
	bool fin_sent;
	ev_io rw;
	ev_io ww;
	ev_timer tmo; /* connection setup bound, then the linger bound */

	/* connecting */
	struct addrinfo *ai_list;
	struct addrinfo *ai_next;
	int conn_err;		     /* why the last address failed */
	int sock_err;		     /* why socket() failed */
	struct sockaddr_storage src; /* "?src=" address, if src_len */
	socklen_t src_len;

	/* output: posted ops in order, the head possibly half written */
	struct rmsgi_list outq;
	unsigned outq_len;
	size_t outq_bytes;
	size_t out_off;
	uint8_t (*hdr)[TCP_SLOT];
	unsigned hdr_mask;
	unsigned hdr_seq;
	uint8_t hs[TCP_HS_MAX]; /* handshake frame, written first */
	size_t hs_len;
	size_t hs_off;

	/* input: unparsed bytes are rb->data[rhead, rtail) */
	struct tcp_rbuf *rb;
	size_t rhead;
	size_t rtail;
	uint8_t *big; /* a frame larger than rb, being read */
	size_t big_len;
	size_t big_got;
	size_t big_cap;
	struct rmsgi_hdr big_hdr;
	uint8_t *spare; /* large-frame memory kept for reuse */
	size_t spare_cap;
	bool spare_used; /* since the last sweep */
	/* reading stopped: the large frame found no room in rx_bytes */
	bool stalled;
	bool stall_tmo;	 /* tmo runs for the stall */
	bool wait_start; /* the frame at rb[rhead] is still to start */
	struct rmsgi_list stall_link; /* tcp_ctx.stalled */
	size_t rneed;	     /* bytes the partial frame in rb still lacks */
	bool big_streak;     /* the last frame was large: read headers alone */
	struct tcp_msg *rxm; /* message object for the next frame: each
				frame reuses it unless the app held it */
};

static const uint8_t tcp_empty[1];

extern const struct rmsgi_tr rmsgi_tr_tcp;

static void tcp_conn_unbusy(struct tcp_conn *tc);
static void tcp_write(struct tcp_conn *tc);

/* ------------------------------------------------------------------ */
/* helpers                                                              */

/* internal watchers never keep ev_run() alive: the listener or the
 * connection holds the loop reference */
static void tcp_io_start(struct ev_loop *loop, ev_io *w)
{
	if (ev_is_active(w))
		return;
	ev_io_start(loop, w);
	ev_unref(loop);
}

static void tcp_io_stop(struct ev_loop *loop, ev_io *w)
{
	if (!ev_is_active(w))
		return;
	ev_ref(loop);
	ev_io_stop(loop, w);
}

static void tcp_timer_start(struct ev_loop *loop, ev_timer *w, double after)
{
	if (ev_is_active(w))
		return;
	ev_timer_set(w, after, 0);
	ev_timer_start(loop, w);
	ev_unref(loop);
}

/* a one-shot timer that already fired is inactive but may still be
 * pending in this loop iteration: its callback must not run now */
static void tcp_timer_stop(struct ev_loop *loop, ev_timer *w)
{
	if (ev_is_active(w)) {
		ev_ref(loop);
		ev_timer_stop(loop, w);
	} else if (ev_is_pending(w)) {
		/* libev stopped it, taking the reference its callback
		 * would have given back */
		ev_clear_pending(loop, w);
		ev_ref(loop);
	}
}

/* a socket error as the library reports it */
static int tcp_errno(int err)
{
	switch (err) {
	case 0:
		return -EIO;
	case EPIPE:
	case ECONNABORTED:
		return -ECONNRESET;
	default:
		return -err;
	}
}

static int tcp_gai_err(int err, bool passive)
{
	switch (err) {
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_FAMILY:
		return -EAFNOSUPPORT;
	case EAI_SERVICE:
	case EAI_SOCKTYPE:
	case EAI_BADFLAGS:
		return -EINVAL;
	case EAI_SYSTEM:
		return errno > 0 ? -errno : -EIO;
	default: /* no such name, or no answer */
		return passive ? -EADDRNOTAVAIL : -EHOSTUNREACH;
	}
}

/* small frames must not wait for the ACK of the previous one */
static void tcp_nodelay(int fd)
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
static void tcp_user_timeout(int fd, const struct rmsgi_cfgv *cfg)
{
	unsigned bound = cfg->keepalive_ms * cfg->keepalive_misses;

	if (bound)
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &bound,
			   sizeof(bound));
}

static void tcp_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents);

static struct tcp_ctx *tcp_ctx_get(struct rmsg_ctx *ctx)
{
	void **slot = rmsgi_ctx_tr_slot(ctx, RMSGI_TR_TCP);
	struct tcp_ctx *t = *slot;

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ctx = ctx;
	t->env = rmsgi_ctx_env(ctx);
	rmsgi_list_init(&t->conns);
	rmsgi_list_init(&t->listeners);
	rmsgi_list_init(&t->stalled);
	ev_timer_init(&t->sweep, tcp_sweep_cb, TCP_SPARE_IDLE_S,
		      TCP_SPARE_IDLE_S);
	*slot = t;
	return t;
}

/* ------------------------------------------------------------------ */
/* receive memory of large frames (cfg.tcp_rx_limit)                    */

static bool tcp_rx_take(struct tcp_ctx *t, size_t n)
{
	size_t limit = t->env->cfg->tcp_rx_limit;

	if (t->rx_bytes > limit || n > limit - t->rx_bytes)
		return false;
	t->rx_bytes += n;
	return true;
}

/* memory came back: stalled connections try again from the loop (a
 * release may run inside any callback) */
static void tcp_rx_give(struct tcp_ctx *t, size_t n)
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
		tcp_io_start(loop, &tc->rw);
		ev_feed_event(loop, &tc->rw, EV_READ);
	}
}

/*
 * No room for more of this connection's frame: stop reading it until
 * memory comes back, for its timeout at most (tcp_tmo_cb, -ENOBUFS), or
 * half the keepalive bound if shorter: the peer's answers to our probes
 * wait behind the frame, and the keepalive must not take our own stall
 * for the peer's death (-ETIMEDOUT); its bytes just arrived.
 */
static void tcp_rx_stall(struct tcp_conn *tc)
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
	tcp_io_stop(loop, &tc->rw);
	if (ka > 0 && ka / 2 < bound)
		bound = ka / 2;
	rmsgi_conn_heard(tc->c);
	if (!ev_is_active(&tc->tmo)) {
		tc->stall_tmo = true;
		tcp_timer_start(loop, &tc->tmo, bound);
	}
}

static void tcp_spare_drop(struct tcp_conn *tc)
{
	uint8_t *p = tc->spare;
	size_t cap = tc->spare_cap;

	tc->spare = NULL;
	tc->spare_cap = 0;
	free(p);
	tcp_rx_give(tc->t, cap);
}

/* every TCP_SPARE_IDLE_S: a spare unused since the last pass goes */
static void tcp_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_ctx *t = RMSGI_CONTAINER_OF(w, struct tcp_ctx, sweep);
	struct rmsgi_list *n;
	bool any = false;

	(void)revents;
	for (n = t->conns.next; n != &t->conns; n = n->next) {
		struct tcp_conn *tc =
			rmsgi_list_entry(n, struct tcp_conn, link);

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
		ev_timer_stop(loop, w);
	}
}

static void tcp_sweep_arm(struct tcp_ctx *t)
{
	if (ev_is_active(&t->sweep))
		return;
	ev_timer_set(&t->sweep, TCP_SPARE_IDLE_S, TCP_SPARE_IDLE_S);
	ev_timer_start(t->env->loop, &t->sweep);
	ev_unref(t->env->loop);
}

/* ------------------------------------------------------------------ */
/* received message objects and their buffers                           */

static struct tcp_rbuf *tcp_rbuf_get(struct tcp_ctx *t)
{
	struct tcp_rbuf *rb = t->rb_free;

	if (rb) {
		t->rb_free = rb->next;
		t->rb_free_len--;
	} else {
		rb = malloc(sizeof(*rb));
		if (!rb)
			return NULL;
	}
	rb->refs = 1;
	return rb;
}

static void tcp_rbuf_put(struct tcp_ctx *t, struct tcp_rbuf *rb)
{
	if (--rb->refs)
		return;
	if (t->rb_free_len >= TCP_RBUF_CACHE) {
		free(rb);
		return;
	}
	rb->next = t->rb_free;
	t->rb_free = rb;
	t->rb_free_len++;
}

static void tcp_msg_free(struct rmsg_msg *m);

/* the oldest released message object leaves the cache */
static struct tcp_msg *tcp_msg_unqueue(struct tcp_ctx *t)
{
	struct tcp_msg *w = t->msg_free;

	t->msg_free = w->next;
	if (!t->msg_free)
		t->msg_free_tail = NULL;
	t->msg_free_len--;
	return w;
}

/* reuses an object only once TCP_MSG_CACHE - 1 later ones were released
 * after it: a full cache costs no allocation per held message */
static struct tcp_msg *tcp_msg_get(struct tcp_ctx *t)
{
	struct tcp_msg *w;

	if (t->msg_free_len >= TCP_MSG_CACHE) {
		w = tcp_msg_unqueue(t);
	} else {
		w = malloc(sizeof(*w));
		if (!w)
			return NULL;
		w->t = t;
	}
	w->rb = NULL;
	w->heap = NULL;
	return w;
}

static void tcp_msg_put(struct tcp_msg *w)
{
	struct tcp_ctx *t = w->t;

	w->m.held = 0;
	w->next = NULL;
	if (t->msg_free_tail)
		t->msg_free_tail->next = w;
	else
		t->msg_free = w;
	t->msg_free_tail = w;
	if (++t->msg_free_len > TCP_MSG_CACHE)
		free(tcp_msg_unqueue(t));
}

/* free_fn: conn.c or the app is done with a frame; may run after the
 * connection's transport state is gone (a held message), so it touches
 * only the message and the context */
static void tcp_msg_free(struct rmsg_msg *m)
{
	struct tcp_msg *w = RMSGI_CONTAINER_OF(m, struct tcp_msg, m);
	struct rmsg_conn *c = m->conn;

	if (m->lent) {
		/* the read path recycles it and whatever memory it used */
		m->lent = 0;
	} else {
		if (w->rb)
			tcp_rbuf_put(w->t, w->rb);
		if (w->heap) {
			free(w->heap);
			tcp_rx_give(w->t, w->heap_cap);
		}
		tcp_msg_put(w);
	}
	rmsgi_conn_credit_freed(c);
}

/* ------------------------------------------------------------------ */
/* connection objects                                                   */

static void tcp_rw_cb(struct ev_loop *loop, ev_io *w, int revents);
static void tcp_ww_cb(struct ev_loop *loop, ev_io *w, int revents);
static void tcp_tmo_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* @c and @ci come later for a server connection (rmsgi_tr_incoming) */
static struct tcp_conn *tcp_conn_new(struct tcp_ctx *t, struct rmsg_conn *c,
				     const struct rmsgi_tr_conn_info *ci)
{
	struct tcp_conn *tc = calloc(1, sizeof(*tc));

	if (!tc)
		return NULL;
	tc->t = t;
	tc->c = c;
	tc->ci = ci;
	tc->fd = -1;
	rmsgi_list_init(&tc->outq);
	ev_io_init(&tc->rw, tcp_rw_cb, -1, EV_READ);
	ev_io_init(&tc->ww, tcp_ww_cb, -1, EV_WRITE);
	ev_timer_init(&tc->tmo, tcp_tmo_cb, 0, 0);
	rmsgi_list_add_tail(&t->conns, &tc->link);
	return tc;
}

static void tcp_conn_set_fd(struct tcp_conn *tc, int fd)
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
static void tcp_conn_release(struct tcp_conn *tc)
{
	tcp_timer_stop(tc->t->env->loop, &tc->tmo);
	tcp_conn_close_fd(tc);
	rmsgi_list_del(&tc->link);
	if (tc->ai_list)
		freeaddrinfo(tc->ai_list);
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
	free(tc);
}

/*
 * Ends the transport side: a @reason reports a failure first (@h: a
 * reject's hello), the socket closes, every queued op completes. The
 * memory and rmsgi_conn_ev_down() wait for the outermost entry point.
 */
static void tcp_conn_end(struct tcp_conn *tc, int reason,
			 const struct rmsgi_hello *h)
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
}

static void tcp_conn_unbusy(struct tcp_conn *tc)
{
	struct rmsg_conn *c;

	if (--tc->busy > 0 || !tc->ended)
		return;
	c = tc->c;
	tcp_conn_release(tc);
	rmsgi_conn_ev_down(c);
}

/* ------------------------------------------------------------------ */
/* output                                                               */

/* bytes of @op's frame that come from its header slot */
static size_t tcp_pre(const struct rmsgi_op *op)
{
	if (op->kind == RMSGI_OP_WRITE)
		return RMSGI_HDR_SIZE + RMSGI_RMA_SIZE;
	if (op->kind == RMSGI_OP_READ)
		return RMSGI_HDR_SIZE + RMSGI_READ_REQ_SIZE;
	return RMSGI_HDR_SIZE;
}

/* bytes of @op's whole frame; a read request carries no payload (its
 * iovec is where the answer goes) */
static size_t tcp_frame_len(const struct rmsgi_op *op)
{
	return tcp_pre(op) + (op->kind == RMSGI_OP_READ ? 0 : op->len);
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
	if (op->kind == RMSGI_OP_READ)
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

/* writes what the socket takes, gathering many frames per sendmsg() */
/* lingering: once everything posted is written, the FIN; the end comes
 * with the peer's FIN (tcp_read) or the linger timer */
static void tcp_linger_step(struct tcp_conn *tc)
{
	if (tc->outq_len || tc->hs_off < tc->hs_len || tc->fin_sent)
		return;
	tc->fin_sent = true;
	shutdown(tc->fd, SHUT_WR);
}

static void tcp_write(struct tcp_conn *tc)
{
	struct ev_loop *loop = tc->t->env->loop;
	struct iovec *iov = tc->t->wiov;
	struct msghdr mh;

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
			return;
		}
		mh = (struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)cnt};
		w = sendmsg(tc->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				tc->blocked = true;
				tcp_io_start(loop, &tc->ww);
				return;
			}
			tcp_conn_end(tc, tcp_errno(errno), NULL);
			return;
		}
		tcp_written(tc, (size_t)w);
		if ((size_t)w < want) {
			/* a short write means the socket buffer is full */
			tc->blocked = true;
			tcp_io_start(loop, &tc->ww);
			return;
		}
		if (n == &tc->outq && cnt < TCP_WIOV) {
			/* all written (completions queue nothing new) */
			tc->blocked = false;
			tcp_io_stop(loop, &tc->ww);
			if (tc->lingering)
				tcp_linger_step(tc);
			return;
		}
	}
}

/* the ring is sized once the peer's credits, which bound the frames in
 * flight, are known */
static int tcp_hdr_alloc(struct tcp_conn *tc)
{
	unsigned want =
		RMSGI_MIN(RMSGI_MAX(tc->peer_credits, 4u), TCP_MAX_FRAMES);
	unsigned size = 4;

	while (size < want)
		size <<= 1;
	tc->hdr = malloc((size_t)size * TCP_SLOT);
	if (!tc->hdr)
		return -ENOMEM;
	tc->hdr_mask = size - 1;
	return 0;
}

static int tcp_post(void *tcp, struct rmsgi_op *op)
{
	struct tcp_conn *tc = tcp;
	struct rmsgi_hdr h;
	uint8_t *slot;

	if (RMSGI_UNLIKELY(!tc || tc->ended))
		return -ENOTCONN;
	if (RMSGI_UNLIKELY(!tc->hdr) && tcp_hdr_alloc(tc))
		return -ENOMEM;
	if (tc->outq_len > tc->hdr_mask ||
	    (tc->outq_len && tc->outq_bytes >= TCP_MAX_QBYTES)) {
		tc->want_room = true;
		return -EAGAIN;
	}
	rmsgi_op_hdr(op, &h);
	slot = tc->hdr[tc->hdr_seq++ & tc->hdr_mask];
	if (op->kind == RMSGI_OP_WRITE || op->kind == RMSGI_OP_READ) {
		struct rmsgi_rma r = {.off = op->rma.off,
				      .token = op->rma.token,
				      .len = op->len};

		rmsgi_rma_encode(&r, op->kind == RMSGI_OP_READ,
				 slot + RMSGI_HDR_SIZE);
	}
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
	if (tc->blocked)
		return 0; /* EV_WRITE carries it */
	/* conn.c follows every batch of posts with kick(), which writes
	 * it: no watcher is needed unless the socket fills up */
	if (tc->outq_len < TCP_BATCH_FRAMES && tc->outq_bytes < TCP_BATCH_BYTES)
		return 0;
	tc->busy++;
	tcp_write(tc);
	tcp_conn_unbusy(tc);
	return 0;
}

/* a frame written at once, from the caller's iovec, when nothing waits
 * ahead of it (transport.h, send_direct) */
/* any size: what does not fit the socket goes on as a posted op */
static size_t tcp_direct_max(const void *tcp)
{
	(void)tcp;
	return SIZE_MAX;
}

static ssize_t tcp_send_direct(void *tcp, const struct rmsgi_hdr *h,
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
		w = sendmsg(tc->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (w < 0 && errno == EINTR);
	if (RMSGI_LIKELY(w > 0))
		return w;
	if (w == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
		return 0;
	err = tcp_errno(errno);
	tc->busy++;
	tcp_conn_end(tc, err, NULL);
	tcp_conn_unbusy(tc);
	return err;
}

static void tcp_kick(void *tcp)
{
	struct tcp_conn *tc = tcp;

	if (!tc || tc->ended || tc->blocked)
		return;
	tc->busy++;
	tcp_write(tc);
	tcp_conn_unbusy(tc);
}

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

/* ------------------------------------------------------------------ */
/* input                                                                */

/* keeps one large buffer so a stream of large frames does not map and
 * fault in fresh memory for each; it stays counted in rx_bytes, and goes
 * once idle (tcp_sweep_cb) or when a small message comes next */
static void tcp_big_recycle(struct tcp_conn *tc, uint8_t *p, size_t cap)
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

/* hands a frame to conn.c; @own is memory of its own (@cap bytes) that
 * holds the payload, else the payload is a view into tc->rb */
static inline __attribute__((always_inline)) void
tcp_deliver(struct tcp_conn *tc, const struct rmsgi_hdr *h, const uint8_t *data,
	    uint8_t *own, size_t cap)
{
	struct rmsg_conn *c = tc->c;
	struct tcp_msg *w = tc->rxm;
	size_t len = (size_t)h->len;

	if (RMSGI_UNLIKELY(!w)) {
		w = tcp_msg_get(tc->t);
		if (!w) {
			if (own)
				tcp_big_recycle(tc, own, cap);
			tcp_conn_end(tc, -ENOMEM, NULL);
			return;
		}
		w->m.free_fn = tcp_msg_free;
		w->m.tr_priv = NULL;
		tc->rxm = w;
	}
	rmsgi_msg_init(&w->m, c, len ? data : tcp_empty, len);
	w->m.lent = 1;
	rmsgi_conn_rx(c, h, &w->m);
	if (RMSGI_LIKELY(!w->m.lent)) {
		/* done with: it serves the next frame */
		if (own)
			tcp_big_recycle(tc, own, cap);
		return;
	}
	/* held past on_msg: the app may keep the pointer it was shown, so
	 * the payload stays where it is, and the object is the app's until
	 * it releases it (tcp_msg_free) */
	w->m.lent = 0;
	tc->rxm = NULL;
	if (own) {
		w->heap = own;
		w->heap_cap = cap;
	} else if (len) {
		w->rb = tc->rb;
		w->rb->refs++;
	}
}

static void tcp_srv_hello(struct tcp_conn *tc, const struct rmsgi_hello *peer)
{
	struct tcp_listener *tl = tc->tl;
	struct rmsg_conn *c = tc->c;
	struct rmsgi_hello mine;
	int ret;

	tcp_timer_stop(tc->t->env->loop, &tc->tmo);
	if (!tl) {
		tcp_conn_end(tc, -ECONNABORTED, NULL);
		return;
	}
	tc->in_accept = true;
	ret = rmsgi_conn_ev_request(c, tl->l, peer, &mine);
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

static void tcp_cli_answer(struct tcp_conn *tc, uint8_t type,
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

/* which frames are legal now */
static int tcp_check_type(const struct tcp_conn *tc, const struct rmsgi_hdr *h)
{
	if (tc->phase == TCP_PH_OPEN)
		return rmsgi_tr_frame_ok(TCP_CAPS, h->type) ? 0 : -EPROTO;
	if (tc->server)
		return h->type == RMSGI_T_HELLO ? 0 : -EPROTO;
	return h->type == RMSGI_T_HELLO_ACK || h->type == RMSGI_T_REJECT
		       ? 0
		       : -EPROTO;
}

static void tcp_frame(struct tcp_conn *tc, const struct rmsgi_hdr *h,
		      const uint8_t *data, uint8_t *own, size_t cap)
{
	struct rmsgi_hello peer;
	int ret;

	if (tc->phase == TCP_PH_OPEN) {
		tcp_deliver(tc, h, data, own, cap);
		return;
	}
	/* handshake frames are at most 48 bytes: always in tc->rb */
	ret = rmsgi_hello_decode(data, (size_t)h->len, &peer);
	if (ret) {
		tcp_conn_end(tc, ret, NULL);
		return;
	}
	if (tc->server)
		tcp_srv_hello(tc, &peer);
	else
		tcp_cli_answer(tc, h->type, &peer);
}

/*
 * Starts a frame too large for tc->rb: @n bytes of it are there. Its
 * memory follows what arrives, never the length announced alone.
 * Returns 0 (started: the @n bytes are copied), -EAGAIN (no room under
 * the receive memory limit now: nothing taken, reading stalls), or
 * another error (the connection ended).
 */
static int tcp_big_start(struct tcp_conn *tc, const struct rmsgi_hdr *h,
			 const uint8_t *have, size_t n)
{
	struct tcp_ctx *t = tc->t;
	size_t len = (size_t)h->len, limit = t->env->cfg->tcp_rx_limit;
	size_t want = RMSGI_MAX(n, RMSGI_MIN(len, TCP_BIG_FIRST)), cap;
	uint8_t *p;

	if (len > limit) {
		rmsgi_warn(t->ctx,
			   "conn %u: the peer announces a frame of %zu bytes, "
			   "more than the TCP receive memory limit of %zu "
			   "bytes (rmsg_cfg_set_tcp_rx_limit)",
			   tc->ci->id, len, limit);
		tcp_conn_end(tc, -EMSGSIZE, NULL);
		return -EMSGSIZE;
	}
	if (tc->spare && tc->spare_cap >= want) {
		p = tc->spare;
		cap = tc->spare_cap;
		tc->spare = NULL;
		tc->spare_cap = 0;
	} else {
		if (tc->spare)
			tcp_spare_drop(tc);
		if (!tcp_rx_take(t, want)) {
			tc->wait_start = true;
			tcp_rx_stall(tc);
			return -EAGAIN;
		}
		p = malloc(want);
		if (!p) {
			tcp_rx_give(t, want);
			tcp_conn_end(tc, -ENOMEM, NULL);
			return -ENOMEM;
		}
		cap = want;
	}
	memcpy(p, have, n);
	tc->big = p;
	tc->big_len = len;
	tc->big_got = n;
	tc->big_cap = cap;
	tc->big_hdr = *h;
	return 0;
}

/* the frame's memory is full of what arrived: doubles it, up to the
 * frame's length; -EAGAIN stalls reading, another error ended it */
static int tcp_big_grow(struct tcp_conn *tc)
{
	struct tcp_ctx *t = tc->t;
	size_t cap = tc->big_cap;
	size_t ncap = cap > tc->big_len / 2 ? tc->big_len : cap * 2;
	uint8_t *p;

	if (!tcp_rx_take(t, ncap - cap)) {
		tcp_rx_stall(tc);
		return -EAGAIN;
	}
	p = realloc(tc->big, ncap);
	if (!p) {
		tcp_rx_give(t, ncap - cap);
		tcp_conn_end(tc, -ENOMEM, NULL);
		return -ENOMEM;
	}
	tc->big = p;
	tc->big_cap = ncap;
	return 0;
}

static void tcp_big_done(struct tcp_conn *tc)
{
	struct rmsgi_hdr h = tc->big_hdr;
	uint8_t *p = tc->big;

	tc->big = NULL;
	tc->big_streak = true;
	tcp_frame(tc, &h, p, p, tc->big_cap);
}

/*
 * Makes room for the next read. Appending goes on while the buffer has
 * room for the partial frame and a decent read; only then does the
 * unparsed tail move to the front, or to a fresh buffer when held
 * messages pin this one (appending never touches what they point to).
 */
static void __attribute__((noinline)) tcp_rbuf_move(struct tcp_conn *tc)
{
	size_t rest = tc->rtail - tc->rhead;
	struct tcp_rbuf *nb;

	if (tc->rb->refs > 1) {
		nb = tcp_rbuf_get(tc->t);
		if (!nb) {
			tcp_conn_end(tc, -ENOMEM, NULL);
			return;
		}
		memcpy(nb->data, tc->rb->data + tc->rhead, rest);
		tcp_rbuf_put(tc->t, tc->rb);
		tc->rb = nb;
	} else {
		memmove(tc->rb->data, tc->rb->data + tc->rhead, rest);
	}
	tc->rhead = 0;
	tc->rtail = rest;
}

/* per read: the common cases (all parsed, or room enough) stay inline */
static inline __attribute__((always_inline)) void
tcp_rbuf_compact(struct tcp_conn *tc)
{
	size_t room = TCP_RBUF_SIZE - tc->rtail;

	if (tc->rtail == tc->rhead && tc->rb->refs == 1) {
		tc->rhead = tc->rtail = 0;
		return;
	}
	if (!tc->rhead || (room >= tc->rneed && room >= TCP_RBUF_MIN_ROOM))
		return;
	tcp_rbuf_move(tc);
}

/* delivers every complete frame in tc->rb, in order */
static inline __attribute__((always_inline)) void tcp_parse(struct tcp_conn *tc)
{
	uint64_t max = tc->ci->cfg->max_msg_size;
	struct rmsgi_hdr h;
	size_t avail;
	int ret;

	tc->rneed = 0;
	while (!tc->ended) {
		const uint8_t *p = tc->rb->data + tc->rhead;

		avail = tc->rtail - tc->rhead;
		if (avail < RMSGI_HDR_SIZE) {
			if (avail)
				tc->rneed = RMSGI_HDR_SIZE - avail;
			break;
		}
		ret = rmsgi_hdr_decode(p, avail, max, &h);
		if (RMSGI_UNLIKELY(ret || h.type != RMSGI_T_DATA ||
				   tc->phase != TCP_PH_OPEN)) {
			if (!ret)
				ret = tcp_check_type(tc, &h);
			if (ret) {
				tcp_conn_end(tc, ret, NULL);
				return;
			}
		}
		if (avail - RMSGI_HDR_SIZE < h.len) {
			if (h.len > TCP_RBUF_FRAME_MAX) {
				/* everything left belongs to this frame */
				ret = tcp_big_start(tc, &h, p + RMSGI_HDR_SIZE,
						    avail - RMSGI_HDR_SIZE);
				if (ret == -EAGAIN)
					break; /* stalled: parsed again */
				if (ret)
					return;
				tc->rhead = tc->rtail;
				break;
			}
			tc->rneed = RMSGI_HDR_SIZE + (size_t)h.len - avail;
			break;
		}
		/* a large frame that arrived whole behind smaller ones is
		 * a view like them; the next large one is read apart */
		tc->big_streak = h.len > TCP_RBUF_FRAME_MAX;
		/* a small message next: the spare is not needed now */
		if (RMSGI_UNLIKELY(tc->spare) && !tc->big_streak &&
		    h.type == RMSGI_T_DATA)
			tcp_spare_drop(tc);
		tc->rhead += RMSGI_HDR_SIZE + (size_t)h.len;
		if (RMSGI_LIKELY(tc->phase == TCP_PH_OPEN))
			tcp_deliver(tc, &h, p + RMSGI_HDR_SIZE, NULL, 0);
		else
			tcp_frame(tc, &h, p + RMSGI_HDR_SIZE, NULL, 0);
		if (tc->rhead == tc->rtail)
			break; /* all parsed: nothing is partial */
	}
	if (!tc->ended)
		tcp_rbuf_compact(tc);
}

/* the rare second caller, kept out of line so the read loop's stays
 * inline */
static void __attribute__((noinline)) tcp_parse_resume(struct tcp_conn *tc)
{
	tcp_parse(tc);
}

static void tcp_read(struct tcp_conn *tc)
{
	int round;

	if (!tc->rb) {
		tc->rb = tcp_rbuf_get(tc->t);
		if (!tc->rb) {
			tcp_conn_end(tc, -ENOMEM, NULL);
			return;
		}
	}
	if (tc->wait_start) {
		/* memory came back: start the frame that waited */
		tc->wait_start = false;
		tcp_parse_resume(tc);
	}
	for (round = 0; round < TCP_READ_ROUNDS && !tc->ended && !tc->stalled;
	     round++) {
		struct iovec iov[2];
		size_t want, bigrest = 0;
		size_t room = TCP_RBUF_SIZE - tc->rtail;
		ssize_t r;
		int cnt = 0;

		if (tc->big) {
			/* the rest of a large frame and the next header
			 * only: a large payload after it is then read
			 * straight into memory of its own too. Only what
			 * its memory holds now; it grows as bytes come. */
			size_t lim;

			if (tc->big_got == tc->big_cap && tcp_big_grow(tc))
				return;
			lim = RMSGI_MIN(tc->big_cap, tc->big_len);
			bigrest = lim - tc->big_got;
			iov[cnt].iov_base = tc->big + tc->big_got;
			iov[cnt++].iov_len = bigrest;
			room = lim < tc->big_len
				       ? 0
				       : RMSGI_MIN(room,
						   (size_t)RMSGI_HDR_SIZE);
		} else if (tc->big_streak && tc->rhead == tc->rtail) {
			/* large frames in a row: a header first */
			room = RMSGI_MIN(room, (size_t)RMSGI_HDR_SIZE);
		}
		iov[cnt].iov_base = tc->rb->data + tc->rtail;
		iov[cnt++].iov_len = room;
		want = bigrest + room;
		r = readv(tc->fd, iov, cnt);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			tcp_conn_end(tc, tcp_errno(errno), NULL);
			return;
		}
		if (r == 0) {
			tcp_conn_end(tc, -ECONNRESET, NULL);
			return;
		}
		if (tc->big) {
			size_t k = RMSGI_MIN((size_t)r, bigrest);

			tc->big_got += k;
			tc->rtail += (size_t)r - k;
			if (tc->big_got == tc->big_len)
				tcp_big_done(tc);
		} else {
			tc->rtail += (size_t)r;
		}
		tcp_parse(tc);
		/* a large frame can take longer than the keepalive bound,
		 * and the peer's answers to our probes queue up behind it:
		 * its bytes show the peer alive while they advance (whole
		 * frames tell rmsgi_conn_rx() so themselves; a small partial
		 * frame is at most RMSGI_KA_PROGRESS away from whole) */
		if (tc->big)
			rmsgi_conn_rx_progress(tc->c, tc->big_got);
		if ((size_t)r < want)
			return; /* drained: skip the read that says EAGAIN */
	}
}

static void tcp_rw_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *tc = RMSGI_CONTAINER_OF(w, struct tcp_conn, rw);

	(void)loop;
	(void)revents;
	tc->busy++;
	tcp_read(tc);
	tcp_conn_unbusy(tc);
}

/* ------------------------------------------------------------------ */
/* connection setup                                                     */

static void tcp_connected(struct tcp_conn *tc)
{
	struct ev_loop *loop = tc->t->env->loop;
	struct rmsgi_hello h;

	tcp_io_stop(loop, &tc->ww);
	tcp_user_timeout(tc->fd, tc->ci->cfg);
	freeaddrinfo(tc->ai_list);
	tc->ai_list = tc->ai_next = NULL;
	tc->phase = TCP_PH_HELLO;
	tcp_io_start(loop, &tc->rw);
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
	struct ev_loop *loop = tc->t->env->loop;
	struct addrinfo *ai;
	int fd;

	while ((ai = tc->ai_next)) {
		tc->ai_next = ai->ai_next;
		if (tc->src_len && ai->ai_family != tc->src.ss_family) {
			tc->sock_err = -EAFNOSUPPORT;
			continue;
		}
		fd = socket(ai->ai_family,
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
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			tcp_connected(tc);
			return 0;
		}
		if (errno == EINPROGRESS) {
			tcp_io_start(loop, &tc->ww);
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
	tc->busy++;
	if (tc->phase == TCP_PH_CONNECT) {
		tcp_connect_done(tc);
	} else {
		tc->blocked = false;
		tcp_write(tc);
	}
	tcp_conn_unbusy(tc);
}

static void tcp_tmo_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_conn *tc = RMSGI_CONTAINER_OF(w, struct tcp_conn, tmo);

	(void)revents;
	/* libev stopped the one-shot timer itself: give back its unref */
	ev_ref(loop);
	tc->busy++;
	if (tc->stall_tmo) {
		/* the receive memory limit stayed full for the timeout */
		tc->stall_tmo = false;
		rmsgi_warn(tc->t->ctx, "conn %u: closing: %s", tc->ci->id,
			   rmsg_strerror(-ENOBUFS));
		tcp_conn_end(tc, -ENOBUFS, NULL);
	} else {
		tcp_conn_end(tc, -ETIMEDOUT, NULL);
	}
	tcp_conn_unbusy(tc);
}

static int tcp_connect(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		       const struct rmsgi_uri *u)
{
	struct tcp_ctx *t = tcp_ctx_get(ci->ctx);
	struct addrinfo hints, *res;
	struct tcp_conn *tc;
	char port[8];
	int ret;

	if (!t)
		return -ENOMEM;
	tc = tcp_conn_new(t, c, ci);
	if (!tc)
		return -ENOMEM;
	rmsgi_conn_set_tc(c, tc);
	tc->phase = TCP_PH_CONNECT;
	tc->src = u->src;
	tc->src_len = u->src_len;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%u", u->port);
	tc->busy++;
	/* blocks for a name that is not in /etc/hosts; numeric hosts and
	 * local names resolve at once */
	ret = getaddrinfo(u->host, port, &hints, &res);
	if (ret) {
		/* reported like any connect failure: on_close follows */
		tcp_conn_end(tc, tcp_gai_err(ret, false), NULL);
		tcp_conn_unbusy(tc);
		return 0;
	}
	tc->ai_list = tc->ai_next = res;
	tcp_timer_start(t->env->loop, &tc->tmo, ci->cfg->timeout_ms / 1000.0);
	ret = tcp_connect_next(tc);
	if (ret) {
		/* no socket at all: nothing was reported, rmsg_connect()
		 * fails and frees the conn */
		tcp_conn_release(tc);
		return ret;
	}
	tcp_conn_unbusy(tc);
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
static void tcp_disconnect(void *tcp, unsigned linger_ms)
{
	struct tcp_conn *tc = tcp;

	if (!tc)
		return;
	tc->busy++;
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
		tcp_conn_unbusy(tc);
		return;
	}
	if (tc->fd >= 0)
		shutdown(tc->fd, SHUT_RDWR);
	tcp_conn_end(tc, 0, NULL);
	tcp_conn_unbusy(tc);
}

/* ------------------------------------------------------------------ */
/* listeners                                                            */

/* a connection over the listener's limits: a REJECT frame saying why
 * (the peer reports -ECONNREFUSED and logs the reason), then close. Its
 * HELLO may be in already: read first, so the close sends a FIN after
 * the REJECT, not a reset that could overtake it. */
static void tcp_refuse(int fd, int why)
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
	r = recv(fd, buf + RMSGI_HDR_SIZE + h.len,
		 sizeof(buf) - RMSGI_HDR_SIZE - h.len, MSG_DONTWAIT);
	(void)r;
	r = send(fd, buf, RMSGI_HDR_SIZE + (size_t)h.len,
		 MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)r;
	close(fd);
}

static void tcp_accept_one(struct tcp_listener *tl, int fd)
{
	const struct rmsgi_tr_conn_info *ci;
	struct rmsgi_hello refusal;
	struct ev_loop *loop = tl->t->env->loop;
	struct rmsg_conn *c;
	struct tcp_conn *tc;

	tc = tcp_conn_new(tl->t, NULL, NULL);
	if (!tc) {
		close(fd);
		return;
	}
	if (rmsgi_tr_incoming(tl->l, &rmsgi_tr_tcp, tc, &c, &ci, &refusal)) {
		rmsgi_list_del(&tc->link);
		free(tc);
		tcp_refuse(fd, refusal.status);
		return;
	}
	tc->c = c;
	tc->ci = ci;
	tcp_nodelay(fd);
	tcp_user_timeout(fd, ci->cfg);
	tc->server = true;
	tc->tl = tl;
	tc->phase = TCP_PH_HELLO;
	tcp_conn_set_fd(tc, fd);
	tcp_io_start(loop, &tc->rw);
	tcp_timer_start(loop, &tc->tmo, ci->cfg->timeout_ms / 1000.0);
}

static void tcp_listener_resume(struct tcp_listener *tl)
{
	int i;

	for (i = 0; i < tl->nsock; i++)
		tcp_io_start(tl->t->env->loop, &tl->sock[i].w);
}

static void tcp_pause_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_listener *tl =
		RMSGI_CONTAINER_OF(w, struct tcp_listener, pause);

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
	int i, fd;

	(void)revents;
	for (i = 0; i < TCP_ACCEPT_BATCH; i++) {
		fd = accept4(ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
			tcp_accept_one(tl, fd);
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

static void tcp_listener_free(struct tcp_listener *tl)
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
static int tcp_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
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
		return tcp_gai_err(ret, true);
	tl = calloc(1, sizeof(*tl));
	if (!tl) {
		ret = -ENOMEM;
		goto free_res;
	}
	tl->t = t;
	tl->l = l;
	rmsgi_list_init(&tl->link);
	ev_timer_init(&tl->pause, tcp_pause_cb, 0, 0);
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

static void tcp_listen_close(void *p)
{
	struct tcp_listener *tl = p;
	struct rmsgi_list *n, *tmp;

	if (!tl)
		return;
	/* handshakes still waiting for their HELLO die with the listener;
	 * one inside the accept callback goes on without it */
	rmsgi_list_for_each_safe (n, tmp, &tl->t->conns) {
		struct tcp_conn *tc =
			rmsgi_list_entry(n, struct tcp_conn, link);

		if (tc->tl != tl)
			continue;
		tc->tl = NULL;
		if (tc->in_accept)
			continue;
		tc->busy++;
		tcp_conn_end(tc, -ECONNABORTED, NULL);
		tcp_conn_unbusy(tc);
	}
	tcp_listener_free(tl);
}

/* ------------------------------------------------------------------ */
/* context                                                              */

static void tcp_ctx_fini(void *p)
{
	struct tcp_ctx *t = p;
	struct ev_loop *loop = t->env->loop;
	struct rmsgi_list *n, *tmp;

	while ((n = t->listeners.next) != &t->listeners) {
		struct tcp_listener *tl =
			rmsgi_list_entry(n, struct tcp_listener, link);

		tcp_listener_free(tl);
	}
	rmsgi_list_for_each_safe (n, tmp, &t->conns) {
		struct tcp_conn *tc =
			rmsgi_list_entry(n, struct tcp_conn, link);

		tc->busy++;
		tcp_conn_end(tc, 0, NULL);
		tcp_conn_unbusy(tc);
	}
	/* messages the app still holds become invalid here (rmsg.h) */
	while (t->msg_free)
		free(tcp_msg_unqueue(t));
	while (t->rb_free) {
		struct tcp_rbuf *rb = t->rb_free;

		t->rb_free = rb->next;
		free(rb);
	}
	if (ev_is_active(&t->sweep)) {
		ev_ref(loop);
		ev_timer_stop(loop, &t->sweep);
	}
	*rmsgi_ctx_tr_slot(t->ctx, RMSGI_TR_TCP) = NULL;
	free(t);
}

static const struct rmsgi_tr_ctx_ops tcp_ctx_ops = {
	.fini = tcp_ctx_fini, .poll = NULL, /* purely event driven */
};

static const struct rmsgi_tr_listener_ops tcp_listener_ops = {
	.listen = tcp_listen,
	.close = tcp_listen_close,
};

static const struct rmsgi_tr_conn_ops tcp_conn_ops = {
	.connect = tcp_connect,
	.disconnect = tcp_disconnect,
	.post = tcp_post,
	.send_direct = tcp_send_direct,
	.direct_max = tcp_direct_max,
	.kick = tcp_kick,
	.rndv_release = NULL, /* no rendezvous */
};

const struct rmsgi_tr rmsgi_tr_tcp = {
	.name = "tcp",
	.id = RMSGI_TR_TCP,
	.caps = TCP_CAPS,
	.ctx = &tcp_ctx_ops,
	.lst = &tcp_listener_ops,
	.conn = &tcp_conn_ops,
};
