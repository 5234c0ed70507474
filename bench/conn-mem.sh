#!/bin/bash
# SPDX-License-Identifier: MIT
#
# conn-mem.sh - memory per idle connection, and the RPC rate against the
# number of connections on one server thread (issue 20), with
# bench/conn_mem.c (server and client in separate processes):
#
#   bench/conn-mem.sh [--quick] mem tcp [COUNT...]    host; 1 1000 10000
#   bench/conn-mem.sh [--quick] mem rdma [COUNT...]   VM; 1 512 2048 4096
#   bench/conn-mem.sh [--quick] mem shm [COUNT...]    host; 1 1000 10000
#   bench/conn-mem.sh [--quick] rate tcp|rdma [COUNT...]   1 100 1000
#
# In the VM: tests/vm/run-in-vm.sh -t 1800 -m 8192 -r /tmp/cm-out --
#   $PWD/bench/conn-mem.sh mem rdma   (results in /tmp/cm-out)
#
# mem: per count, a fresh server (its listener's max_conns lifted to the
# count); the client opens COUNT connections
# (CONC connects outstanding), one 64 B message and its echo on each,
# then all idle; the table has the server's and the client's memory per
# connection (VmRSS after minus before, over the connections that carried
# their message; "reg" is the registered part: rmsg_ctx_stats reg_taken -
# reg_given, which RSS includes once touched), and, when connections
# failed, how many and why: the client's reason and the first line the
# server's library logged (which limit refused). A refusal is a result,
# not a failure of the script; after 64 failed connects the client
# tries no more (conn_mem -f).
#
# rate: per count, ROUNDS runs (median) of SECS seconds of RPC calls
# (64 B each way, WINDOW outstanding, each next call on the next
# connection); over TCP also the server's instructions per RPC under
# callgrind at CG_CONNS connections (collected only while calls run).
#
# Environment (defaults in brackets):
#   ROUNDS [3]  SECS [2]  WINDOW [32]  CONC [64]  TIMEOUT [900] per run
#   PER_CTX [500 over RDMA, 0 over TCP]: connections per client
#   context (0: one context); over RDMA one context's SRQ takes 511
#   connections at the default credits, which would stop the client
#   before the server
#   IDLE_S [0]: mem waits this long with every connection idle before it
#   measures (shm:// gives its rings' pages back after 1-2 s)
#   CG_CONNS [1 100]  CG_SECS [3]  ADDR [127.0.0.1 for tcp; for rdma
#   RMSG_TEST_ADDR, else 198.18.0.1]
#   RESULTS [$RMSG_VM_RESULTS/results-conn.txt, else
#   bench/results-conn.txt]: the raw lines of every run
# --quick: small counts and 1 s runs (checks that it works and parses).
# Prints a markdown table on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cd "$top" || exit 1
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
what=${1:-}
tr=${2:-}
shift 2 2> /dev/null
case "$what/$tr" in
mem/tcp | mem/rdma | rate/tcp | rate/rdma | mem/shm | rate/shm) ;;
*)
	echo "usage: conn-mem.sh [--quick] mem|rate tcp|rdma|shm [COUNT...]" >&2
	exit 2
	;;
esac
if [ $# -gt 0 ]; then
	counts="$*"
elif [ $quick = 1 ]; then
	counts="1 10"
elif [ $what = mem ] && [ $tr != rdma ]; then
	counts="1 1000 10000"
elif [ $what = mem ]; then
	counts="1 512 2048 4096"
else
	counts="1 100 1000"
fi
if [ $quick = 1 ]; then
	: "${ROUNDS:=1}" "${SECS:=1}" "${CG_CONNS:=1}" "${CG_SECS:=1}"
fi
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-2}
WINDOW=${WINDOW:-32}
CONC=${CONC:-64}
TIMEOUT=${TIMEOUT:-900}
CG_CONNS=${CG_CONNS:-1 100}
CG_SECS=${CG_SECS:-3}
IDLE_S=${IDLE_S:-0}
# connections per client context: over RDMA a context's SRQ would stop
# the client before the server (511 at the default credits), so the
# client spreads its connections over several contexts
if [ $tr = rdma ]; then
	PER_CTX=${PER_CTX:-500}
else
	PER_CTX=${PER_CTX:-0}
