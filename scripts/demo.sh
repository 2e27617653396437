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
# Only what the demo runs: the build's packages and etcd, then the daemon,
# rdmactl and the example (compiled eight sources at a time, which is
# quickest from scratch). scripts/test.sh installs and builds the rest.
"$here/scripts/deps.sh" build demo >/dev/null
cmake -S "$here" -B "$build" -G Ninja -DRDMAD_UNITY_BUILD=ON >/dev/null
cmake --build "$build" --target rdmad rdmactl hello_transfer >/dev/null

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

start_daemon() {  # name port [extra rdmad flags...]
  local name="$1" port="$2"
  shift 2
  "$rdmad" --socket "$work/$name.sock" --peer_listen "127.0.0.1:$port" \
    --log_level warn "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    "$rdmactl" --socket "$work/$name.sock" status >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "demo: daemon $name did not start:"; cat "$work/$name.log"; exit 1
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

# The cluster directory (docs/DIRECTORY.md): with etcd, regions are found by
# name alone. deps.sh demo installs etcd-server; skipped where it is missing.
if command -v etcd >/dev/null; then
  echo
  echo "== cluster directory: etcd and two daemons C and D that use it"
  read -r port_c port_d port_e port_f < <(python3 - <<'PY'
import socket
s = [socket.socket() for _ in range(4)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
PY
)
  etcd --name demo --data-dir "$work/etcd" \
    --listen-client-urls "http://127.0.0.1:$port_e" \
    --advertise-client-urls "http://127.0.0.1:$port_e" \
    --listen-peer-urls "http://127.0.0.1:$port_f" \
    --initial-advertise-peer-urls "http://127.0.0.1:$port_f" \
    --initial-cluster "demo=http://127.0.0.1:$port_f" \
    --log-level warn >"$work/etcd.log" 2>&1 &
  pids+=($!)
  directory="etcd://127.0.0.1:$port_e"
  start_daemon c "$port_c" --directory "$directory"
  start_daemon d "$port_d" --directory "$directory"
  C=(--socket "$work/c.sock")
  D=(--socket "$work/d.sock")
  # Both daemons: one that started before etcd listened retries after a
  # back-off, and its status says unreachable until then.
  for _ in $(seq 100); do
    "$rdmactl" "${C[@]}" status | grep -q "directory: .*: connected" &&
      "$rdmactl" "${D[@]}" status | grep -q "directory: .*: connected" && break
    sleep 0.1
  done
  echo "== D exports 'demo/shard-0'; C names it without a peer"
  "$rdmactl" "${D[@]}" alloc demo/shard-0 64K --export rw
  echo "hello through the directory" >"$work/hello.txt"
  "$rdmactl" "${C[@]}" put "$work/hello.txt" demo/shard-0
  "$rdmactl" "${C[@]}" get demo/shard-0 --length 28
  echo "== the cluster's regions, as C sees them"
  "$rdmactl" "${C[@]}" ls
  "$rdmactl" "${C[@]}" status | grep directory
fi
echo
echo "demo: done"
