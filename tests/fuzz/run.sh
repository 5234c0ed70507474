#!/bin/sh
# tests/fuzz/run.sh [SECONDS] - builds the libFuzzer target fuzz_proto
# (the wire decoders of src/proto.c and the descriptor decoder of
# src/mr.c) with clang, ASan and UBSan, replays every seed and every
# regression input in tests/fuzz/regressions/, then fuzzes a copy of the
# seed corpus for SECONDS (default 60, or $FUZZ_SECONDS). Then the same
# for fuzz_conn, the stateful target (a whole connection behind a fake
# transport, driven by frame and call sequences; its invariants are in
# fuzz_conn.c), with the inputs of tests/fuzz/regressions-conn/, for
# $FUZZ_CONN_SECONDS (default SECONDS). The two targets are fuzzed at
# the same time (one process each, one core each: the machine has two),
# unless FUZZ_PARALLEL=0; each still gets its whole time.
#
# Exit: 0 clean; 1 a crash, leak, timeout or failed property (the
# reproducer's path is printed); 77 no clang with libFuzzer here.
#
#   tests/fuzz/run.sh --regen   rewrites the seed corpus and the named
#                               regression inputs from gen_corpus.c
#
# Environment: FUZZ_BUILD_DIR (default build/fuzz), FUZZ_CC (default
# clang, else clang-14), FUZZ_KEEP_CORPUS=1 keeps the grown corpus of
# the previous run instead of starting again from the seeds,
# FUZZ_SAVE_REGRESSIONS=1 copies a crash straight into regressions/.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
fz=$top/tests/fuzz
B=${FUZZ_BUILD_DIR:-$top/build/fuzz}
mkdir -p "$B"
B=$(cd "$B" && pwd)

CC=${FUZZ_CC:-}
if [ -z "$CC" ]; then
	for c in clang clang-14; do
		command -v "$c" >/dev/null 2>&1 && { CC=$c; break; }
	done
fi
skip() {
	echo '##################################################################'
	echo "# SKIP: fuzzing NOT run: $1"
	echo '# (Debian: apt-get install clang-14 libclang-rt-14-dev)'
	echo '##################################################################'
	exit 77
}
[ -n "$CC" ] || skip "no clang"
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
	>"$B/probe.c"
"$CC" -fsanitize=fuzzer,address,undefined -o "$B/probe" "$B/probe.c" \
	>/dev/null 2>&1 || skip "$CC cannot link -fsanitize=fuzzer"

# the sources linked into the target: proto.c and mr.c are what is
# fuzzed, log.c and pool.c (the registration budget) are mr.c's
# dependencies (fuzz_proto.c stubs its call into rekey.c). If mr.c gains
# one, add its source here.
SRCS="src/proto.c src/mr.c src/regcache.c src/log.c src/pool.c"

