// SPDX-License-Identifier: MIT
/*
 * fuzz_conn.c - libFuzzer target over a whole connection: the core
 * (conn.c, credits, keepalive state, RPC, one-sided emulation, regions)
 * behind a fake transport, driven by the input as a sequence of actions:
 * frames from the peer (any type, credits, ids, aux and payload, legal or
 * not; PACK frames well-formed or damaged), calls of the application (send, write, read, RPC calls and
 * replies, hold and release, close), and the transport's doing
 * (completing posted ops with any status, room returning, failure,
 * going down, the context flush).
 *
 * After each action and at the end it checks the invariants; a failed
 * one aborts, which libFuzzer reports as a crash:
 *   - on_close runs exactly once, and nothing after it;
 *   - every callback of a call that returned 0 runs exactly once (sends,
 *     one-sided ops, RPC calls), none of one that failed;
 *   - no message object is leaked (every frame handed in is freed, held
 *     ones once released), and LeakSanitizer sees no other leak;
 *   - what the library queues for the peer (answers) stays within its
 *     bound, the credits x (1 + frames the transport takes);
 *   - the peer never holds more of our credits than we granted.
 *
 * Built by tests/fuzz/run.sh next to fuzz_proto.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn_int.h" /* rmsg_int.h, and the AUTH proofs */
#include "../unit/fake_tr.h"

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr,                                      \
				"fuzz_conn: invariant failed: %s (%s:%d)\n", \
				#cond, __FILE__, __LINE__);                  \
			abort();                                             \
		}                                                            \
	} while (0)

#define POSTED_MAX 64
#define CBS_MAX 512
#define HELD_MAX 16
#define GRANT 8

/* ------------------------------------------------------------------ */
/* the input                                                            */

static const uint8_t *in;
static size_t in_len, in_off;

static uint8_t u8(void)
{
	return in_off < in_len ? in[in_off++] : 0;
}

static uint32_t u32(void)
{
	return u8() | (uint32_t)u8() << 8 | (uint32_t)u8() << 16 |
	       (uint32_t)u8() << 24;
}

/* ------------------------------------------------------------------ */
/* the fake transport (tests/unit/fake_tr.[ch], built with
 * -DFAKE_TR_ABORT): it holds at most POSTED_MAX ops, then says -EAGAIN
 * and reports room on the next completion; down, post() says -ENOTCONN */

/* ------------------------------------------------------------------ */
/* frames from the peer                                                 */

struct fmsg {
	struct rmsg_msg m;
	uint8_t data[];
};

static int msgs_alive;

static void fmsg_free(struct rmsg_msg *m)
{
	struct fmsg *f = RMSGI_CONTAINER_OF(m, struct fmsg, m);

	msgs_alive--;
	CHECK(msgs_alive >= 0);
	if (m->conn)
		rmsgi_conn_credit_freed(m->conn, m->wcost);
	free(f);
}

static struct rmsg_msg *fmsg_new(struct rmsg_conn *c, size_t len)
{
	struct fmsg *f = malloc(sizeof(*f) + (len ? len : 1));
	size_t i;

	CHECK(f);
	for (i = 0; i < len; i++)
		f->data[i] = u8();
	rmsgi_msg_init(&f->m, c, f->data, len);
	f->m.free_fn = fmsg_free;
	msgs_alive++;
	return &f->m;
}

/* ------------------------------------------------------------------ */
/* the application                                                      */

static struct {
	struct rmsg_ctx *ctx;
	struct rmsg_conn *c;
	struct rmsg_mr *mr;
	char desc[RMSG_MR_DESC_SIZE]; /* the region, exported to the conn */
	uint64_t token;
	uint8_t region[256];
	uint8_t local[256];
	int closed;
	int cbs[CBS_MAX]; /* callbacks run, per issued call */
	bool issued[CBS_MAX];
	int ncalls;
	struct rmsg_msg *held[HELD_MAX];
	int nheld;
	struct rmsg_msg *pending_rndv[HELD_MAX]; /* rendezvous being read */
	int npending;
	struct rmsg_req *reqs[HELD_MAX];
	int nreqs;
} app;

