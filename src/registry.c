// SPDX-License-Identifier: MIT
/*
 * registry.c - the lookups over the registry's rows (registry.h; the rows
 * themselves are in transport/registry.c) and the check of every
 * backend's required ops, once, when the library is loaded: a backend
 * that lacks one is a build mistake, found before any connection.
 */
#include <stdio.h>
#include <stdlib.h>

#include "rmsg_int.h"

/* filled from the rows when the library is loaded */
static const struct rmsgi_tr *by_id[RMSGI_TR_COUNT];

const char *rmsgi_tr_missing(const struct rmsgi_tr *tr)
{
	const struct rmsgi_tr_conn_ops *c = tr->conn;

	if (!tr->name)
		return "name";
	if (!tr->ctx || !tr->ctx->fini)
		return "ctx.fini";
	if (!tr->lst || !tr->lst->listen)
		return "lst.listen";
	if (!tr->lst->close)
		return "lst.close";
	if (!tr->lst->adopt != !tr->lst->drop)
		return "lst.adopt and lst.drop";
	if (!c || !c->connect)
		return "conn.connect";
	if (!c->disconnect)
		return "conn.disconnect";
	if (!c->post)
		return "conn.post";
	if (!c->addrs)
		return "conn.addrs";
	if (c->send_direct && !c->direct_max)
		return "conn.direct_max";
	if ((tr->caps & RMSGI_TR_CAP_RNDV) && !c->rndv_release)
		return "conn.rndv_release";
	return NULL;
}

static const struct rmsgi_tr_row *row_of(enum rmsgi_scheme s)
{
	const struct rmsgi_tr_row *r;

	for (r = rmsgi_tr_rows; r->tr; r++)
		if (r->scheme == s)
			return r;
	return NULL;
}

__attribute__((constructor)) static void registry_check(void)
{
	const struct rmsgi_tr_row *r;

	for (r = rmsgi_tr_rows; r->tr; r++) {
		const struct rmsgi_tr *tr = r->tr;
		const char *miss = rmsgi_tr_missing(tr);

		if (!miss && tr->id >= RMSGI_TR_COUNT)
			miss = "id";
		if (!miss && by_id[tr->id] && by_id[tr->id] != tr)
			miss = "id (taken by another backend)";
		if (!miss && r->next != RMSGI_SCHEME_NONE && !row_of(r->next))
			miss = "next (no row for that scheme)";
		if (miss) {
			fprintf(stderr, "librmsg: transport %s: no %s\n",
				tr->name ? tr->name : "?", miss);
			abort();
		}
		by_id[tr->id] = tr;
	}
}

const struct rmsgi_tr *rmsgi_tr_get(unsigned id)
{
	return id < RMSGI_TR_COUNT ? by_id[id] : NULL;
}

int rmsgi_tr_for_scheme(enum rmsgi_scheme s,
			const struct rmsgi_tr *v[RMSGI_TR_COUNT])
{
	const struct rmsgi_tr_row *r = row_of(s);
	int n = 0;

	while (r && n < RMSGI_TR_COUNT) {
		v[n++] = r->tr;
		r = r->next == RMSGI_SCHEME_NONE ? NULL : row_of(r->next);
	}
	return n;
}
