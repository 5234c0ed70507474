// SPDX-License-Identifier: MIT
/*
 * unit tests of the registry (src/registry.c, registry.h): the lookups
 * over rows keyed by scheme name, the slots assigned from the rows, the
 * load-time check of the rows and of a backend's required ops, and the
 * wrappers through which the core calls optional ops. Two backends
 * of this file's own stand in for the real ones.
 */
#include "unit.h"

#include "rmsg_int.h"

static int polled, stopped, kicked, released;

static int x_poll(void *tctx, bool arm)
{
	(void)tctx;
	(void)arm;
	return ++polled;
}
static void x_stop(void *tctx)
{
	(void)tctx;
	stopped++;
}
static void x_fini(void *tctx)
{
	(void)tctx;
}
static int x_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		    const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p)
{
	(void)ctx, (void)l, (void)u, (void)port_p, (void)tl_p;
	return -ENOSYS;
}
static void x_close(void *tl)
{
	(void)tl;
}
static void x_adopt(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *h)
{
	(void)ctx, (void)l, (void)h;
}
static void x_drop(void *h, const struct rmsgi_hello *refusal)
{
	(void)h, (void)refusal;
}
static int x_connect(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		     const struct rmsgi_uri *u, const struct rmsgi_addrs *to)
{
	(void)c, (void)ci, (void)u, (void)to;
	return -ENOSYS;
}
static void x_disconnect(void *tc, unsigned linger_ms)
{
	(void)tc, (void)linger_ms;
}
static int x_post(void *tc, struct rmsgi_op *op)
{
	(void)tc, (void)op;
	return 0;
}
static ssize_t x_send_direct(void *tc, const struct rmsgi_hdr *h,
			     const struct iovec *iov, int iovcnt)
{
	(void)tc, (void)h, (void)iov, (void)iovcnt;
	return 0;
}
static size_t x_direct_max(const void *tc)
{
	(void)tc;
	return 64;
}
static void x_kick(void *tc)
{
	(void)tc;
	kicked++;
}
static void x_rndv_release(void *tc, struct rmsgi_op *op)
{
	(void)tc, (void)op;
	released++;
}
static int x_addrs(void *tc, struct sockaddr_storage *local,
		   struct sockaddr_storage *peer)
{
	(void)tc, (void)local, (void)peer;
	return -ENOTCONN;
}
static int x_spin(void *tctx)
{
	(void)tctx;
	return 0;
}
static uint32_t x_grant(void *tc, uint32_t credits)
{
	(void)tc;
	return credits / 2;
}
static int x_rma_open(void *tc)
{
	(void)tc;
	return -EACCES;
}

/* every op set */
static const struct rmsgi_tr_ctx_ops full_ctx = {x_stop, x_fini, x_poll,
						 x_spin};
static const struct rmsgi_tr_listener_ops full_lst = {x_listen, x_close,
						      x_adopt, x_drop};
static const struct rmsgi_tr_conn_ops full_conn = {
	.connect = x_connect,
	.disconnect = x_disconnect,
	.post = x_post,
	.send_direct = x_send_direct,
	.direct_max = x_direct_max,
	.kick = x_kick,
	.rndv_release = x_rndv_release,
	.addrs = x_addrs,
	.grant = x_grant,
	.rma_open = x_rma_open,
};
/* only the required ones */
static const struct rmsgi_tr_ctx_ops min_ctx = {.fini = x_fini};
static const struct rmsgi_tr_listener_ops min_lst = {.listen = x_listen,
						     .close = x_close};
static const struct rmsgi_tr_conn_ops min_conn = {
	.connect = x_connect,
	.disconnect = x_disconnect,
	.post = x_post,
	.addrs = x_addrs,
};

static const struct rmsgi_tr tr_full = {"full", RMSGI_TR_CAP_RNDV, &full_ctx,
					&full_lst, &full_conn};
static const struct rmsgi_tr tr_min = {"min", 0, &min_ctx, &min_lst, &min_conn};

/* the real rows' shape, with the backends named in another order than
 * the schemes: tr_min's first row comes first, so it gets slot 0 */
const struct rmsgi_tr_row rmsgi_tr_rows[] = {
	{"tcp", &tr_min, NULL},
	{"rdma", &tr_full, NULL},
	{"auto", &tr_full, "tcp"},
	{NULL, NULL, NULL},
};

/* the check ran when the program was loaded: one slot per backend, not
 * per row, in the order the rows first name them */
static void registry_slots__from_rows(void **state)
{
	(void)state;
	assert_int_equal(rmsgi_tr_nslots, 2);
	assert_ptr_equal(rmsgi_tr_get(0), &tr_min);
	assert_ptr_equal(rmsgi_tr_get(1), &tr_full);
	assert_int_equal(rmsgi_tr_slot(&tr_min), 0);
	assert_int_equal(rmsgi_tr_slot(&tr_full), 1);
}

