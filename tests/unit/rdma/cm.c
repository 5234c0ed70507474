// SPDX-License-Identifier: MIT
/*
 * unit tests of connection setup (src/transport/rdma/cm.c): the client's
 * and the server's handshake through mocked rdma_cm events, refusals,
 * failures of the CM and the device setup, addresses, the QP's rights
 * before the key proof.
 */
#include "harness.h"

/* client connection setup                                              */

static void connect__handshake(void **state)
{
	struct rt *t = *state;
	struct rmsgi_hello h;
	unsigned int i;

	assert_int_equal(rmsg_cfg_set_private_data(t->cfg, "hi", 2), 0);
	connect_peer(t, 16, 4096);
	assert_string_equal(rmsg_conn_transport(t->c), "rdma");
	/* what went to the peer in the connect request */
	assert_int_equal(rmsgi_hello_decode(mock.connect_pdata,
					    mock.connect_pdata_len, &h),
			 0);
	/* the grant a connection starts with (rmsg_cfg_set_credits_initial,
	 * default 4), which then grows with use */
	assert_int_equal(h.credits, 4);
	assert_true(h.flags & RMSGI_HELLO_F_GROW);
	assert_int_equal(h.eager_size, 8192);
	assert_int_equal(h.conn_id, t->c->id);
	assert_int_equal(h.status, 0);
	assert_int_equal(h.pdata_len, 2);
	assert_memory_equal(h.pdata, "hi", 2);
	/* reads in flight: some, within what the device allows (16 today,
	 * the mock device's limit) */
	assert_true(mock.initiator_depth >= 1 &&
		    mock.initiator_depth <= mock.max_qp_rd_atom);
	assert_true(mock.responder_resources >= 1 &&
		    mock.responder_resources <= mock.max_qp_rd_atom);
	/* RNR is a peer's fault; the others wait it out, for a while, but
	 * not forever: 7 would retry forever on rxe (rnr_retry is 6 today) */
	assert_true(mock.rnr_retry > 0 && mock.rnr_retry < 7);
	assert_true(mock.retry > 0 && mock.retry < 7);
	/* what came back */
	assert_int_equal(t->c->peer_credits, 16);
	assert_int_equal(t->c->tx.peer_eager, 4096);
	/* the SRQ holds at least the 32 buffers granted (the default
	 * credits, rmsg_cfg_set_credits.3), each room for a header plus the
	 * default eager size (8 KiB), in registered memory (today: 32 more
	 * spare, posted 16 at a time, a 64-byte aligned stride) */
	assert_true(mock_srq_posted() >= 32);
	for (i = 0; i < mock_srq_posted(); i++)
		assert_true(mock_srq_peek(i)->length >= RMSGI_HDR_SIZE + 8192);
	assert_int_equal(mock.n_bad_sge, 0);
	assert_true(mock.n_req_notify >= 1);
	/* an RC QP on the shared CQ and SRQ */
	assert_int_equal(mock.last_qp->attr.qp_type, IBV_QPT_RC);
	assert_non_null(mock.last_qp->attr.srq);
	assert_ptr_equal(mock.last_qp->attr.send_cq, mock.last_cq);
	assert_ptr_equal(mock.last_qp->attr.recv_cq, mock.last_cq);
	assert_int_equal(t->closed, 0);
}

