# SPDX-License-Identifier: MIT
"""rmsg - asyncio binding of librmsg (RDMA/TCP messaging and RPC).

    async with rmsg.Context() as ctx:
        conn = await ctx.connect("tcp://127.0.0.1:7000")
        reply = await conn.call(1, b"ping", timeout=1.0)

See bindings/python/README.md.
"""
import ctypes
from typing import Tuple

from ._core import (ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, IOV_MAX,
                    MR_DESC_SIZE, PRIVATE_DATA_MAX, RECV_QUEUE_DEFAULT,
                    RESUME_NONE, RESUME_ON, RESUME_SUSPENDED, MR,
                    Buffer, CloseReason, Connection, ConnectionClosed,
                    Context, Listener, RmsgConnectionRefusedError, RmsgError,
                    RmsgPermissionError, RmsgTimeoutError, RmsgValueError,
                    errno_name, listen_group, rmsg_error, strerror)
from ._core import err_name, stat_info
from ._ffi import LIBRMSG_PATH, lib as _lib

__all__ = ["Context", "Listener", "Connection", "Buffer", "MR", "RmsgError",
           "RmsgTimeoutError", "RmsgConnectionRefusedError",
           "RmsgPermissionError", "RmsgValueError", "ConnectionClosed",
           "CloseReason", "rmsg_error", "errno_name", "strerror",
           "listen_group",
           "ACCESS_REMOTE_READ", "ACCESS_REMOTE_WRITE", "MR_DESC_SIZE",
           "PRIVATE_DATA_MAX", "IOV_MAX", "RECV_QUEUE_DEFAULT", "LIBRMSG_PATH",
           "RESUME_NONE", "RESUME_ON", "RESUME_SUSPENDED",
           "version_info", "err_name", "stat_info"]


def _library_version() -> Tuple[str, Tuple[int, int, int]]:
    major, minor, patch = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    text = _lib.rmsg_version(ctypes.byref(major), ctypes.byref(minor),
                             ctypes.byref(patch))
    return text.decode("ascii"), (major.value, minor.value, patch.value)


#: the version of the librmsg library loaded (rmsg_version()), e.g.
#: "0.2.0", which may be newer than the release this package came with
__version__: str
#: the same as a tuple of ints: (major, minor, patch)
version_info: Tuple[int, int, int]
__version__, version_info = _library_version()
