# SPDX-License-Identifier: MIT
"""Errors as asyncio code expects them (issue 35): each librmsg error
with a builtin class raises a subclass of it and of RmsgError; a closed
connection is one class whatever the call; a bad option value is a
ValueError naming the option; close_reason reads as words; the accept
callback can see the peer's address."""
import asyncio
import errno
import socket

import pytest

import rmsg
from conftest import ADDR, TRANSPORT, async_test, listen_uri

KEY = b"0123456789abcdef-the-right-key"
OTHER = b"0123456789abcdef-another-key!!"


def _unused_port():
    """A port nothing listens on (bound, then released)."""
    fam = socket.AF_INET6 if ":" in ADDR else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.bind((ADDR, 0))
        return s.getsockname()[1]


@pytest.mark.skipif(TRANSPORT != "tcp", reason="a refused TCP connect")
@async_test
async def test_refused_is_connection_refused_error():
    async with rmsg.Context() as ctx:
        with pytest.raises(ConnectionRefusedError) as ei:
            await ctx.connect(listen_uri(_unused_port()))
        e = ei.value
        assert isinstance(e, rmsg.RmsgError)
        assert isinstance(e, rmsg.RmsgConnectionRefusedError)
        assert e.errno == errno.ECONNREFUSED
        assert str(e).startswith("[ECONNREFUSED] ")


@async_test
async def test_rejected_by_accept_is_connection_refused_error():
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        lst = sctx.listen(listen_uri(), accept=lambda pd: False)
        with pytest.raises(ConnectionRefusedError):
            await cctx.connect(lst.uri)
        lst.close()


@async_test
async def test_wrong_key_is_permission_error():
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        lst = sctx.listen(listen_uri(), psk=KEY)
        with pytest.raises(PermissionError) as ei:
            await cctx.connect(lst.uri, psk=OTHER)
        assert isinstance(ei.value, rmsg.RmsgError)
        assert ei.value.errno == errno.EACCES
        lst.close()


@pytest.mark.parametrize("name,value", [
    ("credits", 2), ("credits_initial", 1), ("eager_size", 1),
    ("timeout_ms", 0), ("credits", -1), ("credits", 1 << 40),
    ("reg_limit", 1 << 70), ("psk", b"short"),
])
@async_test
async def test_bad_option_is_value_error_naming_it(name, value):
    with pytest.raises(ValueError) as ei:
        rmsg.Context(**{name: value})
    e = ei.value
    assert isinstance(e, rmsg.RmsgError) and e.errno == errno.EINVAL
    assert str(e).startswith("[EINVAL] %s: " % name), str(e)
    assert "rmsg_cfg_set_%s(3)" % name in str(e)
    # also as a listen() or connect() option
    async with rmsg.Context() as ctx:
        with pytest.raises(ValueError) as ei:
            ctx.listen(listen_uri(), **{name: value})
        assert "%s: " % name in str(ei.value)


@async_test
async def test_option_types():
    with pytest.raises(TypeError) as ei:
        rmsg.Context(credits="many")
    assert "credits" in str(ei.value)
    with pytest.raises(TypeError):
        rmsg.Context(no_such_option=1)


@async_test
async def test_credits_initial():
    """credits_initial (rmsg_cfg_set_credits_initial(3)) is an option."""
    async with rmsg.Context(credits=64, credits_initial=8) as sctx, \
            rmsg.Context(credits_initial=4) as cctx:
        lst = sctx.listen(listen_uri(), credits_initial=16)

        async def echo():
            conn = await lst.accept()
            async for m in conn:
                await conn.send(m)
        task = asyncio.ensure_future(echo())
        conn = await cctx.connect(lst.uri)
        for i in range(50):
            await conn.send(b"%d" % i)
        got = [await conn.recv() for _ in range(50)]
        assert got == [b"%d" % i for i in range(50)]
        await conn.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        lst.close()


@async_test
async def test_closed_connection_is_one_class():
    """After the peer closed: recv, send and call each raise
    ConnectionClosed, a ConnectionResetError and an RmsgError; operations
    the close cut short too."""
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        @sctx.handle(1)
        async def slow(conn, req):
            await asyncio.sleep(3600)

        lst = sctx.listen(listen_uri())
        conn = await cctx.connect(lst.uri)
        sconn = await lst.accept()
        pending = conn.call(1, b"never answered")
        await asyncio.sleep(0.05)
        await sconn.close()
        await conn.wait_closed()
        for what, aw in (("pending call", pending),
                         ("recv", conn.recv()),
                         ("send", conn.send(b"x")),
                         ("call", conn.call(1, b"x", timeout=1.0)),
                         ("read", conn.read(bytearray(8), bytes(32)))):
            with pytest.raises(ConnectionResetError) as ei:
                await aw
            assert type(ei.value) is rmsg.ConnectionClosed, what
            assert isinstance(ei.value, rmsg.RmsgError), what
        # close_reason: an int as before, readable
        r = conn.close_reason
        assert isinstance(r, int) and isinstance(r, rmsg.CloseReason)
        assert r < 0 and r.name == errno.errorcode[-r]
        assert str(r).startswith(r.name + ": ") and r.text
        assert await conn.close() == r
        # this side's own close: 0, and says so
        assert sconn.close_reason == 0 and str(sconn.close_reason)
        lst.close()


@async_test
async def test_deadline_is_timeout_error():
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        @sctx.handle(1)
        async def slow(conn, req):
            await asyncio.sleep(3600)

        lst = sctx.listen(listen_uri())
        conn = await cctx.connect(lst.uri)
        with pytest.raises(TimeoutError) as ei:
            await conn.call(1, b"x", timeout=0.05)
        assert isinstance(ei.value, rmsg.RmsgError)
        assert ei.value.errno == errno.ETIMEDOUT
        await conn.close()
        lst.close()


@async_test
async def test_accept_sees_the_peer_address():
    seen = []
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        def accept(pdata, peer):
            seen.append((pdata, peer))
            return None

        lst = sctx.listen(listen_uri(), accept=accept)
        conn = await cctx.connect(lst.uri, private_data=b"hello")
        sconn = await lst.accept()
        assert seen == [(b"hello", conn.local_addr)]
        assert seen[0][1] == sconn.peer_addr
        # a one-argument accept still gets the private data alone
        lst2 = sctx.listen(listen_uri(), accept=lambda pd: seen.append(pd))
        conn2 = await cctx.connect(lst2.uri, private_data=b"two")
        assert seen[-1] == b"two"
        for c in (conn, conn2):
            await c.close()
        lst.close()
        lst2.close()


def test_rmsg_error_classes():
    for e, cls in ((errno.ECONNREFUSED, ConnectionRefusedError),
                   (errno.ECONNRESET, ConnectionResetError),
                   (errno.EPIPE, ConnectionResetError),
                   (errno.ESHUTDOWN, ConnectionResetError),
                   (errno.EACCES, PermissionError),
                   (errno.EPERM, PermissionError),
                   (errno.ETIMEDOUT, TimeoutError)):
        exc = rmsg.rmsg_error(-e)
        assert isinstance(exc, cls) and isinstance(exc, rmsg.RmsgError)
        assert exc.errno == e
    assert type(rmsg.rmsg_error(errno.EMSGSIZE)) is rmsg.RmsgError
    assert rmsg.errno_name(-errno.ECONNREFUSED) == "ECONNREFUSED"
