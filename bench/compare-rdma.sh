#!/bin/bash
# SPDX-License-Identifier: MIT
#
# compare-rdma.sh - rmsg-perf over rdma:// against perftest on the same
# rxe device, alternating A B A B ...; run inside the Soft-RoCE VM:
#
#   tests/vm/run-in-vm.sh -t 1200 -r /tmp/rdma-out -- bench/compare-rdma.sh
#   cp /tmp/rdma-out/results-rdma.txt bench/results-rdma.txt
#
# Needs a built tree (`make` at the top). Metrics, per size:
#   lat_poll   rmsg-perf send lat -b POLL_US   vs ib_send_lat     (t_typical)
#   lat_event  rmsg-perf send lat (event mode) vs ib_send_lat -e  (t_typical)
#   bw_write   rmsg-perf write_imm bw          vs ib_write_bw     (MB/s)
#   rate_send  rmsg-perf send rate             vs ib_send_bw      (Mmsg/s)
#              (both DEPTH operations outstanding)
#   rate_default  the same, rmsg-perf without -c and -W, ib_send_bw
#              with its default tx depth (issue 16's target: >= 2x)
#   ucx_tag_lat  rmsg-perf send lat -b POLL_US vs ucx_perftest -t tag_lat
#                (50th percentile, polling)
#   ucx_tag_bw   rmsg-perf send rate, its defaults  vs ucx_perftest -t
#                tag_bw, its defaults (Mmsg/s, "overall")
#   fi_pingpong  rmsg-perf send lat -b POLL_US (its mean) vs fi_pingpong
#                -p verbs -e msg (usec/xfer: a mean, it has no median)
# (UCX with UCX_ENV, by default UCX_TLS=rc_verbs,ud_verbs,self
# UCX_IB_GID_INDEX=0; the three only at 64 B and only without BASELINE)
# and librmsg's fd mode against its libev mode (rmsg-perf -L epoll
# against -L ev, both ends; the order alternates with the round), in a
# second table, at FD_SIZES:
#   fd_lat_poll   send lat -b POLL_US      fd_lat_event  send lat
#   fd_rpc_event  rpc lat                  fd_rate_send  send rate
# (in their result lines rmsg= is the fd mode, base= the libev mode)
# Prints, per metric and size, the median of each side, the ratio of the
# medians and the lowest and highest per-round ratio; lines
# "round=R metric=M size=S rmsg=X base=Y" go to the results file, which
# bench/plot.sh reads. Under qemu TCG only the ratios mean anything.
#
# Environment (defaults in brackets):
#   ROUNDS [5]                 A/B rounds
#   SIZES [64 4096 65536 1048576]   latency and bandwidth sizes
#   RATE_SIZES [64]            message-rate sizes
#   LAT_ITERS [1000] LAT_BYTES [16777216]  round trips per latency run:
#                              LAT_BYTES/size, at most LAT_ITERS, at least 20
#   BW_ITERS [2000] BW_BYTES [67108864]    messages per bandwidth run, the
#                              same way (at least 20)
#   RATE_ITERS [20000]         messages per rate run
#   DEPTH [128]                rmsg-perf window and credits in bw and rate
#                              (perftest's default tx depth is 128)
#   POLL_US [100000]           rmsg busy-poll time for lat_poll
#   METRICS [lat_poll lat_event bw_write rate_send rate_default
#            ucx_tag_lat ucx_tag_bw fi_pingpong fd_lat_poll
#            fd_lat_event fd_rpc_event fd_rate_send]
#   UCX_COMPARE [1]            0: leave out ucx_tag_lat and ucx_tag_bw
#   FI_COMPARE [1]             0: leave out fi_pingpong
#   UCX_ENV [UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=0]
#                              ucx_perftest's environment (both ends)
#   EXT_SIZES [64]             sizes of the ucx_ and fi_ metrics
#   FD_SIZES [64]              sizes of the fd_ metrics
#   RESULTS [$RMSG_VM_RESULTS/results-rdma.txt, else bench/results-rdma.txt]
#   BASELINE [unset]           a built librmsg tree (e.g. a worktree of
#                              the commit before a change): the baseline
#                              side is then that tree's rmsg-perf and
#                              library, not perftest: an A/B of two
#                              librmsg versions in one run (lat_poll,
#                              lat_event, bw_write, rate_send alike;
#                              the fd_ metrics stay this tree's)
#   --quick: 1 round, few iterations (checks that it works and parses)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cd "$top" || exit 1
quick=0
[ "${1:-}" = --quick ] && quick=1
if [ $quick = 1 ]; then
	: "${ROUNDS:=1}" "${LAT_ITERS:=100}" "${BW_ITERS:=100}"
	: "${RATE_ITERS:=1000}" "${SIZES:=64 65536}"
