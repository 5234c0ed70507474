# SPDX-License-Identifier: MIT
"""Connection.stats() and Context.stats(): the counters of
rmsg_conn_stats(3) as a dict, moved by exactly the traffic made here."""
import asyncio

import pytest

import rmsg
from rmsg import _ffi
from conftest import TRANSPORT, Pair, async_test, echo_server


@async_test
async def test_stats_count_messages_both_ends():
    async with Pair() as p:
        srv_conns = []

        async def serve(conn):
            srv_conns.append(conn)
            await echo_server(conn)
        p.serve(serve)
        conn = await p.connect()
        before = await conn.stats()
        assert set(before) == set(_ffi.STATS_FIELDS)
        assert all(isinstance(v, int) for v in before.values())
        for i in range(5):
            await conn.send(b"x" * (10 + i))
            assert await asyncio.wait_for(conn.recv(), 10) == b"x" * (10 + i)
        after = await conn.stats()
        assert after["msgs_sent"] - before["msgs_sent"] == 5
        assert after["msgs_recv"] - before["msgs_recv"] == 5
        assert after["bytes_sent"] - before["bytes_sent"] == 60
        assert after["bytes_recv"] - before["bytes_recv"] == 60
        assert after["eager_sent"] - before["eager_sent"] == 5
        assert after["rndv_sent"] == before["rndv_sent"]
        assert after["conns_opened"] == 0  # context only
        srv = await srv_conns[0].stats()
        assert srv["msgs_recv"] == 5 and srv["msgs_sent"] == 5
        cctx = await p.cctx.stats()
        assert cctx["conns_opened"] == 1
        assert cctx["msgs_sent"] == after["msgs_sent"]
        sctx = await p.sctx.stats()
        assert sctx["conns_accepted"] == 1
        assert sctx["msgs_recv"] == 5
        await conn.close()
        # after the close: the connection's last counters, and the
        # context keeps them
        closed = await conn.stats()
        assert closed["msgs_sent"] == after["msgs_sent"]
        cctx = await p.cctx.stats()
        assert cctx["conns_closed"] == 1
        assert cctx["msgs_sent"] == after["msgs_sent"]
        print("%s: client connection %s" % (TRANSPORT, closed))


@async_test
async def test_stats_one_sided_and_imm():
    async with Pair() as p:
        mem = bytearray(4096)
        mr = p.sctx.mr_reg(mem, rmsg.ACCESS_REMOTE_WRITE |
                           rmsg.ACCESS_REMOTE_READ)
        imms = asyncio.Queue()
        srv_conns = []

        async def serve(conn):
            srv_conns.append(conn)
            await conn.send(mr.export(conn))
            async for imm in conn.imms():
                await imms.put(imm)
        p.serve(serve)
        conn = await p.connect()
        desc = await conn.recv()
        await conn.write(b"abc", desc, 0)
        await conn.write_imm(b"def", desc, 8, imm=7)
        await conn.write_imm(b"ghi", desc, 16, imm=8)
        back = bytearray(3)
        await conn.read(back, desc, 0)
        assert back == b"abc"
        assert await asyncio.wait_for(imms.get(), 10) == (7, 3)
        assert await asyncio.wait_for(imms.get(), 10) == (8, 3)
        st = await conn.stats()
        assert (st["writes"], st["writes_imm"], st["reads"]) == (1, 2, 1)
        srv = await srv_conns[0].stats()
        assert srv["imm_recv"] == 2
        # served by the library over TCP and shm:// (its backend); the
        # RDMA device serves them unseen
        served = (0, 0) if TRANSPORT == "rdma" else (3, 1)
        assert (srv["writes_served"], srv["reads_served"]) == served


@async_test
async def test_stats_export_parsed():
    """Context.stats_export(): the Prometheus text parsed by
    python3-prometheus-client, the JSON by json.loads; the names are
    those of stat_info()."""
    import json
    from prometheus_client.parser import text_string_to_metric_families
    names = [n for n, _, _ in rmsg.stat_info()]
    assert names == list(_ffi.STATS_FIELDS)
    async with Pair() as p:
        p.serve(echo_server)
        conn = await p.connect()
        await conn.send(b"abc")
        assert await asyncio.wait_for(conn.recv(), 10) == b"abc"
        text = p.cctx.stats_export()
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert fams["rmsg_ctx_msgs_sent"].samples[0].value == 1
        assert fams["rmsg_ctx_conns_opened"].samples[0].value == 1
        (s,) = fams["rmsg_conn_bytes_recv"].samples
        assert s.value == 3 and s.labels["transport"] == TRANSPORT
        doc = json.loads(p.cctx.stats_export("json"))
        assert list(doc["counters"]) == names
        assert doc["connections"][0]["counters"]["msgs_recv"] == 1
        with pytest.raises(ValueError):
            p.cctx.stats_export("xml")
        await conn.close()
