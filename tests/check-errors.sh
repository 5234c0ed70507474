#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-errors.sh - every documented error has a test that triggers it, or
# a written reason why none can.
#
# A documented error is an entry (page, errno) of a man/man3 page's
# ".SH ERRORS" section: a ".TP" followed by ".B EXXX" (or ".BR" naming
# several errnos). A page that is a ".so" link has its target's entries.
#
# Tests claim an entry with a tag on (or right above) the assertion that
# checks the errno, in the *.c, *.h, *.py and *.sh files of tests/ and
# bindings/python/tests/:
#     /* covers: rmsg_listen.3 EADDRINUSE */      (C)
#     # covers: rmsg_call.3 ETIMEDOUT              (Python, shell)
# A tag may name a link page (rmsg_listener_close.3): it counts for the
# page the link points to.
#
# Entries that no test can reach are listed in tests/errors-untested/*.txt,
# one a line: "PAGE.3 EXXX  reason" ('#' starts a comment). A line whose
# reason is the single word "pending" stands for a test being written on
# another branch.
#
# Prints a per-page table and "documented errors triggered by tests: N of
# M". Also fails when the table of RDMA completion statuses in
# rmsg_strerror.3 differs from the one src/err.c applies. Fails (exit 1) when a tag or an untested line names no documented
# entry (stale: the page changed, or a typo), when an untested line has no
# reason, when an entry listed as untested is covered by a tag (drop the
# line; "pending" lines excepted), or when an entry is neither covered nor
# listed: a new ERRORS entry needs a test or a reason.
#
# Environment: top_srcdir (default: this script's ../).

LC_ALL=C
export LC_ALL

: "${top_srcdir:=$(dirname "$0")/..}"
top_srcdir=$(cd "$top_srcdir" && pwd) || exit 1
man3=$top_srcdir/man/man3
untested_dir=$top_srcdir/tests/errors-untested

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-errors.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' 0

# link pages: "alias.3 target.3"
for f in "$man3"/*.3; do
	t=$(sed -n 's|^\.so  *man3/\([^ ]*\.3\) *$|\1|p' "$f" | head -n 1)
	[ -n "$t" ] && echo "$(basename "$f") $t"
done >"$tmp/links"

# documented entries: "page.3 EXXX"
for f in "$man3"/*.3; do
	awk -v page="$(basename "$f")" '
		/^\.SH / { in_err = ($0 ~ /^\.SH +"?ERRORS"?[ \t]*$/); tp = 0; next }
		!in_err { next }
		/^\.TP/ { tp = 1; next }
		tp && /^\.BR? / {
			for (i = 2; i <= NF; i++) {
				w = $i
				gsub(/"/, "", w)
				if (w ~ /^E[A-Z0-9]+$/)
					print page, w
			}
		}
		{ tp = 0 }
	' "$f"
done | sort -u >"$tmp/documented"

if [ ! -s "$tmp/documented" ]; then
	echo "FAIL: no ERRORS entries found in $man3"
	exit 1
fi

# resolve a link page to its target: reads "page errno rest..." lines
resolve() {
	awk 'NR == FNR { link[$1] = $2; next }
	     { if ($1 in link) $1 = link[$1]; print }' "$tmp/links" -
}

# tags: "page errno file:line"
(
	cd "$top_srcdir" || exit 1
	for d in tests bindings/python/tests; do
		[ -d "$d" ] || continue
		# sources only: tests/vm/cache holds a whole guest tree
		grep -rnoE 'covers: *[A-Za-z0-9_]+\.[0-9] +E[A-Z0-9]+' \
			--include='*.c' --include='*.h' --include='*.py' \
			--include='*.sh' --exclude=check-errors.sh \
			--exclude-dir=cache --exclude-dir=errors-untested \
			"$d" 2>/dev/null
	done
) | sed -E 's|^([^:]*):([0-9]+):covers: *([^ ]+) +([^ ]+)$|\3 \4 \1:\2|' |
	resolve | sort >"$tmp/tags"

# untested lines: "page errno file:line reason..."
: >"$tmp/untested"
for f in "$untested_dir"/*.txt; do
	[ -f "$f" ] || continue
	awk -v file="tests/errors-untested/$(basename "$f")" '
		{ sub(/#.*/, "") }
		NF == 0 { next }
		{
			reason = ""
			for (i = 3; i <= NF; i++)
				reason = reason (i > 3 ? " " : "") $i
			print $1, $2, file ":" FNR, reason
		}' "$f"
done | resolve >"$tmp/untested"

fail=0

# stale tags
awk 'NR == FNR { doc[$1 " " $2] = 1; next }
     !(($1 " " $2) in doc) { print "FAIL: " $3 ": tag \"covers: " $1 " " $2 "\": no such ERRORS entry" }' \
	"$tmp/documented" "$tmp/tags" >"$tmp/msg"
