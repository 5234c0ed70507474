// SPDX-License-Identifier: MIT
/*
 * observe.c - what the library tells an operator (issue 35), over the
 * transport under test:
 *  1. the log at info (rmsg_cfg_set_log.3): a ping-pong between two
 *     contexts logs, per side, one line per connection event (dialed,
 *     accepted, established with the transport and why, closed with the
 *     reason and counters), each line key=value pairs that parse, the
 *     addresses of one side the mirror of the other's;
 *  2. the same with RMSG_LOG=info and no hook, in a child: lines on
 *     standard error, each with its UTC time; RMSG_LOG=bogus, in another
 *     child: one line on standard error naming the valid levels;
 *  3. the counters at run time (rmsg_stat_count.3): a name, description
 *     and flags for every member of struct rmsg_stats, names unique;
 *  4. rmsg_ctx_stats_export.3: both formats, with a live connection; the
 *     snprintf rule (measure, cut, exact fit); the errors. The text is
 *     parsed by real parsers in tests/examples/stats_http.py.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "common.h"

static struct ev_loop *loop;
static int est, closed, pongs;
static char cli_log[8192], srv_log[8192];

struct logbuf {
	char *buf;
	size_t len, size;
};

static struct logbuf cli_lb = {cli_log, 0, sizeof(cli_log)};
static struct logbuf srv_lb = {srv_log, 0, sizeof(srv_log)};

static void log_cb(int level, const char *line, void *arg)
{
	struct logbuf *lb = arg;
	int n;

	if (level != RMSG_LOG_INFO)
		return;
	n = snprintf(lb->buf + lb->len, lb->size - lb->len, "%s\n", line);
	if (n > 0 && lb->len + (size_t)n < lb->size)
		lb->len += (size_t)n;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec v = {(void *)"pong", 4};

	T_OK(rmsg_send(c, &v, 1, NULL, NULL));
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	closed++;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct iovec v = {(void *)"ping", 4};

	est++;
	T_OK(rmsg_send(c, &v, 1, NULL, NULL));
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	pongs++;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	closed++;
}

static const struct rmsg_conn_ops sops = {.on_msg = srv_msg,
					  .on_close = srv_close};
static const struct rmsg_conn_ops cops = {
	.on_established = cli_est, .on_msg = cli_msg, .on_close = cli_close};

/* ------------------------------------------------------------------ */
/* 1. log lines                                                         */

#define KV_MAX 16
struct kv {
	int n;
	char key[KV_MAX][32], val[KV_MAX][200];
};

/* "k=v k2="v with spaces" ..." into @kv; false if it does not parse */
static bool parse_line(const char *p, struct kv *kv)
{
	kv->n = 0;
	while (*p) {
		const char *eq = strchr(p, '='), *end;
		size_t kl, vl;

		if (!eq || eq == p || kv->n == KV_MAX)
			return false;
		kl = (size_t)(eq - p);
		if (kl >= sizeof(kv->key[0]) || memchr(p, ' ', kl))
			return false;
		memcpy(kv->key[kv->n], p, kl);
		kv->key[kv->n][kl] = 0;
		p = eq + 1;
		if (*p == '"') {
			end = strchr(p + 1, '"');
			if (!end)
				return false;
			p++;
		} else {
			end = p + strcspn(p, " ");
		}
		vl = (size_t)(end - p);
		if (vl >= sizeof(kv->val[0]))
			return false;
		memcpy(kv->val[kv->n], p, vl);
		kv->val[kv->n][vl] = 0;
		kv->n++;
		p = *end == '"' ? end + 1 : end;
		if (*p == ' ')
			p++;
		else if (*p)
			return false;
	}
	return true;
}

static const char *get(const struct kv *kv, const char *key)
{
	int i;

	for (i = 0; i < kv->n; i++)
		if (!strcmp(kv->key[i], key))
			return kv->val[i];
	return NULL;
}

/* the line of @event in @log, parsed into @kv; fails if none or two */
static void find_event(const char *who, const char *log, const char *event,
		       struct kv *kv)
{
	char line[512];
	const char *p = log;
	int found = 0;

