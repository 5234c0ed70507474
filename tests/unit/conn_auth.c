// SPDX-License-Identifier: MIT
/*
 * conn_auth.c - authentication with a pre-shared key in the connection
 * state machine (src/conn.c, AUTH state) over the fake transport. The
 * peer's proofs are computed here with nettle from the formulas of
 * proto.h / rmsg.7 "Authentication", not with the library's helpers.
 */
#include <nettle/hmac.h>

#include "conn_t.h"

static const uint8_t key[32] = "0123456789abcdef0123456789abcde";
static const uint8_t other[32] = "fedcba9876543210fedcba987654321";
static const uint8_t ns[RMSGI_NONCE_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static const uint8_t nc[RMSGI_NONCE_SIZE] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

/* ------------------------------------------------------------------ */
/* the documented proofs                                                */

/* H_c: the client's hello with credits, status and eager size zero */
static size_t hello_covered(const struct rmsgi_hello *h, uint8_t *buf)
{
	struct rmsgi_hello v = *h;

	v.credits = 0;
	v.status = 0;
	v.eager_size = 0;
	v.nonce_len = 0;
	return rmsgi_hello_encode(&v, buf);
}

static void p_c(const uint8_t *k, const uint8_t *s_nonce,
		const uint8_t *c_nonce, const struct rmsgi_hello *hello,
		uint8_t *out)
{
	struct hmac_sha256_ctx h;
	uint8_t buf[RMSGI_HELLO_MAX];
	size_t n = hello_covered(hello, buf);

	hmac_sha256_set_key(&h, 32, k);
	hmac_sha256_update(&h, 17, (const uint8_t *)"rmsg-psk-1 client");
	hmac_sha256_update(&h, 32, s_nonce);
	hmac_sha256_update(&h, 32, c_nonce);
	hmac_sha256_update(&h, n, buf);
	hmac_sha256_digest(&h, 32, out);
}

static void p_s(const uint8_t *k, const uint8_t *c_nonce,
		const uint8_t *s_nonce, uint32_t status, const void *pd,
		size_t len, uint8_t *out)
{
	struct hmac_sha256_ctx h;
	uint8_t st[4] = {(uint8_t)status, (uint8_t)(status >> 8),
			 (uint8_t)(status >> 16), (uint8_t)(status >> 24)};

	hmac_sha256_set_key(&h, 32, k);
	hmac_sha256_update(&h, 17, (const uint8_t *)"rmsg-psk-1 server");
	hmac_sha256_update(&h, 32, c_nonce);
	hmac_sha256_update(&h, 32, s_nonce);
	hmac_sha256_update(&h, 4, st);
	hmac_sha256_update(&h, len, pd);
	hmac_sha256_digest(&h, 32, out);
}

/* an AUTH frame from the peer with @len bytes of @data */
static int rx_auth(struct rmsg_conn *c, uint32_t aux, const uint8_t *data,
		   size_t len)
{
	struct rmsg_msg *m = tmsg_new(c, NULL);
	struct tmsg *t = RMSGI_CONTAINER_OF(m, struct tmsg, m);

	if (len)
		memcpy(t->data, data, len);
	m->len = len;
	return rx(c, RMSGI_T_AUTH, 0, aux, 0, m);
}

/* ------------------------------------------------------------------ */
/* the client                                                           */

static struct t *client(void **state, const uint8_t *k)
{
	struct rmsgi_cfgv v;

	rmsgi_cfg_defaults(&v);
	if (k) {
		memcpy(v.psk, k, 32);
		v.psk_len = 32;
	}
	v.timeout_ms = 50;
	return replace_t(state, &v, 0);
}

/* the server's accepting hello with its nonce */
static void srv_hello(struct rmsgi_hello *h, bool flag, bool nonce)
{
	memset(h, 0, sizeof(*h));
	h->credits = 16;
	h->eager_size = 4096;
	if (flag)
		h->flags = RMSGI_HELLO_F_AUTH;
	if (nonce) {
		h->nonce_len = RMSGI_NONCE_SIZE;
		memcpy(h->nonce, ns, RMSGI_NONCE_SIZE);
	}
}

/* a keyed client whose transport is up: its proof posted */
static struct t *client_in_auth(void **state, const uint8_t *k)
{
	struct t *t = client(state, k);
	struct rmsgi_hello h, mine;
	uint8_t want[32];

	rmsgi_conn_hello(t->c, &mine);
	assert_true(mine.flags & RMSGI_HELLO_F_AUTH);
	assert_int_equal(send_str(t, "early", 1), 0); /* waits */
	srv_hello(&h, true, true);
	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->established, 0);
	assert_int_equal(t->c->state, RMSGI_CS_AUTH);
	flush(t);
	/* only the proof goes: nothing of the app's before established */
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_AUTH);
	assert_int_equal(ft.posted[0].aux, 0);
	assert_int_equal(ft.posted[0].data_len, 64);
	p_c(k, ns, ft.posted[0].data, &mine, want);
	assert_memory_equal(ft.posted[0].data + 32, want, 32);
	return t;
}

