// SPDX-License-Identifier: MIT
/*
 * fdmode.c - contexts behind one file descriptor (rmsg_ctx_create_fd.3,
 * rmsg_ctx_progress.3; issue 19), driven only by epoll_wait() on
 * rmsg_ctx_fd() and rmsg_ctx_progress(): no fd-mode context's loop is
 * ever run with ev_run(). Most waits block with no timeout at all, so a
 * descriptor that fails to become readable hangs the test, which a
 * per-phase alarm() then fails, naming the phase.
 *
 *  0. argument errors (-EINVAL, -EOPNOTSUPP on a libev-mode context,
 *     -EMFILE out of descriptors); an idle context: timeout -1 (no
 *     keepalive, no connection), progress 0, descriptor not readable
 *  1. an fd-mode client and server in one process: messages and calls,
 *     every callback inside rmsg_ctx_progress() of its own context, on
 *     this thread; -EBUSY from a callback
 *  2. a send made outside progress: timeout 0, the descriptor becomes
 *     readable, progress handles it (> 0), the message arrives
 *  3. a call the server never answers: timeout > 0 and at most the
 *     deadline while it is pending; then -ETIMEDOUT with the test
 *     blocked in epoll_wait(-1): only the timer can wake it
 *  4. rmsg_ctx_submit() from another thread wakes epoll_wait(-1)
 *  5. an fd-mode client and a libev-mode server (its own thread, ev_run)
 *  6. rmsg_ctx_progress() on a libev-mode context without ev_run: over
 *     RDMA it delivers completions (the send's, the echo's); over TCP it
 *     only sends (the echo waits for the loop), as the man page says
 *  7. rmsg_ctx_destroy() with calls and sends in flight: each callback
 *     once with -ECANCELED, on_close last
 *  8. a peer that stops (SIGSTOP: its kernel still acknowledges, only
 *     keepalive notices) ends the connection with -ETIMEDOUT, the
 *     context's descriptor the only thing the test waits on
 * Runs on both transports (RDMA in the VM).
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define M_ECHO 1  /* the server answers with the request */
#define M_NEVER 2 /* the server never answers */
#define NMSGS 20
#define NCALLS 20
#define DEADLINE_MS 3000
#define KA_MS 300
#define KA_MISSES 3
#define NFLIGHT 16
#define BIG 200000
#define NSPIN 4
#define MAX_HELD 64

static const char *phase = "start";
static int ep;			   /* the epoll set of the fd-mode contexts */
static struct rmsg_ctx *running;   /* in rmsg_ctx_progress() of this one */
static struct rmsg_ctx *destroyed; /* in rmsg_ctx_destroy() of this one */
static pthread_t main_thread;

/* ---- driving the contexts ---------------------------------------- */

