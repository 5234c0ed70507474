// SPDX-License-Identifier: MIT
/*
 * resume.c - resumable connections (rmsg_cfg_set_resume_ms) over TCP,
 * through a proxy in the test that cuts every connection through it
 * with a reset, as a middlebox or a flapping link would:
 *  1. both sides stream numbered messages of random sizes at each other
 *     (and the server answers RPC calls) while the proxy cuts the link
 *     again and again: every message arrives exactly once, in order,
 *     every send's callback says 0, every call gets its reply, and both
 *     connections are still open, resumed as often as they were cut;
 *  2. a cut after which the proxy refuses every dial: both sides end
 *     with -ETIMEDOUT after the resume window, every send with it;
 *  3. a cut after which the server's application closes its side: the
 *     client's next dial is refused (-ESTALE) and it ends at once, long
 *     before its window;
 *  4. a raw peer's resume requests (an unknown session; a short one)
 *     are refused and counted, and the listener serves on.
 * TCP only (a TCP proxy cuts the link; RDMA resumes are
 * tests/fault/link_resume's, in the VM): with the fault tests.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <nettle/hmac.h>

#include "common.h"

/* ------------------------------------------------------------------ */
/* the proxy                                                            */

#define PMAX 16

struct pair {
	int fd[2];
	ev_io r[2];
	bool on;
};

static struct ev_loop *loop;
static int pfd = -1;
static ev_io paccept;
static uint16_t sport, pport;
static struct pair pairs[PMAX];
static bool refuse_all;
static struct pair frozen[PMAX]; /* proxy_freeze()'s, closed at the end */
static int npassed;

static void pair_close(struct pair *p, bool reset)
{
	struct linger lg = {1, 0};
	int i;

	if (!p->on)
		return;
	for (i = 0; i < 2; i++) {
		ev_io_stop(loop, &p->r[i]);
		if (reset)
			setsockopt(p->fd[i], SOL_SOCKET, SO_LINGER, &lg,
				   sizeof(lg));
		close(p->fd[i]);
	}
	p->on = false;
}

static void pair_cb(struct ev_loop *l, ev_io *w, int revents)
{
	struct pair *p = w->data;
	int side = w == &p->r[0] ? 0 : 1;
	char buf[65536];
	ssize_t n, off = 0;

	(void)l;
	(void)revents;
	n = read(p->fd[side], buf, sizeof(buf));
	if (n <= 0) {
		pair_close(p, n < 0);
		return;
	}
	/* blocking writes: the peers read all the time */
	while (off < n) {
		ssize_t k =
			write(p->fd[1 - side], buf + off, (size_t)(n - off));

		if (k <= 0) {
			pair_close(p, true);
			return;
		}
		off += k;
	}
}

static void accept_cb(struct ev_loop *l, ev_io *w, int revents)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct pair *p = NULL;
	int a, b, i, one = 1;

	(void)w;
	(void)revents;
	a = accept(pfd, NULL, NULL);
	if (a < 0)
		return;
	for (i = 0; i < PMAX && !p; i++)
		if (!pairs[i].on)
			p = &pairs[i];
	if (refuse_all || !p) {
		struct linger lg = {1, 0};

		setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(a);
		return;
	}
	sa.sin_port = htons(sport);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	b = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(b >= 0, "socket");
	if (connect(b, (struct sockaddr *)&sa, sizeof(sa))) {
		close(a);
		close(b);
		return;
	}
	setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	p->fd[0] = a;
	p->fd[1] = b;
	for (i = 0; i < 2; i++) {
		ev_io_init(&p->r[i], pair_cb, p->fd[i], EV_READ);
		p->r[i].data = p;
		ev_io_start(l, &p->r[i]);
	}
	p->on = true;
	npassed++;
}

