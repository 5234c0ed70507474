# SPDX-License-Identifier: MIT
"""stats_http.py - examples/stats_http serves rmsg_ctx_stats_export(3)
over HTTP; a real Prometheus parser (python3-prometheus-client) reads the
text format and json.loads the JSON, and both agree with each other and
with what rmsg_stat_info(3) names.

Run by tests/examples/stats-http.sh (make check). Exit 0 pass, 1 fail.
Usage: stats_http.py EXAMPLE_BINARY
"""
import json
import re
import subprocess
import sys
import threading
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("FAIL: %s has no prometheus_client: apt-get install "
          "python3-prometheus-client (scripts/setup.sh test)" % sys.executable)
    sys.exit(1)


def fetch(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                timeout=30) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def main():
    # three requests: /metrics, /metrics.json, then /metrics again (the
    # example exits after them)
    proc = subprocess.Popen([sys.argv[1], "tcp://127.0.0.1:0", "0",
                             "--requests", "3"],
                            stdout=subprocess.PIPE, text=True)
    # the test stops by itself: a hung example is killed, and fails
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert m, "the example printed %r" % line
        port = int(m.group(1))
        # the example pings itself once a second: its first echo
        line = proc.stdout.readline()
        assert line.startswith("first echo received over tcp"), line
        status, ctype, text = fetch(port, "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        # every counter by name, with its description as HELP
        assert fams["rmsg_ctx_connections"].type == "gauge"
        assert fams["rmsg_ctx_connections"].samples[0].value == 2
        sent = fams["rmsg_ctx_msgs_sent"]
        assert sent.type == "counter", sent.type
        assert sent.documentation.startswith("messages handed to")
        ctx = {f.name[len("rmsg_ctx_"):]: f.samples[0].value
               for f in fams.values()
               if f.name.startswith("rmsg_ctx_") and f.type == "counter"}
        assert len(ctx) >= 33 and ctx["conns_opened"] == 1 and \
            ctx["conns_accepted"] == 1, ctx
        conn = fams["rmsg_conn_msgs_recv"]
        labels = sorted(s.labels["conn"] for s in conn.samples)
        assert labels == ["1", "2"], labels
        for s in conn.samples:
            assert s.name == "rmsg_conn_msgs_recv_total"
            assert s.labels["transport"] == "tcp"
            assert re.fullmatch(r"127\.0\.0\.1:\d+", s.labels["peer"])
        # the two ends of the one connection mirror each other
        a, b = conn.samples
        assert a.labels["local"] == b.labels["peer"]
        # the context's sum covers its live connections
        assert ctx["msgs_recv"] >= sum(s.value for s in conn.samples)
        assert "rmsg_conn_conns_opened" not in fams

        status, ctype, body = fetch(port, "/metrics.json")
        assert status == 200 and ctype == "application/json"
        doc = json.loads(body)
        assert set(doc) == {"counters", "connections"}
        assert set(doc["counters"]) == set(ctx), \
            set(doc["counters"]) ^ set(ctx)
        assert [c["id"] for c in doc["connections"]] == [1, 2]
        for c in doc["connections"]:
            assert c["transport"] == "tcp"
            assert "conns_opened" not in c["counters"]
            assert c["counters"]["msgs_sent"] >= 1
        fetch(port, "/metrics")
        assert proc.wait(timeout=30) == 0, "the example's exit status"
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print("stats_http: %d families parsed by prometheus_client, JSON with "
          "%d counters and %d connections" %
          (len(fams), len(doc["counters"]), len(doc["connections"])))


if __name__ == "__main__":
    main()
