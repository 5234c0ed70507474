// SPDX-License-Identifier: MIT
/*
 * group_pick.c - a group listener's pick callback that closes the group
 * listener it runs for: refused with -EBUSY (the backend's accept loop
 * and the hand-off still run on it; the close freed them under both
 * before, seen by valgrind), and the peer goes where it was picked. The
 * listener closes fine afterwards, outside the callback.
 */
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "common.h"

static struct ev_loop *loop;
static struct rmsg_listener *gl;
static int picks, close_ret = 1;

static unsigned pick(const struct sockaddr *peer, unsigned n, void *arg)
{
	(void)peer, (void)n, (void)arg;
	picks++;
	close_ret = rmsg_listener_close(gl);
	ev_break(loop, EVBREAK_ALL);
	return 0;
}

int main(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct rmsg_ctx *ctx;
	uint16_t port;
	int fd;

	loop = ev_loop_new(0);
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	T_OK(rmsg_listen_group(&ctx, 1, "tcp://127.0.0.1:0", NULL, NULL, NULL,
			       pick, NULL, &gl));
	T_OK(rmsg_listener_port(gl, &port));
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(fd >= 0, "socket");
	T_ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect");
	t_deadline(loop, 30);
	ev_run(loop, 0);
	T_ASSERT(picks == 1, "picks %d", picks);
	/* covers: rmsg_listen.3 EBUSY */
	T_ASSERT(close_ret == -EBUSY, "rmsg_listener_close in pick: %d",
		 close_ret);
	/* and the loop runs on with the listener: the peer's handshake
	 * (none comes) is the context's, not freed memory */
	ev_run(loop, EVRUN_NOWAIT);
	T_OK(rmsg_listener_close(gl));
	close(fd);
	T_OK(rmsg_ctx_destroy(ctx));
	ev_loop_destroy(loop);
	printf("group_pick: closing the group listener from its pick "
	       "callback is refused (-EBUSY)\n");
	return 0;
}
