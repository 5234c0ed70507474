# SPDX-License-Identifier: MIT
import asyncio
import errno

import pytest

import rmsg
from conftest import TRANSPORT, Pair, async_test


class Region:
    """Server side: a registered bytearray; its descriptor goes to each
    client as the first message."""

    def __init__(self, ctx, size=65536, access=rmsg.ACCESS_REMOTE_WRITE |
                 rmsg.ACCESS_REMOTE_READ):
        self.mem = bytearray(size)
        self.mr = ctx.mr_reg(self.mem, access)
        self.conns = []
        self.imms = asyncio.Queue()

    async def per_conn(self, conn):
        self.conns.append(conn)
        await conn.send(self.mr.export(conn))
        async for imm in conn.imms():
            await self.imms.put(imm)


@async_test
async def test_write_imm_write_read():
    async with Pair() as p:
        reg = Region(p.sctx)
        p.serve(reg.per_conn)
        conn = await p.connect()
        desc = await conn.recv()
        assert len(desc) == rmsg.MR_DESC_SIZE == 32
        await conn.write_imm(b"hello one-sided", desc, 100, imm=0xDEADBEEF)
        imm, ln = await asyncio.wait_for(reg.imms.get(), 10)
        assert (imm, ln) == (0xDEADBEEF, 15)
        assert reg.mem[100:115] == b"hello one-sided"   # landed before on_imm
        # a plain write, then read it back, gathered and scattered
        await conn.write([b"abc", b"def"], desc, 1000)
        back = bytearray(6)
        await conn.read(back, desc, 1000)
        assert back == b"abcdef"
        a, b = bytearray(2), bytearray(4)
        await conn.read([a, b], desc, 1000)
        assert (a, b) == (b"ab", b"cdef")
        # large, into and from a registered buffer
        src = p.cctx.buf_alloc(40000)
        src[:] = bytes(i & 0xFF for i in range(40000))
        await conn.write_imm(src, desc, 20000, imm=2)
        assert await asyncio.wait_for(reg.imms.get(), 10) == (2, 40000)
        assert reg.mem[20000:60000] == bytes(src)
        dst = bytearray(40000)
        await conn.read(dst, desc, 20000)
        assert dst == bytes(src)
        # a local MR of the client as the destination
        local = bytearray(64)
        lmr = p.cctx.mr_reg(local, 0)
        await conn.read(lmr, desc, 100)
        assert local[:15] == b"hello one-sided"
        lmr.dereg()


@async_test
async def test_onesided_checks():
    async with Pair() as p:
        reg = Region(p.sctx, 4096, rmsg.ACCESS_REMOTE_READ)
        p.serve(reg.per_conn)
        conn = await p.connect()
        desc = await conn.recv()
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.write(b"x", desc, 0)
        assert ei.value.errno == errno.EACCES
        with pytest.raises(rmsg.RmsgError) as ei:
            await conn.read(bytearray(10), desc, 4090)
        assert ei.value.errno == errno.EINVAL
        with pytest.raises(ValueError):
            conn.read(bytearray(1), b"short", 0)
        with pytest.raises(TypeError):
            conn.read(b"immutable", desc, 0)
        # the connection stays up
        await conn.send(b"still up")
        buf = bytearray(5)
        reg.mem[0:5] = b"12345"
        await conn.read(buf, desc, 0)
        assert buf == b"12345"


@async_test
async def test_on_imm_callback_and_mr_lifetime():
    async with Pair() as p:
        mem = bytearray(1024)
        mr = p.sctx.mr_reg(mem)
        got = []

        async def per_conn(conn):
            conn.on_imm = lambda imm, ln: got.append((imm, ln))
            await conn.send(mr.export(conn))
        p.serve(per_conn)
        conn = await p.connect()
        desc = await conn.recv()
        for i in range(20):
            await conn.write_imm(b"%02d" % i, desc, 2 * i, imm=i)
        while len(got) < 20:
            await asyncio.sleep(0.01)
        assert got == [(i, 2) for i in range(20)]
        assert mem[:40] == b"".join(b"%02d" % i for i in range(20))
        # a registered bytearray cannot be resized
        with pytest.raises(BufferError):
            mem.extend(b"x")
        mr.dereg()
        mem.extend(b"x")                      # unpinned
        with pytest.raises(rmsg.RmsgError) as ei:
            # revoked: TCP refuses with EACCES, RDMA fails the connection
            await conn.write(b"zz", desc, 0)
        if TRANSPORT == "tcp":
            assert ei.value.errno == errno.EACCES


@async_test
async def test_export_is_per_connection():
    async with Pair() as p:
        mem = bytearray(4096)
        mr = p.sctx.mr_reg(mem)
        descs = asyncio.Queue()

        async def per_conn(conn):
            # the first client gets a write-only export of [1024, 2048)
            d = mr.export(conn, 1024, 1024, rmsg.ACCESS_REMOTE_WRITE)
            await descs.put(d)
            await conn.send(d)
            async for _ in conn.imms():
                pass
        p.serve(per_conn)
        a = await p.connect()
        da = await a.recv()
        b = await p.connect()
        await b.recv()
        await a.write(b"A" * 8, da, 0)
        assert mem[1024:1032] == b"A" * 8
        # rights and range of the export are checked by the sender ...
        with pytest.raises(rmsg.RmsgError) as ei:
            await a.read(bytearray(1), da, 0)
        assert ei.value.errno == errno.EACCES
        with pytest.raises(rmsg.RmsgError) as ei:
            await a.write(b"x", da, 1024)
        assert ei.value.errno == errno.EINVAL
        # ... and A's descriptor on B's connection by the server: TCP
        # answers EACCES, RDMA's device fails B's connection
        with pytest.raises(rmsg.RmsgError) as ei:
            await b.write(b"B" * 8, da, 0)
        if TRANSPORT == "tcp":
            assert ei.value.errno == errno.EACCES
        assert mem[1024:1032] == b"A" * 8
        # revoked: A is refused too (TCP: EACCES)
        mr.revoke(await descs.get())
        with pytest.raises(rmsg.RmsgError) as ei:
            await a.write(b"a", da, 0)
        if TRANSPORT == "tcp":
            assert ei.value.errno == errno.EACCES
        with pytest.raises(ValueError):
            mr.export(None)


@async_test
async def test_mr_len():
    """len(mr) is the registered length, for a bytearray and for a
    registered Buffer alike."""
    async with rmsg.Context() as ctx:
        mem = bytearray(4096)
        mr = ctx.mr_reg(mem)
        assert len(mr) == 4096
        mr.dereg()
        buf = ctx.buf_alloc(1000)
        mr = ctx.mr_reg(buf)
        assert len(mr) == 1000
        mr.dereg()
        buf.free()
