// SPDX-License-Identifier: MIT
/*
 * cm.c - connection management over rdma_cm (rdma.h tells the design):
 * resolving and connecting, listening, a peer's connect request (its
 * QP: qp.c), the connection's timer (connect bound, then teardown
 * bound), the rdma_cm events and the cm id's addresses.
 */
#include <stdio.h>
#include <arpa/inet.h>

#include "rdma.h"

/* ------------------------------------------------------------------ */
/* connection setup                                                     */

/* a client's: @c and @ci now; a server's: from rmsgi_tr_incoming */
static int rc_new(struct rdma_ctx *r, struct rmsg_conn *c,
		  const struct rmsgi_tr_conn_info *ci, struct rdma_conn **rc_p)
{
	struct rdma_conn *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return -ENOMEM;
	rc->c = c;
	rc->ci = ci;
	rc->r = r;
	rmsgi_list_init(&rc->mws);
	rmsgi_timer_init(&rc->timer, r->env->timers, rdma_rc_timer_cb);
	rc->timer.w.data = rc;
	if (c)
		rmsgi_conn_set_tc(c, rc);
	r->nconns++;
	*rc_p = rc;
	return 0;
}

void rdma_rc_timer(struct rdma_conn *rc, unsigned ms)
{
	struct ev_loop *loop = rc->r->env->loop;

	if (rc->timer_on) {
		ev_ref(loop);
		rmsgi_timer_stop(loop, &rc->timer);
	}
	rmsgi_timer_start(loop, &rc->timer, ms / 1000.0, 0);
	ev_unref(loop);
	rc->timer_on = true;
}

/*
 * The peer's hello: its eager size is what it receives into; ours is
 * what we receive into and what we are prepared to copy per frame. We
 * never send it eager frames larger than our own, however large its
 * announcement (rendezvous requests and segment lists included).
 */
static void hello_clamp(const struct rdma_ctx *r, struct rmsgi_hello *h)
{
	if (h->eager_size > r->eager)
		h->eager_size = (uint32_t)r->eager;
}

static void rc_conn_param(struct rdma_conn *rc, struct rdma_conn_param *p,
			  uint8_t *buf)
{
	struct rmsgi_hello h;

	rmsgi_conn_hello(rc->c, &h);
	h.eager_size = (uint32_t)rc->r->eager;
	h.credits = (uint16_t)rc->granted;
	memset(p, 0, sizeof(*p));
	p->private_data = buf;
	p->private_data_len = (uint8_t)rmsgi_hello_encode(&h, buf);
	/* our own QP (rdma_qp_setup): rdma_cm learns it from here */
	p->qp_num = rc->qpn;
	p->srq = rc->q->srq != NULL;
	p->responder_resources = (uint8_t)rc->r->rd_atom;
	p->initiator_depth = (uint8_t)rc->r->rd_atom;
	p->retry_count = RETRY_COUNT;
	/* credits make RNR a peer's fault: one over its credits can drain
	 * the shared SRQ before it is closed, and the others then wait for
	 * reposted buffers rather than fail, for RNR_RETRY retries of the
	 * receiver's RNR timer (ours: MIN_RNR_TIMER, ~1.5 s in all); not 7,
	 * which retries forever: a live receiver that never reposts would
	 * stall our sends for good */
	p->rnr_retry_count = RNR_RETRY;
}

/* an IP address of a cm id, with its port; false for none (AF_UNSPEC
 * before resolution) or another family (AF_IB) */
static bool cm_addr(const struct sockaddr *sa, struct sockaddr_storage *ss)
{
	size_t len;

	switch (sa->sa_family) {
	case AF_INET:
		len = sizeof(struct sockaddr_in);
		break;
	case AF_INET6:
		len = sizeof(struct sockaddr_in6);
		break;
	default:
		return false;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, sa, len);
	return true;
}

/* conn op: the cm id's addresses, which librdmacm fills when the
 * route resolves (client) and on a connect request's new id (server) */
int rdma_addrs_op(void *p, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer)
{
	struct rdma_conn *rc = p;
	struct sockaddr_storage l, d;

	if (!rc->id || !cm_addr(rdma_get_local_addr(rc->id), &l) ||
	    !cm_addr(rdma_get_peer_addr(rc->id), &d))
		return -ENOTCONN;
	*local = l;
	*peer = d;
	return 0;
}

/* conn op: a resume (inside rmsgi_conn_ev_request of cm_request): the
 * suspended connection @c is this endpoint's from now on */
