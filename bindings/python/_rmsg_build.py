# SPDX-License-Identifier: MIT
"""The rmsg package's build backend (PEP 517), in the tree and standard
library only, so that `pip install bindings/python` needs nothing but
pip and any python3 >= 3.9: no setuptools or wheel, no network. (With
setuptools as the backend, a python3 that is not Debian's, in a venv
without the `wheel` package, failed with "invalid command 'bdist_wheel'"
(issue 35).)

The package is pure Python: a wheel is a zip of rmsg/ and its metadata
(PEP 427, core metadata 2.1), an sdist a tar of the files the wheel is
made from plus this backend. The metadata comes from pyproject.toml's
[project] table, read by the small reader below: tomllib exists only
from Python 3.11."""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "rmsg"
TAG = "py3-none-any"


def _project() -> Dict[str, Any]:
    """The [project] table's strings and lists of strings (what this
    pyproject.toml uses of TOML, no more)."""
    out: Dict[str, Any] = {}
    table = None
    key = None
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if line.startswith("#"):
                continue
            if not line:
                continue
            m = re.fullmatch(r"\[([^\]]+)\]", line)
            if m:
                table = m.group(1)
                key = None
                continue
            if table != "project":
                continue
            if key is not None:          # inside a list
                if line.startswith("]"):
                    key = None
                    continue
                out[key].extend(re.findall(r'"([^"]*)"', line))
                continue
            m = re.fullmatch(r'([A-Za-z_-]+)\s*=\s*(.*)', line)
            if not m:
                continue
            name, value = m.group(1), m.group(2)
            if value.startswith("["):
                out[name] = re.findall(r'"([^"]*)"', value)
                if not value.rstrip().endswith("]"):
                    key = name
            elif value.startswith('"'):
                out[name] = value.strip('"')
            elif value.startswith("{"):
                m2 = re.search(r'text\s*=\s*"([^"]*)"', value)
                if m2:
                    out[name] = m2.group(1)
    for need in ("name", "version"):
        if need not in out:
            raise RuntimeError("pyproject.toml: no [project] %s" % need)
    return out


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1",
             "Name: %s" % p["name"],
             "Version: %s" % p["version"]]
    if "description" in p:
        lines.append("Summary: %s" % p["description"])
    if "license" in p:
        lines.append("License: %s" % p["license"])
    if "requires-python" in p:
        lines.append("Requires-Python: %s" % p["requires-python"])
    for c in p.get("classifiers", []):
        lines.append("Classifier: %s" % c)
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _dist_info() -> str:
    p = _project()
    return "%s-%s.dist-info" % (p["name"], p["version"])


def _package_files() -> List[str]:
    """rmsg/*.py and rmsg/py.typed, relative to HERE, sorted."""
    files = []
    for name in sorted(os.listdir(os.path.join(HERE, PACKAGE))):
        if name.endswith(".py") or name == "py.typed":
            files.append(PACKAGE + "/" + name)
    return files


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return "%s,sha256=%s,%d" % (path, digest.rstrip(b"=").decode(),
                               len(data))


def _write_wheel(wheel_directory: str, editable: bool) -> str:
    p = _project()
    name = "%s-%s-%s.whl" % (p["name"], p["version"], TAG)
    info = _dist_info()
    entries: List[Tuple[str, bytes]] = []
    if editable:
        # PEP 660: a .pth file that puts this directory on sys.path
        entries.append(("%s.pth" % PACKAGE, (HERE + "\n").encode()))
    else:
        for rel in _package_files():
            with open(os.path.join(HERE, rel), "rb") as f:
                entries.append((rel, f.read()))
    entries.append((info + "/METADATA", _metadata().encode("utf-8")))
    entries.append((info + "/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: _rmsg_build\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n").encode()))
    entries.append((info + "/top_level.txt", (PACKAGE + "\n").encode()))
    record = [_record_line(path, data) for path, data in entries]
    record.append(info + "/RECORD,,")
    entries.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for path, data in entries:
            zi = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


# ---- PEP 517 / PEP 660 hooks -------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]]
                                 = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]]
                                 = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[
        Dict[str, Any]] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str,
                config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, editable=False)


def build_editable(wheel_directory: str,
                   config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory: str,
                config_settings: Optional[Dict[str, Any]] = None) -> str:
    p = _project()
    base = "%s-%s" % (p["name"], p["version"])
    name = base + ".tar.gz"
    files = ["pyproject.toml", "README.md", "_rmsg_build.py"] + \
        _package_files()
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz",
                      format=tarfile.PAX_FORMAT) as t:
        for rel in files:
            t.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        data = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        ti.mtime = int(time.time())
        ti.mode = 0o644
        t.addfile(ti, io.BytesIO(data))
    return name
