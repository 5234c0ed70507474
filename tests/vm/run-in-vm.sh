#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run-in-vm.sh - run one command in a qemu guest that has Soft-RoCE (rxe0).
#
# Usage: tests/vm/run-in-vm.sh [-t TIMEOUT_S] [-m MEM_MB] [-C CACHE_DIR]
#            [-w WORKDIR] [-r RESULTS_DIR] [-e NAME[=VALUE]]... [-T] [-q]
#            [-A THEN] -- COMMAND [ARGS...]
#
#   -t  seconds before the VM is killed (default 600)
#   -m  guest memory in MiB (default 2048)
#   -C  cache directory for prepare.sh (default $RMSG_VM_CACHE, else
#       tests/vm/cache)
#   -w  directory the command starts in (default: the current one)
#   -r  results directory to use and keep (default: a fresh temporary
#       one, removed afterwards unless the VM failed)
#   -e  pass NAME (from this environment) or NAME=VALUE into the guest;
#       PATH, LD_LIBRARY_PATH and every RMSG_* variable always are
#   -T  give the guest a fresh, empty tmpfs on /tmp instead of the
#       host's /tmp seen through the overlay
#   -q  do not print the timing line on stderr
#   -A  then, in the same boot and only if COMMAND passed, run the sh
#       command line THEN (in the same directory and environment): one
#       boot for several stages; the exit status is COMMAND's when it
#       failed, else THEN's; the time each took is printed
#
# The guest runs Debian's kernel under TCG with the host's / mounted
# read-only (9p) under a tmpfs overlay: every host file is visible at its
# own path and the guest may write anywhere, but its writes vanish at
# power-off. Only the results directory, /mnt/results in the guest and
# $RMSG_VM_RESULTS in the command's environment, is written through to
# the host. The guest has lo, dummy0 with 198.18.0.1/24 and rxe0 on it;
# the command sees RMSG_VM=1 and RMSG_TEST_ADDR=198.18.0.1, runs as root
# with "ulimit -l unlimited" and no stdin. Its stdout and stderr (merged)
# stream to our stdout through the serial console and are saved in
# RESULTS_DIR/output.log.
#
# Exit status: the command's; 77 when qemu is missing (skip); 99 when the
# VM reported no status (boot failure, panic, timeout) or could not start.

set -u

me=run-in-vm.sh
here=$(cd "$(dirname "$0")" && pwd)
test_addr=198.18.0.1

timeout_s=600
mem_mb=2048
cache=${RMSG_VM_CACHE:-$here/cache}
workdir=$PWD
results=
keep_results=0
quiet=0
tmpfs=0
extra_env=()
then_cmd=

# usage [STATUS]: the comment block above; to stdout only for -h.
usage()
{
	if [ "${1:-99}" -eq 0 ]; then
		sed -n '/^# Usage:/,/^#       failed/s/^# \{0,1\}//p' "$0"
	else
		sed -n '/^# Usage:/,/^#       failed/s/^# \{0,1\}//p' "$0" >&2
	fi
	exit "${1:-99}"
}

note() { echo "$me: $*" >&2; }
die() { echo "$me: error: $*" >&2; exit 99; }

# POSIX sh single-quoting of one word.
quote()
{
	local s=$1 q="'\\''"

	printf "'%s'" "${s//\'/$q}"
}

valid_name()
{
	[[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]
}

while getopts ':t:m:C:w:r:e:TqA:h' opt; do
	case $opt in
	t) timeout_s=$OPTARG ;;
	m) mem_mb=$OPTARG ;;
	C) cache=$OPTARG ;;
	w) workdir=$OPTARG ;;
	r) results=$OPTARG; keep_results=1 ;;
	e) extra_env+=("$OPTARG") ;;
	q) quiet=1 ;;
	T) tmpfs=1 ;;
	A) then_cmd=$OPTARG ;;
	h) usage 0 ;;
	:) note "option -$OPTARG needs a value"; usage ;;
	*) note "unknown option -$OPTARG"; usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { note "no COMMAND given"; usage; }

[[ $timeout_s =~ ^[1-9][0-9]*$ ]] ||
	die "-t wants whole seconds, not '$timeout_s'"
[[ $mem_mb =~ ^[1-9][0-9]*$ ]] || die "-m wants MiB, not '$mem_mb'"
workdir=$(cd "$workdir" 2> /dev/null && pwd -P) ||
	die "work directory '$workdir' does not exist"

