// SPDX-License-Identifier: MIT
/*
 * kv_server - an in-memory key-value store served over librmsg RPC.
 *
 *   kv_server URI [--once]
 *
 * Serves the methods of kv.h (PUT, GET, DEL) on every connection; with
 * --once it exits after its first client has gone. URI is tcp://,
 * rdma://, shm:// or auto://host:port.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

#include "kv.h"

#define NBUCKETS 1024

struct entry {
	struct entry *next;
	char *key;
	size_t key_len;
	void *val;
	size_t val_len;
};

static struct entry *table[NBUCKETS];
static size_t nkeys;
static int once;
static struct rmsg_listener *lis;

static unsigned hash(const char *key, size_t len)
{
	unsigned h = 2166136261u; /* FNV-1a */

	while (len--)
		h = (h ^ (unsigned char)*key++) * 16777619u;
	return h % NBUCKETS;
}

static struct entry **lookup(const char *key, size_t len)
{
	struct entry **e = &table[hash(key, len)];

	while (*e && ((*e)->key_len != len || memcmp((*e)->key, key, len)))
		e = &(*e)->next;
	return e;
}

/*
 * Splits a request into key and value. The request is only valid during
 * the handler (unless held), so anything kept is copied.
 */
static int parse(struct rmsg_msg *m, const char **key, size_t *key_len,
		 const void **val, size_t *val_len)
{
	const char *p = rmsg_msg_data(m);
	size_t len = rmsg_msg_len(m);
	struct kv_hdr h;

	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (h.key_len < 1 || h.key_len > KV_KEY_MAX ||
	    h.key_len > len - sizeof(h))
		return -EINVAL;
	*key = p + sizeof(h);
	*key_len = h.key_len;
	*val = p + sizeof(h) + h.key_len;
	*val_len = len - sizeof(h) - h.key_len;
	return 0;
}

/*
 * A handler answers exactly once, with rmsg_reply() or rmsg_reply_error().
 * Both copy the data before they return; -ENOMEM is the one error after
 * which the request is still ours to answer.
 */
static void answer(struct rmsg_req *req, const void *data, size_t len, int err)
{
	struct iovec iov = {(void *)data, len};
	int ret = err ? rmsg_reply_error(req, err) : rmsg_reply(req, &iov, 1);

	if (ret == -ENOMEM)
		ret = rmsg_reply_error(req, -ENOMEM);
	if (ret && ret != -ENOTCONN)
		fprintf(stderr, "kv_server: reply: %s\n", rmsg_strerror(ret));
}

static void on_put(struct rmsg_conn *c, struct rmsg_req *req,
		   struct rmsg_msg *m, void *arg)
{
	const char *key;
	const void *val;
	size_t key_len, val_len;
	struct entry **slot, *e;
	void *copy;

	if (parse(m, &key, &key_len, &val, &val_len)) {
		answer(req, NULL, 0, -EINVAL);
		return;
	}
	copy = malloc(val_len ? val_len : 1);
	if (!copy) {
		answer(req, NULL, 0, -ENOMEM);
		return;
	}
	memcpy(copy, val, val_len);
	slot = lookup(key, key_len);
	e = *slot;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e)
			e->key = malloc(key_len);
		if (!e || !e->key) {
			free(e);
			free(copy);
			answer(req, NULL, 0, -ENOMEM);
			return;
		}
		memcpy(e->key, key, key_len);
		e->key_len = key_len;
		*slot = e;
		nkeys++;
	}
	free(e->val);
	e->val = copy;
	e->val_len = val_len;
	answer(req, NULL, 0, 0);
}

static void on_get(struct rmsg_conn *c, struct rmsg_req *req,
		   struct rmsg_msg *m, void *arg)
{
	const char *key;
	const void *val;
	size_t key_len, val_len;
	struct entry *e;

	if (parse(m, &key, &key_len, &val, &val_len)) {
		answer(req, NULL, 0, -EINVAL);
		return;
	}
	e = *lookup(key, key_len);
	if (!e)
		answer(req, NULL, 0, -ENOENT);
	else
		answer(req, e->val, e->val_len, 0);
}

static void on_del(struct rmsg_conn *c, struct rmsg_req *req,
		   struct rmsg_msg *m, void *arg)
{
	const char *key;
	const void *val;
	size_t key_len, val_len;
	struct entry **slot, *e;

	if (parse(m, &key, &key_len, &val, &val_len)) {
		answer(req, NULL, 0, -EINVAL);
		return;
	}
	slot = lookup(key, key_len);
	e = *slot;
	if (!e) {
		answer(req, NULL, 0, -ENOENT);
		return;
	}
	*slot = e->next;
	nkeys--;
	free(e->key);
	free(e->val);
	free(e);
	answer(req, NULL, 0, 0);
}

static void on_established(struct rmsg_conn *c, void *arg)
{
	printf("kv_server: client connected over %s\n", rmsg_conn_transport(c));
	fflush(stdout);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	printf("kv_server: client left (%s), %zu keys stored\n",
	       reason ? rmsg_strerror(reason) : "closed", nkeys);
	fflush(stdout);
	/* with the listener closed, ev_run() returns once no connection
	 * is left */
	if (once && lis) {
		rmsg_listener_close(lis);
		lis = NULL;
	}
}

int main(int argc, char **argv)
{
	const struct rmsg_conn_ops ops = {.on_established = on_established,
					  .on_close = on_close};
	struct ev_loop *loop = EV_DEFAULT;
	struct rmsg_ctx *ctx;
	int ret;

	if (argc < 2 || (argc > 2 && strcmp(argv[2], "--once"))) {
		fprintf(stderr, "usage: %s URI [--once]\n", argv[0]);
		return 2;
	}
	once = argc > 2;
	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (ret)
		goto fail;
	/* handlers belong to the context: every connection serves them */
	ret = rmsg_handle(ctx, KV_PUT, on_put, NULL);
	if (!ret)
		ret = rmsg_handle(ctx, KV_GET, on_get, NULL);
	if (!ret)
		ret = rmsg_handle(ctx, KV_DEL, on_del, NULL);
	if (!ret)
		ret = rmsg_listen(ctx, argv[1], NULL, &ops, NULL, NULL, &lis);
	if (ret) {
		rmsg_ctx_destroy(ctx);
		goto fail;
	}
	printf("kv_server: listening on %s\n", argv[1]);
	fflush(stdout);
	ev_run(loop, 0);
	rmsg_ctx_destroy(ctx);
	return 0;
fail:
	fprintf(stderr, "kv_server: %s: %s\n", argv[1], rmsg_strerror(ret));
	return 1;
}