static void done_cb(struct rmsg_conn *c, int status, void *arg)
{
	uintptr_t k = (uintptr_t)arg;

	(void)c;
	(void)status;
	CHECK(!app.closed);
	CHECK(k < CBS_MAX && app.issued[k]);
	app.cbs[k]++;
	CHECK(app.cbs[k] == 1);
}

static void reply_cb(struct rmsg_conn *c, int status, struct rmsg_msg *r,
		     void *arg)
{
	(void)r;
	done_cb(c, status, arg);
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)arg;
	CHECK(!app.closed);
	if (app.nheld < HELD_MAX && (u8() & 1)) {
		CHECK(rmsg_msg_hold(m) == 0);
		app.held[app.nheld++] = m;
	}
}

static void on_imm(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	(void)c;
	(void)imm;
	(void)len;
	(void)arg;
	CHECK(!app.closed);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)reason;
	(void)arg;
	CHECK(app.closed == 0);
	app.closed++;
}

static void handler(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)m;
	(void)arg;
	CHECK(!app.closed);
	if (app.nreqs < HELD_MAX && (u8() & 1))
		app.reqs[app.nreqs++] = req;
	else
		rmsg_reply(req, NULL, 0);
}

static const struct rmsg_conn_ops ops = {
	.on_msg = on_msg,
	.on_imm = on_imm,
	.on_close = on_close,
};

/* a slot for a call's callback; the call's return says if it counts */
static uintptr_t call_slot(void)
{
	return app.ncalls < CBS_MAX ? (uintptr_t)app.ncalls++ : CBS_MAX;
}

static void call_result(uintptr_t k, int ret)
{
	if (k < CBS_MAX)
		app.issued[k] = ret == 0;
}

/* ------------------------------------------------------------------ */
/* actions                                                              */

/* the run's connection has a byte window (the mode's bit 5) */
static bool fz_win;

static void peer_frame(struct rmsg_conn *c)
{
	static const uint8_t types[] = {
		RMSGI_T_DATA,	  RMSGI_T_CREDIT,    RMSGI_T_RNDV_REQ,
		RMSGI_T_RNDV_ACK, RMSGI_T_WRITE,     RMSGI_T_WRITE_IMM,
		RMSGI_T_READ_REQ, RMSGI_T_READ_RESP, RMSGI_T_IMM,
		RMSGI_T_HELLO,	  RMSGI_T_AUTH,	     77,
		RMSGI_T_PACK};
	struct rmsgi_hdr h = {0};
	uint8_t sel = u8();
	size_t len = u8() % 64;
	struct rmsg_msg *m;
	bool pend;

	h.type = types[sel % sizeof(types)];
	h.credits = (uint16_t)(u8() % (GRANT + 2));
	h.aux = sel & 0x80 ? u32() : (u8() % 3);
	h.id = u8() % 8;
	/* window bytes returned, legal or not (the mode's bit 5) */
	if ((sel & 0x40) && fz_win)
		h.bytes = h.aux;
	if (h.type == RMSGI_T_READ_REQ || h.type == RMSGI_T_WRITE ||
	    h.type == RMSGI_T_WRITE_IMM) {
		/* a target in our region, near it, or forged */
		struct rmsgi_rma r = {.off = u8(), .len = u8()};
		uint8_t buf[RMSGI_READ_REQ_SIZE];
		int rd = h.type == RMSGI_T_READ_REQ;

		r.token = u8() & 1 ? app.token : (uint64_t)u32() << 32 | u32();
		rmsgi_rma_encode(&r, rd, buf);
		len = (rd ? RMSGI_READ_REQ_SIZE : RMSGI_RMA_SIZE) + len;
		m = fmsg_new(c, len);
		memcpy((uint8_t *)m->data, buf,
		       rd ? RMSGI_READ_REQ_SIZE : RMSGI_RMA_SIZE);
	} else if (h.type == RMSGI_T_DATA &&
		   (h.aux == RMSGI_AUX_RPC_REQ || h.aux == RMSGI_AUX_RPC_REP)) {
		m = fmsg_new(c, 16 + len);
		memset((uint8_t *)m->data, 0, 8);
		((uint8_t *)m->data)[0] = u8() % 3; /* method or status */
	} else if (h.type == RMSGI_T_PACK) {
		/* 1..6 entries, well-formed; then maybe a forged count
		 * (aux above) or one byte changed */
		uint8_t ents[6];
		uint32_t i, n = 1 + u8() % 6;
		size_t off = 0;

		len = 0;
		for (i = 0; i < n; i++) {
			ents[i] = u8() % 24;
			len += RMSGI_PACK_ENT(ents[i]);
		}
		m = fmsg_new(c, len);
		for (i = 0; i < n; i++) {
			uint8_t *e = (uint8_t *)m->data + off;
			size_t pad = RMSGI_PACK_ENT(ents[i]) -
				     RMSGI_PACK_ENT_SIZE - ents[i];

			rmsgi_pack_ent_encode(e, ents[i]);
			memset(e + RMSGI_PACK_ENT_SIZE + ents[i], 0, pad);
			off += RMSGI_PACK_ENT(ents[i]);
		}
		if (!(sel & 0x80))
			h.aux = n;
		if (u8() & 1)
			((uint8_t *)m->data)[u8() % len] ^= (uint8_t)(1 + u8());
	} else {
		m = fmsg_new(c, len);
	}
	h.len = m->len;
	pend = h.type == RMSGI_T_RNDV_REQ && app.npending < HELD_MAX;
	if (pend) {
		m->ready = 0;
		app.pending_rndv[app.npending++] = m;
	}
	if (rmsgi_conn_rx(c, &h, m) != RMSGI_RX_KEPT) {
		/* done with at once (refused, or a control frame): ours */
		if (pend)
			app.npending--;
		m->conn = NULL; /* the core returned its credit */
		fmsg_free(m);
	}
}

