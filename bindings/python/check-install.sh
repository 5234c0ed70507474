#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-install.sh - the binding installs as a package and works
# installed: makes a venv (python3 -m venv --system-site-packages, so
# that Debian's pytest and mypy are there), pip-installs bindings/python
# offline (--no-index; the package builds with its own backend,
# _rmsg_build.py, and needs neither setuptools nor wheel), then runs
# the binding's tests with the installed package, from a copy of the
# tests that has no rmsg package next to it (RMSG_PY_TEST_INSTALLED=1),
# type-checks a small program against the installed package with mypy
# --strict (which reads its annotations only through py.typed), and the
# package itself with mypy --strict.
#
#   RMSG_LIB=$PWD/.libs/librmsg.so bindings/python/check-install.sh
#   bindings/python/check-install.sh       # the installed librmsg.so.0
#
# The library: $RMSG_LIB if set (test.sh: the build tree's), else the
# one the package finds itself: the installed librmsg.so.0 (a package,
# or 'make install' and ldconfig). Installs nothing outside a temporary
# directory; needs python3-venv, python3-pip, python3-pytest and mypy
# (scripts/setup.sh test).
# Arguments go to pytest. Exit 0 pass, 1 fail.
set -e
PY=${PYTHON:-/usr/bin/python3}
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rmsg-py.XXXXXX")
trap 'rm -rf "$tmp"' 0
trap 'exit 1' HUP INT TERM

# a copy: pip builds in the source directory (build/, *.egg-info)
mkdir "$tmp/src"
cp -R "$src/pyproject.toml" "$src/_rmsg_build.py" "$src/README.md" \
	"$src/rmsg" "$src/tests" \
	"$src/examples" "$tmp/src/"
find "$tmp/src" -name __pycache__ -prune -exec rm -rf {} +

"$PY" -m venv --system-site-packages "$tmp/venv"
vpy=$tmp/venv/bin/python
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$vpy" -m pip install -q \
	--no-index --no-deps --ignore-installed "$tmp/src"
# from here on only the installed package can be imported
rm -rf "$tmp/src/rmsg"
cd "$tmp/src"
"$vpy" - <<'EOF'
import os, sys
import rmsg
pkg = os.path.realpath(rmsg.__file__)
print("check-install: rmsg %s from %s, librmsg %s" %
      (rmsg.__version__, os.path.dirname(pkg), rmsg.LIBRMSG_PATH))
if not pkg.startswith(os.path.realpath(sys.prefix) + os.sep):
    sys.exit("FAIL: rmsg imported from outside the venv: " + pkg)
EOF

# the annotations reach a user's type checker (py.typed), and they
# reject a misuse
mkdir "$tmp/typed"
cat > "$tmp/typed/ok.py" <<'EOF'
import asyncio
from typing import Optional, Tuple

import rmsg


async def main(uri: str) -> Tuple[bytes, int]:
    async with rmsg.Context(credits=16) as ctx:
        @ctx.handle(1)
        def echo(conn: rmsg.Connection, request: bytes) -> bytes:
            return request

        async with await ctx.listen(uri, recv_queue=64) as listener:
            conn: rmsg.Connection = await ctx.connect(listener.uri)
            reply: bytes = await conn.call(1, b"ping", timeout=1.0)
            await conn.send([b"a", bytearray(b"b")])
            reason: Optional[int] = conn.close_reason
            bound: Optional[int] = conn.recv_queue
            assert bound == rmsg.RECV_QUEUE_DEFAULT
            return reply, await conn.close()


version: str = rmsg.__version__
major: int = rmsg.version_info[0]
print(asyncio.run(main("tcp://127.0.0.1:0")), version, major)
EOF
cat > "$tmp/typed/bad.py" <<'EOF'
import rmsg


async def main(conn: rmsg.Connection) -> str:
    return await conn.call(1, b"x")  # bytes, not str
EOF
mypy=$(command -v mypy) || {
	echo "FAIL: no mypy (apt-get install mypy)"
	exit 1
}
MYPY_CACHE_DIR=$tmp/mypy-cache "$vpy" "$mypy" --strict --no-error-summary \
	"$tmp/typed/ok.py" || {
	echo "FAIL: mypy --strict rejects a correct program"
	exit 1
}
if MYPY_CACHE_DIR=$tmp/mypy-cache "$vpy" "$mypy" --strict \
	--no-error-summary "$tmp/typed/bad.py" > "$tmp/bad.out" 2>&1; then
	echo "FAIL: mypy accepts a misuse: the package's types are not seen"
	exit 1
fi
grep -q 'Incompatible return value type (got "bytes", expected "str")' \
	"$tmp/bad.out" || {
	echo "FAIL: mypy rejects the misuse for another reason:"
	cat "$tmp/bad.out"
	exit 1
}
"$vpy" "$tmp/typed/ok.py" > /dev/null
# and the annotations agree with the package's own code
MYPY_CACHE_DIR=$tmp/mypy-cache "$vpy" "$mypy" --strict --no-error-summary \
	-p rmsg || {
	echo "FAIL: mypy finds the installed package inconsistent"
	exit 1
}

# registering memory over RDMA needs locked memory
ulimit -l unlimited 2> /dev/null || true
# the tree's header, for tests/test_header.py (the installed package's
# declarations against it)
if [ -z "${RMSG_HEADER:-}" ] && [ -f "$src/../../include/rmsg.h" ]; then
	RMSG_HEADER=$(cd "$src/../../include" && pwd)/rmsg.h
	export RMSG_HEADER
fi
RMSG_PY_TEST_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1 "$vpy" -m pytest -q \
	-p no:cacheprovider "$@" tests
echo "check-install: PASS"
