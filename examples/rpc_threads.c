// SPDX-License-Identifier: MIT
/*
 * rpc_threads - a multi-threaded RPC server on one address, and a client
 * that drives it.
 *
 *   rpc_threads server [--threads N] URI
 *   rpc_threads client [--conns C] [--calls M] URI
 *
 * The server runs N loop threads, one context each (the main thread is
 * the first), and serves URI from all of them with rmsg_listen_group():
 * each new connection goes to the next thread, whose context then runs
 * all of that connection's callbacks. Method 1 answers with the index of
 * the thread that ran it, followed by the request's bytes. SIGINT or
 * SIGTERM stops it; it then prints how many calls each thread served.
 *
 * The client opens C connections (default 8) on one context, makes M
 * calls (default 100) on each, one at a time, checks every answer and
 * prints how many server threads answered. URI is tcp://, rdma://,
 * shm:// or auto://host:port.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

#define METHOD_WHO 1

/* ------------------------------------------------------------------ */
/* the server                                                           */

struct worker {
	unsigned idx;
	struct ev_loop *loop;
	struct rmsg_ctx *ctx;
	pthread_t tid;
	unsigned long calls; /* read by main after the thread ended */
};

static struct worker workers[RMSG_GROUP_MAX];
static unsigned nworkers = 2;
static struct rmsg_listener *lis;

/* runs on the thread of the connection's context */
static void who(struct rmsg_conn *c, struct rmsg_req *req,
		struct rmsg_msg *request, void *arg)
{
	struct worker *w = arg;
	uint32_t idx = w->idx;
	struct iovec iov[2] = {
		{&idx, sizeof(idx)},
		{(void *)rmsg_msg_data(request), rmsg_msg_len(request)},
	};

	w->calls++;
	rmsg_reply(req, iov, 2); /* copies: nothing to keep */
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	ev_run(w->loop, 0);
	return NULL;
}

/* on a member's thread: its loop stops */
static void stop_worker(struct rmsg_ctx *ctx, void *arg)
{
	struct worker *w = arg;

	ev_break(w->loop, EVBREAK_ALL);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	unsigned i;

	/* the listener belongs to the first context: closed on its thread */
	rmsg_listener_close(lis);
	for (i = 1; i < nworkers; i++)
		rmsg_ctx_submit(workers[i].ctx, stop_worker, &workers[i]);
	ev_break(loop, EVBREAK_ALL);
}

static int server(const char *uri)
{
	static const struct rmsg_conn_ops ops; /* RPC only */
	struct rmsg_ctx *ctxs[RMSG_GROUP_MAX];
	ev_signal sigint, sigterm;
	unsigned i;
	int ret;

	for (i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];

		w->idx = i;
		w->loop = i ? ev_loop_new(EVFLAG_AUTO) : EV_DEFAULT;
		if (!w->loop) {
			fprintf(stderr, "ev_loop_new failed\n");
			return 1;
		}
		ret = rmsg_ctx_create(w->loop, NULL, &w->ctx);
		if (ret == 0)
			ret = rmsg_handle(w->ctx, METHOD_WHO, who, w);
		if (ret)
			goto err;
		ctxs[i] = w->ctx;
	}
	/* round-robin: a NULL pick callback */
	ret = rmsg_listen_group(ctxs, nworkers, uri, NULL, &ops, NULL, NULL,
				NULL, &lis);
	if (ret)
		goto err;
	printf("listening on %s with %u threads\n", uri, nworkers);
	fflush(stdout);
	ev_signal_init(&sigint, on_signal, SIGINT);
	ev_signal_init(&sigterm, on_signal, SIGTERM);
	ev_signal_start(EV_DEFAULT, &sigint);
	ev_signal_start(EV_DEFAULT, &sigterm);
	for (i = 1; i < nworkers; i++)
		if (pthread_create(&workers[i].tid, NULL, worker_main,
				   &workers[i])) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	ev_run(EV_DEFAULT, 0); /* thread 0: the listener's home */
	for (i = 1; i < nworkers; i++)
		pthread_join(workers[i].tid, NULL);
	/* every loop has stopped: this thread may finish the contexts */
	for (i = 0; i < nworkers; i++) {
		printf("thread %u served %lu calls\n", i, workers[i].calls);
		rmsg_ctx_destroy(workers[i].ctx);
	}
	return 0;
err:
	fprintf(stderr, "server: %s\n", rmsg_strerror(ret));
	return 1;
}

/* ------------------------------------------------------------------ */
/* the client                                                           */

