#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""python-bench.py - rmsg-perf's RPC latency and message rate modes,
written with the Python binding (bindings/python), speaking rmsg-perf's
protocol: its client runs against `rmsg-perf server` as well as against
its own server, and `rmsg-perf client` against its server.

    python-bench.py server URI
    python-bench.py [-o rpc|send] [-m lat|rate] [-s SIZE] [-n ITERS]
                    [-w WARMUP] [-W WINDOW] client URI

-o rpc -m lat: ping-pong with `await conn.call()`, the request echoed;
-o send -m rate: a one-way stream of ITERS messages with at most WINDOW
sends outstanding, timed from the first send until the server's 'D'
(it has them all) and every send completed. Prints one line as
`rmsg-perf -P` does: lat_us is the median half round trip (as
rmsg-perf's), rtt_us the median round trip; mmsgs the message rate in
10^6 messages per second. The server exits when its first connection
closes. The binding comes from bindings/python next to this script
unless PYTHONPATH names another; the library from RMSG_LIB as for the
binding. bench/compare-python.sh runs it side by side with rmsg-perf.
--uvloop runs it on uvloop's loop (Debian's python3-uvloop, which
scripts/setup.sh does not install): the binding needs only add_reader.
"""
import argparse
import asyncio
import os
import struct
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "bindings", "python"))
import rmsg  # noqa: E402

PERF_METHOD = 0x7066  # the method rmsg-perf's server serves
OPS = {"send": 0, "write_imm": 1, "rpc": 2}
MODES = {"lat": 0, "bw": 1, "rate": 2}
# struct ctl of tools/rmsg-perf.c: tag, op, mode, pad[5], size, expect,
# region, desc[32]
CTL = struct.Struct("<cBB5xQQQ32s")


async def serve(uri):
    async with rmsg.Context() as ctx:
        mode = [MODES["lat"]]

        @ctx.handle(PERF_METHOD)
        def call(conn, req):
            # ping-pong: the reply is as big as the call; else empty
            return req if mode[0] == MODES["lat"] else None

        listener = ctx.listen(uri)
        print("python-bench server port=%d" % listener.port, flush=True)
        conn = await listener.accept()
        listener.close()
        expect = got = 0
        async for m in conn:
            tag = m[:1]
            if tag == b"C":
                _, _, mode[0], _, expect, _, _ = CTL.unpack_from(m)
                got = 0
                conn.send(b"R" + bytes(32))
            elif tag == b"S":
                got += 1
                if got == expect:
                    conn.send(b"D")
            elif tag == b"P":
                conn.send(m)


async def client(args):
    async with rmsg.Context() as ctx:
        conn = await ctx.connect(args.uri)
        op, mode = OPS[args.op], MODES[args.mode]
        expect = args.iters if mode != MODES["lat"] else 0
        await conn.send(CTL.pack(b"C", op, mode, args.size, expect, 0,
                                 bytes(32)))
        ready = await conn.recv()
        if ready[:1] != b"R":
            sys.exit("python-bench: no ready from the server")
        if op == OPS["rpc"] and mode == MODES["lat"]:
            line = await rpc_lat(conn, args)
        elif op == OPS["send"] and mode == MODES["rate"]:
            line = await send_rate(conn, args)
        else:
            sys.exit("python-bench: only -o rpc -m lat and "
                     "-o send -m rate")
        print(line + " transport=%s" % conn.transport, flush=True)
        await conn.close()


async def rpc_lat(conn, args):
    req = b"P" * args.size
    call = conn.call
    clock = time.perf_counter_ns
    for _ in range(args.warmup):
        await call(PERF_METHOD, req)
    rtt = [0] * args.iters
    for i in range(args.iters):
        t0 = clock()
        reply = await call(PERF_METHOD, req)
        rtt[i] = clock() - t0
        if len(reply) != args.size:
            sys.exit("python-bench: reply of %d bytes" % len(reply))
    rtt.sort()
    n = len(rtt)
    med = rtt[n // 2] if n % 2 else (rtt[n // 2 - 1] + rtt[n // 2]) / 2
    p99 = rtt[int((n - 1) * 0.99)]
    return ("python-bench op=rpc mode=lat size=%d iters=%d lat_us=%.3f "
            "rtt_us=%.3f min_us=%.3f p99_us=%.3f"
            % (args.size, n, med / 2e3, med / 1e3, rtt[0] / 2e3,
               p99 / 2e3))


async def send_rate(conn, args):
    msg = b"S" * args.size
    send = conn.send
    window = []
    t0 = time.perf_counter_ns()
    for _ in range(args.iters):
        if len(window) >= args.window:
            await window[0]
            window = [f for f in window if not f.done()]
        window.append(send(msg))
    done = await conn.recv()
    await asyncio.gather(*window)
    t1 = time.perf_counter_ns()
    if done != b"D":
        sys.exit("python-bench: no 'D' from the server")
    secs = (t1 - t0) / 1e9
    return ("python-bench op=send mode=rate size=%d iters=%d window=%d "
            "mbps=%.1f mmsgs=%.4f secs=%.4f"
            % (args.size, args.iters, args.window,
               args.iters * args.size / secs / 1e6,
               args.iters / secs / 1e6, secs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", dest="op", default="rpc", choices=sorted(OPS))
    ap.add_argument("-m", dest="mode", default="lat", choices=sorted(MODES))
    ap.add_argument("-s", dest="size", type=int, default=64)
    ap.add_argument("-n", dest="iters", type=int, default=None)
    ap.add_argument("-w", dest="warmup", type=int, default=100)
    ap.add_argument("-W", dest="window", type=int, default=64)
    ap.add_argument("--uvloop", action="store_true",
                    help="run on uvloop's loop (python3-uvloop) instead "
                    "of asyncio's own")
    ap.add_argument("role", choices=("server", "client"))
    ap.add_argument("uri")
    args = ap.parse_args()
    if args.iters is None:
        args.iters = 10000 if args.mode == "rate" else 1000
    if args.size < 1:
        ap.error("-s: at least 1 byte (the tag)")
    if args.uvloop:
        import uvloop
        uvloop.install()
    if args.role == "server":
        asyncio.run(serve(args.uri))
    else:
        asyncio.run(client(args))


if __name__ == "__main__":
    main()
