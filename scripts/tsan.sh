#!/bin/bash
# scripts/tsan.sh [LOOPS] - every test that runs more than one thread,
# built with ThreadSanitizer, library included, in a separate build (a
# snapshot of the sources, as scripts/sanitize.sh makes), over TCP:
#   tests/threads/submit      rmsg_ctx_submit from 3 threads, both loop
#                             modes, LOOPS iterations (default 200)
#   tests/threads/group_stop  a group's members and home shut down at
#                             once, LOOPS iterations
#   tests/integration/group   hand-overs, pick, close and destroy races
#   tests/integration/fdmode  fd mode, submits from another thread
#   tests/integration/rpc     calls submitted from worker threads
#   tests/integration/resolve names resolved on resolver threads
#   tests/unit/ownloop        the private loop's wake-ups
#   examples/rpc_threads      one address served by two threads
# Any ThreadSanitizer report fails the run (halt_on_error), as does a
# failing test. libev and libc are not instrumented: what the library
# hands between threads goes through its own mutexes, which TSan sees.
#
# Environment: TSAN_BUILD_DIR (default build/tsan), TSAN_CC (default
# clang, else gcc), TSAN_JOBS (default nproc).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
loops=${1:-${RMSG_TEST_LOOPS:-200}}
B=${TSAN_BUILD_DIR:-$top/build/tsan}
jobs=${TSAN_JOBS:-$(nproc)}
SAN="-fsanitize=thread"
# TSan of clang 14 aborts on kernels whose mmap randomisation is wider
# than its memory layout expects ("unexpected memory mapping"): the
# programs run with address randomisation off, which changes nothing
# else for these tests
norand=
setarch "$(uname -m)" -R true 2>/dev/null && norand="setarch $(uname -m) -R"
mkdir -p "$B"
B=$(cd "$B" && pwd)
CC=${TSAN_CC:-}
if [ -z "$CC" ]; then
	echo 'int main(void) { return 0; }' >"$B/probe.c"
	for c in clang gcc; do
		command -v "$c" >/dev/null 2>&1 || continue
		"$c" $SAN -o "$B/probe" "$B/probe.c" >/dev/null 2>&1 &&
			$norand "$B/probe" && { CC=$c; break; }
	done
	[ -n "$CC" ] || {
		echo "tsan.sh: no compiler builds and runs -fsanitize=thread" >&2
		exit 1
	}
fi
t0=$(date +%s)
echo "tsan.sh: $CC $SAN, $loops iterations of the looped tests"

snap=$B/src
obj=$B/obj
rm -rf "$obj"
mkdir -p "$obj"
copied=$("$top"/scripts/snapshot.sh "$top" "$snap")
echo "tsan.sh: snapshot of $copied files"
(cd "$snap" && autoreconf -fi >"$B/autoreconf.log" 2>&1) || {
	cat "$B/autoreconf.log"; exit 1; }
(cd "$obj" && "$snap/configure" -q CC="$CC" \
	CFLAGS="$SAN -fno-omit-frame-pointer -g -O1" LDFLAGS="$SAN" \
	--enable-loop-examples >"$B/configure.log" 2>&1) || {
	cat "$B/configure.log"; exit 1; }
progs="tests/threads/submit tests/threads/group_stop tests/integration/group
 tests/integration/fdmode tests/integration/rpc tests/integration/resolve
 tests/unit/ownloop examples/rpc_threads"
# shellcheck disable=SC2086
make -C "$obj" -s -j"$jobs" librmsg.la $progs >"$B/build.log" 2>&1 || {
	tail -n 60 "$B/build.log"; echo "tsan.sh: FAIL: build"; exit 1; }
t1=$(date +%s)
echo "tsan.sh: built in $((t1 - t0)) s"

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 exitcode=66"
export RMSG_TEST_TRANSPORT=tcp RMSG_TEST_ADDR=127.0.0.1
export RMSG_TEST_SCALE=${RMSG_TEST_SCALE:-4} RMSG_TEST_CALLS=20000
export RMSG_TEST_LOOPS=$loops
logs=$B/logs
rm -rf "$logs"
mkdir -p "$logs"
fail=0
run() {
	local name=$1 s rc=0
	shift
	s=$(date +%s)
	(cd "$obj" && timeout 900 $norand "$@") >"$logs/$name.log" 2>&1 ||
		rc=$?
	if [ "$rc" = 77 ]; then
		echo "tsan.sh: SKIP $name"
	elif [ "$rc" != 0 ] || grep -q 'WARNING: ThreadSanitizer' \
		"$logs/$name.log"; then
		echo "tsan.sh: FAIL $name (exit $rc)"
		grep -A 30 'WARNING: ThreadSanitizer' "$logs/$name.log" |
			head -n 60 || tail -n 30 "$logs/$name.log"
		fail=1
	else
		echo "tsan.sh: PASS $name ($(($(date +%s) - s)) s)"
	fi
}
run submit tests/threads/submit
run group_stop tests/threads/group_stop
run group tests/integration/group
# the hand-overs over shm:// too (issue 34): a peer's mapping goes with
# its socket to another thread's context
RMSG_TEST_TRANSPORT=shm run group-shm tests/integration/group
run fdmode tests/integration/fdmode
run rpc tests/integration/rpc
run resolve tests/integration/resolve
run ownloop tests/unit/ownloop
# the example: a server on two threads, a client calling it
port=$((20000 + $$ % 20000))
(cd "$obj" && exec $norand examples/rpc_threads server --threads 2 \
	"tcp://127.0.0.1:$port") >"$logs/rpc_threads.server.log" 2>&1 &
srv=$!
for _ in $(seq 100); do
	ss -ltn 2>/dev/null | grep -q ":$port " && break
	sleep 0.1
done
run rpc_threads examples/rpc_threads client --conns 8 --calls 50 \
	"tcp://127.0.0.1:$port"
kill -INT "$srv" 2>/dev/null || true
wait "$srv" || true
if grep -q 'WARNING: ThreadSanitizer' "$logs/rpc_threads.server.log"; then
	echo "tsan.sh: FAIL rpc_threads server"
	grep -A 30 'WARNING: ThreadSanitizer' "$logs/rpc_threads.server.log" |
		head -n 60
	fail=1
fi
t2=$(date +%s)
if [ "$fail" != 0 ]; then
	echo "tsan.sh: FAIL; logs in $logs"
	exit 1
fi
echo "tsan.sh: PASS, no ThreadSanitizer report; $((t2 - t0)) s"
