# SPDX-License-Identifier: MIT
"""asyncio binding of librmsg.

Model (see README.md): each Context is a librmsg context made by
rmsg_ctx_create_fd(), driven by the asyncio loop it was created on:
loop.add_reader() watches rmsg_ctx_fd(), and the reader calls
rmsg_ctx_progress(), which runs the library's callbacks. Everything runs
on the asyncio loop's thread: API calls go straight to the library, and
callbacks (inside rmsg_ctx_progress) copy what they need and resolve
futures directly. No helper thread, no queue between threads.

The descriptor also covers the context's timers (the library arms a
timerfd in it), so the reader is all the loop needs.
"""
from __future__ import annotations

import asyncio
import atexit
import collections
import ctypes
import errno as _errno
import inspect
import itertools
import logging
import math
import mmap
import os
import socket
import sys
import threading
import weakref
from typing import (Any, AsyncIterator, Awaitable, Callable, Deque, Dict,
                    Generator, List, Optional, Sequence, Set,
                    Tuple, TypeVar, Union, overload)

from . import _ffi
from ._ffi import lib

log = logging.getLogger("rmsg")

ACCESS_REMOTE_WRITE = _ffi.RMSG_ACCESS_REMOTE_WRITE
ACCESS_REMOTE_READ = _ffi.RMSG_ACCESS_REMOTE_READ
EXPORT_ANY_PEER = _ffi.RMSG_EXPORT_ANY_PEER
MR_DESC_SIZE = _ffi.RMSG_MR_DESC_SIZE
PRIVATE_DATA_MAX = _ffi.RMSG_PRIVATE_DATA_MAX
IOV_MAX = _ffi.RMSG_IOV_MAX
#: Connection.resume_state (rmsg_conn_resume_state(3)): not resumable,
#: resumable with its transport up, suspended waiting for a new one
RESUME_NONE = _ffi.RMSG_RESUME_NONE
RESUME_ON = _ffi.RMSG_RESUME_ON
RESUME_SUSPENDED = _ffi.RMSG_RESUME_SUSPENDED
#: the default bound of a connection's receive queue (recv_queue=), in
#: messages; see Connection.recv()
RECV_QUEUE_DEFAULT = 1024

# types of the API (annotations only)
#: a bytes-like object
BytesLike = Union[bytes, bytearray, memoryview]
#: what send(), call() and the one-sided operations take: a bytes-like
#: object, a Buffer, or a list of up to IOV_MAX of them
Data = Union[BytesLike, "Buffer", Sequence[Union[BytesLike, "Buffer"]]]
#: memory that a region registers or read() fills: writable
WritableBuffer = Union[bytearray, memoryview, mmap.mmap, "Buffer"]
#: an RPC handler: func(conn, request) returns the reply (bytes-like, a
#: list of them, or None), or an awaitable of it
Handler = Callable[["Connection", bytes], Any]
HandlerT = TypeVar("HandlerT", bound=Handler)
#: listen()'s accept(peer_private_data) or accept(peer_private_data,
#: peer_addr): None/True, bytes, or False
AcceptFunc = Union[Callable[[bytes], Union[None, bool, BytesLike]],
                   Callable[[bytes, Optional[Tuple[str, int]]],
                            Union[None, bool, BytesLike]]]
#: serve_forever()'s per-connection coroutine function
ConnHandler = Callable[["Connection"], Awaitable[Any]]
#: a socket address: (host, port), host numeric ("10.0.0.1", "::1",
#: "fe80::1%eth0")
Address = Tuple[str, int]
# recv_queue= of listen() and connect() when not given: the context's
_CTX_DEFAULT: Any = object()


# ---------------------------------------------------------------------
# errors

def strerror(err: int) -> str:
    """rmsg_strerror() of an errno (sign does not matter)."""
    e = abs(int(err))
    raw: Optional[bytes] = lib.rmsg_strerror(-e)
    s = raw.decode("utf-8", "replace") if raw else ""
    if not s or s == "unknown error":  # not in librmsg's table
        s = os.strerror(e)
    return s


def errno_name(err: int) -> str:
    """The symbolic name of an errno (sign does not matter), e.g.
    "ECONNREFUSED"; "E<number>" for one Python does not know."""
    e = abs(int(err))
    return _errno.errorcode.get(e, "E%d" % e)


def err_name(err: int) -> str:
    """rmsg_err_name(): the errno's symbolic name, "ECONNREFUSED" (sign
    does not matter), "OK" for 0, "UNKNOWN" for no errno."""
    raw: Optional[bytes] = lib.rmsg_err_name(int(err))
    return raw.decode("ascii") if raw else "UNKNOWN"


def stat_info() -> List[Tuple[str, str, int]]:
    """rmsg_stat_count() and rmsg_stat_info(): (name, description,
    flags) of every counter the library keeps, in the order of struct
    rmsg_stats; flags are STAT_COUNTER and STAT_CTX_ONLY of _ffi."""
    out: List[Tuple[str, str, int]] = []
    name, desc = ctypes.c_char_p(), ctypes.c_char_p()
    flags = ctypes.c_uint()
    for i in range(lib.rmsg_stat_count()):
        _check(lib.rmsg_stat_info(i, ctypes.byref(name), ctypes.byref(desc),
                                  ctypes.byref(flags)))
        out.append(((name.value or b"").decode(),
                    (desc.value or b"").decode(), flags.value))
    return out


class RmsgError(OSError):
    """An error from librmsg: .errno is the positive errno, .strerror the
    text of rmsg_strerror(). Handlers may raise it to reply with an error.

    Errors that have a builtin class are raised as a subclass of both
    (so ``except ConnectionRefusedError`` and ``except RmsgError`` each
    catch them): ECONNREFUSED RmsgConnectionRefusedError
    (ConnectionRefusedError), a closed connection ConnectionClosed
    (ConnectionResetError), EACCES and EPERM RmsgPermissionError
    (PermissionError), ETIMEDOUT RmsgTimeoutError (TimeoutError), a bad
    option value RmsgValueError (ValueError). RmsgError(errno) itself
    makes the plain class; rmsg_error(errno) picks the class."""

    #: a connection's failure: why, in words (rmsg_conn_close_reason())
    close_reason_text: Optional[str] = None

    def __init__(self, err: int, text: Optional[str] = None) -> None:
        e = abs(int(err))
        super().__init__(e, text if text is not None else strerror(e))

    def __str__(self) -> str:
        return "[%s] %s" % (errno_name(self.errno or 0), self.strerror)


class RmsgTimeoutError(RmsgError, TimeoutError):
    """ETIMEDOUT: a call's deadline, setup or keepalive. Also an
    asyncio.TimeoutError (the same class as TimeoutError since 3.11)."""


class RmsgConnectionRefusedError(RmsgError, ConnectionRefusedError):
    """ECONNREFUSED: nobody listens there, the listener's accept refused,
    or a listener limit (max_conns, max_pending) turned the peer away."""


class RmsgPermissionError(RmsgError, PermissionError):
    """EACCES or EPERM: authentication failed (a different psk on the
    two sides: rmsg_cfg_set_psk(3)), an accept that refused with EACCES,
    a one-sided access outside what was exported."""


class RmsgValueError(RmsgError, ValueError):
    """EINVAL for a value the caller gave: an option out of range (the
    message names the option: "credits: ..."), a malformed URI."""


class ConnectionClosed(RmsgError, ConnectionResetError):
    """The connection is closed, whatever the call that finds out:
    recv() after the last message, a send, call or one-sided operation
    the close ended (ECANCELED) or started after it (ENOTCONN), or the
    library's ECONNRESET, EPIPE or ESHUTDOWN. .errno is the close reason
    for recv() (ECANCELED for a local close), else the operation's
    status."""


# errno -> class (rmsg_error()); ECANCELED and ENOTCONN are ConnectionClosed
# only where they mean a closed connection (Connection operations)
_ERRNO_CLASSES: Dict[int, type] = {
    _errno.ETIMEDOUT: RmsgTimeoutError,
    _errno.ECONNREFUSED: RmsgConnectionRefusedError,
    _errno.ECONNRESET: ConnectionClosed,
    _errno.EPIPE: ConnectionClosed,
    _errno.ESHUTDOWN: ConnectionClosed,
    _errno.EACCES: RmsgPermissionError,
    _errno.EPERM: RmsgPermissionError,
}


def rmsg_error(err: int, text: Optional[str] = None) -> RmsgError:
    """The exception for errno err (sign does not matter), of the class
    RmsgError's doc names for it."""
    e = abs(int(err))
    cls = _ERRNO_CLASSES.get(e, RmsgError)
    exc: RmsgError = cls(e, text)
    return exc


def _error(rc: int, cls: Optional[type] = None) -> RmsgError:
    if cls is None:
        return rmsg_error(rc)
    err: RmsgError = cls(abs(rc))
    return err


def _check(rc: int) -> None:
    if rc:
        raise _error(rc)


