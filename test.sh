#!/bin/sh
# test.sh - quick start 2: install what is missing, build, then run the
# whole suite: unit tests, man page checks and integration tests over TCP
# on this machine ('make check'), the Python binding's tests (in the
# tree, and pip-installed into a venv: bindings/python/check-install.sh),
# a program outside the tree built against an installed copy with
# pkg-config and CMake (tests/consumer/run.sh), the ABI check against the
# stored release (scripts/abi-check.sh), the wire decoders and a whole
# connection fuzzed for a minute each (tests/fuzz/run.sh: fuzz_proto,
# fuzz_conn), the suite under ASan/UBSan, every multi-thread test under
# ThreadSanitizer (scripts/tsan.sh) and the TCP tests under valgrind,
# the Debian packages (scripts/deb-check.sh); and in a qemu VM the
# harness's own check (tests/vm/selftest.sh), the integration tests over
# RDMA on Soft-RoCE ('make check-rxe'), the binding's tests there, the
# same suite again built with ASan/UBSan (scripts/sanitize-rxe.sh). The
# benchmark comparisons run once each in their quick mode (TCP here, RDMA
# in the VM): they must work and parse; no figure is asserted; the
# README's performance section must be what the results files give
# (bench/readme-perf.sh --check).
#
# The order (issue 35: at most 20 minutes on two cores, nothing dropped):
#  1. 'make check' (both cores; beside it the VM harness's self-test,
#     two short boots that need no build), then both fuzz targets at
#     once (a core each: fuzzing is bounded by time, so it runs alone and
#     keeps its executions);
#  2. then the VM's stages start in the background, one after the other:
#     one boot for check-rxe, the binding's tests and the quick RDMA
#     benchmark (run-in-vm.sh -A), then, once sanitize.sh's build is
#     there, sanitize-rxe (it needs that build, and its own boot for the
#     sanitizer options);
#  3. meanwhile the host runs everything else, one stage at a time, under
#     nice: the VM (about one core under TCG) is the longer path, and its
#     guest's tests must not stall behind a compile;
#  4. then test.sh waits for the VM and prints every stage's time.
# TEST_OVERLAP=0 runs the VM's stages in the foreground, then the host's
# (the whole run takes longer). TEST_NICE sets the host stages' niceness
# beside the VM (default 10).
set -e
cd "$(dirname "$0")"
mkdir -p build
times=$PWD/build/test-times.txt

# stage NAME CMD...: runs CMD, adds "NAME SECONDS" to FILE ($stage_file)
stage() {
	_n=$1
	shift
	_s=$(date +%s)
	"$@"
	echo "$_n $(($(date +%s) - _s))" >>"$stage_file"
}

# the RDMA stages in the VM (run in the background below)
vm_stages() {
	stage_file=$PWD/build/test-vm.times
	: >"$stage_file"
	s=$(date +%s)
	# (the self-test ran at the start, beside the build)
	# one boot: check-rxe, then the binding's tests over RDMA, then the
	# benchmark comparisons once, quick (they must work and parse)
	stage vm-check-rxe+binding+bench make -s check-rxe \
		RXE_VM_FLAGS="-t 2700 -A 'RMSG_TEST_TRANSPORT=rdma bindings/python/run-tests.sh && bench/check-quick.sh rdma && bench/check-quick.sh python-rdma && bench/check-quick.sh resume-rdma'"
	# sanitize-rxe runs sanitize.sh's build: wait for it (bounded; the
	# host stops this process group when sanitize.sh fails)
	w=$(date +%s)
	i=0
	while [ ! -f "${SAN_BUILD_DIR:-build/asan}/built" ]; do
		i=$((i + 1))
		[ "$i" -lt 3600 ] || {
			echo "test.sh: no ASan build after an hour"
			exit 1
		}
		sleep 1
	done
	echo "vm-waited-for-asan-build $(($(date +%s) - w))" >>"$stage_file"
	stage vm-sanitize-rxe scripts/sanitize-rxe.sh
	echo "vm-total $(($(date +%s) - s))" >>"$stage_file"
}
if [ "${1:-}" = --vm-stages ]; then
	vm_stages
	exit 0
fi

# the host's stages after the fuzzing ($n: split on purpose)
# shellcheck disable=SC2086
host_stages() {
	n="nice -n ${TEST_NICE:-10}"
	[ -n "$vm_pid" ] || n=
	# first, so that the VM finds its build when it gets there
	stage sanitize $n scripts/sanitize.sh
	# the integration tests over shm:// (issue 34)
	stage check-shm $n make -s check-shm
	stage check-python $n make -s check-python
	# a program outside the tree: pkg-config, CMake
	stage consumer $n tests/consumer/run.sh
	# README's steps in a fresh clone (issue 35)
	stage readme-steps $n tests/check-readme-steps.sh
	stage check-install env RMSG_LIB="$PWD/.libs/librmsg.so" \
		$n bindings/python/check-install.sh
	stage abi-check $n scripts/abi-check.sh
	# the benchmark comparison once, quick: it works and parses (issue
	# 7), the Python binding (issue 19), connection counts (issue 20),
	# the README's figures parse (issue 35)
	stage bench-quick-tcp env BUILDDIR="$PWD" $n sh -c \
		'bench/check-quick.sh tcp && bench/check-quick.sh python-tcp &&
		bench/check-quick.sh conn-tcp && bench/check-quick.sh resume-tcp &&
		bench/readme-perf.sh --check'
	# every multi-thread test under ThreadSanitizer (issue 30)
	stage tsan $n scripts/tsan.sh
	# two tests at a time: niced, they take only what the VM leaves
	stage valgrind env VG_NO_BUILD=1 VG_JOBS="${VG_JOBS:-$(nproc)}" \
		$n scripts/valgrind.sh
	# the Debian packages: build, lintian, install, use, remove. The
	# VM's tests run the build tree's library (libtool wrappers,
	# RMSG_LIB), never the installed one
	stage packages $n scripts/deb-check.sh
}

