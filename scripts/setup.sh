#!/usr/bin/env bash
# Installs what rdmad needs from Debian's packages and builds it.
#
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
#
# Safe to run again: apt-get skips what is installed, the build is
# incremental. Needs root (or sudo) for apt-get.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
shift || true

# Build and runtime dependencies.
packages=(
  build-essential cmake ninja-build pkg-config
  libibverbs-dev rdma-core ibverbs-providers ibverbs-utils
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libsystemd-dev prometheus-cpp-dev
)
# lld links in a third of the time GNU ld takes (CMakeLists.txt, RDMAD_LLD).
packages+=(lld)
# Running as a service: the Python example client (examples/python) and its
# test, and the .deb packaging check (scripts/package.sh).
packages+=(python3-grpcio python3-grpc-tools python3-protobuf dpkg-dev file)
# The package test's policy check; the man pages' test renders with groff.
packages+=(lintian groff-base)
# The soft-RoCE lab (tests/lab): a Debian kernel with rdma_rxe, run under
# QEMU, and rdma-core's own tools as the reference.
packages+=(qemu-system-x86 linux-image-amd64 busybox-static perftest iproute2 kmod)
# The cluster directory (docs/DIRECTORY.md): etcd's .proto files, from which
# the build generates its etcd v3 stubs; etcd itself for the integration
# tests, the demo and the bench; etcdctl as the bench's reference.
packages+=(golang-etcd-server-dev etcd-server etcd-client)
# Benchmark references (bench/): TCP bandwidth, TCP round trip.
packages+=(iperf3 ucx-utils sockperf)
# Hardening: openssl makes throwaway certificates for the mutual-TLS test;
# clang and its libFuzzer runtime build the fuzz targets (fuzz/).
packages+=(openssl clang libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi

cmake -S "$here" -B "$build" -G Ninja "$@"
cmake --build "$build"
echo "setup: built in $build"
