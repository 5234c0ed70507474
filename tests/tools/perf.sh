#!/bin/sh
# SPDX-License-Identifier: MIT
#
# perf.sh - rmsg-perf works and its output parses: a tiny sweep of every
# operation in every mode against one server, then busy-poll, once with
# both ends on a libev loop (-L ev) and once with both in fd mode
# (-L epoll: rmsg_ctx_create_fd, epoll_wait, rmsg_ctx_progress), then a
# client of each mode against a server of the other; usage errors exit 2
# with the usage on stderr, -h and --help print it on stdout and exit 0,
# --version names the tool and the library's version (librmsg.pc's);
# --json prints one JSON object a line.
# Not a benchmark: no timing is asserted.
# Transport: tcp://127.0.0.1 here; rdma://$RMSG_TEST_ADDR with
# RMSG_TEST_TRANSPORT=rdma (make check-rxe). Environment: top_builddir.

builddir=${top_builddir:-.}
perf=$builddir/tools/rmsg-perf
transport=${RMSG_TEST_TRANSPORT:-tcp}
addr=${RMSG_TEST_ADDR:-127.0.0.1}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf.XXXXXX") || exit 1
srvs=
cleanup() {
	for p in $srvs; do kill "$p" 2> /dev/null; done
	rm -rf "$tmp"
}
trap cleanup 0
failures=0
fail() {
	echo "FAIL: $*"
	[ -f "$tmp/out" ] && sed 's/^/    /' "$tmp/out"
	failures=$((failures + 1))
}
[ -x "$perf" ] || {
	echo "FAIL: $perf not built"
	exit 1
}

"$perf" -x client tcp://127.0.0.1:1 > "$tmp/out" 2>&1
[ $? = 2 ] || fail "usage error: exit status not 2"
"$perf" -o nonsense client tcp://127.0.0.1:1 > "$tmp/out" 2>&1
[ $? = 2 ] || fail "unknown operation: exit status not 2"
for bad in --bogus "--version=1" "client" "-n 0 client tcp://127.0.0.1:1" \
	"-L nonsense client tcp://127.0.0.1:1"; do
	# shellcheck disable=SC2086 # split on purpose
	"$perf" $bad > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "'$bad': exit $rc, expected 2"
	[ -s "$tmp/out" ] && fail "'$bad': the usage error printed on stdout"
	grep -q '^usage: rmsg-perf ' "$tmp/err" ||
		{ cp "$tmp/err" "$tmp/out"; fail "'$bad': no usage on stderr"; }
done
for help in -h --help; do
	"$perf" $help > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc = 0 ] || fail "$help: exit $rc, expected 0"
	grep -q '^usage: rmsg-perf ' "$tmp/out" || fail "$help: no usage"
	[ -s "$tmp/err" ] && { cp "$tmp/err" "$tmp/out"; fail "$help: stderr"; }
done
version=$(sed -n 's/^Version: *//p' "$builddir/librmsg.pc")
[ -n "$version" ] || echo "no Version in $builddir/librmsg.pc" > "$tmp/out"
"$perf" --version > "$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] || fail "--version: exit $rc, expected 0"
[ -n "$version" ] && [ "$(cat "$tmp/out")" = "rmsg-perf (librmsg) $version" ] ||
	fail "--version: not 'rmsg-perf (librmsg) $version'"

# start_server LOOP: a server (-k) for every run of a loop mode; it
# prints its port once it listens; sets uri
start_server() {
	"$perf" -L "$1" -k server "$transport://$addr:0" > "$tmp/srv-$1" 2>&1 &
	srv=$!
	srvs="$srvs $srv"
	port=
	i=0
	while [ $i -lt 100 ]; do
		port=$(sed -n 's/^rmsg-perf server port=\([0-9]*\)$/\1/p' \
			"$tmp/srv-$1")
		[ -n "$port" ] && break
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	if [ -z "$port" ]; then
		cp "$tmp/srv-$1" "$tmp/out"
		fail "the -L $1 server never printed its port"
		exit 1
	fi
	uri=$transport://$addr:$port
}

# run LOOP OPTS...: one client with -L LOOP; 3 sizes, each gives a table
# row and a line that names the loop mode
run() {
	loop=$1
	shift
	timeout 60 "$perf" -L "$loop" -s 64,4k,64k -n 40 -w 5 "$@" \
		client "$uri" > "$tmp/out" 2>&1
	rc=$?
	[ $rc = 0 ] || { fail "rmsg-perf -L $loop $*: exit $rc"; return; }
	n=$(grep -c "^rmsg-perf op=.* loop=$loop transport=$transport\$" \
		"$tmp/out")
	[ "$n" = 3 ] || fail "rmsg-perf -L $loop $*: $n result lines, expected 3"
	case " $* " in
	*" -P "*) ;;
	*) grep -q '^ #bytes' "$tmp/out" ||
		fail "rmsg-perf -L $loop $*: no table" ;;
	esac
}

# sweep LOOP: every operation in every mode, then busy-poll
sweep() {
	for op in send write_imm rpc; do
		run "$1" -o $op -m lat
		grep -q "^rmsg-perf op=$op mode=lat size=65536 iters=40 lat_us=[0-9.]* " \
			"$tmp/out" || fail "-L $1 $op lat: no lat_us for 64 KiB"
		run "$1" -o $op -m bw -W 4
		grep -q "^rmsg-perf op=$op mode=bw size=4096 iters=40 window=4 mbps=[0-9.]* mmsgs=" \
			"$tmp/out" || fail "-L $1 $op bw: no mbps for 4 KiB"
		run "$1" -o $op -m rate
	done
	run "$1" -o send -m lat -b 20 -P
	grep -q 'poll_us=20 ' "$tmp/out" ||
		fail "-L $1 -b 20: poll_us not reported"
	grep -q '^ #bytes' "$tmp/out" && fail "-L $1 -P: a table was printed"
	run "$1" -o rpc -m rate -b 20 -P
}

start_server ev
uri_ev=$uri
sweep ev
start_server epoll
uri_epoll=$uri
sweep epoll
# each mode's client against the other mode's server
uri=$uri_epoll
run ev -o rpc -m lat
uri=$uri_ev
run epoll -o send -m bw -W 4

# --json: one JSON object a line, the results then -v's counters; the
# shape checked here, the parse by Python's json where there is one
# (the VM has none)
uri=$uri_ev
for m in lat bw; do
	timeout 60 "$perf" --json -v -m $m -s 64,4k -n 20 -w 5 client "$uri" \
		> "$tmp/out" 2>&1
	rc=$?
	[ $rc = 0 ] || fail "--json -m $m: exit $rc"
	n=$(grep -c '^{"op":"send","mode":"'$m'","size":[0-9]*,"iters":20,.*,"transport":"'"$transport"'"}$' "$tmp/out")
	[ "$n" = 2 ] || fail "--json -m $m: $n result objects, expected 2"
	n=$(grep -c '^{"counters_of":"client [a-z]*[^"]*","counters":{"msgs_sent":[0-9]*,.*}}$' "$tmp/out")
	[ "$n" = 2 ] || fail "--json -m $m: $n counter objects, expected 2"
	grep -v '^{' "$tmp/out" > /dev/null && fail "--json -m $m: a line that is no object"
	for py in /usr/bin/python3 python3; do
		command -v $py > /dev/null 2>&1 || continue
		$py -c 'import json, sys
for line in sys.stdin:
    json.loads(line)' < "$tmp/out" || fail "--json -m $m: json.loads failed"
		break
	done
done

[ "$failures" = 0 ] || exit 1
echo "PASS: rmsg-perf ($transport)"
