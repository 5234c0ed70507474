#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-tutorial.sh - the programs of docs/tutorial.md compile, and run
# as the page says; those of README.md compile.
#
#  a. every ```c block of both pages is a whole program, marked by a line
#     <!-- compile: NAME.c --> just before it (an unmarked C block fails,
#     so that no code on the pages goes unchecked);
#  b. each compiles and links against the build tree's header and
#     library: ${RMSG_CHECK_CC:-${CC:-cc}} -Wall -Wextra
#     -Wno-unused-parameter -Werror -I$top_srcdir/include ...
#     -L$top_builddir/.libs -lrmsg -lev (make check passes the configured
#     compiler and flags as RMSG_CHECK_CC, RMSG_CHECK_CFLAGS and
#     RMSG_CHECK_LDFLAGS, so that a sanitizer build links the same way);
#  c. the tutorial's server.c and client.c run: the server on
#     tcp://127.0.0.1:0, which prints the port it got ("listening on
#     port N"), the client against that port; the client must exit 0 and print exactly the ```text
#     block marked <!-- output: client -->; the server, sent SIGTERM,
#     must exit 0.
#
# Like tests/check-man.sh for the man pages' EXAMPLEs (which it
# compiles with -fsyntax-only), a missing compiler or <ev.h> is a failure
# naming the Debian packages. Automake test: exit 0 pass, 1 fail.
# Environment: top_srcdir, top_builddir (default: this script's ../),
# RMSG_TEST_SCALE (multiplies the time bounds), CHECK_TUTORIAL_KEEP=1
# keeps the temporary directory.

LC_ALL=C
export LC_ALL

: "${top_srcdir:=$(dirname "$0")/..}"
: "${top_builddir:=$top_srcdir}"
top_srcdir=$(cd "$top_srcdir" && pwd) || exit 1
top_builddir=$(cd "$top_builddir" && pwd) || exit 1
page=$top_srcdir/docs/tutorial.md
scale=${RMSG_TEST_SCALE:-1}
case $scale in
'' | *[!0-9]*) scale=1 ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-tutorial.XXXXXX") || exit 1
spid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2> /dev/null
	if [ "${CHECK_TUTORIAL_KEEP:-}" = 1 ]; then
		echo "kept $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup 0
trap 'exit 1' HUP INT TERM
nfail=0

fail() {
	echo "FAIL: $*"
	nfail=$((nfail + 1))
}

# ------------------------------------------------------------------
# a. the blocks of PAGE (relative to top_srcdir) into DIR: prints
# "compile NAME" or "output NAME" per marked block (into DIR/NAME or
# DIR/NAME.expected), "unmarked LINE" per C block without a marker,
# "unterminated LINE" for a block without its end

extract() {
	awk -v DIR="$2" '
/^<!-- compile: [A-Za-z0-9_-]+\.c -->$/ {
	mark = "compile"; name = $3; next
}
/^<!-- output: [A-Za-z0-9_-]+ -->$/ { mark = "output"; name = $3; next }
inblock && /^```[ \t]*$/ { inblock = 0; close(file); next }
inblock { if (file != "") print > file; next }
/^```/ {
	inblock = 1
	start = NR
	file = ""
	lang = substr($0, 4)
	if (mark == "compile" && lang == "c") {
		file = DIR "/" name
		print "compile " name
	} else if (mark == "output" && lang == "text") {
		file = DIR "/" name ".expected"
		print "output " name
	} else if (lang == "c") {
		print "unmarked " NR
	}
	if (file != "")
		printf "" > file
	mark = ""
	next
}
/[^ \t]/ { mark = "" }
END { if (inblock) print "unterminated " start }
' "$top_srcdir/$1" > "$2/blocks" || {
		fail "awk could not read $1"
		return
	}
	while read -r kind what; do
		case $kind in
		unmarked)
			fail "$1:$what: a C block without a" \
				"<!-- compile: NAME.c --> line before it"
			;;
		unterminated)
			fail "$1:$what: a block that does not end"
			;;
		esac
	done < "$2/blocks"
	dups=$(awk '{ print $2 }' "$2/blocks" | sort | uniq -d)
	[ -z "$dups" ] || fail "$1: blocks named twice: $dups"
}

# ------------------------------------------------------------------
# b. compile and link

