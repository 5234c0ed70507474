# SPDX-License-Identifier: MIT
import asyncio
import errno

import pytest

import rmsg
from conftest import (Pair, async_test, echo_server, listen_uri, scaled,
                      wait_until)


@async_test
async def test_local_close():
    closed = []

    async def per_conn(conn):
        async for msg in conn:
            await conn.send(msg)
        closed.append(conn.close_reason)
    async with Pair() as p:
        p.serve(per_conn)
        conn = await p.connect()
        await conn.send(b"x")
        assert await conn.recv() == b"x"
        assert await conn.close() == 0
        assert conn.closed and conn.close_reason == 0
        assert conn.close_reason_text == \
            "closed by this side (rmsg_conn_close)"
        assert await conn.close() == 0          # harmless again
        with pytest.raises(rmsg.ConnectionClosed) as ei:
            await conn.recv()
        assert ei.value.errno == errno.ECANCELED
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.send(b"y")
        assert ei.value.errno == errno.ENOTCONN
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.call(1, b"y")
        assert ei.value.errno == errno.ENOTCONN
        await wait_until(lambda: closed, 10, "the server's close")
        # the peer's view of a close on purpose (rmsg_conn_close.3)
        assert closed[0] == -errno.ESHUTDOWN


@async_test
async def test_close_fails_pending_calls():
    async with Pair() as p:
        @p.sctx.handle(1)
        async def slow(conn, req):
            await asyncio.sleep(5)
        conn = await p.connect()
        calls = [conn.call(1, b"") for _ in range(3)]
        await asyncio.sleep(0.1)
        await conn.close()
        for c in calls:
            with pytest.raises(rmsg.RmsgError) as ei:
                await c
            assert ei.value.errno == errno.ECANCELED


@async_test
async def test_messages_queued_before_close_are_delivered():
    async with Pair() as p:
        async def per_conn(conn):
            for i in range(50):
                conn.send(b"%d" % i)
            await conn.send(b"last")
            await conn.close()
        p.serve(per_conn)
        conn = await p.connect()
        got = [m async for m in conn]
        assert got == [b"%d" % i for i in range(50)] + [b"last"]
        # the server closed on purpose (rmsg_conn_close.3)
        assert conn.close_reason == -errno.ESHUTDOWN


@async_test
async def test_context_close_with_live_connections():
    sctx = rmsg.Context()
    cctx = rmsg.Context()
    listener = sctx.listen(listen_uri())

    @sctx.handle(1)
    async def slow(conn, req):
        await asyncio.sleep(10)
    conn = await cctx.connect(listener.uri)
    call = conn.call(1, b"")
    await asyncio.sleep(0.1)
    await cctx.close()
    assert conn.closed and conn.close_reason == -errno.ECANCELED
    with pytest.raises(rmsg.RmsgError) as ei:
        await call
    assert ei.value.errno == errno.ECANCELED
    with pytest.raises(rmsg.RmsgError):
        conn.send(b"x")                     # the context is gone
    await cctx.close()                      # harmless again
    # the server closes with an unanswered request in its handler
    sconn = await listener.accept()
    await sctx.close()
    assert sconn.closed
    # aborted by its own context, or reset by the client's before that:
    # no close on purpose reached it (rmsg_ctx_destroy.3)
    assert sconn.close_reason in (-errno.ECANCELED, -errno.ECONNRESET)
    # Listener.accept(): ESHUTDOWN once the listener is closed
    with pytest.raises(rmsg.RmsgError) as ei:
        await listener.accept()
    assert ei.value.errno == errno.ESHUTDOWN


@async_test
async def test_connect_refused_and_listener_close():
    async with Pair() as p:
        p.serve(echo_server)
        uri = p.listener.uri
        p.listener.close()
        with pytest.raises(rmsg.RmsgError) as ei:
            await p.cctx.connect(uri, timeout_ms=3000)
        # nothing listens at the address (rmsg_connect.3, on_close)
        assert ei.value.errno == errno.ECONNREFUSED
        with pytest.raises(rmsg.RmsgError) as ei:
            await p.listener.accept()
        assert ei.value.errno == errno.ESHUTDOWN


@async_test
async def test_peer_death_keepalive_not_needed_for_close():
    # closing the server context ends the client's connection
    async with Pair() as p:
        served = []

        async def serve(c):
            served.append(c)
            await echo_server(c)
        p.serve(serve)
        conn = await p.connect()
        # the server's end established too (its listener delivered it):
        # a context destroyed before that is a refusal over RDMA, not the
        # death of an established peer (seen in the VM: the client's
        # on_close -ECONNREFUSED after its on_established)
        await wait_until(lambda: served, 10, "the server's connection")
        await p.sctx.close()
        reason = await asyncio.wait_for(conn.wait_closed(), scaled(20))
        # the server's context aborted its end without a close on
        # purpose: a reset (rmsg_conn_close.3), not -ESHUTDOWN
        assert reason == -errno.ECONNRESET
        assert [m async for m in conn] == []
