#!/bin/bash
# SPDX-License-Identifier: MIT
#
# compare-tcp.sh - librmsg over tcp:// (tools/rmsg-perf) against the raw
# libev TCP baselines, side by side on 127.0.0.1, alternating A B A B ...;
# and librmsg's fd mode (rmsg-perf -L epoll: rmsg_ctx_create_fd, an
# epoll_wait loop, rmsg_ctx_progress) against its libev mode (-L ev), the
# same way, in the same run (a second table); and librmsg against ZeroMQ
# (bench/zmq_bench.c, libzmq, default socket options on both sides: PAIR
# ping-pong, PUSH/PULL message rate and stream), a third table; and
# librmsg against nng (bench/nng_bench.c, libnng, defaults: PAIR
# ping-pong, PUSH/PULL rate and stream), a fourth; and busy polling
# (rmsg-perf -b) against a raw spinning ping-pong, a fifth
#
#   bench/compare-tcp.sh [--quick] [--rounds N]
#
# Needs a built tree (`make` at the top). Prints a markdown table on
# stdout; every raw line, the table and the callgrind profile go to
# bench/results-tcp.txt. See bench/README.md for the method.
#
# Environment (defaults in brackets):
#   ROUNDS [7]            A/B rounds (at least 5 for real numbers)
#   PING_SIZE [64]        ping-pong message size
#   PING_ITERS [20000]    timed round trips per ping-pong run
#   PING_WARMUP [1000]    untimed round trips first
#   STREAM_SIZE [65536]   stream message size
#   STREAM_BYTES [1000000000] bytes per stream run (whole messages)
#   STREAM_WINDOW [16]    rmsg-perf -W: sends outstanding in the stream
#   STREAM_CREDITS []     rmsg-perf -c for the stream's server (credits it
#                         grants); empty: the library's default (32)
#   STREAM_EQ_CREDITS [768 KiB / STREAM_SIZE, at least 4]  credits of a
#                         second librmsg stream run per round, with as many
#                         bytes in flight as raw_stream's window (768 KiB);
#                         0 skips it
#   CG_ITERS [2000]       callgrind runs use CG_ITERS and 2*CG_ITERS
#   CG_ROUNDS [2]         callgrind pairs (the figure should not move)
#   FD_COMPARE [1]        0 skips the fd mode against libev mode table
#   FD_RATE_ITERS [200000] messages per message-rate run (64 B sends,
#                         rmsg-perf -m rate, its default window of 64)
#   ZMQ_COMPARE [1]       0 skips the librmsg against ZeroMQ table (it
#                         needs libzmq3-dev)
#   ZMQ_RATE_MSGS [200000] 64 B messages per rate run, both sides
#   BUSY_COMPARE [1]      0 skips the busy-polling table: rmsg-perf -b
#                         BUSY_US on both ends against raw_pingpong -s
#                         (both spin on non-blocking read/write), the two
#                         ends always on CPUs 0 and 1 (spinning needs one
#                         each); skipped on one CPU
#   BUSY_US [1000]        the busy-poll time of that table
#   NNG_COMPARE [1]       0 skips the librmsg against nng table (it
#                         needs libnng-dev); nng's rate runs use
#                         ZMQ_RATE_MSGS too
#   PIN [same]            same: server and client on one CPU (BENCH_CPU);
#                         split: server CPU 0, client CPU 1; none
#   BENCH_CPU [last CPU]  the CPU for PIN=same
#   BUILDDIR [top of the tree]  where `make` put .libs/librmsg.so
#   RESULTS [bench/results-tcp.txt]
#   CC [gcc]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
quick=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--rounds) ROUNDS=$2; shift ;;
	-h | --help) sed -n '3,59p' "$0"; exit 0 ;;
	*) echo "compare-tcp.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
if [ $quick = 1 ]; then
	: "${ROUNDS:=1}" "${PING_ITERS:=2000}" "${PING_WARMUP:=200}"
	: "${STREAM_BYTES:=67108864}" "${CG_ITERS:=200}" "${CG_ROUNDS:=1}"
	: "${FD_RATE_ITERS:=20000}" "${ZMQ_RATE_MSGS:=20000}"
fi
ROUNDS=${ROUNDS:-7}
PING_SIZE=${PING_SIZE:-64}
PING_ITERS=${PING_ITERS:-20000}
PING_WARMUP=${PING_WARMUP:-1000}
STREAM_SIZE=${STREAM_SIZE:-65536}
STREAM_BYTES=${STREAM_BYTES:-1000000000}
STREAM_WINDOW=${STREAM_WINDOW:-16}
# raw_stream's default window is 768 KiB of unacknowledged bytes
eq=$((768 * 1024 / STREAM_SIZE))
STREAM_EQ_CREDITS=${STREAM_EQ_CREDITS:-$((eq < 4 ? 4 : eq))}
CG_ITERS=${CG_ITERS:-2000}
CG_ROUNDS=${CG_ROUNDS:-2}
FD_COMPARE=${FD_COMPARE:-1}
FD_RATE_ITERS=${FD_RATE_ITERS:-200000}
ZMQ_COMPARE=${ZMQ_COMPARE:-1}
ZMQ_RATE_MSGS=${ZMQ_RATE_MSGS:-200000}
NNG_COMPARE=${NNG_COMPARE:-1}
BUSY_COMPARE=${BUSY_COMPARE:-1}
BUSY_US=${BUSY_US:-1000}
PIN=${PIN:-same}
ncpu=$(nproc)
[ "$ncpu" -gt 1 ] || BUSY_COMPARE=0
BENCH_CPU=${BENCH_CPU:-$((ncpu - 1))}
RESULTS=${RESULTS:-$here/results-tcp.txt}
CC=${CC:-gcc}
HOST=127.0.0.1

