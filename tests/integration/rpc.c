// SPDX-License-Identifier: MIT
/*
 * rpc.c - calls with deadlines and cancellation, on either transport.
 *
 * 1. N calls, 64 in flight, random sizes (log-uniform 1 B..64 KiB, so
 *    some go by rendezvous on RDMA), each reply checked against its
 *    request: the server echoes, reversing which of two handlers answers
 *    at once and which answers later from a timer.
 *    N is RMSG_TEST_CALLS, by default 1,000,000 on TCP and 50,000 on
 *    RDMA (Soft-RoCE under emulation is slow).
 * 2. Deadline: a call whose handler answers after 300 ms, with a 50 ms
 *    deadline, gets -ETIMEDOUT once; the late reply is dropped.
 * 3. Cancel: -ECANCELED once; a second cancel gives -ENOENT.
 * 4. Unknown method: -ENOSYS. rmsg_reply_error(-EPERM) reaches the caller.
 * 5. Four threads submit 2,000 calls through rmsg_ctx_submit().
 */
#include <pthread.h>
#include <string.h>

#include "common.h"

#define M_ECHO 1
#define M_ECHO_LATER 2
#define M_SLOW 3
#define M_FAIL 4
#define WINDOW 64
#define NTHREADS 4
#define PER_THREAD 500

struct later {
	ev_timer t;
	struct rmsg_req *req;
	struct rmsg_msg *m;
};

static struct ev_loop *loop;
static struct rmsg_conn *client;
static struct rmsg_ctx *cctx;
static struct rmsg_listener *lis;
static long ncalls, issued, replied, inflight;
static int phase, slow_replied, timeouts, cancels, nosys, eperm;
static int thread_done, thread_replies;
static uint64_t cancel_id;

/* ---- server ---- */

static void srv_echo(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_reply(req, &iov, 1));
}

static void later_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	struct later *lt = (struct later *)w;
	int ret;

	if (lt->m) {
		struct iovec iov = {(void *)rmsg_msg_data(lt->m),
				    rmsg_msg_len(lt->m)};

		ret = rmsg_reply(lt->req, &iov, 1);
		rmsg_msg_release(lt->m);
	} else {
		ret = rmsg_reply(lt->req, NULL, 0);
		slow_replied++;
	}
	T_ASSERT(ret == 0 || ret == -ENOTCONN, "late reply %d", ret);
	free(lt);
}

static void defer(struct rmsg_req *req, struct rmsg_msg *m, double after)
{
	struct later *lt = calloc(1, sizeof(*lt));

	lt->req = req;
	lt->m = m;
	if (m)
		T_OK(rmsg_msg_hold(m));
	ev_timer_init(&lt->t, later_cb, after, 0);
	ev_timer_start(loop, &lt->t);
}

static void srv_echo_later(struct rmsg_conn *c, struct rmsg_req *req,
			   struct rmsg_msg *m, void *arg)
{
	defer(req, m, 0);
}

static void srv_slow(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *m, void *arg)
{
	defer(req, NULL, 0.3);
}

static void srv_fail(struct rmsg_conn *c, struct rmsg_req *req,
		     struct rmsg_msg *m, void *arg)
{
	T_OK(rmsg_reply_error(req, -EPERM));
}

/* ---- client ---- */

struct call {
	long n;
	size_t len;
	uint8_t buf[];
};

static void next_phase(void);
static void pump(void);

static void echo_done(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		      void *arg)
{
	struct call *cl = arg;

	T_ASSERT(status == 0, "call %ld: %d (%s)", cl->n, status,
		 rmsg_strerror(status));
	T_ASSERT(rmsg_msg_len(r) == cl->len, "call %ld: reply len %zu/%zu",
		 cl->n, rmsg_msg_len(r), cl->len);
	T_ASSERT(t_check(rmsg_msg_data(r), cl->len, (uint64_t)cl->n) == 0,
		 "call %ld: reply differs", cl->n);
	free(cl);
	replied++;
	inflight--;
	pump();
}

static void pump(void)
{
	while (inflight < WINDOW && issued < ncalls) {
		size_t len = t_size_log(1, 65536);
		struct call *cl = malloc(sizeof(*cl) + len);
		struct iovec iov[4];
		int n;

		cl->n = issued;
		cl->len = len;
		t_fill(cl->buf, len, (uint64_t)issued);
		n = t_split(cl->buf, len, iov, 4);
		T_OK(rmsg_call(client, issued % 2 ? M_ECHO : M_ECHO_LATER, iov,
			       n, 0, echo_done, cl, NULL));
		issued++;
		inflight++;
	}
	if (replied == ncalls && phase == 0)
		next_phase();
}

static void expect_cb(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		      void *arg)
{
	int *counter = arg;

	T_ASSERT(r == NULL, "no reply with an error");
	if (counter == &timeouts)
		T_ASSERT(status == -ETIMEDOUT, "deadline: %d", status);
	else if (counter == &cancels)
		T_ASSERT(status == -ECANCELED, "cancel: %d", status);
	else if (counter == &nosys)
		T_ASSERT(status == -ENOSYS, "unknown method: %d", status);
	else
		T_ASSERT(status == -EPERM, "reply_error: %d", status);
	(*counter)++;
	next_phase();
}

