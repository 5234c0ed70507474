// SPDX-License-Identifier: MIT
/*
 * onesided.c - memory regions and one-sided operations, on either
 * transport:
 *  1. stream a region with rmsg_write_imm in 1 MiB chunks, imm = chunk
 *     index; the receiver checks each chunk's pattern in on_imm. 256 MiB
 *     over TCP; 64 MiB over RDMA, because the Soft-RoCE VM (3 GiB, TCG)
 *     pins both ends of it in one process and moves ~16-30 MB/s;
 *     RMSG_TEST_STREAM_MIB overrides;
 *  2. rmsg_read of a remote region, into three pieces;
 *  3. rmsg_write, then a message that tells the peer to check;
 *  4. refused locally: out of bounds, offset overflow, wrong rights, a
 *     malformed descriptor (-EINVAL/-EACCES, connection stays up);
 *  5. deregistration while writes from the region are in flight (-EBUSY
 *     on RDMA, where they hold its keys), then after they completed: the
 *     first attempt runs right after the flush that posted 8 MiB of
 *     writes, before the loop could wait for any completion (a prepare
 *     watcher of lower priority than the context's), so over RDMA it must
 *     see -EBUSY;
 *  6. the registration cache: a buffer sent (rendezvous) or written,
 *     then freed and allocated again at the same address with new pages
 *     and contents (mmap MAP_FIXED over it: the address is certain), sent
 *     or written again; the peer must see the new contents;
 *  7. a stale descriptor (region deregistered by its owner) and a forged
 *     one (token and rkey changed): over TCP the op fails with -EACCES and the
 *     connection stays up; over RDMA the device refuses it, the op fails
 *     and the queue pair, hence the connection, dies (a second connection
 *     is used for the forged one). Canaries around the regions are
 *     checked unchanged at the end.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "common.h"

#define MIB ((size_t)1 << 20)
/* RMSG_TEST_CHUNK_KIB sets another chunk size (bandwidth comparisons) */
static size_t CHUNK = MIB;
#define DEPTH 16
#define RD_LEN (MIB + 123)
#define PAGE 4096
#define SM_LEN PAGE
#define ST_LEN (64 * 1024)
#define REUSE_LEN (4 * MIB)
#define CANARY 0xa5

enum {
	M_DESC = 1,  /* s->c: descriptors */
	M_STREAM_OK, /* s->c: every chunk arrived and checked */
	M_CHECK,     /* c->s: check the small region */
	M_CHECK_OK,
	M_REUSE,  /* c->s: payload follows, pattern seed */
	M_REUSEW, /* c->s: check the start of the stream region */
	M_REUSE_OK,
	M_DEREG, /* c->s: deregister the stale region */
	M_DEREG_OK,
	M_PING, /* c->s: still up after refused accesses? */
	M_PONG,
};

struct m_hdr {
	uint32_t kind;
	uint32_t arg;
	uint64_t seed;
	uint8_t desc[5][RMSG_MR_DESC_SIZE];
};

static struct rmsg_listener *lis;
static struct rmsg_ctx *sctx, *cctx;
static struct rmsg_conn *c1, *c2;
static bool rdma;
static size_t stream_len;
static unsigned nchunks;

/* server */
static uint8_t *S, *RD, *G, *G2;
static struct rmsg_mr *mS, *mRD, *mSM, *mST;
static unsigned imm_seen, zero_imm_seen;
static uint8_t *imm_got; /* per chunk: on_imm calls */
static ev_tstamp t_stream0, t_stream1;

/* client */
static uint8_t *src, *rdbuf;
static struct m_hdr descs;
static unsigned next_chunk, chunks_done, wr_pending;
static int phase, closes, c1_closed_reason = 1, c2_closed_reason = 1;
static int async_fail_status = 1, forged_status = 1, stale_status = 1;
static struct rmsg_mr *msrc;
static int dereg_busy_seen, dereg_writes, dereg_tries, reuse_wait;
static ev_timer dereg_timer;
static ev_prepare dereg_prep;

#define SM_DESC descs.desc[2]
#define ST_DESC descs.desc[3]

