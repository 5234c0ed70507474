/* SPDX-License-Identifier: MIT */
/*
 * tcp.h - the TCP backend's private header: its constants, structs,
 * the inline helpers several of its files use, and what each file lends
 * the others. The backend carries the frames and semantics of the RDMA
 * backend over a stream socket.
 *
 * Handshake: the client sends a HELLO frame, the server answers with
 * HELLO_ACK or REJECT; each carries a struct rmsgi_hello as payload. A
 * server-side connection gets its callbacks only once its HELLO reached the
 * accept decision, so one that dies earlier never reaches the app.
 *
 * Sending: post() queues the frame. Its header goes into a per-connection
 * ring of 64-byte slots (frames leave in order, so a ring as long as the
 * queue bound never overwrites a live slot); its payload is written
 * straight from the caller's iovec: no copy, any size, no rendezvous.
 * kick() ends a batch of posts and writes the whole batch with one
 * sendmsg(). An op completes once its last byte is in the socket.
 *
 * Receiving: frames are read into a 256 KiB buffer and delivered as views
 * into it; larger frames are read straight into memory of their own.
 * The app may keep the pointer it got in on_msg until it releases a held
 * message, so a payload never moves: a held message pins the buffer it
 * lives in (as on RDMA), and the read path goes on in a fresh buffer from
 * a small per-context cache instead of reusing a pinned one. A
 * connection that reads seldom (TCP_RBUF_BUSY_READS) gives its buffer
 * back after each read that leaves no partial frame, so an idle one
 * holds none. Every frame,
 * control frames included, used one of our credits: the free_fn of its
 * message gives it back.
 *
 * Lifetimes: user callbacks (accept, on_established, on_msg) run inside
 * this backend's handlers and may close the connection, which re-enters
 * disconnect(). Ending a connection closes the socket and completes its
 * ops at once; its memory goes, and rmsgi_conn_ev_down() is called, from
 * the context's reaper (transport.h: end of life), once no entry point
 * (each bracketed by tcp_enter() and tcp_leave()) is on the stack.
 *
 * Two pipes: the same backend serves tcp:// over a TCP socket and shm://
 * (rmsgi_tr_shm: two processes on one host) over byte rings in a shared
 * mapping, a Unix socket beside them (shm.c). Only reading and writing
 * bytes (tcp_pipe_readv, tcp_pipe_send), the wait for room, and setting
 * up differ; frames and every rule are the same.
 *
 * Files (each includes only this header, and system headers):
 *  ctx.c     the context: socket helpers and the errno mapping, the
 *            per-context state (created on first use, fini), the receive
 *            memory of large frames (cfg.tcp_rx_limit: accounting,
 *            stalls, spare buffers and their sweep), the op tables
 *  conn.c    connection objects and their end, the handshake, connect
 *            and its address walk, the timeouts, disconnect and linger,
 *            the socket's addresses (addrs)
 *  send.c    the output queue: post, send_direct, kick, writing
 *  recv.c    read buffers and message objects, reading and parsing
 *            frames, large frames, delivery to the core
 *  listen.c  listening sockets, accepting (and pausing it), refusals
 *  shm.c     shm://: the setup (the mapping passed, checked), wake-ups
 *            and the end on the Unix socket, refusals
 *  dial.c    shm://: listeners' names, this host's addresses, connect,
 *            listen
 *  ring.c    shm://: the mapping's two byte rings, read and written as
 *            a socket would be
 */
#ifndef RMSG_TRANSPORT_TCP_H
#define RMSG_TRANSPORT_TCP_H

#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "../transport.h"

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
/* a batch this large makes post() say -EAGAIN: the core's kick() writes
 * it, and room follows (post() itself never writes: a write completes
 * ops and may fail, up-calls post() must not make) */
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
/* a connection that read fewer times than this in a sweep period
 * (TCP_SPARE_IDLE_S) is idle: it holds a read buffer only while it reads
 * (keepalive probes and their answers are a few reads a second) */
#define TCP_RBUF_BUSY_READS 16
/* a spare buffer unused for one to two of these periods is freed */
#define TCP_SPARE_IDLE_S 1.0
/* a large frame's memory starts at this (or what already arrived) and
 * doubles as its bytes come, up to the frame's length */
#define TCP_BIG_FIRST ((size_t)256 << 10)
#define TCP_HS_MAX (RMSGI_HDR_SIZE + RMSGI_HELLO_MAX)
/* the read buffer of a connection before the peer's proof: two
 * handshake reads, so a partial frame and the next read always fit */
