// SPDX-License-Identifier: MIT
/*
 * unit tests of the registered buffer pools (src/pool.c). They check what
 * pool.h and DESIGN.md promise: a buffer at least as large as asked and
 * 64-byte aligned, slabs registered once and looked up by any pointer
 * inside, larger buffers in a slab of their own, the pool's limit and the
 * owner's budget, idle slabs given back. Today's layout (power-of-two
 * classes from 64 B, 256 KiB class slabs, page-rounded dedicated slabs
 * above 2 MiB) is a tuning choice: where a test needs a slab's size it
 * measures it (slab_bytes), and it assumes only that sizes as far apart
 * as 64 B, 4 KiB and 64 KiB do not share a class.
 */
#include "unit.h"

#include "pool.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
/* far above any class: a slab of its own (above 2 MiB today) */
#define BIG (16 * MIB + 1)
#define LOG_MAX 64

/* registration hooks that log what they were asked */
struct reg_log {
	int nreg, ndereg, nfail;
	int fail_at; /* the n-th reg call fails (1-based), 0 never */
	int fail_ret;
	void *addr[LOG_MAX];
	size_t len[LOG_MAX];
	void *dereg[LOG_MAX];
};

static struct reg_log lg;

static int t_reg(void *priv, void *addr, size_t len, void **mr_p,
		 uint32_t *lkey_p)
{
	struct reg_log *l = priv;
	int i = l->nreg++;

	if (l->fail_at && l->nreg == l->fail_at) {
		l->nfail++;
		return l->fail_ret;
	}
	assert_true(i < LOG_MAX);
	l->addr[i] = addr;
	l->len[i] = len;
	*mr_p = (void *)(uintptr_t)(0x1000 + i); /* a token */
	*lkey_p = 0x100 + (uint32_t)i;
	return 0;
}

static void t_dereg(void *priv, void *mr)
{
	struct reg_log *l = priv;

	assert_true(l->ndereg < LOG_MAX);
	l->dereg[l->ndereg++] = mr;
}

static const struct rmsgi_pool_reg hooks = {
	.reg = t_reg,
	.dereg = t_dereg,
};

static int setup(void **state)
{
	struct rmsgi_pool *pool;

	memset(&lg, 0, sizeof(lg));
	if (rmsgi_pool_create(0, &pool))
		return -1;
	*state = pool;
	return 0;
}

static int teardown(void **state)
{
	rmsgi_pool_destroy(*state);
	return 0;
}

/* number of registrations not yet undone */
static int live_regs(void)
{
	return lg.nreg - lg.nfail - lg.ndereg;
}

/* ------------------------------------------------------------------ */

/* the bytes of the slab a fresh pool makes for a buffer of @len */
static size_t slab_bytes(size_t len)
{
	struct reg_log saved = lg;
	struct rmsgi_pool *pool;
	size_t bytes;
	void *buf;

	memset(&lg, 0, sizeof(lg));
	assert_int_equal(rmsgi_pool_create(0, &pool), 0);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, len, &buf), 0);
	assert_int_equal(lg.nreg, 1);
	bytes = lg.len[0];
	assert_true(bytes >= len);
	rmsgi_pool_free(pool, buf);
	rmsgi_pool_destroy(pool);
	lg = saved;
	return bytes;
}

/* the registration (index into lg) whose range holds [p, p+len), or -1 */
static int reg_of(const void *p, size_t len)
{
	const uint8_t *b = p;
	int i;

	for (i = 0; i < lg.nreg && i < LOG_MAX; i++) {
		const uint8_t *a = lg.addr[i];

		if (a && b >= a && b + len <= a + lg.len[i])
			return i;
	}
	return -1;
}

/* every registration was undone once, with the token it was given */
static void all_deregistered(void)
{
	int i, j, seen;

	assert_int_equal(live_regs(), 0);
	for (i = 0; i < lg.ndereg; i++) {
		uintptr_t tok = (uintptr_t)lg.dereg[i];

		assert_true(tok >= 0x1000 && tok < 0x1000 + (uintptr_t)lg.nreg);
		for (j = 0, seen = 0; j < lg.ndereg; j++)
			seen += lg.dereg[j] == lg.dereg[i];
		assert_int_equal(seen, 1);
	}
}

/* ------------------------------------------------------------------ */

/* at least as large as asked, all of it usable, 64-byte aligned
 * (DESIGN.md); today power-of-two classes from 64 B to 2 MiB */
