// SPDX-License-Identifier: MIT
/* unit tests of the context's reaper (src/reap.c, transport.h: end of
 * life): both backends free their connection objects by these rules */
#include "unit.h"

#include "transport/transport.h"

struct obj {
	struct rmsgi_reap r;
	struct rmsgi_reaper *rp;
	int id;
	int chain; /* > 0: queues another object when reaped */
};

static int order[16];
static int nreaped;
static struct obj pool[16];

static void obj_reaped(struct rmsgi_reap *r)
{
	struct obj *o = RMSGI_CONTAINER_OF(r, struct obj, r);

	assert_true(nreaped < 16);
	order[nreaped++] = o->id;
	/* an up-call made from an item enters and leaves a backend: that
	 * leave must not run the queue again (no nesting) */
	rmsgi_tr_enter(o->rp);
	if (o->chain) {
		struct obj *n = &pool[o->id + 1];

		n->id = o->id + 1;
		n->rp = o->rp;
		n->chain = o->chain - 1;
		rmsgi_reap(o->rp, &n->r, obj_reaped);
	}
	rmsgi_tr_leave(o->rp);
	assert_int_equal(order[nreaped - 1], o->id);
}

static void reaper_init(struct rmsgi_reaper *rp)
{
	memset(rp, 0, sizeof(*rp));
	rp->tail = &rp->head;
	memset(pool, 0, sizeof(pool));
	nreaped = 0;
}

static void queue(struct rmsgi_reaper *rp, int id)
{
	pool[id].id = id;
	pool[id].rp = rp;
	rmsgi_reap(rp, &pool[id].r, obj_reaped);
}

/* nothing goes while an entry point is on the stack; the outermost
 * leave runs everything, oldest first */
static void reap__outermost_leave(void **state)
{
	struct rmsgi_reaper rp;

	(void)state;
	reaper_init(&rp);
	rmsgi_tr_enter(&rp);
	queue(&rp, 0);
	rmsgi_tr_enter(&rp); /* a callback re-enters the backend */
	queue(&rp, 1);
	rmsgi_tr_leave(&rp);
	assert_int_equal(nreaped, 0); /* the outer handler may still hold it */
	queue(&rp, 2);
	rmsgi_tr_leave(&rp);
	assert_int_equal(nreaped, 3);
	assert_int_equal(order[0], 0);
	assert_int_equal(order[1], 1);
	assert_int_equal(order[2], 2);
	assert_int_equal(rp.depth, 0);
	assert_null(rp.head);
}

/* an item that queues another (a down that ends the next object) has it
 * run in the same pass, after it, and the queue is usable afterwards */
static void reap__chain_same_pass(void **state)
{
	struct rmsgi_reaper rp;

	(void)state;
	reaper_init(&rp);
	rmsgi_tr_enter(&rp);
	queue(&rp, 0);
	pool[0].chain = 3;
	rmsgi_tr_leave(&rp);
	assert_int_equal(nreaped, 4);
	assert_int_equal(order[3], 3);
	assert_null(rp.head);
	assert_ptr_equal(rp.tail, &rp.head);
	/* queued outside every entry point: waits for the next run (the
	 * context's flush or destroy) */
	queue(&rp, 5);
	assert_int_equal(nreaped, 4);
	rmsgi_reap_run(&rp);
	assert_int_equal(nreaped, 5);
	assert_int_equal(order[4], 5);
	assert_int_equal(rp.depth, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reap__outermost_leave),
		cmocka_unit_test(reap__chain_same_pass),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
