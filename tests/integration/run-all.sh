#!/bin/sh
# run-all.sh TRANSPORT BUILDDIR TEST... - runs integration test binaries
# over one transport and prints an automake-like summary. Used inside the
# Soft-RoCE VM by 'make check-rxe'; exit status 1 if any test failed.
transport=$1
builddir=$2
shift 2
export RMSG_TEST_TRANSPORT="$transport"
ulimit -l unlimited 2>/dev/null
# a test's figure lines ("tcp: ...", "rdma: ...", "figure: ...",
# "name: 28 ...", "name: rdma: ..."); test.sh picks the same on the host
figures='^(tcp|rdma|figure): |^[a-z_]+: (tcp|rdma|[0-9])'
pass=0 fail=0 skip=0
cd "$builddir" || exit 1
for t in "$@"; do
	start=$(date +%s)
	case $t in
	/*) cmd=$t ;;
	*) cmd=./$t ;;
	esac
	if [ -x "$cmd" ]; then
		"$cmd" > "/tmp/$(basename "$t").$transport.log" 2>&1
		rc=$?
	else
		rc=127
	fi
	end=$(date +%s)
	case $rc in
	0) res=PASS pass=$((pass + 1)) ;;
	77) res=SKIP skip=$((skip + 1)) ;;
	*) res=FAIL fail=$((fail + 1)) ;;
	esac
	echo "$res: $t [$transport] ($((end - start)) s)"
	if [ "$rc" = 0 ]; then
		# the figures a test reports ("tcp: ...", "rdma: ..."), else
		# its last line
		log="/tmp/$(basename "$t").$transport.log"
		if grep -q -E "$figures" "$log"; then
			grep -E "$figures" "$log"
		else
			tail -n 1 "$log"
		fi | sed 's/^/    /'
	else
		tail -n 30 "/tmp/$(basename "$t").$transport.log" | sed 's/^/    /'
	fi
done
echo "# $transport: PASS $pass FAIL $fail SKIP $skip"
# an RDMA run that skipped is a failure: the VM has a device
[ "$fail" = 0 ] && { [ "$transport" != rdma ] || [ "$skip" = 0 ]; }
