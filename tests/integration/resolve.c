// SPDX-License-Identifier: MIT
/*
 * resolve.c - rmsg_connect() never blocks the loop on a host name
 * (rmsg_connect.3, rmsg.7 "The event loop"), on the transport of
 * RMSG_TEST_TRANSPORT.
 *
 * The test points the system's resolver at a DNS server of its own
 * without touching the host: it enters a private mount namespace (over
 * TCP also a private network namespace, so that 127.0.0.1:53 is free),
 * bind-mounts a resolv.conf naming 127.0.0.1 and an nsswitch.conf with
 * "hosts: files dns" over /etc's, and starts tests/integration/
 * dns_slow.py there. That server holds the answer of every name until
 * the test releases it (so nothing depends on timing) and answers
 * "nx." names with NXDOMAIN. Not root (no namespace): SKIP.
 *
 * Checks:
 *  - while connection A waits for its name, connection B of the same
 *    context (numeric address) completes K round trips; A is not
 *    established before the name is released; then it is, and carries
 *    a round trip;
 *  - a name that does not exist ends the connection with -ENXIO;
 *  - a timeout shorter than the name's resolution: -ETIMEDOUT;
 *  - rmsg_conn_close() during a resolution: on_close once, from the
 *    loop (not inside the call), reason 0;
 *  - rmsg_ctx_destroy() during a resolution: on_close once, -ECANCELED,
 *    no callback after; the resolver thread's late answer touches
 *    nothing (run it under valgrind or ASan to see that);
 *  - NCAP connections of one context to NCAP held names
 *    (rmsg_connect.3: at most 8 resolver threads per context, the
 *    other names wait): the server never sees more than CAP of those
 *    names unanswered at once, the process never has more than CAP
 *    threads beyond those it had, and every connection is established
 *    once the names seen are released, round after round; a connection
 *    closed while its name waits is never looked up, and a context
 *    destroyed with names waiting closes each with -ECANCELED.
 * Prints B's round trips during A's resolution and how long A took.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common.h"

#ifndef DNS_SLOW_PY
#define DNS_SLOW_PY "tests/integration/dns_slow.py"
#endif

#define K 20	      /* B's round trips while A resolves, at least */
#define CTL_PORT 5354 /* the DNS server's control port */
#define MAXC 8
#define CAP 8	/* resolver threads per context (rmsg_connect.3) */
#define NCAP 24 /* names resolved at once in the cap check */

static struct ev_loop *loop;
static pid_t dns_pid;
static char tmpdir[64];
static uint16_t port;

/* ------------------------------------------------------------------ */
/* the namespace and the DNS server                                     */

/* progress on stderr: where a hung run stopped */
static void step(const char *what)
{
	fprintf(stderr, "progress (%.3f s): %s\n", ev_time(), what);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	T_ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

static void bind_over(const char *src, const char *dst)
{
	T_ASSERT(mount(src, dst, "none", MS_BIND, NULL) == 0,
		 "bind %s over %s: %s", src, dst, strerror(errno));
}

static void lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	T_ASSERT(fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0, "lo");
	ifr.ifr_flags |= IFF_UP;
	T_ASSERT(ioctl(fd, SIOCSIFFLAGS, &ifr) == 0, "lo up: %s",
		 strerror(errno));
	close(fd);
}

static void dns_stop(void)
{
	if (dns_pid > 0) {
		kill(dns_pid, SIGTERM);
		waitpid(dns_pid, NULL, 0);
		dns_pid = 0;
	}
}