class CloseReason(int):
    """Why a connection closed (Connection.close_reason, and what close()
    and wait_closed() return): the int on_close got, as before (0: this
    side closed it; else a negative errno), readable: .name is the
    errno's name ("ECONNREFUSED"; "" for 0), .text what happened in
    words, and str() gives both ("ECONNREFUSED: connection refused:
    ..."). .text is the library's own reason for this connection when it
    has one (rmsg_conn_close_reason(), when the loaded library exports
    it), else rmsg_strerror() of the errno."""

    name: str
    text: str

    def __new__(cls, code: int, text: Optional[str] = None) -> CloseReason:
        self = super().__new__(cls, int(code))
        self.name = errno_name(code) if code else ""
        if text is None:
            text = strerror(code) if code else "closed by this side"
        self.text = text
        return self

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.text) if self else self.text

    def __repr__(self) -> str:
        return "CloseReason(%d, %r)" % (int(self), self.text)

    def __reduce__(self) -> Any:
        return (CloseReason, (int(self), self.text))


def _close_text(cptr: Optional[int]) -> Optional[str]:
    """The hook for the library's per-connection close reason (issue 35's
    rmsg_conn_close_reason(), declared in _ffi when the library exports
    it), read in on_close while the connection still exists; None
    without it (CloseReason then explains the errno)."""
    fn = _ffi.conn_close_reason
    if fn is None or cptr is None:
        return None
    raw: Optional[bytes] = fn(cptr)
    return raw.decode("utf-8", "replace") if raw else None


def _stats(fn: Any, ptr: Optional[int]) -> Dict[str, int]:
    """rmsg_conn_stats / rmsg_ctx_stats of ptr as a dict."""
    st = _ffi.rmsg_stats()
    rc = fn(ptr, ctypes.byref(st), ctypes.sizeof(st))
    if rc < 0:
        raise _error(rc)
    return {name: int(getattr(st, name)) for name in _ffi.STATS_FIELDS}


def _resolve(fut: asyncio.Future[Any], exc: Optional[BaseException],
             value: Any) -> None:
    """Completes fut unless done; quietly nothing if its loop is closed
    (a context destroyed at exit)."""
    if fut.done():
        return
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)
    except RuntimeError:
        pass


def _uncaught(where: str) -> None:
    log.exception("rmsg: exception in %s (ignored)", where)


# ---------------------------------------------------------------------
# handles: the void *arg of every callback is a small integer naming a
# Python object here. The entry keeps the object alive until the library
# is done with it (op callbacks, on_close).

_handles: Dict[int, Any] = {}
_next_handle = itertools.count(1).__next__


def _register(obj: Any) -> int:
    h = _next_handle()
    _handles[h] = obj
    return h


# ---------------------------------------------------------------------
# buffers handed to the library

def _addr_of(obj: Any, writable: bool) -> Tuple[Optional[int], int, Any]:
    """(address, length, keep) of a contiguous buffer. keep pins the
    memory (a bytearray cannot be resized while a ctypes view exists)."""
    if isinstance(obj, Buffer):
        return obj._addr(), obj.nbytes, obj
    if isinstance(obj, MR):
        obj = obj.buffer
        if isinstance(obj, Buffer):
            return obj._addr(), obj.nbytes, obj
    if isinstance(obj, bytes) and not writable:
        if not obj:
            return None, 0, None
        # c_char_p points into the bytes object itself: no copy
        p = ctypes.c_char_p(obj)
        return ctypes.c_void_p.from_buffer(p).value, len(obj), (p, obj)
    mv = memoryview(obj)
    if not mv.c_contiguous:
        if writable:
            raise ValueError("a destination buffer must be contiguous")
        return _addr_of(mv.tobytes(), False)
    if mv.readonly:
        if writable:
            raise TypeError("a destination buffer must be writable")
        return _addr_of(mv.tobytes(), False)  # copy: no pointer to it
    n = mv.nbytes
    if n == 0:
        return None, 0, None
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    arr = (ctypes.c_char * n).from_buffer(mv)
    return ctypes.addressof(arr), n, arr


class _Iov:
    """An iovec array over one buffer or a list of buffers; .addr is
    its address for the library, which copies the array at once."""

    __slots__ = ("arr", "addr", "n", "keep", "nbytes", "bufs")

    def __init__(self, data: Any, writable: bool = False,
                 max_n: int = IOV_MAX) -> None:
        if type(data) is bytes and not writable:
            # the common case, made cheap: one iovec pointing into the
            # bytes object (which the iovec keeps referenced)
            self.n = 1
            self.nbytes = len(data)
            self.arr: Any = _ffi.iovec_bytes(data, self.nbytes)
            self.addr = ctypes.addressof(self.arr)
            self.keep: Any = None
            self.bufs: Sequence[Buffer] = ()
            return
        if data is None:
            data = []
        elif not isinstance(data, (list, tuple)):
            data = [data]
        if len(data) > max_n:
            raise ValueError("at most %d buffers" % max_n)
        self.n = len(data)
        self.arr = (_ffi.iovec * max(1, self.n))()
        self.addr = ctypes.addressof(self.arr)
        keep: List[Any] = []
        bufs: List[Buffer] = []
        self.nbytes = 0
        for i, d in enumerate(data):
            addr, ln, k = _addr_of(d, writable)
            self.arr[i].iov_base = addr
            self.arr[i].iov_len = ln
            self.nbytes += ln
            if k is not None:
                keep.append(k)
            if isinstance(k, Buffer):
                bufs.append(k)
        self.keep = keep
        self.bufs = bufs


_msg_len = lib.rmsg_msg_len
_msg_data = lib.rmsg_msg_data
_string_at = ctypes.string_at


def _msg_bytes(m: int) -> bytes:
    """The bytes of a struct rmsg_msg, copied."""
    n = _msg_len(m)
    return _string_at(_msg_data(m), n) if n else b""


_CFG_SETTERS = {
    "eager_size": lib.rmsg_cfg_set_eager_size,
    "credits": lib.rmsg_cfg_set_credits,
    "credits_initial": lib.rmsg_cfg_set_credits_initial,
    "send_queue": lib.rmsg_cfg_set_send_queue,
    "busy_poll_us": lib.rmsg_cfg_set_busy_poll_us,
    "max_msg_size": lib.rmsg_cfg_set_max_msg_size,
    "timeout_ms": lib.rmsg_cfg_set_timeout_ms,
    "reg_limit": lib.rmsg_cfg_set_reg_limit,
    "tcp_rx_limit": lib.rmsg_cfg_set_tcp_rx_limit,
    "tcp_window": lib.rmsg_cfg_set_tcp_window,
    "max_conns": lib.rmsg_cfg_set_max_conns,
    "max_pending": lib.rmsg_cfg_set_max_pending,
    "keepalive_ms": lib.rmsg_cfg_set_keepalive_ms,
    "keepalive_misses": lib.rmsg_cfg_set_keepalive_misses,
    "resume_ms": lib.rmsg_cfg_set_resume_ms,
}


def _check_option(name: str, value: Any, rc: int) -> None:
    """rc of an rmsg_cfg_set_NAME(): EINVAL (a value out of range) as a
    ValueError that names the option and its page."""
    if rc == -_errno.EINVAL:
        raise RmsgValueError(_errno.EINVAL, "%s: %s is not a valid value "
                             "(rmsg_cfg_set_%s(3) gives the range)"
                             % (name, value, name))
    _check(rc)


def _make_cfg(opts: Dict[str, Any], log_level: Optional[int] = None) -> int:
    """An rmsg_cfg from keyword options; the caller destroys it."""
    p = ctypes.c_void_p()
    _check(lib.rmsg_cfg_create(ctypes.byref(p)))
    cfg = p.value
    assert cfg is not None
    try:
        for k, v in opts.items():
            if v is None:
                continue
            if k in ("private_data", "psk"):
                # psk: the pre-shared key (16..64 bytes): both sides
                # must hold it (rmsg_cfg_set_psk(3))
                try:
                    v = bytes(v)
                except TypeError:
                    raise TypeError("%s: expected bytes, got %s"
                                    % (k, type(v).__name__)) from None
                fn = (lib.rmsg_cfg_set_private_data if k == "private_data"
                      else lib.rmsg_cfg_set_psk)
                _check_option(k, "%d bytes" % len(v), fn(cfg, v, len(v)))
                continue
            setter = _CFG_SETTERS.get(k)
            if setter is None:
                raise TypeError("unknown option %r" % k)
            if isinstance(v, bool) or not isinstance(v, int):
                try:
                    v = int(v)  # an int-like value (numpy, IntEnum)
                except (TypeError, ValueError):
                    raise TypeError("%s: expected an int, got %s"
                                    % (k, type(v).__name__)) from None
            # ctypes would cut a value too wide for the C parameter
            bits = 8 * ctypes.sizeof(setter.argtypes[1])
            if v < 0 or v >= 1 << bits:
                _check_option(k, v, -_errno.EINVAL)
            _check_option(k, v, setter(cfg, v))
        if log_level is not None:
            _check(lib.rmsg_cfg_set_log(cfg, log_level, _log_cb, None))
    except BaseException:
        lib.rmsg_cfg_destroy(cfg)
        raise
    return cfg


def _recv_bound(v: Optional[int]) -> Optional[int]:
    if v is None:
        return None
    v = int(v)
    if v < 0:
        raise ValueError("recv_queue must be at least 0 (or None)")
    return v