/* a second connection shares device, CQ and SRQ, and adds its grant */
static void connect__second_conn_shares_device(void **state)
{
	struct rt *t = *state;
	struct rmsg_conn *c2;
	struct ibv_cq *cq;
	unsigned int posted;
	int pds;

	connect_peer(t, 16, 4096);
	cq = mock.last_cq;
	pds = mock.live_pd;
	posted = mock_srq_posted();
	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &c2), 0);
	cm_event(t, mock.last_id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	cm_event(t, mock.last_id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	assert_ptr_equal(mock.last_cq, cq);
	assert_int_equal(mock.live_pd, pds);
	assert_int_equal(mock.live_cq, 1);
	assert_int_equal(mock.live_srq, 1);
	assert_int_equal(mock.live_qp, 2);
	/* room for the second grant (4, the default initial credits) */
	assert_true(mock_srq_posted() >= posted + 4);
	assert_int_equal(rmsg_conn_close(c2), 0);
	assert_int_equal(mock.live_qp, 1);
}

static void connect__bad_hello_in_established(void **state)
{
	struct rt *t = *state;
	static const uint8_t junk[20] = {1, 2, 3};

	start_connect(t);
	cm_event(t, t->id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, junk,
		 sizeof(junk));
	assert_int_equal(t->established, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* what each CM failure becomes in on_close */
static void connect__cm_errors(void **state)
{
	static const struct {
		enum rdma_cm_event_type ev;
		int status;
		bool routed; /* after ROUTE_RESOLVED */
		int reason;
	} cases[] = {
		{RDMA_CM_EVENT_ADDR_ERROR, 0, false, -EHOSTUNREACH},
		{RDMA_CM_EVENT_ADDR_ERROR, -ENETUNREACH, false, -ENETUNREACH},
		{RDMA_CM_EVENT_ROUTE_ERROR, -ETIMEDOUT, false, -ETIMEDOUT},
		{RDMA_CM_EVENT_UNREACHABLE, 0, true, -EHOSTUNREACH},
		{RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, true, -ETIMEDOUT},
		{RDMA_CM_EVENT_CONNECT_ERROR, 0, true, -ECONNREFUSED},
		{RDMA_CM_EVENT_CONNECT_ERROR, -5000, true, -ECONNREFUSED},
		{RDMA_CM_EVENT_REJECTED, 28, true, -ECONNREFUSED},
		{RDMA_CM_EVENT_DEVICE_REMOVAL, 0, true, -ENODEV},
		{RDMA_CM_EVENT_DISCONNECTED, 0, true, -ECONNRESET},
	};
	size_t i;

	teardown(state);
	for (i = 0; i < UNIT_ARRAY_SIZE(cases); i++) {
		struct rt *t = rt_new();

		rt_ctx(t);
		assert_int_equal(
			rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &t->c), 0);
		t->id = mock.last_id;
		cm_event(t, t->id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
		if (cases[i].routed)
			cm_event(t, t->id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0,
				 NULL, 0);
		cm_event(t, t->id, cases[i].ev, cases[i].status, NULL, 0);
		if (t->closed != 1 || t->close_reason != cases[i].reason)
			fail_msg("case %zu (%s): closed %d reason %d", i,
				 rdma_event_str(cases[i].ev), t->closed,
				 t->close_reason);
		assert_int_equal(t->established, 0);
		assert_true(rt_free(t));
	}
	*state = rt_new();
}

/* a reject reads -ECONNREFUSED; the listener's private data says why */
static void connect__rejected_with_reason(void **state)
{
	struct rt *t = *state;
	uint8_t buf[64];

	start_connect(t);
	cm_event(t, t->id, RDMA_CM_EVENT_REJECTED, 28, buf,
		 hello(buf, 32, 8192, -EPERM, "busy"));
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ECONNREFUSED);
	assert_int_equal(t->peer_pdata_len, 4);
	assert_memory_equal(t->peer_pdata, "busy", 4);
	assert_int_equal(t->established, 0);
}

/* an up connection that rdma_cm then reports REJECTED or CONNECT_ERROR
 * (its server went away before its own side completed: the client may
 * already be up through the server's first frame or ESTABLISHED): a
 * reset, not a refusal, which would say it was never accepted */
static void connect__rejected_after_up(void **state)
{
	static const enum rdma_cm_event_type evs[] = {
		RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_CONNECT_ERROR};
	uint8_t buf[64];
	size_t i;

	teardown(state);
	for (i = 0; i < UNIT_ARRAY_SIZE(evs); i++) {
		struct rt *t = rt_new();

		connect_peer(t, 16, 4096);
		cm_event(t, t->id, evs[i], 28, buf,
			 hello(buf, 16, 4096, -EPERM, NULL));
		pump(t);
		if (t->closed != 1 || t->close_reason != -ECONNRESET)
			fail_msg("%s after ESTABLISHED: closed %d reason %d",
				 rdma_event_str(evs[i]), t->closed,
				 t->close_reason);
		assert_true(rt_free(t));
	}
	*state = rt_new();
}

static void connect__device_setup_failure(void **state)
{
	struct rt *t = *state;

	mock.create_cq_fail = true;
	start_connect(t);
	assert_int_equal(mock.n_connect, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ENOMEM);
	/* what dev_open made before the failure is gone already */
	assert_int_equal(mock.live_pd, 0);
	assert_int_equal(mock.live_cch, 0);
	assert_int_equal(mock.live_qp, 0);
}

static void connect__query_device_failure(void **state)
{
	struct rt *t = *state;

	mock.query_device_ret = ENODEV;
	start_connect(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ENODEV);
}

/* no /dev/infiniband/rdma_cm: the call fails, no callback follows */
static void connect__no_rdma_stack(void **state)
{
	struct rt *t = *state;
	struct rmsg_conn *c = NULL;

	rt_ctx(t);
	mock.cm_channel_errno = ENOENT;
	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &c),
			 -ENODEV);
	mock.cm_channel_errno = ENODEV;
	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &c),
			 -ENODEV);
	assert_null(c);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(t->nlog, 0);
}

