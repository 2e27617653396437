#!/usr/bin/env bash
# Installs Debian's packages for one or more uses of this tree:
#
#   scripts/deps.sh build   what building rdmad, rdmactl and the client
#                           library needs (compilers, gRPC, protobuf,
#                           abseil, rdma-core, etcd's .proto files)
#   scripts/deps.sh demo    what scripts/demo.sh runs besides (etcd)
#   scripts/deps.sh test    the rest of the test suite: the soft-RoCE lab
#                           (QEMU, a kernel with rdma_rxe, perftest),
#                           Python, packaging checks, sanitizers and
#                           fuzzers, benchmark references
#
# Several may be named at once. Safe to run again: what is installed is
# skipped. Needs root (or sudo).
set -euo pipefail

packages=()
for use in "$@"; do
  case "$use" in
    build)
      packages+=(build-essential cmake ninja-build pkg-config
        libibverbs-dev rdma-core ibverbs-providers ibverbs-utils
        libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
        protobuf-compiler libabsl-dev libspdlog-dev libfmt-dev
        libsystemd-dev prometheus-cpp-dev
        # The cluster directory's etcd v3 stubs are generated from these.
        golang-etcd-server-dev
        # lld links in a third of the time GNU ld takes (RDMAD_LLD).
        lld
        # Free ports for the demo and tests are picked with it; the Python
        # package (python/) is built for it with pybind11.
        python3 python3-dev pybind11-dev python3-pybind11 python3-numpy)
      ;;
    demo)
      # The demo's cluster-directory part; skipped where etcd is missing.
      packages+=(etcd-server)
      ;;
    test)
      packages+=(
        # The gRPC example client (examples/python) and its test; the
        # Python package's tests, its pip install among them.
        python3-grpcio python3-grpc-tools python3-protobuf python3-pytest
        python3-pytest-asyncio python3-setuptools python3-venv python3-pip
        # Packaging: the .deb and its policy check; the man pages' test.
        dpkg-dev file lintian groff-base
        # The soft-RoCE lab (tests/lab): a Debian kernel with rdma_rxe,
        # run under QEMU, and rdma-core's own tools as the reference.
        qemu-system-x86 linux-image-amd64 busybox-static perftest iproute2
        kmod
        # The directory's tests and bench: etcd, etcdctl as a reference.
        etcd-server etcd-client
        # Benchmark references (bench/): TCP bandwidth, TCP round trip;
        # io_uring for the hand-off benchmark (bench/handoff.sh).
        iperf3 ucx-utils sockperf liburing-dev
        # Hardening: throwaway certificates for the mutual-TLS test; clang
        # and its libFuzzer runtime for the sanitizer and fuzz builds.
        openssl clang libclang-rt-14-dev)
      ;;
    *)
      echo "deps.sh: unknown use '$use': build, demo or test" >&2
      exit 2
      ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi
