// SPDX-License-Identifier: MIT
/*
 * resolve.c - a client's host name, resolved without blocking the loop.
 *
 * A numeric host (getaddrinfo with AI_NUMERICHOST) resolves inside
 * rmsg_connect(), as before: no thread, no extra loop iteration. Any
 * other name goes to a resolver thread of its own, which calls the
 * system's getaddrinfo() (files, DNS, whatever nsswitch.conf says) and
 * hands the answer to the loop with rmsg_ctx_submit() (the context's
 * ev_async); the connection then continues on the loop thread.
 *
 * A context runs at most RMSGI_RESOLVE_THREADS resolver threads (a
 * burst of connections to names must not start a thread each: stacks,
 * and the name service's sockets). A name beyond that waits on
 * ctx->rsv_wait; a thread that has answered takes the next waiting
 * name of its context before it exits, so no slot depends on the loop
 * running. A waiting name whose connection closes or times out leaves
 * the queue at once: nobody looks it up.
 *
 * Why a thread per name and not getaddrinfo_a(): getaddrinfo_a()
 * notifies by a signal (the app's to own) or by a thread it starts
 * (SIGEV_THREAD), so a thread runs either way; gai_cancel() cannot
 * stop a lookup that has begun, so its request must outlive a closed
 * connection or a destroyed context just as a job does here; and glibc
 * keeps its pool of helper threads and their memory for the process's
 * life. A detached thread with a reference-counted job gives the same
 * with ownership that is explicit, and costs nothing for numeric hosts.
 *
 * Ownership of a job. Two references: the thread's, dropped when
 * getaddrinfo() returns, and the loop's (the job is on ctx->resolves
 * while the loop holds it), dropped when the answer's work item runs on
 * the loop or when the context goes. The connection only points to the
 * job while it waits for it (c->rsv, job->c): a close, the timeout or
 * the context's end cut that link and never wait for the thread; the
 * answer that comes later finds no connection and is freed. job->ctx,
 * job->refs and job->queued are shared with the thread and change only
 * under resolve_mu; rmsgi_resolve_ctx_fini() clears job->ctx under it,
 * so no thread submits to a context that is going.
 */
#define _GNU_SOURCE
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "rmsg_int.h"

struct rmsgi_rsv {
	/* loop thread only */
	struct rmsgi_list link; /* ctx->resolves: the loop's reference */
	struct rmsg_conn *c;	/* waiting for the answer, or NULL */
	struct rmsgi_timer tmo; /* the connection's timeout */
	bool tmo_on;
	/* fixed before the thread starts */
	char host[sizeof(((struct rmsgi_uri *)0)->host)];
	char port[8];
	/* the thread's answer, read by the loop once the work item runs */
	int gai_err;
	int sys_err; /* errno, for EAI_SYSTEM */
	struct addrinfo *res;
	/* shared, under resolve_mu */
	struct rmsg_ctx *ctx; /* NULL once the context went */
	int refs;
	bool queued;		 /* the answer's work item is on ctx's queue */
	bool waiting;		 /* on ctx->rsv_wait: no thread has it yet */
	struct rmsgi_list wlink; /* ctx->rsv_wait */
};

static pthread_mutex_t resolve_mu = PTHREAD_MUTEX_INITIALIZER;

static void rsv_free(struct rmsgi_rsv *j)
{
	if (j->res)
		freeaddrinfo(j->res);
	free(j);
}

/* drops one reference; the last frees the job */
static void rsv_put(struct rmsgi_rsv *j)
{
	int refs;

	pthread_mutex_lock(&resolve_mu);
	refs = --j->refs;
	pthread_mutex_unlock(&resolve_mu);
	if (refs == 0)
		rsv_free(j);
}

static const struct addrinfo rsv_hints = {
	.ai_family = AF_UNSPEC,
	.ai_socktype = SOCK_STREAM,
	.ai_protocol = IPPROTO_TCP,
	.ai_flags = AI_NUMERICSERV,
};

/* copies @res into @to in the resolver's order (at most
 * RMSGI_ADDRS_MAX); -ENXIO if it holds no IPv4 or IPv6 address */