static void client__right_key(void **state)
{
	struct t *t = client_in_auth(state, key);
	uint8_t f[64];
	const void *pd;
	size_t len;
	uint8_t ncli[32];

	memcpy(ncli, ft.posted[0].data, 32);
	tr_complete_all(t->c, 0);
	p_s(key, ncli, ns, 0, "hi", 2, f);
	memcpy(f + 32, "hi", 2);
	assert_int_equal(rx_auth(t->c, 0, f, 34), 0);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	assert_int_equal(rmsg_conn_peer_data(t->c, &pd, &len), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(pd, "hi", 2);
	/* what the app queued goes now */
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(t->ctx->st.auth_failures, 0);
}

/* a server proof made with another key, or over other data */
static void client__wrong_server_proof(void **state)
{
	static const struct {
		const uint8_t *k;
		uint32_t mac_status; /* the status the MAC covers */
		const char *mac_pd;
	} cases[] = {
		{other, 0, "hi"},
		{key, 0, "ho"},	 /* private data changed on the way */
		{key, 13, "hi"}, /* status changed on the way */
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t *t = client_in_auth(state, key);
		uint8_t f[64], ncli[32];
		int st;

		memcpy(ncli, ft.posted[0].data, 32);
		tr_complete_all(t->c, 0);
		ft.auto_down = true;
		p_s(cases[i].k, ncli, ns, cases[i].mac_status, cases[i].mac_pd,
		    2, f);
		memcpy(f + 32, "hi", 2);
		assert_int_equal(rx_auth(t->c, 0, f, 34), -EACCES);
		flush(t);
		assert_int_equal(t->established, 0);
		assert_int_equal(t->closed, 1);
		/* covers: rmsg_cfg_set_psk.3 EACCES */
		assert_int_equal(t->close_reason, -EACCES);
		/* the send queued before fails with it */
		assert_int_equal(done_count(t, 1, &st), 1);
		assert_int_equal(st, -EACCES);
	}
}

/* the server refused our proof: AUTH, status EACCES, no proof */
static void client__refused_proof(void **state)
{
	struct t *t = client_in_auth(state, key);

	tr_complete_all(t->c, 0);
	ft.auto_down = true;
	assert_int_equal(rx_auth(t->c, EACCES, NULL, 0), -EACCES);
	flush(t);
	assert_int_equal(t->established, 0);
	/* covers: rmsg_cfg_set_psk.3 EACCES */
	assert_int_equal(t->close_reason, -EACCES);
	assert_int_equal(t->ctx->st.auth_failures, 1);
}

/* the app of the server rejected us after the proofs: as a reject */
static void client__rejected_after_auth(void **state)
{
	struct t *t = client_in_auth(state, key);
	uint8_t f[64], ncli[32];
	const void *pd;
	size_t len;

	memcpy(ncli, ft.posted[0].data, 32);
	tr_complete_all(t->c, 0);
	ft.auto_down = true;
	p_s(key, ncli, ns, EPERM, "no", 2, f);
	memcpy(f + 32, "no", 2);
	assert_int_equal(rx_auth(t->c, EPERM, f, 34), 0);
	/* the reject's private data, as after a reject without a key */
	assert_int_equal(rmsg_conn_peer_data(t->c, &pd, &len), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(pd, "no", 2);
	flush(t);
	assert_int_equal(t->established, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ECONNREFUSED);
}

/* a server that does not ask for the key (no flag, or no nonce), or
 * one that asks a client without a key */
static void client__flag_mismatch(void **state)
{
	static const struct {
		bool key, flag, nonce;
	} cases[] = {
		{true, false, false},
		{true, true, false},
		{false, true, true},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t *t = client(state, cases[i].key ? key : NULL);
		struct rmsgi_hello h;

		ft.auto_down = true;
		srv_hello(&h, cases[i].flag, cases[i].nonce);
		rmsgi_conn_ev_established(t->c, &h);
		flush(t);
		assert_int_equal(t->established, 0);
		assert_int_equal(ft.nposted, 0);
		/* covers: rmsg_cfg_set_psk.3 EACCES */
		assert_int_equal(t->close_reason, -EACCES);
	}
}

/* the server refused in its handshake: a key on one side only */
static void client__refused_in_handshake(void **state)
{
	struct t *t = client(state, NULL);
	struct rmsgi_hello h;

	memset(&h, 0, sizeof(h));
	h.status = -EACCES;
	h.flags = RMSGI_HELLO_F_AUTH;
	rmsgi_conn_ev_failed(t->c, -ECONNREFUSED, &h);
	tr_down(t->c);
	flush(t);
	/* covers: rmsg_cfg_set_psk.3 EACCES */
	assert_int_equal(t->close_reason, -EACCES);
	/* an app's own -EACCES refusal (no flag) reads as before */
	t = client(state, NULL);
	h.flags = 0;
	rmsgi_conn_ev_failed(t->c, -ECONNREFUSED, &h);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -ECONNREFUSED);
}

/* before the server's proof, any other frame ends it; nothing of it
 * reaches the app, nor its credits */
static void client__frame_before_proof(void **state)
{
	static const uint8_t types[] = {RMSGI_T_DATA,	  RMSGI_T_CREDIT,
					RMSGI_T_RNDV_ACK, RMSGI_T_WRITE,
					RMSGI_T_READ_REQ, RMSGI_T_READ_RESP};
	size_t i;

	for (i = 0; i < sizeof(types); i++) {
		struct t *t = client_in_auth(state, key);
		unsigned avail = t->c->cr.avail;

		tr_complete_all(t->c, 0);
		ft.auto_down = true;
		assert_int_equal(
			rx(t->c, types[i], 3, 0, 1, tmsg_new(t->c, "x")),
			-EACCES);
		assert_int_equal(t->c ? t->c->cr.avail : avail, avail);
		flush(t);
		assert_int_equal(t->msgs, 0);
		assert_int_equal(t->established, 0);
		/* covers: rmsg_cfg_set_psk.3 EACCES */
		assert_int_equal(t->close_reason, -EACCES);
	}
}

/* an AUTH frame too short for a proof, too long, or after the end */
static void client__bad_auth_frames(void **state)
{
	uint8_t f[64] = {0};
	struct t *t = client_in_auth(state, key);

	tr_complete_all(t->c, 0);
	ft.auto_down = true;
	assert_int_equal(rx_auth(t->c, 0, f, 31), -EACCES);
	flush(t);
	assert_int_equal(t->close_reason, -EACCES);
	assert_int_equal(t->established, 0);

	/* an established connection without keys gets one */
	t = client(state, NULL);
	establish(t, 16, 4096);
	ft.auto_down = true;
	assert_int_equal(rx_auth(t->c, 0, f, 64), -EACCES);
	flush(t);
	assert_int_equal(t->close_reason, -EACCES);
}

/* the AUTH state is bounded by the connection timeout */
static void client__timeout(void **state)
{
	struct t *t = client_in_auth(state, key);
	double t0 = ev_time();

	tr_complete_all(t->c, 0);
	ft.auto_down = true;
	while (!t->closed && ev_time() - t0 < 5)
		ev_run(t->loop, EVRUN_ONCE);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->established, 0);
	assert_int_equal(t->close_reason, -ETIMEDOUT);
}