static void on_alarm(int sig)
{
	static const char m[] = "FAIL: timed out in phase: ";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0 ||
	    write(2, phase, strlen(phase)) < 0 || write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

/* a phase: named in the output, bounded by an alarm of @secs (scaled) */
static void begin(const char *name, double secs)
{
	phase = name;
	printf("%s: %s\n", t_transport(), name);
	fflush(stdout);
	alarm((unsigned)(secs * t_scale()) + 1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int progress(struct rmsg_ctx *ctx)
{
	int n;

	running = ctx;
	n = rmsg_ctx_progress(ctx);
	running = NULL;
	T_ASSERT(n >= 0, "rmsg_ctx_progress: %s", rmsg_strerror(n));
	return n;
}

static void watch(int set, struct rmsg_ctx *ctx)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ctx};
	int fd = rmsg_ctx_fd(ctx);

	T_ASSERT(fd >= 0, "rmsg_ctx_fd: %s", rmsg_strerror(fd));
	T_ASSERT(epoll_ctl(set, EPOLL_CTL_ADD, fd, &ev) == 0, "EPOLL_CTL_ADD");
}

static void unwatch(int set, struct rmsg_ctx *ctx)
{
	T_ASSERT(epoll_ctl(set, EPOLL_CTL_DEL, rmsg_ctx_fd(ctx), NULL) == 0,
		 "EPOLL_CTL_DEL");
}

/* one epoll_wait() on @set; progress on each context that is readable;
 * returns how many were */
static int wait_set(int set, int timeout_ms)
{
	struct epoll_event evs[8];
	int i, n;

	n = epoll_wait(set, evs, 8, timeout_ms);
	if (n < 0 && errno == EINTR)
		return 0;
	T_ASSERT(n >= 0, "epoll_wait: %s", strerror(errno));
	for (i = 0; i < n; i++)
		progress(evs[i].data.ptr);
	return n;
}

/* blocks in epoll_wait(-1) until @cond: only the descriptors wake it */
#define UNTIL(cond)                       \
	do {                              \
		while (!(cond))           \
			wait_set(ep, -1); \
	} while (0)

/* until no context of the set has been readable for 200 ms */
static void settle(int set)
{
	while (wait_set(set, 200) > 0)
		;
}

static int readable(struct rmsg_ctx *ctx, int timeout_ms)
{
	struct pollfd p = {.fd = rmsg_ctx_fd(ctx), .events = POLLIN};
	int n = poll(&p, 1, timeout_ms);

	T_ASSERT(n >= 0, "poll: %s", strerror(errno));
	return n > 0 && (p.revents & POLLIN);
}

/* a callback of an fd-mode context runs inside its rmsg_ctx_progress()
 * (or its rmsg_ctx_destroy()), on the thread that called it */
static void inside(struct rmsg_conn *c)
{
	struct rmsg_ctx *ctx = rmsg_conn_ctx(c);

	T_ASSERT(running == ctx || destroyed == ctx,
		 "a callback ran outside rmsg_ctx_progress() of its context");
	T_ASSERT(pthread_equal(pthread_self(), main_thread),
		 "a callback ran on another thread");
}

/* ---- the fd-mode server ------------------------------------------ */

static struct rmsg_ctx *srv;
static int s_est, s_msgs, s_never, s_closed, s_busy_checked;
static struct rmsg_req *held[MAX_HELD];
static char s_last[64];

static void s_echoed(struct rmsg_conn *c, int status, void *arg)
{
	inside(c);
	rmsg_msg_release(arg);
}

static void s_on_est(struct rmsg_conn *c, void *arg)
{
	inside(c);
	s_est++;
}

static void s_on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};
	size_t n = rmsg_msg_len(m) < sizeof(s_last) - 1 ? rmsg_msg_len(m)
							: sizeof(s_last) - 1;

	inside(c);
	memcpy(s_last, rmsg_msg_data(m), n);
	s_last[n] = '\0';
	s_msgs++;
	T_OK(rmsg_msg_hold(m));
	T_OK(rmsg_send(c, &iov, 1, s_echoed, m));
}

static void s_on_close(struct rmsg_conn *c, int reason, void *arg)
{
	inside(c);
	s_closed++;
}

static const struct rmsg_conn_ops s_ops = {
	.on_established = s_on_est,
	.on_msg = s_on_msg,
	.on_close = s_on_close,
};

static void h_echo(struct rmsg_conn *c, struct rmsg_req *req,
		   struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	inside(c);
	if (!s_busy_checked++) {
		/* covers: rmsg_ctx_progress.3 EBUSY */
		T_ASSERT(rmsg_ctx_progress(srv) == -EBUSY,
			 "rmsg_ctx_progress from a handler");
	}
	T_OK(rmsg_reply(req, &iov, 1));
}

static void h_never(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *m, void *arg)
{
	inside(c);
	/* answered at the end, once its connection is gone */
	T_ASSERT(s_never < MAX_HELD, "more than %d requests held", MAX_HELD);
	held[s_never++] = req;
}

/* ---- clients ------------------------------------------------------ */

struct peer {
	struct rmsg_conn *c;
	int fdmode; /* its context is from rmsg_ctx_create_fd() */
	int est, msgs, closed, close_reason;
	int msgs_in_progress; /* on_msg runs inside rmsg_ctx_progress() */
	int pending;	      /* callbacks still to run when it closes */
	char last[64];
};

static void p_on_est(struct rmsg_conn *c, void *arg)
{
	struct peer *p = arg;

	if (p->fdmode)
		inside(c);
	p->est++;
}

static void p_on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct peer *p = arg;
	size_t n = rmsg_msg_len(m) < sizeof(p->last) - 1 ? rmsg_msg_len(m)
							 : sizeof(p->last) - 1;

	if (p->fdmode)
		inside(c);
	memcpy(p->last, rmsg_msg_data(m), n);
	p->last[n] = '\0';
	p->msgs++;
	p->msgs_in_progress += running == rmsg_conn_ctx(c);
}

