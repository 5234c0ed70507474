// SPDX-License-Identifier: MIT
/*
 * pool.c - registered buffer pools: size classes, slabs, 64-byte alignment.
 *
 * Free buffers of a class are chained through their first word, so an
 * allocation is a pop and a free is a binary search for the slab plus a
 * push. Slabs come from mmap, page aligned, and are registered once.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "rmsg_int.h"
#include "pool.h"

#define POOL_MIN_SHIFT 6  /* 64 B */
#define POOL_MAX_SHIFT 21 /* 2 MiB */
#define POOL_NCLASS (POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1)
#define POOL_SLAB_MIN ((size_t)256 << 10)
#define POOL_DEDICATED (-1)

struct slab {
	uint8_t *base;
	size_t size;
	int cls;      /* size class, or POOL_DEDICATED */
	bool charged; /* counted in the budget */
	void *mr;
	uint32_t lkey;
};

struct rmsgi_pool {
	struct slab *slabs; /* sorted by base */
	size_t nslabs, cap;
	void *free[POOL_NCLASS];
	size_t bytes, limit;
	const struct rmsgi_pool_reg *reg;
	void *reg_priv;
	const struct rmsgi_pool_budget *budget;
	void *budget_priv;
	bool reclaiming;
};

int rmsgi_pool_create(size_t limit, struct rmsgi_pool **pool_p)
{
	struct rmsgi_pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return -ENOMEM;
	pool->limit = limit;
	*pool_p = pool;
	return 0;
}

void rmsgi_pool_set_budget(struct rmsgi_pool *pool,
			   const struct rmsgi_pool_budget *budget, void *priv)
{
	pool->budget = budget;
	pool->budget_priv = priv;
}

void rmsgi_pool_destroy(struct rmsgi_pool *pool)
{
	size_t i;

	if (!pool)
		return;
	rmsgi_pool_clear_reg(pool);
	for (i = 0; i < pool->nslabs; i++) {
		munmap(pool->slabs[i].base, pool->slabs[i].size);
		if (pool->slabs[i].charged && pool->budget)
			pool->budget->give(pool->budget_priv,
					   pool->slabs[i].size);
	}
	free(pool->slabs);
	free(pool);
}

int rmsgi_pool_set_reg(struct rmsgi_pool *pool,
		       const struct rmsgi_pool_reg *reg, void *priv)
{
	size_t i;
	int ret;

	pool->reg = reg;
	pool->reg_priv = priv;
	for (i = 0; i < pool->nslabs; i++) {
		struct slab *s = &pool->slabs[i];

		ret = reg->reg(priv, s->base, s->size, &s->mr, &s->lkey);
		if (ret) {
			rmsgi_pool_clear_reg(pool);
			return ret;
		}
	}
	return 0;
}

void rmsgi_pool_clear_reg(struct rmsgi_pool *pool)
{
	size_t i;

	if (!pool->reg)
		return;
	for (i = 0; i < pool->nslabs; i++) {
		if (pool->slabs[i].mr)
			pool->reg->dereg(pool->reg_priv, pool->slabs[i].mr);
		pool->slabs[i].mr = NULL;
	}
	pool->reg = NULL;
}

static int size_class(size_t len)
{
	int shift = POOL_MIN_SHIFT;

	while (shift <= POOL_MAX_SHIFT && ((size_t)1 << shift) < len)
		shift++;
	return shift > POOL_MAX_SHIFT ? POOL_DEDICATED : shift - POOL_MIN_SHIFT;
}

/* index of the slab containing addr, or -1 */
static long slab_find(const struct rmsgi_pool *pool, const void *addr)
{
	const uint8_t *p = addr;
	size_t lo = 0, hi = pool->nslabs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct slab *s = &pool->slabs[mid];

		if (p < s->base)
			hi = mid;
		else if (p >= s->base + s->size)
			lo = mid + 1;
		else
			return (long)mid;
	}
	return -1;
}

static int slab_add(struct rmsgi_pool *pool, int cls, size_t size,
		    struct slab **s_p)
{
	struct slab s = {.cls = cls, .size = size};
	size_t i;
	int ret;

