#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-tutorial.sh - the programs of docs/tutorial.md compile, and run
# as the page says.
#
#  a. every ```c block of the page is a whole program, marked by a line
#     <!-- compile: NAME.c --> just before it (an unmarked C block fails,
#     so that no code on the page goes unchecked);
#  b. each compiles and links against the build tree's header and
#     library: ${RMSG_CHECK_CC:-${CC:-cc}} -Wall -Wextra
#     -Wno-unused-parameter -Werror -I$top_srcdir/include ...
#     -L$top_builddir/.libs -lrmsg -lev (make check passes the configured
#     compiler and flags as RMSG_CHECK_CC, RMSG_CHECK_CFLAGS and
#     RMSG_CHECK_LDFLAGS, so that a sanitizer build links the same way);
#  c. server.c and client.c run: the server on tcp://127.0.0.1:0, which
#     prints the port it got ("listening on port N"), the client against
#     that port; the client must exit 0 and print exactly the ```text
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
# a. the blocks: prints "compile NAME" or "output NAME" per marked block
# (into $tmp/NAME or $tmp/NAME.expected), "unmarked LINE" per C block
# without a marker, "unterminated LINE" for a block without its end

[ -f "$page" ] || {
	echo "FAIL: $page not found"
	exit 1
}
awk -v DIR="$tmp" '
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
' "$page" > "$tmp/blocks" || {
	echo "FAIL: awk could not read $page"
	exit 1
}
while read -r kind what; do
	case $kind in
	unmarked)
		fail "docs/tutorial.md:$what: a C block without a" \
			"<!-- compile: NAME.c --> line before it"
		;;
	unterminated)
		fail "docs/tutorial.md:$what: a block that does not end"
		;;
	esac
done < "$tmp/blocks"
programs=$(awk '$1 == "compile" { print $2 }' "$tmp/blocks")
[ -n "$programs" ] || fail "docs/tutorial.md has no <!-- compile: --> block"
dups=$(awk '{ print $2 }' "$tmp/blocks" | sort | uniq -d)
[ -z "$dups" ] || fail "docs/tutorial.md: blocks named twice: $dups"

# ------------------------------------------------------------------
# b. compile and link

CC=${RMSG_CHECK_CC:-${CC:-cc}}
lib=$top_builddir/.libs
printf '#include <ev.h>\nint main(void)\n{\n\treturn 0;\n}\n' > "$tmp/probe.c"
if ! $CC -fsyntax-only "$tmp/probe.c" > "$tmp/probe.out" 2>&1; then
	fail "$CC cannot compile a program using <ev.h>" \
		"(Debian packages gcc, libev-dev)"
	sed 's/^/  /' "$tmp/probe.out" | head -n 5
	programs=
elif [ ! -f "$lib/librmsg.so" ]; then
	fail "$lib/librmsg.so not found: build the library first (make)"
	programs=
fi
built=
for src in $programs; do
	exe=$tmp/bin/${src%.c}
	mkdir -p "$tmp/bin"
	cp "$tmp/$src" "$tmp/bin/$src"
	# shellcheck disable=SC2086 # the flags are several words
	if $CC ${RMSG_CHECK_CFLAGS:-} -Wall -Wextra -Wno-unused-parameter \
		-Werror -I"$top_srcdir/include" -o "$exe" "$tmp/bin/$src" \
		${RMSG_CHECK_LDFLAGS:-} -L"$lib" -lrmsg -lev \
		> "$tmp/cc.out" 2>&1; then
		built="$built ${src%.c}"
	else
		fail "docs/tutorial.md: $src does not compile"
		sed "s|$tmp/bin/||; s/^/  /" "$tmp/cc.out" | head -n 20
	fi
done

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

echo "checked docs/tutorial.md: programs:${built:- none}${run:+, ran server and client}"
if [ "$nfail" -gt 0 ]; then
	echo "$nfail failures"
	exit 1
fi
exit 0
