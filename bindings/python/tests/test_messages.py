# SPDX-License-Identifier: MIT
import asyncio
import errno

import pytest

import rmsg
from conftest import TRANSPORT, Pair, async_test, echo_server


@async_test
async def test_echo():
    async with Pair() as p:
        p.serve(echo_server)
        conn = await p.connect()
        assert conn.transport == TRANSPORT
        assert conn.fallback_reason is None
        await conn.send(b"hello")
        assert await conn.recv() == b"hello"
        # every kind of buffer, and gathering
        await conn.send(bytearray(b"bytearray"))
        await conn.send(memoryview(b"xxmemoryviewxx")[2:-2])
        await conn.send([b"gath", bytearray(b"ered"), memoryview(b"!")])
        await conn.send(b"")
        assert await conn.recv() == b"bytearray"
        assert await conn.recv() == b"memoryview"
        assert await conn.recv() == b"gathered!"
        assert await conn.recv() == b""
        await conn.close()


@async_test
async def test_resume_state():
    # resume_ms on both ends: resumable over any transport
    # (rmsg_cfg_set_resume_ms(3))
    want = rmsg.RESUME_ON
    async with Pair(server_opts={"resume_ms": 5000}) as p:
        srv = []

        async def serve(conn):
            srv.append(conn)
            await echo_server(conn)
        p.serve(serve)
        conn = await p.connect(resume_ms=5000)
        assert conn.resume_state == want
        await conn.send(b"resumable")
        assert await conn.recv() == b"resumable"
        assert srv and srv[0].resume_state == want
        # one side without a window: not resumable
        plain = await p.connect()
        assert plain.resume_state == rmsg.RESUME_NONE
        await plain.close()
        await conn.close()
        assert conn.resume_state == rmsg.RESUME_NONE


@async_test
async def test_order_and_pipelining_past_the_send_queue():
    # send_queue=2: most sends meet EAGAIN and wait for on_writable
    async with Pair() as p:
        p.serve(echo_server)
        conn = await p.connect(send_queue=2, credits=4)
        n = 600
        futs = [conn.send(b"%d" % i) for i in range(n)]
        await asyncio.gather(*futs)
        got = [await conn.recv() for _ in range(n)]
        assert got == [b"%d" % i for i in range(n)]


@async_test
async def test_large_messages():
    sizes = [1, 63, 8191, 8192, 8193, 65536, 1 << 20, 5 * (1 << 20) + 3]
    async with Pair() as p:
        p.serve(echo_server)
        conn = await p.connect()
        for n in sizes:
            data = bytes((i * 7 + n) & 0xFF for i in range(min(n, 4096)))
            data = (data * (n // len(data) + 1))[:n]
            await conn.send(data)
            back = await conn.recv()
            assert len(back) == n and back == data, n


@async_test
async def test_max_msg_size():
    async with Pair() as p:
        p.serve(echo_server)
        conn = await p.connect(max_msg_size=1000)
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.send(b"x" * 1001)
        assert ei.value.errno == errno.EMSGSIZE
        await conn.send(b"x" * 1000)
        assert len(await conn.recv()) == 1000


@async_test
async def test_registered_buffer():
    async with Pair() as p:
        p.serve(echo_server)
        conn = await p.connect()
        buf = p.cctx.buf_alloc(100000)
        assert len(buf) == 100000
        buf[0:5] = b"hello"
        buf[99999] = 42
        await conn.send(buf)
        got = await conn.recv()
        assert got[:5] == b"hello" and got[99999] == 42
        await conn.send(buf[0:5])         # a slice: still registered memory
        assert await conn.recv() == b"hello"
        fut = conn.send(buf)
        buf.free()                        # deferred until the send is done
        await fut
        assert len(await conn.recv()) == 100000
        with pytest.raises(ValueError):
            conn.send(buf)
        with p.cctx.buf_alloc(10) as b2:
            b2[:] = b"0123456789"
            assert bytes(b2) == b"0123456789"


@async_test
async def test_private_data_and_reject():
    def accept(pdata):
        if pdata == b"let me in":
            return b"welcome"
        if pdata == b"errno":
            raise rmsg.RmsgError(errno.EPERM)
        return False
    async with Pair() as p:
        p.listener.close()
        p.listener = p.sctx.listen(p.listener.uri_requested, accept=accept)
        p.serve(echo_server)
        conn = await p.connect(private_data=b"let me in")
        assert conn.peer_data == b"welcome"
        await conn.send(b"ok")
        assert await conn.recv() == b"ok"
        with pytest.raises(rmsg.RmsgError) as ei:
            await p.connect(private_data=b"no")
        assert ei.value.errno == errno.ECONNREFUSED
        with pytest.raises(rmsg.RmsgError) as ei:
            await p.connect(private_data=b"errno")
        # whatever the listener's reason, the client reads a rejection
        # (rmsg_connect.3: -ECONNREFUSED)
        assert ei.value.errno == errno.ECONNREFUSED


@async_test
async def test_bad_arguments():
    async with rmsg.Context() as ctx:
        with pytest.raises(rmsg.RmsgError) as ei:
            await ctx.connect("nope://1.2.3.4:5")
        assert ei.value.errno == errno.EPROTONOSUPPORT
        assert "URI" in ei.value.strerror
        with pytest.raises(rmsg.RmsgError) as ei:
            rmsg.Context(credits=1)
        assert ei.value.errno == errno.EINVAL
        with pytest.raises(TypeError):
            rmsg.Context(no_such_option=1)
