#!/bin/bash
# SPDX-License-Identifier: MIT
#
# compare-python.sh - the Python binding (bench/python-bench.py) against
# rmsg-perf in C, side by side on one machine and transport, alternating
# C, Python (client only), Python (both ends) in every round:
#
#   bench/compare-python.sh [--quick] [tcp|rdma]
#   tests/vm/run-in-vm.sh -t 1200 -- bench/compare-python.sh rdma
#
# Metrics, 64-byte messages (SIZE):
#   rpc_lat    RPC ping-pong, `rmsg-perf -o rpc -m lat` vs `await
#              conn.call()`: median half round trip in us (lat_us, as
#              rmsg-perf prints it; a round trip is twice that)
#   send_rate  one-way stream, `rmsg-perf -o send -m rate` vs `conn.send()`
#              with WINDOW sends outstanding: 10^6 messages per second
# Each metric runs three ways: C client with C server (rmsg-perf both
# ends), the Python client against rmsg-perf's server ("py client"), and
# Python at both ends ("py both"). Prints a markdown table: medians over
# the rounds, the ratio Python / C of the medians and the lowest and
# highest per-round ratio; every raw line goes to the results file.
#
# Environment (defaults in brackets):
#   ROUNDS [5]            rounds (--quick: 1)
#   SIZE [64]             message size
#   LAT_ITERS [20000]     timed round trips per latency run (rdma: 2000)
#   LAT_WARMUP [1000]     untimed round trips first (rdma: 100)
#   RATE_ITERS [50000]    messages per rate run (rdma: 5000)
#   WINDOW [64]           sends outstanding in the rate runs
#   PIN [same]            same: server and client on one CPU (the last),
#                         split: server CPU 0, client CPU 1, none (rdma:
#                         none)
#   PYTHON [/usr/bin/python3]
#   BUILDDIR [top of the tree]  where `make` put .libs/librmsg.so
#   ADDR [127.0.0.1; rdma: $RMSG_TEST_ADDR, else 198.18.0.1]
#   RESULTS [bench/results-python-TRANSPORT.txt; in the VM
#           $RMSG_VM_RESULTS/results-python-rdma.txt]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
quick=0
tr=tcp
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	tcp | rdma) tr=$1 ;;
	-h | --help) sed -n '3,37p' "$0"; exit 0 ;;
	*) echo "compare-python.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
if [ "$tr" = rdma ]; then
	: "${LAT_ITERS:=2000}" "${LAT_WARMUP:=100}" "${RATE_ITERS:=5000}"
	: "${PIN:=none}" "${ADDR:=${RMSG_TEST_ADDR:-198.18.0.1}}"
	ulimit -l unlimited 2> /dev/null
fi
if [ $quick = 1 ]; then
	: "${ROUNDS:=1}" "${LAT_ITERS:=500}" "${LAT_WARMUP:=50}"
	: "${RATE_ITERS:=2000}"
fi
ROUNDS=${ROUNDS:-5}
SIZE=${SIZE:-64}
LAT_ITERS=${LAT_ITERS:-20000}
LAT_WARMUP=${LAT_WARMUP:-1000}
RATE_ITERS=${RATE_ITERS:-50000}
WINDOW=${WINDOW:-64}
PIN=${PIN:-same}
PYTHON=${PYTHON:-/usr/bin/python3}
ADDR=${ADDR:-127.0.0.1}
if [ -n "${RMSG_VM_RESULTS:-}" ]; then
	RESULTS=${RESULTS:-$RMSG_VM_RESULTS/results-python-$tr.txt}
else
	RESULTS=${RESULTS:-$here/results-python-$tr.txt}
fi

# a snapshot of the library, rmsg-perf built against it; the binding
# loads the same copy (RMSG_LIB)
B=$here/build-python
mkdir -p "$B/lib"
lib=${BUILDDIR:-$top}/.libs/librmsg.so
[ -e "$lib" ] || { echo "compare-python.sh: $lib missing: run make" >&2; exit 1; }
cp -L "$lib" "$B/lib/librmsg.so.0"
ln -sf librmsg.so.0 "$B/lib/librmsg.so"
gcc -O2 -I"$top/include" -o "$B/rmsg-perf" "$top/tools/rmsg-perf.c" \
	-L"$B/lib" -Wl,-rpath,"$B/lib" -lrmsg -lev || exit 1
export RMSG_LIB=$B/lib/librmsg.so.0
PERF=$B/rmsg-perf
PYB="$PYTHON $here/python-bench.py"

ncpu=$(nproc)
case $PIN in
same) pin_srv="taskset -c $((ncpu - 1))" pin_cli=$pin_srv ;;
split) pin_srv="taskset -c 0" pin_cli="taskset -c $((ncpu > 1 ? 1 : 0))" ;;
none) pin_srv="" pin_cli="" ;;
*) echo "compare-python.sh: PIN must be same, split or none" >&2; exit 2 ;;
esac

srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2> /dev/null; }
trap cleanup EXIT
port=$((21000 + $$ % 1000))