static void srv_send(struct rmsg_conn *c, uint32_t kind)
{
	/* the memory stays untouched until the send completes: a ring
	 * longer than the sends this test has in flight */
	static struct m_hdr ring[8];
	static int k;
	struct m_hdr *h = &ring[k++ % 8];
	struct iovec iov = {h, sizeof(*h)};

	memset(h, 0, sizeof(*h));
	h->kind = kind;
	if (kind == M_DESC) {
		/* to this connection, with the region's rights */
		T_OK(rmsg_mr_export(mS, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE,
				    h->desc[0]));
		T_OK(rmsg_mr_export(mRD, c, 0, 0, RMSG_ACCESS_REMOTE_READ,
				    h->desc[1]));
		T_OK(rmsg_mr_export(mSM, c, 0, 0,
				    RMSG_ACCESS_REMOTE_WRITE |
					    RMSG_ACCESS_REMOTE_READ,
				    h->desc[2]));
		T_OK(rmsg_mr_export(mST, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE,
				    h->desc[3]));
	}
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void cli_send(struct rmsg_conn *c, uint32_t kind, uint64_t seed)
{
	static struct m_hdr h[8];
	static int k;
	struct iovec iov;

	k = (k + 1) % 8;
	memset(&h[k], 0, sizeof(h[k]));
	h[k].kind = kind;
	h[k].seed = seed;
	iov.iov_base = &h[k];
	iov.iov_len = sizeof(h[k]);
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void check_canaries(void)
{
	size_t i;

	for (i = 0; i < PAGE; i++) {
		T_ASSERT(G[i] == CANARY && G[2 * PAGE + i] == CANARY,
			 "canary around the small region at %zu", i);
		T_ASSERT(G2[i] == CANARY && G2[PAGE + ST_LEN + i] == CANARY,
			 "canary around the stale region at %zu", i);
	}
	for (i = 0; i < ST_LEN; i++)
		T_ASSERT(G2[PAGE + i] == 0x11, "stale region changed at %zu",
			 i);
}

/* ------------------------------------------------------------------ */
/* server                                                               */

static void srv_imm(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	if (imm_seen == nchunks) {
		/* the zero-length write-with-immediate of phase 4 */
		T_ASSERT(len == 0 && imm == 7, "imm %u len %zu", imm, len);
		zero_imm_seen++;
		return;
	}
	T_ASSERT(len == CHUNK, "imm %u len %zu", imm, len);
	T_ASSERT(imm < nchunks, "imm %u", imm);
	T_ASSERT(!imm_got[imm]++, "chunk %u: on_imm twice", imm);
	if (imm_seen == 0)
		t_stream0 = ev_time();
	T_ASSERT(t_check(S + (size_t)imm * CHUNK, CHUNK, 1000 + imm) == 0,
		 "chunk %u checksum", imm);
	if (++imm_seen == nchunks) {
		t_stream1 = ev_time();
		srv_send(c, M_STREAM_OK);
	}
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const struct m_hdr *h = rmsg_msg_data(m);
	size_t len = rmsg_msg_len(m);

	T_ASSERT(len >= sizeof(*h), "len %zu", len);
	switch (h->kind) {
	case M_DESC: /* the client asks for the descriptors */
		srv_send(c, M_DESC);
		break;
	case M_CHECK:
		T_ASSERT(t_check(G + PAGE + 100, 1000, h->seed) == 0,
			 "written bytes");
		T_ASSERT(G[PAGE + 99] == 0 && G[PAGE + 1100] == 0,
			 "bytes next to the write");
		check_canaries();
		srv_send(c, M_CHECK_OK);
		break;
	case M_REUSE:
		T_ASSERT(len == sizeof(*h) + REUSE_LEN, "reuse len %zu", len);
		T_ASSERT(t_check((const uint8_t *)h + sizeof(*h), REUSE_LEN,
				 h->seed) == 0,
			 "reused buffer %llu: old contents sent",
			 (unsigned long long)h->seed);
		srv_send(c, M_REUSE_OK);
		break;
	case M_REUSEW:
		T_ASSERT(t_check(S, REUSE_LEN, h->seed) == 0,
			 "reused buffer written %llu: old contents",
			 (unsigned long long)h->seed);
		srv_send(c, M_REUSE_OK);
		break;
	case M_DEREG:
		T_OK(rmsg_mr_dereg(mST));
		mST = NULL;
		srv_send(c, M_DEREG_OK);
		break;
	case M_PING:
		srv_send(c, M_PONG);
		break;
	default:
		T_FAIL("server: message kind %u", h->kind);
	}
}

/* ------------------------------------------------------------------ */
/* client                                                               */

static void next_phase(struct rmsg_conn *c);

static void stream_pump(struct rmsg_conn *c);

static void stream_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "write_imm %lu: %s", (unsigned long)arg,
		 rmsg_strerror(status));
	T_ASSERT(chunks_done < next_chunk, "%u callbacks for %u writes",
		 chunks_done + 1, next_chunk);
	chunks_done++;
	wr_pending--;
	stream_pump(c);
}

