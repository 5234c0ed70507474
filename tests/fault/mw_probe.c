// SPDX-License-Identifier: MIT
/*
 * mw_probe.c - does a type-2 memory window bound to one connected RC QP
 * protect a region on this device? Standalone verbs/rdma_cm program, run
 * in the Soft-RoCE VM (tests/vm/run-in-vm.sh -- tests/fault/mw_probe).
 *
 * A server thread accepts four connections (A, B, C, D) on the address
 * in RMSG_TEST_ADDR. The server's region is registered with LOCAL_WRITE |
 * MW_BIND only (no remote rights). Checked, in order:
 *   1. a type-2 MW bound with IBV_WR_BIND_MW on A's QP (fresh rkey by
 *      ibv_inc_rkey) over [1024, 2048) with remote write+read;
 *   2. A writes and reads inside the window: success, data arrives;
 *   3. B writes with the same rkey: fails (remote access error);
 *   4. D writes with the MR's own rkey: fails (no remote rights);
 *   5. C: bind/dealloc cost (N cycles of alloc + bind + dealloc), then a
 *      write just outside C's window fails;
 *   6. after ibv_dealloc_mw of A's window, A's write fails.
 * Exit status 0 when every expectation held, 1 otherwise, 77 without a
 * device (or over TCP: make check runs it with RMSG_TEST_TRANSPORT=tcp).
 * Prints the work completion status of each step and two figures: what
 * alloc + bind + dealloc and bind + LOCAL_INV of a window cost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#if defined(__SANITIZE_ADDRESS__)
#define MW_PROBE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MW_PROBE_ASAN 1
#endif
#endif
#ifdef MW_PROBE_ASAN
#include <sanitizer/lsan_interface.h>
#endif
#include <rdma/rdma_verbs.h>
#include <infiniband/verbs.h>

#define NCONN 4
#define PORT "7471"
#define CYCLES 200

static struct rdma_cm_id *sid[NCONN];
static const char *addr;
static int failures;

static void *server(void *arg)
{
	struct rdma_cm_id *lid = arg;
	int i;

#ifdef MW_PROBE_ASAN
	__lsan_disable(); /* per thread: see main() */
#endif
	for (i = 0; i < NCONN; i++) {
		struct rdma_conn_param cp = {
			.responder_resources = 1,
			.initiator_depth = 1,
		};

		if (rdma_get_request(lid, &sid[i])) {
			perror("rdma_get_request");
			exit(1);
		}
		if (rdma_accept(sid[i], &cp)) {
			perror("rdma_accept");
			exit(1);
		}
	}
	return NULL;
}

static void expect(const char *what, int ok)
{
	printf("%s: %s\n", ok ? "ok" : "FAILED", what);
	if (!ok)
		failures++;
}

static int wait_send(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	int n;

	do
		n = ibv_poll_cq(id->send_cq, 1, wc);
	while (n == 0);
	return n < 0 ? -1 : 0;
}

static int bind_mw(struct rdma_cm_id *id, struct ibv_mw *mw, struct ibv_mr *mr,
		   void *a, size_t len, int acc, uint32_t *rkey_p)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)a;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = acc;
	ret = ibv_post_send(id->qp, &wr, &bad);
	if (ret) {
		printf("bind post: %d (%s)\n", ret, strerror(ret));
		return -ret;
	}
	if (wait_send(id, &wc))
		return -EIO;
	if (wc.status != IBV_WC_SUCCESS) {
		printf("bind wc: %s (%d) opcode %d\n",
		       ibv_wc_status_str(wc.status), wc.status, wc.opcode);
		return -EIO;
	}
	mw->rkey = rkey;
	*rkey_p = rkey;
	return 0;
}

