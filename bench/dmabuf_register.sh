#!/usr/bin/env bash
# Registering 1 GiB of dma-buf (GPU memory's form; a vgem buffer here)
# against registering 1 GiB of memfd, in the same run against one rdmad
# (see bench/dmabuf_register.cc).
#
#   bench/dmabuf_register.sh [BUILD_DIR]
#
# Needs vgem (modprobe vgem): on this project's machines only the soft-RoCE
# lab VM has it, so run it there after building on the host:
#   ninja -C build rdmad rdmactl rdmad_dmabuf_register_bench
#   tests/lab/labvm --memory 2048 -- \
#     'modprobe vgem && RDMAD_LAB=1 bench/dmabuf_register.sh build'
# Environment: BENCH_TRANSPORT (default tcp; verbs registers on the devices
# that support dma-buf, mlx5 or efa), BENCH_SIZE (default 1073741824),
# BENCH_REPS (default 5).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
TRANSPORT=${BENCH_TRANSPORT:-tcp}

RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl
BENCH=$BUILD/bench/rdmad_dmabuf_register_bench
# In the lab VM the host root is read-only: build beforehand on the host.
if [[ -z ${RDMAD_LAB:-} ]]; then
  cmake --build "$BUILD" --target rdmad rdmactl rdmad_dmabuf_register_bench >/dev/null
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

start_daemon a --peer_listen 127.0.0.1:0 --transport "$TRANSPORT"
echo "# dma-buf vs memfd registration: transport $TRANSPORT" >&2
timeout 300 "$BENCH" --socket "$TMP/a.sock" \
  --size "${BENCH_SIZE:-1073741824}" --reps "${BENCH_REPS:-5}"