static void *thread_main(void *arg);

static void thread_reply(struct rmsg_conn *c, int status, struct rmsg_msg *r,
			 void *arg)
{
	T_ASSERT(status == 0, "threaded call: %d", status);
	T_ASSERT(rmsg_msg_len(r) == sizeof(long) &&
			 !memcmp(rmsg_msg_data(r), arg, sizeof(long)),
		 "threaded reply differs");
	free(arg);
	if (++thread_replies == NTHREADS * PER_THREAD)
		next_phase();
}

/* runs on the loop thread, submitted from a worker */
static void submitted(struct rmsg_ctx *ctx, void *arg)
{
	struct iovec iov = {arg, sizeof(long)};

	T_OK(rmsg_call(client, M_ECHO, &iov, 1, 10000, thread_reply, arg,
		       NULL));
}

static void *thread_main(void *arg)
{
	long base = (long)(intptr_t)arg, i;

	for (i = 0; i < PER_THREAD; i++) {
		long *v = malloc(sizeof(*v));

		*v = base * 100000 + i;
		T_OK(rmsg_ctx_submit(cctx, submitted, v));
	}
	__atomic_add_fetch(&thread_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static pthread_t threads[NTHREADS];

static void next_phase(void)
{
	struct iovec iov = {"x", 1};
	int i;

	switch (phase++) {
	case 0: /* deadline */
		T_OK(rmsg_call(client, M_SLOW, &iov, 1, 50, expect_cb,
			       &timeouts, NULL));
		break;
	case 1: /* cancel */
		T_OK(rmsg_call(client, M_SLOW, &iov, 1, 0, expect_cb, &cancels,
			       &cancel_id));
		T_OK(rmsg_call_cancel(client, cancel_id));
		T_ASSERT(cancels == 0, "callback inside rmsg_call_cancel");
		T_ASSERT(rmsg_call_cancel(client, cancel_id) == -ENOENT,
			 "second cancel");
		break;
	case 2:
		T_OK(rmsg_call(client, 99, &iov, 1, 0, expect_cb, &nosys,
			       NULL));
		break;
	case 3:
		T_OK(rmsg_call(client, M_FAIL, &iov, 1, 0, expect_cb, &eperm,
			       NULL));
		break;
	case 4:
		for (i = 0; i < NTHREADS; i++)
			pthread_create(&threads[i], NULL, thread_main,
				       (void *)(intptr_t)(i + 1));
		break;
	case 5: /* let the slow handlers' late replies arrive, then close */
		break;
	}
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	pump();
}

static void idle_close(struct ev_loop *l, ev_timer *w, int revents)
{
	if (phase == 6 && slow_replied == 2) {
		ev_timer_stop(l, w);
		rmsg_conn_close(client);
		rmsg_listener_close(lis);
	}
}

int main(void)
{
	struct rmsg_conn_ops ops = {.on_established = cli_est};
	struct rmsg_ctx *sctx;
	struct rmsg_cfg *cfg;
	const char *env = getenv("RMSG_TEST_CALLS");
	char uri[128];
	ev_timer closer;
	ev_tstamp t0;
	int i;

	t_require_transport();
	ncalls = env				  ? atol(env)
		 : !strcmp(t_transport(), "rdma") ? 50000
						  : 1000000;
	loop = ev_default_loop(0);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_handle(sctx, M_ECHO, srv_echo, NULL));
	T_OK(rmsg_handle(sctx, M_ECHO_LATER, srv_echo_later, NULL));
	T_OK(rmsg_handle(sctx, M_SLOW, srv_slow, NULL));
	T_OK(rmsg_handle(sctx, M_FAIL, srv_fail, NULL));
	t_listen(sctx, NULL, NULL, NULL, NULL, &lis, uri, sizeof(uri));
	/* the threads queue 2,000 calls at once: room for all of them */
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_send_queue(cfg, 4096));
	T_OK(rmsg_connect(cctx, uri, cfg, &ops, NULL, &client));
	ev_timer_init(&closer, idle_close, 0.05, 0.05);
	ev_timer_start(loop, &closer);
	t_deadline(loop, 900);
	t0 = ev_time();
	ev_run(loop, 0);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(threads[i], NULL);
	T_ASSERT(replied == ncalls, "replies %ld of %ld", replied, ncalls);
	T_ASSERT(timeouts == 1 && cancels == 1 && nosys == 1 && eperm == 1,
		 "timeouts %d cancels %d nosys %d eperm %d", timeouts, cancels,
		 nosys, eperm);
	T_ASSERT(thread_replies == NTHREADS * PER_THREAD, "threaded %d",
		 thread_replies);
	printf("rpc over %s: %ld calls checked (64 in flight), deadline, "
	       "cancel, ENOSYS, EPERM, %d calls from %d threads, %.1f s\n",
	       t_transport(), ncalls, thread_replies, NTHREADS, ev_time() - t0);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(cfg);
	return 0;
}
