// SPDX-License-Identifier: MIT
/*
 * resume.c - the handshake of resumable connections (session.c): a
 * session's id and key, the session part of the hellos, a resume request
 * proved and matched to its suspended connection (whose transport it
 * becomes), and the server's answer checked by the client.
 *
 * Handshake (the hello's session part, proto.h):
 *   client, first hello:   RMSGI_HELLO_F_RESUME, no part
 *   server, its reply:     sid (u64) || secret (32 bytes)      (a session)
 *   client, resume hello:  sid || attempt (u32) || rx_c (u64) || M_c
 *   server, resume reply:  rx_s (u64) || M_s
 * M_c = HMAC-SHA-256(K, "rmsg-resume-1 client" || sid || attempt ||
 * rx_c), M_s = HMAC-SHA-256(K, "rmsg-resume-1 server" || sid || attempt
 * || rx_s || rx_c), both cut to 16 bytes; rx is the sender's message
 * count; K is the secret, or with a pre-shared key HMAC-SHA-256(psk,
 * "rmsg-resume-1 key" || secret), so that one who read the secret off
 * the wire still cannot resume a keyed session. The attempt grows with
 * each request; the server takes only one above the last it accepted.
 * Refusals (a REJECT's status): -ESTALE no such session here (the server
 * restarted, or the session ended), -EACCES a wrong proof or a replayed
 * attempt, -EAGAIN the old transport is still going down (try again).
 *
 * A probe (auto://'s way back to RDMA, start.c) is a resume request with
 * one more byte, S_PROBE, and M_c made with the label "rmsg-resume-1
 * probe": the server checks it as a request (the attempt counts), then
 * refuses it with -EALREADY, which says the path works and the session
 * is there, and leaves the session alone; that refusal's session part is
 * M_a = HMAC-SHA-256(K, "rmsg-resume-1 probe answer" || sid || attempt
 * || 0), cut to 16 bytes, which the client checks before it moves. A
 * session that is not up (ending, the peer closing) is refused -ESTALE,
 * one with one-sided ops of ours in flight -EBUSY (a move would fail
 * them). A server before probes finds the proof wrong (-EACCES). The
 * probe's hello is 16 + 1 + 37 bytes: within RDMA's 56.
 *
 */
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "conn_int.h"

#define S_NEW_LEN (8 + RMSGI_SESS_KEY)
#define S_REQ_LEN (8 + 4 + 8 + S_MAC)
#define S_ACK_LEN (8 + S_MAC)
#define S_MAC 16
#define S_PROBE 1 /* the request's last byte: a probe */
#define S_PROBE_LEN (S_REQ_LEN + 1)

/* whose proof: the client's request, the server's answer, a probe, the
 * server's answer to a probe */
enum {
	S_CLIENT,
	S_SERVER,
	S_PROBE_MAC,
	S_PROBE_ANS
};

static void sess_mac(const struct rmsgi_session *ss, int who, uint32_t attempt,
		     uint64_t rx_s, uint64_t rx_c, uint8_t out[S_MAC])
{
	static const char *const label[] = {
		[S_CLIENT] = "rmsg-resume-1 client",
		[S_SERVER] = "rmsg-resume-1 server",
		[S_PROBE_MAC] = "rmsg-resume-1 probe",
		[S_PROBE_ANS] = "rmsg-resume-1 probe answer",
	};
	bool server = who == S_SERVER;
	struct hmac_sha256_ctx h;
	uint8_t buf[8 + 4 + 8 + 8], mac[RMSGI_MAC_SIZE];
	size_t n = 0;

	rmsgi_put64(buf, ss->sid);
	rmsgi_put32(buf + 8, attempt);
	n = 12;
	if (server) {
		rmsgi_put64(buf + n, rx_s);
		n += 8;
	}
	rmsgi_put64(buf + n, rx_c);
	n += 8;
	hmac_sha256_set_key(&h, sizeof(ss->key), ss->key);
	hmac_sha256_update(&h, strlen(label[who]), (const uint8_t *)label[who]);
	hmac_sha256_update(&h, n, buf);
	hmac_sha256_digest(&h, sizeof(mac), mac);
	memcpy(out, mac, S_MAC);
	explicit_bzero(&h, sizeof(h));
	explicit_bzero(mac, sizeof(mac));
}

