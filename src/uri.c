// SPDX-License-Identifier: MIT
/*
 * uri.c - "SCHEME://host:port", optionally followed by "?src=ADDR", for
 * each scheme the registry has a row for (registry.h): rdma, tcp, shm,
 * auto, rdma+tcp.
 *
 * IPv6 literals go in brackets: "tcp://[::1]:7000". Resolution of the host
 * is left to each transport (rdma_getaddrinfo or getaddrinfo). The source
 * address must be numeric (IPv4, or IPv6 with or without brackets) so that
 * parsing never blocks; it is turned into a sockaddr here, once, for both
 * transports.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>

#include "rmsg_int.h"

/* "src=ADDR": the only query parameter there is */
static int parse_query(const char *q, struct rmsgi_uri *u)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&u->src;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&u->src;
	char addr[INET6_ADDRSTRLEN];
	size_t n;

	if (strncmp(q, "src=", 4))
		return -EINVAL;
	q += 4;
	n = strlen(q);
	if (n >= 2 && q[0] == '[' && q[n - 1] == ']') {
		q++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, q, n);
	addr[n] = '\0';
	memset(&u->src, 0, sizeof(u->src));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		u->src_len = sizeof(*s4);
	} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		u->src_len = sizeof(*s6);
	} else {
		return -EINVAL;
	}
	return 0;
}

int rmsgi_uri_parse(const char *uri, struct rmsgi_uri *u)
{
	const char *p = NULL, *host, *end, *colon, *q;
	char auth[sizeof(u->host) + 16], *tail;
	size_t hlen, alen;
	unsigned long port;

	if (!uri || !u)
		return -EINVAL;
	/* the scheme is what comes before the first "://"; only the
	 * registry's rows know which there are */
	p = strstr(uri, "://");
	if (!p)
		return -EPROTONOSUPPORT;
	u->row = rmsgi_tr_row(uri, (size_t)(p - uri));
	if (!u->row)
		return -EPROTONOSUPPORT;
	p += 3;
	/* the authority ends at the query, if any */
	q = strchr(p, '?');
	alen = q ? (size_t)(q - p) : strlen(p);
	if (alen >= sizeof(auth))
		return -EINVAL;
	memcpy(auth, p, alen);
	auth[alen] = '\0';
	p = auth;
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
	u->src_len = 0;
	if (q && parse_query(q + 1, u))
		return -EINVAL;
	memcpy(u->host, host, hlen);
	u->host[hlen] = '\0';
	u->port = (uint16_t)port;
	return 0;
}
