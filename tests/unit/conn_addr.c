// SPDX-License-Identifier: MIT
/*
 * conn_addr.c - unit tests of a connection's addresses in the core
 * (rmsg_conn_peer_addr, rmsg_conn_local_addr; src/conn.c) against the
 * fake transport (fake_tr.h): the core asks the backend's addrs op before
 * the accept callback and at establishment, and the app reads what it
 * kept until on_close, after the backend's endpoint went.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "conn_t.h"

/* what the app saw of the addresses in one callback */
struct seen {
	int n;	       /* times the callback ran */
	int peer_ret;  /* rmsg_conn_peer_addr() */
	int local_ret; /* rmsg_conn_local_addr() */
	int naddrs;    /* the fake's addrs() calls by then */
	struct sockaddr_storage peer, local;
};

static struct seen in_accept, in_est, in_close;

static void look(struct rmsg_conn *c, struct seen *s)
{
	s->n++;
	s->naddrs = ft.naddrs;
	memset(&s->peer, 0xa5, sizeof(s->peer));
	memset(&s->local, 0xa5, sizeof(s->local));
	s->peer_ret = rmsg_conn_peer_addr(c, &s->peer);
	s->local_ret = rmsg_conn_local_addr(c, &s->local);
}

static void a_established(struct rmsg_conn *c, void *arg)
{
	struct t *t = arg;

	look(c, &in_est);
	t->established++;
}

static void a_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct t *t = arg;

	look(c, &in_close);
	t->closed++;
	t->close_reason = reason;
	if (t->c == c)
		t->c = NULL; /* freed after this (teardown must not look) */
}

static const struct rmsg_conn_ops aops = {
	.on_established = a_established,
	.on_close = a_close,
};

static int a_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		    const void *pdata, size_t len, void *arg)
{
	(void)l;
	(void)pdata;
	(void)len;
	(void)arg;
	look(c, &in_accept);
	return 0;
}

static void sin4(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in *sa = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &sa->sin_addr), 1);
}

static void sin6(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in6 *sa = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	sa->sin6_family = AF_INET6;
	sa->sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, ip, &sa->sin6_addr), 1);
}

/* the backend has its endpoint's addresses: these */
static void tr_has(void)
{
	sin4(&ft.addr_local, "10.1.2.3", 4321);
	sin6(&ft.addr_peer, "fd00::7", 7000);
}

/* what tr_has() gave, as the app read it in @s */
static void saw_them(const struct seen *s)
{
	struct sockaddr_storage l, p;

	sin4(&l, "10.1.2.3", 4321);
	sin6(&p, "fd00::7", 7000);
	assert_int_equal(s->n, 1);
	assert_int_equal(s->peer_ret, 0);
	assert_int_equal(s->local_ret, 0);
	assert_memory_equal(&s->peer, &p, sizeof(p));
	assert_memory_equal(&s->local, &l, sizeof(l));
}

/* the backend's endpoint is gone: it knows no addresses, or others */
static void tr_forgets(void)
{
	ft.addrs_ret = -ENOTCONN;
	sin4(&ft.addr_local, "192.0.2.1", 1);
	sin4(&ft.addr_peer, "192.0.2.2", 2);
}

static void saw_none(const struct seen *s)
{
	uint8_t untouched[sizeof(struct sockaddr_storage)];

	memset(untouched, 0xa5, sizeof(untouched));
	assert_int_equal(s->n, 1);
	assert_int_equal(s->peer_ret, -ENOTCONN);
	assert_int_equal(s->local_ret, -ENOTCONN);
	/* output parameters are written only on success */
	assert_memory_equal(&s->peer, untouched, sizeof(untouched));
	assert_memory_equal(&s->local, untouched, sizeof(untouched));
}

static int addr_setup(void **state)
{
	struct t *t;

	setup(state);
	t = *state;
	t->c->ops = aops;
	memset(&in_accept, 0, sizeof(in_accept));
	memset(&in_est, 0, sizeof(in_est));
	memset(&in_close, 0, sizeof(in_close));
	return 0;
}

#define ADDR_T(f) cmocka_unit_test_setup_teardown(f, addr_setup, teardown)

