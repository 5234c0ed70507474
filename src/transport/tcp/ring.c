// SPDX-License-Identifier: MIT
/*
 * ring.c - the shm:// pipe's data path (shm.c sets it up): the shared
 * mapping and its two byte rings, read and written as a socket would be
 * (tcp_shm_readv, tcp_shm_writev), and the wake-ups between the two
 * processes. shm.c's opening comment tells the protocol.
 */
#define _GNU_SOURCE
#include "tcp.h"

#include <stdatomic.h>
#include <sys/mman.h>

/* one direction's ring header: each field on its own cache line */
struct shm_ring {
	_Atomic uint32_t head; /* bytes written (the writer's) */
	uint8_t pad0[60];
	_Atomic uint32_t tail; /* bytes read (the reader's) */
	uint8_t pad1[60];
	_Atomic uint32_t rx_sleep; /* the reader waits for a wake-up */
	uint8_t pad2[60];
	_Atomic uint32_t tx_sleep; /* the writer waits for room */
	uint8_t pad3[60];
};
_Static_assert(2 * sizeof(struct shm_ring) <= TCP_SHM_HDR, "ring headers fit");

/* maps @fd; the client's ring is the first. The client, which made the
 * mapping (@server false), starts both readers asleep: the first bytes
 * each way wake their reader */
struct tcp_shm *tcp_shm_map(int fd, bool server)
{
	struct tcp_shm *s = calloc(1, sizeof(*s));
	struct shm_ring *r;
	uint8_t *p;

	if (!s)
		return NULL;
	p = mmap(NULL, TCP_SHM_MAP, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		free(s);
		return NULL;
	}
	/* a child the app forks shares no ring with us */
	(void)madvise(p, TCP_SHM_MAP, MADV_DONTFORK);
	s->map = p;
	r = (struct shm_ring *)p;
	s->tx = server ? &r[1] : &r[0];
	s->rx = server ? &r[0] : &r[1];
	s->txd = p + TCP_SHM_HDR + (server ? TCP_SHM_RING : 0);
	s->rxd = p + TCP_SHM_HDR + (server ? 0 : TCP_SHM_RING);
	if (!server) {
		atomic_store(&r[0].rx_sleep, 1);
		atomic_store(&r[1].rx_sleep, 1);
	}
	return s;
}

void tcp_shm_free(struct tcp_conn *tc)
{
	if (!tc->shm)
		return;
	munmap(tc->shm->map, TCP_SHM_MAP);
	free(tc->shm);
	tc->shm = NULL;
}

/* a byte on the socket: the peer looks at its rings */
static void shm_wake(struct tcp_conn *tc)
{
	ssize_t r;

	/* full of unread wake-ups (it wakes anyway), or gone (its end
	 * comes through our read side): nothing to do */
	r = send(tc->fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)r;
}

static void shm_corrupt(struct tcp_conn *tc)
{
	tcp_shm_why(tc, "the peer wrote a ring position out of "
			"bounds into the shared mapping");
	errno = EPROTO;
}

/* the bytes the peer wrote that we have not read: at most a ring's,
 * else -1 (EPROTO) */
static int shm_avail(struct tcp_conn *tc, uint32_t *avail)
{
	struct tcp_shm *s = tc->shm;
	uint32_t head =
		atomic_load_explicit(&s->rx->head, memory_order_acquire);

	*avail = head - s->rx_tail;
	if (*avail <= TCP_SHM_RING)
		return 0;
	shm_corrupt(tc);
	return -1;
}

ssize_t tcp_shm_readv(struct tcp_conn *tc, const struct iovec *iov, int cnt)
{
	struct tcp_shm *s = tc->shm;
	uint32_t avail, off, k;
	size_t n = 0, want = 0;
	int i;

	for (i = 0; i < cnt; i++)
		want += iov[i].iov_len;
	if (shm_avail(tc, &avail))
		return -1;
	if (!avail) {
		if (s->eof)
			return 0;
		/* about to wait: say so, then look once more. Only the
		 * writer clears the flag, as it sends the wake-up: so a
		 * clear flag always means a wake-up is on its way, and a
		 * reader may block whenever it stops (busy polling too) */
		atomic_store_explicit(&s->rx->rx_sleep, 1,
				      memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		if (shm_avail(tc, &avail))
			return -1;
		if (!avail) {
			errno = EAGAIN;
			return -1;
		}
	}
	if (want > avail)
		want = avail;
	for (i = 0; i < cnt && n < want; i++) {
		size_t len = RMSGI_MIN(iov[i].iov_len, want - n), done = 0;

		while (done < len) {
			off = (s->rx_tail + (uint32_t)(n + done)) &
			      (TCP_SHM_RING - 1);
			k = (uint32_t)RMSGI_MIN(len - done,
						(size_t)(TCP_SHM_RING - off));
			memcpy((uint8_t *)iov[i].iov_base + done, s->rxd + off,
			       k);
			done += k;
		}
		n += len;
	}
	s->rx_tail += (uint32_t)n;
	atomic_store_explicit(&s->rx->tail, s->rx_tail, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&s->rx->tx_sleep, memory_order_relaxed) &&
	    atomic_exchange(&s->rx->tx_sleep, 0))
		shm_wake(tc);
	return (ssize_t)n;
}

