// SPDX-License-Identifier: MIT
/*
 * why.c - what happened to a connection, in words: the reason it closed
 * or was refused (rmsg_conn_close_reason), given by whoever ends it
 * (rmsgi_conn_why) or else made from its errno as it starts to close,
 * and its event lines for the log at RMSG_LOG=info (rmsgi_conn_event).
 */
#include <stdarg.h>
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
