// SPDX-License-Identifier: MIT
/*
 * errors_onesided.c - the documented errors of rmsg_mr_reg(3),
 * rmsg_mr_dereg(3), rmsg_mr_export(3), rmsg_mr_revoke(3), rmsg_write(3),
 * rmsg_write_imm(3) and rmsg_read(3), on either transport, and what the
 * callbacks receive. After each refused call the objects stay usable: the
 * connection still writes and reads, a failed registration costs nothing
 * of the budget, a refused operation never runs its callback.
 *
 *  1. Regions: rmsg_mr_reg -EINVAL (NULL arguments, len 0, a wrapping
 *     range, unknown access bits), -ENOMEM beyond the budget (and the
 *     budget is whole again after it and after a deregistration);
 *     rmsg_mr_dereg(NULL) -EINVAL.
 *  2. Exports: -EINVAL (NULL, no rights, unknown bits, c and
 *     RMSG_EXPORT_ANY_PEER mismatched, ranges outside the region, c of
 *     another context), -EACCES (rights the region lacks), -ENOTCONN (c not
 *     established yet); rmsg_mr_revoke -EINVAL (NULL, malformed) and
 *     -ENOENT (twice, of another region, after the connection ended).
 *  3. Connection c1 (maximum message size 16 KiB, send queue 4): each of
 *     write_imm, write and read refused before anything is sent with
 *     -EINVAL (NULL connection or descriptor, iovcnt -1 and RMSG_IOV_MAX+1,
 *     NULL iov, NULL base, malformed descriptor, outside the export,
 *     offset overflow, past the end of a sub-range export that the region
 *     would hold), -EACCES (rights the export lacks), -EMSGSIZE (16 KiB + 1;
 *     16 KiB works), -EAGAIN (a fifth operation; on_writable follows).
 *  4. rmsg_mr_dereg -EBUSY: over TCP while the answer to the peer's read
 *     of 32 MiB is being written, over RDMA while the window of an export
 *     made in this loop iteration is being bound; 0 once that is over.
 *  5. A revoked descriptor (c2) and one exported to another connection
 *     (c3 uses c1's): over TCP the operation completes with -EACCES and the
 *     connection stays up; over RDMA it completes with an error and that
 *     connection fails on both sides, the others unharmed. The owner's
 *     memory is unchanged.
 *  6. An any-peer export made before the owner opened an RDMA device: over
 *     RDMA the operation completes with -EINVAL (no remote key), the
 *     connection stays up; over TCP it works.
 *     The caller's budget used up by its own rmsg_buf_alloc buffers: over
 *     RDMA a write from other memory completes with -ENOMEM (no
 *     registration), the connection stays up; over TCP it works.
 *  7. RDMA: exports in one loop iteration fill the send queue: -EAGAIN,
 *     then on_writable, then exports work again.
 *  8. Closing c1: the operations fail with -ENOTCONN.
 *  9. c4, to a listener whose maximum message size is 16 KiB, reads and
 *     writes 16 KiB + 1: over TCP (frames) the read completes with
 *     -EMSGSIZE and the connection stays up, the write ends the
 *     connection (the owner's on_close gets -EMSGSIZE); over RDMA both
 *     work. (Run before 8.)
 */
#include <stdbool.h>
#include <string.h>

#include "common.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define RW_LEN (64 * KIB)
#define SMALL 4096
#define BIG_LEN (32 * MIB)
#define MAX_MSG (16 * KIB)
#define SQ 4
/* exports in one iteration: far more than any send queue holds */
#define FLOOD 4096
#define BUF (64 * KIB)
#define CLI_LIMIT (64 * MIB)

enum {
	D_RW,
	D_WO,
	D_RO,
	D_SUB,
	D_RONLY,
	D_BIG,
	D_SCRATCH,
	ND
};
enum {
	K_DESC = 1,   /* c->s: export to this connection, send back */
	K_DESCS,      /* s->c: the descriptors */
	K_DEREG_BIG,  /* c->s: dereg the big region (read in flight) */
	K_DEREG_BIG2, /* c->s: dereg it again (the read is done) */
	K_REVOKED,    /* c->s: export scratch, send it, revoke it */
	K_PING,
	K_PONG,
	K_MW_FLOOD, /* c->s: export until -EAGAIN (RDMA) */
};

struct m {
	uint32_t kind;
	uint32_t idx;
	uint8_t desc[ND][RMSG_MR_DESC_SIZE];
};

static struct ev_loop *loop;
static bool rdma;
static struct rmsg_ctx *sctx, *cctx;

/* server */
static uint8_t *rw, *wo, *ro, *big, *scratch;
static struct rmsg_mr *mRW, *mWO, *mRO, *mBIG, *mSCR, *mANY;
#define NC 5 /* connections 1..4 */
static struct rmsg_conn *sconn[NC];
static int sclosed[NC], sreason[NC] = {1, 1, 1, 1, 1};
static int dereg_big = 1, dereg_big2 = 1, revoke_again = 1, srv_writable;
static int imm_n;
static uint32_t imm_last;
static size_t imm_len;
static uint8_t c3_desc[RMSG_MR_DESC_SIZE];

/* client */
static struct rmsg_conn *cc[NC];
static int cest[NC], cclosed[NC], creason[NC] = {1, 1, 1, 1, 1}, cwritable[NC];
static struct m got[NC];
static int ngot[NC], pongs[NC];

struct done {
	int n;
	int status;
};

static int conn_idx(struct rmsg_conn *c, struct rmsg_conn **tab)
{
	int i;

	for (i = 1; i < NC; i++)
		if (tab[i] == c)
			return i;
	T_FAIL("unknown connection");
	return 0;
}

