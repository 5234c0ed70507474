/* SPDX-License-Identifier: MIT */
/*
 * proto.h - the wire format, shared by every transport.
 *
 * Every frame starts with a 32-byte header, little-endian:
 *
 *   off size field
 *   0   1    magic     RMSGI_MAGIC
 *   1   1    version   RMSGI_PROTO_VERSION
 *   2   1    type      RMSGI_T_*
 *   3   1    flags     RMSGI_HDR_F_ACKREQ (a resumable session: the
 *                      sender has nothing more queued, acknowledge
 *                      now; session.c), the other bits 0
 *   4   2    credits   receive credits returned to the peer
 *   6   2    acks      messages of the peer's delivered since the last
 *                      acks we sent (a resumable session, session.c;
 *                      0 toward a peer without one)
 *   8   4    aux       type-specific (status of an ACK, ...)
 *   12  4    bytes     byte-window bytes returned to the peer (0
 *                      toward a peer without a byte window)
 *   16  8    len       payload bytes (DATA: following the header;
 *                      RNDV_REQ: total message bytes)
 *   24  8    id        type-specific (rendezvous cookie)
 *
 * RNDV_REQ carries, after the header, a list of segments the receiver
 * reads: (u64 addr, u32 len, u32 rkey) each, little-endian.
 *
 * One-sided operations (TCP emulation; over RDMA they are verbs):
 *   WRITE, WRITE_IMM: payload = RMA header (u64 offset in the export,
 *     u64 export token from the receiver's descriptor) then the data;
 *     aux = immediate (WRITE: 0); id = cookie the receiver acknowledges
 *     with RNDV_ACK (aux = status)
 *   READ_REQ: payload = RMA header then u64 length (24 bytes); id = cookie
 *   READ_RESP: payload = the bytes read; aux = status; id = cookie
 *   (Until descriptor version 2 the RMA header held a u32 region id and
 *   a u32 0; an old peer's header reads as a token nobody exported and
 *   is refused with -EACCES, and neither side accepts the other's
 *   descriptors, so the frames themselves are unchanged.)
 *   IMM (RDMA only): a write-with-immediate split into several writes
 *     ends with this SEND: aux = immediate, id = total length
 *   REKEY (RDMA only, after a resume: rekey.c): no payload; id = the
 *     token of an export to the peer, aux = its new rkey; id 0 ends the
 *     list, aux = the number of REKEY frames before it
 *
 * The handshake (rdma_cm private data or the TCP HELLO frame payload) is
 * 16 bytes plus up to RMSG_PRIVATE_DATA_MAX of user data:
 *   0 magic, 1 version, 2 pdata_len, 3 flags, 4 credits (u16),
 *   6 status (i16, negative errno of a reject), 8 eager size (u32),
 *   12 connection id (u32), 16 user private data.
 * flags: RMSGI_HELLO_F_PACK, RMSGI_HELLO_F_GROW (below); bits 4-7 the
 * byte window the sender grants (RMSGI_HELLO_WIN, 0 for none);
 * RMSGI_HELLO_F_RESUME, the sender takes a resumable session (below);
 * RMSGI_HELLO_F_AUTH, the sender has a pre-shared key and requires
 * authentication (rmsg_cfg_set_psk; a refusal with it and status -EACCES:
 * refused because the two sides disagree on authentication). A server's
 * accepting reply with it carries, after the private data, the server's
 * 32-byte nonce N_s (so up to 80 bytes; the connect direction never
 * carries one and stays within RDMA's 56 bytes).
 * With RMSGI_HELLO_F_RESUME the hello ends with a session part after
 * the private data (and the nonce, if any): a length byte, at most
 * RMSGI_SESS_MAX, then that many bytes (session.c says what they hold:
 * none in a client's first hello, which sends no part: RDMA pads
 * private data with zeros, which read as a length of 0; the session's
 * id and secret in the server's reply, a resume request and its
 * answer). A client that resumes sends no private data and no
 * RMSGI_HELLO_F_AUTH (its request proves the key: 16 + 1 + 36 bytes,
 * within RDMA's 56); with that flag a session part follows only a
 * nonce.
 *
 * AUTH (only while a connection authenticates, conn.c's AUTH state; one
 * each way, in a receive buffer like DATA, credits piggybacked):
 *   client -> server: aux 0, payload N_c (32 random bytes) || P_c, where
 *     P_c = HMAC-SHA-256(K, "rmsg-psk-1 client" || N_s || N_c || H_c)
 *     and H_c is the client's hello encoded with credits, status and
 *     eager size zero (its flags, connection id and private data: the
 *     backends adjust credits and eager size to their resources)
 *   server -> client: aux = status (0: accepted, else the positive errno
 *     of the app's reject), payload P_s || reply private data, where
 *     P_s = HMAC-SHA-256(K, "rmsg-psk-1 server" || N_c || N_s ||
 *     status (u32) || reply private data); a wrong P_c is answered with
 *     aux EACCES and no payload, then the server closes
 *
 * PACK (only toward a peer whose hello has RMSGI_HELLO_F_PACK): several
 * plain messages (DATA, aux 0) in one frame, so one receive buffer and
 * one credit; aux = the number of entries (1 to RMSGI_PACK_MAX_ENT, so
 * that a frame of tiny messages cannot make the receiver allocate many
 * message objects per buffer), id = 0 (not read), len =
 * the payload's bytes (a multiple of 8, no more than the receiver's
 * eager size). The payload is the entries back to back, each
 *   0 u32 length L of the message, 4 u32 0 (reserved), 8 the L bytes,
 *   then zero bytes up to the next multiple of 8,
 * and nothing after the last one. The receiver checks the whole frame
 * (rmsgi_pack_check) before it delivers any of it, then delivers the
 * messages in order as if each had come in a DATA frame of its own.
 */