void rdma_rebind_op(void *p, struct rmsg_conn *c,
		    const struct rmsgi_tr_conn_info *ci)
{
	struct rdma_conn *rc = p;

	rc->c = c;
	rc->ci = ci;
}

/* a listener's address (a client's come resolved from the core) */
static int rdma_resolve(const struct rmsgi_uri *u, struct rdma_addrinfo **res_p)
{
	struct rdma_addrinfo hints = {0};
	char port[8];
	int ret;

	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_flags = RAI_PASSIVE;
	snprintf(port, sizeof(port), "%u", u->port);
	ret = rdma_getaddrinfo(u->host, port, &hints, res_p);
	if (ret)
		return errno == ENODEV ? -ENODEV : -EHOSTUNREACH;
	return 0;
}

/* the first address of @to of the ?src= address's family (any without
 * one), or NULL */
static const struct sockaddr *rdma_pick(const struct rmsgi_uri *u,
					const struct rmsgi_addrs *to)
{
	unsigned i;

	for (i = 0; i < to->n; i++)
		if (!u->src_len || to->a[i].ss_family == u->src.ss_family)
			return (const struct sockaddr *)&to->a[i];
	return NULL;
}

int rdma_connect_op(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		    const struct rmsgi_uri *u, const struct rmsgi_addrs *to)
{
	const struct sockaddr *dst = rdma_pick(u, to);
	struct rdma_conn *rc;
	struct rdma_ctx *r;
	int ret;

	ret = rdma_ctx_get(ci->ctx, &r);
	if (ret)
		return ret;
	if (r->lost)
		return -ENODEV; /* its device is being let go */
	ret = rc_new(r, c, ci, &rc);
	if (ret)
		return ret;
	if (!dst) {
		/* no address of the ?src= family: the network's answer,
		 * not a misuse: like every later failure (and like TCP) it
		 * reaches the core as one (for the app, on_close from the
		 * loop; auto:// falls back) */
		rdma_rc_teardown(rc, -EHOSTUNREACH);
		return 0;
	}
	ret = rmsgi_err_cm(rdma_create_id(r->ech, &rc->id, rc, RDMA_PS_TCP));
	if (ret)
		goto undo_rc;
	/* "?src=": without it the source is the one the route picks, which
	 * for two local devices is always the same device */
	ret = rmsgi_err_cm(rdma_resolve_addr(
		rc->id, u->src_len ? (struct sockaddr *)&u->src : NULL,
		(struct sockaddr *)dst,
		(int)RMSGI_MIN(ci->dial_ms, RESOLVE_SLICE_MS)));
	if (ret && ret != -ENODEV && ret != -ENOENT && ret != -ENOMEM) {
		/* e.g. a ?src= that is no address of this host, or no
		 * route: on_close, as for TCP */
		rdma_rc_teardown(rc, ret);
		return 0;
	}
	if (ret)
		goto undo_id;
	rc->state = RC_RESOLVING;
	rdma_rc_timer(rc, ci->dial_ms);
	return 0;

undo_id:
	rdma_destroy_id(rc->id);
undo_rc:
	r->nconns--;
	free(rc);
	return ret == -ENOENT ? -ENODEV : ret;
}

int rdma_rl_listen(struct rdma_listener *rl, const struct sockaddr *sa)
{
	struct rdma_ctx *r = rl->r;
	int ret;

	ret = rmsgi_err_cm(rdma_create_id(r->ech, &rl->id, NULL, RDMA_PS_TCP));
	if (ret)
		return ret;
	rl->id->context = NULL; /* marks a listening id */
	ret = rmsgi_err_cm(rdma_bind_addr(rl->id, (struct sockaddr *)sa));
	if (ret)
		goto undo_id;
	/* bound to one device's address: open it now, so that regions get
	 * their keys before the first connection (rmsg_mr_export) */
	if (rl->id->verbs) {
		ret = rdma_dev_open(r, rl->id->verbs);
		if (ret)
			goto undo_id;
	}
	ret = rmsgi_err_cm(rdma_listen(rl->id, 128));
	if (ret)
		goto undo_id;
	/* with its port: what a listen again binds after a device's
	 * removal (dev.c) */
	memcpy(&rl->addr, rdma_get_local_addr(rl->id),
	       rdma_get_local_addr(rl->id)->sa_family == AF_INET6
		       ? sizeof(struct sockaddr_in6)
		       : sizeof(struct sockaddr_in));
	return 0;

undo_id:
	rdma_destroy_id(rl->id);
	rl->id = NULL;
	return ret;
}

