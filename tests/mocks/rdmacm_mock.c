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

/* ids whose connection exchange has begun (a request's, or one that
 * called rdma_connect): rdma_cm's INIT attributes carry remote rights
 * only for those */
#define BEGUN_MAX 256
static struct rdma_cm_id *begun[BEGUN_MAX];

static void begun_set(struct rdma_cm_id *id, bool on)
{
	int i, free_i = -1;

	for (i = 0; i < BEGUN_MAX; i++) {
		if (begun[i] == id) {
			if (!on)
				begun[i] = NULL;
			return;
		}
		if (!begun[i] && free_i < 0)
			free_i = i;
	}
	if (on && free_i >= 0)
		begun[free_i] = id;
}

static bool begun_is(const struct rdma_cm_id *id)
{
	int i;

	for (i = 0; i < BEGUN_MAX; i++)
		if (begun[i] == id)
			return true;
	return false;
}

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
	begun_set(id, true);
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
			begun_set(e->ev.id, false);
			free(e->ev.id);
			mock.live_id--;
		}
		free(e);
		mock.live_ev--;
	}
	evq_tail = &evq;
	memset(begun, 0, sizeof(begun));
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

/* the device list: dev.c reads it only to have librdmacm let go of a
 * removed device; an empty list does */
struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **l = calloc(1, sizeof(*l));

	if (num_devices)
		*num_devices = 0;
	mock.get_devices++;
	return l;
}

void rdma_free_devices(struct ibv_context **list)
{
	free(list);
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
	begun_set(id, false);
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

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
		      int *qp_attr_mask)
{
	enum ibv_qp_state st = qp_attr->qp_state;

	mock.n_init_qp_attr++;
	memset(qp_attr, 0, sizeof(*qp_attr));
	qp_attr->qp_state = st;
	switch (st) {
	case IBV_QPS_INIT:
		qp_attr->port_num = 1;
		if (begun_is(id))
			qp_attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ;
		*qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTR:
		qp_attr->path_mtu = IBV_MTU_1024;
		qp_attr->dest_qp_num = 0x99;
		qp_attr->max_dest_rd_atomic = 16;
		qp_attr->min_rnr_timer = 12;
		*qp_attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER;
		return 0;
	case IBV_QPS_RTS:
		qp_attr->timeout = 14;
		qp_attr->retry_cnt = 6;
		qp_attr->rnr_retry = 6;
		qp_attr->max_rd_atomic = 16;
		*qp_attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		errno = EINVAL;
		return -1;
	}
}

/* librdmacm's own transition of the id's QP to @st */
static void cm_qp_move(struct rdma_cm_id *id, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;
	int mask;

	a.qp_state = st;
	if (rdma_init_qp_attr(id, &a, &mask) == 0 &&
	    ibv_modify_qp(id->qp, &a, mask) == 0)
		mock.n_rdmacm_modify++;
}

static void cm_qp_ready(struct rdma_cm_id *id)
{
	cm_qp_move(id, IBV_QPS_INIT);
	cm_qp_move(id, IBV_QPS_RTR);
	cm_qp_move(id, IBV_QPS_RTS);
}

static int qp_state_of(uint32_t qpn)
{
	struct mock_qp *q = mock_qp_by_num(qpn);

	return q ? (int)q->qp.state : -1;
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
	cm_qp_move(id, IBV_QPS_INIT);
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
	begun_set(id, true);
	copy_pdata(mock.connect_pdata, &mock.connect_pdata_len,
		   param->private_data, param->private_data_len);
	mock.connect_qpn = id->qp ? id->qp->qp_num : param->qp_num;
	mock.connect_srq = id->qp ? id->qp->srq != NULL : param->srq;
	mock.connect_qp_state = qp_state_of(mock.connect_qpn);
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
	if (id->qp)
		cm_qp_ready(id);
	copy_pdata(mock.accept_pdata, &mock.accept_pdata_len,
		   param->private_data, param->private_data_len);
	mock.accept_qpn = id->qp ? id->qp->qp_num : param->qp_num;
	mock.accept_srq = id->qp ? id->qp->srq != NULL : param->srq;
	mock.accept_qp_state = qp_state_of(mock.accept_qpn);
	return 0;
}

int rdma_establish(struct rdma_cm_id *id)
{
	if (id->qp) { /* rdma_establish(3): not with the id's own QP */
		errno = EINVAL;
		return -1;
	}
	mock.n_establish++;
	mock.establish_qp_state = qp_state_of(mock.connect_qpn);
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
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_RESPONSE && e->ev.id->qp &&
	    !e->ev.status) {
		/* librdmacm completes it for the id's own QP */
		cm_qp_ready(e->ev.id);
		e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
	}
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
