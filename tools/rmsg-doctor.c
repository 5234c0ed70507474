// SPDX-License-Identifier: MIT
/*
 * rmsg-doctor - checks whether this machine can run librmsg over RDMA, and
 * says what to fix when it cannot. See rmsg-doctor(1).
 *
 *   rmsg-doctor [-c CONNS] [--json] [ADDRESS]
 *   rmsg-doctor -h | --help | --version
 *
 * Checks, in order: the kernel's RDMA stack (/dev/infiniband, modules),
 * the devices libibverbs sees and their ports (state, MTU, link layer),
 * the GIDs of each port and their RoCE versions, the software devices
 * (rxe, siw), the memlock limit against what a context registers, and,
 * given ADDRESS, whether rdma_cm resolves an address and a route to it.
 * --json prints one JSON object instead of the text (see rmsg-doctor(1)).
 * Exit status: 0 if RDMA is usable, 1 if not, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rmsg.h>

#define SYS_IB "/sys/class/infiniband"
#define KIB ((unsigned long long)1 << 10)
#define MIB ((unsigned long long)1 << 20)
#define RESOLVE_MS 2000

static void conn_limits(const struct ibv_device_attr *da);
static int problems, warnings, usable_ports;
/* a copy: @what is often built in the caller's buffer */
static char first_problem[256];

/*
 * Output: text lines on stdout, or with --json the checks and the info
 * lines gathered here and printed as one object at the end.
 */
static int json;
static FILE *jchecks, *jinfo;
static char *jchecks_buf, *jinfo_buf;
static size_t jchecks_len, jinfo_len;
static int nchecks, ninfo;

/* @s as a JSON string: quotes, backslashes and control characters
 * escaped; other bytes (UTF-8) as they are */
static void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	putc('"', f);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			putc(*p, f);
	}
	putc('"', f);
}

static char *vformat(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0) {
		fprintf(stderr, "rmsg-doctor: out of memory\n");
		exit(1);
	}
	return s;
}

/* one check for --json: name, status, detail, and a cause and a fix for
 * a warning or a problem */
static void json_check(const char *name, const char *status, const char *detail,
		       const char *cause, const char *fix)
{
	fprintf(jchecks, "%s\n    {\"name\": ", nchecks++ ? "," : "");
	json_str(jchecks, name);
	fputs(", \"status\": ", jchecks);
	json_str(jchecks, status);
	fputs(", \"detail\": ", jchecks);
	json_str(jchecks, detail);
	if (cause) {
		fputs(", \"cause\": ", jchecks);
		json_str(jchecks, cause);
	}
	if (fix) {
		fputs(", \"fix\": ", jchecks);
		json_str(jchecks, fix);
	}
	putc('}', jchecks);
}

/* a check that passed; @name says which (kernel, devices, memlock, ...) */
static void ok(const char *name, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vformat(fmt, ap);
	va_end(ap);
	if (json)
		json_check(name, "ok", s, NULL, NULL);
	else
		printf("ok:   %s\n", s);
	free(s);
}

/* a fact shown under the checks: a device, a port, a GID, ... */
static void info(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vformat(fmt, ap);
	va_end(ap);
	if (json) {
		fprintf(jinfo, "%s\n    ", ninfo++ ? "," : "");
		json_str(jinfo, s);
	} else {
		printf("      %s\n", s);
	}
	free(s);
}

/* a problem (@fatal) or a warning: what, its cause and its fix; @what is
 * kept for the verdict */
static void problem(const char *name, int fatal, const char *what,
		    const char *cause, const char *fix, ...)
{
	char *f = NULL;
	va_list ap;

	if (fatal) {
		problems++;
		if (!first_problem[0])
			snprintf(first_problem, sizeof(first_problem), "%s",
				 what);
	} else {
		warnings++;
	}
	if (fix) {
		va_start(ap, fix);
		f = vformat(fix, ap);
		va_end(ap);
	}
	if (json) {
		json_check(name, fatal ? "fail" : "warn", what, cause, f);
	} else {
		printf("%s %s\n", fatal ? "FAIL:" : "warn:", what);
		if (cause)
			printf("      cause: %s\n", cause);
		if (f)
			printf("      fix:   %s\n", f);
	}
	free(f);
}