/* K from the secret (and the pre-shared key, if any) */
static void sess_key(struct rmsgi_session *ss, const struct rmsgi_cfgv *cfg,
		     const uint8_t secret[RMSGI_SESS_KEY])
{
	static const char lk[] = "rmsg-resume-1 key";
	struct hmac_sha256_ctx h;

	if (!cfg->psk_len) {
		memcpy(ss->key, secret, RMSGI_SESS_KEY);
		return;
	}
	hmac_sha256_set_key(&h, cfg->psk_len, cfg->psk);
	hmac_sha256_update(&h, sizeof(lk) - 1, (const uint8_t *)lk);
	hmac_sha256_update(&h, RMSGI_SESS_KEY, secret);
	hmac_sha256_digest(&h, RMSGI_SESS_KEY, ss->key);
	explicit_bzero(&h, sizeof(h));
}

static bool can_resume(const struct rmsg_conn *c)
{
	return c->cfg.resume_ms && c->tops && c->tops->rebind;
}

/* ------------------------------------------------------------------ */
/* the handshake                                                        */

/* flow control starts again on the new transport, from the hellos: the
 * grants each side gives the other, byte windows, packing */
static void flow_reset(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	rmsgi_credit_grant(&c->cr, rmsgi_credits_start(&c->cfg));
	rmsgi_conn_flow(c, h);
}

/* a probe's request: as a resume request of @of's session, marked */
static void probe_hello(const struct rmsg_conn *of, uint32_t attempt,
			struct rmsgi_hello *h)
{
	uint8_t *p = h->sess;

	h->flags |= RMSGI_HELLO_F_RESUME;
	h->flags &= (uint8_t)~RMSGI_HELLO_F_AUTH;
	h->pdata_len = 0;
	rmsgi_put64(p, of->ss->sid);
	rmsgi_put32(p + 8, attempt);
	rmsgi_put64(p + 12, rmsgi_session_rx(of));
	sess_mac(of->ss, S_PROBE_MAC, attempt, 0, rmsgi_session_rx(of), p + 20);
	p[S_REQ_LEN] = S_PROBE;
	h->sess_len = S_PROBE_LEN;
}

void rmsgi_session_hello(const struct rmsg_conn *c, struct rmsgi_hello *h)
{
	const struct rmsgi_session *ss = c->ss;
	const struct rmsg_conn *of;
	uint8_t *p = h->sess;
	uint32_t attempt;

	if (!can_resume(c) || (c->is_server && !ss))
		return;
	if ((of = rmsgi_probe_of(c, &attempt))) {
		probe_hello(of, attempt, h);
		return;
	}
	h->flags |= RMSGI_HELLO_F_RESUME;
	if (c->is_server && c->state == RMSGI_CS_SUSPENDED) {
		/* the answer to a resume request: our count, our proof */
		h->flags &= (uint8_t)~RMSGI_HELLO_F_AUTH;
		h->pdata_len = 0;
		h->nonce_len = 0;
		rmsgi_put64(p, rmsgi_session_rx(c));
		sess_mac(ss, S_SERVER, ss->attempt, rmsgi_session_rx(c),
			 ss->req_rx, p + 8);
		h->sess_len = S_ACK_LEN;
	} else if (c->is_server) {
		rmsgi_put64(p, ss->sid);
		memcpy(p + 8, ss->secret, RMSGI_SESS_KEY);
		h->sess_len = S_NEW_LEN;
	} else if (ss && ss->on && c->state == RMSGI_CS_SUSPENDED) {
		/* a resume request: no private data, no key flag (the
		 * proof is the key's) */
		h->flags &= (uint8_t)~RMSGI_HELLO_F_AUTH;
		h->pdata_len = 0;
		rmsgi_put64(p, ss->sid);
		rmsgi_put32(p + 8, ss->attempt);
		rmsgi_put64(p + 12, rmsgi_session_rx(c));
		sess_mac(ss, S_CLIENT, ss->attempt, 0, rmsgi_session_rx(c),
			 p + 20);
		h->sess_len = S_REQ_LEN;
	}
}

