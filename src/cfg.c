// SPDX-License-Identifier: MIT
/* cfg.c - the configuration object: defaults, setters and getters */
#include <stdlib.h>

#include "rmsg_int.h"

void rmsgi_cfg_defaults(struct rmsgi_cfgv *v)
{
	memset(v, 0, sizeof(*v));
	v->eager_size = 8192;
	v->max_msg_size = (size_t)1 << 30;
	v->credits = 32;
	v->credits_initial = 4;
	v->send_queue = 1024;
	v->busy_poll_us = 0;
	v->timeout_ms = 10000;
	v->keepalive_ms = 1000;
	v->keepalive_misses = 3;
	v->log_level = RMSG_LOG_WARN;
	v->reg_limit = (size_t)1 << 30;
	v->tcp_rx_limit = (size_t)1 << 30;
	v->tcp_window = RMSGI_WINDOW_DEFAULT;
	v->max_conns = 4096;
	v->max_pending = 256;
}

int rmsg_cfg_create(struct rmsg_cfg **cfg_p)
{
	struct rmsg_cfg *cfg;

	if (!cfg_p)
		return -EINVAL;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return -ENOMEM;
	rmsgi_cfg_defaults(&cfg->v);
	*cfg_p = cfg;
	return 0;
}

void rmsg_cfg_destroy(struct rmsg_cfg *cfg)
{
	if (cfg)
		explicit_bzero(cfg->v.psk, sizeof(cfg->v.psk));
	free(cfg);
}

static bool in_range(unsigned long long v, unsigned long long lo,
		     unsigned long long hi)
{
	return v >= lo && v <= hi;
}

/* one setter/getter pair per field, range-checked */
#define CFG_ACCESSORS(name, field, type, lo, hi)                         \
	int rmsg_cfg_set_##name(struct rmsg_cfg *cfg, type val)          \
	{                                                                \
		if (!cfg || !in_range(val, lo, hi))                      \
			return -EINVAL;                                  \
		cfg->v.field = val;                                      \
		return 0;                                                \
	}                                                                \
	int rmsg_cfg_get_##name(const struct rmsg_cfg *cfg, type *val_p) \
	{                                                                \
		if (!cfg || !val_p)                                      \
			return -EINVAL;                                  \
		*val_p = cfg->v.field;                                   \
		return 0;                                                \
	}

CFG_ACCESSORS(eager_size, eager_size, size_t, 64, 1 << 20)
CFG_ACCESSORS(credits, credits, unsigned, 4, 4096)
CFG_ACCESSORS(credits_initial, credits_initial, unsigned, 4, 4096)
CFG_ACCESSORS(send_queue, send_queue, unsigned, 1, 1 << 20)
CFG_ACCESSORS(busy_poll_us, busy_poll_us, unsigned, 0, 1000000)
CFG_ACCESSORS(max_msg_size, max_msg_size, size_t, 1, SIZE_MAX)
CFG_ACCESSORS(timeout_ms, timeout_ms, unsigned, 1, 3600000)
CFG_ACCESSORS(keepalive_ms, keepalive_ms, unsigned, 0, 3600000)
CFG_ACCESSORS(keepalive_misses, keepalive_misses, unsigned, 1, 1000)
CFG_ACCESSORS(resume_ms, resume_ms, unsigned, 0, 3600000)
CFG_ACCESSORS(reg_limit, reg_limit, size_t, 4096, SIZE_MAX)
CFG_ACCESSORS(tcp_rx_limit, tcp_rx_limit, size_t, (size_t)1 << 20, SIZE_MAX)
CFG_ACCESSORS(tcp_window, tcp_window, size_t, (size_t)64 << 10, (size_t)1 << 30)
CFG_ACCESSORS(max_conns, max_conns, unsigned, 1, 1 << 24)
CFG_ACCESSORS(max_pending, max_pending, unsigned, 1, 1 << 24)

int rmsg_cfg_set_private_data(struct rmsg_cfg *cfg, const void *data,
			      size_t len)
{
	if (!cfg || len > RMSG_PRIVATE_DATA_MAX || (len && !data))
		return -EINVAL;
	if (len)
		memcpy(cfg->v.pdata, data, len);
	cfg->v.pdata_len = (uint8_t)len;
	return 0;
}

int rmsg_cfg_set_psk(struct rmsg_cfg *cfg, const void *key, size_t len)
{
	if (!cfg || (len && !key) || (key && len == 0) ||
	    (len && (len < 16 || len > sizeof(cfg->v.psk))))
		return -EINVAL;
	explicit_bzero(cfg->v.psk, sizeof(cfg->v.psk));
	if (len)
		memcpy(cfg->v.psk, key, len);
	cfg->v.psk_len = (uint8_t)len;
	return 0;
}

int rmsg_cfg_set_log(struct rmsg_cfg *cfg, int level, rmsg_log_cb fn, void *arg)
{
	if (!cfg || level < RMSG_LOG_ERROR || level > RMSG_LOG_DEBUG)
		return -EINVAL;
	cfg->v.log_level = level;
	cfg->v.log_fn = fn;
	cfg->v.log_arg = arg;
	return 0;
}
