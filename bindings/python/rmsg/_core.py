# SPDX-License-Identifier: MIT
"""asyncio binding of librmsg.

Threading model (see README.md): each Context owns a private libev loop run
by a dedicated thread ("loop thread"). librmsg may only be used from that
thread, so every API call made from asyncio is handed over with
rmsg_ctx_submit(), the library's one thread-safe function, and every
library callback runs on the loop thread, copies what it needs and posts
the result to the asyncio loop with call_soon_threadsafe (batched).

Names: methods prefixed with _lt_ run on the loop thread only; _py_
methods run on the asyncio thread only.
"""
from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
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
from typing import (Any, AsyncIterator, Callable, Deque, Dict, List,
                    Optional, Sequence, Set, Tuple, TypeVar, Union, overload)

from . import _ffi
from ._ffi import lib, ev

log = logging.getLogger("rmsg")

ACCESS_REMOTE_WRITE = _ffi.RMSG_ACCESS_REMOTE_WRITE
ACCESS_REMOTE_READ = _ffi.RMSG_ACCESS_REMOTE_READ
EXPORT_ANY_PEER = _ffi.RMSG_EXPORT_ANY_PEER
MR_DESC_SIZE = _ffi.RMSG_MR_DESC_SIZE
PRIVATE_DATA_MAX = _ffi.RMSG_PRIVATE_DATA_MAX
IOV_MAX = _ffi.RMSG_IOV_MAX

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
#: listen()'s accept(peer_private_data): None/True, bytes, or False
AcceptFunc = Callable[[bytes], Union[None, bool, BytesLike]]


# ---------------------------------------------------------------------
# errors

def strerror(err: int) -> str:
    """rmsg_strerror() of an errno (sign does not matter)."""
    e = abs(int(err))
    s = lib.rmsg_strerror(-e)
    s = s.decode("utf-8", "replace") if s else ""
    if not s or s == "unknown error":  # not in librmsg's table
        s = os.strerror(e)
    return s


class RmsgError(OSError):
    """An error from librmsg: .errno is the positive errno, .strerror the
    text of rmsg_strerror(). Handlers may raise it to reply with an error."""

    def __init__(self, err: int, text: Optional[str] = None) -> None:
        e = abs(int(err))
        super().__init__(e, text if text is not None else strerror(e))


class RmsgTimeoutError(RmsgError, TimeoutError):
    """ETIMEDOUT: a call's deadline, setup or keepalive. Also an
    asyncio.TimeoutError (the same class as TimeoutError since 3.11)."""


class ConnectionClosed(RmsgError, ConnectionError):
    """recv() on a closed connection; .errno is the close reason
    (ECANCELED for a local close)."""


def _lt_stats(fn, ptr) -> Dict[str, int]:
    """Loop thread: rmsg_conn_stats / rmsg_ctx_stats of ptr as a dict."""
    st = _ffi.rmsg_stats()
    rc = fn(ptr, ctypes.byref(st), ctypes.sizeof(st))
    if rc < 0:
        raise _error(rc)
    return {name: getattr(st, name) for name in _ffi.STATS_FIELDS}


def _error(rc, cls=None):
    e = abs(rc)
    if cls is None:
        cls = RmsgTimeoutError if e == _errno.ETIMEDOUT else RmsgError
    return cls(e)


def _check(rc):
    if rc:
        raise _error(rc)


# ---------------------------------------------------------------------
# handles: the void *arg of every callback is a small integer naming a
# Python object here. The entry keeps the object alive until the library
# is done with it (op callbacks, on_close).

_handles = {}
_next_handle = itertools.count(1).__next__


def _register(obj):
    h = _next_handle()
    _handles[h] = obj
    return h


def _uncaught(where):
    log.exception("rmsg: exception in %s (ignored)", where)


# ---------------------------------------------------------------------
# buffers handed to the library

def _addr_of(obj, writable):
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
        return ctypes.cast(p, ctypes.c_void_p).value, len(obj), (p, obj)
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
    """An iovec array over one buffer or a list of buffers."""

    __slots__ = ("arr", "n", "keep", "nbytes", "bufs")

    def __init__(self, data, writable=False, max_n=IOV_MAX):
        if data is None:
            data = []
        elif not isinstance(data, (list, tuple)):
            data = [data]
        if len(data) > max_n:
            raise ValueError("at most %d buffers" % max_n)
        self.n = len(data)
        self.arr = (_ffi.iovec * max(1, self.n))()
        self.keep = []
        self.bufs = []
        self.nbytes = 0
        for i, d in enumerate(data):
            addr, ln, keep = _addr_of(d, writable)
            self.arr[i].iov_base = addr
            self.arr[i].iov_len = ln
            self.nbytes += ln
            if keep is not None:
                self.keep.append(keep)
            if isinstance(keep, Buffer):
                self.bufs.append(keep)


