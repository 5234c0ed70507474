# SPDX-License-Identifier: MIT
"""rmsg - asyncio binding of librmsg (RDMA/TCP messaging and RPC).

    async with rmsg.Context() as ctx:
        conn = await ctx.connect("tcp://127.0.0.1:7000")
        reply = await conn.call(1, b"ping", timeout=1.0)

See bindings/python/README.md.
"""
from ._core import (ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, IOV_MAX,
                    MR_DESC_SIZE, PRIVATE_DATA_MAX, MR, Buffer,
                    Connection, ConnectionClosed, Context, Listener,
                    RmsgError, RmsgTimeoutError, strerror)
from ._ffi import LIBRMSG_PATH

__all__ = ["Context", "Listener", "Connection", "Buffer", "MR", "RmsgError",
           "RmsgTimeoutError", "ConnectionClosed", "strerror",
           "ACCESS_REMOTE_READ", "ACCESS_REMOTE_WRITE", "MR_DESC_SIZE",
           "PRIVATE_DATA_MAX", "IOV_MAX", "LIBRMSG_PATH"]
__version__ = "0.1.0"
