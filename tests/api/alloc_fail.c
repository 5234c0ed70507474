// SPDX-License-Identifier: MIT
/*
 * alloc_fail.c - out of memory, one allocation at a time. This program
 * defines malloc, calloc and realloc, so they replace the C library's for
 * the whole process, librmsg included; an armed countdown makes the Nth
 * allocation made from inside librmsg fail (callers elsewhere, libev or
 * the test, are never failed). Each API call below runs with N = 0, 1,
 * 2, ... until it succeeds with no failure injected, and each run must
 * end as its man page says: -ENOMEM (the documented error), nothing
 * half made (a later call without failures works), no crash. Calls:
 *   rmsg_cfg_create, rmsg_ctx_create, rmsg_listen, rmsg_connect (and the
 *   connection it starts: an allocation failing after the call returned
 *   may only end that connection through on_close), rmsg_send on an
 *   open connection, rmsg_ctx_submit, rmsg_ctx_create_fd,
 *   rmsg_listen_group.
 * Under AddressSanitizer (which owns malloc) or valgrind the program
 * exits 77: the plain build in 'make check' runs it.
 */
#define _GNU_SOURCE 1 /* dladdr */
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>

#include "../integration/common.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_INTERPOSE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_INTERPOSE 1
#endif
#endif

#define MAX_STEPS 200

static long countdown = -1; /* fail the allocation this many ahead */
static int injected;	    /* failures made since armed */
static int enomem;	    /* -ENOMEM returned by the call under test */

#ifndef NO_INTERPOSE
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

/* is @ra (a return address) in librmsg? */
static bool from_librmsg(const void *ra)
{
	Dl_info di;

	return dladdr(ra, &di) && di.dli_fname &&
	       strstr(di.dli_fname, "librmsg");
}

static bool fail_now(const void *ra)
{
	if (countdown < 0 || !from_librmsg(ra))
		return false;
	if (countdown-- > 0)
		return false;
	injected++;
	return true;
}

void *malloc(size_t n)
{
	if (fail_now(__builtin_return_address(0)))
		return NULL;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	if (fail_now(__builtin_return_address(0)))
		return NULL;
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	if (fail_now(__builtin_return_address(0)))
		return NULL;
	return __libc_realloc(p, n);
}
#endif

static void arm(long n)
{
	injected = 0;
	countdown = n;
}

static void disarm(void)
{
	countdown = -1;
}

static struct ev_loop *loop;
static int established, closed, close_reason, msgs;

static void on_est(struct rmsg_conn *c, void *arg)
{
	established++;
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	closed++;
	close_reason = reason;
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	msgs++;
}

static const struct rmsg_conn_ops ops = {
	.on_established = on_est, .on_msg = on_msg, .on_close = on_close};

/* every run of @what: 0 with nothing injected ends the steps; with a
 * failure injected, 0 or the documented -ENOMEM */
static void expect(const char *what, long n, int ret)
{
	T_ASSERT(ret == 0 || (injected && ret == -ENOMEM),
		 "%s, allocation %ld failed: %d (%s), want 0 or -ENOMEM", what,
		 n, ret, rmsg_strerror(ret));
	enomem += ret == -ENOMEM;
}

/* the documented error was seen, not only successes */
static void saw_enomem(const char *what)
{
	T_ASSERT(enomem > 0, "%s never returned -ENOMEM", what);
	enomem = 0;
}

static int steps_cfg(void)
{
	long n;

	for (n = 0; n < MAX_STEPS; n++) {
		struct rmsg_cfg *cfg = NULL;
		int ret;

		arm(n);
		ret = rmsg_cfg_create(&cfg);
		disarm();
		/* covers: rmsg_cfg_create.3 ENOMEM */
		expect("rmsg_cfg_create", n, ret);
		if (ret == 0)
			rmsg_cfg_destroy(cfg);
		if (!injected) {
			saw_enomem("rmsg_cfg_create");
			return (int)n;
		}
	}
	T_FAIL("rmsg_cfg_create never succeeded");
}

static int steps_ctx(void)
{
	long n;

	for (n = 0; n < MAX_STEPS; n++) {
		struct rmsg_ctx *ctx = NULL;
		int ret;

		arm(n);
		ret = rmsg_ctx_create(loop, NULL, &ctx);
		disarm();
		/* covers: rmsg_ctx_create.3 ENOMEM */
		expect("rmsg_ctx_create", n, ret);
		if (ret == 0)
			T_OK(rmsg_ctx_destroy(ctx));
		if (!injected) {
			saw_enomem("rmsg_ctx_create");
			return (int)n;
		}
	}
	T_FAIL("rmsg_ctx_create never succeeded");
}

