// SPDX-License-Identifier: MIT
/*
 * fake_registry.c - the registry rows of the core's tests: the fake
 * transport (fake_tr.h) under its id, for every scheme; no other backend
 * exists, so auto:// has nothing to fall back to and never asks for TCP.
 */
#include "fake_tr.h"

const struct rmsgi_tr_row rmsgi_tr_rows[] = {
	{RMSGI_SCHEME_RDMA, &fake_tr, RMSGI_SCHEME_NONE},
	{RMSGI_SCHEME_TCP, &fake_tr, RMSGI_SCHEME_NONE},
	{RMSGI_SCHEME_AUTO, &fake_tr, RMSGI_SCHEME_NONE},
	{0, NULL, 0},
};
