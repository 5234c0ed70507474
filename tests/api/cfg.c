// SPDX-License-Identifier: MIT
/*
 * cfg.c - the configuration contract, through the exported library only
 * (rmsg_cfg_create.3, rmsg_cfg_set_eager_size.3, rmsg_cfg_set_keepalive_ms.3,
 * rmsg_cfg_set_max_conns.3, rmsg_cfg_set_reg_limit.3,
 * rmsg_cfg_set_tcp_rx_limit.3, rmsg_cfg_set_resume_ms.3, rmsg_cfg_set_log.3,
 * rmsg_conn_peer_data.3):
 *   1. every getter reads the documented default of a fresh configuration;
 *   2. every setter takes its documented minimum and maximum and refuses
 *      one below and one above (and the largest value of its type) with
 *      -EINVAL, leaving the value it had; NULL cfg and NULL output
 *      pointers give -EINVAL and a failed getter writes nothing;
 *   3. rmsg_cfg_set_private_data() and rmsg_cfg_set_log() bounds;
 *   4. RMSG_LOG (any case) replaces the level of rmsg_cfg_set_log() (in
 *      forked children: it is read once per process); with no function,
 *      lines go to standard error as "TIME librmsg warn: LINE";
 *   5. over a TCP loopback: a NULL cfg to rmsg_ctx_create() means the
 *      defaults and to rmsg_listen()/rmsg_connect() the context's; the
 *      values are copied when the object is made (changing or destroying
 *      the cfg afterwards changes nothing): the message size limit, the
 *      private data the peer sees, a listener's max_conns and where a
 *      context's log lines go.
 * Values are those the man pages promise, never read from the code.
 */
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"

#define KIB ((size_t)1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)

/* ------------------------------------------------------------------ */
/* setters and getters without a connection                            */

struct ucase {
	const char *name;
	int (*set)(struct rmsg_cfg *, unsigned);
	int (*get)(const struct rmsg_cfg *, unsigned *);
	unsigned def, lo, hi;
};

struct zcase {
	const char *name;
	int (*set)(struct rmsg_cfg *, size_t);
	int (*get)(const struct rmsg_cfg *, size_t *);
	size_t def, lo, hi;
};

/* defaults and ranges as the man pages state them */
static const struct ucase ucases[] = {
	/* rmsg_cfg_set_eager_size.3 */
	{"credits", rmsg_cfg_set_credits, rmsg_cfg_get_credits, 32, 4, 4096},
	{"send_queue", rmsg_cfg_set_send_queue, rmsg_cfg_get_send_queue, 1024,
	 1, 1048576},
	{"busy_poll_us", rmsg_cfg_set_busy_poll_us, rmsg_cfg_get_busy_poll_us,
	 0, 0, 1000000},
	{"timeout_ms", rmsg_cfg_set_timeout_ms, rmsg_cfg_get_timeout_ms, 10000,
	 1, 3600000},
	/* rmsg_cfg_set_keepalive_ms.3: 0 turns keepalive off */
	{"keepalive_ms", rmsg_cfg_set_keepalive_ms, rmsg_cfg_get_keepalive_ms,
	 1000, 0, 3600000},
	{"keepalive_misses", rmsg_cfg_set_keepalive_misses,
	 rmsg_cfg_get_keepalive_misses, 3, 1, 1000},
	/* rmsg_cfg_set_resume_ms.3: 0 (the default) turns resuming off */
	{"resume_ms", rmsg_cfg_set_resume_ms, rmsg_cfg_get_resume_ms, 0, 0,
	 3600000},
	/* rmsg_cfg_set_max_conns.3 */
	{"max_conns", rmsg_cfg_set_max_conns, rmsg_cfg_get_max_conns, 4096, 1,
	 16777216},
	{"max_pending", rmsg_cfg_set_max_pending, rmsg_cfg_get_max_pending, 256,
	 1, 16777216},
};

static const struct zcase zcases[] = {
	/* rmsg_cfg_set_eager_size.3 */
	{"eager_size", rmsg_cfg_set_eager_size, rmsg_cfg_get_eager_size, 8192,
	 64, MIB},
	{"max_msg_size", rmsg_cfg_set_max_msg_size, rmsg_cfg_get_max_msg_size,
	 GIB, 1, SIZE_MAX},
	/* rmsg_cfg_set_reg_limit.3: "below 4096" is refused, no maximum */
	{"reg_limit", rmsg_cfg_set_reg_limit, rmsg_cfg_get_reg_limit, GIB, 4096,
	 SIZE_MAX},
	/* rmsg_cfg_set_tcp_rx_limit.3: "below 1 MiB" is refused */
	{"tcp_rx_limit", rmsg_cfg_set_tcp_rx_limit, rmsg_cfg_get_tcp_rx_limit,
	 GIB, MIB, SIZE_MAX},
	/* rmsg_cfg_set_tcp_window.3: 64 KiB to 1 GiB */
	{"tcp_window", rmsg_cfg_set_tcp_window, rmsg_cfg_get_tcp_window,
	 512 << 10, 64 << 10, GIB},
};

