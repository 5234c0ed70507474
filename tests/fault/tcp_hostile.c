// SPDX-License-Identifier: MIT
/*
 * tcp_hostile.c - a raw TCP peer misbehaves against a librmsg tcp://
 * listener (issue 4's hostile conditions). A child process speaks the
 * wire format by hand; the parent runs the server and checks that each
 * bad connection ends with the documented reason, no message leaks to
 * the app, and the server goes on serving:
 *   garbage before the handshake  -> dropped, the app never sees it
 *   peer closes mid-message       -> on_close(-ECONNRESET), no on_msg
 *   length above the maximum      -> on_close(-EMSGSIZE)
 *   unknown frame type            -> on_close(-EPROTO)
 *   credits beyond the grant      -> on_close(-EPROTO)
 *   byte-window bytes returned beyond what it holds of ours, by a
 *   peer that grants a window and by one that does not (issue 32)
 *                                 -> on_close(-EPROTO), twice
 *   a well-behaved peer after all that -> its message arrives
 * and a librmsg client connecting to a closed port gets -ECONNREFUSED.
 * TCP only: the RDMA equivalent needs a raw verbs peer (reliability
 * issue).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "raw_tcp.h"

#define MAX_MSG (1 << 20)

static struct ev_loop *loop;
static int accepted, msgs, closes, n_reset, n_msgsize, n_proto, child_done;
static int refused;
static struct rmsg_listener *lis;

static void put(int fd, const void *buf, size_t len)
{
	if (!raw_put(fd, buf, len))
		_exit(11);
}

/* waits until the server closes the socket */
static void expect_eof(int fd)
{
	char b[256];

	while (read(fd, b, sizeof(b)) > 0)
		;
	close(fd);
}

/* a frame header returning @bytes of the byte window (header bytes
 * 12-15) */
static void put_hdr_bytes(int fd, uint8_t type, uint32_t bytes)
{
	struct rmsgi_hdr h = {.type = type, .bytes = bytes};
	uint8_t buf[RMSGI_HDR_SIZE];

	rmsgi_hdr_encode(&h, buf);
	put(fd, buf, sizeof(buf));
}

/* HELLO granting a byte window of @win (0: none), then HELLO_ACK */
static int handshake_win(uint16_t port, uint32_t win)
{
	struct rmsgi_hello hello = {.credits = 32, .eager_size = 8192};
	uint8_t buf[64];
	size_t n;
	int fd = raw_connect(port);

	hello.flags = RMSGI_HELLO_F_PACK | RMSGI_HELLO_F_GROW |
		      rmsgi_hello_win_flags(win);
	n = rmsgi_hello_encode(&hello, buf);
	raw_put_hdr(fd, RMSGI_T_HELLO, 0, n);
	put(fd, buf, n);
	if (raw_answer(fd, NULL) != RMSGI_T_HELLO_ACK)
		_exit(13);
	return fd;
}

static void child(uint16_t port)
{
	uint8_t junk[64];
	int fd, i;

	for (i = 0; i < 64; i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	fd = raw_connect(port);
	put(fd, junk, sizeof(junk));
	expect_eof(fd);

	fd = raw_handshake(port);
	raw_put_hdr(fd, RMSGI_T_DATA, 0, 1000);
	put(fd, junk, 10);
	close(fd); /* mid-message */
	usleep(100000);

	fd = raw_handshake(port);
	raw_put_hdr(fd, RMSGI_T_DATA, 0, (uint64_t)MAX_MSG + 1);
	expect_eof(fd);

	fd = raw_handshake(port);
	raw_put_hdr(fd, 99, 0, 0);
	expect_eof(fd);

	fd = raw_handshake(port);
	raw_put_hdr(fd, RMSGI_T_CREDIT, 60000, 0);
	expect_eof(fd);

	/* the server sent nothing: the peer holds none of its window */
	fd = handshake_win(port, 256 << 10);
	put_hdr_bytes(fd, RMSGI_T_CREDIT, 1);
	expect_eof(fd);

	fd = handshake_win(port, 0);
	put_hdr_bytes(fd, RMSGI_T_CREDIT, 1);
	expect_eof(fd);

	fd = raw_handshake(port);
	raw_put_hdr(fd, RMSGI_T_DATA, 0, 5);
	put(fd, "hello", 5);
	usleep(200000);
	close(fd);
	_exit(0);
}

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t len, void *arg)
{
	accepted++;
	return 0;
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	T_ASSERT(rmsg_msg_len(m) == 5 && !memcmp(rmsg_msg_data(m), "hello", 5),
		 "a message from a hostile peer reached the app");
	msgs++;
}

static void maybe_done(void)
{
	if (child_done && closes == 7 && refused)
		rmsg_listener_close(lis);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	closes++;
	if (reason == -ECONNRESET)
		n_reset++;
	else if (reason == -EMSGSIZE)
		n_msgsize++;
	else if (reason == -EPROTO)
		n_proto++;
	printf("server conn closed: %d (%s)\n", reason, rmsg_strerror(reason));
	maybe_done();
}

static void refused_close(struct rmsg_conn *c, int reason, void *arg)
{
	T_ASSERT(reason == -ECONNREFUSED, "closed port: %d", reason);
	refused = 1;
	maybe_done();
}

int main(void)
{
	struct rmsg_conn_ops ops = {.on_msg = on_msg, .on_close = on_close};
	struct rmsg_conn_ops rops = {.on_close = refused_close};
	struct rmsg_ctx *ctx;
	struct rmsg_cfg *cfg;
	struct rmsg_conn *c;
	struct t_child cw;
	char uri[64];
	uint16_t port, dead;
	pid_t pid;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	loop = ev_default_loop(0);
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_max_msg_size(cfg, MAX_MSG));
	T_OK(rmsg_ctx_create(loop, cfg, &ctx));
	T_OK(rmsg_listen(ctx, "tcp://127.0.0.1:0", cfg, &ops, on_accept, NULL,
			 &lis));
	T_OK(rmsg_listener_port(lis, &port));

	/* a port nobody listens on: bind one, note it, close it */
	{
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t sl = sizeof(sa);

		fd = socket(AF_INET, SOCK_STREAM, 0);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		getsockname(fd, (struct sockaddr *)&sa, &sl);
		dead = ntohs(sa.sin_port);
		close(fd);
	}
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", dead);
	T_OK(rmsg_connect(ctx, uri, NULL, &rops, NULL, &c));

	pid = fork();
	if (pid == 0)
		child(port);
	t_child_watch(loop, &cw, pid, &child_done, maybe_done);
	t_deadline(loop, 60);
	ev_run(loop, 0);
	T_ASSERT(accepted == 7, "accepted %d (garbage must not be)", accepted);
	T_ASSERT(msgs == 1, "messages %d", msgs);
	T_ASSERT(n_reset >= 1 && n_msgsize == 1 && n_proto == 4,
		 "reasons: reset %d msgsize %d proto %d", n_reset, n_msgsize,
		 n_proto);
	T_OK(rmsg_ctx_destroy(ctx));
	rmsg_cfg_destroy(cfg);
	printf("tcp_hostile: 7 hostile connections closed with the right "
	       "reason, the good one served, closed port refused\n");
	return 0;
}
