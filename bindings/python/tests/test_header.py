# SPDX-License-Identifier: MIT
"""The binding's ctypes declarations (rmsg/_ffi.py) are those of
include/rmsg.h (issue 35): this test parses the header and fails when a
prototype the binding declares, a callback type, the layout of struct
rmsg_stats (every counter's name, in order) or struct rmsg_conn_ops, or
a constant differs, and when the header has an option setter
(rmsg_cfg_set_NAME) the binding does not offer.

The header: include/rmsg.h of the source tree the tests belong to, or
$RMSG_HEADER; an installed package's tests (check-install.sh) use the
tree's too, through RMSG_HEADER when the runner sets it, and skip
otherwise."""
import ctypes
import os
import re

import pytest

from conftest import HERE, INSTALLED

import rmsg
from rmsg import _core, _ffi

# bindings/python/tests -> the top of the tree
_TREE_HEADER = os.path.join(HERE, "..", "..", "..", "include", "rmsg.h")
HEADER = os.environ.get("RMSG_HEADER") or _TREE_HEADER

pytestmark = pytest.mark.skipif(
    not os.path.isfile(HEADER),
    reason="no include/rmsg.h here (an installed copy of the tests; "
    "set RMSG_HEADER)" if INSTALLED else "include/rmsg.h not found")

# options the binding takes other than through _CFG_SETTERS
CFG_SPECIAL = {
    "private_data": "private_data=",
    "psk": "psk=",
    "log": "the 'rmsg' logger's level (rmsg_cfg_set_log with a callback "
           "into logging)",
}
# functions the binding declares that a library may lack (hooks used
# only when present): checked against the header when it has them
OPTIONAL = {"rmsg_conn_close_reason"}


# ---------------------------------------------------------------------
# the header, parsed


def _source():
    with open(HEADER, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    # preprocessor lines, continuations included
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    return text


def _split_params(params):
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [p.strip() for p in out]


def _ctype(decl):
    """The type of a declaration with or without its name, normalised:
    no const, one space between words, '*' counted: ('struct rmsg_cfg',
    1)."""
    decl = " ".join(decl.replace("*", " * ").split())
    m = re.fullmatch(r"(.*?)\s*\(\s*\*\s*(\w*)\s*\)\s*\((.*)\)", decl)
    if m:  # a function pointer member or parameter
        return ("fnptr", m.group(1), _split_params(m.group(3))), 0
    words = [w for w in decl.split() if w != "const"]
    # drop the name: the last word, unless the type is one word or ends
    # in '*' already
    if len(words) > 1 and words[-1] != "*" and not (
            len(words) == 2 and words[0] in ("struct", "enum")):
        if not (words[-1] in ("int", "unsigned", "char", "long", "void")
                and all(w in ("unsigned", "signed", "long", "int", "char",
                              "short", "void") for w in words)):
            words = words[:-1]
    stars = words.count("*")
    base = " ".join(w for w in words if w != "*")
    if base == "unsigned int":
        base = "unsigned"
    return base, stars


def _header():
    text = _source()
    funcs, typedefs, structs = {}, {}, {}
    for m in re.finditer(r"struct\s+(\w+)\s*\{(.*?)\}\s*;", text, re.S):
        members = [s.strip() for s in m.group(2).split(";") if s.strip()]
        structs[m.group(1)] = members
    text = re.sub(r"struct\s+\w+\s*\{.*?\}\s*;", " ", text, flags=re.S)
    text = re.sub(r"enum\s*\w*\s*\{.*?\}\s*;", " ", text, flags=re.S)
    for stmt in text.split(";"):
        stmt = " ".join(stmt.split())
        m = re.fullmatch(r"typedef (.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)",
                         stmt)
        if m:
            typedefs[m.group(2)] = (m.group(1), _split_params(m.group(3)))
            continue
        m = re.fullmatch(r"(?:extern )?(.+?)\b(rmsg_\w+)\s*\((.*)\)", stmt)
        if m:
            funcs[m.group(2)] = (m.group(1), _split_params(m.group(3)))
    enums = dict((k, int(v, 0)) for k, v in re.findall(
        r"\b(RMSG_[A-Z_]+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", _source()))
    with open(HEADER, encoding="utf-8") as f:
        defines = dict((k, int(v, 0)) for k, v in re.findall(
            r"^#define\s+(RMSG_[A-Z_]+)\s+(0x[0-9a-fA-F]+|\d+)\s*$",
            f.read(), re.M))
    return funcs, typedefs, structs, {**enums, **defines}


FUNCS, TYPEDEFS, STRUCTS, CONSTS = _header()

# ---------------------------------------------------------------------
# C types against ctypes

_SCALARS = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint,
    "size_t": ctypes.c_size_t, "uint64_t": ctypes.c_uint64,
    "uint32_t": ctypes.c_uint32, "uint16_t": ctypes.c_uint16,
}
# the callback typedefs of the header and the binding's types for them
_CALLBACKS = {
    "rmsg_log_cb": _ffi.LOG_CB, "rmsg_accept_cb": _ffi.ACCEPT_CB,
    "rmsg_done_cb": _ffi.DONE_CB, "rmsg_reply_cb": _ffi.REPLY_CB,
    "rmsg_handler_cb": _ffi.HANDLER_CB, "rmsg_pick_cb": _ffi.PICK_CB,
}
# structs the binding lays out; the others are opaque to it
_STRUCTS = {"rmsg_stats": _ffi.rmsg_stats,
            "rmsg_conn_ops": _ffi.conn_ops}


