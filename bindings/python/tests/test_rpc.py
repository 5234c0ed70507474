# SPDX-License-Identifier: MIT
import asyncio
import errno

import pytest

import rmsg
from conftest import Pair, async_test

ECHO, REV, SLOW, FAIL, BOOM, LIST, NONE, SLOWCOUNT = range(1, 9)


def install(ctx, state):
    ctx.handle(ECHO, lambda conn, req: req)

    @ctx.handle(REV)
    async def rev(conn, req):
        return req[::-1]

    @ctx.handle(SLOW)
    async def slow(conn, req):
        state["slow_started"] += 1
        await asyncio.sleep(float(req or b"1"))
        state["slow_done"] += 1
        return b"late"

    @ctx.handle(FAIL)
    def fail(conn, req):
        raise rmsg.RmsgError(errno.EPERM)

    @ctx.handle(BOOM)
    def boom(conn, req):
        raise KeyError("a bug in the handler")

    ctx.handle(LIST, lambda conn, req: [b"a", bytearray(b"b"), req])
    ctx.handle(NONE, lambda conn, req: None)


def new_state():
    return {"slow_started": 0, "slow_done": 0}


@async_test
async def test_rpc_basic():
    async with Pair() as p:
        install(p.sctx, new_state())
        conn = await p.connect()
        assert await conn.call(ECHO, b"ping") == b"ping"
        assert await conn.call(REV, b"abc", timeout=5) == b"cba"
        assert await conn.call(LIST, b"c") == b"abc"
        assert await conn.call(NONE, b"x") == b""
        assert await conn.call(ECHO) == b""
        assert await conn.call(ECHO, [b"x", b"y"]) == b"xy"
        big = bytes(range(256)) * 8192   # 2 MiB: rendezvous on RDMA
        assert await conn.call(ECHO, big) == big


@async_test
async def test_rpc_pipelined():
    async with Pair() as p:
        install(p.sctx, new_state())
        conn = await p.connect()
        calls = [conn.call(REV if i % 2 else ECHO, b"%05d" % i)
                 for i in range(500)]
        replies = await asyncio.gather(*calls)
        for i, r in enumerate(replies):
            assert r == (b"%05d" % i)[::-1 if i % 2 else 1]


@async_test
async def test_rpc_errors():
    async with Pair() as p:
        install(p.sctx, new_state())
        conn = await p.connect()
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.call(FAIL, b"")
        assert ei.value.errno == errno.EPERM
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.call(999, b"")
        assert ei.value.errno == errno.ENOSYS
        assert ei.value.strerror
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.call(BOOM, b"")
        assert ei.value.errno == errno.EIO
        # the connection is still fine
        assert await conn.call(ECHO, b"still") == b"still"
        # handlers may be removed
        p.sctx.unhandle(ECHO)
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.call(ECHO, b"")
        assert ei.value.errno == errno.ENOSYS


@async_test
async def test_rpc_deadline():
    state = new_state()
    async with Pair() as p:
        install(p.sctx, state)
        conn = await p.connect()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(rmsg.RmsgTimeoutError) as ei:
            await conn.call(SLOW, b"1.5", timeout=0.2)
        took = loop.time() - t0
        assert ei.value.errno == errno.ETIMEDOUT
        assert isinstance(ei.value, asyncio.TimeoutError)
        assert isinstance(ei.value, rmsg.RmsgError)
        assert 0.15 < took < 1.4, took
        # the late reply is dropped; the connection goes on
        assert await conn.call(ECHO, b"after") == b"after"
        await asyncio.sleep(1.5)
        assert state["slow_done"] == 1
        assert await conn.call(ECHO, b"later") == b"later"


@async_test
async def test_rpc_cancel():
    state = new_state()
    async with Pair() as p:
        install(p.sctx, state)
        conn = await p.connect()
        task = asyncio.ensure_future(conn.call(SLOW, b"1"))
        while state["slow_started"] == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # asyncio.wait_for cancels the call on its deadline
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(conn.call(SLOW, b"1"), 0.1)
        assert await conn.call(ECHO, b"ok") == b"ok"
        await asyncio.sleep(1.2)      # the handlers finish; replies dropped
        assert state["slow_done"] == 2
        assert await conn.call(ECHO, b"ok2") == b"ok2"


@async_test
async def test_rpc_both_directions():
    async with Pair() as p:
        install(p.sctx, new_state())
        p.cctx.handle(ECHO, lambda conn, req: b"client:" + req)
        seen = []

        async def per_conn(conn):
            seen.append(await conn.call(ECHO, b"hi"))
        p.serve(per_conn)
        conn = await p.connect()
        assert await conn.call(ECHO, b"x") == b"x"
        while not seen:
            await asyncio.sleep(0.01)
        assert seen == [b"client:hi"]
