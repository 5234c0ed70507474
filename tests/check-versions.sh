#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-versions.sh - everything that states librmsg's version states the
# same one (docs/versioning.md), the one of AC_INIT in configure.ac:
#
#  a. include/rmsg.h's RMSG_VERSION_MAJOR/MINOR/PATCH, the Python
#     package's version (bindings/python/pyproject.toml), the top entry of
#     debian/changelog, the first release heading of NEWS;
#  b. the newest node of src/librmsg.map is this version's MAJOR.MINOR
#     (a release adds functions in its own node, never in a later one);
#  c. every man page's footer and every man3 page's VERSIONS section are
#     what scripts/man-versions.sh writes from configure.ac and the map;
#  d. debian/librmsg0.symbols lists exactly the map's symbols and nodes,
#     each at the version of its node (LIBRMSG_X.Y: X.Y.0);
#  e. once built (top_builddir has them): rmsg-doctor --version and
#     rmsg-perf --version, which print rmsg_version() of the library
#     (tests/api/version holds rmsg_version() to the header's macros).
#
# Automake test: exit 0 pass, 1 fail. Environment: top_srcdir,
# top_builddir (default: this script's ../).

LC_ALL=C
export LC_ALL

: "${top_srcdir:=$(dirname "$0")/..}"
: "${top_builddir:=$top_srcdir}"
top_srcdir=$(cd "$top_srcdir" && pwd) || exit 1
top_builddir=$(cd "$top_builddir" && pwd) || exit 1
nfail=0

fail() {
	echo "FAIL: $*"
	nfail=$((nfail + 1))
}

# same WHAT VALUE: VALUE must be $version
same() {
	if [ "$2" != "$version" ]; then
		fail "$1 says '${2:-(nothing)}', configure.ac says $version"
	fi
}

version=$(sed -n 's/^AC_INIT(\[librmsg\], *\[\([0-9.]*\)\].*/\1/p' \
	"$top_srcdir/configure.ac")
case $version in
[0-9]*.[0-9]*.[0-9]*) ;;
*)
	echo "FAIL: no AC_INIT([librmsg], [MAJOR.MINOR.PATCH]) in configure.ac"
	exit 1
	;;
esac
minor_node=LIBRMSG_${version%.*}

# a.
same include/rmsg.h "$(awk '/^#define RMSG_VERSION_(MAJOR|MINOR|PATCH) / {
	v = v sep $3; sep = "." } END { print v }' "$top_srcdir/include/rmsg.h")"
same bindings/python/pyproject.toml "$(sed -n \
	's/^version *= *"\([^"]*\)".*/\1/p' \
	"$top_srcdir/bindings/python/pyproject.toml")"
same "debian/changelog (top entry)" "$(sed -n \
	'1s/^librmsg (\([^)-]*\)\(-[^)]*\)\{0,1\}).*/\1/p' \
	"$top_srcdir/debian/changelog")"
# NEWS: the first line that starts with a version number
same "NEWS (first release heading)" "$(awk '/^[0-9]+\.[0-9]+\.[0-9]+/ {
	print $1; exit }' "$top_srcdir/NEWS")"

# b.
last=$(sed -n 's/^[ \t]*\(LIBRMSG_[0-9]*\.[0-9]*\)[ \t]*{.*/\1/p' \
	"$top_srcdir/src/librmsg.map" | tail -n 1)
if [ "$last" != "$minor_node" ] && [ "${version##*.}" = 0 ]; then
	fail "src/librmsg.map's newest node is $last; release $version" \
		"exports at $minor_node (or AC_INIT is stale)"
fi

# c.
export top_srcdir
"$top_srcdir/scripts/man-versions.sh" --check || nfail=$((nfail + 1))

# d.
awk '
/^[ \t]*LIBRMSG_[0-9]+\.[0-9]+[ \t]*\{/ {
	node = $1; sub(/\{.*/, "", node)
	v = node; sub(/^LIBRMSG_/, "", v)
	print node "@" node, v ".0"
	next
}
node != "" && /^[ \t]*rmsg_[a-z0-9_]+;/ {
	n = $1; sub(/;.*/, "", n); print n "@" node, v ".0"
}' "$top_srcdir/src/librmsg.map" | sort > "${TMPDIR:-/tmp}/cv.$$.map"
sed -n 's/^ \([^ ]*\) \([^ ]*\).*/\1 \2/p' \
	"$top_srcdir/debian/librmsg0.symbols" |
	sort > "${TMPDIR:-/tmp}/cv.$$.sym"
if ! diff -u "${TMPDIR:-/tmp}/cv.$$.map" "${TMPDIR:-/tmp}/cv.$$.sym" \
	> "${TMPDIR:-/tmp}/cv.$$.diff"; then
	fail "debian/librmsg0.symbols differs from src/librmsg.map" \
		"(- map, + symbols file):"
	sed -n '3,$s/^/  /p' "${TMPDIR:-/tmp}/cv.$$.diff"
fi
head -n 1 "$top_srcdir/debian/librmsg0.symbols" |
	grep -q '^librmsg\.so\.0 librmsg0 ' ||
	fail "debian/librmsg0.symbols does not start with" \
		"'librmsg.so.0 librmsg0 #MINVER#'"
rm -f "${TMPDIR:-/tmp}/cv.$$".*

# e. the built tools print "rmsg-TOOL (librmsg) VERSION" from
# rmsg_version(), so this checks the library too
for tool in rmsg-doctor rmsg-perf; do
	exe=$top_builddir/tools/$tool
	[ -x "$exe" ] || continue
	out=$(LD_LIBRARY_PATH=$top_builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
		"$exe" --version 2>&1 | head -n 1)
	same "$tool --version (rmsg_version())" "${out##* }"
done

if [ "$nfail" -gt 0 ]; then
	echo "$nfail failures"
	exit 1
fi
echo "version $version: configure.ac, rmsg.h, pyproject.toml," \
	"debian/changelog, NEWS, the map, the man pages and the symbols" \
	"file agree"
exit 0