/* copies up to @len bytes of @iov (from @skip on) into the ring's room */
static size_t shm_put(struct tcp_shm *s, const struct iovec *iov, int cnt,
		      size_t skip, size_t room)
{
	size_t n = 0;
	int i;

	for (i = 0; i < cnt && n < room; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		p += skip;
		len = RMSGI_MIN(len - skip, room - n);
		skip = 0;
		while (len) {
			uint32_t off =
				(s->tx_head + (uint32_t)n) & (TCP_SHM_RING - 1);
			uint32_t k = (uint32_t)RMSGI_MIN(
				len, (size_t)(TCP_SHM_RING - off));

			memcpy(s->txd + off, p, k);
			p += k;
			len -= k;
			n += k;
		}
	}
	return n;
}

ssize_t tcp_shm_writev(struct tcp_conn *tc, const struct iovec *iov, int cnt)
{
	struct tcp_shm *s = tc->shm;
	size_t want = 0, sent = 0;
	int i;

	/* (not refused after the peer's FIN: a half-closed peer still
	 * reads, as over TCP; a dead one ends us on the read side) */
	if (!s) {
		errno = EPIPE;
		return -1;
	}
	for (i = 0; i < cnt; i++)
		want += iov[i].iov_len;
	while (sent < want) {
		uint32_t tail = atomic_load_explicit(&s->tx->tail,
						     memory_order_acquire);
		uint32_t used = s->tx_head - tail;
		size_t n;

		if (used > TCP_SHM_RING) {
			shm_corrupt(tc);
			return -1;
		}
		n = shm_put(s, iov, cnt, sent, TCP_SHM_RING - used);
		if (n) {
			s->written = n > UINT32_MAX - s->written
					     ? UINT32_MAX
					     : s->written + (uint32_t)n;
			s->tx_head += (uint32_t)n;
			sent += n;
			atomic_store_explicit(&s->tx->head, s->tx_head,
					      memory_order_release);
			atomic_thread_fence(memory_order_seq_cst);
			if (atomic_load_explicit(&s->tx->rx_sleep,
						 memory_order_relaxed) &&
			    atomic_exchange(&s->tx->rx_sleep, 0))
				shm_wake(tc);
			continue;
		}
		/* full: say we wait for room, then look once more */
		atomic_store_explicit(&s->tx->tx_sleep, 1,
				      memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&s->tx->tail, memory_order_acquire) ==
		    tail)
			break;
		atomic_store_explicit(&s->tx->tx_sleep, 0,
				      memory_order_relaxed);
	}
	if (!sent) {
		errno = EAGAIN;
		return -1;
	}
	return (ssize_t)sent;
}

bool tcp_shm_park(struct tcp_conn *tc)
{
	struct tcp_shm *s = tc->shm;

	if (!s || s->eof)
		return false; /* the socket stays readable at its end */
	atomic_store_explicit(&s->rx->rx_sleep, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&s->rx->head, memory_order_acquire) !=
	       s->rx_tail;
}

bool tcp_shm_trim(struct tcp_conn *tc)
{
	struct tcp_shm *s = tc->shm;

	/* a page or less (an idle connection's keepalive frames): kept, so
	 * that a page is not freed and faulted in again every second */
	if (!s || s->written <= 4096)
		return false;
	/* the peer published that it read all we wrote, so nothing reads
	 * these pages, and only we write them: they go (both processes
	 * map zero pages again when we write next) */
	if (atomic_load_explicit(&s->tx->tail, memory_order_acquire) !=
	    s->tx_head)
		return true;
	(void)madvise(s->txd, TCP_SHM_RING, MADV_REMOVE);
	s->written = 0;
	return false;
}

bool tcp_shm_ready(const struct tcp_conn *tc)
{
	const struct tcp_shm *s = tc->shm;

	return s && (s->eof ||
		     atomic_load_explicit(&s->rx->head, memory_order_relaxed) !=
			     s->rx_tail);
}
