// SPDX-License-Identifier: MIT
/*
 * export_hostile.c - a peer reaches only what was exported to its own
 * connection (issue 14, item 1), on either transport.
 *
 * The server has one region of 16 slots of 256 bytes, between guard
 * pages, and exports to each connection i its slot i twice: read+write
 * (dw) and read-only (dro). Client A behaves; after every attack A writes
 * and reads back its slot, and the whole region and the guards are
 * compared with the image of what legitimate writes put there. Each
 * attack runs on a fresh connection B, which first writes its own slot
 * (so the test can tell a refusal from a broken setup), then:
 *   cross:    writes with A's descriptor
 *   forged:   its own descriptor with the token (and rkey) changed
 *   range:    its own descriptor with a longer length, past its slot
 *   rights:   its read-only descriptor with the write right added
 *   revoked:  its own descriptor after the server revoked it
 *   repeated: (TCP) 8 forged writes: 7 answered -EACCES, then the server
 *             ends the connection with -EACCES
 * TCP: the library refuses: -EACCES (-EINVAL for the range) and B stays
 * up. RDMA: the device refuses: the op fails and B's connection ends
 * (a remote access error kills the queue pair). Every descriptor is
 * forged behind the sender's checks, which would refuse most of these
 * locally. Figures: "export_hostile: TRANSPORT: ..." per attack.
 */
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>

#include "../integration/common.h"

#define SLOT 256
#define NSLOT 16
#define PAGE 4096
#define REFUSALS 8 /* RMSGI_REFUSALS_MAX, documented in rmsg_mr_export.3 */

enum {
	K_DESC = 1,
	K_REVOKE,
	K_REVOKED
};

struct m_desc {
	uint32_t kind;
	uint32_t idx;
	uint8_t dw[RMSG_MR_DESC_SIZE];
	uint8_t dro[RMSG_MR_DESC_SIZE];
};

enum attack {
	A_CROSS,
	A_FORGED,
	A_RANGE,
	A_RIGHTS,
	A_REVOKED,
	A_REPEAT
};
static const char *const names[] = {"cross",  "forged",	 "range",
				    "rights", "revoked", "repeated"};

/* server */
static struct rmsg_ctx *sctx, *cctx;
static struct rmsg_listener *lis;
static uint8_t *mem; /* guard page, region, guard page */
static uint8_t image[PAGE + NSLOT * SLOT + PAGE];
static struct rmsg_mr *mr;
static struct {
	struct rmsg_conn *c;
	struct m_desc d;
	int close_reason;
	bool closed;
} sc[32];
static int nsc;

/* client */
struct cli {
	struct rmsg_conn *c;
	struct m_desc d;
	bool got, closed, revoked;
	int close_reason;
};
static struct cli A, B;
static bool rdma;
static int op_status[REFUSALS + 1], ops_done, nposted;
static uint8_t wbuf[SLOT * 2], rbuf[SLOT];
static int phase, attack = -1;
static ev_timer tick;
static ev_tstamp t_attack;
static char uri[128];

static int srv_find(struct rmsg_conn *c)
{
	int i;

	/* newest first: a closed connection's memory may be reused */
	for (i = nsc - 1; i >= 0; i--)
		if (sc[i].c == c)
			return i;
	T_FAIL("server: unknown connection");
}

static void srv_send(struct rmsg_conn *c, struct m_desc *d)
{
	struct iovec iov = {d, sizeof(*d)};

	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	int i = nsc++;
	uint64_t off = (uint64_t)i * SLOT;

	T_ASSERT(i < NSLOT, "too many connections");
	sc[i].c = c;
	sc[i].d.kind = K_DESC;
	sc[i].d.idx = (uint32_t)i;
	T_OK(rmsg_mr_export(mr, c, off, SLOT,
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			    sc[i].d.dw));
	T_OK(rmsg_mr_export(mr, c, off, SLOT, RMSG_ACCESS_REMOTE_READ,
			    sc[i].d.dro));
	srv_send(c, &sc[i].d);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	static struct m_desc ack = {.kind = K_REVOKED};
	const struct m_desc *d = rmsg_msg_data(m);
	int i = srv_find(c);

	T_ASSERT(rmsg_msg_len(m) == sizeof(*d) && d->kind == K_REVOKE,
		 "server: unexpected message");
	T_OK(rmsg_mr_revoke(mr, sc[i].d.dw));
	T_ASSERT(rmsg_mr_revoke(mr, sc[i].d.dw) == -ENOENT, "revoked twice");
	srv_send(c, &ack);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	int i = srv_find(c);

	sc[i].closed = true;
	sc[i].close_reason = reason;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct cli *k = arg;
	const struct m_desc *d = rmsg_msg_data(m);

	T_ASSERT(rmsg_msg_len(m) == sizeof(*d), "client: message size");
	if (d->kind == K_DESC) {
		k->d = *d;
		k->got = true;
	} else if (d->kind == K_REVOKED) {
		k->revoked = true;
	} else {
		T_FAIL("client: message kind %u", d->kind);
	}
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct cli *k = arg;

	k->closed = true;
	k->close_reason = reason;
	k->c = NULL;
}