/* a scheme is found by its whole name, @len bytes of it */
static void registry_row__by_name(void **state)
{
	(void)state;
	assert_ptr_equal(rmsgi_tr_row("tcp", 3), &rmsgi_tr_rows[0]);
	assert_ptr_equal(rmsgi_tr_row("rdma", 4), &rmsgi_tr_rows[1]);
	assert_ptr_equal(rmsgi_tr_row("auto", 4), &rmsgi_tr_rows[2]);
	assert_ptr_equal(rmsgi_tr_row("tcp://h:1", 3), &rmsgi_tr_rows[0]);
	assert_null(rmsgi_tr_row("tc", 2));
	assert_null(rmsgi_tr_row("tcpx", 4));
	assert_null(rmsgi_tr_row("rdma", 3));
	assert_null(rmsgi_tr_row("", 0));
	assert_null(rmsgi_tr_row("TCP", 3));
}

/* a scheme's row, then each row's next: auto:// is RDMA, then TCP */
static void registry_for_scheme__rows_and_next(void **state)
{
	const struct rmsgi_tr *v[RMSGI_TR_MAX] = {NULL};

	(void)state;
	assert_int_equal(rmsgi_tr_for_scheme(rmsgi_tr_row("rdma", 4), v), 1);
	assert_ptr_equal(v[0], &tr_full);
	assert_int_equal(rmsgi_tr_for_scheme(rmsgi_tr_row("tcp", 3), v), 1);
	assert_ptr_equal(v[0], &tr_min);
	assert_int_equal(rmsgi_tr_for_scheme(rmsgi_tr_row("auto", 4), v), 2);
	assert_ptr_equal(v[0], &tr_full);
	assert_ptr_equal(v[1], &tr_min);
	assert_int_equal(rmsgi_tr_for_scheme(NULL, v), 0);
}

/* rows that pass: slots by first naming, chains up to RMSGI_TR_MAX */
static void registry_rows_check__good(void **state)
{
	struct rmsgi_tr b[RMSGI_TR_MAX];
	const struct rmsgi_tr *by_slot[RMSGI_TR_MAX] = {NULL};
	const char *name = NULL;
	unsigned n = 99, i;

	(void)state;
	for (i = 0; i < RMSGI_TR_MAX; i++)
		b[i] = tr_min;
	{
		const struct rmsgi_tr_row rows[] = {
			{"x", &b[1], NULL}, {"y", &b[0], "x"},
			{"z", &b[1], NULL}, {"w", &b[2], "y"},
			{"v", &b[3], "w"},  {NULL, NULL, NULL},
		};

		assert_null(rmsgi_tr_rows_check(rows, by_slot, &n, &name));
		assert_int_equal(n, 4);
		assert_ptr_equal(by_slot[0], &b[1]);
		assert_ptr_equal(by_slot[1], &b[0]);
		assert_ptr_equal(by_slot[2], &b[2]);
		assert_ptr_equal(by_slot[3], &b[3]);
	}
}

#define ROWS_BAD(why, ...)                                               \
	do {                                                             \
		const struct rmsgi_tr_row rows[] = {__VA_ARGS__,         \
						    {NULL, NULL, NULL}}; \
		const struct rmsgi_tr *by_slot[RMSGI_TR_MAX];            \
		const char *m, *name = NULL;                             \
		unsigned n = 99;                                         \
                                                                         \
		m = rmsgi_tr_rows_check(rows, by_slot, &n, &name);       \
		assert_non_null(m);                                      \
		assert_string_equal(m, why);                             \
		assert_non_null(name);                                   \
		assert_int_equal(n, 99);                                 \
	} while (0)

