// SPDX-License-Identifier: MIT
/*
 * errors.c - the documented errors of the core calls, on the transport
 * under test (TCP by make check, RDMA by check-rxe): each check asserts
 * the errno that the ERRORS section of the page promises, or the on_close
 * reason that rmsg_connect.3 promises for failures found later.
 *
 *  - rmsg_listen.3: NULL arguments, malformed URIs and "?src=" (EINVAL),
 *    an unknown scheme (EPROTONOSUPPORT), a port another listener has
 *    (EADDRINUSE), an address no local interface has (EADDRNOTAVAIL),
 *    rdma:// where no RDMA device exists (ENODEV; host only);
 *  - rmsg_connect.3: the same argument errors, returned; a refused
 *    connection and a silent peer reach on_close (-ECONNREFUSED,
 *    -ETIMEDOUT), never the return value;
 *  - rmsg_send.3: EINVAL, EMSGSIZE at the configured bound, EAGAIN at the
 *    send queue's bound (then on_writable), ENOTCONN once closing;
 *  - rmsg_buf_alloc.3, rmsg_ctx_*.3, rmsg_conn_*.3, rmsg_msg_data.3:
 *    NULL arguments, the registered-memory budget, calls from the wrong
 *    place.
 *
 * The "covers:" tags mark the assertions tests/check-errors.sh
 * counts.
 */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "common.h"

#define T_ERR(expr, err)                                                 \
	do {                                                             \
		int t_e_ = (expr);                                       \
		if (t_e_ != (err))                                       \
			T_FAIL("%s = %d (%s), expected %s", #expr, t_e_, \
			       rmsg_strerror(t_e_), #err);               \
	} while (0)

static struct ev_loop *loop;
static struct rmsg_ctx *ctx;
static const char *tr; /* "tcp" or "rdma" */
static const char *addr;

static void uri_of(char *buf, size_t len, const char *host, unsigned port)
{
	snprintf(buf, len, "%s://%s:%u", tr, host, port);
}

/* ------------------------------------------------------------------ */
/* rmsg_listen.3                                                        */

static void listen_errors(void)
{
	static const char *const malformed[] = {
		"%s://",       "%s://%s",    "%s://%s:",      "%s://%s:70000",
		"%s://%s:12x", "%s://:7000", "%s://[%s:7000", "%s://%s:-1",
	};
	struct rmsg_listener *l, *l2;
	char uri[128], fmt[64];
	uint16_t port;
	size_t i;

	uri_of(uri, sizeof(uri), addr, 0);
	/* covers: rmsg_listen.3 EINVAL */
	T_ERR(rmsg_listen(NULL, uri, NULL, NULL, NULL, NULL, &l), -EINVAL);
	/* covers: rmsg_listen.3 EINVAL */
	T_ERR(rmsg_listen(ctx, NULL, NULL, NULL, NULL, NULL, &l), -EINVAL);
	/* covers: rmsg_listen.3 EINVAL */
	T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, NULL), -EINVAL);
	for (i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		snprintf(fmt, sizeof(fmt), "%s", malformed[i]);
		snprintf(uri, sizeof(uri), fmt, tr, addr);
		l = (void *)1;
		/* covers: rmsg_listen.3 EINVAL */
		T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l),
		      -EINVAL);
		T_ASSERT(l == (void *)1, "%s: *l_p written on failure", uri);
	}
	/* a source address is for connections */
	snprintf(uri, sizeof(uri), "%s://%s:0?src=%s", tr, addr, addr);
	/* covers: rmsg_listen.3 EINVAL */
	T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l), -EINVAL);

	snprintf(uri, sizeof(uri), "udp://%s:0", addr);
	/* covers: rmsg_listen.3 EPROTONOSUPPORT */
	T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l),
	      -EPROTONOSUPPORT);
	snprintf(uri, sizeof(uri), "rdmax://%s:0", addr);
	/* covers: rmsg_listen.3 EPROTONOSUPPORT */
	T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l),
	      -EPROTONOSUPPORT);

	/* a port another listener has, of this transport and of auto:// */
	uri_of(uri, sizeof(uri), addr, 0);
	T_OK(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l));
	/* covers: rmsg_listen.3 EINVAL */
	T_ERR(rmsg_listener_port(l, NULL), -EINVAL);
	/* covers: rmsg_listen.3 EINVAL */
	T_ERR(rmsg_listener_port(NULL, &port), -EINVAL);
	T_OK(rmsg_listener_port(l, &port));
	T_ASSERT(port != 0, "port 0 reported");
	uri_of(uri, sizeof(uri), addr, port);
	l2 = (void *)1;
	/* covers: rmsg_listen.3 EADDRINUSE */
	T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l2), -EADDRINUSE);
	T_ASSERT(l2 == (void *)1, "*l_p written on failure");
	if (!strcmp(tr, "tcp")) {
		/* auto:// takes TCP first: the same port is taken */
		snprintf(uri, sizeof(uri), "auto://%s:%u", addr, port);
		/* covers: rmsg_listen.3 EADDRINUSE */
		T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l2),
		      -EADDRINUSE);
	}
	T_OK(rmsg_listener_close(l));
	/* the port is free again once its listener is closed */
	uri_of(uri, sizeof(uri), addr, port);
	T_OK(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l));
	T_OK(rmsg_listener_close(l));
	/* covers: rmsg_listen.3 EINVAL */
	T_ERR(rmsg_listener_close(NULL), -EINVAL);

	/* no interface of this host (or of the VM) has this address */
	uri_of(uri, sizeof(uri), "198.18.255.1", 0);
	/* covers: rmsg_listen.3 EADDRNOTAVAIL */
	T_ERR(rmsg_listen(ctx, uri, NULL, NULL, NULL, NULL, &l),
	      -EADDRNOTAVAIL);
}

