// SPDX-License-Identifier: MIT
/*
 * uri.c - "rdma://host:port", "tcp://host:port", "auto://host:port".
 *
 * IPv6 literals go in brackets: "tcp://[::1]:7000". Resolution itself is
 * left to each transport (rdma_getaddrinfo or getaddrinfo).
 */
#include <stdlib.h>

#include "rmsg_int.h"

static const struct {
	const char *prefix;
	enum rmsgi_scheme scheme;
} schemes[] = {
	{"rdma://", RMSGI_SCHEME_RDMA},
	{"tcp://", RMSGI_SCHEME_TCP},
	{"auto://", RMSGI_SCHEME_AUTO},
};

int rmsgi_uri_parse(const char *uri, struct rmsgi_uri *u)
{
	const char *p = NULL, *host, *end, *colon;
	size_t i, hlen;
	char *tail;
	unsigned long port;

	if (!uri || !u)
		return -EINVAL;
	for (i = 0; i < RMSGI_ARRAY_SIZE(schemes); i++) {
		size_t n = strlen(schemes[i].prefix);

		if (!strncmp(uri, schemes[i].prefix, n)) {
			p = uri + n;
			u->scheme = schemes[i].scheme;
			break;
		}
	}
	if (!p)
		return -EPROTONOSUPPORT;
	if (*p == '[') {
		host = p + 1;
		end = strchr(host, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		hlen = (size_t)(end - host);
		colon = end + 1;
	} else {
		host = p;
		colon = strrchr(p, ':');
		if (!colon || strchr(p, ':') != colon)
			return -EINVAL;
		hlen = (size_t)(colon - host);
	}
	if (hlen == 0 || hlen >= sizeof(u->host))
		return -EINVAL;
	if (colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	errno = 0;
	port = strtoul(colon + 1, &tail, 10);
	if (errno || *tail || port > 65535)
		return -EINVAL;
	memcpy(u->host, host, hlen);
	u->host[hlen] = '\0';
	u->port = (uint16_t)port;
	return 0;
}
