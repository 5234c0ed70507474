// SPDX-License-Identifier: MIT
/*
 * why.c - what happened to a connection, in words: the reason it closed
 * or was refused (rmsg_conn_close_reason), given by whoever ends it
 * (rmsgi_conn_why) or else made from its errno as it starts to close,
 * and its event lines for the log at RMSG_LOG=info (rmsgi_conn_event).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "conn_int.h"

void rmsgi_conn_why(struct rmsg_conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why[0] || c->state >= RMSGI_CS_CLOSING)
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

/* the reason of a close nobody explained, from its errno and what the
 * connection knows; the texts name the setting to look at */
static const char *why_of(const struct rmsg_conn *c, int r)
{
	switch (r) {
	case 0:
		return "closed by this side (rmsg_conn_close)";
	case -ESHUTDOWN:
		return "the peer closed the connection";
	case -ECONNRESET:
		return "the peer's end went away without a close (reset: its "
		       "process or host died, or the network failed)";
	case -ECONNREFUSED:
		return c->is_server ? "refused by the accept callback"
				    : "refused: nothing listens there";
	case -ECANCELED:
		return "the context was destroyed (rmsg_ctx_destroy)";
	case -ETIMEDOUT:
		return c->was_established
			       ? "timed out"
			       : "not established within the connect timeout "
				 "(rmsg_cfg_set_timeout_ms)";
	case -EPROTO:
		return "the peer broke the protocol";
	case -EACCES:
		return "authentication failed (rmsg_cfg_set_psk)";
	case -EUSERS:
		return "refused by the listener's limits "
		       "(rmsg_cfg_set_max_conns, rmsg_cfg_set_max_pending)";
	case -ECONNABORTED:
		return "the listener closed before the connection was "
		       "accepted";
	case -ENOMEM:
		return "out of memory";
	case -ENXIO:
		return "the host name does not resolve";
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		return "no route to the peer";
	default:
		return NULL;
	}
}

void rmsgi_conn_why_fix(struct rmsg_conn *c)
{
	const char *t = why_of(c, c->close_reason);

	if (c->why[0])
		return;
	if (t)
		snprintf(c->why, sizeof(c->why), "%s", t);
	else
		snprintf(c->why, sizeof(c->why), "%s (%s)",
			 strerror(-c->close_reason),
			 rmsg_err_name(c->close_reason));
}

const char *rmsg_conn_close_reason(const struct rmsg_conn *c)
{
	if (!c || c->state < RMSGI_CS_CLOSING)
		return NULL;
	return c->why;
}

/* the prefix of every event line: who, and between which addresses */
void rmsgi_conn_event(const struct rmsg_conn *c, const char *event,
		      const char *fmt, ...)
{
	char local[64], peer[64], rest[384] = "";
	va_list ap;

	if (c->ctx->log_max < RMSG_LOG_INFO)
		return;
	rmsgi_addr_fmt(c->ep.addrs_known ? &c->ep.local_addr : NULL, local,
		       sizeof(local));
	rmsgi_addr_fmt(c->ep.addrs_known ? &c->ep.peer_addr : NULL, peer,
		       sizeof(peer));
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(rest, sizeof(rest), fmt, ap);
		va_end(ap);
	}
	rmsgi_info(c->ctx, "conn=%u event=%s local=%s peer=%s%s%s", c->id,
		   event, local, peer, fmt ? " " : "", rest);
}

/* an op's move (conn_int.h op_state): the debug line, or the error of
 * an illegal one */
static const char *const kind_name[] = {
	[RMSGI_OP_SEND] = "send",   [RMSGI_OP_CTRL] = "ctrl",
	[RMSGI_OP_WRITE] = "write", [RMSGI_OP_READ] = "read",
	[RMSGI_OP_RESP] = "resp",   [RMSGI_OP_PACK] = "pack",
};

static const char *const proto_name[] = {
	[RMSGI_OP_P_NONE] = "none",	  [RMSGI_OP_P_EAGER] = "eager",
	[RMSGI_OP_P_RNDV] = "rndv",	  [RMSGI_OP_P_RMA] = "rma",
	[RMSGI_OP_P_RMA_EMU] = "rma-emu", [RMSGI_OP_P_CTRL] = "ctrl",
	[RMSGI_OP_P_DIRECT] = "direct",
};

static const char *const state_name[] = {
	[RMSGI_OS_NEW] = "new",		  [RMSGI_OS_QUEUED] = "queued",
	[RMSGI_OS_POSTED] = "posted",	  [RMSGI_OS_AWAIT_PEER] = "await-peer",
	[RMSGI_OS_ANSWERED] = "answered", [RMSGI_OS_DONE] = "done",
	[RMSGI_OS_UNACKED] = "unacked",
};

#define NAME(tab, i) ((size_t)(i) < RMSGI_ARRAY_SIZE(tab) ? (tab)[i] : "?")

void __attribute__((noinline, cold))
rmsgi_conn_op_move(const struct rmsg_conn *c, const struct rmsgi_op *op,
		   enum rmsgi_op_state s)
{
	bool ok = op_move_ok(c, op, s);

	rmsgi_log(c->ctx, ok ? RMSG_LOG_DEBUG : RMSG_LOG_ERROR,
		  "conn %u: op %p (%s, %s): %s%s -> %s", c->id,
		  (const void *)op, NAME(kind_name, op->kind),
		  NAME(proto_name, op->proto), ok ? "" : "illegal move ",
		  NAME(state_name, op->state), NAME(state_name, s));
#ifdef RMSGI_STRICT
	if (!ok)
		abort();
#endif
}
