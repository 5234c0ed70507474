/* SPDX-License-Identifier: MIT */
/*
 * uri.h - a parsed URI (uri.c) and the addresses the core resolved for
 * it (resolve.c).
 */
#ifndef RMSG_URI_H
#define RMSG_URI_H

#include "base.h"

struct rmsgi_tr_row;

struct rmsgi_uri {
	/* the registry's row of its scheme (registry.h): found once here,
	 * so that nothing later compares scheme names */
	const struct rmsgi_tr_row *row;
	char host[256];
	uint16_t port;
	/* "?src=ADDR": numeric source address a connection binds to
	 * (port 0); src_len is 0 without one */
	struct sockaddr_storage src;
	socklen_t src_len;
};

/* the addresses a client connects to, resolved by the core (resolve.c)
 * before any backend starts: in the resolver's order, each with the
 * URI's port; never empty */
#define RMSGI_ADDRS_MAX 8
struct rmsgi_addrs {
	unsigned n; /* 1..RMSGI_ADDRS_MAX */
	socklen_t len[RMSGI_ADDRS_MAX];
	struct sockaddr_storage a[RMSGI_ADDRS_MAX];
};

/* 0; -EPROTONOSUPPORT for a scheme no registry row has; -EINVAL */
int rmsgi_uri_parse(const char *uri, struct rmsgi_uri *u);

#endif /* RMSG_URI_H */
