# SPDX-License-Identifier: MIT
"""ctypes declarations of librmsg (include/rmsg.h). The binding drives a
context made by rmsg_ctx_create_fd() from asyncio's loop, on one thread;
see _core.py."""

import ctypes
import ctypes.util
import os
from typing import Any, List, Optional, Tuple
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_size_t,
                    c_uint, c_uint16, c_uint32, c_uint64, c_void_p)

RMSG_PRIVATE_DATA_MAX = 32
RMSG_IOV_MAX = 256
RMSG_MR_DESC_SIZE = 32
RMSG_ACCESS_REMOTE_WRITE = 1
RMSG_ACCESS_REMOTE_READ = 2
RMSG_EXPORT_ANY_PEER = 0x100
RMSG_LOG_ERROR, RMSG_LOG_WARN, RMSG_LOG_INFO, RMSG_LOG_DEBUG = 0, 1, 2, 3
# enum rmsg_resume_state (rmsg_conn_resume_state(3))
RMSG_RESUME_NONE, RMSG_RESUME_ON, RMSG_RESUME_SUSPENDED = 0, 1, 2

# the library's soname: the ABI these declarations are written for
SONAME = "librmsg.so.0"


def _build_tree() -> Optional[str]:
    """The top of the source tree when this package is the one in it
    (bindings/python/rmsg), else None (an installed package)."""
    here = os.path.dirname(os.path.abspath(__file__))
    python = os.path.dirname(here)
    bindings = os.path.dirname(python)
    if (os.path.basename(here), os.path.basename(python),
            os.path.basename(bindings)) != ("rmsg", "python", "bindings"):
        return None
    top = os.path.dirname(bindings)
    if not os.path.exists(os.path.join(top, "include", "rmsg.h")):
        return None
    return top


def _find_librmsg() -> List[str]:
    """Where librmsg comes from, in this order: $RMSG_LIB (a path, or a
    name for dlopen); the build tree's .libs when this package is the one
    in the source tree; else the installed library: the soname through
    the dynamic loader's search (ld.so.cache, the default directories),
    then ctypes.util.find_library("rmsg")."""
    path = os.environ.get("RMSG_LIB")
    if path:
        return [path]
    top = _build_tree()
    if top is not None:
        for name in ("librmsg.so", SONAME):
            cand = os.path.join(top, ".libs", name)
            if os.path.exists(cand):
                return [cand]
    names = [SONAME]
    found = ctypes.util.find_library("rmsg")
    if found and found != SONAME:
        names.append(found)
    return names


def _loaded_path(name: str) -> str:
    """The file the dynamic loader opened for @name (a name without a
    directory is searched for): from /proc/self/maps, else @name."""
    if "/" in name:
        return name
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(path).startswith("librmsg.so"):
                    return path
    except OSError:
        pass
    return name


def _load_librmsg() -> Tuple[str, ctypes.CDLL]:
    errors = []
    for name in _find_librmsg():
        try:
            # CDLL: a call releases the GIL, so the library's own
            # threads (the resolver) never wait for Python
            lib = ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
            continue
        return _loaded_path(name), lib
    how = ("RMSG_LIB=%s" % os.environ["RMSG_LIB"]
           if os.environ.get("RMSG_LIB") else "no RMSG_LIB")
    raise ImportError("librmsg not found (%s: %s): install it (librmsg0, "
                      "or 'make install' and ldconfig), set RMSG_LIB to "
                      "the path of librmsg.so, or build the source tree"
                      % (how, "; ".join(errors)))



LIBRMSG_PATH, lib = _load_librmsg()


class iovec(Structure):
    _fields_ = [("iov_base", c_void_p), ("iov_len", c_size_t)]


class iovec_bytes(Structure):
    """A struct iovec over one bytes object, made in one step (the
    c_char_p member points into the bytes and keeps them referenced)."""
    _fields_ = [("iov_base", c_char_p), ("iov_len", c_size_t)]


# callback types (every pointer is passed as an int, NULL as None)
ESTABLISHED_CB = CFUNCTYPE(None, c_void_p, c_void_p)
MSG_CB = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p)
IMM_CB = CFUNCTYPE(None, c_void_p, c_uint32, c_size_t, c_void_p)
WRITABLE_CB = CFUNCTYPE(None, c_void_p, c_void_p)
CLOSE_CB = CFUNCTYPE(None, c_void_p, c_int, c_void_p)
ACCEPT_CB = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p)
DONE_CB = CFUNCTYPE(None, c_void_p, c_int, c_void_p)
REPLY_CB = CFUNCTYPE(None, c_void_p, c_int, c_void_p, c_void_p)
HANDLER_CB = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p, c_void_p)
LOG_CB = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
PICK_CB = CFUNCTYPE(c_uint, c_void_p, c_uint, c_void_p)


