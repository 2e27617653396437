#!/usr/bin/env bash
# How long a restart of rdmad takes when it keeps its named regions
# (docs/RESTART.md), beside the daemon's plain cold start in the same run
# (see bench/restart_bench.cc): SIGTERM (and SIGKILL) to READY=1 with
# BENCH_REGIONS regions of BENCH_REGION_SIZE, every page written, adopted
# from a state directory on a tmpfs, and from a stand-in for systemd's fd
# store.
#
#   bench/restart.sh [BUILD_DIR]
#
# Environment: BENCH_REGIONS (default 16), BENCH_REGION_SIZE (default 64M:
# 1 GiB in all), BENCH_ITERATIONS (default 5), BENCH_TRANSPORT (default tcp;
# auto uses verbs where an RDMA port is active, e.g. in the lab VM, and then
# also pays re-registration). Needs a tmpfs (/dev/shm, /run/user/UID or
# /run) with the regions' size free; says so otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
RDMAD=$BUILD/daemon/rdmad
BENCH=$BUILD/bench/rdmad_restart_bench
# In the lab VM the host root is read-only: build beforehand on the host.
if [[ -z ${RDMAD_LAB:-} ]]; then
  cmake --build "$BUILD" --target rdmad rdmad_restart_bench >/dev/null
fi

timeout 900 "$BENCH" --rdmad "$RDMAD" \
  --regions "${BENCH_REGIONS:-16}" \
  --region-size "${BENCH_REGION_SIZE:-64M}" \
  --iterations "${BENCH_ITERATIONS:-5}" \
  --transport "${BENCH_TRANSPORT:-tcp}"
