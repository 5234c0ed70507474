#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-layout.sh - the shape of the source tree (issue 31), run by
# `make check`:
#  1. no file under src/ (*.c, *.h) is over MAX_LINES lines;
#  2. a backend's files (src/transport/NAME/*.c) include only the
#     backend's own header (NAME.h) and system headers, and NAME.h only
#     ../transport.h and system headers: a backend sees the core through
#     the contract alone; no file outside the backend's folder includes
#     one of its files;
#  3. every file under src/ (*.c, *.h) has a row in the README's layout
#     table ("Where each concern lives"), and every file a row names
#     exists;
#  4. in_cb (the re-entry guard around user callbacks) is written (++,
#     --, =) only in the one helper that runs a user callback (IN_CB_HELPER).
# Each failure says which rule and which file; exit 1 if any.
#
# The allow-lists below name what was already so when the check came;
# they only shrink: an entry that no longer applies fails too, so that it
# is removed with the change that fixed it.
set -u

top=${top_srcdir:-$(dirname "$0")/..}
cd "$top" || exit 1

MAX_LINES=700
# over MAX_LINES today, being split (issue 31): remove an entry once its
# file is back under the limit
KNOWN_OVER=""
# the file whose helper alone writes in_cb (issue 31): RMSGI_USER_CB
IN_CB_HELPER="src/rmsg_int.h"
# hand-written in_cb writes today, as FILE:LINES (lines that write it):
# each count may only go down, to 0 (then drop the entry)
KNOWN_IN_CB=""

fail=0
bad() {
	echo "check-layout: $*"
	fail=1
}

in_list() { # word list
	for w in $2; do
		[ "$w" = "$1" ] && return 0
	done
	return 1
}

srcs=$(find src -name '*.[ch]' | LC_ALL=C sort)

# 1. file sizes
for f in $srcs; do
	n=$(wc -l <"$f")
	if [ "$n" -gt "$MAX_LINES" ]; then
		in_list "$f" "$KNOWN_OVER" ||
			bad "$f: $n lines, over $MAX_LINES (split it by concern)"
	elif in_list "$f" "$KNOWN_OVER"; then
		bad "$f: $n lines, no longer over $MAX_LINES: remove it from KNOWN_OVER in $0"
	fi
done
for f in $KNOWN_OVER; do
	[ -f "$f" ] || bad "$f: in KNOWN_OVER but does not exist"
done

# 2. what a backend includes
for d in src/transport/*/; do
	name=$(basename "$d")
	for f in "$d"*.c "$d"*.h; do
		[ -f "$f" ] || continue
		case $f in
		*/"$name".h) want='"../transport.h"' ;;
		*) want="\"$name.h\"" ;;
		esac
		grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
			while IFS= read -r line; do
				inc=$(echo "$line" | sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*("[^"]*").*/\1/')
				[ "$inc" = "$want" ] ||
					echo "check-layout: $f:${line%%:*}: includes $inc; a backend file includes only $want and system headers"
			done
	done
done >"${TMPDIR:-/tmp}/check-layout.$$"
# ... and nothing outside a backend's folder includes its files: the
# core reaches a backend through the registry's row alone
for d in src/transport/*/; do
	name=$(basename "$d")
	for f in $srcs; do
		case $f in "$d"*) continue ;; esac
		grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*/)?('"$name"'/[^"]*|'"$name"'\.h)"' "$f" |
			sed "s|^|check-layout: $f:|; s|\$|: the core includes a backend's file|"
	done
done >>"${TMPDIR:-/tmp}/check-layout.$$"
if [ -s "${TMPDIR:-/tmp}/check-layout.$$" ]; then
	cat "${TMPDIR:-/tmp}/check-layout.$$"
	fail=1
fi
rm -f "${TMPDIR:-/tmp}/check-layout.$$"

# 3. the README's layout table: the last column of each row of the table
# under "### Where each concern lives" names its files in backquotes
rows=$(awk '
	/^### Where each concern lives/ { sec = 1; next }
	sec && /^#/ { exit }
	sec && /^\|/ {
		if (++n <= 2) next # the header and its rule
		last = $0
		sub(/\|[[:space:]]*$/, "", last)
		sub(/.*\|/, "", last)
		while (match(last, /`[^`]*`/)) {
			print substr(last, RSTART + 1, RLENGTH - 2)
			last = substr(last, RSTART + RLENGTH)
		}
	}' README.md)
[ -n "$rows" ] || bad "README.md: no layout table under '### Where each concern lives'"
for p in $rows; do
	[ -e "$p" ] || bad "README.md: the layout table names $p, which does not exist"
done
for f in $srcs; do
	in_list "$f" "$rows" ||
		bad "$f: no row in README.md's layout table (Where each concern lives)"
done

# 4. who writes in_cb
for f in $srcs; do
	[ "$f" = "$IN_CB_HELPER" ] && continue
	n=$(grep -cE 'in_cb[[:space:]]*(\+\+|--|[-+]?=[^=])|(\+\+|--)[[:space:]]*[A-Za-z_>.()-]*in_cb' "$f")
	known=0
	for e in $KNOWN_IN_CB; do
		[ "${e%:*}" = "$f" ] && known=${e##*:}
	done
	if [ "$n" -gt "$known" ]; then
		bad "$f: writes in_cb on $n lines ($known known): run user callbacks through the one helper${IN_CB_HELPER:+ in $IN_CB_HELPER}"
	elif [ "$n" -lt "$known" ]; then
		bad "$f: writes in_cb on $n lines, KNOWN_IN_CB says $known: lower its entry in $0"
	fi
done
for e in $KNOWN_IN_CB; do
	[ -f "${e%:*}" ] || bad "${e%:*}: in KNOWN_IN_CB but does not exist"
done

[ "$fail" = 0 ] && echo "check-layout: ok ($(echo "$srcs" | wc -l) files under src/)"
exit "$fail"