static void msg_send(struct rmsg_conn *c, const struct m *src)
{
	/* untouched until the send completes: a ring longer than the
	 * sends in flight */
	static struct m ring[16];
	static int k;
	struct m *h = &ring[k++ % 16];
	struct iovec iov = {h, sizeof(*h)};

	*h = *src;
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void ask(int i, uint32_t kind)
{
	struct m h;

	memset(&h, 0, sizeof(h));
	h.kind = kind;
	h.idx = (uint32_t)i;
	msg_send(cc[i], &h);
}

/* ---- server ---- */

/* revokes a callback could not complete (-EBUSY, RDMA: the window is
 * still being bound; rmsg_mr_export.3): tried again from a timer; once
 * all went, pend_c (if set) gets pend_out */
static struct {
	struct rmsg_mr *mr;
	uint8_t d[RMSG_MR_DESC_SIZE];
} pend[FLOOD + 1];
static int npend;
static struct rmsg_conn *pend_c;
static struct m pend_out;
static ev_timer pend_w;

static void pend_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	int i, j, ret;

	for (i = j = 0; i < npend; i++) {
		ret = rmsg_mr_revoke(pend[i].mr, pend[i].d);
		if (ret == -EBUSY) {
			pend[j++] = pend[i];
			continue;
		}
		T_OK(ret);
	}
	npend = j;
	if (npend) {
		ev_timer_set(w, 0.005, 0.);
		ev_timer_start(l, w);
		return;
	}
	if (pend_c) {
		revoke_again = rmsg_mr_revoke(mSCR, pend_out.desc[D_SCRATCH]);
		msg_send(pend_c, &pend_out);
		pend_c = NULL;
	}
}

/* rmsg_mr_revoke(), or later if it is -EBUSY */
static void revoke_soon(struct rmsg_mr *mr, const void *d)
{
	int ret = rmsg_mr_revoke(mr, d);

	if (ret != -EBUSY) {
		T_OK(ret);
		return;
	}
	T_ASSERT(npend <= FLOOD, "too many revokes pending");
	pend[npend].mr = mr;
	memcpy(pend[npend].d, d, RMSG_MR_DESC_SIZE);
	npend++;
	if (!ev_is_active(&pend_w)) {
		ev_timer_init(&pend_w, pend_cb, 0.005, 0.);
		ev_timer_start(loop, &pend_w);
	}
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *msg, void *arg)
{
	const struct m *h = rmsg_msg_data(msg);
	static uint8_t flood[FLOOD][RMSG_MR_DESC_SIZE];
	struct m out;
	int i, n, ret;

	T_ASSERT(rmsg_msg_len(msg) == sizeof(*h), "server: len %zu",
		 rmsg_msg_len(msg));
	memset(&out, 0, sizeof(out));
	out.idx = h->idx;
	switch (h->kind) {
	case K_DESC:
		sconn[h->idx] = c;
		out.kind = K_DESCS;
		T_OK(rmsg_mr_export(mRW, c, 0, 0,
				    RMSG_ACCESS_REMOTE_WRITE |
					    RMSG_ACCESS_REMOTE_READ,
				    out.desc[D_RW]));
		T_OK(rmsg_mr_export(mWO, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE,
				    out.desc[D_WO]));
		T_OK(rmsg_mr_export(mRO, c, 0, 0, RMSG_ACCESS_REMOTE_READ,
				    out.desc[D_RO]));
		/* bytes [4096, 8192) of the region, write only */
		T_OK(rmsg_mr_export(mRW, c, SMALL, SMALL,
				    RMSG_ACCESS_REMOTE_WRITE, out.desc[D_SUB]));
		/* a subset of the region's rights */
		T_OK(rmsg_mr_export(mRW, c, 0, 0, RMSG_ACCESS_REMOTE_READ,
				    out.desc[D_RONLY]));
		if (mBIG)
			T_OK(rmsg_mr_export(mBIG, c, 0, 0,
					    RMSG_ACCESS_REMOTE_READ,
					    out.desc[D_BIG]));
		if (h->idx == 3)
			memcpy(c3_desc, out.desc[D_RW], RMSG_MR_DESC_SIZE);
		msg_send(c, &out);
		break;
	case K_DEREG_BIG:
		dereg_big = rmsg_mr_dereg(mBIG);
		break;
	case K_DEREG_BIG2:
		dereg_big2 = rmsg_mr_dereg(mBIG);
		if (!dereg_big2)
			mBIG = NULL;
		break;
	case K_REVOKED:
		out.kind = K_DESCS;
		T_OK(rmsg_mr_export(mSCR, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE,
				    out.desc[D_SCRATCH]));
		/* revoked before the peer could use it: the descriptor goes
		 * once the revoke returned 0 (at once, or after -EBUSY) */
		ret = rmsg_mr_revoke(mSCR, out.desc[D_SCRATCH]);
		if (ret == -EBUSY) {
			pend_c = c;
			pend_out = out;
			revoke_soon(mSCR, out.desc[D_SCRATCH]);
			break;
		}
		T_OK(ret);
		revoke_again = rmsg_mr_revoke(mSCR, out.desc[D_SCRATCH]);
		msg_send(c, &out);
		break;
	case K_PING:
		out.kind = K_PONG;
		msg_send(c, &out);
		break;
	case K_MW_FLOOD:
		for (n = 0; n < FLOOD; n++) {
			ret = rmsg_mr_export(mRW, c, 0, 0,
					     RMSG_ACCESS_REMOTE_WRITE,
					     flood[n]);
			if (ret == -EAGAIN)
				break;
			T_OK(ret);
		}
		if (rdma) {
			/* covers: rmsg_mr_export.3 EAGAIN */
			T_ASSERT(n < FLOOD,
				 "%d exports in one iteration, no -EAGAIN",
				 FLOOD);
			T_ASSERT(n > 0, "no export at all");
		}
		for (i = 0; i < n; i++)
			revoke_soon(mRW, flood[i]);
		srv_writable = rdma ? 0 : 1;
		out.kind = K_PONG;
		if (!rdma)
			msg_send(c, &out);
		break;
	default:
		T_FAIL("server: kind %u", h->kind);
	}
}