	while (*p) {
		size_t n = strcspn(p, "\n");
		struct kv one;

		T_ASSERT(n < sizeof(line), "%s: a line of %zu bytes", who, n);
		memcpy(line, p, n);
		line[n] = 0;
		p += n + (p[n] == '\n');
		if (strncmp(line, "conn=", 5))
			continue; /* not a connection event */
		T_ASSERT(parse_line(line, &one), "%s: does not parse: %s", who,
			 line);
		T_ASSERT(get(&one, "event") && get(&one, "local") &&
				 get(&one, "peer"),
			 "%s: no event, local or peer: %s", who, line);
		if (strcmp(get(&one, "event"), event))
			continue;
		*kv = one;
		found++;
	}
	T_ASSERT(found == 1, "%s: %d lines of event=%s in:\n%s", who, found,
		 event, log);
}

static void check_log(void)
{
	struct kv d, a, ce, se, cc, sc;

	find_event("client", cli_log, "dialed", &d);
	T_ASSERT(!strcmp(get(&d, "local"), "-") && get(&d, "uri"),
		 "dialed: no uri, or an address before connecting");
	find_event("server", srv_log, "accepted", &a);
	find_event("client", cli_log, "established", &ce);
	find_event("server", srv_log, "established", &se);
	T_ASSERT(!strcmp(get(&ce, "transport"), t_transport()) &&
			 !strcmp(get(&se, "transport"), t_transport()),
		 "established: transport %s/%s", get(&ce, "transport"),
		 get(&se, "transport"));
	T_ASSERT(get(&ce, "why") && *get(&ce, "why"), "established: no why");
	/* one side's local address is the other's peer */
	T_ASSERT(!strcmp(get(&ce, "local"), get(&se, "peer")) &&
			 !strcmp(get(&ce, "peer"), get(&se, "local")) &&
			 !strcmp(get(&a, "peer"), get(&se, "peer")),
		 "addresses: client %s -> %s, server %s <- %s",
		 get(&ce, "local"), get(&ce, "peer"), get(&se, "local"),
		 get(&se, "peer"));
	T_ASSERT(strchr(get(&ce, "local"), ':'), "not ADDR:PORT: %s",
		 get(&ce, "local"));
	find_event("client", cli_log, "closed", &cc);
	find_event("server", srv_log, "closed", &sc);
	T_ASSERT(!strcmp(get(&cc, "err"), "OK") &&
			 !strcmp(get(&cc, "reason"),
				 "closed by this side (rmsg_conn_close)"),
		 "client closed: err=%s reason=%s", get(&cc, "err"),
		 get(&cc, "reason"));
	T_ASSERT(!strcmp(get(&sc, "err"), "ESHUTDOWN") &&
			 !strcmp(get(&sc, "reason"),
				 "the peer closed the connection"),
		 "server closed: err=%s reason=%s", get(&sc, "err"),
		 get(&sc, "reason"));
	T_ASSERT(!strcmp(get(&cc, "msgs_sent"), "1") &&
			 !strcmp(get(&cc, "bytes_recv"), "4") &&
			 !strcmp(get(&sc, "msgs_recv"), "1"),
		 "the counter summary: client sent %s received %s bytes",
		 get(&cc, "msgs_sent"), get(&cc, "bytes_recv"));
	printf("observe: %s: log at info: dialed, accepted, established, "
	       "closed on both sides, all parsed\n",
	       t_transport());
}

/* ------------------------------------------------------------------ */
/* 4. export                                                            */

