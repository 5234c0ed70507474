# SPDX-License-Identifier: MIT
"""The README's example is examples/echo_rpc.py verbatim, and it runs."""
import os
import subprocess
import sys

from conftest import HERE, TIMEOUT, listen_uri

TOP = os.path.dirname(HERE)
EXAMPLE = os.path.join(TOP, "examples", "echo_rpc.py")


def test_readme_embeds_the_example():
    with open(os.path.join(TOP, "README.md")) as f:
        readme = f.read()
    with open(EXAMPLE) as f:
        assert "```python\n" + f.read() + "```" in readme


def test_example_runs():
    out = subprocess.run([sys.executable, EXAMPLE, listen_uri()],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "echo: hello" in out.stdout
    assert "100 pipelined calls answered" in out.stdout
    assert "error: EINVAL" in out.stdout
