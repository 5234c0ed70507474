// SPDX-License-Identifier: MIT
/*
 * rdma.c - the rdma_cm + verbs RC backend (rdma.h tells its design and
 * where each concern lives): its op tables, all the core reaches of it
 * (registry.c).
 */
#include "rdma.h"

static const struct rmsgi_tr_ctx_ops rdma_ctx_ops = {
	.stop = rdma_ctx_stop,
	.fini = rdma_ctx_fini,
	.poll = rdma_poll,
};

static const struct rmsgi_tr_listener_ops rdma_listener_ops = {
	.listen = rdma_listen_op,
	.close = rdma_listen_close,
	.adopt = rdma_adopt_op,
	.drop = rdma_drop_op,
};

static const struct rmsgi_tr_conn_ops rdma_conn_ops = {
	.connect = rdma_connect_op,
	.disconnect = rdma_disconnect_op,
	.post = rdma_post,
	.send_direct = rdma_send_direct,
	.direct_max = rdma_direct_max,
	.kick = rdma_kick,
	.rndv_release = rdma_rndv_release,
	.addrs = rdma_addrs_op,
	.grant = rdma_grant_op,
	.rma_open = rdma_rma_open_op,
	.rebind = rdma_rebind_op,
};

const struct rmsgi_tr rmsgi_tr_rdma = {
	.name = "rdma",
	.caps = RDMA_CAPS,
	.ctx = &rdma_ctx_ops,
	.lst = &rdma_listener_ops,
	.conn = &rdma_conn_ops,
};