static void proxy_start(uint16_t server_port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int one = 1;

	sport = server_port;
	pfd = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(pfd >= 0, "socket");
	setsockopt(pfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(bind(pfd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind");
	T_ASSERT(listen(pfd, 16) == 0, "listen");
	getsockname(pfd, (struct sockaddr *)&sa, &len);
	pport = ntohs(sa.sin_port);
	ev_io_init(&paccept, accept_cb, pfd, EV_READ);
	ev_io_start(loop, &paccept);
}

/* every connection through the proxy goes silent: nothing forwarded,
 * nothing closed (a blackholed path); new ones are served */
static void proxy_freeze(void)
{
	int i, k;

	for (i = 0; i < PMAX; i++) {
		if (!pairs[i].on)
			continue;
		for (k = 0; k < 2; k++)
			ev_io_stop(loop, &pairs[i].r[k]);
		frozen[i] = pairs[i];
		pairs[i].on = false;
	}
}

/* every connection through the proxy ends with a reset */
static void proxy_cut(void)
{
	int i;

	for (i = 0; i < PMAX; i++) {
		pair_close(&pairs[i], true);
		pair_close(&frozen[i], true);
	}
}

/* ------------------------------------------------------------------ */
/* the peers                                                            */

#define NMSG 50000
#define MAXLEN 6000
static uint64_t nmsg = NMSG; /* messages each way in this part */
#define NCALL 200

struct side {
	struct rmsg_conn *c;
	uint64_t next_out, next_in; /* numbers sent / expected */
	int sent_ok, send_err, closed, reason, last_err;
	/* what on_close saw (the handle goes after it) */
	char why[160];
	struct rmsg_stats st;
};

static struct side sd[2]; /* 0: server, 1: client */
static bool close_on_msg; /* the server closes on the last message */
static int calls_ok, calls_err, calls_out;

struct out {
	uint64_t n;
	uint8_t body[];
};

/* most messages up to MAXLEN bytes, one in 97 from 64 KiB up to 1 MiB
 * (over the eager size, several socket reads each) */
static size_t msg_len(uint64_t n, int side)
{
	uint64_t h = n * 2654435761u + (unsigned)side * 977u;

	if (n % 97 == 13)
		return (64 << 10) + (size_t)(h % ((1 << 20) - (64 << 10)));
	return 8 + (size_t)(h % (MAXLEN - 8));
}

static void send_done(struct rmsg_conn *c, int st, void *arg)
{
	struct out *o = arg;
	int side = c == sd[0].c ? 0 : 1;

	T_ASSERT(!sd[side].closed, "side %d: a send's callback after on_close",
		 side);
	if (st) {
		sd[side].send_err++;
		sd[side].last_err = st;
		if (sd[side].send_err < 4 && o)
			fprintf(stderr, "side %d: send %llu: %s\n", side,
				(unsigned long long)o->n, rmsg_strerror(st));
	} else {
		sd[side].sent_ok++;
	}
	free(o);
}

/* sends the next numbered message of @side; -EAGAIN: later */
static int send_one(int side)
{
	size_t len = msg_len(sd[side].next_out, side);
	struct out *o = malloc(sizeof(*o) + len);
	struct iovec iov;
	int ret;

	T_ASSERT(o, "malloc");
	o->n = sd[side].next_out;
	memcpy(o->body, &o->n, 8);
	t_fill(o->body + 8, len - 8, o->n * 2 + (uint64_t)side);
	iov.iov_base = o->body;
	iov.iov_len = len;
	ret = rmsg_send(sd[side].c, &iov, 1, send_done, o);
	if (ret) {
		free(o);
		return ret;
	}
	sd[side].next_out++;
	return 0;
}

static void pump(int side)
{
	while (sd[side].next_out < nmsg && send_one(side) == 0)
		;
}

static void on_writable(struct rmsg_conn *c, void *arg)
{
	(void)c;
	pump((int)(intptr_t)arg);
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	int side = (int)(intptr_t)arg;
	const uint8_t *p = rmsg_msg_data(m);
	uint64_t n;

	T_ASSERT(rmsg_msg_len(m) >= 8, "short message");
	memcpy(&n, p, 8);
	/* the other side's numbers, each once, in order */
	T_ASSERT(n == sd[side].next_in,
		 "side %d: got message %llu, expected %llu", side,
		 (unsigned long long)n, (unsigned long long)sd[side].next_in);
	T_ASSERT(rmsg_msg_len(m) == msg_len(n, 1 - side),
		 "side %d: message %llu has %zu bytes", side,
		 (unsigned long long)n, rmsg_msg_len(m));
	T_ASSERT(t_check(p + 8, rmsg_msg_len(m) - 8,
			 n * 2 + (uint64_t)(1 - side)) == 0,
		 "side %d: message %llu corrupt", side, (unsigned long long)n);
	sd[side].next_in++;
	if (close_on_msg && side == 0 && sd[side].next_in == nmsg)
		rmsg_conn_close(c);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	int side = (int)(intptr_t)arg;

	sd[side].closed++;
	sd[side].reason = reason;
	snprintf(sd[side].why, sizeof(sd[side].why), "%s",
		 rmsg_conn_close_reason(c));
	T_ASSERT(rmsg_conn_stats(c, &sd[side].st, sizeof(sd[side].st)) > 0,
		 "stats");
}

static void established(struct rmsg_conn *c, void *arg)
{
	int side = (int)(intptr_t)arg;

	sd[side].c = c;
}

#define M_ECHO 7

/* each call is served once: its number in a bitmap */
static uint8_t served[NCALL];
/* part 8: the handler keeps the request and answers later */
static struct rmsg_req *held_req;
static uint64_t held_k;

static void echo(struct rmsg_conn *c, struct rmsg_req *req,
		 struct rmsg_msg *request, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(request),
			    rmsg_msg_len(request)};
	uint64_t k;

	(void)c;
	(void)arg;
	T_ASSERT(iov.iov_len == 8, "request of %zu bytes", iov.iov_len);
	memcpy(&k, iov.iov_base, 8);
	T_ASSERT(k < NCALL && !served[k], "call %llu served twice",
		 (unsigned long long)k);
	served[k] = 1;
	if (k == NCALL - 1 && !held_req) {
		/* the last call of part 8: answered later */
		held_req = req;
		held_k = k;
		return;
	}
	T_OK(rmsg_reply(req, &iov, 1));
}

static void call_done(struct rmsg_conn *c, int st, struct rmsg_msg *rep,
		      void *arg)
{
	uint64_t *k = arg;

	(void)c;
	if (st == 0 && rep && rmsg_msg_len(rep) == 8 &&
	    memcmp(rmsg_msg_data(rep), k, 8) == 0)
		calls_ok++;
	else
		calls_err++;
	if (st)
		fprintf(stderr, "call %llu: %s\n", (unsigned long long)*k,
			rmsg_strerror(st));
	calls_out--;
	free(k);
}

static uint64_t calls_k; /* the next call's number */
static int ncuts;
static uint64_t cut_at; /* messages received (both ways) at the last cut */

/* cuts whenever both sides are up again and the stream moved on by a
 * twelfth since the last cut, so that the cuts spread over the stream
 * however fast it runs */
static void cut_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	uint64_t got = sd[0].next_in + sd[1].next_in;

	(void)l;
	(void)revents;
	if (got >= 2 * nmsg) {
		ev_timer_stop(loop, w);
		return;
	}
	if (rmsg_conn_resume_state(sd[0].c) != RMSG_RESUME_ON ||
	    rmsg_conn_resume_state(sd[1].c) != RMSG_RESUME_ON ||
	    got < cut_at + 2 * nmsg / 12)
		return;
	proxy_cut();
	cut_at = got;
	ncuts++;
}

static void calls_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	uint64_t k = calls_k;
	uint64_t *v;
	struct iovec iov;

	(void)l;
	(void)revents;
	if (k >= NCALL) {
		ev_timer_stop(loop, w);
		return;
	}
	v = malloc(sizeof(*v));
	T_ASSERT(v, "malloc");
	*v = k;
	iov.iov_base = v;
	iov.iov_len = 8;
	if (rmsg_call(sd[1].c, M_ECHO, &iov, 1, 30000, call_done, v, NULL) ==
	    0) {
		calls_out++;
		calls_k++;
	} else {
		free(v);
	}
}

