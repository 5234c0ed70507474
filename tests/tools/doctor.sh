#!/bin/sh
# SPDX-License-Identifier: MIT
#
# doctor.sh - rmsg-doctor gives the right verdict:
#  - with RMSG_TEST_TRANSPORT=rdma (make check-rxe, in the Soft-RoCE VM):
#    exit 0, the device's port ACTIVE, and a route to RMSG_TEST_ADDR;
#  - otherwise, on a machine without RDMA devices (the build host): exit 1
#    and the "no RDMA device" diagnosis with a cause and a fix;
#  - on a host that has devices: it runs, and exits 0 or 1, not by a
#    signal.
# Also: a usage error exits 2 with the usage on stderr, -h and --help
# print it on stdout and exit 0, --version names the tool and the
# library's version (librmsg.pc's), an address that is not one is a
# problem, not a crash, and --json prints one JSON object (checked with
# python3) that says the same as the text, with the same exit status.
# Environment: top_builddir (default: .), PYTHON (default: python3).

builddir=${top_builddir:-.}
doctor=$builddir/tools/rmsg-doctor
addr=${RMSG_TEST_ADDR:-127.0.0.1}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/doctor.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' 0
py=${PYTHON:-python3}
failures=0
fail() {
	echo "FAIL: $*"
	sed 's/^/    /' "$tmp/out"
	failures=$((failures + 1))
}
[ -x "$doctor" ] || {
	echo "FAIL: $doctor not built"
	exit 1
}
"$py" -c 'import json' || {
	echo "FAIL: no $py to check --json (apt-get install python3)"
	exit 1
}
# the package's version, as configure wrote it
version=$(sed -n 's/^Version: *//p' "$builddir/librmsg.pc")
[ -n "$version" ] || {
	echo "FAIL: no Version in $builddir/librmsg.pc"
	exit 1
}

"$doctor" -x > "$tmp/out" 2>&1
[ $? = 2 ] || fail "usage error: exit status not 2"
for bad in -x --bogus "-c 0" "a b"; do
	# shellcheck disable=SC2086 # split on purpose
	"$doctor" $bad > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "'$bad': exit $rc, expected 2"
	[ -s "$tmp/out" ] && fail "'$bad': the usage error printed on stdout"
	grep -q '^usage: rmsg-doctor ' "$tmp/err" ||
		{ cp "$tmp/err" "$tmp/out"; fail "'$bad': no usage on stderr"; }
done
for help in -h --help; do
	"$doctor" $help > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc = 0 ] || fail "$help: exit $rc, expected 0"
	grep -q '^usage: rmsg-doctor ' "$tmp/out" || fail "$help: no usage"
	grep -q -- '--json' "$tmp/out" || fail "$help: --json not listed"
	[ -s "$tmp/err" ] && { cp "$tmp/err" "$tmp/out"; fail "$help: stderr"; }
done
"$doctor" --version > "$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] || fail "--version: exit $rc, expected 0"
[ "$(cat "$tmp/out")" = "rmsg-doctor (librmsg) $version" ] ||
	fail "--version: not 'rmsg-doctor (librmsg) $version'"

# json_check WANT_RC [WANT]: $tmp/json (the --json run's stdout) is one
# JSON object with the promised fields, consistent with exit status
# WANT_RC, and with the same checks, in the same order, as the text
# output in $tmp/text; WANT: a check that must be there, as
# NAME:STATUS[:DETAIL prefix]. Prints what is wrong.
json_check() {
	"$py" - "$tmp/json" "$tmp/text" "$version" "$@" <<-'EOF'
	import json, re, sys
	path, text, version = sys.argv[1:4]
	want_rc = int(sys.argv[4])
	want = sys.argv[5] if len(sys.argv) > 5 else None
	bad = []
	with open(path) as f:
	    d = json.load(f)  # exactly one object: trailing text is an error
	if not isinstance(d, dict):
	    sys.exit("not an object")
	if d.get("librmsg_version") != version:
	    bad.append("librmsg_version %r, expected %r"
	               % (d.get("librmsg_version"), version))
	checks = d.get("checks")
	if not isinstance(checks, list) or not checks:
	    bad.append("no checks")
	    checks = []
	for c in checks:
	    if not (isinstance(c.get("name"), str) and c["name"] and
	            c.get("status") in ("ok", "warn", "fail") and
	            isinstance(c.get("detail"), str) and c["detail"]):
	        bad.append("a check lacks a name, status or detail: %r" % c)
	    elif c["status"] != "ok" and not ("cause" in c or "fix" in c):
	        bad.append("a %s check without cause or fix: %r"
	                   % (c["status"], c))
	# the text mode's check lines: "ok:   ...", "warn: ...", "FAIL: ..."
	with open(text) as f:
	    lines = [m.groups() for m in
	             (re.match(r"(ok|warn|FAIL): +(.*)", l.rstrip("\n"))
	              for l in f) if m]
	got = [(c.get("status"), c.get("detail")) for c in checks]
	if [(s.lower(), t) for s, t in lines] != got:
	    bad.append("checks %r, the text mode says %r" % (got, lines))
	fails = sum(c.get("status") == "fail" for c in checks)
	warns = sum(c.get("status") == "warn" for c in checks)
	if d.get("usable") is not (want_rc == 0):
	    bad.append("usable %r with exit status %d"
	               % (d.get("usable"), want_rc))
	if d.get("problems") != fails or d.get("warnings") != warns:
	    bad.append("problems/warnings %r/%r, the checks say %d/%d"
	               % (d.get("problems"), d.get("warnings"), fails, warns))
	if (fails == 0) != (want_rc == 0):
	    bad.append("%d failed checks with exit status %d" % (fails, want_rc))
	verdict = d.get("verdict")
	if not isinstance(verdict, str) or not verdict.startswith(
	        "RDMA is usable" if want_rc == 0 else "RDMA is not usable"):
	    bad.append("verdict %r" % verdict)
	if want:
	    name, status, *detail = want.split(":", 2)
	    if not any(c.get("name") == name and c.get("status") == status and
	               c.get("detail", "").startswith(detail[0] if detail
	                                              else "")
	               for c in checks):
	        bad.append("no check %s" % want)
	for b in bad:
	    print(b)
	sys.exit(1 if bad else 0)
	EOF
}