class conn_ops(Structure):
    _fields_ = [("on_established", ESTABLISHED_CB),
                ("on_msg", MSG_CB),
                ("on_imm", IMM_CB),
                ("on_writable", WRITABLE_CB),
                ("on_close", CLOSE_CB)]


# struct rmsg_stats (rmsg_conn_stats(3)), its members in order; the
# library only ever appends members, so a new one is one more name here
STATS_FIELDS = (
    "msgs_sent", "bytes_sent", "msgs_recv", "bytes_recv",
    "eager_sent", "rndv_sent", "eager_recv", "rndv_recv",
    "writes", "writes_imm", "reads", "writes_served", "reads_served",
    "imm_recv", "credit_stalls", "sendq_full", "ka_probes", "ka_timeouts",
    "refused_peer", "refused_ours", "proto_errors", "fallbacks",
    "conns_opened", "conns_accepted", "conns_refused", "conns_closed",
    "auth_failures", "packs_sent", "packed_sent", "packs_recv", "packed_recv",
    "reg_taken", "reg_given", "suspends", "resumes", "replayed",
    "resume_refused", "failbacks", "credits_given", "credits_reclaimed",
)


class rmsg_stats(Structure):
    _fields_ = [(name, c_uint64) for name in STATS_FIELDS]


def _decl(name: str, restype: Any, *argtypes: Any) -> None:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


P = c_void_p
# iovec arrays go by address (ctypes.addressof): iovec or iovec_bytes;
# the library copies the array before it returns (rmsg_send(3))
IOV_P = c_void_p

_decl("rmsg_cfg_create", c_int, POINTER(c_void_p))
_decl("rmsg_cfg_destroy", None, P)
_decl("rmsg_cfg_set_eager_size", c_int, P, c_size_t)
_decl("rmsg_cfg_set_credits", c_int, P, c_uint)
_decl("rmsg_cfg_set_credits_initial", c_int, P, c_uint)
_decl("rmsg_cfg_set_send_queue", c_int, P, c_uint)
_decl("rmsg_cfg_set_busy_poll_us", c_int, P, c_uint)
_decl("rmsg_cfg_set_max_msg_size", c_int, P, c_size_t)
_decl("rmsg_cfg_set_private_data", c_int, P, c_char_p, c_size_t)
_decl("rmsg_cfg_set_psk", c_int, P, c_char_p, c_size_t)
_decl("rmsg_cfg_set_timeout_ms", c_int, P, c_uint)
_decl("rmsg_cfg_set_reg_limit", c_int, P, c_size_t)
_decl("rmsg_cfg_set_tcp_rx_limit", c_int, P, c_size_t)
_decl("rmsg_cfg_set_tcp_window", c_int, P, c_size_t)
_decl("rmsg_cfg_set_max_conns", c_int, P, c_uint)
_decl("rmsg_cfg_set_max_pending", c_int, P, c_uint)
_decl("rmsg_cfg_set_keepalive_ms", c_int, P, c_uint)
_decl("rmsg_cfg_set_keepalive_misses", c_int, P, c_uint)
_decl("rmsg_cfg_set_resume_ms", c_int, P, c_uint)
_decl("rmsg_cfg_set_log", c_int, P, c_int, LOG_CB, P)
_decl("rmsg_ctx_destroy", c_int, P)
# any event loop (LIBRMSG_0.2): how the binding runs a context
try:
    _decl("rmsg_ctx_create_fd", c_int, P, POINTER(c_void_p))
    _decl("rmsg_ctx_fd", c_int, P)
    _decl("rmsg_ctx_timeout", c_int, P, POINTER(c_int))
    _decl("rmsg_ctx_progress", c_int, P)
except AttributeError as e:
    raise ImportError("%s has no rmsg_ctx_create_fd (LIBRMSG_0.2): the "
                      "binding needs librmsg 0.2 or later (%s)"
                      % (LIBRMSG_PATH, e)) from None
# conn_ops above has the layout of LIBRMSG_0.1. dlsym (ctypes' getattr)
# gives a function's newest version; a later release that grows struct
# rmsg_conn_ops keeps the 0.1 layout served at version LIBRMSG_0.1 only
# (rmsg(7), ABI), so the functions that take it are taken at the version
# of this struct, with dlvsym.
CONN_OPS_VERSION = b"LIBRMSG_0.1"
_libc = ctypes.CDLL(None)
_libc.dlvsym.restype = c_void_p
_libc.dlvsym.argtypes = [c_void_p, c_char_p, c_char_p]


def _decl_versioned(name: str, version: bytes, restype: Any,
                    *argtypes: Any) -> None:
    addr = _libc.dlvsym(lib._handle, name.encode(), version)
    if not addr:
        raise ImportError("%s: no %s@%s" % (LIBRMSG_PATH, name,
                                           version.decode()))
    setattr(lib, name, CFUNCTYPE(restype, *argtypes)(addr))


