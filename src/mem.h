/* SPDX-License-Identifier: MIT */
/*
 * mem.h - memory services (mr.c): how a backend registers memory for the
 * core and how the core pins local memory for an op.
 */
#ifndef RMSG_MEM_H
#define RMSG_MEM_H

#include "base.h"

#define RMSGI_ACCESS_ALL (RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ)
#define RMSGI_ACCESS_LOCAL_WRITE 0x100 /* the device writes the memory */
/* a registration a memory window may be bound to (no remote rights) */
#define RMSGI_ACCESS_MW_BIND 0x200

/* how a transport registers memory; @access: RMSG_ACCESS_* and
 * RMSGI_ACCESS_LOCAL_WRITE bits */
struct rmsgi_reg_ops {
	int (*reg)(void *priv, void *addr, size_t len, int access, void **h_p,
		   uint32_t *lkey_p, uint32_t *rkey_p);
	void (*dereg)(void *priv, void *h);
	/* a memory window over [addr, addr+len) of registration @h with
	 * @access, bound to the queue pair of connection @tc (the backend's
	 * state, NULL if it has none): the bind is posted on its send queue
	 * before this returns, so what the app sends later arrives after it.
	 * -EOPNOTSUPP: the device has no type-2 windows; -ENOTCONN */
	int (*bind)(void *priv, void *tc, void *h, void *addr, size_t len,
		    int access, void **w_p, uint32_t *rkey_p);
	/* the window goes (at once, or when its bind completed) */
	void (*unbind)(void *priv, void *w);
	/* is its bind still on the send queue? */
	bool (*bind_pending)(void *priv, void *w);
};

/* a transport that registers memory arrived: registers every region */
void rmsgi_mr_set_reg(struct rmsg_ctx *ctx, const struct rmsgi_reg_ops *ops,
		      void *priv);
/* the transport goes: deregisters every region and cache entry */
void rmsgi_mr_clear_reg(struct rmsg_ctx *ctx);
/* @c ends: every export to it is revoked (a backend calls it before its
 * endpoint goes, so that windows are unbound first); suspended, only
 * the endpoint goes: the exports stay, without their windows */
void rmsgi_mr_conn_gone(struct rmsg_conn *c);
/* @c resumed over a new endpoint: each export to it is bound there
 * again (an export that cannot be is revoked, logged) and, if that gave
 * it a window, told to @fn. Returns how many were told */
unsigned rmsgi_mr_conn_rebind(struct rmsg_conn *c,
			      void (*fn)(struct rmsg_conn *c, uint64_t token,
					 uint32_t rkey));

/* what a local piece of memory is registered through */
struct rmsgi_pin {
	struct rmsg_mr *mr;
	struct rmsgi_rc_ent *ent;
	void *h; /* a short-lived registration's handle (reg ops), or NULL */
};

/* keys for local memory [addr, addr+len): from a region of the app or a
 * short-lived registration; @need: RMSG_ACCESS_REMOTE_READ if the peer
 * reads it (rendezvous), RMSGI_ACCESS_LOCAL_WRITE if the device writes it
 * (read target); the pin is released with rmsgi_mr_unpin() */
int rmsgi_mr_pin(struct rmsg_ctx *ctx, const void *addr, size_t len, int need,
		 struct rmsgi_pin *pin, uint32_t *lkey_p, uint32_t *rkey_p);
void rmsgi_mr_unpin(struct rmsg_ctx *ctx, struct rmsgi_pin *pin);
/* the largest export @c's peer may reach with @access (its own and the
 * any-peer ones; 0 without one) */
size_t rmsgi_mr_conn_max_len(const struct rmsg_conn *c, int access);
#endif /* RMSG_MEM_H */
