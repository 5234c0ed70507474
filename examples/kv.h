/* SPDX-License-Identifier: MIT */
/*
 * kv.h - the wire format shared by kv_server.c and kv_client.c.
 *
 * Three RPC methods. Every request starts with struct kv_hdr:
 *   KV_PUT  header, key, value   reply: empty
 *   KV_GET  header, key          reply: the value, or the error -ENOENT
 *   KV_DEL  header, key          reply: empty, or the error -ENOENT
 * Errors travel as rmsg_reply_error() codes; the caller's rmsg_reply_cb
 * gets them as its status.
 */
#ifndef KV_H
#define KV_H

#include <stdint.h>

enum {
	KV_PUT = 1,
	KV_GET = 2,
	KV_DEL = 3,
};

#define KV_KEY_MAX 255

struct kv_hdr {
	uint32_t key_len; /* bytes of key after the header, 1 to KV_KEY_MAX */
	uint32_t reserved;
};

#endif
