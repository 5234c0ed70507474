/* SPDX-License-Identifier: MIT */
/*
 * conn_t.h - what the tests of the connection state machine (src/conn.c;
 * tests/unit/conn_*.c) share: an application recording its callbacks, a
 * connection over the fake transport (fake_tr.h), and frames from the
 * peer. Implemented in conn_common.c.
 */
#ifndef RMSG_TEST_CONN_T_H
#define RMSG_TEST_CONN_T_H

#include <stdio.h>

#include "unit.h"

#include "fake_tr.h"

/* ------------------------------------------------------------------ */
/* received frames                                                      */

struct tmsg {
	struct rmsg_msg m;
	bool credit; /* its buffer carries a credit */
	uint8_t data[64];
};

/* message objects freed so far */
extern int msgs_freed;

struct rmsg_msg *tmsg_new(struct rmsg_conn *c, const char *s);
int rx(struct rmsg_conn *c, uint8_t type, uint16_t credits, uint32_t aux,
       uint64_t id, struct rmsg_msg *m);
int rx_data(struct rmsg_conn *c, const char *s, uint16_t credits);
/* a frame of header @h (its len should be @m's) */
int rx_hdr(struct rmsg_conn *c, const struct rmsgi_hdr *h, struct rmsg_msg *m);
int rx_credit(struct rmsg_conn *c, uint16_t credits);

/* ------------------------------------------------------------------ */
/* the application                                                      */

#define LOG_MAX 512

struct event {
	char kind; /* 'S' send done, 'M' message, 'X' close, ... */
	int status;
	intptr_t arg;
};

struct t {
	struct ev_loop *loop;
	struct rmsg_ctx *ctx;
	struct rmsg_conn *c;
	struct event log[LOG_MAX];
	int nlog;
	int established, writable, closed, close_reason, msgs;
	int warnings; /* lines logged at RMSG_LOG_WARN or worse */
	char last_msg[65];
	bool hold; /* on_msg holds the message */
	struct rmsg_msg *held;
	bool close_in_msg; /* on_msg closes the connection */
};

/* the app's callbacks, recording into the struct t of their arg */
extern const struct rmsg_conn_ops ops;

void done_cb(struct rmsg_conn *c, int status, void *arg);
/* how many 'S' events for @arg, and their status */
int done_count(const struct t *t, intptr_t arg, int *status_p);
int count(const struct t *t, char kind);
int send_str(struct t *t, const char *s, intptr_t arg);
int send_len(struct t *t, size_t len, intptr_t arg);
void flush(struct t *t);
/* the hello the peer answers with */
void establish(struct t *t, uint16_t credits, uint32_t eager);

/* a context and a connection over the fake without capabilities */
int setup(void **state);
int teardown(void **state);
/* a connection with its own configuration over a fake with @caps */
struct t *replace_t(void **state, const struct rmsgi_cfgv *cfg, unsigned caps);

#define CONN_T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

#endif
