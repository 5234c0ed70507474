#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run-examples.sh - runs every example of examples/ as a server and a
# client in separate processes, over the transport of RMSG_TEST_TRANSPORT
# (tcp, rdma or shm; default tcp) at RMSG_TEST_ADDR (default 127.0.0.1), and
# checks their output and exit codes. echo_rmsg also runs with auto://,
# which must pick RDMA in the VM (RMSG_VM=1) or over rdma, and fall back
# to TCP where there is no RDMA stack (both sides print the transport).
#
# Run by 'make check' (TCP on the host) and by 'make check-rxe' through
# tests/integration/run-all.sh (RDMA in the Soft-RoCE VM). Automake test:
# exit 0 pass, 1 fail, 77 skip (RDMA asked for, no RDMA stack here).
# Environment: top_builddir (default: the current directory, which is
# where run-all.sh starts it), RMSG_TEST_SCALE (stretches the timeouts).

transport=${RMSG_TEST_TRANSPORT:-tcp}
addr=${RMSG_TEST_ADDR:-127.0.0.1}
builddir=${top_builddir:-.}
ex=$(cd "$builddir" && pwd)/examples
scale=${RMSG_TEST_SCALE:-1}
case $transport in
tcp | rdma | shm) ;;
*)
	echo "FAIL: RMSG_TEST_TRANSPORT=$transport: tcp, rdma or shm"
	exit 1
	;;
esac
if [ "$transport" = rdma ] && [ ! -e /dev/infiniband/rdma_cm ]; then
	echo "SKIP: no RDMA stack on this machine; 'make check-rxe' runs" \
		"the examples in the VM"
	exit 77
fi
for p in hello kv_server kv_client bulk mixed_loop echo_socket echo_rmsg \
	loop_epoll loop_uv loop_glib rpc_threads resume_stream; do
	if [ ! -x "$ex/$p" ]; then
		echo "FAIL: $ex/$p not built (run make; loop_uv and loop_glib" \
			"need libuv1-dev and libglib2.0-dev, see configure's output)"
		exit 1
	fi
done
if ! command -v ss > /dev/null 2>&1; then
	echo "SKIP: ss (iproute2) is needed to wait for the servers"
	exit 77
fi

# seconds a client may take; the VM runs under TCG, 10-50x slower
limit=120
[ "$transport" = rdma ] && limit=600
limit=$(awk -v l="$limit" -v s="$scale" 'BEGIN { printf "%d", l * s }')

tmp=$(mktemp -d "${TMPDIR:-/tmp}/run-examples.XXXXXX") || exit 1
servers= # the PIDs of the servers this script started, and only those
cleanup() {
	for pid in $servers; do
		kill "$pid" 2> /dev/null
	done
	[ -n "$RUN_EXAMPLES_KEEP" ] || rm -rf "$tmp"
}
trap cleanup 0
trap 'exit 1' HUP INT TERM

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# a free port: a random start, then the next one that nothing listens on
port=$(awk -v s="$$" 'BEGIN { srand(s); printf "%d", 20000 + int(rand() * 12000) }')
next_port() {
	port=$((port + 1))
	while ss -ltnH "sport = :$port" 2> /dev/null | grep -q .; do
		port=$((port + 1))
	done
}

# listening: TCP ports show in ss; RDMA listeners are rdma_cm ids, which
# 'rdma res show cm_id' lists (state LISTEN) where iproute2 has it; the
# server's "listening" line is printed after rmsg_listen() returned, so
# it is the fallback signal
is_listening() { # PORT SCHEME LOG
	case $2 in
	tcp | auto | rdma+tcp)
		ss -ltnH "sport = :$1" 2> /dev/null | grep -q .
		;;
	shm)
		ss -lxH 2> /dev/null | grep -q "@librmsg/shm/[^ ]*:$1 "
		;;
	rdma)
		if rdma res show cm_id > "$tmp/cm_id" 2> /dev/null; then
			grep LISTEN "$tmp/cm_id" | grep -q ":$1\b"
		else
			grep -q listening "$3"
		fi
		;;
	esac
}

# start_server NAME SCHEME CMD...: starts CMD in the background; sets
# $server (its PID) and $uri, waits until it listens
start_server() {
	name=$1 scheme=$2
	shift 2
	next_port
	case $addr in
	*:*) uri=$scheme://[$addr]:$port ;;
	*) uri=$scheme://$addr:$port ;;
	esac
	"$@" "$uri" ${once:+--once} > "$tmp/$name.server" 2>&1 &
	server=$!
	servers="$servers $server"
	i=0
	while ! is_listening "$port" "$scheme" "$tmp/$name.server"; do
		if ! kill -0 "$server" 2> /dev/null; then
			fail "$name: server exited before listening:"
			sed 's/^/    /' "$tmp/$name.server"
			return 1
		fi
		i=$((i + 1))
		if [ "$i" -gt $((limit * 10)) ]; then
			fail "$name: server not listening on $uri after $limit s"
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# wait_server NAME: a --once server exits 0 once its client has gone
wait_server() {
	i=0
	while kill -0 "$server" 2> /dev/null; do
		i=$((i + 1))
		if [ "$i" -gt $((limit * 10)) ]; then
			fail "$1: server still running $limit s after its client"
			kill "$server"
			break
		fi
		sleep 0.1
	done
	wait "$server"
	rc=$?
	servers=$(echo "$servers" | sed "s/ $server\b//")
	[ "$rc" = 0 ] || {
		fail "$1: server exited with $rc:"
		sed 's/^/    /' "$tmp/$1.server"
	}
}