#define TCP_RBUF_SMALL (2 * TCP_HS_MAX)
/* a connection's share of large-frame memory (rmsg_cfg_set_tcp_rx_limit.3):
 * its frame in progress and its spare may always hold this much, whatever
 * the others hold; only beyond it does it draw on cfg.tcp_rx_limit, and
 * only then can it stall (and, stalled for its bound, end with -ENOBUFS).
 * One 16 MiB message in progress never waits for another connection. */
#define TCP_RX_SHARE ((size_t)16 << 20)
/* no rendezvous, no native one-sided ops: the core emulates them */
#define TCP_CAPS RMSGI_TR_CAP_WINDOW
/* a frame's header slot: the header and a one-sided op's RMA header */
#define TCP_SLOT 64
/* shm://: each direction's ring (bytes, a power of two; 256 KiB gave half the
 * 64 KiB stream rate: 3.7 against 7.4 GB/s, 16 sends outstanding) and the header
 * page before them (ring.c) */
#define TCP_SHM_RING ((uint32_t)512 << 10)
#define TCP_SHM_HDR 4096
#define TCP_SHM_MAP ((size_t)TCP_SHM_HDR + 2 * (size_t)TCP_SHM_RING)
struct shm_ring; /* ring.c's */

/* a shm:// connection's side of the mapping */
struct tcp_shm {
	uint8_t *map;
	struct shm_ring *tx, *rx;
	uint8_t *txd, *rxd;
	uint32_t tx_head; /* our own positions, never read back */
	uint32_t rx_tail;
	bool eof; /* the socket said the peer is gone or done */
	/* bytes we wrote since our ring's pages were given back */
	uint32_t written;
	struct sockaddr_storage local, peer; /* as the setup said them */
};
_Static_assert(TCP_SLOT >= RMSGI_HDR_SIZE + RMSGI_OP_PRE_MAX,
	       "a header slot holds the header and the op's descriptor");

#if defined(IOV_MAX) && IOV_MAX < TCP_WIOV
#error "TCP_WIOV exceeds IOV_MAX"
#endif

struct tcp_msg;

/* a read buffer; held messages whose payload lies in it keep it alive.
 * TCP_RBUF_SIZE bytes, or TCP_RBUF_SMALL before the peer's proof (only
 * handshake frames are read then: an unproven peer that trickles a
 * header holds no 256 KiB buffer; moved to a full one at the proof) */
struct tcp_rbuf {
	unsigned refs;
	uint32_t cap;	       /* bytes of data */
	struct tcp_rbuf *next; /* free list (full buffers only) */
	uint8_t data[];
};

/* per-context state (its slot: rmsgi_ctx_tr_slot) */
struct tcp_ctx {
	struct rmsg_ctx *ctx; /* opaque: up-calls, logs */
	const struct rmsgi_tr_env *env;
	struct rmsgi_reaper *rp; /* env's */
	struct rmsgi_list conns;
	struct rmsgi_list listeners;
	/* released message objects (TCP_MSG_CACHE of them kept readable) */
	struct rmsgi_quar msg_free;
	struct tcp_rbuf *rb_free; /* recycled read buffers */
	unsigned rb_free_len;
	/* large-frame memory: frames being read, held, spares; bounded by
	 * cfg.tcp_rx_limit */
	size_t rx_bytes;
	struct rmsgi_list stalled;   /* connections waiting for rx_bytes */
	struct rmsgi_timer sweep;    /* frees idle spare buffers */
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
	struct rmsg_listener *l;   /* the core's, for rmsgi_tr_incoming */
	const struct rmsgi_tr *tr; /* rmsgi_tr_tcp or rmsgi_tr_shm */
	uint16_t port;
	struct rmsgi_timer pause; /* accepting paused after EMFILE */
	double backoff;		  /* the current pause; 0 outside an episode */
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
	struct rmsgi_quar_ent q; /* released: tcp_ctx.msg_free */
	struct tcp_rbuf *rb;	 /* held: the read buffer it pins */
	void *heap;		 /* held: payload memory it owns */
	size_t heap_cap;	 /* ... counted in tcp_ctx.rx_bytes */
};

