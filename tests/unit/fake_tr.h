/* SPDX-License-Identifier: MIT */
/*
 * fake_tr.h - the one fake transport of the core's tests (tests/unit/
 * conn_*.c, tests/fuzz/fuzz_conn.c). The test plays the backend: post()
 * records the op and nothing goes anywhere; the test completes posted
 * ops, reports room, failure and the end when it chooses. A fake
 * connection's state (tc) is the core's connection itself.
 *
 * Link fake_tr.c and fake_registry.c (the registry's rows) instead of
 * src/transport/registry.c: the registry then serves this fake for every
 * id and scheme, and no real backend is linked.
 */
#ifndef RMSG_TEST_FAKE_TR_H
#define RMSG_TEST_FAKE_TR_H

#include "rmsg_int.h"

#define FAKE_POSTED_MAX 256

/* an op post() accepted, as it was when posted */
struct fake_posted {
	struct rmsgi_op *op;
	uint8_t type, kind, rndv;
	uint16_t credits;
	uint32_t wret; /* byte-window bytes returned */
	uint32_t aux;
	uint64_t id;
	size_t len;
	uint8_t data[64]; /* a payload of one piece up to 64 bytes */
	size_t data_len;
};

struct fake_tr_state {
	struct fake_posted posted[FAKE_POSTED_MAX]; /* accepted, not done */
	int nposted;
	int post_ret;	    /* post() returns this ... */
	int post_ret_calls; /* ... for so many calls (0: until reset) */
	int fail_nth;	    /* the fail_nth-th post() fails with -EIO */
	int room;	    /* posted ops it holds at most (0: no bound);
			       beyond: -EAGAIN, room on the next completion */
	bool room_wanted;
	bool down;	    /* went down (tr_down): post() says -ENOTCONN */
	bool auto_down;	    /* disconnect() completes everything at once */
	bool disconnecting; /* disconnect() was called */
	unsigned linger_ms; /* ... with this */
	int npost, nkick, ndisconnect, nrelease, nconnect;
	int ndirect; /* frames send_direct() took (fake_tr_direct) */
	/* addrs(): returns addrs_ret (0: writes addr_local, addr_peer) */
	int addrs_ret;
	struct sockaddr_storage addr_local, addr_peer;
	int naddrs;
	struct rmsgi_addrs last_to; /* the last connect()'s addresses */
	/* grant(): backs at most grant_cap credits (0: any); counts the
	 * calls and keeps the last value asked for */
	uint32_t grant_cap;
	uint32_t last_grant;
	int ngrant;
};

extern struct fake_tr_state ft;
/* the fake backend; its caps are the test's to set (fake_tr_reset) */
extern struct rmsgi_tr fake_tr;

/* forgets everything and sets the fake's capabilities
 * (RMSGI_TR_CAP_RNDV: it takes large messages by rendezvous) */
void fake_tr_reset(unsigned caps);
/* from now on the fake has send_direct(), which writes every frame whole
 * (until the next fake_tr_reset); attach after it */
void fake_tr_direct(void);
/* @c runs over the fake, as if connect() had started it */
void fake_tr_attach(struct rmsg_conn *c);

/* completes the @i-th posted op (in posting order) with @status */
void tr_complete(struct rmsg_conn *c, int i, int status);
void tr_complete_all(struct rmsg_conn *c, int status);
/* the backend is gone: what it still held completes first (the rule of
 * transport.h), then it says so; once */
void tr_down(struct rmsg_conn *c);

#endif