fi
ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-64 4096 65536 1048576}
RATE_SIZES=${RATE_SIZES:-64}
LAT_ITERS=${LAT_ITERS:-1000}
LAT_BYTES=${LAT_BYTES:-16777216}
BW_ITERS=${BW_ITERS:-2000}
BW_BYTES=${BW_BYTES:-67108864}
RATE_ITERS=${RATE_ITERS:-20000}
DEPTH=${DEPTH:-128}
POLL_US=${POLL_US:-100000}
UCX_COMPARE=${UCX_COMPARE:-1}
FI_COMPARE=${FI_COMPARE:-1}
UCX_ENV=${UCX_ENV:-UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=0}
EXT_SIZES=${EXT_SIZES:-64}
BASELINE=${BASELINE:-}
if [ -z "${METRICS:-}" ]; then
	METRICS="lat_poll lat_event bw_write rate_send rate_default"
	# UCX and libfabric against this tree only, not in an A/B of two trees
	if [ -z "$BASELINE" ]; then
		[ "$UCX_COMPARE" = 0 ] || METRICS="$METRICS ucx_tag_lat ucx_tag_bw"
		[ "$FI_COMPARE" = 0 ] || METRICS="$METRICS fi_pingpong"
	fi
	METRICS="$METRICS fd_lat_poll fd_lat_event fd_rpc_event fd_rate_send"
fi
FD_SIZES=${FD_SIZES:-64}
ADDR=${RMSG_TEST_ADDR:-198.18.0.1}
if [ -n "${RMSG_VM_RESULTS:-}" ]; then
	RESULTS=${RESULTS:-$RMSG_VM_RESULTS/results-rdma.txt}
else
	RESULTS=${RESULTS:-$here/results-rdma.txt}
fi
tools="ib_send_lat ib_write_bw ib_send_bw"
case " $METRICS " in *" ucx_"*) tools="$tools ucx_perftest" ;; esac
case " $METRICS " in *" fi_"*) tools="$tools fi_pingpong" ;; esac
for t in $tools; do
	command -v "$t" > /dev/null || { echo "compare-rdma.sh: $t missing (UCX_COMPARE=0 or FI_COMPARE=0 leaves out UCX or libfabric)" >&2; exit 1; }
done

# a snapshot of the library and rmsg-perf built against it
B=$here/build-rdma
mkdir -p "$B/lib"
[ -e .libs/librmsg.so ] || { echo "compare-rdma.sh: run make first" >&2; exit 1; }
cp -L .libs/librmsg.so "$B/lib/librmsg.so.0"
ln -sf librmsg.so.0 "$B/lib/librmsg.so"
gcc -O2 -Iinclude -o "$B/rmsg-perf" tools/rmsg-perf.c -L"$B/lib" \
	-Wl,-rpath,"$B/lib" -lrmsg -lev || exit 1
if [ -n "$BASELINE" ]; then
	[ -e "$BASELINE/.libs/librmsg.so" ] ||
		{ echo "compare-rdma.sh: $BASELINE is not a built tree" >&2; exit 1; }
	mkdir -p "$B/base/lib"
	cp -L "$BASELINE/.libs/librmsg.so" "$B/base/lib/librmsg.so.0"
	ln -sf librmsg.so.0 "$B/base/lib/librmsg.so"
	gcc -O2 -I"$BASELINE/include" -o "$B/base/rmsg-perf" \
		"$BASELINE/tools/rmsg-perf.c" -L"$B/base/lib" \
		-Wl,-rpath,"$B/base/lib" -lrmsg -lev || exit 1
fi
ulimit -l unlimited 2> /dev/null

srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2> /dev/null; }
trap cleanup EXIT

