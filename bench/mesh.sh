#!/usr/bin/env bash
# Many peers: what they cost one daemon, and how fast a mesh comes up.
#
#   bench/mesh.sh [BUILD_DIR]
#
# (a) One rdmad and MESH_PEERS (default 1000) stand-in peers
#     (rdmad_stand_in_peers: one process, each peer on its own 127.0.x.y):
#     - bring-up: a fresh daemon's first 4 KiB WRITE to every peer at once
#       (one Local.Batch): the time until the last one completed, failures;
#     - costs: another fresh daemon reaches 1, 100 and MESH_PEERS peers in
#       stages; after each, its threads, descriptors and RSS, and at the
#       first and last stage the p50 of a 4 KiB WRITE to one peer.
# (b) N real daemons all to all, for each N in MESH_DAEMONS (default
#     "16 64"): every daemon's client WRITEs 4 KiB to every other daemon,
#     all at once; the time until the last one completed, failures.
#
# Targets (exit 3 when one is missed; BENCH_NO_TARGETS=1 only prints):
# (a) bring-up <= 5 s, 0 failures, threads the same at 100 and MESH_PEERS
#     peers (and at most 4 more than at 1 peer: gRPC's own pools start 2
#     threads and grow to their cap under the first concurrent calls,
#     whatever the number of peers),
#     descriptors <= 2 per peer and RSS <= 64 KiB per peer beyond the first
#     peer's, WRITE p50 at MESH_PEERS peers within 10% of 1 peer's;
# (b) 0 failures.
# Loopback only. BENCH_TRANSPORT (default tcp) is passed to every daemon
# and stand-in (verbs in the soft-RoCE lab).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
TRANSPORT=${BENCH_TRANSPORT:-tcp}
NPEERS=${MESH_PEERS:-1000}
DAEMONS=${MESH_DAEMONS:-16 64}

RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl
BENCH=$BUILD/bench/rdmad_mesh_bench
STAND_IN=$BUILD/tests/integration/rdmad_stand_in_peers
if [[ -z ${RDMAD_LAB:-} && -z ${BENCH_NO_BUILD:-} ]]; then
  cmake --build "$BUILD" --target rdmad rdmactl rdmad_mesh_bench \
    rdmad_stand_in_peers >/dev/null
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

missed=()
# target NAME OK-EXPRESSION (python): records a miss.
target() {
  if ! python3 -c "import sys; sys.exit(0 if ($2) else 1)"; then
    missed+=("$1")
  fi
}
# result FILE METRIC: the value a RESULT line of FILE gives METRIC.
result() {
  sed -n "s/^RESULT metric=$2 value=//p" "$1" | tail -1
}

# --- (a) one daemon, MESH_PEERS stand-in peers ---
"$STAND_IN" --count "$NPEERS" --transport "$TRANSPORT" >"$TMP/stand_in.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do
  grep -q '^READY' "$TMP/stand_in.log" && break
  sleep 0.1
done
if ! grep -q '^READY' "$TMP/stand_in.log"; then
  echo "the stand-in peers did not start:" >&2
  cat "$TMP/stand_in.log" >&2
  exit 1
fi
read -r first port < <(sed -n 's/^READY first=\([0-9.]*\) port=\([0-9]*\).*/\1 \2/p' \
  "$TMP/stand_in.log")
peers=$(python3 - "$first" "$port" "$NPEERS" <<'EOF'
import ipaddress, sys
host, port, n = ipaddress.IPv4Address(sys.argv[1]), sys.argv[2], int(sys.argv[3])
out = []
while len(out) < n:
    if int(host) & 0xff not in (0, 255):
        out.append(f"{host}:{port}")
    host += 1
print(",".join(out))
EOF
)

start_daemon up --peer_listen 127.0.0.1:0 --transport "$TRANSPORT"
up_pid=${PIDS[-1]}
"$BENCH" reach --socket "$TMP/up.sock" --pid "$up_pid" --peers "$peers" \
  --stages "$NPEERS" >"$TMP/bring_up.txt" || true
kill "$up_pid"

start_daemon costs --peer_listen 127.0.0.1:0 --transport "$TRANSPORT"
costs_pid=${PIDS[-1]}
"$BENCH" reach --socket "$TMP/costs.sock" --pid "$costs_pid" --peers "$peers" \
  --stages "1,100,$NPEERS" >"$TMP/costs.txt" || true