int rdma_listen_op(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		   const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p)
{
	struct rdma_listener *rl;
	struct rdma_addrinfo *res;
	struct rdma_ctx *r;
	int ret;

	ret = rdma_ctx_get(ctx, &r);
	if (ret)
		return ret;
	ret = rdma_resolve(u, &res);
	if (ret)
		return ret == -EHOSTUNREACH ? -EADDRNOTAVAIL : ret;
	rl = calloc(1, sizeof(*rl));
	if (!rl) {
		ret = -ENOMEM;
		goto undo_res;
	}
	rl->l = l;
	rl->r = r;
	ret = rdma_rl_listen(rl, res->ai_src_addr);
	if (ret)
		goto undo_rl;
	*port_p = ntohs(rdma_get_src_port(rl->id));
	*tl_p = rl;
	rmsgi_list_add_tail(&r->listeners, &rl->link);
	rdma_freeaddrinfo(res);
	return 0;

undo_rl:
	free(rl);
undo_res:
	rdma_freeaddrinfo(res);
	if (ret == -ENODEV || ret == -EADDRNOTAVAIL)
		rmsgi_info(ctx, "rdma listen on %s: %s", u->host,
			   rmsg_strerror(ret));
	return ret;
}

void rdma_listen_close(void *p)
{
	struct rdma_listener *rl = p;

	rmsgi_list_del(&rl->link);
	if (rl->id) /* (gone with its device: rdma_dev_lost) */
		rdma_destroy_id(rl->id);
	free(rl);
}

/* refuses the peer of a new cm id @id with @status and destroys @id */
static void cm_refuse(struct rdma_cm_id *id, int status)
{
	struct rmsgi_hello h;
	uint8_t buf[RMSGI_HELLO_MAX];

	memset(&h, 0, sizeof(h));
	h.status = (int16_t)status;
	rdma_reject(id, buf, (uint8_t)rmsgi_hello_encode(&h, buf));
	rdma_destroy_id(id);
}

/*
 * A group listener's peer, detached from the home: its cm id moves off
 * the home's event channel to a private one that no thread polls
 * (rdma_migrate_id to NULL: "synchronous mode"), here, on the thread
 * that polls the home's channel, as rdma_migrate_id(3) asks. The id then
 * depends on no context: any thread may refuse it (drop), and the chosen
 * context moves it to its own channel (adopt); events meanwhile wait on
 * the private channel and move with it. The hello is decoded already.
 */
struct rdma_handoff {
	struct rdma_cm_id *id;
	struct rmsgi_hello h;
};

static void cm_handoff(struct rmsg_listener *l, struct rdma_cm_id *id,
		       const struct rmsgi_hello *h)
{
	struct rdma_handoff *ho = malloc(sizeof(*ho));

	if (!ho) {
		cm_refuse(id, -ENOMEM);
		return;
	}
	if (rdma_migrate_id(id, NULL)) {
		cm_refuse(id, rmsgi_err_cm(-1));
		free(ho);
		return;
	}
	ho->id = id;
	ho->h = *h;
	rmsgi_tr_handoff(l, &rmsgi_tr_rdma, rdma_get_peer_addr(id), ho);
}

void rdma_drop_op(void *p, const struct rmsgi_hello *refusal)
{
	struct rdma_handoff *ho = p;
	uint8_t buf[RMSGI_HELLO_MAX];

	rdma_reject(ho->id, buf, (uint8_t)rmsgi_hello_encode(refusal, buf));
	rdma_destroy_id(ho->id);
	free(ho);
}

static void cm_request(struct rdma_ctx *r, struct rmsg_listener *l,
		       struct rdma_cm_id *id, struct rmsgi_hello h);

void rdma_adopt_op(struct rmsg_ctx *ctx, struct rmsg_listener *l, void *p)
{
	struct rdma_handoff *ho = p;
	struct rdma_cm_id *id = ho->id;
	struct rmsgi_hello h = ho->h;
	struct rdma_ctx *r;
	int ret;

	free(ho);
	ret = rdma_ctx_get(ctx, &r);
	if (ret == 0)
		ret = rmsgi_err_cm(rdma_migrate_id(id, r->ech));
	if (ret) {
		cm_refuse(id, ret);
		return;
	}
	cm_request(r, l, id, h);
}

/* a peer asks to connect: the core admits it and asks the app; accept
 * or reject with the hello it fills */
static void on_connect_request(struct rdma_ctx *r, struct rdma_cm_event *ev,
			       struct rdma_listener *rl)
{
	struct rmsgi_hello h;

