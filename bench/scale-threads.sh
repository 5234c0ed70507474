#!/bin/bash
# SPDX-License-Identifier: MIT
#
# scale-threads.sh [tcp|rdma] - one address served by 1 and by 2 loop
# threads (rmsg_listen_group, issue 20): RPC rate and latency with 64
# client connections, and the server's instructions per RPC (callgrind).
# A benchmark, not a test: it asserts nothing.
#
#   bench/scale-threads.sh tcp      # on the host, 127.0.0.1
#   tests/vm/run-in-vm.sh -t 1800 -m 3072 -r /tmp/st -- \
#       $PWD/bench/scale-threads.sh rdma     # in the Soft-RoCE VM
#
# Per round and thread count: a server (scale_threads server -T N), a
# client of CONNS connections on one thread, each making CALLS calls
# after WARMUP, one at a time (CONNS calls in flight). Rounds alternate
# 1 and 2 threads; the table gives the median of each metric. Then, for
# 1 and 2 threads, the server runs under callgrind twice (CG_CALLS and
# 2*CG_CALLS calls per connection): instructions per RPC is the
# difference of the two totals over the difference of the calls it
# served, so start-up and connection set-up cancel (all threads count).
#
# Settings (environment): ROUNDS [5], CONNS [64], CALLS [tcp 2000, rdma
# 200], WARMUP [100], SIZE [64], CG_CALLS [tcp 200, rdma 20],
# RMSG_TEST_ADDR [127.0.0.1, rdma 198.18.0.1], CC [gcc], BUILDDIR [top].
# stdout: a markdown table; raw lines go to $RESULTS
# [bench/results-scale-<transport>.txt] (in the VM pass RESULTS=/mnt/results/...).

set -u
transport=${1:-tcp}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
case $transport in
tcp) ADDR=${RMSG_TEST_ADDR:-127.0.0.1} CALLS=${CALLS:-2000}
	CG_CALLS=${CG_CALLS:-200} ;;
rdma) ADDR=${RMSG_TEST_ADDR:-198.18.0.1} CALLS=${CALLS:-200}
	CG_CALLS=${CG_CALLS:-20}
	ulimit -l unlimited 2> /dev/null ;;
*) echo "usage: $0 [tcp|rdma]" >&2; exit 2 ;;
esac
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-64}
WARMUP=${WARMUP:-100}
SIZE=${SIZE:-64}
CC=${CC:-gcc}
RESULTS=${RESULTS:-$here/results-scale-$transport.txt}
BUILDDIR=${BUILDDIR:-$top}

lib=$BUILDDIR/.libs/librmsg.so
[ -e "$lib" ] || { echo "scale-threads.sh: $lib missing: make first" >&2; exit 1; }
B=$(mktemp -d "${TMPDIR:-/tmp}/scale-threads.XXXXXX") || exit 1
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2> /dev/null; rm -rf "$B"; }
trap cleanup 0
mkdir -p "$B/lib"
cp -L "$lib" "$B/lib/librmsg.so.0"
ln -sf librmsg.so.0 "$B/lib/librmsg.so"
$CC -O2 -g -Wall -I"$top/include" -o "$B/scale_threads" \
	"$here/scale_threads.c" -L"$B/lib" -Wl,-rpath,"$B/lib" -lrmsg -lev \
	-lpthread || exit 1

port=$((20000 + $$ % 10000))
# start_server CMD...: waits for its "ready" line
start_server() {
	port=$((port + 1))
	: > "$B/srv.out" # emptied first: not the last server's line
	"$@" server "$transport://$ADDR:$port" >> "$B/srv.out" 2>&1 &
	srv=$!
	for _ in $(seq 600); do
		grep -q ready "$B/srv.out" && return 0
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.1
	done
	echo "scale-threads.sh: server did not start:" >&2
	cat "$B/srv.out" >&2
	exit 1
}
stop_server() {
	kill -TERM "$srv"
	wait "$srv"
	srv=
}
val() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

{
	echo "# scale-threads.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) $transport"
	echo "# librmsg $(git -C "$top" rev-parse --short HEAD 2> /dev/null)," \
		"$(uname -sr), $(nproc) CPUs, rounds=$ROUNDS, conns=$CONNS," \
		"calls=$CALLS per conn, warmup=$WARMUP, size=$SIZE"
	echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$RESULTS"
for r in $(seq "$ROUNDS"); do
	for t in 1 2; do
		start_server "$B/scale_threads" -T $t
		line=$(timeout 600 "$B/scale_threads" -n "$CONNS" -c "$CALLS" \
			-w "$WARMUP" -s "$SIZE" client "$transport://$ADDR:$port")
		stop_server
		echo "round=$r threads=$t $line" >> "$RESULTS"
		for k in rate p50_us p99_us; do
			val "$line" $k >> "$B/$t.$k"
		done
	done
done

# instructions per RPC: (Ir(2n) - Ir(n)) / (calls(2n) - calls(n))
ir_per_rpc() {
	local t=$1 n ir calls
	for n in "$CG_CALLS" $((2 * CG_CALLS)); do
		start_server valgrind --tool=callgrind \
			--callgrind-out-file="$B/cg.$t.$n" "$B/scale_threads" -T "$t"
		timeout 1200 "$B/scale_threads" -n "$CONNS" -c "$n" -w 1 \
			-s "$SIZE" client "$transport://$ADDR:$port" > /dev/null ||
			{ echo "scale-threads.sh: callgrind client failed" >&2; exit 1; }
		stop_server
		calls=$(sed -n 's/^calls=//p' "$B/srv.out")
		ir=$(sed -n 's/^summary: *//p' "$B/cg.$t.$n")
		echo "callgrind threads=$t calls=$calls ir=$ir" >> "$RESULTS"
		echo "$calls $ir"
	done | awk '{ c[NR] = $1; i[NR] = $2 }
		END { printf "%.0f", (i[2] - i[1]) / (c[2] - c[1]) }'
}
command -v valgrind > /dev/null && for t in 1 2; do
	ir_per_rpc $t > "$B/$t.ir"
done

echo "| $transport, $CONNS connections, $SIZE B RPC | 1 thread | 2 threads | 2 / 1 |"
echo "| --- | --- | --- | --- |"
for k in rate p50_us p99_us ir; do
	case $k in
	rate) name="RPC rate (calls/s)" ;;
	p50_us) name="latency p50 (µs)" ;;
	p99_us) name="latency p99 (µs)" ;;
	ir) name="server instructions per RPC" ;;
	esac
	[ -s "$B/1.$k" ] || continue
	a=$(median < "$B/1.$k")
	b=$(median < "$B/2.$k")
	echo "| $name | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }') |"
done | tee -a "$RESULTS"
