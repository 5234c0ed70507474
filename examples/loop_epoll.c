// SPDX-License-Identifier: MIT
/*
 * loop_epoll - librmsg driven by a plain epoll loop.
 *
 *   loop_epoll [URI]
 *
 * Runs an echo server and its client in one process, each on a context
 * from rmsg_ctx_create_fd(), makes calls and sends messages, checks the
 * echoes and exits 0 when all of them came back and both ends closed
 * (loop_app.h). URI is where the server listens, port 0 for any free
 * port: tcp://127.0.0.1:0 by default, rdma://ADDR:0 over RDMA.
 *
 * The loop: both contexts' descriptors in one epoll set, each with its
 * context as the event's data; a readable descriptor means "call
 * rmsg_ctx_progress() on this context". Nothing else is needed: due
 * timers (here the calls' deadlines) make the descriptor readable too,
 * so epoll_wait() may block with no timeout at all. A program's own
 * sockets, pipes and timerfds would go into the same set.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <rmsg.h>

#include "loop_app.h"

static int watch(int ep, struct rmsg_ctx *ctx)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ctx};

	return epoll_ctl(ep, EPOLL_CTL_ADD, rmsg_ctx_fd(ctx), &ev);
}

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : "tcp://127.0.0.1:0";
	struct epoll_event evs[2];
	struct app a;
	int ep, i, n;

	if (app_start(&a, "loop_epoll", uri))
		return 1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || watch(ep, a.server) || watch(ep, a.client)) {
		perror("loop_epoll: epoll");
		return 1;
	}

	while (!a.done) {
		n = epoll_wait(ep, evs, 2, -1);
		if (n < 0 && errno != EINTR) {
			perror("loop_epoll: epoll_wait");
			return 1;
		}
		/* the callbacks run in here, on this thread */
		for (i = 0; i < n; i++)
			rmsg_ctx_progress(evs[i].data.ptr);
	}

	/* stop watching before the descriptors close with their contexts */
	close(ep);
	return app_end(&a);
}