# ---- build -------------------------------------------------------------
# The library is copied into bench/build/lib first, so a concurrent
# rebuild of the tree cannot change it between rounds.
BUILDDIR=${BUILDDIR:-$top}
lib=$BUILDDIR/.libs/librmsg.so
if [ ! -e "$lib" ]; then
	echo "compare-tcp.sh: $lib missing: run ./configure && make at the top" >&2
	exit 1
fi
build=$here/build
mkdir -p "$build/lib"
cp -L "$lib" "$build/lib/librmsg.so.0"
ln -sf librmsg.so.0 "$build/lib/librmsg.so"
cflags="-O2 -g -Wall -Wextra -Wno-unused-parameter"
$CC $cflags -o "$build/raw_pingpong" "$here/raw_pingpong.c" -lev
$CC $cflags -o "$build/raw_stream" "$here/raw_stream.c" -lev
if [ "$ZMQ_COMPARE" = 1 ]; then
	if ! $CC $cflags -o "$build/zmq_bench" "$here/zmq_bench.c" -lzmq; then
		echo "compare-tcp.sh: cannot build zmq_bench.c: install" \
			"libzmq3-dev, or ZMQ_COMPARE=0" >&2
		exit 1
	fi
fi
if [ "$NNG_COMPARE" = 1 ]; then
	if ! $CC $cflags -o "$build/nng_bench" "$here/nng_bench.c" -lnng; then
		echo "compare-tcp.sh: cannot build nng_bench.c: install" \
			"libnng-dev, or NNG_COMPARE=0" >&2
		exit 1
	fi
fi
$CC $cflags -I"$top/include" -o "$build/rmsg-perf" "$top/tools/rmsg-perf.c" \
	-L"$build/lib" -Wl,-rpath,"$build/lib" -lrmsg -lev
# rmsg-perf sends whole messages: BYTES rounded up, as raw_stream does
stream_msgs=$(((STREAM_BYTES + STREAM_SIZE - 1) / STREAM_SIZE))

# ---- helpers -----------------------------------------------------------
srv_pid=
tmp=$build/client.out
cleanup() {
	if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
		kill "$srv_pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT

case $PIN in
same) pin_srv="taskset -c $BENCH_CPU" pin_cli="taskset -c $BENCH_CPU" ;;
split) pin_srv="taskset -c 0" pin_cli="taskset -c $((ncpu > 1 ? 1 : 0))" ;;
none) pin_srv="" pin_cli="" ;;
*) echo "compare-tcp.sh: PIN must be same, split or none" >&2; exit 2 ;;
esac

# below the ephemeral range (32768 up), so no client's local port takes
# the next server's; a port any socket still uses is skipped
port=$((20000 + $$ % 10000))
listening() {
	ss -Htan "sport = :$1" 2>/dev/null | grep -q .
}
next_port() {
	port=$((port + 1))
	while listening $port; do port=$((port + 1)); done
}

# start_server CMD...: a fresh server on $port, waits until it listens
start_server() {
	"$@" >>"$build/server.log" 2>&1 &
	srv_pid=$!
	local i
	for i in $(seq 200); do
		listening $port && return 0
		if ! kill -0 "$srv_pid" 2>/dev/null; then
			echo "compare-tcp.sh: server died: $*" >&2
			tail -5 "$build/server.log" >&2
			exit 1
		fi
		sleep 0.05
	done
	echo "compare-tcp.sh: server never listened on $port: $*" >&2
	exit 1
}

# stop_server: it exits by itself once its client left; else kill it
stop_server() {
	local i
	for i in $(seq 100); do
		kill -0 "$srv_pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$srv_pid" 2>/dev/null; then
		kill "$srv_pid" 2>/dev/null || true
	fi
	wait "$srv_pid" 2>/dev/null || true
	srv_pid=
}