def _rmsg_log_level() -> int:
    lvl = log.getEffectiveLevel()
    if lvl <= logging.DEBUG:
        return _ffi.RMSG_LOG_DEBUG
    if lvl <= logging.INFO:
        return _ffi.RMSG_LOG_INFO
    if lvl <= logging.WARNING:
        return _ffi.RMSG_LOG_WARN
    return _ffi.RMSG_LOG_ERROR


_PY_LEVEL = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO,
             3: logging.DEBUG}


# ---------------------------------------------------------------------
# C callbacks: one ctypes object each, alive as long as the module. They
# run inside rmsg_ctx_progress() (or rmsg_ctx_destroy()), on the asyncio
# loop's thread.

def _log_cb_py(level: int, line: bytes, arg: Optional[int]) -> None:
    try:
        log.log(_PY_LEVEL.get(level, logging.ERROR), "%s",
                line.decode("utf-8", "replace"))
    except BaseException:
        pass


_log_cb = _ffi.LOG_CB(_log_cb_py)


def _on_established_py(c: int, h: int) -> None:
    conn = _handles.get(h)
    if conn is not None:
        try:
            conn._established_cb()
        except BaseException:
            _uncaught("on_established")


_on_established = _ffi.ESTABLISHED_CB(_on_established_py)


def _on_msg_py(c: int, m: int, h: int) -> None:
    conn = _handles.get(h)
    if conn is not None:
        try:
            conn._msg_cb(m)
        except BaseException:
            _uncaught("on_msg")


_on_msg = _ffi.MSG_CB(_on_msg_py)


def _on_imm_py(c: int, imm: int, ln: int, h: int) -> None:
    conn = _handles.get(h)
    if conn is not None:
        try:
            conn._imm_cb(imm, ln)
        except BaseException:
            _uncaught("on_imm")


_on_imm = _ffi.IMM_CB(_on_imm_py)


def _on_writable_py(c: int, h: int) -> None:
    conn = _handles.get(h)
    if conn is not None:
        try:
            conn._writable_cb()
        except BaseException:
            _uncaught("on_writable")


_on_writable = _ffi.WRITABLE_CB(_on_writable_py)


def _on_close_py(c: int, reason: int, h: int) -> None:
    conn = _handles.pop(h, None)
    if conn is not None:
        try:
            conn._close_cb(reason)
        except BaseException:
            _uncaught("on_close")


_on_close = _ffi.CLOSE_CB(_on_close_py)


def _on_accept_py(lp: int, c: int, pdata: Optional[int], plen: int,
               h: int) -> int:
    listener = _handles.get(h)
    if listener is None:
        return -_errno.ECONNREFUSED
    try:
        rc: int = listener._accept_cb(c, ctypes.string_at(pdata, plen)
                                      if plen and pdata else b"")
        return rc
    except BaseException:
        _uncaught("accept")
        return -_errno.ECONNREFUSED


_on_accept = _ffi.ACCEPT_CB(_on_accept_py)


def _on_pick_py(peer: Optional[int], n: int, h: int) -> int:
    listener = _handles.get(h)
    pick = listener._pick if listener is not None else None
    if pick is None:
        return n
    try:
        addr = None
        if peer:
            fam = int.from_bytes(ctypes.string_at(peer, 2), sys.byteorder)
            size = 28 if fam == socket.AF_INET6 else 16
            addr = _address(ctypes.string_at(peer, size).ljust(28, b"\0"))
        i = int(pick(addr, n))
        return i if 0 <= i < n else n
    except BaseException:
        _uncaught("pick")
        return n  # refused


_on_pick = _ffi.PICK_CB(_on_pick_py)


def _on_done_py(c: int, status: int, h: int) -> None:
    op = _handles.pop(h, None)
    if op is not None:
        op.conn._op_done(op, status, None)


_on_done = _ffi.DONE_CB(_on_done_py)


def _on_reply_py(c: int, status: int, m: int, h: int) -> None:
    op = _handles.pop(h, None)
    if op is not None:
        data = None
        if status == 0:
            n = _msg_len(m)
            data = _string_at(_msg_data(m), n) if n else b""
        op.conn._op_done(op, status, data)


_on_reply = _ffi.REPLY_CB(_on_reply_py)


def _on_request_py(c: int, req: int, m: int, h: int) -> None:
    entry = _handles.get(h)
    if entry is None:
        lib.rmsg_reply_error(req, -_errno.ENOSYS)
        return
    ctx, func = entry
    ctx._request_cb(c, req, func, _msg_bytes(m))


_on_request = _ffi.HANDLER_CB(_on_request_py)


# a NULL handler: rmsg_handle() with it removes one
_NO_HANDLER = ctypes.cast(0, _ffi.HANDLER_CB)
_CONN_OPS = _ffi.conn_ops(_on_established, _on_msg, _on_imm, _on_writable,
                          _on_close)

_live_contexts: weakref.WeakSet[Context] = weakref.WeakSet()
# struct rmsg_ctx * -> its Context: the context a group listener handed
# a connection to (rmsg_conn_ctx(3))
_ctx_by_ptr: Dict[int, Context] = {}


@atexit.register
def _close_all() -> None:
    for ctx in list(_live_contexts):
        try:
            ctx.close_sync()
        except BaseException:
            pass


# ---------------------------------------------------------------------
# context