kill "$costs_pid"

up_s=$(result "$TMP/bring_up.txt" seconds_to_last_first_write)
up_failed=$(result "$TMP/bring_up.txt" failures)
costs_failed=$(result "$TMP/costs.txt" failures)
for n in 1 100 "$NPEERS"; do
  eval "threads_$n=$(result "$TMP/costs.txt" "threads_$n")"
  eval "fds_$n=$(result "$TMP/costs.txt" "fds_$n")"
  eval "rss_$n=$(result "$TMP/costs.txt" "rss_kib_$n")"
done
p50_1=$(result "$TMP/costs.txt" write_p50_us_1)
p50_n=$(result "$TMP/costs.txt" "write_p50_us_$NPEERS")
eval "threads_n=\$threads_$NPEERS fds_n=\$fds_$NPEERS rss_n=\$rss_$NPEERS"
per_peer() { python3 -c "print(f'{($1 - $2) / ($NPEERS - 1):.2f}')"; }
fds_per_peer=$(per_peer "$fds_n" "$fds_1")
rss_per_peer=$(per_peer "$rss_n" "$rss_1")
p50_ratio=$(python3 -c "print(f'{$p50_n / $p50_1:.3f}')")

echo "# (a) one daemon, $NPEERS stand-in peers, transport $TRANSPORT"
printf '%-44s %s\n' \
  "bring-up: time to the last first 4K WRITE" "${up_s} s (target <= 5)" \
  "bring-up: failed WRITEs" "$up_failed (target 0)" \
  "threads at 1 / 100 / $NPEERS peers" "$threads_1 / $threads_100 / $threads_n (target: equal at 100 and $NPEERS, <= +4 over 1)" \
  "descriptors at 1 / 100 / $NPEERS peers" "$fds_1 / $fds_100 / $fds_n: $fds_per_peer per peer (target <= 2)" \
  "RSS KiB at 1 / 100 / $NPEERS peers" "$rss_1 / $rss_100 / $rss_n: $rss_per_peer KiB per peer (target <= 64)" \
  "4K WRITE p50 at 1 / $NPEERS peers" "$p50_1 / $p50_n us: ${p50_ratio}x (target <= 1.10)" \
  "costs run: failed WRITEs" "$costs_failed (target 0)"
target "bring-up time" "$up_s <= 5"
target "bring-up failures" "$up_failed == 0"
target "costs failures" "$costs_failed == 0"
target "threads constant" "$threads_100 == $threads_n and $threads_n - $threads_1 <= 4"
target "descriptors per peer" "$fds_per_peer <= 2"
target "RSS per peer" "$rss_per_peer <= 64"
target "WRITE p50 at $NPEERS peers" "$p50_ratio <= 1.10"
kill "${PIDS[0]}"

# --- (b) N real daemons, all to all ---
echo "# (b) N daemons all to all, transport $TRANSPORT"
for n in $DAEMONS; do
  first_pid=${#PIDS[@]}
  sockets=() addresses=()
  for i in $(seq "$n"); do
    start_daemon "m$n-$i" --peer_listen 127.0.0.1:0 --transport "$TRANSPORT"
    "$RDMACTL" --socket "$TMP/m$n-$i.sock" alloc bench 64K --export rw >/dev/null
    sockets+=("$TMP/m$n-$i.sock")
    addresses+=("$(peer_address "m$n-$i")")
  done
  "$BENCH" mesh --sockets "$(IFS=,; echo "${sockets[*]}")" \
    --peers "$(IFS=,; echo "${addresses[*]}")" >"$TMP/mesh_$n.txt" || true
  s=$(result "$TMP/mesh_$n.txt" seconds_to_last_first_write)
  f=$(result "$TMP/mesh_$n.txt" failures)
  printf '%-44s %s\n' "N=$n: time to the last first 4K WRITE" "$s s" \
    "N=$n: failed WRITEs ($((n * (n - 1))) in all)" "$f (target 0)"
  target "N=$n failures" "${f:-1} == 0"
  for pid in "${PIDS[@]:$first_pid}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]:$first_pid}"; do wait "$pid" 2>/dev/null || true; done
done

if ((${#missed[@]})); then
  echo "targets missed: ${missed[*]}" >&2
  [[ -n ${BENCH_NO_TARGETS:-} ]] || exit 3
fi
