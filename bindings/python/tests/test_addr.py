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



def _dual_stack():
    """Whether an IPv6 wildcard socket here also takes IPv4 (the system's
    net.ipv6.bindv6only is 0, and IPv6 exists)."""
    try:
        with open("/proc/sys/net/ipv6/bindv6only") as f:
            return f.read().strip() == "0"
    except OSError:
        return False


@pytest.mark.skipif(TRANSPORT != "tcp" or ADDR != "127.0.0.1"
                    or not _dual_stack(),
                    reason="IPv4 to a TCP [::] listener on this host")
@async_test
async def test_v4_client_of_v6_wildcard_is_mapped():
    """rmsg_conn_peer_addr(3): an IPv4 client of a tcp://[::] listener
    has an IPv4-mapped address, ::ffff:127.0.0.1, in accept() and in
    peer_addr (what the page's access-control example allows for)."""
    seen = []
    async with rmsg.Context() as sctx, rmsg.Context() as cctx:
        lst = sctx.listen("tcp://[::]:0",
                          accept=lambda pd, peer: seen.append(peer))
        conn = await cctx.connect("tcp://127.0.0.1:%d" % lst.port)
        sconn = await lst.accept()
        port = conn.local_addr[1]
        assert seen == [("::ffff:127.0.0.1", port)]
        assert sconn.peer_addr == ("::ffff:127.0.0.1", port)
        mapped = ipaddress.ip_address(sconn.peer_addr[0])
        assert mapped.ipv4_mapped == ipaddress.ip_address("127.0.0.1")
        assert sconn.local_addr == ("::ffff:127.0.0.1", lst.port)
        await conn.close()
        lst.close()