#define NU (sizeof(ucases) / sizeof(ucases[0]))
#define NZ (sizeof(zcases) / sizeof(zcases[0]))

/* refused: -EINVAL and the value stays @keep */
static void u_refused(struct rmsg_cfg *cfg, const struct ucase *k, unsigned v,
		      unsigned keep)
{
	unsigned got = 0;
	int ret = k->set(cfg, v);

	/* covers: rmsg_cfg_set_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "%s(%u) = %d, want -EINVAL", k->name, v, ret);
	T_OK(k->get(cfg, &got));
	T_ASSERT(got == keep, "%s: refused %u changed the value %u to %u",
		 k->name, v, keep, got);
}

static void u_taken(struct rmsg_cfg *cfg, const struct ucase *k, unsigned v)
{
	unsigned got = v + 1;
	int ret = k->set(cfg, v);

	T_ASSERT(ret == 0, "%s(%u) = %d (%s), want 0", k->name, v, ret,
		 rmsg_strerror(ret));
	T_OK(k->get(cfg, &got));
	T_ASSERT(got == v, "%s: set %u, read %u", k->name, v, got);
}

static void z_refused(struct rmsg_cfg *cfg, const struct zcase *k, size_t v,
		      size_t keep)
{
	size_t got = 0;
	int ret = k->set(cfg, v);

	/* covers: rmsg_cfg_set_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "%s(%zu) = %d, want -EINVAL", k->name, v, ret);
	T_OK(k->get(cfg, &got));
	T_ASSERT(got == keep, "%s: refused %zu changed the value %zu to %zu",
		 k->name, v, keep, got);
}

static void z_taken(struct rmsg_cfg *cfg, const struct zcase *k, size_t v)
{
	size_t got = v + 1;
	int ret = k->set(cfg, v);

	T_ASSERT(ret == 0, "%s(%zu) = %d (%s), want 0", k->name, v, ret,
		 rmsg_strerror(ret));
	T_OK(k->get(cfg, &got));
	T_ASSERT(got == v, "%s: set %zu, read %zu", k->name, v, got);
}

/* a value inside the range, neither a bound nor the default */
static unsigned u_mid(const struct ucase *k)
{
	unsigned m = k->lo + (k->hi - k->lo) / 3;

	return m == k->def ? m + 1 : m;
}

static size_t z_mid(const struct zcase *k)
{
	size_t m = k->lo + (k->hi - k->lo) / 3;

	return m == k->def ? m + 1 : m;
}

static void check_unsigned(const struct ucase *k)
{
	struct rmsg_cfg *cfg;
	unsigned got, mid = u_mid(k);
	int ret;

	T_OK(rmsg_cfg_create(&cfg));
	got = 12345;
	T_OK(k->get(cfg, &got));
	T_ASSERT(got == k->def, "%s: default %u, the page says %u", k->name,
		 got, k->def);

	u_taken(cfg, k, k->lo);
	u_taken(cfg, k, k->hi);
	u_taken(cfg, k, mid);
	if (k->lo > 0)
		u_refused(cfg, k, k->lo - 1, mid);
	if (k->lo > 1)
		u_refused(cfg, k, 0, mid);
	u_refused(cfg, k, k->hi + 1, mid);
	u_refused(cfg, k, UINT_MAX, mid);

	/* NULL cfg and NULL output */
	ret = k->set(NULL, mid);
	/* covers: rmsg_cfg_set_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "%s(NULL cfg) = %d", k->name, ret);
	got = 777;
	ret = k->get(NULL, &got);
	/* covers: rmsg_cfg_get_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "get %s(NULL cfg) = %d", k->name, ret);
	T_ASSERT(got == 777, "get %s(NULL cfg) wrote its output", k->name);
	ret = k->get(cfg, NULL);
	/* covers: rmsg_cfg_get_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "get %s(NULL out) = %d", k->name, ret);
	rmsg_cfg_destroy(cfg);
}

static void check_size(const struct zcase *k)
{
	struct rmsg_cfg *cfg;
	size_t got, mid = z_mid(k);
	int ret;

	T_OK(rmsg_cfg_create(&cfg));
	got = 12345;
	T_OK(k->get(cfg, &got));
	T_ASSERT(got == k->def, "%s: default %zu, the page says %zu", k->name,
		 got, k->def);

	z_taken(cfg, k, k->lo);
	z_taken(cfg, k, k->hi);
	z_taken(cfg, k, mid);
	z_refused(cfg, k, k->lo - 1, mid);
	if (k->lo > 1)
		z_refused(cfg, k, 0, mid);
	if (k->hi < SIZE_MAX) {
		z_refused(cfg, k, k->hi + 1, mid);
		z_refused(cfg, k, SIZE_MAX, mid);
	}

	ret = k->set(NULL, mid);
	/* covers: rmsg_cfg_set_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "%s(NULL cfg) = %d", k->name, ret);
	got = 777;
	ret = k->get(NULL, &got);
	/* covers: rmsg_cfg_get_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "get %s(NULL cfg) = %d", k->name, ret);
	T_ASSERT(got == 777, "get %s(NULL cfg) wrote its output", k->name);
	ret = k->get(cfg, NULL);
	/* covers: rmsg_cfg_get_eager_size.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "get %s(NULL out) = %d", k->name, ret);
	rmsg_cfg_destroy(cfg);
}

/* each page's own EINVAL, checked once more under its page's name */
static void check_pages(void)
{
	struct rmsg_cfg *cfg;
	unsigned u = 5;
	size_t z = 5;
	int ret;

	T_OK(rmsg_cfg_create(&cfg));
	ret = rmsg_cfg_set_credits(cfg, 3);
	/* covers: rmsg_cfg_set_credits.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "credits 3: %d", ret);
	ret = rmsg_cfg_set_credits_initial(cfg, 3);
	/* covers: rmsg_cfg_set_credits_initial.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "credits_initial 3: %d", ret);
	ret = rmsg_cfg_set_credits_initial(cfg, 4097);
	T_ASSERT(ret == -EINVAL, "credits_initial 4097: %d", ret);
	T_OK(rmsg_cfg_set_credits_initial(cfg, 8));
	T_OK(rmsg_cfg_get_credits_initial(cfg, &u));
	T_ASSERT(u == 8, "credits_initial read back: %u", u);
	u = 5;
	ret = rmsg_cfg_set_keepalive_misses(cfg, 1001);
	/* covers: rmsg_cfg_set_keepalive_ms.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "keepalive_misses 1001: %d", ret);
	ret = rmsg_cfg_get_keepalive_ms(cfg, NULL);
	/* covers: rmsg_cfg_get_keepalive_ms.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "get keepalive_ms NULL: %d", ret);
	ret = rmsg_cfg_set_max_conns(cfg, 0);
	/* covers: rmsg_cfg_set_max_conns.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "max_conns 0: %d", ret);
	ret = rmsg_cfg_get_max_pending(NULL, &u);
	/* covers: rmsg_cfg_get_max_pending.3 EINVAL */
	T_ASSERT(ret == -EINVAL && u == 5, "get max_pending NULL: %d", ret);
	ret = rmsg_cfg_set_reg_limit(cfg, 4095);
	/* covers: rmsg_cfg_set_reg_limit.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "reg_limit 4095: %d", ret);
	ret = rmsg_cfg_get_reg_limit(cfg, NULL);
	/* covers: rmsg_cfg_get_reg_limit.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "get reg_limit NULL: %d", ret);
	ret = rmsg_cfg_set_tcp_rx_limit(cfg, MIB - 1);
	/* covers: rmsg_cfg_set_tcp_rx_limit.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "tcp_rx_limit 1 MiB - 1: %d", ret);
	ret = rmsg_cfg_get_tcp_rx_limit(NULL, &z);
	/* covers: rmsg_cfg_get_tcp_rx_limit.3 EINVAL */
	T_ASSERT(ret == -EINVAL && z == 5, "get tcp_rx_limit NULL: %d", ret);
	ret = rmsg_cfg_set_tcp_window(cfg, (64 << 10) - 1);
	/* covers: rmsg_cfg_set_tcp_window.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "tcp_window 64 KiB - 1: %d", ret);
	ret = rmsg_cfg_get_tcp_window(NULL, &z);
	/* covers: rmsg_cfg_get_tcp_window.3 EINVAL */
	T_ASSERT(ret == -EINVAL && z == 5, "get tcp_window NULL: %d", ret);
	ret = rmsg_cfg_set_resume_ms(cfg, 3600001);
	/* covers: rmsg_cfg_set_resume_ms.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "resume_ms 3600001: %d", ret);
	ret = rmsg_cfg_get_resume_ms(NULL, &u);
	/* covers: rmsg_cfg_get_resume_ms.3 EINVAL */
	T_ASSERT(ret == -EINVAL && u == 5, "get resume_ms NULL: %d", ret);
	rmsg_cfg_destroy(cfg);
}

static void check_create(void)
{
	struct rmsg_cfg *cfg = NULL;
	int ret = rmsg_cfg_create(NULL);

	/* covers: rmsg_cfg_create.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "rmsg_cfg_create(NULL) = %d", ret);
	T_OK(rmsg_cfg_create(&cfg));
	T_ASSERT(cfg, "no cfg stored");
	rmsg_cfg_destroy(cfg);
	rmsg_cfg_destroy(NULL); /* ignored */
}

static void check_private_data(void)
{
	uint8_t big[RMSG_PRIVATE_DATA_MAX + 1];
	struct rmsg_cfg *cfg;
	int ret;

	memset(big, 'p', sizeof(big));
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_private_data(cfg, big, RMSG_PRIVATE_DATA_MAX));
	T_OK(rmsg_cfg_set_private_data(cfg, big, 1));
	T_OK(rmsg_cfg_set_private_data(cfg, NULL, 0));
	ret = rmsg_cfg_set_private_data(cfg, big, RMSG_PRIVATE_DATA_MAX + 1);
	/* covers: rmsg_cfg_set_private_data.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "private data of %d bytes: %d",
		 RMSG_PRIVATE_DATA_MAX + 1, ret);
	ret = rmsg_cfg_set_private_data(cfg, NULL, 1);
	/* covers: rmsg_cfg_set_private_data.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "NULL private data of 1 byte: %d", ret);
	ret = rmsg_cfg_set_private_data(NULL, big, 1);
	/* covers: rmsg_cfg_set_private_data.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "private data on a NULL cfg: %d", ret);
	rmsg_cfg_destroy(cfg);
	/* that a refused call keeps the bytes is checked over a connection */
}

static void no_log(int level, const char *line, void *arg)
{
}

static void check_log_args(void)
{
	struct rmsg_cfg *cfg;
	int level, ret;

	T_OK(rmsg_cfg_create(&cfg));
	for (level = RMSG_LOG_ERROR; level <= RMSG_LOG_DEBUG; level++)
		T_OK(rmsg_cfg_set_log(cfg, level, level & 1 ? no_log : NULL,
				      NULL));
	ret = rmsg_cfg_set_log(cfg, RMSG_LOG_ERROR - 1, no_log, NULL);
	/* covers: rmsg_cfg_set_log.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "log level -1: %d", ret);
	ret = rmsg_cfg_set_log(cfg, RMSG_LOG_DEBUG + 1, no_log, NULL);
	/* covers: rmsg_cfg_set_log.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "log level %d: %d", RMSG_LOG_DEBUG + 1, ret);
	ret = rmsg_cfg_set_log(NULL, RMSG_LOG_WARN, no_log, NULL);
	/* covers: rmsg_cfg_set_log.3 EINVAL */
	T_ASSERT(ret == -EINVAL, "log on a NULL cfg: %d", ret);
	rmsg_cfg_destroy(cfg);
}

/* ------------------------------------------------------------------ */
/* what the values do, over a TCP loopback                              */

static struct ev_loop *loop;

struct end {
	struct rmsg_conn *c;
	bool up, closed;
	int reason, msgs, sent;
	uint8_t pdata[RMSG_PRIVATE_DATA_MAX];
	size_t pdata_len;
	bool accepted;
};

static void on_est(struct rmsg_conn *c, void *arg)
{
	struct end *e = arg;

	e->c = c;
	e->up = true;
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct end *e = arg;

	e->closed = true;
	e->reason = reason;
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	((struct end *)arg)->msgs++;
}

static void sent_cb(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "send status %s", rmsg_strerror(status));
	((struct end *)arg)->sent++;
}

