// SPDX-License-Identifier: MIT
/*
 * group.c - the error cases of rmsg_listen_group() (rmsg_listen_group.3),
 * through the exported library only, over the transport of the run (TCP
 * on the host): every EINVAL of its ERRORS section (NULL arguments, n of
 * 0 and of RMSG_GROUP_MAX + 1, a context twice, a malformed URI, ?src=),
 * EPROTONOSUPPORT, EADDRINUSE, EADDRNOTAVAIL, ENODEV where rdma:// has
 * no device; *l_p is never written on failure; RMSG_GROUP_MAX contexts
 * are taken; the same context may serve a second group after the first
 * closed, and a member of two open groups may be destroyed.
 */
#include <string.h>

#include "../integration/common.h"

#define T_ERR(expr, err)                                                      \
	do {                                                                  \
		int t_r_ = (expr);                                            \
		T_ASSERT(t_r_ == (err), "%s = %d (%s), want %d", #expr, t_r_, \
			 rmsg_strerror(t_r_), (err));                         \
	} while (0)

static struct rmsg_ctx *ctxs[RMSG_GROUP_MAX + 1];

static int lg(unsigned n, const char *uri, struct rmsg_listener **l_p)
{
	return rmsg_listen_group(ctxs, n, uri, NULL, NULL, NULL, NULL, NULL,
				 l_p);
}

/* fails if *l_p was written */
static void refused(unsigned n, const char *uri, int err)
{
	struct rmsg_listener *l = (void *)1;

	T_ERR(lg(n, uri, &l), err);
	T_ASSERT(l == (void *)1, "%s: *l_p written on failure", uri);
}

int main(void)
{
	struct rmsg_ctx *dup[2];
	struct rmsg_listener *l, *l2;
	struct ev_loop *loop;
	char uri[128], busy[192];
	uint16_t port;
	unsigned i;
	int ret;

	t_require_transport();
	loop = ev_default_loop(0);
	for (i = 0; i < RMSG_GROUP_MAX + 1; i++)
		T_OK(rmsg_ctx_create(loop, NULL, &ctxs[i]));
	t_uri(uri, sizeof(uri), 0);

	/* covers: rmsg_listen_group.3 EINVAL */
	T_ERR(rmsg_listen_group(NULL, 2, uri, NULL, NULL, NULL, NULL, NULL, &l),
	      -EINVAL);
	/* covers: rmsg_listen_group.3 EINVAL */
	refused(2, NULL, -EINVAL);
	/* covers: rmsg_listen_group.3 EINVAL */
	T_ERR(lg(2, uri, NULL), -EINVAL);
	/* covers: rmsg_listen_group.3 EINVAL */
	refused(0, uri, -EINVAL);
	/* covers: rmsg_listen_group.3 EINVAL */
	refused(RMSG_GROUP_MAX + 1, uri, -EINVAL);
	dup[0] = ctxs[0];
	dup[1] = NULL;
	l = (void *)1;
	/* covers: rmsg_listen_group.3 EINVAL */
	T_ERR(rmsg_listen_group(dup, 2, uri, NULL, NULL, NULL, NULL, NULL, &l),
	      -EINVAL);
	dup[1] = ctxs[0];
	/* covers: rmsg_listen_group.3 EINVAL */
	T_ERR(rmsg_listen_group(dup, 2, uri, NULL, NULL, NULL, NULL, NULL, &l),
	      -EINVAL);
	T_ASSERT(l == (void *)1, "*l_p written on failure");
	snprintf(busy, sizeof(busy), "%s://%s", t_transport(), "127.0.0.1");
	/* covers: rmsg_listen_group.3 EINVAL */
	refused(2, busy, -EINVAL); /* no port */
	snprintf(busy, sizeof(busy), "%s?src=127.0.0.1", uri);
	/* covers: rmsg_listen_group.3 EINVAL */
	refused(2, busy, -EINVAL);
	/* covers: rmsg_listen_group.3 EPROTONOSUPPORT */
	refused(2, "udp://127.0.0.1:0", -EPROTONOSUPPORT);
	snprintf(busy, sizeof(busy), "%s://192.0.2.1:0", t_transport());
	/* covers: rmsg_listen_group.3 EADDRNOTAVAIL */
	refused(2, busy, -EADDRNOTAVAIL);
	/* rdma:// without a device: what rmsg_listen() says, the group
	 * says too; with a device (the VM) it listens */
	ret = rmsg_listen(ctxs[0], "rdma://127.0.0.1:0", NULL, NULL, NULL, NULL,
			  &l);
	if (ret == 0) {
		T_OK(rmsg_listener_close(l));
	} else if (ret == -ENODEV) {
		/* covers: rmsg_listen_group.3 ENODEV */
		refused(2, "rdma://127.0.0.1:0", -ENODEV);
	}

	/* the largest group; a port in use */
	T_OK(lg(RMSG_GROUP_MAX, uri, &l));
	T_OK(rmsg_listener_port(l, &port));
	t_uri(busy, sizeof(busy), port);
	/* covers: rmsg_listen_group.3 EADDRINUSE */
	refused(2, busy, -EADDRINUSE);
	T_OK(rmsg_listener_close(l));
	/* the same contexts serve a new group (A: home ctxs[0]); ctxs[1]
	 * is a member of A and of a second group B at once */
	T_OK(lg(3, uri, &l));
	dup[0] = ctxs[RMSG_GROUP_MAX];
	dup[1] = ctxs[1];
	T_OK(rmsg_listen_group(dup, 2, uri, NULL, NULL, NULL, NULL, NULL, &l2));
	/* a member of two open groups may go: both go on without it */
	T_OK(rmsg_ctx_destroy(ctxs[1]));
	T_OK(rmsg_listener_close(l2));
	/* the home goes with its group listener */
	T_OK(rmsg_ctx_destroy(ctxs[0]));
	for (i = 2; i < RMSG_GROUP_MAX + 1; i++)
		T_OK(rmsg_ctx_destroy(ctxs[i]));
	printf("listen_group over %s: every documented error, %d contexts, "
	       "a member of two open groups destroyed\n",
	       t_transport(), RMSG_GROUP_MAX);
	return 0;
}
