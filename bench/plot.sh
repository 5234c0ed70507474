#!/bin/sh
# SPDX-License-Identifier: MIT
#
# plot.sh - docs/perf-rdma.png from bench/results-rdma.txt (the output of
# compare-rdma.sh): median latency and bandwidth against message size,
# librmsg beside perftest on the same device; and, when the results hold
# UCX rounds (ucx_tag_lat, ucx_tag_bw), a third panel: librmsg beside
# ucx_perftest at 64 B.
#
#   bench/plot.sh [RESULTS [PNG]]
#
# Needs gnuplot (Debian: gnuplot-nox).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
in=${1:-$here/results-rdma.txt}
out=${2:-$here/../docs/perf-rdma.png}
command -v gnuplot > /dev/null || { echo "plot.sh: gnuplot missing" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' 0

# one file per metric: size, librmsg median, perftest median
awk -v dir="$tmp" '
function med(x, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
	return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
}
/^round=/ {
	for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	if (f["rmsg"] <= 0 || f["base"] <= 0) next
	k = f["metric"] " " f["size"]
	if (!(k in n)) order[++nk] = k
	c = ++n[k]; A[k, c] = f["rmsg"]; B[k, c] = f["base"]
}
END {
	for (i = 1; i <= nk; i++) {
		k = order[i]; split(k, p, " ")
		delete a; delete b
		for (j = 1; j <= n[k]; j++) { a[j] = A[k, j]; b[j] = B[k, j] }
		print p[2], med(a, n[k]), med(b, n[k]) > (dir "/" p[1] ".dat")
	}
}' "$in"
for m in lat_poll lat_event bw_write; do
	[ -s "$tmp/$m.dat" ] || { echo "plot.sh: no $m data in $in" >&2; exit 1; }
	sort -n "$tmp/$m.dat" -o "$tmp/$m.dat"
done
ucx=0
: >"$tmp/ucx.dat"
for m in ucx_tag_lat ucx_tag_bw; do
	[ -s "$tmp/$m.dat" ] || continue
	ucx=1
	# label and the ratio of the medians, librmsg / UCX, at 64 B
	awk -v m="$m" '$1 == 64 { printf "\"%s\" %.3f\n", m == "ucx_tag_lat" ? "tag latency" : "tag message rate", $2 / $3 }' \
		"$tmp/$m.dat" >>"$tmp/ucx.dat"
done
layout="1,2" width=1200
[ $ucx = 0 ] || { layout="1,3" width=1600; }
title=$(sed -n 's/^# librmsg \([^,]*\),.*rounds=\([0-9]*\).*/librmsg \1, \2 rounds/p' "$in" | head -1)

gnuplot << GP
set terminal pngcairo size $width,480 font "sans,10"
set output "$out"
set multiplot layout $layout title "librmsg vs perftest$([ $ucx = 0 ] || echo ' and UCX') on Soft-RoCE (rxe) under qemu TCG: medians; only the ratios mean anything ($title)"
set logscale xy
set grid
set key top left
set xlabel "message size (bytes)"
set xtics ("64" 64, "4K" 4096, "64K" 65536, "1M" 1048576)
set title "latency (half round trip)"
set ylabel "us"
plot "$tmp/lat_poll.dat" u 1:2 w lp lw 2 pt 7 lc rgb "#1f77b4" t "rmsg-perf send, busy-poll", \
     "$tmp/lat_poll.dat" u 1:3 w lp lw 2 pt 7 dt 2 lc rgb "#1f77b4" t "ib\\\\_send\\\\_lat", \
     "$tmp/lat_event.dat" u 1:2 w lp lw 2 pt 5 lc rgb "#d62728" t "rmsg-perf send, event mode", \
     "$tmp/lat_event.dat" u 1:3 w lp lw 2 pt 5 dt 2 lc rgb "#d62728" t "ib\\\\_send\\\\_lat -e"
set title "bandwidth (one-way stream, 128 outstanding)"
set ylabel "MB/s (10^6 B/s)"
set key top left
plot "$tmp/bw_write.dat" u 1:2 w lp lw 2 pt 7 lc rgb "#2ca02c" t "rmsg-perf write\\\\_imm", \
     "$tmp/bw_write.dat" u 1:3 w lp lw 2 pt 7 dt 2 lc rgb "#2ca02c" t "ib\\\\_write\\\\_bw"
$([ $ucx = 0 ] || printf '%s\n' 'unset logscale' 'unset xlabel' \
	'set xtics ()' 'set style fill solid 0.8 border -1' 'set boxwidth 0.5' \
	'set yrange [0:*]' 'set offsets 0.5, 0.5, graph 0.1, 0' 'set key off' \
	'set title "librmsg / ucx\\_perftest (UCX) at 64 B, ratio of medians"' \
	'set ylabel "ratio (latency: lower is better; rate: higher)"' \
	"plot \"$tmp/ucx.dat\" u 0:2:xtic(1) w boxes lc rgb \"#9467bd\", 1 w l dt 2 lc rgb \"black\"")
unset multiplot
GP
echo "plot.sh: wrote $out" >&2
