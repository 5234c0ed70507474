// SPDX-License-Identifier: MIT
/*
 * memlock.c - the memlock limit set far too low for the pools.
 *
 * Over RDMA, registering the receive pool fails: the connection attempt
 * must end with -ENOMEM (returned, or through on_close), whose text names
 * the memlock limit and how to raise it, with no crash or hang; and after
 * the limit is raised again in the same process, a new context connects.
 * Over TCP nothing is pinned, so the same low limit changes nothing: the
 * connection works (the difference is the point of the test).
 */
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "../integration/common.h"

static struct rmsg_listener *lis;
static int established, closed, close_reason;

static void on_est(struct rmsg_conn *c, void *arg)
{
	established++;
	rmsg_conn_close(c);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	closed++;
	close_reason = reason;
	rmsg_listener_close(lis);
}

/* root ignores the memlock limit (CAP_IPC_LOCK): drop it for good, before
 * any RDMA file is opened (uverbs refuses a descriptor opened under other
 * credentials) */
static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];

	T_ASSERT(syscall(SYS_capget, &h, d) == 0, "capget");
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	T_ASSERT(syscall(SYS_capset, &h, d) == 0, "capset");
}

/* one attempt; returns 0 if established, else the error */
static int attempt(void)
{
	struct rmsg_conn_ops ops = {.on_established = on_est,
				    .on_close = on_close};
	struct rmsg_ctx *ctx;
	struct rmsg_conn *c;
	char uri[128];
	int ret;

	established = closed = close_reason = 0;
	T_OK(rmsg_ctx_create(ev_default_loop(0), NULL, &ctx));
	t_uri(uri, sizeof(uri), 0);
	ret = rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &lis);
	if (ret == 0) {
		uint16_t port;

		T_OK(rmsg_listener_port(lis, &port));
		t_uri(uri, sizeof(uri), port);
		ret = rmsg_connect(ctx, uri, NULL, &ops, NULL, &c);
		if (ret)
			rmsg_listener_close(lis);
		else
			ev_run(ev_default_loop(0), 0);
	}
	T_OK(rmsg_ctx_destroy(ctx));
	if (ret)
		return ret;
	return established ? 0 : close_reason ? close_reason : -EIO;
}

int main(void)
{
	struct rlimit saved, low = {.rlim_cur = 64 << 10, .rlim_max = 0};
	int ret;

	t_require_transport();
	drop_ipc_lock();
	t_deadline(ev_default_loop(0), 60);
	T_ASSERT(getrlimit(RLIMIT_MEMLOCK, &saved) == 0, "getrlimit");
	low.rlim_max = saved.rlim_max;
	T_ASSERT(setrlimit(RLIMIT_MEMLOCK, &low) == 0, "setrlimit");
	ret = attempt();
	if (!strcmp(t_transport(), "rdma")) {
		T_ASSERT(ret == -ENOMEM, "with 64 KiB memlock: %d (%s)", ret,
			 rmsg_strerror(ret));
		T_ASSERT(strstr(rmsg_strerror(ret), "ulimit -l") != NULL,
			 "the text does not say how to raise the limit");
		printf("rdma, memlock 64 KiB: %s\n", rmsg_strerror(ret));
	} else {
		T_ASSERT(ret == 0, "tcp with 64 KiB memlock: %d (%s)", ret,
			 rmsg_strerror(ret));
		printf("tcp, memlock 64 KiB: connected (TCP pins nothing)\n");
	}
	T_ASSERT(setrlimit(RLIMIT_MEMLOCK, &saved) == 0, "restore");
	ret = attempt();
	T_ASSERT(ret == 0, "after raising the limit: %d (%s)", ret,
		 rmsg_strerror(ret));
	printf("memlock over %s: limit restored, connected again\n",
	       t_transport());
	return 0;
}
