// SPDX-License-Identifier: MIT
/*
 * kv_client - a client of kv_server: single commands, or a self-check.
 *
 *   kv_client URI put KEY VALUE
 *   kv_client URI get KEY            prints the value
 *   kv_client URI del KEY
 *   kv_client URI test [N]           N keys (default 1000): put, get,
 *                                    delete half, get again; exits 0 if
 *                                    every answer was right
 *
 * Every call carries a deadline (KV_TIMEOUT_MS, default 5000 ms): a call
 * the server does not answer in time ends with -ETIMEDOUT. The test keeps
 * up to WINDOW calls in flight; replies may come in any order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

#include "kv.h"

#define WINDOW 32

/* one call in flight; its request memory stays untouched until the reply
 * callback has run (the completion rule) */
struct call {
	struct kv_hdr hdr;
	char key[32];
	char *val;
	size_t val_len;
	int phase;
	long i;
};

enum {
	P_PUT,	    /* put every key */
	P_GET,	    /* get every key: values must match */
	P_DEL,	    /* delete the even keys */
	P_GET2,	    /* get every key: even ones are gone (-ENOENT) */
	P_DEL_MISS, /* delete a missing key: -ENOENT */
	P_DONE,
};

static const char *const phase_name[] = {"put", "get", "del", "get", "del"};

static struct rmsg_conn *conn;
static unsigned timeout_ms = 5000;
static long nkeys = 1000, issued, answered, inflight;
static int phase, failures, exit_code = 1;
static const char *cmd, *cmd_key, *cmd_val;

static long phase_calls(int p)
{
	if (p == P_DEL)
		return (nkeys + 1) / 2;
	if (p == P_DEL_MISS)
		return 1;
	return nkeys;
}

/* key i and its value: sizes from 0 to ~20 KB, so that some values are
 * longer than the eager size and travel by rendezvous over RDMA */
static size_t value_len(long i)
{
	return (size_t)(i * 7919 % 20011);
}

static void fill_value(char *v, size_t len, long i)
{
	size_t k;

	for (k = 0; k < len; k++)
		v[k] = (char)('a' + (i + k) % 26);
}

static struct call *new_call(int p, long i)
{
	struct call *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return NULL;
	cl->phase = p;
	cl->i = i;
	if (p == P_DEL)
		cl->i = 2 * i; /* the even keys */
	if (p == P_DEL_MISS)
		snprintf(cl->key, sizeof(cl->key), "no-such-key");
	else
		snprintf(cl->key, sizeof(cl->key), "key-%ld", cl->i);
	cl->hdr.key_len = (uint32_t)strlen(cl->key);
	if (p == P_PUT) {
		cl->val_len = value_len(cl->i);
		cl->val = malloc(cl->val_len + 1);
		if (!cl->val) {
			free(cl);
			return NULL;
		}
		fill_value(cl->val, cl->val_len, cl->i);
	}
	return cl;
}

static void free_call(struct call *cl)
{
	free(cl->val);
	free(cl);
}

static void fail(struct call *cl, const char *what)
{
	if (failures++ < 10)
		fprintf(stderr, "kv_client: %s %s: %s\n", phase_name[cl->phase],
			cl->key, what);
}

static void pump(void);

static void check(struct call *cl, int status, struct rmsg_msg *reply)
{
	int gone = cl->phase == P_GET2 && cl->i % 2 == 0;
	char *want;
	size_t len;

	if (cl->phase == P_DEL_MISS || gone) {
		if (status != -ENOENT)
			fail(cl, status ? rmsg_strerror(status)
					: "succeeded, expected -ENOENT");
		return;
	}
	if (status) {
		fail(cl, rmsg_strerror(status));
		return;
	}
	if (cl->phase != P_GET && cl->phase != P_GET2)
		return;
	len = value_len(cl->i);
	want = malloc(len + 1);
	if (!want) {
		fail(cl, "out of memory");
		return;
	}
	fill_value(want, len, cl->i);
	if (rmsg_msg_len(reply) != len ||
	    memcmp(rmsg_msg_data(reply), want, len))
		fail(cl, "wrong value");
	free(want);
}

static void on_reply(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		     void *arg)
{
	struct call *cl = arg;

	check(cl, status, reply);
	free_call(cl);
	inflight--;
	answered++;
	pump();
}

static int issue(struct call *cl)
{
	static const uint32_t method[] = {KV_PUT, KV_GET, KV_DEL, KV_GET,
					  KV_DEL};
	struct iovec iov[3] = {{&cl->hdr, sizeof(cl->hdr)},
			       {cl->key, cl->hdr.key_len},
			       {cl->val, cl->val_len}};

	return rmsg_call(conn, method[cl->phase], iov, cl->val ? 3 : 2,
			 timeout_ms, on_reply, cl, NULL);
}