/* reads the first line of a file into @buf; -1 if it cannot */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	char *nl;

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	return 0;
}

static int exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static void size_str(unsigned long long b, char *buf, size_t len)
{
	if (b >= MIB && b % (MIB / 4) == 0)
		snprintf(buf, len, "%.2f MiB", (double)b / MIB);
	else if (b >= MIB)
		snprintf(buf, len, "%.1f MiB", (double)b / MIB);
	else
		snprintf(buf, len, "%llu KiB", b / KIB);
}

/* ------------------------------------------------------------------ */
/* kernel stack                                                         */

/* the module of a software device, if this kernel has it at all */
static int module_available(const char *name)
{
	char path[512];
	struct utsname u;
	static const char *const dirs[] = {"drivers/infiniband/sw/rxe",
					   "drivers/infiniband/sw/siw"};
	static const char *const exts[] = {".ko", ".ko.xz", ".ko.zst",
					   ".ko.gz"};
	size_t d, e;

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	if (exists(path))
		return 1;
	if (uname(&u))
		return 0;
	for (d = 0; d < 2; d++)
		for (e = 0; e < 4; e++) {
			snprintf(path, sizeof(path),
				 "/lib/modules/%s/kernel/%s/%s%s", u.release,
				 dirs[d], name, exts[e]);
			if (exists(path))
				return 1;
		}
	return 0;
}

static int check_kernel(void)
{
	int ucm = exists("/dev/infiniband/rdma_cm");

	if (!exists("/dev/infiniband")) {
		problem("kernel", 1,
			"no RDMA device: /dev/infiniband does not exist",
			"the kernel's RDMA stack is not loaded: no RDMA "
			"hardware driver, and no Soft-RoCE (rdma_rxe) or "
			"Soft-iWARP (siw) device",
			"%s",
			module_available("rdma_rxe")
				? "for a software device: 'modprobe rdma_rxe; "
				  "rdma link add rxe0 type rxe netdev IFACE' "
				  "(IFACE: a network interface with an IP "
				  "address); for hardware, load its driver "
				  "(mlx5_ib, irdma, bnxt_re, ...)"
				: "this kernel has no rdma_rxe module either: "
				  "use RDMA hardware, or a kernel with "
				  "CONFIG_RDMA_RXE (Debian's linux-image has "
				  "it); librmsg still works over tcp:// and "
				  "shm://, and auto:// uses shared memory to a "
				  "peer on this host and TCP to others");
		return -1;
	}
	if (!ucm)
		problem("kernel", 1, "/dev/infiniband/rdma_cm is missing",
			"the rdma_ucm module is not loaded, so librdmacm "
			"cannot set connections up",
			"modprobe rdma_ucm");
	else if (access("/dev/infiniband/rdma_cm", R_OK | W_OK))
		problem("kernel", 1, "no access to /dev/infiniband/rdma_cm",
			"its permissions do not let this user open it",
			"run as a user the rdma udev rules allow (often the "
			"'rdma' group), or check /dev/infiniband permissions");
	else
		ok("kernel",
		   "kernel RDMA stack: /dev/infiniband/rdma_cm present");
	return 0;
}

/* ------------------------------------------------------------------ */
/* devices, ports, GIDs                                                 */

static const char *mtu_str(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256:
		return "256";
	case IBV_MTU_512:
		return "512";
	case IBV_MTU_1024:
		return "1024";
	case IBV_MTU_2048:
		return "2048";
	case IBV_MTU_4096:
		return "4096";
	}
	return "?";
}

/* the kernel driver of a device: a PCI driver's name, or the software
 * device's module recognised by name or by its sysfs attributes */