#ifndef RMSG_PROTO_H
#define RMSG_PROTO_H

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RMSGI_MAGIC 0xa7
#define RMSGI_PROTO_VERSION 1
#define RMSGI_HDR_SIZE 32
#define RMSGI_HELLO_SIZE 16
#define RMSGI_SEG_SIZE 16
/* the hello's flags */
#define RMSGI_HELLO_F_AUTH 0x01
/* the sender takes a resumable session (rmsg_cfg_set_resume_ms) */
#define RMSGI_HELLO_F_RESUME 0x08
/* the largest session part of a hello, and its bytes on the wire (its
 * length first) */
#define RMSGI_SESS_MAX 40
#define RMSGI_SESS_WIRE (1 + RMSGI_SESS_MAX)
/* the sender takes PACK frames (it sets it always; one without it never
 * receives them) */
#define RMSGI_HELLO_F_PACK 0x02
/* the sender takes a grant that grows (it sets it always): its peer may
 * return more credits than it consumed, up to RMSGI_CREDITS_MAX (4096) in
 * all; its own credits field is only its first grant. Toward a peer
 * without it the grant stays at the hello's credits. */
#define RMSGI_HELLO_F_GROW 0x04
/* the byte window the sender grants its peer (credit.h), in the flags'
 * high four bits: n (1 to 15) grants 2^(n + 15) bytes (64 KiB to 1 GiB);
 * 0, as every peer before it sends, grants none, and then neither side
 * uses one. A peer that sends n also honours the window it is given. */
#define RMSGI_HELLO_WIN_SHIFT 4
#define RMSGI_HELLO_WIN_MIN_LOG 16
#define RMSGI_HELLO_WIN_MAX_LOG 30
/* the window bits of a hello's flags as bytes (0: none) */
static inline uint32_t rmsgi_hello_win(uint8_t flags)
{
	unsigned n = flags >> RMSGI_HELLO_WIN_SHIFT;

	return n ? (uint32_t)1 << (n + RMSGI_HELLO_WIN_MIN_LOG - 1) : 0;
}

/* the flags' bits for a window of @bytes (rounded down to a power of
 * two, at least 64 KiB, at most 1 GiB; 0: none) */
static inline uint8_t rmsgi_hello_win_flags(uint32_t bytes)
{
	unsigned lg = 0;

	if (!bytes)
		return 0;
	while (lg < RMSGI_HELLO_WIN_MAX_LOG && (2u << lg) <= bytes)
		lg++;
	if (lg < RMSGI_HELLO_WIN_MIN_LOG)
		lg = RMSGI_HELLO_WIN_MIN_LOG;
	return (uint8_t)((lg - RMSGI_HELLO_WIN_MIN_LOG + 1)
			 << RMSGI_HELLO_WIN_SHIFT);
}
#define RMSGI_NONCE_SIZE 32
#define RMSGI_MAC_SIZE 32
/* a hello's largest encoding: header, private data, a server's nonce,
 * a session part */