static void srv_imm(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	imm_n++;
	imm_last = imm;
	imm_len = len;
}

static void srv_writable_cb(struct rmsg_conn *c, void *arg)
{
	srv_writable++;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	int i;

	for (i = 1; i < NC; i++)
		if (sconn[i] == c) {
			sclosed[i]++;
			sreason[i] = reason;
			sconn[i] = NULL;
		}
}

/* ---- client ---- */

static void cli_est(struct rmsg_conn *c, void *arg)
{
	cest[conn_idx(c, cc)]++;
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *msg, void *arg)
{
	const struct m *h = rmsg_msg_data(msg);
	int i = conn_idx(c, cc);

	T_ASSERT(rmsg_msg_len(msg) == sizeof(*h), "client: len");
	if (h->kind == K_PONG) {
		pongs[i]++;
		return;
	}
	T_ASSERT(h->kind == K_DESCS, "client: kind %u", h->kind);
	got[i] = *h;
	ngot[i]++;
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	cwritable[conn_idx(c, cc)]++;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	int i = conn_idx(c, cc);

	cclosed[i]++;
	creason[i] = reason;
	cc[i] = NULL; /* a later connection may get the same address */
}

static void done_cb(struct rmsg_conn *c, int status, void *arg)
{
	struct done *d = arg;

	d->n++;
	d->status = status;
}

static void never_cb(struct rmsg_conn *c, int status, void *arg)
{
	T_FAIL("callback of a refused operation ran (status %d)", status);
}

/* the three operations behind one signature; imm is 7 */
enum {
	OP_WRITE_IMM,
	OP_WRITE,
	OP_READ,
	NOPS
};
static const char *const op_name[NOPS] = {"write_imm", "write", "read"};

static int op(int k, struct rmsg_conn *c, const struct iovec *iov, int n,
	      const void *desc, uint64_t off, rmsg_done_cb cb, void *arg)
{
	switch (k) {
	case OP_WRITE_IMM:
		return rmsg_write_imm(c, iov, n, desc, off, 7, cb, arg);
	case OP_WRITE:
		return rmsg_write(c, iov, n, desc, off, cb, arg);
	default:
		return rmsg_read(c, iov, n, desc, off, cb, arg);
	}
}

static void ping(int i)
{
	int before = pongs[i];

	ask(i, K_PING);
	T_RUN_UNTIL(loop, pongs[i] > before, 60);
}

static void get_descs(int i, uint32_t kind)
{
	int before = ngot[i];

	ask(i, kind);
	T_RUN_UNTIL(loop, ngot[i] > before, 60);
}

/* a write, a write-with-immediate and a read on c1 work and land */
static void round_trip(uint64_t seed)
{
	static uint8_t src[1000], dst[1000];
	struct iovec iov = {src, sizeof(src)};
	struct done w = {0, 1}, wi = {0, 1}, r = {0, 1};
	int imm_before = imm_n;

	t_fill(src, sizeof(src), seed);
	memset(dst, 0, sizeof(dst));
	T_OK(rmsg_write(cc[1], &iov, 1, got[1].desc[D_RW], 1000, done_cb, &w));
	T_OK(rmsg_write_imm(cc[1], &iov, 1, got[1].desc[D_RW], 3000, 9, done_cb,
			    &wi));
	iov.iov_base = dst;
	T_OK(rmsg_read(cc[1], &iov, 1, got[1].desc[D_RW], 1000, done_cb, &r));
	T_RUN_UNTIL(loop, w.n && wi.n && r.n && imm_n > imm_before, 60);
	T_ASSERT(w.status == 0 && wi.status == 0 && r.status == 0,
		 "round trip: %d %d %d", w.status, wi.status, r.status);
	T_ASSERT(!memcmp(dst, src, sizeof(src)), "read back");
	T_ASSERT(!memcmp(rw + 1000, src, sizeof(src)) &&
			 !memcmp(rw + 3000, src, sizeof(src)),
		 "written bytes");
	T_ASSERT(imm_last == 9 && imm_len == sizeof(src), "on_imm %u %zu",
		 imm_last, imm_len);
}

