#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-man.sh - the man pages match the library.
#
#  a. every function declared in include/rmsg.h (and, once the library is
#     built, every rmsg_* symbol librmsg.so exports) has man/man3/NAME.3,
#     a full page or a ".so" link to the page that documents it;
#  b. each prototype in a page's SYNOPSIS is the one in include/rmsg.h
#     (whitespace aside), link pages point at a page that declares their
#     function, man3 pages have the usual sections, and cross references
#     to rmsg pages resolve;
#  c. every EXAMPLE block (.EX to .EE) compiles with
#     ${CC:-cc} -Wall -Werror -fsyntax-only -I$top_srcdir/include;
#  d. every page lints clean: mandoc -Tlint -Wwarning, or groff -ww -z;
#  e. man/man3/Makefile.inc lists exactly the pages in man/man3;
#  f. src/librmsg.map lists exactly the functions of include/rmsg.h, and
#     the built library exports exactly those, each at its map node.
#
# Automake test: exit 0 pass, 1 fail. A tool a check needs (a C compiler
# that finds <ev.h>, mandoc or groff, nm) being missing is a failure that
# names the package (scripts/setup.sh test installs them all), so no
# check can silently drop out of CI; so is a library missing after a
# build when run by 'make check' (top_builddir set). CHECK_MAN_ALLOW_SKIP=1
# turns those into a visible "SKIP: <check>" line, the other checks
# still deciding the status. Environment: top_srcdir (default: this
# script's ../), top_builddir (default: top_srcdir; set by 'make check'),
# CC, and RMSG_MAN_LINT=mandoc|groff to choose the linter (default:
# mandoc if installed, else groff); CHECK_MAN_KEEP=1 keeps the temporary
# directory for debugging.

LC_ALL=C
export LC_ALL

: "${top_srcdir:=$(dirname "$0")/..}"
# run by make (check): the library has been built
built=${top_builddir:+1}
: "${top_builddir:=$top_srcdir}"
top_srcdir=$(cd "$top_srcdir" && pwd) || exit 1
top_builddir=$(cd "$top_builddir" && pwd) || exit 1
header=$top_srcdir/include/rmsg.h
mandir=$top_srcdir/man

if [ ! -f "$header" ]; then
	echo "FAIL: $header not found"
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-man.XXXXXX") || exit 1
trap '[ -n "$CHECK_MAN_KEEP" ] || rm -rf "$tmp"' 0
trap 'exit 1' HUP INT TERM
: > "$tmp/failures"
skipped=

fail() {
	echo "FAIL: $*"
	echo "$*" >> "$tmp/failures"
}

# fail_each FILE FORMAT: one failure for each line of FILE, put in place
# of the %s of FORMAT
fail_each() {
	while read -r each; do
		# shellcheck disable=SC2059 # FORMAT is a format on purpose
		fail "$(printf "$2" "$each")"
	done < "$1"
}

# cannot CHECK: WHY. A failure, or with CHECK_MAN_ALLOW_SKIP=1 a visible
# skip of that check alone
cannot() {
	if [ "${CHECK_MAN_ALLOW_SKIP:-}" = 1 ]; then
		echo "SKIP: $1: $2 (allowed by CHECK_MAN_ALLOW_SKIP=1)"
		skipped="$skipped $1"
	else
		fail "$1 not checked: $2 (CHECK_MAN_ALLOW_SKIP=1 to skip it)"
	fi
}

# ------------------------------------------------------------------
# shared awk functions: roff to text, C text to prototypes

cat > "$tmp/lib.awk" <<'EOF'
# the named character escapes that occur in C code and prototypes
function special(name) {
	if (name == "aq" || name == "oq" || name == "cq") return "'"
	if (name == "dq" || name == "lq" || name == "rq") return "\""
	if (name == "ga") return "`"
	if (name == "rs") return "\\"
	if (name == "ti") return "~"
	if (name == "ha") return "^"
	if (name == "em") return "--"
	if (name == "en" || name == "hy" || name == "mi") return "-"
	if (name == "pl") return "+"
	if (name == "bu") return "*"
	return ""
}

