// SPDX-License-Identifier: MIT
/*
 * registry.c - the one place that names the backends. The core finds a
 * backend here, by id or by URI scheme, and reaches it only through its
 * op tables (transport.h).
 */
#include "rmsg_int.h"

extern const struct rmsgi_tr rmsgi_tr_rdma;
extern const struct rmsgi_tr rmsgi_tr_tcp;

static const struct rmsgi_tr *const registry[RMSGI_TR_COUNT] = {
	[RMSGI_TR_RDMA] = &rmsgi_tr_rdma,
	[RMSGI_TR_TCP] = &rmsgi_tr_tcp,
};

const struct rmsgi_tr *rmsgi_tr_get(unsigned id)
{
	return id < RMSGI_TR_COUNT ? registry[id] : NULL;
}

int rmsgi_tr_for_scheme(enum rmsgi_scheme s,
			const struct rmsgi_tr *v[RMSGI_TR_COUNT])
{
	switch (s) {
	case RMSGI_SCHEME_RDMA:
		v[0] = registry[RMSGI_TR_RDMA];
		return 1;
	case RMSGI_SCHEME_TCP:
		v[0] = registry[RMSGI_TR_TCP];
		return 1;
	case RMSGI_SCHEME_AUTO:
		/* RDMA where it can, TCP where it cannot */
		v[0] = registry[RMSGI_TR_RDMA];
		v[1] = registry[RMSGI_TR_TCP];
		return 2;
	}
	return 0;
}
