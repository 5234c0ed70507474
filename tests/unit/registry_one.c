// SPDX-License-Identifier: MIT
/*
 * registry_one.c - the registry rows of a test of one real backend: the
 * backend named by -DUNIT_TR=rmsgi_tr_tcp (or rmsgi_tr_rdma), whose
 * scheme is -DUNIT_SCHEME, is the only one. Its own scheme and auto://
 * reach it (auto:// with one backend has nothing to fall back to); the
 * other scheme is refused as an unknown one.
 */
#include "rmsg_int.h"

#if !defined(UNIT_TR) || !defined(UNIT_SCHEME)
#error "build with -DUNIT_TR=rmsgi_tr_tcp -DUNIT_SCHEME='\"tcp\"' (or rdma)"
#endif

extern const struct rmsgi_tr UNIT_TR;

const struct rmsgi_tr_row rmsgi_tr_rows[] = {
	{UNIT_SCHEME, &UNIT_TR, NULL},
	{"auto", &UNIT_TR, NULL},
	{NULL, NULL, NULL},
};
