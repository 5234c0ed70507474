#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-readme-steps.sh - the README's "Use it in your program" steps
# work, as written, in a fresh clone (issue 35: they had lost autoreconf
# and nettle-dev without anything noticing).
#
#  1. git clone of the tree's committed HEAD into a temporary directory
#     (uncommitted changes are not in it: commit first);
#  2. the block after "<!-- steps: install -->" in the clone's README.md
#     runs there line for line under sh -e, with three stand-ins: sudo
#     runs its command as the caller; apt-get install does not install
#     but fails unless each named package is installed (dpkg-query), and
#     every package configure.ac tells the user to install ("install the
#     Debian package X") must be among them; ldconfig does nothing (the
#     prefix is private). configure reads CONFIG_SITE, which sets its
#     prefix to a temporary directory, so "make install" installs there;
#     MAKEFLAGS=-j2;
#  3. the block after "<!-- steps: build -->" (the cc line with
#     pkg-config) runs once with the README's server.c and once with its
#     client.c as app.c, PKG_CONFIG_PATH pointing at the prefix; each
#     app must link to the prefix's librmsg (ldd with LD_LIBRARY_PATH, as
#     the README says for another prefix).
#
# Run by test.sh (a whole-tree check: it builds the tree once more, about
# two minutes on 2 cores). Exit 0 pass, 1 fail, 77 skip (not a git work
# tree, or git missing). Environment: top_srcdir (default: this script's
# ../), CHECK_STEPS_KEEP=1 keeps the temporary directory.

LC_ALL=C
export LC_ALL

: "${top_srcdir:=$(dirname "$0")/..}"
top_srcdir=$(cd "$top_srcdir" && pwd) || exit 1

if ! command -v git > /dev/null 2>&1 ||
	! git -C "$top_srcdir" rev-parse --git-dir > /dev/null 2>&1; then
	echo "SKIP: $top_srcdir is not a git work tree (or no git)"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-readme-steps.XXXXXX") || exit 1
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ "${CHECK_STEPS_KEEP:-}" = 1 ]; then
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

# 1.
if ! git clone -q "$top_srcdir" "$tmp/src" > "$tmp/clone.log" 2>&1; then
	fail "git clone $top_srcdir"
	sed 's/^/  /' "$tmp/clone.log"
	exit 1
fi
src=$tmp/src
echo "cloned $(git -C "$src" log -1 --format='%h %s' | cut -c1-60)"

# the block after <!-- steps: NAME --> (or <!-- compile: NAME -->) of
# README.md into FILE
block() {
	awk -v NAME="$1" '
$0 == "<!-- steps: " NAME " -->" || $0 == "<!-- compile: " NAME " -->" {
	want = 1; next
}
want && /^```/ { if (inb) exit; inb = 1; next }
inb { print; next }
/[^ \t]/ { want = 0 }
' "$src/README.md" > "$2"
	[ -s "$2" ] || fail "README.md has no block after <!-- steps: $1 -->" \
		"(or <!-- compile: $1 -->)"
}
block install "$tmp/install.sh"
block build "$tmp/build.sh"
block server.c "$tmp/server.c"
block client.c "$tmp/client.c"
[ "$nfail" -eq 0 ] || exit 1

# 2. the stand-ins (commands first in PATH), then the block
mkdir "$tmp/bin"
printf '#!/bin/sh\nexec "$@"\n' > "$tmp/bin/sudo"
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/ldconfig"
cat > "$tmp/bin/apt-get" <<EOF
#!/bin/sh
[ "\$1" = install ] || { echo "apt-get \$1: only install is run here"; exit 1; }
shift
for p in "\$@"; do
	case \$p in -*) continue ;; esac
	echo "\$p" >> "$tmp/packages"
	dpkg-query -W -f='\${Status}\n' "\$p" 2> /dev/null |
		grep -q '^install ok installed' ||
		{ echo "package \$p is not installed here"; exit 1; }
done
EOF
chmod +x "$tmp/bin/sudo" "$tmp/bin/ldconfig" "$tmp/bin/apt-get"
echo "prefix=$tmp/prefix" > "$tmp/config.site"
: > "$tmp/packages"
echo "running the README's install steps in the clone"
if ! (cd "$src" && CONFIG_SITE=$tmp/config.site MAKEFLAGS=-j2 \
	PATH=$tmp/bin:$PATH sh -ex "$tmp/install.sh") \
	> "$tmp/install.log" 2>&1; then
	fail "README.md's install steps failed in a fresh clone" \
		"(the last lines):"
	tail -n 25 "$tmp/install.log" | sed 's/^/  /'
fi

# every package configure.ac asks for is in the README's list
sed -n 's/.*install the Debian package \([a-z0-9.+-]*\).*/\1/p' \
	"$src/configure.ac" | sort -u > "$tmp/needed"
if [ ! -s "$tmp/needed" ]; then
	fail "configure.ac names no Debian package (install the Debian" \
		"package X): this check is stale"
fi
while read -r p; do
	grep -qx "$p" "$tmp/packages" ||
		fail "README.md's apt-get install line lacks $p," \
			"which configure.ac asks for"
done < "$tmp/needed"

# 3. the cc line, for each program
pc=$(find "$tmp/prefix" -name librmsg.pc 2> /dev/null | head -n 1)
if [ "$nfail" -eq 0 ] && [ -z "$pc" ]; then
	fail "no librmsg.pc under the prefix after make install"
fi
if [ -n "$pc" ]; then
	pcdir=$(dirname "$pc")
	libdir=$(dirname "$pcdir")
	for prog in server client; do
		mkdir "$tmp/$prog"
		cp "$tmp/$prog.c" "$tmp/$prog/app.c"
		if ! (cd "$tmp/$prog" && PKG_CONFIG_PATH=$pcdir \
			PATH=$tmp/bin:$PATH sh -ex "$tmp/build.sh") \
			> "$tmp/$prog.log" 2>&1; then
			fail "README.md's cc line failed for its $prog.c:"
			sed 's/^/  /' "$tmp/$prog.log" | tail -n 20
			continue
		fi
		lib=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/$prog/app" |
			awk '$1 ~ /^librmsg\.so/ { print $3 }')
		case $lib in
		"$libdir"/*) ;;
		*) fail "$prog: app links to '${lib:-no librmsg}', not $libdir" ;;
		esac
	done
fi

if [ "$nfail" -gt 0 ]; then
	echo "$nfail failures (CHECK_STEPS_KEEP=1 keeps $tmp)"
	exit 1
fi
echo "README.md's steps work in a fresh clone: $(wc -l < "$tmp/packages")" \
	"packages, autoreconf, configure, make, make install, server and" \
	"client built with pkg-config"
exit 0