/* no RDMA device on this machine: /sys/class/infiniband empty or absent */
static int no_rdma_device(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n == 0;
}

static void nodev_errors(void)
{
	struct rmsg_listener *l;
	struct rmsg_conn *c = NULL;

	if (!no_rdma_device()) {
		printf("ENODEV checks not run: this machine has an RDMA "
		       "device\n");
		return;
	}
	/* covers: rmsg_listen.3 ENODEV */
	T_ERR(rmsg_listen(ctx, "rdma://127.0.0.1:0", NULL, NULL, NULL, NULL,
			  &l),
	      -ENODEV);
	/* covers: rmsg_connect.3 ENODEV */
	T_ERR(rmsg_connect(ctx, "rdma://127.0.0.1:7", NULL, NULL, NULL, &c),
	      -ENODEV);
	T_ASSERT(c == NULL, "*c_p written on failure");
	/* auto:// is the way without a device: TCP alone */
	T_OK(rmsg_listen(ctx, "auto://127.0.0.1:0", NULL, NULL, NULL, NULL,
			 &l));
	T_OK(rmsg_listener_close(l));
	printf("ENODEV checked (no RDMA device here)\n");
}

/* ------------------------------------------------------------------ */
/* rmsg_connect.3                                                       */

static int closed, close_reason, established_n;

static void cli_est(struct rmsg_conn *c, void *arg)
{
	established_n++;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	closed++;
	close_reason = reason;
}

static const struct rmsg_conn_ops cli_ops = {
	.on_established = cli_est,
	.on_close = cli_close,
};