static const struct rmsg_conn_ops ops = {
	.on_established = on_est, .on_msg = on_msg, .on_close = on_close};

/* the server side's end is the listener's arg: one connection each */
static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pdata, size_t len, void *arg)
{
	struct end *e = arg;

	T_ASSERT(!e->accepted, "a second connection on a one-client listener");
	e->accepted = true;
	T_ASSERT(len <= RMSG_PRIVATE_DATA_MAX, "private data of %zu", len);
	memcpy(e->pdata, pdata, len);
	e->pdata_len = len;
	T_OK(rmsg_conn_set_arg(c, e));
	return 0;
}

/* connects a client of @cctx (@ccfg) to a listener of @sctx (@lcfg) */
static void pair(struct rmsg_ctx *sctx, const struct rmsg_cfg *lcfg,
		 struct rmsg_ctx *cctx, struct rmsg_cfg *ccfg,
		 struct rmsg_listener **l_p, struct end *srv, struct end *cli,
		 void (*after_connect)(struct rmsg_cfg *))
{
	char uri[128];

	memset(srv, 0, sizeof(*srv));
	memset(cli, 0, sizeof(*cli));
	t_listen(sctx, lcfg, &ops, on_accept, srv, l_p, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, ccfg, &ops, cli, &cli->c));
	if (after_connect)
		after_connect(ccfg);
	T_RUN_UNTIL(loop, srv->up && cli->up, 10);
}

