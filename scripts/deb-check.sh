#!/bin/bash
# scripts/deb-check.sh - builds the Debian packages of this tree (debian/),
# checks them with lintian, installs them, uses them as a user would, and
# removes them again (issue 17).
#
#  1. a snapshot of the sources (the files git knows, tracked or not
#     ignored; never build outputs) in $B/src, as scripts/sanitize.sh does
#  2. dpkg-buildpackage -us -uc -b there (DEB_BUILD_OPTIONS=nocheck: the
#     suite runs in test.sh; dh_missing fails on an installed file that
#     no package takes)
#  3. lintian --fail-on error on the .changes (warnings are printed)
#  4. apt-get install of the .debs, then, with no LD_LIBRARY_PATH,
#     PYTHONPATH or RMSG_LIB:
#     - pkg-config --cflags --libs librmsg, and tests/deb/app.c compiled
#       with that line alone runs a client and a server over tcp:// and
#       reports the version of the changelog
#     - every run-time file a package uses belongs to that package or to
#       one it depends on (apt-get -s remove OWNER takes the user along)
#     - every man page of man/ is found by man(1), in the right package
#     - rmsg-doctor runs (exit 0 or 1: RDMA usable or not)
#     - python3 -c 'import rmsg' takes the package's module and library,
#       and a call over tcp:// is answered
#  5. the packages are purged again, also on failure (trap), so that the
#     machine is left as it was. If one of them was installed before, the
#     check refuses to run (it would remove it), unless CI=true or
#     DEB_CHECK_REPLACE=1.
#
# Needs root (apt-get install) and the packages of scripts/setup.sh test.
# Environment: DEB_BUILD_DIR (default: a new directory under /tmp,
# removed at the end unless DEB_KEEP=1).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
PKGS="librmsg0 librmsg-dev rmsg-tools python3-rmsg"
say() { echo "deb-check: $*"; }
die() {
	echo "deb-check: FAIL: $*" >&2
	exit 1
}
installed() {
	dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null |
		grep -q ' installed$'
}

for p in $PKGS; do
	installed "$p" || continue
	if [ "${CI:-}" = true ] || [ "${DEB_CHECK_REPLACE:-}" = 1 ]; then
		say "$p is installed already: it is replaced, then removed"
	else
		die "$p is installed already; this check would remove it" \
			"(DEB_CHECK_REPLACE=1 accepts that)"
	fi
done

B=${DEB_BUILD_DIR:-}
[ -n "$B" ] || B=$(mktemp -d /tmp/rmsg-deb.XXXXXX)
mkdir -p "$B"
B=$(cd "$B" && pwd)
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s)