void rmsgi_session_offer(struct rmsg_conn *c, const struct rmsg_listener *l)
{
	uint8_t rnd[RMSGI_NONCE_SIZE];
	struct rmsgi_session *ss;

	/* a group's peers land on any member: one could not find its
	 * session again (rmsg_listen_group(3)) */
	if (!can_resume(c) || l->group || c->ss)
		return;
	ss = rmsgi_session_new(c);
	if (!ss)
		return; /* no memory: the connection is not resumable */
	if (rmsgi_auth_nonce(rnd) || rmsgi_auth_nonce(ss->secret)) {
		rmsgi_session_free(c);
		return;
	}
	memcpy(&ss->sid, rnd, sizeof(ss->sid));
	sess_key(ss, &c->cfg, ss->secret);
}

void rmsgi_session_established(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	struct rmsgi_session *ss = c->ss;

	/* the server took it: its id and secret (on once established) */
	if (!h || !(h->flags & RMSGI_HELLO_F_RESUME) ||
	    h->sess_len < S_NEW_LEN || !can_resume(c) || ss)
		return;
	ss = rmsgi_session_new(c);
	if (!ss)
		return;
	ss->sid = rmsgi_get64(h->sess);
	sess_key(ss, &c->cfg, h->sess + 8);
}

/* a request refused: counted, logged at most once a second per
 * context (a peer that guesses may try often) */
static int refuse(struct rmsg_conn *c, int err, struct rmsgi_hello *reply,
		  const char *what)
{
	struct rmsg_ctx *ctx = c->ctx;
	ev_tstamp now = ev_now(ctx->loop);

	ctx->st.resume_refused++;
	if (now - ctx->resume_warned >= 1.0) {
		rmsgi_warn(ctx,
			   "conn %u: a resume request refused: %s (%llu "
			   "refused so far)",
			   c->id, what,
			   (unsigned long long)ctx->st.resume_refused);
		ctx->resume_warned = now;
	}
	rmsgi_conn_why(c, "a resume request refused: %s", what);
	return rmsgi_conn_refuse(c, err, reply);
}

/* a proved probe: the path works and the session is here (nothing else
 * changes), unless it is not up or a move would fail ops in flight */
static int probe_answer(struct rmsg_conn *c, const struct rmsg_conn *old,
			struct rmsgi_hello *reply)
{
	const struct rmsgi_session *ss = old->ss;
	int st = -EALREADY;

	if (old->state != RMSGI_CS_ESTABLISHED || old->peer_bye)
		st = -ESTALE;
	else if (!rmsgi_list_empty(&old->tx.rndvq))
		st = -EBUSY;
	rmsgi_dbg(c->ctx, "conn %u: a probe of conn %u's path over %s: %s",
		  c->id, old->id, c->tr->name, rmsg_err_name(st));
	rmsgi_conn_why(c, "a probe of conn %u's path: answered %s", old->id,
		       rmsg_err_name(st));
	rmsgi_conn_refuse(c, st, reply);
	if (st == -EALREADY) {
		reply->flags |= RMSGI_HELLO_F_RESUME;
		sess_mac(ss, S_PROBE_ANS, ss->attempt, 0, 0, reply->sess);
		reply->sess_len = S_MAC;
	}
	return st;
}

bool rmsgi_session_probe_answer(const struct rmsg_conn *c, uint32_t attempt,
				const struct rmsgi_hello *h)
{
	uint8_t mac[S_MAC];

	if (!h || !(h->flags & RMSGI_HELLO_F_RESUME) || h->sess_len < S_MAC)
		return false;
	sess_mac(c->ss, S_PROBE_ANS, attempt, 0, 0, mac);
	return memeql_sec(mac, h->sess, S_MAC);
}

