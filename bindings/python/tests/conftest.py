# SPDX-License-Identifier: MIT
"""Shared helpers. The transport comes from RMSG_TEST_TRANSPORT (tcp or
rdma, default tcp) and RMSG_TEST_ADDR (default 127.0.0.1), as for the C
integration tests; tests/vm/run-in-vm.sh sets RMSG_TEST_ADDR=198.18.0.1.

The package under test is the one next to these tests (run-tests.sh),
or with RMSG_PY_TEST_INSTALLED=1 the installed one (check-install.sh)."""
import asyncio
import functools
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
INSTALLED = os.environ.get("RMSG_PY_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, os.path.dirname(HERE))

import rmsg  # noqa: E402

TRANSPORT = os.environ.get("RMSG_TEST_TRANSPORT", "tcp")
ADDR = os.environ.get("RMSG_TEST_ADDR", "127.0.0.1")
# stretches every bound on time, as t_scale() does for the C tests
# (RMSG_TEST_SCALE; sanitizer and valgrind runs raise it)
try:
    SCALE = float(os.environ.get("RMSG_TEST_SCALE", "1"))
except ValueError:
    SCALE = 1.0
if SCALE <= 0:
    SCALE = 1.0
# the Soft-RoCE VM emulates its CPU: allow for it
TIMEOUT = SCALE * float(os.environ.get(
    "RMSG_PY_TEST_TIMEOUT", "120" if os.environ.get("RMSG_VM") else "30"))


def scaled(secs):
    """A bound of secs seconds on this machine: times RMSG_TEST_SCALE,
    and 4 times more in the emulated VM (as TIMEOUT is)."""
    return secs * SCALE * (4 if os.environ.get("RMSG_VM") else 1)


async def wait_until(cond, secs, what="the condition"):
    """Waits until cond() holds; fails after scaled(secs) seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + scaled(secs)
    while not cond():
        if loop.time() > end:
            pytest.fail("%s: not after %.1f s" % (what, scaled(secs)))
        await asyncio.sleep(0.01)


def listen_uri(port=0):
    host = "[%s]" % ADDR if ":" in ADDR else ADDR
    return "%s://%s:%d" % (TRANSPORT, host, port)


def async_test(fn):
    """Runs an async test on a fresh asyncio loop, bounded in time."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        async def bounded():
            return await asyncio.wait_for(fn(*args, **kwargs), TIMEOUT)
        return asyncio.run(bounded())
    return wrapper


class Pair:
    """A server context with a listener and a client context with one
    connection to it; serve() runs a per-connection coroutine."""

    def __init__(self, server_opts=None, client_opts=None):
        self.server_opts = server_opts or {}
        self.client_opts = client_opts or {}
        self.tasks = []

    async def __aenter__(self):
        self.sctx = rmsg.Context(**self.server_opts)
        self.cctx = rmsg.Context(**self.client_opts)
        self.listener = self.sctx.listen(listen_uri())
        return self

    def serve(self, per_conn):
        async def loop():
            async for conn in self.listener:
                self.tasks.append(asyncio.ensure_future(per_conn(conn)))
        self.tasks.append(asyncio.ensure_future(loop()))

    async def connect(self, **opts):
        return await self.cctx.connect(self.listener.uri, **opts)

    async def __aexit__(self, *exc):
        await self.cctx.close()
        await self.sctx.close()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def echo_server(conn):
    async for msg in conn:
        await conn.send(msg)


@pytest.fixture
def transport():
    return TRANSPORT
