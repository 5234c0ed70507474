// SPDX-License-Identifier: MIT
/*
 * auth.c - the pre-shared key's proofs (rmsg_cfg_set_psk): nonces from
 * getrandom(2), HMAC-SHA-256 and the timing-safe compare from nettle.
 * And the handshake they serve: the AUTH state of conn.c's state machine
 * (the table there), entered from rmsgi_conn_ev_request() and
 * rmsgi_conn_ev_established(); the frames are in proto.h.
 */
#include <errno.h>
#include <sys/random.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "conn_int.h"

#define LABEL_CLIENT "rmsg-psk-1 client"
#define LABEL_SERVER "rmsg-psk-1 server"

int rmsgi_auth_nonce(uint8_t nonce[RMSGI_NONCE_SIZE])
{
	size_t got = 0;

	while (got < RMSGI_NONCE_SIZE) {
		ssize_t n = getrandom(nonce + got, RMSGI_NONCE_SIZE - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

void rmsgi_auth_client_mac(const struct rmsgi_cfgv *cfg,
			   const uint8_t ns[RMSGI_NONCE_SIZE],
			   const uint8_t nc[RMSGI_NONCE_SIZE],
			   const struct rmsgi_hello *hello,
			   uint8_t mac[RMSGI_MAC_SIZE])
{
	struct hmac_sha256_ctx h;
	struct rmsgi_hello v = *hello;
	uint8_t buf[RMSGI_HELLO_MAX];
	size_t n;

	/* what the backends leave as the core built it (proto.h) */
	v.credits = 0;
	v.eager_size = 0;
	v.status = 0;
	v.nonce_len = 0;
	n = rmsgi_hello_encode(&v, buf);
	hmac_sha256_set_key(&h, cfg->psk_len, cfg->psk);
	hmac_sha256_update(&h, sizeof(LABEL_CLIENT) - 1,
			   (const uint8_t *)LABEL_CLIENT);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, ns);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, nc);
	hmac_sha256_update(&h, n, buf);
	hmac_sha256_digest(&h, RMSGI_MAC_SIZE, mac);
	explicit_bzero(&h, sizeof(h)); /* key-derived state */
}

void rmsgi_auth_server_mac(const struct rmsgi_cfgv *cfg,
			   const uint8_t nc[RMSGI_NONCE_SIZE],
			   const uint8_t ns[RMSGI_NONCE_SIZE], uint32_t status,
			   const uint8_t *pdata, size_t len,
			   uint8_t mac[RMSGI_MAC_SIZE])
{
	struct hmac_sha256_ctx h;
	uint8_t st[4];

	rmsgi_put32(st, status);
	hmac_sha256_set_key(&h, cfg->psk_len, cfg->psk);
	hmac_sha256_update(&h, sizeof(LABEL_SERVER) - 1,
			   (const uint8_t *)LABEL_SERVER);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, nc);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, ns);
	hmac_sha256_update(&h, sizeof(st), st);
	hmac_sha256_update(&h, len, pdata);
	hmac_sha256_digest(&h, RMSGI_MAC_SIZE, mac);
	explicit_bzero(&h, sizeof(h)); /* key-derived state */
}

bool rmsgi_auth_mac_eq(const uint8_t *a, const uint8_t *b)
{
	return memeql_sec(a, b, RMSGI_MAC_SIZE) != 0;
}

/* ------------------------------------------------------------------ */
/* the handshake (proto.h has the frames)                               */

/*
 * A connection's handshake state (rmsg_conn.auth): allocated when a
 * handshake with a key starts, so a connection without a key carries
 * none of it; kept until the connection is freed, because our AUTH
 * frame's payload (buf) may still be queued or posted after the proofs.
 */
struct rmsgi_auth {
	struct rmsg_conn *c;
	struct rmsgi_timer tmo;	      /* bounds the AUTH state */
	uint8_t ns[RMSGI_NONCE_SIZE]; /* the server's nonce */
	uint8_t nc[RMSGI_NONCE_SIZE]; /* the client's */
	struct rmsgi_hello hello;     /* server: the client's hello */
	uint8_t buf[RMSGI_AUTH_MAX];  /* our AUTH frame's payload */
};

static void auth_tmo_cb(struct ev_loop *loop, ev_timer *w, int revents);

static int auth_alloc(struct rmsg_conn *c)
{
	if (c->auth)
		return 0;
	c->auth = calloc(1, sizeof(*c->auth));
	if (!c->auth)
		return -ENOMEM;
	c->auth->c = c;
	rmsgi_timer_init(&c->auth->tmo, c->ctx->env.timers, auth_tmo_cb);
	return 0;
}

void rmsgi_auth_hello(const struct rmsg_conn *c, struct rmsgi_hello *h)
{
	h->flags |= RMSGI_HELLO_F_AUTH;
	h->nonce_len = RMSGI_NONCE_SIZE;
	memcpy(h->nonce, c->auth->ns, RMSGI_NONCE_SIZE);
}

