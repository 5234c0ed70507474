// SPDX-License-Identifier: MIT
/*
 * shm.c - the stream backend's second pipe: shm://, two processes on one
 * host. The frames, the handshake, credits, the byte window and every
 * rule of the TCP backend stay as they are; only the bytes travel
 * differently: through two single-producer, single-consumer byte rings
 * in a mapping both processes share, with a Unix socket beside them for
 * the setup, the wake-ups and the end.
 *
 * Naming: a listener at shm://HOST:PORT is an abstract Unix socket of
 * the caller's network namespace per address HOST names,
 * "librmsg/shm/ADDR:PORT" (one "*:PORT" for the wildcard address), as a
 * TCP listener binds its addresses and port. A client's HOST must be an
 * address of this host (loopback, or an interface's), else -EHOSTUNREACH:
 * the peer named is elsewhere and shared memory cannot reach it; it
 * connects to the name of the first of HOST's addresses that has one,
 * else to the wildcard's. A name has no owner, so below port 1024 (root's
 * over TCP) the listener must be root (SO_PEERCRED), else -EACCES.
 *
 * Setup: the client makes the mapping (a memfd: TCP_SHM_MAP bytes, the two
 * ring headers in its first page, then the client's ring, then the
 * server's), seals its size (so the peer can never shrink it under us:
 * a SIGBUS), and passes it (SCM_RIGHTS) with its first SHM_SETUP bytes
 * on the socket: the address it dialed and the two ports. The server
 * takes the mapping only if it is sealed so and has exactly that size;
 * anything else ends the connection (-EPROTO) before the HELLO is read.
 * Every descriptor beyond that one is closed.
 *
 * Addresses: a Unix socket has none, so both ends report the host
 * address the client dialed; the server's port is the listener's, the
 * client's a number its library picked (SHM_PORT_MIN up) to tell its
 * connections apart, which no socket holds. As the setup says them they
 * are the peer's claim, like everything it sends.
 *
 * The rings. Each side keeps its own position (what it wrote, or read) in
 * private memory and only publishes it; it reads the peer's position
 * once, checks it (never more than a ring's bytes apart from its own:
 * -EPROTO), then copies the bytes out before the frame parser sees them,
 * so a peer that scribbles over the mapping can send garbage, as over
 * TCP, and nothing more. A reader about to wait sets its ring's rx_sleep
 * and looks once more; a writer that published bytes wakes a sleeping
 * reader with one byte on the socket. A writer that finds the ring full
 * sets tx_sleep and looks once more; the reader wakes it the same way. So
 * while both ends are busy no system call is made per message.
 *
 * The end: a FIN (shutdown) or the peer's exit closes the socket; the
 * reader takes what is left in the ring, then ends as TCP does on a FIN.
 */
#define _GNU_SOURCE
#include "tcp.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/un.h>

#define SHM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* wake-up bytes taken off the socket per look */
#define SHM_DRAIN 256
/* the setup: 'S', the family (4 or 6), the client's port, the server's
 * port (both big-endian), the client's address, the server's (16 bytes
 * each; IPv4 in the first 4) */
#define SHM_SETUP 38

static uint8_t *shm_ip(struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (uint8_t *)&((struct sockaddr_in *)ss)->sin_addr;
	return (uint8_t *)&((struct sockaddr_in6 *)ss)->sin6_addr;
}

/* @cli and @srv: one family, their ports set */
static void shm_setup_encode(uint8_t *b, struct sockaddr_storage *cli,
			     struct sockaddr_storage *srv)
{
	size_t n = cli->ss_family == AF_INET ? 4 : 16;
	uint16_t cport = ntohs(((struct sockaddr_in *)cli)->sin_port);
	uint16_t sport = ntohs(((struct sockaddr_in *)srv)->sin_port);

	memset(b, 0, SHM_SETUP);
	b[0] = 'S';
	b[1] = n == 4 ? 4 : 6;
	b[2] = (uint8_t)(cport >> 8);
	b[3] = (uint8_t)cport;
	b[4] = (uint8_t)(sport >> 8);
	b[5] = (uint8_t)sport;
	memcpy(b + 6, shm_ip(cli), n);
	memcpy(b + 22, shm_ip(srv), n);
}

/* the client's address into @peer and the server's into @local; false:
 * not a setup */