stop_server() {
	local i
	for i in $(seq 100); do
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.05
	done
	kill "$srv" 2> /dev/null
	wait "$srv" 2> /dev/null
	srv=
}

# run SERVER CLIENT ARGS...: SERVER, CLIENT are "c" or "py"; prints the
# client's result line
run() {
	local s=$1 c=$2 i uri
	shift 2
	port=$((port + 1))
	uri="$tr://$ADDR:$port"
	# emptied here, not by the server's redirection: the loop below
	# could read the previous server's line before the new process
	# truncates the file (a Python server then starts too late)
	: > "$B/srv.out"
	if [ "$s" = c ]; then
		$pin_srv "$PERF" server "$uri" >> "$B/srv.out" 2>&1 &
	else
		$pin_srv $PYB server "$uri" >> "$B/srv.out" 2>&1 &
	fi
	srv=$!
	for i in $(seq 400); do
		grep -q 'server port=' "$B/srv.out" && break
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.05
	done
	if [ "$c" = c ]; then
		timeout 600 $pin_cli "$PERF" -P "$@" client "$uri" 2> "$B/cli.err" |
			tail -1
	else
		timeout 600 $pin_cli $PYB "$@" client "$uri" 2> "$B/cli.err" |
			tail -1
	fi
	stop_server
}

val() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
median() { sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2];
	else printf "%.6g\n", (a[NR/2]+a[NR/2+1])/2 }'; }

{
	echo "# compare-python.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) $tr"
	echo "# librmsg $(cd "$top" && git rev-parse --short HEAD 2> /dev/null || echo unknown)," \
		"$(uname -sr), $ncpu CPUs, PIN=$PIN, rounds=$ROUNDS, size=$SIZE," \
		"lat_iters=$LAT_ITERS warmup=$LAT_WARMUP rate_iters=$RATE_ITERS" \
		"window=$WINDOW, $($PYTHON -V 2>&1)"
	echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$RESULTS"

declare -A v
kinds="c pyc pyp"
for r in $(seq "$ROUNDS"); do
	echo "round $r/$ROUNDS" >&2
	for k in $kinds; do
		case $k in
		c) s=c c=c ;;
		pyc) s=c c=py ;;
		pyp) s=py c=py ;;
		esac
		line=$(run $s $c -o rpc -m lat -s "$SIZE" -n "$LAT_ITERS" \
			-w "$LAT_WARMUP")
		echo "round=$r kind=$k $line" >> "$RESULTS"
		x=$(val "$line" lat_us)
		[ -n "$x" ] || { echo "compare-python.sh: $k rpc_lat gave no result:" \
			"$(tail -n 3 "$B/cli.err" "$B/srv.out")" >&2; exit 1; }
		v[rpc_lat,$k]="${v[rpc_lat,$k]:-} $x"
		line=$(run $s $c -o send -m rate -s "$SIZE" -n "$RATE_ITERS" \
			-W "$WINDOW")
		echo "round=$r kind=$k $line" >> "$RESULTS"
		x=$(val "$line" mmsgs)
		[ -n "$x" ] || { echo "compare-python.sh: $k send_rate gave no result:" \
			"$(tail -n 3 "$B/cli.err" "$B/srv.out")" >&2; exit 1; }
		v[send_rate,$k]="${v[send_rate,$k]:-} $x"
	done
done

# row METRIC KIND LABEL TARGET: Python (KIND) against C, per round
row() {
	local m=$1 k=$2 label=$3 target=$4
	local -a a b
	read -r -a a <<< "${v[$m,c]}"
	read -r -a b <<< "${v[$m,$k]}"
	local ma mb ratios
	ma=$(printf '%s\n' "${a[@]}" | median)
	mb=$(printf '%s\n' "${b[@]}" | median)
	ratios=$(for i in "${!a[@]}"; do
		awk -v x="${b[i]}" -v y="${a[i]}" 'BEGIN{printf "%.4f\n", x/y}'
	done | sort -g)
	awk -v name="$label" -v ma="$ma" -v mb="$mb" -v t="$target" \
		-v lo="$(echo "$ratios" | head -1)" \
		-v hi="$(echo "$ratios" | tail -1)" -v n="${#a[@]}" 'BEGIN{
		printf "| %s | %.4g | %.4g | %.3f | %.3f | %.3f | %d | %s |\n",
			name, ma, mb, mb/ma, lo, hi, n, t }'
}

table=$(
	echo "| metric ($tr) | C (median) | Python (median) | Python / C | min ratio | max ratio | rounds | target |"
	echo "|---|---|---|---|---|---|---|---|"
	row rpc_lat pyc "rpc_lat $SIZE B, half RTT us, py client" "<= 2.5"
	row rpc_lat pyp "rpc_lat $SIZE B, half RTT us, py both" "<= 2.5"
	row send_rate pyc "send_rate $SIZE B, Mmsg/s, py client" "(reported)"
	row send_rate pyp "send_rate $SIZE B, Mmsg/s, py both" "(reported)"
)
echo "$table"
{
	echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "$table"
} >> "$RESULTS"
