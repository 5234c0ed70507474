// SPDX-License-Identifier: MIT
/*
 * leak_cycles.c - many connect / send / echo / close cycles must leave
 * the process where it started: open file descriptors (/proc/self/fd),
 * resident memory (VmRSS), pinned memory (VmPin) and, over RDMA, queue
 * pairs and rdma_cm ids (`rdma res show qp|cm_id`, if the tool is here).
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
static int have_rdma_tool = -1;

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

/* lines of `rdma res show WHAT`, or -1 without the tool */
static long rdma_res(const char *what)
{
	char cmd[128], line[512];
	long n = 0;
	FILE *p;

	if (!have_rdma_tool)
		return -1;
	snprintf(cmd, sizeof(cmd), "rdma res show %s 2>/dev/null", what);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (line[0] != '\n')
			n++;
	if (pclose(p) != 0) {
		have_rdma_tool = 0;
		return -1;
	}
	return n;
}

static void measure(struct figures *f)
{
	f->fds = count_fds();
	f->rss_kb = status_kb("VmRSS");
	f->pin_kb = status_kb("VmPin");
	if (have_rdma_tool < 0)
		have_rdma_tool = !strcmp(t_transport(), "rdma");
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

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct iovec a = {small, SMALL}, b = {large, LARGE};

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
	T_ASSERT(end.qps == base.qps, "QPs %ld -> %ld", base.qps, end.qps);
	T_ASSERT(end.cm_ids == base.cm_ids, "cm ids %ld -> %ld", base.cm_ids,
		 end.cm_ids);
	T_ASSERT(end.pin_kb <= base.pin_kb + PIN_SLACK_KB,
		 "VmPin %ld -> %ld KiB", base.pin_kb, end.pin_kb);
	/* under valgrind or ASan, RSS holds their freed-block queue; they
	 * judge leaks there themselves */
	if (!getenv("RMSG_TEST_NO_RSS"))
		T_ASSERT(end.rss_kb <= base.rss_kb + RSS_SLACK_KB,
			 "VmRSS %ld -> %ld KiB", base.rss_kb, end.rss_kb);

	printf("leak_cycles: %s: %d cycles: fds %ld -> %ld, VmRSS %+ld KiB, "
	       "VmPin %+ld KiB, QPs %ld -> %ld, cm ids %ld -> %ld\n",
	       t_transport(), cycles, base.fds, end.fds,
	       end.rss_kb - base.rss_kb, end.pin_kb - base.pin_kb, base.qps,
	       end.qps, base.cm_ids, end.cm_ids);

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
	T_ASSERT(gone.qps <= base.qps, "QPs left after destroy: %ld", gone.qps);
	return 0;
}