# run KIND: one client run against a fresh server; its line goes to $out
# (no command substitution: the server stays a child of this shell)
run() {
	local kind=$1
	next_port
	case $kind in
	rmsg_pingpong)
		start_server $pin_srv "$build/rmsg-perf" server "tcp://$HOST:$port" ;;
	rmsg_stream)
		start_server $pin_srv "$build/rmsg-perf" \
			${STREAM_CREDITS:+-c "$STREAM_CREDITS"} \
			server "tcp://$HOST:$port" ;;
	rmsg_stream_eq)
		start_server $pin_srv "$build/rmsg-perf" \
			-c "$STREAM_EQ_CREDITS" server "tcp://$HOST:$port" ;;
	raw_pingpong)
		start_server $pin_srv "$build/raw_pingpong" server $port ;;
	raw_stream)
		start_server $pin_srv "$build/raw_stream" server $port ;;
	esac
	case $kind in
	rmsg_pingpong)
		$pin_cli "$build/rmsg-perf" -P -o send -m lat -s "$PING_SIZE" \
			-n "$PING_ITERS" -w "$PING_WARMUP" \
			client "tcp://$HOST:$port" >"$tmp" ;;
	raw_pingpong)
		$pin_cli "$build/raw_pingpong" -w "$PING_WARMUP" client \
			$HOST $port "$PING_SIZE" "$PING_ITERS" >"$tmp" ;;
	rmsg_stream | rmsg_stream_eq)
		$pin_cli "$build/rmsg-perf" -P -o send -m bw -s "$STREAM_SIZE" \
			-n "$stream_msgs" -W "$STREAM_WINDOW" \
			client "tcp://$HOST:$port" >"$tmp" ;;
	raw_stream)
		$pin_cli "$build/raw_stream" client $HOST $port \
			"$STREAM_SIZE" "$STREAM_BYTES" >"$tmp" ;;
	esac
	out=$(tail -1 "$tmp")
	stop_server
}

# run_busy KIND: a busy-polling ping-pong, the ends on CPUs 0 and 1;
# KIND rmsg (rmsg-perf -b BUSY_US on both) or raw (raw_pingpong -s); its
# line goes to $out
run_busy() {
	next_port
	if [ "$1" = rmsg ]; then
		start_server taskset -c 0 "$build/rmsg-perf" -b "$BUSY_US" \
			server "tcp://$HOST:$port"
		taskset -c 1 "$build/rmsg-perf" -b "$BUSY_US" -P -o send \
			-m lat -s "$PING_SIZE" -n "$PING_ITERS" \
			-w "$PING_WARMUP" client "tcp://$HOST:$port" >"$tmp"
	else
		start_server taskset -c 0 "$build/raw_pingpong" -s server $port
		taskset -c 1 "$build/raw_pingpong" -s -w "$PING_WARMUP" \
			client $HOST $port "$PING_SIZE" "$PING_ITERS" >"$tmp"
	fi
	out=$(tail -1 "$tmp")
	stop_server
}

# run_mode LOOP WHAT: rmsg-perf with both ends in loop mode LOOP (-L ev
# or -L epoll); WHAT: send_lat, rpc_lat (ping-pong as above) or rate;
# its line goes to $out
run_mode() {
	local l=$1 what=$2
	next_port
	start_server $pin_srv "$build/rmsg-perf" -L "$l" server "tcp://$HOST:$port"
	case $what in
	send_lat | rpc_lat)
		$pin_cli "$build/rmsg-perf" -L "$l" -P -o "${what%_lat}" -m lat \
			-s "$PING_SIZE" -n "$PING_ITERS" -w "$PING_WARMUP" \
			client "tcp://$HOST:$port" >"$tmp" ;;
	rate)
		$pin_cli "$build/rmsg-perf" -L "$l" -P -o send -m rate \
			-s "$PING_SIZE" -n "$FD_RATE_ITERS" \
			client "tcp://$HOST:$port" >"$tmp" ;;
	esac
	out=$(tail -1 "$tmp")
	stop_server
	if [ "$(field "$out" loop)" != "$l" ]; then
		echo "compare-tcp.sh: not a -L $l line: $out" >&2
		exit 1
	fi
}

# fd_pair WHAT KEY: one run of each loop mode, the order alternating
# with the round (odd: libev first); KEY's value into fa (epoll), fb (ev)
fd_pair() {
	local what=$1 key=$2 l order="ev epoll"
	[ $((r % 2)) = 1 ] || order="epoll ev"
	for l in $order; do
		run_mode "$l" "$what"
		echo "round=$r $out" >>"$RESULTS"
		if [ "$l" = epoll ]; then
			fa=$(field "$out" "$key")
		else
			fb=$(field "$out" "$key")
		fi
	done
}