static bool shm_setup_decode(const uint8_t *b, struct sockaddr_storage *peer,
			     struct sockaddr_storage *local)
{
	size_t n = b[1] == 4 ? 4 : 16;

	if (b[0] != 'S' || (b[1] != 4 && b[1] != 6))
		return false;
	memset(peer, 0, sizeof(*peer));
	peer->ss_family = n == 4 ? AF_INET : AF_INET6;
	*local = *peer;
	memcpy(shm_ip(peer), b + 6, n);
	memcpy(shm_ip(local), b + 22, n);
	tcp_shm_addr(peer, (uint16_t)(b[2] << 8 | b[3]));
	tcp_shm_addr(local, (uint16_t)(b[4] << 8 | b[5]));
	return true;
}

int tcp_shm_addrs(const struct tcp_conn *tc, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer)
{
	if (!tc->shm || tc->ended)
		return -ENOTCONN;
	*local = tc->shm->local;
	*peer = tc->shm->peer;
	return 0;
}

void tcp_shm_peek(int fd, struct sockaddr_storage *peer)
{
	struct sockaddr_storage local;
	uint8_t b[SHM_SETUP];

	/* (no room for descriptors: a peek installs none) */
	if (recv(fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT) ==
		    (ssize_t)sizeof(b) &&
	    shm_setup_decode(b, peer, &local) &&
	    tcp_shm_local(peer, sizeof(*peer)))
		return;
	memset(peer, 0, sizeof(*peer));
	peer->ss_family = AF_INET;
	((struct sockaddr_in *)peer)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* the client's mapping, made and passed with the setup */
int tcp_shm_offer(struct tcp_conn *tc, struct sockaddr_storage *cli,
		  struct sockaddr_storage *srv)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	uint8_t setup[SHM_SETUP];
	struct iovec iov = {.iov_base = setup, .iov_len = sizeof(setup)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;
	int fd, ret = 0;

	fd = memfd_create("librmsg-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)TCP_SHM_MAP) < 0 ||
	    fcntl(fd, F_ADD_SEALS, SHM_SEALS) < 0) {
		ret = -errno;
		goto out;
	}
	tc->shm = tcp_shm_map(fd, false);
	if (!tc->shm) {
		ret = -ENOMEM;
		goto out;
	}
	tc->shm->local = *cli;
	tc->shm->peer = *srv;
	shm_setup_encode(setup, cli, srv);
	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	errno = 0;
	if (sendmsg(tc->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(setup))
		ret = errno ? -errno : -EIO;
	/* the listener refused us and closed before our setup went: its
	 * REJECT ('R') and its end wait on the socket's read side */
	if (ret == -EPIPE || ret == -ECONNRESET)
		ret = 0;
out:
	close(fd);
	return ret;
}

/* the server's side of the setup: the client's mapping, checked */
static int shm_accept_map(struct tcp_conn *tc, int fd)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0 || (seals & SHM_SEALS) != SHM_SEALS ||
	    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size != (off_t)TCP_SHM_MAP) {
		tcp_shm_why(tc, "the peer's shared mapping is not a "
				"sealed memfd of the expected size");
		return -EPROTO;
	}
	tc->shm = tcp_shm_map(fd, true);
	if (!tc->shm) {
		tcp_shm_why(tc, "the peer's shared mapping could not "
				"be mapped");
		return -EPROTO;
	}
	return 0;
}

/* descriptors that came with a byte: the server's first one is the
 * mapping; every other is closed, and is a protocol error */
static int shm_fds(struct tcp_conn *tc, struct msghdr *mh)
{
	struct cmsghdr *cm;
	int ret = 0;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t i, n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(int));
			if (!ret && tc->server && !tc->shm && i == 0)
				ret = shm_accept_map(tc, fd);
			else
				ret = -EPROTO;
			close(fd);
		}
	}
	if (mh->msg_flags & MSG_CTRUNC)
		ret = -EPROTO;
	return ret;
}

/* a REJECT the listener sent on the socket ('R' first) as it refused us
 * before our setup arrived (tcp_shm_refuse) */