static void p_on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct peer *p = arg;

	if (p->fdmode)
		inside(c);
	T_ASSERT(p->pending == 0,
		 "on_close ran before %d callbacks of the connection",
		 p->pending);
	p->closed++;
	p->close_reason = reason;
}

static const struct rmsg_conn_ops p_ops = {
	.on_established = p_on_est,
	.on_msg = p_on_msg,
	.on_close = p_on_close,
};

/* an operation: its callback must run once, with @want unless @any */
struct op {
	struct peer *p;
	char text[32];
	int done, status, any;
	int want;
};

static void op_end(struct rmsg_conn *c, struct op *o, int status)
{
	if (o->p->fdmode)
		inside(c);
	T_ASSERT(!o->done, "a callback ran twice (%s)", o->text);
	T_ASSERT(o->any || status == o->want, "%s: %s, expected %s", o->text,
		 rmsg_strerror(status), rmsg_strerror(o->want));
	o->done = 1;
	o->status = status;
	o->p->pending--;
}

static void op_sent(struct rmsg_conn *c, int status, void *arg)
{
	op_end(c, arg, status);
}

static void op_replied(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		       void *arg)
{
	struct op *o = arg;
	size_t len = strlen(o->text);

	op_end(c, o, status);
	if (status == 0)
		T_ASSERT(rmsg_msg_len(r) == len &&
				 !memcmp(rmsg_msg_data(r), o->text, len),
			 "%s: the reply is not the request", o->text);
	else
		T_ASSERT(r == NULL, "a failed call has a reply");
}

static void send_op(struct peer *p, struct op *o, const char *text, int want)
{
	struct iovec iov = {o->text, 0};

	memset(o, 0, sizeof(*o));
	o->p = p;
	o->want = want;
	snprintf(o->text, sizeof(o->text), "%s", text);
	iov.iov_len = strlen(o->text);
	T_OK(rmsg_send(p->c, &iov, 1, op_sent, o));
	p->pending++;
}

static void call_op(struct peer *p, struct op *o, uint32_t method,
		    const char *text, uint32_t timeout_ms, int want)
{
	struct iovec iov = {o->text, 0};

	memset(o, 0, sizeof(*o));
	o->p = p;
	o->want = want;
	snprintf(o->text, sizeof(o->text), "%s", text);
	iov.iov_len = strlen(o->text);
	T_OK(rmsg_call(p->c, method, &iov, 1, timeout_ms, op_replied, o, NULL));
	p->pending++;
}

static struct rmsg_cfg *cfg_keepalive(uint32_t ms)
{
	struct rmsg_cfg *cfg;

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, ms));
	if (ms)
		T_OK(rmsg_cfg_set_keepalive_misses(cfg, KA_MISSES));
	return cfg;
}

/* ---- 0. arguments and an idle context ----------------------------- */