/* transport.h: the core resolves, the backend connects to what it is
 * given: no rdma_getaddrinfo for a client; the destination and port
 * reach rdma_resolve_addr unchanged */
static void connect__resolved_address(void **state)
{
	struct rt *t = *state;
	struct rmsg_conn *c = NULL;

	rt_ctx(t);
	mock.getaddrinfo_errno = ENODEV; /* would fail if it were called */
	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &c), 0);
	assert_non_null(c);
	assert_int_equal(mock.n_getaddrinfo, 0);
	assert_int_equal(mock.n_resolve_addr, 1);
	assert_int_equal(mock.resolve_dst4, 0xc0000201); /* 192.0.2.1 */
	assert_int_equal(mock.resolve_port, 7471);
	assert_false(mock.resolve_src);
	assert_int_equal(rmsg_conn_close(c), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(t->closed, 1);
}

static void connect__resolve_failure(void **state)
{
	struct rt *t = *state;
	struct rmsg_conn *c = NULL;

	rt_ctx(t);
	/* no address of the ?src= family is the network's answer:
	 * rmsg_connect.3 lists no such error, on_close gets it (as on TCP) */
	assert_int_equal(
		rmsg_connect(t->ctx, URI "?src=::1", t->cfg, &ops, t, &c), 0);
	assert_non_null(c);
	assert_int_equal(t->closed, 0); /* never inside the call */
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EHOSTUNREACH);
	assert_int_equal(t->established, 0);
	assert_int_equal(mock.live_id, 0);
	assert_int_equal(mock.n_resolve_addr, 0);
	assert_int_equal(t->nlog, 1); /* the on_close */
}

static void connect__timeout(void **state)
{
	struct rt *t = *state;
	int i;

	assert_int_equal(rmsg_cfg_set_timeout_ms(t->cfg, 1), 0);
	rt_ctx(t);
	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &t->c), 0);
	/* no CM event ever comes */
	for (i = 0; i < 1000 && !t->closed; i++)
		ev_run(t->loop, EVRUN_ONCE);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ETIMEDOUT);
	assert_int_equal(mock.live_id, 0);
}

