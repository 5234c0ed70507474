// SPDX-License-Identifier: MIT
/*
 * leak_cycles.c - many connect / send / echo / close cycles must leave
 * the process where it started: open file descriptors (/proc/self/fd),
 * resident memory (VmRSS), pinned memory (VmPin) and, where RDMA is in
 * use (RMSG_TEST_TRANSPORT=rdma, or in the test VM: RMSG_VM=1), queue
 * pairs and rdma_cm ids (`rdma res show qp|cm_id`). There, a failure to
 * count them fails the test; over TCP on the host they do not exist, the
 * test says so and checks descriptors and memory only.
 *
 * Each cycle: the client connects, sends one eager message (100 B) and
 * one rendezvous message (20,000 B, above the 8 KiB eager size), the
 * server echoes both, the client closes, and the next cycle starts once
 * both sides saw on_close. WARMUP cycles first (pools and the device
 * are opened lazily), then the baseline, then CYCLES more; the figures
 * are taken again once the last teardown has settled.
 *
 * CYCLES: 1000 on both transports (about 12 ms a cycle on Soft-RoCE
 * under qemu TCG, 0.2 ms over TCP on the host).
 * RMSG_TEST_CYCLES overrides it. Limits: descriptors, QPs and cm ids
 * exactly back; VmPin within +1 MiB; VmRSS within +8 MiB.
 */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../integration/common.h"

#define WARMUP 30
#define SMALL 100
#define LARGE 20000
#define RSS_SLACK_KB (8 * 1024)
#define PIN_SLACK_KB 1024

struct figures {
	long fds, rss_kb, pin_kb, qps, cm_ids;
};

static struct ev_loop *loop;
static struct rmsg_ctx *cctx;
static char uri[128];
static int cycle, target, cli_closed, srv_closed, echoes, srv_closes;
static uint8_t small[SMALL], large[LARGE];
static int count_rdma = -1; /* QPs and cm ids counted (RDMA in use) */

static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	T_ASSERT(d, "opendir /proc/self/fd");
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory stream itself */
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t kl = strlen(key);
	char line[256];
	long v = -1;

	T_ASSERT(f, "/proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = atol(line + kl + 1);
	fclose(f);
	return v;
}

/* lines of `rdma res show WHAT`; where RDMA is in use, not being able to
 * count fails the test (a leak would go unseen); -1 elsewhere */
static long rdma_res(const char *what)
{
	char cmd[128], line[512];
	long n = 0;
	FILE *p;
	int st;

	if (!count_rdma)
		return -1;
	/* its error messages go to the test's log */
	snprintf(cmd, sizeof(cmd), "rdma res show %s", what);
	p = popen(cmd, "r");
	T_ASSERT(p, "popen(%s)", cmd);
	while (fgets(line, sizeof(line), p))
		if (line[0] != '\n')
			n++;
	st = pclose(p);
	T_ASSERT(st == 0,
		 "'%s' failed (status %d): RDMA is in use here, so QPs and "
		 "cm ids must be counted (iproute2's rdma tool is needed)",
		 cmd, st);
	return n;
}

static void measure(struct figures *f)
{
	f->fds = count_fds();
	f->rss_kb = status_kb("VmRSS");
	f->pin_kb = status_kb("VmPin");
	if (count_rdma < 0) {
		const char *vm = getenv("RMSG_VM");

		count_rdma = !strcmp(t_transport(), "rdma") ||
			     (vm && !strcmp(vm, "1"));
		if (!count_rdma)
			printf("NOTE: QPs and cm ids NOT checked: transport %s "
			       "outside the RDMA VM has none; descriptors and "
			       "memory are\n",
			       t_transport());
	}
	f->qps = rdma_res("qp");
	f->cm_ids = rdma_res("cm_id");
}

static void print(const char *what, const struct figures *f)
{
	printf("%-9s fds %ld  VmRSS %ld KiB  VmPin %ld KiB  QPs %ld  "
	       "cm_ids %ld\n",
	       what, f->fds, f->rss_kb, f->pin_kb, f->qps, f->cm_ids);
}

/* ---- server: echo ---- */

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	const uint8_t *src = rmsg_msg_len(m) == SMALL ? small : large;
	struct iovec iov = {(void *)src, rmsg_msg_len(m)};

	T_ASSERT(rmsg_msg_len(m) == SMALL || rmsg_msg_len(m) == LARGE,
		 "length %zu", rmsg_msg_len(m));
	T_ASSERT(!memcmp(rmsg_msg_data(m), src, rmsg_msg_len(m)), "content");
	/* echo from static memory that never changes */
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void next_cycle(int revents, void *arg);

static void maybe_next(void)
{
	if (cli_closed && srv_closed)
		ev_once(loop, -1, 0, 0, next_cycle, NULL);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	srv_closes++;
	srv_closed = 1;
	maybe_next();
}

/* ---- client ---- */

/* QPs and cm ids while one connection is up, taken once (probe_cycle) */
static int probe_cycle;
static long live_qps = -1, live_cm_ids = -1;

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct iovec a = {small, SMALL}, b = {large, LARGE};

	if (cycle == probe_cycle && count_rdma) {
		live_qps = rdma_res("qp");
		live_cm_ids = rdma_res("cm_id");
	}

	T_OK(rmsg_send(c, &a, 1, NULL, NULL));
	T_OK(rmsg_send(c, &b, 1, NULL, NULL));
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	if (++echoes % 2 == 0)
		rmsg_conn_close(c);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	T_ASSERT(reason == 0, "cycle %d: client closed with %d (%s)", cycle,
		 reason, rmsg_strerror(reason));
	cli_closed = 1;
	maybe_next();
}