# undoes roff escapes: \e \- \(aq \[aq] \fB \& ...
function deesc(s,    out, i, c, n) {
	out = ""
	while ((i = index(s, "\\")) > 0) {
		out = out substr(s, 1, i - 1)
		c = substr(s, i + 1, 1)
		s = substr(s, i + 2)
		if (c == "e" || c == "\\")
			out = out "\\"
		else if (c == "-")
			out = out "-"
		else if (c == " " || c == "~" || c == "0")
			out = out " "
		else if (c == "&" || c == "|" || c == "^" || c == "c" || \
			 c == "%" || c == ":")
			;
		else if (c == "\"")
			s = ""
		else if (c == "f") {
			if (substr(s, 1, 1) == "(")
				s = substr(s, 4)
			else if (substr(s, 1, 1) == "[") {
				n = index(s, "]")
				s = substr(s, n + 1)
			} else
				s = substr(s, 2)
		} else if (c == "(") {
			out = out special(substr(s, 1, 2))
			s = substr(s, 3)
		} else if (c == "[") {
			n = index(s, "]")
			out = out special(substr(s, 1, n - 1))
			s = substr(s, n + 1)
		} else
			out = out c
	}
	return out s
}

# splits macro arguments, honouring double quotes; returns their number
function parseargs(s, args,    n, i, l, a, c) {
	n = 0
	i = 1
	l = length(s)
	for (;;) {
		while (i <= l && (substr(s, i, 1) == " " || substr(s, i, 1) == "\t"))
			i++
		if (i > l)
			break
		a = ""
		if (substr(s, i, 1) == "\"") {
			i++
			while (i <= l) {
				c = substr(s, i, 1)
				if (c == "\"") {
					if (substr(s, i + 1, 1) == "\"") {
						a = a "\""
						i += 2
						continue
					}
					i++
					break
				}
				a = a c
				i++
			}
		} else {
			while (i <= l && substr(s, i, 1) != " " && substr(s, i, 1) != "\t") {
				a = a substr(s, i, 1)
				i++
			}
		}
		args[++n] = a
	}
	return n
}