static void check_export(struct rmsg_ctx *ctx)
{
	static char full[65536], cut[64];
	int n, m, i;

	n = rmsg_ctx_stats_export(ctx, RMSG_STATS_PROMETHEUS, NULL, 0);
	T_ASSERT(n > 0 && (size_t)n < sizeof(full), "measured %d", n);
	m = rmsg_ctx_stats_export(ctx, RMSG_STATS_PROMETHEUS, full,
				  (size_t)n + 1);
	T_ASSERT(m == n && strlen(full) == (size_t)n,
		 "an exact fit: %d of %d, strlen %zu", m, n, strlen(full));
	/* cut: the beginning, NUL-terminated, and the whole length */
	memset(cut, 'x', sizeof(cut));
	m = rmsg_ctx_stats_export(ctx, RMSG_STATS_PROMETHEUS, cut, 20);
	T_ASSERT(m == n && strlen(cut) == 19 && !strncmp(cut, full, 19) &&
			 cut[20] == 'x',
		 "cut at 20: %d, \"%s\"", m, cut);
	m = rmsg_ctx_stats_export(ctx, RMSG_STATS_PROMETHEUS, cut, 1);
	T_ASSERT(m == n && cut[0] == 0, "cut at 1");
	T_ASSERT(strstr(full, "# TYPE rmsg_ctx_msgs_sent_total counter\n") &&
			 strstr(full, "\nrmsg_ctx_conns_opened_total 1\n") &&
			 strstr(full, "\nrmsg_ctx_connections 1\n") &&
			 strstr(full, "rmsg_conn_msgs_sent_total{conn=\"1\","),
		 "the Prometheus text:\n%s", full);
	/* context-only counters have no per-connection family */
	T_ASSERT(!strstr(full, "rmsg_conn_conns_opened_total"),
		 "a per-connection conns_opened");
	n = rmsg_ctx_stats_export(ctx, RMSG_STATS_JSON, full, sizeof(full));
	T_ASSERT(n > 0 && (size_t)n < sizeof(full) && full[n - 1] == '\n',
		 "JSON: %d", n);
	T_ASSERT(!strncmp(full, "{\"counters\":{\"msgs_sent\":", 25) &&
			 strstr(full, ",\"connections\":[{\"id\":1,"),
		 "the JSON text:\n%s", full);
	/* covers: rmsg_ctx_stats_export.3 EINVAL */
	T_ASSERT(rmsg_ctx_stats_export(NULL, RMSG_STATS_JSON, full,
				       sizeof(full)) == -EINVAL,
		 "NULL ctx");
	/* covers: rmsg_ctx_stats_export.3 EINVAL */
	T_ASSERT(rmsg_ctx_stats_export(ctx, 2, full, sizeof(full)) == -EINVAL,
		 "format 2");
	/* covers: rmsg_ctx_stats_export.3 EINVAL */
	T_ASSERT(rmsg_ctx_stats_export(ctx, RMSG_STATS_JSON, NULL, 10) ==
			 -EINVAL,
		 "NULL buf with a length");
	for (i = 0; i < 2; i++)
		T_ASSERT(rmsg_ctx_stats_export(ctx, i, NULL, 0) > 0,
			 "format %d measures", i);
	printf("observe: %s: export: Prometheus %d bytes, JSON %d bytes\n",
	       t_transport(),
	       rmsg_ctx_stats_export(ctx, RMSG_STATS_PROMETHEUS, NULL, 0), n);
}

/* 3. names at run time */
static void check_stat_info(void)
{
	int n = rmsg_stat_count(), i, j;
	const char *name, *desc, *other;
	unsigned flags;

	T_ASSERT(n == (int)(sizeof(struct rmsg_stats) / sizeof(uint64_t)),
		 "rmsg_stat_count() %d", n);
	for (i = 0; i < n; i++) {
		T_OK(rmsg_stat_info(i, &name, &desc, &flags));
		T_ASSERT(name && *name && desc && strlen(desc) > 10 &&
				 (flags & RMSG_STAT_COUNTER),
			 "counter %d", i);
		for (j = 0; j < i; j++) {
			T_OK(rmsg_stat_info(j, &other, NULL, NULL));
			T_ASSERT(strcmp(name, other), "two named %s", name);
		}
	}
	/* the order is the struct's */
	T_OK(rmsg_stat_info(0, &name, NULL, &flags));
	T_ASSERT(!strcmp(name, "msgs_sent") && !(flags & RMSG_STAT_CTX_ONLY),
		 "counter 0: %s", name);
	T_OK(rmsg_stat_info(
		(int)(offsetof(struct rmsg_stats, conns_opened) / 8), &name,
		NULL, &flags));
	T_ASSERT(!strcmp(name, "conns_opened") && (flags & RMSG_STAT_CTX_ONLY),
		 "conns_opened: %s", name);
	/* covers: rmsg_stat_count.3 EINVAL */
	T_ASSERT(rmsg_stat_info(n, &name, &desc, &flags) == -EINVAL, "n");
	/* covers: rmsg_stat_count.3 EINVAL */
	T_ASSERT(rmsg_stat_info(-1, NULL, NULL, NULL) == -EINVAL, "-1");
}