static void pool_alloc__class_sizes(void **state)
{
	static const size_t lens[] = {
		0,    1,       63,  64,	     65,      100,	   129,	   4096,
		4097, MIB - 1, MIB, MIB + 1, 2 * MIB, 2 * MIB + 1, 3 * MIB};
	struct rmsgi_pool *pool = *state;
	size_t i;

	for (i = 0; i < UNIT_ARRAY_SIZE(lens); i++) {
		void *buf = NULL;
		size_t size;

		assert_int_equal(rmsgi_pool_alloc(pool, lens[i], &buf), 0);
		assert_non_null(buf);
		assert_int_equal((uintptr_t)buf % 64, 0);
		size = rmsgi_pool_size(pool, buf);
		assert_true(size >= lens[i]);
		assert_true(size > 0);
		/* every byte of it is usable */
		memset(buf, 0xa5, size);
		rmsgi_pool_free(pool, buf);
	}
}

static void pool_alloc__aligned_64(void **state)
{
	static const size_t lens[] = {1, 24, 64, 96, 200, 1000, 5000, 65536};
	struct rmsgi_pool *pool = *state;
	void *bufs[UNIT_ARRAY_SIZE(lens)][8];
	size_t i, j, k;

	for (i = 0; i < UNIT_ARRAY_SIZE(lens); i++)
		for (j = 0; j < 8; j++) {
			assert_int_equal(
				rmsgi_pool_alloc(pool, lens[i], &bufs[i][j]),
				0);
			assert_int_equal((uintptr_t)bufs[i][j] % 64, 0);
			memset(bufs[i][j], (int)(i * 8 + j), lens[i]);
		}
	/* no two buffers overlap: each kept its own pattern */
	for (i = 0; i < UNIT_ARRAY_SIZE(lens); i++)
		for (j = 0; j < 8; j++)
			for (k = 0; k < lens[i]; k++)
				assert_int_equal(((uint8_t *)bufs[i][j])[k],
						 i * 8 + j);
	for (i = 0; i < UNIT_ARRAY_SIZE(lens); i++)
		for (j = 0; j < 8; j++)
			rmsgi_pool_free(pool, bufs[i][j]);
}

/* a freed buffer serves the next request of the same size: the hot path
 * reuses pool memory instead of growing it */
static void pool_free__reuse(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b, *c;

	assert_int_equal(rmsgi_pool_alloc(pool, 100, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 100, &b), 0);
	assert_ptr_not_equal(a, b);
	rmsgi_pool_free(pool, a);
	assert_int_equal(rmsgi_pool_alloc(pool, 100, &c), 0);
	assert_ptr_equal(c, a);
	rmsgi_pool_free(pool, c);
	rmsgi_pool_free(pool, b);
}

/* far above the classes a buffer gets a slab of its own, registered for
 * it and given back (deregistered) on free */
static void pool_alloc__dedicated(void **state)
{
	struct rmsgi_pool *pool = *state;
	uint32_t lkey;
	size_t size;
	void *buf;

	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &buf), 0);
	assert_int_equal((uintptr_t)buf % 64, 0);
	size = rmsgi_pool_size(pool, buf);
	assert_true(size >= BIG);
	memset(buf, 1, size);
	assert_int_equal(lg.nreg, 1);
	assert_int_equal(reg_of(buf, size), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, buf, BIG, &lkey), 0);
	assert_int_equal(lkey, 0x100);

	rmsgi_pool_free(pool, buf);
	assert_int_equal(lg.ndereg, 1);
	assert_ptr_equal(lg.dereg[0], (void *)(uintptr_t)0x1000);
	assert_int_equal(rmsgi_pool_lookup(pool, buf, 1, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_size(pool, buf), 0);
}

/* any range inside a registered slab has its key; nothing outside or
 * straddling its end does */
