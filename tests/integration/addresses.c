// SPDX-License-Identifier: MIT
/*
 * addresses.c - IPv4, IPv6 and host names on the TCP transport: a
 * listener on each of 127.0.0.1, [::1] and localhost, a client to each,
 * one message each way. Skips the IPv6 case when this machine has no
 * ::1. TCP only (rxe in the VM has IPv4 only).
 */
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "common.h"

static int done, closed;
static struct rmsg_listener *lis;

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {"pong", 4};

	T_ASSERT(rmsg_msg_len(m) == 4, "ping len");
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {"ping", 4};

	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	T_ASSERT(rmsg_msg_len(m) == 4 && !memcmp(rmsg_msg_data(m), "pong", 4),
		 "pong");
	done++;
	rmsg_conn_close(c);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	T_ASSERT(reason == 0, "close reason %d (%s)", reason,
		 rmsg_strerror(reason));
	closed++;
	rmsg_listener_close(lis);
}

static int have_ipv6(void)
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

static void one(struct rmsg_ctx *ctx, const char *host)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct rmsg_conn *c;
	char uri[128];
	uint16_t port;
	int before = done;

	snprintf(uri, sizeof(uri), "tcp://%s:0", host);
	T_OK(rmsg_listen(ctx, uri, NULL, &sops, NULL, NULL, &lis));
	T_OK(rmsg_listener_port(lis, &port));
	snprintf(uri, sizeof(uri), "tcp://%s:%u", host, port);
	T_OK(rmsg_connect(ctx, uri, NULL, &cops, NULL, &c));
	ev_run(ev_default_loop(0), 0);
	T_ASSERT(done == before + 1, "%s: no round trip", host);
	printf("%s: round trip ok\n", uri);
}

int main(void)
{
	struct rmsg_conn *bad = NULL;
	struct rmsg_ctx *ctx;

	T_OK(rmsg_ctx_create(ev_default_loop(0), NULL, &ctx));
	t_deadline(ev_default_loop(0), 60);
	one(ctx, "127.0.0.1");
	one(ctx, "localhost");
	if (have_ipv6())
		one(ctx, "[::1]");
	else
		printf("[::1]: no IPv6 loopback here, case skipped\n");
	T_ASSERT(rmsg_connect(ctx, "tcp://no-port", NULL, NULL, NULL, &bad) ==
			 -EINVAL,
		 "bad URI accepted");
	T_ASSERT(rmsg_connect(ctx, "udp://1.2.3.4:5", NULL, NULL, NULL, &bad) ==
			 -EPROTONOSUPPORT,
		 "unknown scheme accepted");
	T_OK(rmsg_ctx_destroy(ctx));
	return 0;
}