# run_zmq KIND: one run of the librmsg against ZeroMQ table, its line to
# $out. KIND: rmsg_lat, rmsg_rate, rmsg_stream (rmsg-perf, default
# credits and window), zmq_lat (PAIR), zmq_rate, zmq_stream (PUSH/PULL;
# the PULL server counts and writes the line once it has every message)
run_zmq() {
	local kind=$1 zout=$build/zmq-server.out i zb
	zb=$build/${kind%%_*}_bench # zmq_bench or nng_bench
	next_port
	# nng_bench's puller answers on PORT+1: keep that one free too
	case $kind in nng_*) listening $((port + 1)) && next_port ;; esac
	rm -f "$zout"
	case $kind in
	rmsg_*)
		start_server $pin_srv "$build/rmsg-perf" server "tcp://$HOST:$port" ;;
	zmq_lat | nng_lat)
		start_server $pin_srv "$zb" server pair $port ;;
	zmq_rate | nng_rate)
		start_server $pin_srv "$zb" -o "$zout" \
			server pull $port "$PING_SIZE" "$ZMQ_RATE_MSGS" ;;
	zmq_stream | nng_stream)
		start_server $pin_srv "$zb" -o "$zout" \
			server pull $port "$STREAM_SIZE" "$stream_msgs" ;;
	esac
	case $kind in
	rmsg_lat)
		$pin_cli "$build/rmsg-perf" -P -o send -m lat -s "$PING_SIZE" \
			-n "$PING_ITERS" -w "$PING_WARMUP" \
			client "tcp://$HOST:$port" >"$tmp" ;;
	rmsg_rate)
		$pin_cli "$build/rmsg-perf" -P -o send -m rate -s "$PING_SIZE" \
			-n "$ZMQ_RATE_MSGS" client "tcp://$HOST:$port" >"$tmp" ;;
	rmsg_stream)
		$pin_cli "$build/rmsg-perf" -P -o send -m bw -s "$STREAM_SIZE" \
			-n "$stream_msgs" client "tcp://$HOST:$port" >"$tmp" ;;
	zmq_lat | nng_lat)
		$pin_cli "$zb" -w "$PING_WARMUP" client pair \
			$HOST $port "$PING_SIZE" "$PING_ITERS" >"$tmp" ;;
	zmq_rate | nng_rate)
		$pin_cli "$zb" client push $HOST $port \
			"$PING_SIZE" "$ZMQ_RATE_MSGS" >"$tmp" ;;
	zmq_stream | nng_stream)
		$pin_cli "$zb" client push $HOST $port \
			"$STREAM_SIZE" "$stream_msgs" >"$tmp" ;;
	esac
	case $kind in
	zmq_rate | zmq_stream | nng_rate | nng_stream)
		# the pusher is gone once TCP has the messages; the puller
		# still drains them: up to a minute before stop_server
		for i in $(seq 1200); do
			[ -s "$zout" ] && break
			kill -0 "$srv_pid" 2>/dev/null || break
			sleep 0.05
		done
		stop_server
		if [ ! -s "$zout" ]; then
			echo "compare-tcp.sh: ${zb##*/} server pull wrote no" \
				"result ($kind)" >&2
			exit 1
		fi
		out=$(tail -1 "$zout") ;;
	*)
		out=$(tail -1 "$tmp")
		stop_server ;;
	esac
}

# zmq_pair WHAT KEY: librmsg and ZeroMQ runs of WHAT (lat, rate, stream),
# the order alternating with the round (odd: librmsg first); KEY's value
# into za (librmsg), zb (ZeroMQ)
zmq_pair() {
	local what=$1 key=$2 k order="rmsg zmq"
	[ $((r % 2)) = 1 ] || order="zmq rmsg"
	for k in $order; do
		run_zmq "${k}_$what"
		echo "round=$r zmq_table $out" >>"$RESULTS"
		if [ "$k" = rmsg ]; then
			za=$(field "$out" "$key")
		else
			zb=$(field "$out" "$key")
		fi
	done
}

# nng_pair WHAT KEY: as zmq_pair, against nng; into na (librmsg), nb (nng)
nng_pair() {
	local what=$1 key=$2 k order="rmsg nng"
	[ $((r % 2)) = 1 ] || order="nng rmsg"
	for k in $order; do
		run_zmq "${k}_$what"
		echo "round=$r nng_table $out" >>"$RESULTS"
		if [ "$k" = rmsg ]; then
			na=$(field "$out" "$key")
		else
			nb=$(field "$out" "$key")
		fi
	done
}

# field LINE KEY: the value of KEY=... in a result line
field() {
	local v
	v=$(printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p")
	if [ -z "$v" ]; then
		echo "compare-tcp.sh: no $2= in: $1" >&2
		exit 1
	fi
	echo "$v"
}

# callgrind_ir KIND ITERS PREFIX: client instructions inside ev_run(),
# into $ir; rmsg-perf sorts its round-trip times inside ev_run() (it
# reports from a callback), so collection also toggles off in qsort().
# KIND rmsg_epoll: both ends with -L epoll; the client's instructions
# inside rmsg-perf's own loop, epoll_loop(), which holds its epoll_wait()
# and every rmsg_ctx_progress() (and so the context's private loop)
callgrind_ir() {
	local kind=$1 iters=$2 f=$3.out
	next_port
	if [ "$kind" = rmsg ] || [ "$kind" = rmsg_epoll ]; then
		local l=ev top=ev_run
		[ "$kind" = rmsg ] || l=epoll top=epoll_loop
		start_server $pin_srv "$build/rmsg-perf" -L $l \
			server "tcp://$HOST:$port"
		$pin_cli valgrind --tool=callgrind --toggle-collect=$top \
			--toggle-collect=qsort \
			--callgrind-out-file="$f" "$build/rmsg-perf" -P -L $l \
			-o send -m lat -s "$PING_SIZE" -n "$iters" -w 100 \
			client "tcp://$HOST:$port" \
			>/dev/null 2>>"$build/callgrind.log"
	else
		start_server $pin_srv "$build/raw_pingpong" server $port
		$pin_cli valgrind --tool=callgrind --toggle-collect=ev_run \
			--callgrind-out-file="$f" "$build/raw_pingpong" -w 100 \
			client $HOST $port "$PING_SIZE" "$iters" \
			>/dev/null 2>>"$build/callgrind.log"
	fi
	stop_server
	ir=$(sed -n 's/^summary: *//p' "$f")
	[ -n "$ir" ] || { echo "compare-tcp.sh: no total in $f" >&2; exit 1; }
}

# per-function instructions per round trip: (profile(2N) - profile(N)) / N
cg_top() {
	local a=$1 b=$2 n=$3 count=$4
	for f in "$a" "$b"; do
		callgrind_annotate --threshold=100 --auto=no --show-percs=no \
			"$f" 2>/dev/null |
			awk -v tag="$f" '/^ *[0-9,]+  /{ v=$1; gsub(",","",v);
				$1=""; sub(/^ +/,""); print tag "\t" v "\t" $0 }'
	done | awk -F'\t' -v a="$a" -v n="$n" -v count="$count" '
		{ if ($1 == a) lo[$3] += $2; else hi[$3] += $2; k[$3] = 1 }
		END { for (f in k) { d = (hi[f] - lo[f]) / n;
			if (d >= 0.5) printf "%10.1f  %s\n", d, f } }' |
		sort -rn | head -"$count"
}