static void rndv_ready(struct rmsg_conn *c)
{
	struct rmsg_msg *m;
	int i = u8() % app.npending;
	static const int st[] = {0, 0, -ENOMEM, -EIO, -ECANCELED};

	m = app.pending_rndv[i];
	app.pending_rndv[i] = app.pending_rndv[--app.npending];
	rmsgi_conn_rx_ready(c, m, st[u8() % 5]);
}

static void app_call(struct rmsg_conn *c)
{
	uint8_t what = u8() % 6;
	struct iovec iov = {app.local, 1 + u8() % sizeof(app.local)};
	const char *desc = app.desc;
	uintptr_t k = call_slot();
	uint64_t id;
	int ret;

	switch (what) {
	case 0:
		ret = rmsg_send(c, &iov, 1, done_cb, (void *)k);
		break;
	case 1: {
		/* beyond the eager size: a rendezvous on fake-rdma */
		static uint8_t big[1 << 16];

		iov.iov_base = big;
		iov.iov_len = 8193 + u8() * 200;
		ret = rmsg_send(c, &iov, 1, done_cb, (void *)k);
		break;
	}
	case 2:
		ret = rmsg_write(c, &iov, 1, desc, u8(), done_cb, (void *)k);
		break;
	case 3:
		ret = rmsg_write_imm(c, &iov, 1, desc, u8(), u32(), done_cb,
				     (void *)k);
		break;
	case 4:
		ret = rmsg_read(c, &iov, 1, desc, u8(), done_cb, (void *)k);
		break;
	default:
		ret = rmsg_call(c, u8() % 3, &iov, 1, 0, reply_cb, (void *)k,
				&id);
		break;
	}
	call_result(k, ret);
}

/* keyed mode: the server's proof, right (status 0 or a reject) or with
 * one byte wrong, so that the connection gets past the AUTH state */