/* ------------------------------------------------------------------ */
/* the server                                                           */

static int accept_calls, accept_ret;
static struct rmsg_listener lst;

static int accept_cb(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pdata, size_t len, void *arg)
{
	accept_calls++;
	assert_int_equal(len, 3);
	assert_memory_equal(pdata, "abc", 3);
	assert_int_equal(rmsg_conn_set_private_data(c, "ok", 2), 0);
	return accept_ret;
}

/* the client's hello */
static void cli_hello(struct rmsgi_hello *h, bool flag)
{
	memset(h, 0, sizeof(*h));
	h->credits = 16;
	h->eager_size = 4096;
	h->conn_id = 77;
	h->pdata_len = 3;
	memcpy(h->pdata, "abc", 3);
	if (flag)
		h->flags = RMSGI_HELLO_F_AUTH;
}

/* a connection made by a listener with (or without) a key, as
 * rmsgi_tr_incoming leaves it: no callbacks of the app yet */
static struct t *server(void **state, const uint8_t *k)
{
	struct rmsgi_cfgv v;
	struct t *t;

	rmsgi_cfg_defaults(&v);
	if (k) {
		memcpy(v.psk, k, 32);
		v.psk_len = 32;
	}
	v.timeout_ms = 50;
	t = replace_t(state, &v, 0);
	memset(&lst, 0, sizeof(lst));
	lst.ctx = t->ctx;
	lst.cfg = v;
	lst.accept = accept_cb;
	lst.ops = ops;
	memset(&t->c->ops, 0, sizeof(t->c->ops));
	t->c->is_server = true;
	t->c->ti.is_server = true;
	rmsgi_listener_attach(&lst, t->c);
	accept_calls = 0;
	accept_ret = 0;
	return t;
}

