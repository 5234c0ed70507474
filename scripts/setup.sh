#!/bin/sh
# setup.sh [build|test] - installs the Debian packages librmsg needs (only
# the missing ones), then configures and builds the tree (only what is out
# of date). Sourced knowledge for demo.sh and test.sh; safe to run twice.
set -e
cd "$(dirname "$0")/.."

BUILD_PKGS="autoconf automake libtool pkgconf make gcc libc6-dev
 libibverbs-dev librdmacm-dev libev-dev libcmocka-dev ibverbs-providers
 nettle-dev libuv1-dev libglib2.0-dev"
TEST_PKGS="mandoc groff-base qemu-system-x86 busybox-static kmod cpio
 rdma-core ibverbs-utils rdmacm-utils perftest iproute2 clang-format
 python3 python3-pytest python3-prometheus-client clang valgrind
 libclang-rt-14-dev llvm cmake
 python3-venv python3-pip python3-setuptools python3-wheel mypy
 abigail-tools
 dpkg-dev debhelper dh-python lintian man-db
 libzmq3-dev libnng-dev gnuplot-nox
 ucx-utils libfabric-bin"

pkgs=$BUILD_PKGS
[ "${1:-build}" = test ] && pkgs="$BUILD_PKGS $TEST_PKGS"

missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
		grep -q '^install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "setup: installing:$missing"
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -q >/dev/null
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q \
		--no-install-recommends $missing >/dev/null
else
	echo "setup: all Debian packages present"
fi

if [ ! -x configure ] || [ configure.ac -nt configure ] ||
   [ Makefile.am -nt Makefile.in ]; then
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
if [ ! -f Makefile ] || [ configure -nt config.status ]; then
	./configure -q --enable-werror --enable-loop-examples
fi
make -s -j"$(nproc)"
