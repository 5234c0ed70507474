#!/bin/sh
# SPDX-License-Identifier: MIT
#
# doctor.sh - rmsg-doctor gives the right verdict:
#  - with RMSG_TEST_TRANSPORT=rdma (make check-rxe, in the Soft-RoCE VM):
#    exit 0, the device's port ACTIVE, and a route to RMSG_TEST_ADDR;
#  - otherwise, on a machine without RDMA devices (the build host): exit 1
#    and the "no RDMA device" diagnosis with a cause and a fix;
#  - on a host that has devices: it runs, and exits 0 or 1, not by a
#    signal.
# Also: a usage error exits 2, and an address that is not one is a
# problem, not a crash. Environment: top_builddir (default: .).

builddir=${top_builddir:-.}
doctor=$builddir/tools/rmsg-doctor
addr=${RMSG_TEST_ADDR:-127.0.0.1}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/doctor.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' 0
failures=0
fail() {
	echo "FAIL: $*"
	sed 's/^/    /' "$tmp/out"
	failures=$((failures + 1))
}
[ -x "$doctor" ] || {
	echo "FAIL: $doctor not built"
	exit 1
}

"$doctor" -x > "$tmp/out" 2>&1
[ $? = 2 ] || fail "usage error: exit status not 2"

"$doctor" "$addr" > "$tmp/out" 2>&1
rc=$?
if [ "${RMSG_TEST_TRANSPORT:-tcp}" = rdma ]; then
	[ "$rc" = 0 ] || fail "RDMA machine: exit $rc, expected 0"
	grep -q 'RDMA is usable' "$tmp/out" || fail "no 'RDMA is usable'"
	grep -q 'port 1: active' "$tmp/out" || fail "no active port"
	grep -q "route to $addr resolved" "$tmp/out" ||
		fail "no route to $addr"
	grep -q 'RoCE v2' "$tmp/out" || fail "no RoCE v2 GID listed"
	# an address no RDMA device reaches: resolution fails, exit 1
	"$doctor" 127.0.0.1 > "$tmp/out" 2>&1
	[ $? = 1 ] || fail "127.0.0.1 over RDMA: exit status not 1"
	grep -q '^FAIL: no RDMA \(address resolution\|route\) to 127.0.0.1' \
		"$tmp/out" || fail "127.0.0.1: no resolution problem reported"
elif [ -z "$(ls /sys/class/infiniband 2> /dev/null)" ]; then
	[ "$rc" = 1 ] || fail "no RDMA here: exit $rc, expected 1"
	grep -q '^FAIL: no RDMA device' "$tmp/out" ||
		fail "no 'no RDMA device' diagnosis"
	grep -q 'cause:' "$tmp/out" && grep -q 'fix:' "$tmp/out" ||
		fail "the diagnosis lacks a cause or a fix"
	grep -q '^RDMA is not usable: no RDMA device' "$tmp/out" ||
		fail "no verdict"
	grep -q 'memlock' "$tmp/out" || fail "no memlock check"
else
	[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "exit $rc"
fi

"$doctor" not-a-host.invalid > "$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "bad address: exit $rc, expected 1"

[ "$failures" = 0 ] || exit 1
echo "PASS: rmsg-doctor (${RMSG_TEST_TRANSPORT:-tcp})"
