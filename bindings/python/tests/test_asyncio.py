# SPDX-License-Identifier: MIT
"""The binding on asyncio's own loop (rmsg_ctx_create_fd(3)): no thread
of its own, callbacks on the loop's thread; listeners as async context
managers, serve_forever(); the bounded receive queue and the
backpressure it applies through the library's held messages
(rmsg_msg_hold(3), rmsg_conn_stats(3))."""
import asyncio
import errno
import threading

import pytest

import rmsg
from conftest import (Pair, async_test, echo_server, listen_uri, scaled,
                      wait_until)


@async_test
async def test_no_thread_and_callbacks_on_the_loop_thread():
    before = set(threading.enumerate())
    me = threading.get_ident()
    seen = []

    def accept(pdata):
        seen.append(("accept", threading.get_ident()))

    def handler(conn, req):
        seen.append(("handler", threading.get_ident()))
        return req
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        listener = sctx.listen(listen_uri(), accept=accept)
        sctx.handle(1, handler)
        conn = await cctx.connect(listener.uri)
        assert await conn.call(1, b"x") == b"x"
        mem = bytearray(64)
        mr = sctx.mr_reg(mem)
        srv = await listener.accept()
        imms = []
        srv.on_imm = lambda imm, n: imms.append((imm, threading.get_ident()))
        await srv.send(mr.export(srv))
        desc = await conn.recv()
        await conn.write_imm(b"abc", desc, 0, imm=5)
        await wait_until(lambda: imms, 10, "on_imm")
        assert imms == [(5, me)]
        # no helper thread: the loop's own thread runs everything
        assert set(threading.enumerate()) == before
        assert isinstance(sctx.fd, int) and sctx.fd >= 0
    assert seen == [("accept", me), ("handler", me)]


@async_test
async def test_listener_async_with():
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        async with await sctx.listen(listen_uri()) as listener:
            assert isinstance(listener, rmsg.Listener)
            uri = listener.uri
            conn = await cctx.connect(uri)
            srv = await listener.accept()
            await conn.send(b"in the block")
            assert await srv.recv() == b"in the block"
        assert listener.closed
        # the accepted connection outlives its listener
        await srv.send(b"still open")
        assert await conn.recv() == b"still open"
        with pytest.raises(rmsg.RmsgError) as ei:
            await listener.accept()
        assert ei.value.errno == errno.ESHUTDOWN
        # nothing listens there any more
        with pytest.raises(rmsg.RmsgError) as ei:
            await cctx.connect(uri, timeout_ms=3000)
        assert ei.value.errno == errno.ECONNREFUSED
        # without the await too
        async with sctx.listen(listen_uri()) as l2:
            assert not l2.closed
        assert l2.closed


async def _ended(task):
    """Waits for a cancelled task to end by itself, cancelled (asyncio.wait
    does not cancel it again when the test's own bound hits, as an await
    of it would, which could end it in its stead)."""
    done, _ = await asyncio.wait([task], timeout=scaled(10))
    assert task in done, "the cancelled task does not end"
    assert task.cancelled()


@async_test
async def test_listener_serve_forever():
    started, ended = [], []

    async def per_conn(conn):
        started.append(conn)
        try:
            await echo_server(conn)
            await asyncio.sleep(3600)  # only cancellation ends it
        finally:
            ended.append(conn)
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        listener = sctx.listen(listen_uri())
        task = asyncio.ensure_future(listener.serve_forever(per_conn))
        a = await cctx.connect(listener.uri)
        b = await cctx.connect(listener.uri)
        for conn, word in ((a, b"a"), (b, b"b")):
            await conn.send(word)
            assert await conn.recv() == word
        await a.close()
        await wait_until(lambda: len(started) == 2, 10, "both connections")
        assert not task.done()
        task.cancel()
        await _ended(task)
        # cancelling closed the listener and ended the per-connection
        # tasks it started, the live one and the idle one
        assert listener.closed
        assert sorted(map(id, ended)) == sorted(map(id, started))
        with pytest.raises(rmsg.RmsgError) as ei:
            await cctx.connect(listener.uri, timeout_ms=3000)
        assert ei.value.errno == errno.ECONNREFUSED
        # a listener closed under it: serve_forever() returns
        l2 = sctx.listen(listen_uri())
        t2 = asyncio.ensure_future(l2.serve_forever())
        await asyncio.sleep(0)
        l2.close()
        assert await asyncio.wait_for(t2, scaled(10)) is None