/* a keyed server after the request: its nonce sent, waiting */
static struct t *server_in_auth(void **state, struct rmsgi_hello *h,
				struct rmsgi_hello *reply)
{
	struct t *t = server(state, key);
	struct rmsgi_hello mine;

	cli_hello(h, true);
	assert_int_equal(rmsgi_conn_ev_request(t->c, &lst, h, reply), 0);
	/* no accept callback before the proof */
	assert_int_equal(accept_calls, 0);
	assert_int_equal(reply->status, 0);
	assert_true(reply->flags & RMSGI_HELLO_F_AUTH);
	assert_int_equal(reply->nonce_len, RMSGI_NONCE_SIZE);
	/* a backend that builds the accepting hello itself (RDMA's
	 * rdma_accept) sends the same flag and nonce */
	rmsgi_conn_hello(t->c, &mine);
	assert_true(mine.flags & RMSGI_HELLO_F_AUTH);
	assert_int_equal(mine.nonce_len, RMSGI_NONCE_SIZE);
	assert_memory_equal(mine.nonce, reply->nonce, RMSGI_NONCE_SIZE);
	rmsgi_conn_ev_established(t->c, NULL);
	assert_int_equal(t->c->state, RMSGI_CS_AUTH);
	assert_int_equal(t->nlog, 0);
	/* still a handshake for the listener's max_pending */
	assert_int_equal(lst.npending, 1);
	return t;
}

