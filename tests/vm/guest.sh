#!/bin/sh
# SPDX-License-Identifier: MIT
#
# guest.sh - stage 2 of the librmsg test VM, run by the host's own /bin/sh
# inside the guest, chrooted into the overlay on the host's /.
#
# run-in-vm.sh copies this file into the per-run results directory, which
# the guest sees at /mnt/results, next to:
#
#   env.sh     variables to export, rmsg_vm_workdir and rmsg_vm_tmpfs
#   cmd.sh     the command line to run, safely quoted
#
# and this script leaves there:
#
#   started    written right before the command starts (its host mtime
#              gives the boot time)
#   output.log the command's stdout and stderr, also sent to the console
#   status     the command's exit status
#   error      why the command could not be run, when it could not
#
# It then powers the VM off. Without a "status" the host reports failure.

R=/mnt/results

# The power-off runs asynchronously and soon takes the 9p mounts (and so
# every host binary, sleep included) away. Do not return to init meanwhile:
# block opening a FIFO that nobody writes to, which needs no binary.
halt_now()
{
	echo o > /proc/sysrq-trigger
	: < /run/rmsg-vm/halt
	while :; do sleep 1; done 2> /dev/null
}

fail()
{
	echo "rmsg-vm: error: $*" >&2
	echo "$*" > "$R/error"
	halt_now
}

mkdir -p /run/rmsg-vm && mkfifo /run/rmsg-vm/halt /run/rmsg-vm/out
# env.sh is written per run; it sets rmsg_vm_workdir and rmsg_vm_tmpfs.
# shellcheck source=/dev/null
. "$R/env.sh" || fail "cannot read env.sh"

# The guest's /run, /dev/shm and /dev/pts are fresh and empty. /tmp is the
# host's, through the overlay (writable, writes vanish), so that scripts
# and build trees under it stay visible; with -T it is a fresh tmpfs.
# shellcheck disable=SC2154
if [ "$rmsg_vm_tmpfs" = 1 ]; then
	mount -t tmpfs -o mode=1777 tmpfs /tmp || fail "cannot mount /tmp"
fi

# Soft-RoCE on a dummy netdev: client and server in this guest talk RDMA
# through rxe0 using $RMSG_TEST_ADDR. The dummy module creates dummy0
# itself; add it in case a future kernel does not.
ip link set lo up || fail "ip link set lo up failed"
ip link show dummy0 > /dev/null 2>&1 ||
	ip link add dummy0 type dummy || fail "cannot create dummy0"
ip addr add "$RMSG_TEST_ADDR/24" dev dummy0 || fail "cannot address dummy0"
ip link set dummy0 up || fail "cannot bring dummy0 up"
rdma link add rxe0 type rxe netdev dummy0 ||
	fail "rdma link add rxe0 type rxe netdev dummy0 failed" \
	     "(crc32_generic loaded? iproute2's rdma tool on the host?)"

# shellcheck disable=SC3045 # the host's sh is dash, which has ulimit -l
ulimit -l unlimited || fail "ulimit -l unlimited failed"
# shellcheck disable=SC2154
cd "$rmsg_vm_workdir" || fail "no work directory $rmsg_vm_workdir"

# The command's output goes to the second serial port, which the host
# streams to its stdout; the kernel's console (ttyS0) goes to a log file.
# The serial driver turns \n into \r\n: keep the output as written.
exec 3> /dev/ttyS1 || fail "cannot open /dev/ttyS1"
stty -onlcr <&3 2> /dev/null || true

# Output goes through a FIFO to tee: tee copies it to ttyS1 and to
# output.log. A background child the command left behind may keep the
# FIFO open; tee then gets a moment to drain and is stopped, so the VM
# still powers off.
[ -p /run/rmsg-vm/out ] || fail "mkfifo /run/rmsg-vm/out failed"
tee "$R/output.log" < /run/rmsg-vm/out >&3 3>&- &
tee_pid=$!

cut -d ' ' -f 1 /proc/uptime > "$R/started"
/bin/sh "$R/cmd.sh" < /dev/null > /run/rmsg-vm/out 2>&1 3>&-
rc=$?
echo "$rc" > "$R/status.tmp" && mv "$R/status.tmp" "$R/status"

i=0
while kill -0 "$tee_pid" 2> /dev/null && [ "$i" -lt 20 ]; do
	sleep 0.1
	i=$((i + 1))
done
kill "$tee_pid" 2> /dev/null
halt_now