@async_test
async def test_context_serve_forever():
    sctx = rmsg.Context()
    sctx.handle(1, lambda conn, req: req.upper())
    listener = sctx.listen(listen_uri())
    task = asyncio.ensure_future(sctx.serve_forever())
    async with rmsg.Context() as cctx:
        conn = await cctx.connect(listener.uri)
        assert await conn.call(1, b"rpc") == b"RPC"
        task.cancel()
        await _ended(task)
        # cancelling closed the context: its connections are gone
        assert sctx.closed
        reason = await asyncio.wait_for(conn.wait_closed(), scaled(20))
        assert reason == -errno.ECONNRESET
        with pytest.raises(rmsg.RmsgError):
            sctx.listen(listen_uri())
    # closed by other means: it returns
    ctx = rmsg.Context()
    t2 = asyncio.ensure_future(ctx.serve_forever())
    await asyncio.sleep(0)
    await ctx.close()
    assert await asyncio.wait_for(t2, scaled(10)) is None


@async_test
async def test_recv_queue_settings():
    async with rmsg.Context(recv_queue=7) as sctx, rmsg.Context() as cctx:
        listener = sctx.listen(listen_uri())
        l3 = sctx.listen(listen_uri(), recv_queue=3)
        c1 = await cctx.connect(listener.uri)
        assert c1.recv_queue == rmsg.RECV_QUEUE_DEFAULT
        assert (await listener.accept()).recv_queue == 7
        c2 = await cctx.connect(l3.uri, recv_queue=None)
        assert c2.recv_queue is None
        assert (await l3.accept()).recv_queue == 3
        with pytest.raises(ValueError):
            await cctx.connect(listener.uri, recv_queue=-1)
    with pytest.raises(ValueError):
        rmsg.Context(recv_queue=-1)


async def _sender(p, n, sends, pad=b""):
    """Serves each connection with n sends at once, their futures in
    sends; each message is b"m<i>" + pad."""
    async def per_conn(conn):
        for i in range(n):
            f = conn.send(b"m%d" % i + pad)
            # those a close cancels: retrieved, not warned about
            f.add_done_callback(lambda f: f.cancelled() or f.exception())
            sends.append(f)
    p.serve(per_conn)


async def _stat(obj, name):
    return (await obj.stats())[name]


async def _until(cond, secs, what):
    """wait_until() for an async condition"""
    loop = asyncio.get_running_loop()
    end = loop.time() + scaled(secs)
    while not await cond():
        assert loop.time() < end, "%s: not after %.1f s" % (what,
                                                           scaled(secs))
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("bound", [0, 4])
@async_test
async def test_recv_queue_applies_backpressure(bound):
    """An unread connection receives at most recv_queue messages plus
    the credits it grants (held messages keep their credits: rmsg_msg_hold
    (3)); then the peer's sends wait for credits (its credit_stalls,
    rmsg_conn_stats(3)). Reading releases them, in order."""
    credits, n = 8, 200
    # more than half the default eager size (8 KiB): one message a frame
    # (smaller ones that queue up share a frame and its credit: packed,
    # rmsg_conn_stats(3))
    pad = bytes(5000)
    sends = []
    async with Pair() as p:
        await _sender(p, n, sends, pad)
        conn = await p.connect(recv_queue=bound, credits=credits)
        await wait_until(lambda: len(sends) == n, 10, "the sends")

        async def sender_stalled():
            return await _stat(p.sctx, "credit_stalls") > 0
        await _until(sender_stalled, 10, "the sender waiting for credits")
        await asyncio.sleep(scaled(0.3))  # anything still in flight lands
        got = await _stat(conn, "msgs_recv")
        assert got <= bound + credits, got
        assert not all(f.done() for f in sends)
        # each recv() makes room: a held message moves into the queue and
        # its credit goes back, so the sender goes on after one recv(),
        # long before the queue is empty
        assert await conn.recv() == b"m0" + pad

        async def more():
            return await _stat(conn, "msgs_recv") > got
        await _until(more, 10, "credits back after recv()")
        # reading drains it all, in order, and the sends complete
        for i in range(1, n):
            assert await conn.recv() == b"m%d" % i + pad
        await asyncio.wait_for(asyncio.gather(*sends), scaled(10))
        assert await _stat(conn, "msgs_recv") == n