static void unpair(struct rmsg_listener *l, struct end *srv, struct end *cli)
{
	T_OK(rmsg_conn_close(cli->c));
	T_RUN_UNTIL(loop, srv->closed && cli->closed, 10);
	T_OK(rmsg_listener_close(l));
}

/* a message of @lim bytes goes from @from to @to, one more is refused
 * with -EMSGSIZE (the man page's promise for rmsg_send) */
static uint8_t buf[4096];

static void send_one(struct end *from, struct end *to, size_t len)
{
	struct iovec iov = {buf, len};
	int msgs = to->msgs, sent = from->sent;

	T_ASSERT(len <= sizeof(buf), "length %zu", len);
	T_OK(rmsg_send(from->c, &iov, 1, sent_cb, from));
	T_RUN_UNTIL(loop, to->msgs == msgs + 1 && from->sent == sent + 1, 10);
}

static void check_limit(struct end *from, struct end *to, size_t lim,
			const char *what)
{
	struct iovec iov = {buf, lim + 1};
	int ret;

	send_one(from, to, lim);
	ret = rmsg_send(from->c, &iov, 1, sent_cb, from);
	T_ASSERT(ret == -EMSGSIZE, "%s: %zu bytes, limit %zu: %d", what,
		 lim + 1, lim, ret);
}

