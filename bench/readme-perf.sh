#!/bin/sh
# SPDX-License-Identifier: MIT
#
# readme-perf.sh - the README's performance figures, generated from the
# latest benchmark results: rewrites what lies between the markers
# "<!-- perf:begin" and "<!-- perf:end -->" in README.md, and the plots
# docs/perf-tcp.png (TCP: librmsg against raw libev, ZeroMQ and nng) and
# docs/perf-rdma.png (rxe: librmsg against perftest, through plot.sh).
#
#   bench/readme-perf.sh            rewrite the section and the plots
#   bench/readme-perf.sh --check    regenerate the section into a
#                                   temporary file and fail if README.md
#                                   differs (no plot; no gnuplot needed)
#
# Inputs: bench/results-tcp.txt (compare-tcp.sh) and
# bench/results-rdma.txt (compare-rdma.sh in the VM), or TCP_RESULTS and
# RDMA_RESULTS. Every figure comes from their round= lines (medians over
# the rounds, and the spread of the per-round ratios), so the section
# says only what the files hold. A load warning in a results file is
# repeated in the section. Needs awk; gnuplot (gnuplot-nox) for plots.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
tcp=${TCP_RESULTS:-$here/results-tcp.txt}
rdma=${RDMA_RESULTS:-$here/results-rdma.txt}
readme=${README:-$top/README.md}
check=0
[ "${1:-}" = --check ] && check=1

for f in "$tcp" "$rdma"; do
	[ -s "$f" ] || { echo "readme-perf.sh: $f missing or empty" >&2; exit 1; }
done
grep -q '^<!-- perf:begin' "$readme" && grep -q '^<!-- perf:end -->' "$readme" ||
	{ echo "readme-perf.sh: no perf markers in $readme" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' 0

# ---- TCP: pairs of result lines per round ------------------------------
# out: "KEY A B" per round (A librmsg, B the other), KEY one of
# raw_lat raw_bw zmq_lat zmq_rate zmq_bw nng_lat nng_rate nng_bw
awk '
function f(k,   i, kv) {
	for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
	return ""
}
function f_prev(k,   i, n, w, kv) {
	n = split(prev, w, " ")
	for (i = 1; i <= n; i++) { split(w[i], kv, "="); if (kv[1] == k) return kv[2] }
	return ""
}
/^round=/ { prev = save; save = $0 }
/^round=/ {
	r = f("round")
	# the first table: the line of rmsg-perf, then that of raw_pingpong;
	# the same for the stream (a second librmsg stream line: eq_credits=)
	if ($2 ~ /^raw_pingpong/) { print "raw_lat", f_prev("lat_us"), f("lat_us"); next }
	if ($2 ~ /^raw_stream/) { print "raw_bw", f_prev("mbps"), f("mbps"); next }
	# callgrind: "rmsg Ir(N)=.. Ir(2N)=.. per_rt=A; raw ... per_rt=B"
	if ($2 == "callgrind" && $3 == "rmsg" && $4 != "-L") {
		a = $0; sub(/^[^;]*per_rt=/, "", a); sub(/;.*/, "", a)
		b = $0; sub(/.*per_rt=/, "", b)
		print "raw_ins", a, b; next
	}
	if ($2 == "zmq_table" || $2 == "nng_table") {
		lib = substr($2, 1, 3)
		if ($3 ~ /^(zmq|nng)_pair/) k = "lat"
		else if ($3 ~ /^(zmq|nng)_pull/) k = (f("size") + 0 <= 1024) ? "rate" : "bw"
		else k = f("mode")
		v = (k == "lat") ? f("lat_us") : (k == "rate") ? f("mmsgs") : f("mbps")
		if ($3 ~ /^(zmq|nng)_/) B[lib, k, r] = v; else A[lib, k, r] = v
		if (((lib, k, r) in A) && ((lib, k, r) in B)) {
			print lib "_" k, A[lib, k, r], B[lib, k, r]
			delete A[lib, k, r]; delete B[lib, k, r]
		}
	}
}' "$tcp" >"$tmp/tcp.pairs"

# stats KEY...: "KEY median_A median_B ratio_of_medians min_ratio max_ratio n"
stats() {
	awk -v keys="$*" '
	function med(x, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
		return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
	}
	$2 > 0 && $3 > 0 { c = ++n[$1]; A[$1, c] = $2; B[$1, c] = $3 }
	END {
		nk = split(keys, K, " ")
		for (i = 1; i <= nk; i++) {
			k = K[i]; if (!(k in n)) continue
			lo = 1e300; hi = 0
			delete a; delete b
			for (j = 1; j <= n[k]; j++) {
				a[j] = A[k, j]; b[j] = B[k, j]; r = a[j] / b[j]
				if (r < lo) lo = r; if (r > hi) hi = r
			}
			ma = med(a, n[k]); mb = med(b, n[k])
			printf "%s %.6g %.6g %.3f %.3f %.3f %d\n", k, ma, mb, ma / mb, lo, hi, n[k]
		}
	}' "$1"
}
stats "$tmp/tcp.pairs" raw_lat raw_bw raw_ins zmq_lat zmq_rate zmq_bw nng_lat \
	nng_rate nng_bw >"$tmp/tcp.stats"
[ -s "$tmp/tcp.stats" ] || { echo "readme-perf.sh: no rounds in $tcp" >&2; exit 1; }

# ---- RDMA: metric=M size=S rmsg=A base=B ------------------------------
awk '/^round=/ {
	for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	if (f["metric"] !~ /^(lat_poll|lat_event|bw_write|rate_send|ucx_tag_lat|ucx_tag_bw)$/) next
	print f["metric"] "@" f["size"], f["rmsg"], f["base"]
}' "$rdma" >"$tmp/rdma.pairs"
stats "$tmp/rdma.pairs" lat_poll@64 lat_event@64 bw_write@65536 \
	rate_send@64 ucx_tag_lat@64 ucx_tag_bw@64 >"$tmp/rdma.stats"