	if (rmsgi_hello_decode(ev->param.conn.private_data,
			       ev->param.conn.private_data_len, &h)) {
		rmsgi_warn(r->ctx, "rdma: connect request without a valid "
				   "hello: rejected");
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return;
	}
	if (rmsgi_tr_group(rl->l))
		cm_handoff(rl->l, ev->id, &h);
	else
		cm_request(r, rl->l, ev->id, h);
}

/* the request of @id (its hello @h) for the core's listener @l */
static void cm_request(struct rdma_ctx *r, struct rmsg_listener *l,
		       struct rdma_cm_id *id, struct rmsgi_hello h)
{
	const struct rmsgi_tr_conn_info *ci;
	struct rdma_conn_param param;
	struct rmsgi_hello reply;
	uint8_t buf[RMSGI_HELLO_MAX];
	struct rdma_conn *rc;
	struct rmsg_conn *c;
	int ret;

	hello_clamp(r, &h);
	ret = rc_new(r, NULL, NULL, &rc);
	if (ret) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	if (rmsgi_tr_incoming(l, &rmsgi_tr_rdma, rc, &c, &ci, &reply)) {
		/* over the listener's limits (the peer logs why), or no
		 * memory */
		rdma_reject(id, buf, (uint8_t)rmsgi_hello_encode(&reply, buf));
		rdma_destroy_id(id);
		r->nconns--;
		free(rc);
		return;
	}
	rc->c = c;
	rc->ci = ci;
	rc->is_server = true;
	rc->id = id;
	rc->id->context = rc;
	rc->state = RC_CONNECTING;
	ret = rdma_qp_setup(rc);
	if (ret == 0) {
		ret = rmsgi_conn_ev_request(c, l, &h, &reply);
		/* a resume: the suspended connection's (rdma_rebind_op);
		 * the temporary one is gone */
		c = rc->c;
		ci = rc->ci;
	} else {
		rmsgi_conn_refusal(c, ret, &reply);
	}
	if (ret == 0) {
		rc->peer_eager = h.eager_size;
		rc_conn_param(rc, &param, buf);
		/* RTS before the peer hears of the accept: it may send at
		 * once */
		ret = rdma_qp_ready(rc, &param);
		if (ret == 0)
			ret = rmsgi_err_cm(rdma_accept(rc->id, &param));
		if (ret == 0) {
			rdma_rc_timer(rc, ci->cfg->timeout_ms);
			return;
		}
		rmsgi_conn_refusal(c, ret, &reply);
	}
	rdma_reject(rc->id, buf, (uint8_t)rmsgi_hello_encode(&reply, buf));
	rc->state = RC_DEAD;
	if (rmsgi_conn_app_accepted(c)) {
		/* the app accepted it (and may hold it, or have queued
		 * sends on it) before the QP or the accept failed: it ends
		 * as any accepted one, on_close and all */
		rdma_rc_teardown(rc, ret);
		return;
	}
	/* rejected: the app never sees this connection */
	rc->silent = true;
	rdma_rc_teardown(rc, 0);
}

static int cm_status_err(int status, int dflt)
{
	return status < 0 && status > -4096 ? status : dflt;
}