static struct rmsg_cfg *mkcfg(unsigned resume_ms)
{
	struct rmsg_cfg *cfg;

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_resume_ms(cfg, resume_ms));
	T_OK(rmsg_cfg_set_send_queue(cfg, 256));
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, 200));
	return cfg;
}

static void reset_sides(void)
{
	memset(sd, 0, sizeof(sd));
}

static void conn_pair(struct rmsg_ctx *ctx[2], struct rmsg_cfg *cfg,
		      struct rmsg_listener **lis)
{
	struct rmsg_conn_ops ops = {.on_established = established,
				    .on_msg = on_msg,
				    .on_writable = on_writable,
				    .on_close = on_close};
	char uri[128];
	struct rmsg_conn *c;
	const char *colon;

	reset_sides();
	t_listen(ctx[0], cfg, &ops, NULL, (void *)0, lis, uri, sizeof(uri));
	colon = strrchr(uri, ':');
	if (pfd < 0)
		proxy_start((uint16_t)atoi(colon + 1));
	else
		sport = (uint16_t)atoi(colon + 1);
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", pport);
	T_OK(rmsg_connect(ctx[1], uri, cfg, &ops, (void *)1, &c));
	T_RUN_UNTIL(loop, sd[0].c && sd[1].c, 10);
	T_ASSERT(rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_ON &&
			 rmsg_conn_resume_state(sd[1].c) == RMSG_RESUME_ON,
		 "not resumable: %d %d", rmsg_conn_resume_state(sd[0].c),
		 rmsg_conn_resume_state(sd[1].c));
}

/* 1. exactly once, in order, through many cuts (5: with a pre-shared
 * key on both ends) */
static void part_stream(struct rmsg_ctx *ctx[2], bool psk)
{
	static const char key[] = "0123456789abcdef0123456789abcdef";
	struct rmsg_cfg *cfg = mkcfg(10000);
	struct rmsg_listener *lis;
	struct rmsg_stats st[2];
	ev_timer cut, calls;
	int i;

	if (psk)
		T_OK(rmsg_cfg_set_psk(cfg, key, 32));
	nmsg = psk ? 3000 : NMSG;
	if (t_scale() > 1) /* valgrind: fewer, the same cuts */
		nmsg /= 10;
	ncuts = 0;
	cut_at = 0;
	calls_ok = calls_err = calls_out = 0;
	memset(served, 0, sizeof(served));
	held_req = NULL;
	calls_k = 0;
	conn_pair(ctx, cfg, &lis);
	pump(0);
	pump(1);
	ev_timer_init(&cut, cut_cb, 0.001, 0.001);
	ev_timer_start(loop, &cut);
	ev_timer_init(&calls, calls_cb, 0.001, 0.002);
	ev_timer_start(loop, &calls);
	T_RUN_UNTIL(loop,
		    sd[0].next_in == nmsg && sd[1].next_in == nmsg &&
			    sd[0].sent_ok == (int)nmsg &&
			    sd[1].sent_ok == (int)nmsg &&
			    calls_ok + calls_err == NCALL - 1 &&
			    calls_out == 1 && held_req,
		    60);
	/* 8. the last call's request is held by the handler: answered
	 * while the connection is suspended, the reply waits for the
	 * resume */
	T_ASSERT(held_req, "the last call was not held");
	refuse_all = true;
	proxy_cut();
	T_RUN_UNTIL(loop,
		    rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_SUSPENDED,
		    10);
	T_OK(rmsg_reply(held_req, &(struct iovec){&held_k, 8}, 1));
	refuse_all = false;
	T_RUN_UNTIL(loop, calls_ok + calls_err == NCALL && !calls_out, 20);
	ev_timer_stop(loop, &cut);
	ev_timer_stop(loop, &calls);
	for (i = 0; i < 2; i++) {
		T_ASSERT(!sd[i].closed, "side %d closed: %s", i,
			 rmsg_strerror(sd[i].reason));
		T_ASSERT(!sd[i].send_err, "side %d: %d sends failed", i,
			 sd[i].send_err);
		T_ASSERT(rmsg_conn_stats(sd[i].c, &st[i], sizeof(st[i])) > 0,
			 "stats");
	}
	T_ASSERT(calls_err == 0, "%d calls failed", calls_err);
	T_ASSERT(ncuts >= 5, "only %d cuts", ncuts);
	T_ASSERT(st[1].resumes >= 5 && st[1].suspends == st[1].resumes,
		 "client: %llu suspends, %llu resumes",
		 (unsigned long long)st[1].suspends,
		 (unsigned long long)st[1].resumes);
	printf("resume over tcp%s: %llu + %llu messages and %d calls (one "
	       "answered while suspended) exactly once through %d cuts; "
	       "client %llu resumes (%llu replayed), server %llu resumes "
	       "(%llu replayed), %d dials\n",
	       psk ? " with a pre-shared key" : "", (unsigned long long)nmsg,
	       (unsigned long long)nmsg, NCALL, ncuts,
	       (unsigned long long)st[1].resumes,
	       (unsigned long long)st[1].replayed,
	       (unsigned long long)st[0].resumes,
	       (unsigned long long)st[0].replayed, npassed);
	rmsg_conn_close(sd[1].c);
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 10);
	T_ASSERT(sd[0].reason == -ESHUTDOWN && sd[1].reason == 0,
		 "closes: %s, %s", rmsg_strerror(sd[0].reason),
		 rmsg_strerror(sd[1].reason));
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* 11. the path is gone for 1.5 s, then back: how long until messages
 * flow again (the redial backoff: at most 1 s between dials) */