static void pool_lookup__inside_outside_straddling(void **state)
{
	struct rmsgi_pool *pool = *state;
	uint32_t lkey = 0;
	uint8_t *base, *other, *r0;
	size_t len0;
	int on_stack, i;

	assert_int_equal(rmsgi_pool_alloc(pool, 64, (void **)&base), 0);
	/* not registered yet: no key */
	assert_int_equal(rmsgi_pool_lookup(pool, base, 64, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(lg.nreg, 1);
	/* the slab registered holds the buffer */
	assert_int_equal(reg_of(base, 64), 0);
	r0 = lg.addr[0];
	len0 = lg.len[0];

	assert_int_equal(rmsgi_pool_lookup(pool, base, 64, &lkey), 0);
	assert_int_equal(lkey, 0x100);
	lkey = 0;
	assert_int_equal(rmsgi_pool_lookup(pool, base + 10, 20, &lkey), 0);
	assert_int_equal(lkey, 0x100);
	/* any range inside the slab, up to its last byte */
	assert_int_equal(rmsgi_pool_lookup(pool, r0 + len0 - 20, 20, &lkey), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, r0, len0, &lkey), 0);
	/* straddling the end */
	assert_int_equal(rmsgi_pool_lookup(pool, r0 + len0 - 10, 20, &lkey),
			 -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, r0, len0 + 1, &lkey), -ENOENT);
	/* outside */
	assert_int_equal(rmsgi_pool_lookup(pool, r0 + len0, 1, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, r0 - 1, 1, &lkey), -ENOENT);
	assert_int_equal(
		rmsgi_pool_lookup(pool, &on_stack, sizeof(on_stack), &lkey),
		-ENOENT);

	/* a buffer of another class: the key of the slab that holds it */
	assert_int_equal(rmsgi_pool_alloc(pool, 4096, (void **)&other), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, other, 4096, &lkey), 0);
	i = reg_of(other, 4096);
	assert_true(i >= 0);
	assert_int_equal(lkey, 0x100 + (uint32_t)i);
	rmsgi_pool_free(pool, other);
	rmsgi_pool_free(pool, base);
}

/* hooks installed first: each new slab is registered once, when made,
 * not once per buffer; every buffer lies in a registered slab */
static void pool_set_reg__hooks_once_per_slab(void **state)
{
	enum {
		N = 5000
	}; /* 320 KB of 64 B buffers: more than one slab */
	struct rmsgi_pool *pool = *state;
	static void *bufs[N];
	uint32_t lkey;
	int i, nreg;

	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(lg.nreg, 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &bufs[0]), 0);
	assert_int_equal(lg.nreg, 1);
	for (i = 1; i < N; i++)
		assert_int_equal(rmsgi_pool_alloc(pool, 64, &bufs[i]), 0);
	nreg = lg.nreg;
	assert_true(nreg >= 1 && nreg < N / 2);
	for (i = 0; i < N; i++) {
		int r = reg_of(bufs[i], 64);

		assert_true(r >= 0);
		assert_int_equal(rmsgi_pool_lookup(pool, bufs[i], 64, &lkey),
				 0);
		assert_int_equal(lkey, 0x100 + (uint32_t)r);
	}
	/* the slabs cover what was handed out */
	{
		size_t bytes = 0;

		for (i = 0; i < nreg; i++)
			bytes += lg.len[i];
		assert_true(bytes >= (size_t)N * 64);
	}
	/* freeing and reallocating registers nothing new */
	for (i = 0; i < N; i++)
		rmsgi_pool_free(pool, bufs[i]);
	for (i = 0; i < N; i++)
		assert_int_equal(rmsgi_pool_alloc(pool, 64, &bufs[i]), 0);
	assert_int_equal(lg.nreg, nreg);
	assert_int_equal(lg.ndereg, 0);
	for (i = 0; i < N; i++)
		rmsgi_pool_free(pool, bufs[i]);
	/* class slabs stay until the pool goes */
	assert_int_equal(lg.ndereg, 0);
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(lg.ndereg, nreg);
	all_deregistered();
}

/* hooks installed late: every slab made before is registered then */
static void pool_set_reg__registers_existing(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b, *c;
	uint32_t lkey;

	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 8192, &b), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &c), 0);
	assert_int_equal(lg.nreg, 0);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_true(lg.nreg >= 2); /* the big one has a slab of its own */
	assert_int_equal(rmsgi_pool_lookup(pool, a, 64, &lkey), 0);
	assert_int_equal(lkey, 0x100 + (uint32_t)reg_of(a, 64));
	assert_int_equal(rmsgi_pool_lookup(pool, b, 8192, &lkey), 0);
	assert_int_equal(lkey, 0x100 + (uint32_t)reg_of(b, 8192));
	assert_int_equal(rmsgi_pool_lookup(pool, c, BIG, &lkey), 0);
	assert_int_equal(lkey, 0x100 + (uint32_t)reg_of(c, BIG));
	rmsgi_pool_free(pool, a);
	rmsgi_pool_free(pool, b);
	rmsgi_pool_free(pool, c);
}

static void pool_clear_reg__deregisters(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b;
	uint32_t lkey;
	int nreg;

	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 8192, &b), 0);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	nreg = lg.nreg;
	assert_true(nreg >= 1);
	rmsgi_pool_clear_reg(pool);
	/* every slab, with the token handed out for it */
	assert_int_equal(lg.ndereg, nreg);
	all_deregistered();
	assert_int_equal(rmsgi_pool_lookup(pool, a, 64, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, b, 8192, &lkey), -ENOENT);
	/* no hooks now: new slabs are not registered, nothing twice */
	rmsgi_pool_clear_reg(pool);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &a), 0);
	assert_int_equal(lg.nreg, nreg);
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(lg.ndereg, nreg);
}

