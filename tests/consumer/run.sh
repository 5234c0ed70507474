#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run.sh [PREFIX] - builds tests/consumer/app.c the two ways a program
# outside this tree would, against an installed librmsg, and runs each
# build (the program makes one RPC call with a deadline and sends one
# message over tcp://127.0.0.1, and exits 0 only if both worked):
#
#  a. cc app.c $(pkg-config --cflags --libs librmsg)
#  b. CMake: pkg_check_modules(RMSG REQUIRED IMPORTED_TARGET librmsg) and
#     target_link_libraries(app PkgConfig::RMSG) (CMakeLists.txt)
#
# Both are built in a temporary directory from a copy of app.c, so that
# nothing of the source tree (its include/, its .libs/) is in reach.
#
# Without PREFIX: 'make install DESTDIR=<tmp>/stage' from the build tree
# (top_builddir, default: this script's ../..), then pkg-config finds
# librmsg.pc in the stage (PKG_CONFIG_PATH) and puts the stage in front
# of its -I and -L (PKG_CONFIG_SYSROOT_DIR).
#
# With PREFIX (/usr once the Debian packages are installed): the library
# installed there, found by the system's pkg-config on its own search
# path (or PKG_CONFIG_PATH if the caller sets it), run with no
# LD_LIBRARY_PATH: PREFIX's library directory must be on the loader's
# path, as /usr's is. pkg-config must find the librmsg.pc of PREFIX.
#
# Exit: 0 both builds built and ran; 1 otherwise, naming the step and
# showing its output. A missing tool (cc, pkg-config, cmake, make) is a
# failure naming its Debian package (scripts/setup.sh test installs
# them). CONSUMER_KEEP=1 keeps the temporary directory.

LC_ALL=C
export LC_ALL
here=$(cd "$(dirname "$0")" && pwd) || exit 1
prefix=${1:-}
CC=${CC:-cc}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rmsg-consumer.XXXXXX") || exit 1
if [ "${CONSUMER_KEEP:-}" = 1 ]; then
	trap 'echo "consumer: kept $tmp"' 0
else
	trap 'rm -rf "$tmp"' 0
fi
trap 'exit 1' HUP INT TERM

die() {
	echo "consumer: FAIL: $*"
	exit 1
}

# step NAME CMD...: runs CMD with its output in $tmp/NAME.log; on failure
# shows that output and fails
step() {
	name=$1
	shift
	if ! "$@" > "$tmp/$name.log" 2>&1; then
		echo "consumer: FAIL: $name: $*"
		sed 's/^/  /' "$tmp/$name.log" | tail -n 40
		exit 1
	fi
}

for t in "$CC:gcc" pkg-config:pkgconf cmake:cmake make:make; do
	command -v "${t%%:*}" > /dev/null 2>&1 ||
		die "${t%%:*} not found (Debian package ${t#*:})"
done

# whatever the caller's environment holds must not help the builds
unset CPATH C_INCLUDE_PATH LIBRARY_PATH LD_LIBRARY_PATH PKG_CONFIG_LIBDIR \
	PKG_CONFIG_SYSROOT_DIR

if [ -z "$prefix" ]; then
	bd=${top_builddir:-$here/../..}
	bd=$(cd "$bd" && pwd) || exit 1
	[ -f "$bd/Makefile" ] || die "$bd is not a configured build tree"
	stage=$tmp/stage
	step install make -C "$bd" -s install DESTDIR="$stage"
	pcs=$(find "$stage" -name librmsg.pc)
	if [ -z "$pcs" ] || [ "$(echo "$pcs" | wc -l)" -ne 1 ]; then
		die "make install staged ${pcs:-no} librmsg.pc"
	fi
	pcdir=$(dirname "$pcs")
	PKG_CONFIG_PATH=$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
	PKG_CONFIG_SYSROOT_DIR=$stage
	export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
	# a staged install is not on the loader's path: the programs find
	# the staged librmsg.so through LD_LIBRARY_PATH (an install into
	# the real prefix would not need it)
	so=$(find "$stage" -name librmsg.so)
	if [ -z "$so" ] || [ "$(echo "$so" | wc -l)" -ne 1 ]; then
		die "make install staged ${so:-no} librmsg.so"
	fi
	LD_LIBRARY_PATH=$(dirname "$so")
	export LD_LIBRARY_PATH
	where=$stage
	echo "consumer: staged 'make install' of $bd in $stage"
else
	where=$prefix
	echo "consumer: librmsg installed in $prefix"
fi

realwhere=$(readlink -f "$where") || die "$where does not exist"
step pkg-config pkg-config --exists --print-errors librmsg
pcfile=$(pkg-config --variable=pcfiledir librmsg)
case $(readlink -f "$pcfile") in
"$realwhere"/*) ;;
*) die "pkg-config found librmsg.pc in $pcfile, not under $where" ;;
esac
flags=$(pkg-config --cflags --libs librmsg)
echo "consumer: pkg-config --cflags --libs librmsg: $flags"

mkdir "$tmp/src" "$tmp/cc" "$tmp/cmake"
cp "$here/app.c" "$here/CMakeLists.txt" "$tmp/src/" || exit 1

# check NAME PROGRAM: PROGRAM loads the librmsg of $where, runs and passes
check() {
	lib=$(ldd "$2" | awk '$1 ~ /^librmsg\.so/ {
		print $3 == "not" ? "nowhere: not found by the loader" : $3 }')
	# (compared without symbolic links: with Debian's merged /usr the
	# loader names /lib/..., which is /usr/lib/...)
	case $(readlink -f "$lib" 2> /dev/null) in
	"$realwhere"/*) ;;
	*) die "$1: $2 loads librmsg from '${lib:-nowhere}', not from $where" ;;
	esac
	step "$1-run" timeout 120 "$2"
	grep -q '^app: ok$' "$tmp/$1-run.log" ||
		die "$1: the program exited 0 without 'app: ok'"
	sed "s/^/  $1: /" "$tmp/$1-run.log"
	echo "consumer: $1: built and ran (librmsg from $lib)"
}

# a. plain cc: the flags pkg-config gives are all it has
warn="-Wall -Wextra -Wno-unused-parameter -Werror"
# shellcheck disable=SC2086 # $warn, $flags: several words
step cc-build "$CC" $warn -o "$tmp/cc/app" "$tmp/src/app.c" $flags
check cc "$tmp/cc/app"

# b. CMake's FindPkgConfig, imported target
step cmake-configure cmake -S "$tmp/src" -B "$tmp/cmake" \
	-DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$warn"
step cmake-build cmake --build "$tmp/cmake"
check cmake "$tmp/cmake/app"

echo "consumer: PASS (plain cc and CMake, against $where)"
