/* SPDX-License-Identifier: MIT */
/*
 * log.h - logging (log.c) and the mapping of other libraries' errors to
 * the library's negative errno (err.c).
 */
#ifndef RMSG_LOG_H
#define RMSG_LOG_H

#include "cfg.h"

void rmsgi_log(const struct rmsg_ctx *ctx, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define rmsgi_err(ctx, ...) rmsgi_log(ctx, RMSG_LOG_ERROR, __VA_ARGS__)
#define rmsgi_warn(ctx, ...) rmsgi_log(ctx, RMSG_LOG_WARN, __VA_ARGS__)
#define rmsgi_info(ctx, ...) rmsgi_log(ctx, RMSG_LOG_INFO, __VA_ARGS__)
/* the level a context logs up to: its cfg, or RMSG_LOG from the
 * environment; debug lines on hot paths test it before the call */
int rmsgi_log_max(const struct rmsgi_cfgv *cfg);

/* the one place where librdmacm's -1+errno and verbs' positive errno
 * become the library's negative errno */
int rmsgi_err_cm(int ret);	 /* librdmacm: -1 and errno */
int rmsgi_err_verbs(int ret);	 /* libibverbs: positive errno */
int rmsgi_err_wc(int wc_status); /* enum ibv_wc_status */
/* getaddrinfo()'s EAI_* (@sys_err: errno, for EAI_SYSTEM); a name that
 * does not resolve (no such name, no address, no usable answer) is
 * @unknown: -ENXIO for a connection's host, -EADDRNOTAVAIL for a
 * listener's address */
int rmsgi_err_gai(int gai_err, int sys_err, int unknown);
#endif /* RMSG_LOG_H */
