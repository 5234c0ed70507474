// SPDX-License-Identifier: MIT
/*
 * destroy_resolve.c - what callbacks that run inside rmsg_ctx_destroy()
 * may still start. A name's resolution runs on a helper thread; it must
 * never outlive its context:
 *   1. work submitted before the destroy runs at its start and connects
 *      to a host name: the connection is aborted (on_close -ECANCELED)
 *      and the resolver thread, still in getaddrinfo(), never touches the
 *      context again;
 *   2. an on_close that connects again (to a name) from inside the
 *      destroy is refused with -ESHUTDOWN, as is rmsg_listen(): before,
 *      the new connection escaped the destroy and its timer fired on the
 *      freed context.
 * getaddrinfo() is interposed here: "slow.test" takes 0.3 s and is
 * 127.0.0.1. The freed context is caught by ASan and valgrind (test.sh
 * runs this under both), and, without them, by the memory reused below.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *,
		      struct addrinfo **);

int getaddrinfo(const char *host, const char *serv,
		const struct addrinfo *hints, struct addrinfo **res)
{
	gai_fn real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");

	if (host && !strcmp(host, "slow.test")) {
		if (hints && (hints->ai_flags & AI_NUMERICHOST))
			return EAI_NONAME;
		usleep(300 * 1000);
		host = "127.0.0.1";
	}
	return real(host, serv, hints, res);
}

static int closes, last_reason, reconnect_ret = 1, listen_ret = 1;
static bool reconnect;

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct rmsg_ctx *ctx = arg;
	struct rmsg_listener *l;
	struct rmsg_conn *c2;

	(void)c;
	closes++;
	last_reason = reason;
	if (!reconnect)
		return;
	reconnect = false;
	reconnect_ret =
		rmsg_connect(ctx, "tcp://slow.test:7", NULL, NULL, NULL, &c2);
	listen_ret = rmsg_listen(ctx, "tcp://127.0.0.1:0", NULL, NULL, NULL,
				 NULL, &l);
}

static void work(struct rmsg_ctx *ctx, void *arg)
{
	static const struct rmsg_conn_ops ops = {.on_close = on_close};
	struct rmsg_conn *c;

	(void)arg;
	T_OK(rmsg_connect(ctx, "tcp://slow.test:7", NULL, &ops, ctx, &c));
}

/* memory the size of a context or so, reused and scribbled on, while a
 * resolver thread that kept the freed context would still write to it */
static void scribble(void)
{
	void *p[64];
	int i;

	for (i = 0; i < 64; i++) {
		p[i] = malloc(4096);
		T_ASSERT(p[i] != NULL, "malloc");
		memset(p[i], 0x41, 4096);
	}
	usleep(600 * 1000);
	for (i = 0; i < 64; i++)
		free(p[i]);
}

int main(void)
{
	static const struct rmsg_conn_ops ops = {.on_close = on_close};
	struct ev_loop *loop = ev_loop_new(0);
	struct rmsg_ctx *ctx;
	struct rmsg_conn *c;

	/* 1: work queued before the destroy connects to a name */
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	T_OK(rmsg_ctx_submit(ctx, work, NULL));
	T_OK(rmsg_ctx_destroy(ctx));
	T_ASSERT(closes == 1, "closes %d", closes);
	T_ASSERT(last_reason == -ECANCELED, "reason %d", last_reason);
	scribble();

	/* 2: an on_close inside the destroy connects and listens again */
	closes = 0;
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	T_OK(rmsg_connect(ctx, "tcp://slow.test:7", NULL, &ops, ctx, &c));
	reconnect = true;
	T_OK(rmsg_ctx_destroy(ctx));
	T_ASSERT(closes == 1, "closes %d", closes);
	/* covers: rmsg_connect.3 ESHUTDOWN */
	T_ASSERT(reconnect_ret == -ESHUTDOWN, "rmsg_connect in destroy: %d",
		 reconnect_ret);
	/* covers: rmsg_listen.3 ESHUTDOWN */
	T_ASSERT(listen_ret == -ESHUTDOWN, "rmsg_listen in destroy: %d",
		 listen_ret);
	scribble();
	/* the application's loop goes on: nothing of the context is left
	 * on it */
	ev_run(loop, EVRUN_NOWAIT);
	ev_loop_destroy(loop);
	printf("destroy_resolve: a name's resolution started in or around "
	       "rmsg_ctx_destroy never outlives the context\n");
	return 0;
}
