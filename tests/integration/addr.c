// SPDX-License-Identifier: MIT
/*
 * addr.c - a connection's two addresses (rmsg_conn_peer_addr,
 * rmsg_conn_local_addr) over the transport under test: what the server
 * sees as its peer is the client's own address and port, and the client's
 * peer is the listener's address and port, alike in the accept callback,
 * in on_established on both sides and in on_close. Also with ?src=, over
 * IPv6 (TCP: ::1; RDMA: an IPv6 address of the device's interface, if it
 * has one), and after an auto:// fallback to TCP (the TCP connection's).
 * Not known right after rmsg_connect(), nor in on_close of a refused or
 * failed connect: -ENOTCONN.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

/* what one side saw */
struct side {
	const char *name;
	struct rmsg_conn *c;
	int n_acc, n_est, n_close;
	int close_reason;
	int close_peer_ret, close_local_ret;
	struct sockaddr_storage acc_peer, acc_local;
	struct sockaddr_storage est_peer, est_local;
	struct sockaddr_storage close_peer, close_local;
	char est_transport[8];
};

static struct side srv, cli;
static int reject; /* the accept callback refuses */
static struct ev_loop *loop;
static int checked; /* connections whose addresses were checked */

static void both(struct rmsg_conn *c, struct sockaddr_storage *peer,
		 struct sockaddr_storage *local, const char *who,
		 const char *where)
{
	int ret;

	ret = rmsg_conn_peer_addr(c, peer);
	T_ASSERT(ret == 0, "%s %s: rmsg_conn_peer_addr = %d (%s)", who, where,
		 ret, rmsg_strerror(ret));
	ret = rmsg_conn_local_addr(c, local);
	T_ASSERT(ret == 0, "%s %s: rmsg_conn_local_addr = %d (%s)", who, where,
		 ret, rmsg_strerror(ret));
}

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t pdlen, void *arg)
{
	struct side *s = arg;

	s->n_acc++;
	both(c, &s->acc_peer, &s->acc_local, s->name, "in accept");
	T_OK(rmsg_conn_set_arg(c, s));
	return reject ? -EACCES : 0;
}

static void on_est(struct rmsg_conn *c, void *arg)
{
	struct side *s = arg;

	s->n_est++;
	s->c = c;
	both(c, &s->est_peer, &s->est_local, s->name, "in on_established");
	snprintf(s->est_transport, sizeof(s->est_transport), "%s",
		 rmsg_conn_transport(c));
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct side *s = arg;

	s->n_close++;
	s->close_reason = reason;
	memset(&s->close_peer, 0, sizeof(s->close_peer));
	memset(&s->close_local, 0, sizeof(s->close_local));
	s->close_peer_ret = rmsg_conn_peer_addr(c, &s->close_peer);
	s->close_local_ret = rmsg_conn_local_addr(c, &s->close_local);
	s->c = NULL;
}

static const struct rmsg_conn_ops ops = {
	.on_established = on_est,
	.on_close = on_close,
};

static void reset(void)
{
	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	srv.name = "server";
	cli.name = "client";
}

/* ------------------------------------------------------------------ */
/* addresses                                                            */

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return 0;
}

/* the address without its port, as text */
static const char *text(const struct sockaddr_storage *ss, char *buf,
			size_t len)
{
	const void *a = NULL;

	if (ss->ss_family == AF_INET)
		a = &((const struct sockaddr_in *)ss)->sin_addr;
	else if (ss->ss_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!a || !inet_ntop(ss->ss_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "(family %d)", ss->ss_family);
	return buf;
}

/* same family and address (the scope of a link-local address aside) */
static int same_host(const struct sockaddr_storage *a,
		     const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			       &((const struct sockaddr_in *)b)->sin_addr,
			       sizeof(struct in_addr));
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return 0;
}