if [ "${1:-}" = --regen ]; then
	# shellcheck disable=SC2086
	(cd "$top" && "$CC" -O1 -g -I include -I src -o "$B/gen_corpus" \
		tests/fuzz/gen_corpus.c $SRCS)
	rm -f "$fz"/corpus/proto/*
	mkdir -p "$fz/corpus/proto" "$fz/regressions"
	"$B/gen_corpus" "$fz/corpus/proto" "$fz/regressions"
	echo "run.sh: $(find "$fz/corpus/proto" -type f | wc -l) seeds," \
		"$(find "$fz/regressions" -type f ! -name 'README*' | wc -l)" \
		regression inputs
	exit 0
fi

secs=${1:-${FUZZ_SECONDS:-60}}
case $secs in
'' | *[!0-9]*) echo "usage: $0 [SECONDS] | --regen" >&2; exit 2 ;;
esac

# 4. the stateful target: a connection (the whole core) behind a fake
# transport; starts from its regression inputs, grows its own corpus
conn_stage() {
	CSRCS="src/async.c src/cfg.c src/conn.c src/send.c src/rx.c src/pack.c
	 src/start.c src/why.c src/hello.c src/session.c src/resume.c src/rekey.c src/ctrl.c src/rma.c src/reap.c src/reclaim.c
	 src/credit.c src/ctx.c src/err.c
	 src/keepalive.c src/listener.c src/log.c src/mr.c src/regcache.c src/msg.c src/pool.c
	 src/proto.c src/rpc.c src/stats.c src/uri.c src/auth.c src/resolve.c
	 src/timer.c src/ownloop.c src/group.c src/registry.c
	 tests/unit/fake_tr.c tests/unit/fake_registry.c"
	csecs=${FUZZ_CONN_SECONDS:-$secs}
	t0=$(date +%s)
	# shellcheck disable=SC2086
	(cd "$top" && "$CC" -g -O1 -fno-omit-frame-pointer \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-Wall -DFAKE_TR_ABORT -DRMSGI_STRICT -I include -I src -o "$B/fuzz_conn" \
		tests/fuzz/fuzz_conn.c \
		$CSRCS -lev -lnettle)
	n=0
	for f in "$fz"/regressions-conn/*; do
		[ -f "$f" ] || continue
		if ! "$B/fuzz_conn" "$f" >"$B/replay-conn.log" 2>&1; then
			cat "$B/replay-conn.log"
			echo "run.sh: FAIL: replaying $f fails; reproduce with:"
			echo "  $B/fuzz_conn $f"
			exit 1
		fi
		n=$((n + 1))
	done
	rm -rf "$B/corpus-conn" "$B/artifacts-conn"
	mkdir -p "$B/corpus-conn" "$B/artifacts-conn"
	cp "$fz"/regressions-conn/* "$B/corpus-conn/" 2>/dev/null || true
	rc=0
	"$B/fuzz_conn" -max_total_time="$csecs" -print_final_stats=1 \
		-artifact_prefix="$B/artifacts-conn/" -max_len=2048 -timeout=10 \
		-rss_limit_mb=2048 "$B/corpus-conn" >"$B/fuzz-conn.log" 2>&1 || rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz-conn.log" |
		tail -n 1)
	final=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' \
		"$B/fuzz-conn.log" | tail -n 1)
	cov=$(echo "$final" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	if [ "$rc" != 0 ]; then
		grep -E 'ERROR|SUMMARY|invariant failed|runtime error' \
			"$B/fuzz-conn.log" | head -n 20 || true
		echo "run.sh: FAIL: fuzz_conn exited $rc after ${runs:-?} runs"
		for a in "$B"/artifacts-conn/*; do
			[ -f "$a" ] || continue
			echo "run.sh: reproducer: $a"
			echo "  replay:  $B/fuzz_conn $a"
			echo "  keep it: cp $a $fz/regressions-conn/"
		done
		exit 1
	fi
	echo "fuzz_conn: $csecs s, ${runs:-?} executions, $n regression inputs" \
		"replayed, cov ${cov:-?}, invariants held;" \
		"total $(($(date +%s) - t0)) s" | tee "$B/summary-conn.txt"
}

# the stateful target runs beside fuzz_proto (in the background, its
# output kept until the end) or after it
cpid=
if [ "${FUZZ_PARALLEL:-1}" = 1 ]; then
	(conn_stage) >"$B/conn-stage.log" 2>&1 &
	cpid=$!
	# a failing fuzz_proto leaves: stop fuzz_conn's shell (a fuzzer it
	# already started ends by itself, at its -max_total_time)
	trap 'if [ -n "$cpid" ]; then kill "$cpid" 2>/dev/null; fi' EXIT
fi

t0=$(date +%s)
echo "run.sh: building fuzz_proto with $CC into $B"
# shellcheck disable=SC2086
(cd "$top" && "$CC" -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Wall -Wextra -I include -I src -o "$B/fuzz_proto" \
	tests/fuzz/fuzz_proto.c $SRCS)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# 1. every seed and regression input, once each
n=0
for f in "$fz"/corpus/proto/* "$fz"/regressions/*; do
	[ -f "$f" ] || continue
	case $f in */README*) continue ;; esac
	if ! "$B/fuzz_proto" "$f" >"$B/replay.log" 2>&1; then
		cat "$B/replay.log"
		echo "run.sh: FAIL: replaying $f crashes; reproduce with:"
		echo "  $B/fuzz_proto $f"
		exit 1
	fi
	n=$((n + 1))
done
echo "run.sh: replayed $n seed and regression inputs: clean"

# 2. fuzz a copy of the corpus for a bounded time
if [ "${FUZZ_KEEP_CORPUS:-0}" != 1 ] || [ ! -d "$B/corpus" ]; then
	rm -rf "$B/corpus"
	mkdir -p "$B/corpus"
	cp "$fz"/corpus/proto/* "$B/corpus/"
	for f in "$fz"/regressions/*; do
		case $f in */README*) continue ;; esac
		[ -f "$f" ] && cp "$f" "$B/corpus/"
	done