[ -s "$tmp/rdma.stats" ] || { echo "readme-perf.sh: no rounds in $rdma" >&2; exit 1; }

# ---- the section ---------------------------------------------------------
# hdr FILE: "commit, date, N rounds" from a results header
hdr() {
	awk 'NR <= 3 && /^# compare-/ { d = $3 }
	NR <= 3 && /^# librmsg / { c = $3; sub(/,$/, "", c)
		for (i = 1; i <= NF; i++) if ($i ~ /^rounds=/) { r = $i; sub(/rounds=/, "", r); sub(/,$/, "", r) } }
	END { printf "librmsg %s, %s, %s interleaved rounds", c, d, r }' "$1"
}
load() {
	grep -h '^# warning: busy' "$1" | sed 's/^# warning: //' | sort -u |
		head -n 3 | paste -sd ';' - | sed 's/;/; /g'
}
{
	echo '<!-- perf:begin: generated by bench/readme-perf.sh from bench/results-tcp.txt and bench/results-rdma.txt; edits here are overwritten -->'
	echo
	echo "TCP on 127.0.0.1: $(hdr "$tcp") (\`bench/compare-tcp.sh\`)."
	echo "RDMA on Soft-RoCE (rxe) under qemu TCG: $(hdr "$rdma")" \
		"(\`bench/compare-rdma.sh\` in the VM)."
	w=$(load "$tcp")
	[ -z "$w" ] || echo "The TCP run shared the machine with other work" \
		"(the script warned: $w): the absolute figures are noisy," \
		"the interleaved ratios less so."
	w=$(load "$rdma")
	[ -z "$w" ] || echo "The RDMA run shared the machine with other" \
		"work ($w): busy-polling figures suffer most from such load" \
		"(the guest's two CPUs poll on both sides);" \
		"docs/performance.md keeps the earlier, quieter runs."
	echo
	echo "| comparison | librmsg (median) | other (median) | librmsg / other: ratio of medians (min–max per round) |"
	echo "| --- | --- | --- | --- |"
	awk -v file=tcp '
	function name(k) {
		if (k == "raw_lat") return "TCP 64 B ping-pong, half round trip, us: raw libev"
		if (k == "raw_bw") return "TCP 64 KiB stream, MB/s: raw libev"
		if (k == "raw_ins") return "TCP instructions per 64 B round trip (client, callgrind): raw libev"
		if (k == "zmq_lat") return "TCP 64 B ping-pong, half round trip, us: ZeroMQ PAIR"
		if (k == "zmq_rate") return "TCP 64 B message rate, Mmsg/s: ZeroMQ PUSH/PULL"
		if (k == "zmq_bw") return "TCP 64 KiB stream, MB/s: ZeroMQ PUSH/PULL"
		if (k == "nng_lat") return "TCP 64 B ping-pong, half round trip, us: nng PAIR"
		if (k == "nng_rate") return "TCP 64 B message rate, Mmsg/s: nng PUSH/PULL"
		if (k == "nng_bw") return "TCP 64 KiB stream, MB/s: nng PUSH/PULL"
		if (k == "lat_poll@64") return "rxe 64 B send latency, polling, us: `ib_send_lat`"
		if (k == "lat_event@64") return "rxe 64 B latency, event mode, us: `ib_send_lat -e`"
		if (k == "bw_write@65536") return "rxe 64 KiB `write_imm` bandwidth, MB/s: `ib_write_bw`"
		if (k == "rate_send@64") return "rxe 64 B send rate, Mmsg/s: `ib_send_bw`"
		if (k == "ucx_tag_lat@64") return "rxe 64 B tag latency, us: UCX `ucx_perftest tag_lat`"
		if (k == "ucx_tag_bw@64") return "rxe 64 B tag rate, Mmsg/s: UCX `ucx_perftest tag_bw`"
		return k
	}
	{ printf "| %s | %.4g | %.4g | %.3f (%.3f–%.3f, %d rounds) |\n",
		name($1), $2, $3, $4, $5, $6, $7 }' "$tmp/tcp.stats" "$tmp/rdma.stats"
	awk '$1 == "nng_lat" { l = $3 } $1 == "nng_rate" { r = $3 }
	END { if (l && r) printf "\nnng at its defaults (nothing tuned, on either side, as for ZeroMQ): its 64 B PUSH/PULL rate, %.4g Mmsg/s, is %.1f us per message, about its PAIR half round trip (%.1f us), as if each send waited for the peer.\n", r, 1 / r, l }' "$tmp/tcp.stats"
	echo
	grep -q '^ucx_' "$tmp/rdma.stats" ||
		echo "The RDMA results file holds no UCX rounds; docs/performance.md has the last UCX figures."
	echo
	echo '![TCP: librmsg against raw libev, ZeroMQ and nng](docs/perf-tcp.png)'
	echo
	if grep -q '^ucx_' "$tmp/rdma.stats"; then
		echo '![rxe: librmsg against perftest and UCX](docs/perf-rdma.png)'
	else
		echo '![rxe: librmsg against perftest](docs/perf-rdma.png)'
	fi
	echo
	echo '<!-- perf:end -->'
} >"$tmp/section.md"
sed -i '/^$/N;/^\n$/D' "$tmp/section.md"