static void part_flap(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(10000);
	struct rmsg_listener *lis;
	double back;

	nmsg = 1;
	conn_pair(ctx, cfg, &lis);
	refuse_all = true;
	proxy_cut();
	t_run_for(loop, 1.5);
	T_ASSERT(!sd[1].closed, "client closed");
	T_OK(send_one(1));
	refuse_all = false;
	back = ev_time();
	T_RUN_UNTIL(loop, sd[0].next_in == 1, 10);
	printf("the path back after 1.5 s away: the first message arrived "
	       "%.3f s later (dials back off to 1 s)\n",
	       ev_time() - back);
	rmsg_conn_close(sd[1].c);
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 10);
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* 2. no new transport within the window: -ETIMEDOUT on both sides */
static void part_window(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(400);
	struct rmsg_listener *lis;
	double t0;
	int i;

	conn_pair(ctx, cfg, &lis);
	refuse_all = true;
	proxy_cut();
	t0 = ev_time();
	for (i = 0; i < 5; i++)
		T_OK(send_one(1));
	T_RUN_UNTIL(loop,
		    rmsg_conn_resume_state(sd[1].c) == RMSG_RESUME_SUSPENDED ||
			    sd[1].closed,
		    10);
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 10);
	/* covers: rmsg_cfg_set_resume_ms.3 ETIMEDOUT */
	for (i = 0; i < 2; i++)
		T_ASSERT(sd[i].reason == -ETIMEDOUT, "side %d: %s", i,
			 rmsg_strerror(sd[i].reason));
	T_ASSERT(sd[1].send_err == 5, "%d sends failed", sd[1].send_err);
	printf("resume window: both sides ended with ETIMEDOUT after %.2f s "
	       "(window 0.4 s), 5 queued sends failed\n",
	       ev_time() - t0);
	refuse_all = false;
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* 3. the server's side ended while suspended: the client learns it at
 * its next dial (-ESTALE), long before its window */