/* a context on a private loop (issue 19): libev's own allocations are
 * not failed (not librmsg's), the context's are */
static int steps_ctx_fd(void)
{
	long n;

	for (n = 0; n < MAX_STEPS; n++) {
		struct rmsg_ctx *ctx = NULL;
		int ret;

		arm(n);
		ret = rmsg_ctx_create_fd(NULL, &ctx);
		disarm();
		/* covers: rmsg_ctx_create_fd.3 ENOMEM */
		expect("rmsg_ctx_create_fd", n, ret);
		if (ret == 0)
			T_OK(rmsg_ctx_destroy(ctx));
		if (!injected) {
			saw_enomem("rmsg_ctx_create_fd");
			return (int)n;
		}
	}
	T_FAIL("rmsg_ctx_create_fd never succeeded");
}

static int steps_listen(struct rmsg_ctx *ctx)
{
	char uri[128];
	long n;

	t_uri(uri, sizeof(uri), 0);
	for (n = 0; n < MAX_STEPS; n++) {
		struct rmsg_listener *l = NULL;
		int ret;

		arm(n);
		ret = rmsg_listen(ctx, uri, NULL, &ops, NULL, NULL, &l);
		disarm();
		/* covers: rmsg_listen.3 ENOMEM */
		expect("rmsg_listen", n, ret);
		if (ret == 0)
			rmsg_listener_close(l);
		if (!injected) {
			saw_enomem("rmsg_listen");
			return (int)n;
		}
	}
	T_FAIL("rmsg_listen never succeeded");
}

/* a group listener of two contexts (issue 20); the member's stand-in
 * goes when its loop runs or when it is destroyed */
static int steps_listen_group(struct rmsg_ctx *ctx)
{
	struct rmsg_ctx *ctxs[2] = {ctx, NULL};
	char uri[128];
	long n;

	T_OK(rmsg_ctx_create(loop, NULL, &ctxs[1]));
	t_uri(uri, sizeof(uri), 0);
	for (n = 0; n < MAX_STEPS; n++) {
		struct rmsg_listener *l = NULL;
		int ret;

		arm(n);
		ret = rmsg_listen_group(ctxs, 2, uri, NULL, &ops, NULL, NULL,
					NULL, &l);
		disarm();
		/* covers: rmsg_listen_group.3 ENOMEM */
		expect("rmsg_listen_group", n, ret);
		if (ret == 0)
			T_OK(rmsg_listener_close(l));
		if (!injected) {
			saw_enomem("rmsg_listen_group");
			T_OK(rmsg_ctx_destroy(ctxs[1]));
			return (int)n;
		}
	}
	T_FAIL("rmsg_listen_group never succeeded");
}

/* a connect with the Nth allocation failing, during the call or while
 * the connection is set up (both sides are ours: the server's accept
 * path is failed too); the connection must either open or end through
 * on_close, and the listener must take the next connection */
static int steps_connect(struct rmsg_ctx *ctx, const char *uri)
{
	long n;

	for (n = 0; n < MAX_STEPS; n++) {
		struct rmsg_conn *c = NULL;
		int ret, left;

		established = closed = 0;
		arm(n);
		ret = rmsg_connect(ctx, uri, NULL, &ops, NULL, &c);
		/* covers: rmsg_connect.3 ENOMEM */
		expect("rmsg_connect", n, ret);
		if (ret == 0)
			/* the client's on_established, or an end */
			T_RUN_UNTIL(loop, established >= 1 || closed >= 1, 20);
		left = injected;
		disarm();
		if (ret == 0 && established && !closed) {
			/* the server's end too, unless it was refused */
			T_RUN_UNTIL(loop, established >= 2 || closed, 20);
			if (established >= 2 || !left) {
				T_OK(rmsg_conn_close(c));
				T_RUN_UNTIL(loop, closed >= 2, 20);
			} else {
				T_RUN_UNTIL(loop, closed >= 1, 20);
			}
		} else if (ret == 0) {
			/* ended in setup: only an allocation failure may */
			T_ASSERT(left,
				 "connect %ld ended with %s and nothing "
				 "failed",
				 n, rmsg_strerror(close_reason));
			T_ASSERT(close_reason == -ENOMEM ||
					 close_reason == -ECONNRESET ||
					 close_reason == -ECONNREFUSED,
				 "connect %ld ended with %s", n,
				 rmsg_strerror(close_reason));
		}
		/* let the server's side of a failed attempt go */
		t_run_for(loop, 0.01);
		if (!left) {
			saw_enomem("rmsg_connect");
			return (int)n;
		}
	}
	T_FAIL("rmsg_connect never succeeded");
}

