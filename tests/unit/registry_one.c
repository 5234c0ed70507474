// SPDX-License-Identifier: MIT
/*
 * registry_one.c - the registry of a test of one real backend: the
 * backend named by -DUNIT_TR=rmsgi_tr_tcp (or rmsgi_tr_rdma) is the only
 * one. Its own scheme and auto:// reach it (auto:// with one backend has
 * nothing to fall back to, so the core never asks for another id); the
 * other scheme is refused as an unknown one.
 */
#include "rmsg_int.h"

#ifndef UNIT_TR
#error "build with -DUNIT_TR=rmsgi_tr_tcp or -DUNIT_TR=rmsgi_tr_rdma"
#endif

extern const struct rmsgi_tr UNIT_TR;

const struct rmsgi_tr *rmsgi_tr_get(unsigned id)
{
	return id == UNIT_TR.id ? &UNIT_TR : NULL;
}

int rmsgi_tr_for_scheme(enum rmsgi_scheme s,
			const struct rmsgi_tr *v[RMSGI_TR_COUNT])
{
	bool mine = s == RMSGI_SCHEME_AUTO ||
		    (s == RMSGI_SCHEME_RDMA && UNIT_TR.id == RMSGI_TR_RDMA) ||
		    (s == RMSGI_SCHEME_TCP && UNIT_TR.id == RMSGI_TR_TCP);

	if (!mine)
		return 0;
	v[0] = &UNIT_TR;
	return 1;
}
