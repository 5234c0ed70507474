#!/bin/bash
# scripts/sanitize-rxe.sh - the RDMA integration suite (what 'make
# check-rxe' runs) built with AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer, run on Soft-RoCE inside the qemu VM.
#
# valgrind cannot follow the verbs provider's memory-mapped queues, so
# the host's valgrind run covers TCP and the mocks only; ASan instruments
# our code and leaves the provider's mappings alone, so the real RDMA
# backend is checked here. It reuses the out-of-tree build that
# scripts/sanitize.sh made (run that first) and runs its 'check-rxe'
# target, with the sanitizer options passed into the guest and every
# report written through to the host (log_path in the results
# directory): a report from a forked server or a helper process fails
# the run too, not only one that makes its test exit non-zero.
#
# Exit: 0 the RDMA suite passed and no sanitizer report anywhere (a host
# without qemu fails, as in check-rxe, unless RMSG_ALLOW_NO_VM=1);
# non-zero otherwise, with the reports printed.
#
# Environment: SAN_BUILD_DIR (default build/asan, as sanitize.sh),
# RMSG_VM_CACHE, and the test sizes below.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
B=${SAN_BUILD_DIR:-$top/build/asan}
[ -f "$B/obj/Makefile" ] && [ -f "$B/built" ] || {
	echo "sanitize-rxe.sh: no complete sanitizer build in $B/obj: run" \
		"scripts/sanitize.sh first" >&2
	exit 1
}
B=$(cd "$B" && pwd)
res=$B/rxe-results
rm -rf "$res"
mkdir -p "$res/san"

# smaller runs than check-rxe: TCG and the sanitizers multiply (about
# 3x here); RMSG_TEST_SCALE stretches the tests' own timeouts
export RMSG_TEST_MSGS=${RMSG_TEST_MSGS:-5000}
export RMSG_TEST_CALLS=${RMSG_TEST_CALLS:-10000}
export RMSG_TEST_STREAM_MIB=${RMSG_TEST_STREAM_MIB:-16}
export RMSG_TEST_SCALE=${RMSG_TEST_SCALE:-4}
export RMSG_TEST_NO_RSS=1 # leak_cycles: RSS holds the ASan quarantine
# reports to files in the results directory, one per process
# (log_path.PID), which the guest writes through to the host
g=/mnt/results/san
asan="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
asan="$asan:detect_stack_use_after_return=1:check_initialization_order=1"
asan="$asan:log_path=$g/asan"
ubsan="halt_on_error=1:print_stacktrace=1:log_path=$g/ubsan"
sym=
for s in llvm-symbolizer llvm-symbolizer-14; do
	p=$(command -v "$s" 2>/dev/null) && { sym=$p; break; }
done

t0=$(date +%s)
echo "sanitize-rxe.sh: the RDMA suite from $B/obj in the VM" \
	"(RMSG_TEST_SCALE=$RMSG_TEST_SCALE)"
rc=0
flags="-r $res -e ASAN_OPTIONS=$asan -e UBSAN_OPTIONS=$ubsan"
[ -n "$sym" ] && flags="$flags -e ASAN_SYMBOLIZER_PATH=$sym"
make -C "$B/obj" -s check-rxe RMSG_VM_CACHE="${RMSG_VM_CACHE:-$top/tests/vm/cache}" \
	RXE_VM_FLAGS="$flags" || rc=$?
t1=$(date +%s)

reports=$(find "$res/san" -type f | sort)
if [ -n "$reports" ]; then
	for l in $reports; do
		echo "==> sanitizer report $(basename "$l")"
		head -n 60 "$l"
	done
	echo "sanitize-rxe.sh: FAIL: $(echo "$reports" | wc -l) sanitizer" \
		"report(s) (kept in $res/san)"
	exit 1
fi
if [ "$rc" != 0 ]; then
	echo "sanitize-rxe.sh: FAIL: check-rxe exit $rc (VM output in" \
		"$res/output.log)"
	exit "$rc"
fi
echo "sanitize-rxe.sh: PASS, no sanitizer report; $((t1 - t0)) s"