/* a server connection over the fake: the peer's hello arrives */
static int request(struct t *t)
{
	struct rmsgi_hello h = {.credits = 16, .eager_size = 4096};
	struct rmsgi_hello reply;
	struct rmsg_listener l;

	memset(&l, 0, sizeof(l));
	l.accept = a_accept;
	l.ops = aops;
	l.arg = t;
	t->c->arg = t;
	return rmsgi_conn_ev_request(t->c, &l, &h, &reply);
}

static void conn_peer_addr__bad_args(void **state)
{
	struct t *t = *state;
	struct sockaddr_storage ss;

	/* covers: rmsg_conn_peer_addr.3 EINVAL */
	assert_int_equal(rmsg_conn_peer_addr(NULL, &ss), -EINVAL);
	/* covers: rmsg_conn_peer_addr.3 EINVAL */
	assert_int_equal(rmsg_conn_peer_addr(t->c, NULL), -EINVAL);
	/* covers: rmsg_conn_local_addr.3 EINVAL */
	assert_int_equal(rmsg_conn_local_addr(NULL, &ss), -EINVAL);
	/* covers: rmsg_conn_local_addr.3 EINVAL */
	assert_int_equal(rmsg_conn_local_addr(t->c, NULL), -EINVAL);
	/* also once they are known */
	tr_has();
	establish(t, 32, 8192);
	assert_int_equal(rmsg_conn_peer_addr(t->c, NULL), -EINVAL);
	assert_int_equal(rmsg_conn_local_addr(t->c, NULL), -EINVAL);
}

/* a client learns them when established, and keeps them past the
 * backend's end, in on_close */
static void conn_peer_addr__client(void **state)
{
	struct t *t = *state;
	struct seen before = {0};

	tr_has();
	look(t->c, &before);
	/* covers: rmsg_conn_peer_addr.3 ENOTCONN */
	saw_none(&before);
	establish(t, 32, 8192);
	saw_them(&in_est);
	tr_forgets();
	assert_int_equal(rmsg_conn_close(t->c), 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	saw_them(&in_close);
}

/* the accept callback already sees them: the core asked the backend
 * before it; on_established and on_close see the same */
static void conn_peer_addr__in_accept(void **state)
{
	struct t *t = *state;

	tr_has();
	assert_int_equal(request(t), 0);
	saw_them(&in_accept);
	assert_true(in_accept.naddrs >= 1);
	/* a backend that cannot tell any more at establishment (its peer
	 * reset meanwhile) takes nothing away */
	tr_forgets();
	rmsgi_conn_ev_established(t->c, NULL);
	saw_them(&in_est);
	rmsgi_conn_ev_failed(t->c, -ECONNRESET, NULL);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ECONNRESET);
	saw_them(&in_close);
}

/* accepted, then the handshake failed: on_close still has them */
static void conn_peer_addr__accepted_then_failed(void **state)
{
	struct t *t = *state;

	tr_has();
	assert_int_equal(request(t), 0);
	tr_forgets();
	rmsgi_conn_ev_failed(t->c, -ETIMEDOUT, NULL);
	tr_down(t->c);
	flush(t);
	assert_int_equal(in_est.n, 0);
	assert_int_equal(t->closed, 1);
	saw_them(&in_close);
}

/* a refused connect never had them */
static void conn_peer_addr__refused(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {.status = -ECONNREFUSED};

	tr_has();
	rmsgi_conn_ev_failed(t->c, -ECONNREFUSED, &h);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ECONNREFUSED);
	/* covers: rmsg_conn_local_addr.3 ENOTCONN */
	saw_none(&in_close);
}

/* a backend that cannot tell at establishment: not known */
static void conn_peer_addr__backend_cannot_tell(void **state)
{
	struct t *t = *state;

	tr_forgets();
	establish(t, 32, 8192);
	saw_none(&in_est);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		ADDR_T(conn_peer_addr__bad_args),
		ADDR_T(conn_peer_addr__client),
		ADDR_T(conn_peer_addr__in_accept),
		ADDR_T(conn_peer_addr__accepted_then_failed),
		ADDR_T(conn_peer_addr__refused),
		ADDR_T(conn_peer_addr__backend_cannot_tell),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