	if (pool->limit && pool->bytes + size > pool->limit &&
	    (!rmsgi_pool_reclaim(pool) || pool->bytes + size > pool->limit))
		return -ENOMEM;
	if (pool->nslabs == pool->cap) {
		size_t ncap = pool->cap ? pool->cap * 2 : 16;
		struct slab *n = realloc(pool->slabs, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		pool->slabs = n;
		pool->cap = ncap;
	}
	/* the budget's owner may call rmsgi_pool_reclaim() from take():
	 * nothing of this slab exists yet */
	if (pool->budget) {
		ret = pool->budget->take(pool->budget_priv, size);
		if (ret)
			return ret;
		s.charged = true;
	}
	s.base = mmap(NULL, size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s.base == MAP_FAILED) {
		ret = -ENOMEM;
		goto fail;
	}
	if (pool->reg) {
		ret = pool->reg->reg(pool->reg_priv, s.base, size, &s.mr,
				     &s.lkey);
		if (ret) {
			munmap(s.base, size);
			goto fail;
		}
	}
	for (i = pool->nslabs; i > 0 && pool->slabs[i - 1].base > s.base; i--)
		pool->slabs[i] = pool->slabs[i - 1];
	pool->slabs[i] = s;
	pool->nslabs++;
	pool->bytes += size;
	*s_p = &pool->slabs[i];
	return 0;

fail:
	if (s.charged)
		pool->budget->give(pool->budget_priv, size);
	return ret;
}

static void slab_remove(struct rmsgi_pool *pool, size_t i)
{
	struct slab *s = &pool->slabs[i];

	if (s->mr && pool->reg)
		pool->reg->dereg(pool->reg_priv, s->mr);
	munmap(s->base, s->size);
	pool->bytes -= s->size;
	if (s->charged && pool->budget)
		pool->budget->give(pool->budget_priv, s->size);
	memmove(s, s + 1, (pool->nslabs - i - 1) * sizeof(*s));
	pool->nslabs--;
}

/*
 * Counts the free buffers of every class slab (one walk of the free
 * lists), unchains the buffers of slabs that are entirely free and
 * removes those slabs. Only runs when a new slab does not fit, so the
 * fast paths keep no per-slab counts.
 */
size_t rmsgi_pool_reclaim(struct rmsgi_pool *pool)
{
	size_t *nfree, i, freed = 0;
	int cls;

	if (pool->reclaiming || !pool->nslabs)
		return 0;
	nfree = calloc(pool->nslabs, sizeof(*nfree));
	if (!nfree)
		return 0;
	pool->reclaiming = true;
	for (cls = 0; cls < POOL_NCLASS; cls++) {
		void *b;

		for (b = pool->free[cls]; b; b = *(void **)b) {
			long k = slab_find(pool, b);

			if (k >= 0)
				nfree[k]++;
		}
	}
	/* a slab is idle when every buffer it was carved into is free */
	for (i = 0; i < pool->nslabs; i++) {
		const struct slab *s = &pool->slabs[i];
		size_t bsz;

		if (s->cls == POOL_DEDICATED) {
			nfree[i] = 0;
			continue;
		}
		bsz = (size_t)1 << (s->cls + POOL_MIN_SHIFT);
		nfree[i] = nfree[i] == s->size / bsz;
	}
	for (cls = 0; cls < POOL_NCLASS; cls++) {
		void **pp = &pool->free[cls];

		while (*pp) {
			long k = slab_find(pool, *pp);

			if (k >= 0 && nfree[k])
				*pp = *(void **)*pp;
			else
				pp = (void **)*pp;
		}
	}
	for (i = pool->nslabs; i-- > 0;) {
		if (!nfree[i])
			continue;
		freed += pool->slabs[i].size;
		slab_remove(pool, i);
	}
	free(nfree);
	pool->reclaiming = false;
	return freed;
}

int rmsgi_pool_alloc_own(struct rmsgi_pool *pool, size_t len, void **buf_p)
{
	struct slab *s;
	int ret;

	ret = slab_add(pool, POOL_DEDICATED, RMSGI_ALIGN(len ? len : 1, 4096),
		       &s);
	if (ret)
		return ret;
	*buf_p = s->base;
	return 0;
}

int rmsgi_pool_alloc(struct rmsgi_pool *pool, size_t len, void **buf_p)
{
	int cls = size_class(len ? len : 1);
	struct slab *s;
	size_t bsz, off;
	void *buf;
	int ret;

	if (cls == POOL_DEDICATED)
		return rmsgi_pool_alloc_own(pool, len, buf_p);
	if (!pool->free[cls]) {
		bsz = (size_t)1 << (cls + POOL_MIN_SHIFT);
		ret = slab_add(pool, cls, RMSGI_MAX(POOL_SLAB_MIN, 4 * bsz),
			       &s);
		if (ret)
			return ret;
		/* chain back to front so buffers come out in address order */
		for (off = s->size; off >= bsz; off -= bsz) {
			void **b = (void **)(s->base + off - bsz);

			*b = pool->free[cls];
			pool->free[cls] = b;
		}
	}
	buf = pool->free[cls];
	pool->free[cls] = *(void **)buf;
	*buf_p = buf;
	return 0;
}

void rmsgi_pool_free(struct rmsgi_pool *pool, void *buf)
{
	long i;

	if (!buf)
		return;
	i = slab_find(pool, buf);
	if (i < 0)
		return; /* not ours: ignore rather than corrupt */
	if (pool->slabs[i].cls == POOL_DEDICATED) {
		slab_remove(pool, (size_t)i);
		return;
	}
	*(void **)buf = pool->free[pool->slabs[i].cls];
	pool->free[pool->slabs[i].cls] = buf;
}

int rmsgi_pool_lookup(const struct rmsgi_pool *pool, const void *addr,
		      size_t len, uint32_t *lkey_p)
{
	long i = slab_find(pool, addr);
	const struct slab *s;

	if (i < 0)
		return -ENOENT;
	s = &pool->slabs[i];
	if (!s->mr || (const uint8_t *)addr + len > s->base + s->size)
		return -ENOENT;
	*lkey_p = s->lkey;
	return 0;
}

size_t rmsgi_pool_size(const struct rmsgi_pool *pool, const void *buf)
{
	long i = slab_find(pool, buf);

	if (i < 0)
		return 0;
	if (pool->slabs[i].cls == POOL_DEDICATED)
		return pool->slabs[i].size;
	return (size_t)1 << (pool->slabs[i].cls + POOL_MIN_SHIFT);
}
