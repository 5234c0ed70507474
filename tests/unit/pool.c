// SPDX-License-Identifier: MIT
/* unit tests of the registered buffer pools (src/pool.c) */
#include "unit.h"

#include "pool.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define SLAB_MIN (256 * KIB)
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

static void pool_alloc__class_sizes(void **state)
{
	static const struct {
		size_t len, size;
	} cases[] = {
		{0, 64},
		{1, 64},
		{63, 64},
		{64, 64},
		{65, 128},
		{100, 128},
		{129, 256},
		{4096, 4096},
		{4097, 8192},
		{MIB - 1, MIB},
		{MIB, MIB},
		{MIB + 1, 2 * MIB},
		{2 * MIB, 2 * MIB},
	};
	struct rmsgi_pool *pool = *state;
	size_t i;

	for (i = 0; i < UNIT_ARRAY_SIZE(cases); i++) {
		void *buf = NULL;

		assert_int_equal(rmsgi_pool_alloc(pool, cases[i].len, &buf), 0);
		assert_non_null(buf);
		assert_int_equal(rmsgi_pool_size(pool, buf), cases[i].size);
		/* every byte of the class is usable */
		memset(buf, 0xa5, cases[i].size);
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

static void pool_free__reuse(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b, *c;

	assert_int_equal(rmsgi_pool_alloc(pool, 100, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 100, &b), 0);
	assert_ptr_not_equal(a, b);
	rmsgi_pool_free(pool, a);
	assert_int_equal(rmsgi_pool_alloc(pool, 128, &c), 0);
	assert_ptr_equal(c, a);
	/* another class does not take it */
	rmsgi_pool_free(pool, c);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &c), 0);
	assert_ptr_not_equal(c, a);
	rmsgi_pool_free(pool, c);
	rmsgi_pool_free(pool, b);
}

/* above 2 MiB a buffer gets a page-aligned slab of its own, returned to
 * the system on free */
static void pool_alloc__dedicated(void **state)
{
	struct rmsgi_pool *pool = *state;
	uint32_t lkey;
	void *buf;

	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 2 * MIB + 1, &buf), 0);
	assert_int_equal((uintptr_t)buf % 4096, 0);
	assert_int_equal(rmsgi_pool_size(pool, buf), 2 * MIB + 4096);
	memset(buf, 1, 2 * MIB + 4096);
	assert_int_equal(lg.nreg, 1);
	assert_ptr_equal(lg.addr[0], buf);
	assert_int_equal(lg.len[0], 2 * MIB + 4096);
	assert_int_equal(rmsgi_pool_lookup(pool, buf, 2 * MIB + 1, &lkey), 0);
	assert_int_equal(lkey, 0x100);

	rmsgi_pool_free(pool, buf);
	assert_int_equal(lg.ndereg, 1);
	assert_ptr_equal(lg.dereg[0], (void *)(uintptr_t)0x1000);
	assert_int_equal(rmsgi_pool_lookup(pool, buf, 1, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_size(pool, buf), 0);
}

static void pool_lookup__inside_outside_straddling(void **state)
{
	struct rmsgi_pool *pool = *state;
	uint32_t lkey = 0;
	uint8_t *base, *other;
	int on_stack;

	assert_int_equal(rmsgi_pool_alloc(pool, 64, (void **)&base), 0);
	/* not registered yet: no key */
	assert_int_equal(rmsgi_pool_lookup(pool, base, 64, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(lg.nreg, 1);
	/* the first buffer of a fresh slab is its base */
	assert_ptr_equal(lg.addr[0], base);
	assert_int_equal(lg.len[0], SLAB_MIN);

	assert_int_equal(rmsgi_pool_lookup(pool, base, 64, &lkey), 0);
	assert_int_equal(lkey, 0x100);
	lkey = 0;
	assert_int_equal(rmsgi_pool_lookup(pool, base + 10, 20, &lkey), 0);
	assert_int_equal(lkey, 0x100);
	/* any range inside the slab, up to its last byte */
	assert_int_equal(
		rmsgi_pool_lookup(pool, base + SLAB_MIN - 20, 20, &lkey), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, base, SLAB_MIN, &lkey), 0);
	/* straddling the end */
	assert_int_equal(
		rmsgi_pool_lookup(pool, base + SLAB_MIN - 10, 20, &lkey),
		-ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, base, SLAB_MIN + 1, &lkey),
			 -ENOENT);
	/* outside */
	assert_int_equal(rmsgi_pool_lookup(pool, base + SLAB_MIN, 1, &lkey),
			 -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, base - 1, 1, &lkey), -ENOENT);
	assert_int_equal(
		rmsgi_pool_lookup(pool, &on_stack, sizeof(on_stack), &lkey),
		-ENOENT);

	/* a second slab has its own key; a range over both has none */
	assert_int_equal(rmsgi_pool_alloc(pool, 4096, (void **)&other), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, other, 4096, &lkey), 0);
	assert_int_equal(lkey, 0x101);
	rmsgi_pool_free(pool, other);
	rmsgi_pool_free(pool, base);
}