static void change_and_destroy(struct rmsg_cfg *cfg)
{
	/* after rmsg_connect() returned, before the handshake ran */
	T_OK(rmsg_cfg_set_max_msg_size(cfg, 3000));
	T_OK(rmsg_cfg_set_private_data(cfg, "xyz!", 4));
	rmsg_cfg_destroy(cfg);
}

/* NULL to rmsg_ctx_create: the default limit of 1 GiB applies */
static void check_ctx_defaults(void)
{
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx;
	struct end srv, cli;
	struct iovec iov[2];
	void *big;
	int ret;

	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	pair(ctx, NULL, ctx, NULL, &l, &srv, &cli, NULL);
	/* no private data by default */
	T_ASSERT(srv.pdata_len == 0, "default private data of %zu bytes",
		 srv.pdata_len);
	/* 1 GiB + 1 of memory that is only mapped, never touched */
	big = mmap(NULL, GIB + 4096, PROT_READ,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	T_ASSERT(big != MAP_FAILED, "mmap of 1 GiB failed");
	iov[0].iov_base = big;
	iov[0].iov_len = GIB;
	iov[1].iov_base = big;
	iov[1].iov_len = 1;
	ret = rmsg_send(cli.c, iov, 2, sent_cb, &cli);
	T_ASSERT(ret == -EMSGSIZE, "1 GiB + 1 with the defaults: %d", ret);
	ret = rmsg_send(srv.c, iov, 2, sent_cb, &srv);
	T_ASSERT(ret == -EMSGSIZE, "1 GiB + 1 with the defaults: %d", ret);
	munmap(big, GIB + 4096);
	unpair(l, &srv, &cli);
	T_OK(rmsg_ctx_destroy(ctx));
}

/*
 * A context made with a cfg keeps the values when the cfg changes and is
 * destroyed; NULL to rmsg_listen()/rmsg_connect() takes them; a cfg given
 * to rmsg_connect()/rmsg_listen() is copied at the call as well.
 */
static void check_copies(void)
{
	struct rmsg_cfg *cfg, *ccfg, *lcfg;
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx;
	struct end srv, cli;
	char big[RMSG_PRIVATE_DATA_MAX + 1];
	int ret;

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_max_msg_size(cfg, 100));
	T_OK(rmsg_ctx_create(loop, cfg, &ctx));
	T_OK(rmsg_cfg_set_max_msg_size(cfg, 1000));
	rmsg_cfg_destroy(cfg);

	/* NULL for both: the context's 100, not the cfg's later 1000 */
	pair(ctx, NULL, ctx, NULL, &l, &srv, &cli, NULL);
	check_limit(&cli, &srv, 100, "client, context's cfg");
	check_limit(&srv, &cli, 100, "server, context's cfg");
	unpair(l, &srv, &cli);

	/* a connect cfg: copied when rmsg_connect() returns; a refused
	 * private data keeps the bytes set before */
	memset(big, 'z', sizeof(big));
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_max_msg_size(ccfg, 50));
	T_OK(rmsg_cfg_set_private_data(ccfg, "abc", 3));
	ret = rmsg_cfg_set_private_data(ccfg, big, sizeof(big));
	T_ASSERT(ret == -EINVAL, "private data of %zu bytes: %d", sizeof(big),
		 ret);
	ret = rmsg_cfg_set_private_data(ccfg, NULL, 2);
	T_ASSERT(ret == -EINVAL, "NULL private data of 2 bytes: %d", ret);
	/* a listen cfg: copied when rmsg_listen() returns */
	T_OK(rmsg_cfg_create(&lcfg));
	T_OK(rmsg_cfg_set_max_msg_size(lcfg, 70));
	pair(ctx, lcfg, ctx, ccfg, &l, &srv, &cli, change_and_destroy);
	T_ASSERT(srv.pdata_len == 3 && !memcmp(srv.pdata, "abc", 3),
		 "server saw %zu bytes of private data '%.*s', want 'abc'",
		 srv.pdata_len, (int)srv.pdata_len, (char *)srv.pdata);
	T_OK(rmsg_cfg_set_max_msg_size(lcfg, 2000));
	rmsg_cfg_destroy(lcfg);
	check_limit(&cli, &srv, 50, "client, its connect cfg");
	/* the listener's own limit is 70 (not the later 2000): its
	 * connection refuses 71; 50, within the client's, goes */
	send_one(&srv, &cli, 50);
	{
		struct iovec iov = {buf, 71};

		ret = rmsg_send(srv.c, &iov, 1, sent_cb, &srv);
		/* covers: rmsg_send.3 EMSGSIZE */
		T_ASSERT(ret == -EMSGSIZE, "server, listen cfg 70: 71: %d",
			 ret);
	}
	unpair(l, &srv, &cli);

	/* private data cleared with NULL, 0 */
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_private_data(ccfg, "abc", 3));
	T_OK(rmsg_cfg_set_private_data(ccfg, NULL, 0));
	pair(ctx, NULL, ctx, ccfg, &l, &srv, &cli, NULL);
	rmsg_cfg_destroy(ccfg);
	T_ASSERT(srv.pdata_len == 0, "cleared private data: %zu bytes",
		 srv.pdata_len);
	unpair(l, &srv, &cli);
	T_OK(rmsg_ctx_destroy(ctx));
}

