// SPDX-License-Identifier: MIT
/*
 * bulk - a bulk transfer with RDMA write-with-immediate.
 *
 *   bulk server URI [--once]      the receiver
 *   bulk client URI [MIB]         the sender: MIB mebibytes (default 64)
 *
 * 1. The sender asks for a transfer (a message: total size, chunk size).
 * 2. The receiver allocates the memory, registers it for remote writes
 *    (rmsg_mr_reg), exports it to this connection only (rmsg_mr_export)
 *    and sends the descriptor back in a message.
 * 3. The sender streams the data in chunks with rmsg_write_imm(), the
 *    chunk's index as the immediate value, keeping WINDOW chunks in
 *    flight from a small registered ring of its own.
 * 4. The receiver's on_imm runs once a chunk has landed: it checks the
 *    chunk's bytes there and then. After the last one it reports to the
 *    sender in a message, and the sender prints the throughput.
 *
 * Over TCP the same program works unchanged: the library carries the
 * writes in frames and honours the same rules.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ev.h>
#include <rmsg.h>

#define CHUNK ((size_t)512 << 10)
#define WINDOW 8
#define MAX_MIB 4096

enum {
	B_START = 1, /* sender -> receiver: total, chunk */
	B_DESC,	     /* receiver -> sender: desc of the target region */
	B_DONE,	     /* receiver -> sender: chunks verified, bad */
};

struct bulk_msg {
	uint32_t kind;
	uint32_t chunk;
	uint64_t total;
	uint64_t verified;
	uint64_t bad;
	uint8_t desc[RMSG_MR_DESC_SIZE];
};

/* the pattern of chunk @idx: cheap to write and to check */
static uint64_t word(uint64_t idx, size_t k)
{
	return (idx << 40) ^ (k * 0x9e3779b97f4a7c15ull);
}

static void fill(void *buf, size_t len, uint64_t idx)
{
	uint64_t *w = buf;
	size_t k;

	for (k = 0; k < len / 8; k++)
		w[k] = word(idx, k);
}

static bool verify(const void *buf, size_t len, uint64_t idx)
{
	const uint64_t *w = buf;
	size_t k;

	for (k = 0; k < len / 8; k++)
		if (w[k] != word(idx, k))
			return false;
	return true;
}

/* ------------------------------------------------------------------ */
/* receiver                                                             */

/* one per connection, attached with rmsg_conn_set_arg(); freed in on_close,
 * the last callback, so every send's memory outlives the send */
struct receiver {
	struct bulk_msg out;
	uint8_t *buf;
	struct rmsg_mr *mr;
	uint64_t total, nchunks, verified, bad;
	uint32_t chunk;
	ev_tstamp t0;
};

static int once;
static struct rmsg_listener *lis;

static void rx_reply(struct rmsg_conn *c, struct receiver *r, uint32_t kind)
{
	struct iovec iov = {&r->out, sizeof(r->out)};
	int ret;

	r->out.kind = kind;
	ret = rmsg_send(c, &iov, 1, NULL, NULL);
	if (ret) {
		fprintf(stderr, "bulk: send: %s\n", rmsg_strerror(ret));
		rmsg_conn_close(c);
	}
}

static int rx_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pdata, size_t pdata_len, void *arg)
{
	struct receiver *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM; /* rejects the connection */
	return rmsg_conn_set_arg(c, r);
}

static void rx_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct receiver *r = arg;
	struct bulk_msg in;
	int ret;

	if (rmsg_msg_len(m) != sizeof(in) || r->buf) {
		fprintf(stderr, "bulk: unexpected message\n");
		rmsg_conn_close(c);
		return;
	}
	memcpy(&in, rmsg_msg_data(m), sizeof(in));
	if (in.kind != B_START || !in.chunk || in.chunk % 8 ||
	    in.total % in.chunk || in.total > (uint64_t)MAX_MIB << 20) {
		fprintf(stderr, "bulk: bad transfer request\n");
		rmsg_conn_close(c);
		return;
	}
	r->total = in.total;
	r->chunk = in.chunk;
	r->nchunks = in.total / in.chunk;
	r->buf = malloc(in.total ? in.total : 1);
	if (!r->buf) {
		fprintf(stderr, "bulk: cannot allocate %llu bytes\n",
			(unsigned long long)in.total);
		rmsg_conn_close(c);
		return;
	}
	/* register it for remote writes, and tell the sender where it is */
	ret = rmsg_mr_reg(rmsg_conn_ctx(c), r->buf, in.total ? in.total : 1,
			  RMSG_ACCESS_REMOTE_WRITE, &r->mr);
	if (!ret)
		/* for this connection's peer only: over RDMA a memory
		 * window bound to its queue pair */
		ret = rmsg_mr_export(r->mr, c, 0, 0, RMSG_ACCESS_REMOTE_WRITE,
				     r->out.desc);
	if (ret) {
		fprintf(stderr, "bulk: register %llu bytes: %s\n",
			(unsigned long long)in.total, rmsg_strerror(ret));
		rmsg_conn_close(c);
		return;
	}
	r->t0 = ev_time();
	rx_reply(c, r, B_DESC);
}