static void regions(void)
{
	static uint8_t buf[8192];
	struct rmsg_cfg *cfg;
	struct rmsg_ctx *bctx;
	struct rmsg_mr *a, *b, *mr = NULL;

	/* covers: rmsg_mr_reg.3 EINVAL */
	T_ASSERT(rmsg_mr_reg(NULL, buf, sizeof(buf), 0, &mr) == -EINVAL,
		 "reg NULL ctx");
	T_ASSERT(rmsg_mr_reg(cctx, NULL, sizeof(buf), 0, &mr) == -EINVAL,
		 "reg NULL addr");
	T_ASSERT(rmsg_mr_reg(cctx, buf, 0, 0, &mr) == -EINVAL, "reg len 0");
	T_ASSERT(rmsg_mr_reg(cctx, buf, sizeof(buf), 0, NULL) == -EINVAL,
		 "reg NULL mr_p");
	T_ASSERT(rmsg_mr_reg(cctx, (void *)(UINTPTR_MAX - 4095), 8192, 0,
			     &mr) == -EINVAL,
		 "reg wrapping range");
	T_ASSERT(rmsg_mr_reg(cctx, buf, sizeof(buf), 4, &mr) == -EINVAL,
		 "reg unknown access bit");
	T_ASSERT(mr == NULL, "mr_p written by a failed registration");
	/* covers: rmsg_mr_reg.3 EINVAL */
	T_ASSERT(rmsg_mr_dereg(NULL) == -EINVAL, "dereg NULL");

	/* the budget: 4 MiB */
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_reg_limit(cfg, 4 * MIB));
	T_OK(rmsg_ctx_create(loop, cfg, &bctx));
	T_OK(rmsg_mr_reg(bctx, big, 3 * MIB, 0, &a));
	/* covers: rmsg_mr_reg.3 ENOMEM */
	T_ASSERT(rmsg_mr_reg(bctx, big + 3 * MIB, 3 * MIB, 0, &b) == -ENOMEM,
		 "beyond the budget");
	T_ASSERT(rmsg_mr_reg(bctx, big + 3 * MIB, 5 * MIB, 0, &b) == -ENOMEM,
		 "larger than the budget");
	/* what is left still fits: the failures charged nothing */
	T_OK(rmsg_mr_reg(bctx, big + 3 * MIB, MIB, 0, &b));
	T_OK(rmsg_mr_dereg(b));
	T_OK(rmsg_mr_dereg(a));
	/* a deregistration gives its bytes back */
	T_OK(rmsg_mr_reg(bctx, big, 4 * MIB, 0, &a));
	T_OK(rmsg_mr_dereg(a));
	T_OK(rmsg_ctx_destroy(bctx));
	rmsg_cfg_destroy(cfg);
}

static void exports_offline(void)
{
	uint8_t d[RMSG_MR_DESC_SIZE], d2[RMSG_MR_DESC_SIZE];
	uint8_t zero[RMSG_MR_DESC_SIZE] = {0};
	const int any = RMSG_EXPORT_ANY_PEER;
	const int W = RMSG_ACCESS_REMOTE_WRITE, R = RMSG_ACCESS_REMOTE_READ;

	/* covers: rmsg_mr_export.3 EINVAL */
	T_ASSERT(rmsg_mr_export(NULL, NULL, 0, 0, W | any, d) == -EINVAL,
		 "export NULL mr");
	T_ASSERT(rmsg_mr_export(mRW, NULL, 0, 0, W | any, NULL) == -EINVAL,
		 "export NULL desc");
	T_ASSERT(rmsg_mr_export(mRW, NULL, 0, 0, any, d) == -EINVAL,
		 "export without rights");
	T_ASSERT(rmsg_mr_export(mRW, NULL, 0, 0, W | 4 | any, d) == -EINVAL,
		 "export unknown bit");
	T_ASSERT(rmsg_mr_export(mRW, NULL, 0, 0, W, d) == -EINVAL,
		 "export NULL c without RMSG_EXPORT_ANY_PEER");
	T_ASSERT(rmsg_mr_export(mRW, NULL, RW_LEN, 0, W | any, d) == -EINVAL,
		 "export at the region's end");
	T_ASSERT(rmsg_mr_export(mRW, NULL, 1, RW_LEN, W | any, d) == -EINVAL,
		 "export past the region's end");
	/* covers: rmsg_mr_export.3 EACCES */
	T_ASSERT(rmsg_mr_export(mWO, NULL, 0, 0, R | any, d) == -EACCES,
		 "export read of a write-only region");
	T_ASSERT(rmsg_mr_export(mRO, NULL, 0, 0, W | any, d) == -EACCES,
		 "export write of a read-only region");

	/* covers: rmsg_mr_export.3 EINVAL */
	T_ASSERT(rmsg_mr_revoke(NULL, d) == -EINVAL, "revoke NULL mr");
	T_ASSERT(rmsg_mr_revoke(mRW, zero) == -EINVAL, "revoke malformed desc");
	T_OK(rmsg_mr_export(mRW, NULL, 0, 0, W | any, d));
	memcpy(d2, d, sizeof(d));
	d2[0] ^= 0xff;
	T_ASSERT(rmsg_mr_revoke(mRW, d2) == -EINVAL, "revoke bad magic");
	/* covers: rmsg_mr_export.3 ENOENT */
	T_ASSERT(rmsg_mr_revoke(mWO, d) == -ENOENT,
		 "revoke with another region");
	T_OK(rmsg_mr_revoke(mRW, d));
	/* covers: rmsg_mr_export.3 ENOENT */
	T_ASSERT(rmsg_mr_revoke(mRW, d) == -ENOENT, "revoke twice");
}