struct tcp_conn {
	struct rmsgi_list link;	 /* tcp_ctx->conns */
	struct rmsgi_reaper *rp; /* the context's: loaded per entry point */
	struct rmsgi_reap reap;
	struct tcp_ctx *t;
	struct rmsg_conn *c; /* the core's, for up-calls */
	const struct rmsgi_tr_conn_info *ci;
	struct tcp_listener *tl; /* server, until the accept decision */
	int fd;
	enum tcp_phase phase;
	bool ended; /* queued on the context's reaper (tcp_conn_end) */
	bool server;
	/* server, from a group's home (listen.c tcp_adopt): no backend
	 * listener; the core knows the listener it counts against */
	bool adopted;
	bool in_accept;
	bool blocked;	/* socket full: EV_WRITE drives the output */
	bool want_room; /* post() said -EAGAIN */
	bool lingering; /* local close: output, FIN, then the peer's FIN */
	uint16_t peer_credits; /* the peer's grant: sizes the header ring */
	bool fin_sent;
	/* shm://: bytes go through the rings of @shm (the server's comes
	 * with the peer's first byte); the socket carries wake-ups */
	bool shm_pipe;
	uint16_t lport; /* a server's: its listener's port */
	struct tcp_shm *shm;
	ev_io rw;
	ev_io ww;
	struct rmsgi_timer tmo; /* setup bound, then the linger bound */

	/* connecting */
	/* client, while connecting: the core's addresses (a copy), and
	 * the next one to try */
	struct rmsgi_addrs *to;
	unsigned to_next;
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
	unsigned rb_reads; /* reads since the last sweep */
	bool rb_idle;	   /* fewer than TCP_RBUF_BUSY_READS: rb goes */
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
	size_t rneed;	 /* bytes the partial frame in rb still lacks */
	bool big_streak; /* the last frame was large: read headers alone */
	/* the core takes frames of any size now (rmsgi_conn_rx_admit): until
	 * then each header is checked against it and reads stay short. Set
	 * only in TCP_PH_OPEN, which a connection never leaves: tcp_parse
	 * tests it alone for "open and free" */
	bool rx_free;
	struct tcp_msg *rxm; /* message object for the next frame: each
				frame reuses it unless the app held it */
};

/* the backends (ctx.c): one per pipe */
extern const struct rmsgi_tr rmsgi_tr_tcp;
extern const struct rmsgi_tr rmsgi_tr_shm;

/* ------------------------------------------------------------------ */
/* loop watchers, socket errors                                         */

/* internal watchers never keep ev_run() alive: the listener or the
 * connection holds the loop reference */
static inline void tcp_io_start(const struct rmsgi_tr_env *env, ev_io *w)
{
	if (ev_is_active(w))
		return;
	ev_io_start(env->loop, w);
	ev_unref(env->loop);
	rmsgi_timers_touch(env->timers);
}

static inline void tcp_io_stop(struct ev_loop *loop, ev_io *w)
{
	if (!ev_is_active(w))
		return;
	ev_ref(loop);
	ev_io_stop(loop, w);
}

static inline void tcp_timer_start(struct ev_loop *loop, struct rmsgi_timer *t,
				   double after)
{
	if (rmsgi_timer_active(t))
		return;
	rmsgi_timer_start(loop, t, after, 0);
	ev_unref(loop);
}

/* a one-shot timer that already fired is inactive but may still be
 * pending in this loop iteration: its callback must not run now */
static inline void tcp_timer_stop(struct ev_loop *loop, struct rmsgi_timer *t)
{
	/* a pending one: libev stopped it, taking the reference its
	 * callback would have given back */
	if (rmsgi_timer_active(t) || ev_is_pending(&t->w))
		ev_ref(loop);
	rmsgi_timer_stop(loop, t);
}

/* a socket error as the library reports it */
static inline int tcp_errno(int err)
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

/* ------------------------------------------------------------------ */
/* ctx.c                                                                */

/* sockets */
void tcp_nodelay(int fd);
void tcp_user_timeout(int fd, const struct rmsgi_cfgv *cfg);

/* the per-context state, made on first use; NULL: out of memory */
struct tcp_ctx *tcp_ctx_get(struct rmsg_ctx *ctx);

/* receive memory of large frames (cfg.tcp_rx_limit) */
void tcp_rx_give(struct tcp_ctx *t, size_t n);
void tcp_rx_stall(struct tcp_conn *tc);
void tcp_big_recycle(struct tcp_conn *tc, uint8_t *p, size_t cap);
/* the sweep (TCP_SPARE_IDLE_S) runs while a spare or read buffer is out */
void tcp_sweep_arm(struct tcp_ctx *t);