# cg_diff A1 A2 B1 B2 N COUNT: per function, instructions per round trip
# of profile pair A minus those of pair B, the largest differences
# either way (what the fd mode adds to, or saves on, the libev mode)
cg_diff() {
	{
		cg_top "$1" "$2" "$5" 100000 | sed 's/^/A\t/'
		cg_top "$3" "$4" "$5" 100000 | sed 's/^/B\t/'
	} | awk -F'\t' '{ v = $2; f = $2; sub(/^ *[-0-9.]+  /, "", f)
		sub(/^ */, "", v); sub(/ .*/, "", v)
		if (f ~ /^PROGRAM TOTALS/) next
		if ($1 == "A") d[f] += v; else d[f] -= v }
		END { for (f in d) if (d[f] >= 0.5 || d[f] <= -0.5)
			printf "%+10.1f  %s\n", d[f], f }' |
		sort -gr | awk -v c="$6" '{ l[NR] = $0 } END {
			for (i = 1; i <= NR; i++)
				if (i <= c || i > NR - c / 2) print l[i] }'
}

# the same, summed per object file (inlined code counts under its file)
cg_by_object() {
	cg_top "$1" "$2" "$3" 1000 | awk '$2 != "PROGRAM" {
		v = $1; $1 = ""; o = $0; sub(/^ +/, "", o)
		if (match(o, /\[[^]]*\]$/)) o = substr(o, RSTART + 1, RLENGTH - 2)
		else { sub(/:.*/, "", o); o = o " (inlined)" }
		n = split(o, p, "/"); sum[p[n]] += v }
		END { for (k in sum) printf "%10.1f  %s\n", sum[k], k }' |
		sort -rn
}

# other processes using CPU now: they make the timed figures noisy;
# the warning goes to stdout (the results file) and to stderr
busy() {
	local w
	w=$(busy_list)
	[ -z "$w" ] || { echo "$w"; echo "$w" >&2; }
}
busy_list() {
	ps -eo pcpu=,pid=,comm= --sort=-pcpu 2>/dev/null |
		awk -v me=$$ '$1 >= 10 && $2 != me {
			print "# warning: busy process " $3 " (pid " $2 ", " $1 "% CPU)" }' |
		grep -v -e compare-tcp -e rmsg-perf -e raw_pingpong -e raw_stream \
			-e zmq_bench -e nng_bench -e ZMQbg \
			-e valgrind -e callgrind || true
}

median() { sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2];
	else printf "%.6g\n", (a[NR/2]+a[NR/2+1])/2 }'; }

