#!/bin/sh
# SPDX-License-Identifier: MIT
#
# abi-check.sh - the library of this tree keeps the ABI of every release
# stored under abi/ (docs/versioning.md). For each abi/VERSION/:
#
#  1. abidiff (abigail-tools) compares librmsg.so.N.abi, the release's
#     ABI as abidw wrote it from a -g build, with the library built here,
#     looking only at what include/rmsg.h declares. Added functions are
#     compatible; any other reported change fails: a function removed or
#     changed, a public type changed in size or layout, an enumerator's
#     value, a symbol moved to another version node. A change reviewed as
#     compatible can be suppressed by abi/VERSION/abidiff.suppr (abidiff
#     --suppressions syntax), each entry with its reason in a comment.
#  2. abi/pingpong.c is compiled against that release's header (abi/
#     VERSION/rmsg.h) and linked against a stub library carrying only the
#     release's symbols and version nodes (abi/VERSION/librmsg.map), so it
#     binds to what the release exported, as a program built then would;
#     it then runs over tcp:// on 127.0.0.1 against the library built
#     here and must pass.
#
# Usage: scripts/abi-check.sh            check against every abi/*/
#        scripts/abi-check.sh --update VERSION
#                                        store this tree as the baseline
#                                        of release VERSION (e.g. 0.2):
#                                        at a release, see versioning.md
# The library is the tree's own build (BUILDDIR, default the source
# tree; built with 'make' if missing), which must carry debug information
# (the default CFLAGS, -g -O2). Needs abidw/abidiff (Debian package
# abigail-tools), cc, libev-dev: scripts/setup.sh test installs them.
# Exit 0 pass, 1 fail.
set -u
LC_ALL=C
export LC_ALL
cd "$(dirname "$0")/.." || exit 1
top=$PWD
builddir=$(cd "${BUILDDIR:-$top}" && pwd) || exit 1
lib=$builddir/.libs/librmsg.so
CC=${CC:-cc}

die() {
	echo "abi-check: FAIL: $*" >&2
	exit 1
}

for tool in abidw abidiff; do
	command -v $tool > /dev/null 2>&1 ||
		die "$tool not found (Debian package abigail-tools)"
done
if [ ! -f "$lib" ]; then
	if [ -f "$builddir/Makefile" ]; then
		make -s -C "$builddir" librmsg.la || die "cannot build librmsg"
	elif [ "$builddir" = "$top" ]; then
		scripts/setup.sh build || die "cannot build librmsg"
	fi
fi
[ -f "$lib" ] || die "$lib not found after the build"
lib=$(readlink -f "$lib")
readelf -S "$lib" | grep -q '\.debug_info' ||
	die "$lib has no debug information (build with -g)"
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
[ -n "$soname" ] || die "$lib has no SONAME"

if [ "${1:-}" = --update ]; then
	v=${2:-}
	case $v in
	[0-9]*.[0-9]*) ;;
	*) die "usage: $0 --update MAJOR.MINOR" ;;
	esac
	mkdir -p "abi/$v"
	abidw --headers-dir include --no-corpus-path --drop-undefined-syms \
		--out-file "abi/$v/$soname.abi" "$lib" || die "abidw failed"
	cp include/rmsg.h "abi/$v/rmsg.h"
	cp src/librmsg.map "abi/$v/librmsg.map"
	echo "abi-check: abi/$v/ now holds $soname.abi, rmsg.h, librmsg.map"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/abi-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' 0
trap 'exit 1' HUP INT TERM
failed=0
checked=0
for dir in abi/*/; do
	dir=${dir%/}
	v=${dir#abi/}
	[ -f "$dir/rmsg.h" ] || continue
	checked=$((checked + 1))
	base=$dir/$soname.abi
	if [ ! -f "$base" ]; then
		echo "abi-check: FAIL: $v: no $base: the soname changed to" \
			"$soname? Then the releases of the old one leave abi/" \
			"(docs/versioning.md)"
		failed=1
		continue
	fi

	# 1. abidiff: the report in full, the verdict without added functions
	supp=
	[ -f "$dir/abidiff.suppr" ] && supp="--suppressions $dir/abidiff.suppr"
	echo "== abidiff $base $lib"
	# shellcheck disable=SC2086
	abidiff $supp --no-added-syms --headers-dir2 include "$base" "$lib" \
		> "$tmp/report" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		cat "$tmp/report"
		echo "abi-check: FAIL: $v: abidiff exit $rc (bits: 1 error," \
			"2 usage, 4 ABI change, 8 incompatible change)"
		failed=1
	else
		# shellcheck disable=SC2086
		abidiff $supp --headers-dir2 include "$base" "$lib"
		echo "abi-check: $v: abidiff: no change but added functions"
	fi

	# 2. a program built against release $v runs on this library
	mkdir -p "$tmp/$v/inc"
	cp "$dir/rmsg.h" "$tmp/$v/inc/rmsg.h"
	awk '/\/\*/ { c = 1 } c { if (/\*\//) c = 0; next }
		/^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ { s = $1; sub(/;.*/, "", s)
			print "void " s "(void);"
			print "void " s "(void) {}" }' \
		"$dir/librmsg.map" > "$tmp/$v/stub.c"
	if ! $CC -shared -fPIC -o "$tmp/$v/librmsg.so" "$tmp/$v/stub.c" \
		-Wl,--version-script="$dir/librmsg.map" \
		-Wl,-soname,"$soname"; then
		echo "abi-check: FAIL: $v: cannot build the stub library"
		failed=1
		continue
	fi
	if ! $CC -Wall -Werror -O2 -I"$tmp/$v/inc" -o "$tmp/$v/pingpong" \
		abi/pingpong.c -L"$tmp/$v" -lrmsg -lev; then
		echo "abi-check: FAIL: $v: abi/pingpong.c does not build" \
			"against $dir/rmsg.h"
		failed=1
		continue
	fi
	echo "== abi/pingpong.c built against $v binds to:"
	objdump -T "$tmp/$v/pingpong" | awk '$NF ~ /^rmsg_/ {
		printf "%s@%s ", $NF, $(NF - 1) } END { print "" }'
	if LD_LIBRARY_PATH=$(dirname "$lib") timeout 300 \
		"$tmp/$v/pingpong"; then
		echo "abi-check: $v: a program built against $v runs on" \
			"this library"
	else
		echo "abi-check: FAIL: $v: a program built against $v fails" \
			"on this library"
		failed=1
	fi
done
[ $checked -gt 0 ] || die "no baseline found under abi/"
[ $failed = 0 ] || exit 1
echo "abi-check: PASS ($checked baseline(s))"