static void part_stale(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(20000);
	struct rmsg_listener *lis;
	double t0;

	conn_pair(ctx, cfg, &lis);
	refuse_all = true;
	proxy_cut();
	T_RUN_UNTIL(loop,
		    rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_SUSPENDED,
		    10);
	T_OK(rmsg_conn_close(sd[0].c));
	T_RUN_UNTIL(loop, sd[0].closed, 10);
	refuse_all = false;
	t0 = ev_time();
	T_RUN_UNTIL(loop, sd[1].closed, 10);
	/* covers: rmsg_cfg_set_resume_ms.3 ESTALE */
	T_ASSERT(sd[1].reason == -ESTALE, "client: %s",
		 rmsg_strerror(sd[1].reason));
	printf("resume refused: the client ended with ESTALE %.2f s after "
	       "the dials got through (window 20 s): %s\n",
	       ev_time() - t0, sd[1].why);
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* 4. a raw peer's resume requests: refused, counted */
static void part_raw(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(5000);
	struct rmsg_listener *lis;
	struct rmsg_stats st;
	int k;

	conn_pair(ctx, cfg, &lis);
	for (k = 0; k < 2; k++) {
		struct sockaddr_in sa = {.sin_family = AF_INET};
		uint8_t f[32 + 16 + 1 + 36], r[256];
		size_t hl = k ? 16 + 1 + 20 : 16 + 1 + 36;
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		ssize_t n;

		sa.sin_port = htons(sport);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		T_ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
			 "connect");
		memset(f, 0, sizeof(f));
		/* header: magic, version, HELLO; len */
		f[0] = 0xa7, f[1] = 1, f[2] = 5;
		f[16] = (uint8_t)hl;
		/* hello: magic, version, no private data, RESUME|PACK|GROW,
		 * 16 credits, eager 8192, then a session part of the
		 * request's size with an id nobody has (or one too short) */
		f[32] = 0xa7, f[33] = 1, f[35] = 0x0e, f[36] = 16;
		f[32 + 9] = 0x20;
		f[48] = (uint8_t)(hl - 17); /* the part's length */
		memset(f + 49, 0x5a, hl - 17);
		T_ASSERT(write(fd, f, 32 + hl) == (ssize_t)(32 + hl), "write");
		n = 0;
		while (n < 32 + 16) {
			ssize_t g;

			t_run_for(loop, 0.01);
			g = recv(fd, r + n, sizeof(r) - (size_t)n,
				 MSG_DONTWAIT);
			if (g == 0)
				break;
			if (g > 0)
				n += g;
		}
		T_ASSERT(n >= 32 + 16 && r[2] == 7, "no REJECT (%zd bytes)", n);
		/* its status: -ESTALE, or -EPROTO for the short one */
		T_ASSERT((int16_t)(r[38] | r[39] << 8) ==
				 (k ? -EPROTO : -ESTALE),
			 "status %d", (int16_t)(r[38] | r[39] << 8));
		close(fd);
	}
	T_OK(rmsg_ctx_stats(ctx[0], &st, sizeof(st)) > 0 ? 0 : -1);
	T_ASSERT(st.resume_refused >= 2, "refused %llu",
		 (unsigned long long)st.resume_refused);
	/* the real session is untouched */
	T_ASSERT(!sd[0].closed && !sd[1].closed, "closed");
	T_OK(send_one(1));
	T_RUN_UNTIL(loop, sd[0].next_in == 1 && sd[1].sent_ok == 1, 10);
	printf("raw resume requests: an unknown session and a short one "
	       "refused (ESTALE, EPROTO), %llu counted\n",
	       (unsigned long long)st.resume_refused);
	rmsg_conn_close(sd[1].c);
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 10);
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* 6. a blackholed path (nothing arrives, nothing is reset): the
 * keepalive suspends both sides instead of closing them, and what was
 * sent into the hole arrives after the resume */
static void part_blackhole(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(10000);
	struct rmsg_listener *lis;
	struct rmsg_stats st[2];
	int i;

	T_OK(rmsg_cfg_set_keepalive_ms(cfg, 100));
	nmsg = t_scale() > 1 ? 300 : 3000;
	conn_pair(ctx, cfg, &lis);
	/* both ways at once, the path going silent mid-stream */
	pump(0);
	pump(1);
	T_RUN_UNTIL(loop, sd[0].next_in + sd[1].next_in >= nmsg / 8, 20);
	proxy_freeze();
	T_RUN_UNTIL(loop,
		    sd[0].next_in == nmsg && sd[1].sent_ok == (int)nmsg &&
			    sd[1].next_in == nmsg && sd[0].sent_ok == (int)nmsg,
		    30);
	for (i = 0; i < 2; i++) {
		T_ASSERT(!sd[i].closed, "side %d closed: %s", i,
			 rmsg_strerror(sd[i].reason));
		T_ASSERT(rmsg_conn_stats(sd[i].c, &st[i], sizeof(st[i])) > 0,
			 "stats");
	}
	T_ASSERT(st[1].suspends >= 1 && st[1].resumes >= 1,
		 "client: %llu suspends", (unsigned long long)st[1].suspends);
	printf("blackholed path mid-stream: the keepalive suspended the "
	       "client (%llu times) and the server (%llu), %llu messages "
	       "each way arrived once, in order\n",
	       (unsigned long long)st[1].suspends,
	       (unsigned long long)st[0].suspends, (unsigned long long)nmsg);
	rmsg_conn_close(sd[1].c);
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 10);
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* 7. a message the server cannot take (over its max_msg_size) is not
 * a path failure: the server ends the connection, the client's resume
 * is refused; no suspend-and-replay loop */
static void part_too_big(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(10000), *ccfg = mkcfg(10000);
	struct rmsg_conn_ops ops = {.on_established = established,
				    .on_msg = on_msg,
				    .on_close = on_close};
	static uint8_t big[8192];
	struct rmsg_listener *lis;
	struct rmsg_stats st;
	struct rmsg_conn *c;
	char uri[128];

	T_OK(rmsg_cfg_set_max_msg_size(cfg, 4096));
	reset_sides();
	t_listen(ctx[0], cfg, &ops, NULL, (void *)0, &lis, uri, sizeof(uri));
	sport = (uint16_t)atoi(strrchr(uri, ':') + 1);
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", pport);
	T_OK(rmsg_connect(ctx[1], uri, ccfg, &ops, (void *)1, &c));
	T_RUN_UNTIL(loop, sd[0].c && sd[1].c, 10);
	T_OK(rmsg_send(sd[1].c, &(struct iovec){big, sizeof(big)}, 1, send_done,
		       NULL));
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 10);
	T_ASSERT(sd[0].reason == -EMSGSIZE, "server: %s",
		 rmsg_strerror(sd[0].reason));
	T_ASSERT(sd[1].send_err == 1, "the send: %d failures", sd[1].send_err);
	st = sd[1].st; /* on_close's: the handle is gone */
	T_ASSERT(st.resumes == 0, "%llu resumes",
		 (unsigned long long)st.resumes);
	printf("a message over the server's max_msg_size: the server ended "
	       "with EMSGSIZE, the client with %s after %llu suspend(s), no "
	       "replay loop\n",
	       rmsg_err_name(sd[1].reason), (unsigned long long)st.suspends);
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
	rmsg_cfg_destroy(ccfg);
}