/* fails unless @got is @want's address with @want's port */
static void expect(const char *what, const struct sockaddr_storage *got,
		   const struct sockaddr_storage *want)
{
	char g[INET6_ADDRSTRLEN + 16], w[INET6_ADDRSTRLEN + 16];

	T_ASSERT(same_host(got, want) && port_of(got) == port_of(want),
		 "%s: %s port %u, expected %s port %u", what,
		 text(got, g, sizeof(g)), port_of(got),
		 text(want, w, sizeof(w)), port_of(want));
}

/* @host (numeric, a link-local IPv6 one with "%if") and @port */
static void numeric(struct sockaddr_storage *ss, const char *host,
		    uint16_t port)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	char h[INET6_ADDRSTRLEN + IF_NAMESIZE];
	char *pct;

	snprintf(h, sizeof(h), "%s", host);
	pct = strchr(h, '%');
	if (pct)
		*pct = '\0';
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, h, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, h, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
	} else {
		T_FAIL("not a numeric address: %s", host);
	}
}

/* ------------------------------------------------------------------ */
/* the cases                                                            */

/* "scheme://host:port" with brackets around an IPv6 @host */
static void uri_of(char *buf, size_t len, const char *scheme, const char *host,
		   uint16_t port)
{
	if (strchr(host, ':'))
		snprintf(buf, len, "%s://[%s]:%u", scheme, host, port);
	else
		snprintf(buf, len, "%s://%s:%u", scheme, host, port);
}

/*
 * A listener at @lscheme://@host, a client to it with @cscheme (and
 * "?src=@src" if given), which must run on @want_transport: both sides
 * see each other's addresses, from the accept callback (server) and
 * on_established to on_close.
 */
static void one(struct rmsg_ctx *ctx, const char *lscheme, const char *cscheme,
		const char *host, const char *src, const char *want_transport)
{
	struct sockaddr_storage lis_addr, src_addr, ss;
	struct rmsg_listener *l;
	struct rmsg_conn *c;
	char uri[256], q[128] = "";
	uint16_t port;
	int ret;

	reset();
	uri_of(uri, sizeof(uri), lscheme, host, 0);
	T_OK(rmsg_listen(ctx, uri, NULL, &ops, on_accept, &srv, &l));
	T_OK(rmsg_listener_port(l, &port));
	numeric(&lis_addr, host, port);
	if (src)
		snprintf(q, sizeof(q), "?src=%s", src);
	uri_of(uri, sizeof(uri) - sizeof(q), cscheme, host, port);
	strcat(uri, q);
	T_OK(rmsg_connect(ctx, uri, NULL, &ops, &cli, &c));
	/* still connecting: not known yet */
	memset(&ss, 0x5a, sizeof(ss));
	ret = rmsg_conn_peer_addr(c, &ss);
	/* covers: rmsg_conn_peer_addr.3 ENOTCONN */
	T_ASSERT(ret == -ENOTCONN, "%s: peer address while connecting: %d", uri,
		 ret);
	ret = rmsg_conn_local_addr(c, &ss);
	/* covers: rmsg_conn_local_addr.3 ENOTCONN */
	T_ASSERT(ret == -ENOTCONN, "%s: local address while connecting: %d",
		 uri, ret);
	/* covers: rmsg_conn_peer_addr.3 EINVAL */
	T_ASSERT(rmsg_conn_peer_addr(c, NULL) == -EINVAL, "NULL ss");
	/* covers: rmsg_conn_local_addr.3 EINVAL */
	T_ASSERT(rmsg_conn_local_addr(NULL, &ss) == -EINVAL, "NULL conn");

	T_RUN_UNTIL(loop, srv.n_est == 1 && cli.n_est == 1, 30);
	T_ASSERT(srv.n_acc == 1, "accept callback ran %d times", srv.n_acc);
	T_ASSERT(!strcmp(cli.est_transport, want_transport),
		 "%s: runs on %s, expected %s", uri, cli.est_transport,
		 want_transport);
	/* the client reached the listener's address and port ... */
	expect("client's peer", &cli.est_peer, &lis_addr);
	expect("server's local address in accept", &srv.acc_local, &lis_addr);
	/* ... from an address and port of its own, which the server sees */
	T_ASSERT(port_of(&cli.est_local) != 0, "client's local port 0");
	expect("server's peer in accept", &srv.acc_peer, &cli.est_local);
	if (src) {
		numeric(&src_addr, src, port_of(&cli.est_local));
		expect("client's local address with ?src=", &cli.est_local,
		       &src_addr);
	}
	/* the same in the server's on_established */
	expect("server's peer in on_established", &srv.est_peer, &srv.acc_peer);
	expect("server's local address in on_established", &srv.est_local,
	       &srv.acc_local);

	T_OK(rmsg_conn_close(cli.c));
	T_RUN_UNTIL(loop, srv.n_close == 1 && cli.n_close == 1, 30);
	T_OK(rmsg_listener_close(l));
	/* on_close still has them, after the transport let go */
	T_ASSERT(cli.close_peer_ret == 0 && cli.close_local_ret == 0,
		 "client's on_close: %d %d", cli.close_peer_ret,
		 cli.close_local_ret);
	T_ASSERT(srv.close_peer_ret == 0 && srv.close_local_ret == 0,
		 "server's on_close: %d %d", srv.close_peer_ret,
		 srv.close_local_ret);
	expect("client's peer in on_close", &cli.close_peer, &cli.est_peer);
	expect("client's local address in on_close", &cli.close_local,
	       &cli.est_local);
	expect("server's peer in on_close", &srv.close_peer, &srv.acc_peer);
	expect("server's local address in on_close", &srv.close_local,
	       &srv.acc_local);
	checked++;
	{
		char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];

		printf("%s: %s port %u -> %s port %u ok\n", uri,
		       text(&cli.est_local, a, sizeof(a)),
		       port_of(&cli.est_local),
		       text(&cli.est_peer, b, sizeof(b)),
		       port_of(&cli.est_peer));
	}
}