/* the server's connection is gone and the app heard nothing of it */
static void server_gone_unseen(struct t *t)
{
	if (!ft.down)
		tr_down(t->c);
	flush(t);
	t->c = NULL; /* freed, without on_close */
	assert_int_equal(t->nlog, 0);
	assert_int_equal(accept_calls, 0);
	assert_int_equal(lst.nconns, 0);
}

static void server__right_key(void **state)
{
	struct rmsgi_hello h, reply;
	struct t *t = server_in_auth(state, &h, &reply);
	uint8_t f[64], want[32];

	memcpy(f, nc, 32);
	p_c(key, reply.nonce, nc, &h, f + 32);
	assert_int_equal(rx_auth(t->c, 0, f, 64), 0);
	assert_int_equal(accept_calls, 1);
	assert_int_equal(t->established, 1);
	assert_int_equal(lst.npending, 0);
	flush(t);
	/* its answer: status 0, P_s and the accept's private data */
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_AUTH);
	assert_int_equal(ft.posted[0].aux, 0);
	assert_int_equal(ft.posted[0].data_len, 34);
	p_s(key, nc, reply.nonce, 0, "ok", 2, want);
	assert_memory_equal(ft.posted[0].data, want, 32);
	assert_memory_equal(ft.posted[0].data + 32, "ok", 2);
	assert_int_equal(t->ctx->st.auth_failures, 0);
}

/* a proof with another key, over another nonce (a replay) or over a
 * hello changed on the way: refused, the app never sees it */
static void server__wrong_proof(void **state)
{
	int i;

	for (i = 0; i < 3; i++) {
		struct rmsgi_hello h, reply, mac_h;
		struct t *t = server_in_auth(state, &h, &reply);
		uint8_t f[64], n2[32];

		memcpy(n2, reply.nonce, 32);
		mac_h = h;
		if (i == 1)
			n2[0] ^= 1; /* the nonce of another connection */
		if (i == 2)
			mac_h.pdata[0] = 'x';
		memcpy(f, nc, 32);
		p_c(i == 0 ? other : key, n2, nc, &mac_h, f + 32);
		assert_int_equal(rx_auth(t->c, 0, f, 64), -EACCES);
		/* the answer: AUTH with EACCES and no proof, then a
		 * lingering close so that it goes out */
		assert_int_equal(ft.nposted, 1);
		assert_int_equal(ft.posted[0].type, RMSGI_T_AUTH);
		assert_int_equal(ft.posted[0].aux, EACCES);
		assert_int_equal(ft.posted[0].len, 0);
		assert_true(ft.disconnecting && ft.linger_ms > 0);
		assert_int_equal(t->ctx->st.auth_failures, 1);
		server_gone_unseen(t);
	}
}

/* a key on one side only: refused in the handshake, no accept */
static void server__flag_mismatch(void **state)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct t *t = server(state, i ? NULL : key);
		struct rmsgi_hello h, reply;

		cli_hello(&h, i == 1);
		assert_int_equal(rmsgi_conn_ev_request(t->c, &lst, &h, &reply),
				 -EACCES);
		assert_int_equal(reply.status, -EACCES);
		assert_true(reply.flags & RMSGI_HELLO_F_AUTH);
		assert_int_equal(accept_calls, 0);
		assert_int_equal(t->ctx->st.auth_failures, 1);
		rmsgi_conn_discard(t->c);
		t->c = NULL;
		assert_int_equal(t->nlog, 0);
	}
}

/* before the client's proof, any other frame ends it unseen */
static void server__frame_before_proof(void **state)
{
	static const uint8_t types[] = {RMSGI_T_DATA, RMSGI_T_CREDIT,
					RMSGI_T_WRITE, RMSGI_T_READ_REQ};
	size_t i;

	for (i = 0; i < sizeof(types); i++) {
		struct rmsgi_hello h, reply;
		struct t *t = server_in_auth(state, &h, &reply);

		assert_int_equal(
			rx(t->c, types[i], 0, 0, 1, tmsg_new(t->c, "x")),
			-EACCES);
		assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
		server_gone_unseen(t);
	}
}