static void op_done(struct rmsg_conn *c, int status, void *arg)
{
	*(int *)arg = status;
	ops_done++;
}

static void cli_connect(struct cli *k)
{
	static const struct rmsg_conn_ops ops = {.on_established = cli_est,
						 .on_msg = cli_msg,
						 .on_close = cli_close};

	memset(k, 0, sizeof(*k));
	T_OK(rmsg_connect(cctx, uri, NULL, &ops, k, &k->c));
}

/* a legitimate write of @len bytes at @off of @k's slot: the image too */
static void legit_write(struct cli *k, uint8_t seed, int *st)
{
	size_t i;

	for (i = 0; i < SLOT; i++)
		wbuf[i] = (uint8_t)(seed + i * 7);
	memcpy(image + PAGE + k->d.idx * SLOT, wbuf, SLOT);
	*st = 1;
	{
		struct iovec iov = {wbuf, SLOT};

		T_OK(rmsg_write(k->c, &iov, 1, k->d.dw, 0, op_done, st));
	}
}

static void check_image(const char *when)
{
	size_t i;

	for (i = 0; i < sizeof(image); i++)
		if (mem[i] != image[i])
			T_FAIL("%s: server byte %zu is %#x, expected %#x", when,
			       i, mem[i], image[i]);
}

/* hostile op @i of the current attack, on B */
static void hostile(int i)
{
	uint8_t d[RMSG_MR_DESC_SIZE];
	struct iovec iov = {wbuf + SLOT, 16};
	uint64_t off = 0;

	memset(wbuf + SLOT, 0xee, SLOT);
	memcpy(d, B.d.dw, sizeof(d));
	switch (attack) {
	case A_CROSS:
		memcpy(d, A.d.dw, sizeof(d));
		break;
	case A_FORGED:
	case A_REPEAT:
		d[4] ^= rdma ? 0x5a : 0; /* rkey (TCP descriptors have none) */
		d[12] ^= 0x3c + i;	 /* token */
		break;
	case A_RANGE:
		d[25] = 0x10; /* length 4096: past the slot */
		off = SLOT + 8;
		break;
	case A_RIGHTS:
		memcpy(d, B.d.dro, sizeof(d));
		d[2] |= RMSG_ACCESS_REMOTE_WRITE;
		break;
	case A_REVOKED:
		break;
	}
	op_status[i] = 1;
	T_OK(rmsg_write(B.c, &iov, 1, d, off, op_done, &op_status[i]));
	nposted = i + 1;
}

static int a_st[2];

