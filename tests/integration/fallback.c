// SPDX-License-Identifier: MIT
/*
 * fallback.c - auto:// picks the transport and says why.
 *
 * S: auto:// client to an auto:// listener, both here: shared memory
 *    (shm), no fallback, no reason (issue 34).
 * A: rdma+tcp:// (auto:// without the same-host step) client to an
 *    auto:// listener: RDMA where the machine has a device (the VM), else
 *    TCP with the reason "no RDMA device".
 * B: auto:// client to a tcp://-only listener: not over shm (nothing
 *    listens there), then TCP; in the VM the reason is "peer has no RDMA
 *    listener", on the host "no RDMA device".
 * C: tcp:// client to an auto:// listener: TCP on both sides.
 * This test chooses its own schemes, so it runs the same on both
 * transports; what it expects depends on where it runs:
 *  - RDMA expected (in the test VM, RMSG_VM=1, or RMSG_TEST_TRANSPORT=rdma):
 *    A on RDMA, B with "peer has no RDMA listener". In the VM a missing
 *    /dev/infiniband/rdma_cm fails the test; elsewhere, asked for rdma
 *    without an RDMA stack, it skips like the other tests.
 *  - no RDMA stack (/dev/infiniband/rdma_cm missing, e.g. the CI host):
 *    A and B on TCP with the reason "no RDMA device".
 *  - an RDMA stack that the test was not told to use (a host with an RDMA
 *    NIC, transport tcp): A may use either transport, B falls back; both
 *    sides agree, and a fallback, and only a fallback, has a reason.
 */
#include <string.h>
#include <sys/stat.h>

#include "common.h"

struct cs {
	const char *name, *scheme_l, *scheme_c;
	const char *want_tr, *want_reason;
	int any_tr, any_reason; /* either transport; any non-NULL reason */
	const char *got_tr, *got_reason, *srv_tr;
	int closed;
};

static struct ev_loop *loop;
static struct cs *cur;
static struct rmsg_listener *lis;

static void cli_est(struct rmsg_conn *c, void *arg)
{
	cur->got_tr = rmsg_conn_transport(c);
	cur->got_reason = rmsg_conn_fallback_reason(c);
	rmsg_conn_close(c);
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	cur->srv_tr = rmsg_conn_transport(c);
	T_ASSERT(rmsg_conn_fallback_reason(c) == NULL, "server side reason");
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	T_ASSERT(reason == 0, "%s: close reason %d (%s)", cur->name, reason,
		 rmsg_strerror(reason));
	cur->closed = 1;
	rmsg_listener_close(lis);
}

static const char *addr(void)
{
	const char *a = getenv("RMSG_TEST_ADDR");

	return a && *a ? a : "127.0.0.1";
}

static void run(struct rmsg_ctx *ctx, struct cs *t)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_close = cli_close};
	struct rmsg_conn *c;
	char uri[160];
	uint16_t port;

	cur = t;
	snprintf(uri, sizeof(uri), "%s://%s:0", t->scheme_l, addr());
	T_OK(rmsg_listen(ctx, uri, NULL, &sops, NULL, NULL, &lis));
	T_OK(rmsg_listener_port(lis, &port));
	snprintf(uri, sizeof(uri), "%s://%s:%u", t->scheme_c, addr(), port);
	T_OK(rmsg_connect(ctx, uri, NULL, &cops, NULL, &c));
	ev_run(loop, 0);
	T_ASSERT(t->closed, "%s: not closed", t->name);
	if (t->any_tr) {
		T_ASSERT(t->got_tr && (!strcmp(t->got_tr, "rdma") ||
				       !strcmp(t->got_tr, "tcp")),
			 "%s: transport %s", t->name,
			 t->got_tr ? t->got_tr : "(none)");
		t->want_tr = t->got_tr;
		t->any_reason = !strcmp(t->got_tr, "tcp");
	}
	T_ASSERT(t->got_tr && !strcmp(t->got_tr, t->want_tr),
		 "%s: transport %s, want %s", t->name,
		 t->got_tr ? t->got_tr : "(none)", t->want_tr);
	T_ASSERT(t->srv_tr && !strcmp(t->srv_tr, t->want_tr),
		 "%s: server transport %s", t->name,
		 t->srv_tr ? t->srv_tr : "(none)");
	if (t->any_reason)
		T_ASSERT(t->got_reason && *t->got_reason,
			 "%s: fell back to TCP without a reason", t->name);
	else if (t->want_reason)
		T_ASSERT(t->got_reason &&
				 !strcmp(t->got_reason, t->want_reason),
			 "%s: reason '%s', want '%s'", t->name,
			 t->got_reason ? t->got_reason : "(none)",
			 t->want_reason);
	else
		T_ASSERT(!t->got_reason, "%s: unexpected reason '%s'", t->name,
			 t->got_reason);
	printf("%s: %s%s%s%s\n", t->name, t->got_tr, t->got_reason ? " (" : "",
	       t->got_reason ? t->got_reason : "", t->got_reason ? ")" : "");
}

int main(void)
{
	struct stat st;
	const char *vm = getenv("RMSG_VM");
	int in_vm = vm && !strcmp(vm, "1");
	int have_cm = stat("/dev/infiniband/rdma_cm", &st) == 0;
	int rdma = in_vm || !strcmp(t_transport(), "rdma");
	int either = !rdma && have_cm;
	struct cs s = {.name = "S auto->auto",
		       .scheme_l = "auto",
		       .scheme_c = "auto",
		       .want_tr = "shm"};
	struct cs a = {.name = "A rdma+tcp->auto",
		       .scheme_l = "auto",
		       .scheme_c = "rdma+tcp",
		       .want_tr = rdma ? "rdma" : "tcp",
		       .want_reason = rdma ? NULL : "no RDMA device",
		       .any_tr = either};
	struct cs b = {.name = "B auto->tcp",
		       .scheme_l = "tcp",
		       .scheme_c = "auto",
		       .want_tr = "tcp",
		       .want_reason = rdma ? "peer has no RDMA listener"
					   : "no RDMA device",
		       .any_reason = either};
	struct cs c = {.name = "C tcp->auto",
		       .scheme_l = "auto",
		       .scheme_c = "tcp",
		       .want_tr = "tcp"};
	struct rmsg_ctx *ctx;

	if (in_vm && !have_cm)
		T_FAIL("in the RDMA test VM (RMSG_VM=1) but "
		       "/dev/infiniband/rdma_cm is missing: the VM's RDMA "
		       "stack did not come up");
	t_require_transport(); /* rdma asked for on a host without it */
	loop = ev_default_loop(0);
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	t_deadline(loop, 120);
	run(ctx, &s);
	run(ctx, &a);
	run(ctx, &b);
	run(ctx, &c);
	T_OK(rmsg_ctx_destroy(ctx));
	printf("fallback (%s): 4 cases\n",
	       rdma	? "RDMA machine"
	       : either ? "RDMA stack, not asked for: A either way"
			: "no RDMA stack");
	return 0;
}