static void phase_args(struct rmsg_ctx *cli)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct rmsg_ctx *lctx, *ctx = NULL;
	struct rlimit rl, low;
	int ms = 1234, fd;

	/* covers: rmsg_ctx_create_fd.3 EINVAL */
	T_ASSERT(rmsg_ctx_create_fd(NULL, NULL) == -EINVAL, "NULL ctx_p");
	/* covers: rmsg_ctx_create_fd.3 EINVAL */
	T_ASSERT(rmsg_ctx_fd(NULL) == -EINVAL, "rmsg_ctx_fd(NULL)");
	/* covers: rmsg_ctx_create_fd.3 EINVAL */
	T_ASSERT(rmsg_ctx_timeout(NULL, &ms) == -EINVAL && ms == 1234,
		 "rmsg_ctx_timeout(NULL)");
	/* covers: rmsg_ctx_create_fd.3 EINVAL */
	T_ASSERT(rmsg_ctx_timeout(cli, NULL) == -EINVAL,
		 "rmsg_ctx_timeout(ctx, NULL)");
	/* covers: rmsg_ctx_progress.3 EINVAL */
	T_ASSERT(rmsg_ctx_progress(NULL) == -EINVAL, "rmsg_ctx_progress(NULL)");
	T_ASSERT(rmsg_ctx_loop(cli) != NULL, "an fd-mode context has a loop");

	/* a context on the application's libev loop has no descriptor */
	T_ASSERT(loop, "ev_loop_new");
	T_OK(rmsg_ctx_create(loop, NULL, &lctx));
	/* covers: rmsg_ctx_create_fd.3 EOPNOTSUPP */
	T_ASSERT(rmsg_ctx_fd(lctx) == -EOPNOTSUPP, "rmsg_ctx_fd, libev mode");
	/* covers: rmsg_ctx_create_fd.3 EOPNOTSUPP */
	T_ASSERT(rmsg_ctx_timeout(lctx, &ms) == -EOPNOTSUPP && ms == 1234,
		 "rmsg_ctx_timeout, libev mode");
	T_ASSERT(rmsg_ctx_progress(lctx) == 0,
		 "rmsg_ctx_progress on an idle libev-mode context");
	T_OK(rmsg_ctx_destroy(lctx));
	ev_loop_destroy(loop);

	/* out of descriptors: every one below the limit is taken */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the lowest free */
	T_ASSERT(fd >= 0, "open /dev/null");
	close(fd);
	T_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	low = rl;
	low.rlim_cur = (rlim_t)fd;
	T_ASSERT(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
	fd = rmsg_ctx_create_fd(NULL, &ctx);
	T_ASSERT(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	/* covers: rmsg_ctx_create_fd.3 EMFILE */
	T_ASSERT(fd == -EMFILE && ctx == NULL,
		 "rmsg_ctx_create_fd with no descriptor left: %d (%s)", fd,
		 rmsg_strerror(fd));

	/* idle: no keepalive, no connection, nothing queued */
	settle(ep);
	T_OK(rmsg_ctx_timeout(cli, &ms));
	T_ASSERT(ms == -1, "timeout %d ms on an idle context, expected -1", ms);
	T_ASSERT(!readable(cli, 0), "an idle context's descriptor is readable");
	T_ASSERT(progress(cli) == 0, "progress on an idle context");
}

/* ---- 1. messages and calls between two fd-mode contexts ------------ */

static struct op calls[NCALLS], sends[NMSGS];
static int c_busy_checked;

static void c_replied(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		      void *arg)
{
	if (!c_busy_checked++) {
		/* covers: rmsg_ctx_progress.3 EBUSY */
		T_ASSERT(rmsg_ctx_progress(rmsg_conn_ctx(c)) == -EBUSY,
			 "rmsg_ctx_progress from a reply callback");
	}
	op_replied(c, status, r, arg);
}

static void phase_traffic(struct peer *p)
{
	char text[32];
	int i, ok;

	for (i = 0; i < NMSGS; i++) {
		snprintf(text, sizeof(text), "message %d", i);
		send_op(p, &sends[i], text, 0);
	}
	for (i = 0; i < NCALLS; i++) {
		struct iovec iov = {calls[i].text, 0};

		memset(&calls[i], 0, sizeof(calls[i]));
		calls[i].p = p;
		snprintf(calls[i].text, sizeof(calls[i].text), "call %d", i);
		iov.iov_len = strlen(calls[i].text);
		T_OK(rmsg_call(p->c, M_ECHO, &iov, 1, 0, c_replied, &calls[i],
			       NULL));
		p->pending++;
	}
	UNTIL(p->pending == 0 && p->msgs == NMSGS);
	T_ASSERT(s_msgs == NMSGS, "the server got %d of %d messages", s_msgs,
		 NMSGS);
	for (i = 0, ok = 0; i < NCALLS; i++)
		ok += calls[i].done && calls[i].status == 0;
	T_ASSERT(ok == NCALLS, "%d of %d calls answered", ok, NCALLS);
	T_ASSERT(!strcmp(p->last, "message 19"), "last echo '%s'", p->last);
	T_ASSERT(c_busy_checked && s_busy_checked, "no -EBUSY check ran");
}

/* ---- 2. a send outside progress ----------------------------------- */

static void phase_kick(struct peer *p, struct rmsg_ctx *cli)
{
	struct op o[2];
	int ms = -2, s0 = s_msgs;

	settle(ep);
	T_ASSERT(progress(cli) == 0, "progress with nothing ready");
	T_ASSERT(progress(srv) == 0, "progress with nothing ready");
	T_ASSERT(!readable(cli, 0), "descriptor readable with nothing ready");

	/* two: whatever the library may send at once, not both */
	send_op(p, &o[0], "outside 1", 0);
	send_op(p, &o[1], "outside 2", 0);
	T_OK(rmsg_ctx_timeout(cli, &ms));
	T_ASSERT(ms == 0, "timeout %d ms with a send queued, expected 0", ms);
	/* nothing but the queued send can make it readable */
	T_ASSERT(readable(cli, (int)(5000 * t_scale())),
		 "a send queued outside progress left the descriptor idle");
	T_ASSERT(progress(cli) > 0, "progress sent the message but says 0");
	UNTIL(o[0].done && o[1].done && s_msgs == s0 + 2 && p->msgs == s0 + 2);
	T_ASSERT(!strcmp(s_last, "outside 2"), "the server got '%s'", s_last);
}

/* ---- 3. a deadline and nothing else --------------------------------- */

static void phase_deadline(struct peer *p, struct rmsg_ctx *cli)
{
	struct op o;
	double t0;
	int ms = -2;

	settle(ep);
	t0 = now();
	call_op(p, &o, M_NEVER, "late", (uint32_t)(DEADLINE_MS * t_scale()),
		-ETIMEDOUT);
	T_OK(rmsg_ctx_timeout(cli, &ms));
	T_ASSERT(ms == 0, "timeout %d ms with a call queued, expected 0", ms);
	UNTIL(s_never == 1);
	/* the request is out; drain whatever else was ready */
	while (readable(cli, 0))
		progress(cli);
	T_OK(rmsg_ctx_timeout(cli, &ms));
	if (now() - t0 < DEADLINE_MS * t_scale() / 2000.0)
		T_ASSERT(ms > 0 && ms <= DEADLINE_MS * t_scale(),
			 "timeout %d ms with a %.0f ms deadline pending", ms,
			 DEADLINE_MS * t_scale());
	else
		printf("NOTE: the request took %.1f s, timeout not checked\n",
		       now() - t0);
	/* epoll_wait(-1): only the context's timer can end the call */
	UNTIL(o.done);
	T_ASSERT(o.status == -ETIMEDOUT, "late call: %s",
		 rmsg_strerror(o.status));
}

/* ---- 4. rmsg_ctx_submit() from another thread ---------------------- */

static int work_ran;

static void work(struct rmsg_ctx *ctx, void *arg)
{
	T_ASSERT(running == ctx, "submitted work ran outside progress");
	T_ASSERT(pthread_equal(pthread_self(), main_thread),
		 "submitted work ran on another thread");
	work_ran++;
}

static void *submitter(void *arg)
{
	usleep(200000);
	T_OK(rmsg_ctx_submit(arg, work, NULL));
	return NULL;
}

static void phase_submit(struct rmsg_ctx *cli)
{
	pthread_t t;

	settle(ep);
	T_ASSERT(pthread_create(&t, NULL, submitter, cli) == 0, "thread");
	UNTIL(work_ran); /* epoll_wait(-1): only the submit can wake it */
	pthread_join(t, NULL);
	T_ASSERT(work_ran == 1, "work ran %d times", work_ran);
}

/* ---- 5. a libev-mode server on its own thread ---------------------- */

struct ev_server {
	struct ev_loop *loop;
	struct rmsg_ctx *ctx;
	struct rmsg_listener *l;
	char uri[128];
	int ready, submitted;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void ev_release(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void ev_on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_msg_hold(m));
	T_OK(rmsg_send(c, &iov, 1, ev_release, m));
}

static void ev_echo(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_reply(req, &iov, 1));
}

