// SPDX-License-Identifier: MIT
/*
 * registry.c - the one place that names the backends: one row per URI
 * scheme (registry.h). A new transport is its folder plus one row here:
 * the scheme is parsed from the rows, and the backend's slot in a context
 * is assigned from them when the library is loaded.
 */
#include "../registry.h"

extern const struct rmsgi_tr rmsgi_tr_rdma;
extern const struct rmsgi_tr rmsgi_tr_tcp;
extern const struct rmsgi_tr rmsgi_tr_shm;

const struct rmsgi_tr_row rmsgi_tr_rows[] = {
	{"rdma", &rmsgi_tr_rdma, NULL},
	{"tcp", &rmsgi_tr_tcp, NULL},
	/* two processes on one host: shared memory */
	{"shm", &rmsgi_tr_shm, NULL},
	/* shared memory to a peer on this host that listens through it, else
	 * RDMA where it can, TCP where it cannot */
	{"auto", &rmsgi_tr_shm, "rdma+tcp"},
	/* auto:// without the same-host step */
	{"rdma+tcp", &rmsgi_tr_rdma, "tcp"},
	{NULL, NULL, NULL},
};