# json ARGS... -- WANT_RC [WANT]: rmsg-doctor ARGS and rmsg-doctor --json
# ARGS both exit WANT_RC, and the latter prints a valid object that
# agrees with the former's text. json_after: the same, with the text
# run just made (its output in $tmp/out, its status checked): each run
# takes seconds in the VM
json_after() {
	cp "$tmp/out" "$tmp/text"
	text_done=1
	json "$@"
	text_done=
}
text_done=
json() {
	args=
	while [ "$1" != -- ]; do
		args="$args $1"
		shift
	done
	shift
	trc=$1
	if [ -z "$text_done" ]; then
		# shellcheck disable=SC2086 # split on purpose
		"$doctor" $args > "$tmp/text" 2> /dev/null
		trc=$?
	fi
	# shellcheck disable=SC2086
	"$doctor" --json $args > "$tmp/json" 2> "$tmp/err"
	jrc=$?
	[ "$trc" = "$1" ] && [ "$jrc" = "$1" ] || {
		cp "$tmp/json" "$tmp/out"
		fail "--json$args: exit $jrc, text mode $trc, expected $1"
	}
	json_check "$@" > "$tmp/out" 2>&1 || {
		cat "$tmp/json" >> "$tmp/out"
		fail "--json$args: bad object"
	}
}

"$doctor" "$addr" > "$tmp/out" 2>&1
rc=$?
if [ "${RMSG_TEST_TRANSPORT:-tcp}" = rdma ]; then
	[ "$rc" = 0 ] || fail "RDMA machine: exit $rc, expected 0"
	grep -q 'RDMA is usable' "$tmp/out" || fail "no 'RDMA is usable'"
	grep -q 'port 1: active' "$tmp/out" || fail "no active port"
	grep -q "route to $addr resolved" "$tmp/out" ||
		fail "no route to $addr"
	grep -q 'RoCE v2' "$tmp/out" || fail "no RoCE v2 GID listed"
	json_after "$addr" -- 0 "route:ok:route to $addr resolved"
	# an address no RDMA device reaches: resolution fails, exit 1
	"$doctor" 127.0.0.1 > "$tmp/out" 2>&1
	[ $? = 1 ] || fail "127.0.0.1 over RDMA: exit status not 1"
	grep -q '^FAIL: no RDMA \(address resolution\|route\) to 127.0.0.1' \
		"$tmp/out" || fail "127.0.0.1: no resolution problem reported"
	json_after 127.0.0.1 -- 1
elif [ -z "$(ls /sys/class/infiniband 2> /dev/null)" ]; then
	[ "$rc" = 1 ] || fail "no RDMA here: exit $rc, expected 1"
	grep -q '^FAIL: no RDMA device' "$tmp/out" ||
		fail "no 'no RDMA device' diagnosis"
	grep -q 'cause:' "$tmp/out" && grep -q 'fix:' "$tmp/out" ||
		fail "the diagnosis lacks a cause or a fix"
	grep -q '^RDMA is not usable: no RDMA device' "$tmp/out" ||
		fail "no verdict"
	grep -q 'memlock' "$tmp/out" || fail "no memlock check"
	json_after "$addr" -- 1 "kernel:fail:no RDMA device"
	json -c 4 -- 1
else
	[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "exit $rc"
	json_after "$addr" -- "$rc"
fi

"$doctor" not-a-host.invalid > "$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "bad address: exit $rc, expected 1"
if [ "${RMSG_TEST_TRANSPORT:-tcp}" = rdma ]; then
	json_after not-a-host.invalid -- 1 \
		"address:fail:not-a-host.invalid: not an"
else
	json_after not-a-host.invalid -- 1
fi
# quotes and backslashes in the object's strings are escaped
json 'not"a\\host' -- 1

[ "$failures" = 0 ] || exit 1
echo "PASS: rmsg-doctor (${RMSG_TEST_TRANSPORT:-tcp})"