static void auth_proof(struct rmsg_conn *c)
{
	uint8_t pd[32], mac[RMSGI_MAC_SIZE];
	uint8_t n = u8() % 33, sel = u8();
	uint32_t status = sel & 1 ? 0 : u8() % 3 * 13;
	struct rmsgi_hdr h = {.type = RMSGI_T_AUTH, .aux = status};
	struct rmsg_msg *m = fmsg_new(c, RMSGI_MAC_SIZE + n);
	const uint8_t *ns, *nc;

	rmsgi_auth_nonces(c, &ns, &nc);
	if (!ns) {
		/* no handshake state: any proof is wrong */
		memset(mac, 0, sizeof(mac));
	} else {
		memcpy(pd, m->data + RMSGI_MAC_SIZE, n);
		rmsgi_auth_server_mac(&c->cfg, nc, ns, status, pd, n, mac);
	}
	if (sel & 2)
		mac[sel % RMSGI_MAC_SIZE] ^= 1;
	memcpy((uint8_t *)m->data, mac, RMSGI_MAC_SIZE);
	h.len = m->len;
	h.credits = (uint16_t)(u8() % (GRANT + 2));
	if (rmsgi_conn_rx(c, &h, m) != RMSGI_RX_KEPT) {
		m->conn = NULL; /* the core returned its credit */
		fmsg_free(m);
	}
}

static void app_release(void)
{
	int i;

	if (app.nheld && (u8() & 1)) {
		i = u8() % app.nheld;
		rmsg_msg_release(app.held[i]);
		app.held[i] = app.held[--app.nheld];
	}
	if (app.nreqs && (u8() & 1)) {
		i = u8() % app.nreqs;
		if (u8() & 1)
			rmsg_reply(app.reqs[i], NULL, 0);
		else
			rmsg_reply_error(app.reqs[i], -EIO);
		app.reqs[i] = app.reqs[--app.nreqs];
	}
}

static void check_bounds(const struct rmsg_conn *c)
{
	/* the peer sends only what we returned, in frames the transport
	 * took (at most POSTED_MAX at a time); what the app replies to
	 * requests it held comes on top */
	CHECK(c->tx.ans_n <= c->cfg.credits * (1 + POSTED_MAX) + HELD_MAX);
	CHECK(c->cr.peer_avail <= (int32_t)c->cfg.credits);
	/* a grant that follows use stays between the start and the
	 * configured credits, and the peer never holds more than it */
	CHECK(c->cr.grant >= rmsgi_credits_start(&c->cfg));
	CHECK(c->cr.grant <= c->cfg.credits);
	CHECK(c->cr.peer_avail <= (int32_t)c->cr.grant);
	/* the byte window (TCP, mode bit 5): the peer never has more of it
	 * than we granted, nor do we think we have more of its */
	CHECK(c->cr.wpeer_avail + c->cr.wto_return <= c->cr.win_in);
	CHECK(c->cr.wavail <= c->cr.win_out);
}

static void quiet(int level, const char *line, void *arg)
{
	(void)level;
	(void)line;
	(void)arg;
}

