# SPDX-License-Identifier: MIT
# frame-walk.py - gdb script of bench/frame-walk.sh (read that first).
#
# In the frame_walk server: once fw_armed() says the connection is up,
# stop in each call of the TCP read callback (tcp_rw_cb) and `step` line
# by line until it returns into libev, recording at each stop the source
# file, the function and the stack depth. A walk counts if the user's
# callback (fw_on_msg) ran in it exactly once; others (handshake or
# credit frames) are skipped. Code without line information (libev) is
# stepped over, as `step` does, and so is the system's code that has it
# (libc with its debug package): only the tree's files and the app count,
# unless FW_SYSTEM=1 (then that code is stepped through and counted too).
#
# Printed, for the walk:
#  - function entries (calls: the depth grew) per source file;
#  - file entries: each stop in another file than the stop before, by a
#    call or a return; the distinct files; and the entries into a file
#    already left before (every entry but each file's first);
#  - the same for calls alone (a call into another file than the caller's).
import os

import gdb

MAX_STEPS = int(os.environ.get("FW_MAX_STEPS", "50000"))
ROOT = os.environ.get("FW_ROOT", "")


def out(s):
    gdb.write(s + "\n")
    gdb.flush()


APP = os.environ.get("FW_APP", "")
SYSTEM = os.environ.get("FW_SYSTEM", "0") == "1"


def rel(path):
    """the tree's files relative to it, the app's as app:NAME, or None
    (code that is neither: libc with debug information, its headers)"""
    path = os.path.normpath(path)
    if ROOT and path.startswith(ROOT + "/"):
        return path[len(ROOT) + 1:]
    if path == APP:
        return "app:" + os.path.basename(path)
    return "sys:" + path if SYSTEM else None


def where():
    f = gdb.selected_frame()
    sal = f.find_sal()
    name = f.name() or "?"
    fname = rel(sal.symtab.fullname()) if sal.symtab else None
    depth = 0
    g = f
    while g is not None and g.find_sal().symtab is not None:
        depth += 1
        g = g.older()
    return fname, name, depth


def walk():
    """one call of tcp_rw_cb, from its first line until it returns"""
    ret_pc = gdb.selected_frame().older().pc()
    ret_bp = gdb.Breakpoint("*0x%x" % ret_pc, internal=True)
    stops = [where()]
    try:
        for _ in range(MAX_STEPS):
            gdb.execute("step", to_string=True)
            if gdb.selected_frame().pc() == ret_pc:
                break
            w = where()
            if w[0] is None:
                if gdb.selected_frame().find_sal().symtab is None:
                    break  # back in libev (no line information)
                # the system's code with line information (libc's
                # debug info): stepped over, as code without it is
                gdb.execute("finish", to_string=True)
                continue
            stops.append(w)
        else:
            out("frame-walk: more than %d steps, gave up" % MAX_STEPS)
            stops = []
    finally:
        ret_bp.delete()
    return stops


def report(stops):
    calls_by_file = {}
    calls_by_func = {}
    seen, entries, back = [], 0, 0
    cseen, centries, cback = [], 0, 0
    prev = None
    for fname, func, depth in stops:
        is_call = prev is None or depth > prev[2]
        if is_call:
            calls_by_file[fname] = calls_by_file.get(fname, 0) + 1
            calls_by_func[(fname, func)] = \
                calls_by_func.get((fname, func), 0) + 1
        if prev is None or fname != prev[0]:
            entries += 1
            if fname in seen:
                back += 1
            else:
                seen.append(fname)
            if is_call:
                centries += 1
                if fname in cseen:
                    cback += 1
                else:
                    cseen.append(fname)
        prev = (fname, func, depth)
    out("frame-walk: %d line stops, %d function entries"
        % (len(stops), sum(calls_by_file.values())))
    out("frame-walk: function entries by file:")
    for fname in seen:
        out("  %5d  %s" % (calls_by_file.get(fname, 0), fname))
    out("frame-walk: functions entered (file: function count):")
    for (fname, func), n in sorted(calls_by_func.items()):
        out("  %s: %s %d" % (fname, func, n))
    out("frame-walk: file sequence:")
    seq, last = [], None
    for fname, _, _ in stops:
        if fname != last:
            seq.append(os.path.basename(fname))
            last = fname
    out("  " + " > ".join(seq))
    out("RESULT entries %d into %d files, %d back into a file already left"
        % (entries, len(seen), back))
    out("RESULT calls-only %d cross-file calls into %d files, %d into a "
        "file already left" % (centries, len(cseen), cback))
    src = [f for f in seen if f.startswith("src/")]
    out("RESULT src files entered %d (of %d files)" % (len(src), len(seen)))


def main():
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    gdb.execute("set print thread-events off")
    gdb.execute("set step-mode off")
    armed = gdb.Breakpoint("fw_armed")
    gdb.execute("run", to_string=True)
    if not gdb.selected_thread() or gdb.selected_frame().name() != \
            "fw_armed":
        out("frame-walk: the server never got a connection")
        return
    armed.enabled = False
    rw = gdb.Breakpoint("tcp_rw_cb")
    for attempt in range(20):
        gdb.execute("continue", to_string=True)
        if not gdb.selected_thread():
            out("frame-walk: the server ended before a message")
            return
        msgs0 = int(gdb.parse_and_eval("msgs"))
        rw.enabled = False
        stops = walk()
        rw.enabled = True
        got = int(gdb.parse_and_eval("msgs")) - msgs0
        funcs = [s[1] for s in stops]
        out("frame-walk: read callback call %d: %d message(s), %d stops"
            % (attempt + 1, got, len(stops)))
        if got == 1 and "fw_on_msg" in funcs and stops:
            report(stops)
            break
    gdb.execute("kill")


main()