stop_server() {
	kill "$server" 2> /dev/null
	wait "$server" 2> /dev/null
	servers=$(echo "$servers" | sed "s/ $server\b//")
}

# client NAME EXPECTED-RC CMD...: runs CMD with a time limit, output in
# $tmp/NAME.client; fails unless it exits with EXPECTED-RC
client() {
	name=$1 want=$2
	shift 2
	timeout "$limit" "$@" > "$tmp/$name.client" 2>&1 < "${stdin:-/dev/null}"
	rc=$?
	if [ "$rc" != "$want" ]; then
		fail "$name: client exited with $rc, expected $want:"
		sed 's/^/    /' "$tmp/$name.client"
		return 1
	fi
	return 0
}

expect() { # NAME FILE PATTERN
	grep -q -- "$3" "$2" || {
		fail "$1: no '$3' in the output:"
		sed 's/^/    /' "$2"
	}
}

t0=$(date +%s)

# ---- hello: the quick-start demo (its server runs until killed) ----
once=
if start_server hello "$transport" "$ex/hello" server; then
	client hello 0 "$ex/hello" client "$uri" 1 &&
		expect hello "$tmp/hello.client" "transport $transport, half round trip"
	stop_server
fi
echo "hello: done ($(($(date +%s) - t0)) s)"

# ---- kv_server, kv_client: single commands, then the self-check ----
if start_server kv "$transport" "$ex/kv_server"; then
	client kv-put 0 "$ex/kv_client" "$uri" put greeting hello-rmsg
	client kv-get 0 "$ex/kv_client" "$uri" get greeting &&
		expect kv-get "$tmp/kv-get.client" '^hello-rmsg$'
	client kv-del 0 "$ex/kv_client" "$uri" del greeting
	client kv-get-gone 1 "$ex/kv_client" "$uri" get greeting &&
		expect kv-get-gone "$tmp/kv-get-gone.client" 'get greeting'
	client kv-test 0 "$ex/kv_client" "$uri" test 500 &&
		expect kv-test "$tmp/kv-test.client" 'test passed (500 keys)'
	stop_server
	expect kv "$tmp/kv.server" "client connected over $transport"
fi
echo "kv: done ($(($(date +%s) - t0)) s)"

# ---- rpc_threads: one address, two server threads (issue 20) ----
if start_server rpc_threads "$transport" "$ex/rpc_threads" server \
	--threads 2; then
	client rpc-threads 0 "$ex/rpc_threads" client --conns 8 --calls 50 \
		"$uri" &&
		expect rpc-threads "$tmp/rpc-threads.client" \
			'^400 calls over 8 connections, answered by 2 server threads$'
	stop_server
	expect rpc_threads "$tmp/rpc_threads.server" \
		"listening on .* with 2 threads"
fi
echo "rpc_threads: done ($(($(date +%s) - t0)) s)"

# ---- bulk: write-with-immediate into the receiver's region ----
once=1
mib=32
[ "$transport" = rdma ] && mib=16
if start_server bulk "$transport" "$ex/bulk" server; then
	client bulk 0 "$ex/bulk" client "$uri" "$mib" &&
		expect bulk "$tmp/bulk.client" "verified $((mib * 2)), 0 bad"
	wait_server bulk
	expect bulk "$tmp/bulk.server" "$((mib * 2)) verified"
fi
echo "bulk: done ($(($(date +%s) - t0)) s)"

# ---- mixed_loop: its own timer and stdin next to librmsg ----
printf 'hello\nworld\n' > "$tmp/stdin"
if start_server mixed_loop "$transport" "$ex/mixed_loop" server; then
	stdin=$tmp/stdin client mixed_loop 0 "$ex/mixed_loop" client "$uri" 3
	for p in 'answer: HELLO' 'answer: WORLD' 'tick 3 answered' \
		'done, 5 answers'; do
		expect mixed_loop "$tmp/mixed_loop.client" "$p"
	done
	wait_server mixed_loop
fi
echo "mixed_loop: done ($(($(date +%s) - t0)) s)"

# ---- echo_socket (TCP sockets) and echo_rmsg: the same messages ----
n=300
if start_server echo_socket tcp "$ex/echo_socket" server; then
	client echo_socket 0 "$ex/echo_socket" client "$uri" $n &&
		expect echo_socket "$tmp/echo_socket.client" \
			"$n messages echoed"
	wait_server echo_socket