static void connect_errors(void)
{
	static const char *const malformed[] = {
		"%s://",
		"%s://%s",
		"%s://%s:",
		"%s://%s:70000",
		"%s://%s:12x",
		"%s://:7000",
		"%s://%s:0",
		"%s://%s:7000?src=",
		"%s://%s:7000?src=nohost",
		"%s://%s:7000?x=1",
		"%s://[%s:7000",
	};
	struct rmsg_conn *c = (void *)1;
	char uri[128], fmt[64];
	size_t i;

	uri_of(uri, sizeof(uri), addr, 7);
	/* covers: rmsg_connect.3 EINVAL */
	T_ERR(rmsg_connect(NULL, uri, NULL, &cli_ops, NULL, &c), -EINVAL);
	/* covers: rmsg_connect.3 EINVAL */
	T_ERR(rmsg_connect(ctx, NULL, NULL, &cli_ops, NULL, &c), -EINVAL);
	/* covers: rmsg_connect.3 EINVAL */
	T_ERR(rmsg_connect(ctx, uri, NULL, &cli_ops, NULL, NULL), -EINVAL);
	for (i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		snprintf(fmt, sizeof(fmt), "%s", malformed[i]);
		snprintf(uri, sizeof(uri), fmt, tr, addr);
		/* covers: rmsg_connect.3 EINVAL */
		T_ERR(rmsg_connect(ctx, uri, NULL, &cli_ops, NULL, &c),
		      -EINVAL);
	}
	snprintf(uri, sizeof(uri), "udp://%s:7000", addr);
	/* covers: rmsg_connect.3 EPROTONOSUPPORT */
	T_ERR(rmsg_connect(ctx, uri, NULL, &cli_ops, NULL, &c),
	      -EPROTONOSUPPORT);
	/* shared memory reaches this host only: an address no interface
	 * here has (TEST-NET-1) is refused at once */
	/* covers: rmsg_connect.3 EHOSTUNREACH */
	T_ERR(rmsg_connect(ctx, "shm://192.0.2.77:7000", NULL, &cli_ops, NULL,
			   &c),
	      -EHOSTUNREACH);
	T_ASSERT(c == (void *)1, "*c_p written on failure");
	/* no callback ran for any of these */
	t_run_for(loop, 0.05);
	T_ASSERT(closed == 0, "on_close ran after a failed rmsg_connect()");
}

/* connect to @uri, a failure found later: the call succeeds, on_close
 * says why, @want within @max_s seconds; @what names the case */
static void connect_closes(const char *uri, int want, double max_s,
			   const char *what)
{
	struct rmsg_conn *c = NULL;

	closed = 0;
	close_reason = 0;
	T_OK(rmsg_connect(ctx, uri, NULL, &cli_ops, NULL, &c));
	T_ASSERT(c != NULL, "no connection");
	T_RUN_UNTIL(loop, closed, max_s);
	T_ASSERT(close_reason == want, "%s: reason %d (%s)", what, close_reason,
		 rmsg_strerror(close_reason));
}

/* a port nothing listens on: the listener that had it is closed */
static void connect_refused(void)
{
	struct rmsg_listener *l;
	char uri[128];

	t_listen(ctx, NULL, NULL, NULL, NULL, &l, uri, sizeof(uri));
	T_OK(rmsg_listener_close(l));
	connect_closes(uri, -ECONNREFUSED, 30, "refused");
	T_ASSERT(established_n == 0, "established");
}

/*
 * Failures that depend on the network reach on_close, not the return
 * value (rmsg_connect.3), on both transports: a ?src= address this host
 * does not have; in the VM (no network to ask) also a name that does not
 * resolve. On the host a name lookup could leave the machine: not tried.
 */
static void connect_later_errors(void)
{
	struct rmsg_listener *l;
	char uri[160], luri[128];

	t_listen(ctx, NULL, NULL, NULL, NULL, &l, luri, sizeof(luri));
	snprintf(uri, sizeof(uri), "%s?src=198.18.255.1", luri);
	connect_closes(uri, -EADDRNOTAVAIL, 30, "bad src");
	/* a source of the other family: no route to an IPv4 host */
	snprintf(uri, sizeof(uri), "%s?src=::1", luri);
	connect_closes(uri, -EHOSTUNREACH, 30, "src family");
	T_OK(rmsg_listener_close(l));

	if (!getenv("RMSG_VM"))
		return;
	uri_of(uri, sizeof(uri), "no-such-host.invalid", 7000);
	connect_closes(uri, -ENXIO, 60, "unknown host");
	T_ASSERT(established_n == 0, "established");
}

