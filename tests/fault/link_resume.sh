#!/bin/sh
# SPDX-License-Identifier: MIT
#
# link_resume.sh - runs tests/fault/link_resume: a resumable TCP
# connection across a link that goes silent for 2 s (every packet
# dropped, nothing reset) and comes back. On the host, in a network
# namespace of its own: a veth pair, vA (198.18.1.1) and vB
# (198.18.1.2), with policy routing so that what goes between the two
# local addresses crosses the pair (as tests/fault/link_cut.sh does in
# the VM); the cut is a pfifo of length 0 on both ends (netem is not in
# every kernel). Needs root and ip(8) with netns; skips otherwise.
A=198.18.1.1
B=198.18.1.2
builddir=${BUILDDIR:-$(pwd)}
prog=$builddir/tests/fault/link_resume

if [ "$(id -u)" != 0 ] || ! command -v ip > /dev/null 2>&1 ||
	! command -v tc > /dev/null 2>&1; then
	echo "SKIP: link_resume needs root, ip and tc (a network namespace)"
	exit 77
fi
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
ns=rmsg-link-resume-$$
ip netns add "$ns" 2> /dev/null || {
	echo "SKIP: cannot make a network namespace here"
	exit 77
}
trap 'ip netns del "$ns" 2> /dev/null' 0
trap 'exit 1' HUP INT TERM

# shellcheck disable=SC2016 # expanded inside the namespace's shell
ip netns exec "$ns" env A=$A B=$B prog="$prog" sh -c '
die() { echo "link_resume.sh: $*" >&2; exit 99; }
ip link set lo up || die "lo"
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
tc qdisc add dev vB root pfifo limit 0 && tc qdisc del dev vB root ||
	die "no pfifo qdisc"
export LINK_A=$A LINK_B=$B
export LINK_CUT="tc qdisc add dev vB root pfifo limit 0 &&
	tc qdisc add dev vA root pfifo limit 0"
export LINK_HEAL="tc qdisc del dev vB root && tc qdisc del dev vA root"
RMSG_TEST_TRANSPORT=tcp "$prog"
'