/* rows the library refuses to load with */
static void registry_rows_check__bad(void **state)
{
	struct rmsgi_tr b[RMSGI_TR_MAX + 1], nop = tr_min;
	unsigned i;

	(void)state;
	for (i = 0; i <= RMSGI_TR_MAX; i++)
		b[i] = tr_min;
	ROWS_BAD("scheme", {NULL, &b[0], NULL});
	ROWS_BAD("scheme", {"", &b[0], NULL});
	ROWS_BAD("scheme of its own (another row has it)", {"a", &b[0], NULL},
		 {"a", &b[1], NULL});
	ROWS_BAD("next (no row for that scheme)", {"a", &b[0], "b"});
	ROWS_BAD("next (no row for that scheme)", {"a", &b[0], "a "},
		 {"a", &b[1], NULL});
	/* a loop, and a chain that comes back to its first backend */
	ROWS_BAD("next (a chain that names a backend twice)", {"a", &b[0], "b"},
		 {"b", &b[1], "a"});
	ROWS_BAD("next (a chain that names a backend twice)", {"a", &b[0], "b"},
		 {"b", &b[1], "c"}, {"c", &b[0], NULL});
	ROWS_BAD("next (a chain that names a backend twice)",
		 {"a", &b[0], "a"});
	/* one backend more than there are slots */
	ROWS_BAD("slot (more backends than RMSGI_TR_MAX)", {"a", &b[0], NULL},
		 {"b", &b[1], NULL}, {"c", &b[2], NULL}, {"d", &b[3], NULL},
		 {"e", &b[4], NULL});
	/* a backend that lacks a required op */
	nop.conn = &(const struct rmsgi_tr_conn_ops){.connect = x_connect};
	ROWS_BAD("conn.disconnect", {"a", &b[0], NULL}, {"b", &nop, NULL});
}

static void registry_missing__complete(void **state)
{
	(void)state;
	assert_null(rmsgi_tr_missing(&tr_full));
	assert_null(rmsgi_tr_missing(&tr_min));
}

#define MISSING(field, name)                                \
	do {                                                \
		struct rmsgi_tr_ctx_ops cx = full_ctx;      \
		struct rmsgi_tr_listener_ops lx = full_lst; \
		struct rmsgi_tr_conn_ops ox = full_conn;    \
		struct rmsgi_tr t = tr_full;                \
		const char *m;                              \
                                                            \
		t.ctx = &cx;                                \
		t.lst = &lx;                                \
		t.conn = &ox;                               \
		field = NULL;                               \
		m = rmsgi_tr_missing(&t);                   \
		assert_non_null(m);                         \
		assert_string_equal(m, name);               \
	} while (0)

/* each required op, and the ops that go in pairs */
static void registry_missing__each_required(void **state)
{
	(void)state;
	MISSING(cx.fini, "ctx.fini");
	MISSING(lx.listen, "lst.listen");
	MISSING(lx.close, "lst.close");
	MISSING(lx.adopt, "lst.adopt and lst.drop");
	MISSING(lx.drop, "lst.adopt and lst.drop");
	MISSING(ox.connect, "conn.connect");
	MISSING(ox.disconnect, "conn.disconnect");
	MISSING(ox.post, "conn.post");
	MISSING(ox.addrs, "conn.addrs");
	MISSING(ox.direct_max, "conn.direct_max");
	/* a rendezvous backend releases what it pinned */
	MISSING(ox.rndv_release, "conn.rndv_release");
	MISSING(t.name, "name");
}

/* the wrappers call an op that is there, and do its default if not */
static void registry_wrappers__optional_ops(void **state)
{
	int x;

	(void)state;
	polled = stopped = kicked = released = 0;
	assert_true(rmsgi_tr_polls(&tr_full));
	assert_false(rmsgi_tr_polls(&tr_min));
	assert_int_equal(rmsgi_tr_poll(&tr_full, &x, true), 1);
	assert_int_equal(rmsgi_tr_poll(&tr_min, &x, true), 0);
	rmsgi_tr_stop(&tr_full, &x);
	rmsgi_tr_stop(&tr_min, &x);
	assert_true(rmsgi_tr_serves_group(&tr_full));
	assert_false(rmsgi_tr_serves_group(&tr_min));
	assert_true(rmsgi_tr_has_direct(&full_conn));
	assert_false(rmsgi_tr_has_direct(&min_conn));
	rmsgi_tr_kick(&full_conn, &x);
	rmsgi_tr_kick(&min_conn, &x);
	rmsgi_tr_rndv_release(&full_conn, &x, NULL);
	rmsgi_tr_rndv_release(&min_conn, &x, NULL);
	assert_int_equal(rmsgi_tr_grant(&full_conn, &x, 64), 32);
	assert_int_equal(rmsgi_tr_grant(&min_conn, &x, 64), 64);
	assert_int_equal(rmsgi_tr_rma_open(&full_conn, &x), -EACCES);
	assert_int_equal(rmsgi_tr_rma_open(&min_conn, &x), 0);
	assert_int_equal(polled, 1);
	assert_int_equal(stopped, 1);
	assert_int_equal(kicked, 1);
	assert_int_equal(released, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(registry_slots__from_rows),
		cmocka_unit_test(registry_row__by_name),
		cmocka_unit_test(registry_for_scheme__rows_and_next),
		cmocka_unit_test(registry_rows_check__good),
		cmocka_unit_test(registry_rows_check__bad),
		cmocka_unit_test(registry_missing__complete),
		cmocka_unit_test(registry_missing__each_required),
		cmocka_unit_test(registry_wrappers__optional_ops),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