static void driver_of(const char *dev, char *buf, size_t len)
{
	char path[512], link[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), SYS_IB "/%s/device/driver", dev);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		const char *base = strrchr(link, '/');

		base = base ? base + 1 : link;
		if (strlen(base) >= len)
			base = "?";
		memcpy(buf, base, strlen(base) + 1);
		return;
	}
	if (!strncmp(dev, "rxe", 3))
		snprintf(buf, len, "rdma_rxe (Soft-RoCE)");
	else if (!strncmp(dev, "siw", 3))
		snprintf(buf, len, "siw (Soft-iWARP)");
	else
		snprintf(buf, len, "unknown");
}

/* GIDs of a port from sysfs: index, GID, type (IB/RoCE v1, RoCE v2),
 * network device; returns how many RoCE v2 GIDs carry an IP address */
static int list_gids(const char *dev, int port, int eth)
{
	int i, v2_ip = 0, shown = 0;

	for (i = 0; i < 256; i++) {
		char path[512], gid[64], type[32] = "", ndev[64] = "";
		struct in6_addr a;
		char ip[INET6_ADDRSTRLEN] = "";

		snprintf(path, sizeof(path), SYS_IB "/%s/ports/%d/gids/%d", dev,
			 port, i);
		if (read_line(path, gid, sizeof(gid)))
			break;
		if (inet_pton(AF_INET6, gid, &a) != 1 ||
		    IN6_IS_ADDR_UNSPECIFIED(&a))
			continue;
		snprintf(path, sizeof(path),
			 SYS_IB "/%s/ports/%d/gid_attrs/types/%d", dev, port,
			 i);
		read_line(path, type, sizeof(type));
		snprintf(path, sizeof(path),
			 SYS_IB "/%s/ports/%d/gid_attrs/ndevs/%d", dev, port,
			 i);
		read_line(path, ndev, sizeof(ndev));
		if (IN6_IS_ADDR_V4MAPPED(&a))
			inet_ntop(AF_INET, &a.s6_addr[12], ip, sizeof(ip));
		else if (!IN6_IS_ADDR_LINKLOCAL(&a))
			inet_ntop(AF_INET6, &a, ip, sizeof(ip));
		info("gid %d: %s  %s%s%s%s%s", i, gid, *type ? type : "?",
		     *ndev ? "  netdev " : "", ndev, *ip ? "  ip " : "", ip);
		shown++;
		if (strstr(type, "v2") && *ip)
			v2_ip++;
	}
	if (!shown)
		info("no GIDs in %s/%s/ports/%d/gids", SYS_IB, dev, port);
	if (eth && !v2_ip)
		problem("gids", 0, "no RoCE v2 GID with an IP address",
			"the port's network interface has no IP address (or "
			"only RoCE v1 GIDs): rdma_cm resolves IP addresses "
			"to GIDs, so connections to or from this port fail",
			"give the interface an address: 'ip addr add "
			"ADDR/PREFIX dev %s' and 'ip link set %s up'",
			"IFACE", "IFACE");
	return v2_ip;
}

static void check_port(struct ibv_context *vc, const char *dev, int port)
{
	struct ibv_port_attr pa;
	int eth, ret;

	ret = ibv_query_port(vc, (uint8_t)port, &pa);
	if (ret) {
		problem("ports", 1, "ibv_query_port failed", strerror(ret),
			NULL);
		return;
	}
	eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	info("port %d: %s, MTU %s (max %s), link layer %s", port,
	     ibv_port_state_str(pa.state), mtu_str(pa.active_mtu),
	     mtu_str(pa.max_mtu),
	     eth					  ? "Ethernet (RoCE)"
	     : pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
							  : "unspecified");
	if (pa.state != IBV_PORT_ACTIVE) {
		char what[128];

		snprintf(what, sizeof(what), "%s port %d is %s", dev, port,
			 ibv_port_state_str(pa.state));
		problem("ports", 0, what,
			eth ? "its network interface is down or has no "
			      "carrier"
			    : "no link, or no subnet manager has brought the "
			      "port up",
			"%s",
			eth ? "'ip link set IFACE up' on the interface the "
			      "device sits on ('rdma link' shows it)"
			    : "check the cable and that a subnet manager "
			      "(opensm) runs on the fabric");
	} else {
		usable_ports++;
	}
	if (eth && pa.active_mtu < IBV_MTU_4096 && pa.state == IBV_PORT_ACTIVE)
		info("(RoCE MTU follows the interface MTU: raise it, e.g. "
		     "'ip link set IFACE mtu 9000', for 4096)");
	list_gids(dev, port, eth);
}

