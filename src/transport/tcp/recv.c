// SPDX-License-Identifier: MIT
/*
 * recv.c - the TCP input path: read buffers and message objects,
 * reading and parsing frames, large frames read into memory of their own,
 * and delivery to the core. The per-message path (tcp_read, tcp_parse,
 * tcp_deliver) and the helpers it inlines stay in this file.
 */
#define _GNU_SOURCE
#include "tcp.h"

static const uint8_t tcp_empty[1];

/* ------------------------------------------------------------------ */
/* received message objects and their buffers                           */

/* a full read buffer, or (@small) one for the handshake and the proof */
static struct tcp_rbuf *tcp_rbuf_get(struct tcp_ctx *t, bool small)
{
	struct tcp_rbuf *rb = small ? NULL : t->rb_free;
	uint32_t cap = small ? TCP_RBUF_SMALL : TCP_RBUF_SIZE;

	if (rb) {
		t->rb_free = rb->next;
		t->rb_free_len--;
	} else {
		rb = malloc(sizeof(*rb) + cap);
		if (!rb)
			return NULL;
		rb->cap = cap;
	}
	rb->refs = 1;
	return rb;
}

void tcp_rbuf_put(struct tcp_ctx *t, struct tcp_rbuf *rb)
{
	if (--rb->refs)
		return;
	if (rb->cap != TCP_RBUF_SIZE || t->rb_free_len >= TCP_RBUF_CACHE) {
		free(rb);
		return;
	}
	rb->next = t->rb_free;
	t->rb_free = rb;
	t->rb_free_len++;
}

/* reuses an object only once TCP_MSG_CACHE - 1 later ones were released
 * after it: a full cache costs no allocation per held message */
static struct tcp_msg *tcp_msg_get(struct tcp_ctx *t)
{
	struct rmsgi_quar_ent *e = rmsgi_quar_reuse(&t->msg_free);
	struct tcp_msg *w;

