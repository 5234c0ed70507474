// SPDX-License-Identifier: MIT
/*
 * auth.c - the pre-shared key's proofs (rmsg_cfg_set_psk): nonces from
 * getrandom(2), HMAC-SHA-256 and the timing-safe compare from nettle.
 * The protocol is conn.c's AUTH state; the frames are in proto.h.
 */
#include <errno.h>
#include <sys/random.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "conn_int.h"

#define LABEL_CLIENT "rmsg-psk-1 client"
#define LABEL_SERVER "rmsg-psk-1 server"

int rmsgi_auth_nonce(uint8_t nonce[RMSGI_NONCE_SIZE])
{
	size_t got = 0;

	while (got < RMSGI_NONCE_SIZE) {
		ssize_t n = getrandom(nonce + got, RMSGI_NONCE_SIZE - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

void rmsgi_auth_client_mac(const struct rmsgi_cfgv *cfg,
			   const uint8_t ns[RMSGI_NONCE_SIZE],
			   const uint8_t nc[RMSGI_NONCE_SIZE],
			   const struct rmsgi_hello *hello,
			   uint8_t mac[RMSGI_MAC_SIZE])
{
	struct hmac_sha256_ctx h;
	struct rmsgi_hello v = *hello;
	uint8_t buf[RMSGI_HELLO_MAX];
	size_t n;

	/* what the backends leave as the core built it (proto.h) */
	v.credits = 0;
	v.eager_size = 0;
	v.status = 0;
	v.nonce_len = 0;
	n = rmsgi_hello_encode(&v, buf);
	hmac_sha256_set_key(&h, cfg->psk_len, cfg->psk);
	hmac_sha256_update(&h, sizeof(LABEL_CLIENT) - 1,
			   (const uint8_t *)LABEL_CLIENT);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, ns);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, nc);
	hmac_sha256_update(&h, n, buf);
	hmac_sha256_digest(&h, RMSGI_MAC_SIZE, mac);
	memset(&h, 0, sizeof(h));
}

void rmsgi_auth_server_mac(const struct rmsgi_cfgv *cfg,
			   const uint8_t nc[RMSGI_NONCE_SIZE],
			   const uint8_t ns[RMSGI_NONCE_SIZE], uint32_t status,
			   const uint8_t *pdata, size_t len,
			   uint8_t mac[RMSGI_MAC_SIZE])
{
	struct hmac_sha256_ctx h;
	uint8_t st[4];

	rmsgi_put32(st, status);
	hmac_sha256_set_key(&h, cfg->psk_len, cfg->psk);
	hmac_sha256_update(&h, sizeof(LABEL_SERVER) - 1,
			   (const uint8_t *)LABEL_SERVER);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, nc);
	hmac_sha256_update(&h, RMSGI_NONCE_SIZE, ns);
	hmac_sha256_update(&h, sizeof(st), st);
	hmac_sha256_update(&h, len, pdata);
	hmac_sha256_digest(&h, RMSGI_MAC_SIZE, mac);
	memset(&h, 0, sizeof(h));
}

bool rmsgi_auth_mac_eq(const uint8_t *a, const uint8_t *b)
{
	return memeql_sec(a, b, RMSGI_MAC_SIZE) != 0;
}