/* a connect that the listener refuses, and one that nobody answers: the
 * client's on_close knows no addresses */
static void refused(struct rmsg_ctx *ctx, const char *host)
{
	struct sockaddr_storage lis_addr;
	struct rmsg_listener *l;
	struct rmsg_conn *c;
	char uri[256];
	uint16_t port;

	reset();
	reject = 1;
	uri_of(uri, sizeof(uri), t_transport(), host, 0);
	T_OK(rmsg_listen(ctx, uri, NULL, &ops, on_accept, &srv, &l));
	T_OK(rmsg_listener_port(l, &port));
	numeric(&lis_addr, host, port);
	uri_of(uri, sizeof(uri), t_transport(), host, port);
	T_OK(rmsg_connect(ctx, uri, NULL, &ops, &cli, &c));
	T_RUN_UNTIL(loop, cli.n_close == 1, 30);
	reject = 0;
	T_ASSERT(cli.close_reason == -ECONNREFUSED, "refused: reason %d (%s)",
		 cli.close_reason, rmsg_strerror(cli.close_reason));
	/* the accept callback knew who knocked; the refused client never
	 * learns anything */
	T_ASSERT(srv.n_acc == 1 && srv.n_est == 0 && srv.n_close == 0,
		 "server callbacks: %d %d %d", srv.n_acc, srv.n_est,
		 srv.n_close);
	expect("server's local address in a refusing accept", &srv.acc_local,
	       &lis_addr);
	T_ASSERT(port_of(&srv.acc_peer) != 0, "refused peer's port 0");
	/* covers: rmsg_conn_peer_addr.3 ENOTCONN */
	T_ASSERT(cli.close_peer_ret == -ENOTCONN,
		 "refused: peer address in on_close: %d", cli.close_peer_ret);
	/* covers: rmsg_conn_local_addr.3 ENOTCONN */
	T_ASSERT(cli.close_local_ret == -ENOTCONN,
		 "refused: local address in on_close: %d", cli.close_local_ret);

	/* the same port with nobody listening any more */
	T_OK(rmsg_listener_close(l));
	reset();
	T_OK(rmsg_connect(ctx, uri, NULL, &ops, &cli, &c));
	T_RUN_UNTIL(loop, cli.n_close == 1, 30);
	T_ASSERT(cli.close_reason < 0, "nobody listening: reason %d",
		 cli.close_reason);
	T_ASSERT(cli.close_peer_ret == -ENOTCONN &&
			 cli.close_local_ret == -ENOTCONN,
		 "failed connect: addresses in on_close: %d %d",
		 cli.close_peer_ret, cli.close_local_ret);
	printf("%s: refused and failed connects know no addresses ok\n", uri);
}

