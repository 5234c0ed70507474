#!/bin/sh
# SPDX-License-Identifier: MIT
#
# selftest.sh - check the Soft-RoCE VM harness itself: boots the VM twice
# (about 10 s) and checks that the exit status comes back, that rxe0 is
# there, and that rping and perftest's ib_send_lat work over it.
#
# Usage: tests/vm/selftest.sh
# Exit status: 0 all passed, 1 some failed, 77 no qemu (skip).

here=$(cd "$(dirname "$0")" && pwd)

# Inside the guest (run by the host side below).
if [ "${1:-}" = --guest ]; then
	set -u
	ibv_devices | grep -q rxe0 || { echo "FAIL: no rxe0"; exit 10; }
	echo "PASS: rxe0 present"

	rping -s -a "$RMSG_TEST_ADDR" -C 3 > /dev/null 2>&1 &
	srv=$!
	# Under TCG a client started too early is rejected: wait for LISTEN.
	i=0
	until rdma res show cm_id 2> /dev/null | grep -q LISTEN; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || { echo "FAIL: rping never listened"; exit 11; }
		sleep 0.1
	done
	rping -c -a "$RMSG_TEST_ADDR" -C 3 -v || { echo "FAIL: rping"; exit 12; }
	wait "$srv" || { echo "FAIL: rping server"; exit 13; }
	echo "PASS: rping"

	ib_send_lat -d rxe0 -n 200 > /dev/null 2>&1 &
	srv=$!
	i=0
	until ss -ltn | grep -q ':18515 '; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || { echo "FAIL: ib_send_lat never listened"; exit 14; }
		sleep 0.1
	done
	ib_send_lat -d rxe0 -n 200 "$RMSG_TEST_ADDR" | grep -A1 '#bytes' ||
		{ echo "FAIL: ib_send_lat"; exit 15; }
	wait "$srv" || { echo "FAIL: ib_send_lat server"; exit 16; }
	echo "PASS: ib_send_lat"
	exit 0
fi

pass=0
fail=0

"$here/run-in-vm.sh" -t 300 -- sh -c 'echo hello from the guest; exit 3'
rc=$?
[ "$rc" -eq 77 ] && exit 77
if [ "$rc" -eq 3 ]; then
	echo "PASS: exit status 3 came back"
	pass=$((pass + 1))
else
	echo "FAIL: exit status: wanted 3, got $rc"
	fail=$((fail + 1))
fi

if "$here/run-in-vm.sh" -t 300 -- "$here/selftest.sh" --guest; then
	echo "PASS: RDMA over rxe0 in the guest"
	pass=$((pass + 1))
else
	echo "FAIL: RDMA over rxe0 in the guest"
	fail=$((fail + 1))
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
