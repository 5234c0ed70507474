# SPDX-License-Identifier: MIT
"""rmsg.listen_group() (rmsg_listen_group(3)): one address served by two
contexts, the home on the test's loop and a member on a second thread
with its own asyncio loop; each context's accept() gets the connections
handed to it, which then run on its loop; pick chooses the context."""
import asyncio
import threading

import pytest

import rmsg
from conftest import TIMEOUT, async_test, listen_uri


class Member:
    """A Context on its own thread and asyncio loop."""

    def __init__(self):
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(TIMEOUT), "member thread did not start"

    def _run(self):
        async def main():
            self.loop = asyncio.get_running_loop()
            self.stop = asyncio.Event()
            self.ctx = rmsg.Context()
            self.ready.set()
            await self.stop.wait()
            await self.ctx.close()
        asyncio.run(main())

    def run(self, coro):
        """coro on the member's loop, as an awaitable of the test's."""
        return asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self):
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()


async def serve(lst, name, seen):
    """Echoes every connection lst hands to the running loop's context."""
    tasks = []

    async def echo(conn):
        async for m in conn:
            await conn.send(m)
    async for conn in lst:
        seen.append((name, threading.get_ident(), conn.peer_addr))
        tasks.append(asyncio.ensure_future(echo(conn)))
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _run(pick=None, n=4):
    member = Member()
    seen = []
    picked = []
    try:
        async with rmsg.Context() as home, rmsg.Context() as cctx:
            def pick_fn(peer, count):
                picked.append((peer, count))
                return pick(peer, count)
            lst = rmsg.listen_group([home, member.ctx], listen_uri(),
                                    pick=pick_fn if pick else None)
            home_task = asyncio.ensure_future(serve(lst, "home", seen))
            member_done = member.run(serve(lst, "member", seen))
            conns = []
            for i in range(n):
                c = await cctx.connect(lst.uri)
                await c.send(b"%d" % i)
                assert await c.recv() == b"%d" % i
                conns.append(c)
            for c in conns:
                await c.close()
            lst.close()  # on the home's thread; both accept loops end
            await asyncio.wait_for(asyncio.gather(home_task, member_done),
                                   TIMEOUT)
    finally:
        member.close()
    return seen, picked, member.thread.ident


@async_test
async def test_round_robin_over_two_threads():
    seen, picked, member_tid = await _run()
    names = sorted(name for name, _, _ in seen)
    assert names == ["home", "home", "member", "member"], seen
    for name, tid, peer in seen:
        assert (tid == member_tid) == (name == "member")
        assert peer is not None
    assert picked == []


@async_test
async def test_pick():
    seen, picked, _ = await _run(pick=lambda peer, n: 1, n=3)
    assert [name for name, _, _ in seen] == ["member"] * 3
    assert len(picked) == 3
    assert all(n == 2 and peer is not None and peer[1] > 0
               for peer, n in picked)


@async_test
async def test_pick_refuses():
    async with rmsg.Context() as home, rmsg.Context() as other, \
            rmsg.Context() as cctx:
        lst = rmsg.listen_group([home, other], listen_uri(),
                                pick=lambda peer, n: n)
        with pytest.raises(ConnectionRefusedError):
            await cctx.connect(lst.uri)
        lst.close()


@async_test
async def test_arguments():
    async with rmsg.Context() as a:
        with pytest.raises(ValueError):
            rmsg.listen_group([], listen_uri())
        with pytest.raises(ValueError):
            rmsg.listen_group([a, a], listen_uri())
        with pytest.raises(ValueError) as ei:
            rmsg.listen_group([a], listen_uri(), credits=1)
        assert "credits: " in str(ei.value)
