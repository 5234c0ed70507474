#!/bin/bash
# scripts/valgrind.sh [TEST...] - the TCP integration and fault tests under
# valgrind memcheck, through their libtool wrappers, with smaller sizes.
# Fails on any memcheck error (invalid access, uninitialised value used,
# bad free, fd or syscall misuse) and on any definite leak, in the test
# process or in a process it starts (--trace-children).
#
# TEST: names like tests/integration/stream; default every test program
# in tests/integration/ and tests/fault/ of the build tree.
#
# Exit: 0 clean; 1 a failure (the log is printed); 77 no valgrind.
#
# Environment: VG_BUILDDIR (default: the source tree, configured and
# built in place as test.sh does; the check programs are brought up to
# date first unless VG_NO_BUILD=1), VG_OUT (logs, default
# build/valgrind), VG_JOBS (tests at once, default nproc), and the test
# sizes below. VG_TIMEOUT bounds each test (default 600 s); VG_EXTRA
# adds valgrind options (e.g. --track-origins=yes to find where an
# uninitialised value came from).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bd=$(cd "${VG_BUILDDIR:-$top}" && pwd)
out=${VG_OUT:-$top/build/valgrind}
jobs=${VG_JOBS:-$(nproc)}

command -v valgrind >/dev/null 2>&1 || {
	echo '##############################################################'
	echo '# SKIP: valgrind tests NOT run: no valgrind (apt-get install valgrind)'
	echo '##############################################################'
	exit 77
}
[ -f "$bd/Makefile" ] || {
	echo "valgrind.sh: $bd is not configured (run scripts/setup.sh)" >&2
	exit 1
}

# memcheck is 20-50x slower: small sizes, long timeouts
export RMSG_TEST_TRANSPORT=tcp RMSG_TEST_ADDR=127.0.0.1
export RMSG_TEST_MSGS=${RMSG_TEST_MSGS:-10000}    # stream (TCP: 100000)
export RMSG_TEST_CALLS=${RMSG_TEST_CALLS:-20000}  # rpc (TCP: 1000000)
export RMSG_TEST_STREAM_MIB=${RMSG_TEST_STREAM_MIB:-32} # onesided (256)
export RMSG_TEST_SCALE=${RMSG_TEST_SCALE:-20}     # timeouts x20
export RMSG_TEST_NO_RSS=1 # leak_cycles: RSS holds memcheck's freed-block queue
export top_srcdir=$top top_builddir=$bd

t0=$(date +%s)
if [ "${VG_NO_BUILD:-0}" != 1 ]; then
	make -C "$bd" -s -j"$(nproc)" check TESTS= >/dev/null
fi

if [ $# -gt 0 ]; then
	tests=("$@")
else
	tests=()
	for f in "$bd"/tests/api/* "$bd"/tests/integration/* "$bd"/tests/fault/*; do
		if [ ! -f "$f" ] || [ ! -x "$f" ]; then continue; fi
		case $f in *.sh) continue ;; esac
		tests+=("${f#"$bd"/}")
	done
fi
[ ${#tests[@]} -gt 0 ] || { echo "valgrind.sh: no test programs" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "valgrind.sh: ${#tests[@]} tests, $jobs at a time; logs in $out"
echo "valgrind.sh: RMSG_TEST_MSGS=$RMSG_TEST_MSGS" \
	"RMSG_TEST_CALLS=$RMSG_TEST_CALLS" \
	"RMSG_TEST_STREAM_MIB=$RMSG_TEST_STREAM_MIB" \
	"RMSG_TEST_SCALE=$RMSG_TEST_SCALE"

# one test: exit status in $out/NAME.rc, memcheck logs $out/NAME.vg.PID
run_one() {
	local t=$1 name s e rc=0
	name=$(echo "$t" | tr / _)
	s=$(date +%s)
	# shellcheck disable=SC2086 # VG_EXTRA: several options
	(cd "$bd" && timeout -k 10 "${VG_TIMEOUT:-600}" \
		./libtool --mode=execute valgrind \
		--leak-check=full --show-leak-kinds=definite \
		--errors-for-leak-kinds=definite --error-exitcode=9 \
		--trace-children=yes --child-silent-after-fork=no \
		--num-callers=30 ${VG_EXTRA:-} \
		--log-file="$out/$name.vg.%p" "./$t") \
		>"$out/$name.out" 2>&1 || rc=$?
	e=$(date +%s)
	echo "$rc $((e - s))" >"$out/$name.rc"
}
export -f run_one
export bd out VG_EXTRA=${VG_EXTRA:-} VG_TIMEOUT=${VG_TIMEOUT:-600}

# shellcheck disable=SC2016 # "$1" is expanded by the inner bash
printf '%s\0' "${tests[@]}" |
	xargs -0 -n 1 -P "$jobs" bash -c 'run_one "$1"' _

fail=0
for t in "${tests[@]}"; do
	name=$(echo "$t" | tr / _)
	read -r rc secs <"$out/$name.rc"
	verdict=PASS
	[ "$rc" = 77 ] && verdict=SKIP
	# errors or definite leaks in any process of the test (also children
	# killed on purpose, which print no exit status)
	bad=$(grep -l -E 'ERROR SUMMARY: [1-9]|are definitely lost|Invalid (read|write|free)|uninitialised|Mismatched free|Syscall param|overlap' \
		"$out/$name".vg.* 2>/dev/null || true)
	if [ "$rc" = 9 ] || [ -n "$bad" ]; then
		verdict=FAIL
	elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		verdict="FAIL (timeout)"
	elif [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
		verdict="FAIL (exit $rc)"
	fi
	printf 'valgrind.sh: %-30s %-16s %4s s\n' "$t" "$verdict" "$secs"
	case $verdict in
	FAIL*)
		fail=1
		tail -n 30 "$out/$name.out"
		for l in "$out/$name".vg.*; do
			[ -s "$l" ] || continue
			echo "==> $l"
			head -n 80 "$l"
		done
		;;
	esac
done
t1=$(date +%s)
if [ $fail != 0 ]; then
	echo "valgrind.sh: FAIL after $((t1 - t0)) s"
	exit 1
fi
echo "valgrind.sh: PASS, ${#tests[@]} tests, no memcheck error, no" \
	"definite leak; $((t1 - t0)) s" | tee "$out/summary.txt"