# ---- run -----------------------------------------------------------------
rev=$(cd "$top" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(cd "$top" && git status --porcelain -- src include 2>/dev/null |
	grep -q . && echo "+dirty" || true)
{
	echo "# compare-tcp.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "# librmsg $rev$dirty, $(uname -sr), $ncpu CPUs, PIN=$PIN" \
		"(cpu $BENCH_CPU), rounds=$ROUNDS"
	echo "# ping-pong: size=$PING_SIZE iters=$PING_ITERS warmup=$PING_WARMUP;" \
		"stream: size=$STREAM_SIZE bytes=$STREAM_BYTES" \
		"window=$STREAM_WINDOW credits=${STREAM_CREDITS:-default}" \
		"eq_credits=$STREAM_EQ_CREDITS"
	echo "# tcp_congestion_control=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)"
	echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	busy
} >"$RESULTS"
: >"$build/server.log"
: >"$build/callgrind.log"

lat_a=() lat_b=() bw_a=() bw_b=() bw_e=()
# fd mode (epoll) against libev mode (ev): send and rpc ping-pong, rate
fsl_a=() fsl_b=() frl_a=() frl_b=() frt_a=() frt_b=()
# librmsg against ZeroMQ: ping-pong, rate, stream
zl_a=() zl_b=() zr_a=() zr_b=() zs_a=() zs_b=()
# librmsg against nng: the same three
nl_a=() nl_b=() nr_a=() nr_b=() ns_a=() ns_b=()
# busy polling: rmsg-perf -b against raw_pingpong -s
bl_a=() bl_b=()
for r in $(seq "$ROUNDS"); do
	echo "round $r/$ROUNDS" >&2
	run rmsg_pingpong; la=$out
	run raw_pingpong; lb=$out
	run rmsg_stream; sa=$out
	run raw_stream; sb=$out
	printf 'round=%d %s\nround=%d %s\nround=%d %s\nround=%d %s\n' \
		"$r" "$la" "$r" "$lb" "$r" "$sa" "$r" "$sb" >>"$RESULTS"
	if [ "$STREAM_EQ_CREDITS" -gt 0 ]; then
		run rmsg_stream_eq; se=$out
		echo "round=$r eq_credits=$STREAM_EQ_CREDITS $se" >>"$RESULTS"
		bw_e+=("$(field "$se" mbps)")
	fi
	lat_a+=("$(field "$la" lat_us)")
	lat_b+=("$(field "$lb" lat_us)")
	bw_a+=("$(field "$sa" mbps)")
	bw_b+=("$(field "$sb" mbps)")
	if [ "$FD_COMPARE" = 1 ]; then
		fd_pair send_lat lat_us; fsl_a+=("$fa"); fsl_b+=("$fb")
		fd_pair rpc_lat lat_us; frl_a+=("$fa"); frl_b+=("$fb")
		fd_pair rate mmsgs; frt_a+=("$fa"); frt_b+=("$fb")
	fi
	if [ "$ZMQ_COMPARE" = 1 ]; then
		zmq_pair lat lat_us; zl_a+=("$za"); zl_b+=("$zb")
		zmq_pair rate mmsgs; zr_a+=("$za"); zr_b+=("$zb")
		zmq_pair stream mbps; zs_a+=("$za"); zs_b+=("$zb")
	fi
	if [ "$BUSY_COMPARE" = 1 ]; then
		run_busy rmsg; ba=$out
		run_busy raw; bb=$out
		echo "round=$r busy_us=$BUSY_US $ba" >>"$RESULTS"
		echo "round=$r spin $bb" >>"$RESULTS"
		bl_a+=("$(field "$ba" lat_us)")
		bl_b+=("$(field "$bb" lat_us)")
	fi
	if [ "$NNG_COMPARE" = 1 ]; then
		nng_pair lat lat_us; nl_a+=("$na"); nl_b+=("$nb")
		nng_pair rate mmsgs; nr_a+=("$na"); nr_b+=("$nb")
		nng_pair stream mbps; ns_a+=("$na"); ns_b+=("$nb")
	fi
done

# instructions per round trip
have_cg=0
if command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null
then
	have_cg=1
	ins_a=() ins_b=() ins_f=()
	cgdir=$build/callgrind
	mkdir -p "$cgdir"
	n2=$((CG_ITERS * 2))
	for r in $(seq "$CG_ROUNDS"); do
		echo "callgrind $r/$CG_ROUNDS" >&2
		callgrind_ir rmsg "$CG_ITERS" "$cgdir/rmsg-$r-$CG_ITERS"; a1=$ir
		callgrind_ir rmsg "$n2" "$cgdir/rmsg-$r-$n2"; a2=$ir
		callgrind_ir raw "$CG_ITERS" "$cgdir/raw-$r-$CG_ITERS"; b1=$ir
		callgrind_ir raw "$n2" "$cgdir/raw-$r-$n2"; b2=$ir
		ia=$(awk -v x="$a1" -v y="$a2" -v n="$CG_ITERS" \
			'BEGIN{printf "%.1f", (y-x)/n}')
		ib=$(awk -v x="$b1" -v y="$b2" -v n="$CG_ITERS" \
			'BEGIN{printf "%.1f", (y-x)/n}')
		echo "round=$r callgrind rmsg Ir($CG_ITERS)=$a1 Ir($n2)=$a2" \
			"per_rt=$ia; raw Ir($CG_ITERS)=$b1 Ir($n2)=$b2" \
			"per_rt=$ib" >>"$RESULTS"
		ins_a+=("$ia")
		ins_b+=("$ib")
		if [ "$FD_COMPARE" = 1 ]; then
			callgrind_ir rmsg_epoll "$CG_ITERS" \
				"$cgdir/rmsg_epoll-$r-$CG_ITERS"; f1=$ir
			callgrind_ir rmsg_epoll "$n2" "$cgdir/rmsg_epoll-$r-$n2"
			f2=$ir
			ifd=$(awk -v x="$f1" -v y="$f2" -v n="$CG_ITERS" \
				'BEGIN{printf "%.1f", (y-x)/n}')
			echo "round=$r callgrind rmsg -L epoll Ir($CG_ITERS)=$f1" \
				"Ir($n2)=$f2 per_rt=$ifd" >>"$RESULTS"
			ins_f+=("$ifd")
		fi
	done
fi

# row NAME UNIT TARGET A[] B[]: medians, ratio of medians, min/max ratio
row() {
	local name=$1 target=$2 n=$3
	shift 3
	local a=("${@:1:n}") b=("${@:n+1:n}")
	local ma mb
	ma=$(printf '%s\n' "${a[@]}" | median)
	mb=$(printf '%s\n' "${b[@]}" | median)
	local ratios
	ratios=$(for i in $(seq 0 $((n - 1))); do
		awk -v x="${a[i]}" -v y="${b[i]}" 'BEGIN{printf "%.4f\n", x/y}'
	done | sort -g)
	awk -v name="$name" -v ma="$ma" -v mb="$mb" -v t="$target" \
		-v lo="$(echo "$ratios" | head -1)" \
		-v hi="$(echo "$ratios" | tail -1)" -v n="$n" 'BEGIN{
		printf "| %s | %.4g | %.4g | %.3f | %.3f | %.3f | %d | %s |\n",
			name, ma, mb, ma/mb, lo, hi, n, t }'
}

