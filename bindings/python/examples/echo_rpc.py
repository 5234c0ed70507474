#!/usr/bin/python3
"""An asyncio echo RPC server and client over librmsg, in one process.

    /usr/bin/python3 bindings/python/examples/echo_rpc.py [URI]

URI defaults to tcp://127.0.0.1:0 (port 0: any free port); use
rdma://ADDR:0 on an RDMA device.
"""
import asyncio
import errno
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import rmsg  # noqa: E402

ECHO = 1


async def main(uri):
    async with rmsg.Context() as server, rmsg.Context() as client:
        # the server: method 1 echoes, async handlers may await anything
        @server.handle(ECHO)
        async def echo(conn, request):
            if not request:
                raise rmsg.RmsgError(errno.EINVAL)  # the caller gets EINVAL
            return request

        listener = server.listen(uri)
        print("listening on", listener.uri)

        # the client
        conn = await client.connect(listener.uri)
        print("connected over", conn.transport)
        for word in (b"hello", b"rdma", b"world"):
            reply = await conn.call(ECHO, word, timeout=5.0)
            print("echo:", reply.decode())
        replies = await asyncio.gather(*(conn.call(ECHO, b"%d" % i)
                                         for i in range(100)))
        assert replies == [b"%d" % i for i in range(100)]
        print("100 pipelined calls answered")
        try:
            await conn.call(ECHO, b"")
        except rmsg.RmsgError as e:
            print("error:", errno.errorcode[e.errno], "-", e.strerror)
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1
                     else "tcp://127.0.0.1:0"))