static uint64_t resumes_of(struct rmsg_conn *c)
{
	struct rmsg_stats st;

	T_OK(rmsg_conn_stats(c, &st, sizeof(st)) > 0 ? 0 : -1);
	return st.resumes;
}

/* 9. a listener at its max_conns (1) still takes the resume of its one
 * suspended connection; 10. a peer that closes inside on_msg has
 * acknowledged that message (its BYE carries the ack) */
static void part_full_and_bye(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(10000);
	struct rmsg_listener *lis;

	T_OK(rmsg_cfg_set_max_conns(cfg, 1));
	nmsg = 20;
	conn_pair(ctx, cfg, &lis);
	proxy_cut();
	T_RUN_UNTIL(loop, resumes_of(sd[1].c) >= 1 || sd[1].closed, 10);
	T_ASSERT(!sd[1].closed, "client: %s", rmsg_strerror(sd[1].reason));
	pump(1);
	T_RUN_UNTIL(loop, sd[0].next_in == nmsg && sd[1].sent_ok == (int)nmsg,
		    10);
	printf("a listener at max_conns 1 took its suspended connection's "
	       "resume\n");
	close_on_msg = true;
	nmsg = 21;
	pump(1);
	T_RUN_UNTIL(loop, sd[0].closed && sd[1].closed, 10);
	T_ASSERT(sd[1].sent_ok == 21 && sd[1].send_err == 0,
		 "the last send: %s",
		 rmsg_strerror(sd[1].send_err ? sd[1].last_err : 0));
	T_ASSERT(sd[1].reason == -ESHUTDOWN, "client: %s",
		 rmsg_strerror(sd[1].reason));
	close_on_msg = false;
	printf("a server that closed inside on_msg acknowledged that "
	       "message: its send said 0, the client closed with "
	       "ESHUTDOWN\n");
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* ------------------------------------------------------------------ */
/* 12. a raw peer that speaks the resume protocol itself (rmsg.7, the
 * session part of the hellos): it gets a session, breaks its link,
 * and sends a forged proof (EACCES), a right one (resumed, and the
 * server's answer proves the session), the same request again (a
 * replay: EACCES) and the next attempt (resumed). An implementation
 * of the format from its documentation, not from the library's code */

static void put32(uint8_t *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* a HELLO frame with @sess (@slen bytes) as its session part */
static int raw_hello(const uint8_t *sess, size_t slen, uint8_t *reply,
		     size_t *rlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	uint8_t f[32 + 16 + 64];
	size_t hl = 16 + (slen ? 1 + slen : 0), n = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_port = htons(sport);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect");
	memset(f, 0, sizeof(f));
	f[0] = 0xa7, f[1] = 1, f[2] = 5; /* HELLO */
	put64(f + 16, hl);
	f[32] = 0xa7, f[33] = 1, f[35] = 0x0e; /* RESUME|GROW|PACK */
	f[36] = 16;			       /* credits */
	put32(f + 40, 8192);		       /* eager size */
	if (slen) {
		f[48] = (uint8_t)slen; /* the part's length */
		memcpy(f + 49, sess, slen);
	}
	T_ASSERT(write(fd, f, 32 + hl) == (ssize_t)(32 + hl), "write");
	/* the answer: a header and a hello (its length in the header) */
	while (n < 32 || n < 32 + get64(reply + 16)) {
		ssize_t g;

		t_run_for(loop, 0.005);
		g = recv(fd, reply + n, 256 - n, MSG_DONTWAIT);
		T_ASSERT(g != 0, "the server closed without an answer");
		if (g > 0)
			n += (size_t)g;
	}
	*rlen = n;
	return fd;
}

static void raw_reset(int fd)
{
	struct linger lg = {1, 0};

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/* HMAC-SHA-256(key, label || sid || attempt || counts), 16 bytes */
static void raw_mac(const uint8_t key[32], const char *label, uint64_t sid,
		    uint32_t attempt, const uint64_t *rx, int nrx,
		    uint8_t out[16])
{
	struct hmac_sha256_ctx h;
	uint8_t buf[8 + 4 + 16], mac[32];
	int i;

	put64(buf, sid);
	put32(buf + 8, attempt);
	for (i = 0; i < nrx; i++)
		put64(buf + 12 + 8 * i, rx[i]);
	hmac_sha256_set_key(&h, 32, key);
	hmac_sha256_update(&h, strlen(label), (const uint8_t *)label);
	hmac_sha256_update(&h, 12 + 8 * (size_t)nrx, buf);
	hmac_sha256_digest(&h, 32, mac);
	memcpy(out, mac, 16);
}

/* a resume request of @attempt, its proof right or not: the answer's
 * status (0: accepted, its proof checked) */
static int raw_resume(uint64_t sid, const uint8_t key[32], uint32_t attempt,
		      bool forge, int *fd_p)
{
	uint8_t req[36], r[256], mac[16];
	uint64_t zero = 0, both[2] = {0, 0};
	size_t n;

	put64(req, sid);
	put32(req + 8, attempt);
	put64(req + 12, 0); /* we received nothing */
	raw_mac(key, "rmsg-resume-1 client", sid, attempt, &zero, 1, req + 20);
	if (forge)
		req[20] ^= 1;
	*fd_p = raw_hello(req, sizeof(req), r, &n);
	if (r[2] == 7) /* REJECT: its status */
		return (int16_t)(r[38] | r[39] << 8);
	T_ASSERT(r[2] == 6 && (r[35] & 0x08) && n == 32 + 16 + 1 + 24 &&
			 r[48] == 24,
		 "a resume answer of %zu bytes, type %u", n, r[2]);
	/* the server's count, and its proof over both counts */
	both[0] = get64(r + 49);
	raw_mac(key, "rmsg-resume-1 server", sid, attempt, both, 2, mac);
	T_ASSERT(both[0] == 0 && memcmp(mac, r + 57, 16) == 0,
		 "the server's answer does not prove the session");
	return 0;
}

/* a probe (auto://'s way back, rmsg.7): a resume request with one more
 * byte, 1, proved with the label "rmsg-resume-1 probe" (@label NULL), or
 * with another; the answer's status (a probe is always refused) */
static int raw_probe(uint64_t sid, const uint8_t key[32], uint32_t attempt,
		     const char *label)
{
	uint8_t req[37], r[256];
	uint64_t zero = 0;
	size_t n;
	int fd, st;

	put64(req, sid);
	put32(req + 8, attempt);
	put64(req + 12, 0);
	raw_mac(key, label ? label : "rmsg-resume-1 probe", sid, attempt, &zero,
		1, req + 20);
	req[36] = 1;
	fd = raw_hello(req, sizeof(req), r, &n);
	T_ASSERT(r[2] == 7, "a probe answered with frame type %u", r[2]);
	st = (int16_t)(r[38] | r[39] << 8);
	if (st == -EALREADY) {
		uint8_t mac[16];

		/* the answer proves the session: HMAC(K, "rmsg-resume-1
		 * probe answer" || sid || attempt || 0), 16 bytes */
		raw_mac(key, "rmsg-resume-1 probe answer", sid, attempt, &zero,
			1, mac);
		T_ASSERT((r[35] & 0x08) && r[34] == 0 && r[48] == 16 &&
				 memcmp(mac, r + 49, 16) == 0,
			 "a probe's answer does not prove the session");
	}
	close(fd);
	return st;
}

static void part_forged(struct rmsg_ctx *ctx[2])
{
	struct rmsg_cfg *cfg = mkcfg(10000);
	struct rmsg_conn_ops ops = {.on_established = established,
				    .on_msg = on_msg,
				    .on_close = on_close};
	uint8_t r[256], key[32];
	struct rmsg_listener *lis;
	char uri[128];
	uint64_t sid;
	size_t n;
	int fd, st;

	reset_sides();
	t_listen(ctx[0], cfg, &ops, NULL, (void *)0, &lis, uri, sizeof(uri));
	sport = (uint16_t)atoi(strrchr(uri, ':') + 1);
	/* a first hello that asks for a session: id and secret back */
	fd = raw_hello(NULL, 0, r, &n);
	T_ASSERT(r[2] == 6 && (r[35] & 0x08) && n == 32 + 16 + 1 + 40 &&
			 r[48] == 40,
		 "no session offered (type %u, %zu bytes)", r[2], n);
	sid = get64(r + 49);
	memcpy(key, r + 57, 32);
	T_RUN_UNTIL(loop, sd[0].c, 10);
	raw_reset(fd);
	T_RUN_UNTIL(loop,
		    rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_SUSPENDED,
		    10);
	st = raw_resume(sid, key, 1, true, &fd);
	T_ASSERT(st == -EACCES, "a forged proof: %d", st);
	close(fd);
	T_OK(raw_resume(sid, key, 1, false, &fd));
	T_RUN_UNTIL(loop, rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_ON,
		    10);
	raw_reset(fd);
	T_RUN_UNTIL(loop,
		    rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_SUSPENDED,
		    10);
	st = raw_resume(sid, key, 1, false, &fd);
	T_ASSERT(st == -EACCES, "a replayed request: %d", st);
	close(fd);
	T_OK(raw_resume(sid, key, 2, false, &fd));
	T_RUN_UNTIL(loop, rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_ON,
		    10);
	T_ASSERT(resumes_of(sd[0].c) == 2, "%llu resumes",
		 (unsigned long long)resumes_of(sd[0].c));
	T_ASSERT(!sd[0].closed, "closed: %s", rmsg_strerror(sd[0].reason));
	/* probes of the path while the session is up: a right one is
	 * answered EALREADY and touches nothing; the same attempt again, a
	 * forged one and one proved as a request are refused (EACCES) */
	st = raw_probe(sid, key, 3, NULL);
	T_ASSERT(st == -EALREADY, "a probe: %d", st);
	st = raw_probe(sid, key, 3, NULL);
	T_ASSERT(st == -EACCES, "a replayed probe: %d", st);
	st = raw_probe(sid, key, 4, "rmsg-resume-1 client");
	T_ASSERT(st == -EACCES, "a probe proved as a request: %d", st);
	st = raw_probe(sid, key, 5, "rmsg-resume-1 probe!");
	T_ASSERT(st == -EACCES, "a forged probe: %d", st);
	t_run_for(loop, 0.05);
	T_ASSERT(rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_ON &&
			 resumes_of(sd[0].c) == 2 && !sd[0].closed,
		 "a probe touched the session");
	raw_reset(fd);
	printf("a raw peer's session: a forged proof and a replayed request "
	       "refused (EACCES), two right ones resumed, the server's "
	       "answers proved; a probe answered EALREADY, a replayed, a "
	       "forged and a misproved one refused (EACCES)\n");
	T_RUN_UNTIL(loop,
		    rmsg_conn_resume_state(sd[0].c) == RMSG_RESUME_SUSPENDED,
		    10);
	T_OK(rmsg_conn_close(sd[0].c));
	T_RUN_UNTIL(loop, sd[0].closed, 10);
	rmsg_listener_close(lis);
	rmsg_cfg_destroy(cfg);
}

/* 14. acknowledgements a peer cannot give (header bytes 6-7): on a
 * connection without a session, and more than we sent on one with a
 * session: the server ends it with -EPROTO (rx.c, session.c) */
static void part_acks(struct rmsg_ctx *ctx[2])
{
	int k;

	for (k = 0; k < 2; k++) {
		struct rmsg_cfg *cfg = mkcfg(k ? 10000 : 0);
		struct rmsg_conn_ops ops = {.on_established = established,
					    .on_msg = on_msg,
					    .on_close = on_close};
		struct rmsg_listener *lis;
		uint8_t r[256], f[32];
		char uri[128];
		size_t n;
		int fd;

		reset_sides();
		t_listen(ctx[0], cfg, &ops, NULL, (void *)0, &lis, uri,
			 sizeof(uri));
		sport = (uint16_t)atoi(strrchr(uri, ':') + 1);
		fd = raw_hello(NULL, 0, r, &n);
		T_ASSERT(r[2] == 6 && !(r[35] & 0x08) == !k, "a session %s",
			 k ? "not offered" : "offered");
		T_RUN_UNTIL(loop, sd[0].c, 10);
		/* a CREDIT frame acknowledging one message of the server's,
		 * which sent none */
		memset(f, 0, sizeof(f));
		f[0] = 0xa7, f[1] = 1, f[2] = 2;
		f[6] = 1;
		T_ASSERT(write(fd, f, sizeof(f)) == (ssize_t)sizeof(f),
			 "write");
		T_RUN_UNTIL(loop, sd[0].closed, 10);
		T_ASSERT(sd[0].reason == -EPROTO, "server: %s",
			 rmsg_strerror(sd[0].reason));
		printf("acks %s: EPROTO (%s)\n",
		       k ? "beyond what was sent" : "without a session",
		       sd[0].why);
		close(fd);
		rmsg_listener_close(lis);
		rmsg_cfg_destroy(cfg);
	}
}

int main(void)
{
	struct rmsg_ctx *ctx[2];
	struct rmsg_cfg *cfg;
	int i;

	t_require_transport();
	if (strcmp(t_transport(), "tcp")) {
		printf("resume: TCP only (its proxy is TCP; RDMA: "
		       "tests/fault/link_resume)\n");
		return T_SKIP;
	}
	loop = ev_default_loop(0);
	T_OK(rmsg_cfg_create(&cfg));
	for (i = 0; i < 2; i++)
		T_OK(rmsg_ctx_create(loop, cfg, &ctx[i]));
	T_OK(rmsg_handle(ctx[0], M_ECHO, echo, NULL));
	t_deadline(loop, 120 * t_scale());
	part_stream(ctx, false);
	part_stream(ctx, true);
	part_blackhole(ctx);
	part_flap(ctx);
	part_too_big(ctx);
	part_full_and_bye(ctx);
	part_window(ctx);
	part_stale(ctx);
	part_raw(ctx);
	part_forged(ctx);
	part_acks(ctx);
	/* 13. the contexts go while a connection is suspended, with sends
	 * queued and a dial pending: every callback runs, on_close last */
	{
		struct rmsg_cfg *c2 = mkcfg(10000);
		struct rmsg_listener *lis;

		nmsg = 3;
		conn_pair(ctx, c2, &lis);
		refuse_all = true;
		proxy_cut();
		T_RUN_UNTIL(loop,
			    rmsg_conn_resume_state(sd[1].c) ==
				    RMSG_RESUME_SUSPENDED,
			    10);
		pump(1);
		rmsg_listener_close(lis);
		rmsg_cfg_destroy(c2);
	}
	proxy_cut();
	ev_io_stop(loop, &paccept);
	close(pfd);
	for (i = 0; i < 2; i++)
		T_OK(rmsg_ctx_destroy(ctx[i]));
	T_ASSERT(sd[0].closed == 1 && sd[1].closed == 1,
		 "on_close: %d and %d times", sd[0].closed, sd[1].closed);
	T_ASSERT(sd[1].send_err == 3, "%d of 3 queued sends failed",
		 sd[1].send_err);
	printf("contexts destroyed with suspended connections: on_close "
	       "once each (%s, %s), the 3 queued sends failed first\n",
	       rmsg_err_name(sd[0].reason), rmsg_err_name(sd[1].reason));
	rmsg_cfg_destroy(cfg);
	return 0;
}
