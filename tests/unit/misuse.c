// SPDX-License-Identifier: MIT
/*
 * unit tests of misuse the library detects (issue 14, "Misuse
 * detected"): a second rmsg_reply()/rmsg_reply_error() on one request,
 * a second rmsg_msg_release() of one message. The core and the real TCP
 * backend run a server and a client over loopback on one loop, so that
 * the objects are recycled exactly as in an application; the test looks
 * at their internal state too.
 */
#include <stdio.h>

#include "unit.h"

#include "rmsg_int.h"

#define METHOD 7
#define HELD_MAX 64

struct t {
	struct ev_loop *loop;
	struct rmsg_ctx *ctx;
	struct rmsg_listener *l;
	struct rmsg_conn *cli, *srv;
	int established;
	/* server: requests the handler kept, and what replies returned */
	struct rmsg_req *reqs[8];
	int nreqs;
	bool answer_twice; /* the handler answers, then answers again */
	int ret_first, ret_second, ret_error;
	/* client: replies, by call number */
	int replies, reply_status[8];
	char reply_text[8][16];
	/* server: held messages */
	struct rmsg_msg *held[HELD_MAX];
	char held_text[HELD_MAX][16];
	int nheld;
};

static void on_established(struct rmsg_conn *c, void *arg)
{
	struct t *t = arg;

	t->established++;
	if (c != t->cli)
		t->srv = c;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct t *t = arg;
	size_t n = RMSGI_MIN(rmsg_msg_len(m), sizeof(t->held_text[0]) - 1);

	assert_true(t->nheld < HELD_MAX);
	assert_int_equal(rmsg_msg_hold(m), 0);
	memcpy(t->held_text[t->nheld], rmsg_msg_data(m), n);
	t->held_text[t->nheld][n] = '\0';
	t->held[t->nheld++] = m;
}

static const struct rmsg_conn_ops srv_ops = {
	.on_established = on_established,
	.on_msg = srv_msg,
};

static const struct rmsg_conn_ops cli_ops = {
	.on_established = on_established,
};

static void handler(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *request, void *arg)
{
	struct t *t = arg;
	struct iovec iov = {.iov_base = (void *)rmsg_msg_data(request),
			    .iov_len = rmsg_msg_len(request)};

	assert_true(t->nreqs < 8);
	t->reqs[t->nreqs++] = req;
	if (!t->answer_twice)
		return;
	t->ret_first = rmsg_reply(req, &iov, 1);
	t->ret_second = rmsg_reply(req, &iov, 1);
	t->ret_error = rmsg_reply_error(req, -EIO);
}

static void reply_cb(struct rmsg_conn *c, int status, struct rmsg_msg *reply,
		     void *arg)
{
	struct t *t = c->arg;
	int i = (int)(intptr_t)arg;
	size_t n = 0;

	assert_non_null(t);
	t->replies++;
	t->reply_status[i] = status;
	if (reply) {
		n = RMSGI_MIN(rmsg_msg_len(reply),
			      sizeof(t->reply_text[0]) - 1);
		memcpy(t->reply_text[i], rmsg_msg_data(reply), n);
	}
	t->reply_text[i][n] = '\0';
}

/* runs the loop until @cond holds, for 5 s at most */
#define RUN_UNTIL(t, cond)                                            \
	do {                                                          \
		ev_tstamp t0_ = ev_time();                            \
		while (!(cond) && ev_time() - t0_ < 5.0)              \
			ev_run((t)->loop, EVRUN_ONCE | EVRUN_NOWAIT); \
		assert_true(cond);                                    \
	} while (0)

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	char uri[64];
	uint16_t port;

	assert_non_null(t);
	t->loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(t->loop);
	assert_int_equal(rmsg_ctx_create(t->loop, NULL, &t->ctx), 0);
	assert_int_equal(rmsg_handle(t->ctx, METHOD, handler, t), 0);
	assert_int_equal(rmsg_listen(t->ctx, "tcp://127.0.0.1:0", NULL,
				     &srv_ops, NULL, t, &t->l),
			 0);
	assert_int_equal(rmsg_listener_port(t->l, &port), 0);
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	assert_int_equal(rmsg_connect(t->ctx, uri, NULL, &cli_ops, t, &t->cli),
			 0);
	RUN_UNTIL(t, t->established == 2);
	assert_non_null(t->srv);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	int i;

	for (i = 0; i < t->nheld; i++)
		rmsg_msg_release(t->held[i]);
	assert_int_equal(rmsg_ctx_destroy(t->ctx), 0);
	ev_loop_destroy(t->loop);
	free(t);
	return 0;
}

static void call(struct t *t, const char *s, int i)
{
	struct iovec iov = {.iov_base = (void *)s, .iov_len = strlen(s)};

	assert_int_equal(rmsg_call(t->cli, METHOD, &iov, 1, 5000, reply_cb,
				   (void *)(intptr_t)i, NULL),
			 0);
}

