#!/usr/bin/env bash
# The main job, end to end on one host: installs and builds rdmad, starts two
# daemons (A and B), exports a region on B, and moves data into it from A's
# side through the client library (examples/hello_transfer) and rdmactl.
# Uses the verbs transport where an RDMA device is active, TCP otherwise.
#
#   scripts/demo.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build}"
"$here/scripts/setup.sh" "$build" >/dev/null

rdmad="$build/daemon/rdmad"
rdmactl="$build/client/rdmactl/rdmactl"
work="$(mktemp -d /tmp/rdmad-demo.XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

start_daemon() {  # name port
  "$rdmad" --socket "$work/$1.sock" --peer_listen "127.0.0.1:$2" \
    --log_level warn >"$work/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    "$rdmactl" --socket "$work/$1.sock" status >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "demo: daemon $1 did not start:"; cat "$work/$1.log"; exit 1
}

# Free ports on loopback, picked by the kernel.
read -r port_a port_b < <(python3 - <<'PY'
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
PY
)
start_daemon a "$port_a"
start_daemon b "$port_b"
A=(--socket "$work/a.sock")
B=(--socket "$work/b.sock")
peer_b="127.0.0.1:$port_b"

echo "== daemon A"
"$rdmactl" "${A[@]}" status
echo
echo "== B exports a 1 MiB region 'demo' for read+write"
"$rdmactl" "${B[@]}" alloc demo 1M --export rw
"$rdmactl" "${B[@]}" regions
echo
echo "== client library on A: WRITE into B's region, READ it back"
"$build/examples/hello_transfer" "$work/a.sock" "$peer_b/demo@4096" \
  "hello, B: this came by one-sided WRITE"
echo
echo "== rdmactl on A: put a 300 KiB file into $peer_b/demo@64K and get it back"
head -c 307200 /dev/urandom >"$work/in.bin"
"$rdmactl" "${A[@]}" put "$work/in.bin" "$peer_b/demo@64K"
"$rdmactl" "${A[@]}" get "$peer_b/demo@64K" --length 300K -o "$work/out.bin"
if cmp -s "$work/in.bin" "$work/out.bin"; then
  echo "byte-identical: $(sha256sum <"$work/out.bin" | cut -c1-16)..."
else
  echo "MISMATCH"; exit 1
fi
echo
echo "== A's view of its peer"
"$rdmactl" "${A[@]}" peers
echo
echo "demo: done"