/* a device with less inline and SGE room: asked again for less */
static void connect__qp_fallback(void **state)
{
	struct rt *t = *state;
	static const char small[] = "small";
	const struct mock_send_wr *w;

	mock.max_inline = 64;
	connect_peer(t, 32, 8192);
	/* what the QP got fits the device (today: no inline, 4 SGEs) */
	assert_true(mock.last_qp->attr.cap.max_inline_data <= 64);
	assert_int_equal(send_str(t, small, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	w = &mock.sent[0];
	assert_true(w->num_sge <= (int)mock.last_qp->attr.cap.max_send_sge);
	if (w->send_flags & IBV_SEND_INLINE)
		assert_true(w->total <= mock.last_qp->attr.cap.max_inline_data);
	assert_int_equal(mock.n_bad_inline, 0);
	assert_int_equal(mock.n_bad_sge, 0);
}

/* server side                                                          */

static struct rmsg_conn *accepted;

static int accept_cb(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pdata, size_t len, void *arg)
{
	struct rt *t = arg;

	assert_int_equal(len, 3);
	assert_memory_equal(pdata, "abc", 3);
	if (t->accept_ret == 0) {
		assert_int_equal(rmsg_conn_set_private_data(c, "ok", 2), 0);
		t->c = c;
	}
	accepted = c;
	return t->accept_ret;
}

static struct rdma_cm_id *listen_and_request(struct rt *t)
{
	struct rdma_cm_id *lid, *id;
	uint16_t port;
	uint8_t buf[64];

	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://0.0.0.0:7471", t->cfg,
				     &ops, accept_cb, t, &t->l),
			 0);
	assert_int_equal(mock.n_listen, 1);
	assert_int_equal(rmsg_listener_port(t->l, &port), 0);
	assert_int_equal(port, 7471);
	lid = mock.last_id;
	id = mock_cm_push_request(lid, buf, hello(buf, 16, 4096, 0, "abc"));
	accepted = NULL;
	cm_deliver(t);
	assert_non_null(accepted);
	return id;
}

static void accept__handshake(void **state)
{
	struct rt *t = *state;
	struct rdma_cm_id *id = listen_and_request(t);
	struct rmsgi_hello h;

	assert_int_equal(mock.n_accept, 1);
	assert_int_equal(mock.n_reject, 0);
	assert_int_equal(rmsgi_hello_decode(mock.accept_pdata,
					    mock.accept_pdata_len, &h),
			 0);
	assert_int_equal(h.status, 0);
	/* the initial grant (rmsg_cfg_set_credits_initial, default 4) */
	assert_int_equal(h.credits, 4);
	assert_true(h.flags & RMSGI_HELLO_F_GROW);
	assert_int_equal(h.eager_size, 8192);
	assert_int_equal(h.pdata_len, 2);
	assert_memory_equal(h.pdata, "ok", 2);
	assert_int_equal(t->established, 0);
	cm_event(t, id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->c->peer_credits, 16);
	assert_int_equal(t->c->tx.peer_eager, 4096);
	assert_true(mock_srq_posted() >= 32); /* the grant, at least */
	assert_int_equal(t->c->cr.avail, 16);
}

/* the app says no: the peer hears why, the app hears nothing more */
static void accept__reject(void **state)
{
	struct rt *t = *state;
	struct rmsgi_hello h;

	t->accept_ret = -EPERM;
	listen_and_request(t);
	assert_int_equal(mock.n_accept, 0);
	assert_int_equal(mock.n_reject, 1);
	assert_int_equal(rmsgi_hello_decode(mock.reject_pdata,
					    mock.reject_pdata_len, &h),
			 0);
	assert_int_equal(h.status, -EPERM);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(t->nlog, 0);
	/* the id and QP made for it are gone, the listener's stays */
	assert_int_equal(mock.live_qp, 0);
	assert_int_equal(mock.live_id, 1);
	assert_int_equal(mock.n_id_with_qp, 0);
}

static void accept__bad_hello(void **state)
{
	struct rt *t = *state;
	static const uint8_t junk[4] = {0xa7, 9, 9, 9};

	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://0.0.0.0:7471", t->cfg,
				     &ops, accept_cb, t, &t->l),
			 0);
	accepted = NULL;
	mock_cm_push_request(mock.last_id, junk, sizeof(junk));
	cm_deliver(t);
	assert_null(accepted);
	assert_int_equal(mock.n_reject, 1);
	assert_int_equal(mock.reject_pdata_len, 0);
	assert_int_equal(mock.live_id, 1);
	assert_int_equal(mock.live_qp, 0);
}

/* over the listener's limits a request is rejected before the app is
 * asked, -EUSERS in the hello (issue 14); a pending handshake counts
 * until established, a connection until its on_close ran */