static void refused_locally(void)
{
	static uint8_t buf[MAX_MSG + 1], piece[RMSG_IOV_MAX + 1];
	static struct iovec many[RMSG_IOV_MAX + 1];
	const uint8_t *D = got[1].desc[D_RW];
	struct rmsg_conn *c = cc[1];
	uint8_t bad[RMSG_MR_DESC_SIZE];
	struct iovec iov = {buf, 100}, nb = {NULL, 5};
	struct done q[SQ];
	int k, i;

	for (i = 0; i <= RMSG_IOV_MAX; i++) {
		many[i].iov_base = &piece[i];
		many[i].iov_len = 1;
	}
	for (k = 0; k < NOPS; k++) {
		const char *o = op_name[k];
		const uint8_t *wrong =
			k == OP_READ ? got[1].desc[D_WO] : got[1].desc[D_RO];

		iov.iov_len = 100;
		/* covers: rmsg_write_imm.3 EINVAL */
		T_ASSERT(op(k, NULL, &iov, 1, D, 0, never_cb, NULL) == -EINVAL,
			 "%s: NULL connection", o);
		T_ASSERT(op(k, c, &iov, 1, NULL, 0, never_cb, NULL) == -EINVAL,
			 "%s: NULL descriptor", o);
		T_ASSERT(op(k, c, &iov, -1, D, 0, never_cb, NULL) == -EINVAL,
			 "%s: iovcnt -1", o);
		T_ASSERT(op(k, c, many, RMSG_IOV_MAX + 1, D, 0, never_cb,
			    NULL) == -EINVAL,
			 "%s: iovcnt RMSG_IOV_MAX + 1", o);
		T_ASSERT(op(k, c, NULL, 1, D, 0, never_cb, NULL) == -EINVAL,
			 "%s: NULL iov", o);
		T_ASSERT(op(k, c, &nb, 1, D, 0, never_cb, NULL) == -EINVAL,
			 "%s: NULL base", o);
		memcpy(bad, D, sizeof(bad));
		bad[0] ^= 0xff;
		T_ASSERT(op(k, c, &iov, 1, bad, 0, never_cb, NULL) == -EINVAL,
			 "%s: malformed descriptor", o);
		memset(bad, 0, sizeof(bad));
		T_ASSERT(op(k, c, &iov, 1, bad, 0, never_cb, NULL) == -EINVAL,
			 "%s: zero descriptor", o);
		/* covers: rmsg_write_imm.3 EINVAL */
		T_ASSERT(op(k, c, &iov, 1, D, RW_LEN - 99, never_cb, NULL) ==
				 -EINVAL,
			 "%s: one byte past the end", o);
		T_ASSERT(op(k, c, &iov, 1, D, UINT64_MAX - 50, never_cb,
			    NULL) == -EINVAL,
			 "%s: offset overflow", o);
		iov.iov_len = 1;
		T_ASSERT(op(k, c, &iov, 1, D, RW_LEN, never_cb, NULL) ==
				 -EINVAL,
			 "%s: at the end", o);
		if (k != OP_READ)
			T_ASSERT(op(k, c, &iov, 1, got[1].desc[D_SUB], SMALL,
				    never_cb, NULL) == -EINVAL,
				 "%s: past a sub-range export", o);
		/* covers: rmsg_write_imm.3 EACCES */
		T_ASSERT(op(k, c, &iov, 1, wrong, 0, never_cb, NULL) == -EACCES,
			 "%s: export without the right", o);
		if (k != OP_READ)
			T_ASSERT(op(k, c, &iov, 1, got[1].desc[D_RONLY], 0,
				    never_cb, NULL) == -EACCES,
				 "%s: read-only export of a writable region",
				 o);
		iov.iov_len = MAX_MSG + 1;
		/* covers: rmsg_write_imm.3 EMSGSIZE */
		T_ASSERT(op(k, c, &iov, 1, D, 0, never_cb, NULL) == -EMSGSIZE,
			 "%s: maximum message size + 1", o);
		iov.iov_len = MAX_MSG;
		t_fill(buf, MAX_MSG, 100 + k);
		if (k == OP_READ)
			memcpy(rw + SMALL, buf, MAX_MSG);
		memset(buf, 0, MAX_MSG);
		if (k != OP_READ)
			t_fill(buf, MAX_MSG, 100 + k);
		memset(q, 0, sizeof(q));
		T_OK(op(k, c, &iov, 1, D, SMALL, done_cb, &q[0]));
		T_RUN_UNTIL(loop, q[0].n, 60);
		T_ASSERT(q[0].status == 0, "%s of the maximum: %d", o,
			 q[0].status);
		T_ASSERT(t_check(k == OP_READ ? buf : rw + SMALL, MAX_MSG,
				 100 + k) == 0,
			 "%s of the maximum: bytes", o);

		/* the queue bound */
		iov.iov_len = 10;
		memset(q, 0, sizeof(q));
		cwritable[1] = 0;
		for (i = 0; i < SQ; i++)
			T_OK(op(k, c, &iov, 1, D, (uint64_t)i * 10, done_cb,
				&q[i]));
		/* covers: rmsg_write_imm.3 EAGAIN */
		T_ASSERT(op(k, c, &iov, 1, D, 0, never_cb, NULL) == -EAGAIN,
			 "%s: a fifth operation with a queue of 4", o);
		T_RUN_UNTIL(loop,
			    q[0].n && q[1].n && q[2].n && q[3].n &&
				    cwritable[1],
			    60);
		for (i = 0; i < SQ; i++)
			T_ASSERT(q[i].n == 1 && q[i].status == 0,
				 "%s %d: %d %d", o, i, q[i].n, q[i].status);
	}
	/* a write exactly to the end of the sub-range lands there */
	buf[0] = 0x5c;
	iov.iov_len = 1;
	memset(q, 0, sizeof(q));
	T_OK(rmsg_write(c, &iov, 1, got[1].desc[D_SUB], SMALL - 1, done_cb,
			&q[0]));
	T_RUN_UNTIL(loop, q[0].n, 60);
	T_ASSERT(q[0].status == 0 && rw[2 * SMALL - 1] == 0x5c,
		 "last byte of the sub-range: %d", q[0].status);
	round_trip(1);
}

/* 6b. the caller's budget used up by its own pool buffers: over RDMA
 * the local memory of a write cannot be registered, the write alone
 * fails with -ENOMEM; over TCP nothing is registered */
