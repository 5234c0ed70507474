/* SPDX-License-Identifier: MIT */
/*
 * cfg.h - configuration values (cfg.c): what rmsg_cfg_set_* set, copied
 * into every object that uses them.
 */
#ifndef RMSG_CFG_H
#define RMSG_CFG_H

#include "base.h"

/* configuration values, copied into every object that uses them */
struct rmsgi_cfgv {
	size_t eager_size;
	size_t max_msg_size;
	unsigned credits; /* the most granted to a peer that grows */
	/* granted at the start (rmsgi_credits_start: at most credits) */
	unsigned credits_initial;
	unsigned send_queue;
	unsigned busy_poll_us;
	unsigned timeout_ms;
	unsigned keepalive_ms;	   /* 0: off */
	unsigned keepalive_misses; /* silent intervals before death */
	unsigned resume_ms;	   /* 0: not resumable (session.c) */
	int log_level;
	rmsg_log_cb log_fn;
	void *log_arg;
	uint8_t pdata[RMSG_PRIVATE_DATA_MAX];
	uint8_t pdata_len;
	/* the pre-shared key (rmsg_cfg_set_psk), psk_len 0: none; the
	 * core's alone, no backend reads it */
	uint8_t psk_len;
	uint8_t psk[64];
	size_t reg_limit;     /* registered bytes per context */
	size_t tcp_rx_limit;  /* TCP large-frame receive memory per context */
	size_t tcp_window;    /* TCP byte window granted to each peer */
	unsigned max_conns;   /* per listener: open and in handshake */
	unsigned max_pending; /* per listener: in handshake */
};

/* the credits a connection grants its peer at the start (the hello's):
 * rmsg_cfg_set_credits_initial, at most rmsg_cfg_set_credits */
static inline unsigned rmsgi_credits_start(const struct rmsgi_cfgv *cfg)
{
	return cfg->credits_initial < cfg->credits ? cfg->credits_initial
						   : cfg->credits;
}
/* the byte window a connection grants its peer where the backend
 * takes one (TCP; credit.h): rmsg_cfg_set_tcp_window(), 512 KiB by
 * default, within the TCP receive memory limit. Measured (bench/compare-tcp.sh, docs/performance.md): a 64 KiB
 * stream with both ends on one CPU ran at a third of the speed with
 * 1-2 MiB in flight as with 0.2-0.8 MiB (the caches), and small
 * messages are bounded by the frame grant long before it. */
#define RMSGI_WINDOW_DEFAULT ((size_t)512 << 10)
static inline uint32_t rmsgi_cfg_window(const struct rmsgi_cfgv *cfg)
{
	return (uint32_t)(cfg->tcp_rx_limit < cfg->tcp_window
				  ? cfg->tcp_rx_limit
				  : cfg->tcp_window);
}
#endif /* RMSG_CFG_H */