CC=${RMSG_CHECK_CC:-${CC:-cc}}
lib=$top_builddir/.libs
cancc=1
printf '#include <ev.h>\nint main(void)\n{\n\treturn 0;\n}\n' > "$tmp/probe.c"
if ! $CC -fsyntax-only "$tmp/probe.c" > "$tmp/probe.out" 2>&1; then
	fail "$CC cannot compile a program using <ev.h>" \
		"(Debian packages gcc, libev-dev)"
	sed 's/^/  /' "$tmp/probe.out" | head -n 5
	cancc=
elif [ ! -f "$lib/librmsg.so" ]; then
	fail "$lib/librmsg.so not found: build the library first (make)"
	cancc=
fi

# build PAGE DIR: compiles the programs extracted into DIR; sets $built
build() {
	built=
	programs=$(awk '$1 == "compile" { print $2 }' "$2/blocks")
	[ -n "$programs" ] || fail "$1 has no <!-- compile: --> block"
	[ -n "$cancc" ] || return
	mkdir -p "$2/bin"
	for src in $programs; do
		cp "$2/$src" "$2/bin/$src"
		# shellcheck disable=SC2086 # the flags are several words
		if $CC ${RMSG_CHECK_CFLAGS:-} -Wall -Wextra \
			-Wno-unused-parameter -Werror -I"$top_srcdir/include" \
			-o "$2/bin/${src%.c}" "$2/bin/$src" \
			${RMSG_CHECK_LDFLAGS:-} -L"$lib" -lrmsg -lev \
			> "$tmp/cc.out" 2>&1; then
			built="$built ${src%.c}"
			nprog=$((nprog + 1))
		else
			fail "$1: $src does not compile"
			sed "s|$2/bin/||; s/^/  /" "$tmp/cc.out" | head -n 20
		fi
	done
}

nprog=0
mkdir "$tmp/readme"
extract README.md "$tmp/readme"
build README.md "$tmp/readme"
[ -f "$page" ] || {
	echo "FAIL: $page not found"
	exit 1
}
extract docs/tutorial.md "$tmp"
build docs/tutorial.md "$tmp"

# ------------------------------------------------------------------
# c. run the server and the client

run=
case " $built " in
*" server "*) case " $built " in *" client "*) run=1 ;; esac ;;
esac
if [ -z "$run" ] && [ "$nfail" -eq 0 ]; then
	fail "docs/tutorial.md: no server.c and client.c to run"
fi
if [ -n "$run" ] && [ ! -f "$tmp/client.expected" ]; then
	fail "docs/tutorial.md: no <!-- output: client --> block"
	run=
fi
if [ -n "$run" ]; then
	LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
	: > "$tmp/server.out" # there before the server opens it
	"$tmp/bin/server" tcp://127.0.0.1:0 > "$tmp/server.out" \
		2> "$tmp/server.err" &
	spid=$!
	# wait for the port (the server prints it once it listens)
	port=
	n=0
	while [ $n -lt $((100 * scale)) ]; do
		port=$(sed -n 's/^listening on port \([0-9][0-9]*\)$/\1/p' \
			"$tmp/server.out")
		[ -n "$port" ] && break
		kill -0 "$spid" 2> /dev/null || break
		sleep 0.1
		n=$((n + 1))
	done
	if [ -z "$port" ]; then
		fail "server: no 'listening on port N' line"
		sed 's/^/  server: /' "$tmp/server.out" "$tmp/server.err"
	else
		rc=0
		timeout $((60 * scale)) "$tmp/bin/client" \
			"tcp://127.0.0.1:$port" > "$tmp/client.out" \
			2> "$tmp/client.err" || rc=$?
		[ "$rc" -eq 0 ] || fail "client: exit status $rc"
		if ! diff -u "$tmp/client.expected" "$tmp/client.out" \
			> "$tmp/client.diff"; then
			fail "client: output differs from the page's" \
				"(- page, + client)"
			sed 's/^/  /' "$tmp/client.diff"
		fi
		if [ -s "$tmp/client.err" ]; then
			echo "client, standard error:"
			sed 's/^/  /' "$tmp/client.err"
		fi
	fi
	kill -TERM "$spid" 2> /dev/null
	rc=0
	wait "$spid" || rc=$?
	spid=
	[ "$rc" -eq 0 ] || fail "server: exit status $rc after SIGTERM"
	if [ -s "$tmp/server.err" ]; then
		echo "server, standard error:"
		sed 's/^/  /' "$tmp/server.err"
	fi
fi

echo "checked README.md and docs/tutorial.md: $nprog programs built${run:+, ran the server and client of the tutorial}"
if [ "$nfail" -gt 0 ]; then
	echo "$nfail failures"
	exit 1
fi
exit 0