static void cleanup(void)
{
	char p[96];

	dns_stop();
	if (!tmpdir[0])
		return;
	snprintf(p, sizeof(p), "%s/resolv.conf", tmpdir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/nsswitch.conf", tmpdir);
	unlink(p);
	rmdir(tmpdir);
}

static void setup_ns(const char *addr, bool netns)
{
	char rc[96], ns[96], port_s[8], line[16] = "";
	struct stat st;
	int pfd[2];
	FILE *f;

	if (unshare(CLONE_NEWNS | (netns ? CLONE_NEWNET : 0)) != 0) {
		printf("SKIP: cannot make a private mount namespace (%s); "
		       "CI runs this test as root\n",
		       strerror(errno));
		exit(T_SKIP);
	}
	/* nothing mounted here may reach the host's namespace */
	T_ASSERT(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0,
		 "private mounts: %s", strerror(errno));
	if (netns)
		lo_up();
	strcpy(tmpdir, "/tmp/rmsg-resolve.XXXXXX");
	T_ASSERT(mkdtemp(tmpdir), "mkdtemp");
	atexit(cleanup);
	snprintf(rc, sizeof(rc), "%s/resolv.conf", tmpdir);
	snprintf(ns, sizeof(ns), "%s/nsswitch.conf", tmpdir);
	/* one server, asked once, waited for long: the held answers come
	 * when the test says so, not after a retry */
	write_file(rc, "nameserver 127.0.0.1\n"
		       "options ndots:1 timeout:30 attempts:1\n");
	write_file(ns, "hosts: files dns\n");
	bind_over(rc, "/etc/resolv.conf");
	bind_over(ns, "/etc/nsswitch.conf");
	/* a name service cache would answer instead of our server */
	if (stat("/var/run/nscd/socket", &st) == 0)
		bind_over("/dev/null", "/var/run/nscd/socket");

	T_ASSERT(pipe(pfd) == 0, "pipe");
	snprintf(port_s, sizeof(port_s), "%d", CTL_PORT);
	dns_pid = fork();
	T_ASSERT(dns_pid >= 0, "fork");
	if (dns_pid == 0) {
		const char *py = access("/usr/bin/python3", X_OK) == 0
					 ? "/usr/bin/python3"
					 : "python3";

		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execlp(py, py, DNS_SLOW_PY, addr, port_s, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	T_ASSERT(f && fgets(line, sizeof(line), f) && !strcmp(line, "ready\n"),
		 "the DNS server did not start (%s)", DNS_SLOW_PY);
	fclose(f);
}

/* one request to the server's control port, and its answer */
static void dns_ctl(const char *cmd, char *out, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(CTL_PORT)};
	struct timeval tv = {.tv_sec = 10};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t n;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(fd >= 0, "socket");
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	T_ASSERT(sendto(fd, cmd, strlen(cmd), 0, (struct sockaddr *)&sa,
			sizeof(sa)) > 0,
		 "ctl send");
	n = recv(fd, out, len - 1, 0);
	T_ASSERT(n > 0, "no answer from the DNS server to '%s'", cmd);
	out[n] = 0;
	close(fd);
}

static int dns_seen(const char *name)
{
	char cmd[80], out[32];

	snprintf(cmd, sizeof(cmd), "seen %s", name);
	dns_ctl(cmd, out, sizeof(out));
	return atoi(out);
}

static int dns_release(const char *name)
{
	char cmd[80], out[32];

	snprintf(cmd, sizeof(cmd), "release %s", name);
	dns_ctl(cmd, out, sizeof(out));
	T_ASSERT(!strncmp(out, "ok ", 3), "release: %s", out);
	return atoi(out + 3);
}

/* ------------------------------------------------------------------ */
/* connections                                                          */

struct cli {
	struct rmsg_conn *c;
	int established, closes, reason, replies;
	double t_connect, t_established;
};

static struct cli cl[MAXC], capc[NCAP], capx;
static struct cli *b_cli;
static bool b_pinging;
static int b_rts;
static char ping[64] = "ping";

static void srv_sent(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	rmsg_msg_hold(m);
	if (rmsg_send(c, &iov, 1, srv_sent, m))
		rmsg_msg_release(m);
}

static void cli_ping(struct cli *x)
{
	struct iovec iov = {ping, sizeof(ping)};

	T_OK(rmsg_send(x->c, &iov, 1, NULL, NULL));
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct cli *x = arg;

	x->established++;
	x->t_established = ev_time();
}

/* B's next ping goes from its own watcher, once per loop iteration: a
 * ping sent from on_msg could keep the loop inside the context's flush
 * and completion polling (RDMA completes in software here), and the
 * loop is what this test watches */
static ev_idle b_next;

static void b_next_cb(struct ev_loop *l, ev_idle *w, int revents)
{
	ev_idle_stop(l, w);
	if (b_pinging)
		cli_ping(b_cli);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct cli *x = arg;

	T_ASSERT(rmsg_msg_len(m) == sizeof(ping), "echo length");
	x->replies++;
	if (x == b_cli && b_pinging) {
		b_rts++;
		ev_idle_start(loop, &b_next);
	}
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct cli *x = arg;

	x->closes++;
	x->reason = reason;
}

static const struct rmsg_conn_ops cops = {
	.on_established = cli_est, .on_msg = cli_msg, .on_close = cli_close};

static void cli_connect(struct rmsg_ctx *ctx, struct cli *x, const char *host,
			const struct rmsg_cfg *cfg)
{
	char uri[160];

	snprintf(uri, sizeof(uri), "%s://%s:%u", t_transport(), host, port);
	memset(x, 0, sizeof(*x));
	x->t_connect = ev_time();
	/* returns at once: the DNS server holds the answer */
	T_OK(rmsg_connect(ctx, uri, cfg, &cops, x, &x->c));
	T_ASSERT(ev_time() - x->t_connect < 5 * t_scale(),
		 "rmsg_connect(%s) blocked for %.1f s", uri,
		 ev_time() - x->t_connect);
	T_ASSERT(x->established == 0 && x->closes == 0,
		 "a callback inside rmsg_connect");
}

/* threads of this process */
static int count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	T_ASSERT(d, "/proc/self/task");
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* the cap step: names seen by the server and not released yet (marked
 * in @now when not NULL) */
static int cap_unreleased(const bool *rel, bool *now)
{
	char name[64];
	int i, n = 0;

	for (i = 0; i < NCAP; i++) {
		if (now)
			now[i] = false;
		if (rel[i])
			continue;
		snprintf(name, sizeof(name), "cap%d.rmsg.test", i);
		if (dns_seen(name) > 0) {
			n++;
			if (now)
				now[i] = true;
		}
	}
	return n;
}

/* the cap step's connections established or closed */
static int cap_ended(void)
{
	int i, n = 0;

	for (i = 0; i < NCAP; i++)
		n += capc[i].established + capc[i].closes;
	return n;
}

static void cap_step(void)
{
	struct rmsg_ctx *ctx3;
	bool rel[NCAP] = {false}, now[NCAP];
	char name[64];
	int i, base, tasks, max_tasks = 0, nrel = 0, seen, rounds = 0;

	base = count_tasks();
	T_OK(rmsg_ctx_create(loop, NULL, &ctx3));
	for (i = 0; i < NCAP; i++) {
		snprintf(name, sizeof(name), "cap%d.rmsg.test", i);
		cli_connect(ctx3, &capc[i], name, NULL);
	}
	/* one more, closed while its name waits: nobody looks it up */
	cli_connect(ctx3, &capx, "capx.rmsg.test", NULL);
	T_OK(rmsg_conn_close(capx.c));
	T_RUN_UNTIL(loop, capx.closes, 30);
	T_ASSERT(capx.reason == 0 && !capx.established, "capx: %d",
		 capx.reason);
	while (nrel < NCAP) {
		int want = NCAP - nrel < CAP ? NCAP - nrel : CAP;

		T_ASSERT(++rounds <= NCAP, "cap: %d rounds", rounds);
		/* the names the threads took reach the server */
		T_RUN_UNTIL(loop, cap_unreleased(rel, NULL) >= want, 30);
		tasks = count_tasks() - base;
		if (tasks > max_tasks)
			max_tasks = tasks;
		seen = cap_unreleased(rel, now);
		T_ASSERT(seen <= CAP && tasks <= CAP,
			 "cap: %d names resolving at once, %d more threads "
			 "(at most %d)",
			 seen, tasks, CAP);
		/* only the names counted: the threads go on meanwhile */
		for (i = 0; i < NCAP; i++) {
			if (!now[i])
				continue;
			snprintf(name, sizeof(name), "cap%d.rmsg.test", i);
			dns_release(name);
			rel[i] = true;
			nrel++;
		}
	}
	T_RUN_UNTIL(loop, cap_ended() == NCAP, 60);
	for (i = 0; i < NCAP; i++)
		T_ASSERT(capc[i].established == 1,
			 "cap: connection %d: on_close %d (%s)", i,
			 capc[i].reason, rmsg_strerror(capc[i].reason));
	T_ASSERT(dns_seen("capx.rmsg.test") == 0,
		 "capx: looked up after its connection closed");
	printf("resolve: %s: %d names at once on one context: at most %d "
	       "more threads, %d rounds, all established\n",
	       t_transport(), NCAP, max_tasks, rounds);
	T_OK(rmsg_ctx_destroy(ctx3));
	/* a context destroyed with names waiting for a thread: on_close
	 * -ECANCELED for each (their memory goes: valgrind.sh) */
	T_OK(rmsg_ctx_create(loop, NULL, &ctx3));
	for (i = 0; i < CAP + 4; i++) {
		snprintf(name, sizeof(name), "capd%d.rmsg.test", i);
		cli_connect(ctx3, &capc[i], name, NULL);
	}
	T_OK(rmsg_ctx_destroy(ctx3));
	for (i = 0; i < CAP + 4; i++)
		T_ASSERT(capc[i].closes == 1 && capc[i].reason == -ECANCELED,
			 "capd%d: %d on_close, reason %d", i, capc[i].closes,
			 capc[i].reason);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg};
	const char *addr = getenv("RMSG_TEST_ADDR");
	struct rmsg_listener *lis;
	struct rmsg_ctx *ctx, *ctx2;
	struct rmsg_cfg *cfg;
	struct cli *a, *b, *nx, *to, *cl_close, *cl_destroy;
	char luri[128];
	double t_rel;
	int rts_during, n;

	t_require_transport();
	if (!addr || !*addr)
		addr = "127.0.0.1";
	step("namespace and DNS server");
	setup_ns(addr, !strcmp(t_transport(), "tcp"));
	loop = EV_DEFAULT;
	t_deadline(loop, 120);
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	t_listen(ctx, NULL, &sops, NULL, NULL, &lis, luri, sizeof(luri));
	T_OK(rmsg_listener_port(lis, &port));

	step("B");
	/* B: numeric, established, pinging */
	b = b_cli = &cl[0];
	cli_connect(ctx, b, addr, NULL);
	T_RUN_UNTIL(loop, b->established, 30);
	ev_idle_init(&b_next, b_next_cb);
	b_pinging = true;
	cli_ping(b);

	step("A");
	/* A: a name whose answer the server holds */
	a = &cl[1];
	cli_connect(ctx, a, "slow.rmsg.test", NULL);
	n = b_rts;
	T_RUN_UNTIL(loop, b_rts - n >= K && dns_seen("slow.rmsg.test") > 0, 60);
	T_ASSERT(!a->established && !a->closes,
		 "A ended before its name resolved (%d, %d)", a->established,
		 a->closes);
	T_ASSERT(!strcmp(rmsg_conn_transport(a->c), "none"),
		 "A has a transport (%s) before its name resolved",
		 rmsg_conn_transport(a->c));
	t_rel = ev_time();
	T_ASSERT(dns_release("slow.rmsg.test") >= 1, "no query held");
	T_RUN_UNTIL(loop, a->established || a->closes, 30);
	T_ASSERT(a->established == 1, "A: on_close %d (%s)", a->reason,
		 rmsg_strerror(a->reason));
	rts_during = b_rts - n;
	b_pinging = false;
	T_ASSERT(rts_during >= K, "B: %d round trips", rts_during);
	T_ASSERT(!strcmp(rmsg_conn_transport(a->c), t_transport()), "A over %s",
		 rmsg_conn_transport(a->c));
	cli_ping(a);
	T_RUN_UNTIL(loop, a->replies == 1, 30);
	printf("resolve: %s: B made %d round trips while A's name resolved; "
	       "A established %.0f ms after rmsg_connect (%.0f ms after the "
	       "DNS answer was released)\n",
	       t_transport(), rts_during,
	       (a->t_established - a->t_connect) * 1e3,
	       (a->t_established - t_rel) * 1e3);

	step("nxdomain");
	/* a name that does not exist */
	nx = &cl[2];
	cli_connect(ctx, nx, "nx.rmsg.test", NULL);
	T_RUN_UNTIL(loop, nx->closes, 30);
	T_ASSERT(nx->established == 0 && nx->closes == 1, "nx: %d, %d",
		 nx->established, nx->closes);
	T_ASSERT(nx->reason == -ENXIO, "nx: on_close %d (%s), not -ENXIO",
		 nx->reason, rmsg_strerror(nx->reason));

	step("timeout");
	/* a name not resolved within the connection's timeout */
	to = &cl[3];
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_timeout_ms(cfg, 300));
	cli_connect(ctx, to, "held1.rmsg.test", cfg);
	T_RUN_UNTIL(loop, to->closes, 30);
	T_ASSERT(to->established == 0 && to->closes == 1, "timeout: %d, %d",
		 to->established, to->closes);
	T_ASSERT(to->reason == -ETIMEDOUT, "timeout: on_close %d (%s)",
		 to->reason, rmsg_strerror(to->reason));
	rmsg_cfg_destroy(cfg);

	step("close");
	/* a close while the resolver thread waits for the server */
	cl_close = &cl[4];
	cli_connect(ctx, cl_close, "held2.rmsg.test", NULL);
	T_RUN_UNTIL(loop, dns_seen("held2.rmsg.test") > 0, 30);
	T_OK(rmsg_conn_close(cl_close->c));
	T_ASSERT(cl_close->closes == 0, "on_close inside rmsg_conn_close");
	T_RUN_UNTIL(loop, cl_close->closes, 30);
	T_ASSERT(cl_close->reason == 0, "close: on_close %d", cl_close->reason);

	step("destroy");
	/* a context destroyed while its connection's name resolves */
	T_OK(rmsg_ctx_create(loop, NULL, &ctx2));
	cl_destroy = &cl[5];
	cli_connect(ctx2, cl_destroy, "held3.rmsg.test", NULL);
	T_RUN_UNTIL(loop, dns_seen("held3.rmsg.test") > 0, 30);
	T_OK(rmsg_ctx_destroy(ctx2));
	T_ASSERT(cl_destroy->closes == 1 && cl_destroy->reason == -ECANCELED,
		 "destroy: %d on_close, reason %d", cl_destroy->closes,
		 cl_destroy->reason);

	step("cap");
	cap_step();

	step("late answers");
	/* the held answers now reach the threads of the connections that
	 * are gone (and of the destroyed context): nothing may follow */
	T_ASSERT(dns_release("*") >= 1, "no query held");
	t_run_for(loop, 1.0 * t_scale());
	T_ASSERT(to->closes == 1 && cl_close->closes == 1 &&
			 cl_destroy->closes == 1 && nx->closes == 1,
		 "a callback after on_close");
	T_ASSERT(a->closes == 0 && b->closes == 0, "A or B closed");

	T_OK(rmsg_conn_close(a->c));
	T_OK(rmsg_conn_close(b->c));
	T_RUN_UNTIL(loop, a->closes && b->closes, 30);
	T_OK(rmsg_listener_close(lis));
	T_OK(rmsg_ctx_destroy(ctx));
	dns_stop();
	printf("PASS\n");
	return 0;
}
