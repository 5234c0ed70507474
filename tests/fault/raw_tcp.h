/* SPDX-License-Identifier: MIT */
/*
 * raw_tcp.h - a peer that speaks librmsg's TCP wire format by hand
 * (src/proto.h), for the hostile-peer tests. Errors end the process with
 * _exit(): these run in forked children.
 */
#ifndef RMSG_TEST_RAW_TCP_H
#define RMSG_TEST_RAW_TCP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "proto.h"

/* a blocking socket connected to 127.0.0.1:@port, reads time out */
static inline int raw_connect(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	struct timeval tv = {.tv_sec = 10};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		_exit(10);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* writes it all; false once the server closed the socket */
static inline bool raw_put(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w <= 0)
			return false;
		p += w;
		len -= (size_t)w;
	}
	return true;
}

static inline void raw_put_hdr(int fd, uint8_t type, uint16_t credits,
			       uint64_t len)
{
	struct rmsgi_hdr h = {.type = type, .credits = credits, .len = len};
	uint8_t buf[RMSGI_HDR_SIZE];

	rmsgi_hdr_encode(&h, buf);
	if (!raw_put(fd, buf, sizeof(buf)))
		_exit(11);
}

/* the first frame header the server sends: HELLO_ACK or REJECT (-1 if
 * the connection ended first); @status_p gets a REJECT's status */
static inline int raw_answer(int fd, int *status_p)
{
	uint8_t buf[RMSGI_HDR_SIZE + 64];
	struct rmsgi_hello hello;
	struct rmsgi_hdr h;
	size_t got = 0, want = RMSGI_HDR_SIZE;

	while (got < want) {
		ssize_t r = read(fd, buf + got, want - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
		if (got == RMSGI_HDR_SIZE) {
			if (rmsgi_hdr_decode(buf, got, 1 << 20, &h) ||
			    h.len > 64)
				_exit(13);
			want += (size_t)h.len;
		}
	}
	if (status_p &&
	    rmsgi_hello_decode(buf + RMSGI_HDR_SIZE, h.len, &hello) == 0)
		*status_p = hello.status;
	return h.type;
}

/* connects and sends HELLO; the answer is read with raw_answer() */
static inline int raw_hello(uint16_t port)
{
	struct rmsgi_hello hello = {.credits = 32, .eager_size = 8192};
	uint8_t buf[64];
	size_t n = rmsgi_hello_encode(&hello, buf);
	int fd = raw_connect(port);

	raw_put_hdr(fd, RMSGI_T_HELLO, 0, n);
	if (!raw_put(fd, buf, n))
		_exit(11);
	return fd;
}

/* HELLO, then HELLO_ACK */
static inline int raw_handshake(uint16_t port)
{
	int fd = raw_hello(port);

	if (raw_answer(fd, NULL) != RMSGI_T_HELLO_ACK)
		_exit(13);
	return fd;
}

#endif