def _make_cfg(opts, log_level=None):
    """An rmsg_cfg from keyword options; the caller destroys it."""
    p = ctypes.c_void_p()
    _check(lib.rmsg_cfg_create(ctypes.byref(p)))
    cfg = p.value
    try:
        for k, v in opts.items():
            if v is None:
                continue
            if k == "private_data":
                v = bytes(v)
                _check(lib.rmsg_cfg_set_private_data(cfg, v, len(v)))
                continue
            if k == "psk":
                # the pre-shared key (16..64 bytes): both sides must
                # hold it (rmsg_cfg_set_psk(3))
                v = bytes(v)
                _check(lib.rmsg_cfg_set_psk(cfg, v, len(v)))
                continue
            setter = _CFG_SETTERS.get(k)
            if setter is None:
                raise TypeError("unknown option %r" % k)
            _check(setter(cfg, int(v)))
        if log_level is not None:
            _check(lib.rmsg_cfg_set_log(cfg, log_level, _log_cb, None))
    except BaseException:
        lib.rmsg_cfg_destroy(cfg)
        raise
    return cfg


_CFG_SETTERS = {
    "eager_size": lib.rmsg_cfg_set_eager_size,
    "credits": lib.rmsg_cfg_set_credits,
    "send_queue": lib.rmsg_cfg_set_send_queue,
    "busy_poll_us": lib.rmsg_cfg_set_busy_poll_us,
    "max_msg_size": lib.rmsg_cfg_set_max_msg_size,
    "timeout_ms": lib.rmsg_cfg_set_timeout_ms,
    "reg_limit": lib.rmsg_cfg_set_reg_limit,
    "tcp_rx_limit": lib.rmsg_cfg_set_tcp_rx_limit,
    "max_conns": lib.rmsg_cfg_set_max_conns,
    "max_pending": lib.rmsg_cfg_set_max_pending,
    "keepalive_ms": lib.rmsg_cfg_set_keepalive_ms,
    "keepalive_misses": lib.rmsg_cfg_set_keepalive_misses,
}


def _rmsg_log_level():
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
# C callbacks: one ctypes object each, alive as long as the module

@_ffi.LOG_CB
def _log_cb(level, line, arg):
    try:
        log.log(_PY_LEVEL.get(level, logging.ERROR), "%s",
                line.decode("utf-8", "replace"))
    except BaseException:
        pass


@_ffi.WORK_CB
def _work_cb(ctxp, h):
    item = _handles.get(h)
    if item is None:
        return
    fn, args = item
    try:
        fn(*args)
    except BaseException:
        _uncaught("submitted work")


@_ffi.ESTABLISHED_CB
def _on_established(c, h):
    conn = _handles.get(h)
    if conn is not None:
        try:
            conn._lt_established()
        except BaseException:
            _uncaught("on_established")


@_ffi.MSG_CB
def _on_msg(c, m, h):
    conn = _handles.get(h)
    if conn is None:
        return
    n = lib.rmsg_msg_len(m)
    data = ctypes.string_at(lib.rmsg_msg_data(m), n) if n else b""
    conn._ctx._post(conn._py_msg, data)


@_ffi.IMM_CB
def _on_imm(c, imm, ln, h):
    conn = _handles.get(h)
    if conn is not None:
        conn._ctx._post(conn._py_imm, imm, ln)


@_ffi.WRITABLE_CB
def _on_writable(c, h):
    conn = _handles.get(h)
    if conn is not None:
        try:
            conn._lt_writable()
        except BaseException:
            _uncaught("on_writable")


@_ffi.CLOSE_CB
def _on_close(c, reason, h):
    conn = _handles.pop(h, None)
    if conn is not None:
        try:
            conn._lt_close(reason)
        except BaseException:
            _uncaught("on_close")


@_ffi.ACCEPT_CB
def _on_accept(lp, c, pdata, plen, h):
    listener = _handles.get(h)
    if listener is None:
        return -_errno.ECONNREFUSED
    try:
        return listener._lt_accept(c, ctypes.string_at(pdata, plen)
                                   if plen else b"")
    except BaseException:
        _uncaught("accept")
        return -_errno.ECONNREFUSED


@_ffi.DONE_CB
def _on_done(c, status, h):
    op = _handles.pop(h, None)
    if op is not None:
        op.conn._lt_op_done(op, status, None)


@_ffi.REPLY_CB
def _on_reply(c, status, m, h):
    op = _handles.pop(h, None)
    if op is None:
        return
    data = None
    if status == 0:
        n = lib.rmsg_msg_len(m)
        data = ctypes.string_at(lib.rmsg_msg_data(m), n) if n else b""
    op.conn._lt_op_done(op, status, data)


@_ffi.HANDLER_CB
def _on_request(c, req, m, h):
    entry = _handles.get(h)
    if entry is None:
        lib.rmsg_reply_error(req, -_errno.ENOSYS)
        return
    ctx, method, func = entry
    n = lib.rmsg_msg_len(m)
    data = ctypes.string_at(lib.rmsg_msg_data(m), n) if n else b""
    ctx._reqs[req] = True
    ctx._post(ctx._py_request, ctx._conns.get(c), req, method, func, data)


_CONN_OPS = _ffi.conn_ops(_on_established, _on_msg, _on_imm, _on_writable,
                          _on_close)

_live_contexts: weakref.WeakSet[Context] = weakref.WeakSet()


@atexit.register
def _close_all():
    for ctx in list(_live_contexts):
        try:
            ctx.close_sync()
        except BaseException:
            pass