static void check_devices(void)
{
	struct ibv_device **list;
	int n = 0, i, soft = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		const char *why =
			list ? "the kernel has RDMA support, but no device is "
			       "registered, or libibverbs lacks the provider "
			       "library for it"
			     : "libibverbs found no RDMA support in the kernel";

		problem("devices", 1, "no RDMA device", why,
			"load the hardware driver, or create a Soft-RoCE "
			"device: 'modprobe rdma_rxe; rdma link add rxe0 type "
			"rxe netdev IFACE'; install ibverbs-providers for "
			"the provider libraries");
		if (list)
			ibv_free_device_list(list);
		return;
	}
	ok("devices", "%d RDMA device%s", n, n > 1 ? "s" : "");
	for (i = 0; i < n; i++) {
		const char *dev = ibv_get_device_name(list[i]);
		struct ibv_device_attr da;
		struct ibv_context *vc;
		char drv[128];
		int p;

		driver_of(dev, drv, sizeof(drv));
		info("%s: driver %s, node type %s, transport %s", dev, drv,
		     ibv_node_type_str(list[i]->node_type),
		     list[i]->transport_type == IBV_TRANSPORT_IWARP ? "iWARP"
		     : list[i]->transport_type == IBV_TRANSPORT_IB  ? "IB/RoCE"
								    : "other");
		if (strstr(drv, "rxe") || strstr(drv, "siw"))
			soft++;
		if (list[i]->transport_type == IBV_TRANSPORT_IWARP)
			problem("devices", 0, "iWARP device",
				"librmsg is tested on RoCE and InfiniBand; "
				"iWARP lacks RDMA WRITE with immediate, which "
				"rmsg_write_imm() uses",
				"prefer a RoCE or InfiniBand device, or "
				"Soft-RoCE (rdma_rxe) for tests");
		vc = ibv_open_device(list[i]);
		if (!vc) {
			problem("devices", 1, "cannot open the device",
				strerror(errno),
				"check the permissions of /dev/infiniband/"
				"uverbs*");
			continue;
		}
		if (ibv_query_device(vc, &da) == 0) {
			info("max QPs %d, max SRQ WRs %d, max MR size %llu, "
			     "ports %d",
			     da.max_qp, da.max_srq_wr,
			     (unsigned long long)da.max_mr_size,
			     da.phys_port_cnt);
			if (da.max_srq == 0)
				problem("devices", 1,
					"the device has no shared receive "
					"queues",
					"librmsg posts receives to shared "
					"receive queues (receive groups of a "
					"CQ and an SRQ each)",
					"use another device");
			else
				conn_limits(&da);
			for (p = 1; p <= da.phys_port_cnt; p++)
				check_port(vc, dev, p);
		} else {
			problem("devices", 1, "ibv_query_device failed",
				strerror(errno), NULL);
		}
		ibv_close_device(vc);
	}
	ibv_free_device_list(list);
	if (!usable_ports)
		problem("ports", 1, "no RDMA port is ACTIVE",
			"see the port problems above", "as above");
	info("software devices: %s; Soft-RoCE module rdma_rxe %s, "
	     "Soft-iWARP module siw %s",
	     soft ? "yes" : "none",
	     exists("/sys/module/rdma_rxe") ? "loaded" : "not loaded",
	     exists("/sys/module/siw") ? "loaded" : "not loaded");
}