# prepare.sh prints the kernel version; its messages go to stderr.
kver=$("$here/prepare.sh" "$cache")
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || die "prepare.sh failed (status $rc); see its message above"
cache=$(cd "$cache" && pwd)
kdir=$cache/$kver

command -v timeout > /dev/null || die "timeout not found (coreutils)"
command -v rdma > /dev/null ||
	die "iproute2's 'rdma' tool not found on the host (the guest uses" \
	    "the host's binaries): apt-get install -y iproute2"

if [ -n "$results" ]; then
	mkdir -p "$results" || die "cannot create results directory $results"
	results=$(cd "$results" && pwd -P)
	rm -f "$results"/{status,status.tmp,started,error,output.log,console.log}
else
	results=$(mktemp -d "${TMPDIR:-/tmp}/rmsg-vm.XXXXXX") ||
		die "cannot create a results directory"
fi

# --- what the guest runs -----------------------------------------------------

cp "$here/guest.sh" "$results/guest.sh" || die "cannot copy guest.sh"

{
	echo "# Written by $me for one run."
	echo "rmsg_vm_workdir=$(quote "$workdir")"
	echo "rmsg_vm_tmpfs=$tmpfs"
	names=(PATH LD_LIBRARY_PATH "${!RMSG_@}")
	for e in "${extra_env[@]}"; do
		names+=("${e%%=*}")
	done
	echo "export HOME=/root TERM=dumb"
	for n in "${names[@]}"; do
		valid_name "$n" || die "-e: '$n' is not a variable name"
		[ -n "${!n+set}" ] && echo "export $n=$(quote "${!n}")"
	done
	for e in "${extra_env[@]}"; do
		[[ $e == *=* ]] && echo "export ${e%%=*}=$(quote "${e#*=}")"
	done
	echo "export RMSG_VM=1 RMSG_TEST_ADDR=$test_addr" \
	     "RMSG_VM_RESULTS=/mnt/results"
} > "$results/env.sh" || exit 99

{
	echo "# Written by $me for one run."
	[ -z "$then_cmd" ] || echo 't0=$(date +%s)'
	for a in "$@"; do
		printf '%s ' "$(quote "$a")"
	done
	echo
	if [ -n "$then_cmd" ]; then
		# -A: the next stage in this boot, once the first passed
		echo 'rc=$?'
		echo 't1=$(date +%s)'
		echo "echo \"$me: the command: exit \$rc," \
		     "\$((t1 - t0)) s\""
		echo '[ "$rc" = 0 ] || exit "$rc"'
		echo "sh -c $(quote "$then_cmd")"
		echo 'rc=$?'
		echo "echo \"$me: then (-A): exit \$rc," \
		     "\$((\$(date +%s) - t1)) s\""
		echo 'exit "$rc"'
	fi
} > "$results/cmd.sh" || die "cannot write cmd.sh"

# --- boot ---------------------------------------------------------------------

# /dev/kvm here is a paravirtual flavour that Debian's kernel hangs under:
# TCG it is. The ELF vmlinux boots through its PVH entry point; qboot, when
# qemu ships it, starts it without SeaBIOS's banner and delay. The kernel's
# console (ttyS0) goes to console.log, the command's output (ttyS1) to our
# stdout. RMSG_VM_QEMU_EXTRA adds options (split on blanks).
bios=()
[ -f /usr/share/qemu/qboot.rom ] && bios=(-bios /usr/share/qemu/qboot.rom)
read -r -a extra_qemu <<< "${RMSG_VM_QEMU_EXTRA:-}"
fs_opts=security_model=none,multidevs=remap
# shellcheck disable=SC2054 # the commas belong to qemu's option syntax
qemu=(qemu-system-x86_64
	-accel tcg -cpu max -smp 2 -m "$mem_mb" "${bios[@]}"
	-nographic -no-reboot -nic none -nodefaults -no-user-config
	-kernel "$kdir/vmlinux" -initrd "$kdir/initramfs.gz"
	-append "console=ttyS0 panic=-1 quiet"
	-serial "file:$results/console.log"
	-chardev stdio,id=out,signal=off -serial chardev:out -monitor none
	-virtfs "local,path=/,mount_tag=hostroot,readonly=on,$fs_opts"
	-virtfs "local,path=${results//,/,,},mount_tag=results,$fs_opts"
	"${extra_qemu[@]}"
)

qemu_pid=
# Stop the VM (timeout passes the signal on to qemu) when we are stopped.
# shellcheck disable=SC2317 # called from the trap
cleanup()
{
	if [ -n "$qemu_pid" ]; then
		kill "$qemu_pid" 2> /dev/null
		wait "$qemu_pid" 2> /dev/null
	fi
	note "interrupted: VM stopped, no status"
	[ "$keep_results" -eq 1 ] || rm -rf "$results"
	exit 99
}
trap cleanup INT TERM HUP

# A boot that never reaches the command is stopped after $boot_max s and
# tried once more: seen once under TCG on a busy host, qemu spinning with
# no console output for the whole -t while the guest never wrote
# "started" (a normal boot takes 5-17 s, VM-TESTBED facts above).
boot_max=${RMSG_VM_BOOT_MAX:-180}
boots=0
while :; do
	boots=$((boots + 1))
	hung=0
	t0=$(date +%s.%N)
	timeout -k 10 "$timeout_s" "${qemu[@]}" < /dev/null &
	qemu_pid=$!
	waited=0
	while [ ! -f "$results/started" ] && kill -0 "$qemu_pid" 2> /dev/null; do
		if [ "$waited" -ge "$boot_max" ]; then
			note "the VM did not reach the command in $boot_max s" \
			     "(boot $boots): stopping it"
			hung=1
			kill "$qemu_pid" 2> /dev/null
			break
		fi
		sleep 1
		waited=$((waited + 1))
	done
	wait "$qemu_pid"
	qemu_rc=$?
	# wait returns early, above 128, when a trapped signal arrives.
	while kill -0 "$qemu_pid" 2> /dev/null; do
		wait "$qemu_pid"
		qemu_rc=$?
	done
	qemu_pid=
	t1=$(date +%s.%N)
	if [ "$hung" -eq 0 ] || [ "$boots" -ge 2 ]; then
		break
	fi
	note "booting again"
	rm -f "$results"/{status,status.tmp,started,error,output.log,console.log}
done

# --- report -------------------------------------------------------------------

elapsed()
{
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'
}

if [ -f "$results/started" ] && [ "$quiet" -eq 0 ]; then
	ts=$(stat -c '%.9Y' "$results/started")
	note "boot $(elapsed "$t0" "$ts") s (guest uptime" \
	     "$(cat "$results/started") s), command $(elapsed "$ts" "$t1") s," \
	     "total $(elapsed "$t0" "$t1") s"
fi

if [ -f "$results/status" ]; then
	# With "quiet" the kernel logs only errors: show them, they may
	# explain a failure (an rxe warning, an oops in a test).
	grep -av -e 'sysrq: Power Off' -e 'reboot: Power down' \
		-e 'guest.sh: .*sleep' -e '^[[:space:]]*$' \
		"$results/console.log" 2> /dev/null | tr -d '\r' |
		head -n 50 | sed "s/^/$me: guest console: /" >&2
	status=$(cat "$results/status")
	[[ $status =~ ^[0-9]+$ ]] || status=99
	[ "$keep_results" -eq 1 ] || rm -rf "$results"
	exit "$status"
fi

{
	echo "$me: ERROR: the VM reported no exit status for the command."
	if [ -f "$results/error" ]; then
		echo "$me: guest setup failed: $(cat "$results/error")"
	elif [ "$hung" -eq 1 ]; then
		echo "$me: $boots boots did not reach the command in" \
		     "$boot_max s each (RMSG_VM_BOOT_MAX to raise)"
	elif [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
		echo "$me: timed out after $timeout_s s (-t to raise)"
	else
		echo "$me: qemu exited with status $qemu_rc" \
		     "(boot failure or kernel panic?)"
	fi
	if [ -f "$results/started" ]; then
		echo "$me: the command had started; its output so far is in" \
		     "$results/output.log"
	else
		echo "$me: the command never started"
	fi
	log=$results/console.log
	if [ -s "$log" ]; then
		# A panic's call trace pushes its headline out of the tail.
		grep -a -m 5 -E 'Kernel panic|BUG:|Oops|WARNING:|error' "$log" |
			tr -d '\r' | sed 's/^/    /'
		echo "$me: last lines of the console ($log):"
		tail -n 30 "$log" | tr -d '\r' | sed 's/^/    /'
	else
		echo "$me: the guest's console ($log) is empty"
	fi
	echo "$me: results kept in $results"
} >&2
exit 99