/*
 * A peer that never answers the handshake: a child process listens and
 * then never runs its loop. The connection must end with -ETIMEDOUT
 * after the configured timeout.
 */
static void connect_timeout(void)
{
	struct rmsg_cfg *cfg;
	struct rmsg_conn *c = NULL;
	char uri[128];
	uint16_t port;
	double t0;
	int pfd[2], status;
	unsigned ms = (unsigned)(500 * t_scale());
	pid_t pid;

	T_ASSERT(pipe(pfd) == 0, "pipe");
	pid = fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		struct ev_loop *cl = ev_loop_new(EVFLAG_AUTO);
		struct rmsg_ctx *cctx;
		struct rmsg_listener *l;

		close(pfd[0]);
		if (!cl || rmsg_ctx_create(cl, NULL, &cctx))
			_exit(2);
		t_listen(cctx, NULL, NULL, NULL, NULL, &l, uri, sizeof(uri));
		if (rmsg_listener_port(l, &port) ||
		    write(pfd[1], &port, sizeof(port)) != sizeof(port))
			_exit(3);
		for (;;)
			pause(); /* never runs the loop: never answers */
	}
	close(pfd[1]);
	T_ASSERT(read(pfd[0], &port, sizeof(port)) == sizeof(port),
		 "child listener");
	close(pfd[0]);
	uri_of(uri, sizeof(uri), addr, port);
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_timeout_ms(cfg, ms));
	closed = 0;
	close_reason = 0;
	t0 = ev_time();
	T_OK(rmsg_connect(ctx, uri, cfg, &cli_ops, NULL, &c));
	rmsg_cfg_destroy(cfg);
	T_RUN_UNTIL(loop, closed, 30);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	T_ASSERT(close_reason == -ETIMEDOUT, "silent peer: reason %d (%s)",
		 close_reason, rmsg_strerror(close_reason));
	/* not before the configured timeout (no upper bound: slow VMs) */
	T_ASSERT(ev_time() - t0 >= ms / 1000.0 * 0.9,
		 "timed out after %.3f s, before %u ms", ev_time() - t0, ms);
	T_ASSERT(established_n == 0, "established");
}

/* ------------------------------------------------------------------ */
/* a connected pair: rmsg_send.3, rmsg_conn_*.3, rmsg_msg_data.3        */

static struct rmsg_conn *srv_c, *cli_c;
static int srv_est_n, srv_closed, srv_msgs, writable, sent_done;
static int sent_status[64];
static int accept_checked;

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t len, void *arg)
{
	char big[RMSG_PRIVATE_DATA_MAX + 1] = {0};

	/* covers: rmsg_conn_peer_data.3 EINVAL */
	T_ERR(rmsg_conn_set_private_data(c, big, sizeof(big)), -EINVAL);
	/* covers: rmsg_conn_peer_data.3 EINVAL */
	T_ERR(rmsg_conn_set_private_data(c, NULL, 3), -EINVAL);
	/* covers: rmsg_conn_peer_data.3 EINVAL */
	T_ERR(rmsg_conn_set_private_data(NULL, "x", 1), -EINVAL);
	T_OK(rmsg_conn_set_private_data(c, big, RMSG_PRIVATE_DATA_MAX));
	accept_checked = 1;
	return 0;
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	srv_c = c;
	srv_est_n++;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	srv_msgs++;
	if (srv_msgs == 1) {
		T_OK(rmsg_msg_hold(m));
		/* covers: rmsg_msg_data.3 EALREADY */
		T_ERR(rmsg_msg_hold(m), -EALREADY);
		rmsg_msg_release(m);
		/* a connection's own callback is a callback of the context */
		/* covers: rmsg_ctx_destroy.3 EBUSY */
		T_ERR(rmsg_ctx_destroy(rmsg_conn_ctx(c)), -EBUSY);
	}
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	srv_closed++;
	if (c == srv_c)
		srv_c = NULL;
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	writable++;
}

