/* SPDX-License-Identifier: MIT */
/*
 * base.h - what every core file and the transport contract build on:
 * the system headers, the common macros, the core's opaque object names
 * and the core's fixed limits. Includes no other file of the library.
 */
#ifndef RMSG_BASE_H
#define RMSG_BASE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <ev.h>

#include "rmsg.h"

struct rmsg_ctx;
struct rmsg_conn;
struct rmsg_listener;
struct rmsg_mr;
struct rmsgi_rc_ent;

#define RMSGI_ALIGN(x, a) (((x) + ((a)-1)) & ~((size_t)(a)-1))
#define RMSGI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RMSGI_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RMSGI_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RMSGI_CONTAINER_OF(p, type, member) \
	((type *)((char *)(p)-offsetof(type, member)))
#define RMSGI_LIKELY(x) __builtin_expect(!!(x), 1)
#define RMSGI_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* refusals of a peer's one-sided access that end its connection */
#define RMSGI_REFUSALS_MAX 8
/* resolver threads a context runs at once (resolve.c, rmsg_connect.3) */
#define RMSGI_RESOLVE_THREADS 8
/* distinct refused tokens remembered per connection (rma.c) */
#define RMSGI_REFUSED_RECENT 4

#endif /* RMSG_BASE_H */