# stale, reasonless or covered untested lines
awk 'FILENAME == ARGV[1] { doc[$1 " " $2] = 1; next }
     FILENAME == ARGV[2] { cov[$1 " " $2] = $3; next }
     {
	k = $1 " " $2
	if (!(k in doc))
		print "FAIL: " $3 ": \"" k "\": no such ERRORS entry"
	else if (NF < 4)
		print "FAIL: " $3 ": \"" k "\": no reason given"
	else if ((k in cov) && !($4 == "pending" && NF == 4))
		print "FAIL: " $3 ": \"" k "\" is covered (" cov[k] "): drop the line"
     }' "$tmp/documented" "$tmp/tags" "$tmp/untested" >>"$tmp/msg"
if [ -s "$tmp/msg" ]; then
	cat "$tmp/msg"
	fail=1
fi

# the table: page, documented, covered, untested, missing
awk 'FILENAME == ARGV[1] { cov[$1 " " $2] = 1; next }
     FILENAME == ARGV[2] { unt[$1 " " $2] = ($4 == "pending" && NF == 4) ? "p" : "u"; next }
     {
	k = $1 " " $2
	pages[$1] = 1; n[$1]++; total++
	if (k in cov) { c[$1]++; covered++ }
	else if (k in unt) { if (unt[k] == "p") p[$1]++; else u[$1]++ }
	else { m[$1]++; missing[++nm] = k }
     }
     END {
	printf "%-28s %5s %8s %9s %8s %8s\n", "page", "docd", "covered", "untested", "pending", "missing"
	for (pg in pages)
		line[pg] = sprintf("%-28s %5d %8d %9d %8d %8d", pg, n[pg], c[pg], u[pg], p[pg], m[pg])
	# sorted by page name
	np = 0
	for (pg in pages) names[++np] = pg
	for (i = 2; i <= np; i++)
		for (j = i; j > 1 && names[j - 1] > names[j]; j--) {
			t = names[j]; names[j] = names[j - 1]; names[j - 1] = t
		}
	for (i = 1; i <= np; i++) print line[names[i]]
	printf "documented errors triggered by tests: %d of %d\n", covered, total
	for (i = 1; i <= nm; i++)
		print "MISSING: " missing[i] ": no test tags it and tests/errors-untested/ has no reason"
     }' "$tmp/tags" "$tmp/untested" "$tmp/documented" >"$tmp/table"
cat "$tmp/table"
grep -q '^MISSING: ' "$tmp/table" && fail=1

# The table of RDMA completion statuses in rmsg_strerror.3 is the one
# src/err.c (rmsgi_err_wc) applies; unit/rdma/send.c checks that operations
# and on_close get what rmsgi_err_wc() says, this that the page says the
# same.
awk '/^int rmsgi_err_wc/ { p = 1 } p && /^}/ { p = 0 } p' \
	"$top_srcdir/src/err.c" |
	awk '/case IBV_WC_/ { gsub(/[:\t ]|case/, ""); c[++n] = $0 }
	     /return/ { v = $2; gsub(/;/, "", v)
			for (i = 1; i <= n; i++) if (v != "0") print c[i], v
			n = 0 }' | sort >"$tmp/wc_code"
awk '/^\.SH/ { ok = ($0 ~ /^\.SH DESCRIPTION/) }
     ok && prev == ".TP" && /IBV_WC_/ {
	n = 0
	for (i = 2; i <= NF; i++) {
		w = $i; gsub(/[",]/, "", w)
		if (w ~ /^IBV_WC_/) c[++n] = w
	}
	want = 1; prev = $0; next
     }
     want && /^\.B / { v = $2; sub(/^\\/, "", v)
		      for (i = 1; i <= n; i++) print c[i], v
		      want = 0 }
     { prev = $0 }' "$man3/rmsg_strerror.3" | sort >"$tmp/wc_page"
if [ ! -s "$tmp/wc_code" ] || [ ! -s "$tmp/wc_page" ]; then
	echo "FAIL: no completion status table found in src/err.c or rmsg_strerror.3"
	fail=1
elif ! cmp -s "$tmp/wc_code" "$tmp/wc_page"; then
	echo "FAIL: rmsg_strerror.3's completion status table differs from src/err.c (< code, > page):"
	diff "$tmp/wc_code" "$tmp/wc_page" | grep '^[<>]'
	fail=1
else
	echo "completion statuses: rmsg_strerror.3 matches src/err.c ($(wc -l <"$tmp/wc_code") statuses)"
fi

if [ "$fail" != 0 ]; then
	echo "FAIL: see above (tags: 'covers: PAGE.3 EXXX' in tests; reasons: tests/errors-untested/*.txt)"
	exit 1
fi
echo "PASS"
exit 0