/* a one-sided op from client @c; returns the work completion status */
static int rma(struct rdma_cm_id *c, struct ibv_mr *lmr, void *lbuf, size_t len,
	       uint64_t raddr, uint32_t rkey, int read)
{
	struct ibv_wc wc;
	int ret;

	printf("  post %s len %zu raddr 0x%llx rkey 0x%x\n",
	       read ? "read" : "write", len, (unsigned long long)raddr, rkey);
	if (read)
		ret = rdma_post_read(c, NULL, lbuf, len, lmr, IBV_SEND_SIGNALED,
				     raddr, rkey);
	else
		ret = rdma_post_write(c, NULL, lbuf, len, lmr,
				      IBV_SEND_SIGNALED, raddr, rkey);
	if (ret) {
		printf("post: %s\n", strerror(errno));
		return -1;
	}
	if (wait_send(c, &wc))
		return -1;
	printf("  wc %s (%d)\n", ibv_wc_status_str(wc.status), wc.status);
	return wc.status;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(void)
{
	struct rdma_addrinfo hints, *res, *cres;
	struct ibv_qp_init_attr attr;
	struct rdma_cm_id *lid, *cid[NCONN];
	struct ibv_device_attr da;
	struct ibv_mr *mr, *lmr[NCONN];
	struct ibv_mw *mw, *mwc;
	static char sbuf[4096] __attribute__((aligned(4096)));
	static char lbuf[NCONN][4096];
	uint32_t rkey, rkeyc;
	pthread_t th;
	double t0, t1;
	int i, st;

	addr = getenv("RMSG_TEST_ADDR");
	if (!addr || !getenv("RMSG_TEST_TRANSPORT") ||
	    strcmp(getenv("RMSG_TEST_TRANSPORT"), "rdma")) {
		fprintf(stderr,
			"mw_probe: no RMSG_TEST_ADDR (run in the VM)\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef MW_PROBE_ASAN
	/* a probe of the device, not of librmsg: it leaves its verbs
	 * objects to exit (tearing four connections down in order costs
	 * minutes under TCG), which LeakSanitizer would report */
	__lsan_disable();
#endif
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo(addr, PORT, &hints, &res)) {
		perror("rdma_getaddrinfo");
		return 77;
	}
	memset(&attr, 0, sizeof(attr));
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 16;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.sq_sig_all = 0;
	if (rdma_create_ep(&lid, res, NULL, &attr) || rdma_listen(lid, 8)) {
		perror("listen");
		return 1;
	}
	pthread_create(&th, NULL, server, lid);
	hints.ai_flags = 0;
	if (rdma_getaddrinfo(addr, PORT, &hints, &cres)) {
		perror("rdma_getaddrinfo client");
		return 1;
	}
	for (i = 0; i < NCONN; i++) {
		struct rdma_conn_param cp = {
			.responder_resources = 1,
			.initiator_depth = 1,
			.retry_count = 6,
		};

		/* rdma_create_ep stores the CQs it made in @attr */
		attr.send_cq = attr.recv_cq = NULL;
		if (rdma_create_ep(&cid[i], cres, NULL, &attr)) {
			perror("rdma_create_ep client");
			return 1;
		}
		if (rdma_connect(cid[i], &cp)) {
			perror("rdma_connect");
			return 1;
		}
		lmr[i] = ibv_reg_mr(cid[i]->pd, lbuf[i], sizeof(lbuf[i]),
				    IBV_ACCESS_LOCAL_WRITE);
		if (!lmr[i]) {
			perror("reg client");
			return 1;
		}
	}
	pthread_join(th, NULL);
	printf("connected %d\n", NCONN);

	if (ibv_query_device(sid[0]->verbs, &da) == 0)
		printf("device %s: cap_flags 0x%x MW %d T2A %d T2B %d "
		       "max_mw %d\n",
		       ibv_get_device_name(sid[0]->verbs->device),
		       da.device_cap_flags,
		       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW),
		       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A),
		       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B),
		       da.max_mw);
	for (i = 1; i < NCONN; i++)
		if (sid[i]->pd != sid[0]->pd)
			printf("note: server ids have different PDs\n");

	mr = ibv_reg_mr(sid[0]->pd, sbuf, sizeof(sbuf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mr) {
		printf("reg MW_BIND: %s\n", strerror(errno));
		return 1;
	}
	mw = ibv_alloc_mw(sid[0]->pd, IBV_MW_TYPE_2);
	if (!mw) {
		printf("alloc_mw: %s\n", strerror(errno));
		return 1;
	}
	printf("mw rkey before bind 0x%x, mr rkey 0x%x\n", mw->rkey, mr->rkey);
	st = bind_mw(sid[0], mw, mr, sbuf + 1024, 1024,
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, &rkey);
	expect("1. bind type-2 MW on A's QP", st == 0);
	if (st)
		return 1;
	printf("bound rkey 0x%x\n", rkey);

	memset(lbuf[0], 'A', 64);
	st = rma(cid[0], lmr[0], lbuf[0], 64, (uintptr_t)sbuf + 1024, rkey, 0);
	expect("2a. A writes inside the window",
	       st == IBV_WC_SUCCESS && sbuf[1024] == 'A' && sbuf[1087] == 'A');
	sbuf[1100] = 'S';
	st = rma(cid[0], lmr[0], lbuf[0] + 100, 1, (uintptr_t)sbuf + 1100, rkey,
		 1);
	expect("2b. A reads inside the window",
	       st == IBV_WC_SUCCESS && lbuf[0][100] == 'S');

	/* not an expectation: does the device check the window's range, or
	 * only its registration's? (rxe on 6.1: only the registration's) */
	memset(lbuf[0], 'O', 64);
	st = rma(cid[0], lmr[0], lbuf[0], 64, (uintptr_t)sbuf + 2048, rkey, 0);
	printf("%s: 2c. A writes just past its window, inside the MR: %s\n",
	       st == IBV_WC_SUCCESS ? "note" : "ok",
	       st == IBV_WC_SUCCESS && sbuf[2048] == 'O'
		       ? "ARRIVED (the device checks only the MR's range)"
		       : "refused");
	memset(sbuf + 2048, 0, 64);
	if (st != IBV_WC_SUCCESS) {
		printf("  (A's QP is gone: the dealloc check uses it)\n");
	}

	memset(lbuf[1], 'B', 64);
	st = rma(cid[1], lmr[1], lbuf[1], 64, (uintptr_t)sbuf + 1024, rkey, 0);
	expect("3. B writes with A's rkey: refused",
	       st != IBV_WC_SUCCESS && sbuf[1024] == 'A');

	memset(lbuf[3], 'D', 64);
	st = rma(cid[3], lmr[3], lbuf[3], 64, (uintptr_t)sbuf, mr->rkey, 0);
	expect("4. D writes with the MR's own rkey: refused",
	       st != IBV_WC_SUCCESS && sbuf[0] == 0);

	t0 = now_us();
	for (i = 0; i < CYCLES; i++) {
		mwc = ibv_alloc_mw(sid[2]->pd, IBV_MW_TYPE_2);
		if (!mwc || bind_mw(sid[2], mwc, mr, sbuf + 2048, 1024,
				    IBV_ACCESS_REMOTE_WRITE, &rkeyc)) {
			printf("cycle %d failed\n", i);
			failures++;
			break;
		}
		ibv_dealloc_mw(mwc);
	}
	t1 = now_us();
	printf("figure: alloc+bind+dealloc of a type-2 MW: %.1f us each "
	       "(%d cycles)\n",
	       (t1 - t0) / CYCLES, CYCLES);
	t0 = now_us();
	mwc = ibv_alloc_mw(sid[2]->pd, IBV_MW_TYPE_2);
	for (i = 0; mwc && i < CYCLES; i++) {
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;

		if (bind_mw(sid[2], mwc, mr, sbuf + 2048, 1024,
			    IBV_ACCESS_REMOTE_WRITE, &rkeyc))
			break;
		/* LOCAL_INV makes the window free for the next bind */
		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.invalidate_rkey = rkeyc;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (ibv_post_send(sid[2]->qp, &wr, &bad) ||
		    wait_send(sid[2], &wc) || wc.status != IBV_WC_SUCCESS) {
			printf("local_inv failed at %d\n", i);
			break;
		}
	}
	t1 = now_us();
	printf("figure: bind+local_inv of one type-2 MW: %.1f us each "
	       "(%d cycles)\n",
	       i ? (t1 - t0) / i : 0.0, i);
	if (mwc)
		ibv_dealloc_mw(mwc);
	mwc = ibv_alloc_mw(sid[2]->pd, IBV_MW_TYPE_2);
	st = mwc ? bind_mw(sid[2], mwc, mr, sbuf + 2048, 1024,
			   IBV_ACCESS_REMOTE_WRITE, &rkeyc)
		 : -1;
	expect("5a. bind on C", st == 0);
	memset(lbuf[2], 'C', 64);
	st = rma(cid[2], lmr[2], lbuf[2], 64, (uintptr_t)sbuf + 2048, rkeyc, 1);
	expect("5b. C reads its write-only window: refused",
	       st != IBV_WC_SUCCESS);

	ibv_dealloc_mw(mw);
	memset(lbuf[0], 'a', 64);
	st = rma(cid[0], lmr[0], lbuf[0], 64, (uintptr_t)sbuf + 1024, rkey, 0);
	expect("6. A writes after dealloc: refused",
	       st != IBV_WC_SUCCESS && sbuf[1024] == 'A');

	printf("mw_probe: %s (%d failures)\n", failures ? "FAIL" : "PASS",
	       failures);
	return failures ? 1 : 0;
}