# fd_row NAME TARGET N A[] B[]: as row, and the median of the per-round
# ratios (each round's A over the same round's B)
fd_row() {
	local name=$1 target=$2 n=$3
	shift 3
	local a=("${@:1:n}") b=("${@:n+1:n}")
	local ma mb ratios
	ma=$(printf '%s\n' "${a[@]}" | median)
	mb=$(printf '%s\n' "${b[@]}" | median)
	ratios=$(for i in $(seq 0 $((n - 1))); do
		awk -v x="${a[i]}" -v y="${b[i]}" 'BEGIN{printf "%.4f\n", x/y}'
	done | sort -g)
	awk -v name="$name" -v ma="$ma" -v mb="$mb" -v t="$target" \
		-v md="$(echo "$ratios" | median)" \
		-v lo="$(echo "$ratios" | head -1)" \
		-v hi="$(echo "$ratios" | tail -1)" -v n="$n" 'BEGIN{
		printf "| %s | %.4g | %.4g | %.3f | %.3f | %.3f | %.3f | %d | %s |\n",
			name, ma, mb, ma/mb, md, lo, hi, n, t }'
}

table=$(
	echo "| metric | librmsg (median) | raw (median) | ratio of medians | min ratio | max ratio | rounds | target |"
	echo "|---|---|---|---|---|---|---|---|"
	row "ping-pong ${PING_SIZE} B, half RTT, us" "<= 1.10" \
		"$ROUNDS" "${lat_a[@]}" "${lat_b[@]}"
	cr=${STREAM_CREDITS:-32 (default)}
	row "stream $((STREAM_SIZE / 1024)) KiB, MB/s, $cr credits" \
		">= 0.95" "$ROUNDS" "${bw_a[@]}" "${bw_b[@]}"
	if [ "$STREAM_EQ_CREDITS" -gt 0 ]; then
		row "stream $((STREAM_SIZE / 1024)) KiB, MB/s, $STREAM_EQ_CREDITS credits ($((STREAM_EQ_CREDITS * STREAM_SIZE / 1024)) KiB in flight, raw: 768 KiB)" \
			"(same in flight)" "$ROUNDS" "${bw_e[@]}" "${bw_b[@]}"
	fi
	if [ $have_cg = 1 ]; then
		row "instructions per ${PING_SIZE} B round trip (client)" \
			"<= 1.5" "$CG_ROUNDS" "${ins_a[@]}" "${ins_b[@]}"
	fi
)
fd_table=
if [ "$FD_COMPARE" = 1 ]; then
	fd_table=$(
		echo "| metric | fd mode (median) | libev mode (median) | ratio of medians | median ratio | min ratio | max ratio | rounds | target |"
		echo "|---|---|---|---|---|---|---|---|---|"
		fd_row "fd mode: send ping-pong ${PING_SIZE} B, half RTT, us" \
			"<= 1.05" "$ROUNDS" "${fsl_a[@]}" "${fsl_b[@]}"
		fd_row "fd mode: rpc ping-pong ${PING_SIZE} B, half RTT, us" \
			"<= 1.05" "$ROUNDS" "${frl_a[@]}" "${frl_b[@]}"
		fd_row "fd mode: send rate ${PING_SIZE} B, Mmsg/s" \
			"(none)" "$ROUNDS" "${frt_a[@]}" "${frt_b[@]}"
		if [ $have_cg = 1 ]; then
			fd_row "fd mode: instructions per ${PING_SIZE} B round trip (client)" \
				"(none)" "$CG_ROUNDS" "${ins_f[@]}" "${ins_a[@]}"
		fi
	)
	table=$(printf '%s\n\n%s\n' "$table" "$fd_table")