/* ------------------------------------------------------------------ */
/* memlock                                                              */

/* CAP_IPC_LOCK lifts the memlock limit for registrations */
static int has_ipc_lock(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long caps = 0;

	if (!f)
		return geteuid() == 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return (caps >> 14) & 1; /* CAP_IPC_LOCK */
}

static unsigned long long pow2_at_least(unsigned long long v)
{
	unsigned long long p = 64;

	while (p < v)
		p <<= 1;
	return p;
}

/* the registered memory of a size class's slab (src/pool.c: power-of-two
 * classes of 64 B to 2 MiB, slabs of 4 buffers and at least 256 KiB;
 * larger buffers get a page-rounded slab of their own) */
static unsigned long long slab_bytes(unsigned long long len,
				     unsigned long long *per_slab)
{
	unsigned long long cls = pow2_at_least(len);

	if (cls > 2 * MIB) {
		*per_slab = 1;
		return (len + 4095) / 4096 * 4096;
	}
	*per_slab = (4 * cls > 256 * KIB ? 4 * cls : 256 * KIB) / cls;
	return *per_slab * cls;
}

/*
 * The connections one context takes on this device at the default
 * initial credits, and the device limits that set it: the library puts
 * each QP on a receive group (a CQ and an SRQ) with room; a group's SRQ
 * holds min(max_srq_wr, 4095) receives (32 of them spare) and its CQ
 * that plus 128 entries per QP (a failing QP flushes its send queue) for
 * 96 QPs, within max_cqe; there are at most min(max_cq, max_srq) groups,
 * and max_qp QPs. (src/transport/rdma/rdma.h: RXQ_SRQ_WR, RXQ_CONNS,
 * RX_SPARE, SQ_DEPTH.)
 */
static void conn_limits(const struct ibv_device_attr *da)
{
	unsigned long long srq, cqe, per_cq, per_srq, per, groups, total;
	unsigned initial = 4, credits = 32;
	struct rmsg_cfg *cfg;

	if (rmsg_cfg_create(&cfg) == 0) {
		rmsg_cfg_get_credits_initial(cfg, &initial);
		rmsg_cfg_get_credits(cfg, &credits);
		rmsg_cfg_destroy(cfg);
	}
	if (initial > credits)
		initial = credits;
	srq = da->max_srq_wr < 4095 ? (unsigned long long)da->max_srq_wr : 4095;
	cqe = srq + 96 * 128;
	if ((unsigned long long)da->max_cqe < cqe)
		cqe = (unsigned long long)da->max_cqe;
	per_cq = cqe > srq ? (cqe - srq) / 128 : 0;
	per_srq = srq > 32 ? (srq - 32) / initial : 0;
	per = per_cq < per_srq ? per_cq : per_srq;
	groups = (unsigned long long)(da->max_cq < da->max_srq ? da->max_cq
							       : da->max_srq);
	total = per * groups;
	if (da->max_qp > 0 && total > (unsigned long long)da->max_qp)
		total = (unsigned long long)da->max_qp;
	info("connections per context: about %llu at %u initial credits "
	     "(receive groups of %llu: SRQ %llu of max_srq_wr %d, CQ %llu "
	     "of max_cqe %d; at most %llu groups: max_cq %d, max_srq %d; "
	     "max_qp %d)",
	     total, initial, per, srq, da->max_srq_wr, cqe, da->max_cqe, groups,
	     da->max_cq, da->max_srq, da->max_qp);
}

/*
 * What a context registers for @conns RDMA connections with the default
 * configuration: receive buffers (credits per connection, each the eager
 * size plus a 32-byte header, rounded to 64 B, carved as many at a time
 * as fill the pool class that 64 would take)
 * and send headers (128 slots of 64 B per connection).
 */