/* a chunk has landed in r->buf: check it now */
static void rx_imm(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	struct receiver *r = arg;

	if (imm >= r->nchunks || len != r->chunk ||
	    !verify(r->buf + (size_t)imm * r->chunk, len, imm)) {
		if (r->bad++ < 5)
			fprintf(stderr, "bulk: chunk %u (%zu bytes) is wrong\n",
				imm, len);
	} else {
		r->verified++;
	}
	if (r->verified + r->bad == r->nchunks) {
		double s = ev_time() - r->t0;

		printf("bulk: received %llu chunks, %llu verified, %.1f MB/s\n",
		       (unsigned long long)r->nchunks,
		       (unsigned long long)r->verified,
		       s > 0 ? (double)r->total / s / 1e6 : 0.0);
		fflush(stdout);
		r->out.verified = r->verified;
		r->out.bad = r->bad;
		rx_reply(c, r, B_DONE);
	}
}

static void rx_established(struct rmsg_conn *c, void *arg)
{
	printf("bulk: sender connected over %s\n", rmsg_conn_transport(c));
	fflush(stdout);
}

static void rx_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct receiver *r = arg;

	if (reason && reason != -ESHUTDOWN)
		fprintf(stderr, "bulk: sender left: %s\n",
			rmsg_strerror(reason));
	/* no operation uses the region any more: on_close is the last
	 * callback */
	if (r->mr)
		rmsg_mr_dereg(r->mr);
	free(r->buf);
	free(r);
	if (once && lis) {
		rmsg_listener_close(lis);
		lis = NULL;
	}
}

/* ------------------------------------------------------------------ */
/* sender                                                               */

static struct rmsg_conn *conn;
static struct bulk_msg req, desc_msg, done_msg;
static uint8_t *ring; /* WINDOW chunks, registered once */
static struct rmsg_mr *ring_mr;
static bool slot_busy[WINDOW];
static uint64_t nchunks, next_chunk, chunks_done;
static int exit_code = 1, got_desc, got_done;
static ev_tstamp t_start, t_sent;

static void tx_pump(void);

/* the end: the receiver's report is in and every write has completed
 * (the report may come before the last write callbacks) */
static void tx_finish(void)
{
	if (!got_done || chunks_done < nchunks)
		return;
	printf("bulk: sent %llu chunks of %zu KiB; receiver verified "
	       "%llu, %llu bad; %.1f MB/s\n",
	       (unsigned long long)nchunks, CHUNK >> 10,
	       (unsigned long long)done_msg.verified,
	       (unsigned long long)done_msg.bad,
	       (double)req.total / t_sent / 1e6);
	if (done_msg.verified == nchunks && !done_msg.bad)
		exit_code = 0;
	rmsg_conn_close(conn);
}

static void tx_done(struct rmsg_conn *c, int status, void *arg)
{
	int slot = (int)(intptr_t)arg;

	slot_busy[slot] = false;
	if (status) {
		fprintf(stderr, "bulk: write failed: %s\n",
			rmsg_strerror(status));
		rmsg_conn_close(c);
		return;
	}
	chunks_done++;
	tx_pump();
	tx_finish();
}