fi
if [ "$ZMQ_COMPARE" = 1 ]; then
	zmq_table=$(
		echo "librmsg against ZeroMQ (defaults on both sides)"
		echo
		echo "| metric | librmsg (median) | ZeroMQ (median) | ratio of medians | median ratio | min ratio | max ratio | rounds | target |"
		echo "|---|---|---|---|---|---|---|---|---|"
		fd_row "zmq: ping-pong ${PING_SIZE} B, half RTT, us (send -m lat / PAIR)" \
			"(none)" "$ROUNDS" "${zl_a[@]}" "${zl_b[@]}"
		fd_row "zmq: rate ${PING_SIZE} B, Mmsg/s (send -m rate / PUSH-PULL)" \
			">= 1.5" "$ROUNDS" "${zr_a[@]}" "${zr_b[@]}"
		fd_row "zmq: stream $((STREAM_SIZE / 1024)) KiB, MB/s (send -m bw / PUSH-PULL)" \
			"(none)" "$ROUNDS" "${zs_a[@]}" "${zs_b[@]}"
	)
	table=$(printf '%s\n\n%s\n' "$table" "$zmq_table")
fi
if [ "$NNG_COMPARE" = 1 ]; then
	nng_table=$(
		echo "librmsg against nng (defaults on both sides)"
		echo
		echo "| metric | librmsg (median) | nng (median) | ratio of medians | median ratio | min ratio | max ratio | rounds | target |"
		echo "|---|---|---|---|---|---|---|---|---|"
		fd_row "nng: ping-pong ${PING_SIZE} B, half RTT, us (send -m lat / PAIR)" \
			"(none)" "$ROUNDS" "${nl_a[@]}" "${nl_b[@]}"
		fd_row "nng: rate ${PING_SIZE} B, Mmsg/s (send -m rate / PUSH-PULL)" \
			"(none)" "$ROUNDS" "${nr_a[@]}" "${nr_b[@]}"
		fd_row "nng: stream $((STREAM_SIZE / 1024)) KiB, MB/s (send -m bw / PUSH-PULL)" \
			"(none)" "$ROUNDS" "${ns_a[@]}" "${ns_b[@]}"
	)
	table=$(printf '%s\n\n%s\n' "$table" "$nng_table")
fi
if [ "$BUSY_COMPARE" = 1 ]; then
	busy_table=$(
		echo "busy polling: rmsg-perf -b $BUSY_US on both ends against a raw ping-pong spinning on non-blocking read/write (raw_pingpong -s), ends on CPUs 0 and 1"
		echo
		echo "| metric | librmsg (median) | raw spin (median) | ratio of medians | median ratio | min ratio | max ratio | rounds | target |"
		echo "|---|---|---|---|---|---|---|---|---|"
		fd_row "busy poll: ping-pong ${PING_SIZE} B, half RTT, us" \
			"<= 1.2" "$ROUNDS" "${bl_a[@]}" "${bl_b[@]}"
	)
	table=$(printf '%s\n\n%s\n' "$table" "$busy_table")
fi
echo "$table"
{
	echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	busy
	echo
	echo "$table"
} >>"$RESULTS"
if [ $have_cg = 1 ]; then
	{
		echo
		echo "# callgrind: instructions per round trip by function" \
			"(client, inside ev_run, (Ir(2N)-Ir(N))/N, last round)"
		echo "## librmsg, by object"
		cg_by_object "$cgdir/rmsg-$CG_ROUNDS-$CG_ITERS.out" \
			"$cgdir/rmsg-$CG_ROUNDS-$n2.out" "$CG_ITERS"
		echo "## raw, by object"
		cg_by_object "$cgdir/raw-$CG_ROUNDS-$CG_ITERS.out" \
			"$cgdir/raw-$CG_ROUNDS-$n2.out" "$CG_ITERS"
		echo "## librmsg, by function"
		cg_top "$cgdir/rmsg-$CG_ROUNDS-$CG_ITERS.out" \
			"$cgdir/rmsg-$CG_ROUNDS-$n2.out" "$CG_ITERS" 30
		echo "## raw, by function"
		cg_top "$cgdir/raw-$CG_ROUNDS-$CG_ITERS.out" \
			"$cgdir/raw-$CG_ROUNDS-$n2.out" "$CG_ITERS" 30
		if [ "$FD_COMPARE" = 1 ]; then
			echo "## librmsg fd mode (-L epoll, inside epoll_loop), by object"
			cg_by_object "$cgdir/rmsg_epoll-$CG_ROUNDS-$CG_ITERS.out" \
				"$cgdir/rmsg_epoll-$CG_ROUNDS-$n2.out" "$CG_ITERS"
			echo "## librmsg fd mode (-L epoll, inside epoll_loop), by function"
			cg_top "$cgdir/rmsg_epoll-$CG_ROUNDS-$CG_ITERS.out" \
				"$cgdir/rmsg_epoll-$CG_ROUNDS-$n2.out" "$CG_ITERS" 40
			echo "## fd mode minus libev mode, by function" \
				"(+: the fd mode spends more)"
			cg_diff "$cgdir/rmsg_epoll-$CG_ROUNDS-$CG_ITERS.out" \
				"$cgdir/rmsg_epoll-$CG_ROUNDS-$n2.out" \
				"$cgdir/rmsg-$CG_ROUNDS-$CG_ITERS.out" \
				"$cgdir/rmsg-$CG_ROUNDS-$n2.out" "$CG_ITERS" 30
		fi
	} >>"$RESULTS"
else
	echo "(valgrind not found: no instruction counts)" | tee -a "$RESULTS"
fi
echo >&2
echo "raw numbers and the callgrind profile: $RESULTS" >&2
