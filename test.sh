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
# (scripts/sanitize-rxe.sh) and the binding's tests there; the VM stages
# run beside the host's ThreadSanitizer and valgrind stages. The
# benchmark comparisons run once each in their quick mode (TCP here, RDMA
# in the VM): they must work and parse; no figure is asserted; the
# README's performance section must be what the results files give
# (bench/readme-perf.sh --check).
set -e
cd "$(dirname "$0")"
# the RDMA stages in the VM; run below, beside the host's last stages
vm_stages() {
	s=$(date +%s)
	tests/vm/selftest.sh
	make -s check-rxe
	scripts/sanitize-rxe.sh
	# one boot for both: the binding's tests over RDMA, then the
	# benchmark comparisons once, quick (they must work and parse)
	tests/vm/run-in-vm.sh -q -t 1800 -- sh -c \
		'RMSG_TEST_TRANSPORT=rdma bindings/python/run-tests.sh &&
		bench/check-quick.sh rdma && bench/check-quick.sh python-rdma'
	echo "$(($(date +%s) - s))" >build/test-vm.secs
}
if [ "${1:-}" = --vm-stages ]; then
	vm_stages
	exit 0
fi
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
bench/readme-perf.sh --check # the README's figures parse (issue 35)
rel=$(date +%s)
tests/fuzz/run.sh "${FUZZ_SECONDS:-60}" # both targets at once, a core each
scripts/sanitize.sh

# The RDMA stages (the VM harness's check, check-rxe, the same under
# ASan/UBSan, then the binding's tests and the quick benchmark in one
# more boot) run from here on in the background, beside ThreadSanitizer
# and valgrind on the host, so that neither waits for the other's idle
# time (tsan.sh runs its tests one at a time, valgrind's longest test
# runs alone at its end, the guest's tests wait on each other); on two
# busy cores both stretch, and TEST_OVERLAP=0 runs them one after the
# other, as before. sanitize-rxe reuses sanitize.sh's build. The
# VM stage's output is kept in build/test-vm.log and printed when it
# ends; its own time is in the stage times below.
mkdir -p build
vm_pid=
if [ "${TEST_OVERLAP:-1}" = 1 ]; then
	# its own process group (setsid), so that a failure on the host
	# stops qemu too
	setsid ./test.sh --vm-stages >build/test-vm.log 2>&1 &
	vm_pid=$!
	trap '[ -z "$vm_pid" ] || kill -TERM -"$vm_pid" 2>/dev/null' EXIT
fi
scripts/tsan.sh # every multi-thread test under ThreadSanitizer (issue 30)
# beside the VM, valgrind runs one test at a time (it would take both
# cores otherwise): the VM's tests, the longer stage, keep a core, and
# their timeouts stay far away
vg_jobs=${VG_JOBS:-$([ -n "$vm_pid" ] && echo 1 || nproc)}
VG_NO_BUILD=1 VG_JOBS=$vg_jobs scripts/valgrind.sh
mid=$(date +%s)
if [ -n "$vm_pid" ]; then
	vrc=0
	wait "$vm_pid" || vrc=$?
	vm_pid=
	cat build/test-vm.log
	[ "$vrc" = 0 ] || { echo "test.sh: FAIL: the RDMA stages in the VM"; exit 1; }
else
	vm_stages
fi
end=$(date +%s)
scripts/deb-check.sh # the Debian packages: build, lintian, install, use, remove
fin=$(date +%s)
echo "test.sh: host suite $((rel - start)) s, reliability $((mid - rel)) s," \
	"RDMA suite in VM $(cat build/test-vm.secs) s (overlapping:" \
	"${TEST_OVERLAP:-1}), waited for the VM $((end - mid)) s," \
	"packages $((fin - end)) s; total $((fin - start)) s"