static void pool_destroy__deregisters(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b;

	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &b), 0);
	assert_true(lg.nreg >= 2);
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(lg.ndereg, lg.nreg);
	all_deregistered();
}

/* a slab that cannot be registered is not handed out, and does not
 * count against the pool's limit */
static void pool_alloc__reg_failure(void **state)
{
	struct rmsgi_pool *pool;
	uint32_t lkey;
	void *a = NULL;

	(void)state;
	/* room for one slab of 64 B buffers: had a failed slab counted,
	 * the third try would not fit */
	assert_int_equal(rmsgi_pool_create(slab_bytes(64), &pool), 0);
	lg.fail_at = 1;
	lg.fail_ret = -ENOMEM;
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), -ENOMEM);
	assert_null(a);
	lg.fail_ret = -EACCES;
	lg.fail_at = 2;
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), -EACCES);
	assert_null(a);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, a, 64, &lkey), 0);
	rmsgi_pool_destroy(pool);
	assert_int_equal(live_regs(), 0);
}

/* registering existing slabs fails midway: the error comes back, nothing
 * stays registered, and the hooks are gone */
static void pool_set_reg__failure_propagates(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b, *c;
	uint32_t lkey;

	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64 * KIB, &b), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &c), 0);
	lg.fail_at = 2;
	lg.fail_ret = -EPERM;
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), -EPERM);
	assert_int_equal(lg.nreg, 2);
	/* the one that had been registered was undone */
	assert_int_equal(lg.ndereg, 1);
	assert_ptr_equal(lg.dereg[0], (void *)0x1000);
	assert_int_equal(rmsgi_pool_lookup(pool, a, 64, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, b, 64, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, c, 64, &lkey), -ENOENT);
	rmsgi_pool_free(pool, a);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &a), 0);
	assert_int_equal(lg.nreg, 2);
	rmsgi_pool_free(pool, a);
	rmsgi_pool_free(pool, b);
	rmsgi_pool_free(pool, c);
	assert_int_equal(lg.ndereg, 1);
}

/* the pool's limit bounds the bytes in slabs: what does not fit fails
 * with -ENOMEM and leaves the pointer alone, slabs made keep serving */
static void pool_alloc__limit(void **state)
{
	struct rmsgi_pool *pool;
	size_t s64 = slab_bytes(64);
	void *a, *b, *c, *d;

	(void)state;
	assert_int_equal(rmsgi_pool_create(s64, &pool), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	c = (void *)0x1;
	assert_int_equal(rmsgi_pool_alloc(pool, s64 + 1, &c), -ENOMEM);
	assert_ptr_equal(c, (void *)0x1);
	/* a 64 KiB buffer is in another class: no room for its slab */
	assert_int_equal(rmsgi_pool_alloc(pool, 64 * KIB, &c), -ENOMEM);
	assert_ptr_equal(c, (void *)0x1);
	/* the slab made keeps working */
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &b), 0);
	rmsgi_pool_free(pool, b);
	rmsgi_pool_free(pool, a);
	rmsgi_pool_destroy(pool);

	/* slabs of their own give their bytes back */
	assert_int_equal(rmsgi_pool_create(BIG + BIG / 2, &pool), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &c), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &d), -ENOMEM);
	rmsgi_pool_free(pool, c);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &d), 0);
	rmsgi_pool_free(pool, d);
	rmsgi_pool_destroy(pool);
}

static void pool_free__foreign_pointer_ignored(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b, *heap;
	uint64_t on_stack[8];

	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	rmsgi_pool_free(pool, a);
	heap = malloc(64);
	assert_non_null(heap);
	memcpy(heap, "untouched", 10);
	memset(on_stack, 0x77, sizeof(on_stack));
	rmsgi_pool_free(pool, on_stack);
	rmsgi_pool_free(pool, heap);
	rmsgi_pool_free(pool, NULL);
	/* nothing was written to them, nothing joined the free list */
	assert_int_equal(on_stack[0], 0x7777777777777777ull);
	assert_string_equal(heap, "untouched");
	assert_int_equal(rmsgi_pool_size(pool, heap), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &b), 0);
	assert_ptr_equal(b, a);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &b), 0);
	assert_ptr_not_equal(b, heap);
	assert_ptr_not_equal(b, on_stack);
	free(heap);
}

/* a budget shared with the owner: counts what it was charged */
struct budget_log {
	size_t used, limit;
	int nfail;
};

