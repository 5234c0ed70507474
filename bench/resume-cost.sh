#!/bin/bash
# SPDX-License-Identifier: MIT
#
# resume-cost.sh - what resume mode (rmsg_cfg_set_resume_ms(3), rmsg-perf
# -R on both ends) costs when nothing fails (issue 33): rmsg-perf with
# resumable connections (A) against the same without (B), alternating
# A B A B ..., the 64 B ping-pong (median half round trip, us) and the
# 64 KiB stream (MB/s). Prints a markdown table: both medians, the ratio
# of medians and the per-round range. Issue 33's targets: latency <=
# 1.05x and stream >= 0.95x of resume off. A benchmark, not a test:
# nothing is asserted.
#
#   bench/resume-cost.sh [--quick] [tcp|rdma|auto]
#
# tcp runs on 127.0.0.1; rdma and auto on $RMSG_TEST_ADDR (198.18.0.1,
# the Soft-RoCE VM's device: tests/vm/run-in-vm.sh -- bench/resume-cost.sh
# rdma).
#
# Environment (defaults in brackets): ROUNDS [5], LAT_ITERS [20000],
# BW_ITERS [20000] (64 KiB messages), RESUME_MS [10000], PORT [17400]
# (and the next), PERF [tools/rmsg-perf of BUILDDIR], BUILDDIR [top of the
# tree], PIN [same: both ends on the last CPU; none], RESULTS
# [bench/results-resume.txt: the table is appended there too].
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
quick=0
if [ "${1:-}" = --quick ]; then
	quick=1
	shift
fi
scheme=${1:-tcp}
case $scheme in
tcp) host=127.0.0.1 ;;
rdma | auto) host=${RMSG_TEST_ADDR:-198.18.0.1} ;;
*) echo "usage: resume-cost.sh [--quick] [tcp|rdma|auto]" >&2; exit 2 ;;
esac
ROUNDS=${ROUNDS:-5}
LAT_ITERS=${LAT_ITERS:-20000}
BW_ITERS=${BW_ITERS:-20000}
if [ $quick = 1 ]; then
	ROUNDS=1
	LAT_ITERS=2000
	BW_ITERS=2000
fi
RESUME_MS=${RESUME_MS:-10000}
port=${PORT:-17400}
PERF=${PERF:-${BUILDDIR:-$top}/tools/rmsg-perf}
[ -x "$PERF" ] || { echo "resume-cost.sh: no $PERF: run make" >&2; exit 1; }
pin=()
if [ "${PIN:-same}" = same ] && command -v taskset > /dev/null; then
	pin=(taskset -c "$(($(nproc) - 1))")
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/resume-cost.XXXXXX")
srv=()
cleanup() {
	for p in "${srv[@]}"; do kill "$p" 2> /dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# one server each, kept serving: A (resumable) on $port, B on $port+1
"${pin[@]}" "$PERF" -k -R "$RESUME_MS" server "$scheme://$host:$port" \
	> "$tmp/srv-a" 2>&1 &
srv+=($!)
"${pin[@]}" "$PERF" -k server "$scheme://$host:$((port + 1))" \
	> "$tmp/srv-b" 2>&1 &
srv+=($!)
sleep 1

# run SIDE KEY ARGS...: one client run; prints the value of KEY
run() {
	local side=$1 key=$2 p=$port opt=(-R "$RESUME_MS")
	shift 2
	if [ "$side" = B ]; then
		p=$((port + 1))
		opt=()
	fi
	timeout 300 "${pin[@]}" "$PERF" -P "${opt[@]}" "$@" client \
		"$scheme://$host:$p" |
		tr ' ' '\n' | sed -n "s/^$key=//p" | head -n 1
}

for ((r = 1; r <= ROUNDS; r++)); do
	for side in A B; do
		lat=$(run $side lat_us -m lat -s 64 -n "$LAT_ITERS")
		bw=$(run $side mbps -m bw -s 64k -n "$BW_ITERS")
		echo "$side $r $lat $bw" >> "$tmp/raw"
		echo "round $r $side: lat_us=$lat mbps=$bw" >&2
	done
done

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# col N SIDE: column N of SIDE's rows
col() { awk -v s="$2" -v n="$1" '$1 == s { print $n }' "$tmp/raw"; }
# ratio per round, A over B, for column N: min max
range() {
	awk -v n="$1" '$1 == "A" { a[$2] = $n } $1 == "B" { b[$2] = $n }
		END { for (r in a) if (b[r] > 0) { x = a[r] / b[r];
			if (min == "" || x < min) min = x; if (x > max) max = x }
			printf "%.3f | %.3f", min, max }' "$tmp/raw"
}

RESULTS=${RESULTS:-$here/results-resume.txt}
{
echo "# resume-cost.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) $scheme"
echo "# librmsg $(git -C "$top" rev-parse --short HEAD 2> /dev/null || echo ?)," \
	"$(uname -sr), $(nproc) CPUs, rounds=$ROUNDS, lat iters=$LAT_ITERS," \
	"stream 64 KiB x $BW_ITERS, resume window ${RESUME_MS} ms, pin=${PIN:-same}"
echo
echo "| metric | resume on (median) | resume off (median) | ratio of medians | min ratio | max ratio | rounds | target |"
echo "|---|---|---|---|---|---|---|---|"
for m in "3 ping-pong 64 B, half RTT us|<= 1.05" "4 stream 64 KiB, MB/s|>= 0.95"; do
	n=${m%% *}
	rest=${m#* }
	name=${rest%|*}
	target=${rest#*|}
	a=$(col "$n" A | median)
	b=$(col "$n" B | median)
	ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
	echo "| $name | $a | $b | $ratio | $(range "$n") | $ROUNDS | $target |"
done
echo
} | tee -a "$RESULTS"