static const struct rmsg_conn_ops ev_ops = {.on_msg = ev_on_msg};

static void *ev_server_main(void *arg)
{
	struct ev_server *es = arg;

	es->loop = ev_loop_new(EVFLAG_AUTO);
	T_ASSERT(es->loop, "ev_loop_new");
	T_OK(rmsg_ctx_create(es->loop, NULL, &es->ctx));
	T_OK(rmsg_handle(es->ctx, M_ECHO, ev_echo, NULL));
	t_listen(es->ctx, NULL, &ev_ops, NULL, NULL, &es->l, es->uri,
		 sizeof(es->uri));
	pthread_mutex_lock(&es->mu);
	es->ready = 1;
	pthread_cond_signal(&es->cv);
	pthread_mutex_unlock(&es->mu);
	/* until the listener and the connection are gone */
	ev_run(es->loop, 0);
	/* no rmsg_ctx_submit() may still be running when the destroy
	 * starts (rmsg_ctx_submit.3): wait for the main thread's to return */
	pthread_mutex_lock(&es->mu);
	while (!es->submitted)
		pthread_cond_wait(&es->cv, &es->mu);
	pthread_mutex_unlock(&es->mu);
	T_OK(rmsg_ctx_destroy(es->ctx));
	ev_loop_destroy(es->loop);
	return NULL;
}

