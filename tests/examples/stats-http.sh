#!/bin/sh
# SPDX-License-Identifier: MIT
#
# stats-http.sh - runs tests/examples/stats_http.py (examples/stats_http:
# the counters over HTTP, parsed by python3-prometheus-client) with
# Debian's python3, which has the parser (scripts/setup.sh test installs
# it). Automake test: exit 0 pass, 1 fail. Environment: top_builddir
# (default: .), top_srcdir (default: this script's ../..), PYTHON.
srcdir=${top_srcdir:-$(dirname "$0")/../..}
builddir=${top_builddir:-.}
PY=${PYTHON:-/usr/bin/python3}
exec "$PY" "$srcdir/tests/examples/stats_http.py" "$builddir/examples/stats_http"