static void cli_sent(struct rmsg_conn *c, int status, void *arg)
{
	intptr_t i = (intptr_t)arg;

	if (i >= 0 && i < 64)
		sent_status[i] = status;
	sent_done++;
}

static void pair_close(struct rmsg_conn *c, int reason, void *arg)
{
	closed++;
	close_reason = reason;
	if (c == cli_c)
		cli_c = NULL;
}

static const struct rmsg_conn_ops pair_cli_ops = {
	.on_established = cli_est,
	.on_writable = cli_writable,
	.on_close = pair_close,
};

static const struct rmsg_conn_ops pair_srv_ops = {
	.on_established = srv_est,
	.on_msg = srv_msg,
	.on_close = srv_close,
};

static int ctx_work_ran;

static void ctx_work(struct rmsg_ctx *c, void *arg)
{
	ctx_work_ran++;
	/* covers: rmsg_ctx_destroy.3 EBUSY */
	T_ERR(rmsg_ctx_destroy(c), -EBUSY);
}

static void pair_errors(void)
{
	enum {
		SQ = 4,
		MAXMSG = 4096
	};
	static char payload[MAXMSG + 1];
	struct rmsg_listener *l;
	struct rmsg_cfg *cfg;
	struct iovec iov[RMSG_IOV_MAX + 1];
	const void *pd;
	size_t len;
	char uri[128];
	int i, ret;

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_send_queue(cfg, SQ));
	T_OK(rmsg_cfg_set_max_msg_size(cfg, MAXMSG));
	t_listen(ctx, cfg, &pair_srv_ops, on_accept, NULL, &l, uri,
		 sizeof(uri));
	closed = 0;
	established_n = 0;
	T_OK(rmsg_connect(ctx, uri, cfg, &pair_cli_ops, NULL, &cli_c));
	rmsg_cfg_destroy(cfg);

	/*
	 * Not established yet, so nothing completes: the send queue's
	 * bound (rmsg_cfg_set_send_queue) counts queued operations, and
	 * the one past it fails.
	 */
	iov[0].iov_base = payload;
	iov[0].iov_len = 8;
	for (i = 0; i < SQ; i++)
		T_OK(rmsg_send(cli_c, iov, 1, cli_sent, (void *)(intptr_t)i));
	/* covers: rmsg_send.3 EAGAIN */
	T_ERR(rmsg_send(cli_c, iov, 1, cli_sent, (void *)(intptr_t)SQ),
	      -EAGAIN);
	T_RUN_UNTIL(loop, established_n && srv_est_n && writable, 30);
	T_RUN_UNTIL(loop, sent_done == SQ, 30);
	for (i = 0; i < SQ; i++)
		T_ASSERT(sent_status[i] == 0, "send %d: %d", i, sent_status[i]);
	T_ASSERT(accept_checked, "accept callback");
	T_RUN_UNTIL(loop, srv_msgs == SQ, 30);

	/* covers: rmsg_send.3 EINVAL */
	T_ERR(rmsg_send(NULL, iov, 1, NULL, NULL), -EINVAL);
	/* covers: rmsg_send.3 EINVAL */
	T_ERR(rmsg_send(cli_c, iov, -1, NULL, NULL), -EINVAL);
	for (i = 0; i <= RMSG_IOV_MAX; i++) {
		iov[i].iov_base = payload;
		iov[i].iov_len = 1;
	}
	/* covers: rmsg_send.3 EINVAL */
	T_ERR(rmsg_send(cli_c, iov, RMSG_IOV_MAX + 1, NULL, NULL), -EINVAL);
	/* covers: rmsg_send.3 EINVAL */
	T_ERR(rmsg_send(cli_c, NULL, 1, NULL, NULL), -EINVAL);
	iov[1].iov_base = NULL;
	iov[1].iov_len = 5;
	/* covers: rmsg_send.3 EINVAL */
	T_ERR(rmsg_send(cli_c, iov, 2, NULL, NULL), -EINVAL);
	iov[1].iov_len = 0; /* a NULL piece of length 0 is fine */
	T_OK(rmsg_send(cli_c, iov, 2, NULL, NULL));
	/* zero pieces is a message of length 0 */
	T_OK(rmsg_send(cli_c, NULL, 0, NULL, NULL));

	/* the bound itself goes, one byte more does not */
	iov[0].iov_base = payload;
	iov[0].iov_len = MAXMSG;
	T_OK(rmsg_send(cli_c, iov, 1, NULL, NULL));
	iov[0].iov_len = MAXMSG + 1;
	/* covers: rmsg_send.3 EMSGSIZE */
	T_ERR(rmsg_send(cli_c, iov, 1, NULL, NULL), -EMSGSIZE);
	iov[0].iov_len = MAXMSG;
	iov[1].iov_base = payload;
	iov[1].iov_len = 1;
	/* covers: rmsg_send.3 EMSGSIZE */
	T_ERR(rmsg_send(cli_c, iov, 2, NULL, NULL), -EMSGSIZE);
	T_RUN_UNTIL(loop, srv_msgs == SQ + 3, 30);

	/* covers: rmsg_conn_peer_data.3 EINVAL */
	T_ERR(rmsg_conn_peer_data(NULL, &pd, &len), -EINVAL);
	/* covers: rmsg_conn_peer_data.3 EINVAL */
	T_ERR(rmsg_conn_peer_data(cli_c, NULL, &len), -EINVAL);
	/* covers: rmsg_conn_peer_data.3 EINVAL */
	T_ERR(rmsg_conn_peer_data(cli_c, &pd, NULL), -EINVAL);
	T_OK(rmsg_conn_peer_data(cli_c, &pd, &len));
	T_ASSERT(len == RMSG_PRIVATE_DATA_MAX, "accept's private data: %zu",
		 len);
	/* only the accept callback may set it */
	/* covers: rmsg_conn_peer_data.3 EALREADY */
	T_ERR(rmsg_conn_set_private_data(cli_c, "x", 1), -EALREADY);
	/* covers: rmsg_conn_peer_data.3 EALREADY */
	T_ERR(rmsg_conn_set_private_data(srv_c, "x", 1), -EALREADY);
	/* covers: rmsg_conn_transport.3 EINVAL */
	T_ERR(rmsg_conn_set_arg(NULL, NULL), -EINVAL);
	/* covers: rmsg_conn_resume_state.3 EINVAL */
	T_ERR(rmsg_conn_resume_state(NULL), -EINVAL);
	/* no resume window on either side (the default): not resumable */
	T_ERR(rmsg_conn_resume_state(cli_c), RMSG_RESUME_NONE);
	T_ERR(rmsg_conn_resume_state(srv_c), RMSG_RESUME_NONE);
	/* covers: rmsg_conn_close.3 EINVAL */
	T_ERR(rmsg_conn_close(NULL), -EINVAL);
	/* covers: rmsg_msg_data.3 EINVAL */
	T_ERR(rmsg_msg_hold(NULL), -EINVAL);

	/* a context's callback may not destroy it */
	T_OK(rmsg_ctx_submit(ctx, ctx_work, NULL));
	T_RUN_UNTIL(loop, ctx_work_ran, 30);

	/* closing: further sends fail at once, no callback */
	T_OK(rmsg_conn_close(cli_c));
	iov[0].iov_len = 8;
	ret = rmsg_send(cli_c, iov, 1, cli_sent, (void *)(intptr_t)63);
	/* covers: rmsg_send.3 ENOTCONN */
	T_ERR(ret, -ENOTCONN);
	T_RUN_UNTIL(loop, closed && srv_closed, 30);
	T_ASSERT(close_reason == 0, "closed locally: reason %d", close_reason);
	T_ASSERT(sent_status[63] == 0 && sent_done == SQ,
		 "callback of a failed send ran");
	T_OK(rmsg_listener_close(l));
}