static int rsv_fill(const struct addrinfo *res, struct rmsgi_addrs *to)
{
	const struct addrinfo *ai;

	to->n = 0;
	for (ai = res; ai && to->n < RMSGI_ADDRS_MAX; ai = ai->ai_next) {
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(to->a[0]))
			continue;
		memset(&to->a[to->n], 0, sizeof(to->a[0]));
		memcpy(&to->a[to->n], ai->ai_addr, ai->ai_addrlen);
		to->len[to->n] = ai->ai_addrlen;
		to->n++;
	}
	return to->n ? 0 : -ENXIO;
}

/* the loop no longer waits: the timer stops, the link goes both ways */
static void rsv_detach(struct rmsgi_rsv *j)
{
	struct rmsg_conn *c = j->c;

	if (j->tmo_on) {
		struct ev_loop *loop = c->ctx->loop;

		ev_ref(loop);
		rmsgi_timer_stop(loop, &j->tmo);
		j->tmo_on = false;
	}
	c->rsv = NULL;
	j->c = NULL;
}

/* the answer arrived on the loop (rmsg_ctx_submit's work item) */
static void rsv_done(struct rmsg_ctx *ctx, void *arg)
{
	struct rmsgi_rsv *j = arg;
	struct rmsg_conn *c = j->c;
	struct rmsgi_addrs to;
	int err;

	(void)ctx;
	rmsgi_list_del(&j->link);
	if (c) {
		rsv_detach(j);
		err = rmsgi_err_gai(j->gai_err, j->sys_err, -ENXIO);
		if (!err)
			err = rsv_fill(j->res, &to);
		if (err == -ENXIO)
			rmsgi_warn(c->ctx,
				   "conn %u: %s: name not resolved (%s)", c->id,
				   j->host,
				   j->gai_err ? gai_strerror(j->gai_err)
					      : "no IPv4 or IPv6 address");
		rmsgi_conn_get(c);
		rmsgi_conn_resolved(c, err, err ? NULL : &to);
		rmsgi_conn_put(c);
	}
	rsv_put(j);
}

static void *rsv_thread(void *arg)
{
	struct rmsgi_rsv *j = arg, *next;
	struct rmsgi_list *n;
	struct rmsg_ctx *ctx;
	int err, refs;

	for (; j; j = next) {
		struct addrinfo *res = NULL;

		err = getaddrinfo(j->host, j->port, &rsv_hints, &res);
		pthread_mutex_lock(&resolve_mu);
		j->gai_err = err;
		j->sys_err = errno;
		j->res = err ? NULL : res;
		ctx = j->ctx;
		/* the loop's reference is still there while ctx is set */
		if (ctx && rmsg_ctx_submit(ctx, rsv_done, j) == 0)
			j->queued = true;
		/* else: the context went (the job is the thread's alone
		 * now), or no memory for the work item (the connection's
		 * timeout ends it) */
		refs = --j->refs;
		/* the context's next waiting name, while it lives (its end
		 * clears j->ctx under this lock before freeing anything) */
		next = NULL;
		if (ctx && (n = rmsgi_list_pop(&ctx->rsv_wait))) {
			next = rmsgi_list_entry(n, struct rmsgi_rsv, wlink);
			next->waiting = false;
		} else if (ctx) {
			ctx->rsv_threads--;
		}
		pthread_mutex_unlock(&resolve_mu);
		if (refs == 0)
			rsv_free(j);
	}
	return NULL;
}

/* a name no thread took yet leaves the queue; true if it was there
 * (then the thread's reference is the caller's to drop) */
static bool rsv_unwait(struct rmsgi_rsv *j)
{
	bool was;

	pthread_mutex_lock(&resolve_mu);
	was = j->waiting;
	if (was) {
		rmsgi_list_del(&j->wlink);
		j->waiting = false;
		j->refs--;
	}
	pthread_mutex_unlock(&resolve_mu);
	return was;
}

/* the loop drops a waiting name nobody will look up */
static void rsv_drop_waiting(struct rmsgi_rsv *j)
{
	if (!rsv_unwait(j))
		return;
	rmsgi_list_del(&j->link);
	rsv_put(j);
}