_decl_versioned("rmsg_listen", CONN_OPS_VERSION, c_int, P, c_char_p, P,
                POINTER(conn_ops), ACCEPT_CB, P, POINTER(c_void_p))
# rmsg_listen_group() exists from LIBRMSG_0.2 on, where struct
# rmsg_conn_ops has the layout of conn_ops above; a release that grows
# the struct keeps that layout at this version (as for CONN_OPS_VERSION)
GROUP_OPS_VERSION = b"LIBRMSG_0.2"
_decl_versioned("rmsg_listen_group", GROUP_OPS_VERSION, c_int,
                POINTER(c_void_p), c_uint, c_char_p, P, POINTER(conn_ops),
                ACCEPT_CB, PICK_CB, P, POINTER(c_void_p))
RMSG_GROUP_MAX = 64
_decl("rmsg_listener_port", c_int, P, POINTER(c_uint16))
_decl("rmsg_listener_close", c_int, P)
_decl_versioned("rmsg_connect", CONN_OPS_VERSION, c_int, P, c_char_p, P,
                POINTER(conn_ops), P, POINTER(c_void_p))
_decl("rmsg_conn_close", c_int, P)
_decl("rmsg_conn_transport", c_char_p, P)
_decl("rmsg_conn_ctx", c_void_p, P)
_decl("rmsg_conn_fallback_reason", c_char_p, P)
_decl("rmsg_conn_resume_state", c_int, P)
_decl("rmsg_conn_set_arg", c_int, P, P)
_decl("rmsg_conn_stats", c_int, P, POINTER(rmsg_stats), c_size_t)
_decl("rmsg_ctx_stats", c_int, P, POINTER(rmsg_stats), c_size_t)
_decl("rmsg_conn_set_private_data", c_int, P, c_char_p, c_size_t)
_decl("rmsg_conn_peer_data", c_int, P, POINTER(c_void_p), POINTER(c_size_t))
# struct sockaddr_storage: 128 bytes on Linux
SOCKADDR_STORAGE_SIZE = 128
_decl("rmsg_conn_peer_addr", c_int, P, c_char_p)
_decl("rmsg_conn_local_addr", c_int, P, c_char_p)
_decl("rmsg_send", c_int, P, IOV_P, c_int, DONE_CB, P)
_decl("rmsg_msg_data", c_void_p, P)
_decl("rmsg_msg_len", c_size_t, P)
_decl("rmsg_msg_hold", c_int, P)
_decl("rmsg_msg_release", None, P)
_decl("rmsg_buf_alloc", c_int, P, c_size_t, POINTER(c_void_p))
_decl("rmsg_buf_free", None, P, P)
_decl("rmsg_mr_reg", c_int, P, P, c_size_t, c_int, POINTER(c_void_p))
_decl("rmsg_mr_dereg", c_int, P)
_decl("rmsg_mr_export", c_int, P, P, c_uint64, c_uint64, c_int, c_char_p)
_decl("rmsg_mr_revoke", c_int, P, c_char_p)
_decl("rmsg_write_imm", c_int, P, IOV_P, c_int, c_char_p, c_uint64, c_uint32,
      DONE_CB, P)
_decl("rmsg_write", c_int, P, IOV_P, c_int, c_char_p, c_uint64, DONE_CB, P)
_decl("rmsg_read", c_int, P, IOV_P, c_int, c_char_p, c_uint64, DONE_CB, P)
_decl("rmsg_handle", c_int, P, c_uint32, HANDLER_CB, P)
_decl("rmsg_call", c_int, P, c_uint32, IOV_P, c_int, c_uint32, REPLY_CB, P,
      POINTER(c_uint64))
_decl("rmsg_call_cancel", c_int, P, c_uint64)
_decl("rmsg_reply", c_int, P, IOV_P, c_int)
_decl("rmsg_reply_error", c_int, P, c_int)
_decl("rmsg_strerror", c_char_p, c_int)
_decl("rmsg_err_name", c_char_p, c_int)
_decl("rmsg_conn_close_reason", c_char_p, P)
# why a connection closed, in words (CloseReason.text)
conn_close_reason: Any = lib.rmsg_conn_close_reason
_decl("rmsg_stat_count", c_int)
_decl("rmsg_stat_info", c_int, c_int, POINTER(c_char_p), POINTER(c_char_p),
      POINTER(c_uint))
_decl("rmsg_ctx_stats_export", c_int, P, c_int, c_char_p, c_size_t)
# enum rmsg_stat_flags, enum rmsg_stats_format (rmsg_stat_count(3),
# rmsg_ctx_stats_export(3))
STAT_COUNTER = 1
STAT_CTX_ONLY = 2
STATS_PROMETHEUS = 0
STATS_JSON = 1
_decl("rmsg_version", c_char_p, POINTER(c_uint), POINTER(c_uint),
      POINTER(c_uint))