fi
# nctx N: the client's contexts for N connections
nctx() { if [ "$PER_CTX" -gt 0 ]; then echo $((($1 + PER_CTX - 1) / PER_CTX)); else echo 1; fi; }
if [ $tr != rdma ]; then
	ADDR=${ADDR:-127.0.0.1}
else
	ADDR=${ADDR:-${RMSG_TEST_ADDR:-198.18.0.1}}
fi
if [ -n "${RMSG_VM_RESULTS:-}" ]; then
	RESULTS=${RESULTS:-$RMSG_VM_RESULTS/results-conn.txt}
else
	RESULTS=${RESULTS:-$here/results-conn.txt}
fi

# a snapshot of the library, and conn_mem built against it
B=$here/build-conn
mkdir -p "$B/lib"
[ -e .libs/librmsg.so ] || { echo "conn-mem.sh: run make first" >&2; exit 1; }
cp -L .libs/librmsg.so "$B/lib/librmsg.so.0"
ln -sf librmsg.so.0 "$B/lib/librmsg.so"
gcc -O2 -g -Iinclude -o "$B/conn_mem" bench/conn_mem.c -L"$B/lib" \
	-Wl,-rpath,"$B/lib" -lrmsg -lev || exit 1
ulimit -l unlimited 2> /dev/null
# 10,000 TCP connections are 20,000 fds in the two processes
ulimit -n "$(ulimit -Hn)" 2> /dev/null
ulimit -n 65536 2> /dev/null

rev=$(git rev-parse --short HEAD 2> /dev/null || echo unknown)
git diff --quiet HEAD -- src include 2> /dev/null || rev="$rev+dirty"
{
	echo "# conn-mem.sh $what $tr, $(date -u +%FT%TZ), $rev, $(uname -r)"
	echo "# counts: $counts; fd limit $(ulimit -n)"
} >> "$RESULTS"

srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2> /dev/null; }
trap cleanup EXIT
port=$((20000 + $$ % 1000))

# start_server N [WRAPPER...]: a fresh server on a fresh port that takes
# N connections (rmsg_cfg_set_max_conns, when above the default), stdout
# in $B/srv.out and stderr (the library's log) in $B/srv.err
start_server() {
	local i n=$1
	shift
	port=$((port + 1))
	uri="$tr://$ADDR:$port"
	: > "$B/srv.out"
	"$@" "$B/conn_mem" server -u "$uri" -n "$n" > "$B/srv.out" \
		2> "$B/srv.err" &
	srv=$!
	for i in $(seq 600); do
		grep -q listening "$B/srv.out" && return 0
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.05
	done
	echo "conn-mem.sh: the server did not start:" >&2
	cat "$B/srv.err" >&2
	return 1
}

# the server ends once the client's connections are gone; a server
# whose peers never closed is stopped
stop_server() {
	local i
	for i in $(seq 100); do
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.1
	done
	kill "$srv" 2> /dev/null
	wait "$srv" 2> /dev/null
	srv=
}