static void send_str(struct t *t, const char *s)
{
	struct iovec iov = {.iov_base = (void *)s, .iov_len = strlen(s)};

	assert_int_equal(rmsg_send(t->cli, &iov, 1, NULL, NULL), 0);
}

/* answered twice inside the handler: one reply leaves, the others say
 * -EINVAL and change nothing (the connection's references included) */
static void rmsg_reply__twice_in_handler(void **state)
{
	struct t *t = *state;
	int refs;

	t->answer_twice = true;
	call(t, "one", 0);
	RUN_UNTIL(t, t->nreqs == 1);
	assert_int_equal(t->ret_first, 0);
	assert_int_equal(t->ret_second, -EINVAL);
	assert_int_equal(t->ret_error, -EINVAL);
	refs = t->srv->refs;
	assert_int_equal(rmsg_reply_error(t->reqs[0], -EIO), -EINVAL);
	assert_int_equal(rmsg_reply(t->reqs[0], NULL, 0), -EINVAL);
	assert_int_equal(t->srv->refs, refs);
	RUN_UNTIL(t, t->replies == 1);
	assert_int_equal(t->reply_status[0], 0);
	assert_string_equal(t->reply_text[0], "one");
	/* a second call is answered by its own request */
	call(t, "two", 1);
	RUN_UNTIL(t, t->replies == 2);
	assert_int_equal(t->reply_status[1], 0);
	assert_string_equal(t->reply_text[1], "two");
}

/* a stale request pointer used after another request arrived: -EINVAL,
 * and the new request is untouched (it is another object) */
static void rmsg_reply__stale_after_next_request(void **state)
{
	struct t *t = *state;
	struct iovec iov = {.iov_base = "first", .iov_len = 5};

	call(t, "a", 0);
	RUN_UNTIL(t, t->nreqs == 1);
	assert_int_equal(rmsg_reply(t->reqs[0], &iov, 1), 0);
	call(t, "b", 1);
	RUN_UNTIL(t, t->nreqs == 2);
	assert_ptr_not_equal(t->reqs[0], t->reqs[1]);
	assert_int_equal(rmsg_reply_error(t->reqs[0], -EIO), -EINVAL);
	assert_int_equal(rmsg_reply(t->reqs[0], &iov, 1), -EINVAL);
	iov.iov_base = "second";
	iov.iov_len = 6;
	assert_int_equal(rmsg_reply(t->reqs[1], &iov, 1), 0);
	RUN_UNTIL(t, t->replies == 2);
	assert_int_equal(t->reply_status[0], 0);
	assert_string_equal(t->reply_text[0], "first");
	assert_int_equal(t->reply_status[1], 0);
	assert_string_equal(t->reply_text[1], "second");
}

/* a second release of a held message does nothing; a message received
 * after the first release is another object, which the stale pointer
 * cannot release */
static void rmsg_msg_release__twice(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *first;
	int refs, i;

	send_str(t, "m0");
	RUN_UNTIL(t, t->nheld == 1);
	first = t->held[0];
	refs = t->srv->refs;
	rmsg_msg_release(first);
	assert_int_equal(t->srv->refs, refs - 1);
	rmsg_msg_release(first);
	assert_int_equal(t->srv->refs, refs - 1);
	/* the next messages, held too, get other objects */
	for (i = 1; i <= 8; i++) {
		char s[8];

		snprintf(s, sizeof(s), "m%d", i);
		send_str(t, s);
		RUN_UNTIL(t, t->nheld == i + 1);
		assert_ptr_not_equal(t->held[i], first);
		rmsg_msg_release(first); /* stale: nothing happens */
		assert_int_equal(t->held[i]->held, 1);
	}
	assert_int_equal(t->srv->refs, refs - 1 + 8);
	for (i = 1; i <= 8; i++) {
		char s[8];

		snprintf(s, sizeof(s), "m%d", i);
		assert_string_equal(t->held_text[i], s);
		assert_int_equal(rmsg_msg_len(t->held[i]), strlen(s));
		assert_memory_equal(rmsg_msg_data(t->held[i]), s, strlen(s));
		rmsg_msg_release(t->held[i]);
		rmsg_msg_release(t->held[i]);
	}
	assert_int_equal(t->srv->refs, refs - 1);
	t->nheld = 0;
	/* the connection still works: its credits all came back once */
	send_str(t, "after");
	RUN_UNTIL(t, t->nheld == 1);
	assert_string_equal(t->held_text[0], "after");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(rmsg_reply__twice_in_handler),
		T(rmsg_reply__stale_after_next_request),
		T(rmsg_msg_release__twice),
	};
#undef T

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