int rmsgi_session_request(struct rmsg_conn *c, const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply)
{
	const uint8_t *p = h->sess;
	struct rmsgi_session *ss;
	struct rmsg_conn *old;
	uint8_t mac[S_MAC];
	uint64_t sid, rx;
	uint32_t attempt;
	bool probe;

	if (h->sess_len < S_REQ_LEN || !c->tops->rebind)
		return refuse(c, -EPROTO, reply, "malformed");
	sid = rmsgi_get64(p);
	attempt = rmsgi_get32(p + 8);
	rx = rmsgi_get64(p + 12);
	probe = h->sess_len >= S_PROBE_LEN && p[S_REQ_LEN] == S_PROBE;
	ss = rmsgi_session_find(c->ctx, sid);
	if (!ss)
		return refuse(c, -ESTALE, reply, "no such session");
	sess_mac(ss, probe ? S_PROBE_MAC : S_CLIENT, attempt, 0, rx, mac);
	if (!memeql_sec(mac, p + 20, S_MAC))
		return refuse(c, -EACCES, reply, "a wrong proof");
	/* attempts only grow (a client counts every dial, also those that
	 * never reached us: no bound on the leap) */
	if (attempt <= ss->attempt)
		return refuse(c, -EACCES, reply, "a replayed attempt");
	old = ss->c;
	if (probe) {
		ss->attempt = attempt;
		return probe_answer(c, old, reply);
	}
	if (rx < ss->peer_rx || rx > ss->tx_seq)
		return refuse(c, -EPROTO, reply,
			      "a count of messages it cannot have");
	ss->attempt = attempt;
	if (old->state == RMSGI_CS_ESTABLISHED) {
		/* the client saw the break first: our side of it goes */
		rmsgi_session_suspend(old, -ECONNRESET);
		if (old->tr_priv)
			old->tops->disconnect(old->tr_priv, 0);
	}
	if (old->state != RMSGI_CS_SUSPENDED)
		return refuse(c, -ESTALE, reply, "the session is ending");
	if (old->tr_priv) {
		rmsgi_conn_why(c, "the session's old transport is still "
				  "going down");
		return rmsgi_conn_refuse(c, -EAGAIN, reply);
	}
	/* the new transport is the session's from now on */
	ss->req_rx = rx;
	rmsgi_conn_set_tr(old, c->tr);
	old->tr_priv = c->tr_priv;
	old->tr_down = false;
	old->tops->rebind(old->tr_priv, old, &old->ti);
	c->tr_priv = NULL;
	flow_reset(old, h);
	rmsgi_conn_hello(old, reply);
	/* @c goes quietly: its transport lives on in @old */
	rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
	rmsgi_conn_discard(c);
	return 0;
}

int rmsgi_session_answer(struct rmsg_conn *c, const struct rmsgi_hello *h,
			 uint64_t *rx_p)
{
	struct rmsgi_session *ss = c->ss;
	uint8_t mac[S_MAC];

	if (!h || !(h->flags & RMSGI_HELLO_F_RESUME) ||
	    h->sess_len < S_ACK_LEN) {
		rmsgi_conn_why(c, "the peer accepted our resume request "
				  "without resuming");
		return -EPROTO;
	}
	*rx_p = rmsgi_get64(h->sess);
	sess_mac(ss, S_SERVER, ss->attempt, *rx_p, rmsgi_session_rx(c), mac);
	if (!memeql_sec(mac, h->sess + 8, S_MAC)) {
		rmsgi_conn_why(c, "the peer's resume answer does not prove "
				  "the session");
		return -EACCES;
	}
	if (h->credits < 4 || h->eager_size < 64) {
		rmsgi_conn_why(c,
			       "the peer's resume answer offers %u credits and "
			       "an eager size of %u (at least 4 and 64)",
			       h->credits, h->eager_size);
		return -EPROTO;
	}
	flow_reset(c, h);
	return 0;
}