fi
# which transport rdma+tcp:// (auto:// without the same-host step) must
# pick: RDMA where RDMA is in use (the test VM, or
# RMSG_TEST_TRANSPORT=rdma), TCP without an RDMA stack (the CI host); on a
# host with an RDMA stack that the test was not told to use, either, as
# long as both sides agree. auto:// itself finds the server on this host:
# shm
if [ "${RMSG_VM:-}" = 1 ] || [ "$transport" = rdma ]; then
	auto_want=rdma
elif [ ! -e /dev/infiniband/rdma_cm ]; then
	auto_want=tcp
else
	auto_want=
fi
for scheme in "$transport" auto rdma+tcp; do
	if start_server "echo_rmsg-$scheme" "$scheme" "$ex/echo_rmsg" server; then
		client "echo_rmsg-$scheme" 0 "$ex/echo_rmsg" client "$uri" $n &&
			expect "echo_rmsg-$scheme" "$tmp/echo_rmsg-$scheme.client" \
				"$n messages echoed"
		wait_server "echo_rmsg-$scheme"
		want=$scheme
		[ "$scheme" = auto ] && want=shm
		[ "$scheme" = rdma+tcp ] && want=$auto_want
		if [ -z "$want" ]; then
			want=$(sed -n 's/^client: connected over \([a-z]*\)$/\1/p' \
				"$tmp/echo_rmsg-$scheme.client")
			echo "NOTE: auto:// chose '$want' (RDMA stack here, not" \
				"asked for: either is right)"
			case $want in
			tcp | rdma) ;;
			*) fail "echo_rmsg-$scheme: no transport in the output" ;;
			esac
		fi
		expect "echo_rmsg-$scheme" "$tmp/echo_rmsg-$scheme.client" \
			"^client: connected over $want\$"
		expect "echo_rmsg-$scheme" "$tmp/echo_rmsg-$scheme.server" \
			"^server: client connected over $want\$"
	fi
done
# the port moved the same bytes
a=$(sed -n 's/.*echoed, \([0-9]*\) bytes/\1/p' "$tmp/echo_socket.client")
b=$(sed -n 's/.*echoed, \([0-9]*\) bytes/\1/p' "$tmp/echo_rmsg-$transport.client")
[ -n "$a" ] && [ "$a" = "$b" ] ||
	fail "echo_socket echoed '$a' bytes, echo_rmsg '$b'"
echo "echo: done, auto:// on shm, rdma+tcp:// on ${auto_want:-$want}" \
	"($(($(date +%s) - t0)) s)"

# ---- resume_stream: a stream through two connection resets (TCP) ----
# ss -K resets the client's sockets to the server (root, and a kernel
# with INET_DIAG_DESTROY); the stream goes on with nothing lost
if [ "$transport" = tcp ] && start_server resume_stream tcp \
	"$ex/resume_stream" server; then
	"$ex/resume_stream" client "$uri" 2 > "$tmp/resume_stream.client" 2>&1 &
	cpid=$!
	cut=0
	for at in 0.6 0.6; do
		sleep "$at"
		ss -K dst "$addr" dport = "$port" > "$tmp/ss-K" 2>&1 &&
			grep -q ESTAB "$tmp/ss-K" && cut=$((cut + 1))
	done
	wait "$cpid" || fail "resume_stream: client exited with $?:" \
		"$(cat "$tmp/resume_stream.client")"
	wait_server resume_stream
	expect resume_stream "$tmp/resume_stream.server" "in order, each once"
	if [ "$cut" -gt 0 ]; then
		expect resume_stream "$tmp/resume_stream.client" \
			"resumed [1-9][0-9]* times"
	else
		echo "NOTE: resume_stream: ss -K cut nothing here (no root, or" \
			"no INET_DIAG_DESTROY): the stream ran unbroken"
	fi
	echo "resume_stream: $cut cuts: $(cat "$tmp/resume_stream.client")"
fi
echo "resume_stream: done ($(($(date +%s) - t0)) s)"

# ---- loop_epoll, loop_uv, loop_glib: the fd mode on foreign loops ----
# each is a server and a client in one process (port 0: any free port)
case $addr in
*:*) loop_uri=$transport://[$addr]:0 ;;
*) loop_uri=$transport://$addr:0 ;;
esac
for p in loop_epoll loop_uv loop_glib; do
	client "$p" 0 "$ex/$p" "$loop_uri" &&
		expect "$p" "$tmp/$p.client" "^$p: connected over $transport\$" &&
		expect "$p" "$tmp/$p.client" \
			"^$p: 64 of 64 calls and 16 of 16 messages echoed, 0 failures\$"
done
echo "loop_epoll, loop_uv, loop_glib: done ($(($(date +%s) - t0)) s)"

if [ "$failures" -gt 0 ]; then
	echo "$failures failures"
	exit 1
fi
echo "PASS: hello, kv, rpc_threads, bulk, mixed_loop, echo_socket, echo_rmsg, loop_epoll, loop_uv, loop_glib over $transport ($(($(date +%s) - t0)) s)"
exit 0