# field NAME LINE: the value of NAME=... in LINE
field() { sed -n "s/.*[ ]$1=\\([^ ]*\\).*/\\1/p" <<< "$2"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

mem_run() {
	local n=$1 cli out srvline why
	start_server "$n" || return 1
	out=$(timeout "$TIMEOUT" "$B/conn_mem" client -u "$uri" -n "$n" \
		-c "$CONC" -C "$(nctx "$n")" -i "$IDLE_S" 2> "$B/cli.err")
	stop_server
	{
		echo "mem count=$n"
		echo "$out"
		sed 's/^/server-log: /' "$B/srv.err" | head -n 5
		sed 's/^/client-err: /' "$B/cli.err" | head -n 5
	} >> "$RESULTS"
	cli=$(grep '^conn_mem side=client' <<< "$out" | head -n 1)
	srvline=$(grep '^conn_mem side=server conns' <<< "$out" | head -n 1)
	if [ -z "$cli" ]; then
		why=$(head -n 1 "$B/cli.err")
		echo "| $n | - | - | - | - | client failed: ${why:-timeout} |"
		return
	fi
	why=
	if [ "$(field failed "$cli")" != 0 ]; then
		why="$(field failed "$cli") failed"
		[ "$(field untried "$cli")" != 0 ] &&
			why="$why, then $(field untried "$cli") not tried"
		why="$why: $(sed -n 's/.*first_error="\([^"]*\)".*/\1/p' <<< "$cli")"
		[ -s "$B/srv.err" ] &&
			why="$why; server: $(head -n 1 "$B/srv.err" | cut -c1-200)"
	fi
	echo "| $n | $(field conns "$srvline") | $(field rss_per_conn_kib "$srvline") | $(field reg_per_conn_kib "$srvline") | $(field rss_per_conn_kib "$cli") | ${why:-all served} |"
}

rate_run() {
	local n=$1 out line cli failed why
	start_server "$n" || return 1
	out=$(timeout "$TIMEOUT" "$B/conn_mem" client -u "$uri" -n "$n" \
		-c "$CONC" -C "$(nctx "$n")" -r "$SECS" -W "$WINDOW" \
		2> "$B/cli.err")
	stop_server
	{
		echo "rate count=$n"
		echo "$out"
		sed 's/^/server-log: /' "$B/srv.err" | head -n 5
		sed 's/^/client-err: /' "$B/cli.err" | head -n 5
	} >> "$RESULTS"
	line=$(grep '^conn_mem side=client rpc' <<< "$out")
	cli=$(grep '^conn_mem side=client conns' <<< "$out")
	failed=$(field failed "$cli")
	if [ -n "$failed" ] && [ "$failed" != 0 ]; then
		why="$(field conns "$cli") served, $failed failed"
		[ "$(field untried "$cli")" != 0 ] &&
			why="$why, then $(field untried "$cli") not tried"
		why="$why: $(sed -n 's/.*first_error="\([^"]*\)".*/\1/p' <<< "$cli")"
		[ -s "$B/srv.err" ] &&
			why="$why; server: $(head -n 1 "$B/srv.err" | cut -c1-200)"
	else
		why=
	fi
	if [ -n "$line" ]; then
		echo "$(field rate "$line")|$why"
	else
		echo "fail|${why:-$(head -n 1 "$B/cli.err")}"
	fi
}

# cg_run N: the server's instructions per RPC under callgrind
cg_run() {
	local n=$1 f=$B/cg.out out calls ir
	rm -f "$f"
	start_server "$n" valgrind --tool=callgrind --collect-atstart=no \
		--callgrind-out-file="$f" || return 1
	out=$(timeout "$TIMEOUT" "$B/conn_mem" client -u "$uri" -n "$n" \
		-c "$CONC" -C "$(nctx "$n")" -r "$CG_SECS" -W "$WINDOW" \
		2> "$B/cli.err")
	stop_server
	calls=$(field calls "$(grep '^conn_mem side=server rpc' <<< "$out")")
	ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$f" | head -n 1)
	echo "callgrind count=$n calls=$calls ir=$ir" >> "$RESULTS"
	if [ -n "$calls" ] && [ -n "$ir" ] && [ "$calls" -gt 0 ]; then
		echo "| $n | $calls | $ir | $((ir / calls)) |"
	else
		echo "| $n | - | - | failed: $(head -n 1 "$B/cli.err") |"
	fi
}

if [ $what = mem ]; then
	echo "memory per idle connection, $tr ($rev), 64 B echoed on each"
	echo
	echo "| connections | served | server KiB/conn (RSS) | of it registered KiB/conn | client KiB/conn (RSS) | result |"
	echo "|---|---|---|---|---|---|"
	for n in $counts; do
		mem_run "$n"
	done
	exit 0
fi

echo "RPC rate against connections, $tr ($rev), one server thread, window $WINDOW, median of $ROUNDS x ${SECS} s"
echo
echo "| connections | RPC/s (median) | per round | result |"
echo "|---|---|---|---|"
for n in $counts; do
	rates= fail=
	for r in $(seq "$ROUNDS"); do
		res=$(rate_run "$n")
		case $res in
		fail*) ;;
		*) rates="$rates ${res%%|*}" ;;
		esac
		[ -n "${res#*|}" ] && fail=${res#*|}
	done
	med=$(tr ' ' '\n' <<< "$rates" | grep . | median)
	echo "| $n | ${med:--} | ${rates# } | ${fail:-ok} |"
done
if [ $tr = tcp ] && command -v valgrind > /dev/null; then
	echo
	echo "server instructions per RPC (callgrind, while calls run)"
	echo
	echo "| connections | calls | instructions | per RPC |"
	echo "|---|---|---|---|"
	for n in $CG_CONNS; do
		cg_run "$n"
	done
fi