class Context:
    """A librmsg context driven by the running asyncio loop (no thread of
    its own: rmsg_ctx_create_fd(3), watched with loop.add_reader()).

    Options (all optional) set the context's rmsg_cfg, one per
    rmsg_cfg_set_NAME(3) (a value out of range raises RmsgValueError, a
    ValueError naming the option): eager_size, credits,
    credits_initial, send_queue, busy_poll_us, max_msg_size, private_data,
    timeout_ms, reg_limit, tcp_rx_limit, tcp_window, keepalive_ms,
    keepalive_misses, resume_ms (both ends: a connection survives a
    broken transport, over TCP, shm:// or RDMA;
    rmsg_cfg_set_resume_ms(3)),
    psk (a pre-shared key of 16 to 64 bytes: the peer must hold the same
    one, else the connection fails with EACCES; rmsg_cfg_set_psk(3))
    (max_conns and max_pending apply to listeners). recv_queue (default
    RECV_QUEUE_DEFAULT; None: unbounded) is the bound of each
    connection's receive queue (see Connection.recv()).
    Use ``async with Context() as ctx`` or ``await ctx.close()``. Use it
    from the loop's thread only (as any asyncio object).
    """

    def __init__(self, *, loop: Optional[asyncio.AbstractEventLoop] = None,
                 recv_queue: Optional[int] = RECV_QUEUE_DEFAULT,
                 **options: Any) -> None:
        self._aloop = loop or asyncio.get_running_loop()
        self._recv_queue = _recv_bound(recv_queue)
        self._ctx: Optional[int] = None
        self._closing = False
        self._in_progress = False
        self._conns: Dict[int, Connection] = {}  # rmsg_conn * -> Connection
        self._reqs: Dict[int, bool] = {}  # rmsg_req * of unanswered requests
        self._listeners: Set[Listener] = set()
        # (mr *, pin) whose dereg said EBUSY
        self._mr_zombies: List[Tuple[int, Any]] = []
        self._handler_handles: Dict[int, int] = {}  # method -> handle
        self._buffers: weakref.WeakSet[Buffer] = weakref.WeakSet()
        self._mrs: weakref.WeakSet[MR] = weakref.WeakSet()
        self._closed_fut: asyncio.Future[None] = self._aloop.create_future()
        self._tid = threading.get_ident()
        cfg = _make_cfg(options, _rmsg_log_level())
        p = ctypes.c_void_p()
        try:
            rc = lib.rmsg_ctx_create_fd(cfg, ctypes.byref(p))
        finally:
            lib.rmsg_cfg_destroy(cfg)
        _check(rc)
        fd = lib.rmsg_ctx_fd(p.value)
        if fd < 0:
            lib.rmsg_ctx_destroy(p.value)
            raise _error(fd)
        self._ctx = p.value
        self._fd: int = fd
        try:
            self._aloop.add_reader(fd, self._progress)
        except BaseException:
            self._ctx = None
            lib.rmsg_ctx_destroy(p.value)
            raise
        _live_contexts.add(self)
        if p.value:
            _ctx_by_ptr[p.value] = self

    # -- driving the library -------------------------------------------

    def _progress(self) -> None:
        """The reader of rmsg_ctx_fd(): runs what is ready, callbacks
        included. The descriptor is level-triggered: what remains wakes
        the loop again."""
        ctxp = self._ctx
        if ctxp is None:
            return
        self._in_progress = True
        try:
            rc = lib.rmsg_ctx_progress(ctxp)
        finally:
            self._in_progress = False
        if rc < 0:
            log.error("rmsg_ctx_progress: %s", strerror(rc))
        if self._closing:
            self._destroy()  # close() asked from a callback

    def _live(self) -> int:
        """The context's pointer, or ESHUTDOWN once close() began."""
        ctxp = self._ctx
        if ctxp is None or self._closing:
            raise RmsgError(_errno.ESHUTDOWN, "context closed")
        return ctxp

    def _destroy(self) -> None:
        ctxp = self._ctx
        if ctxp is None:
            return
        if self._in_progress:
            return  # inside a callback: _progress() does it on return
        _live_contexts.discard(self)
        _ctx_by_ptr.pop(ctxp, None)
        self._aloop.remove_reader(self._fd)
        # requests still waiting for an async handler: answer them now,
        # a later reply finds them gone
        for req in list(self._reqs):
            lib.rmsg_reply_error(req, -_errno.ECANCELED)
        self._reqs.clear()
        for conn in list(self._conns.values()):
            conn._fail_blocked(-_errno.ECANCELED)
            conn._unhold_all()  # held messages die with the context
        for b in list(self._buffers):
            b._ptr = None
        for m in list(self._mrs):
            m._mr = None
        conns = list(self._conns.values())
        # closes listeners, aborts connections: their callbacks run here,
        # and see the context gone (a close_sync() from one of them does
        # nothing more, a call raises ESHUTDOWN)
        self._ctx = None
        rc = lib.rmsg_ctx_destroy(ctxp)
        for conn in conns:
            conn._held.clear()  # (none: _msg_cb copies while closing)
        if rc:
            log.error("rmsg_ctx_destroy: %s", strerror(rc))
        for listener in list(self._listeners):
            listener._closed_cb()
        self._listeners.clear()
        self._mr_zombies.clear()
        _resolve(self._closed_fut, None, None)

    def _retry_zombies(self) -> None:
        keep = []
        for mr, pin in self._mr_zombies:
            if lib.rmsg_mr_dereg(mr) == -_errno.EBUSY:
                keep.append((mr, pin))
        self._mr_zombies = keep

    # -- public ----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closing

    @property
    def fd(self) -> int:
        """rmsg_ctx_fd(3): the descriptor the loop watches (read only)."""
        return self._fd

    def close_sync(self) -> None:
        """close() for non-async code (and atexit): listeners close,
        connections are aborted, their futures complete, now (or, called
        from inside a library callback, when that callback returns)."""
        self._closing = True
        self._destroy()

    async def close(self) -> None:
        """Destroy the context: listeners close, connections are aborted
        (pending operations fail with ECANCELED, on_close reason
        ECANCELED), buffers and regions become invalid."""
        self.close_sync()
        await asyncio.shield(self._closed_fut)

    async def __aenter__(self) -> Context:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def serve_forever(self) -> None:
        """Run until cancelled, then close the context (an RPC server's
        main: handlers and listeners do the work). Returns if the context
        is closed otherwise."""
        try:
            await asyncio.shield(self._closed_fut)
        except asyncio.CancelledError:
            await self.close()
            raise

    def listen(self, uri: str, *, accept: Optional[AcceptFunc] = None,
               recv_queue: Optional[int] = _CTX_DEFAULT,
               **options: Any) -> Listener:
        """Listen at "tcp://host:port", "rdma://host:port",
        "shm://host:port" (two processes on this host, over shared memory;
        host an address of this host), "auto://host:port" (shm, RDMA and
        TCP on one port: an auto:// client on this host comes in over
        shared memory) or "rdma+tcp://host:port" (RDMA and TCP); port 0
        picks one. Returns a Listener, which may also be awaited
        (``async with await ctx.listen(uri) as l``).

        accept(peer_private_data: bytes) or, if it takes two arguments,
        accept(peer_private_data, peer_addr) runs for each incoming
        connection, inside the library's callback, and must be quick;
        peer_addr is the client's (host, port), as Connection.peer_addr
        (an IPv4 client of a listener on [::] shows as
        "::ffff:127.0.0.1"; rmsg_conn_peer_addr(3)). Return None/True to
        accept, bytes to accept with that private data, False to reject
        with ECONNREFUSED, or raise RmsgError(errno) to reject with
        errno. recv_queue: the receive queue bound of the
        accepted connections (default: the context's). options: a cfg for
        accepted connections (see Context)."""
        ctxp = self._live()
        bound = self._recv_queue if recv_queue is _CTX_DEFAULT else \
            _recv_bound(recv_queue)
        listener = Listener(self, uri, accept, bound)
        cfg = _make_cfg(options, _rmsg_log_level()) if options else None
        p = ctypes.c_void_p()
        try:
            rc = lib.rmsg_listen(ctxp, uri.encode(), cfg,
                                 ctypes.byref(_CONN_OPS), _on_accept,
                                 listener._handle, ctypes.byref(p))
        finally:
            if cfg:
                lib.rmsg_cfg_destroy(cfg)
        if rc:
            _handles.pop(listener._handle, None)
            raise _error(rc)
        port = ctypes.c_uint16()
        lib.rmsg_listener_port(p.value, ctypes.byref(port))
        listener._lp = p.value
        listener.port = port.value
        self._listeners.add(listener)
        return listener

    async def connect(self, uri: str, *,
                      private_data: Optional[BytesLike] = None,
                      recv_queue: Optional[int] = _CTX_DEFAULT,
                      **options: Any) -> Connection:
        """Open a connection and wait until it is established. Raises
        RmsgError with the close reason (e.g. ECONNREFUSED) on failure.
        uri: as for listen(); auto:// runs over shared memory when the
        listener is on this host and listens with auto:// or shm://,
        else over RDMA, else TCP (rdma+tcp://: RDMA, else TCP, with no
        shared-memory step). Connection.transport says which.
        recv_queue: its receive queue bound (default: the context's).
        options: a cfg for this connection (see Context)."""
        ctxp = self._live()
        if private_data is not None:
            options["private_data"] = private_data
        bound = self._recv_queue if recv_queue is _CTX_DEFAULT else \
            _recv_bound(recv_queue)
        conn = Connection(self, None, bound)
        p = ctypes.c_void_p()
        try:
            cfg = _make_cfg(options, _rmsg_log_level()) if options else None
            try:
                rc = lib.rmsg_connect(ctxp, uri.encode(), cfg,
                                      ctypes.byref(_CONN_OPS), conn._handle,
                                      ctypes.byref(p))
            finally:
                if cfg:
                    lib.rmsg_cfg_destroy(cfg)
            _check(rc)
        except BaseException:
            _handles.pop(conn._handle, None)
            raise
        assert p.value is not None
        conn._cptr = p.value
        self._conns[p.value] = conn
        try:
            await asyncio.shield(conn._established)
        except asyncio.CancelledError:
            conn._close_nowait()
            raise
        return conn

    async def stats(self) -> Dict[str, int]:
        """The context's counters (rmsg_ctx_stats(3)): the sums over all
        its connections, live and closed, and the context-only ones
        (conns_opened, conns_accepted, conns_refused, conns_closed), as a
        dict. Awaitable (for compatibility: it does not wait)."""
        return _stats(lib.rmsg_ctx_stats, self._live())

    def stats_export(self, format: str = "prometheus") -> str:
        """rmsg_ctx_stats_export(): the context's counters and those of
        each live connection, as the Prometheus text format
        ("prometheus") or one JSON object ("json")."""
        fmt = {"prometheus": _ffi.STATS_PROMETHEUS,
               "json": _ffi.STATS_JSON}.get(format)
        if fmt is None:
            raise ValueError("stats_export: format %r: 'prometheus' or "
                             "'json'" % (format,))
        ptr = self._live()
        # measured, then written in the same turn of the loop
        n = lib.rmsg_ctx_stats_export(ptr, fmt, None, 0)
        _check(min(n, 0))
        buf = ctypes.create_string_buffer(n + 1)
        n = lib.rmsg_ctx_stats_export(ptr, fmt, buf, n + 1)
        _check(min(n, 0))
        return buf.value.decode("utf-8", "replace")

    @overload
    def handle(self, method: int) -> Callable[[HandlerT], HandlerT]: ...

    @overload
    def handle(self, method: int, func: HandlerT) -> HandlerT: ...

    def handle(self, method: int, func: Optional[Handler] = None) -> Any:
        """Serve RPC method number `method` on every connection with
        func(conn, request: bytes). func runs on the asyncio loop's
        thread: a plain function inside the library's callback (its reply
        goes out in the same pass), a coroutine function as a task. It
        returns the reply (bytes-like, a list of them, or None for
        empty); raising RmsgError/OSError replies with its errno, any
        other exception replies EIO. func=None removes the handler.
        Usable as a decorator: @ctx.handle(1)."""
        method = int(method)

        def install(f: Optional[Handler]) -> Optional[Handler]:
            ctxp = self._live()
            h = _register((self, f)) if f is not None else None
            cb = _on_request if f is not None else _NO_HANDLER
            rc = lib.rmsg_handle(ctxp, method, cb, h)
            if rc:
                if h:
                    _handles.pop(h, None)
                raise _error(rc)
            old = self._handler_handles.pop(method, None)
            if old:
                _handles.pop(old, None)
            if h:
                self._handler_handles[method] = h
            return f
        if func is None:
            return install
        install(func)
        return func

    def unhandle(self, method: int) -> None:
        """Remove the handler of a method."""
        _check(lib.rmsg_handle(self._live(), int(method),
                               _NO_HANDLER, None))
        old = self._handler_handles.pop(int(method), None)
        if old:
            _handles.pop(old, None)

    def _request_cb(self, c: int, req: int, func: Handler,
                    data: bytes) -> None:
        self._reqs[req] = True
        try:
            r = func(self._conns.get(c), data)  # type: ignore[arg-type]
        except BaseException as e:
            self._reply(req, None, e)
            return
        if type(r) is bytes and self._reqs.pop(req, False):
            # the common answer, inline: one iovec over the bytes (the
            # library copies a reply before rmsg_reply() returns)
            iov = _ffi.iovec_bytes(r, len(r))
            rc = lib.rmsg_reply(req, ctypes.addressof(iov), 1)
            if rc:
                self._reply_failed(req, rc)
        elif r is None or type(r) is bytes:
            self._reply(req, r, None)
        elif inspect.isawaitable(r):
            task: asyncio.Future[Any] = asyncio.ensure_future(
                r, loop=self._aloop)

            def done(t: asyncio.Future[Any]) -> None:
                if t.cancelled():
                    self._reply(req, None, RmsgError(_errno.ECANCELED))
                elif t.exception() is not None:
                    self._reply(req, None, t.exception())
                else:
                    self._reply(req, t.result(), None)
            task.add_done_callback(done)
        else:
            self._reply(req, r, None)

    def _reply(self, req: int, result: Any,
               exc: Optional[BaseException]) -> None:
        if self._reqs.pop(req, None) is None:
            return  # answered by the context's destroy
        iov: Optional[_Iov] = None
        err = 0
        if exc is None and result is None:
            rc = lib.rmsg_reply(req, None, 0)  # an empty reply
        elif exc is None:
            try:
                iov = _Iov(result, max_n=IOV_MAX - 1)
            except BaseException as e:
                exc = e
        if exc is not None:
            e_no = getattr(exc, "errno", None)
            if not isinstance(exc, OSError) or not e_no or \
                    not 0 < e_no <= 4095:
                if not isinstance(exc, (OSError, asyncio.CancelledError)):
                    log.error("rmsg: handler failed", exc_info=exc)
                e_no = _errno.EIO
            err = e_no
        if iov is not None:
            rc = lib.rmsg_reply(req, iov.addr, iov.n)
        elif err:
            rc = lib.rmsg_reply_error(req, -err)
        if rc:
            self._reply_failed(req, rc)

    def _reply_failed(self, req: int, rc: int) -> None:
        if rc == -_errno.ENOMEM or rc == -_errno.EINVAL:
            # the request is still ours: give up with an error
            if lib.rmsg_reply_error(req, rc) in (-_errno.ENOMEM,
                                                 -_errno.EINVAL):
                log.error("rmsg: cannot answer a request: %s",
                          strerror(rc))

    def buf_alloc(self, size: int) -> Buffer:
        """Registered memory from the context's pools (sent without a
        copy). Returns a Buffer; free() it or let it be collected."""
        if size < 1:
            raise ValueError("size must be at least 1")
        p = ctypes.c_void_p()
        _check(lib.rmsg_buf_alloc(self._live(), size, ctypes.byref(p)))
        assert p.value is not None
        b = Buffer(self, p.value, size)
        self._buffers.add(b)
        return b

    def mr_reg(self, buffer: WritableBuffer,
               access: int = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ) -> MR:
        """Register a writable buffer (bytearray, mmap, Buffer, ...) that
        peers may access; the buffer stays pinned until dereg()."""
        addr, n, pin = _addr_of(buffer, True)
        if not n:
            raise ValueError("cannot register an empty buffer")
        p = ctypes.c_void_p()
        _check(lib.rmsg_mr_reg(self._live(), addr, n, int(access),
                               ctypes.byref(p)))
        assert p.value is not None
        m = MR(self, p.value, buffer, pin, int(access))
        self._mrs.add(m)
        return m

    def _on_own_thread(self) -> bool:
        return threading.get_ident() == self._tid

    def _later(self, fn: Callable[[], Any]) -> None:
        """fn() now on the loop's thread, else handed to it (__del__ may
        run on any thread, from the garbage collector)."""
        if self._on_own_thread():
            fn()
        else:
            try:
                self._aloop.call_soon_threadsafe(fn)
            except RuntimeError:
                pass  # the loop is closed


