// SPDX-License-Identifier: MIT
/*
 * start.c - starting a connection's transport: the backends that serve
 * its URI's scheme (the registry's order), its host name resolved first
 * when it is one (resolve.c), and auto://'s fallback from RDMA to TCP,
 * whose state (struct rmsgi_fallback) only an auto:// connection has.
 *
 * And the way back: a resumable auto:// connection that runs over TCP
 * because RDMA failed probes RDMA in the background (1 s after it came
 * up over TCP, then at intervals that double up to FB_PROBE_MAX_MS). A
 * probe is a hidden connection of its own over RDMA to the same
 * addresses whose hello is a resume request marked as a probe (resume.c):
 * the server proves it knows the session and refuses it with -EALREADY,
 * touching nothing. Only then does the connection suspend itself on
 * purpose and resume, RDMA first (session.c: nothing lost, nothing
 * twice); traffic never waits for an RDMA path that does not work.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "conn_int.h"

/* auto:// only (rmsg_conn.fb): RDMA first, TCP if it cannot connect */
static const char *rmsgi_fallback_text(int reason);

/* probes of RDMA after a fallback: the first this long after the
 * connection came up over TCP, then twice as long after each that failed,
 * up to the second (a probe costs the peer one refused connect) */
#define FB_PROBE_MIN_MS 1000u
#define FB_PROBE_MAX_MS 30000u
/* a switch back waits for one-sided ops in flight to be answered (a
 * suspend would fail them): so many tries, FB_SWITCH_WAIT_MS apart */
#define FB_SWITCH_WAIT_MS 10u
#define FB_SWITCH_TRIES 100u
/* RDMA that held this long after a move back counts as stable again */
#define FB_STABLE_S 60.0

struct rmsgi_fallback {
	bool armed;   /* RDMA is being tried: a failure falls back */
	bool pending; /* it failed: TCP starts once its backend is down */
	int reason;   /* why RDMA was not used, or 0 */
	struct rmsgi_addrs to; /* the addresses TCP falls back to */
	/* the way back (resumable clients over TCP after a fallback) */
	struct rmsgi_timer probe_t; /* the next probe, or the switch */
	unsigned probe_ms;	    /* the wait after the next failed probe */
	unsigned switch_tries;	    /* a probe worked: tries left to switch */
	struct rmsg_conn *probe;    /* the probe in flight (a reference) */
	ev_tstamp rdma_since;	    /* the last move back to RDMA */
	/* a probe's own: the connection it probes for, and its attempt */
	struct rmsg_conn *of;
	uint32_t attempt;
};

static void probe_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void probe_later(struct rmsg_conn *c);

static struct rmsgi_fallback *fb_new(struct rmsg_conn *c)
{
	struct rmsgi_fallback *fb = calloc(1, sizeof(*fb));

	if (!fb)
		return NULL;
	rmsgi_timer_init(&fb->probe_t, c->ctx->env.timers, probe_cb);
	fb->probe_t.w.data = c;
	c->fb = fb;
	return fb;
}

static int conn_start_tr(struct rmsg_conn *c, const struct rmsgi_tr *tr,
			 const struct rmsgi_uri *u,
			 const struct rmsgi_addrs *to)
{
	int ret;

	rmsgi_conn_set_tr(c, tr);
	c->tr_priv = NULL;
	/* a resume dials again soon after a dial that gives up (session.c's
	 * backoff): one made while the path was still broken must not keep
	 * the connection waiting the whole setup timeout once it is back
	 * (auto:// falls back to TCP that much sooner too) */
	c->ti.dial_ms = c->cfg.timeout_ms;
	if (c->state == RMSGI_CS_SUSPENDED)
		c->ti.dial_ms = RMSGI_MIN(c->ti.dial_ms, RMSGI_RESUME_DIAL_MS);
	ret = tr->conn->connect(c, &c->ti, u, to);
	if (ret)
		c->tr_priv = NULL; /* nothing started */
	return ret;
}

/* the scheme's backends past those that reach this host only: the
 * ones that fall back and probe (auto://: RDMA, then TCP) */
static int net_chain(const struct rmsg_conn *c,
		     const struct rmsgi_tr *v[RMSGI_TR_MAX])
{
	int n = rmsgi_tr_for_scheme(c->uri.row, v), i = 0;

	while (i < n - 1 && (v[i]->caps & RMSGI_TR_CAP_LOCAL))
		i++;
	memmove(v, v + i, (size_t)(n - i) * sizeof(v[0]));
	return n - i;
}

