#!/bin/sh
# SPDX-License-Identifier: MIT
#
# man-versions.sh - the man pages say the package version, each man3
# page says in which version its functions appeared, and the Debian
# symbols file lists the map's symbols.
#
#   scripts/man-versions.sh           rewrite the pages (and the symbols
#                                     file) in place; run it after adding
#                                     functions to src/librmsg.map
#   scripts/man-versions.sh --check   change nothing; list every page that
#                                     differs from what it would write
#                                     (exit 1), as tests/check-versions.sh
#                                     does in 'make check'
#
# Two things are generated, so that neither can drift by hand:
#
#  - the footer (.TH's fourth field) of every page in man/man1, man3 and
#    man7: "librmsg VERSION", VERSION from AC_INIT in configure.ac;
#  - a VERSIONS section in every man3 page that is not a .so link: the
#    functions the page declares in its SYNOPSIS, grouped by the node of
#    src/librmsg.map that exports them (LIBRMSG_X.Y: version X.Y.0, the
#    release that added the node). The section is replaced where it
#    exists, else put before NOTES, EXAMPLE or SEE ALSO, whichever comes
#    first (the man-pages order);
#  - debian/librmsg0.symbols (dpkg-gensymbols' format): every symbol of
#    the map at its node, with the version of that node (X.Y.0).
#
# Environment: top_srcdir (default: this script's ../).

LC_ALL=C
export LC_ALL

: "${top_srcdir:=$(dirname "$0")/..}"
top_srcdir=$(cd "$top_srcdir" && pwd) || exit 1
check=
case ${1:-} in
--check) check=1 ;;
'') ;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac

version=$(sed -n 's/^AC_INIT(\[librmsg\], *\[\([0-9.]*\)\].*/\1/p' \
	"$top_srcdir/configure.ac")
if [ -z "$version" ]; then
	echo "FAIL: no AC_INIT([librmsg], [VERSION]) in configure.ac" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/man-versions.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' 0
trap 'exit 1' HUP INT TERM

# the map as "NAME NODE" lines (one name per line, as librmsg.map says)
awk '
/^[ \t]*LIBRMSG_[0-9]+\.[0-9]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); next }
/^[ \t]*(global|local):/ { next }
node != "" && /^[ \t]*rmsg_[a-z0-9_]+;[ \t]*$/ {
	n = $1; sub(/;.*/, "", n); print n, node
}
' "$top_srcdir/src/librmsg.map" > "$tmp/map"
if [ ! -s "$tmp/map" ]; then
	echo "FAIL: no symbols read from src/librmsg.map" >&2
	exit 1
fi

ndiff=0
for page in "$top_srcdir"/man/man1/*.1 "$top_srcdir"/man/man3/*.3 \
	"$top_srcdir"/man/man7/*.7; do
	[ -f "$page" ] || continue
	rel=${page#"$top_srcdir"/}
	awk -v VERSION="$version" -v MAN3="$(case $rel in man/man3/*) echo 1 ;; esac)" '
FNR == NR { node[$1] = $2; next }
function flush_versions(    i, j, v, n, k, names, out) {
	if (!MAN3 || done)
		return
	done = 1
	if (nf == 0)
		return
	print ".SH VERSIONS"
	# one sentence per map node, in the map order of the nodes
	for (i = 1; i <= nf; i++) {
		v = node[fn[i]]
		if (v in seen)
			continue
		seen[v] = 1
		n = 0
		for (j = 1; j <= nf; j++)
			if (node[fn[j]] == v)
				names[++n] = fn[j]
		if (i > 1)
			print ".PP"
		for (k = 1; k <= n; k++) {
			if (k > 1 && k == n)
				print "and"
			print ".BR " names[k] " ()" (k < n - 1 ? "," : "")
		}
		rel = v
		sub(/^LIBRMSG_/, "", rel)
		print "first appeared in librmsg " rel ".0"
		print "(symbol version"
		print ".BR " v " )."
	}
}
FNR == 1 { file = FILENAME }
# collect the page first: its SYNOPSIS names the functions
{ line[++nl] = $0 }
END {
	if (line[1] ~ /^\.so / || line[2] ~ /^\.so /) {
		for (i = 1; i <= nl; i++)
			print line[i]
		exit
	}
	sect = ""
	for (i = 1; i <= nl; i++) {
		if (line[i] ~ /^\.SH/) {
			sect = line[i]
			continue
		}
		if (sect != ".SH SYNOPSIS")
			continue
		s = line[i]
		while (match(s, /rmsg_[a-z0-9_]+\(/)) {
			f = substr(s, RSTART, RLENGTH - 1)
			s = substr(s, RSTART + RLENGTH)
			if ((f in node) && !(f in have)) {
				have[f] = 1
				fn[++nf] = f
			}
		}
	}
	skip = 0
	for (i = 1; i <= nl; i++) {
		l = line[i]
		if (l ~ /^\.TH /) {
			# .TH TITLE SECTION DATE "SOURCE" "MANUAL"
			if (match(l, /"librmsg[^"]*"/))
				l = substr(l, 1, RSTART - 1) "\"librmsg " VERSION \
					"\"" substr(l, RSTART + RLENGTH)
		}
		if (l ~ /^\.SH/) {
			skip = 0
			if (l == ".SH VERSIONS") {
				flush_versions()
				skip = 1
				continue
			}
			if (l == ".SH NOTES" || l ~ /^\.SH EXAMPLES?$/ ||
			    l == ".SH SEE ALSO")
				flush_versions()
		}
		if (!skip)
			print l
	}
	flush_versions()
}
' "$tmp/map" "$page" > "$tmp/page"
	if ! cmp -s "$page" "$tmp/page"; then
		if [ -n "$check" ]; then
			echo "FAIL: $rel: footer or VERSIONS section out of date" \
				"(scripts/man-versions.sh rewrites it):"
			diff -u "$page" "$tmp/page" | sed -n '3,40s/^/  /p'
		else
			cat "$tmp/page" > "$page"
			echo "updated $rel"
		fi
		ndiff=$((ndiff + 1))
	fi
done
# the symbols file
sym=$top_srcdir/debian/librmsg0.symbols
{
	echo "librmsg.so.0 librmsg0 #MINVER#"
	echo "* Build-Depends-Package: librmsg-dev"
	awk '
/^[ \t]*LIBRMSG_[0-9]+\.[0-9]+[ \t]*\{/ {
	node = $1; sub(/\{.*/, "", node)
	v = node; sub(/^LIBRMSG_/, "", v)
	print " " node "@" node " " v ".0"
	next
}
node != "" && /^[ \t]*rmsg_[a-z0-9_]+;[ \t]*$/ {
	n = $1; sub(/;.*/, "", n); print " " n "@" node " " v ".0"
}' "$top_srcdir/src/librmsg.map"
} > "$tmp/symbols"
if ! cmp -s "$sym" "$tmp/symbols"; then
	if [ -n "$check" ]; then
		echo "FAIL: debian/librmsg0.symbols out of date" \
			"(scripts/man-versions.sh rewrites it):"
		diff -u "$sym" "$tmp/symbols" | sed -n '3,40s/^/  /p'
	else
		cat "$tmp/symbols" > "$sym"
		echo "updated debian/librmsg0.symbols"
	fi
	ndiff=$((ndiff + 1))
fi
if [ -n "$check" ] && [ "$ndiff" -gt 0 ]; then
	echo "$ndiff files out of date"
	exit 1
fi
exit 0
