// SPDX-License-Identifier: MIT
/*
 * start.c - starting a connection's transport: the backends that serve
 * its URI's scheme (the registry's order), its host name resolved first
 * when it is one (resolve.c), and auto://'s fallback from RDMA to TCP,
 * whose state (struct rmsgi_fallback) only an auto:// connection has.
 */
#include <stdlib.h>
#include <string.h>

#include "conn_int.h"

/* auto:// only (rmsg_conn.fb): RDMA first, TCP if it cannot connect */
static const char *rmsgi_fallback_text(int reason);

struct rmsgi_fallback {
	bool armed;   /* RDMA is being tried: a failure falls back */
	bool pending; /* it failed: TCP starts once its backend is down */
	int reason;   /* why RDMA was not used, or 0 */
	struct rmsgi_addrs to; /* the addresses TCP falls back to */
};

static int conn_start_tr(struct rmsg_conn *c, const struct rmsgi_tr *tr,
			 const struct rmsgi_uri *u,
			 const struct rmsgi_addrs *to)
{
	int ret;

	rmsgi_conn_set_tr(c, tr);
	c->tr_priv = NULL;
	ret = tr->conn->connect(c, &c->ti, u, to);
	if (ret)
		c->tr_priv = NULL; /* nothing started */
	return ret;
}

/* the backends for @u's scheme, with the addresses @to */
static int conn_start_addrs(struct rmsg_conn *c, const struct rmsgi_uri *u,
			    const struct rmsgi_addrs *to)
{
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	int n = rmsgi_tr_for_scheme(u->row, v);
	int ret, i;

	/* a suspended session dials the backends that resume (session.c),
	 * in the scheme's order: over auto:// RDMA, else TCP */
	if (c->state == RMSGI_CS_SUSPENDED) {
		int k = 0;

		for (i = 0; i < n; i++)
			if (v[i]->conn->rebind)
				v[k++] = v[i];
		n = k;
	}
	if (n < 1)
		return -EINVAL;
	if (n > 1) {
		/* auto://: the first that connects; a failure after the
		 * start falls back in rmsgi_conn_ev_failed/ev_down, to the
		 * same addresses (the name is resolved once) */
		if (!c->fb) {
			c->fb = calloc(1, sizeof(*c->fb));
			if (!c->fb)
				return -ENOMEM;
		}
		c->fb->to = *to;
		c->fb->armed = true;
	}
	ret = conn_start_tr(c, v[0], u, to);
	if (ret && n > 1) {
		/* no RDMA here (no device, or no route through one) */
		c->fb->armed = false;
		c->fb->reason = ret;
		rmsgi_info(c->ctx, "auto://%s:%u: %s; using %s", u->host,
			   u->port, rmsgi_fallback_text(ret), v[1]->name);
		ret = conn_start_tr(c, v[1], u, to);
		if (ret == 0)
			c->st.fallbacks++;
	}
	return ret;
}

int rmsgi_conn_start(struct rmsg_conn *c, const struct rmsgi_uri *u)
{
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	struct rmsgi_addrs to;
	int ret;

	if (rmsgi_tr_for_scheme(u->row, v) < 1)
		return -EINVAL;
	if (u != &c->uri)
		c->uri = *u;
	/* a numeric host now; a name by a resolver thread, and the
	 * connection goes on in rmsgi_conn_resolved() */
	ret = rmsgi_resolve(c, u, &to);
	if (ret == -EINPROGRESS)
		return 0;
	if (ret)
		return ret;
	return conn_start_addrs(c, &c->uri, &to);
}

void rmsgi_conn_resolved(struct rmsg_conn *c, int err,
			 const struct rmsgi_addrs *to)
{
	if (c->state >= RMSGI_CS_CLOSING)
		return; /* closed meanwhile (it cancelled the resolution) */
	if (!err)
		err = conn_start_addrs(c, &c->uri, to);
	if (!err)
		return;
	/* not resolved, timed out, or no backend could start: the app
	 * learns it from on_close, as of any failure to connect */
	c->tr = NULL;
	c->tops = NULL;
	c->tr_priv = NULL;
	if (c->fb)
		c->fb->armed = false;
	rmsgi_conn_ev_failed(c, err, NULL);
	rmsgi_conn_ev_down(c);
}

bool rmsgi_fallback_failed(struct rmsg_conn *c, int reason,
			   const struct rmsgi_hello *h)
{
	if (!c->fb || !c->fb->armed)
		return false;
	/* a peer that answered: an app's reject is final, a refused resume
	 * the session's to judge (the backend's own end of this dial,
	 * reported next, falls back no more) */
	if (h) {
		c->fb->armed = false;
		return false;
	}
	if (c->state != RMSGI_CS_CONNECTING && c->state != RMSGI_CS_SUSPENDED)
		return false;
	c->fb->pending = true;
	c->fb->reason = reason ? reason : -ECONNRESET;
	return true;
}

void rmsgi_fallback_done(struct rmsg_conn *c)
{
	if (c->fb)
		c->fb->armed = false;
}

bool rmsgi_fallback_down(struct rmsg_conn *c)
{
	/* the scheme's next backend, from the registry: for auto:// the
	 * one after RDMA */
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	int ret;

	if (!c->fb || !c->fb->pending)
		return false;
	rmsgi_tr_for_scheme(c->uri.row, v);
	c->fb->pending = false;
	c->fb->armed = false;
	rmsgi_info(c->ctx, "conn %u: %s failed (%s); using %s", c->id,
		   v[0]->name, rmsgi_fallback_text(c->fb->reason), v[1]->name);
	c->tr_priv = NULL;
	/* a resume request is a new attempt (the server takes each once) */
	if (c->state == RMSGI_CS_SUSPENDED)
		rmsgi_session_attempt(c);
	ret = conn_start_tr(c, v[1], &c->uri, &c->fb->to);
	if (ret == 0) {
		c->st.fallbacks++;
		return true;
	}
	rmsgi_conn_why(c, "%s failed (%s), and %s could not start: %s",
		       v[0]->name, rmsgi_fallback_text(c->fb->reason),
		       v[1]->name, rmsg_strerror(ret));
	c->close_reason = ret;
	return false;
}

static const char *rmsgi_fallback_text(int reason)
{
	switch (reason) {
	case -ENODEV:
	case -ENOENT:
	case -ENXIO:
		return "no RDMA device";
	case -EADDRNOTAVAIL:
		return "no RDMA device serves this address";
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		return "route to host not resolved over RDMA";
	case -ECONNREFUSED:
		return "peer has no RDMA listener";
	case -ETIMEDOUT:
		return "RDMA connection setup timed out";
	default:
		return "RDMA connection setup failed";
	}
}

const char *rmsgi_fallback_why(const struct rmsg_conn *c)
{
	if (!c->fb)
		return "the URI's scheme";
	if (c->fb->reason)
		return rmsgi_fallback_text(c->fb->reason);
	return "auto:// found RDMA";
}

const char *rmsg_conn_fallback_reason(const struct rmsg_conn *c)
{
	if (!c || !c->fb || !c->fb->reason || c->fb->armed)
		return NULL;
	return rmsgi_fallback_text(c->fb->reason);
}
