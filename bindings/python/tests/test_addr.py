# SPDX-License-Identifier: MIT
"""Connection.peer_addr and Connection.local_addr
(rmsg_conn_peer_addr(3)): each side's peer is the other side's local
address and port; the client's peer is the listener's address and port."""
import asyncio
import ipaddress

import pytest

import rmsg
from conftest import ADDR, TRANSPORT, async_test, wait_until


def same(a, b):
    """(host, port) pairs naming the same address and port"""
    ha, hb = (ipaddress.ip_address(x[0].split("%")[0]) for x in (a, b))
    return ha == hb and a[1] == b[1]


async def check(uri, host):
    """A listener at uri (port 0) and a client to it, whose addresses
    match; returns the client's (peer_addr, local_addr)."""
    accepted = []
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        listener = sctx.listen(uri)

        async def serve():
            async for c in listener:
                accepted.append(c)
        task = asyncio.ensure_future(serve())
        try:
            conn = await cctx.connect(listener.uri)
            await wait_until(lambda: accepted, 10, "the server's connection")
            srv = accepted[0]
            peer, local = conn.peer_addr, conn.local_addr
            assert peer is not None and local is not None
            assert isinstance(peer[0], str) and isinstance(peer[1], int)
            assert same(peer, (host, listener.port)), peer
            assert local[1] > 0
            # each side's peer is the other side's own address and port
            assert same(srv.peer_addr, local), (srv.peer_addr, local)
            assert same(srv.local_addr, peer), (srv.local_addr, peer)
            await conn.close()
            # still readable after the close
            assert conn.peer_addr == peer and conn.local_addr == local
            return peer, local
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@async_test
async def test_addresses_match():
    host = "[%s]" % ADDR if ":" in ADDR else ADDR
    peer, _ = await check("%s://%s:0" % (TRANSPORT, host), ADDR)
    want = ipaddress.ip_address(ADDR.split("%")[0]).version
    assert ipaddress.ip_address(peer[0].split("%")[0]).version == want


@pytest.mark.skipif(TRANSPORT != "tcp", reason="::1 is loopback: TCP only")
@async_test
async def test_addresses_ipv6_loopback():
    peer, local = await check("tcp://[::1]:0", "::1")
    assert peer[0] == "::1" and local[0] == "::1"