/* @v's first backends that reach this host only (auto://: shm), tried
 * at once: the first that starts is the connection's, with no fallback
 * from it (a peer on this host that listens through it answers through
 * it). 0 then; else those are dropped from @v (*@n_p fewer) and the
 * first's refusal is logged */
static int conn_start_local(struct rmsg_conn *c, const struct rmsgi_uri *u,
			    const struct rmsgi_addrs *to,
			    const struct rmsgi_tr *v[RMSGI_TR_MAX], int *n_p)
{
	int ret = -EHOSTUNREACH;

	if (c->fb)
		c->fb->armed = false;
	while (*n_p > 1 && (v[0]->caps & RMSGI_TR_CAP_LOCAL)) {
		c->ti.try_first = true;
		ret = conn_start_tr(c, v[0], u, to);
		c->ti.try_first = false;
		if (ret == 0) {
			rmsgi_info(c->ctx,
				   "%s://%s:%u: the peer is on this host: "
				   "using %s",
				   u->row->scheme, u->host, u->port,
				   v[0]->name);
			return 0;
		}
		rmsgi_dbg(c->ctx, "%s://%s:%u: not over %s: %s", u->row->scheme,
			  u->host, u->port, v[0]->name, rmsg_strerror(ret));
		memmove(v, v + 1, (size_t)(*n_p - 1) * sizeof(v[0]));
		(*n_p)--;
	}
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
	if (n > 1 && (v[0]->caps & RMSGI_TR_CAP_LOCAL) &&
	    conn_start_local(c, u, to, v, &n) == 0)
		return 0;
	if (n > 1) {
		/* auto://: the first that connects; a failure after the
		 * start falls back in rmsgi_conn_ev_failed/ev_down, to the
		 * same addresses (the name is resolved once) */
		if (!c->fb && !fb_new(c))
			return -ENOMEM;
		c->fb->to = *to;
		c->fb->armed = true;
	}
	ret = conn_start_tr(c, v[0], u, to);
	if (ret && n > 1) {
		/* no RDMA here (no device, or no route through one) */
		c->fb->armed = false;
		c->fb->reason = ret;
		rmsgi_info(c->ctx, "%s://%s:%u: %s; using %s", u->row->scheme,
			   u->host, u->port, rmsgi_fallback_text(ret),
			   v[1]->name);
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
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	struct rmsgi_fallback *fb = c->fb;

	if (!fb)
		return;
	fb->armed = false;
	if (c->tr && (c->tr->caps & RMSGI_TR_CAP_LOCAL)) {
		/* on this host (a resume found the peer over shm after an
		 * earlier dial fell back): nothing to probe, no reason */
		fb->reason = 0;
		rmsgi_failback_stop(c);
		return;
	}
	/* the way back is the dialing side's, for a session that resumes */
	if (c->is_server || !c->ss || !c->ss->on || fb->of)
		return;
	net_chain(c, v);
	if (c->tr == v[0]) {
		/* on RDMA (again) */
		if (fb->reason) {
			c->st.failbacks++;
			rmsgi_info(c->ctx,
				   "conn %u: back on %s (it was not "
				   "used: %s)",
				   c->id, v[0]->name,
				   rmsgi_fallback_text(fb->reason));
		}
		fb->reason = 0;
		fb->rdma_since = ev_now(c->ctx->loop);
		rmsgi_failback_stop(c);
		return;
	}
	/* probes start over from the shortest wait unless RDMA failed
	 * again soon after the last move back (a flapping path) */
	if (!fb->probe_ms ||
	    ev_now(c->ctx->loop) - fb->rdma_since > FB_STABLE_S)
		fb->probe_ms = FB_PROBE_MIN_MS;
	if (!fb->probe && !rmsgi_timer_active(&fb->probe_t))
		probe_later(c);
}

/* ------------------------------------------------------------------ */
/* the way back to RDMA                                                 */

void rmsgi_failback_stop(struct rmsg_conn *c)
{
	struct rmsgi_fallback *fb = c->fb;
	struct rmsg_conn *p;

	if (!fb || fb->of)
		return;
	rmsgi_timer_stop(c->ctx->loop, &fb->probe_t);
	fb->switch_tries = 0;
	p = fb->probe;
	if (!p)
		return;
	fb->probe = NULL;
	p->fb->of = NULL;
	rmsgi_conn_abort(p, -ECANCELED);
	rmsgi_conn_put(p);
}

void rmsgi_fallback_free(struct rmsg_conn *c)
{
	if (!c->fb)
		return;
	rmsgi_failback_stop(c);
	free(c->fb);
	c->fb = NULL;
}

/* @ms less up to a quarter at random: connections that fell back
 * together do not probe the peer together */
static unsigned fb_jitter(unsigned ms)
{
	unsigned r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (unsigned)(uintptr_t)&r;
	return ms - r % (ms / 4 + 1);
}

/* the next probe, a failed one's wait later (doubled for the one after) */
static void probe_later(struct rmsg_conn *c)
{
	struct rmsgi_fallback *fb = c->fb;

	rmsgi_timer_start(c->ctx->loop, &fb->probe_t,
			  fb_jitter(fb->probe_ms) / 1000.0, 0);
	fb->probe_ms = RMSGI_MIN(fb->probe_ms * 2, FB_PROBE_MAX_MS);
}

/* a hidden connection over the scheme's first backend, to the addresses
 * the connection fell back from, whose hello is a probe (resume.c) */
static int probe_start(struct rmsg_conn *c)
{
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	struct rmsg_conn *p;
	int ret;

	ret = rmsgi_conn_new(c->ctx, &c->cfg, NULL, NULL, &p);
	if (ret)
		return ret;
	if (!fb_new(p)) {
		rmsgi_conn_discard(p);
		return -ENOMEM;
	}
	p->fb->of = c;
	p->uri = c->uri;
	/* its own attempt: the server takes each once, in order */
	rmsgi_session_attempt(c);
	p->fb->attempt = c->ss->attempt;
	net_chain(c, v);
	rmsgi_dbg(c->ctx, "conn %u: probing %s (conn %u)", c->id, v[0]->name,
		  p->id);
	/* ours before it starts: a backend may report its failure from
	 * inside connect (rmsgi_failback_probed) */
	rmsgi_conn_get(p);
	c->fb->probe = p;
	ret = conn_start_tr(p, v[0], &c->uri, &c->fb->to);
	if (ret) {
		/* nothing started, nothing reported */
		c->fb->probe = NULL;
		p->fb->of = NULL;
		rmsgi_conn_discard(p);
		rmsgi_conn_put(p);
	}
	return ret;
}

/* a probe worked: suspend on purpose (the resume tries RDMA first), once
 * no one-sided op waits for an answer over TCP */
static void fb_switch(struct rmsg_conn *c)
{
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	struct rmsgi_fallback *fb = c->fb;

	if (!rmsgi_list_empty(&c->tx.rndvq)) {
		if (--fb->switch_tries) {
			rmsgi_timer_start(c->ctx->loop, &fb->probe_t,
					  FB_SWITCH_WAIT_MS / 1000.0, 0);
			return;
		}
		rmsgi_dbg(c->ctx, "conn %u: one-sided ops kept it on %s", c->id,
			  c->tr->name);
		probe_later(c);
		return;
	}
	fb->switch_tries = 0;
	/* if RDMA then fails all the same, the next probe waits longer:
	 * a path that passes probes but not connections costs a stall of
	 * at most the setup timeout per FB_PROBE_MAX_MS */
	fb->probe_ms = RMSGI_MIN(fb->probe_ms * 2, FB_PROBE_MAX_MS);
	if (c->peer_bye)
		return; /* the peer is closing: nothing to move */
	net_chain(c, v);
	rmsgi_conn_why(c, "moving back to %s, which works again", v[0]->name);
	if (!rmsgi_session_suspend(c, -ECONNRESET)) {
		c->why[0] = 0;
		return;
	}
	rmsgi_info(c->ctx,
		   "conn %u: %s works again (probed); moving back "
		   "from %s",
		   c->id, v[0]->name, c->tr->name);
	/* a break on purpose: the RDMA dial may take its whole setup
	 * timeout before TCP is tried again, which the window must not
	 * count against a path that was working */
	rmsgi_session_window_from(c, c->cfg.timeout_ms);
	c->tops->disconnect(c->tr_priv, 0);
}

static void probe_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsg_conn *c = w->data;
	struct rmsgi_fallback *fb = c->fb;
	int ret;

	(void)loop;
	(void)revents;
	if (c->state != RMSGI_CS_ESTABLISHED || fb->probe)
		return;
	rmsgi_conn_get(c);
	if (fb->switch_tries)
		fb_switch(c);
	else if ((ret = probe_start(c))) {
		/* no device, no route: nothing started */
		rmsgi_dbg(c->ctx, "conn %u: probe: %s", c->id,
			  rmsg_strerror(ret));
		probe_later(c);
	}
	rmsgi_ctx_flush(c->ctx);
	rmsgi_conn_put(c);
}