static int have_ipv6_loopback(void)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6,
				  .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int fd = socket(AF_INET6, SOCK_STREAM, 0), ok;

	if (fd < 0)
		return 0;
	ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* an IPv6 address of the interface that has the IPv4 address @v4 (the
 * RDMA device's netdev), "addr%if" for a link-local one; 0 if none */
static int ipv6_beside(const char *v4, char *buf, size_t len)
{
	struct ifaddrs *ifa, *i, *j;
	struct in_addr want;
	int found = 0;

	if (inet_pton(AF_INET, v4, &want) != 1 || getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr,
			   &want, sizeof(want)))
			continue;
		for (j = ifa; j && !found; j = j->ifa_next) {
			struct sockaddr_in6 *s6;
			char a[INET6_ADDRSTRLEN];

			if (!j->ifa_addr ||
			    j->ifa_addr->sa_family != AF_INET6 ||
			    strcmp(j->ifa_name, i->ifa_name))
				continue;
			s6 = (struct sockaddr_in6 *)j->ifa_addr;
			inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
			if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
				snprintf(buf, len, "%s%%%s", a, j->ifa_name);
			else
				snprintf(buf, len, "%s", a);
			found = 1;
		}
	}
	freeifaddrs(ifa);
	return found;
}

int main(void)
{
	const char *tr = t_transport();
	const char *addr = getenv("RMSG_TEST_ADDR");
	struct rmsg_ctx *ctx;
	char v6[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "";

	t_require_transport();
	if (!addr || !*addr)
		addr = "127.0.0.1";
	loop = ev_default_loop(0);
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	t_deadline(loop, 240);

	one(ctx, tr, tr, addr, NULL, tr);
	/* a source address: on loopback one that is not the default */
	one(ctx, tr, tr, addr,
	    !strcmp(tr, "tcp") && !strcmp(addr, "127.0.0.1") ? "127.0.0.2"
							     : addr,
	    tr);
	refused(ctx, addr);
	/* auto:// to a TCP-only listener: over TCP (RDMA is refused or
	 * absent), with the TCP connection's addresses */
	one(ctx, "tcp", "auto", addr, NULL, "tcp");

	if (!strcmp(tr, "tcp")) {
		/* IPv6 must work wherever TCP runs; a host without ::1
		 * fails here rather than pass without the case */
		T_ASSERT(have_ipv6_loopback(), "no IPv6 loopback (::1)");
		one(ctx, tr, tr, "::1", NULL, tr);
		one(ctx, tr, tr, "::1", "::1", tr);
		snprintf(v6, sizeof(v6), "::1");
	} else if (ipv6_beside(addr, v6, sizeof(v6))) {
		one(ctx, tr, tr, v6, NULL, tr);
	} else {
		printf("%s: no IPv6 address on the interface of %s: "
		       "IPv6 case not run\n",
		       tr, addr);
	}
	T_OK(rmsg_ctx_destroy(ctx));
	/* the summary run-all.sh shows */
	printf("addr: %s: %d connections agree on both sides' addresses "
	       "(IPv6: %s), refused and failed connects know none\n",
	       tr, checked, *v6 ? v6 : "not run");
	return 0;
}