static void es_stop(struct rmsg_ctx *ctx, void *arg)
{
	struct ev_server *es = arg;

	T_OK(rmsg_listener_close(es->l));
}

static void phase_libev_peer(struct rmsg_ctx *cli)
{
	static struct ev_server es = {.mu = PTHREAD_MUTEX_INITIALIZER,
				      .cv = PTHREAD_COND_INITIALIZER};
	struct peer p = {.fdmode = 1};
	struct op o[2 * NCALLS];
	char text[32];
	pthread_t t;
	int i;

	T_ASSERT(pthread_create(&t, NULL, ev_server_main, &es) == 0, "thread");
	pthread_mutex_lock(&es.mu);
	while (!es.ready)
		pthread_cond_wait(&es.cv, &es.mu);
	pthread_mutex_unlock(&es.mu);

	T_OK(rmsg_connect(cli, es.uri, NULL, &p_ops, &p, &p.c));
	UNTIL(p.est);
	for (i = 0; i < NCALLS; i++) {
		snprintf(text, sizeof(text), "ev call %d", i);
		call_op(&p, &o[i], M_ECHO, text, 0, 0);
		snprintf(text, sizeof(text), "ev message %d", i);
		send_op(&p, &o[NCALLS + i], text, 0);
	}
	UNTIL(p.pending == 0 && p.msgs == NCALLS);
	T_ASSERT(!strcmp(p.last, "ev message 19"), "last echo '%s'", p.last);
	T_OK(rmsg_conn_close(p.c));
	UNTIL(p.closed);
	T_ASSERT(p.close_reason == 0, "local close: %s",
		 rmsg_strerror(p.close_reason));
	T_OK(rmsg_ctx_submit(es.ctx, es_stop, &es));
	pthread_mutex_lock(&es.mu);
	es.submitted = 1;
	pthread_cond_signal(&es.cv);
	pthread_mutex_unlock(&es.mu);
	pthread_join(t, NULL);
}

/* ---- 6. rmsg_ctx_progress() on a libev-mode context ---------------- */

static void phase_libev_progress(const char *uri)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct peer p = {.fdmode = 0};
	struct rmsg_ctx *ctx;
	struct op o[NSPIN];
	char text[32];
	int rdma = !strcmp(t_transport(), "rdma"), s0, sc, i;
	double t0;

	T_ASSERT(loop, "ev_loop_new");
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	T_OK(rmsg_connect(ctx, uri, NULL, &p_ops, &p, &p.c));
	/* the libev-mode context's loop runs here, never the server's */
	while (!p.est) {
		ev_run(loop, EVRUN_NOWAIT);
		wait_set(ep, 10);
	}
	while (wait_set(ep, 200) > 0)
		ev_run(loop, EVRUN_NOWAIT);
	ev_run(loop, EVRUN_NOWAIT);

	/* from here on, no ev_run(loop) until the checks are done; of
	 * NSPIN sends, the library may send one at once, not all */
	s0 = s_msgs;
	for (i = 0; i < NSPIN; i++) {
		snprintf(text, sizeof(text), "spin %d", i);
		send_op(&p, &o[i], text, 0);
	}
	t0 = now();
	while (now() - t0 < 30 * t_scale()) {
		progress(ctx);
		wait_set(ep, 0); /* the fd-mode server */
		if (rdma ? p.pending == 0 && p.msgs == NSPIN
			 : s_msgs == s0 + NSPIN)
			break;
	}
	snprintf(text, sizeof(text), "spin %d", NSPIN - 1); /* the last */
	T_ASSERT(s_msgs == s0 + NSPIN && !strcmp(s_last, text),
		 "rmsg_ctx_progress did not send what rmsg_send queued: the "
		 "server got %d of %d",
		 s_msgs - s0, NSPIN);
	if (rdma) {
		/* completions polled from the completion queue */
		T_ASSERT(p.pending == 0,
			 "%d sends did not complete in rmsg_ctx_progress",
			 p.pending);
		T_ASSERT(p.msgs == NSPIN && p.msgs_in_progress == NSPIN,
			 "%d of %d echoes delivered, %d by rmsg_ctx_progress",
			 p.msgs, NSPIN, p.msgs_in_progress);
	} else {
		/* the server echoes at once; the echo waits on the socket */
		t0 = now();
		while (now() - t0 < 0.5 * t_scale()) {
			progress(ctx);
			wait_set(ep, 1);
		}
		T_ASSERT(p.msgs == 0,
			 "over TCP rmsg_ctx_progress read a socket of a "
			 "libev-mode context");
		while (!(p.pending == 0 && p.msgs == NSPIN)) {
			ev_run(loop, EVRUN_NOWAIT);
			wait_set(ep, 1);
		}
	}
	T_ASSERT(!strcmp(p.last, text), "the last echo is '%s'", p.last);

	sc = s_closed;
	T_OK(rmsg_conn_close(p.c));
	while (!p.closed || s_closed == sc) {
		ev_run(loop, EVRUN_NOWAIT);
		wait_set(ep, 10);
	}
	T_OK(rmsg_ctx_destroy(ctx));
	ev_loop_destroy(loop);
}