static unsigned long long memlock_need(unsigned conns, size_t *eager_p,
				       unsigned *credits_p)
{
	unsigned long long stride, chunk, slab, per, nchunks, need, hslab;
	unsigned long long bufs;
	struct rmsg_cfg *cfg;
	size_t eager = 8192;
	unsigned credits = 32;

	if (rmsg_cfg_create(&cfg) == 0) {
		rmsg_cfg_get_eager_size(cfg, &eager);
		rmsg_cfg_get_credits(cfg, &credits);
		rmsg_cfg_destroy(cfg);
	}
	*eager_p = eager;
	*credits_p = credits;
	stride = (eager + 32 + 63) / 64 * 64;
	chunk = 64 * stride;
	slab = slab_bytes(chunk, &per);
	/* as many buffers as fill the size class 64 would take (the
	 * library's rx_chunk_count) */
	bufs = chunk <= 2 * MIB ? slab / per / stride : 64;
	nchunks = ((unsigned long long)conns * credits + bufs - 1) / bufs;
	need = (nchunks + per - 1) / per * slab;
	hslab = slab_bytes(128 * 64, &per);
	need += (conns + per - 1) / per * hslab;
	return need;
}

static void check_memlock(unsigned conns)
{
	unsigned long long need, rdv, lim;
	char a[32], b[32], c[32];
	struct rlimit rl;
	unsigned credits;
	size_t eager;

	need = memlock_need(conns, &eager, &credits);
	/* a 1 MiB message received by rendezvous lands in a 4 MiB slab */
	rdv = 4 * MIB;
	size_str(need, a, sizeof(a));
	size_str(need + rdv, c, sizeof(c));
	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		problem("memlock", 0, "cannot read the memlock limit",
			strerror(errno), NULL);
		return;
	}
	lim = rl.rlim_cur;
	if (lim == RLIM_INFINITY || has_ipc_lock()) {
		ok("memlock", "memlock: %s",
		   lim == RLIM_INFINITY ? "unlimited"
					: "limit lifted by CAP_IPC_LOCK");
		info("a context with %u connections registers about %s "
		     "(%u credits x (%zu-byte eager size + 32), a pool class "
		     "at a "
		     "time; send headers)",
		     conns, a, credits, eager);
		return;
	}
	size_str(lim, b, sizeof(b));
	if (lim < need) {
		problem("memlock", 1, "memlock limit too low",
			"librmsg registers (pins) its receive buffers: a "
			"context with the default configuration and this "
			"many connections needs about this much; "
			"registrations beyond the limit fail with -ENOMEM",
			"'ulimit -l unlimited' in the shell (as root), "
			"'* - memlock unlimited' in "
			"/etc/security/limits.conf, or LimitMEMLOCK=infinity "
			"for a systemd service; or fewer credits "
			"(rmsg_cfg_set_credits) or a smaller eager size");
		info("limit %s, need about %s for %u connections", b, a, conns);
	} else if (lim < need + rdv) {
		problem("memlock", 0, "memlock limit leaves little room",
			"receiving messages longer than the eager size, and "
			"rmsg_mr_reg() regions, register more memory on top",
			"'ulimit -l unlimited', or memlock in "
			"/etc/security/limits.conf");
		info("limit %s, about %s for %u connections, %s with one "
		     "1 MiB message in flight",
		     b, a, conns, c);
	} else {
		ok("memlock",
		   "memlock: limit %s, need about %s for %u connections "
		   "(%u credits x (%zu-byte eager size + 32) each)",
		   b, a, conns, credits, eager);
	}
}

/* ------------------------------------------------------------------ */
/* address and route                                                    */

/* waits for the next rdma_cm event; 0 and its type, or -1 on timeout */
static int cm_wait(struct rdma_event_channel *ch, int ms,
		   enum rdma_cm_event_type *type, int *status)
{
	struct pollfd pfd = {ch->fd, POLLIN, 0};
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, ms) <= 0)
		return -1;
	if (rdma_get_cm_event(ch, &ev))
		return -1;
	*type = ev->event;
	*status = ev->status;
	rdma_ack_cm_event(ev);
	return 0;
}