static int b_take(void *priv, size_t bytes)
{
	struct budget_log *b = priv;

	if (b->used + bytes > b->limit) {
		b->nfail++;
		return -ENOMEM;
	}
	b->used += bytes;
	return 0;
}

static void b_give(void *priv, size_t bytes)
{
	struct budget_log *b = priv;

	assert_true(bytes <= b->used);
	b->used -= bytes;
}

static const struct rmsgi_pool_budget budget_hooks = {
	.take = b_take,
	.give = b_give,
};

/* slabs are charged to the budget (at least the bytes handed out) and
 * given back when they go; a failed charge leaves nothing behind */
static void pool_alloc__budget(void **state)
{
	struct rmsgi_pool *pool = *state;
	struct budget_log b = {.limit = 8 * MIB};
	void *a, *c = (void *)0x1;
	size_t used;

	rmsgi_pool_set_budget(pool, &budget_hooks, &b);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	used = b.used;
	assert_true(used >= 64);
	assert_int_equal(rmsgi_pool_alloc(pool, BIG, &c), -ENOMEM);
	assert_ptr_equal(c, (void *)0x1);
	assert_int_equal(b.nfail, 1);
	assert_int_equal(b.used, used);
	assert_int_equal(rmsgi_pool_alloc(pool, 64 * KIB, &c), 0);
	assert_true(b.used >= used + 64 * KIB);
	rmsgi_pool_free(pool, c);
	rmsgi_pool_free(pool, a);
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(b.used, 0);
}

/* when a new slab does not fit, class slabs whose buffers all came back
 * are given back first; one with a buffer out stays */
static void pool_reclaim__idle_slabs_only(void **state)
{
	struct rmsgi_pool *pool;
	size_t s_small = slab_bytes(64), s_big = slab_bytes(64 * KIB),
	       s_mid = slab_bytes(4 * KIB);
	void *a[64], *x, *y;
	uint32_t lkey;
	int i, n, big_reg;

	(void)state;
	/* the 4 KiB slab fits where the 64 KiB one was */
	assert_true(s_mid <= s_big);
	assert_int_equal(rmsgi_pool_create(s_small + s_big, &pool), 0);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	/* a slab of 64 B buffers and one of 64 KiB buffers, full: the
	 * limit is reached */
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &x), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64 * KIB, &a[0]), 0);
	big_reg = reg_of(a[0], 64 * KIB);
	assert_true(big_reg >= 0);
	for (n = 1; n < 64; n++)
		if (rmsgi_pool_alloc(pool, 64 * KIB, &a[n]))
			break;
	assert_true(n < 64);
	assert_int_equal(lg.nreg, 2);
	/* both slabs in use: nothing to give back */
	assert_int_equal(rmsgi_pool_alloc(pool, 4 * KIB, &y), -ENOMEM);
	assert_int_equal(rmsgi_pool_reclaim(pool), 0);
	for (i = 0; i < n - 1; i++)
		rmsgi_pool_free(pool, a[i]);
	assert_int_equal(rmsgi_pool_alloc(pool, 4 * KIB, &y), -ENOMEM);
	rmsgi_pool_free(pool, a[n - 1]);
	/* the 64 KiB slab is idle now: it goes for the 4 KiB one */
	assert_int_equal(rmsgi_pool_alloc(pool, 4 * KIB, &y), 0);
	assert_int_equal(live_regs(), 2);
	assert_int_equal(lg.ndereg, 1);
	assert_ptr_equal(lg.dereg[0], (void *)(uintptr_t)(0x1000 + big_reg));
	assert_int_equal(rmsgi_pool_lookup(pool, x, 64, &lkey), 0);
	/* the class whose slab went makes a new one when asked */
	rmsgi_pool_free(pool, y);
	assert_int_equal(rmsgi_pool_alloc(pool, 64 * KIB, &a[0]), 0);
	rmsgi_pool_free(pool, a[0]);
	rmsgi_pool_free(pool, x);
	rmsgi_pool_destroy(pool);
	assert_int_equal(live_regs(), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(pool_alloc__class_sizes),
		T(pool_alloc__aligned_64),
		T(pool_free__reuse),
		T(pool_alloc__dedicated),
		T(pool_lookup__inside_outside_straddling),
		T(pool_set_reg__hooks_once_per_slab),
		T(pool_set_reg__registers_existing),
		T(pool_clear_reg__deregisters),
		T(pool_destroy__deregisters),
		T(pool_alloc__reg_failure),
		T(pool_set_reg__failure_propagates),
		T(pool_alloc__limit),
		T(pool_free__foreign_pointer_ignored),
		T(pool_alloc__budget),
		T(pool_reclaim__idle_slabs_only),
	};
#undef T

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