static int writable_calls;

static void on_writable(struct rmsg_conn *c, void *arg)
{
	writable_calls++;
}

/*
 * The bounds are usable, not only accepted: connections made with every
 * setting at its maximum (busy polling and the context's limits aside)
 * and with credits 4, send queue 1 and eager size 64 exchange messages.
 * Send queue 1: a second send while the first has not completed fails
 * with -EAGAIN, on_writable follows (rmsg_cfg_set_send_queue(3)).
 */
static void check_extremes(void)
{
	struct rmsg_conn_ops wops = ops;
	struct rmsg_cfg *hi, *lo;
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx;
	struct end srv, cli;
	struct iovec iov;
	uint8_t *big;
	int ret, sent;

	T_OK(rmsg_cfg_create(&hi));
	T_OK(rmsg_cfg_set_eager_size(hi, MIB));
	T_OK(rmsg_cfg_set_credits(hi, 4096));
	T_OK(rmsg_cfg_set_send_queue(hi, 1048576));
	T_OK(rmsg_cfg_set_max_msg_size(hi, SIZE_MAX));
	T_OK(rmsg_cfg_set_timeout_ms(hi, 3600000));
	T_OK(rmsg_cfg_set_keepalive_ms(hi, 3600000));
	T_OK(rmsg_cfg_set_keepalive_misses(hi, 1000));
	T_OK(rmsg_cfg_set_max_conns(hi, 16777216));
	T_OK(rmsg_cfg_set_max_pending(hi, 16777216));
	T_OK(rmsg_cfg_set_reg_limit(hi, SIZE_MAX));
	T_OK(rmsg_cfg_set_tcp_rx_limit(hi, SIZE_MAX));
	T_OK(rmsg_cfg_create(&lo));
	T_OK(rmsg_cfg_set_eager_size(lo, 64));
	T_OK(rmsg_cfg_set_credits(lo, 4));
	T_OK(rmsg_cfg_set_send_queue(lo, 1));
	T_OK(rmsg_cfg_set_max_conns(lo, 1));
	T_OK(rmsg_cfg_set_max_pending(lo, 1));
	T_OK(rmsg_ctx_create(loop, hi, &ctx));
	big = malloc(MIB + 1);
	T_ASSERT(big, "out of memory");
	memset(big, 0x5a, MIB + 1);

	/* all at their maximum on both sides */
	pair(ctx, hi, ctx, hi, &l, &srv, &cli, NULL);
	send_one(&cli, &srv, 1);
	send_one(&srv, &cli, 1);
	iov.iov_base = big;
	iov.iov_len = MIB + 1;
	sent = cli.sent;
	T_OK(rmsg_send(cli.c, &iov, 1, sent_cb, &cli));
	T_RUN_UNTIL(loop, srv.msgs == 2 && cli.sent == sent + 1, 10);
	unpair(l, &srv, &cli);

	/* the client at the minimums, the listener's at max_conns 1 */
	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	wops.on_writable = on_writable;
	{
		char uri[128];

		t_listen(ctx, lo, &ops, on_accept, &srv, &l, uri, sizeof(uri));
		T_OK(rmsg_connect(ctx, uri, lo, &wops, &cli, &cli.c));
		T_RUN_UNTIL(loop, srv.up && cli.up, 10);
	}
	send_one(&srv, &cli, 64);
	send_one(&srv, &cli, 65);
	iov.iov_len = 100;
	T_OK(rmsg_send(cli.c, &iov, 1, sent_cb, &cli));
	ret = rmsg_send(cli.c, &iov, 1, sent_cb, &cli);
	/* covers: rmsg_send.3 EAGAIN */
	T_ASSERT(ret == -EAGAIN, "second send on a queue of 1: %d", ret);
	T_RUN_UNTIL(loop, writable_calls == 1 && cli.sent == 1, 10);
	T_ASSERT(srv.msgs == 1, "server got %d messages", srv.msgs);
	T_OK(rmsg_send(cli.c, &iov, 1, sent_cb, &cli));
	T_RUN_UNTIL(loop, srv.msgs == 2 && cli.sent == 2, 10);
	unpair(l, &srv, &cli);

	free(big);
	rmsg_cfg_destroy(lo);
	rmsg_cfg_destroy(hi);
	T_OK(rmsg_ctx_destroy(ctx));
}