void rmsgi_auth_nonces(const struct rmsg_conn *c, const uint8_t **ns,
		       const uint8_t **nc)
{
	*ns = c->auth ? c->auth->ns : NULL;
	*nc = c->auth ? c->auth->nc : NULL;
}

void rmsgi_auth_stop(struct rmsg_conn *c)
{
	if (c->auth)
		rmsgi_timer_stop(c->ctx->loop, &c->auth->tmo);
}

void rmsgi_auth_free(struct rmsg_conn *c)
{
	if (!c->auth)
		return;
	rmsgi_auth_stop(c);
	explicit_bzero(c->auth, sizeof(*c->auth));
	free(c->auth);
	c->auth = NULL;
}

/* queues our AUTH frame ahead of what the app queued: @len bytes of
 * c->auth->buf, @aux the status */
static int auth_send(struct rmsg_conn *c, uint32_t aux, size_t len)
{
	struct rmsgi_op *op = rmsgi_op_get(c->ctx);

	if (!op)
		return -ENOMEM;
	op->kind = RMSGI_OP_SEND;
	op->type = RMSGI_T_AUTH;
	op->aux = aux;
	op->len = len;
	op->iov[0].iov_base = c->auth->buf;
	op->iov[0].iov_len = len;
	op->iovcnt = len ? 1 : 0;
	/* eager: at most RMSGI_AUTH_MAX bytes, below any eager size */
	rmsgi_conn_op_proto(c, op, false);
	op->type = RMSGI_T_AUTH;
	c->tx.sendq_len++;
	op_state(c, op, RMSGI_OS_QUEUED);
	rmsgi_list_add_head(&c->tx.sendq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
	return 0;
}

/* a failure of the check: the connection ends with @err; @tell: the
 * server answers a wrong proof (AUTH with EACCES, no proof of its own)
 * and lingers so that it goes out */
static void auth_fail(struct rmsg_conn *c, int err, const char *why, bool tell)
{
	if (c->state >= RMSGI_CS_CLOSING)
		return;
	c->ctx->st.auth_failures++;
	if (c->is_server && !c->app_accepted)
		c->ctx->st.conns_refused++;
	rmsgi_warn(c->ctx, "conn %u: authentication failed: %s", c->id, why);
	rmsgi_conn_why(c, "authentication failed: %s", why);
	c->close_reason = err;
	rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
	rmsgi_conn_cancel_queued(c, err);
	rmsgi_conn_drop_rx(c);
	if (tell && c->tr_priv) {
		struct rmsgi_op *op = rmsgi_op_get(c->ctx);

		if (op) {
			op->kind = RMSGI_OP_CTRL;
			op->type = RMSGI_T_AUTH;
			op->aux = (uint32_t)-err;
			rmsgi_conn_op_proto(c, op, false);
			op->credits = credit_take(c);
			op_state(c, op, RMSGI_OS_POSTED);
			if (c->tops->post(c->tr_priv, op)) {
				op_state(c, op, RMSGI_OS_DONE);
				rmsgi_op_put(c->ctx, op);
				tell = false;
			} else {
				rmsgi_tr_kick(c->tops, c->tr_priv);
			}
		} else {
			tell = false;
		}
	}
	if (c->tr_priv)
		c->tops->disconnect(c->tr_priv, tell ? RMSGI_LINGER_MS : 0);
	else if (!c->tr)
		rmsgi_conn_ev_down(c);
}

static void auth_tmo_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsg_conn *c =
		RMSGI_CONTAINER_OF(w, struct rmsgi_auth, tmo.w)->c;

	rmsgi_conn_get(c);
	auth_fail(c, -ETIMEDOUT, "the peer's proof did not come in time",
		  false);
	rmsgi_ctx_flush(c->ctx);
	rmsgi_conn_put(c);
}

/* the transport is up on a connection that authenticates: the client
 * sends its proof, the server waits for it; cfg.timeout_ms bounds both */