static void local_nomem(void)
{
	static void *bufs[CLI_LIMIT / BUF + 1];
	static uint8_t src[8192], page[4096] __attribute__((aligned(4096)));
	static struct rmsg_mr *fill[256];
	struct iovec iov = {src, sizeof(src)};
	struct done w = {0, 1};
	int n = 0, nf = 0, ret;

	while ((ret = rmsg_buf_alloc(cctx, BUF, &bufs[n])) == 0)
		T_ASSERT(++n < (int)(CLI_LIMIT / BUF + 1), "%d buffers", n);
	T_ASSERT(ret == -ENOMEM, "rmsg_buf_alloc: %d", ret);
	/* and what the pools' slabs leave over, page by page */
	while ((ret = rmsg_mr_reg(cctx, page, sizeof(page), 0, &fill[nf])) == 0)
		T_ASSERT(++nf < (int)(sizeof(fill) / sizeof(fill[0])),
			 "%d pages", nf);
	T_ASSERT(ret == -ENOMEM, "rmsg_mr_reg: %d", ret);
	t_fill(src, sizeof(src), 66);
	T_OK(rmsg_write(cc[1], &iov, 1, got[1].desc[D_RW], 0, done_cb, &w));
	T_RUN_UNTIL(loop, w.n, 60);
	if (rdma) {
		/* covers: rmsg_write_imm.3 ENOMEM */
		T_ASSERT(w.status == -ENOMEM,
			 "write without registered memory: %d", w.status);
	} else {
		T_ASSERT(w.status == 0 && !t_check(rw, sizeof(src), 66),
			 "write over TCP with the budget used: %d", w.status);
	}
	while (n)
		rmsg_buf_free(cctx, bufs[--n]);
	while (nf)
		T_OK(rmsg_mr_dereg(fill[--nf]));
	T_ASSERT(!cclosed[1], "the connection closed");
	round_trip(5);
}

/* 4. -EBUSY */
static void dereg_busy(void)
{
	static struct done rd;
	static uint8_t *dst;
	struct iovec iov;
	uint8_t d[RMSG_MR_DESC_SIZE];
	double t0;
	int ret;

	if (!rdma) {
		/* the answer to a read of 32 MiB is sent from the region,
		 * and the deregistration is asked for right behind it */
		dst = malloc(BIG_LEN);
		T_ASSERT(dst, "malloc");
		iov.iov_base = dst;
		iov.iov_len = BIG_LEN;
		T_OK(rmsg_read(cc[2], &iov, 1, got[2].desc[D_BIG], 0, done_cb,
			       &rd));
		ask(2, K_DEREG_BIG);
		T_RUN_UNTIL(loop, dereg_big != 1 && rd.n, 120);
		/* covers: rmsg_mr_reg.3 EBUSY */
		T_ASSERT(dereg_big == -EBUSY,
			 "dereg while a read's answer is written: %d",
			 dereg_big);
		T_ASSERT(rd.status == 0 && !memcmp(dst, big, BIG_LEN),
			 "the read: %d", rd.status);
		free(dst);
		/* changed nothing: still registered; now it goes */
		ask(2, K_DEREG_BIG2);
		T_RUN_UNTIL(loop, dereg_big2 != 1, 60);
		T_ASSERT(dereg_big2 == 0, "dereg after the read: %d",
			 dereg_big2);
		return;
	}
	/* RDMA: the window's bind is posted, its completion not reaped */
	T_OK(rmsg_mr_export(mBIG, sconn[2], 0, 0, RMSG_ACCESS_REMOTE_READ, d));
	/* covers: rmsg_mr_reg.3 EBUSY */
	T_ASSERT(rmsg_mr_dereg(mBIG) == -EBUSY,
		 "dereg while an export's window is bound");
	/* covers: rmsg_mr_export.3 EBUSY (the window may not go yet) */
	T_ASSERT(rmsg_mr_revoke(mBIG, d) == -EBUSY,
		 "revoke while its window is being bound");
	/* changed nothing: the export still revokes, once the loop turned */
	T_OK(t_revoke(loop, mBIG, d));
	T_OK(rmsg_mr_export(mBIG, sconn[2], 0, 0, RMSG_ACCESS_REMOTE_READ, d));
	T_ASSERT(rmsg_mr_dereg(mBIG) == -EBUSY, "dereg, second export");
	/* once the loop turned, it goes */
	t0 = ev_time();
	while ((ret = rmsg_mr_dereg(mBIG)) == -EBUSY) {
		T_ASSERT(ev_time() - t0 < 60 * t_scale(), "still -EBUSY");
		t_run_for(loop, 0.01);
	}
	T_OK(ret);
	mBIG = NULL;
}

/* 5. a descriptor the owner does not honour on this connection */
static void refused_by_owner(int i, const uint8_t *desc, uint8_t *target,
			     size_t tlen)
{
	static uint8_t src[100];
	uint8_t *before = malloc(tlen);
	struct iovec iov = {src, sizeof(src)};
	struct done d = {0, 1};

	T_ASSERT(before, "malloc");
	memcpy(before, target, tlen);
	memset(src, 0xee, sizeof(src));
	T_OK(rmsg_write(cc[i], &iov, 1, desc, 0, done_cb, &d));
	T_RUN_UNTIL(loop, d.n && (!rdma || (cclosed[i] && sclosed[i])), 120);
	T_ASSERT(d.n == 1, "callback ran %d times", d.n);
	if (!rdma) {
		/* covers: rmsg_write_imm.3 EACCES */
		T_ASSERT(d.status == -EACCES, "conn %d: refused write: %d", i,
			 d.status);
		ping(i); /* still up */
		T_ASSERT(!cclosed[i], "closed");
	} else {
		T_ASSERT(d.status < 0, "conn %d: refused write: %d", i,
			 d.status);
		T_ASSERT(creason[i] < 0 && sreason[i] < 0,
			 "conn %d after a remote access error: %d %d", i,
			 creason[i], sreason[i]);
		printf("rdma: refused write -> %s\n", rmsg_strerror(d.status));
	}
	T_ASSERT(!memcmp(before, target, tlen), "the owner's memory changed");
	free(before);
}

