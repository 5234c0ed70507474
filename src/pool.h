/* SPDX-License-Identifier: MIT */
/*
 * pool.h - registered buffer pools.
 *
 * Power-of-two size classes from 64 B to 2 MiB carved from slabs that are
 * registered once; larger buffers get a slab of their own. A transport that
 * needs registration installs hooks; slabs made before that are registered
 * when the hooks arrive. Lookups map any pointer inside a slab to its key.
 *
 * Bytes in slabs are bounded by the pool's own limit and by a budget the
 * owner may install (the context's registered-memory budget). Slabs of a
 * class are kept while their buffers come and go; when a new slab does
 * not fit, slabs whose buffers are all free are given back first.
 */
#ifndef RMSG_POOL_H
#define RMSG_POOL_H

#include <stddef.h>
#include <stdint.h>

struct rmsgi_pool;

struct rmsgi_pool_reg {
	int (*reg)(void *priv, void *addr, size_t len, void **mr_p,
		   uint32_t *lkey_p);
	void (*dereg)(void *priv, void *mr);
};

/* a budget shared with others: take() returns 0 or -ENOMEM */
struct rmsgi_pool_budget {
	int (*take)(void *priv, size_t bytes);
	void (*give)(void *priv, size_t bytes);
};

int rmsgi_pool_create(size_t limit, struct rmsgi_pool **pool_p);
/* charges every slab made from now on to @budget */
void rmsgi_pool_set_budget(struct rmsgi_pool *pool,
			   const struct rmsgi_pool_budget *budget, void *priv);
/* gives back every class slab whose buffers are all free; returns the
 * bytes given back */
size_t rmsgi_pool_reclaim(struct rmsgi_pool *pool);
void rmsgi_pool_destroy(struct rmsgi_pool *pool);
/* installs registration hooks and registers every existing slab */
int rmsgi_pool_set_reg(struct rmsgi_pool *pool,
		       const struct rmsgi_pool_reg *reg, void *priv);
/* removes the hooks, deregistering every slab */
void rmsgi_pool_clear_reg(struct rmsgi_pool *pool);
int rmsgi_pool_alloc(struct rmsgi_pool *pool, size_t len, void **buf_p);
/* a buffer that is a slab of its own (page-aligned, registered alone):
 * rmsgi_pool_free() unregisters it and gives it back at once */
int rmsgi_pool_alloc_own(struct rmsgi_pool *pool, size_t len, void **buf_p);
void rmsgi_pool_free(struct rmsgi_pool *pool, void *buf);
/* 0 and the key if [addr, addr+len) lies in one registered slab */
int rmsgi_pool_lookup(const struct rmsgi_pool *pool, const void *addr,
		      size_t len, uint32_t *lkey_p);
/* usable size of a buffer from rmsgi_pool_alloc() */
size_t rmsgi_pool_size(const struct rmsgi_pool *pool, const void *buf);

#endif /* RMSG_POOL_H */