# ---------------------------------------------------------------------
# listeners

def _takes_two(fn: Any) -> bool:
    """Whether fn can be called with two positional arguments (listen()'s
    accept(private_data, peer_addr)) rather than one."""
    if fn is None:
        return False
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    n = 0
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n >= 2


class _Member:
    """A context of a group listener, its connections and its waiter."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queue: Deque[Connection] = collections.deque()
        self.waiter: Optional[asyncio.Future[None]] = None

    def wake(self) -> None:
        w = self.waiter
        if w is not None:
            self.waiter = None
            _resolve(w, None, None)


def listen_group(contexts: Sequence[Context], uri: str, *,
                 accept: Optional[AcceptFunc] = None,
                 pick: Optional[Callable[[Optional[Address], int], int]]
                 = None,
                 recv_queue: Optional[int] = _CTX_DEFAULT,
                 **options: Any) -> Listener:
    """One address served by several contexts (rmsg_listen_group(3)),
    typically each on its own thread with its own asyncio loop.
    contexts[0] is the home: call this on its loop's thread; it owns the
    listener (close it there). Each new connection is handed to one
    context: pick(peer_addr, n) (on the home's thread; None: round-robin)
    returns its index, n or more refuses the peer. accept (as for
    Context.listen()) and every callback of the connection run on the
    chosen context's thread, and ``await listener.accept()`` (or ``async
    for``, serve_forever()) awaited on a context's loop returns the
    connections of that context. recv_queue: default each context's.
    options: a cfg for the accepted connections (see Context)."""
    ctxs = list(contexts)
    if not 1 <= len(ctxs) <= _ffi.RMSG_GROUP_MAX or \
            len(set(map(id, ctxs))) != len(ctxs):
        raise ValueError("contexts: 1 to %d distinct Context objects"
                         % _ffi.RMSG_GROUP_MAX)
    home = ctxs[0]
    if threading.get_ident() != home._tid:
        raise RuntimeError("listen_group() runs on the thread of "
                           "contexts[0], the home")
    ptrs = (ctypes.c_void_p * len(ctxs))(*[c._live() for c in ctxs])
    listener = Listener(home, uri, accept, None)
    listener._members = {c: _Member(c) for c in ctxs}
    listener._pick = pick
    if recv_queue is _CTX_DEFAULT:
        listener._recv_default = True
    else:
        listener._recv_queue = _recv_bound(recv_queue)
    cfg = _make_cfg(options, _rmsg_log_level()) if options else None
    p = ctypes.c_void_p()
    try:
        rc = lib.rmsg_listen_group(ptrs, len(ctxs), uri.encode(), cfg,
                                   ctypes.byref(_CONN_OPS), _on_accept,
                                   _on_pick if pick is not None else
                                   ctypes.cast(0, _ffi.PICK_CB),
                                   listener._handle,
                                   ctypes.byref(p))
    finally:
        if cfg:
            lib.rmsg_cfg_destroy(cfg)
    if rc:
        _handles.pop(listener._handle, None)
        raise _error(rc)
    port = ctypes.c_uint16()
    lib.rmsg_listener_port(p.value, ctypes.byref(port))
    listener._lp = p.value
    listener.port = port.value
    home._listeners.add(listener)
    return listener


class Listener:
    """Accepts connections; ``await l.accept()``, ``async for conn in
    l`` or ``await l.serve_forever(per_conn)``. Connections are delivered
    once established. ``async with await ctx.listen(uri) as l:`` closes
    it at the end of the block."""

    uri_requested: str
    #: the bound port (once listening)
    port: Optional[int]

    def __init__(self, ctx: Context, uri: str,
                 accept: Optional[AcceptFunc],
                 recv_queue: Optional[int] = RECV_QUEUE_DEFAULT) -> None:
        self._ctx = ctx
        self.uri_requested = uri
        self._accept_fn = accept
        self._accept_peer = _takes_two(accept)
        # a group listener (listen_group()): per member context, the
        # connections handed to it and its accept() waiter, on its thread
        self._members: Optional[Dict[Context, _Member]] = None
        self._pick: Optional[Callable[[Optional[Address], int], int]] = None
        self._recv_default = False  # each member context's recv_queue
        self._recv_queue = recv_queue
        self._handle = _register(self)
        self._lp: Optional[int] = None
        self.port = None
        self._queue: Deque[Connection] = collections.deque()
        self._waiter: Optional[asyncio.Future[None]] = None
        self._closed = False

    @property
    def uri(self) -> str:
        """The URI with the bound port, for clients to connect to."""
        head, _, _ = self.uri_requested.rpartition(":")
        assert self.port is not None  # set before listen() returns
        return "%s:%d" % (head, self.port)

    @property
    def closed(self) -> bool:
        return self._closed

    def _accept_cb(self, c: int, pdata: bytes) -> int:
        res: Union[None, bool, BytesLike] = None
        if self._accept_fn is not None:
            try:
                if self._accept_peer:
                    buf = ctypes.create_string_buffer(
                        _ffi.SOCKADDR_STORAGE_SIZE)
                    peer = _address(buf.raw) if lib.rmsg_conn_peer_addr(
                        c, buf) == 0 else None
                    res = self._accept_fn(pdata, peer)  # type: ignore
                else:
                    res = self._accept_fn(pdata)  # type: ignore
            except OSError as e:
                return -(e.errno or _errno.ECONNREFUSED)
            if res is False:
                return -_errno.ECONNREFUSED
        ctx = self._ctx
        bound = self._recv_queue
        if self._members is not None:
            # runs on the thread of the context the group picked
            member = _ctx_by_ptr.get(lib.rmsg_conn_ctx(c) or 0)
            if member is None or member not in self._members:
                return -_errno.ECONNREFUSED
            ctx = member
            if self._recv_default:
                bound = ctx._recv_queue
        conn = Connection(ctx, self, bound)
        conn.peer_data = pdata
        if isinstance(res, (bytes, bytearray, memoryview)):
            res = bytes(res)
            rc: int = lib.rmsg_conn_set_private_data(c, res, len(res))
            if rc:
                _handles.pop(conn._handle, None)
                return rc
        lib.rmsg_conn_set_arg(c, conn._handle)
        conn._cptr = c
        ctx._conns[c] = conn
        return 0

    def _closed_cb(self) -> None:
        _handles.pop(self._handle, None)
        self._lp = None
        self._push(None)

    def _push(self, conn: Optional[Connection]) -> None:
        if self._members is not None:
            self._push_member(conn)
            return
        if conn is None:
            self._closed = True
        else:
            self._queue.append(conn)
        w = self._waiter
        if w is not None:
            self._waiter = None
            _resolve(w, None, None)

    def _push_member(self, conn: Optional[Connection]) -> None:
        """A group listener: conn to its context's queue (on that
        context's thread), or the close (on the home's) to every
        member, each woken on its own loop."""
        assert self._members is not None
        if conn is not None:
            m = self._members[conn._ctx]
            m.queue.append(conn)
            m.wake()
            return
        self._closed = True
        for m in self._members.values():
            if m.ctx._aloop is self._ctx._aloop:
                m.wake()
                continue
            try:
                m.ctx._aloop.call_soon_threadsafe(m.wake)
            except RuntimeError:
                pass  # that loop is closed: nobody waits there

    async def accept(self) -> Connection:
        """The next established connection; RmsgError(ESHUTDOWN) once the
        listener is closed. For a group listener (listen_group()): the
        next connection handed to the context of the running loop."""
        if self._members is not None:
            loop = asyncio.get_running_loop()
            m = next((x for x in self._members.values()
                      if x.ctx._aloop is loop), None)
            if m is None:
                raise RuntimeError("accept() of a group listener runs on "
                                   "the loop of one of its contexts")
            while not m.queue:
                if self._closed:
                    raise RmsgError(_errno.ESHUTDOWN, "listener closed")
                m.waiter = loop.create_future()
                await m.waiter
            return m.queue.popleft()
        while not self._queue:
            if self._closed:
                raise RmsgError(_errno.ESHUTDOWN, "listener closed")
            self._waiter = self._ctx._aloop.create_future()
            await self._waiter
        return self._queue.popleft()

    def __aiter__(self) -> Listener:
        return self

    async def __anext__(self) -> Connection:
        try:
            return await self.accept()
        except RmsgError:
            raise StopAsyncIteration

    def close(self) -> None:
        """Stop accepting; accepted connections stay open."""
        if self._lp is None or self._ctx._ctx is None:
            return
        lib.rmsg_listener_close(self._lp)
        self._ctx._listeners.discard(self)
        self._closed_cb()

    def __await__(self) -> Generator[Any, None, Listener]:
        """``await ctx.listen(uri)`` is the listener itself (it listens
        once listen() returned)."""
        return self
        yield  # unreachable: makes this a generator

    async def __aenter__(self) -> Listener:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    async def serve_forever(self,
                            per_conn: Optional[ConnHandler] = None) -> None:
        """Accept connections until cancelled; each runs per_conn(conn)
        in a task of its own (None: connections are only kept, for RPC
        handlers to serve). Cancelling closes the listener, cancels the
        tasks it started and waits for them. Returns when the listener
        is closed otherwise (close(), the context's close)."""
        tasks: Set[asyncio.Future[Any]] = set()
        try:
            while True:
                try:
                    conn = await self.accept()
                except RmsgError:
                    return
                if per_conn is not None:
                    t = asyncio.ensure_future(per_conn(conn),
                                              loop=self._ctx._aloop)
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
        except asyncio.CancelledError:
            self.close()
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            raise


# ---------------------------------------------------------------------
# connections and their operations

class _Op:
    __slots__ = ("conn", "fut", "iov", "start", "handle", "call_id",
                 "started", "finished")

    def __init__(self, conn: Connection, fut: asyncio.Future[Any],
                 iov: Optional[_Iov],
                 start: Callable[[_Op], int]) -> None:
        self.conn = conn
        self.fut = fut
        self.iov = iov
        self.start = start
        self.handle: Optional[int] = None
        self.call_id: Optional[int] = None
        self.started = False
        self.finished = False


class _CallFuture(asyncio.Future):  # type: ignore[type-arg]
    """call()'s future: cancelling it cancels the call
    (rmsg_call_cancel), without a done callback on every call."""

    _op: Optional[_Op] = None

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        op = self._op
        if op is not None:
            op.conn._cancel_call(op)
        return True


def _address(buf: bytes) -> Optional[Address]:
    """(host, port) of a struct sockaddr_storage's bytes, for AF_INET and
    AF_INET6; None for another family."""
    family = int.from_bytes(buf[0:2], sys.byteorder)
    port = int.from_bytes(buf[2:4], "big")
    if family == socket.AF_INET:
        return (socket.inet_ntop(socket.AF_INET, buf[4:8]), port)
    if family == socket.AF_INET6:
        host = socket.inet_ntop(socket.AF_INET6, buf[8:24])
        scope = int.from_bytes(buf[24:28], sys.byteorder)
        if scope:
            try:
                host += "%" + socket.if_indextoname(scope)
            except OSError:
                host += "%%%d" % scope
        return (host, port)
    return None


class Connection:
    """One librmsg connection. Messages arrive as bytes, in a receive
    queue of at most recv_queue messages (see recv())."""

    listener: Optional[Listener]
    transport: str
    fallback_reason: Optional[str]
    peer_data: bytes
    #: None while open; then why it closed (an int: 0 or -errno)
    close_reason: Optional[CloseReason]
    #: why it closed, in words (rmsg_conn_close_reason()), once closed
    close_reason_text: Optional[str]
    on_imm: Optional[Callable[[int, int], Any]]
    #: the bound of the receive queue, in messages (None: unbounded)
    recv_queue: Optional[int]

    def __init__(self, ctx: Context, listener: Optional[Listener],
                 recv_queue: Optional[int] = RECV_QUEUE_DEFAULT) -> None:
        self._ctx: Context = ctx
        self.listener = listener
        self.recv_queue = recv_queue
        self._handle = _register(self)
        self._cptr: Optional[int] = None  # NULL once closed
        self._last_stats: Optional[Dict[str, int]] = None
        self._blocked: Deque[_Op] = collections.deque()  # after EAGAIN
        self._cid = ctypes.c_uint64()  # rmsg_call()'s call id goes here
        self._cid_ref = ctypes.byref(self._cid)
        aloop = ctx._aloop
        self._established: asyncio.Future[None] = aloop.create_future()
        self._closed: asyncio.Future[int] = aloop.create_future()
        self.transport = "none"
        self.fallback_reason = None
        self.peer_data = b""
        self._peer_addr: Optional[Address] = None
        self._local_addr: Optional[Address] = None
        self.close_reason = None
        self.close_reason_text = None
        self._msgs: Deque[bytes] = collections.deque()
        # struct rmsg_msg * held past the bound, oldest first
        self._held: Deque[int] = collections.deque()
        self._msg_waiter: Optional[asyncio.Future[None]] = None
        self._imms: Deque[Tuple[int, int]] = collections.deque()
        self._imm_waiter: Optional[asyncio.Future[None]] = None
        self.on_imm = None

    def __repr__(self) -> str:
        return "<rmsg.Connection %s %s>" % (
            self.transport, "closed" if self._closed.done() else "open")

    # -- library callbacks -------------------------------------------------

    def _info(self) -> None:
        cp = self._cptr
        t = lib.rmsg_conn_transport(cp)
        f = lib.rmsg_conn_fallback_reason(cp)
        self.transport = t.decode() if t else "none"
        self.fallback_reason = f.decode() if f else None
        d = ctypes.c_void_p()
        n = ctypes.c_size_t()
        if self.listener is None and lib.rmsg_conn_peer_data(
                cp, ctypes.byref(d), ctypes.byref(n)) == 0:
            self.peer_data = ctypes.string_at(d.value, n.value) \
                if n.value and d.value else b""

    def _addrs(self) -> None:
        """peer and local addresses (rmsg_conn_peer_addr/local_addr),
        None each while not known."""
        res: List[Optional[Address]] = []
        for fn in (lib.rmsg_conn_peer_addr, lib.rmsg_conn_local_addr):
            buf = ctypes.create_string_buffer(_ffi.SOCKADDR_STORAGE_SIZE)
            res.append(_address(buf.raw) if fn(self._cptr, buf) == 0
                       else None)
        self._peer_addr, self._local_addr = res

    def _established_cb(self) -> None:
        self._addrs()
        self._info()
        _resolve(self._established, None, None)
        if self.listener is not None:
            self.listener._push(self)

    def _close_cb(self, reason: int) -> None:
        # the counters as the connection ended: stats() after close
        self._last_stats = _stats(lib.rmsg_conn_stats, self._cptr)
        self._info()
        why = lib.rmsg_conn_close_reason(self._cptr)
        self.close_reason_text = why.decode("utf-8", "replace") \
            if why else None
        self._fail_blocked(reason or -_errno.ECANCELED)
        if self._cptr is not None:
            self._ctx._conns.pop(self._cptr, None)
        why = CloseReason(reason, _close_text(self._cptr) if reason else None)
        self._cptr = None
        self.close_reason = why
        if not self._established.done():
            exc = (_error(reason or -_errno.ECANCELED) if not reason else
                   rmsg_error(reason, str(why.text)))
            exc.close_reason_text = self.close_reason_text
            _resolve(self._established, exc, None)
            if self._established.done():
                self._established.exception()  # retrieved: no warning
        _resolve(self._closed, None, why)
        self._wake()

    def _wake(self) -> None:
        for w in (self._msg_waiter, self._imm_waiter):
            if w is not None:
                _resolve(w, None, None)
        self._msg_waiter = self._imm_waiter = None

    def _msg_cb(self, m: int) -> None:
        bound = self.recv_queue
        if bound is not None and (self._held or len(self._msgs) >= bound) \
                and not self._ctx._closing:
            # the queue is full: keep the message in its receive buffer,
            # which keeps the peer's credit (rmsg_msg_hold(3))
            if lib.rmsg_msg_hold(m) == 0:
                self._held.append(m)
            else:
                self._msgs.append(_msg_bytes(m))
        else:
            self._msgs.append(_msg_bytes(m))
        w = self._msg_waiter  # (recv_queue=0: recv() takes a held one)
        if w is not None:
            self._msg_waiter = None
            _resolve(w, None, None)

    def _unhold(self) -> bytes:
        """The oldest held message, copied and released (its credit goes
        back to the peer)."""
        m = self._held.popleft()
        data = _msg_bytes(m)
        lib.rmsg_msg_release(m)
        return data

    def _refill(self) -> None:
        """Moves held messages into the queue while it has room. A
        release outside a pass makes the context's descriptor readable
        (the library kicks it), so the freed credits go out on the loop's
        next pass."""
        bound = self.recv_queue
        while self._held and (bound is None or len(self._msgs) < bound):
            self._msgs.append(self._unhold())

    def _unhold_all(self) -> None:
        while self._held:
            self._msgs.append(self._unhold())

    def _imm_cb(self, imm: int, ln: int) -> None:
        if self.on_imm is not None:
            self.on_imm(imm, ln)
            return
        self._imms.append((imm, ln))
        w = self._imm_waiter
        if w is not None:
            self._imm_waiter = None
            _resolve(w, None, None)

    def _writable_cb(self) -> None:
        while self._blocked and self._cptr is not None:
            op = self._blocked[0]
            if not self._try(op):
                return
            if self._blocked and self._blocked[0] is op:
                self._blocked.popleft()

    def _fail_blocked(self, status: int) -> None:
        while self._blocked:
            op = self._blocked.popleft()
            _handles.pop(op.handle or 0, None)
            self._op_done(op, status, None)

    def _op_done(self, op: _Op, status: int, data: Optional[bytes]) -> None:
        op.finished = True
        iov = op.iov
        if iov is not None:
            op.iov = None
            if iov.bufs and op.handle is not None:
                for b in iov.bufs:
                    b._inflight -= 1
                    if b._inflight == 0 and b._free_pending:
                        b._free_now()
        if self._ctx._mr_zombies:
            self._ctx._retry_zombies()
        fut = op.fut
        if type(fut) is _CallFuture:
            fut._op = None  # no reference cycle left for the collector
        _resolve(fut, self._op_error(status) if status else None, data)

    def _op_error(self, status: int) -> RmsgError:
        """An operation's error; ECANCELED (the close ended it) and
        ENOTCONN (started on a closed connection) are ConnectionClosed,
        like recv()'s, so one except clause sees a closed connection
        whatever the call."""
        if -status in (_errno.ECANCELED, _errno.ENOTCONN):
            return ConnectionClosed(-status)
        return _error(status)

    # -- operations ---------------------------------------------------------

    def _op(self, iov: _Iov, start: Callable[[_Op], int],
            fut: Optional[asyncio.Future[Any]] = None) -> _Op:
        self._ctx._live()
        if fut is None:
            fut = self._ctx._aloop.create_future()
        op = _Op(self, fut, iov, start)
        if self._cptr is None:
            self._op_done(op, -_errno.ENOTCONN, None)
            return op
        op.handle = _register(op)
        for b in iov.bufs:
            b._inflight += 1
        if self._blocked:
            self._blocked.append(op)
        else:
            self._try(op)
        return op

    def _try(self, op: _Op) -> bool:
        """Starts op; False if the send queue is full (op stays blocked,
        on_writable retries it)."""
        rc = op.start(op)
        if rc == -_errno.EAGAIN:
            if not self._blocked or self._blocked[0] is not op:
                self._blocked.append(op)
            return False
        if rc:
            _handles.pop(op.handle or 0, None)
            self._op_done(op, rc, None)
        else:
            op.started = True
        return True

    def _cancel_call(self, op: _Op) -> None:
        if op.finished:
            return
        if op.started:
            if self._cptr is not None and op.call_id is not None:
                lib.rmsg_call_cancel(self._cptr, op.call_id)
        elif op in self._blocked:
            self._blocked.remove(op)
            _handles.pop(op.handle or 0, None)
            self._op_done(op, -_errno.ECANCELED, None)

    # -- public --------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed.done()

    @property
    def peer_addr(self) -> Optional[Address]:
        """The peer's address and port, (host, port), host numeric
        (IPv4 or IPv6); known once established (rmsg_conn_peer_addr(3)),
        also after the close; None before."""
        return self._peer_addr

    @property
    def local_addr(self) -> Optional[Address]:
        """This side's address and port, (host, port), as the peer sees
        it in peer_addr (rmsg_conn_local_addr(3)); None before."""
        return self._local_addr

    @property
    def resume_state(self) -> int:
        """RESUME_ON while the connection is resumable (resume_ms on
        both ends, any transport) and its transport up, RESUME_SUSPENDED
        while it waits for a new transport, RESUME_NONE otherwise, and
        once closed (rmsg_conn_resume_state(3))."""
        if self._cptr is None:
            return RESUME_NONE
        return int(lib.rmsg_conn_resume_state(self._cptr))

    def send(self, data: Data) -> asyncio.Future[None]:
        """Send one message gathered from a bytes-like object, a Buffer or
        a list of them (at most 256). Starts at once; returns an awaitable
        future that completes when the memory may be reused. Mutable
        buffers must not be changed until then. A full send queue (EAGAIN)
        is waited out in order; errors raise RmsgError."""
        iov = _Iov(data)
        return self._op(iov, lambda op: lib.rmsg_send(  # type: ignore
            self._cptr, iov.addr, iov.n, _on_done, op.handle)).fut

    def call(self, method: int, data: Data = b"",
             timeout: Optional[float] = None) -> asyncio.Future[bytes]:
        """Call RPC method `method` on the peer; an awaitable future of the
        reply bytes. timeout (seconds) is the library's deadline:
        RmsgTimeoutError (errno ETIMEDOUT, also a TimeoutError) when it
        passes. Cancelling the future/awaiting task calls
        rmsg_call_cancel(). Handler errors raise RmsgError(errno);
        ENOSYS when the peer has no handler."""
        iov = _Iov(data, max_n=IOV_MAX - 1)
        tmo = 0
        if timeout is not None:
            if timeout <= 0:
                raise ValueError("timeout must be positive")
            tmo = min(max(1, math.ceil(timeout * 1000)), 0xFFFFFFFF)
        method = int(method)

        def start(op: _Op) -> int:
            rc: int = lib.rmsg_call(self._cptr, method, iov.addr, iov.n, tmo,
                                    _on_reply, op.handle, self._cid_ref)
            if rc == 0:
                op.call_id = self._cid.value
            return rc
        fut = _CallFuture(loop=self._ctx._aloop)
        fut._op = self._op(iov, start, fut)
        return fut

    def _onesided(self, fn: Any, data: Any, remote_desc: BytesLike,
                  offset: int, writable: bool,
                  *more: Any) -> asyncio.Future[None]:
        desc = bytes(remote_desc)
        if len(desc) != MR_DESC_SIZE:
            raise ValueError("a descriptor is %d bytes" % MR_DESC_SIZE)
        iov = _Iov(data, writable=writable)
        off = int(offset)
        return self._op(iov, lambda op: fn(  # type: ignore[no-any-return]
            self._cptr, iov.addr, iov.n, desc, off, *more, _on_done,
            op.handle)).fut

    def write_imm(self, data: Data, remote_desc: BytesLike, offset: int = 0,
                  imm: int = 0) -> asyncio.Future[None]:
        """Write data at offset into the peer's region (descriptor from
        MR.export()) and notify it with imm (32 bits). Awaitable."""
        return self._onesided(lib.rmsg_write_imm, data, remote_desc, offset,
                              False, int(imm) & 0xFFFFFFFF)

    def write(self, data: Data, remote_desc: BytesLike,
              offset: int = 0) -> asyncio.Future[None]:
        """Write data at offset into the peer's region. Awaitable."""
        return self._onesided(lib.rmsg_write, data, remote_desc, offset,
                              False)

    def read(self, into: Union[WritableBuffer, MR,
                               Sequence[WritableBuffer]],
             remote_desc: BytesLike,
             offset: int = 0) -> asyncio.Future[None]:
        """Read len(into) bytes at offset of the peer's region into the
        writable buffer(s) `into`. Awaitable."""
        return self._onesided(lib.rmsg_read, into, remote_desc, offset, True)

    async def stats(self) -> Dict[str, int]:
        """The connection's counters (rmsg_conn_stats(3)) as a dict, one
        key per member of struct rmsg_stats; after the close, as they were
        when it closed. Awaitable (for compatibility: it does not wait)."""
        if self._cptr is not None and self._ctx._ctx is not None:
            return _stats(lib.rmsg_conn_stats, self._cptr)
        if self._last_stats is None:
            raise RmsgError(_errno.ENOTCONN, "connection not open yet")
        return self._last_stats

    async def recv(self) -> bytes:
        """The next message as bytes; ConnectionClosed (errno = close
        reason, ECANCELED for a local close) after the last one.

        The receive queue holds at most recv_queue messages copied into
        bytes. A message arriving at a full queue stays in the library's
        receive buffer, held (rmsg_msg_hold(3)), and keeps the credit the
        peer spent on it until recv() makes room: the peer can then have
        at most its credits (the credits= this side grants, default 32)
        such messages in flight, after which its sends wait in its send
        queue and its send() futures stay pending. The unread data of a
        connection is so bounded by recv_queue messages in Python plus
        credits messages in receive buffers."""
        while True:
            if self._msgs:
                data = self._msgs.popleft()
                break
            if self._held:  # recv_queue=0: every message is held
                data = self._unhold()
                break
            if self._closed.done():
                r = self.close_reason
                raise _error(r or -_errno.ECANCELED, ConnectionClosed)
            w = self._ctx._aloop.create_future()
            self._msg_waiter = w
            await w
        if self._held:
            self._refill()
        return data

    def __aiter__(self) -> Connection:
        return self

    async def __anext__(self) -> bytes:
        """``async for msg in conn`` ends when the connection closes; see
        close_reason."""
        try:
            return await self.recv()
        except ConnectionClosed:
            raise StopAsyncIteration

    async def recv_imm(self) -> Tuple[int, int]:
        """The next (imm, length) of a peer's write_imm into our regions,
        unless on_imm is set (then on_imm(imm, length) is called, inside
        the library's callback). Not bounded: each entry is two ints, and
        the library returns a write_imm's credit at once."""
        while not self._imms:
            if self._closed.done():
                r = self.close_reason
                raise _error(r or -_errno.ECANCELED, ConnectionClosed)
            w = self._ctx._aloop.create_future()
            self._imm_waiter = w
            await w
        return self._imms.popleft()

    async def imms(self) -> AsyncIterator[Tuple[int, int]]:
        """Async iterator of (imm, length); ends at close."""
        while True:
            try:
                yield await self.recv_imm()
            except ConnectionClosed:
                return

    def _close_nowait(self) -> None:
        if self._cptr is not None and self._ctx._ctx is not None:
            lib.rmsg_conn_close(self._cptr)

    async def close(self) -> int:
        """Close and wait for on_close. Pending operations fail with
        ConnectionClosed (ECANCELED). Returns the close reason, a
        CloseReason (0 for this local close unless the connection had
        already failed)."""
        self._close_nowait()
        return await asyncio.shield(self._closed)

    async def wait_closed(self) -> int:
        """Wait until the connection is closed; returns the reason."""
        return await asyncio.shield(self._closed)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


# ---------------------------------------------------------------------
# registered buffers and memory regions

class Buffer:
    """Registered memory from rmsg_buf_alloc(). .view is a writable
    memoryview (format 'B'); indexing, slicing, len() and bytes() work on
    the Buffer too. Sending a Buffer (or a slice via buf[a:b]) avoids a
    copy. Invalid after free() or the context's close: do not keep views
    beyond that."""

    nbytes: int
    view: memoryview

    def __init__(self, ctx: Context, ptr: int, size: int) -> None:
        self._ctx = ctx
        self._ptr: Optional[int] = ptr
        self.nbytes = size
        self._inflight = 0
        self._free_pending = False
        self._arr = (ctypes.c_char * size).from_address(ptr)
        self.view = memoryview(self._arr).cast("B")

    def _addr(self) -> int:
        if self._ptr is None or self._free_pending:
            raise ValueError("buffer freed")
        return self._ptr

    def __len__(self) -> int:
        return self.nbytes

    def __getitem__(self, i: Any) -> Any:
        if self._ptr is None:
            raise ValueError("buffer freed")
        return self.view[i]

    def __setitem__(self, i: Any, v: Any) -> None:
        if self._ptr is None:
            raise ValueError("buffer freed")
        self.view[i] = v

    def __bytes__(self) -> bytes:
        if self._ptr is None:
            raise ValueError("buffer freed")
        return self.view.tobytes()

    def _free_now(self) -> None:
        if self._ptr is not None and self._ctx._ctx is not None:
            lib.rmsg_buf_free(self._ctx._ctx, self._ptr)
        self._ptr = None

    def free(self) -> None:
        """Return the memory to the pool, once operations using it are
        done."""
        if self._ptr is None or self._free_pending:
            return
        if self._inflight:
            self._free_pending = True
        else:
            self._free_now()
        try:
            self.view.release()
        except BufferError:
            pass

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            ctx, ptr = self._ctx, self._ptr
            if ptr is not None and ctx._ctx is not None:
                ctx._later(lambda: ctx._ctx is not None and
                           lib.rmsg_buf_free(ctx._ctx, ptr))
        except BaseException:
            pass


class MR:
    """A memory region (rmsg_mr_reg). export() gives the 32-byte
    descriptor to send to a peer. The registered buffer is pinned until
    dereg() (or collection, or the context's close)."""

    buffer: WritableBuffer
    access: int

    def __init__(self, ctx: Context, mr: int, buffer: WritableBuffer,
                 pin: Any, access: int) -> None:
        self._ctx = ctx
        self._mr: Optional[int] = mr
        self.buffer = buffer
        self._pin = pin
        self.access = access

    def _live(self) -> int:
        if self._mr is None or self._ctx._ctx is None:
            raise RmsgError(_errno.EINVAL, "region deregistered")
        return self._mr

    def export(self, conn: Optional[Connection] = None, off: int = 0,
               length: int = 0, access: Optional[int] = None,
               any_peer: bool = False) -> bytes:
        """The descriptor (bytes) for the peer of `conn` only (over RDMA a
        memory window bound to its queue pair): `length` bytes from `off`
        (0: to the end), `access` a subset of the region's rights (default:
        all of them). Send it on `conn`; offsets count from `off`. Without
        a connection, `any_peer=True` lets any connected peer of the
        context use it (rmsg_mr_export.3). Ends with revoke(), dereg() or
        the connection's end."""
        if (conn is None) != bool(any_peer):
            raise ValueError("export: a connection, or any_peer=True")
        rights = self.access if access is None else access
        flags = rights | (EXPORT_ANY_PEER if any_peer else 0)
        mr = self._live()
        cptr = None
        if conn is not None:
            cptr = conn._cptr
            if cptr is None:
                raise RmsgError(_errno.ENOTCONN, "connection closed")
        desc = ctypes.create_string_buffer(MR_DESC_SIZE)
        _check(lib.rmsg_mr_export(mr, cptr, off, length, flags, desc))
        return desc.raw

    def revoke(self, desc: BytesLike) -> None:
        """End the export `desc` (rmsg_mr_revoke): once it returns, the
        peer's access has stopped. RmsgError(ENOENT) if it already ended;
        RmsgError(EBUSY) over RDMA while the export's memory window is
        still being bound, over TCP while an answer to the peer's read
        through it is still queued (nothing changed: retry after the
        loop ran)."""
        desc = bytes(desc)
        if len(desc) != MR_DESC_SIZE:
            raise ValueError("descriptor must be %d bytes" % MR_DESC_SIZE)
        _check(lib.rmsg_mr_revoke(self._live(), desc))

    def __len__(self) -> int:
        if isinstance(self.buffer, Buffer):
            return self.buffer.nbytes
        return memoryview(self.buffer).nbytes

    def dereg(self) -> None:
        """Revoke the region; RmsgError(EBUSY) while local operations use
        its memory."""
        if self._mr is None:
            return
        if self._ctx._ctx is not None:
            _check(lib.rmsg_mr_dereg(self._mr))
        self._mr = None
        self._pin = None

    def __del__(self) -> None:
        try:
            ctx, mr, pin = self._ctx, self._mr, self._pin
            if mr is None or ctx._ctx is None:
                return
            addr: int = mr

            def work() -> None:
                if ctx._ctx is not None and \
                        lib.rmsg_mr_dereg(addr) == -_errno.EBUSY:
                    ctx._mr_zombies.append((addr, pin))
            ctx._later(work)
        except BaseException:
            pass