/* ------------------------------------------------------------------ */
/* rmsg_ctx_*.3, rmsg_buf_alloc.3                                       */

static void noop_work(struct rmsg_ctx *c, void *arg)
{
}

static void ctx_buf_errors(void)
{
	struct rmsg_ctx *c2;
	struct rmsg_cfg *cfg;
	void *buf = (void *)1, *a, *b;
	const size_t limit = 16u << 20;

	/* covers: rmsg_ctx_create.3 EINVAL */
	T_ERR(rmsg_ctx_create(loop, NULL, NULL), -EINVAL);
	/* covers: rmsg_ctx_destroy.3 EINVAL */
	T_ERR(rmsg_ctx_destroy(NULL), -EINVAL);
	/* covers: rmsg_ctx_submit.3 EINVAL */
	T_ERR(rmsg_ctx_submit(NULL, noop_work, NULL), -EINVAL);
	/* covers: rmsg_ctx_submit.3 EINVAL */
	T_ERR(rmsg_ctx_submit(ctx, NULL, NULL), -EINVAL);

	/* covers: rmsg_buf_alloc.3 EINVAL */
	T_ERR(rmsg_buf_alloc(NULL, 64, &buf), -EINVAL);
	/* covers: rmsg_buf_alloc.3 EINVAL */
	T_ERR(rmsg_buf_alloc(ctx, 0, &buf), -EINVAL);
	/* covers: rmsg_buf_alloc.3 EINVAL */
	T_ERR(rmsg_buf_alloc(ctx, 64, NULL), -EINVAL);
	T_ASSERT(buf == (void *)1, "*buf_p written on failure");

	/* the budget of registered memory: more than it fails, and a freed
	 * buffer makes room again */
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_reg_limit(cfg, limit));
	T_OK(rmsg_ctx_create(loop, cfg, &c2));
	rmsg_cfg_destroy(cfg);
	/* covers: rmsg_buf_alloc.3 ENOMEM */
	T_ERR(rmsg_buf_alloc(c2, 2 * limit, &buf), -ENOMEM);
	T_ASSERT(buf == (void *)1, "*buf_p written on failure");
	T_OK(rmsg_buf_alloc(c2, limit / 2 + limit / 8, &a));
	/* covers: rmsg_buf_alloc.3 ENOMEM */
	T_ERR(rmsg_buf_alloc(c2, limit / 2 + limit / 8, &b), -ENOMEM);
	rmsg_buf_free(c2, a);
	T_OK(rmsg_buf_alloc(c2, limit / 2 + limit / 8, &b));
	rmsg_buf_free(c2, b);
	rmsg_buf_free(c2, NULL);
	T_OK(rmsg_ctx_destroy(c2));
}

int main(void)
{
	t_require_transport();
	signal(SIGPIPE, SIG_IGN);
	tr = t_transport();
	addr = getenv("RMSG_TEST_ADDR");
	if (!addr || !*addr)
		addr = "127.0.0.1";
	loop = EV_DEFAULT;
	t_deadline(loop, 240);
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));

	listen_errors();
	if (!strcmp(tr, "tcp"))
		nodev_errors();
	connect_errors();
	connect_refused();
	connect_later_errors();
	connect_timeout();
	pair_errors();
	ctx_buf_errors();

	T_OK(rmsg_ctx_destroy(ctx));
	printf("errors over %s: ok\n", tr);
	return 0;
}