port=$((19000 + $$ % 1000))
stop_server() {
	local i
	for i in $(seq 50); do
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.1
	done
	kill "$srv" 2> /dev/null
	wait "$srv" 2> /dev/null
	srv=
}

# rmsg SERVER-OPTS CLIENT-OPTS...: prints the client's result line
# (PERF: which rmsg-perf, the tree's or the baseline's)
PERF=$B/rmsg-perf
rmsg() {
	local sopts=$1 i
	shift
	port=$((port + 1))
	# emptied first: the loop below must not see the last server's line
	: > "$B/srv.out"
	# shellcheck disable=SC2086
	"$PERF" $sopts server "rdma://$ADDR:$port" >> "$B/srv.out" 2>&1 &
	srv=$!
	for i in $(seq 100); do
		grep -q '^rmsg-perf server port=' "$B/srv.out" && break
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.05
	done
	timeout 300 "$PERF" -P "$@" client "rdma://$ADDR:$port" \
		2> "$B/cli.err" | tail -1
	stop_server
}

# perf TOOL ARGS...: server, then client once the server's socket listens
perf() {
	local i
	port=$((port + 1))
	"$@" -p $port > /dev/null 2>&1 &
	srv=$!
	for i in $(seq 100); do
		ss -Hltn "sport = :$port" 2> /dev/null | grep -q . && break
		sleep 0.05
	done
	timeout 300 "$@" -p $port "$ADDR" 2> /dev/null
	stop_server
}

# ext SERVER-CMD... -- CLIENT-CMD...: the server of UCX or libfabric,
# then its client once the server's TCP port (PORT in the commands, the
# next free one) listens; prints the client's output
ext() {
	local sv=() cl=() a
	port=$((port + 1))
	while [ $# -gt 0 ] && [ "$1" != -- ]; do sv+=("${1//PORT/$port}"); shift; done
	shift
	for a in "$@"; do cl+=("${a//PORT/$port}"); done
	"${sv[@]}" > "$B/ext-srv.out" 2>&1 &
	srv=$!
	for _ in $(seq 200); do
		ss -Hltn "sport = :$port" 2> /dev/null | grep -q . && break
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.05
	done
	timeout 300 "${cl[@]}" 2> "$B/ext-cli.err"
	stop_server
}

# ucx ARGS...: ucx_perftest with UCX_ENV at both ends; prints its final
# line (-f: iterations, latency 50th percentile, average, overall,
# bandwidth average, overall, message rate average, overall)
ucx() {
	# shellcheck disable=SC2086 # UCX_ENV is a list of NAME=VALUE
	ext env $UCX_ENV ucx_perftest -p PORT "$@" -- \
		env $UCX_ENV ucx_perftest "$ADDR" -p PORT -f "$@" |
		awk '$1 ~ /^[0-9]+$/ && NF >= 8 { l = $0 } END { print l }'
}

val() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
iters() { # budget max size
	local n=$(($1 / $3))
	[ $n -gt "$2" ] && n=$2
	[ $n -lt 20 ] && n=20
	echo $n
}

# positive FIGURE: a number above zero
positive() {
	printf '%s' "$1" | grep -Eq '^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$' &&
		awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'
}

# one A/B pair; sets a (librmsg) and b (perftest, or the baseline's
# rmsg-perf: the same metric run again with PERF pointing at it)
pair() {
	local m=$1 s=$2 n line
	if [ -n "$BASELINE" ] && [ -z "${in_base:-}" ] &&
		[ "${m#fd_}" = "$m" ]; then
		local a0 b0
		in_base=1 pair_one "$m" "$s"
		a0=$a
		PERF=$B/base/rmsg-perf in_base=1 pair_one "$m" "$s"
		b0=$a
		a=$a0
		b=$b0
	else
		pair_one "$m" "$s"
		# a figure that is not a number above zero (ib_send_lat -e
		# printed inf for a short run once; a rate_send pair gave a
		# zero once with the guest starved beside a loaded host): the
		# pair runs again, twice at most
		local tries=1
		while { ! positive "$a" || ! positive "$b"; } &&
			[ $tries -lt 3 ]; do
			echo "# $m $s: librmsg '$a', the baseline '$b': once more" | tee -a "$RESULTS" >&2
			pair_one "$m" "$s"
			tries=$((tries + 1))
		done
	fi
	echo "round=$r metric=$m size=$s iters=$n rmsg=${a:-0} base=${b:-0}" >> "$RESULTS"
	[ -n "$a" ] || { echo "# $m $s: rmsg-perf gave no result:" "$(tail -2 "$B/cli.err")" | tee -a "$RESULTS" >&2; }
	if [ -z "$b" ]; then
		case $m in
		ucx_* | fi_*)
			echo "# $m $s: the baseline gave no result:" \
				"$(tail -n 3 "$B/ext-cli.err" "$B/ext-srv.out" | tr '\n' ' ')" ;;
		*) echo "# $m $s: the baseline gave no result" ;;
		esac | tee -a "$RESULTS" >&2
	fi
}

