#!/bin/sh
# compare-rdma.sh - librmsg over rdma:// against perftest on the same rxe
# device, alternating A B A B for ROUNDS rounds; run inside the Soft-RoCE
# VM:  tests/vm/run-in-vm.sh -- bench/compare-rdma.sh
# Prints, per metric, the median of each side, the ratio of the medians
# and the lowest and highest per-round ratio. Numbers under qemu TCG are
# only meaningful as ratios.
set -u
cd "$(dirname "$0")/.." || exit 1
ROUNDS=${ROUNDS:-5}
ADDR=${RMSG_TEST_ADDR:-198.18.0.1}
ITERS=${ITERS:-2000}
out=$(mktemp -d)
B=bench/build-rdma
mkdir -p $B
gcc -O2 -Iinclude -o $B/rmsg_bench bench/rmsg_bench.c -L.libs -lrmsg -lev \
	-Wl,-rpath,"$PWD/.libs" || exit 1
ulimit -l unlimited

waitport() {
	i=0
	while [ $i -lt 100 ]; do
		ss -ltn | grep -q ":$1 " && return 0
		rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*$1" && return 0
		sleep 0.1
		i=$((i + 1))
	done
}

port=19000
run_rmsg() { # mode size extra-args -> prints the value
	port=$((port + 1))
	$B/rmsg_bench $3 server "rdma://$ADDR:$port" >/dev/null 2>&1 &
	s=$!
	waitport $port
	sleep 0.3
	$B/rmsg_bench $3 "$1" "rdma://$ADDR:$port" "$2" "$4" 2>/dev/null
	kill $s 2>/dev/null
	wait $s 2>/dev/null
}
run_perf() { # tool args...
	port=$((port + 1))
	"$@" -p $port >/dev/null 2>&1 &
	s=$!
	sleep 1.5
	"$@" -p $port "$ADDR" 2>/dev/null
	kill $s 2>/dev/null
	wait $s 2>/dev/null
}

r=1
while [ $r -le "$ROUNDS" ]; do
	v=$(run_rmsg pingpong 64 "-b 500" $ITERS | sed -n 's/.*lat_us=\([0-9.]*\).*/\1/p')
	p=$(run_perf ib_send_lat -s 64 -n $ITERS | awk '$1 == 64 {print $5}')
	echo "lat_poll $v $p" >> $out/res
	v=$(run_rmsg pingpong 64 "" $ITERS | sed -n 's/.*lat_us=\([0-9.]*\).*/\1/p')
	p=$(run_perf ib_send_lat -e -s 64 -n $ITERS | awk '$1 == 64 {print $5}')
	echo "lat_event $v $p" >> $out/res
	v=$(run_rmsg stream 65536 "" 33554432 | sed -n 's/.*mbps=\([0-9.]*\).*/\1/p')
	p=$(run_perf ib_send_bw -s 65536 -n 512 | awk '$1 == 65536 {print $4 * 1.048576}')
	echo "bw_send_64k $v $p" >> $out/res
	r=$((r + 1))
done
echo "| metric | librmsg median | perftest median | ratio | min | max |"
echo "|---|---|---|---|---|---|"
for m in lat_poll lat_event bw_send_64k; do
	grep "^$m " $out/res | awk -v m=$m '
		BEGIN { n = 0 }
		NF == 3 && $2 > 0 && $3 > 0 { a[n] = $2; b[n] = $3; r[n] = $2 / $3; n++ }
		function med(x, n,   i, j, t) {
			for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
				if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
			return n % 2 ? x[(n - 1) / 2] : (x[n / 2 - 1] + x[n / 2]) / 2
		}
		END {
			if (!n) { print "| " m " | no data | | | | |"; exit }
			ma = med(a, n); mb = med(b, n)
			lo = r[0]; hi = r[0]
			for (i = 1; i < n; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
			printf "| %s | %.2f | %.2f | %.3f | %.3f | %.3f |\n", m, ma, mb, ma / mb, lo, hi
		}'
done
echo "(latency in us, half round trip; bandwidth in MB/s; $ROUNDS rounds, $ITERS iterations)"
cat $out/res >&2
rm -rf "$out"