/* hooks installed first: each new slab is registered once, when made */
static void pool_set_reg__hooks_once_per_slab(void **state)
{
	struct rmsgi_pool *pool = *state;
	static void *bufs[SLAB_MIN / 64 + 1];
	size_t i;
	void *x;

	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(lg.nreg, 0);
	for (i = 0; i < 10; i++)
		assert_int_equal(rmsgi_pool_alloc(pool, 64, &bufs[i]), 0);
	assert_int_equal(lg.nreg, 1);
	assert_int_equal(rmsgi_pool_alloc(pool, 1000, &x), 0);
	assert_int_equal(lg.nreg, 2);
	/* a slab holds SLAB_MIN / 64 buffers of 64 B; one more needs a
	 * second slab */
	for (; i < SLAB_MIN / 64; i++)
		assert_int_equal(rmsgi_pool_alloc(pool, 64, &bufs[i]), 0);
	assert_int_equal(lg.nreg, 2);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &bufs[i]), 0);
	assert_int_equal(lg.nreg, 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal((uintptr_t)lg.addr[i] % 4096, 0);
		assert_int_equal(lg.len[i], SLAB_MIN);
	}
	/* freeing and reallocating registers nothing new */
	for (i = 0; i <= SLAB_MIN / 64; i++)
		rmsgi_pool_free(pool, bufs[i]);
	for (i = 0; i <= SLAB_MIN / 64; i++)
		assert_int_equal(rmsgi_pool_alloc(pool, 64, &bufs[i]), 0);
	assert_int_equal(lg.nreg, 3);
	assert_int_equal(lg.ndereg, 0);
	for (i = 0; i <= SLAB_MIN / 64; i++)
		rmsgi_pool_free(pool, bufs[i]);
	rmsgi_pool_free(pool, x);
	/* class slabs stay until the pool goes */
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(lg.ndereg, 3);
}

/* hooks installed late: every slab made before is registered then */
static void pool_set_reg__registers_existing(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b, *c;
	uint32_t lkey;

	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 8192, &b), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &c), 0);
	assert_int_equal(lg.nreg, 0);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(lg.nreg, 3);
	assert_int_equal(rmsgi_pool_lookup(pool, a, 64, &lkey), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, b, 8192, &lkey), 0);
	assert_int_equal(rmsgi_pool_lookup(pool, c, 3 * MIB, &lkey), 0);
	rmsgi_pool_free(pool, a);
	rmsgi_pool_free(pool, b);
	rmsgi_pool_free(pool, c);
}

static void pool_clear_reg__deregisters(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b;
	uint32_t lkey;

	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 8192, &b), 0);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	rmsgi_pool_clear_reg(pool);
	assert_int_equal(lg.ndereg, 2);
	assert_int_equal(live_regs(), 0);
	/* the tokens given back are the ones handed out */
	assert_true((lg.dereg[0] == (void *)0x1000 &&
		     lg.dereg[1] == (void *)0x1001) ||
		    (lg.dereg[0] == (void *)0x1001 &&
		     lg.dereg[1] == (void *)0x1000));
	assert_int_equal(rmsgi_pool_lookup(pool, a, 64, &lkey), -ENOENT);
	/* no hooks now: new slabs are not registered, nothing twice */
	rmsgi_pool_clear_reg(pool);
	assert_int_equal(rmsgi_pool_alloc(pool, 512, &a), 0);
	assert_int_equal(lg.nreg, 2);
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(lg.ndereg, 2);
}

static void pool_destroy__deregisters(void **state)
{
	struct rmsgi_pool *pool = *state;
	void *a, *b;

	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 4 * MIB, &b), 0);
	assert_int_equal(lg.nreg, 2);
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(lg.ndereg, 2);
}

