/* SPDX-License-Identifier: MIT */
/*
 * mock.h - control and inspection of the libibverbs and librdmacm mocks.
 *
 * verbs_mock.c and rdmacm_mock.c replace the two libraries at link time.
 * The data path verbs (ibv_post_send, ibv_post_srq_recv, ibv_poll_cq,
 * ibv_req_notify_cq) are static inline in <infiniband/verbs.h> and
 * dispatch through context->ops; every object the mocks create points at
 * one fake struct ibv_context whose ops are the mock's functions.
 *
 * The mock device keeps, per QP, the send work requests posted and not yet
 * completed, one FIFO of receives posted to the SRQ, and one completion
 * queue that the test fills (mock_complete_sends, mock_recv, mock_push_wc)
 * and the code under test drains with ibv_poll_cq. Every object created is
 * counted, so a test can check that everything was destroyed.
 */
#ifndef RMSG_MOCK_H
#define RMSG_MOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MOCK_SGE_MAX 32
#define MOCK_CAPTURE 512   /* bytes of each send gathered at post time */
#define MOCK_SENT_MAX 1024 /* history of posted send WRs */
#define MOCK_OUT_MAX 1024  /* outstanding send WRs per QP */
#define MOCK_SRQ_MAX 32768
#define MOCK_CQ_MAX 4096
#define MOCK_BATCH_MAX 256
#define MOCK_PDATA_MAX 256

/* a send work request as the mock device saw it when it was posted */
struct mock_send_wr {
	uint64_t wr_id;
	uint32_t qp_num;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	int num_sge;
	struct ibv_sge sge[MOCK_SGE_MAX];
	uint64_t remote_addr;
	uint32_t rkey;
	/* IBV_WR_BIND_MW: the window, its new key and what it covers */
	struct ibv_mw *mw;
	uint32_t mw_rkey;
	struct ibv_mr *mw_mr;
	uint64_t mw_addr, mw_len;
	unsigned int mw_access;
	size_t total;		    /* bytes described by the SGEs */
	uint8_t data[MOCK_CAPTURE]; /* gathered at post time */
};

struct mock_recv_wr {
	uint64_t wr_id;
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct mock_qp {
	struct ibv_qp qp;
	struct ibv_qp_init_attr attr; /* as granted */
	struct mock_send_wr *out;     /* posted, not completed: a ring */
	unsigned int out_head, out_n;
	struct mock_qp *next;
};

struct mock_state {
	/* so many RDMA READs complete with success without writing a byte
	 * (as rxe did under load: recv.c's read canary) */
	int reads_unwritten;
	/* --- failure injection: a nonzero value makes the call fail --- */
	int query_device_ret; /* positive errno */
	bool alloc_pd_fail;
	bool create_cq_fail;
	bool create_srq_fail;
	bool create_comp_channel_fail;
	int reg_mr_fail_at;    /* the n-th ibv_reg_mr from now fails */
	int reg_mr_errno;      /* errno of that failure */
	int post_send_ret;     /* next ibv_post_send returns this once */
	int post_send_bad;     /* ... reporting the n-th WR as bad */
	int post_srq_recv_ret; /* next ibv_post_srq_recv, once */
	int create_qp_fail;    /* so many QP creations (either call) fail */
	int cm_channel_errno;  /* rdma_create_event_channel */
	int getaddrinfo_errno; /* rdma_getaddrinfo */
	int n_getaddrinfo;     /* rdma_getaddrinfo calls */
	int connect_errno;     /* rdma_connect */
	int accept_errno;      /* rdma_accept */
	int modify_fail_to;    /* ibv_modify_qp to state n - 1 fails */

	/* --- device limits --- */
	uint32_t max_inline; /* rdma_create_qp fails above it */
	uint32_t max_send_sge;
	uint32_t srq_max_wr;
	/* ibv_query_device's max_srq, max_cq (0: not reported) and max_cqe
	 * (0: 65535) */
	uint32_t max_srq, max_cq, max_cqe;
	uint32_t max_msg_sz; /* port attribute */
	uint32_t max_qp_rd_atom;
	bool flush_on_error; /* QP to ERR flushes outstanding WRs */
	bool mw_type2;	     /* device_cap_flags: MEM_WINDOW_TYPE_2B */

	/* --- what happened --- */
	int n_post_send; /* ibv_post_send calls */
	int last_chain;	 /* WRs in the last ibv_post_send call */
	struct mock_send_wr sent[MOCK_SENT_MAX]; /* every send WR */
	int n_sent;
	int n_post_srq_recv;	       /* ibv_post_srq_recv calls */
	int srq_batch[MOCK_BATCH_MAX]; /* WRs per ibv_post_srq_recv call */
	int n_req_notify;
	int n_reg_mr, n_dereg_mr;
	int n_reg_remote_read; /* registrations for remote read */
	int n_modify_err;      /* QPs moved to the error state */
	int min_rnr_timer;     /* last IBV_QP_MIN_RNR_TIMER set, or -1 */
	int n_qp_access;       /* IBV_QP_ACCESS_FLAGS modifies (any step) */
	int qp_access;	       /* the last qp_access_flags set */
	int qp_access_sent;    /* n_sent when it was set */
	/* modifies (state transitions included) whose qp_access_flags
	 * carry a remote right, and n_sent at the first of them */
	int n_qp_remote;
	int qp_remote_sent;
	int n_cq_acked;
	int cq_events; /* pending for ibv_get_cq_event */
	int n_bad_sge; /* SGEs outside a registered MR, ... */
	/* sends not inline whose bytes changed between their post and
	 * their completion (the device reads them in between) */
	int n_changed_before_read;
	int n_bad_inline; /* inline sends above max_inline_data */
	int n_cq_overflow;
	int n_id_with_qp; /* rdma_destroy_id before destroy_qp */
	int n_alloc_mw, n_dealloc_mw;
	int n_reg_mw_bind; /* registrations with IBV_ACCESS_MW_BIND */
	int n_qp_with_mw;  /* a QP destroyed with windows allocated */

