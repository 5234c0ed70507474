// SPDX-License-Identifier: MIT
/* unit tests of the quarantine of released objects (src/quar.h): its
 * four users (TCP message objects, RDMA rendezvous messages, unpacked
 * PACK frames, RPC requests) rely on exactly these rules */
#include "unit.h"

#include "quar.h"

struct obj {
	struct rmsgi_quar_ent q;
	int id;
};

#define OBJ(e) rmsgi_list_entry(e, struct obj, q)

/* a released object is freed only once @keep more were released after
 * it: the one released K-th is due at the (K + keep)-th put */
static void quar_over__after_keep(void **state)
{
	struct obj o[20];
	struct rmsgi_quar q;
	struct rmsgi_quar_ent *e;
	int i, next = 0;

	(void)state;
	rmsgi_quar_init(&q, 4);
	for (i = 0; i < 20; i++) {
		o[i].id = i;
		rmsgi_quar_put(&q, &o[i].q, 1);
		while ((e = rmsgi_quar_over(&q))) {
			assert_int_equal(OBJ(e)->id, next);
			assert_int_equal(i - next, 4);
			next++;
		}
		assert_true(q.weight <= 4);
	}
	assert_int_equal(next, 16);
}

/* reuse instead of allocation only once the quarantine is full
 * (keep - 1 later releases), oldest first */
static void quar_reuse__full_only(void **state)
{
	struct obj o[4];
	struct rmsgi_quar q;
	struct rmsgi_quar_ent *e;
	int i;

	(void)state;
	rmsgi_quar_init(&q, 3);
	assert_null(rmsgi_quar_reuse(&q));
	for (i = 0; i < 2; i++) {
		o[i].id = i;
		rmsgi_quar_put(&q, &o[i].q, 1);
		assert_null(rmsgi_quar_reuse(&q));
	}
	o[2].id = 2;
	rmsgi_quar_put(&q, &o[2].q, 1);
	e = rmsgi_quar_reuse(&q);
	assert_non_null(e);
	assert_int_equal(OBJ(e)->id, 0);
	assert_int_equal(q.weight, 2);
	assert_null(rmsgi_quar_reuse(&q));
}

/* weights (a PACK frame counts its messages): the oldest goes when the
 * weight behind it reaches the bound */
static void quar_over__weights(void **state)
{
	struct obj a, b, c;
	struct rmsgi_quar q;
	struct rmsgi_quar_ent *e;

	(void)state;
	rmsgi_quar_init(&q, 10);
	rmsgi_quar_put(&q, &a.q, 8);
	assert_null(rmsgi_quar_over(&q));
	rmsgi_quar_put(&q, &b.q, 5);
	assert_null(rmsgi_quar_over(&q)); /* 5 behind a */
	rmsgi_quar_put(&q, &c.q, 5);
	e = rmsgi_quar_over(&q); /* 10 behind a */
	assert_ptr_equal(e, &a.q);
	assert_null(rmsgi_quar_over(&q)); /* 5 behind b */
	assert_int_equal(q.weight, 10);
	/* a single entry heavier than the bound waits for nothing */
	rmsgi_quar_init(&q, 10);
	rmsgi_quar_put(&q, &a.q, 50);
	assert_null(rmsgi_quar_over(&q));
}

/* drain empties it whatever the bound (the owner's end) */
static void quar_drain__all(void **state)
{
	struct obj o[5];
	struct rmsgi_quar q;
	int i, n = 0;

	(void)state;
	rmsgi_quar_init(&q, 100);
	for (i = 0; i < 5; i++)
		rmsgi_quar_put(&q, &o[i].q, 1);
	while (rmsgi_quar_drain(&q))
		n++;
	assert_int_equal(n, 5);
	assert_int_equal(q.weight, 0);
	assert_null(rmsgi_quar_drain(&q));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(quar_over__after_keep),
		cmocka_unit_test(quar_reuse__full_only),
		cmocka_unit_test(quar_over__weights),
		cmocka_unit_test(quar_drain__all),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
