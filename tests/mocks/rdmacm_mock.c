// SPDX-License-Identifier: MIT
/*
 * rdmacm_mock.c - librdmacm replaced at link time. Ids are plain
 * allocations bound to the mock device; events come from a queue the test
 * fills (mock_cm_push); the calls that would talk to a peer only record
 * what they were given. See mock.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "mock.h"

struct mock_qp *mock_qp_new(struct ibv_pd *pd, struct ibv_qp_init_attr *qa);
void mock_qp_free(struct mock_qp *q);
void mock_cm_drop(void);

struct mock_ech {
	struct rdma_event_channel ch;
	int wfd;
};

struct mock_ev {
	struct rdma_cm_event ev;
	uint8_t pdata[MOCK_PDATA_MAX];
	bool request; /* ev.id was made by the mock for a request */
	struct mock_ev *next;
};

static struct mock_ev *evq, **evq_tail = &evq;

static void copy_pdata(uint8_t *dst, uint8_t *len_p, const void *src,
		       size_t len)
{
	if (len > MOCK_PDATA_MAX)
		len = MOCK_PDATA_MAX;
	if (src && len)
		memcpy(dst, src, len);
	*len_p = src ? (uint8_t)len : 0;
}

/* ------------------------------------------------------------------ */
/* test control                                                         */

static struct mock_ev *ev_queue(struct rdma_cm_id *id,
				enum rdma_cm_event_type type, int status,
				const void *pdata, size_t len)
{
	struct mock_ev *e = calloc(1, sizeof(*e));

	if (!e)
		abort();
	e->ev.id = id;
	e->ev.event = type;
	e->ev.status = status;
	if (pdata && len) {
		if (len > MOCK_PDATA_MAX)
			len = MOCK_PDATA_MAX;
		memcpy(e->pdata, pdata, len);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = (uint8_t)len;
	}
	*evq_tail = e;
	evq_tail = &e->next;
	mock.live_ev++;
	return e;
}

void mock_cm_push(struct rdma_cm_id *id, enum rdma_cm_event_type type,
		  int status, const void *pdata, size_t len)
{
	ev_queue(id, type, status, pdata, len);
}

struct rdma_cm_id *mock_cm_push_request(struct rdma_cm_id *listen_id,
					const void *pdata, size_t len)
{
	struct rdma_cm_id *id = calloc(1, sizeof(*id));
	struct mock_ev *e;

	if (!id)
		abort();
	id->verbs = mock_verbs();
	id->channel = listen_id->channel;
	id->ps = listen_id->ps;
	mock.live_id++;
	e = ev_queue(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, pdata, len);
	e->ev.listen_id = listen_id;
	e->request = true;
	return id;
}

unsigned int mock_cm_pending(void)
{
	const struct mock_ev *e;
	unsigned int n = 0;

	for (e = evq; e; e = e->next)
		n++;
	return n;
}

void mock_cm_drop(void)
{
	while (evq) {
		struct mock_ev *e = evq;

		evq = e->next;
		if (e->request) {
			free(e->ev.id);
			mock.live_id--;
		}
		free(e);
		mock.live_ev--;
	}
	evq_tail = &evq;
}

/* ------------------------------------------------------------------ */
/* librdmacm, replaced                                                  */

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct mock_ech *c;
	int fds[2];

	if (mock.cm_channel_errno) {
		errno = mock.cm_channel_errno;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (pipe(fds)) {
		free(c);
		return NULL;
	}
	c->ch.fd = fds[0];
	c->wfd = fds[1];
	mock.last_ech = &c->ch;
	mock.live_ech++;
	return &c->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct mock_ech *c = (struct mock_ech *)channel;

	if (mock.last_ech == channel)
		mock.last_ech = NULL;
	close(c->ch.fd);
	close(c->wfd);
	free(c);
	mock.live_ech--;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps)
{
	struct rdma_cm_id *n = calloc(1, sizeof(*n));

	if (!n) {
		errno = ENOMEM;
		return -1;
	}
	n->verbs = mock_verbs();
	n->channel = channel;
	n->context = context;
	n->ps = ps;
	*id = n;
	mock.last_id = n;
	mock.live_id++;
	return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (id->qp) /* librdmacm leaves the QP to the caller */
		mock.n_id_with_qp++;
	if (mock.last_id == id)
		mock.last_id = NULL;
	free(id);
	mock.live_id--;
	return 0;
}

