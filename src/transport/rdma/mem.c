// SPDX-License-Identifier: MIT
/*
 * mem.c - memory (rdma.h tells the design): the registration hooks of the
 * pool (pool.h) and of mr.c (the app's regions, the registration cache),
 * and type-2 memory windows, each bound by a work request in its
 * connection's ring: a per-connection export's, or a rendezvous piece's
 * (send.c).
 */
#include <sys/resource.h>
#include <stdio.h>

#include "rdma.h"

/* ------------------------------------------------------------------ */
/* registration                                                         */

/* ibv_reg_mr failed with errno @err: logs why, naming the memlock limit
 * when that is the likely cause, and returns the library's error */
static int reg_failed(struct rdma_ctx *r, size_t len, int err)
{
	struct rlimit rl;

	if (err == -ENOMEM || err == -EPERM || err == -EFAULT) {
		char lim[32] = "unlimited";

		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY)
			snprintf(lim, sizeof(lim), "%llu KiB",
				 (unsigned long long)rl.rlim_cur / 1024);
		rmsgi_err(r->ctx,
			  "registering %zu bytes with the RDMA device failed "
			  "(%s): the memlock limit is %s; check 'ulimit -l' "
			  "and raise it ('ulimit -l unlimited', or memlock in "
			  "/etc/security/limits.conf)",
			  len, strerror(-err), lim);
		return -ENOMEM;
	}
	rmsgi_err(r->ctx, "registering %zu bytes failed: %s", len,
		  rmsg_strerror(err));
	return err;
}

static int pool_reg(void *priv, void *addr, size_t len, void **mr_p,
		    uint32_t *lkey_p)
{
	struct rdma_ctx *r = priv;
	struct ibv_mr *mr =
		ibv_reg_mr(r->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		return reg_failed(r, len, errno ? -errno : -ENOMEM);
	*mr_p = mr;
	*lkey_p = mr->lkey;
	return 0;
}

static void pool_dereg(void *priv, void *mr)
{
	ibv_dereg_mr(mr);
}

const struct rmsgi_pool_reg rdma_pool_reg_ops = {
	.reg = pool_reg,
	.dereg = pool_dereg,
};

/* registrations of mr.c: the app's regions and the cache */
static int mr_reg(void *priv, void *addr, size_t len, int access, void **h_p,
		  uint32_t *lkey_p, uint32_t *rkey_p)
{
	struct rdma_ctx *r = priv;
	int flags = 0;
	struct ibv_mr *mr;

	if (access & (RMSGI_ACCESS_LOCAL_WRITE | RMSG_ACCESS_REMOTE_WRITE))
		flags |= IBV_ACCESS_LOCAL_WRITE;
	if (access & RMSG_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (access & RMSG_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if ((access & RMSGI_ACCESS_MW_BIND) && r->mw_ok)
		flags |= IBV_ACCESS_MW_BIND;
	mr = ibv_reg_mr(r->pd, addr, len, flags);
	if (!mr)
		return reg_failed(r, len, errno ? -errno : -ENOMEM);
	*h_p = mr;
	*lkey_p = mr->lkey;
	*rkey_p = mr->rkey;
	return 0;
}

static void mr_dereg(void *priv, void *h)
{
	(void)priv;
	ibv_dereg_mr(h);
}

/* ------------------------------------------------------------------ */
/* memory windows                                                       */

void rdma_mw_free(struct rdma_mw *w)
{
	if (w->mw) {
		rmsgi_list_del(&w->link);
		ibv_dealloc_mw(w->mw);
	}
	if (w->pinned)
		rmsgi_mr_unpin(w->ctx, &w->pin);
	/* only now: a registration of freed memory could be shared */
	free(w->copy);
	free(w);
}

/* fills a ring slot that binds a new type-2 window over [addr, addr+len)
 * of @mr for @access on @rc's QP; the caller kicks */
int rdma_mw_bind_slot(struct rdma_conn *rc, struct rdma_mw *w,
		      struct ibv_mr *mr, void *addr, size_t len, int access,
		      uint32_t *rkey_p)
{
	struct sq_slot *s;
	uint32_t rkey;

	w->mw = ibv_alloc_mw(rc->r->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		int err = errno ? -errno : -ENOMEM;

		rmsgi_err(rc->r->ctx, "conn %u: ibv_alloc_mw: %s", rc->ci->id,
			  strerror(-err));
		return err;
	}
	rmsgi_list_add_tail(&rc->mws, &w->link);
	rkey = ibv_inc_rkey(w->mw->rkey);
	s = slot_fill(rc, SLOT_BIND);
	s->mw = w;
	s->wr.opcode = IBV_WR_BIND_MW;
	/* behind the reads before it; rdma_kick() posts a bind only onto
	 * an empty queue, as rxe (6.1) executes a bind again when a SEND
	 * before it is retransmitted (and then the retries stalled, so a
	 * cut link was never noticed by the side sending rendezvous:
	 * link_cut, or the second bind failed: many) */
	s->wr.send_flags = IBV_SEND_FENCE;
	s->wr.num_sge = 0;
	s->wr.bind_mw.mw = w->mw;
	s->wr.bind_mw.rkey = rkey;
	s->wr.bind_mw.bind_info.mr = mr;
	s->wr.bind_mw.bind_info.addr = (uintptr_t)addr;
	s->wr.bind_mw.bind_info.length = len;
	s->wr.bind_mw.bind_info.mw_access_flags =
		(access & RMSG_ACCESS_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE
						   : 0) |
		(access & RMSG_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0);
	/* mw->rkey stays the current key until the bind ran: the provider
	 * names the window by it when the slot is posted (rxe checks it) */
	w->pending = true;
	*rkey_p = rkey;
	return 0;
}

/* an export to one connection (mr.c): a window bound on its QP */
static int export_bind(void *priv, void *tc, void *h, void *addr, size_t len,
		       int access, void **w_p, uint32_t *rkey_p)
{
	struct rdma_ctx *r = priv;
	struct rdma_conn *rc = tc;
	struct rdma_mw *w;
	int ret;

	if (!r->mw_ok) {
		rmsgi_err(r->ctx,
			  "export: RDMA device %s has no type-2 memory "
			  "windows, which per-connection export needs; "
			  "export with RMSG_EXPORT_ANY_PEER to let any "
			  "connected peer use the region",
			  ibv_get_device_name(r->verbs->device));
		return -EOPNOTSUPP;
	}
	if (!rc || rc->state != RC_UP)
		return -ENOTCONN;
	if (ring_used(rc) >= SQ_DEPTH - 2 || !ring_fits(rc, 1)) {
		rc->room_wanted = true; /* on_writable follows */
		return -EAGAIN;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = r->ctx;
	ret = rdma_mw_bind_slot(rc, w, h, addr, len, access, rkey_p);
	if (ret) {
		free(w);
		return ret;
	}
	/* posted now: whatever the app sends next comes after it */
	rdma_kick(rc);
	if (rc->buried || rc->state != RC_UP) {
		mw_release(w);
		return -ENOTCONN;
	}
	*w_p = w;
	return 0;
}

static void export_unbind(void *priv, void *w)
{
	(void)priv;
	mw_release(w);
}

static bool export_bind_pending(void *priv, void *w)
{
	(void)priv;
	return ((struct rdma_mw *)w)->pending;
}

const struct rmsgi_reg_ops rdma_mr_reg_ops = {
	.reg = mr_reg,
	.dereg = mr_dereg,
	.bind = export_bind,
	.unbind = export_unbind,
	.bind_pending = export_bind_pending,
};
