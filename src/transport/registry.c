// SPDX-License-Identifier: MIT
/*
 * registry.c - the one place that names the backends: one row per URI
 * scheme (registry.h). A new transport is its folder plus one row here.
 */
#include "../registry.h"

extern const struct rmsgi_tr rmsgi_tr_rdma;
extern const struct rmsgi_tr rmsgi_tr_tcp;

const struct rmsgi_tr_row rmsgi_tr_rows[] = {
	{RMSGI_SCHEME_RDMA, &rmsgi_tr_rdma, RMSGI_SCHEME_NONE},
	{RMSGI_SCHEME_TCP, &rmsgi_tr_tcp, RMSGI_SCHEME_NONE},
	/* RDMA where it can, TCP where it cannot */
	{RMSGI_SCHEME_AUTO, &rmsgi_tr_rdma, RMSGI_SCHEME_TCP},
	{0, NULL, 0},
};
