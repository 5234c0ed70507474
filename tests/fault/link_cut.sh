#!/bin/sh
# SPDX-License-Identifier: MIT
#
# link_cut.sh - runs tests/fault/link_cut over TCP and over RDMA across a
# link that is then cut with 100% netem loss. Needs root and a kernel
# with veth, sch_netem and rdma_rxe: it runs in the test VM (RMSG_VM=1,
# 'make check-rxe'); elsewhere it skips.
#
# The two hosts are the ends of a veth pair, vA (198.18.1.1) and vB
# (198.18.1.2), with an rxe device on each. Both addresses are local, so
# the kernel would deliver between them through lo; policy routing sends
# what goes from B to A out of vB (and the reverse out of vA), and the
# local table is looked at after those rules. The client binds B
# ("?src="): that also picks vB's rxe device. See ../shared notes in
# tests/vm/README.md.
A=198.18.1.1
B=198.18.1.2
builddir=${BUILDDIR:-$(pwd)}
prog=$builddir/tests/fault/link_cut

if [ "${RMSG_VM:-}" != 1 ]; then
	echo "SKIP: link_cut changes routing and needs veth + netem + rxe:" \
	     "it runs in the test VM (make check-rxe)"
	exit 77
fi
[ -x "$prog" ] || { echo "no $prog"; exit 99; }

die() { echo "link_cut.sh: $*" >&2; exit 99; }

if ! ip link show vA > /dev/null 2>&1; then
	ip link add vA type veth peer name vB || die "no veth"
	ip addr add $A/24 dev vA && ip addr add $B/24 dev vB || die "addr"
	for i in all default vA vB; do
		echo 1 > /proc/sys/net/ipv4/conf/$i/accept_local &&
		echo 0 > /proc/sys/net/ipv4/conf/$i/rp_filter || die "sysctl"
	done
	ip link set vA up && ip link set vB up || die "link up"
	ip route add $A dev vB src $B table 101 &&
	ip route add $B dev vA src $A table 102 &&
	ip rule add pref 10 iif lo from $B to $A lookup 101 &&
	ip rule add pref 11 iif lo from $A to $B lookup 102 &&
	ip rule add pref 100 lookup local &&
	ip rule del pref 0 lookup local || die "policy routing"
	rdma link add rxeA type rxe netdev vA &&
	rdma link add rxeB type rxe netdev vB || die "rxe on veth"
fi

# both directions: each end's egress drops everything
export LINK_A=$A LINK_B=$B LINK_SILENT=198.18.1.77
export LINK_CUT="tc qdisc add dev vB root netem loss 100% &&
	tc qdisc add dev vA root netem loss 100%"
export LINK_HEAL="tc qdisc del dev vB root && tc qdisc del dev vA root"

rc=0
for tr in tcp rdma; do
	echo "== $tr"
	RMSG_TEST_TRANSPORT=$tr "$prog" || rc=$?
	# a failed run may leave the link cut
	tc qdisc del dev vB root 2> /dev/null
	tc qdisc del dev vA root 2> /dev/null
	[ $rc = 0 ] || break
done
# resumable NAME [VAR=VALUE...]: tests/fault/link_resume over RDMA (or
# rdma+tcp://, LINK_FAILOVER) with the environment given; the link healed
# after it
resumable() {
	[ $rc = 0 ] || return 0
	echo "== $1"
	shift
	env "$@" RMSG_TEST_TRANSPORT=rdma "$builddir/tests/fault/link_resume" ||
		rc=$?
	tc qdisc del dev vB root 2> /dev/null
	tc qdisc del dev vA root 2> /dev/null
}
# a resumable connection across the same cut (tests/fault/link_resume.c),
# over RDMA: suspended, resumed on a new QP, exports bound again (TCP runs
# on the host, tests/fault/link_resume.sh)
resumable "rdma, resumable"
# rdma+tcp://, resumable, and then RoCE's packets (UDP port 4791) dropped
# for good while TCP still passes: the connection resumes over TCP
drop_roce="tc qdisc add dev vB root handle 1: prio &&
	tc qdisc add dev vA root handle 1: prio"
for d in vB vA; do
	drop_roce="$drop_roce && tc filter add dev $d parent 1: protocol ip
		prio 1 u32 match ip protocol 17 0xff match ip dport 4791 0xffff
		action drop"
done
drop_roce=$(echo "$drop_roce" | tr -s '\n\t' '  ')
resumable "rdma+tcp://, resumable, RDMA cut for good" \
	LINK_FAILOVER=1 LINK_CUT="$drop_roce"
# and then RoCE's packets pass again: the client's background probes
# must move the connection back to RDMA by themselves (start.c)
resumable "rdma+tcp://, resumable, RDMA cut, then back" \
	LINK_FAILOVER=2 LINK_CUT="$drop_roce" \
	LINK_WHAT="rdma+tcp://, RoCE's packets dropped, then passed again"
# the client's rxe device removed mid-stream (resumes over TCP), then
# added back (returns to RDMA); then the same with the server's (its
# listener listens again once the device is back). rxe cannot take a
# device from a process that holds it: the delete waits until the
# library let go of it (transport/rdma/dev.c), so both commands run in
# the background, the add retrying until the old device is gone
for side in "client rxeB vB" "server rxeA vA"; do
	set -- $side
	add="rdma link add $2 type rxe netdev $3 2> /dev/null"
	resumable "rdma+tcp://, resumable, the $1's rxe device removed, then back" \
		LINK_FAILOVER=2 LINK_CUT="rdma link delete $2 &" \
		LINK_HEAL="(i=0; while [ \$i -lt 300 ] && ! $add;
			do i=\$((i + 1)); sleep 0.1; done) &" \
		LINK_WHAT="rdma+tcp://, the $1's rxe device removed, then added back"
	# the device back for whatever runs next (the delete is done once
	# that process is gone)
	i=0
	while [ $i -lt 100 ] && ! rdma link show "$2/1" > /dev/null 2>&1; do
		sh -c "$add"
		i=$((i + 1))
		sleep 0.1
	done
done
exit $rc
