#!/usr/bin/env bash
# What one client's ring operations wait while another client frees large
# regions its queue used (rdmad_free_stall_bench, bench/free_stall.cc): the
# prober's p50/p99/max beside the teardown's own cost, measured in the same
# run. Exits 1 when the prober waited for a teardown (its max reached half
# the teardown's cost) in any run.
#
#   bench/free_stall.sh [BUILD_DIR]
#
# Environment: BENCH_RUNS (3), BENCH_SIZE_MIB (256), BENCH_ROUNDS (5: frees
# per run), BENCH_NO_BUILD=1 (measure BUILD_DIR's binaries as they are,
# e.g. an older build's daemon to compare with).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
RUNS=${BENCH_RUNS:-3}
SIZE=${BENCH_SIZE_MIB:-256}
ROUNDS=${BENCH_ROUNDS:-5}

RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl
STALL=$BUILD/bench/rdmad_free_stall_bench

if [[ -z ${BENCH_NO_BUILD:-} ]]; then
  cmake --build "$BUILD" --target rdmad rdmactl rdmad_free_stall_bench \
    >/dev/null
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

status=0
for run in $(seq "$RUNS"); do
  # A fresh daemon per run: each starts with one engine and nothing cached.
  start_daemon "s$run" --peer_listen 127.0.0.1:0 --transport tcp
  "$RDMACTL" --socket "$TMP/s$run.sock" alloc small-ops 64K --export rw \
    >/dev/null
  echo "# run $run/$RUNS"
  "$STALL" --socket "$TMP/s$run.sock" --region small-ops --size "$SIZE" \
    --rounds "$ROUNDS" || status=$?
  kill "${PIDS[-1]}"
  wait "${PIDS[-1]}" 2>/dev/null || true
  unset 'PIDS[-1]'  # stopped: the cleanup must not signal a reused PID
done
exit "$status"
