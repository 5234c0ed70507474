// SPDX-License-Identifier: MIT
/*
 * hello.c - the handshake's data for the connection state machine
 * (conn.c): the hello this side sends, what the peer's says (its private
 * data, and the flow control it sets up: credits, byte window, packing),
 * the hello of a refusal, and the endpoint's addresses.
 */
#include "conn_int.h"

void rmsgi_conn_hello(const struct rmsg_conn *c, struct rmsgi_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->credits = (uint16_t)rmsgi_credits_start(&c->cfg);
	h->eager_size = (uint32_t)c->cfg.eager_size;
	h->conn_id = c->id;
	/* we unpack PACK frames (rx.c) and take a grant that grows */
	h->flags = RMSGI_HELLO_F_PACK | RMSGI_HELLO_F_GROW;
	/* and, where receive memory follows bytes (TCP), grant a byte
	 * window and honour the peer's (credit.h) */
	if (c->tr && (c->tr->caps & RMSGI_TR_CAP_WINDOW))
		h->flags |= rmsgi_hello_win_flags(rmsgi_cfg_window(&c->cfg));
	if (c->is_server) {
		h->pdata_len = c->ep.my_pdata_len;
		memcpy(h->pdata, c->ep.my_pdata, c->ep.my_pdata_len);
		/* accepting a key holder (auth_request): our nonce goes */
		if (c->auth_wait)
			rmsgi_auth_hello(c, h);
	} else {
		h->pdata_len = c->cfg.pdata_len;
		memcpy(h->pdata, c->cfg.pdata, c->cfg.pdata_len);
		if (c->cfg.psk_len)
			h->flags |= RMSGI_HELLO_F_AUTH;
	}
	/* a resumable session's part (it may drop what a resume does not
	 * send again) */
	rmsgi_session_hello(c, h);
}

void rmsgi_conn_flow(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	bool grows = (h->flags & RMSGI_HELLO_F_GROW) != 0;

	c->peer_credits = grows ? RMSGI_CREDITS_MAX : h->credits;
	c->tx.peer_eager = h->eager_size;
	c->tx.peer_pack = (h->flags & RMSGI_HELLO_F_PACK) != 0;
	rmsgi_credit_init(&c->cr, h->credits, c->cr.grant);
	/* a byte window both ways, if both grant one (a peer before them
	 * sends none, and is given none) */
	if (c->tr && (c->tr->caps & RMSGI_TR_CAP_WINDOW))
		rmsgi_credit_window(&c->cr, rmsgi_hello_win(h->flags),
				    rmsgi_hello_win(rmsgi_hello_win_flags(
					    rmsgi_cfg_window(&c->cfg))));
	/* our grant to it grows with use only if it takes that */
	if (grows)
		rmsgi_credit_limit(&c->cr, c->cfg.credits);
}

void rmsgi_conn_set_peer(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	c->ep.peer_pdata_len = h->pdata_len;
	memcpy(c->ep.peer_pdata, h->pdata, h->pdata_len);
	rmsgi_conn_flow(c, h);
}

void rmsgi_conn_refusal(const struct rmsg_conn *c, int err,
			struct rmsgi_hello *reply)
{
	rmsgi_conn_hello(c, reply);
	/* the app's odd values (not an errno) read as a plain refusal */
	reply->status = (int16_t)(err < 0 && err > -4096 ? err : -ECONNREFUSED);
}

/* asks the backend for the endpoint's addresses and keeps them, for the
 * app to read until the connection is freed (after the backend let its
 * endpoint go); a failed query keeps what was known. A client asks only
 * once established, so after an auto:// fallback they are the second
 * backend's (the first never got that far); after a resume, the new
 * transport's. */
void rmsgi_conn_addrs(struct rmsg_conn *c)
{
	struct sockaddr_storage local, peer;

	if (!c->tr_priv || c->tops->addrs(c->tr_priv, &local, &peer))
		return;
	c->ep.local_addr = local;
	c->ep.peer_addr = peer;
	c->ep.addrs_known = true;
}

int rmsgi_conn_refuse(struct rmsg_conn *c, int err, struct rmsgi_hello *reply)
{
	rmsgi_conn_refusal(c, err, reply);
	/* the reason the log gives if the connection goes without an end
	 * of the backend's (rmsgi_conn_discard) */
	c->close_reason = reply->status;
	return reply->status;
}

/* the public side of the above */

int rmsg_conn_set_private_data(struct rmsg_conn *c, const void *data,
			       size_t len)
{
	if (!c || len > RMSG_PRIVATE_DATA_MAX || (len && !data))
		return -EINVAL;
	if (!c->in_accept)
		return -EALREADY;
	if (len)
		memcpy(c->ep.my_pdata, data, len);
	c->ep.my_pdata_len = (uint8_t)len;
	return 0;
}

/* both sides' addresses are known from the accept callback (server) or
 * on_established on; a client that never got there has none */
static int conn_addr(const struct rmsg_conn *c,
		     const struct sockaddr_storage *a,
		     struct sockaddr_storage *ss)
{
	if (!c || !ss)
		return -EINVAL;
	if (!c->ep.addrs_known)
		return -ENOTCONN;
	*ss = *a;
	return 0;
}

int rmsg_conn_peer_addr(const struct rmsg_conn *c, struct sockaddr_storage *ss)
{
	return conn_addr(c, c ? &c->ep.peer_addr : NULL, ss);
}

int rmsg_conn_local_addr(const struct rmsg_conn *c, struct sockaddr_storage *ss)
{
	return conn_addr(c, c ? &c->ep.local_addr : NULL, ss);
}

int rmsg_conn_peer_data(const struct rmsg_conn *c, const void **data_p,
			size_t *len_p)
{
	if (!c || !data_p || !len_p)
		return -EINVAL;
	*data_p = c->ep.peer_pdata;
	*len_p = c->ep.peer_pdata_len;
	return 0;
}