# one metric's run of each side (only the librmsg side in BASELINE mode)
pair_one() {
	local m=$1 s=$2 line
	case $m in
	lat_poll)
		n=$(iters "$LAT_BYTES" "$LAT_ITERS" "$s")
		line=$(rmsg "-b $POLL_US" -b "$POLL_US" -o send -m lat -s "$s" \
			-n "$n" -w 20)
		a=$(val "$line" lat_us)
		[ -n "${in_base:-}" ] || b=$(perf ib_send_lat -F -s "$s" -n "$n" | awk -v s="$s" '$1 == s { print $5 }')
		;;
	lat_event)
		n=$(iters "$LAT_BYTES" "$LAT_ITERS" "$s")
		line=$(rmsg "" -o send -m lat -s "$s" -n "$n" -w 20)
		a=$(val "$line" lat_us)
		[ -n "${in_base:-}" ] || b=$(perf ib_send_lat -F -e -s "$s" -n "$n" | awk -v s="$s" '$1 == s { print $5 }')
		;;
	bw_write)
		n=$(iters "$BW_BYTES" "$BW_ITERS" "$s")
		line=$(rmsg "-c $DEPTH" -c "$DEPTH" -W "$DEPTH" -o write_imm -m bw \
			-s "$s" -n "$n")
		a=$(val "$line" mbps)
		# MsgRate (Mpps) times the size: 10^6 bytes per second
		[ -n "${in_base:-}" ] || b=$(perf ib_write_bw -F -s "$s" -n "$n" | awk -v s="$s" '$1 == s { printf "%.1f\n", $5 * s }')
		;;
	rate_send)
		n=$RATE_ITERS
		line=$(rmsg "-c $DEPTH" -c "$DEPTH" -W "$DEPTH" -o send -m rate \
			-s "$s" -n "$n")
		a=$(val "$line" mmsgs)
		[ -n "${in_base:-}" ] || b=$(perf ib_send_bw -F -s "$s" -n "$n" | awk -v s="$s" '$1 == s { print $5 }')
		;;
	rate_default)
		# both with their defaults: rmsg-perf's credits and window,
		# perftest's tx depth
		n=$RATE_ITERS
		line=$(rmsg "" -o send -m rate -s "$s" -n "$n")
		a=$(val "$line" mmsgs)
		[ -n "${in_base:-}" ] || b=$(perf ib_send_bw -F -s "$s" -n "$n" | awk -v s="$s" '$1 == s { print $5 }')
		;;
	ucx_tag_lat)
		n=$(iters "$LAT_BYTES" "$LAT_ITERS" "$s")
		line=$(rmsg "-b $POLL_US" -b "$POLL_US" -o send -m lat -s "$s" \
			-n "$n" -w 20)
		a=$(val "$line" lat_us)
		b=$(ucx -t tag_lat -s "$s" -n "$n" -w 20 | awk '{ print $2 }')
		;;
	ucx_tag_bw)
		n=$RATE_ITERS
		line=$(rmsg "" -o send -m rate -s "$s" -n "$n")
		a=$(val "$line" mmsgs)
		b=$(ucx -t tag_bw -s "$s" -n "$n" -w 20 |
			awk 'NF { printf "%.6f\n", $8 / 1e6 }')
		;;
	fi_pingpong)
		# fi_pingpong reports a mean (usec/xfer: its time over the
		# messages each way), so the librmsg side is its mean too
		n=$(iters "$LAT_BYTES" "$LAT_ITERS" "$s")
		line=$(rmsg "-b $POLL_US" -b "$POLL_US" -o send -m lat -s "$s" \
			-n "$n" -w 20)
		a=$(val "$line" mean_us)
		b=$(ext fi_pingpong -p verbs -e msg -S "$s" -I "$n" -B PORT -- \
			fi_pingpong -p verbs -e msg -S "$s" -I "$n" -P PORT "$ADDR" |
			awk -v s="$s" '$1 == s && NF >= 8 { print $7 }')
		;;
	fd_*)
		fd_ab "$m" "$s"
		;;
	esac
}