/* "host", "host:port", "[v6]:port" or "scheme://host:port" */
static int parse_addr(const char *arg, struct sockaddr_storage *ss)
{
	struct addrinfo hints = {0}, *res;
	char host[256], *p;

	p = strstr(arg, "://");
	snprintf(host, sizeof(host), "%s", p ? p + 3 : arg);
	if (host[0] == '[') {
		p = strchr(host, ']');
		if (p)
			*p = '\0';
		memmove(host, host + 1, strlen(host));
	} else if ((p = strchr(host, ':')) && !strchr(p + 1, ':')) {
		*p = '\0'; /* host:port; a bare IPv6 address has more */
	}
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res))
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static void check_route(const char *arg)
{
	enum rdma_cm_event_type type;
	struct rdma_event_channel *ch;
	struct sockaddr_storage dst;
	struct rdma_cm_id *id;
	char what[300];
	int status;

	if (parse_addr(arg, &dst)) {
		snprintf(what, sizeof(what),
			 "%s: not an address or a known "
			 "host name",
			 arg);
		problem("address", 1, what, NULL,
			"give an IP address or a resolvable "
			"name");
		return;
	}
	ch = rdma_create_event_channel();
	if (!ch) {
		problem("address", 1, "rdma_cm is not available",
			"rdma_create_event_channel failed: no "
			"/dev/infiniband/rdma_cm",
			"see the problems above");
		return;
	}
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		problem("address", 1, "rdma_create_id failed", strerror(errno),
			NULL);
		rdma_destroy_event_channel(ch);
		return;
	}
	snprintf(what, sizeof(what), "no RDMA address resolution to %s", arg);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, RESOLVE_MS)) {
		problem("address", 1, what, strerror(errno),
			"the address must be reached through a network "
			"interface that has an RDMA device (a RoCE netdev or "
			"IPoIB); check 'ip route get ADDR' and 'rdma link'");
		goto out;
	}
	if (cm_wait(ch, RESOLVE_MS + 1000, &type, &status) ||
	    type != RDMA_CM_EVENT_ADDR_RESOLVED) {
		problem("address", 1, what,
			"rdma_cm could not map the address to a local RDMA "
			"device and port (no route through an RDMA-capable "
			"interface, or the neighbour did not answer)",
			"reach the peer through the interface of an RDMA "
			"device: 'ip route get ADDR' must name a netdev that "
			"'rdma link' lists; on RoCE the peer must answer ARP "
			"or neighbour discovery");
		goto out;
	}
	ok("address", "address %s resolved: device %s, port %u", arg,
	   id->verbs ? ibv_get_device_name(id->verbs->device) : "?",
	   id->port_num);
	snprintf(what, sizeof(what), "no RDMA route to %s", arg);
	if (rdma_resolve_route(id, RESOLVE_MS)) {
		problem("route", 1, what,
			errno == ENODEV
				? "the address maps to no RDMA port that can "
				  "reach it (a loopback or local-only address, "
				  "or an interface without an RDMA device)"
				: strerror(errno),
			"use the IP address of an interface that 'rdma link' "
			"lists (not 127.0.0.1), and check 'ip route get "
			"ADDR'");
		goto out;
	}
	if (cm_wait(ch, RESOLVE_MS + 1000, &type, &status) ||
	    type != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		problem("route", 1, what,
			"rdma_cm resolved the address but no path to it "
			"(InfiniBand: no subnet manager answered the path "
			"query; RoCE: no usable GID for the route)",
			"check that the port is ACTIVE, has a RoCE v2 GID with "
			"an IP address, and (InfiniBand) that opensm runs");
		goto out;
	}
	ok("route", "route to %s resolved", arg);
out:
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

