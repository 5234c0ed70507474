#!/bin/bash
# SPDX-License-Identifier: MIT
#
# check-quick.sh tcp|rdma|python-tcp|python-rdma|conn-tcp - runs a comparison
# script once in its --quick mode and checks that it works and that its
# table parses: every metric is there, with positive numbers. Not a
# benchmark: nothing is asserted about the figures (test.sh runs `tcp`
# and `python-tcp` on the host, `rdma` and `python-rdma` inside the
# Soft-RoCE VM, where perftest is on the host's PATH).
here=$(cd "$(dirname "$0")" && pwd)
kind=${1:?usage: check-quick.sh tcp|rdma|python-tcp|python-rdma|conn-tcp|resume-tcp|resume-rdma}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-quick.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' 0

case $kind in
tcp)
	script=compare-tcp.sh
	metrics=("ping-pong 64 B" "stream 64 KiB, MB/s, 32" "stream 64 KiB, MB/s, 12"
		"instructions per 64 B" "fd mode: send ping-pong 64 B"
		"fd mode: rpc ping-pong 64 B" "fd mode: send rate 64 B"
		"fd mode: instructions per 64 B"
		"zmq: ping-pong 64 B" "zmq: rate 64 B" "zmq: stream 64 KiB"
		"nng: ping-pong 64 B" "nng: rate 64 B" "nng: stream 64 KiB")
	# busy polling needs a CPU per end (compare-tcp.sh skips it on one)
	[ "${BUSY_COMPARE:-1}" = 0 ] || [ "$(nproc)" -lt 2 ] ||
		metrics+=("busy poll: ping-pong 64 B")
	;;
rdma)
	script=compare-rdma.sh
	metrics=("lat_poll | 64 " "lat_event | 64 " "bw_write | 65536 "
		"rate_send | 64 " "rate_default | 64 " "fd_lat_poll | 64 " "fd_lat_event | 64 "
		"fd_rpc_event | 64 " "fd_rate_send | 64 ")
	# UCX and libfabric beside perftest (issue 16), unless left out
	[ "${UCX_COMPARE:-1}" = 0 ] || metrics+=("ucx_tag_lat | 64 " "ucx_tag_bw | 64 ")
	[ "${FI_COMPARE:-1}" = 0 ] || metrics+=("fi_pingpong | 64 ")
	;;
resume-tcp | resume-rdma)
	# what resume mode costs with no failures (issue 33)
	script=resume-cost.sh
	args=${kind#resume-}
	metrics=("ping-pong 64 B, half RTT us" "stream 64 KiB, MB/s")
	;;
python-tcp | python-rdma)
	# the Python binding against rmsg-perf (issue 19)
	script=compare-python.sh
	args=${kind#python-}
	metrics=("rpc_lat 64 B, half RTT us, py client"
		"rpc_lat 64 B, half RTT us, py both"
		"send_rate 64 B, Mmsg/s, py client"
		"send_rate 64 B, Mmsg/s, py both")
	;;
conn-tcp)
	# connection counts (issue 20): conn-mem.sh's two tables, each row
	# of the quick counts (1 and 10) with a positive figure
	bad=0
	for what in mem rate; do
		RESULTS=$tmp/results.txt "$here/conn-mem.sh" --quick $what tcp \
			> "$tmp/$what" 2>&1 || { echo "FAIL: conn-mem.sh $what exited $?"; bad=1; }
		for n in 1 10; do
			# mem: served and server KiB/conn; rate: RPC/s
			if ! grep "^| $n |" "$tmp/$what" | head -n 1 | awk -F'|' -v w=$what '
				{ a = $3 + 0; b = (w == "mem") ? $4 + 0 : a; ok = a > 0 && b > 0 }
				END { exit !(NR && ok) }'; then
				echo "FAIL: conn-mem.sh $what: no row of positive figures for $n"
				bad=1
			fi
		done
	done
	[ -s "$tmp/results.txt" ] || { echo "FAIL: conn-mem.sh wrote no results"; bad=1; }
	cat "$tmp/mem" "$tmp/rate"
	[ $bad = 0 ] && echo "PASS: conn-mem.sh --quick ran and its tables parse"
	exit $bad
	;;
*)
	echo "check-quick.sh: tcp, rdma, python-tcp, python-rdma, conn-tcp," \
		"resume-tcp or resume-rdma, not '$kind'" >&2
	exit 2
	;;
esac

RESULTS=$tmp/results.txt "$here/$script" --quick ${args:-} > "$tmp/out" 2>&1
rc=$?
if [ $rc != 0 ]; then
	echo "FAIL: $script --quick exited $rc"
	tail -n 30 "$tmp/out"
	exit 1
fi
bad=0
for m in "${metrics[@]}"; do
	row=$(grep -F "| $m" "$tmp/out" | head -n 1)
	if [ -z "$row" ]; then
		echo "FAIL: no row for '$m'"
		bad=1
		continue
	fi
	# librmsg, baseline and ratio: numbers above zero
	if ! printf '%s\n' "$row" | awk -F'|' -v m="$m" '{
		n = split(m, a, "|"); c = n + 2
		for (i = c; i < c + 3; i++) {
			v = $i; gsub(/ /, "", v)
			if (v !~ /^[0-9.e+]+$/ || v + 0 <= 0) exit 1
		}
	}'; then
		echo "FAIL: not a row of positive numbers: $row"
		bad=1
	fi
done
[ -s "$tmp/results.txt" ] || { echo "FAIL: $script wrote no results"; bad=1; }
if [ $bad != 0 ]; then
	sed 's/^/    /' "$tmp/out"
	exit 1
fi
grep '^|' "$tmp/out"
echo "PASS: $script --quick ran and its ${#metrics[@]} metrics parse"