# the text a line contributes; MACRO is set to the request name, or ""
function unroff(line,    name, rest, args, n, i, sep, out) {
	MACRO = ""
	if (line !~ /^[.']/)
		return deesc(line)
	rest = substr(line, 2)
	sub(/^[ \t]*/, "", rest)
	name = rest
	sub(/[ \t].*/, "", name)
	rest = substr(rest, length(name) + 1)
	MACRO = name
	if (name ~ /^\\"/ || name == "")
		return ""
	if (name == "B" || name == "I" || name == "SM" || name == "SB")
		sep = " "
	else if (name ~ /^(BI|IB|BR|RB|IR|RI)$/)
		sep = ""
	else
		return ""
	# a \" comment ends the arguments
	if ((i = index(rest, "\\\"")) > 0)
		rest = substr(rest, 1, i - 1)
	n = parseargs(rest, args)
	out = ""
	for (i = 1; i <= n; i++)
		out = out (i > 1 ? sep : "") args[i]
	return deesc(out)
}

# one spelling for a C declaration
function norm(s) {
	gsub(/[ \t\n]+/, " ", s)
	gsub(/ ?\( ?/, "(", s)
	gsub(/ ?\) ?/, ")", s)
	gsub(/ ?, ?/, ", ", s)
	gsub(/\* /, "*", s)
	sub(/^ /, "", s)
	sub(/ $/, "", s)
	return s
}

# prints "tag<TAB>name<TAB>prototype" for each rmsg_ function declared in
# C text without comments or preprocessor lines; typedefs, struct members
# and function pointers are left out
function protos(text, tag,    n, parts, i, st, name) {
	n = split(text, parts, ";")
	for (i = 1; i <= n; i++) {
		st = parts[i]
		while (match(st, /[{}]/))
			st = substr(st, RSTART + 1)
		st = norm(st)
		if (st == "" || st ~ /^typedef /)
			continue
		if (!match(st, /[A-Za-z_][A-Za-z_0-9]*\(/))
			continue
		name = substr(st, RSTART, RLENGTH - 1)
		if (name !~ /^rmsg_/)
			continue
		print tag "\t" name "\t" st
	}
}
EOF

# ------------------------------------------------------------------
# a. the functions of include/rmsg.h

cat > "$tmp/header.awk" <<'EOF'
{ text = text $0 "\n" }
END {
	out = ""
	for (;;) {
		a = index(text, "/*")
		b = index(text, "//")
		if (!a && !b)
			break
		if (a && (!b || a < b)) {
			out = out substr(text, 1, a - 1) " "
			text = substr(text, a + 2)
			e = index(text, "*/")
			text = e ? substr(text, e + 2) : ""
		} else {
			out = out substr(text, 1, b - 1)
			text = substr(text, b + 2)
			e = index(text, "\n")
			text = e ? substr(text, e) : ""
		}
	}
	out = out text
	n = split(out, lines, "\n")
	code = ""
	cont = 0
	for (i = 1; i <= n; i++) {
		l = lines[i]
		if (cont || l ~ /^[ \t]*#/) {
			cont = (l ~ /\\$/)
			continue
		}
		code = code " " l
	}
	protos(code, "H")
}
EOF
awk -f "$tmp/lib.awk" -f "$tmp/header.awk" "$header" > "$tmp/header.tsv"
cut -f2 "$tmp/header.tsv" | sort -u > "$tmp/header.names"
if [ ! -s "$tmp/header.names" ]; then
	fail "no function declarations found in include/rmsg.h"
fi
cut -f2 "$tmp/header.tsv" | sort | uniq -d > "$tmp/x"
fail_each "$tmp/x" "include/rmsg.h declares %s more than once"

# the exported symbols, when the library has been built
lib=$top_builddir/.libs/librmsg.so
cp "$tmp/header.names" "$tmp/needed.names"
if [ ! -f "$lib" ]; then
	if [ -n "$built" ]; then
		cannot exported-symbols "$lib not found after the build"
	else
		echo "NOTE: exported symbols not checked: $lib not built yet"
	fi
elif ! command -v nm > /dev/null 2>&1; then
	cannot exported-symbols "nm not found (Debian package binutils)"
else
	nm -D --defined-only "$lib" |
		awk '$2 == "T" && $3 ~ /^rmsg_/ { sub(/@.*/, "", $3); print $3 }' |
		sort -u > "$tmp/nm.names"
	comm -13 "$tmp/header.names" "$tmp/nm.names" > "$tmp/x"
	fail_each "$tmp/x" "%s: exported by librmsg.so but not declared in include/rmsg.h"
	comm -23 "$tmp/header.names" "$tmp/nm.names" > "$tmp/x"
	fail_each "$tmp/x" "%s: declared in include/rmsg.h but not exported by librmsg.so"
	sort -u "$tmp/header.names" "$tmp/nm.names" > "$tmp/needed.names"
fi

# the version script lists exactly the functions of include/rmsg.h, and
# the library exports exactly the map's symbols, each under its node
# (docs/versioning.md): a new function without a map entry is not
# exported, a map entry without a declaration is a stale one
map=$top_srcdir/src/librmsg.map
awk '{ sub(/#.*/, "") } /\/\*/ { c = 1 } c { if (/\*\//) c = 0; next }
	/^[A-Za-z_][A-Za-z0-9_.]*[ \t]*\{/ { node = $1; sub(/\{.*/, "", node) }
	/^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ { s = $1; sub(/;.*/, "", s)
		print s "@" node }' "$map" | sort -u > "$tmp/map.syms"
sed 's/@.*//' "$tmp/map.syms" | sort -u > "$tmp/map.names"
[ -s "$tmp/map.names" ] || fail "no symbols found in src/librmsg.map"
comm -13 "$tmp/map.names" "$tmp/header.names" > "$tmp/x"
fail_each "$tmp/x" "%s: declared in include/rmsg.h but not listed in src/librmsg.map"
comm -23 "$tmp/map.names" "$tmp/header.names" > "$tmp/x"
fail_each "$tmp/x" "%s: listed in src/librmsg.map but not declared in include/rmsg.h"
if [ -f "$lib" ] && command -v nm > /dev/null 2>&1; then
	# every defined dynamic symbol but the version nodes themselves
	nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' |
		sed 's/@@*/@/' | sort -u > "$tmp/nm.syms"
	comm -13 "$tmp/map.syms" "$tmp/nm.syms" > "$tmp/x"
	fail_each "$tmp/x" "%s: exported by librmsg.so but not so in src/librmsg.map"
	comm -23 "$tmp/map.syms" "$tmp/nm.syms" > "$tmp/x"
	fail_each "$tmp/x" "%s: in src/librmsg.map but not exported so by librmsg.so"
fi

while read -r name; do
	[ -f "$mandir/man3/$name.3" ] ||
		fail "$name: no man page man/man3/$name.3"
done < "$tmp/needed.names"

# ------------------------------------------------------------------
# b. what each page says

cat > "$tmp/page.awk" <<'EOF'
# records: F full page, L link target, H section, N name, S synopsis
# prototype, I includes rmsg.h, R cross reference, E example file,
# X problem
function rec(kind, a, b) {
	print kind "\t" PAGE "\t" a "\t" b
}
function endsection() {
	if (sect == "SYNOPSIS")
		protos(syn, "S\t" PAGE)
	if (sect == "NAME") {
		sub(/ - .*/, "", names)
		n = split(names, list, /[ ,]+/)
		for (i = 1; i <= n; i++)
			if (list[i] != "")
				rec("N", list[i])
	}
}
NR == 1 || !started {
	if ($0 ~ /^\.\\"/ || $0 ~ /^'\\"/)
		next
	started = 1
	if ($0 ~ /^\.so /) {
		target = $2
		rec("L", target)
		link = 1
	}
}
link { next }
/^\.SH/ {
	endsection()
	sect = unroff(".B" substr($0, 4))
	rec("H", sect)
	syn = ""
	names = ""
	next
}
inex && /^\.EE/ {
	inex = 0
	close(file)
	next
}
inex {
	t = unroff($0)
	if (MACRO == "" || t != "")
		print t > file
	next
}
/^\.EX/ {
	if (sect ~ /^EXAMPLES?$/) {
		inex = 1
		nex++
		file = PREFIX "." nex ".c"
		printf "" > file
		rec("E", file)
	}
	next
}
{
	t = unroff($0)
	if (MACRO ~ /^\\"/)
		next
	if (sect == "NAME")
		names = names " " t
	if (sect == "SYNOPSIS") {
		if (t ~ /^[ \t]*#/) {
			if (t ~ /^#include <rmsg\.h>/)
				rec("I")
		} else
			syn = syn " " t
	}
	s = t
	while (match(s, /rmsg[a-z_0-9]*\([0-9]\)/)) {
		r = substr(s, RSTART, RLENGTH)
		rec("R", substr(r, 1, length(r) - 3), substr(r, length(r) - 1, 1))
		s = substr(s, RSTART + RLENGTH)
	}
}
END {
	if (inex)
		rec("X", "an .EX block has no .EE")
	if (!link) {
		endsection()
		rec("F")
	}
}
EOF

npages=0
: > "$tmp/pages.tsv"
for f in "$mandir"/man3/*.3 "$mandir"/man7/*.7; do
	[ -f "$f" ] || continue
	npages=$((npages + 1))
	rel=${f#"$mandir"/}
	base=${rel##*/}
	awk -f "$tmp/lib.awk" -f "$tmp/page.awk" -v PAGE="$rel" \
		-v PREFIX="$tmp/ex.$base" "$f" >> "$tmp/pages.tsv"
done
if [ "$npages" -eq 0 ]; then
	fail "no man pages in man/man3 or man/man7"
fi

# every check of (b) on the records
awk -F '\t' -v MANDIR="$mandir" '
FILENAME == ARGV[1] { hproto[$2] = $3; next }
{ page = $2 }
$1 == "F" { full[page] = 1; next }
$1 == "L" { link[page] = $3; next }
$1 == "H" { sect[page, $3] = 1; next }
$1 == "N" { named[page, $3] = 1; nnamed[page]++; nlist[page] = nlist[page] " " $3; next }
$1 == "I" { inc[page] = 1; next }
$1 == "X" { print page ": " $3; next }
$1 == "S" {
	decl[page, $3] = 1
	slist[page] = slist[page] " " $3
	if (!($3 in hproto))
		print page ": SYNOPSIS declares " $3 ", which include/rmsg.h does not"
	else if (hproto[$3] != $4)
		print page ": SYNOPSIS of " $3 " differs from include/rmsg.h: \"" \
			$4 "\" instead of \"" hproto[$3] "\""
	next
}
$1 == "R" {
	ref = "man" $4 "/" $3 "." $4
	if (!((ref) in seen)) {
		seen[ref] = 1
		if (system("test -f \"" MANDIR "/" ref "\""))
			missing[ref] = page
	}
	next
}
END {
	for (ref in missing)
		print missing[ref] ": refers to " ref ", which does not exist"
	for (page in link) {
		target = link[page]
		fn = page
		sub(/.*\//, "", fn)
		sub(/\.[0-9]$/, "", fn)
		if (!(target in full) && !(target in link))
			print page ": links to " target ", which is not a page here"
		else if (target in link)
			print page ": links to " target ", itself a link"
		else if ((fn in hproto) && !((target, fn) in decl))
			print page ": links to " target ", whose SYNOPSIS does not declare " fn
	}
	for (page in full) {
		if (page !~ /^man3\//)
			continue
		fn = page
		sub(/.*\//, "", fn)
		sub(/\.3$/, "", fn)
		if (!inc[page])
			print page ": SYNOPSIS lacks #include <rmsg.h>"
		if ((fn in hproto) && !((page, fn) in decl))
			print page ": SYNOPSIS does not declare " fn
		n = split("NAME SYNOPSIS DESCRIPTION RETURN?VALUE ERRORS EXAMPLE SEE?ALSO", req, " ")
		for (i = 1; i <= n; i++) {
			s = req[i]
			gsub(/\?/, " ", s)
			if (!((page, s) in sect) && !(s == "EXAMPLE" && (page, "EXAMPLES") in sect))
				print page ": no " s " section"
		}
		m = split(slist[page], l, " ")
		for (i = 1; i <= m; i++)
			if (!((page, l[i]) in named))
				print page ": " l[i] " is in SYNOPSIS but not in NAME"
		m = split(nlist[page], l, " ")
		for (i = 1; i <= m; i++)
			if (l[i] ~ /^rmsg_/ && (l[i] in hproto) && !((page, l[i]) in decl))
				print page ": " l[i] " is in NAME but not in SYNOPSIS"
	}
}' "$tmp/header.tsv" "$tmp/pages.tsv" > "$tmp/x"
sort "$tmp/x" > "$tmp/y"
while read -r line; do
	fail "$line"
done < "$tmp/y"

# ------------------------------------------------------------------
# c. the examples compile

CC=${CC:-cc}
nex=0
printf '#include <ev.h>\nint main(void)\n{\n\treturn 0;\n}\n' > "$tmp/probe.c"
if ! $CC -fsyntax-only "$tmp/probe.c" > "$tmp/probe.out" 2>&1; then
	cannot examples "$CC cannot compile a program using <ev.h> (Debian packages gcc, libev-dev)"
	sed 's/^/  /' "$tmp/probe.out" | head -n 5
else
	awk -F '\t' '$1 == "E" { print $2 "\t" $3 }' "$tmp/pages.tsv" > "$tmp/ex.list"
	while IFS='	' read -r page file; do
		nex=$((nex + 1))
		n=${file%.c}
		n=${n##*.}
		src=$file
		if ! grep -q '^[[:space:]]*#[[:space:]]*include' "$file"; then
			# a fragment: give it the usual headers, and a function
			# around it unless it defines one itself
			src=$file.frag.c
			{
				printf '#include <errno.h>\n#include <stdint.h>\n'
				printf '#include <stdio.h>\n#include <stdlib.h>\n'
				printf '#include <string.h>\n#include <sys/uio.h>\n'
				printf '#include <ev.h>\n#include <rmsg.h>\n'
				if awk '/^[A-Za-z_][A-Za-z_0-9 *]*\(/ &&
					!/;[ \t]*$/ { f = 1 }
					END { exit !f }' "$file"; then
					cat "$file"
				else
					printf 'void rmsg_man_example(void);\n'
					printf 'void rmsg_man_example(void)\n{\n'
					cat "$file"
					printf '}\n'
				fi
			} > "$src"
		fi
		if ! $CC -Wall -Werror -fsyntax-only -I"$top_srcdir/include" \
			"$src" > "$tmp/cc.out" 2>&1; then
			fail "$page: EXAMPLE $n does not compile"
			sed "s|$src|$page:EXAMPLE-$n|; s/^/  /" "$tmp/cc.out" |
				head -n 20
		fi
	done < "$tmp/ex.list"
fi

# ------------------------------------------------------------------
# d. lint

if [ -n "$RMSG_MAN_LINT" ]; then
	linter=$RMSG_MAN_LINT
elif command -v mandoc > /dev/null 2>&1; then
	linter=mandoc
elif command -v groff > /dev/null 2>&1; then
	linter=groff
else
	cannot lint "neither mandoc nor groff is installed (Debian package mandoc)"
	linter=
fi
if [ -n "$linter" ] && ! command -v "$linter" > /dev/null 2>&1; then
	cannot lint "RMSG_MAN_LINT=$linter, which is not installed"
	linter=
fi
if [ -n "$linter" ]; then
	for f in "$mandir"/man3/*.3 "$mandir"/man7/*.7; do
		[ -f "$f" ] || continue
		rel=${f#"$mandir"/}
		if [ "$linter" = mandoc ]; then
			(cd "$mandir" && mandoc -Tlint -Wwarning "$rel") \
				> "$tmp/lint.out" 2>&1
			rc=$?
			# .so links are how these pages share text, as in
			# rdma-core; mandoc's remark that .so is fragile is
			# expected on a link page, and only there
			if head -n 1 "$f" | grep -q '^\.so '; then
				grep -v ': WARNING: \.so is fragile, better use ln(1): so ' \
					"$tmp/lint.out" > "$tmp/lint.txt"
			else
				cp "$tmp/lint.out" "$tmp/lint.txt"
			fi
			if [ "$rc" -ne 0 ] && [ ! -s "$tmp/lint.out" ]; then
				echo "mandoc exited with status $rc" > "$tmp/lint.txt"
			fi
		else
			(cd "$mandir" && groff -ww -man -z "$rel") \
				> "$tmp/lint.txt" 2>&1 ||
				echo "groff exited with status $?" >> "$tmp/lint.txt"
		fi
		while read -r line; do
			fail "$rel: $line"
		done < "$tmp/lint.txt"
	done
fi

# ------------------------------------------------------------------
# e. Makefile.inc lists every page

inc=$mandir/man3/Makefile.inc
if [ ! -f "$inc" ]; then
	fail "man/man3/Makefile.inc not found"
else
	awk '{ for (i = 1; i <= NF; i++) print $i }' "$inc" |
		grep '^man/man3/.*\.3$' | sort -u > "$tmp/inc.list"
	(cd "$top_srcdir" && ls man/man3/*.3 2> /dev/null) | sort -u \
		> "$tmp/dir.list"
	comm -13 "$tmp/inc.list" "$tmp/dir.list" > "$tmp/x"
	fail_each "$tmp/x" "%s is not in man/man3/Makefile.inc"
	comm -23 "$tmp/inc.list" "$tmp/dir.list" > "$tmp/x"
	fail_each "$tmp/x" "man/man3/Makefile.inc lists %s, which does not exist"
fi

# ------------------------------------------------------------------

nfail=$(wc -l < "$tmp/failures")
nfail=$((nfail + 0))
nfn=$(wc -l < "$tmp/needed.names")
echo "checked $npages pages, $nex examples ($((nfn + 0)) functions)${skipped:+; skipped:$skipped}"
if [ "$nfail" -gt 0 ]; then
	echo "$nfail failures"
	exit 1
fi
exit 0
