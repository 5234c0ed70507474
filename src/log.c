// SPDX-License-Identifier: MIT
/* log.c - log lines to a user hook or standard error */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "rmsg_int.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* RMSG_LOG, read once; a value that names no level is said once on
 * standard error (a typo would otherwise silence the log it asked for) */
static int env_level(void)
{
	static int level = -2;
	const char *s;
	int i;

	if (level != -2)
		return level;
	s = getenv("RMSG_LOG");
	level = -1;
	if (!s || !*s)
		return level;
	for (i = 0; i < (int)RMSGI_ARRAY_SIZE(level_names); i++)
		if (!strcasecmp(s, level_names[i]))
			level = i;
	if (level < 0)
		fprintf(stderr,
			"librmsg: RMSG_LOG=%s is not a level: use error, "
			"warn, info or debug (ignored)\n",
			s);
	return level;
}

int rmsgi_log_max(const struct rmsgi_cfgv *cfg)
{
	return env_level() >= 0 ? env_level() : cfg->log_level;
}

void rmsgi_addr_fmt(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss && ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss && ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		snprintf(buf, len, "-");
	}
}

void rmsgi_log(const struct rmsg_ctx *ctx, int level, const char *fmt, ...)
{
	int max = ctx ? ctx->cfg.log_level : RMSG_LOG_WARN;
	char line[512], ts[32];
	struct timeval tv;
	struct tm tm;
	va_list ap;

	if (env_level() >= 0)
		max = env_level();
	if (level > max)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (ctx && ctx->cfg.log_fn) {
		ctx->cfg.log_fn(level, line, ctx->cfg.log_arg);
		return;
	}
	/* standard error gets the time (UTC, RFC 3339); a hook has its own */
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "%s.%06ldZ librmsg %s: %s\n", ts, (long)tv.tv_usec,
		level_names[level < 0	? 0
			    : level > 3 ? 3
					: level],
		line);
}
