# SPDX-License-Identifier: MIT
import asyncio
import errno

import pytest

import rmsg
from conftest import Pair, async_test, wait_until

ECHO, REV, SLOW, FAIL, BOOM, LIST, NONE, SLOWCOUNT, GATED = range(1, 10)


def install(ctx, state):
    ctx.handle(ECHO, lambda conn, req: req)

    @ctx.handle(REV)
    async def rev(conn, req):
        return req[::-1]

    @ctx.handle(FAIL)
    def fail(conn, req):
        raise rmsg.RmsgError(errno.EPERM)

    @ctx.handle(BOOM)
    def boom(conn, req):
        raise KeyError("a bug in the handler")

    # answers only once the test opens the gate: no reply can beat a
    # deadline or a cancel, however slow the machine
    @ctx.handle(GATED)
    async def gated(conn, req):
        state["gated_started"] += 1
        await state["gate"].wait()
        state["gated_done"] += 1
        return b"late"

    ctx.handle(LIST, lambda conn, req: [b"a", bytearray(b"b"), req])
    ctx.handle(NONE, lambda conn, req: None)


def new_state():
    return {"gated_started": 0, "gated_done": 0, "gate": asyncio.Event()}


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
    deadline = 0.3
    state = new_state()
    async with Pair() as p:
        install(p.sctx, state)
        conn = await p.connect()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        # the handler does not answer before the gate opens: the call can
        # only end by its deadline (the test's own bound is TIMEOUT)
        with pytest.raises(rmsg.RmsgTimeoutError) as ei:
            await conn.call(GATED, b"", timeout=deadline)
        took = loop.time() - t0
        assert ei.value.errno == errno.ETIMEDOUT
        assert isinstance(ei.value, asyncio.TimeoutError)
        assert isinstance(ei.value, rmsg.RmsgError)
        # a promise: not before the deadline (rmsg_call.3). The library's
        # timer counts from its loop's time of the iteration that made the
        # call, which may lag the call by a little: 10% slack
        assert took >= deadline * 0.9, took
        assert state["gated_started"] == 1
        # the late reply is dropped; the connection goes on
        assert await conn.call(ECHO, b"after") == b"after"
        state["gate"].set()
        await wait_until(lambda: state["gated_done"] == 1, 10,
                         "the handler's late reply")
        assert await conn.call(ECHO, b"later") == b"later"


@async_test
async def test_rpc_cancel():
    state = new_state()
    async with Pair() as p:
        install(p.sctx, state)
        conn = await p.connect()
        task = asyncio.ensure_future(conn.call(GATED))
        await wait_until(lambda: state["gated_started"] == 1, 10,
                         "the handler")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # asyncio.wait_for cancels the call on its deadline (the handler
        # cannot answer before the gate opens)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(conn.call(GATED), 0.1)
        assert await conn.call(ECHO, b"ok") == b"ok"
        # the handlers finish; their replies find no call and are dropped
        await wait_until(lambda: state["gated_started"] == 2, 10,
                         "the second handler")
        state["gate"].set()
        await wait_until(lambda: state["gated_done"] == 2, 10,
                         "the handlers' late replies")
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