static void on_cm_event(struct rdma_ctx *r, struct rdma_cm_event *ev)
{
	struct rdma_conn *rc = ev->id->context;
	struct rdma_conn_param param;
	struct rmsgi_hello h;
	uint8_t buf[RMSGI_HELLO_MAX];
	int ret;

	if (!rc) {
		/* a listening id's own events: its device's removal */
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			rdma_dev_lost(r);
		return;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rmsgi_err_cm(
			rdma_resolve_route(rc->id, (int)rc->ci->dial_ms));
		if (ret)
			rdma_rc_teardown(rc, ret);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = rdma_qp_setup(rc);
		if (ret == 0) {
			rc_conn_param(rc, &param, buf);
			ret = rmsgi_err_cm(rdma_connect(rc->id, &param));
		}
		if (ret)
			rdma_rc_teardown(rc, ret);
		else
			rc->state = RC_CONNECTING;
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* the server accepted: our QP is no rdma_cm's (rdma_qp_setup),
		 * so the answer comes here rather than as ESTABLISHED; ready
		 * the QP, then complete the connection (rdma_establish(3)) */
		if (rc->state != RC_CONNECTING || rc->is_server)
			break;
		/* a reply that is no hello fails here, before the server
		 * is told the connection is up (rdma_establish) */
		if (ev->status)
			ret = cm_status_err(ev->status, -ECONNREFUSED);
		else if (rmsgi_hello_decode(ev->param.conn.private_data,
					    ev->param.conn.private_data_len,
					    &h))
			ret = -EPROTO;
		else
			ret = rdma_qp_ready(rc, NULL);
		if (ret == 0)
			ret = rmsgi_err_cm(rdma_establish(rc->id));
		if (ret) {
			rdma_rc_teardown(rc, ret);
			break;
		}
		/* fall through */
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rc->state != RC_CONNECTING)
			break; /* a receive already showed it (on_recv) */
		rc_timer_stop(rc);
		rdma_rc_up(rc);
		if (rc->is_server) {
			rmsgi_conn_ev_established(rc->c, NULL);
		} else if (rmsgi_hello_decode(ev->param.conn.private_data,
					      ev->param.conn.private_data_len,
					      &h) == 0) {
			hello_clamp(r, &h);
			rc->peer_eager = h.eager_size;
			rmsgi_conn_ev_established(rc->c, &h);
		} else {
			rdma_rc_teardown(rc, -EPROTO);
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (rc->state >= RC_UP) {
			/* up already (the peer's first frame showed it, or
			 * ESTABLISHED came): the peer went away before its
			 * side completed, e.g. its context was destroyed */
			rdma_rc_teardown(rc, -ECONNRESET);
			break;
		}
		if (rmsgi_hello_decode(ev->param.conn.private_data,
				       ev->param.conn.private_data_len,
				       &h) == 0 &&
		    h.status < 0) {
			/* every reject reads the same; the reason is in pdata */
			rmsgi_conn_ev_failed(rc->c, -ECONNREFUSED, &h);
			rdma_rc_teardown(rc, -ECONNREFUSED);
		} else {
			rdma_rc_teardown(rc, -ECONNREFUSED);
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		/* a slice ran out (see RESOLVE_SLICE_MS): look again; the
		 * connection's timer bounds the whole */
		/* (the id stays bound, "?src=" included: no source again;
		 * librdmacm has not filled the local address yet) */
		if (rc->state == RC_RESOLVING && ev->status == -ETIMEDOUT &&
		    rdma_resolve_addr(rc->id, NULL, rdma_get_peer_addr(rc->id),
				      RESOLVE_SLICE_MS) == 0)
			break;
		rdma_rc_teardown(rc, cm_status_err(ev->status, -EHOSTUNREACH));
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		rdma_rc_teardown(rc, cm_status_err(ev->status, -EHOSTUNREACH));
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rdma_rc_teardown(
			rc, rc->state >= RC_UP
				    ? -ECONNRESET
				    : cm_status_err(ev->status, -ECONNREFUSED));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* what the peer sent before it left (its BYE among it) is
		 * in the CQ, which this channel does not order against */
		rdma_cq_drain(r);
		if (!rc->buried)
			rdma_rc_teardown(rc, -ECONNRESET);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rdma_dev_lost(r);
		rdma_rc_teardown(rc, -ENODEV);
		break;
	default:
		break;
	}
}

void rdma_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_ctx *r = w->data;
	struct rdma_cm_event *ev, copy;

	rdma_enter(r);
	while (rdma_get_cm_event(r->ech, &ev) == 0) {
		uint8_t pdata[256];

		/* ack first: a handler may destroy the id */
		copy = *ev;
		if (ev->param.conn.private_data_len &&
		    ev->param.conn.private_data) {
			memcpy(pdata, ev->param.conn.private_data,
			       RMSGI_MIN(ev->param.conn.private_data_len,
					 sizeof(pdata)));
			copy.param.conn.private_data = pdata;
		}
		if (copy.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			/* the listener is known from the listen id's owner */
			struct rmsgi_list *n;
			struct rdma_listener *rl = NULL;

			for (n = r->listeners.next; n != &r->listeners;
			     n = n->next) {
				struct rdma_listener *x = rmsgi_list_entry(
					n, struct rdma_listener, link);

				if (x->id == copy.listen_id)
					rl = x;
			}
			rdma_ack_cm_event(ev);
			if (rl) {
				on_connect_request(r, &copy, rl);
			} else {
				rdma_reject(copy.id, NULL, 0);
				rdma_destroy_id(copy.id);
			}
			continue;
		}
		rdma_ack_cm_event(ev);
		rmsgi_tr_dbg(r->env, "cm event %s status %d",
			     rdma_event_str(copy.event), copy.status);
		on_cm_event(r, &copy);
	}
	rdma_leave(r);
	rmsgi_ctx_flush(r->ctx);
}