static void rsv_tmo_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsgi_rsv *j = RMSGI_CONTAINER_OF(w, struct rmsgi_rsv, tmo.w);
	struct rmsg_conn *c = j->c;
	struct rmsg_ctx *ctx = c->ctx;

	(void)revents;
	/* libev stopped the one-shot timer: give back its unref */
	ev_ref(loop);
	j->tmo_on = false;
	rmsgi_warn(c->ctx, "conn %u: %s: name not resolved within %u ms", c->id,
		   j->host, c->cfg.timeout_ms);
	rsv_detach(j);
	rsv_drop_waiting(j);
	rmsgi_conn_get(c);
	rmsgi_conn_resolved(c, -ETIMEDOUT, NULL);
	rmsgi_conn_put(c);
	rmsgi_ctx_flush(ctx);
}

/* starts the thread with every signal blocked: the app's handlers never
 * run on it */
static int rsv_spawn(struct rmsgi_rsv *j)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;
	int ret;

	if (pthread_attr_init(&attr))
		return -ENOMEM;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&th, &attr, rsv_thread, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return ret ? -ret : 0;
}

int rmsgi_resolve(struct rmsg_conn *c, const struct rmsgi_uri *u,
		  struct rmsgi_addrs *to)
{
	struct addrinfo hints = rsv_hints, *res;
	struct rmsgi_rsv *j;
	char port[8];
	int ret;

	snprintf(port, sizeof(port), "%u", u->port);
	/* the common case stays inline: a numeric address needs no name
	 * service and returns at once */
	hints.ai_flags |= AI_NUMERICHOST;
	ret = getaddrinfo(u->host, port, &hints, &res);
	if (ret == 0) {
		ret = rsv_fill(res, to);
		freeaddrinfo(res);
		return ret;
	}
	if (ret != EAI_NONAME)
		return rmsgi_err_gai(ret, errno, -ENXIO);

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	memcpy(j->host, u->host, sizeof(j->host));
	memcpy(j->port, port, sizeof(port));
	j->ctx = c->ctx;
	j->c = c;
	j->refs = 2; /* the thread's and the loop's */
	pthread_mutex_lock(&resolve_mu);
	if (c->ctx->rsv_threads >= RMSGI_RESOLVE_THREADS) {
		/* a thread of the context takes it when it is done */
		j->waiting = true;
		rmsgi_list_add_tail(&c->ctx->rsv_wait, &j->wlink);
		ret = 0;
	} else {
		ret = rsv_spawn(j);
		if (!ret)
			c->ctx->rsv_threads++;
	}
	pthread_mutex_unlock(&resolve_mu);
	if (ret) {
		free(j);
		return ret == -EAGAIN ? -ENOMEM : ret;
	}
	rmsgi_list_add_tail(&c->ctx->resolves, &j->link);
	c->rsv = j;
	rmsgi_timer_init(&j->tmo, c->ctx->env.timers, rsv_tmo_cb);
	rmsgi_timer_start(c->ctx->loop, &j->tmo, c->cfg.timeout_ms / 1000.0, 0);
	ev_unref(c->ctx->loop); /* the connection holds the loop */
	j->tmo_on = true;
	return -EINPROGRESS;
}

void rmsgi_resolve_cancel(struct rmsg_conn *c)
{
	struct rmsgi_rsv *j = c->rsv;

	/* a thread runs on; its answer finds no connection. A name still
	 * waiting for a thread is not looked up at all */
	if (j) {
		rsv_detach(j);
		rsv_drop_waiting(j);
	}
}

void rmsgi_resolve_ctx_fini(struct rmsg_ctx *ctx)
{
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&ctx->resolves))) {
		struct rmsgi_rsv *j =
			rmsgi_list_entry(n, struct rmsgi_rsv, link);
		bool queued;
		int refs;

		if (j->c)
			rsv_detach(j);
		pthread_mutex_lock(&resolve_mu);
		j->ctx = NULL;
		if (j->waiting) {
			/* never taken by a thread: its reference goes too */
			rmsgi_list_del(&j->wlink);
			j->waiting = false;
			j->refs--;
		}
		queued = j->queued;
		/* a queued answer's work item still runs (rmsgi_async_fini)
		 * and drops the loop's reference itself */
		refs = queued ? j->refs : --j->refs;
		pthread_mutex_unlock(&resolve_mu);
		if (refs == 0)
			rsv_free(j);
	}
}