static void step(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct iovec iov = {rbuf, SLOT};
	int i;

	switch (phase) {
	case 0: /* A connects and gets its descriptors */
		cli_connect(&A);
		phase++;
		break;
	case 1:
		if (!A.got)
			break;
		/* fallthrough */
	case 10: /* A writes its slot and reads it back */
		legit_write(&A, (uint8_t)(attack + 2), &a_st[0]);
		a_st[1] = 1;
		memset(rbuf, 0, SLOT);
		T_OK(rmsg_read(A.c, &iov, 1, A.d.dw, 0, op_done, &a_st[1]));
		phase = 11;
		break;
	case 11:
		if (a_st[0] == 1 || a_st[1] == 1)
			break;
		T_OK(a_st[0]);
		T_OK(a_st[1]);
		T_ASSERT(memcmp(rbuf, wbuf, SLOT) == 0, "A reads back");
		check_image(attack < 0 ? "start" : names[attack]);
		attack++;
		if (attack > A_REPEAT || (rdma && attack == A_REPEAT)) {
			phase = 40;
			break;
		}
		cli_connect(&B);
		t_attack = ev_now(loop);
		phase = 20;
		break;
	case 20: /* B: its own slot works */
		if (B.closed)
			T_FAIL("%s: B closed early: %s", names[attack],
			       rmsg_strerror(B.close_reason));
		if (!B.got)
			break;
		legit_write(&B, 0x40, &op_status[0]);
		phase++;
		break;
	case 21:
		if (op_status[0] == 1)
			break;
		T_OK(op_status[0]);
		if (attack == A_REVOKED) {
			static struct m_desc rq = {.kind = K_REVOKE};
			struct iovec riov = {&rq, sizeof(rq)};

			T_OK(rmsg_send(B.c, &riov, 1, NULL, NULL));
		}
		phase++;
		break;
	case 22:
		if (attack == A_REVOKED && !B.revoked)
			break;
		ops_done = 0;
		hostile(0);
		phase++;
		break;
	case 23: /* the hostile op completed (repeated: one at a time) */
		if (ops_done < nposted)
			break;
		if (attack == A_REPEAT && ops_done < REFUSALS) {
			T_ASSERT(op_status[ops_done - 1] == -EACCES,
				 "repeated: write %d: %d", ops_done - 1,
				 op_status[ops_done - 1]);
			T_ASSERT(!B.closed, "repeated: closed after %d",
				 ops_done);
			hostile(ops_done);
			break;
		}
		if (attack == A_REPEAT) {
			i = REFUSALS - 1;
			/* checked once B closed (case 24) */
			T_ASSERT(op_status[i] < 0, "repeated: last: %d",
				 op_status[i]);
		} else if (rdma) {
			T_ASSERT(op_status[0] < 0, "%s: not refused (%d)",
				 names[attack], op_status[0]);
		} else {
			int want = attack == A_RANGE ? -EINVAL : -EACCES;

			T_ASSERT(op_status[0] == want, "%s: status %d, want %d",
				 names[attack], op_status[0], want);
			T_ASSERT(!B.closed, "%s: B closed", names[attack]);
		}
		printf("export_hostile: %s: %s refused (%.1f s): %s%s\n",
		       t_transport(), names[attack], ev_now(loop) - t_attack,
		       rmsg_strerror(op_status[0]),
		       rdma ? " (connection ended)" : "");
		if (B.c && !rdma && attack != A_REPEAT)
			rmsg_conn_close(B.c);
		phase++;
		break;
	case 24: /* B is gone (RDMA: the device's refusal ended it) */
		if (!B.closed)
			break;
		if (rdma)
			printf("export_hostile: rdma: %s: B closed (%.1f s): "
			       "%s\n",
			       names[attack], ev_now(loop) - t_attack,
			       rmsg_strerror(B.close_reason));
		if (attack == A_REPEAT) {
			int s = nsc - 1;

			if (!sc[s].closed)
				break;
			T_ASSERT(sc[s].close_reason == -EACCES,
				 "repeated: server closed with %d",
				 sc[s].close_reason);
			/* the owner ended it without a close on purpose: B
			 * reads a reset (rmsg_connect.3), and its last
			 * write, refused by that end, fails with it
			 * (rmsg_send.3) */
			T_ASSERT(B.close_reason == -ECONNRESET,
				 "repeated: B closed with %s",
				 rmsg_strerror(B.close_reason));
			T_ASSERT(op_status[REFUSALS - 1] == -EACCES ||
					 op_status[REFUSALS - 1] ==
						 B.close_reason,
				 "repeated: the last write: %s",
				 rmsg_strerror(op_status[REFUSALS - 1]));
			printf("export_hostile: tcp: %d refusals ended the "
			       "connection: %s\n",
			       REFUSALS, rmsg_strerror(sc[s].close_reason));
		}
		phase = 10;
		break;
	case 40:
		check_image("end");
		T_ASSERT(!A.closed, "A closed");
		rmsg_conn_close(A.c);
		phase++;
		break;
	case 41:
		if (!A.closed)
			break;
		/* over RDMA the server may learn of the hostile connections'
		 * end only at its keepalive bound: destroying the contexts
		 * ends them */
		ev_timer_stop(loop, w);
		rmsg_listener_close(lis);
		ev_break(loop, EVBREAK_ALL);
		phase++;
		break;
	}
}

int main(void)
{
	static const struct rmsg_conn_ops sops = {.on_established = srv_est,
						  .on_msg = srv_msg,
						  .on_close = srv_close};
	struct ev_loop *loop = EV_DEFAULT;

	t_require_transport();
	setvbuf(stdout, NULL, _IOLBF, 0);
	rdma = strcmp(t_transport(), "rdma") == 0;
	mem = aligned_alloc(PAGE, sizeof(image));
	T_ASSERT(mem, "alloc");
	memset(mem, 0, sizeof(image));
	memset(image, 0, sizeof(image));
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_mr_reg(sctx, mem + PAGE, NSLOT * SLOT,
			 RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			 &mr));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	ev_timer_init(&tick, step, 0.001, 0.005);
	ev_timer_start(loop, &tick);
	/* 6 connections set up and torn down: slow under TCG */
	t_deadline(loop, 300);
	ev_run(loop, 0);
	T_ASSERT(phase == 42, "ended in phase %d", phase);
	check_image("after close");
	T_OK(rmsg_mr_dereg(mr));
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	free(mem);
	printf("export_hostile: %s: PASS\n", t_transport());
	return 0;
}