static void submitted(struct rmsg_ctx *ctx, void *arg)
{
	(*(int *)arg)++;
}

static int steps_submit(struct rmsg_ctx *ctx)
{
	long n;
	int ran = 0, ok = 0;

	for (n = 0; n < MAX_STEPS; n++) {
		int ret;

		arm(n);
		ret = rmsg_ctx_submit(ctx, submitted, &ran);
		disarm();
		/* covers: rmsg_ctx_submit.3 ENOMEM */
		expect("rmsg_ctx_submit", n, ret);
		ok += ret == 0;
		if (!injected)
			break;
	}
	T_ASSERT(n < MAX_STEPS, "rmsg_ctx_submit never succeeded");
	saw_enomem("rmsg_ctx_submit");
	T_RUN_UNTIL(loop, ran == ok, 10);
	T_ASSERT(ran == ok, "%d submitted, %d ran", ok, ran);
	return (int)n;
}

static void sent(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "send completed with %s", rmsg_strerror(status));
	(*(int *)arg)++;
}

/* sends in a burst with allocations failing: the context's spare ops run
 * out and the next send needs a new one; it fails with -ENOMEM, runs no
 * callback, and everything sent before it arrives */
static int steps_send(struct rmsg_ctx *ctx, const char *uri)
{
	static char big[256 * 1024];
	struct iovec iov[2] = {{"hdr", 3}, {big, sizeof(big)}};
	struct rmsg_conn *c;
	int ok = 0, done = 0, i, ret = 0;

	established = closed = msgs = 0;
	T_OK(rmsg_connect(ctx, uri, NULL, &ops, NULL, &c));
	T_RUN_UNTIL(loop, established == 2, 20);
	arm(0);
	for (i = 0; i < 200 && ret == 0; i++) {
		ret = rmsg_send(c, iov, 2, sent, &done);
		ok += ret == 0;
	}
	disarm();
	/* covers: rmsg_send.3 ENOMEM */
	T_ASSERT(ret == -ENOMEM && injected,
		 "send %d of a burst, allocations failing: %s", i,
		 rmsg_strerror(ret));
	/* and with memory again */
	T_OK(rmsg_send(c, iov, 2, sent, &done));
	ok++;
	T_RUN_UNTIL(loop, done == ok && msgs == ok, 20);
	T_ASSERT(done == ok && msgs == ok && !closed,
		 "%d sent, %d done, %d received, %d closed", ok, done, msgs,
		 closed);
	T_OK(rmsg_conn_close(c));
	T_RUN_UNTIL(loop, closed == 2, 20);
	return i - 1;
}

int main(void)
{
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx;
	char uri[128];
	int a, b, c, d, e, f;

#ifdef NO_INTERPOSE
	printf("alloc_fail: the sanitizer owns malloc; the plain build runs "
	       "this\n");
	return 77;
#else
	if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "vgpreload")) {
		printf("alloc_fail: valgrind owns malloc; the plain build "
		       "runs this\n");
		return 77;
	}
#endif
	t_require_transport();
	loop = ev_default_loop(0);
	a = steps_cfg();
	b = steps_ctx();
	printf("alloc_fail: ctx_create_fd: %d allocations failed one at a "
	       "time, each ended as documented\n",
	       steps_ctx_fd());
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	c = steps_listen(ctx);
	printf("alloc_fail: listen_group: %d allocations failed one at a "
	       "time, each ended as documented\n",
	       steps_listen_group(ctx));
	t_listen(ctx, NULL, &ops, NULL, NULL, &l, uri, sizeof(uri));
	d = steps_connect(ctx, uri);
	e = steps_submit(ctx);
	f = steps_send(ctx, uri);
	rmsg_listener_close(l);
	T_OK(rmsg_ctx_destroy(ctx));
	printf("alloc_fail: %s: allocations failed one at a time: "
	       "cfg_create %d, ctx_create %d, listen %d, connect + setup %d, "
	       "submit %d; a send burst failed at send %d; each ended as "
	       "documented\n",
	       t_transport(), a, b, c, d, e, f);
	return 0;
}
