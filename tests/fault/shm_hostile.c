// SPDX-License-Identifier: MIT
/*
 * shm_hostile.c - a raw peer misbehaves against a librmsg shm://
 * listener (issue 34: the shared mapping is the peer's memory, and
 * nothing in it is trusted). A child process does the setup and writes
 * the rings by hand; the parent runs the server and checks that each bad
 * connection ends with the documented reason, no message leaks to the
 * app, no descriptor is left behind, and the server goes on serving:
 *   bytes with no mapping                   -> dropped, the app never sees it
 *   a mapping whose size is not sealed      -> dropped
 *   a sealed mapping of the wrong size      -> dropped
 *   a pipe passed as the mapping            -> dropped
 *   a second descriptor beside the mapping  -> dropped
 *   a setup that says it came from an address not of this host
 *                                           -> dropped
 *   garbage in the ring as the HELLO        -> dropped
 *   after the handshake, its write position a ring and more ahead
 *                                           -> on_close(-EPROTO)
 *   after the handshake, our write position's counterpart (its read
 *   position) moved beyond what we wrote, then a request the server
 *   answers                                 -> on_close(-EPROTO)
 *   exits mid-message                       -> on_close(-ECONNRESET),
 *                                              no on_msg
 *   a well-behaved peer after all that      -> its message arrives
 * The ring layout is written out here (ring.c): a change to it shows as
 * a failure of this test, as a change to the wire format would.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "proto.h"

#define RING (512u << 10)
#define HDR 4096u
#define MAP (HDR + 2 * RING)
/* header fields: ring 0 (client to server) at 0, ring 1 at 256; in each
 * head, tail, rx_sleep, tx_sleep 64 bytes apart */
#define F_HEAD 0
#define F_TAIL 64
#define F_RX_SLEEP 128
#define SETUP 38

enum mode {
	M_NOFD,
	M_UNSEALED,
	M_SIZE,
	M_PIPE,
	M_TWO,
	M_LIE,
	M_GOOD
};

struct raw {
	int fd;
	uint8_t *map;
	size_t size;
	uint32_t head; /* what we wrote to ring 0 */
	uint32_t tail; /* what we read of ring 1 */
};

static _Atomic uint32_t *field(struct raw *r, unsigned ring, unsigned off)
{
	return (_Atomic uint32_t *)(r->map + ring * 256 + off);
}

static void must(bool ok, int code)
{
	if (!ok)
		_exit(code);
}