/* keeps every free ring slot busy with the next chunk */
static void tx_pump(void)
{
	int slot;

	for (slot = 0; slot < WINDOW && next_chunk < nchunks; slot++) {
		uint8_t *p = ring + (size_t)slot * CHUNK;
		struct iovec iov = {p, CHUNK};
		int ret;

		if (slot_busy[slot])
			continue;
		fill(p, CHUNK, next_chunk);
		ret = rmsg_write_imm(conn, &iov, 1, desc_msg.desc,
				     next_chunk * CHUNK, (uint32_t)next_chunk,
				     tx_done, (void *)(intptr_t)slot);
		if (ret == -EAGAIN)
			return; /* on_writable calls us again */
		if (ret) {
			fprintf(stderr, "bulk: write_imm: %s\n",
				rmsg_strerror(ret));
			rmsg_conn_close(conn);
			return;
		}
		slot_busy[slot] = true;
		next_chunk++;
	}
}

static void tx_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct bulk_msg in;

	if (rmsg_msg_len(m) != sizeof(in)) {
		rmsg_conn_close(c);
		return;
	}
	memcpy(&in, rmsg_msg_data(m), sizeof(in));
	if (in.kind == B_DESC && !got_desc) {
		got_desc = 1;
		desc_msg = in;
		t_start = ev_time();
		tx_pump();
	} else if (in.kind == B_DONE && !got_done) {
		got_done = 1;
		done_msg = in;
		t_sent = ev_time() - t_start;
		if (t_sent <= 0)
			t_sent = 1e-9;
		tx_finish();
	}
}

static void tx_established(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {&req, sizeof(req)};
	int ret;

	printf("bulk: connected over %s\n", rmsg_conn_transport(c));
	ret = rmsg_send(c, &iov, 1, NULL, NULL);
	if (ret) {
		fprintf(stderr, "bulk: send: %s\n", rmsg_strerror(ret));
		rmsg_conn_close(c);
	}
}

static void tx_writable(struct rmsg_conn *c, void *arg)
{
	tx_pump();
}

static void tx_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (reason)
		fprintf(stderr, "bulk: connection: %s\n",
			rmsg_strerror(reason));
}

int main(int argc, char **argv)
{
	const struct rmsg_conn_ops rx_ops = {.on_established = rx_established,
					     .on_msg = rx_msg,
					     .on_imm = rx_imm,
					     .on_close = rx_close};
	const struct rmsg_conn_ops tx_ops = {.on_established = tx_established,
					     .on_msg = tx_msg,
					     .on_writable = tx_writable,
					     .on_close = tx_close};
	struct ev_loop *loop = EV_DEFAULT;
	struct rmsg_ctx *ctx;
	long mib = 64;
	int server, ret;

	if (argc < 3 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr,
			"usage: %s server URI [--once] | client URI [MIB]\n",
			argv[0]);
		return 2;
	}
	server = !strcmp(argv[1], "server");
	if (server)
		once = argc > 3 && !strcmp(argv[3], "--once");
	else if (argc > 3)
		mib = atol(argv[3]);
	if (mib < 1 || mib > MAX_MIB) {
		fprintf(stderr, "bulk: MIB is 1 to %d\n", MAX_MIB);
		return 2;
	}
	ret = rmsg_ctx_create(loop, NULL, &ctx);
	if (ret)
		goto fail;
	if (server) {
		ret = rmsg_listen(ctx, argv[2], NULL, &rx_ops, rx_accept, NULL,
				  &lis);
		if (ret)
			goto fail_ctx;
		printf("bulk: listening on %s\n", argv[2]);
		fflush(stdout);
		ev_run(loop, 0);
		rmsg_ctx_destroy(ctx);
		return 0;
	}

	nchunks = ((uint64_t)mib << 20) / CHUNK;
	req.kind = B_START;
	req.chunk = CHUNK;
	req.total = nchunks * CHUNK;
	/* the ring the chunks are written from: registered once, with no
	 * remote access, so that the writes need no registration each */
	ring = aligned_alloc(4096, WINDOW * CHUNK);
	if (!ring) {
		ret = -ENOMEM;
		goto fail_ctx;
	}
	ret = rmsg_mr_reg(ctx, ring, WINDOW * CHUNK, 0, &ring_mr);
	if (!ret)
		ret = rmsg_connect(ctx, argv[2], NULL, &tx_ops, NULL, &conn);
	if (ret)
		goto fail_ctx;
	ev_run(loop, 0);
	rmsg_mr_dereg(ring_mr);
	rmsg_ctx_destroy(ctx);
	free(ring);
	return exit_code;

fail_ctx:
	rmsg_ctx_destroy(ctx);
fail:
	fprintf(stderr, "bulk: %s: %s\n", argv[2], rmsg_strerror(ret));
	return 1;
}
