// SPDX-License-Identifier: MIT
/*
 * dial.c - shm://: finding the peer. Listeners' names (an abstract Unix
 * socket per address and port, shm.c's opening comment), which addresses
 * are this host's, connect (the names tried in turn, a port below 1024
 * only to root's listener) and listen; the setup that follows is shm.c's.
 */
#define _GNU_SOURCE
#include "tcp.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>

#define SHM_NAME "librmsg/shm/%s:%u"
#define SHM_PORT_MIN 49152
/* below it a TCP port is root's (the kernel's default
 * ip_unprivileged_port_start) */
#define SHM_PORT_PRIV 1024u

/* is @ss the wildcard address? */
static bool shm_any(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(
		&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* the same IP address (ports and scopes aside)? */
static bool shm_same(const struct sockaddr_storage *a,
		     const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr,
		       sizeof(struct in6_addr));
}

/* the abstract socket of a listener at @a's address and @port (@a NULL or
 * the wildcard: the one serving every address), as TCP binds an address
 * and a port: "librmsg/shm/ADDR:PORT", and "librmsg/shm/" "*:PORT" for
 * the wildcard */
static void shm_name(const struct sockaddr_storage *a, uint16_t port,
		     struct sockaddr_un *sa, socklen_t *len)
{
	char ip[INET6_ADDRSTRLEN] = "*";
	int n;

	if (a && !shm_any(a))
		inet_ntop(
			a->ss_family,
			a->ss_family == AF_INET
				? (const void *)&((const struct sockaddr_in *)a)
					  ->sin_addr
				: (const void *)&(
					  (const struct sockaddr_in6 *)a)
					  ->sin6_addr,
			ip, sizeof(ip));
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* abstract: sun_path[0] is 0 */
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, SHM_NAME, ip,
		     port);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

/* ------------------------------------------------------------------ */
/* connect and listen                                                   */

/* can this host bind @sa? Then it is one of its addresses */
bool tcp_shm_local(const struct sockaddr_storage *sa, socklen_t len)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	struct ifaddrs *ifs, *i;
	bool ok = false;

	(void)len;
	/* loopback and the wildcard are this host's whatever the
	 * interfaces say */
	if (sa->ss_family == AF_INET)
		ok = (ntohl(s4->sin_addr.s_addr) >> 24) == 127 ||
		     s4->sin_addr.s_addr == htonl(INADDR_ANY);
	else if (sa->ss_family == AF_INET6)
		ok = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
		     IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
	else
		return false;
	/* else an address of one of its interfaces (compared as bytes: a
	 * bind() test would say yes to any address with ip_nonlocal_bind,
	 * and no to a link-local one without its scope) */
	if (ok || getifaddrs(&ifs) < 0)
		return ok;
	for (i = ifs; i && !ok; i = i->ifa_next) {
		const struct sockaddr *a = i->ifa_addr;

		if (!a || a->sa_family != sa->ss_family)
			continue;
		if (a->sa_family == AF_INET)
			ok = ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
			     s4->sin_addr.s_addr;
		else
			ok = !memcmp(
				&((const struct sockaddr_in6 *)a)->sin6_addr,
				&s6->sin6_addr, sizeof(s6->sin6_addr));
	}
	freeifaddrs(ifs);
	return ok;
}

/* the two addresses the connection will report: the server's, dialed,
 * and the client's, the ?src= address if one was given (of this host
 * and the same family, else the errors a TCP connect gives) */
static int shm_src(struct tcp_conn *tc, const struct rmsgi_uri *u,
		   const struct rmsgi_addrs *to, unsigned at,
		   struct sockaddr_storage *cli, struct sockaddr_storage *srv)
{
	static _Atomic unsigned seq;
	uint16_t cport =
		(uint16_t)(SHM_PORT_MIN + ((unsigned)getpid() * 7919u +
					   atomic_fetch_add(&seq, 1)) %
						  (65536 - SHM_PORT_MIN));