/* 9. over TCP one-sided operations travel as frames, which the owner's
 * maximum message size bounds too; over RDMA the device moves them */
static void owner_max(const char *uri)
{
	static uint8_t buf[MAX_MSG + 1];
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct iovec iov = {buf, sizeof(buf)};
	struct done r = {0, 1}, w = {0, 1};

	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &cc[4]));
	T_RUN_UNTIL(loop, cest[4] || cclosed[4], 60);
	T_ASSERT(cest[4], "c4 closed with %d", creason[4]);
	get_descs(4, K_DESC);
	t_fill(rw, sizeof(buf), 77);
	T_OK(rmsg_read(cc[4], &iov, 1, got[4].desc[D_RW], 0, done_cb, &r));
	T_RUN_UNTIL(loop, r.n, 60);
	if (rdma) {
		T_ASSERT(r.status == 0 && !t_check(buf, sizeof(buf), 77),
			 "read above the owner's maximum: %d", r.status);
	} else {
		/* covers: rmsg_write_imm.3 EMSGSIZE */
		T_ASSERT(r.status == -EMSGSIZE,
			 "read above the owner's maximum: %d", r.status);
		ping(4);
	}
	t_fill(buf, sizeof(buf), 78);
	T_OK(rmsg_write(cc[4], &iov, 1, got[4].desc[D_RW], 0, done_cb, &w));
	T_RUN_UNTIL(loop, w.n && (rdma || (cclosed[4] && sclosed[4])), 60);
	if (rdma) {
		T_ASSERT(w.status == 0 && !t_check(rw, sizeof(buf), 78),
			 "write above the owner's maximum: %d", w.status);
		T_OK(rmsg_conn_close(cc[4]));
		T_RUN_UNTIL(loop, cclosed[4] && sclosed[4], 60);
	} else {
		/* the frame is on its way: the owner ends the connection */
		T_ASSERT(sreason[4] == -EMSGSIZE, "owner closed with %d",
			 sreason[4]);
		T_ASSERT(w.status < 0 && creason[4] < 0,
			 "the writer: write %d, on_close %d", w.status,
			 creason[4]);
	}
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg,
				     .on_imm = srv_imm,
				     .on_writable = srv_writable_cb,
				     .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_writable = cli_writable,
				     .on_close = cli_close};
	uint8_t any_desc[RMSG_MR_DESC_SIZE], d[RMSG_MR_DESC_SIZE];
	static uint8_t src[64];
	struct iovec iov = {src, sizeof(src)};
	struct rmsg_cfg *ccfg, *scfg, *cctxcfg, *omax;
	struct rmsg_listener *lis, *lis2;
	struct rmsg_mr *cmr;
	struct done a = {0, 1}, q[3];
	char uri[128], uri2[128];
	int i, k, ret;

	t_require_transport();
	rdma = !strcmp(t_transport(), "rdma");
	loop = ev_default_loop(0);
	t_deadline(loop, 600);
	rw = calloc(1, RW_LEN);
	wo = calloc(1, SMALL);
	ro = calloc(1, SMALL);
	scratch = calloc(1, SMALL);
	big = aligned_alloc(4096, BIG_LEN); /* budget arithmetic in pages */
	T_ASSERT(rw && wo && ro && scratch && big, "malloc");
	t_fill(big, BIG_LEN, 5);
	t_fill(ro, SMALL, 6);

	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_set_reg_limit(scfg, 256 * MIB));
	T_OK(rmsg_ctx_create(loop, scfg, &sctx));
	T_OK(rmsg_cfg_create(&cctxcfg));
	T_OK(rmsg_cfg_set_reg_limit(cctxcfg, CLI_LIMIT));
	T_OK(rmsg_ctx_create(loop, cctxcfg, &cctx));
	T_OK(rmsg_mr_reg(sctx, rw, RW_LEN,
			 RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			 &mRW));
	T_OK(rmsg_mr_reg(sctx, wo, SMALL, RMSG_ACCESS_REMOTE_WRITE, &mWO));
	T_OK(rmsg_mr_reg(sctx, ro, SMALL, RMSG_ACCESS_REMOTE_READ, &mRO));
	T_OK(rmsg_mr_reg(sctx, big, BIG_LEN, RMSG_ACCESS_REMOTE_READ, &mBIG));
	T_OK(rmsg_mr_reg(sctx, scratch, SMALL, RMSG_ACCESS_REMOTE_WRITE,
			 &mSCR));
	T_OK(rmsg_mr_reg(sctx, scratch, SMALL, RMSG_ACCESS_REMOTE_WRITE,
			 &mANY));
	/* before the server has an RDMA device: no remote key */
	T_OK(rmsg_mr_export(mANY, NULL, 0, 0,
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_EXPORT_ANY_PEER,
			    any_desc));

	/* 1, 2 */
	regions();
	exports_offline();

	/* 3 connections; c1 with small limits */
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_max_msg_size(ccfg, MAX_MSG));
	T_OK(rmsg_cfg_set_send_queue(ccfg, SQ));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_cfg_create(&omax));
	T_OK(rmsg_cfg_set_max_msg_size(omax, MAX_MSG));
	t_listen(sctx, omax, &sops, NULL, NULL, &lis2, uri2, sizeof(uri2));
	T_OK(rmsg_connect(cctx, uri, ccfg, &cops, NULL, &cc[1]));
	T_OK(rmsg_mr_reg(cctx, src, sizeof(src), RMSG_ACCESS_REMOTE_WRITE,
			 &cmr));
	/* covers: rmsg_mr_export.3 ENOTCONN */
	T_ASSERT(rmsg_mr_export(cmr, cc[1], 0, 0, RMSG_ACCESS_REMOTE_WRITE,
				d) == -ENOTCONN,
		 "export to a connection not established");
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &cc[2]));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &cc[3]));
	T_RUN_UNTIL(loop, cest[1] && cest[2] && cest[3], 60);
	for (i = 1; i < 4; i++)
		get_descs(i, K_DESC);
	/* covers: rmsg_mr_export.3 EINVAL */
	T_ASSERT(rmsg_mr_export(mRW, cc[1], 0, 0, RMSG_ACCESS_REMOTE_WRITE,
				d) == -EINVAL,
		 "export to a connection of another context");
	T_ASSERT(rmsg_mr_export(mRW, sconn[1], 0, 0,
				RMSG_ACCESS_REMOTE_WRITE | RMSG_EXPORT_ANY_PEER,
				d) == -EINVAL,
		 "export to a connection with RMSG_EXPORT_ANY_PEER");

	/* 3 */
	refused_locally();

	/* 6: the any-peer export without a remote key */
	memset(src, 0x42, sizeof(src));
	T_OK(rmsg_write(cc[1], &iov, 1, any_desc, 0, done_cb, &a));
	T_RUN_UNTIL(loop, a.n, 60);
	if (rdma) {
		/* covers: rmsg_write_imm.3 EINVAL */
		T_ASSERT(a.status == -EINVAL,
			 "descriptor without a remote key: %d", a.status);
	} else {
		T_ASSERT(a.status == 0 && scratch[0] == 0x42,
			 "any-peer write over TCP: %d", a.status);
	}
	round_trip(2);
	local_nomem();

	/* 4 */
	dereg_busy();

	/* 5: revoked (c2), another connection's (c3 uses c1's) */
	get_descs(2, K_REVOKED);
	/* covers: rmsg_mr_export.3 ENOENT */
	T_ASSERT(revoke_again == -ENOENT, "second revoke: %d", revoke_again);
	refused_by_owner(2, got[2].desc[D_SCRATCH], scratch, SMALL);
	refused_by_owner(3, got[1].desc[D_RW], rw, RW_LEN);
	round_trip(3);
	if (!rdma) {
		T_OK(rmsg_conn_close(cc[3]));
		T_RUN_UNTIL(loop, cclosed[3] && sclosed[3], 60);
	}
	/* covers: rmsg_mr_export.3 ENOENT */
	T_ASSERT(rmsg_mr_revoke(mRW, c3_desc) == -ENOENT,
		 "revoke after the connection ended");

	/* 7 */
	srv_writable = 0;
	ask(1, K_MW_FLOOD);
	T_RUN_UNTIL(loop, srv_writable > 0, 60);
	if (rdma) {
		/* a retry after on_writable works (or is told to wait for
		 * the next one) */
		while ((ret = rmsg_mr_export(mRW, sconn[1], 0, 0,
					     RMSG_ACCESS_REMOTE_WRITE, d)) ==
		       -EAGAIN) {
			srv_writable = 0;
			T_RUN_UNTIL(loop, srv_writable > 0, 60);
		}
		T_OK(ret);
		T_OK(t_revoke(loop, mRW, d));
	}
	round_trip(4);

	/* 9: the owner's maximum message size (16 KiB on its listener);
	 * over RDMA also a new connection after others failed */
	owner_max(uri2);

	/* 8: closing */
	memset(q, 0, sizeof(q));
	T_OK(rmsg_write(cc[1], &iov, 1, got[1].desc[D_RW], 0, done_cb, &q[0]));
	T_OK(rmsg_conn_close(cc[1]));
	for (k = 0; k < NOPS; k++)
		/* covers: rmsg_write_imm.3 ENOTCONN */
		T_ASSERT(op(k, cc[1], &iov, 1, got[1].desc[D_RW], 0, never_cb,
			    NULL) == -ENOTCONN,
			 "%s on a closing connection", op_name[k]);
	T_RUN_UNTIL(loop, cclosed[1] && sclosed[1], 60);
	T_ASSERT(q[0].n == 1 && (q[0].status == 0 || q[0].status == -ECANCELED),
		 "write before the close: %d %d", q[0].n, q[0].status);
	T_ASSERT(creason[1] == 0, "c1 closed with %d", creason[1]);
	if (!rdma) {
		T_OK(rmsg_conn_close(cc[2]));
		T_RUN_UNTIL(loop, cclosed[2] && sclosed[2], 60);
	}
	for (i = 1; i < NC; i++)
		T_ASSERT(cclosed[i] == 1 && sclosed[i] == 1,
			 "on_close %d: %d %d", i, cclosed[i], sclosed[i]);

	T_OK(rmsg_listener_close(lis));
	T_OK(rmsg_listener_close(lis2));
	T_OK(rmsg_mr_dereg(cmr));
	T_OK(rmsg_mr_dereg(mRW));
	T_OK(rmsg_mr_dereg(mWO));
	T_OK(rmsg_mr_dereg(mRO));
	T_OK(rmsg_mr_dereg(mSCR));
	T_OK(rmsg_mr_dereg(mANY));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(ccfg);
	rmsg_cfg_destroy(scfg);
	rmsg_cfg_destroy(cctxcfg);
	rmsg_cfg_destroy(omax);
	free(rw);
	free(wo);
	free(ro);
	free(scratch);
	free(big);
	printf("errors_onesided over %s: region, export and one-sided "
	       "errors checked\n",
	       t_transport());
	return 0;
}
