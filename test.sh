#!/bin/sh
# test.sh - quick start 2: install what is missing, build, then run the
# whole suite: unit tests, man page checks and integration tests over TCP
# on this machine ('make check'), then the integration tests over RDMA on
# Soft-RoCE inside a qemu VM ('make check-rxe').
set -e
cd "$(dirname "$0")"
scripts/setup.sh test
start=$(date +%s)
make -s format-check
make -s -j"$(nproc)" check || {
	for f in tests/*.log tests/*/*.log; do
		[ -f "$f" ] && grep -q '^FAIL\|^ERROR' "${f%.log}.trs" 2>/dev/null &&
			{ echo "==> $f"; tail -n 40 "$f"; }
	done
	exit 1
}
make -s check-python
mid=$(date +%s)
make -s check-rxe
RMSG_TEST_TRANSPORT=rdma tests/vm/run-in-vm.sh -q -t 900 -- \
	bindings/python/run-tests.sh
end=$(date +%s)
echo "test.sh: host suite $((mid - start)) s, RDMA suite in VM $((end - mid)) s"