int rdma_getaddrinfo(const char *node, const char *service,
		     const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *ai;
	struct sockaddr_in *sin;

	mock.n_getaddrinfo++;
	if (mock.getaddrinfo_errno) {
		errno = mock.getaddrinfo_errno;
		return -1;
	}
	ai = calloc(1, sizeof(*ai) + sizeof(*sin));
	if (!ai) {
		errno = ENOMEM;
		return -1;
	}
	sin = (struct sockaddr_in *)(ai + 1);
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)atoi(service ? service : "0"));
	if (!node || inet_pton(AF_INET, node, &sin->sin_addr) != 1)
		sin->sin_addr.s_addr = htonl(0xc0000201); /* 192.0.2.1 */
	ai->ai_family = AF_INET;
	ai->ai_port_space = RDMA_PS_TCP;
	if (hints && (hints->ai_flags & RAI_PASSIVE)) {
		ai->ai_flags = RAI_PASSIVE;
		ai->ai_src_addr = (struct sockaddr *)sin;
		ai->ai_src_len = sizeof(*sin);
	} else {
		ai->ai_dst_addr = (struct sockaddr *)sin;
		ai->ai_dst_len = sizeof(*sin);
	}
	*res = ai;
	mock.live_ai++;
	return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	free(res);
	mock.live_ai--;
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms)
{
	mock.n_resolve_addr++;
	mock.resolve_src = src_addr != NULL;
	mock.resolve_dst4 = 0;
	mock.resolve_port = 0;
	if (dst_addr && dst_addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)dst_addr;

		mock.resolve_dst4 = ntohl(in->sin_addr.s_addr);
		mock.resolve_port = ntohs(in->sin_port);
	}
	return 0;
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	mock.n_resolve_route++;
	return 0;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return 0;
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	mock.n_listen++;
	return 0;
}

uint16_t rdma_get_src_port(struct rdma_cm_id *id)
{
	return htons(mock.src_port);
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct mock_qp *q;

	if (mock.create_qp_fail > 0) {
		mock.create_qp_fail--;
		errno = EINVAL;
		return -1;
	}
	/* like a provider: refuse what the device cannot do */
	if (qp_init_attr->cap.max_inline_data > mock.max_inline ||
	    qp_init_attr->cap.max_send_sge > mock.max_send_sge) {
		errno = EINVAL;
		return -1;
	}
	q = mock_qp_new(pd, qp_init_attr);
	if (!q) {
		errno = ENOMEM;
		return -1;
	}
	id->qp = &q->qp;
	return 0;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id->qp)
		return;
	if (mock.live_mw)
		mock.n_qp_with_mw++;
	mock_qp_free((struct mock_qp *)id->qp);
	id->qp = NULL;
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
		    size_t optlen)
{
	return 0;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	mock.n_connect++;
	if (mock.connect_errno) {
		errno = mock.connect_errno;
		return -1;
	}
	copy_pdata(mock.connect_pdata, &mock.connect_pdata_len,
		   param->private_data, param->private_data_len);
	mock.initiator_depth = param->initiator_depth;
	mock.responder_resources = param->responder_resources;
	mock.rnr_retry = param->rnr_retry_count;
	mock.retry = param->retry_count;
	return 0;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	mock.n_accept++;
	if (mock.accept_errno) {
		errno = mock.accept_errno;
		return -1;
	}
	copy_pdata(mock.accept_pdata, &mock.accept_pdata_len,
		   param->private_data, param->private_data_len);
	return 0;
}

/* group listeners move a request's id between channels */
int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	id->channel = channel;
	return 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data,
		uint8_t private_data_len)
{
	mock.n_reject++;
	copy_pdata(mock.reject_pdata, &mock.reject_pdata_len, private_data,
		   private_data_len);
	return 0;
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	mock.n_disconnect++;
	return 0;
}

int rdma_get_cm_event(struct rdma_event_channel *channel,
		      struct rdma_cm_event **event)
{
	struct mock_ev *e = evq;

	if (!e) {
		errno = EAGAIN;
		return -1;
	}
	evq = e->next;
	if (!evq)
		evq_tail = &evq;
	e->next = NULL;
	e->request = false; /* the code under test owns the id now */
	*event = &e->ev;
	return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	free(event); /* first member of struct mock_ev */
	mock.live_ev--;
	return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		"ADDR_RESOLVED",  "ADDR_ERROR",	     "ROUTE_RESOLVED",
		"ROUTE_ERROR",	  "CONNECT_REQUEST", "CONNECT_RESPONSE",
		"CONNECT_ERROR",  "UNREACHABLE",     "REJECTED",
		"ESTABLISHED",	  "DISCONNECTED",    "DEVICE_REMOVAL",
		"MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
		"TIMEWAIT_EXIT",
	};

	if ((unsigned int)event < sizeof(names) / sizeof(names[0]))
		return names[event];
	return "UNKNOWN";
}