static int shm_refused(struct tcp_conn *tc, const uint8_t *p, size_t n)
{
	struct rmsgi_hello hello;
	struct rmsgi_hdr h;

	if (rmsgi_hdr_decode(p, n, RMSGI_HELLO_MAX, &h) ||
	    h.type != RMSGI_T_REJECT || h.len > n - RMSGI_HDR_SIZE ||
	    rmsgi_hello_decode(p + RMSGI_HDR_SIZE, (size_t)h.len, &hello)) {
		tcp_shm_why(tc, "the listener sent a malformed refusal");
		return -EPROTO;
	}
	tcp_cli_answer(tc, RMSGI_T_REJECT, &hello);
	return -ECONNREFUSED; /* (ended already) */
}

/* takes wake-up bytes (and, at the server's start, the setup with the
 * mapping) off the socket; notes its end. 0, or a negative errno that
 * ends the connection */
static int shm_drain(struct tcp_conn *tc)
{
	char buf[SHM_DRAIN], cbuf[CMSG_SPACE(4 * sizeof(int))];
	int round;

	for (round = 0; round < 16; round++) {
		/* the setup alone first: its bytes and the mapping */
		struct iovec iov = {.iov_base = buf,
				    .iov_len =
					    tc->shm ? sizeof(buf) : SHM_SETUP};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct sockaddr_storage peer, local;
		bool setup = !tc->shm;
		ssize_t r =
			recvmsg(tc->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int ret;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (r <= 0) {
			/* a FIN, or gone (ECONNRESET): what the ring holds
			 * is still read, then the end comes as over TCP */
			if (!tc->shm)
				return -ECONNRESET;
			tc->shm->eof = true;
			break;
		}
		if (!tc->server && tc->phase == TCP_PH_HELLO && buf[0] == 'R')
			return shm_refused(tc, (uint8_t *)buf + 1,
					   (size_t)r - 1);
		ret = mh.msg_controllen ? shm_fds(tc, &mh) : 0;
		if (ret)
			return ret;
		if (!setup && (size_t)r < sizeof(buf))
			break; /* drained: no read to say EAGAIN */
		if (!setup)
			continue;
		if (!tc->shm || r != SHM_SETUP ||
		    !shm_setup_decode((uint8_t *)buf, &peer, &local)) {
			tcp_shm_why(tc, "the peer's first bytes are not "
					"a shm:// setup with its "
					"mapping");
			return -EPROTO;
		}
		/* what the peer says it dialed from and to: addresses of
		 * this host (it is here), else a lie; our port is our
		 * listener's, whatever it says */
		if (!tcp_shm_local(&peer, sizeof(peer)) ||
		    !tcp_shm_local(&local, sizeof(local))) {
			tcp_shm_why(tc, "the peer's setup names an address "
					"that is not this host's");
			return -EPROTO;
		}
		tcp_shm_addr(&local, tc->lport);
		tc->shm->peer = peer;
		tc->shm->local = local;
	}
	return 0;
}

/* a peer refused before it became a connection (listen.c tcp_refuse):
 * its setup is taken as a connection's is (shm_drain: the same checks,
 * every descriptor closed), and the REJECT frame @f goes into its
 * mapping's server ring; if the setup is not in yet, on the socket,
 * marked 'R' (shm_refused) */
void tcp_shm_refuse(int fd, const uint8_t *f, size_t len)
{
	struct iovec fv = {.iov_base = (void *)f, .iov_len = len};
	struct tcp_conn tc;
	ssize_t r;

	memset(&tc, 0, sizeof(tc));
	tc.fd = fd;
	tc.server = true;
	if (shm_drain(&tc)) {
		tcp_shm_free(&tc); /* a bad setup, or gone: only the close */
		return;
	}
	if (tc.shm) {
		r = tcp_shm_writev(&tc, &fv, 1);
	} else {
		uint8_t m[1 + TCP_HS_MAX];

		m[0] = 'R';
		memcpy(m + 1, f, RMSGI_MIN(len, sizeof(m) - 1));
		r = send(fd, m, 1 + RMSGI_MIN(len, sizeof(m) - 1),
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	(void)r;
	tcp_shm_free(&tc);
}

/* the socket is readable: wake-ups, the mapping, or the end */
int tcp_shm_io(struct tcp_conn *tc)
{
	int ret = shm_drain(tc);

	if (ret)
		return ret;
	if (!tc->shm)
		return -EAGAIN; /* the server waits for its mapping */
	return 0;
}