static void next_cycle(int revents, void *arg)
{
	struct rmsg_conn_ops ops = {.on_established = cli_est,
				    .on_msg = cli_msg,
				    .on_close = cli_close};
	struct rmsg_conn *c;

	if (cycle == target) {
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	cycle++;
	cli_closed = srv_closed = 0;
	T_OK(rmsg_connect(cctx, uri, NULL, &ops, NULL, &c));
}

static void run_until(int n)
{
	target = n;
	ev_once(loop, -1, 0, 0, next_cycle, NULL);
	ev_run(loop, 0);
	T_ASSERT(cycle == n && echoes == 2 * n && srv_closes == n,
		 "cycles %d echoes %d server closes %d", cycle, echoes,
		 srv_closes);
}

static void nap(int revents, void *arg)
{
	ev_break(loop, EVBREAK_ALL);
}

/* lets deferred teardown (RDMA buries ids for up to 2 s) finish, until
 * the descriptors, QPs and cm ids are back or @max_s passed */
static void settle(const struct figures *base, struct figures *f, double max_s)
{
	ev_tstamp end = ev_time() + max_s;

	for (;;) {
		ev_once(loop, -1, 0, 0.1, nap, NULL);
		ev_run(loop, 0);
		measure(f);
		if (!base ||
		    (f->fds <= base->fds && f->qps <= base->qps &&
		     f->cm_ids <= base->cm_ids) ||
		    ev_time() > end)
			return;
	}
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = srv_close};
	struct figures start, base, half, end, gone;
	struct rmsg_listener *lis;
	struct rmsg_ctx *sctx;
	const char *env = getenv("RMSG_TEST_CYCLES");
	int cycles = 1000;
	ev_tstamp t0, t1;
	int i;

	t_require_transport();
	if (env && atoi(env) > 0)
		cycles = atoi(env);
	for (i = 0; i < SMALL; i++)
		small[i] = (uint8_t)(i * 7 + 1);
	t_fill(large, LARGE, 42);
	loop = ev_default_loop(0);
	measure(&start);
	print("start", &start);
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	t_deadline(loop, 60 + cycles * 0.5);

	run_until(WARMUP);
	settle(NULL, &base, 0.3);
	print("baseline", &base);
	t0 = ev_time();
	probe_cycle = WARMUP + 1;
	run_until(WARMUP + cycles / 2);
	settle(&base, &half, 5);
	print("half", &half);
	run_until(WARMUP + cycles);
	t1 = ev_time();
	settle(&base, &end, 5);
	print("end", &end);
	printf("%s: %d cycles (+%d warm-up), %.1f ms per cycle\n",
	       t_transport(), cycles, WARMUP, (t1 - t0) * 1000.0 / cycles);

	T_ASSERT(end.fds == base.fds, "descriptors %ld -> %ld", base.fds,
		 end.fds);
	if (count_rdma) {
		T_ASSERT(end.qps == base.qps, "QPs %ld -> %ld", base.qps,
			 end.qps);
		T_ASSERT(end.cm_ids == base.cm_ids, "cm ids %ld -> %ld",
			 base.cm_ids, end.cm_ids);
	}
	/* the counts see this process's resources at all: while a client
	 * was established, its QP and cm id and those of the server's
	 * accepted connection (made on the connect request) existed */
	if (count_rdma && !strcmp(t_transport(), "rdma")) {
		printf("live: QPs %ld  cm_ids %ld (one connection up)\n",
		       live_qps, live_cm_ids);
		T_ASSERT(live_qps >= end.qps + 2,
			 "with a connection up, QPs %ld, after %ld: the count "
			 "does not see them",
			 live_qps, end.qps);
		T_ASSERT(live_cm_ids >= end.cm_ids + 2,
			 "with a connection up, cm ids %ld, after %ld: the "
			 "count does not see them",
			 live_cm_ids, end.cm_ids);
	}
	T_ASSERT(end.pin_kb <= base.pin_kb + PIN_SLACK_KB,
		 "VmPin %ld -> %ld KiB", base.pin_kb, end.pin_kb);
	/* under valgrind or ASan, RSS holds their freed-block queue; they
	 * judge leaks there themselves */
	if (!getenv("RMSG_TEST_NO_RSS"))
		T_ASSERT(end.rss_kb <= base.rss_kb + RSS_SLACK_KB,
			 "VmRSS %ld -> %ld KiB", base.rss_kb, end.rss_kb);

	printf("leak_cycles: %s: %d cycles: fds %ld -> %ld, VmRSS %+ld KiB, "
	       "VmPin %+ld KiB, ",
	       t_transport(), cycles, base.fds, end.fds,
	       end.rss_kb - base.rss_kb, end.pin_kb - base.pin_kb);
	if (count_rdma)
		printf("QPs %ld -> %ld, cm ids %ld -> %ld\n", base.qps, end.qps,
		       base.cm_ids, end.cm_ids);
	else
		printf("QPs and cm ids not counted (none over %s)\n",
		       t_transport());

	rmsg_listener_close(lis);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	settle(NULL, &gone, 0.2);
	print("destroyed", &gone);
	/* librdmacm and libibverbs keep their own descriptors open for the
	 * process's life once used: exact only over TCP */
	if (strcmp(t_transport(), "rdma"))
		T_ASSERT(gone.fds == start.fds,
			 "descriptors after destroy %ld -> %ld", start.fds,
			 gone.fds);
	if (count_rdma)
		T_ASSERT(gone.qps <= base.qps, "QPs left after destroy: %ld",
			 gone.qps);
	return 0;
}
