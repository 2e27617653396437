#!/usr/bin/env bash
# The control plane's costs beside references measured in the same run
# (see bench/control_plane_bench.cc): a unary local call over the Unix
# socket, buffer registration per GiB, and set-up of a new peer.
#
#   bench/control_plane.sh [BUILD_DIR]
#
# Starts daemon A and BENCH_PEERS (default 3) fresh daemons on 127.0.0.1
# with --transport BENCH_TRANSPORT (default auto: verbs where an RDMA
# device is active, e.g. in the soft-RoCE lab, else tcp). Environment:
# BENCH_CALLS (default 2000), BENCH_REG_SIZE (default 1G).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
TRANSPORT=${BENCH_TRANSPORT:-auto}
NPEERS=${BENCH_PEERS:-3}

RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl
BENCH=$BUILD/bench/rdmad_control_bench
# In the lab VM the host root is read-only: build beforehand on the host.
if [[ -z ${RDMAD_LAB:-} ]]; then
  cmake --build "$BUILD" --target rdmad rdmactl rdmad_control_bench >/dev/null
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

start_daemon a --peer_listen 127.0.0.1:0 --transport "$TRANSPORT"
peers=()
for i in $(seq "$NPEERS"); do
  start_daemon "p$i" --peer_listen 127.0.0.1:0 --transport "$TRANSPORT"
  "$RDMACTL" --socket "$TMP/p$i.sock" alloc bench 4K --export rw >/dev/null
  peers+=("$(peer_address "p$i")")
done

echo "# control plane: transport $TRANSPORT, $NPEERS fresh peers" >&2
timeout 300 "$BENCH" --socket "$TMP/a.sock" \
  --fresh-peers "$(IFS=,; echo "${peers[*]}")" \
  --calls "${BENCH_CALLS:-2000}" --reg-size "${BENCH_REG_SIZE:-1G}"
"$RDMACTL" --socket "$TMP/a.sock" peers >&2