#define USAGE                                                \
	"usage: rmsg-doctor [-c CONNS] [--json] [ADDRESS]\n" \
	"       rmsg-doctor -h | --help | --version\n"

static void help(void)
{
	fputs(USAGE
	      "Checks whether librmsg can use RDMA on this machine, and what "
	      "to fix if not.\n"
	      "  -c, --conns CONNS  estimate the registered memory of CONNS "
	      "connections (8)\n"
	      "      --json         print one JSON object instead of text\n"
	      "  -h, --help         print this help and exit\n"
	      "      --version      print the tool's and librmsg's version "
	      "and exit\n"
	      "ADDRESS: an IP address or host name (or host:port, a librmsg "
	      "URI): check that\n"
	      "rdma_cm resolves an address and a route to it.\n"
	      "Exit status: 0 RDMA is usable, 1 it is not, 2 usage error.\n",
	      stdout);
}

static int usage_error(void)
{
	fputs(USAGE "Try 'rmsg-doctor --help' for more.\n", stderr);
	return 2;
}

/* --json: the object; the exit status does not depend on it */
static void print_json(const char *address, const char *version)
{
	fclose(jchecks);
	fclose(jinfo);
	fputs("{\n  \"tool\": \"rmsg-doctor\",\n  \"librmsg_version\": ",
	      stdout);
	json_str(stdout, version);
	fputs(",\n  \"address\": ", stdout);
	if (address)
		json_str(stdout, address);
	else
		fputs("null", stdout);
	printf(",\n  \"checks\": [%s\n  ],\n  \"info\": [%s\n  ],\n",
	       jchecks_buf, jinfo_buf);
	printf("  \"usable\": %s,\n  \"verdict\": ",
	       problems ? "false" : "true");
	if (problems) {
		char *v;

		if (asprintf(&v, "RDMA is not usable: %s", first_problem) < 0)
			exit(1);
		json_str(stdout, v);
		free(v);
	} else {
		json_str(stdout, "RDMA is usable");
	}
	printf(",\n  \"problems\": %d,\n  \"warnings\": %d\n}\n", problems,
	       warnings);
	free(jchecks_buf);
	free(jinfo_buf);
}

int main(int argc, char **argv)
{
	enum {
		OPT_JSON = 256,
		OPT_VERSION
	};
	static const struct option longopts[] = {
		{"conns", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"json", no_argument, NULL, OPT_JSON},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0},
	};
	const char *version, *address;
	unsigned conns = 8;
	int opt;

	version = rmsg_version(NULL, NULL, NULL);
	while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conns = (unsigned)atoi(optarg);
			if (conns < 1 || conns > 1000000)
				return usage_error();
			break;
		case 'h':
			help();
			return 0;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_VERSION:
			printf("rmsg-doctor (librmsg) %s\n", version);
			return 0;
		default:
			return usage_error();
		}
	}
	if (argc - optind > 1)
		return usage_error();
	address = optind < argc ? argv[optind] : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (json) {
		jchecks = open_memstream(&jchecks_buf, &jchecks_len);
		jinfo = open_memstream(&jinfo_buf, &jinfo_len);
		if (!jchecks || !jinfo) {
			fprintf(stderr, "rmsg-doctor: out of memory\n");
			return 1;
		}
	}

	if (check_kernel() == 0)
		check_devices();
	check_memlock(conns);
	if (address) {
		if (!problems)
			check_route(address);
		else
			info("route to %s: not checked (RDMA is not usable)",
			     address);
	}
	if (json) {
		print_json(address, version);
		return problems ? 1 : 0;
	}
	if (problems) {
		printf("RDMA is not usable: %s (%d problem%s, %d warning%s)\n",
		       first_problem, problems, problems > 1 ? "s" : "",
		       warnings, warnings == 1 ? "" : "s");
		printf("librmsg still works over tcp://\n");
		return 1;
	}
	printf("RDMA is usable (%d warning%s)\n", warnings,
	       warnings == 1 ? "" : "s");
	return 0;
}