/* a truncated proof, and a proof with a status */
static void server__bad_auth_frames(void **state)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct rmsgi_hello h, reply;
		struct t *t = server_in_auth(state, &h, &reply);
		uint8_t f[64];

		memcpy(f, nc, 32);
		p_c(key, reply.nonce, nc, &h, f + 32);
		assert_int_equal(rx_auth(t->c, i ? 1 : 0, f, i ? 64 : 63),
				 -EACCES);
		server_gone_unseen(t);
	}
}

/* the app rejects after the proof: the answer carries its status and
 * private data under the proof; the app sees no more of it */
static void server__reject_after_auth(void **state)
{
	struct rmsgi_hello h, reply;
	struct t *t = server_in_auth(state, &h, &reply);
	uint8_t f[64], want[32];

	accept_ret = -EPERM;
	memcpy(f, nc, 32);
	p_c(key, reply.nonce, nc, &h, f + 32);
	assert_int_equal(rx_auth(t->c, 0, f, 64), 0);
	assert_int_equal(accept_calls, 1);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].aux, EPERM);
	p_s(key, nc, reply.nonce, EPERM, "ok", 2, want);
	assert_memory_equal(ft.posted[0].data, want, 32);
	assert_int_equal(t->established, 0);
	tr_down(t->c);
	flush(t);
	t->c = NULL;
	assert_int_equal(t->nlog, 0);
}

/* no proof within the timeout: gone, unseen */
static void server__timeout(void **state)
{
	struct rmsgi_hello h, reply;
	struct t *t = server_in_auth(state, &h, &reply);
	double t0 = ev_time();

	ft.auto_down = true;
	while (lst.nconns && ev_time() - t0 < 5)
		ev_run(t->loop, EVRUN_ONCE);
	assert_int_equal(lst.nconns, 0);
	t->c = NULL;
	assert_int_equal(t->nlog, 0);
	assert_int_equal(t->ctx->st.auth_failures, 1);
}

/* the proof's wait is what is left of the setup's bound (from the
 * listener's accept), not a fresh one: a peer whose hello came just as
 * the bound ran out is ended at once, not a whole timeout later (it
 * held its pending slot twice as long before) */
static void server__timeout_counts_from_accept(void **state)
{
	struct rmsgi_hello h, reply;
	struct t *t = server(state, key);
	int i;

	cli_hello(&h, true);
	assert_int_equal(rmsgi_conn_ev_request(t->c, &lst, &h, &reply), 0);
	t->c->ep.t_start = ev_time() - 10; /* accepted 10 s ago */
	rmsgi_conn_ev_established(t->c, NULL);
	assert_int_equal(t->c->state, RMSGI_CS_AUTH);
	ft.auto_down = true;
	for (i = 0; i < 3 && lst.nconns; i++)
		ev_run(t->loop, EVRUN_NOWAIT);
	assert_int_equal(lst.nconns, 0);
	t->c = NULL;
	assert_int_equal(t->ctx->st.auth_failures, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(client__right_key),
		CONN_T(client__wrong_server_proof),
		CONN_T(client__refused_proof),
		CONN_T(client__rejected_after_auth),
		CONN_T(client__flag_mismatch),
		CONN_T(client__refused_in_handshake),
		CONN_T(client__frame_before_proof),
		CONN_T(client__bad_auth_frames),
		CONN_T(client__timeout),
		CONN_T(server__right_key),
		CONN_T(server__wrong_proof),
		CONN_T(server__flag_mismatch),
		CONN_T(server__frame_before_proof),
		CONN_T(server__bad_auth_frames),
		CONN_T(server__reject_after_auth),
		CONN_T(server__timeout),
		CONN_T(server__timeout_counts_from_accept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