/* ------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ev_loop *loop;
	struct rmsgi_hello hello = {0};
	uint8_t mode;
	struct rmsgi_cfgv v;
	struct rmsg_cfg *cfg;
	struct rmsg_conn *c;
	int steps = 0, i;

	if (!loop)
		loop = ev_loop_new(EVFLAG_AUTO);
	in = data;
	in_len = size;
	in_off = 0;
	memset(&app, 0, sizeof(app));
	msgs_alive = 0;

	CHECK(rmsg_cfg_create(&cfg) == 0);
	rmsg_cfg_set_log(cfg, RMSG_LOG_ERROR, quiet, NULL);
	CHECK(rmsg_ctx_create(loop, cfg, &app.ctx) == 0);
	rmsg_cfg_destroy(cfg);
	CHECK(rmsg_mr_reg(app.ctx, app.region, sizeof(app.region),
			  RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			  &app.mr) == 0);
	CHECK(rmsg_handle(app.ctx, 1, handler, NULL) == 0);
	rmsgi_cfg_defaults(&v);
	v.credits = GRANT;
	CHECK(rmsgi_conn_new(app.ctx, &v, &ops, NULL, &c) == 0);
	app.c = c;
	/* with or without rendezvous; with a key (bit 1): the connection
	 * starts in the AUTH state, the server's proof is an action */
	mode = u8();
	/* bit 5: a backend with a byte window (TCP's), the peer granting
	 * one of 64 KiB (frames return window bytes: frame()) */
	fake_tr_reset((mode & 1 ? RMSGI_TR_CAP_RNDV : 0) |
		      (mode & 32 ? RMSGI_TR_CAP_WINDOW : 0));
	ft.room = POSTED_MAX;
	fake_tr_attach(c);
	hello.credits = (uint16_t)(4 + u8() % 8);
	hello.eager_size = 8192;
	/* bit 2: the peer takes PACK frames (queued sends go packed) */
	if (mode & 4)
		hello.flags |= RMSGI_HELLO_F_PACK;
	/* bit 3: the peer takes a growing grant (ours starts at the
	 * initial credits and follows its use); bit 4: the backend backs
	 * only a few buffers more */
	if (mode & 8)
		hello.flags |= RMSGI_HELLO_F_GROW;
	fz_win = mode & 32;
	if (fz_win)
		hello.flags |= rmsgi_hello_win_flags(64 << 10);
	if (mode & 16)
		ft.grant_cap = GRANT / 2;
	if (mode & 2) {
		memset(c->cfg.psk, 0x42, 32);
		c->cfg.psk_len = 32;
		hello.flags |= RMSGI_HELLO_F_AUTH;
		hello.nonce_len = RMSGI_NONCE_SIZE;
		memset(hello.nonce, mode, RMSGI_NONCE_SIZE);
	}
	rmsgi_conn_get(c); /* the test looks at it until the end */
	rmsgi_conn_ev_established(c, &hello);
	{
		struct rmsgi_desc d;

		int rw = RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ;

		/* the fake RDMA backend binds no memory windows */
		if (rmsg_mr_export(app.mr, c, 0, 0, rw, app.desc))
			CHECK(rmsg_mr_export(app.mr, NULL, 0, 0,
					     rw | RMSG_EXPORT_ANY_PEER,
					     app.desc) == 0);
		CHECK(rmsgi_desc_decode(app.desc, &d) == 0);
		app.token = d.token;
	}

	while (in_off < in_len && steps++ < 400) {
		uint8_t a = u8() % 16;

		if (app.closed)
			break;
		switch (a) {
		case 0:
		case 1:
		case 2:
		case 3:
		case 4:
		case 5:
			peer_frame(c);
			break;
		case 6:
			if (app.npending)
				rndv_ready(c);
			break;
		case 7:
		case 8:
			if (c->state == RMSGI_CS_ESTABLISHED)
				app_call(c);
			break;
		case 9:
			app_release();
			break;
		case 10:
		case 11:
			if (ft.nposted)
				tr_complete(c, u8() % ft.nposted,
					    u8() % 4 ? 0 : -EIO);
			break;
		case 12:
			rmsg_conn_close(c);
			break;
		case 13:
			rmsgi_conn_ev_failed(c, u8() & 1 ? -ECONNRESET : -EIO,
					     NULL);
			break;
		case 14:
			if (ft.disconnecting || c->state >= RMSGI_CS_CLOSING)
				tr_down(c);
			break;
		case 15:
			if (c->state == RMSGI_CS_AUTH)
				auth_proof(c);
			break;
		default:
			break;
		}
		rmsgi_ctx_flush(app.ctx);
		check_bounds(c);
	}
	/* the end: pending reads fail, the app lets go, the transport goes */
	while (app.npending)
		rmsgi_conn_rx_ready(c, app.pending_rndv[--app.npending],
				    -ECANCELED);
	for (i = 0; i < app.nreqs; i++)
		rmsg_reply_error(app.reqs[i], -EIO);
	rmsg_conn_close(c);
	tr_down(c);
	rmsgi_ctx_flush(app.ctx);
	CHECK(app.closed == 1);
	for (i = 0; i < app.nheld; i++)
		rmsg_msg_release(app.held[i]);
	for (i = 0; i < app.ncalls && i < CBS_MAX; i++)
		CHECK(app.cbs[i] == (app.issued[i] ? 1 : 0));
	rmsgi_conn_put(c);
	CHECK(msgs_alive == 0);
	CHECK(rmsg_mr_dereg(app.mr) == 0);
	CHECK(rmsg_ctx_destroy(app.ctx) == 0);
	return 0;
}

#ifdef FUZZ_STANDALONE
int main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		static uint8_t buf[1 << 16];
		FILE *f = fopen(argv[i], "rb");
		size_t n;

		if (!f)
			return 2;
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	return 0;
}
#endif