void rmsgi_auth_begin(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	struct rmsgi_hello mine;
	ev_tstamp left;
	int ret;

	if (!c->cfg.psk_len) {
		/* a server's reply that asks for a key we do not have */
		auth_fail(c, -EACCES, "the server requires a pre-shared key",
			  false);
		return;
	}
	ret = auth_alloc(c);
	if (ret) {
		rmsgi_conn_abort(c, ret);
		return;
	}
	c->auth_wait = true;
	rmsgi_conn_set_state(c, RMSGI_CS_AUTH);
	/* what is left of the setup's bound (rmsg_cfg_set_timeout_ms), not
	 * a fresh one: a peer that sent its hello just in time would hold
	 * its pending slot twice as long */
	left = c->cfg.timeout_ms / 1000.0 - (ev_time() - c->ep.t_start);
	rmsgi_timer_start(c->ctx->loop, &c->auth->tmo, left > 0 ? left : 0.,
			  0.);
	if (c->is_server)
		return;
	if (!h || !(h->flags & RMSGI_HELLO_F_AUTH) ||
	    h->nonce_len != RMSGI_NONCE_SIZE) {
		auth_fail(c, -EACCES,
			  "the server did not ask for the pre-shared key",
			  false);
		return;
	}
	memcpy(c->auth->ns, h->nonce, RMSGI_NONCE_SIZE);
	ret = rmsgi_auth_nonce(c->auth->nc);
	if (ret) {
		rmsgi_conn_abort(c, ret);
		return;
	}
	rmsgi_conn_hello(c, &mine);
	memcpy(c->auth->buf, c->auth->nc, RMSGI_NONCE_SIZE);
	rmsgi_auth_client_mac(&c->cfg, c->auth->ns, c->auth->nc, &mine,
			      c->auth->buf + RMSGI_NONCE_SIZE);
	ret = auth_send(c, 0, RMSGI_NONCE_SIZE + RMSGI_MAC_SIZE);
	if (ret)
		rmsgi_conn_abort(c, ret);
}

/* server: the client's proof checked out; the app's accept decides */
static void auth_server_accept(struct rmsg_conn *c)
{
	struct rmsg_listener *l = c->lst;
	uint8_t *pd = c->auth->buf + RMSGI_MAC_SIZE;
	uint32_t status;
	const char *who = "the accept callback";
	int ret = 0;

	if (!l) {
		/* the listener closed meanwhile: nobody to accept */
		who = "the listener's close";
		ret = -ECONNABORTED;
	} else {
		c->ops = l->ops;
		if (l->accept) {
			c->in_accept = true;
			RMSGI_USER_CB(c->ctx,
				      ret = l->accept(l, c, c->ep.peer_pdata,
						      c->ep.peer_pdata_len,
						      l->arg));
			c->in_accept = false;
			if (ret > 0)
				ret = -ECONNREFUSED;
		}
	}
	/* the proof is complete: the peer may reach exports from now on,
	 * before it learns it is accepted (and may use them) */
	if (ret == 0 && c->tr_priv) {
		who = "the transport (remote access not granted)";
		ret = rmsgi_tr_rma_open(c->tops, c->tr_priv);
	}
	if (ret) {
		struct rmsgi_hello r;

		rmsgi_conn_why(c, "refused by %s (%s)", who,
			       rmsg_err_name(ret));
		c->ctx->st.conns_refused++;
		memset(&c->ops, 0, sizeof(c->ops));
		rmsgi_conn_refusal(c, ret, &r);
		ret = r.status;
	}
	status = (uint32_t)-ret;
	memcpy(pd, c->ep.my_pdata, c->ep.my_pdata_len);
	rmsgi_auth_server_mac(&c->cfg, c->auth->nc, c->auth->ns, status, pd,
			      c->ep.my_pdata_len, c->auth->buf);
	if (auth_send(c, status, RMSGI_MAC_SIZE + c->ep.my_pdata_len)) {
		rmsgi_conn_abort(c, -ENOMEM);
		return;
	}
	if (ret == 0) {
		c->app_accepted = true;
		c->ctx->st.conns_accepted++;
		rmsgi_conn_event(c, "accepted", NULL);
		rmsgi_conn_up(c);
		return;
	}
	/* refused: the answer goes, then the connection; no callbacks */
	c->auth_wait = false;
	rmsgi_conn_post_queued(c);
	c->close_reason = ret;
	rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
	rmsgi_conn_cancel_sendq(c, ret);
	if (c->tr_priv)
		c->tops->disconnect(c->tr_priv, RMSGI_LINGER_MS);
}