#define RMSGI_HELLO_MAX \
	(RMSGI_HELLO_SIZE + 32 + RMSGI_NONCE_SIZE + RMSGI_SESS_WIRE)
/* an AUTH frame's largest payload: a MAC and a nonce or private data */
#define RMSGI_AUTH_MAX (RMSGI_MAC_SIZE + 32)

enum rmsgi_type {
	RMSGI_T_DATA = 1,	/* a message, payload follows */
	RMSGI_T_CREDIT = 2,	/* credits only */
	RMSGI_T_RNDV_REQ = 3,	/* rendezvous: read my segments */
	RMSGI_T_RNDV_ACK = 4,	/* rendezvous done, id = cookie, aux = status */
	RMSGI_T_HELLO = 5,	/* TCP handshake: client -> server */
	RMSGI_T_HELLO_ACK = 6,	/* TCP handshake: accepted */
	RMSGI_T_REJECT = 7,	/* TCP handshake: rejected */
	RMSGI_T_WRITE = 8,	/* TCP: one-sided write */
	RMSGI_T_WRITE_IMM = 9,	/* TCP: one-sided write with immediate */
	RMSGI_T_READ_REQ = 10,	/* TCP: one-sided read request */
	RMSGI_T_READ_RESP = 11, /* TCP: the bytes of a read, or its error */
	RMSGI_T_IMM = 12,	/* RDMA: immediate of a split write */
	RMSGI_T_AUTH = 13,	/* PSK authentication, after the handshake */
	RMSGI_T_PACK = 14,	/* several small messages in one frame */
	RMSGI_T_REKEY = 15,	/* RDMA, resumed: an export's new rkey */
	RMSGI_T_MAX_ = 16,
};

#define RMSGI_RMA_SIZE 16      /* RMA header of WRITE and READ_REQ */
#define RMSGI_READ_REQ_SIZE 24 /* RMA header + u64 length */
/* a PACK frame's largest payload: the largest eager size there is
 * (rmsg_cfg_set_eager_size); the receiver's own is the real bound */
#define RMSGI_PACK_MAX ((size_t)1 << 20)
/* the most entries a PACK frame may carry */
#define RMSGI_PACK_MAX_ENT 256
#define RMSGI_PACK_ENT_SIZE 8 /* a PACK entry's header: u32 len, u32 0 */
/* the bytes an entry of @len takes in a PACK frame, header included */
#define RMSGI_PACK_ENT(len) \
	(RMSGI_PACK_ENT_SIZE + (((size_t)(len) + 7) & ~(size_t)7))

struct rmsgi_hdr {
	uint8_t type;
	uint8_t flags;
	uint16_t credits;
	uint16_t acks; /* messages acknowledged (session.c) */
	uint32_t aux;
	uint32_t bytes; /* byte-window bytes returned (credit.h) */
	uint64_t len;
	uint64_t id;
};

struct rmsgi_hello {
	uint8_t pdata_len;
	uint8_t flags;
	uint16_t credits;
	int16_t status;
	uint32_t eager_size;
	uint32_t conn_id;
	uint8_t pdata[32];
	/* RMSGI_NONCE_SIZE with a nonce (flag RMSGI_HELLO_F_AUTH), else 0 */
	uint8_t nonce_len;
	uint8_t nonce[RMSGI_NONCE_SIZE];
	/* the session part (flag RMSGI_HELLO_F_RESUME), else 0 */
	uint8_t sess_len;
	uint8_t sess[RMSGI_SESS_MAX];
};

struct rmsgi_seg {
	uint64_t addr;
	uint32_t len;
	uint32_t rkey;
};

/* target of a one-sided frame */
struct rmsgi_rma {
	uint64_t off;	/* in the export */
	uint64_t token; /* the export, from the descriptor */
	uint64_t len;	/* READ_REQ only */
};

/* little-endian loads and stores, shared by every wire codec; one
 * unaligned move each on a little-endian host */
static inline void rmsgi_put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void rmsgi_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void rmsgi_put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t rmsgi_get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t rmsgi_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t rmsgi_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/*
 * The header codec runs for every frame, so it is inline and works on
 * whole words: bytes 0-7 are magic, version, type, flags, credits and
 * acks; bytes 8-15 aux and the returned bytes (the connection refuses
 * bytes from a peer without a byte window and acks from one without a
 * session: rx.c; an ack request without a session means nothing).
 */