/* ---- 7. destroy with operations in flight ------------------------- */

static void phase_destroy(const char *uri)
{
	static struct op o[3 * NFLIGHT];
	static char big[BIG];
	struct rmsg_cfg *cfg = cfg_keepalive(0);
	struct peer p = {.fdmode = 1};
	struct rmsg_ctx *ctx;
	char text[32];
	int i, n0 = s_never, sc = s_closed;

	T_OK(rmsg_ctx_create_fd(cfg, &ctx));
	rmsg_cfg_destroy(cfg);
	watch(ep, ctx);
	T_OK(rmsg_connect(ctx, uri, NULL, &p_ops, &p, &p.c));
	UNTIL(p.est);
	/* calls the server holds: on their way, then at the server */
	for (i = 0; i < NFLIGHT; i++) {
		snprintf(text, sizeof(text), "held %d", i);
		call_op(&p, &o[i], M_NEVER, text, 0, -ECANCELED);
	}
	UNTIL(s_never == n0 + NFLIGHT);
	/* and more, queued: calls and sends, small and large */
	for (i = 0; i < NFLIGHT; i++) {
		struct iovec iov = {big, i % 2 ? BIG : 100};

		snprintf(text, sizeof(text), "queued %d", i);
		call_op(&p, &o[NFLIGHT + i], M_NEVER, text, 0, -ECANCELED);
		memset(&o[2 * NFLIGHT + i], 0, sizeof(o[0]));
		o[2 * NFLIGHT + i].p = &p;
		o[2 * NFLIGHT + i].want = -ECANCELED;
		snprintf(o[2 * NFLIGHT + i].text, sizeof(o[0].text), "send %d",
			 i);
		T_OK(rmsg_send(p.c, &iov, 1, op_sent, &o[2 * NFLIGHT + i]));
		p.pending++;
	}
	unwatch(ep, ctx);
	destroyed = ctx;
	T_OK(rmsg_ctx_destroy(ctx));
	destroyed = NULL;
	for (i = 0; i < 3 * NFLIGHT; i++)
		T_ASSERT(o[i].done, "%s: no callback", o[i].text);
	T_ASSERT(p.closed == 1 && p.close_reason == -ECANCELED,
		 "on_close %d times, reason %s", p.closed,
		 rmsg_strerror(p.close_reason));
	/* the server sees the connection end */
	UNTIL(s_closed == sc + 1);
}

/* ---- 8. a peer that stops answering ------------------------------- */

static void serve(int fd)
{
	struct ev_loop *loop = ev_default_loop(0);
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx;
	char uri[128] = "";

	if (!loop || rmsg_ctx_create(loop, NULL, &ctx))
		_exit(3);
	t_listen(ctx, NULL, &ev_ops, NULL, NULL, &l, uri, sizeof(uri));
	if (write(fd, uri, sizeof(uri)) != sizeof(uri))
		_exit(4);
	close(fd);
	ev_run(loop, 0);
	_exit(0);
}

