#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""dns_slow.py ADDR CTLPORT - a DNS server on 127.0.0.1:53 for
tests/integration/resolve.c, which starts it inside a private mount (and,
over TCP, network) namespace whose /etc/resolv.conf names 127.0.0.1.

Names starting with "nx." get NXDOMAIN at once. Every other name's
answer (A: ADDR; AAAA and the rest: no record) is held until the test
releases it over UDP on 127.0.0.1:CTLPORT:
    "release NAME" / "release *"  -> "ok N" (N held answers sent); later
                                     queries for NAME are answered at once
    "seen NAME"                   -> "N" (queries received for NAME)
Prints "ready" on stdout once both sockets are bound.
"""
import select
import socket
import struct
import sys

addr = socket.inet_aton(sys.argv[1])
dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dns.bind(("127.0.0.1", 53))
ctl = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ctl.bind(("127.0.0.1", int(sys.argv[2])))
held = []  # (name, reply, peer)
released = set()
seen = {}


def answer(q):
    """(name, reply) for the query @q"""
    qid, flags = struct.unpack(">HH", q[:4])
    pos, labels = 12, []
    while q[pos]:
        n = q[pos]
        labels.append(q[pos + 1:pos + 1 + n].decode("ascii").lower())
        pos += 1 + n
    qtype = struct.unpack(">H", q[pos + 1:pos + 3])[0]
    question = q[12:pos + 5]
    name = ".".join(labels)
    rcode, an, rr = 0, 0, b""
    if name.startswith("nx."):
        rcode = 3  # NXDOMAIN
    elif qtype == 1:  # A
        an = 1
        rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + addr
    # QR, AA, RD as asked, RA
    fl = 0x8000 | 0x0400 | (flags & 0x0100) | 0x0080 | rcode
    return name, struct.pack(">HHHHHH", qid, fl, 1, an, 0, 0) + question + rr


print("ready", flush=True)
while True:
    r, _, _ = select.select([dns, ctl], [], [])
    if dns in r:
        q, peer = dns.recvfrom(4096)
        try:
            name, rep = answer(q)
        except (IndexError, struct.error, UnicodeDecodeError):
            continue
        seen[name] = seen.get(name, 0) + 1
        if name.startswith("nx.") or name in released or "*" in released:
            dns.sendto(rep, peer)
        else:
            held.append((name, rep, peer))
    if ctl in r:
        cmd, peer = ctl.recvfrom(512)
        op, name = cmd.decode("ascii").split()
        if op == "release":
            released.add(name)
            out = [h for h in held if name in ("*", h[0])]
            for h in out:
                dns.sendto(h[1], h[2])
                held.remove(h)
            ctl.sendto(b"ok %d" % len(out), peer)
        elif op == "seen":
            ctl.sendto(b"%d" % seen.get(name, 0), peer)