def _restype_of(fn):
    return getattr(fn, "restype", None) if "restype" in dir(fn) else \
        fn._restype_


def _argtypes_of(fn):
    a = getattr(fn, "argtypes", None)
    return list(a) if a is not None else list(fn._argtypes_)


def _match(ctype, py, where):
    """Whether the ctypes type py can stand for the C type ctype (as
    _ctype gives it); a message if not, else None."""
    base, stars = ctype
    if base == "fnptr":
        return _match_fn(ctype, py, where)
    if stars == 0:
        if base == "void":
            return None if py is None else "%s: void, binding %r" % (
                where, py)
        if base in _CALLBACKS:
            if py is not _CALLBACKS[base]:
                return "%s: %s, binding %r" % (where, base, py)
            return None
        want = _SCALARS.get(base)
        if want is None:
            return "%s: type %s unknown to this test" % (where, base)
        if py is not want and not (
                isinstance(py, type) and issubclass(py, ctypes._SimpleCData)
                and py._type_ == want._type_):
            return "%s: %s, binding %r" % (where, base, py)
        return None
    if stars == 1:
        if base == "char":
            ok = py in (ctypes.c_char_p, ctypes.c_void_p)
        elif base in _SCALARS:
            ok = py is ctypes.POINTER(_SCALARS[base])
        elif base.startswith("struct ") and base[7:] in _STRUCTS:
            ok = py in (ctypes.POINTER(_STRUCTS[base[7:]]),)
        else:  # void, an opaque struct, a byte buffer
            ok = py in (ctypes.c_void_p, ctypes.c_char_p)
        return None if ok else "%s: %s *, binding %r" % (where, base, py)
    if stars == 2:
        # a pointer out-parameter: to a string (char **) or to a handle
        ok = py is ctypes.POINTER(ctypes.c_void_p) or (
            base == "char" and py is ctypes.POINTER(ctypes.c_char_p))
        return None if ok else "%s: %s **, binding %r" % (where, base, py)
    return "%s: %s with %d stars" % (where, base, stars)


def _match_fn(ctype, cb, where):
    """A function pointer (member or typedef) against a CFUNCTYPE."""
    _, ret, params = ctype
    errs = []
    if params == ["void"]:
        params = []
    args = list(cb._argtypes_)
    if len(args) != len(params):
        return "%s: %d parameters, binding %d" % (where, len(params),
                                                   len(args))
    e = _match(_ctype(ret + " x"), cb._restype_, where + " return")
    if e:
        errs.append(e)
    for i, (p, a) in enumerate(zip(params, args)):
        e = _match(_ctype(p), a, "%s parameter %d (%s)" % (where, i + 1, p))
        if e:
            errs.append(e)
    return "; ".join(errs) or None


def _declared():
    """name -> the binding's function object, for each function _ffi
    declared (restype/argtypes set, or a versioned CFUNCTYPE)."""
    out = {}
    for name in dir(_ffi.lib):
        if name.startswith("rmsg_"):
            out[name] = getattr(_ffi.lib, name)
    # names looked up but never given a prototype are not declarations
    return {n: f for n, f in out.items()
            if not hasattr(f, "argtypes") or f.argtypes is not None
            or hasattr(f, "_argtypes_")}


# ---------------------------------------------------------------------
# the tests


def test_header_parsed():
    # enough of it that the checks below mean something
    assert len(FUNCS) > 60 and "rmsg_send" in FUNCS, sorted(FUNCS)[:5]
    assert set(_CALLBACKS) <= set(TYPEDEFS), sorted(TYPEDEFS)
    assert "rmsg_stats" in STRUCTS and "rmsg_conn_ops" in STRUCTS