/* log lines: where the context's cfg said when it was made */
static int lines_a, lines_b, lines_quiet, bad_level;

static void log_a(int level, const char *line, void *arg)
{
	size_t n = strlen(line);

	T_ASSERT(n && line[n - 1] != '\n', "log line '%s'", line);
	if (level > RMSG_LOG_WARN)
		bad_level++;
	lines_a++;
	fprintf(stderr, "log a: %d %s\n", level, line);
}

static void log_b(int level, const char *line, void *arg)
{
	lines_b++;
	fprintf(stderr, "log b: %d %s\n", level, line);
}

static void log_quiet(int level, const char *line, void *arg)
{
	if (level > RMSG_LOG_ERROR)
		bad_level++;
	lines_quiet++;
	fprintf(stderr, "log quiet: %d %s\n", level, line);
}

/*
 * A listener with max_conns 1 (its cfg raised right after rmsg_listen)
 * refuses a second client: -ECONNREFUSED and warnings logged (the
 * refusal, rmsg_cfg_set_max_conns.3). The contexts were made with log_a
 * at WARN; their cfgs then switched to log_b: nothing reaches log_b.
 * A third context logging errors only must pass no warning on.
 */
static void check_log_and_listener(void)
{
	struct rmsg_cfg *scfg, *ccfg, *qcfg, *lcfg;
	struct rmsg_ctx *sctx, *cctx, *qctx;
	struct rmsg_listener *l;
	struct end srv, cli, cli2, cli3;
	char uri[128];

	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_create(&qcfg));
	T_OK(rmsg_cfg_set_log(scfg, RMSG_LOG_WARN, log_a, NULL));
	T_OK(rmsg_cfg_set_log(ccfg, RMSG_LOG_WARN, log_a, NULL));
	T_OK(rmsg_cfg_set_log(qcfg, RMSG_LOG_ERROR, log_quiet, NULL));
	T_OK(rmsg_ctx_create(loop, scfg, &sctx));
	T_OK(rmsg_ctx_create(loop, ccfg, &cctx));
	T_OK(rmsg_ctx_create(loop, qcfg, &qctx));
	T_OK(rmsg_cfg_set_log(scfg, RMSG_LOG_DEBUG, log_b, NULL));
	T_OK(rmsg_cfg_set_log(ccfg, RMSG_LOG_DEBUG, log_b, NULL));
	rmsg_cfg_destroy(scfg);
	rmsg_cfg_destroy(qcfg);

	T_OK(rmsg_cfg_create(&lcfg));
	T_OK(rmsg_cfg_set_max_conns(lcfg, 1));
	pair(sctx, lcfg, cctx, NULL, &l, &srv, &cli, NULL);
	T_OK(rmsg_cfg_set_max_conns(lcfg, 100));
	rmsg_cfg_destroy(lcfg);
	/* the listener's URI again, for more clients */
	{
		uint16_t port;

		T_OK(rmsg_listener_port(l, &port));
		t_uri(uri, sizeof(uri), port);
	}
	memset(&cli2, 0, sizeof(cli2));
	memset(&cli3, 0, sizeof(cli3));
	T_OK(rmsg_connect(cctx, uri, ccfg, &ops, &cli2, &cli2.c));
	T_OK(rmsg_connect(qctx, uri, NULL, &ops, &cli3, &cli3.c));
	T_RUN_UNTIL(loop, cli2.closed && cli3.closed, 10);
	T_ASSERT(!cli2.up && !cli3.up, "a second client got in: max_conns 1");
	T_ASSERT(cli2.reason == -ECONNREFUSED && cli3.reason == -ECONNREFUSED,
		 "refused clients closed with %s / %s",
		 rmsg_strerror(cli2.reason), rmsg_strerror(cli3.reason));
	T_ASSERT(lines_a > 0, "no warning reached the contexts' log function");
	T_ASSERT(lines_b == 0,
		 "%d lines went to a function set after "
		 "rmsg_ctx_create()",
		 lines_b);
	T_ASSERT(bad_level == 0, "%d lines above the level asked for",
		 bad_level);
	rmsg_cfg_destroy(ccfg);
	unpair(l, &srv, &cli);
	T_OK(rmsg_ctx_destroy(qctx));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	printf("log lines: %d to the context's function, %d errors-only\n",
	       lines_a, lines_quiet);
}

/*
 * One client of a context made with (@level, @fn) is refused by a
 * listener with max_conns 1; its library logs a warning for it
 * (rmsg_cfg_set_max_conns.3).
 */