/* a slab that cannot be registered is not handed out */
static void pool_alloc__reg_failure(void **state)
{
	struct rmsgi_pool *pool;
	uint32_t lkey;
	void *a = NULL, *b;

	(void)state;
	assert_int_equal(rmsgi_pool_create(SLAB_MIN, &pool), 0);
	lg.fail_at = 1;
	lg.fail_ret = -ENOMEM;
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), -ENOMEM);
	assert_null(a);
	lg.fail_ret = -EACCES;
	lg.fail_at = 2;
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), -EACCES);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &b), -ENOMEM);
	/* the failed slabs did not count against the limit */
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
	assert_int_equal(rmsgi_pool_alloc(pool, 8192, &b), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 65536, &c), 0);
	lg.fail_at = 2;
	lg.fail_ret = -EPERM;
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), -EPERM);
	assert_int_equal(lg.nreg, 2);
	assert_int_equal(lg.ndereg, 1);
	assert_ptr_equal(lg.dereg[0], (void *)0x1000);
	assert_int_equal(rmsgi_pool_lookup(pool, a, 64, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, b, 64, &lkey), -ENOENT);
	assert_int_equal(rmsgi_pool_lookup(pool, c, 64, &lkey), -ENOENT);
	rmsgi_pool_free(pool, a);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &a), 0);
	assert_int_equal(lg.nreg, 2);
	rmsgi_pool_free(pool, a);
	rmsgi_pool_free(pool, b);
	rmsgi_pool_free(pool, c);
	assert_int_equal(lg.ndereg, 1);
}

static void pool_alloc__limit(void **state)
{
	struct rmsgi_pool *pool;
	void *a, *b, *c, *d;

	(void)state;
	assert_int_equal(rmsgi_pool_create(2 * SLAB_MIN, &pool), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 128, &b), 0);
	c = (void *)0x1;
	assert_int_equal(rmsgi_pool_alloc(pool, 256, &c), -ENOMEM);
	assert_ptr_equal(c, (void *)0x1);
	/* classes with a slab keep working */
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &c), 0);
	rmsgi_pool_free(pool, c);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &c), -ENOMEM);
	rmsgi_pool_free(pool, a);
	rmsgi_pool_free(pool, b);
	rmsgi_pool_destroy(pool);

	/* dedicated slabs give their bytes back */
	assert_int_equal(rmsgi_pool_create(5 * MIB, &pool), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &c), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &d), -ENOMEM);
	rmsgi_pool_free(pool, c);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &d), 0);
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

/* slabs are charged to the budget and given back when they go; a failed
 * charge leaves nothing behind */
static void pool_alloc__budget(void **state)
{
	struct rmsgi_pool *pool = *state;
	struct budget_log b = {.limit = 2 * SLAB_MIN};
	void *a, *c = (void *)0x1;

	rmsgi_pool_set_budget(pool, &budget_hooks, &b);
	assert_int_equal(rmsgi_pool_alloc(pool, 64, &a), 0);
	assert_int_equal(b.used, SLAB_MIN);
	assert_int_equal(rmsgi_pool_alloc(pool, 3 * MIB, &c), -ENOMEM);
	assert_ptr_equal(c, (void *)0x1);
	assert_int_equal(b.used, SLAB_MIN);
	assert_int_equal(rmsgi_pool_alloc(pool, 128, &c), 0);
	assert_int_equal(b.used, 2 * SLAB_MIN);
	rmsgi_pool_free(pool, c);
	rmsgi_pool_free(pool, a);
	rmsgi_pool_destroy(pool);
	*state = NULL;
	assert_int_equal(b.used, 0);
}

/* a class slab whose buffers all came back is given back when another
 * class needs the room; one with a buffer out stays */
static void pool_reclaim__idle_slabs_only(void **state)
{
	struct rmsgi_pool *pool;
	void *a[4], *x, *y;
	uint32_t lkey;
	int i;

	(void)state;
	assert_int_equal(rmsgi_pool_create(2 * SLAB_MIN, &pool), 0);
	assert_int_equal(rmsgi_pool_set_reg(pool, &hooks, &lg), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(rmsgi_pool_alloc(pool, 64 * KIB, &a[i]), 0);
	assert_int_equal(rmsgi_pool_alloc(pool, 128, &x), 0);
	/* both slabs in use: nothing to give back */
	assert_int_equal(rmsgi_pool_alloc(pool, 256, &y), -ENOMEM);
	assert_int_equal(rmsgi_pool_reclaim(pool), 0);
	for (i = 0; i < 3; i++)
		rmsgi_pool_free(pool, a[i]);
	assert_int_equal(rmsgi_pool_alloc(pool, 256, &y), -ENOMEM);
	rmsgi_pool_free(pool, a[3]);
	/* the 64 KiB slab is idle now: it goes for the 256 B one */
	assert_int_equal(rmsgi_pool_alloc(pool, 256, &y), 0);
	assert_int_equal(live_regs(), 2);
	assert_int_equal(lg.ndereg, 1);
	assert_ptr_equal(lg.dereg[0], (void *)0x1000); /* the first slab */
	assert_int_equal(rmsgi_pool_lookup(pool, x, 128, &lkey), 0);
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
