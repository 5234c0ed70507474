#!/bin/sh
# run-tests.sh [PYTEST ARGS...] - runs the Python binding's tests with
# Debian's python3-pytest; installs nothing. Exit 77 (automake's SKIP) if
# pytest is missing. Transport from RMSG_TEST_TRANSPORT (tcp, rdma) and
# RMSG_TEST_ADDR, as for the C integration tests.
#
#   bindings/python/run-tests.sh                       # TCP on this host
#   RMSG_TEST_TRANSPORT=rdma tests/vm/run-in-vm.sh -q -- \
#       bindings/python/run-tests.sh                   # RDMA in the VM
#
# librmsg: $RMSG_LIB, else $top_builddir/.libs/librmsg.so (make check),
# else the build tree's .libs next to this directory, else the system's.
PY=${PYTHON:-/usr/bin/python3}
if [ -z "$RMSG_LIB" ] && [ -n "$top_builddir" ] &&
	[ -e "$top_builddir/.libs/librmsg.so" ]; then
	RMSG_LIB=$(cd "$top_builddir" && pwd)/.libs/librmsg.so
	export RMSG_LIB
fi
cd "$(dirname "$0")" || exit 99
if ! "$PY" -c 'import pytest' 2>/dev/null; then
	echo "SKIP: $PY has no pytest (apt-get install python3-pytest)" >&2
	exit 77
fi
# registering memory over RDMA needs locked memory
ulimit -l unlimited 2>/dev/null || true
PYTHONDONTWRITEBYTECODE=1 exec "$PY" -m pytest -q -p no:cacheprovider \
	"$@" tests
