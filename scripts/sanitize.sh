#!/bin/bash
# scripts/sanitize.sh - the whole 'make check' suite (unit tests, man page
# checks, TCP integration and fault tests) built with AddressSanitizer
# (LeakSanitizer included) and UndefinedBehaviorSanitizer, in a separate
# build: the library, every test and the sanitizer runtimes together.
#
# The source tree is usually configured in place (test.sh does that), and
# automake refuses a VPATH build from a configured source directory; so
# this takes a snapshot of the sources (the files git knows, tracked or
# not ignored; never build outputs) into $B/src, regenerates the build
# system there and builds out of tree in $B/obj. Concurrent edits in the
# main tree do not disturb a running check.
#
# Exit: 0 every test passed and no sanitizer report anywhere; non-zero
# otherwise, with the failing logs and sanitizer summaries printed.
#
# Environment: SAN_BUILD_DIR (default build/asan), SAN_CC (default clang,
# else gcc), SAN_JOBS (default nproc), and the test sizes below.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
B=${SAN_BUILD_DIR:-$top/build/asan}
jobs=${SAN_JOBS:-$(nproc)}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
mkdir -p "$B"
B=$(cd "$B" && pwd)
# the first compiler that links a sanitized program (clang needs
# libclang-rt-14-dev, which Debian only recommends; gcc brings libasan)
CC=${SAN_CC:-}
if [ -z "$CC" ]; then
	echo 'int main(void) { return 0; }' >"$B/probe.c"
	for c in clang gcc; do
		command -v "$c" >/dev/null 2>&1 || continue
		# shellcheck disable=SC2086
		"$c" $SAN -o "$B/probe" "$B/probe.c" >/dev/null 2>&1 &&
			{ CC=$c; break; }
	done
	[ -n "$CC" ] || {
		echo "sanitize.sh: no compiler links -fsanitize=address,undefined" >&2
		exit 1
	}
fi
CFLAGS_SAN="$SAN -fno-omit-frame-pointer -g -O1"

# the big knobs, smaller under the sanitizers (2-5x slower); timeouts of
# the tests are multiplied by RMSG_TEST_SCALE
export RMSG_TEST_MSGS=${RMSG_TEST_MSGS:-20000}   # stream (TCP: 100000)
export RMSG_TEST_CALLS=${RMSG_TEST_CALLS:-50000} # rpc (TCP: 1000000)
export RMSG_TEST_STREAM_MIB=${RMSG_TEST_STREAM_MIB:-32} # onesided (256)
export RMSG_TEST_SCALE=${RMSG_TEST_SCALE:-4}
export RMSG_TEST_NO_RSS=1 # leak_cycles: RSS holds the ASan quarantine
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# clang's symbolizer, for file:line in the reports
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
	for s in llvm-symbolizer llvm-symbolizer-14; do
		p=$(command -v "$s" 2>/dev/null) && {
			export ASAN_SYMBOLIZER_PATH=$p; break; }
	done
fi

t0=$(date +%s)
echo "sanitize.sh: $CC $CFLAGS_SAN"
echo "sanitize.sh: RMSG_TEST_MSGS=$RMSG_TEST_MSGS" \
	"RMSG_TEST_CALLS=$RMSG_TEST_CALLS" \
	"RMSG_TEST_STREAM_MIB=$RMSG_TEST_STREAM_MIB" \
	"RMSG_TEST_SCALE=$RMSG_TEST_SCALE"

# ------------------------------------------------------------------
# 1. a snapshot of the sources, without build outputs
snap=$B/src
obj=$B/obj
rm -rf "$obj" "$B/built"
mkdir -p "$obj"
copied=$("$top"/scripts/snapshot.sh "$top" "$snap")
echo "sanitize.sh: snapshot of $copied files in $snap"

# ------------------------------------------------------------------
# 2. configure out of tree, build, check
(cd "$snap" && autoreconf -fi >"$B/autoreconf.log" 2>&1) || {
	cat "$B/autoreconf.log"; exit 1; }
(cd "$obj" && "$snap/configure" -q CC="$CC" CFLAGS="$CFLAGS_SAN" \
	LDFLAGS="$SAN" >"$B/configure.log" 2>&1) || {
	cat "$B/configure.log"; exit 1; }
t1=$(date +%s)
echo "sanitize.sh: building ($((t1 - t0)) s so far)"
make -C "$obj" -s -j"$jobs" all >"$B/build.log" 2>&1 || {
	tail -n 60 "$B/build.log"; echo "sanitize.sh: FAIL: build"; exit 1; }
make -C "$obj" -s -j"$jobs" check TESTS= >>"$B/build.log" 2>&1 || {
	tail -n 60 "$B/build.log"; echo "sanitize.sh: FAIL: build"; exit 1; }
t2=$(date +%s)
# the build is complete: scripts/sanitize-rxe.sh may use it (test.sh
# starts it from here, in the VM, beside this script's make check)
: >"$B/built"
echo "sanitize.sh: built in $((t2 - t1)) s; running make check"
# tests that start servers keep their output under $TMPDIR: keep it here,
# where a report from such a process is found too
rm -rf "$B/tmp"
mkdir -p "$B/tmp"
export TMPDIR=$B/tmp RUN_EXAMPLES_KEEP=1
rc=0
make -C "$obj" -j"$jobs" check >"$B/check.log" 2>&1 || rc=$?
t3=$(date +%s)

# ------------------------------------------------------------------
# 3. verdict: make check's, plus any sanitizer report in any test log
#    (a report in a forked child may not fail its parent test)
reports=$( (find "$obj/tests" -name '*.log' -print0
	find "$B/tmp" -type f -print0) | xargs -0 -r grep -l -E \
	'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer' \
	2>/dev/null || true)
grep -E '^(# )?(TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$B/check.log" |
	grep -v ':  *0$' | sed 's/^/sanitize.sh: /' || true
if [ "$rc" != 0 ] || [ -n "$reports" ]; then
	find "$obj/tests" -name '*.trs' -print0 |
		while IFS= read -r -d '' t; do
			grep -q -E '^:test-result: (FAIL|ERROR)' "$t" || continue
			echo "==> ${t%.trs}.log"
			tail -n 40 "${t%.trs}.log"
		done
	for l in $reports; do
		echo "==> sanitizer report in $l"
		grep -E -A 12 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$l" |
			head -n 60
		grep -E 'SUMMARY: ' "$l" || true
	done
	echo "sanitize.sh: FAIL (make check exit $rc); logs under $obj/tests" \
		"and $B/tmp"
	exit 1
fi
echo "sanitize.sh: PASS, no sanitizer report; build $((t2 - t0)) s," \
	"check $((t3 - t2)) s, total $((t3 - t0)) s" | tee "$B/summary.txt"
