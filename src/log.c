// SPDX-License-Identifier: MIT
/* log.c - log lines to a user hook or standard error */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "rmsg_int.h"

static int env_level(void)
{
	static int level = -2;
	const char *s;

	if (level != -2)
		return level;
	s = getenv("RMSG_LOG");
	level = -1;
	if (!s)
		return level;
	if (!strcasecmp(s, "error"))
		level = RMSG_LOG_ERROR;
	else if (!strcasecmp(s, "warn"))
		level = RMSG_LOG_WARN;
	else if (!strcasecmp(s, "info"))
		level = RMSG_LOG_INFO;
	else if (!strcasecmp(s, "debug"))
		level = RMSG_LOG_DEBUG;
	return level;
}

int rmsgi_log_max(const struct rmsgi_cfgv *cfg)
{
	return env_level() >= 0 ? env_level() : cfg->log_level;
}

void rmsgi_log(const struct rmsg_ctx *ctx, int level, const char *fmt, ...)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	int max = ctx ? ctx->cfg.log_level : RMSG_LOG_WARN;
	char line[512];
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
	fprintf(stderr, "librmsg %s: %s\n",
		names[level < 0	  ? 0
		      : level > 3 ? 3
				  : level],
		line);
}