/* connects and sends the setup with what @mode says */
static struct raw raw_open(uint16_t port, enum mode mode)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	uint8_t setup[SETUP] = {'S', 4, 0xc0, 0x01};
	struct iovec iov = {.iov_base = setup, .iov_len = sizeof(setup)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct timeval tv = {.tv_sec = 10};
	struct raw r = {.fd = socket(AF_UNIX, SOCK_STREAM, 0)};
	struct cmsghdr *cm;
	int n, fds[2], pfd[2];
	size_t size = MAP;

	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
		     "librmsg/shm/127.0.0.1:%u", port);
	must(r.fd >= 0 && connect(r.fd, (struct sockaddr *)&sa,
				  (socklen_t)(offsetof(struct sockaddr_un,
						       sun_path) +
					      1 + (size_t)n)) == 0,
	     10);
	setsockopt(r.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setup[4] = (uint8_t)(port >> 8);
	setup[5] = (uint8_t)port;
	setup[6] = 127;
	setup[9] = 1;
	setup[22] = 127;
	setup[25] = 1;
	if (mode == M_LIE) {
		/* dialed from an address no interface here has */
		setup[6] = 198;
		setup[7] = 18;
		setup[8] = 255;
	}
	if (mode == M_NOFD) {
		must(sendmsg(r.fd, &mh, 0) == SETUP, 11);
		return r;
	}
	if (mode == M_SIZE)
		size = MAP - 4096;
	fds[0] = memfd_create("hostile", MFD_ALLOW_SEALING);
	must(fds[0] >= 0 && ftruncate(fds[0], (off_t)size) == 0, 12);
	if (mode != M_UNSEALED)
		must(fcntl(fds[0], F_ADD_SEALS,
			   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0,
		     12);
	r.map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	must(r.map != MAP_FAILED, 12);
	r.size = size;
	must(pipe(pfd) == 0, 12);
	if (mode == M_PIPE)
		fds[0] = pfd[0];
	fds[1] = pfd[1];
	n = mode == M_TWO ? 2 : 1;
	memset(cbuf, 0, sizeof(cbuf));
	mh.msg_control = cbuf;
	mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	must(sendmsg(r.fd, &mh, 0) == SETUP, 11);
	return r;
}

/* bytes into ring 0, then a wake-up */
static void raw_put(struct raw *r, const void *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		r->map[HDR + ((r->head + i) & (RING - 1))] =
			((const uint8_t *)p)[i];
	r->head += (uint32_t)len;
	atomic_store(field(r, 0, F_HEAD), r->head);
	(void)!send(r->fd, "w", 1, MSG_NOSIGNAL);
}

static void raw_put_hdr(struct raw *r, uint8_t type, uint64_t len)
{
	struct rmsgi_hdr h = {.type = type, .len = len};
	uint8_t buf[RMSGI_HDR_SIZE];

	rmsgi_hdr_encode(&h, buf);
	raw_put(r, buf, sizeof(buf));
}

/* waits for @n bytes in ring 1 (false: the server closed first) */
static bool raw_get(struct raw *r, void *p, size_t n)
{
	char b[64];
	size_t i;

	while (atomic_load(field(r, 1, F_HEAD)) - r->tail < n) {
		/* asleep: the server's next bytes wake us */
		atomic_store(field(r, 1, F_RX_SLEEP), 1);
		if (atomic_load(field(r, 1, F_HEAD)) - r->tail >= n)
			break;
		if (recv(r->fd, b, sizeof(b), 0) <= 0)
			return false;
	}
	for (i = 0; i < n; i++)
		((uint8_t *)p)[i] =
			r->map[HDR + RING + ((r->tail + i) & (RING - 1))];
	r->tail += (uint32_t)n;
	atomic_store(field(r, 1, F_TAIL), r->tail);
	return true;
}

/* HELLO, then HELLO_ACK */
static struct raw raw_handshake(uint16_t port)
{
	struct rmsgi_hello hello = {.credits = 32, .eager_size = 8192};
	struct raw r = raw_open(port, M_GOOD);
	uint8_t buf[RMSGI_HDR_SIZE + 64];
	struct rmsgi_hdr h;
	size_t n = rmsgi_hello_encode(&hello, buf);

	raw_put_hdr(&r, RMSGI_T_HELLO, n);
	raw_put(&r, buf, n);
	must(raw_get(&r, buf, RMSGI_HDR_SIZE), 13);
	must(rmsgi_hdr_decode(buf, RMSGI_HDR_SIZE, 1 << 20, &h) == 0 &&
		     h.type == RMSGI_T_HELLO_ACK && h.len <= 64,
	     13);
	must(raw_get(&r, buf, (size_t)h.len), 13);
	return r;
}

/* waits until the server closes the socket */
static void expect_eof(struct raw *r)
{
	char b[256];

	while (recv(r->fd, b, sizeof(b), 0) > 0)
		;
	close(r->fd);
	if (r->map)
		munmap(r->map, r->size);
}

static void child(uint16_t port)
{
	static const enum mode bad[] = {M_NOFD, M_UNSEALED, M_SIZE,
					M_PIPE, M_TWO,	    M_LIE};
	uint8_t junk[64];
	struct raw r;
	size_t i;

	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = raw_open(port, bad[i]);
		expect_eof(&r);
	}
	r = raw_open(port, M_GOOD);
	raw_put(&r, junk, sizeof(junk));
	expect_eof(&r);

	/* its write position far ahead of anything a ring holds */
	r = raw_handshake(port);
	atomic_store(field(&r, 0, F_HEAD), r.head + 0x80000000u);
	(void)!send(r.fd, "w", 1, MSG_NOSIGNAL);
	expect_eof(&r);

	/* its read position ahead of what the server wrote, then a request
	 * the server answers (on_msg replies to "ping") */
	r = raw_handshake(port);
	atomic_store(field(&r, 1, F_TAIL), r.tail + 0x40000000u);
	raw_put_hdr(&r, RMSGI_T_DATA, 4);
	raw_put(&r, "ping", 4);
	expect_eof(&r);

	/* gone mid-message */
	r = raw_handshake(port);
	raw_put_hdr(&r, RMSGI_T_DATA, 1000);
	raw_put(&r, junk, 10);
	close(r.fd);
	usleep(100000);

	r = raw_handshake(port);
	raw_put_hdr(&r, RMSGI_T_DATA, 5);
	raw_put(&r, "hello", 5);
	usleep(200000);
	close(r.fd);
	_exit(0);
}

