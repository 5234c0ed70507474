// SPDX-License-Identifier: MIT
/*
 * registry.c - the lookups over the registry's rows (registry.h; the rows
 * themselves are in transport/registry.c) and their check, once, when
 * the library is loaded: every backend's required ops, one row per
 * scheme, each next naming a row, no chain naming a backend twice, and
 * at most RMSGI_TR_MAX backends, which get their slots here in the order
 * the rows first name them. A row that fails is a build mistake, found
 * before any connection.
 */
#include <stdio.h>
#include <stdlib.h>

#include "rmsg_int.h"

const struct rmsgi_tr *rmsgi_tr_by_slot[RMSGI_TR_MAX];
unsigned rmsgi_tr_nslots;

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

static const struct rmsgi_tr_row *row_in(const struct rmsgi_tr_row *rows,
					 const char *s, size_t len)
{
	const struct rmsgi_tr_row *r;

	for (r = rows; r->tr; r++)
		if (!strncmp(r->scheme, s, len) && r->scheme[len] == '\0')
			return r;
	return NULL;
}

const struct rmsgi_tr_row *rmsgi_tr_row(const char *s, size_t len)
{
	return row_in(rmsgi_tr_rows, s, len);
}

static const struct rmsgi_tr_row *next_in(const struct rmsgi_tr_row *rows,
					  const struct rmsgi_tr_row *r)
{
	return r->next ? row_in(rows, r->next, strlen(r->next)) : NULL;
}

/* @r's chain names no backend twice: it ends, within RMSGI_TR_MAX rows */
static bool chain_ok(const struct rmsgi_tr_row *rows,
		     const struct rmsgi_tr_row *r)
{
	const struct rmsgi_tr *seen[RMSGI_TR_MAX];
	unsigned n = 0, i;

	for (; r; r = next_in(rows, r)) {
		for (i = 0; i < n; i++)
			if (seen[i] == r->tr)
				return false;
		if (n == RMSGI_TR_MAX)
			return false;
		seen[n++] = r->tr;
	}
	return true;
}

const char *rmsgi_tr_rows_check(const struct rmsgi_tr_row *rows,
				const struct rmsgi_tr *by_slot[RMSGI_TR_MAX],
				unsigned *nslots, const char **name)
{
	const struct rmsgi_tr_row *r;
	unsigned n = 0, i;

	for (r = rows; r->tr; r++) {
		const char *miss = rmsgi_tr_missing(r->tr);

		*name = r->tr->name ? r->tr->name : "?";
		if (miss)
			return miss;
		if (!r->scheme || !r->scheme[0])
			return "scheme";
		if (row_in(rows, r->scheme, strlen(r->scheme)) != r)
			return "scheme of its own (another row has it)";
		if (r->next && !row_in(rows, r->next, strlen(r->next)))
			return "next (no row for that scheme)";
		for (i = 0; i < n && by_slot[i] != r->tr; i++)
			;
		if (i == n) {
			/* the backend's first row: it gets the next slot */
			if (n == RMSGI_TR_MAX)
				return "slot (more backends than RMSGI_TR_MAX)";
			by_slot[n++] = r->tr;
		}
	}
	/* every next named a row: now no chain may loop */
	for (r = rows; r->tr; r++) {
		*name = r->tr->name;
		if (!chain_ok(rows, r))
			return "next (a chain that names a backend twice)";
	}
	*nslots = n;
	return NULL;
}

__attribute__((constructor)) static void registry_check(void)
{
	const char *name = "?";
	const char *miss = rmsgi_tr_rows_check(rmsgi_tr_rows, rmsgi_tr_by_slot,
					       &rmsgi_tr_nslots, &name);

	if (miss) {
		fprintf(stderr, "librmsg: transport %s: no %s\n", name, miss);
		abort();
	}
}

unsigned rmsgi_tr_slot(const struct rmsgi_tr *tr)
{
	unsigned i;

	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (rmsgi_tr_by_slot[i] == tr)
			return i;
	fprintf(stderr, "librmsg: transport %s: no row in the registry\n",
		tr->name);
	abort();
}

int rmsgi_tr_for_scheme(const struct rmsgi_tr_row *r,
			const struct rmsgi_tr *v[RMSGI_TR_MAX])
{
	int n = 0;

	/* the load-time check bounds every chain by RMSGI_TR_MAX */
	for (; r && n < RMSGI_TR_MAX; r = next_in(rmsgi_tr_rows, r))
		v[n++] = r->tr;
	return n;
}
