#!/bin/sh
# demo.sh - quick start 1: install what is missing, build, then run the
# hello server and client on this machine, over auto://: both on one
# host, they talk over shared memory (shm; the client says which
# transport it used). DEMO_SCHEME=rdma+tcp uses RDMA where an RDMA
# device with an IPv4 address exists, TCP otherwise.
set -e
cd "$(dirname "$0")"
scripts/setup.sh build

addr=127.0.0.1
# an RDMA device's netdev address, if there is one
if command -v rdma >/dev/null 2>&1; then
	dev=$(rdma link show 2>/dev/null | sed -n 's/.*netdev \([^ ]*\).*/\1/p' |
		head -n 1)
	if [ -n "$dev" ]; then
		a=$(ip -4 -o addr show dev "$dev" 2>/dev/null |
			sed -n 's/.* inet \([0-9.]*\).*/\1/p' | head -n 1)
		[ -n "$a" ] && addr=$a
	fi
fi
port=$((20000 + $$ % 20000))
uri="${DEMO_SCHEME:-auto}://$addr:$port"

./examples/hello server "$uri" &
server=$!
trap 'kill $server 2>/dev/null' EXIT INT TERM
# wait until the server is listening
i=0
while [ $i -lt 50 ]; do
	if ss -ltn 2>/dev/null | grep -q ":$port "; then
		break
	fi
	sleep 0.1
	i=$((i + 1))
done
./examples/hello client "$uri" "${DEMO_MB:-256}"