	*srv = to->a[at];
	tcp_shm_addr(srv, u->port);
	*cli = to->a[at];
	if (u->src_len) {
		if (u->src.ss_family != srv->ss_family) {
			tcp_shm_why(tc, "the ?src= address is of "
					"another family than the "
					"peer's");
			return -EHOSTUNREACH;
		}
		if (!tcp_shm_local(&u->src, u->src_len))
			return -EADDRNOTAVAIL;
		*cli = u->src;
	}
	tcp_shm_addr(cli, cport);
	return 0;
}

/* connects to the listener of the first of @to's local addresses that has
 * one at @port, else to the wildcard's (a Unix socket connects at once,
 * or not); *@at: the address it was. The socket, or -1 and *@err
 * (-EHOSTUNREACH: no address of @to is this host's; -ECONNREFUSED: none
 * listens, or its backlog is full: *@full) */
static int shm_dial(const struct rmsgi_addrs *to, uint16_t port, unsigned *at,
		    int *err, bool *full)
{
	struct sockaddr_un sa;
	socklen_t salen;
	unsigned i;
	int fd, e;

	*err = -ECONNREFUSED;
	*at = to->n;
	for (i = 0; i <= to->n; i++) {
		const struct sockaddr_storage *a = i < to->n ? &to->a[i] : NULL;

		if (a && !tcp_shm_local(a, to->len[i]))
			continue;
		if (a && *at == to->n)
			*at = i; /* (the wildcard's address, if it is that) */
		if (!a && *at == to->n) {
			*err = -EHOSTUNREACH;
			return -1;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
		if (fd < 0) {
			*err = -errno;
			return -1;
		}
		shm_name(a, port, &sa, &salen);
		if (connect(fd, (struct sockaddr *)&sa, salen) == 0) {
			if (a)
				*at = i;
			*err = 0;
			return fd;
		}
		e = errno;
		close(fd);
		if (e == ECONNREFUSED || e == ENOENT)
			continue; /* no such name: the next */
		*full = e == EAGAIN;
		*err = *full ? -ECONNREFUSED : tcp_errno(e);
		return -1;
	}
	return -1;
}

/* is the peer at the other end of @fd root? */
static bool shm_peer_root(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	       cr.uid == 0;
}

int tcp_shm_connect(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		    const struct rmsgi_uri *u, const struct rmsgi_addrs *to)
{
	struct sockaddr_storage cli, srv;
	struct rmsgi_reaper *rp;
	struct tcp_conn *tc;
	bool full = false;
	unsigned at;
	int fd, err = 0;

	fd = shm_dial(to, u->port, &at, &err, &full);
	if (err == -EHOSTUNREACH) {
		if (!ci->try_first)
			rmsgi_conn_why(c,
				       "shm:// reaches this host only, and %s "
				       "is not one of its addresses",
				       u->host);
		return err;
	}
	if (fd >= 0 && u->port < SHM_PORT_PRIV && !shm_peer_root(fd)) {
		/* a port only root may bind over TCP: any user can take
		 * the name of it, so its listener must prove it is root */
		close(fd);
		fd = -1;
		err = -EACCES;
	}
	if (fd < 0 && ci->try_first)
		return err == -EACCES ? -ECONNREFUSED
				      : err; /* the next goes on */
	tc = tcp_client_new(ci->ctx, c, ci);
	if (!tc) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	tc->shm_pipe = true;
	ev_set_cb(&tc->rw, tcp_shm_cb);
	tcp_conn_set_fd(tc, fd);
	rp = tc->rp;
	tcp_enter(tc);
	tcp_timer_start(tc->t->env->loop, &tc->tmo, ci->dial_ms / 1000.0);
	if (err == -EACCES)
		rmsgi_conn_why(
			c,
			"the shm listener on port %u is not run by root, "
			"as a listener on a port below %u must be",
			u->port, SHM_PORT_PRIV);
	if (err) {
		if (err == -ECONNREFUSED)
			rmsgi_conn_why(c,
				       "nothing listens on shm port %u on "
				       "this host%s",
				       u->port,
				       full ? " (or its backlog is full)" : "");
		tcp_conn_end(tc, err, NULL);
		rmsgi_tr_leave(rp);
		return 0;
	}
	err = shm_src(tc, u, to, at, &cli, &srv);
	if (!err) {
		err = tcp_shm_offer(tc, &cli, &srv);
		if (err)
			rmsgi_conn_why(c, "no shared mapping: %s",
				       rmsg_strerror(err));
	}
	if (err) {
		tcp_conn_end(tc, err, NULL);
		rmsgi_tr_leave(rp);
		return 0;
	}
	tcp_connected(tc);
	tcp_leave(tc);
	return 0;
}

/* the local addresses a listener's @host names, up to TCP_LISTEN_MAX
 * (none for the wildcard: *@n 0): 0, or -EADDRNOTAVAIL (an address not
 * of this host, as TCP could not bind it) */
static int shm_listen_addrs(const char *host, struct sockaddr_storage *a,
			    int *n)
{
	struct addrinfo hints, *res, *ai;
	int ret = 0, i;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	if (getaddrinfo(host, NULL, &hints, &res))
		return -EADDRNOTAVAIL;
	*n = 0;
	for (ai = res; ai && !ret; ai = ai->ai_next) {
		struct sockaddr_storage ss;

		if (ai->ai_addrlen > sizeof(ss))
			continue;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		if (!tcp_shm_local(&ss, ai->ai_addrlen)) {
			ret = -EADDRNOTAVAIL;
		} else if (shm_any(&ss)) {
			*n = 0; /* the wildcard serves them all */
			break;
		} else if (*n < TCP_LISTEN_MAX) {
			for (i = 0; i < *n && !shm_same(&a[i], &ss); i++)
				;
			if (i == *n)
				a[(*n)++] = ss;
		}
	}
	freeaddrinfo(res);
	return ret;
}

/* a listening socket on each name of @a (@n; 0: the wildcard) at @port,
 * into @fds; 0, or the first bind's error with nothing left open */
static int shm_bind_all(const struct sockaddr_storage *a, int n, uint16_t port,
			int *fds)
{
	struct sockaddr_un sa;
	socklen_t salen;
	int i, k, ret = 0;

	for (i = 0; i < (n ? n : 1) && !ret; i++) {
		fds[i] = socket(AF_UNIX,
				SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fds[i] < 0) {
			ret = -errno;
			break;
		}
		shm_name(n ? &a[i] : NULL, port, &sa, &salen);
		if (bind(fds[i], (struct sockaddr *)&sa, salen) < 0 ||
		    listen(fds[i], SOMAXCONN) < 0) {
			ret = -errno;
			close(fds[i]);
			break;
		}
	}
	if (ret)
		for (k = 0; k < i; k++)
			close(fds[k]);
	return ret;
}

int tcp_shm_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		   const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p)
{
	struct tcp_ctx *t = tcp_ctx_get(ctx);
	struct sockaddr_storage a[TCP_LISTEN_MAX];
	int fds[TCP_LISTEN_MAX];
	uint16_t port = u->port;
	int n, i, ret;

	if (!t)
		return -ENOMEM;
	ret = shm_listen_addrs(u->host, a, &n);
	if (ret)
		return ret;
	/* port 0: a free one of the dynamic range, as the kernel picks
	 * for TCP (auto:// gives the port TCP got) */
	for (i = 0;; i++) {
		if (!u->port) {
			uint32_t r;

			if (getrandom(&r, sizeof(r), GRND_NONBLOCK) !=
			    sizeof(r))
				r = (uint32_t)getpid() * 2654435761u +
				    (uint32_t)i;
			port = (uint16_t)(49152 + r % 16384);
		}
		ret = shm_bind_all(a, n, port, fds);
		if (!ret)
			break;
		if (u->port || ret != -EADDRINUSE || i == 63)
			return ret;
	}
	ret = tcp_listener_new(t, l, &rmsgi_tr_shm, fds, n ? n : 1, port, tl_p);
	if (ret) {
		for (i = 0; i < (n ? n : 1); i++)
			close(fds[i]);
		return ret;
	}
	*port_p = port;
	return 0;
}
