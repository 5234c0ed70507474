// SPDX-License-Identifier: MIT
/*
 * unit tests of native one-sided operations (src/transport/rdma/rma.c):
 * split writes' immediates and writes beyond 4 GiB.
 */
#include "harness.h"

static int imms;

static size_t imm_len;

static void imm_cb(struct rmsg_conn *c, uint32_t imm, size_t len, void *arg)
{
	imms++;
	imm_len = len;
}

/* an IMM frame claims the length of a split write: up to the largest
 * export this peer was granted to write, never more; a writable region
 * not exported to it (the last case) grants nothing (issue 30) */
static void bound__imm_length(void **state)
{
	static const uint64_t lens[] = {65536, 65537, (uint64_t)1 << 40, 4096};
	uint8_t d[RMSG_MR_DESC_SIZE];
	size_t i;

	teardown(state);
	for (i = 0; i < UNIT_ARRAY_SIZE(lens); i++) {
		struct rt *t = rt_new();
		static uint8_t region[65536], rd[1 << 17];
		struct rmsg_mr *mr, *mr2;

		rt_ctx(t);
		assert_int_equal(rmsg_mr_reg(t->ctx, region, sizeof(region),
					     RMSG_ACCESS_REMOTE_WRITE, &mr),
				 0);
		/* larger, but not writable by the peer */
		assert_int_equal(rmsg_mr_reg(t->ctx, rd, sizeof(rd),
					     RMSG_ACCESS_REMOTE_READ, &mr2),
				 0);
		if (i < 3)
			assert_int_equal(
				rmsg_mr_export(mr, NULL, 0, 0,
					       RMSG_ACCESS_REMOTE_WRITE |
						       RMSG_EXPORT_ANY_PEER,
					       d),
				0);
		imms = 0;
		assert_int_equal(
			rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &t->c), 0);
		t->c->ops.on_imm = imm_cb;
		{
			uint8_t buf[64];

			t->id = mock.last_id;
			cm_event(t, t->id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL,
				 0);
			cm_event(t, t->id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0,
				 NULL, 0);
			t->qpn = mock.last_qp->qp.qp_num;
			cm_event(t, t->id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0,
				 buf, hello(buf, 32, 8192, 0, NULL));
		}
		peer_frame(t, RMSGI_T_IMM, 0, 5, lens[i], 0, NULL, 0);
		pump(t);
		if (i == 0) {
			assert_int_equal(imms, 1);
			assert_int_equal(imm_len, 65536);
			assert_int_equal(t->closed, 0);
			assert_int_equal(rmsg_conn_close(t->c), 0);
		} else {
			assert_int_equal(imms, 0);
			assert_int_equal(t->closed, 1);
			assert_int_equal(t->close_reason, -EPROTO);
		}
		assert_int_equal(rmsg_mr_dereg(mr), 0);
		assert_int_equal(rmsg_mr_dereg(mr2), 0);
		assert_true(rt_free(t));
	}
	*state = rt_new();
}

/* a one-sided write of more than 4 GiB: work requests cut at the port's
 * message size, and never above 2 GiB whatever the port says, so no SGE
 * length is cut to 32 bits */
static void bound__rma_over_4gib(void **state)
{
	struct rt *t = *state;
	const size_t len = ((size_t)5 << 30) + 777;
	struct rmsgi_desc d = {.access = RMSG_ACCESS_REMOTE_WRITE,
			       .flags = RMSGI_DESC_F_RKEY,
			       .token = 9,
			       .rkey = 0x55,
			       .addr = 0x100000,
			       .len = (uint64_t)8 << 30};
	uint8_t desc[RMSG_MR_DESC_SIZE];
	struct iovec iov;
	uint64_t sum = 0, k;
	uint8_t *big;
	int i, status = 1;

	big = mmap(NULL, len, PROT_READ,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (big == MAP_FAILED)
		skip();
	mock.max_msg_sz = UINT32_MAX;
	assert_int_equal(rmsg_cfg_set_max_msg_size(t->cfg, (size_t)8 << 30), 0);
	assert_int_equal(rmsg_cfg_set_reg_limit(t->cfg, (size_t)8 << 30), 0);
	connect_peer(t, 32, 8192);
	rmsgi_desc_encode(&d, desc);
	iov.iov_base = big;
	iov.iov_len = len;
	assert_int_equal(rmsg_write(t->c, &iov, 1, desc, 0, done_cb, (void *)7),
			 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 3);
	for (i = 0; i < mock.n_sent; i++) {
		const struct mock_send_wr *w = &mock.sent[i];

		assert_int_equal(w->opcode, IBV_WR_RDMA_WRITE);
		assert_int_equal(w->remote_addr, 0x100000 + sum);
		assert_int_equal(w->rkey, 0x55);
		for (k = 0; k < (uint64_t)w->num_sge; k++) {
			assert_true(w->sge[k].length <= (1u << 31));
			sum += w->sge[k].length;
		}
	}
	assert_int_equal(sum, len);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 7, &status), 1);
	assert_int_equal(status, 0);
	munmap(big, len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(bound__imm_length),
		T(bound__rma_over_4gib),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