#define RMSGI_HDR_W0_FIXED ((uint64_t)RMSGI_MAGIC | RMSGI_PROTO_VERSION << 8)
/* the bits of word 0 that must equal RMSGI_HDR_W0_FIXED: magic,
 * version and flags */
#define RMSGI_HDR_W0_MASK 0x00000000fe00ffffull
/* flags: acknowledge now (proto.h's table) */
#define RMSGI_HDR_F_ACKREQ 0x01

static inline void rmsgi_hdr_encode(const struct rmsgi_hdr *h, void *buf)
{
	uint8_t *p = buf;

	rmsgi_put64(p, RMSGI_HDR_W0_FIXED | (uint64_t)h->type << 16 |
			       (uint64_t)h->flags << 24 |
			       (uint64_t)h->credits << 32 |
			       (uint64_t)h->acks << 48);
	rmsgi_put64(p + 8, (uint64_t)h->aux | (uint64_t)h->bytes << 32);
	rmsgi_put64(p + 16, h->len);
	rmsgi_put64(p + 24, h->id);
}

/* the frame type's name ("DATA", "RNDV_ACK"...) for reasons and logs,
 * "unknown" outside the enum */
const char *rmsgi_frame_name(unsigned type);

/* the per-type rules of rmsgi_hdr_decode() for every type but DATA */
int rmsgi_hdr_check_type(const struct rmsgi_hdr *h, uint64_t max_len);

/* validates: -EPROTO for a bad magic, version, type or flags,
 * -EMSGSIZE for a length above @max_len */
static inline int rmsgi_hdr_decode(const void *buf, size_t avail,
				   uint64_t max_len, struct rmsgi_hdr *h)
{
	const uint8_t *p = buf;
	uint64_t w0, w1;

	if (avail < RMSGI_HDR_SIZE)
		return -EPROTO;
	w0 = rmsgi_get64(p);
	w1 = rmsgi_get64(p + 8);
	if ((w0 & RMSGI_HDR_W0_MASK) != RMSGI_HDR_W0_FIXED)
		return -EPROTO;
	h->type = (uint8_t)(w0 >> 16);
	h->flags = (uint8_t)(w0 >> 24);
	h->credits = (uint16_t)(w0 >> 32);
	h->acks = (uint16_t)(w0 >> 48);
	h->aux = (uint32_t)w1;
	h->bytes = (uint32_t)(w1 >> 32);
	h->len = rmsgi_get64(p + 16);
	h->id = rmsgi_get64(p + 24);
	if (h->type == RMSGI_T_DATA)
		return h->len > max_len ? -EMSGSIZE : 0;
	return rmsgi_hdr_check_type(h, max_len);
}

/* returns the encoded size */
size_t rmsgi_hello_encode(const struct rmsgi_hello *h, void *buf);
int rmsgi_hello_decode(const void *buf, size_t avail, struct rmsgi_hello *h);

/* RMSGI_RMA_SIZE bytes, or RMSGI_READ_REQ_SIZE with @read */
void rmsgi_rma_encode(const struct rmsgi_rma *r, int read, void *buf);
int rmsgi_rma_decode(const void *buf, size_t avail, int read,
		     struct rmsgi_rma *r);

/* a PACK frame's payload @p of @len bytes, announced with @n entries
 * (1 to RMSGI_PACK_MAX_ENT): 0 if it holds exactly @n well-formed entries (reserved fields and
 * padding zero), none longer than @max_len, and nothing after them;
 * else -EPROTO */
int rmsgi_pack_check(const uint8_t *p, size_t len, uint32_t n,
		     uint64_t max_len);
/* writes an entry's header for a message of @len bytes at @p; returns
 * where its bytes go */
static inline uint8_t *rmsgi_pack_ent_encode(uint8_t *p, uint32_t len)
{
	rmsgi_put32(p, len);
	rmsgi_put32(p + 4, 0);
	return p + RMSGI_PACK_ENT_SIZE;
}

void rmsgi_seg_encode(const struct rmsgi_seg *s, void *buf);
void rmsgi_seg_decode(const void *buf, struct rmsgi_seg *s);

#endif /* RMSG_PROTO_H */