def test_prototypes():
    declared = _declared()
    assert len(declared) > 50
    errs = []
    for name, fn in sorted(declared.items()):
        if name not in FUNCS:
            if name not in OPTIONAL:
                errs.append("%s: declared by the binding, not in "
                            "rmsg.h" % name)
            continue
        ret, params = FUNCS[name]
        if params == ["void"]:
            params = []
        args = _argtypes_of(fn)
        e = _match(_ctype(ret + " x"), _restype_of(fn), name + " return")
        if e:
            errs.append(e)
        if len(args) != len(params):
            errs.append("%s: %d parameters in rmsg.h, %d in the binding"
                        % (name, len(params), len(args)))
            continue
        for i, (p, a) in enumerate(zip(params, args)):
            e = _match(_ctype(p), a, "%s parameter %d (%s)"
                       % (name, i + 1, p))
            if e:
                errs.append(e)
    assert not errs, "\n".join(errs)


def test_callback_types():
    errs = []
    for name, cb in _CALLBACKS.items():
        ret, params = TYPEDEFS[name]
        e = _match_fn(("fnptr", ret, params), cb, name)
        if e:
            errs.append(e)
    assert not errs, "\n".join(errs)


def test_stats_counters():
    """struct rmsg_stats: every member, in order, is a uint64_t counter
    the binding names (STATS_FIELDS, which stats() returns)."""
    members = [_ctype(m) for m in STRUCTS["rmsg_stats"]]
    names = [m.split()[-1] for m in STRUCTS["rmsg_stats"]]
    assert all(t == ("uint64_t", 0) for t in members), members
    assert list(_ffi.STATS_FIELDS) == names, (
        "struct rmsg_stats in rmsg.h and STATS_FIELDS in _ffi.py differ: "
        "header only %s, binding only %s" % (
            [n for n in names if n not in _ffi.STATS_FIELDS],
            [n for n in _ffi.STATS_FIELDS if n not in names]))
    assert ctypes.sizeof(_ffi.rmsg_stats) == 8 * len(names)


def test_conn_ops_layout():
    """struct rmsg_conn_ops at the binding's version (CONN_OPS_VERSION):
    the header's members, in order, with their signatures. A member
    appended by a later release is allowed only with a newer
    CONN_OPS_VERSION in the binding (docs/versioning.md)."""
    members = STRUCTS["rmsg_conn_ops"]
    fields = _ffi.conn_ops._fields_
    assert _ffi.CONN_OPS_VERSION == b"LIBRMSG_0.1" or \
        len(fields) == len(members)
    assert len(fields) <= len(members)
    errs = []
    for (fname, ftype), m in zip(fields, members):
        t = _ctype(m)[0]
        cname = re.search(r"\(\s*\*\s*(\w+)\s*\)", m).group(1)
        if cname != fname:
            errs.append("member %s in rmsg.h, %s in the binding"
                        % (cname, fname))
        e = _match_fn(t, ftype, "rmsg_conn_ops." + cname)
        if e:
            errs.append(e)
    assert not errs, "\n".join(errs)


def test_constants():
    for name in ("RMSG_PRIVATE_DATA_MAX", "RMSG_IOV_MAX", "RMSG_GROUP_MAX",
                 "RMSG_MR_DESC_SIZE", "RMSG_ACCESS_REMOTE_WRITE",
                 "RMSG_ACCESS_REMOTE_READ", "RMSG_EXPORT_ANY_PEER",
                 "RMSG_LOG_ERROR", "RMSG_LOG_WARN", "RMSG_LOG_INFO",
                 "RMSG_LOG_DEBUG", "RMSG_RESUME_NONE", "RMSG_RESUME_ON",
                 "RMSG_RESUME_SUSPENDED"):
        assert name in CONSTS, name
        assert getattr(_ffi, name) == CONSTS[name], name
    assert rmsg.PRIVATE_DATA_MAX == CONSTS["RMSG_PRIVATE_DATA_MAX"]
    assert rmsg.IOV_MAX == CONSTS["RMSG_IOV_MAX"]
    assert rmsg.MR_DESC_SIZE == CONSTS["RMSG_MR_DESC_SIZE"]
    assert rmsg.RESUME_SUSPENDED == CONSTS["RMSG_RESUME_SUSPENDED"]


def test_every_option():
    """Each rmsg_cfg_set_NAME() of the header is an option of the
    binding (NAME=), with the setter the header declares."""
    setters = sorted(n[len("rmsg_cfg_set_"):] for n in FUNCS
                     if n.startswith("rmsg_cfg_set_"))
    assert len(setters) > 10
    missing = [n for n in setters
               if n not in _core._CFG_SETTERS and n not in CFG_SPECIAL]
    assert not missing, "options of rmsg.h the binding lacks: %s" % missing
    for n, fn in _core._CFG_SETTERS.items():
        assert fn is getattr(_ffi.lib, "rmsg_cfg_set_" + n), n