/* @n more bytes for @tc's frame in progress: within its share
 * (TCP_RX_SHARE, counting its frame and its spare) always, beyond it
 * only while the context's total stays under cfg.tcp_rx_limit. So the
 * total exceeds the limit only by what connections hold within their
 * shares, and a connection waits only for memory beyond its own share */
static inline bool tcp_rx_take(struct tcp_conn *tc, size_t n)
{
	struct tcp_ctx *t = tc->t;
	size_t limit = t->env->cfg->tcp_rx_limit;
	size_t mine = (tc->big ? tc->big_cap : 0) + tc->spare_cap;

	if (mine + n > TCP_RX_SHARE &&
	    (t->rx_bytes > limit || n > limit - t->rx_bytes))
		return false;
	t->rx_bytes += n;
	return true;
}

static inline void tcp_spare_drop(struct tcp_conn *tc)
{
	uint8_t *p = tc->spare;
	size_t cap = tc->spare_cap;

	tc->spare = NULL;
	tc->spare_cap = 0;
	free(p);
	tcp_rx_give(tc->t, cap);
}

/* ------------------------------------------------------------------ */
/* conn.c                                                               */

struct tcp_conn *tcp_conn_new(struct tcp_ctx *t, struct rmsg_conn *c,
			      const struct rmsgi_tr_conn_info *ci);
void tcp_conn_set_fd(struct tcp_conn *tc, int fd);
void tcp_conn_release(struct tcp_conn *tc);
void tcp_conn_end(struct tcp_conn *tc, int reason, const struct rmsgi_hello *h);
/* a socket call failed with @err: ends it, with the reason in words */
void tcp_conn_fail(struct tcp_conn *tc, int err);
/* the handshake's frames, from recv.c */
void tcp_srv_hello(struct tcp_conn *tc, const struct rmsgi_hello *peer);
void tcp_cli_answer(struct tcp_conn *tc, uint8_t type,
		    const struct rmsgi_hello *peer);
int tcp_connect(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		const struct rmsgi_uri *u, const struct rmsgi_addrs *to);
void tcp_disconnect(void *tcp, unsigned linger_ms);
void tcp_rebind(void *tcp, struct rmsg_conn *c,
		const struct rmsgi_tr_conn_info *ci);
int tcp_addrs(void *tcp, struct sockaddr_storage *local,
	      struct sockaddr_storage *peer);
/* a client connection over an already connected stream socket @fd,
 * starting at the handshake (the seam of an fd hand-over; unit tests) */
int tcp_conn_adopt(struct rmsg_ctx *ctx, struct rmsg_conn *c,
		   const struct rmsgi_tr_conn_info *ci, int fd);
/* a client connection's object, handed to the core (TCP_PH_CONNECT) */
struct tcp_conn *tcp_client_new(struct rmsg_ctx *ctx, struct rmsg_conn *c,
				const struct rmsgi_tr_conn_info *ci);
/* the socket is connected: the handshake starts with our HELLO */
void tcp_connected(struct tcp_conn *tc);

/* every entry point is bracketed by these (transport.h: end of life);
 * nothing touches @tc after tcp_leave(), which may free it */
static inline void tcp_enter(struct tcp_conn *tc)
{
	rmsgi_tr_enter(tc->rp);
}
static inline void tcp_leave(struct tcp_conn *tc)
{
	rmsgi_tr_leave(tc->rp);
}

/* ------------------------------------------------------------------ */
/* send.c                                                               */

size_t tcp_write(struct tcp_conn *tc);
void tcp_linger_step(struct tcp_conn *tc);
int tcp_post(void *tcp, struct rmsgi_op *op);
size_t tcp_direct_max(const void *tcp);
ssize_t tcp_send_direct(void *tcp, const struct rmsgi_hdr *h,
			const struct iovec *iov, int iovcnt);
void tcp_kick(void *tcp);

/* ------------------------------------------------------------------ */
/* recv.c                                                               */

/* the read buffer goes back unless a partial frame waits in it (an idle
 * connection holds none) */
void tcp_rbuf_drop_idle(struct tcp_conn *tc);
void tcp_rbuf_put(struct tcp_ctx *t, struct tcp_rbuf *rb);
void tcp_msg_put(struct tcp_msg *w);
void tcp_rw_cb(struct ev_loop *loop, ev_io *w, int revents);
bool tcp_read_now(struct tcp_conn *tc);