bool rmsgi_failback_probed(struct rmsg_conn *p, int reason,
			   const struct rmsgi_hello *h)
{
	struct rmsg_conn *c;
	struct rmsgi_fallback *fb;
	int st;

	if (!p->fb || !p->fb->of)
		return p->fb && p->fb->attempt;
	c = p->fb->of;
	fb = c->fb;
	if (fb->probe != p)
		return true; /* (not the one in flight: nothing to tell) */
	st = h && h->status < 0 ? h->status : reason;
	/* the answer must prove the session too (resume.c): anything that
	 * can answer an RDMA connect must not make us drop a working path */
	if (st == -EALREADY &&
	    !rmsgi_session_probe_answer(c, p->fb->attempt, h))
		st = -EACCES;
	if (st == -EALREADY)
		rmsgi_conn_why(p, "a probe of conn %u's path: it works", c->id);
	else
		rmsgi_conn_why(p, "a probe of conn %u's path: %s", c->id,
			       rmsg_strerror(st));
	p->fb->of = NULL;
	fb->probe = NULL;
	rmsgi_conn_put(p); /* the loop holds it until it is down */
	if (st == -EALREADY) {
		/* the peer proved the session over RDMA: switch from the
		 * loop, not from inside the probe's event */
		fb->switch_tries = FB_SWITCH_TRIES;
		rmsgi_timer_start(c->ctx->loop, &fb->probe_t, 0, 0);
	} else if (h && (st == -EACCES || st == -ESTALE)) {
		/* a peer that does not take probes (a version before them),
		 * or whose RDMA side is another context: no more */
		rmsgi_info(c->ctx,
			   "conn %u: the peer refused a probe of RDMA (%s): "
			   "the connection stays on %s",
			   c->id, rmsg_strerror(st), c->tr->name);
	} else if (h && st == -EBUSY) {
		/* its one-sided ops were in flight: soon again */
		rmsgi_timer_start(c->ctx->loop, &fb->probe_t,
				  fb_jitter(FB_PROBE_MIN_MS) / 1000.0, 0);
	} else {
		rmsgi_dbg(c->ctx, "conn %u: probe failed: %s", c->id,
			  rmsg_strerror(st));
		probe_later(c);
	}
	return true;
}

