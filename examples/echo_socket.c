// SPDX-License-Identifier: MIT
/*
 * echo_socket - BEFORE: a TCP echo client and server on plain sockets.
 * echo_rmsg.c is the same program ported to librmsg; rmsg-porting(7)
 * walks through the changes.
 *
 *   echo_socket server tcp://HOST:PORT [--once]
 *   echo_socket client tcp://HOST:PORT [N]      N messages (default 200)
 *
 * TCP carries bytes, not messages, so each message is framed: a 4-byte
 * length in network order, then the bytes. The client sends a message,
 * waits for its echo, checks it, and goes on with the next one. The
 * server serves one client at a time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MSG_MAX 70000

/* the size and contents of message @i: the same in echo_rmsg.c */
static size_t msg_size(unsigned i)
{
	return (size_t)(i * 2654435761u % MSG_MAX);
}

static void msg_fill(unsigned char *p, size_t len, unsigned i)
{
	size_t k;

	for (k = 0; k < len; k++)
		p[k] = (unsigned char)(i * 31 + k);
}

/* "tcp://host:port", "host:port" or "[v6]:port" */
static struct addrinfo *resolve(const char *uri, int passive)
{
	struct addrinfo hints = {0}, *res;
	char host[256], *port;
	int ret;

	if (!strncmp(uri, "tcp://", 6))
		uri += 6;
	snprintf(host, sizeof(host), "%s", uri);
	port = strrchr(host, ':');
	if (!port) {
		fprintf(stderr, "echo_socket: %s: no port\n", uri);
		exit(2);
	}
	*port++ = '\0';
	if (host[0] == '[') { /* [::1] */
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret) {
		fprintf(stderr, "echo_socket: %s: %s\n", uri,
			gai_strerror(ret));
		exit(1);
	}
	return res;
}

/* write() and read() may move fewer bytes than asked: loop */
static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 0, or -1 on an error, or 1 when the peer closed first */
static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int serve(int fd)
{
	unsigned char *buf = malloc(4 + MSG_MAX);
	unsigned long n = 0;
	uint32_t hdr;
	int ret = -1;

	if (!buf)
		return -1;
	for (;;) {
		size_t len;

		ret = read_all(fd, &hdr, sizeof(hdr));
		if (ret)
			break;
		len = ntohl(hdr);
		if (len > MSG_MAX) { /* never trust a length from the wire */
			fprintf(stderr, "echo_socket: message too long\n");
			ret = -1;
			break;
		}
		ret = read_all(fd, buf + 4, len);
		if (ret)
			break;
		/* header and bytes in one write: two small writes in a row
		 * meet Nagle's algorithm and delayed ACKs (40 ms each) */
		memcpy(buf, &hdr, 4);
		if (write_all(fd, buf, 4 + len)) {
			ret = -1;
			break;
		}
		n++;
	}
	printf("server: client left after %lu messages%s\n", n,
	       ret < 0 ? " (error)" : "");
	fflush(stdout);
	free(buf);
	return ret < 0 ? -1 : 0;
}

static int server(const char *uri, int once)
{
	struct addrinfo *ai = resolve(uri, 1);
	int one = 1, lfd;

	lfd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, 16)) {
		perror("echo_socket: listen");
		return 1;
	}
	freeaddrinfo(ai);
	printf("server: listening on %s\n", uri);
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			perror("echo_socket: accept");
			return 1;
		}
		printf("server: client connected\n");
		serve(fd);
		close(fd);
		if (once)
			break;
	}
	close(lfd);
	return 0;
}

static int client(const char *uri, unsigned count)
{
	struct addrinfo *ai = resolve(uri, 0);
	unsigned char *out = malloc(4 + MSG_MAX), *in = malloc(MSG_MAX);
	unsigned long long bytes = 0;
	unsigned i;
	int fd;

	if (!out || !in)
		return 1;
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		perror("echo_socket: connect");
		return 1;
	}
	freeaddrinfo(ai);
	for (i = 0; i < count; i++) {
		size_t len = msg_size(i);
		uint32_t hdr = htonl((uint32_t)len);

		memcpy(out, &hdr, 4); /* one write: see serve() */
		msg_fill(out + 4, len, i);
		if (write_all(fd, out, 4 + len)) {
			perror("echo_socket: write");
			return 1;
		}
		if (read_all(fd, &hdr, sizeof(hdr)) || ntohl(hdr) != len ||
		    read_all(fd, in, len)) {
			fprintf(stderr, "echo_socket: echo %u: short\n", i);
			return 1;
		}
		if (memcmp(in, out + 4, len)) {
			fprintf(stderr, "echo_socket: echo %u differs\n", i);
			return 1;
		}
		bytes += len;
	}
	close(fd);
	printf("client: %u messages echoed, %llu bytes\n", count, bytes);
	free(out);
	free(in);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr,
			"usage: %s server URI [--once] | client URI [N]\n",
			argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "server"))
		return server(argv[2], argc > 3 && !strcmp(argv[3], "--once"));
	return client(argv[2], argc > 3 ? (unsigned)atoi(argv[3]) : 200);
}
