#!/bin/sh
# run-tests.sh [PYTEST ARGS...] - runs the Python binding's tests with
# Debian's python3-pytest; installs nothing. Exit 77 (automake's SKIP) if
# pytest is missing. Transport from RMSG_TEST_TRANSPORT (tcp, rdma, shm) and
# RMSG_TEST_ADDR, as for the C integration tests.
#
#   bindings/python/run-tests.sh                       # TCP on this host
#   RMSG_TEST_TRANSPORT=rdma tests/vm/run-in-vm.sh -q -- \
#       bindings/python/run-tests.sh                   # RDMA in the VM
#
# librmsg: $RMSG_LIB, else $top_builddir/.libs/librmsg.so (make check),
# else the .libs of the build tree this script is in; never an installed
# library: these tests are for the tree (check-install.sh tests an
# installed package). The package is the one next to the tests.
PY=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd) || exit 99
if [ -z "$RMSG_LIB" ]; then
	for d in ${top_builddir:+"$top_builddir"} "$here/../.."; do
		if [ -e "$d/.libs/librmsg.so" ]; then
			RMSG_LIB=$(cd "$d" && pwd)/.libs/librmsg.so
			break
		fi
	done
	if [ -z "$RMSG_LIB" ]; then
		echo "run-tests.sh: no librmsg.so in the build tree" \
			"(${top_builddir:-$here/../..}/.libs): build it (make)," \
			"or set RMSG_LIB or top_builddir" >&2
		exit 1
	fi
fi
export RMSG_LIB
unset RMSG_PY_TEST_INSTALLED
cd "$here" || exit 99
if ! "$PY" -c 'import pytest' 2>/dev/null; then
	echo "SKIP: $PY has no pytest (apt-get install python3-pytest)" >&2
	exit 77
fi
# registering memory over RDMA needs locked memory
ulimit -l unlimited 2>/dev/null || true
PYTHONDONTWRITEBYTECODE=1 exec "$PY" -m pytest -q -p no:cacheprovider \
	"$@" tests