	if (e) {
		w = RMSGI_CONTAINER_OF(e, struct tcp_msg, q);
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

void tcp_msg_put(struct tcp_msg *w)
{
	struct tcp_ctx *t = w->t;
	struct rmsgi_quar_ent *e;

	w->m.held = 0;
	rmsgi_quar_put(&t->msg_free, &w->q, 1);
	while ((e = rmsgi_quar_over(&t->msg_free)))
		free(RMSGI_CONTAINER_OF(e, struct tcp_msg, q));
}

/* free_fn: the core or the app is done with a frame the core kept; may
 * run after the connection's transport state is gone (a held message),
 * so it touches only the message and the context */
static void tcp_msg_free(struct rmsg_msg *m)
{
	struct tcp_msg *w = RMSGI_CONTAINER_OF(m, struct tcp_msg, m);
	struct rmsg_conn *c = m->conn;
	uint32_t wcost = m->wcost;

	if (w->rb)
		tcp_rbuf_put(w->t, w->rb);
	if (w->heap) {
		free(w->heap);
		tcp_rx_give(w->t, w->heap_cap);
	}
	tcp_msg_put(w);
	rmsgi_conn_credit_freed(c, wcost);
}

/* ------------------------------------------------------------------ */
/* input                                                                */

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
	if (RMSGI_LIKELY(rmsgi_conn_rx(c, h, &w->m) != RMSGI_RX_KEPT)) {
		/* back already (its credit too): it serves the next frame */
		if (own)
			tcp_big_recycle(tc, own, cap);
		return;
	}
	/* kept (held past on_msg): the app may keep the pointer it was
	 * shown, so the payload stays where it is, and the object is the
	 * core's until its free_fn (tcp_msg_free) */
	tc->rxm = NULL;
	if (own) {
		w->heap = own;
		w->heap_cap = cap;
	} else if (len) {
		w->rb = tc->rb;
		w->rb->refs++;
	}
}

/* which frames are legal now */
static int tcp_check_type(struct tcp_conn *tc, const struct rmsgi_hdr *h)
{
	int ret;

	if (tc->phase == TCP_PH_OPEN) {
		if (!rmsgi_tr_frame_ok(TCP_CAPS, h->type))
			return -EPROTO;
		if (tc->rx_free)
			return 0;
		/* before the peer's proof: only what the handshake needs is
		 * buffered (rmsg(7), the state table) */
		ret = rmsgi_conn_rx_admit(tc->c, h);
		if (ret > 0)
			tc->rx_free = true;
		return ret < 0 ? ret : 0;
	}
	/* a handshake frame is at most RMSGI_HELLO_MAX bytes (read into
	 * tc->rb, TCP_HS_MAX at a time); a longer one is not read; it
	 * returns no window bytes (there is no window yet) */
	if (h->len > RMSGI_HELLO_MAX || h->bytes)
		return -EPROTO;
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
	/* handshake frames are at most RMSGI_HELLO_MAX bytes: always in
	 * tc->rb */
	ret = rmsgi_hello_decode(data, (size_t)h->len, &peer);
	if (ret) {
		rmsgi_conn_why(tc->c, "the peer sent a malformed %s frame",
			       rmsgi_frame_name(h->type));
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
		rmsgi_conn_why(tc->c,
			       "the peer announced a frame of %zu bytes, more "
			       "than the TCP receive memory limit of %zu "
			       "(rmsg_cfg_set_tcp_rx_limit)",
			       len, limit);
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
		if (!tcp_rx_take(tc, want)) {
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

	if (!tcp_rx_take(tc, ncap - cap)) {
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

	/* a fresh buffer when held messages pin this one, or to leave the
	 * small one of the handshake once the peer is free to send */
	if (tc->rb->refs > 1 || (tc->rx_free && tc->rb->cap != TCP_RBUF_SIZE)) {
		nb = tcp_rbuf_get(tc->t, !tc->rx_free);
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
	size_t room = tc->rb->cap - tc->rtail;

	/* the peer became free to send (its proof, or no key): the small
	 * buffer of the handshake gives way to a full one */
	if (RMSGI_UNLIKELY(tc->rb->cap != TCP_RBUF_SIZE) && tc->rx_free) {
		tcp_rbuf_move(tc);
		return;
	}
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
		/* rx_free only ever follows TCP_PH_OPEN: one test for both */
		if (RMSGI_UNLIKELY(ret || h.type != RMSGI_T_DATA ||
				   !tc->rx_free)) {
			if (ret == -EMSGSIZE)
				rmsgi_conn_why(tc->c,
					       "the peer announced a message "
					       "larger than max_msg_size");
			else if (ret)
				rmsgi_conn_why(tc->c,
					       "the peer sent a malformed "
					       "frame header, or a frame of "
					       "an unknown type");
			else if ((ret = tcp_check_type(tc, &h)) == -EPROTO)
				rmsgi_conn_why(tc->c,
					       "the peer sent a %s frame "
					       "(type %u) where it is not "
					       "allowed%s",
					       rmsgi_frame_name(h.type), h.type,
					       tc->phase == TCP_PH_OPEN
						       ? ""
						       : " (in the handshake)");
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

/* an idle connection (tcp_sweep_rb) gives its read buffer back once a
 * read drained the socket with no partial frame left; one that became
 * busy since the last sweep keeps it until the next sweep judges (a
 * buffer given back and taken again per read costs more than the read) */
static void tcp_rbuf_idle(struct tcp_conn *tc)
{
	if (tc->rb_reads >= TCP_RBUF_BUSY_READS) {
		tc->rb_idle = false;
		return;
	}
	tcp_rbuf_drop_idle(tc);
}

void tcp_rbuf_drop_idle(struct tcp_conn *tc)
{
	if (tc->ended || !tc->rb || tc->rhead != tc->rtail)
		return;
	tcp_rbuf_put(tc->t, tc->rb);
	tc->rb = NULL;
	tc->rhead = tc->rtail = 0;
}

/* reads what has arrived; returns whether any byte (or the end) came.
 * Inline in both callers: the io watcher's is the hot path */
static inline __attribute__((always_inline)) bool tcp_read(struct tcp_conn *tc)
{
	bool got = false;
	int round;

	if (RMSGI_UNLIKELY(!tc->rb)) {
		tc->rb = tcp_rbuf_get(tc->t, !tc->rx_free);
		if (!tc->rb) {
			tcp_conn_end(tc, -ENOMEM, NULL);
			return false;
		}
		/* given back once idle (tcp_sweep_cb) */
		tcp_sweep_arm(tc->t);
	}
	tc->rb_reads++;
	if (tc->wait_start) {
		/* memory came back: start the frame that waited */
		tc->wait_start = false;
		tcp_parse_resume(tc);
	}
	for (round = 0; round < TCP_READ_ROUNDS && !tc->ended && !tc->stalled;
	     round++) {
		struct iovec iov[2];
		size_t want, bigrest = 0;
		size_t room = tc->rb->cap - tc->rtail;
		ssize_t r;
		int cnt = 0;

		if (tc->big) {
			/* the rest of a large frame and the next header
			 * only: a large payload after it is then read
			 * straight into memory of its own too. Only what
			 * its memory holds now; it grows as bytes come. */
			size_t lim;

			if (tc->big_got == tc->big_cap && tcp_big_grow(tc))
				return got;
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
		/* before the handshake and the peer's proof: no more than
		 * the handshake's frames at a time (tcp_check_type) */
		if (RMSGI_UNLIKELY(!tc->rx_free))
			room = RMSGI_MIN(room, (size_t)TCP_HS_MAX);
		iov[cnt].iov_base = tc->rb->data + tc->rtail;
		iov[cnt++].iov_len = room;
		want = bigrest + room;
		r = tcp_pipe_readv(tc, iov, cnt);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (RMSGI_UNLIKELY(tc->rb_idle))
					tcp_rbuf_idle(tc);
				return got;
			}
			tcp_conn_fail(tc, tcp_errno(errno));
			return true;
		}
		if (r == 0) {
			tcp_conn_end(tc, -ECONNRESET, NULL);
			return true;
		}
		got = true;
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
		if ((size_t)r < want) {
			/* drained: skip the read that says EAGAIN */
			if (RMSGI_UNLIKELY(tc->rb_idle))
				tcp_rbuf_idle(tc);
			return true;
		}
	}
	return true;
}

void tcp_rw_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *tc = RMSGI_CONTAINER_OF(w, struct tcp_conn, rw);

	(void)loop;
	(void)revents;
	tcp_enter(tc);
	tcp_read(tc);
	tcp_leave(tc);
}

/* a shm:// connection's socket is readable: wake-ups for its rings (and,
 * at a server's start, the peer's mapping), or the peer's end. It reads
 * the ring, writes what waited for room, and, if the read stopped short
 * of an empty ring (no wake-up would come for it), runs again */
void tcp_shm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *tc = RMSGI_CONTAINER_OF(w, struct tcp_conn, rw);
	int ret;

	(void)revents;
	tcp_enter(tc);
	ret = tcp_shm_io(tc);
	if (ret && ret != -EAGAIN)
		tcp_conn_end(tc, ret, NULL);
	if (!ret && tc->stalled && tc->shm->eof)
		/* the end came while stalled: the socket stays readable, so
		 * it waits unwatched for the memory (tcp_rx_give) */
		tcp_io_stop(loop, &tc->rw);
	else if (!ret && !tc->stalled)
		tcp_read(tc);
	if (!ret && !tc->ended && tc->blocked) {
		tc->blocked = false;
		tcp_write(tc);
	}
	if (!ret && !tc->ended && !tc->stalled && ev_is_active(&tc->rw) &&
	    tcp_shm_park(tc))
		ev_feed_event(loop, &tc->rw, EV_READ);
	tcp_leave(tc);
}

/* the same read for the context's busy polling (ctx.c tcp_spin), which
 * tries every connection on every pass: an idle one must stay idle. One
 * that gave its read buffer back is peeked at, not handed a buffer for a
 * read that finds nothing; and an empty read is not counted as use (the
 * sweep would then keep the buffer of every connection for good) */
bool tcp_read_now(struct tcp_conn *tc)
{
	unsigned reads = tc->rb_reads;
	uint8_t b;
	bool got;

	if (tc->shm_pipe) {
		/* (wake-ups and the end are the io watcher's) */
		if (!tcp_shm_ready(tc))
			return false;
	} else if (!tc->rb &&
		   recv(tc->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
		   (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return false; /* nothing yet; an error is read as usual */
	got = tcp_read(tc);
	if (!got)
		tc->rb_reads = reads;
	return got;
}