# the README with the section replaced
awk -v sec="$tmp/section.md" '
/^<!-- perf:begin/ { while ((getline l < sec) > 0) print l; skip = 1; next }
/^<!-- perf:end -->/ { skip = 0; next }
!skip' "$readme" >"$tmp/README.md"

if [ $check = 1 ]; then
	if ! cmp -s "$tmp/README.md" "$readme"; then
		diff -u "$readme" "$tmp/README.md" | head -n 40 >&2
		echo "readme-perf.sh: README.md's performance section is not" \
			"what the results files give: run bench/readme-perf.sh" >&2
		exit 1
	fi
	echo "readme-perf.sh: README.md's section matches the results" \
		"($(wc -l <"$tmp/tcp.stats") TCP rows, $(wc -l <"$tmp/rdma.stats") RDMA rows)"
	exit 0
fi
cp "$tmp/README.md" "$readme"
echo "readme-perf.sh: wrote the section of $readme" >&2

# ---- the plots -----------------------------------------------------------
command -v gnuplot >/dev/null ||
	{ echo "readme-perf.sh: gnuplot missing (gnuplot-nox)" >&2; exit 1; }
# one file per panel: label, librmsg, other
for m in lat rate bw; do
	awk -v m="$m" '{ split($1, p, "_") }
	p[2] == m { lab = p[1] == "raw" ? "raw libev" : p[1] == "zmq" ? "ZeroMQ" : "nng"
		printf "\"%s\" %s %s\n", lab, $2, $3 }' "$tmp/tcp.stats" >"$tmp/$m.dat"
done
title="TCP on 127.0.0.1, $(hdr "$tcp"): medians"
gnuplot <<GP
set terminal pngcairo size 1200,420 font "sans,10"
set output "$top/docs/perf-tcp.png"
set multiplot layout 1,3 title "$title"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.15, 0
set key top left
set title "64 B ping-pong, half round trip (lower is better)"
set ylabel "us"
plot "$tmp/lat.dat" u 2:xtic(1) t "librmsg" lc rgb "#1f77b4", "" u 3 t "other" lc rgb "#ff7f0e"
set title "64 B message rate (higher is better)"
set ylabel "Mmsg/s"
plot "$tmp/rate.dat" u 2:xtic(1) t "librmsg" lc rgb "#1f77b4", "" u 3 t "other" lc rgb "#ff7f0e"
set title "64 KiB stream (higher is better)"
set ylabel "MB/s (10^6 B/s)"
plot "$tmp/bw.dat" u 2:xtic(1) t "librmsg" lc rgb "#1f77b4", "" u 3 t "other" lc rgb "#ff7f0e"
unset multiplot
GP
echo "readme-perf.sh: wrote $top/docs/perf-tcp.png" >&2
"$here/plot.sh" "$rdma" "$top/docs/perf-rdma.png"
