// SPDX-License-Identifier: MIT
/*
 * fake_registry.c - the registry of the core's tests: the fake transport
 * (fake_tr.h) under its id, for every scheme; no other backend exists,
 * so auto:// has nothing to fall back to and never asks for TCP.
 */
#include "fake_tr.h"

const struct rmsgi_tr *rmsgi_tr_get(unsigned id)
{
	return id == fake_tr.id ? &fake_tr : NULL;
}

int rmsgi_tr_for_scheme(enum rmsgi_scheme s,
			const struct rmsgi_tr *v[RMSGI_TR_COUNT])
{
	(void)s;
	v[0] = &fake_tr;
	return 1;
}
