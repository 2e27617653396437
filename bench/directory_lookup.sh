#!/usr/bin/env bash
# Look-up by name in the cluster directory, cold (an etcd round trip) and
# warm (the daemon's watch-fed cache), beside a plain `etcdctl get` of the
# same key, all in one run on loopback:
#
#   bench/directory_lookup.sh [ITERATIONS]     (default 200)
#
# Two figures per row: the median inside the daemon (LookupRegion's
# latency_ns: what a transfer by name pays) and the median wall time of one
# command (rdmactl / etcdctl process start included: the like-for-like
# comparison with etcdctl). Needs etcd-server and etcd-client (scripts/deps.sh test).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build}"
iterations="${1:-200}"
rdmad="$build/daemon/rdmad"
rdmactl="$build/client/rdmactl/rdmactl"
for tool in etcd etcdctl python3; do
  command -v "$tool" >/dev/null || { echo "directory_lookup: needs $tool"; exit 1; }
done

work="$(mktemp -d /tmp/rdmad-dirbench.XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

read -r port_a port_b port_e port_f < <(python3 - <<'PY'
import socket
s = [socket.socket() for _ in range(4)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
PY
)
etcd --name bench --data-dir "$work/etcd" \
  --listen-client-urls "http://127.0.0.1:$port_e" \
  --advertise-client-urls "http://127.0.0.1:$port_e" \
  --listen-peer-urls "http://127.0.0.1:$port_f" \
  --initial-advertise-peer-urls "http://127.0.0.1:$port_f" \
  --initial-cluster "bench=http://127.0.0.1:$port_f" \
  --log-level warn >"$work/etcd.log" 2>&1 &
pids+=($!)
for name in a b; do
  port="port_$name"
  "$rdmad" --socket "$work/$name.sock" --peer_listen "127.0.0.1:${!port}" \
    --transport tcp --log_level warn \
    --directory "etcd://127.0.0.1:$port_e" >"$work/$name.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 200); do
  "$rdmactl" --socket "$work/a.sock" status 2>/dev/null |
    grep -q "directory: .*: connected" && break
  sleep 0.1
done
"$rdmactl" --socket "$work/a.sock" alloc bench/lookup 4K --export rw >/dev/null
"$rdmactl" --socket "$work/b.sock" lookup bench/lookup >/dev/null  # warm

python3 - "$rdmactl" "$work/b.sock" "127.0.0.1:$port_e" "$iterations" <<'PY'
import json, statistics, subprocess, sys, time
rdmactl, socket, endpoint, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def run(argv):
    t = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t, out

def lookup(fresh):
    argv = [rdmactl, "--socket", socket, "--json", "lookup", "bench/lookup"]
    if fresh: argv.append("--fresh")
    daemon, wall = [], []
    for _ in range(n):
        w, out = run(argv)
        reply = json.loads(out)
        assert reply["from_cache"] == (not fresh), reply
        daemon.append(int(reply["latency_ns"]) / 1e3)
        wall.append(w * 1e6)
    return statistics.median(daemon), statistics.median(wall)

def etcdctl():
    wall = []
    for _ in range(n):
        w, out = run(["etcdctl", "--endpoints", endpoint, "get",
                      "/rdmad/regions/bench/lookup", "--print-value-only"])
        assert "bench/lookup" in out
        wall.append(w * 1e6)
    return statistics.median(wall)

cold = lookup(True)
warm = lookup(False)
ref = etcdctl()
print(f"directory look-up by name, {n} iterations each, medians (us)")
print(f"{'':34} {'in daemon':>10} {'one command':>12}")
print(f"{'cold: rdmactl lookup --fresh (etcd)':34} {cold[0]:10.0f} {cold[1]:12.0f}")
print(f"{'warm: rdmactl lookup (cache)':34} {warm[0]:10.0f} {warm[1]:12.0f}")
print(f"{'reference: etcdctl get':34} {'-':>10} {ref:12.0f}")
PY