int rmsgi_conn_auth_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		       struct rmsg_msg *m)
{
	uint8_t buf[RMSGI_AUTH_MAX], mac[RMSGI_MAC_SIZE];
	size_t len = m->len;
	bool ok;
	int ret;

	rmsgi_live_rx(&c->live, ev_now(c->ctx->loop));
	if (c->state >= RMSGI_CS_CLOSING) {
		/* an unauthenticated peer's last frames: dropped unread; one
		 * whose payload the transport still reads stays queued until
		 * rmsgi_conn_rx_ready() drops it */
		if (!m->ready) {
			m->type = h->type;
			rmsgi_conn_rx_enqueue(c, m);
			return 0;
		}
		rmsgi_msg_free(m);
		return 0;
	}
	ok = h->type == RMSGI_T_AUTH && c->state == RMSGI_CS_AUTH && m->ready &&
	     len <= sizeof(buf) && rmsgi_credit_arrived(&c->cr) == 0;
	if (ok)
		memcpy(buf, m->data, len);
	rmsgi_msg_free(m);
	if (!ok) {
		auth_fail(c, -EACCES,
			  c->state == RMSGI_CS_AUTH
				  ? "a frame other than AUTH before the "
				    "peer's proof"
				  : "an AUTH frame outside the handshake",
			  false);
		return -EACCES;
	}
	if (c->is_server) {
		if (h->aux || len != RMSGI_NONCE_SIZE + RMSGI_MAC_SIZE) {
			auth_fail(c, -EACCES, "a malformed proof", true);
			return -EACCES;
		}
		memcpy(c->auth->nc, buf, RMSGI_NONCE_SIZE);
		rmsgi_auth_client_mac(&c->cfg, c->auth->ns, c->auth->nc,
				      &c->auth->hello, mac);
		if (!rmsgi_auth_mac_eq(mac, buf + RMSGI_NONCE_SIZE)) {
			auth_fail(c, -EACCES,
				  "the peer's proof does not match the "
				  "pre-shared key",
				  true);
			return -EACCES;
		}
	} else {
		if (len < RMSGI_MAC_SIZE) {
			auth_fail(c, -EACCES,
				  "the peer refused our proof: a different "
				  "pre-shared key?",
				  false);
			return -EACCES;
		}
		rmsgi_auth_server_mac(&c->cfg, c->auth->nc, c->auth->ns, h->aux,
				      buf + RMSGI_MAC_SIZE,
				      len - RMSGI_MAC_SIZE, mac);
		if (!rmsgi_auth_mac_eq(mac, buf)) {
			auth_fail(c, -EACCES,
				  "the server's proof does not match the "
				  "pre-shared key",
				  false);
			return -EACCES;
		}
		c->ep.peer_pdata_len = (uint8_t)(len - RMSGI_MAC_SIZE);
		memcpy(c->ep.peer_pdata, buf + RMSGI_MAC_SIZE,
		       c->ep.peer_pdata_len);
	}
	/* proven: the credits it returned count now */
	if (h->credits) {
		ret = rmsgi_credit_returned(&c->cr, h->credits,
					    c->peer_credits);
		if (ret) {
			rmsgi_conn_abort(c, ret);
			return ret;
		}
	}
	if (c->is_server) {
		auth_server_accept(c);
	} else if (h->aux) {
		/* the app refused us after the proofs: as a reject
		 * (-ECONNREFUSED whatever the app returned, as without a
		 * key: rmsg_connect.3) */
		c->auth_wait = false;
		rmsgi_conn_why(c, "rejected by the peer's accept callback "
				  "(after authentication)");
		c->close_reason = -ECONNREFUSED;
		rmsgi_conn_set_state(c, RMSGI_CS_CLOSING);
		rmsgi_conn_cancel_queued(c, c->close_reason);
		if (c->tr_priv)
			c->tops->disconnect(c->tr_priv, 0);
	} else {
		/* the server's proof is complete: exports open to it */
		ret = c->tr_priv ? rmsgi_tr_rma_open(c->tops, c->tr_priv) : 0;
		if (ret) {
			rmsgi_conn_abort(c, ret);
			return ret;
		}
		rmsgi_conn_up(c);
	}
	return 0;
}

/*
 * A request to a listener with a key, or with the client's flag: a key on
 * one side only is refused before the app hears of it, with the flag in
 * the refusal so that the client reads -EACCES; with keys on both, the
 * reply carries our nonce and the app's accept waits for the proof.
 */
int rmsgi_auth_request(struct rmsg_conn *c, const struct rmsgi_hello *h,
		       struct rmsgi_hello *reply)
{
	int ret;

	if (!c->cfg.psk_len || !(h->flags & RMSGI_HELLO_F_AUTH)) {
		const char *why =
			c->cfg.psk_len ? "the peer has no pre-shared key and "
					 "this listener requires one"
				       : "the peer requires a pre-shared key "
					 "and this listener has none";

		c->ctx->st.auth_failures++;
		rmsgi_warn(c->ctx, "conn %u: refused: %s", c->id, why);
		rmsgi_conn_why(c, "authentication failed: %s", why);
		c->ctx->st.conns_refused++;
		ret = rmsgi_conn_refuse(c, -EACCES, reply);
		reply->flags |= RMSGI_HELLO_F_AUTH;
		return ret;
	}
	ret = auth_alloc(c);
	if (ret == 0)
		ret = rmsgi_auth_nonce(c->auth->ns);
	if (ret)
		return rmsgi_conn_refuse(c, ret, reply);
	c->auth->hello = *h;
	c->auth_wait = true;
	rmsgi_conn_set_state(c, RMSGI_CS_ACCEPTING);
	/* with the flag and our nonce (a backend may build it again) */
	rmsgi_conn_hello(c, reply);
	return 0;
}
