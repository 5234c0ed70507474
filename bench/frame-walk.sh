#!/bin/sh
# SPDX-License-Identifier: MIT
#
# frame-walk.sh - follow one received 64 B TCP message through the code:
# from the receiving side's read callback (tcp_rw_cb) being entered to the
# user's on_msg returning and control back in libev. Counts function
# entries by source file, the distinct files entered, and the entries into
# a file already left before (issue 31's "185 entries into 27 files, 158
# of them back into a file already left").
#
#   bench/frame-walk.sh [REV]      (default HEAD; needs gdb)
#
# FW_WARM (default 32) messages arrive first, 2 ms apart and unwatched,
# so that the one followed is a busy connection's read in its steady
# state (frame_walk.c says why 32); FW_WARM=0 follows the connection's
# first message (first read buffer, first message object).
# REV's tree is taken with `git archive` (committed code only) and its
# library built in a scratch directory with FW_CFLAGS (default "-O0 -g":
# every function a real call, lines in source order, so the walk follows
# the code as written; "-O2 -g" walks the shipped build, inlining and all).
# bench/frame_walk.c and bench/frame-walk.py come from this checkout, so
# two REVs are measured the same way. The server runs under gdb, which
# steps line by line; the client runs beside it. The RESULT lines are the
# figures; the file sequence and per-function counts come before them.
# The walk runs FW_RUNS (3) times on one build: whether the message finds
# the connection already queued for a flush or a credit grant due depends
# on when the peers' credit frames crossed, which moves a run's figures
# by a file or two; the runs show the spread.
# FW_SYSTEM=1 also steps through and counts the system's code that has
# line information (libc, with its debug package installed), as sys:PATH.
# FW_KEEP=1 keeps the scratch directory. Not part of any test run: it is a
# measurement, slow (gdb steps each line) and needs gdb.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
rev=${1:-HEAD}
cflags=${FW_CFLAGS:--O0 -g}
work=$(mktemp -d /tmp/frame-walk.XXXXXX)
cleanup() {
	if [ -n "${client:-}" ]; then
		kill "$client" 2>/dev/null || true
	fi
	[ "${FW_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/tree"
git -C "$here" archive "$rev" | tar -x -C "$work/tree"
echo "frame-walk: $(git -C "$here" rev-parse --short "$rev"), CFLAGS $cflags" >&2
(
	cd "$work/tree"
	autoreconf -fi >/dev/null 2>&1
	./configure -q CFLAGS="$cflags" >/dev/null
	make -s -j2 librmsg.la >/dev/null 2>&1
)
# shellcheck disable=SC2086 # the flags are words
cc $cflags -I"$work/tree/include" "$here/bench/frame_walk.c" \
	-L"$work/tree/.libs" -lrmsg -lev -Wl,-rpath,"$work/tree/.libs" \
	-o "$work/frame_walk"

warm=${FW_WARM:-32}
echo "frame-walk: $warm message(s) before the one followed" >&2
for run in $(seq "${FW_RUNS:-3}"); do
	echo "frame-walk: run $run"
	rm -f "$work/port"
	"$work/frame_walk" client "$work/port" "$warm" \
		>"$work/client.out" 2>&1 &
	client=$!
	FW_ROOT="$work/tree" FW_APP="$here/bench/frame_walk.c" \
		gdb -q -batch -nx -x "$here/bench/frame-walk.py" \
		--args "$work/frame_walk" server "$work/port" "$warm" 2>&1 |
		grep -E '^(frame-walk|RESULT|  )' || true
	kill "$client" 2>/dev/null || true
	wait "$client" 2>/dev/null || true
	client=
done