static void refused_client(int level, rmsg_log_cb fn)
{
	struct rmsg_cfg *lcfg, *ccfg;
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_listener *l;
	struct end srv, cli, cli2;
	uint16_t port;
	char uri[128];

	T_OK(rmsg_cfg_create(&lcfg));
	T_OK(rmsg_cfg_set_max_conns(lcfg, 1));
	T_OK(rmsg_cfg_set_log(lcfg, RMSG_LOG_ERROR, no_log, NULL));
	T_OK(rmsg_ctx_create(loop, lcfg, &sctx));
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_log(ccfg, level, fn, NULL));
	T_OK(rmsg_ctx_create(loop, ccfg, &cctx));
	pair(sctx, lcfg, sctx, NULL, &l, &srv, &cli, NULL);
	T_OK(rmsg_listener_port(l, &port));
	t_uri(uri, sizeof(uri), port);
	memset(&cli2, 0, sizeof(cli2));
	T_OK(rmsg_connect(cctx, uri, NULL, &ops, &cli2, &cli2.c));
	T_RUN_UNTIL(loop, cli2.closed, 10);
	T_ASSERT(cli2.reason == -ECONNREFUSED, "refused client: %s",
		 rmsg_strerror(cli2.reason));
	unpair(l, &srv, &cli);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	rmsg_cfg_destroy(ccfg);
	rmsg_cfg_destroy(lcfg);
}

static int env_warn_lines;

static void env_hook(int level, const char *line, void *arg)
{
	if (level == RMSG_LOG_WARN)
		env_warn_lines++;
}

/* in a child, as RMSG_LOG is read once per process: the warning lines
 * a context made with @level passes on under RMSG_LOG=@env */
static int warn_lines_under(const char *env, int level)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	T_ASSERT(pid >= 0, "fork failed");
	if (pid == 0) {
		setenv("RMSG_LOG", env, 1);
		loop = ev_default_loop(0);
		refused_client(level, env_hook);
		_exit(env_warn_lines > 100 ? 100 : env_warn_lines);
	}
	T_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
			 WEXITSTATUS(st) <= 100,
		 "child under RMSG_LOG=%s failed (status %d)", env, st);
	return WEXITSTATUS(st);
}

/* rmsg_cfg_set_log.3: RMSG_LOG (any case) replaces the level */
static void check_log_env(void)
{
	int n;

	n = warn_lines_under("warn", RMSG_LOG_WARN);
	T_ASSERT(n > 0, "RMSG_LOG=warn, level warn: no warning passed on");
	n = warn_lines_under("error", RMSG_LOG_WARN);
	T_ASSERT(n == 0, "RMSG_LOG=error, level warn: %d warnings", n);
	n = warn_lines_under("DeBuG", RMSG_LOG_ERROR);
	T_ASSERT(n > 0, "RMSG_LOG=DeBuG, level error: no warning passed on");
}

/* rmsg_cfg_set_log.3: with no function, "TIME librmsg warn: LINE" on
 * stderr */
static void check_log_stderr(void)
{
	char path[] = "/tmp/rmsg-cfg-stderr.XXXXXX", text[4096];
	int fd = mkstemp(path), saved;
	ssize_t n;

	T_ASSERT(fd >= 0, "mkstemp failed");
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	T_ASSERT(saved >= 0 && dup2(fd, 2) == 2, "dup2 failed");
	refused_client(RMSG_LOG_WARN, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	T_ASSERT(n > 0, "no line on standard error");
	text[n] = 0;
	fprintf(stderr, "%s", text);
	/* each line starts with its time, "2026-12-06T03:16:35.123456Z " */
	T_ASSERT(strlen(text) > 28 && text[4] == '-' && text[10] == 'T' &&
			 text[26] == 'Z' && text[27] == ' ',
		 "no timestamp at the start of the line");
	T_ASSERT(!strncmp(text + 28, "librmsg warn: ", 14) ||
			 strstr(text, "Z librmsg warn: "),
		 "no 'librmsg warn: ' line on standard error");
	T_ASSERT(text[n - 1] == '\n' && !strstr(text, "\n\n"),
		 "standard error lines are not one per line");
}

int main(void)
{
	size_t i;

	/* RMSG_LOG would override the levels checked below */
	unsetenv("RMSG_LOG");
	check_create();
	for (i = 0; i < NU; i++)
		check_unsigned(&ucases[i]);
	for (i = 0; i < NZ; i++)
		check_size(&zcases[i]);
	check_pages();
	check_private_data();
	check_log_args();
	printf("cfg: %zu settings: defaults, bounds, refusals checked\n",
	       NU + NZ);

	if (strcmp(t_transport(), "tcp")) {
		printf("the loopback part runs over TCP only\n");
		return 0;
	}
	/* before this process makes a context: RMSG_LOG is read once */
	check_log_env();
	loop = ev_default_loop(0);
	check_log_stderr();
	check_ctx_defaults();
	check_copies();
	check_extremes();
	check_log_and_listener();
	printf("cfg: copies and NULL configurations checked over tcp\n");
	return 0;
}
