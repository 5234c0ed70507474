#!/bin/sh
# test.sh - quick start 2: install what is missing, build, then run the
# whole suite: unit tests, man page checks and integration tests over TCP
# on this machine ('make check'), the Python binding's tests (in the
# tree, and pip-installed into a venv: bindings/python/check-install.sh),
# a program outside the tree built against an installed copy with
# pkg-config and CMake (tests/consumer/run.sh), the ABI check against the
# stored release (scripts/abi-check.sh), the wire decoders and a whole connection fuzzed for a minute each (tests/fuzz/
# run.sh: fuzz_proto, fuzz_conn), the suite under ASan/UBSan, every
# multi-thread test under ThreadSanitizer (scripts/tsan.sh) and the TCP
# tests under valgrind, then the VM harness's own check (tests/vm/
# selftest.sh), the integration tests over RDMA on Soft-RoCE inside a
# qemu VM ('make check-rxe'), the same again built with ASan/UBSan
# (scripts/sanitize-rxe.sh) and the binding's tests there. The
# benchmark comparisons run once each in their quick mode (TCP here, RDMA
# in the VM): they must work and parse; no figure is asserted.
set -e
cd "$(dirname "$0")"
scripts/setup.sh test
start=$(date +%s)
make -s format-check
make -s -j"$(nproc)" check || {
	for f in tests/*.log tests/*/*.log tests/*/*/*.log; do
		[ -f "$f" ] && grep -q '^:test-result: \(FAIL\|ERROR\)' "${f%.log}.trs" 2>/dev/null &&
			{ echo "==> $f"; tail -n 40 "$f"; }
	done
	exit 1
}
# the figures the fault tests reported (docs/reliability.md quotes them)
grep -h -E '^(tcp|rdma|figure): |^[a-z_]+: (tcp|rdma|[0-9])' tests/fault/*.log || true
make -s check-python
tests/consumer/run.sh # a program outside the tree: pkg-config, CMake
tests/check-readme-steps.sh # README's steps in a fresh clone (issue 35)
RMSG_LIB=$PWD/.libs/librmsg.so bindings/python/check-install.sh
scripts/abi-check.sh
# the benchmark comparison once, quick: it works and parses (issue 7)
BUILDDIR=$PWD bench/check-quick.sh tcp
BUILDDIR=$PWD bench/check-quick.sh python-tcp # the Python binding (issue 19)
bench/check-quick.sh conn-tcp # connection counts (issue 20)
rel=$(date +%s)
tests/fuzz/run.sh "${FUZZ_SECONDS:-60}"
scripts/sanitize.sh
scripts/tsan.sh # every multi-thread test under ThreadSanitizer (issue 30)
VG_NO_BUILD=1 scripts/valgrind.sh
mid=$(date +%s)
tests/vm/selftest.sh
make -s check-rxe
scripts/sanitize-rxe.sh
RMSG_TEST_TRANSPORT=rdma tests/vm/run-in-vm.sh -q -t 900 -- \
	bindings/python/run-tests.sh
tests/vm/run-in-vm.sh -q -t 900 -- sh -c \
	'bench/check-quick.sh rdma && bench/check-quick.sh python-rdma'
end=$(date +%s)
echo "test.sh: host suite $((rel - start)) s, reliability $((mid - rel)) s," \
	"RDMA suite in VM $((end - mid)) s"
scripts/deb-check.sh # the Debian packages: build, lintian, install, use, remove