@async_test
async def test_recv_queue_unbounded_takes_everything():
    """The contrast: recv_queue=None never holds, so the sender never
    waits for the reader (the old behaviour)."""
    credits, n = 8, 200
    sends = []
    async with Pair() as p:
        await _sender(p, n, sends)
        conn = await p.connect(recv_queue=None, credits=credits)
        await wait_until(lambda: len(sends) == n, 10, "the sends")
        await asyncio.wait_for(asyncio.gather(*sends), scaled(10))

        async def all_in():
            return await _stat(conn, "msgs_recv") == n
        await _until(all_in, 10, "every message")
        assert [await conn.recv() for _ in range(n)] == \
            [b"m%d" % i for i in range(n)]


@async_test
async def test_held_messages_outlive_the_peers_close():
    """Messages held past the bound stay readable after on_close."""
    async with Pair() as p:
        async def per_conn(conn):
            for i in range(50):
                conn.send(b"%d" % i)
            await conn.send(b"last")
            await conn.close()
        p.serve(per_conn)
        conn = await p.connect(recv_queue=2)
        got = [m async for m in conn]
        assert got == [b"%d" % i for i in range(50)] + [b"last"]
        assert conn.close_reason == -errno.ESHUTDOWN


@async_test
async def test_held_messages_survive_the_contexts_close():
    """rmsg_ctx_destroy() invalidates held messages: the binding copies
    them first, so what arrived stays readable."""
    sends = []
    async with Pair() as p:
        await _sender(p, 30, sends)
        conn = await p.connect(recv_queue=1, credits=8)

        async def some_held():
            return len(conn._held) >= 4
        await _until(some_held, 10, "held messages")
        n = await _stat(conn, "msgs_recv")
        await p.cctx.close()
        # copied before the library freed them (reading freed memory may
        # still give the right bytes: this is what makes it safe)
        assert not conn._held
        got = [m async for m in conn]
        assert got == [b"m%d" % i for i in range(n)]
        assert conn.close_reason == -errno.ECANCELED


@async_test
async def test_close_sync_from_a_handler():
    """close_sync() inside a library callback (a plain handler runs in
    one) cannot destroy the context there (rmsg_ctx_destroy(3): not from
    a callback); it does so when the callback returns."""
    sctx = rmsg.Context()
    listener = sctx.listen(listen_uri())

    def stop(conn, req):
        sctx.close_sync()
        return b"bye"
    sctx.handle(1, stop)
    async with rmsg.Context() as cctx:
        conn = await cctx.connect(listener.uri)
        try:
            await conn.call(1, b"")  # the reply may or may not get out
        except rmsg.RmsgError:
            pass
        assert sctx.closed
        # destroyed for real: its connection was aborted
        reason = await asyncio.wait_for(conn.wait_closed(), scaled(20))
        assert reason == -errno.ECONNRESET
        await asyncio.wait_for(sctx.close(), scaled(10))