# ---------------------------------------------------------------------
# context

class Context:
    """A librmsg context on its own libev loop thread, bound to the
    running asyncio loop.

    Options (all optional) set the context's rmsg_cfg: eager_size,
    credits, send_queue, busy_poll_us, max_msg_size, private_data,
    timeout_ms, reg_limit, tcp_rx_limit, keepalive_ms, keepalive_misses,
    psk (a pre-shared key of 16 to 64 bytes: the peer must hold the same
    one, else the connection fails with EACCES; rmsg_cfg_set_psk(3))
    (max_conns and max_pending apply to listeners).
    Use ``async with Context() as ctx`` or ``await ctx.close()``.
    """

    def __init__(self, *, loop: Optional[asyncio.AbstractEventLoop] = None,
                 **options: Any) -> None:
        self._aloop = loop or asyncio.get_running_loop()
        self._submit_lock = threading.Lock()
        self._closing = False
        self._ctx: Optional[int] = None
        self._evloop: Optional[int] = None
        self._tid: Optional[int] = None
        # loop-thread state
        self._conns: Dict[int, Connection] = {}  # rmsg_conn * -> Connection
        self._reqs: Dict[int, Any] = {}  # rmsg_req * of unanswered requests
        self._listeners: Set[Listener] = set()
        # (mr *, pin) whose dereg said EBUSY
        self._mr_zombies: List[Tuple[int, Any]] = []
        self._handler_handles: Dict[int, int] = {}  # method -> handle
        # work for the loop thread
        self._work_lock = threading.Lock()
        self._work: Deque[Any] = collections.deque()
        self._work_scheduled = False
        self._drain_handle = _register((self._lt_drain, ()))
        # posting to asyncio
        self._post_lock = threading.Lock()
        self._posts: Deque[Any] = collections.deque()
        self._post_scheduled = False
        self._buffers: weakref.WeakSet[Buffer] = weakref.WeakSet()
        self._mrs: weakref.WeakSet[MR] = weakref.WeakSet()
        self._closed_fut = self._aloop.create_future()
        self._init_err: Optional[BaseException] = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._lt_main,
                                        args=(options, ready),
                                        name="rmsg-loop", daemon=True)
        self._thread.start()
        ready.wait()
        if self._init_err is not None:
            self._thread.join()
            _handles.pop(self._drain_handle, None)
            raise self._init_err
        _live_contexts.add(self)

    # -- the loop thread ----------------------------------------------

    def _lt_main(self, options, ready):
        try:
            self._evloop = ev.ev_loop_new(_ffi.EVFLAG_AUTO)
            if not self._evloop:
                raise RmsgError(_errno.ENOMEM, "ev_loop_new failed")
            cfg = _make_cfg(options, _rmsg_log_level())
            p = ctypes.c_void_p()
            rc = lib.rmsg_ctx_create(self._evloop, cfg, ctypes.byref(p))
            lib.rmsg_cfg_destroy(cfg)
            _check(rc)
        except BaseException as e:
            if self._evloop:
                ev.ev_loop_destroy(self._evloop)
            self._init_err = e
            ready.set()
            return
        self._ctx = p.value
        self._tid = threading.get_ident()
        # an extra reference keeps ev_run() running with no connection
        # and no listener; close() breaks the loop from submitted work
        ev.ev_ref(self._evloop)
        ready.set()
        ev.ev_run(self._evloop, 0)
        try:
            self._lt_destroy()
        finally:
            self._post(self._py_closed)

    def _lt_destroy(self):
        # requests still waiting for a Python handler: answer them now,
        # a later reply finds them gone
        for req in list(self._reqs):
            lib.rmsg_reply_error(req, -_errno.ECANCELED)
        self._reqs.clear()
        for conn in list(self._conns.values()):
            conn._lt_fail_blocked(-_errno.ECANCELED)
        for b in list(self._buffers):
            b._ptr = None
        for m in list(self._mrs):
            m._mr = None
        ctxp, self._ctx = self._ctx, None
        # closes listeners, aborts connections: their callbacks run here
        rc = lib.rmsg_ctx_destroy(ctxp)
        if rc:
            log.error("rmsg_ctx_destroy: %s", strerror(rc))
        for listener in list(self._listeners):
            listener._lt_closed()
        self._listeners.clear()
        self._mr_zombies.clear()
        ev.ev_loop_destroy(self._evloop)
        self._evloop = None
        _handles.pop(self._drain_handle, None)

    def _lt_stop(self):
        ev.ev_break(self._evloop, _ffi.EVBREAK_ALL)

    def _lt_retry_zombies(self):
        keep = []
        for mr, pin in self._mr_zombies:
            if lib.rmsg_mr_dereg(mr) == -_errno.EBUSY:
                keep.append((mr, pin))
        self._mr_zombies = keep

    # -- handing work to the loop thread --------------------------------

    def _on_loop_thread(self):
        return threading.get_ident() == self._tid

    def _submit(self, fn, *args):
        """Run fn(*args) on the loop thread, in submission order."""
        if self._on_loop_thread():
            fn(*args)
            return
        with self._submit_lock:
            if self._closing:
                raise RmsgError(_errno.ESHUTDOWN, "context closed")
            self._lt_enqueue(fn, args)

    def _lt_enqueue(self, fn, args):
        """Under _submit_lock: queue work; one rmsg_ctx_submit() per burst
        (the loop thread drains the whole queue, in order)."""
        with self._work_lock:
            self._work.append((fn, args))
            if self._work_scheduled:
                return
            self._work_scheduled = True
        rc = lib.rmsg_ctx_submit(self._ctx, _work_cb, self._drain_handle)
        if rc:
            with self._work_lock:
                self._work.pop()
                self._work_scheduled = False
            raise _error(rc)

    def _lt_drain(self):
        with self._work_lock:
            items, self._work = self._work, collections.deque()
            self._work_scheduled = False
        for fn, args in items:
            try:
                fn(*args)
            except BaseException:
                _uncaught("submitted work")

    def _run_sync(self, fn, *args):
        """fn(*args) on the loop thread; waits for and returns its result.
        Blocks the calling thread for one hand-over (microseconds)."""
        if self._on_loop_thread():
            return fn(*args)
        cf = concurrent.futures.Future()

        def work():
            try:
                cf.set_result(fn(*args))
            except BaseException as e:
                cf.set_exception(e)
        self._submit(work)
        return cf.result()

    # -- posting results to asyncio ------------------------------------

    def _post(self, fn, *args):
        """Run fn(*args) on the asyncio loop (from any thread), in order."""
        with self._post_lock:
            self._posts.append((fn, args))
            if self._post_scheduled:
                return
            self._post_scheduled = True
        try:
            self._aloop.call_soon_threadsafe(self._py_drain)
        except RuntimeError:  # the asyncio loop is closed: nobody listens
            with self._post_lock:
                self._posts.clear()
                self._post_scheduled = False

    def _py_drain(self):
        with self._post_lock:
            items, self._posts = self._posts, collections.deque()
            self._post_scheduled = False
        for fn, args in items:
            try:
                fn(*args)
            except BaseException:
                _uncaught(getattr(fn, "__name__", "callback"))

    def _py_closed(self):
        self._thread.join()
        if not self._closed_fut.done():
            self._closed_fut.set_result(None)

    # -- public ----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closing

    def _begin_close(self):
        with self._submit_lock:
            if self._closing:
                return False
            self._lt_enqueue(self._lt_stop, ())
            self._closing = True
        _live_contexts.discard(self)
        return True

    async def close(self) -> None:
        """Destroy the context: listeners close, connections are aborted
        (pending operations fail with ECANCELED, on_close reason
        ECANCELED), buffers and regions become invalid."""
        self._begin_close()
        await asyncio.shield(self._closed_fut)

    def close_sync(self) -> None:
        """close() for non-async code (and atexit); the posted completions
        run when the asyncio loop next runs."""
        self._begin_close()
        if not self._on_loop_thread():
            self._thread.join()

    async def __aenter__(self) -> Context:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def listen(self, uri: str, *, accept: Optional[AcceptFunc] = None,
               **options: Any) -> Listener:
        """Listen at "tcp://host:port", "rdma://host:port" or
        "auto://host:port" (port 0 picks one). Returns a Listener.

        accept(peer_private_data: bytes) runs ON THE LOOP THREAD for each
        incoming connection and must be quick: return None/True to accept,
        bytes to accept with that private data, False to reject with
        ECONNREFUSED, or raise RmsgError(errno) to reject with errno.
        options: a cfg for accepted connections (see Context)."""
        listener = Listener(self, uri, accept)

        def work():
            cfg = _make_cfg(options, _rmsg_log_level()) if options else None
            p = ctypes.c_void_p()
            try:
                rc = lib.rmsg_listen(self._ctx, uri.encode(), cfg,
                                     ctypes.byref(_CONN_OPS), _on_accept,
                                     listener._handle, ctypes.byref(p))
            finally:
                if cfg:
                    lib.rmsg_cfg_destroy(cfg)
            _check(rc)
            port = ctypes.c_uint16()
            lib.rmsg_listener_port(p.value, ctypes.byref(port))
            listener._lp = p.value
            listener.port = port.value
            self._listeners.add(listener)
        try:
            self._run_sync(work)
        except BaseException:
            _handles.pop(listener._handle, None)
            raise
        return listener

    async def connect(self, uri: str, *,
                      private_data: Optional[BytesLike] = None,
                      **options: Any) -> Connection:
        """Open a connection and wait until it is established. Raises
        RmsgError with the close reason (e.g. ECONNREFUSED) on failure.
        options: a cfg for this connection (see Context)."""
        if private_data is not None:
            options["private_data"] = private_data
        conn = Connection(self, None)

        def work():
            cfg = _make_cfg(options, _rmsg_log_level()) if options else None
            p = ctypes.c_void_p()
            try:
                rc = lib.rmsg_connect(self._ctx, uri.encode(), cfg,
                                      ctypes.byref(_CONN_OPS), conn._handle,
                                      ctypes.byref(p))
            finally:
                if cfg:
                    lib.rmsg_cfg_destroy(cfg)
            if rc:
                _handles.pop(conn._handle, None)
                raise _error(rc)
            conn._cptr = p.value
            self._conns[p.value] = conn
        await self._await_lt(work)
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
        dict. Awaitable."""
        return await self._await_lt(
            lambda: _lt_stats(lib.rmsg_ctx_stats, self._ctx))

    async def _await_lt(self, fn, *args):
        cf = concurrent.futures.Future()

        def work():
            try:
                cf.set_result(fn(*args))
            except BaseException as e:
                cf.set_exception(e)
        self._submit(work)
        return await asyncio.wrap_future(cf, loop=self._aloop)

    @overload
    def handle(self, method: int) -> Callable[[HandlerT], HandlerT]: ...

    @overload
    def handle(self, method: int, func: HandlerT) -> HandlerT: ...

    def handle(self, method: int, func: Optional[Handler] = None) -> Any:
        """Serve RPC method number `method` on every connection with
        func(conn, request: bytes). func (sync or async) runs on the
        asyncio loop and returns the reply (bytes-like, a list of them, or
        None for empty); raising RmsgError/OSError replies with its errno,
        any other exception replies EIO. func=None removes the handler.
        Usable as a decorator: @ctx.handle(1)."""
        method = int(method)

        def install(f):
            h = _register((self, method, f)) if f is not None else None

            def work():
                cb = _on_request if f is not None else _ffi.HANDLER_CB()
                return lib.rmsg_handle(self._ctx, method, cb, h)
            rc = self._run_sync(work)
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
        def work():
            return lib.rmsg_handle(self._ctx, int(method), _ffi.HANDLER_CB(),
                                   None)
        _check(self._run_sync(work))
        old = self._handler_handles.pop(int(method), None)
        if old:
            _handles.pop(old, None)

    def _py_request(self, conn, req, method, func, data):
        try:
            r = func(conn, data)
        except BaseException as e:
            self._reply(req, None, e)
            return
        if inspect.isawaitable(r):
            task = asyncio.ensure_future(r, loop=self._aloop)

            def done(t):
                if t.cancelled():
                    self._reply(req, None, RmsgError(_errno.ECANCELED))
                elif t.exception() is not None:
                    self._reply(req, None, t.exception())
                else:
                    self._reply(req, t.result(), None)
            task.add_done_callback(done)
        else:
            self._reply(req, r, None)

    def _reply(self, req, result, exc):
        if exc is None:
            try:
                iov = _Iov(result, max_n=IOV_MAX - 1)
            except BaseException as e:
                exc = e
        if exc is not None:
            err = getattr(exc, "errno", None)
            if not isinstance(exc, OSError) or not err or \
                    not 0 < err <= 4095:
                if not isinstance(exc, (OSError, asyncio.CancelledError)):
                    log.error("rmsg: handler failed", exc_info=exc)
                err = _errno.EIO
            iov = None

        def work():
            if self._reqs.pop(req, None) is None:
                return  # answered by the context's destroy
            if iov is None:
                rc = lib.rmsg_reply_error(req, -err)
            else:
                rc = lib.rmsg_reply(req, iov.arr, iov.n)
            if rc == -_errno.ENOMEM or rc == -_errno.EINVAL:
                # the request is still ours: give up with an error
                if lib.rmsg_reply_error(req, rc) in (-_errno.ENOMEM,
                                                     -_errno.EINVAL):
                    log.error("rmsg: cannot answer a request: %s",
                              strerror(rc))
        try:
            self._submit(work)
        except RmsgError:
            pass  # context closing: the destroy answered it

    def buf_alloc(self, size: int) -> Buffer:
        """Registered memory from the context's pools (sent without a
        copy). Returns a Buffer; free() it or let it be collected."""
        if size < 1:
            raise ValueError("size must be at least 1")

        def work():
            p = ctypes.c_void_p()
            _check(lib.rmsg_buf_alloc(self._ctx, size, ctypes.byref(p)))
            return p.value
        b = Buffer(self, self._run_sync(work), size)
        self._buffers.add(b)
        return b

    def mr_reg(self, buffer: WritableBuffer,
               access: int = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ) -> MR:
        """Register a writable buffer (bytearray, mmap, Buffer, ...) that
        peers may access; the buffer stays pinned until dereg()."""
        addr, n, pin = _addr_of(buffer, True)
        if not n:
            raise ValueError("cannot register an empty buffer")

        def work():
            p = ctypes.c_void_p()
            _check(lib.rmsg_mr_reg(self._ctx, addr, n, int(access),
                                   ctypes.byref(p)))
            return p.value
        m = MR(self, self._run_sync(work), buffer, pin, int(access))
        self._mrs.add(m)
        return m


# ---------------------------------------------------------------------
# listeners

class Listener:
    """Accepts connections; ``await l.accept()`` or ``async for conn in
    l``. Connections are delivered once established."""

    uri_requested: str
    #: the bound port (once listening)
    port: Optional[int]

    def __init__(self, ctx: Context, uri: str,
                 accept: Optional[AcceptFunc]) -> None:
        self._ctx = ctx
        self.uri_requested = uri
        self._accept_fn = accept
        self._handle = _register(self)
        self._lp = None
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

    def _lt_accept(self, c, pdata):
        res = None
        if self._accept_fn is not None:
            try:
                res = self._accept_fn(pdata)
            except OSError as e:
                return -(e.errno or _errno.ECONNREFUSED)
            if res is False:
                return -_errno.ECONNREFUSED
        conn = Connection(self._ctx, self)
        conn.peer_data = pdata
        if isinstance(res, (bytes, bytearray, memoryview)):
            res = bytes(res)
            rc = lib.rmsg_conn_set_private_data(c, res, len(res))
            if rc:
                _handles.pop(conn._handle, None)
                return rc
        lib.rmsg_conn_set_arg(c, conn._handle)
        conn._cptr = c
        self._ctx._conns[c] = conn
        return 0

    def _lt_closed(self):
        _handles.pop(self._handle, None)
        self._lp = None
        self._ctx._post(self._py_push, None)

    def _py_push(self, conn):
        if conn is None:
            self._closed = True
        else:
            self._queue.append(conn)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def accept(self) -> Connection:
        """The next established connection; RmsgError(ESHUTDOWN) once the
        listener is closed."""
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
        def work():
            if self._lp is None:
                return
            lib.rmsg_listener_close(self._lp)
            self._ctx._listeners.discard(self)
            self._lt_closed()
        if self._ctx._closing:
            return
        self._ctx._run_sync(work)


# ---------------------------------------------------------------------
# connections and their operations

class _Op:
    __slots__ = ("conn", "fut", "iov", "start", "handle", "call_id",
                 "started", "finished", "extra")

    def __init__(self, conn, fut, iov, start, extra=None):
        self.conn = conn
        self.fut = fut
        self.iov = iov
        self.start = start
        self.handle = None
        self.call_id = None
        self.started = False
        self.finished = False
        self.extra = extra


def _resolve(fut, exc, value):
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


#: a socket address: (host, port), host numeric ("10.0.0.1", "::1",
#: "fe80::1%eth0")
Address = Tuple[str, int]


def _address(buf) -> Optional[Address]:
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
    """One librmsg connection. Messages arrive as bytes (copied out of
    the receive buffer inside the callback)."""

    listener: Optional[Listener]
    transport: str
    fallback_reason: Optional[str]
    peer_data: bytes
    close_reason: Optional[int]
    on_imm: Optional[Callable[[int, int], Any]]

    def __init__(self, ctx: Context, listener: Optional[Listener]) -> None:
        self._ctx = ctx
        self.listener = listener
        self._handle = _register(self)
        self._cptr = None            # loop thread: NULL once closed
        self._last_stats: Optional[Dict[str, int]] = None
        self._blocked: Deque[_Op] = collections.deque()  # after EAGAIN
        aloop = ctx._aloop
        self._established = aloop.create_future()
        self._closed = aloop.create_future()
        self.transport = "none"
        self.fallback_reason = None
        self.peer_data = b""
        self._peer_addr: Optional[Address] = None
        self._local_addr: Optional[Address] = None
        self.close_reason = None
        self._msgs: Deque[bytes] = collections.deque()
        self._msg_waiter: Optional[asyncio.Future[None]] = None
        self._imms: Deque[Tuple[int, int]] = collections.deque()
        self._imm_waiter: Optional[asyncio.Future[None]] = None
        self.on_imm = None

    def __repr__(self):
        return "<rmsg.Connection %s %s>" % (
            self.transport, "closed" if self._closed.done() else "open")

    # -- loop thread -----------------------------------------------------

    def _lt_info(self):
        t = lib.rmsg_conn_transport(self._cptr)
        f = lib.rmsg_conn_fallback_reason(self._cptr)
        d = ctypes.c_void_p()
        n = ctypes.c_size_t()
        pdata = None
        if self.listener is None and lib.rmsg_conn_peer_data(
                self._cptr, ctypes.byref(d), ctypes.byref(n)) == 0:
            pdata = ctypes.string_at(d.value, n.value) if n.value else b""
        return (t.decode() if t else "none", f.decode() if f else None,
                pdata)

    def _lt_addrs(self):
        """(peer, local) addresses (rmsg_conn_peer_addr/local_addr), None
        each while not known."""
        res = []
        for fn in (lib.rmsg_conn_peer_addr, lib.rmsg_conn_local_addr):
            buf = ctypes.create_string_buffer(_ffi.SOCKADDR_STORAGE_SIZE)
            res.append(_address(buf.raw) if fn(self._cptr, buf) == 0
                       else None)
        return tuple(res)

    def _lt_established(self):
        self._ctx._post(self._py_addrs, *self._lt_addrs())
        self._ctx._post(self._py_established, *self._lt_info())
        if self.listener is not None:
            self._ctx._post(self.listener._py_push, self)

    def _lt_close(self, reason):
        # the counters as the connection ended: stats() after close
        self._last_stats = _lt_stats(lib.rmsg_conn_stats, self._cptr)
        info = self._lt_info()
        self._lt_fail_blocked(reason or -_errno.ECANCELED)
        self._ctx._conns.pop(self._cptr, None)
        self._cptr = None
        self._ctx._post(self._py_close, reason, *info)

    def _lt_fail_blocked(self, status):
        while self._blocked:
            op = self._blocked.popleft()
            _handles.pop(op.handle, None)
            self._lt_op_done(op, status, None)

    def _lt_start(self, op):
        if self._cptr is None:
            self._lt_op_done(op, -_errno.ENOTCONN, None)
            return
        op.handle = _register(op)
        for b in op.iov.bufs:
            b._inflight += 1
        if self._blocked:
            self._blocked.append(op)
            return
        self._lt_try(op)

    def _lt_try(self, op):
        """Starts op; False if the send queue is full (op stays blocked)."""
        rc = op.start(op)
        if rc == -_errno.EAGAIN:
            if not self._blocked or self._blocked[0] is not op:
                self._blocked.append(op)
            return False
        if rc:
            _handles.pop(op.handle, None)
            self._lt_op_done(op, rc, None)
        else:
            op.started = True
        return True

    def _lt_writable(self):
        while self._blocked and self._cptr is not None:
            op = self._blocked[0]
            if not self._lt_try(op):
                return
            if self._blocked and self._blocked[0] is op:
                self._blocked.popleft()

    def _lt_op_done(self, op, status, data):
        op.finished = True
        if op.handle is not None:
            for b in op.iov.bufs:
                b._inflight -= 1
                if b._inflight == 0 and b._free_pending:
                    b._lt_free()
        if self._ctx._mr_zombies:
            self._ctx._lt_retry_zombies()
        exc = _error(status) if status else None
        self._ctx._post(_resolve, op.fut, exc, data)
        op.iov = None

    def _lt_cancel_call(self, op):
        if op.finished:
            return
        if op.started:
            if self._cptr is not None:
                lib.rmsg_call_cancel(self._cptr, op.call_id)
        elif op in self._blocked:
            self._blocked.remove(op)
            _handles.pop(op.handle, None)
            self._lt_op_done(op, -_errno.ECANCELED, None)

    # -- asyncio thread ----------------------------------------------------

    def _py_addrs(self, peer, local):
        self._peer_addr = peer
        self._local_addr = local

    def _py_established(self, transport, fallback, pdata):
        self.transport = transport
        self.fallback_reason = fallback
        if pdata is not None:
            self.peer_data = pdata
        if not self._established.done():
            self._established.set_result(None)

    def _py_close(self, reason, transport, fallback, pdata):
        self.close_reason = reason
        self.transport = transport
        self.fallback_reason = fallback
        if pdata is not None:
            self.peer_data = pdata
        if not self._established.done():
            self._established.set_exception(
                _error(reason or -_errno.ECANCELED))
            self._established.exception()  # retrieved: no warning
        self._closed.set_result(reason)
        for w in (self._msg_waiter, self._imm_waiter):
            if w is not None and not w.done():
                w.set_result(None)

    def _py_msg(self, data):
        self._msgs.append(data)
        w = self._msg_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _py_imm(self, imm, ln):
        if self.on_imm is not None:
            self.on_imm(imm, ln)
            return
        self._imms.append((imm, ln))
        w = self._imm_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _op(self, iov, start, extra=None):
        fut = self._ctx._aloop.create_future()
        op = _Op(self, fut, iov, start, extra)
        self._ctx._submit(self._lt_start, op)
        return op

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

    def send(self, data: Data) -> asyncio.Future[None]:
        """Send one message gathered from a bytes-like object, a Buffer or
        a list of them (at most 256). Starts at once; returns an awaitable
        future that completes when the memory may be reused. Mutable
        buffers must not be changed until then. A full send queue (EAGAIN)
        is waited out in order; errors raise RmsgError."""
        iov = _Iov(data)
        return self._op(iov, lambda op: lib.rmsg_send(
            self._cptr, op.iov.arr, op.iov.n, _on_done, op.handle)).fut

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

        def start(op):
            cid = ctypes.c_uint64()
            rc = lib.rmsg_call(self._cptr, int(method), op.iov.arr, op.iov.n,
                               tmo, _on_reply, op.handle, ctypes.byref(cid))
            if rc == 0:
                op.call_id = cid.value
            return rc
        op = self._op(iov, start)

        def on_done(fut):
            if fut.cancelled():
                try:
                    self._ctx._submit(self._lt_cancel_call, op)
                except RmsgError:
                    pass
        op.fut.add_done_callback(on_done)
        return op.fut

    def _onesided(self, fn, data, remote_desc, offset, writable, *more):
        desc = bytes(remote_desc)
        if len(desc) != MR_DESC_SIZE:
            raise ValueError("a descriptor is %d bytes" % MR_DESC_SIZE)
        iov = _Iov(data, writable=writable)
        return self._op(iov, lambda op: fn(
            self._cptr, op.iov.arr, op.iov.n, desc, int(offset), *more,
            _on_done, op.handle), desc).fut

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
        when it closed. Awaitable (they are read on the loop thread)."""
        def work():
            if self._cptr is None:
                return self._last_stats
            return _lt_stats(lib.rmsg_conn_stats, self._cptr)
        st = await self._ctx._await_lt(work)
        if st is None:
            raise RmsgError(_errno.ENOTCONN, "connection not open yet")
        return st

    async def recv(self) -> bytes:
        """The next message as bytes; ConnectionClosed (errno = close
        reason, ECANCELED for a local close) after the last one."""
        while not self._msgs:
            if self._closed.done():
                r = self.close_reason
                raise _error(r or -_errno.ECANCELED, ConnectionClosed)
            self._msg_waiter = self._ctx._aloop.create_future()
            await self._msg_waiter
        return self._msgs.popleft()

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
        unless on_imm is set (then on_imm(imm, length) is called)."""
        while not self._imms:
            if self._closed.done():
                r = self.close_reason
                raise _error(r or -_errno.ECANCELED, ConnectionClosed)
            self._imm_waiter = self._ctx._aloop.create_future()
            await self._imm_waiter
        return self._imms.popleft()

    async def imms(self) -> AsyncIterator[Tuple[int, int]]:
        """Async iterator of (imm, length); ends at close."""
        while True:
            try:
                yield await self.recv_imm()
            except ConnectionClosed:
                return

    def _close_nowait(self):
        def work():
            if self._cptr is not None:
                lib.rmsg_conn_close(self._cptr)
        try:
            self._ctx._submit(work)
        except RmsgError:
            pass

    async def close(self) -> int:
        """Close and wait for on_close. Pending operations fail with
        ECANCELED. Returns the close reason (0 for this local close unless
        the connection had already failed)."""
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
        self._inflight = 0       # loop thread
        self._free_pending = False
        self._arr = (ctypes.c_char * size).from_address(ptr)
        self.view = memoryview(self._arr).cast("B")

    def _addr(self):
        if self._ptr is None or self._free_pending:
            raise ValueError("buffer freed")
        return self._ptr

    def __len__(self) -> int:
        return self.nbytes

    def __getitem__(self, i):
        if self._ptr is None:
            raise ValueError("buffer freed")
        return self.view[i]

    def __setitem__(self, i, v):
        if self._ptr is None:
            raise ValueError("buffer freed")
        self.view[i] = v

    def __bytes__(self) -> bytes:
        if self._ptr is None:
            raise ValueError("buffer freed")
        return self.view.tobytes()

    def _lt_free(self):
        if self._ptr is not None and self._ctx._ctx is not None:
            lib.rmsg_buf_free(self._ctx._ctx, self._ptr)
        self._ptr = None

    def free(self) -> None:
        """Return the memory to the pool, once operations using it are
        done."""
        if self._ptr is None or self._free_pending:
            return

        def work():
            if self._inflight:
                self._free_pending = True
            else:
                self._lt_free()
        try:
            self._ctx._submit(work)
        except RmsgError:
            self._ptr = None
        try:
            self.view.release()
        except BufferError:
            pass

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self):
        try:
            if self._ptr is not None and not self._ctx._closing:
                ctx, ptr = self._ctx, self._ptr
                ctx._submit(lambda: ctx._ctx and
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
        self._mr = mr
        self.buffer = buffer
        self._pin = pin
        self.access = access

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

        def work():
            if self._mr is None or self._ctx._ctx is None:
                raise RmsgError(_errno.EINVAL, "region deregistered")
            cptr = None
            if conn is not None:
                cptr = conn._cptr
                if cptr is None:
                    raise RmsgError(_errno.ENOTCONN, "connection closed")
            desc = ctypes.create_string_buffer(MR_DESC_SIZE)
            _check(lib.rmsg_mr_export(self._mr, cptr, off, length, flags,
                                      desc))
            return desc.raw
        return self._ctx._run_sync(work)

    def revoke(self, desc: BytesLike) -> None:
        """End the export `desc` (rmsg_mr_revoke); RmsgError(ENOENT) if it
        already ended."""
        desc = bytes(desc)
        if len(desc) != MR_DESC_SIZE:
            raise ValueError("descriptor must be %d bytes" % MR_DESC_SIZE)

        def work():
            if self._mr is None or self._ctx._ctx is None:
                raise RmsgError(_errno.EINVAL, "region deregistered")
            _check(lib.rmsg_mr_revoke(self._mr, desc))
        return self._ctx._run_sync(work)

    def __len__(self) -> int:
        if isinstance(self.buffer, Buffer):
            return self.buffer.nbytes
        return memoryview(self.buffer).nbytes

    def dereg(self) -> None:
        """Revoke the region; RmsgError(EBUSY) while local operations use
        its memory."""
        if self._mr is None:
            return

        def work():
            if self._ctx._ctx is None or self._mr is None:
                return 0
            rc = lib.rmsg_mr_dereg(self._mr)
            if rc == 0:
                self._mr = None
            return rc
        _check(self._ctx._run_sync(work))
        self._pin = None

    def __del__(self):
        try:
            if self._mr is None or self._ctx._closing:
                return
            ctx, mr, pin = self._ctx, self._mr, self._pin

            def work():
                if ctx._ctx is not None and \
                        lib.rmsg_mr_dereg(mr) == -_errno.EBUSY:
                    ctx._mr_zombies.append((mr, pin))
            ctx._submit(work)
        except BaseException:
            pass
