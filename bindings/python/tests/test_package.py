# SPDX-License-Identifier: MIT
"""The package as a dependency: its version is the library's, it is
typed (py.typed, annotations), and it loads the library it should:
RMSG_LIB when set, the build tree's before any installed one when it is
the tree's package, the installed library through the dynamic loader
otherwise. Run in the tree (run-tests.sh) and installed (check-install.sh,
RMSG_PY_TEST_INSTALLED=1)."""
import ctypes
import importlib.metadata
import inspect
import os
import re
import subprocess
import sys
import typing

import pytest

from conftest import HERE, INSTALLED

import rmsg

TOP = os.path.dirname(HERE)          # bindings/python, or its copy
PKG = os.path.dirname(os.path.abspath(rmsg.__file__))


def released_version():
    """The release this package came with: pyproject.toml in the tree,
    the installed distribution's metadata otherwise."""
    if INSTALLED:
        return importlib.metadata.version("rmsg")
    import tomllib
    with open(os.path.join(TOP, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["version"]


def test_version_is_the_librarys():
    assert re.fullmatch(r"\d+\.\d+\.\d+", rmsg.__version__)
    assert rmsg.version_info == tuple(int(x) for x in
                                      rmsg.__version__.split("."))
    # asked of the loaded library directly
    lib = ctypes.CDLL(rmsg.LIBRMSG_PATH)
    lib.rmsg_version.restype = ctypes.c_char_p
    v = [ctypes.c_uint() for _ in range(3)]
    text = lib.rmsg_version(*(ctypes.byref(x) for x in v)).decode()
    assert rmsg.__version__ == text
    assert rmsg.version_info == tuple(x.value for x in v)
    # and the package's release is the library's (a release bumps both)
    assert released_version() == rmsg.__version__


def test_package_is_the_expected_one():
    if INSTALLED:
        # the installed copy, not a source tree's
        assert not os.path.exists(os.path.join(PKG, "..", "pyproject.toml"))
        assert PKG.startswith(os.path.realpath(sys.prefix) + os.sep) or \
            PKG.startswith(sys.prefix + os.sep)
        files = [str(f) for f in importlib.metadata.files("rmsg")]
        assert "rmsg/py.typed" in files
    else:
        assert PKG == os.path.join(TOP, "rmsg")


def test_py_typed():
    assert os.path.isfile(os.path.join(PKG, "py.typed"))


def public_callables():
    for name in rmsg.__all__:
        obj = getattr(rmsg, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__.startswith("rmsg"):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in (
                        "__init__", "__aenter__", "__aiter__",
                        "__anext__", "__enter__", "__len__", "__bytes__"):
                    continue
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    yield "%s.%s" % (name, attr), member


def test_type_hints():
    """Every public function and method annotates its parameters and
    its return, and the annotations resolve."""
    seen = 0
    for name, f in public_callables():
        hints = typing.get_type_hints(f)
        params = [p for p in inspect.signature(f).parameters.values()
                  if p.name not in ("self", "cls")]
        missing = [p.name for p in params if p.name not in hints]
        assert not missing, "%s: no annotation for %s" % (name, missing)
        assert "return" in hints, "%s: no return annotation" % name
        seen += 1
    assert seen > 30  # the API is there


def load_in_subprocess(env, cwd):
    """rmsg.LIBRMSG_PATH as seen by a fresh interpreter, or the error."""
    path = [] if INSTALLED else [TOP]
    code = ("import sys; sys.path[:0] = %r; import rmsg; "
            "print(rmsg.LIBRMSG_PATH)" % path)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RMSG_LIB", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update(extra)
    return env


def test_rmsg_lib_overrides(tmp_path):
    # RMSG_LIB is obeyed: a wrong one fails, nothing else is taken
    out = load_in_subprocess(clean_env(RMSG_LIB=str(tmp_path / "none.so")),
                             str(tmp_path))
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "RMSG_LIB" in out.stderr
    if os.environ.get("RMSG_LIB"):
        assert os.path.samefile(rmsg.LIBRMSG_PATH, os.environ["RMSG_LIB"])


def test_tree_package_prefers_the_build_tree(tmp_path):
    """Without RMSG_LIB, the tree's package loads the build tree's
    library (an in-place build), whatever else is installed."""
    if INSTALLED:
        pytest.skip("the installed package has no build tree")
    lib = os.path.join(TOP, "..", "..", ".libs", "librmsg.so")
    if not os.path.exists(lib):
        pytest.skip("not an in-place build (no %s)" % lib)
    out = load_in_subprocess(clean_env(), str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert os.path.samefile(out.stdout.strip(), lib)


def test_installed_package_uses_the_loader(tmp_path):
    """Without RMSG_LIB, the installed package finds librmsg.so.0 where
    the dynamic loader does (here: LD_LIBRARY_PATH pointing at the
    library under test; on a system install, ld.so.cache)."""
    if not INSTALLED:
        pytest.skip("the tree's package prefers its build tree")
    if not os.environ.get("RMSG_LIB"):
        # this process found it so: the file the loader opened for the
        # soname
        assert os.path.isabs(rmsg.LIBRMSG_PATH)
        assert os.path.basename(rmsg.LIBRMSG_PATH).startswith(
            "librmsg.so.0")
        return
    libdir = os.path.dirname(os.path.realpath(os.environ["RMSG_LIB"]))
    out = load_in_subprocess(clean_env(LD_LIBRARY_PATH=libdir),
                             str(tmp_path))
    assert out.returncode == 0, out.stderr
    got = out.stdout.strip()
    assert os.path.isabs(got)
    assert os.path.samefile(got, os.path.join(libdir, "librmsg.so.0"))