static void accept__over_limits(void **state)
{
	struct rt *t = *state;
	struct rdma_cm_id *lid, *id, *id2;
	struct rmsgi_hello h;
	uint8_t buf[64];

	assert_int_equal(rmsg_cfg_set_max_conns(t->cfg, 2), 0);
	assert_int_equal(rmsg_cfg_set_max_pending(t->cfg, 1), 0);
	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://0.0.0.0:7471", t->cfg,
				     &ops, accept_cb, t, &t->l),
			 0);
	lid = mock.last_id;
	id = mock_cm_push_request(lid, buf, hello(buf, 16, 4096, 0, "abc"));
	cm_deliver(t);
	assert_int_equal(mock.n_accept, 1);
	/* the first is still in its handshake: max_pending 1 */
	accepted = NULL;
	mock_cm_push_request(lid, buf, hello(buf, 16, 4096, 0, "abc"));
	cm_deliver(t);
	assert_null(accepted);
	assert_int_equal(mock.n_reject, 1);
	assert_int_equal(rmsgi_hello_decode(mock.reject_pdata,
					    mock.reject_pdata_len, &h),
			 0);
	assert_int_equal(h.status, -EUSERS);
	/* established: a second one fits */
	cm_event(t, id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	assert_int_equal(t->established, 1);
	id2 = mock_cm_push_request(lid, buf, hello(buf, 16, 4096, 0, "abc"));
	cm_deliver(t);
	assert_int_equal(mock.n_accept, 2);
	cm_event(t, id2, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	assert_int_equal(t->established, 2);
	/* two of two: the third is refused */
	mock_cm_push_request(lid, buf, hello(buf, 16, 4096, 0, "abc"));
	cm_deliver(t);
	assert_int_equal(mock.n_reject, 2);
	assert_int_equal(t->l->nconns, 2);
	assert_int_equal(t->l->npending, 0);
	assert_int_equal(t->l->refused, 2);
	/* one goes: a slot frees once its on_close ran */
	cm_event(t, id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	pump(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->l->nconns, 1);
	mock_cm_push_request(lid, buf, hello(buf, 16, 4096, 0, "abc"));
	cm_deliver(t);
	assert_int_equal(mock.n_accept, 3);
	assert_int_equal(mock.n_reject, 2);
}

/* the peer's first frame can beat RDMA_CM_EVENT_ESTABLISHED */
static void accept__first_frame_before_established(void **state)
{
	struct rt *t = *state;
	struct rdma_cm_id *id = listen_and_request(t);

	t->qpn = mock.last_qp->qp.qp_num;
	peer_data(t, "early", 0);
	pump(t);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->msgs, 1);
	assert_int_equal(t->log[0].kind, 'E');
	assert_int_equal(t->log[1].kind, 'M');
	cm_event(t, id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	assert_int_equal(t->established, 1);
}

/* the addrs op: the cm id's addresses, IPv6 included, on a connect
 * request's id, known once the app decided and once established */
static void accept__addresses(void **state)
{
	struct rt *t = *state;
	struct sockaddr_storage peer, local;
	struct sockaddr_in6 *me, *them;
	struct rdma_cm_id *lid, *id;
	uint8_t buf[64];

	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://[::]:7471", t->cfg, &ops,
				     accept_cb, t, &t->l),
			 0);
	lid = mock.last_id;
	id = mock_cm_push_request(lid, buf, hello(buf, 16, 4096, 0, "abc"));
	me = &id->route.addr.src_sin6;
	them = &id->route.addr.dst_sin6;
	me->sin6_family = them->sin6_family = AF_INET6;
	me->sin6_port = htons(7471);
	them->sin6_port = htons(40001);
	me->sin6_addr.s6_addr[0] = them->sin6_addr.s6_addr[0] = 0xfd;
	me->sin6_addr.s6_addr[15] = 1;
	them->sin6_addr.s6_addr[15] = 2;
	accepted = NULL;
	cm_deliver(t);
	assert_non_null(accepted);
	assert_int_equal(rmsg_conn_peer_addr(accepted, &peer), 0);
	assert_int_equal(rmsg_conn_local_addr(accepted, &local), 0);
	assert_memory_equal(&peer, them, sizeof(*them));
	assert_memory_equal(&local, me, sizeof(*me));
	cm_event(t, id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	assert_int_equal(t->established, 1);
	memset(&peer, 0, sizeof(peer));
	assert_int_equal(rmsg_conn_peer_addr(accepted, &peer), 0);
	assert_memory_equal(&peer, them, sizeof(*them));
}

/* a client's id without IP addresses (the mock leaves AF_UNSPEC; AF_IB
 * alike): the core knows none */
static void connect__addresses_not_ip(void **state)
{
	struct rt *t = *state;
	struct sockaddr_storage ss;

	connect_peer(t, 16, 4096);
	assert_int_equal(rmsg_conn_peer_addr(t->c, &ss), -ENOTCONN);
	assert_int_equal(rmsg_conn_local_addr(t->c, &ss), -ENOTCONN);
}

/* the peer announces a larger eager size than ours: we send it no eager
 * frame over our own (here 8 KiB: 20000 B go as a rendezvous) */
static void bound__peer_eager_clamped(void **state)
{
	struct rt *t = *state;
	uint8_t *big = calloc(1, 20000);
	struct rmsgi_hdr h;

	assert_non_null(big);
	connect_peer(t, 32, 1u << 20);
	assert_int_equal(t->c->tx.peer_eager, 8192);
	assert_int_equal(send_buf(t, big, 20000, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	sent_hdr(&mock.sent[0], &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_REQ);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	free(big);
}

/*
 * A connection that must prove a key: its QP never has remote rights
 * before the proof, at no step (issue 30): an any-peer export's rkey is
 * valid on every QP of the PD, and rdma_cm would grant remote write and
 * read in the INIT step it repeats inside rdma_accept() and on the
 * connect response. So the QP is not the id's: the client moves it
 * through INIT, RTR and RTS itself on RDMA_CM_EVENT_CONNECT_RESPONSE,
 * without remote rights, and then calls rdma_establish().
 */
static void auth__qp_rights_closed(void **state)
{
	static const char key[] = "0123456789abcdef0123456789abcdef";
	struct rmsgi_hello h = {.credits = 32,
				.eager_size = 8192,
				.flags = RMSGI_HELLO_F_AUTH,
				.nonce_len = RMSGI_NONCE_SIZE,
				.conn_id = 77};
	struct rt *t = *state;
	uint8_t buf[RMSGI_HELLO_MAX];

	memset(h.nonce, 0x42, sizeof(h.nonce));
	assert_int_equal(rmsg_cfg_set_psk(t->cfg, key, sizeof(key) - 1), 0);
	start_connect(t);
	t->qpn = mock.last_qp->qp.qp_num;
	assert_int_equal(mock.n_connect, 1);
	assert_int_equal(mock.connect_qpn, t->qpn);
	assert_true(mock.connect_srq);
	assert_int_equal(mock.n_qp_remote, 0);
	cm_event(t, t->id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, buf,
		 rmsgi_hello_encode(&h, buf));
	/* no step carried remote rights */
	assert_int_equal(mock.n_qp_remote, 0);
	/* RTS by the library's hand, then the connection completed */
	assert_int_equal(mock.n_rdmacm_modify, 0);
	assert_int_equal(mock.n_establish, 1);
	assert_int_equal(mock.establish_qp_state, IBV_QPS_RTS);
	assert_int_equal(mock.last_qp->qp.state, IBV_QPS_RTS);
	/* in AUTH: the proof went */
	assert_int_equal(t->established, 0);
	assert_int_equal(t->closed, 0);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	assert_int_equal(mock.n_qp_remote, 0);
}

/* the server's side: RTS without remote rights before rdma_accept();
 * they are granted once the client's proof checked out, before the
 * server's own proof goes (the client may write as soon as it has it) */
static void auth__qp_rights_server(void **state)
{
	static const char key[] = "0123456789abcdef0123456789abcdef";
	uint8_t buf[RMSGI_HELLO_MAX], proof[RMSGI_NONCE_SIZE + RMSGI_MAC_SIZE];
	struct rt *t = *state;
	struct rmsgi_hello ch, sh;
	struct rdma_cm_id *id;
	size_t n;

	assert_int_equal(rmsg_cfg_set_psk(t->cfg, key, sizeof(key) - 1), 0);
	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://0.0.0.0:7471", t->cfg,
				     &ops, accept_cb, t, &t->l),
			 0);
	peer_hello_flags = RMSGI_HELLO_F_AUTH;
	n = hello(buf, 16, 4096, 0, "abc");
	assert_int_equal(rmsgi_hello_decode(buf, n, &ch), 0);
	id = mock_cm_push_request(mock.last_id, buf, n);
	accepted = NULL;
	cm_deliver(t);
	assert_int_equal(mock.n_accept, 1);
	assert_null(accepted); /* the app hears of it after the proof */
	t->qpn = mock.last_qp->qp.qp_num;
	assert_int_equal(mock.accept_qpn, t->qpn);
	assert_true(mock.accept_srq);
	assert_int_equal(mock.n_qp_remote, 0);
	assert_int_equal(mock.accept_qp_state, IBV_QPS_RTS);
	assert_int_equal(mock.n_rdmacm_modify, 0);
	cm_event(t, id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	assert_int_equal(mock.n_qp_remote, 0);
	/* the client's proof */
	assert_int_equal(rmsgi_hello_decode(mock.accept_pdata,
					    mock.accept_pdata_len, &sh),
			 0);
	assert_int_equal(sh.nonce_len, RMSGI_NONCE_SIZE);
	memset(proof, 0x24, RMSGI_NONCE_SIZE);
	rmsgi_auth_client_mac(&t->cfg->v, sh.nonce, proof, &ch,
			      proof + RMSGI_NONCE_SIZE);
	n = (size_t)mock.n_sent;
	peer_frame(t, RMSGI_T_AUTH, 0, 0, 0, sizeof(proof), proof,
		   sizeof(proof));
	pump(t);
	assert_non_null(accepted);
	assert_int_equal(t->closed, 0);
	assert_int_equal(mock.n_qp_remote, 1);
	assert_int_equal(mock.qp_access,
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	/* granted before the server's proof was posted */
	assert_int_equal(mock.qp_remote_sent, (int)n);
	assert_true(mock.n_sent > (int)n);
}

/* a wrong proof: the rights are never granted */
static void auth__qp_rights_server_bad_proof(void **state)
{
	static const char key[] = "0123456789abcdef0123456789abcdef";
	uint8_t buf[RMSGI_HELLO_MAX], proof[RMSGI_NONCE_SIZE + RMSGI_MAC_SIZE];
	struct rt *t = *state;
	struct rdma_cm_id *id;
	size_t n;

	assert_int_equal(rmsg_cfg_set_psk(t->cfg, key, sizeof(key) - 1), 0);
	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://0.0.0.0:7471", t->cfg,
				     &ops, accept_cb, t, &t->l),
			 0);
	peer_hello_flags = RMSGI_HELLO_F_AUTH;
	n = hello(buf, 16, 4096, 0, "abc");
	id = mock_cm_push_request(mock.last_id, buf, n);
	accepted = NULL;
	cm_deliver(t);
	t->qpn = mock.last_qp->qp.qp_num;
	cm_event(t, id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	memset(proof, 0x24, sizeof(proof));
	peer_frame(t, RMSGI_T_AUTH, 0, 0, 0, sizeof(proof), proof,
		   sizeof(proof));
	pump(t);
	assert_null(accepted);
	assert_int_equal(mock.n_qp_remote, 0);
}

/* the client's QP refuses RTR on the server's answer: the connection
 * fails, and is not completed (no rdma_establish) */
static void connect__qp_not_ready(void **state)
{
	struct rt *t = *state;
	uint8_t buf[64];

	start_connect(t);
	mock.modify_fail_to = IBV_QPS_RTR + 1;
	cm_event(t, t->id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, buf,
		 hello(buf, 16, 4096, 0, NULL));
	assert_int_equal(mock.n_establish, 0);
	assert_int_equal(t->established, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EINVAL);
}

/* the server's: refused before rdma_accept, the QP and id gone */
static void accept__qp_not_ready(void **state)
{
	struct rt *t = *state;
	uint8_t buf[64];

	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://0.0.0.0:7471", t->cfg,
				     &ops, accept_cb, t, &t->l),
			 0);
	mock.modify_fail_to = IBV_QPS_RTS + 1;
	mock_cm_push_request(mock.last_id, buf, hello(buf, 16, 4096, 0, "abc"));
	cm_deliver(t);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_accept, 0);
	assert_int_equal(mock.n_reject, 1);
	assert_int_equal(mock.live_qp, 0);
	assert_int_equal(mock.live_id, 1);
	assert_int_equal(t->established, 0);
}