/* keeps WINDOW calls in flight; a phase starts when the last one ended */
static void pump(void)
{
	if (phase == P_DONE)
		return;
	while (phase < P_DONE) {
		struct call *cl;
		int ret;

		if (issued == phase_calls(phase)) {
			if (inflight)
				return;
			printf("kv_client: %s: %ld calls answered\n",
			       phase_name[phase], answered);
			phase++;
			issued = answered = 0;
			continue;
		}
		if (inflight == WINDOW)
			return;
		cl = new_call(phase, issued);
		if (!cl) {
			fprintf(stderr, "kv_client: out of memory\n");
			rmsg_conn_close(conn);
			return;
		}
		ret = issue(cl);
		if (ret) {
			free_call(cl); /* an error: the callback never runs */
			if (ret == -EAGAIN)
				return; /* on_writable follows */
			fprintf(stderr, "kv_client: call: %s\n",
				rmsg_strerror(ret));
			rmsg_conn_close(conn);
			return;
		}
		issued++;
		inflight++;
	}
	if (!failures) {
		printf("kv_client: test passed (%ld keys)\n", nkeys);
		exit_code = 0;
	}
	rmsg_conn_close(conn);
}

/* ---- single commands ---- */

static struct call one;

static void on_one_reply(struct rmsg_conn *c, int status,
			 struct rmsg_msg *reply, void *arg)
{
	if (status) {
		fprintf(stderr, "kv_client: %s %s: %s\n", cmd, cmd_key,
			rmsg_strerror(status));
	} else {
		if (!strcmp(cmd, "get")) {
			fwrite(rmsg_msg_data(reply), 1, rmsg_msg_len(reply),
			       stdout);
			putchar('\n');
		}
		exit_code = 0;
	}
	rmsg_conn_close(c);
}

static void run_command(void)
{
	uint32_t method = !strcmp(cmd, "put")	? KV_PUT
			  : !strcmp(cmd, "get") ? KV_GET
						: KV_DEL;
	struct iovec iov[3] = {
		{&one.hdr, sizeof(one.hdr)},
		{(void *)cmd_key, strlen(cmd_key)},
		{(void *)cmd_val, cmd_val ? strlen(cmd_val) : 0}};
	int ret;

	one.hdr.key_len = (uint32_t)strlen(cmd_key);
	ret = rmsg_call(conn, method, iov, cmd_val ? 3 : 2, timeout_ms,
			on_one_reply, NULL, NULL);
	if (ret) {
		fprintf(stderr, "kv_client: call: %s\n", rmsg_strerror(ret));
		rmsg_conn_close(conn);
	}
}

/* ---- connection ---- */

static void on_established(struct rmsg_conn *c, void *arg)
{
	const char *why = rmsg_conn_fallback_reason(c);

	if (!cmd_key) /* the test talks; single commands stay quiet */
		printf("kv_client: connected over %s%s%s\n",
		       rmsg_conn_transport(c), why ? ", not RDMA: " : "",
		       why ? why : "");
	if (cmd_key)
		run_command();
	else
		pump();
}

static void on_writable(struct rmsg_conn *c, void *arg)
{
	pump();
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason)
		fprintf(stderr, "kv_client: connection: %s\n",
			rmsg_strerror(reason));
}

static int usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s URI put KEY VALUE | get KEY | del KEY | test [N]\n",
		prog);
	return 2;
}

int main(int argc, char **argv)
{
	const struct rmsg_conn_ops ops = {.on_established = on_established,
					  .on_writable = on_writable,
					  .on_close = on_close};
	struct ev_loop *loop = EV_DEFAULT;
	struct rmsg_ctx *ctx;
	int ret;

	if (argc < 3)
		return usage(argv[0]);
	cmd = argv[2];
	if (!strcmp(cmd, "put") && argc == 5) {
		cmd_key = argv[3];
		cmd_val = argv[4];
	} else if ((!strcmp(cmd, "get") || !strcmp(cmd, "del")) && argc == 4) {
		cmd_key = argv[3];
	} else if (!strcmp(cmd, "test") && argc <= 4) {
		if (argc == 4)
			nkeys = atol(argv[3]);
		if (nkeys < 1)
			return usage(argv[0]);
	} else {
		return usage(argv[0]);
	}
	if (cmd_key && (!*cmd_key || strlen(cmd_key) > KV_KEY_MAX)) {
		fprintf(stderr, "kv_client: keys have 1 to %d bytes\n",
			KV_KEY_MAX);
		return 2;
	}
	if (getenv("KV_TIMEOUT_MS"))
		timeout_ms = (unsigned)atoi(getenv("KV_TIMEOUT_MS"));

	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (!ret)
		ret = rmsg_connect(ctx, argv[1], NULL, &ops, NULL, &conn);
	if (ret) {
		fprintf(stderr, "kv_client: %s: %s\n", argv[1],
			rmsg_strerror(ret));
		return 1;
	}
	ev_run(loop, 0); /* returns after on_close */
	rmsg_ctx_destroy(ctx);
	return exit_code;
}
