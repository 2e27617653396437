#!/usr/bin/env bash
# TCP transport bandwidth on loopback, side by side with references.
#
#   bench/tcp_bandwidth.sh [BUILD_DIR]
#
# Starts two rdmad daemons on 127.0.0.1 (--transport tcp), creates an
# exported region on B, and measures through the client library (`rdmactl
# bench`, BENCH_INFLIGHT transfers in flight) WRITE and READ bandwidth from A to B
# for 64 KiB, 1 MiB and 16 MiB transfers, BENCH_SECONDS per point. Then, on
# the same loopback, iperf3 with one stream and `ucx_perftest -t ucp_put_bw`
# with UCX_TLS=tcp at the same sizes. Every step is bounded by `timeout`.
# Prints a table of MB/s (10^6 bytes/s) and the ratios.
#
# Environment: BENCH_SECONDS (default 3), BENCH_INFLIGHT (default 4),
# BENCH_SIZES (default "65536 1048576 16777216").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
SECS=${BENCH_SECONDS:-3}
INFLIGHT=${BENCH_INFLIGHT:-4}
read -r -a SIZES <<< "${BENCH_SIZES:-65536 1048576 16777216}"

RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl

cmake --build "$BUILD" --target rdmad rdmactl >/dev/null

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

start_daemon a --peer_listen 127.0.0.1:0 --transport tcp
start_daemon b --peer_listen 127.0.0.1:0 --transport tcp
B_PEER=$(peer_address b)
max_size=0
for s in "${SIZES[@]}"; do (( s > max_size )) && max_size=$s; done
"$RDMACTL" --socket "$TMP/b.sock" alloc bench $(( max_size * INFLIGHT )) \
  --export rw >/dev/null

echo "# rdmad: A -> $B_PEER, rdmactl bench --qd $INFLIGHT, ${SECS}s per point" >&2
: >"$TMP/rdmad.txt"
for op in write read; do
  timeout $(( (SECS + 10) * ${#SIZES[@]} + 30 )) \
    "$RDMACTL" --socket "$TMP/a.sock" --json bench --peer "$B_PEER" \
    --region bench --op "$op" --sizes "$(IFS=,; echo "${SIZES[*]}")" \
    --qd "$INFLIGHT" --duration "$SECS" >"$TMP/rdmad-$op.json"
  python3 - "$TMP/rdmad-$op.json" >>"$TMP/rdmad.txt" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("RESULT op=%s size=%d MBps=%.1f p50_us=%.1f transport=%s"
          % (d["op"], r["size"], r["mb_per_s"], r["p50_us"], r["transport"]))
EOF2
done
cat "$TMP/rdmad.txt" >&2

# iperf3, one stream.
echo "# iperf3 (1 stream, ${SECS}s)" >&2
IPERF=NA
if command -v iperf3 >/dev/null; then
  port=$(free_port)
  timeout $(( SECS + 20 )) iperf3 -s -1 -p "$port" >"$TMP/iperf3-server.log" 2>&1 &
  PIDS+=($!)
  sleep 0.3
  if timeout $(( SECS + 15 )) iperf3 -c 127.0.0.1 -p "$port" -t "$SECS" -J \
       >"$TMP/iperf3.json" 2>/dev/null; then
    IPERF=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f" % (d["end"]["sum_received"]["bits_per_second"]/8e6))' "$TMP/iperf3.json")
  fi
fi
echo "iperf3 MBps=$IPERF" >&2

# UCX put bandwidth over its TCP transport.
declare -A UCX
if ! command -v ucx_perftest >/dev/null; then
  echo "# ucx_perftest missing: apt-get install ucx-utils" >&2
fi
for s in "${SIZES[@]}"; do
  UCX[$s]=NA
  command -v ucx_perftest >/dev/null || continue
  # Enough iterations for about SECS seconds at ~500 MB/s, at least 200.
  iters=$(( SECS * 500000000 / s ))
  (( iters < 200 )) && iters=200
  port=$(free_port)
  UCX_TLS=tcp UCX_NET_DEVICES=lo timeout $(( SECS * 4 + 30 )) \
    ucx_perftest -p "$port" >"$TMP/ucx-server-$s.log" 2>&1 &
  PIDS+=($!)
  sleep 0.5
  if UCX_TLS=tcp UCX_NET_DEVICES=lo timeout $(( SECS * 4 + 20 )) \
       ucx_perftest 127.0.0.1 -p "$port" -t ucp_put_bw -s "$s" -n "$iters" \
       >"$TMP/ucx-$s.log" 2>&1; then
    # "Final:" row; the 7th field is overall bandwidth in MiB/s.
    UCX[$s]=$(awk '/^Final:/ {printf "%.1f", $7 * 1.048576}' "$TMP/ucx-$s.log")
    [[ -n "${UCX[$s]}" ]] || UCX[$s]=NA
  fi
  echo "ucx_perftest ucp_put_bw size=$s MBps=${UCX[$s]}" >&2
done

python3 - "$TMP/rdmad.txt" "$IPERF" "$(for s in "${SIZES[@]}"; do printf '%s=%s ' "$s" "${UCX[$s]}"; done)" <<'EOF'
import sys
rdmad = {}
for line in open(sys.argv[1]):
    if not line.startswith("RESULT"):
        continue
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    rdmad[(f["op"], int(f["size"]))] = float(f["MBps"])
iperf = None if sys.argv[2] == "NA" else float(sys.argv[2])
ucx = {}
for kv in sys.argv[3].split():
    k, v = kv.split("=")
    ucx[int(k)] = None if v == "NA" else float(v)

def fmt(x):
    return "n/a" if x is None else "%.0f" % x

def ratio(a, b):
    return "n/a" if a is None or not b else "%.2fx" % (a / b)

def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n

cols = ["size", "rdmad WRITE", "rdmad READ", "iperf3 1-stream", "ucx put_bw",
        "WRITE/iperf3", "READ/iperf3", "WRITE/ucx", "READ/ucx"]
rows = []
for size in sorted({s for _, s in rdmad}):
    w, r = rdmad.get(("write", size)), rdmad.get(("read", size))
    u = ucx.get(size)
    rows.append([human(size), fmt(w), fmt(r), fmt(iperf), fmt(u),
                 ratio(w, iperf), ratio(r, iperf), ratio(w, u), ratio(r, u)])
widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
print("MB/s (10^6 bytes per second), loopback 127.0.0.1")
print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
for row in rows:
    print("  ".join(v.rjust(w) for v, w in zip(row, widths)))
EOF