struct cconn {
	struct rmsg_conn *c;
	unsigned left; /* calls still to make */
	uint32_t seq;
};

static unsigned nconns = 8, ncalls = 100;
static unsigned long answers[RMSG_GROUP_MAX], total;
static unsigned closed, failed;

static void call_next(struct rmsg_conn *c, struct cconn *cc);

static void on_reply(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		     void *arg)
{
	struct cconn *cc = arg;
	const uint8_t *p = rmsg_msg_data(reply);
	uint32_t idx, seq;

	if (status) {
		fprintf(stderr, "call: %s\n", rmsg_strerror(status));
		failed++;
		rmsg_conn_close(c);
		return;
	}
	if (rmsg_msg_len(reply) != 8) {
		fprintf(stderr, "answer of %zu bytes\n", rmsg_msg_len(reply));
		failed++;
		rmsg_conn_close(c);
		return;
	}
	memcpy(&idx, p, 4);
	memcpy(&seq, p + 4, 4);
	if (idx >= RMSG_GROUP_MAX || seq != cc->seq) {
		fprintf(stderr, "wrong answer: thread %u, seq %u\n", idx, seq);
		failed++;
		rmsg_conn_close(c);
		return;
	}
	answers[idx]++;
	total++;
	call_next(c, cc);
}

static void call_next(struct rmsg_conn *c, struct cconn *cc)
{
	struct iovec iov = {&cc->seq, sizeof(cc->seq)};
	int ret;

	if (cc->left == 0) {
		rmsg_conn_close(c);
		return;
	}
	cc->left--;
	cc->seq++; /* unchanged until on_reply */
	ret = rmsg_call(c, METHOD_WHO, &iov, 1, 10000, on_reply, cc, NULL);
	if (ret) {
		fprintf(stderr, "rmsg_call: %s\n", rmsg_strerror(ret));
		failed++;
		rmsg_conn_close(c);
	}
}

static void on_established(struct rmsg_conn *c, void *arg)
{
	call_next(c, arg);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct cconn *cc = arg;

	if (cc->left || reason) {
		fprintf(stderr, "connection closed early: %s\n",
			rmsg_strerror(reason));
		failed++;
	}
	closed++; /* the loop returns after the last one */
}

static int client(const char *uri)
{
	static const struct rmsg_conn_ops ops = {
		.on_established = on_established,
		.on_close = on_close,
	};
	struct cconn *cc = calloc(nconns, sizeof(*cc));
	struct rmsg_ctx *ctx;
	unsigned i, threads = 0;
	int ret;

	if (!cc)
		return 1;
	ret = rmsg_ctx_create(EV_DEFAULT, NULL, &ctx);
	if (ret)
		goto err;
	for (i = 0; i < nconns; i++) {
		cc[i].left = ncalls;
		ret = rmsg_connect(ctx, uri, NULL, &ops, &cc[i], &cc[i].c);
		if (ret)
			goto err;
	}
	ev_run(EV_DEFAULT, 0); /* until every connection has closed */
	rmsg_ctx_destroy(ctx);
	free(cc);
	for (i = 0; i < RMSG_GROUP_MAX; i++)
		if (answers[i]) {
			printf("server thread %u answered %lu calls\n", i,
			       answers[i]);
			threads++;
		}
	printf("%lu calls over %u connections, answered by %u server "
	       "threads\n",
	       total, nconns, threads);
	return failed || total != (unsigned long)nconns * ncalls;
err:
	fprintf(stderr, "client: %s\n", rmsg_strerror(ret));
	return 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: rpc_threads server [--threads N] URI\n"
			"       rpc_threads client [--conns C] [--calls M] "
			"URI\n");
	return 2;
}

int main(int argc, char **argv)
{
	int i;

	if (argc < 3)
		return usage();
	for (i = 2; i < argc - 1; i += 2) {
		unsigned long v;

		if (i + 1 >= argc - 1)
			return usage();
		v = strtoul(argv[i + 1], NULL, 10);
		if (!strcmp(argv[i], "--threads") && v >= 1 &&
		    v <= RMSG_GROUP_MAX)
			nworkers = (unsigned)v;
		else if (!strcmp(argv[i], "--conns") && v >= 1 && v <= 100000)
			nconns = (unsigned)v;
		else if (!strcmp(argv[i], "--calls") && v <= 100000000)
			ncalls = (unsigned)v;
		else
			return usage();
	}
	if (!strcmp(argv[1], "server"))
		return server(argv[argc - 1]);
	if (!strcmp(argv[1], "client"))
		return client(argv[argc - 1]);
	return usage();
}