static void stream_pump(struct rmsg_conn *c)
{
	while (next_chunk < nchunks && wr_pending < DEPTH) {
		struct iovec iov = {src + (size_t)next_chunk * CHUNK, CHUNK};
		int ret = rmsg_write_imm(c, &iov, 1, descs.desc[0],
					 (uint64_t)next_chunk * CHUNK,
					 next_chunk, stream_done,
					 (void *)(unsigned long)next_chunk);

		if (ret == -EAGAIN)
			return; /* on_writable */
		T_OK(ret);
		next_chunk++;
		wr_pending++;
	}
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	if (phase == 1)
		stream_pump(c);
}

static void read_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "read: %s", rmsg_strerror(status));
	next_phase(c);
}

static void write_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "write: %s", rmsg_strerror(status));
}

static int try_dereg(void)
{
	int ret;

	if (!msrc)
		return 0;
	ret = rmsg_mr_dereg(msrc);
	if (ret == -EBUSY) {
		/* writes still queued (rmsg_mr_reg.3, either transport);
		 * RDMA: also posted writes, which hold the region's keys */
		dereg_busy_seen++;
	} else {
		T_OK(ret);
		msrc = NULL;
	}
	return ret;
}

/* phase 5 from a timer: the writes are queued after this iteration's
 * prepare watchers ran, so the next ones see them */
static void dereg_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	next_phase(c1);
}

static void zero_imm_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "zero-length write_imm: %s",
		 rmsg_strerror(status));
	ev_timer_init(&dereg_timer, dereg_timer_cb, 0, 0);
	ev_timer_start(rmsg_ctx_loop(cctx), &dereg_timer);
}

/*
 * Runs after the context's prepare watcher (lower priority) in the same
 * iteration: the context's flush has just posted the first of the writes,
 * and the loop has not waited for anything since. 8 MiB cannot have been
 * written and acknowledged in the microseconds between, so over RDMA the
 * region's keys are held: rmsg_mr_reg.3 promises -EBUSY.
 */
static void dereg_prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	int ret;

	ev_prepare_stop(loop, w);
	dereg_tries++;
	ret = try_dereg();
	if (rdma)
		/* covers: rmsg_mr_reg.3 EBUSY */
		T_ASSERT(ret == -EBUSY,
			 "dereg with 8 MiB of writes just posted: %s",
			 rmsg_strerror(ret));
}

static void dereg_write_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "write from a region: %s", rmsg_strerror(status));
	try_dereg();
	if (--dereg_writes == 0) {
		T_ASSERT(msrc == NULL, "region still registered");
		next_phase(c);
	}
}

/* the first round of a pair frees the buffer's pages and puts new ones
 * at the same address (what the registration cache must not mistake for
 * the same memory); the second unmaps it */
static void reuse_free(void *p)
{
	if (phase % 2 == 0) {
		void *q = mmap(p, REUSE_LEN, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

		T_ASSERT(q == p, "mmap MAP_FIXED at %p: %p", p, q);
	} else {
		T_ASSERT(munmap(p, REUSE_LEN) == 0, "munmap");
	}
}

static void reuse_write_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "reuse write: %s", rmsg_strerror(status));
	reuse_free(arg);
	cli_send(c, M_REUSEW, (uint64_t)phase);
}

static void reuse_send_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "reuse send: %s", rmsg_strerror(status));
	reuse_free(arg);
	if (--reuse_wait == 0)
		next_phase(c);
}

static void bad_done(struct rmsg_conn *c, int status, void *arg)
{
	*(int *)arg = status;
	if (rdma)
		return;
	if (arg == &stale_status ||
	    (forged_status != 1 && async_fail_status != 1))
		cli_send(c, M_PING, 0);
}

static void forged_desc(uint8_t *d)
{
	/* a well-formed descriptor of an export that does not exist:
	 * another token and rkey, the small region's address and bounds */
	memcpy(d, SM_DESC, RMSG_MR_DESC_SIZE);
	if (rdma) { /* the rkey (TCP descriptors have none) */
		d[4] ^= 0x5a;
		d[5] ^= 0xc3;
	}
	d[8] ^= 0x77; /* the token */
	d[9] ^= 0x19;
}