/* ------------------------------------------------------------------ */

/* one ping-pong between two contexts; @logged: with hooks at info */
static void exchange(bool logged, bool export)
{
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_listener *l;
	struct rmsg_cfg *scfg = NULL, *ccfg = NULL;
	struct rmsg_conn *c;
	char uri[128];

	if (logged) {
		T_OK(rmsg_cfg_create(&scfg));
		T_OK(rmsg_cfg_create(&ccfg));
		T_OK(rmsg_cfg_set_log(scfg, RMSG_LOG_INFO, log_cb, &srv_lb));
		T_OK(rmsg_cfg_set_log(ccfg, RMSG_LOG_INFO, log_cb, &cli_lb));
	}
	T_OK(rmsg_ctx_create(loop, scfg, &sctx));
	T_OK(rmsg_ctx_create(loop, ccfg, &cctx));
	est = closed = pongs = 0;
	t_listen(sctx, NULL, &sops, NULL, NULL, &l, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &c));
	T_RUN_UNTIL(loop, pongs == 1, 60);
	if (export)
		check_export(cctx);
	T_ASSERT(!rmsg_conn_close_reason(c), "a close reason while open");
	T_OK(rmsg_conn_close(c));
	T_RUN_UNTIL(loop, closed == 2, 60);
	T_OK(rmsg_listener_close(l));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(scfg);
	rmsg_cfg_destroy(ccfg);
}

/* 2. a child with RMSG_LOG=@value, its standard error into @out */
static void child_stderr(const char *value, char *out, size_t size)
{
	int fds[2], st;
	ssize_t n, got = 0;
	pid_t pid;

	T_ASSERT(pipe(fds) == 0, "pipe");
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		setenv("RMSG_LOG", value, 1);
		loop = ev_loop_new(0);
		exchange(false, false);
		_exit(0);
	}
	close(fds[1]);
	while ((size_t)got < size - 1 &&
	       (n = read(fds[0], out + got, size - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = 0;
	close(fds[0]);
	T_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
			 WEXITSTATUS(st) == 0,
		 "RMSG_LOG=%s: the child failed:\n%s", value, out);
}

static void check_env(void)
{
	static char text[16384];
	const char *p, *ev;
	int lines = 0;

	child_stderr("info", text, sizeof(text));
	for (p = text; *p; p = strchr(p, '\n') + 1) {
		T_ASSERT(strchr(p, '\n'), "no newline at the end");
		/* "2026-12-06T03:16:35.123456Z librmsg info: conn=..." */
		T_ASSERT(strlen(p) > 28 && p[4] == '-' && p[10] == 'T' &&
				 p[19] == '.' && p[26] == 'Z' &&
				 !strncmp(p + 27, " librmsg ", 9),
			 "a line without its time: %.80s", p);
		/* this line's, not a later one's */
		ev = strstr(p, " event=");
		if (!strncmp(p + 27, " librmsg info: conn=", 20) && ev &&
		    ev < strchr(p, '\n'))
			lines++;
	}
	/* dialed, accepted, 2 established, 2 closed */
	T_ASSERT(lines == 6, "RMSG_LOG=info: %d event lines:\n%s", lines, text);
	child_stderr("bogus", text, sizeof(text));
	p = strstr(text, "RMSG_LOG=bogus is not a level: use error, warn, "
			 "info or debug");
	T_ASSERT(p && !strstr(p + 1, "RMSG_LOG=bogus"),
		 "RMSG_LOG=bogus: not reported once; standard error says:\n%s",
		 text);
	printf("observe: %s: RMSG_LOG=info: %d timed lines on standard "
	       "error; RMSG_LOG=bogus reported once\n",
	       t_transport(), lines);
}

int main(void)
{
	t_require_transport();
	/* the children set their own; the hooks below need no override */
	unsetenv("RMSG_LOG");
	loop = ev_default_loop(0);
	t_deadline(loop, 240);
	check_stat_info();
	check_env();
	exchange(true, true);
	check_log();
	return 0;
}