static void phase_keepalive(void)
{
	struct rmsg_cfg *cfg = cfg_keepalive(KA_MS);
	struct peer p = {.fdmode = 1};
	struct rmsg_ctx *ctx;
	char uri[128];
	int fds[2], set, st;
	pid_t child;
	double t0;

	T_ASSERT(pipe(fds) == 0, "pipe");
	child = fork();
	T_ASSERT(child >= 0, "fork");
	if (child == 0) {
		/* a fresh process: verbs state must not cross a fork */
		char fdarg[16], self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		close(fds[0]);
		if (n <= 0)
			_exit(5);
		self[n] = '\0';
		snprintf(fdarg, sizeof(fdarg), "%d", fds[1]);
		execl(self, "fdmode", "--serve", fdarg, (char *)NULL);
		_exit(5);
	}
	close(fds[1]);
	T_ASSERT(read(fds[0], uri, sizeof(uri)) == sizeof(uri),
		 "the server did not start");
	close(fds[0]);

	/* this context alone in an epoll set of its own */
	set = epoll_create1(EPOLL_CLOEXEC);
	T_ASSERT(set >= 0, "epoll_create1");
	T_OK(rmsg_ctx_create_fd(cfg, &ctx));
	rmsg_cfg_destroy(cfg);
	watch(set, ctx);
	T_OK(rmsg_connect(ctx, uri, NULL, &p_ops, &p, &p.c));
	while (!p.est)
		wait_set(set, -1);
	kill(child, SIGSTOP);
	t0 = now();
	while (!p.closed)
		wait_set(set, -1);
	/* rmsg_cfg_set_keepalive_ms.3: the peer declared dead */
	T_ASSERT(p.close_reason == -ETIMEDOUT, "stopped peer: %s",
		 rmsg_strerror(p.close_reason));
	printf("%s: stopped peer: on_close(%s) after %.2f s (bound %.1f s)\n",
	       t_transport(), rmsg_strerror(p.close_reason), now() - t0,
	       KA_MS * KA_MISSES / 1000.0);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	unwatch(set, ctx);
	T_OK(rmsg_ctx_destroy(ctx));
	close(set);
}

int main(int argc, char **argv)
{
	struct rmsg_cfg *cfg;
	struct rmsg_listener *l;
	struct rmsg_ctx *cli;
	struct peer p = {.fdmode = 1};
	char uri[128];
	int i;

	if (argc == 3 && !strcmp(argv[1], "--serve"))
		serve(atoi(argv[2]));
	t_require_transport();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	main_thread = pthread_self();
	ep = epoll_create1(EPOLL_CLOEXEC);
	T_ASSERT(ep >= 0, "epoll_create1");

	/* no keepalive: nothing but the test's own traffic wakes them */
	cfg = cfg_keepalive(0);
	T_OK(rmsg_ctx_create_fd(cfg, &srv));
	T_OK(rmsg_ctx_create_fd(cfg, &cli));
	T_ASSERT(rmsg_ctx_fd(srv) != rmsg_ctx_fd(cli), "one descriptor each");
	watch(ep, srv);
	watch(ep, cli);

	begin("arguments, an idle context", 30);
	phase_args(cli);

	begin("fd-mode client and server: messages and calls", 60);
	T_OK(rmsg_handle(srv, M_ECHO, h_echo, NULL));
	T_OK(rmsg_handle(srv, M_NEVER, h_never, NULL));
	t_listen(srv, cfg, &s_ops, NULL, NULL, &l, uri, sizeof(uri));
	T_OK(rmsg_connect(cli, uri, cfg, &p_ops, &p, &p.c));
	UNTIL(p.est && s_est);
	phase_traffic(&p);

	begin("a send outside progress", 30);
	phase_kick(&p, cli);

	begin("a deadline with nothing else to do", 30 + DEADLINE_MS / 1000);
	phase_deadline(&p, cli);

	begin("rmsg_ctx_submit from another thread", 30);
	phase_submit(cli);

	begin("an fd-mode client, a libev-mode server", 60);
	phase_libev_peer(cli);

	begin("rmsg_ctx_progress on a libev-mode context", 90);
	phase_libev_progress(uri);

	begin("rmsg_ctx_destroy with operations in flight", 60);
	phase_destroy(uri);

	begin("keepalive: a stopped peer", 60);
	phase_keepalive();

	begin("close and destroy", 30);
	T_OK(rmsg_conn_close(p.c));
	UNTIL(p.closed && s_closed == 3);
	T_ASSERT(p.close_reason == 0, "local close: %s",
		 rmsg_strerror(p.close_reason));
	/* a handler answers exactly once, also after the connection went:
	 * the reply is dropped (rmsg_reply.3) */
	for (i = 0; i < s_never; i++) {
		int ret = rmsg_reply_error(held[i], -ECANCELED);

		T_ASSERT(ret == -ENOTCONN, "answer to a closed connection: %s",
			 rmsg_strerror(ret));
	}
	unwatch(ep, cli);
	unwatch(ep, srv);
	T_OK(rmsg_ctx_destroy(cli));
	T_OK(rmsg_ctx_destroy(srv));
	rmsg_cfg_destroy(cfg);
	close(ep);
	alarm(0);
	printf("%s: PASS\n", t_transport());
	return 0;
}