scripts/setup.sh test
# the VM's image: built by the first boot when the cache is cold (CI's
# first run), in the self-test's time
vm_cache=${RMSG_VM_CACHE:-tests/vm/cache}
if ls "$vm_cache"/*/vmlinux "$vm_cache"/*/initramfs.gz >/dev/null 2>&1; then
	vm_cache="$vm_cache (warm)"
else
	vm_cache="$vm_cache (cold: the self-test's time includes the image's build)"
fi
start=$(date +%s)
stage_file=$times
: >"$stage_file"
# the VM harness's self-test (two short boots, no build needed) beside
# the build; it prepares the VM's image when the cache is cold
selftest_pid=
if [ "${TEST_OVERLAP:-1}" = 1 ]; then
	# its own process group, stopped on a failure here
	# shellcheck disable=SC2016 # expanded by that sh
	setsid sh -c 's=$(date +%s); tests/vm/selftest.sh; rc=$?
		echo "vm-selftest $(($(date +%s) - s))" >>build/test-times.txt
		exit $rc' >build/test-selftest.log 2>&1 &
	selftest_pid=$!
	trap '[ -z "$selftest_pid" ] || kill -TERM -"$selftest_pid" 2>/dev/null' EXIT
fi
stage format-check make -s format-check
make_check() {
	make -s -j"$(nproc)" check || {
		for f in tests/*.log tests/*/*.log tests/*/*/*.log; do
			[ -f "$f" ] && grep -q '^:test-result: \(FAIL\|ERROR\)' "${f%.log}.trs" 2>/dev/null &&
				{ echo "==> $f"; tail -n 40 "$f"; }
		done
		return 1
	}
}
stage make-check make_check
# the figures the fault tests reported (docs/reliability.md quotes them)
grep -h -E '^(tcp|rdma|figure): |^[a-z_]+: (tcp|rdma|[0-9])' tests/fault/*.log || true
# both targets at once, a core each
stage fuzz tests/fuzz/run.sh "${FUZZ_SECONDS:-60}"

# The VM's stages, in the background (their own process group, so that a
# failure on the host stops qemu too); their output is kept in
# build/test-vm.log and printed when they end
rm -f "${SAN_BUILD_DIR:-build/asan}/built"
vm_pid=
if [ -n "$selftest_pid" ]; then
	src=0
	wait "$selftest_pid" || src=$?
	selftest_pid=
	cat build/test-selftest.log
	[ "$src" = 0 ] || { echo "test.sh: FAIL: tests/vm/selftest.sh"; exit 1; }
else
	stage vm-selftest tests/vm/selftest.sh
fi
if [ "${TEST_OVERLAP:-1}" = 1 ]; then
	vm_start=$(date +%s)
	setsid ./test.sh --vm-stages >build/test-vm.log 2>&1 &
	vm_pid=$!
	trap '[ -z "$vm_pid" ] || kill -TERM -"$vm_pid" 2>/dev/null' EXIT
	host_stages
	host_end=$(date +%s)
	vrc=0
	wait "$vm_pid" || vrc=$?
	vm_pid=
	cat build/test-vm.log
	[ "$vrc" = 0 ] || { echo "test.sh: FAIL: the RDMA stages in the VM"; exit 1; }
	echo "waited-for-the-vm $(($(date +%s) - host_end))" >>"$times"
else
	vm_start=$(date +%s)
	( vm_stages ) 2>&1 | tee build/test-vm.log
	# (a failure there: tee hides it; the stage file then lacks its end)
	grep -q '^vm-total ' build/test-vm.times ||
		{ echo "test.sh: FAIL: the RDMA stages in the VM"; exit 1; }
	host_stages
fi
fin=$(date +%s)
# "a 1\nb 2" -> "a 1 s, b 2 s"
list() { sed 's/$/ s/' "$1" | paste -s -d, - | sed 's/,/, /g'; }
echo "test.sh: stage times, host: $(list "$times")"
echo "test.sh: stage times, VM (started $((vm_start - start)) s in," \
	"overlapping: ${TEST_OVERLAP:-1}): $(list build/test-vm.times)"
echo "test.sh: VM cache $vm_cache; total" \
	"$((fin - start)) s"
