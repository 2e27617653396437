#!/bin/bash
# GPU memory through rdmad on a machine with an NVIDIA GPU: a device check,
# not part of CI (the CI machines have no GPU; run it where there is one).
#
#   tests/gpu/cuda_dmabuf_check.sh [BUILD_DIR]      (default: build)
#
# 1. skips (exit 0, saying so) where there is no NVIDIA GPU or driver;
# 2. builds rdmad and tests/gpu/cuda_dmabuf_client.cc, a client that loads
#    libcuda.so.1 at run time (no CUDA at build time);
# 3. starts an rdmad on a private socket, loopback only;
# 4. the client cuMemAlloc's 64 MiB, exports the allocation as a dma-buf
#    (cuMemGetAddressRange, cuMemGetHandleForAddressRange with
#    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) and registers it
#    (Client::RegisterDmabuf);
# 5. expects: on a machine whose RDMA NICs do not register dma-bufs (or
#    that has none) the precise FAILED_PRECONDITION "no device supports
#    dma-buf: ..."; where `rdmactl devices` shows a device with dma-buf
#    support (mlx5, efa), a registered region.
# Every step prints what it did. Exit status 0 = as expected.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
say() { echo "cuda_dmabuf_check: $*"; }

# 1. A GPU and its driver?
if [ ! -e /dev/nvidiactl ] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  say "SKIP: no NVIDIA GPU here (/dev/nvidia* absent); nothing to check"
  exit 0
fi
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  say "SKIP: an NVIDIA device node but no libcuda.so.1 (driver not installed)"
  exit 0
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L | sed 's/^/cuda_dmabuf_check: gpu: /'

# 2. Build what the check runs.
say "building rdmad, rdmactl and rdmad_cuda_dmabuf_client in $build"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja >"$build.cmake.log" 2>&1 || {
    say "FAIL: cmake (see $build.cmake.log)"; exit 1; }
fi
ninja -C "$build" rdmad rdmactl rdmad_cuda_dmabuf_client >"$build.gpu-check.log" 2>&1 || {
  tail -20 "$build.gpu-check.log"; say "FAIL: build"; exit 1; }
rdmad=$build/daemon/rdmad
rdmactl=$build/client/rdmactl/rdmactl
client=$build/tests/gpu/rdmad_cuda_dmabuf_client

# 3. A private rdmad.
dir=$(mktemp -d /tmp/rdmad-gpu-check.XXXXXX)
daemon_pid=""
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
"$rdmad" --socket "$dir/rdmad.sock" --peer_listen 127.0.0.1:0 \
  --log_level info >"$dir/rdmad.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 300); do
  "$rdmactl" --socket "$dir/rdmad.sock" --timeout 1s status >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$dir/rdmad.log"; say "FAIL: rdmad exited"; exit 1; }
  sleep 0.1
done
say "rdmad (pid $daemon_pid) is up; what it says about its devices:"
"$rdmactl" --socket "$dir/rdmad.sock" status | grep -E '^(transport|devices|dma-buf)' | sed 's/^/  /'
"$rdmactl" --socket "$dir/rdmad.sock" devices | sed 's/^/  /'
capable=$("$rdmactl" --socket "$dir/rdmad.sock" --json status |
  python3 -c 'import json,sys; print(len(json.load(sys.stdin)["dmabuf_devices"]))')

# 4. and 5. The client, and what rdmad answered.
say "running $client"
"$client" "$dir/rdmad.sock" $((64 << 20)) >"$dir/client.out" 2>&1
status=$?
sed 's/^/  /' "$dir/client.out"
case "$status" in
  77) say "SKIP: the GPU or its driver is not usable (see above)"; exit 0 ;;
  0)
    if [ "$capable" -gt 0 ]; then
      say "PASS: the GPU memory was registered on the dma-buf devices"; exit 0
    fi
    say "FAIL: registered, but rdmad lists no dma-buf device: it must have mapped the dma-buf for the CPU (unexpected for CUDA)"
    exit 1 ;;
  3)
    if [ "$capable" -eq 0 ] &&
      grep -q 'refused: FAILED_PRECONDITION: no device supports dma-buf: ' "$dir/client.out"; then
      say "PASS: no RDMA NIC here registers dma-bufs, and rdmad said so precisely"; exit 0
    fi
    [ "$capable" -eq 0 ] && { say "FAIL: refused, but not with 'no device supports dma-buf'"; exit 1; }
    say "FAIL: refused although rdmad lists a dma-buf device"; exit 1 ;;
  *) say "FAIL: client exited $status"; tail -20 "$dir/rdmad.log"; exit 1 ;;
esac
