#!/bin/bash
# SPDX-License-Identifier: MIT
#
# compare-shm.sh - librmsg over shm:// (tools/rmsg-perf) against UCX's
# shared-memory transports (ucx_perftest) and librmsg over TCP loopback,
# on this machine, in interleaved rounds (issue 34):
#   lat_poll   64 B half round trip, both ends polling: rmsg-perf -b
#              BUSY_US over shm against ucx_perftest -t tag_lat with
#              UCX_TLS=posix,self and sysv,self (UCX polls always)
#   lat_event  64 B half round trip, event mode: shm against tcp (librmsg)
#   rate       64 B messages per second: shm against ucx tag_bw -s 64
#              (posix,self) and against librmsg over tcp
#   bw_64k, bw_1m  stream: shm against ucx tag_bw (posix,cma,self), and
#              against a memcpy bound: half the bandwidth of one memcpy of
#              that size measured here (bench/memcpy_bw: the shm pipe
#              copies each byte twice, into the ring and out of it)
# Server on CPU 0, client on CPU 1 (polling needs one each). Prints a
# markdown table of medians with the per-round min and max of each ratio;
# every raw line goes to bench/results-shm.txt.
#
#   bench/compare-shm.sh [ROUNDS]      (default 5)
#
# Needs a built tree (make) and ucx-utils (ucx_perftest).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=${BUILDDIR:-$top}
rounds=${1:-5}
BUSY_US=${BUSY_US:-1000}
LAT_ITERS=${LAT_ITERS:-50000}
RATE_ITERS=${RATE_ITERS:-500000}
out=${RESULTS:-$here/results-shm.txt}
export LD_LIBRARY_PATH=$build/.libs
perf=$build/tools/.libs/rmsg-perf
[ -x "$perf" ] || { echo "compare-shm.sh: build first (make)" >&2; exit 1; }
command -v ucx_perftest >/dev/null || {
	echo "compare-shm.sh: no ucx_perftest (apt-get install ucx-utils)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/memcpy_bw" "$here/memcpy_bw.c"

port() { echo $((20000 + RANDOM % 20000)); }

# rmsg SCHEME SERVER_OPTS CLIENT_OPTS FIELD: a client result field
rmsg() {
	local p s v
	p=$(port)
	# shellcheck disable=SC2086
	taskset -c 0 "$perf" $2 server "$1://127.0.0.1:$p" >/dev/null 2>&1 &
	s=$!
	sleep 0.3
	# shellcheck disable=SC2086
	v=$(taskset -c 1 timeout 120 "$perf" -P $3 client "$1://127.0.0.1:$p" |
		tee -a "$out" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$4=//p")
	kill "$s" 2>/dev/null || true
	wait "$s" 2>/dev/null || true
	echo "${v:-nan}"
}

# ucx TLS TEST SIZE ITERS COLUMN: the Final line's column (3: median
# latency, 7: overall MB/s, 9: overall msg/s)
ucx() {
	local p s v
	p=$(port)
	UCX_TLS=$1 taskset -c 0 ucx_perftest -p "$p" >/dev/null 2>&1 &
	s=$!
	sleep 0.5
	v=$(UCX_TLS=$1 taskset -c 1 timeout 120 ucx_perftest 127.0.0.1 \
		-p "$p" -t "$2" -s "$3" -n "$4" 2>&1 | tee -a "$out" |
		awk -v c="$5" '/^Final:/ {print $c}')
	kill "$s" 2>/dev/null || true
	wait "$s" 2>/dev/null || true
	echo "${v:-nan}"
}

: >"$out"
echo "# compare-shm.sh $(date -u +%FT%TZ)" | tee -a "$out"
echo "# librmsg $(git -C "$top" rev-parse --short HEAD 2>/dev/null), $(uname -sr), $(nproc) CPUs, rounds=$rounds, server CPU 0, client CPU 1" | tee -a "$out"
echo "# $(ucx_info -v | head -n 1)" | tee -a "$out"
declare -A R
for r in $(seq 1 "$rounds"); do
	R[lat_poll_shm]+=" $(rmsg shm "-b $BUSY_US" "-b $BUSY_US -m lat -s 64 -n $LAT_ITERS" lat_us)"
	R[lat_poll_posix]+=" $(ucx posix,self tag_lat 64 $LAT_ITERS 3)"
	R[lat_poll_sysv]+=" $(ucx sysv,self tag_lat 64 $LAT_ITERS 3)"
	R[lat_event_shm]+=" $(rmsg shm "" "-m lat -s 64 -n 20000" lat_us)"
	R[lat_event_tcp]+=" $(rmsg tcp "" "-m lat -s 64 -n 20000" lat_us)"
	R[rate_shm]+=" $(rmsg shm "" "-m rate -s 64 -n $RATE_ITERS" mmsgs)"
	R[rate_tcp]+=" $(rmsg tcp "" "-m rate -s 64 -n $RATE_ITERS" mmsgs)"
	R[rate_ucx]+=" $(ucx posix,self tag_bw 64 $RATE_ITERS 9)"
	R[bw_64k_shm]+=" $(rmsg shm "" "-m bw -s 65536 -n 20000" mbps)"
	R[bw_64k_ucx]+=" $(ucx posix,cma,self tag_bw 65536 20000 7)"
	R[bw_64k_memcpy]+=" $("$tmp/memcpy_bw" 65536)"
	R[bw_1m_shm]+=" $(rmsg shm "" "-m bw -s 1m -n 2000" mbps)"
	R[bw_1m_ucx]+=" $(ucx posix,cma,self tag_bw 1048576 2000 7)"
	R[bw_1m_memcpy]+=" $("$tmp/memcpy_bw" 1048576)"
	echo "round $r done" >&2
done
for k in "${!R[@]}"; do echo "raw $k:${R[$k]}" >>"$out"; done

# table NAME A B SCALE_B TARGET: median of A, of B*SCALE_B, ratio A/(B*S)
# with per-round min and max
row() {
	python3 - "$1" "${R[$2]}" "${R[$3]}" "$4" "$5" <<'PY' | tee -a "$out"
import statistics, sys
name, a, b, s, target = sys.argv[1:6]
a = [float(x) for x in a.split()]
b = [float(x) * float(s) for x in b.split()]
r = [x / y for x, y in zip(a, b)]
print(f"| {name} | {statistics.median(a):.4g} | {statistics.median(b):.4g} "
      f"| {statistics.median(a) / statistics.median(b):.3f} "
      f"| {min(r):.3f}-{max(r):.3f} | {target} |")
PY
}
echo "| metric | librmsg shm | peer | ratio | per round | target |" | tee -a "$out"
echo "|---|---|---|---|---|---|" | tee -a "$out"
row "lat_poll us vs ucx posix" lat_poll_shm lat_poll_posix 1 "<= 1.2"
row "lat_poll us vs ucx sysv" lat_poll_shm lat_poll_sysv 1 "<= 1.2"
row "lat_event us vs librmsg tcp" lat_event_shm lat_event_tcp 1 "<= 0.4"
row "rate Mmsg/s vs librmsg tcp" rate_shm rate_tcp 1 ">= 2"
row "rate Mmsg/s vs ucx tag_bw 64" rate_shm rate_ucx 0.000001 ">= 1"
row "64 KiB MB/s vs ucx posix+cma" bw_64k_shm bw_64k_ucx 1 ">= 0.9"
row "64 KiB MB/s vs memcpy/2" bw_64k_shm bw_64k_memcpy 0.5 ">= 0.8"
row "1 MiB MB/s vs ucx posix+cma" bw_1m_shm bw_1m_ucx 1 ">= 0.9"
row "1 MiB MB/s vs memcpy/2" bw_1m_shm bw_1m_memcpy 0.5 ">= 0.8"