static struct ev_loop *loop;
static int accepted, msgs, closes, n_reset, n_proto, n_ring, child_done;
static struct rmsg_listener *lis;

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t len, void *arg)
{
	accepted++;
	return 0;
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {.iov_base = "pong", .iov_len = 4};

	msgs++;
	if (rmsg_msg_len(m) == 4 && !memcmp(rmsg_msg_data(m), "ping", 4)) {
		T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
		return;
	}
	T_ASSERT(rmsg_msg_len(m) == 5 && !memcmp(rmsg_msg_data(m), "hello", 5),
		 "a message from a hostile peer reached the app");
}

static void maybe_done(void)
{
	if (child_done && closes == 4)
		ev_break(loop, EVBREAK_ALL);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	closes++;
	if (reason == -ECONNRESET)
		n_reset++;
	else if (reason == -EPROTO)
		n_proto++;
	/* told apart from a malformed frame (what the bytes it could make
	 * us copy would look like) */
	if (strstr(rmsg_conn_close_reason(c), "ring position"))
		n_ring++;
	printf("server conn closed: %d (%s): %s\n", reason,
	       rmsg_strerror(reason), rmsg_conn_close_reason(c));
	maybe_done();
}

/* descriptors this process has open */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int main(void)
{
	struct rmsg_conn_ops ops = {.on_msg = on_msg, .on_close = on_close};
	struct rmsg_ctx *ctx;
	struct t_child cw;
	uint16_t port;
	int fds0, fds1;
	pid_t pid;

	signal(SIGPIPE, SIG_IGN);
	loop = ev_default_loop(0);
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	T_OK(rmsg_listen(ctx, "shm://127.0.0.1:0", NULL, &ops, on_accept, NULL,
			 &lis));
	T_OK(rmsg_listener_port(lis, &port));
	fds0 = open_fds();
	pid = fork();
	if (pid == 0)
		child(port);
	t_child_watch(loop, &cw, pid, &child_done, maybe_done);
	t_deadline(loop, 60);
	ev_run(loop, 0);
	T_ASSERT(accepted == 4, "accepted %d (the bad setups must not be)",
		 accepted);
	T_ASSERT(msgs == 2, "messages %d", msgs);
	T_ASSERT(n_reset >= 1 && n_proto == 2 && n_ring == 2,
		 "reasons: reset %d proto %d (ring position %d)", n_reset,
		 n_proto, n_ring);
	fds1 = open_fds();
	T_ASSERT(fds1 == fds0, "descriptors: %d before, %d after", fds0, fds1);
	T_OK(rmsg_listener_close(lis));
	T_OK(rmsg_ctx_destroy(ctx));
	printf("shm_hostile: 7 bad setups dropped, 3 hostile connections "
	       "closed with the right reason, the good one served, no "
	       "descriptor left\n");
	return 0;
}