/* without a key: rights as rdma_cm gives them (its INIT attributes),
 * through the same path: our QP, RTS, then rdma_establish() */
static void auth__qp_rights_keyless(void **state)
{
	struct rt *t = *state;

	connect_peer(t, 32, 8192);
	assert_int_equal(mock.n_rdmacm_modify, 0);
	assert_int_equal(mock.n_establish, 1);
	assert_int_equal(mock.establish_qp_state, IBV_QPS_RTS);
	assert_true(mock.n_qp_remote > 0);
	assert_int_equal(mock.qp_access,
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
}

static int acc_sends, acc_send_status;

static void acc_send_done(struct rmsg_conn *c, int status, void *arg)
{
	(void)c, (void)arg;
	acc_sends++;
	acc_send_status = status;
}

/* the app accepts, and queues a send on the connection */
static int accept_send_cb(struct rmsg_listener *l, struct rmsg_conn *c,
			  const void *pdata, size_t len, void *arg)
{
	struct rt *t = arg;
	struct iovec iov = {.iov_base = "x", .iov_len = 1};

	(void)l, (void)pdata, (void)len;
	t->c = c;
	assert_int_equal(rmsg_send(c, &iov, 1, acc_send_done, NULL), 0);
	return 0;
}

/* the app accepted (and queued a send) when rdma_accept() fails (the
 * client gave up on its request): the connection ends as an accepted
 * one, its send's callback and then on_close run once each. It went
 * silently before: no on_close, the send's callback never ran, and the
 * app's pointer dangled (found by a review) */
static void accept__fails_after_app_accepted(void **state)
{
	struct rt *t = *state;
	uint8_t buf[64];

	acc_sends = 0;
	rt_ctx(t);
	assert_int_equal(rmsg_listen(t->ctx, "rdma://0.0.0.0:7471", t->cfg,
				     &ops, accept_send_cb, t, &t->l),
			 0);
	mock.accept_errno = EINVAL;
	mock_cm_push_request(mock.last_id, buf, hello(buf, 16, 4096, 0, "abc"));
	cm_deliver(t);
	pump(t);
	assert_int_equal(mock.n_reject, 1);
	assert_int_equal(acc_sends, 1);
	assert_true(acc_send_status < 0);
	assert_int_equal(t->closed, 1);
	assert_true(t->close_reason < 0);
	assert_int_equal(t->established, 0);
	assert_int_equal(t->ctx->st.conns_accepted, 1);
	t->c = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(connect__handshake),
		T(connect__second_conn_shares_device),
		T(connect__bad_hello_in_established),
		T(connect__cm_errors),
		T(connect__rejected_with_reason),
		T(connect__rejected_after_up),
		T(connect__device_setup_failure),
		T(connect__query_device_failure),
		T(connect__no_rdma_stack),
		T(connect__resolved_address),
		T(connect__resolve_failure),
		T(connect__timeout),
		T(connect__qp_fallback),
		T(accept__handshake),
		T(accept__reject),
		T(accept__fails_after_app_accepted),
		T(accept__bad_hello),
		T(accept__over_limits),
		T(accept__first_frame_before_established),
		T(accept__addresses),
		T(connect__addresses_not_ip),
		T(bound__peer_eager_clamped),
		T(auth__qp_rights_closed),
		T(auth__qp_rights_keyless),
		T(auth__qp_rights_server),
		T(auth__qp_rights_server_bad_proof),
		T(connect__qp_not_ready),
		T(accept__qp_not_ready),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