	/* librdmacm */
	int n_connect, n_accept, n_reject, n_disconnect;
	int n_establish;     /* rdma_establish */
	int n_init_qp_attr;  /* rdma_init_qp_attr */
	int n_rdmacm_modify; /* QP transitions librdmacm itself made */
	/* the QP rdma_connect/rdma_accept announced (the id's, or
	 * conn_param's qp_num without one), whether it uses an SRQ, and its
	 * state at the call (-1: no such QP); the state of the connect's QP
	 * when rdma_establish ran */
	uint32_t connect_qpn, accept_qpn;
	bool connect_srq, accept_srq;
	int connect_qp_state, accept_qp_state, establish_qp_state;
	int n_resolve_addr, n_resolve_route, n_listen;
	/* last rdma_resolve_addr: the destination (IPv4 only), and whether
	 * it had a source */
	uint32_t resolve_dst4; /* host order */
	uint16_t resolve_port;
	bool resolve_src;
	uint8_t connect_pdata[MOCK_PDATA_MAX]; /* last rdma_connect */
	uint8_t connect_pdata_len;
	uint8_t accept_pdata[MOCK_PDATA_MAX]; /* last rdma_accept */
	uint8_t accept_pdata_len;
	uint8_t reject_pdata[MOCK_PDATA_MAX]; /* last rdma_reject */
	uint8_t reject_pdata_len;
	uint8_t initiator_depth, responder_resources, rnr_retry, retry;
	struct rdma_event_channel *last_ech;
	struct rdma_cm_id *last_id; /* last rdma_create_id */
	struct ibv_cq *last_cq;
	struct mock_qp *last_qp;
	uint16_t src_port; /* rdma_get_src_port, host order */

	/* --- live objects, for leak checks --- */
	int live_pd, live_cq, live_srq, live_cch, live_mr, live_qp, live_mw;
	int live_ech, live_id, live_ai, live_ev;
	int get_devices; /* rdma_get_devices() calls (dev.c: a device let go) */
};

extern struct mock_state mock;

/* resets every knob, record and queue; call before each test */
void mock_reset(void);
/* true if every object the mocks created was destroyed */
bool mock_all_released(void);
/* prints the live counters (for a failing leak check) */
void mock_print_live(void);

/* the fake device context every object points at */
struct ibv_context *mock_verbs(void);

/* --- the device --- */

struct mock_qp *mock_qp_by_num(uint32_t qpn);
/* send WRs posted on @qpn and not yet completed */
unsigned int mock_outstanding(uint32_t qpn);
/* the oldest outstanding send WR of @qpn, or NULL */
const struct mock_send_wr *mock_out_peek(uint32_t qpn, unsigned int i);
/* completes the @n oldest outstanding send WRs of @qpn (all if n < 0):
 * all but the last succeed (a WC only if signalled), the last ends with
 * @status (a WC if signalled or failed). A successful RDMA READ copies
 * from its remote address, which a test points at its own memory.
 * Returns the number completed. */
int mock_complete_sends(uint32_t qpn, int n, enum ibv_wc_status status);
/* a frame arrived on @qpn: fills the oldest posted SRQ receive and queues
 * its completion. Returns 0, or -1 if no receive is posted or it is too
 * small. */
int mock_recv(uint32_t qpn, const void *frame, size_t len);
/* a receive completion with an error status (consumes a posted receive) */
int mock_recv_error(uint32_t qpn, enum ibv_wc_status status);
/* receives posted to the SRQ and not consumed */
unsigned int mock_srq_posted(void);
const struct mock_recv_wr *mock_srq_peek(unsigned int i);
void mock_push_wc(const struct ibv_wc *wc);
unsigned int mock_cq_len(void);

/* --- librdmacm --- */

/*
 * Like librdmacm, the mock moves a QP made by rdma_create_qp itself: to
 * INIT at creation, again to INIT then RTR and RTS inside rdma_accept(),
 * and, on the active side, when it fetches RDMA_CM_EVENT_CONNECT_RESPONSE
 * (which it then reports as RDMA_CM_EVENT_ESTABLISHED), each step with
 * rdma_init_qp_attr()'s attributes. Tests answer a client's connect with
 * CONNECT_RESPONSE, which the code under test sees as such only for a
 * QP that is not the id's (then it must call rdma_establish). The INIT
 * attributes carry remote write and read once the connection exchange
 * has begun (a request's id, or after rdma_connect), as rdma_cm's do.
 */

/* queues a CM event for @id on the last event channel */
void mock_cm_push(struct rdma_cm_id *id, enum rdma_cm_event_type type,
		  int status, const void *pdata, size_t len);
/* queues a connect request on @listen_id from a new id, which it returns */
struct rdma_cm_id *mock_cm_push_request(struct rdma_cm_id *listen_id,
					const void *pdata, size_t len);
/* CM events queued, not yet fetched */
unsigned int mock_cm_pending(void);
/* frees queued events (and the ids of unfetched requests) */
void mock_cm_drop(void);

#endif /* RMSG_MOCK_H */