# fd_ab METRIC SIZE: a: both ends -L epoll (fd mode), b: both -L ev, one
# run each, libev first in odd rounds and last in even ones
fd_ab() {
	local m=$1 s=$2 l order="ev epoll" sopts="" copts key=lat_us line v
	n=$(iters "$LAT_BYTES" "$LAT_ITERS" "$s")
	case $m in
	fd_lat_poll)
		sopts="-b $POLL_US"
		copts="-b $POLL_US -o send -m lat -s $s -n $n -w 20" ;;
	fd_lat_event) copts="-o send -m lat -s $s -n $n -w 20" ;;
	fd_rpc_event) copts="-o rpc -m lat -s $s -n $n -w 20" ;;
	fd_rate_send)
		n=$RATE_ITERS key=mmsgs
		sopts="-c $DEPTH"
		copts="-c $DEPTH -W $DEPTH -o send -m rate -s $s -n $n" ;;
	esac
	[ $((r % 2)) = 1 ] || order="epoll ev"
	for l in $order; do
		# shellcheck disable=SC2086 # option lists, split on purpose
		line=$(rmsg "-L $l $sopts" -L $l $copts)
		v=$(val "$line" "$key")
		# a line of the other mode is no result
		[ "$(val "$line" loop)" = "$l" ] || v=
		if [ $l = epoll ]; then a=$v; else b=$v; fi
	done
}

{
	echo "# compare-rdma.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	[ -n "$BASELINE" ] && echo "# baseline: librmsg $(git -C "$BASELINE" rev-parse --short HEAD 2> /dev/null || echo unknown) from $BASELINE"
	echo "# librmsg $(git rev-parse --short HEAD 2> /dev/null || echo unknown)," \
		"$(uname -sr), $(nproc) CPUs, rounds=$ROUNDS, device" \
		"$(ls /sys/class/infiniband 2> /dev/null | tr '\n' ' ')"
	echo "# $(ib_send_lat --version 2>&1 | head -1), sizes: $SIZES," \
		"rate sizes: $RATE_SIZES, depth $DEPTH, poll $POLL_US us"
	echo "# metrics: $METRICS"
	case " $METRICS " in *" ucx_"*)
		echo "# UCX $(ucx_info -v 2>&1 | sed -n 's/^# *Version //p' | head -1), env: $UCX_ENV" ;;
	esac
	case " $METRICS " in *" fi_"*)
		echo "# fi_pingpong, $(fi_info --version 2>&1 | tr '\n' ' ')" ;;
	esac
} > "$RESULTS"
start=$(date +%s)
for r in $(seq "$ROUNDS"); do
	echo "round $r/$ROUNDS ($(($(date +%s) - start)) s)" >&2
	for m in $METRICS; do
		sizes=$SIZES
		case $m in rate_*) sizes=$RATE_SIZES ;; esac
		case $m in ucx_* | fi_*) sizes=$EXT_SIZES ;; esac
		[ "${m#fd_}" = "$m" ] || sizes=$FD_SIZES
		for s in $sizes; do
			pair "$m" "$s"
		done
	done
done

