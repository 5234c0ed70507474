# SPDX-License-Identifier: MIT
"""Host names in connect(): resolved off the loop thread by the library
(rmsg_connect.3); a name that does not resolve fails with ENXIO on every
transport."""
import errno
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import rmsg
from conftest import (HERE, INSTALLED, TRANSPORT, Pair, async_test,
                      echo_server, scaled)


@async_test
async def test_connect_by_name():
    if TRANSPORT != "tcp":
        pytest.skip("a name for the RDMA address would need /etc/hosts")
    async with Pair() as p:
        p.serve(echo_server)
        port = p.listener.uri.rsplit(":", 1)[1]
        # "localhost" is a name: the resolver thread reads /etc/hosts
        conn = await p.cctx.connect("tcp://localhost:" + port)
        await conn.send(b"by name")
        assert await conn.recv() == b"by name"
        await conn.close()


# run in a private mount and network namespace whose resolv.conf names a
# server that is not there: the name service fails at once
CHILD = r"""
import asyncio, errno, sys
if %(path)r:
    sys.path.insert(0, %(path)r)
import rmsg

async def main():
    ctx = rmsg.Context()
    try:
        await ctx.connect("%(transport)s://nx.rmsg.test:7000")
    except rmsg.RmsgError as e:
        print("errno", e.errno)
    else:
        print("connected")
    await ctx.close()

asyncio.run(main())
"""


def test_name_not_resolved():
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        pytest.skip("needs root and unshare(1) for a private resolv.conf")
    with tempfile.TemporaryDirectory() as tmp:
        rc = os.path.join(tmp, "resolv.conf")
        ns = os.path.join(tmp, "nsswitch.conf")
        with open(rc, "w") as f:
            f.write("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
        with open(ns, "w") as f:
            f.write("hosts: files dns\n")
        script = CHILD % {
            "path": "" if INSTALLED else os.path.dirname(HERE),
            "transport": TRANSPORT,
        }
        cmd = [unshare, "-m", "-n", "sh", "-c",
               "mount --make-rprivate / && "
               "mount --bind \"$1\" /etc/resolv.conf && "
               "mount --bind \"$2\" /etc/nsswitch.conf && "
               "exec \"$3\" -c \"$4\"",
               "sh", rc, ns, sys.executable, script]
        out = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=scaled(60))
    assert out.returncode == 0, out.stderr
    # rmsg_connect.3: -ENXIO, the same on every transport
    assert out.stdout.split() == ["errno", str(errno.ENXIO)], \
        out.stdout + out.stderr