bool rmsgi_conn_is_probe(const struct rmsg_conn *c)
{
	return c->fb && c->fb->attempt;
}

bool rmsgi_conn_quiet(const struct rmsg_conn *c)
{
	/* both ends of a probe log at debug level (probed, probe_answer):
	 * they come every 30 s for each connection on TCP */
	return rmsgi_conn_is_probe(c) ||
	       (c->is_server && c->close_reason == -EALREADY);
}

const struct rmsg_conn *rmsgi_probe_of(const struct rmsg_conn *c,
				       uint32_t *attempt)
{
	if (!c->fb || !c->fb->of)
		return NULL;
	*attempt = c->fb->attempt;
	return c->fb->of;
}

bool rmsgi_fallback_down(struct rmsg_conn *c)
{
	/* the scheme's next backend, from the registry: for auto:// the
	 * one after RDMA */
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	int ret;

	if (!c->fb || !c->fb->pending)
		return false;
	net_chain(c, v);
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
	const struct rmsgi_tr *v[RMSGI_TR_MAX];

	/* on this host through a scheme that had others to try */
	if (c->tr && (c->tr->caps & RMSGI_TR_CAP_LOCAL) &&
	    rmsgi_tr_for_scheme(c->uri.row, v) > 1)
		return "auto:// found the peer on this host";
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