bname=perftest
[ -n "$BASELINE" ] && bname="baseline librmsg"
# tables WANT: the rows of the fd_ metrics (WANT=fd) or of the others
tables() {
	awk -v want="$1" -v bname="$bname" '
	function med(x, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
		return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
	}
	/^round=/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		if ((f["metric"] ~ /^fd_/) != (want == "fd")) next
		k = f["metric"] " " f["size"]
		if (!(k in n)) { order[++nk] = k; n[k] = 0 }
		if (f["rmsg"] > 0 && f["base"] > 0) {
			c = ++n[k]; A[k, c] = f["rmsg"]; Bv[k, c] = f["base"]
			R[k, c] = f["rmsg"] / f["base"]
		}
	}
	END {
		for (i = 1; i <= nk; i++) {
			k = order[i]; split(k, p, " "); c = n[k]
			if (!c) { printf "| %s | %s | no data | | | | |%s 0 |%s\n", p[1], p[2], want == "fd" ? " |" : "", want == "fd" ? "" : " " tool(p[1]) " | " target(p[1], p[2]) " | |"; continue }
			delete a; delete b; delete q
			for (j = 1; j <= c; j++) { a[j] = A[k, j]; b[j] = Bv[k, j]; q[j] = R[k, j] }
			ma = med(a, c); mb = med(b, c); mq = med(q, c)
			if (want == "fd")
				printf "| %s | %s | %.4g | %.4g | %.3f | %.3f | %.3f | %.3f | %d |\n",
					p[1], p[2], ma, mb, ma / mb, mq, q[1], q[c], c
			else {
				t = target(p[1], p[2]); met = ""
				if (t != "") {
					split(t, tv, " ")
					met = (tv[1] == "<=" ? ma / mb <= tv[2] : ma / mb >= tv[2]) ? "yes" : "no"
					if (met == "no" && (tv[1] == "<=" ? q[1] <= tv[2] : q[c] >= tv[2]))
						met = "no (some rounds yes)"
				}
				printf "| %s | %s | %.4g | %.4g | %.3f | %.3f | %.3f | %d | %s | %s | %s |\n",
					p[1], p[2], ma, mb, ma / mb, q[1], q[c], c, tool(p[1]), t, met
			}
		}
	}
	# the baseline of a metric
	function tool(m) {
		if (bname != "perftest") return bname
		if (m == "lat_poll") return "ib_send_lat"
		if (m == "lat_event") return "ib_send_lat -e"
		if (m == "bw_write") return "ib_write_bw"
		if (m ~ /^rate_/) return "ib_send_bw"
		if (m == "ucx_tag_lat") return "ucx_perftest tag_lat"
		if (m == "ucx_tag_bw") return "ucx_perftest tag_bw"
		if (m == "fi_pingpong") return "fi_pingpong verbs msg"
		return "?"
	}
	# the targets of issue 16, on the ratio librmsg / baseline, 64 B
	function target(m, s) {
		if (s != 64 || bname != "perftest") return ""
		if (m == "lat_poll") return "<= 1.10"
		if (m == "lat_event") return "<= 1.00"
		if (m ~ /^rate_/) return ">= 2"
		if (m == "ucx_tag_lat") return "<= 0.95"
		return ""
	}' "$RESULTS"
}
base_rows=$(tables base)
table=
if [ -n "$base_rows" ]; then
	table=$(
		echo "| metric | size | librmsg median | baseline median | ratio of medians | min ratio | max ratio | rounds | baseline | target (issue 16) | met (ratio of medians) |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|"
		echo "$base_rows"
	)
fi
fd_rows=$(tables fd)
if [ -n "$fd_rows" ]; then
	table=$(
		[ -z "$table" ] || printf '%s\n\n' "$table"
		echo "| metric | size | fd mode median | libev mode median | ratio of medians | median ratio | min ratio | max ratio | rounds |"
		echo "|---|---|---|---|---|---|---|---|---|"
		echo "$fd_rows"
	)
fi
{
	echo "# total $(($(date +%s) - start)) s"
	echo
	echo "$table"
	echo
	echo "latency: half round trip in us (median; perftest t_typical);" \
		"bw_write: 10^6 bytes/s; rate_send, ucx_tag_bw: 10^6 messages/s;" \
		"fi_pingpong: means, not medians;" \
		"fd_: rmsg-perf -L epoll against -L ev"
} >> "$RESULTS"
echo "$table"
echo "(latency us, half round trip; bw_write MB/s = 10^6 B/s; rate_send, ucx_tag_bw Mmsg/s;" \
	"fi_pingpong: means;" \
	"fd_: rmsg-perf -L epoll against -L ev, both ends)"
echo "results: $RESULTS" >&2
