# SPDX-License-Identifier: MIT
"""Authentication with a pre-shared key (rmsg_cfg_set_psk(3)): the psk=
option of listen(), connect() and Context."""
import asyncio
import errno

import pytest

import rmsg
from conftest import async_test, listen_uri

KEY = b"0123456789abcdef-the-right-key"
OTHER = b"0123456789abcdef-another-key!!"


async def _try(server_psk, client_psk, ctx_psk=False):
    """A connect from a client with client_psk to a listener with
    server_psk (with ctx_psk: the server context's, not the
    listener's); returns (reply or the RmsgError, accepted peer data,
    connections the server app saw)."""
    accepted = []
    served = []
    sopts = {"psk": server_psk} if (ctx_psk and server_psk) else {}
    async with rmsg.Context(**sopts) as sctx, rmsg.Context() as cctx:
        def accept(pd):
            accepted.append(bytes(pd))
            return b"hi-srv"
        lopts = {"psk": server_psk} if (server_psk and not ctx_psk) else {}
        lst = sctx.listen(listen_uri(), accept=accept, **lopts)

        async def serve():
            async for conn in lst:
                served.append(conn)
                async for msg in conn:
                    await conn.send(msg)
        task = asyncio.ensure_future(serve())
        copts = {"psk": client_psk} if client_psk else {}
        try:
            conn = await cctx.connect(lst.uri, private_data=b"hi-cli",
                                      **copts)
        except rmsg.RmsgError as e:
            result = e
        else:
            assert conn.peer_data == b"hi-srv"
            await conn.send(b"ping")
            result = await conn.recv()
            await conn.close()
        await asyncio.sleep(0.2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return result, accepted, served


@async_test
async def test_same_key():
    result, accepted, served = await _try(KEY, KEY)
    assert result == b"ping"
    assert accepted == [b"hi-cli"]
    assert len(served) == 1


@async_test
async def test_same_key_on_the_context():
    result, accepted, _ = await _try(KEY, KEY, ctx_psk=True)
    assert result == b"ping"
    assert accepted == [b"hi-cli"]


@pytest.mark.parametrize("server_psk,client_psk,why", [
    # a wrong key
    (KEY, OTHER, "the peer refused our proof: a different pre-shared key?"),
    # a key on the client only
    (None, KEY, "the server has no pre-shared key"),
    # a key on the server only
    (KEY, None, "the server requires a pre-shared key"),
])
@async_test
async def test_refused(server_psk, client_psk, why):
    result, accepted, served = await _try(server_psk, client_psk)
    assert isinstance(result, rmsg.RmsgError)
    # covers: rmsg_cfg_set_psk.3 EACCES
    assert result.errno == errno.EACCES
    # and why, in words (rmsg_conn_close_reason(3))
    assert why in result.close_reason_text, result.close_reason_text
    assert rmsg.err_name(-result.errno) == "EACCES"
    # the server's application never saw the peer
    assert accepted == [] and served == []


@async_test
async def test_key_length():
    async with rmsg.Context() as ctx:
        for bad in (b"x" * 15, b"x" * 65):
            with pytest.raises(rmsg.RmsgError) as ei:
                ctx.listen(listen_uri(), psk=bad)
            # covers: rmsg_cfg_set_psk.3 EINVAL
            assert ei.value.errno == errno.EINVAL