purge=0
cleanup() {
	rc=$?
	if [ "$purge" = 1 ]; then
		rm_list=
		for p in $PKGS; do
			installed "$p" && rm_list="$rm_list $p"
		done
		if [ -n "$rm_list" ]; then
			say "removing:$rm_list"
			# shellcheck disable=SC2086
			$SUDO apt-get purge -y -q $rm_list >"$B/purge.log" 2>&1 || {
				cat "$B/purge.log"
				echo "deb-check: FAIL: could not remove:$rm_list" >&2
				rc=1
			}
		fi
		# dpkg-query lists a purged package no more ('un' at most)
		for p in $PKGS; do
			if dpkg-query -W -f='${db:Status-Abbrev}\n' "$p" 2>/dev/null |
				grep -qv '^un'; then
				echo "deb-check: FAIL: $p is still on the machine" >&2
				rc=1
			fi
		done
	fi
	if [ "${DEB_KEEP:-}" != 1 ] && [ -z "${DEB_BUILD_DIR:-}" ]; then
		rm -rf "$B"
	else
		echo "deb-check: build directory kept: $B"
	fi
	[ "$rc" = 0 ] && echo "deb-check: PASS ($(($(date +%s) - t0)) s)"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# ------------------------------------------------------------------
# 1. a snapshot of the sources, without build outputs
snap=$B/src
rm -rf "$B"/*.deb "$B"/*.changes "$B"/*.buildinfo
copied=$("$top"/scripts/snapshot.sh "$top" "$snap")
say "snapshot of $copied files in $snap"

# ------------------------------------------------------------------
# 2. build the binary packages
(cd "$snap" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
	dpkg-buildpackage -us -uc -b >"$B/build.log" 2>&1) || {
	tail -n 60 "$B/build.log"
	die "dpkg-buildpackage (log: $B/build.log)"
}
version=$(cd "$snap" && dpkg-parsechangelog -S Version)
changes=$(ls "$B"/librmsg_"$version"_*.changes)
say "built in $(($(date +%s) - t0)) s:" "$(cd "$B" && echo ./*.deb)"
for p in $PKGS; do
	ls "$B/${p}_$version"_*.deb >/dev/null 2>&1 || die "no package $p"
done

# ------------------------------------------------------------------
# 3. lintian: errors fail, the rest is printed
say "lintian --fail-on error $(basename "$changes")"
lintian --fail-on error --display-level '>=info' "$changes" ||
	die "lintian reports errors (above)"

# ------------------------------------------------------------------
# 4. install, then use as a user would
purge=1
# shellcheck disable=SC2046
$SUDO apt-get install -y -q --no-install-recommends \
	$(for p in $PKGS; do ls "$B/${p}_$version"_*.deb; done) \
	>"$B/install.log" 2>&1 || {
	cat "$B/install.log"
	die "apt-get install of the packages"
}
say "installed: $PKGS"
# nothing from this tree or the environment may help
unset LD_LIBRARY_PATH PYTHONPATH RMSG_LIB PKG_CONFIG_PATH
work=$B/use
mkdir -p "$work"

# the C side: the pkg-config line alone compiles and links a program
flags=$(pkg-config --cflags --libs librmsg) ||
	die "pkg-config --cflags --libs librmsg"
say "pkg-config --cflags --libs librmsg: $flags"
# shellcheck disable=SC2086
cc -Wall -Werror -o "$work/app" "$top/tests/deb/app.c" $flags ||
	die "cc app.c \$(pkg-config --cflags --libs librmsg)"
lib=$(ldd "$work/app" | awk '$1 ~ /^librmsg\.so/ { print $3 }')
case $lib in
/usr/lib/* | /lib/*) ;;
*) die "app is linked with '$lib', not the installed librmsg" ;;
esac
(cd "$work" && timeout 60 ./app) >"$work/app.out" 2>&1 || {
	cat "$work/app.out"
	die "app (client and server over tcp://127.0.0.1)"
}
cat "$work/app.out"
# the library says the version the package was built as (native: equal)
grep -q "^librmsg ${version%%-*} " "$work/app.out" ||
	die "rmsg_version() does not say ${version%%-*}, the package's version"

# every file a package uses at run time is its own or one of a package
# it depends on: removing the file's owner (simulated) takes it along
checked=
uses() { # PKG FILE...: PKG uses each FILE
	local pkg=$1 f g owner
	shift
	for f; do
		# the file as named (a -dev package's libX.so link is not the
		# library's), its directory resolved (/lib is /usr/lib), then
		# the file it resolves to
		owner=
		for g in "$(realpath -s "$f")" \
			"$(readlink -f "$(dirname "$f")")/$(basename "$f")" \
			"$(readlink -f "$f")"; do
			owner=$(dpkg -S "$g" 2>/dev/null | head -n 1 |
				cut -d: -f1) || true
			[ -z "$owner" ] || break
		done
		[ -n "$owner" ] || die "$pkg uses $f, which no package owns"
		[ "$owner" = "$pkg" ] && continue
		case " $checked " in
		*" $pkg>$owner "*) continue ;;
		esac
		checked="$checked $pkg>$owner"
		# apt refuses to remove what the Essential packages need (libc6):
		# it is on every Debian system
		apt-get -s remove "$owner" >"$B/remove.sim" 2>&1 || {
			grep -q 'unmet dependencies' "$B/remove.sim" ||
				die "apt-get -s remove $owner: $(cat "$B/remove.sim")"
			continue
		}
		grep -q "^Remv ${pkg}[ :]" "$B/remove.sim" ||
			die "$pkg uses $f of $owner, but does not depend on it"
	done
}
# rmsg-tools and librmsg0: the libraries their programs load
for pkg in librmsg0 rmsg-tools; do
	for f in $(dpkg -L "$pkg" | grep -E '/bin/|\.so\.'); do
		{ [ -f "$f" ] && [ ! -L "$f" ]; } || continue
		# shellcheck disable=SC2046
		uses "$pkg" $(ldd "$f" | awk '$3 ~ /^\// { print $3 }')
	done
done
# librmsg-dev: the libraries the pkg-config line links, and the .pc
# files it requires
for l in $(pkg-config --libs librmsg); do
	case $l in
	-l*)
		f=$(cc -print-file-name="lib${l#-l}.so")
		[ -e "$f" ] || die "pkg-config names $l; lib${l#-l}.so not found"
		uses librmsg-dev "$f"
		;;
	esac
done
for req in $(pkg-config --print-requires --print-requires-private \
	librmsg | awk '{ print $1 }'); do
	uses librmsg-dev "$(pkg-config --path "$req")"
done
say "dependencies: every library and .pc file used is depended on"

# the man pages of the tree, each found by man(1), in the right package
n=0
for page in "$top"/man/man[137]/*.[137]; do
	sec=${page##*.}
	name=$(basename "$page" ".$sec")
	f=$(man -w "$sec" "$name" 2>/dev/null) || die "man -w $sec $name"
	owner=$(dpkg -S "$f" | cut -d: -f1)
	want=librmsg-dev
	[ "$sec" = 1 ] && want=rmsg-tools
	[ "$owner" = "$want" ] || die "man page $name($sec) is in $owner"
	n=$((n + 1))
done
say "man: $n pages found ($(man -w rmsg_send))"

# the doctor runs: 0 RDMA usable, 1 not (man rmsg-doctor)
rc=0
doctor=$(command -v rmsg-doctor) || die "rmsg-doctor not in PATH"
(cd "$work" && timeout 60 rmsg-doctor) >"$work/doctor.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || {
	cat "$work/doctor.out"
	die "$doctor exits $rc"
}
say "$doctor exits $rc ($(tail -n 1 "$work/doctor.out"))"
command -v rmsg-perf >/dev/null || die "rmsg-perf not in PATH"

# Python: the module and library of the packages, and a call answered;
# Debian's python3, the one python3-rmsg is for (PATH may name another)
(cd "$work" && timeout 60 /usr/bin/python3 -I - "$work/py.files") <<'EOF' ||
import asyncio, sys
import rmsg

async def main():
    async with rmsg.Context() as server, rmsg.Context() as client:
        @server.handle(1)
        async def echo(conn, request):
            return request
        listener = server.listen("tcp://127.0.0.1:0")
        conn = await client.connect(listener.uri)
        reply = await conn.call(1, b"ping", timeout=10.0)
        assert reply == b"ping", reply
        await conn.close()

asyncio.run(main())
# the module's file, then the libraries the dynamic linker mapped for it
import os
libs = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        path = line.split()[-1]
        if os.path.basename(path).startswith(("librmsg.so", "libev.so")):
            libs.add(path)
with open(sys.argv[1], "w") as f:
    print(rmsg.__file__, *sorted(libs), sep="\n", file=f)
print("python3: rmsg", rmsg.__version__, "from", rmsg.__file__,
      "with", rmsg.LIBRMSG_PATH, "- call answered")
EOF
	die "python3: import rmsg and a call over tcp://"
mod=$(sed -n 1p "$work/py.files")
case $mod in
/usr/lib/python3/dist-packages/rmsg/*) ;;
*) die "python3 imported rmsg from $mod, not from python3-rmsg" ;;
esac
# shellcheck disable=SC2046
uses python3-rmsg "$mod" $(sed -n '2,$p' "$work/py.files")
say "python3-rmsg: $(sed -n '1,$p' "$work/py.files" | tr '\n' ' ')"

# the out-of-tree example, plain cc and CMake, against the packages
"$top"/tests/consumer/run.sh /usr ||
	die "tests/consumer/run.sh /usr: the example against the packages"
# the binding pip-installed into a venv, its tests run against the
# packaged library (no RMSG_LIB: the package finds librmsg.so.0 itself)
env -u RMSG_LIB "$top"/bindings/python/check-install.sh ||
	die "bindings/python/check-install.sh against the packaged library"
