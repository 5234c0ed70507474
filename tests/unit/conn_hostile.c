// SPDX-License-Identifier: MIT
/*
 * conn_hostile.c - unit tests of the connection state machine (src/conn.c)
 * against the fake transport (fake_tr.h): a peer that lies in ways the
 * frame checks cannot see. A reply to an RPC whose request has not gone
 * out yet; answers to all of our rendezvous sends but the oldest; a peer
 * that keeps us queueing answers (-ENOSYS replies, acknowledgements) by
 * returning just the credit our CREDIT frames cost.
 */
#include "conn_t.h"

#include "proto.h"

/* ------------------------------------------------------------------ */
/* RPC                                                                  */

struct call_rec {
	int n;
	int status;
	char data[64];
};

static void reply_cb(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		     void *arg)
{
	struct call_rec *r = arg;
	size_t len = reply ? rmsg_msg_len(reply) : 0;

	(void)c;
	r->n++;
	r->status = status;
	assert_true(len < sizeof(r->data));
	if (len)
		memcpy(r->data, rmsg_msg_data(reply), len);
	r->data[len] = 0;
}

/* an RPC frame from the peer: its 16-byte header (@word: the method of a
 * request, the status of a reply; the call id), then @body */
static struct rmsg_msg *rpc_frame(struct rmsg_conn *c, uint32_t word,
				  uint64_t id, const char *body)
{
	struct rmsg_msg *m = tmsg_new(c, NULL);
	struct tmsg *tm = RMSGI_CONTAINER_OF(m, struct tmsg, m);
	size_t n = strlen(body);

	assert_true(16 + n <= sizeof(tm->data));
	rmsgi_put32(tm->data, word);
	rmsgi_put32(tm->data + 4, 0);
	rmsgi_put32(tm->data + 8, (uint32_t)id);
	rmsgi_put32(tm->data + 12, (uint32_t)(id >> 32));
	memcpy(tm->data + 16, body, n);
	m->data = tm->data;
	m->len = 16 + n;
	return m;
}

/* a reply that names a call whose request is still queued (no credit to
 * send it) is not delivered then: the callback would tell the app that
 * the request's memory is free again, and the request would later go out
 * of whatever the app put there. It is kept until the request's send
 * completes, and delivered then, once */
static void conn_hostile__reply_before_request_sent(void **state)
{
	struct t *t = *state;
	char req[] = "request";
	struct iovec iov = {req, sizeof(req) - 1};
	struct call_rec r = {0};
	uint64_t id = 0;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(t->c->cr.avail, 1); /* the last: never a message */
	assert_int_equal(rmsg_call(t->c, 7, &iov, 1, 0, reply_cb, &r, &id), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3); /* the request waits for credit */
	assert_int_equal(rx(t->c, RMSGI_T_DATA, 0, RMSGI_AUX_RPC_REP, 0,
			    rpc_frame(t->c, 0, id, "forged")),
			 0);
	flush(t);
	assert_int_equal(r.n, 0);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	/* credits back: the request goes, and completes */
	tr_complete_all(t->c, 0);
	assert_int_equal(rx_credit(t->c, 3), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1); /* (completed ones leave the list) */
	assert_int_equal(ft.posted[0].aux, RMSGI_AUX_RPC_REQ);
	assert_int_equal(r.n, 0);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.data, "forged");
	/* the kept message went back with its credit */
	rmsg_conn_close(t->c);
	flush(t);
	assert_int_equal(r.n, 1);
}

/* the same reply kept while the connection closes: delivered once, by
 * the close, and its message freed */
static void conn_hostile__kept_reply_at_close(void **state)
{
	struct t *t = *state;
	char req[] = "request";
	struct iovec iov = {req, sizeof(req) - 1};
	struct call_rec r = {0};
	int freed, i;
	uint64_t id = 0;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(rmsg_call(t->c, 7, &iov, 1, 0, reply_cb, &r, &id), 0);
	flush(t);
	assert_int_equal(rx(t->c, RMSGI_T_DATA, 0, RMSGI_AUX_RPC_REP, 0,
			    rpc_frame(t->c, 0, id, "early")),
			 0);
	freed = msgs_freed;
	tr_down(t->c);
	flush(t);
	assert_int_equal(r.n, 1);
	assert_int_equal(msgs_freed, freed + 1);
	assert_int_equal(t->closed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_hostile__reply_before_request_sent),
		CONN_T(conn_hostile__kept_reply_at_close),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