/* rounds 6, 7: sent (rendezvous over RDMA); rounds 8, 9: written. The
 * first of each pair maps a buffer; after its callback reuse_free() puts
 * new pages at the same address, which the second round fills with new
 * contents and sends or writes again */
static void reuse_round(struct rmsg_conn *c, int round)
{
	static struct m_hdr h;
	struct iovec iov[2];
	static uint8_t *last;
	uint8_t *p;
	size_t i;

	if (round % 2 == 0) {
		p = mmap(NULL, REUSE_LEN, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		T_ASSERT(p != MAP_FAILED, "mmap");
		last = p;
	} else {
		/* the same address; the old contents are gone */
		p = last;
		for (i = 0; i < REUSE_LEN; i += PAGE)
			T_ASSERT(p[i] == 0, "round %d: old page at %zu", round,
				 i);
	}
	t_fill(p, REUSE_LEN, (uint64_t)round);
	if (round < 8) {
		reuse_wait = 2;
		memset(&h, 0, sizeof(h));
		h.kind = M_REUSE;
		h.seed = (uint64_t)round;
		iov[0].iov_base = &h;
		iov[0].iov_len = sizeof(h);
		iov[1].iov_base = p;
		iov[1].iov_len = REUSE_LEN;
		T_OK(rmsg_send(c, iov, 2, reuse_send_done, p));
	} else {
		iov[0].iov_base = p;
		iov[0].iov_len = REUSE_LEN;
		T_OK(rmsg_write(c, iov, 1, descs.desc[0], 0, reuse_write_done,
				p));
	}
}

static void next_phase(struct rmsg_conn *c)
{
	struct iovec iov[3];
	uint8_t bad[RMSG_MR_DESC_SIZE];
	int i;

	phase++;
	switch (phase) {
	case 1: /* stream */
		stream_pump(c);
		break;
	case 2: /* read into three pieces */
		memset(rdbuf, 0, RD_LEN);
		iov[0].iov_base = rdbuf;
		iov[0].iov_len = 1;
		iov[1].iov_base = rdbuf + 1;
		iov[1].iov_len = 4000;
		iov[2].iov_base = rdbuf + 4001;
		iov[2].iov_len = RD_LEN - 4001;
		T_OK(rmsg_read(c, iov, 3, descs.desc[1], 0, read_done, NULL));
		break;
	case 3: /* write, then tell the peer */
		T_ASSERT(t_check(rdbuf, RD_LEN, 77) == 0, "read bytes");
		t_fill(src, 1000, 4242);
		iov[0].iov_base = src;
		iov[0].iov_len = 1000;
		T_OK(rmsg_write(c, iov, 1, SM_DESC, 100, write_done, NULL));
		cli_send(c, M_CHECK, 4242);
		break;
	case 4: /* refused before anything is posted */
		iov[0].iov_base = src;
		iov[0].iov_len = 100;
		/* covers: rmsg_write_imm.3 EINVAL */
		T_ASSERT(rmsg_write(c, iov, 1, SM_DESC, SM_LEN - 10, NULL,
				    NULL) == -EINVAL,
			 "write past the end");
		T_ASSERT(rmsg_write(c, iov, 1, SM_DESC, UINT64_MAX - 50, NULL,
				    NULL) == -EINVAL,
			 "offset overflow");
		T_ASSERT(rmsg_read(c, iov, 1, SM_DESC, SM_LEN, NULL, NULL) ==
				 -EINVAL,
			 "read at the end");
		/* covers: rmsg_write_imm.3 EACCES */
		T_ASSERT(rmsg_read(c, iov, 1, descs.desc[0], 0, NULL, NULL) ==
				 -EACCES,
			 "read from a write-only region");
		T_ASSERT(rmsg_write(c, iov, 1, descs.desc[1], 0, NULL, NULL) ==
				 -EACCES,
			 "write to a read-only region");
		T_ASSERT(rmsg_write_imm(c, iov, 1, descs.desc[1], 0, 1, NULL,
					NULL) == -EACCES,
			 "write_imm to a read-only region");
		memcpy(bad, SM_DESC, sizeof(bad));
		bad[0] ^= 1;
		T_ASSERT(rmsg_write(c, iov, 1, bad, 0, NULL, NULL) == -EINVAL,
			 "bad magic");
		memcpy(bad, SM_DESC, sizeof(bad));
		bad[3] |= 0x80;
		T_ASSERT(rmsg_write(c, iov, 1, bad, 0, NULL, NULL) == -EINVAL,
			 "unknown flag");
		memcpy(bad, SM_DESC, sizeof(bad));
		bad[1] = 1; /* version 1: before per-connection exports */
		T_ASSERT(rmsg_write(c, iov, 1, bad, 0, NULL, NULL) == -EINVAL,
			 "old version");
		T_ASSERT(rmsg_write(c, iov, 1, NULL, 0, NULL, NULL) == -EINVAL,
			 "NULL descriptor");
		/* a zero-length write-with-immediate is fine; phase 5
		 * follows its callback */
		T_OK(rmsg_write_imm(c, NULL, 0, SM_DESC, SM_LEN, 7,
				    zero_imm_done, NULL));
		break;
	case 5: /* deregistration with writes in flight */
		T_OK(rmsg_mr_reg(cctx, src, 8 * MIB, 0, &msrc));
		dereg_writes = 8;
		for (i = 0; i < 8; i++) {
			iov[0].iov_base = src + (size_t)i * MIB;
			iov[0].iov_len = MIB;
			T_OK(rmsg_write(c, iov, 1, descs.desc[0],
					(uint64_t)i * MIB, dereg_write_done,
					NULL));
		}
		ev_prepare_init(&dereg_prep, dereg_prep_cb);
		ev_set_priority(&dereg_prep, EV_MINPRI);
		ev_prepare_start(rmsg_ctx_loop(cctx), &dereg_prep);
		break;
	case 6:
	case 7:
	case 8:
	case 9: /* freed and reused buffers */
		reuse_round(c, phase);
		break;
	case 10: /* a stale descriptor: ask the owner to deregister */
		cli_send(c, M_DEREG, 0);
		break;
	case 11:
		iov[0].iov_base = src;
		iov[0].iov_len = 100;
		T_OK(rmsg_write(c, iov, 1, ST_DESC, 0, bad_done,
				&stale_status));
		if (rdma) {
			forged_desc(bad);
			T_OK(rmsg_write(c2, iov, 1, bad, 0, bad_done,
					&forged_status));
		}
		break;
	case 12: /* TCP: the connection survived; now a forged one */
		T_ASSERT(stale_status == -EACCES, "stale: %d", stale_status);
		forged_desc(bad);
		iov[0].iov_base = src;
		iov[0].iov_len = 100;
		T_OK(rmsg_write(c, iov, 1, bad, 0, bad_done, &forged_status));
		T_OK(rmsg_read(c, iov, 1, bad, 0, bad_done,
			       &async_fail_status));
		break;
	case 13:
		T_ASSERT(forged_status == -EACCES, "forged: %d", forged_status);
		T_ASSERT(async_fail_status == -EACCES, "forged read: %d",
			 async_fail_status);
		rmsg_conn_close(c1);
		rmsg_conn_close(c2);
		break;
	}
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const struct m_hdr *h = rmsg_msg_data(m);

	T_ASSERT(rmsg_msg_len(m) >= sizeof(*h), "len");
	switch (h->kind) {
	case M_DESC:
		descs = *h;
		next_phase(c);
		break;
	case M_STREAM_OK:
		/* the server saw every chunk: all were written; their
		 * callbacks may still be on their way (checked at the end) */
		T_ASSERT(phase == 1 && next_chunk == nchunks,
			 "stream done in phase %d after %u of %u chunks", phase,
			 next_chunk, nchunks);
		next_phase(c);
		break;
	case M_REUSE_OK:
		if (phase < 8 && --reuse_wait)
			break; /* the send's callback comes too */
		next_phase(c);
		break;
	case M_CHECK_OK:
	case M_DEREG_OK:
	case M_PONG:
		next_phase(c);
		break;
	default:
		T_FAIL("client: message kind %u", h->kind);
	}
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	if (c == c1)
		cli_send(c, M_DESC, 0);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (c == c1)
		c1_closed_reason = reason;
	else if (c == c2)
		c2_closed_reason = reason;
	if (c == c1 || c == c2) {
		if (c == c1)
			c1 = NULL;
		else
			c2 = NULL;
		if (!c1 && !c2)
			rmsg_listener_close(lis);
	}
	closes++;
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_imm = srv_imm};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_writable = cli_writable,
				     .on_close = on_close};
	const char *env = getenv("RMSG_TEST_STREAM_MIB");
	struct rmsg_cfg *cfg;
	struct ev_loop *loop;
	char uri[128];
	size_t i;
	double secs;

	t_require_transport();
	rdma = !strcmp(t_transport(), "rdma");
	stream_len = (env ? (size_t)atoi(env) : rdma ? 64 : 256) * MIB;
	env = getenv("RMSG_TEST_CHUNK_KIB");
	if (env && atoi(env) > 0)
		CHUNK = (size_t)atoi(env) << 10;
	nchunks = (unsigned)(stream_len / CHUNK);
	T_ASSERT(nchunks >= 8, "stream of %u chunks", nchunks);
	loop = ev_default_loop(0);

	S = calloc(1, stream_len);
	src = malloc(stream_len);
	RD = malloc(RD_LEN);
	rdbuf = malloc(RD_LEN);
	G = calloc(1, 3 * PAGE);
	G2 = malloc(2 * PAGE + ST_LEN);
	imm_got = calloc(nchunks, 1);
	T_ASSERT(S && src && RD && rdbuf && G && G2 && imm_got, "malloc");
	for (i = 0; i < nchunks; i++)
		t_fill(src + i * CHUNK, CHUNK, 1000 + i);
	t_fill(RD, RD_LEN, 77);
	memset(G, CANARY, PAGE);
	memset(G + 2 * PAGE, CANARY, PAGE);
	memset(G2, CANARY, 2 * PAGE + ST_LEN);
	memset(G2 + PAGE, 0x11, ST_LEN);

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_reg_limit(cfg, stream_len + 64 * MIB));
	T_OK(rmsg_ctx_create(loop, cfg, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	/* registered before the context has a device: over RDMA the keys
	 * come when the first connection opens it, before export */
	T_OK(rmsg_mr_reg(sctx, S, stream_len, RMSG_ACCESS_REMOTE_WRITE, &mS));
	T_OK(rmsg_mr_reg(sctx, RD, RD_LEN, RMSG_ACCESS_REMOTE_READ, &mRD));
	T_OK(rmsg_mr_reg(sctx, G + PAGE, SM_LEN,
			 RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			 &mSM));
	T_OK(rmsg_mr_reg(sctx, G2 + PAGE, ST_LEN, RMSG_ACCESS_REMOTE_WRITE,
			 &mST));
	/* the budget: nothing more fits */
	/* covers: rmsg_mr_reg.3 ENOMEM */
	T_ASSERT(rmsg_mr_reg(sctx, src, 128 * MIB, 0, &msrc) == -ENOMEM,
		 "budget");
	msrc = NULL;
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &c1));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &c2));
	t_deadline(loop, 600);
	ev_run(loop, 0);

	secs = t_stream1 - t_stream0;
	printf("onesided over %s: write_imm stream of %zu MiB in %zu KiB "
	       "chunks: %.1f MB/s (%.2f s)\n",
	       t_transport(), stream_len / MIB, CHUNK >> 10,
	       secs > 0 ? (double)stream_len / secs / 1e6 : 0.0, secs);
	T_ASSERT(imm_seen == nchunks, "imm %u of %u", imm_seen, nchunks);
	T_ASSERT(zero_imm_seen == 1, "zero-length imm %u", zero_imm_seen);
	if (rdma) {
		/* the device refused both: the op failed, the QP died */
		T_ASSERT(stale_status < 0, "stale over RDMA: %d", stale_status);
		T_ASSERT(forged_status < 0, "forged over RDMA: %d",
			 forged_status);
		T_ASSERT(c1_closed_reason < 0 && c2_closed_reason < 0,
			 "connections after remote access errors: %d %d",
			 c1_closed_reason, c2_closed_reason);
		printf("rdma: stale -> %s, forged -> %s\n",
		       rmsg_strerror(stale_status),
		       rmsg_strerror(forged_status));
	} else {
		T_ASSERT(phase == 13, "phase %d", phase);
		T_ASSERT(c1_closed_reason == 0, "close %d", c1_closed_reason);
	}
	printf("dereg with writes in flight: -EBUSY seen %d times\n",
	       dereg_busy_seen);
	T_ASSERT(chunks_done == nchunks, "%u stream callbacks for %u chunks",
		 chunks_done, nchunks);
	T_ASSERT(msrc == NULL && dereg_tries == 1, "dereg phase did not run");
	check_canaries();
	T_OK(rmsg_mr_dereg(mS));
	T_OK(rmsg_mr_dereg(mRD));
	T_OK(rmsg_mr_dereg(mSM));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(cfg);
	free(S);
	free(src);
	free(RD);
	free(rdbuf);
	free(G);
	free(G2);
	free(imm_got);
	return 0;
}
