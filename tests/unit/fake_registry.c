// SPDX-License-Identifier: MIT
/*
 * fake_registry.c - the registry rows of the core's tests: the fake
 * transport (fake_tr.h) for every scheme, in the one slot; no other backend
 * exists, so auto:// has nothing to fall back to and never asks for TCP.
 */
#include "fake_tr.h"

const struct rmsgi_tr_row rmsgi_tr_rows[] = {
	{"rdma", &fake_tr, NULL},
	{"tcp", &fake_tr, NULL},
	{"auto", &fake_tr, NULL},
	{NULL, NULL, NULL},
};