/* ------------------------------------------------------------------ */
/* listen.c                                                             */

int tcp_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
	       const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p);
void tcp_listen_close(void *p);
/* group listeners: listener ops adopt and drop (transport.h) */
void tcp_adopt(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *h);
void tcp_drop(void *h, const struct rmsgi_hello *refusal);
void tcp_listener_free(struct tcp_listener *tl);
/* a listener of backend @tr over the @n listening sockets @fds (taken on
 * success) */
int tcp_listener_new(struct tcp_ctx *t, struct rmsg_listener *l,
		     const struct rmsgi_tr *tr, const int *fds, int n,
		     uint16_t port, void **tl_p);
void tcp_shm_adopt(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *h);

/* ------------------------------------------------------------------ */
/* shm.c and ring.c: the shared-memory pipe                              */

/* the reason a connection ends (none for a peer refused before it was
 * one: tcp_shm_refuse) */
static inline void tcp_shm_why(struct tcp_conn *tc, const char *why)
{
	if (tc->c)
		rmsgi_conn_why(tc->c, "%s", why);
}
/* maps a memfd of TCP_SHM_MAP bytes; NULL: no memory or mmap failed */
struct tcp_shm *tcp_shm_map(int fd, bool server);

int tcp_shm_connect(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		    const struct rmsgi_uri *u, const struct rmsgi_addrs *to);
int tcp_shm_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		   const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p);
void tcp_shm_free(struct tcp_conn *tc);
/* @ss's address with port @port */
static inline void tcp_shm_addr(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}
/* shm.c: the client's mapping, made and passed with the setup saying the
 * two addresses @cli and @srv (ports set) */
int tcp_shm_offer(struct tcp_conn *tc, struct sockaddr_storage *cli,
		  struct sockaddr_storage *srv);
/* dial.c: is @sa an address of this host (loopback, the wildcard, or an
 * interface's)? */
bool tcp_shm_local(const struct sockaddr_storage *sa, socklen_t len);
/* the addrs op over shm:// (the addresses the setup carried) */
int tcp_shm_addrs(const struct tcp_conn *tc, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer);
/* a group's pick: the client's address, peeked from its setup (IPv4
 * loopback until it came) */
void tcp_shm_peek(int fd, struct sockaddr_storage *peer);
/* a REJECT frame @f into a refused peer's mapping (listen.c) */
void tcp_shm_refuse(int fd, const uint8_t *f, size_t len);
/* as readv() and sendmsg() on a socket: bytes, or -1 and errno (EAGAIN:
 * empty or full, a wake-up follows; EPROTO: the peer broke the rings) */
ssize_t tcp_shm_readv(struct tcp_conn *tc, const struct iovec *iov, int cnt);
ssize_t tcp_shm_writev(struct tcp_conn *tc, const struct iovec *iov, int cnt);
/* the socket was readable: takes the wake-ups (and the server's mapping).
 * 0; -EAGAIN: no mapping yet; else the error that ends the connection */
int tcp_shm_io(struct tcp_conn *tc);
/* an idle connection's sweep (ctx.c): gives our ring's pages back to the
 * system once the peer read all of it; true while some remain to give */
bool tcp_shm_trim(struct tcp_conn *tc);
/* bytes (or the end) wait in the ring */
bool tcp_shm_ready(const struct tcp_conn *tc);
/* a read stopped before the ring was empty: false once the reader is
 * marked asleep with the ring empty; true if bytes came (read again) */
bool tcp_shm_park(struct tcp_conn *tc);
void tcp_shm_cb(struct ev_loop *loop, ev_io *w, int revents);

/* the pipe: a TCP socket, or shm.c's rings */
static inline ssize_t tcp_pipe_readv(struct tcp_conn *tc,
				     const struct iovec *iov, int cnt)
{
	if (RMSGI_LIKELY(!tc->shm_pipe))
		return readv(tc->fd, iov, cnt);
	return tcp_shm_readv(tc, iov, cnt);
}

static inline ssize_t tcp_pipe_send(struct tcp_conn *tc, struct msghdr *mh)
{
	if (RMSGI_LIKELY(!tc->shm_pipe))
		return sendmsg(tc->fd, mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	return tcp_shm_writev(tc, mh->msg_iov, (int)mh->msg_iovlen);
}

#endif /* RMSG_TRANSPORT_TCP_H */