fi
seeds=$(find "$B/corpus" -type f | wc -l)
rm -rf "$B/artifacts"
mkdir -p "$B/artifacts"
echo "run.sh: fuzzing for $secs s from $seeds inputs (log: $B/fuzz.log)"
rc=0
"$B/fuzz_proto" -max_total_time="$secs" -print_final_stats=1 \
	-artifact_prefix="$B/artifacts/" -dict="$fz/proto.dict" \
	-max_len=512 -use_value_profile=1 -timeout=10 -rss_limit_mb=2048 \
	"$B/corpus" >"$B/fuzz.log" 2>&1 || rc=$?

stat() { sed -n "s/^stat::$1: *//p" "$B/fuzz.log" | tail -n 1; }
runs=$(stat number_of_executed_units)
eps=$(stat average_exec_per_sec)
final=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' \
	"$B/fuzz.log" | tail -n 1)
cov=$(echo "$final" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
ft=$(echo "$final" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
corpus=$(find "$B/corpus" -type f | wc -l)
t1=$(date +%s)

if [ "$rc" != 0 ]; then
	grep -E 'ERROR|SUMMARY|property failed|runtime error' "$B/fuzz.log" |
		head -n 20 || true
	echo "run.sh: FAIL: fuzz_proto exited $rc after ${runs:-?} runs"
	for a in "$B"/artifacts/*; do
		[ -f "$a" ] || continue
		echo "run.sh: reproducer: $a"
		echo "  replay:  $B/fuzz_proto $a"
		if [ "${FUZZ_SAVE_REGRESSIONS:-0}" = 1 ]; then
			cp "$a" "$fz/regressions/"
			echo "  saved:   $fz/regressions/$(basename "$a")"
		else
			echo "  keep it: cp $a $fz/regressions/"
		fi
	done
	echo "run.sh: full log: $B/fuzz.log"
	exit 1
fi

# 3. source coverage of the decoders by the grown corpus (llvm-cov)
lines=
prof=$(command -v llvm-profdata || command -v llvm-profdata-14 || true)
lcov=$(command -v llvm-cov || command -v llvm-cov-14 || true)
if [ "${FUZZ_COVERAGE:-1}" = 1 ] && [ -n "$prof" ] && [ -n "$lcov" ]; then
	# shellcheck disable=SC2086
	if (cd "$top" && "$CC" -g -O0 -fsanitize=fuzzer \
		-fprofile-instr-generate -fcoverage-mapping -I include -I src \
		-o "$B/fuzz_cov" tests/fuzz/fuzz_proto.c $SRCS) &&
		LLVM_PROFILE_FILE="$B/cov.profraw" "$B/fuzz_cov" -runs=0 \
			"$B/corpus" >"$B/cov.log" 2>&1 &&
		"$prof" merge -sparse "$B/cov.profraw" -o "$B/cov.profdata"; then
		(cd "$top" && "$lcov" report "$B/fuzz_cov" \
			-instr-profile="$B/cov.profdata" src/proto.c \
			src/proto.h) \
			>"$B/coverage.txt" 2>&1 || true
		(cd "$top" && "$lcov" report -show-functions "$B/fuzz_cov" \
			-instr-profile="$B/cov.profdata" src/mr.c) 2>&1 |
			grep -E '^(Name|rmsgi_desc)' >>"$B/coverage.txt" || true
		# per file: regions, missed, %, functions, missed, %, lines,
		# missed, %, branches, missed, %
		lines=$(awk '$1 ~ /proto\.[ch]$/ { n = split($1, p, "/")
			printf "%ssrc/%s regions %s, lines %s, branches %s",
				sep, p[n], $4, $10, $13; sep = "; " }' \
			"$B/coverage.txt")
	fi
fi
t1=$(date +%s)

summary="fuzz_proto: $secs s, ${runs:-?} executions (${eps:-?}/s),"
summary="$summary corpus $seeds -> $corpus inputs, cov ${cov:-?} ft ${ft:-?},"
[ -n "$lines" ] && summary="$summary $lines,"
summary="$summary no crash; total $((t1 - t0)) s with build and replay"
echo "$summary" | tee "$B/summary.txt"

if [ -n "$cpid" ]; then
	crc=0
	wait "$cpid" || crc=$?
	cpid=
	cat "$B/conn-stage.log"
	[ "$crc" = 0 ] || exit "$crc"
else
	conn_stage
fi
cat "$B/summary-conn.txt" >>"$B/summary.txt"

