#!/usr/bin/env bash
# The whole test suite, from scratch: installs dependencies, builds, and runs
# every test (labels unit, integration, lab), then builds the tests again
# with AddressSanitizer + UndefinedBehaviorSanitizer and runs unit and
# integration tests under them; finally runs the fuzz targets for a bounded
# time and a ThreadSanitizer build (scripts/hardening_ci.sh).
#
#   scripts/test.sh            everything (what CI runs)
#   SKIP_SANITIZE=1 scripts/test.sh   without the sanitizer pass
#   SKIP_HARDENING=1 scripts/test.sh  without fuzzing and ThreadSanitizer
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build-test}"
jobs="$(nproc)"

# Line tables (-g1) instead of full debug info in the optimized builds here:
# backtraces and sanitizer reports need no more, and it cuts compile time by
# a quarter and link time more (scripts/hardening_ci.sh uses it too).
export RDMAD_CI_FLAGS="-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
# Each build here is from scratch: the libraries compile eight sources to a
# translation unit (RDMAD_UNITY_BUILD; 27% less wall time for the whole
# plain build, the daemon's libraries in half the CPU).
export RDMAD_CI_UNITY="-DRDMAD_UNITY_BUILD=ON"

rm -rf "$build"
"$here/scripts/setup.sh" "$build" "$RDMAD_CI_FLAGS" "$RDMAD_CI_UNITY"
echo "setup and build took $SECONDS s"
# The Python package's pytest files run among the integration tests (one
# CTest test each). A build without pybind11 leaves them out with only a
# CMake warning: that must fail here, not pass with fewer tests.
if ! ctest --test-dir "$build" -N -R '^python_buffer_test$' |
    grep -q 'Total Tests: 1'; then
  echo "test.sh: the Python package's tests are missing from $build:" \
       "pybind11 was not found (scripts/deps.sh build test)" >&2
  exit 1
fi

echo "=== tests: unit, integration, lab ==="
ctest --test-dir "$build" --output-on-failure -j "$jobs" -L 'unit|integration' \
  --timeout 600
# Lab tests boot VMs; they take a resource lock and run one at a time.
ctest --test-dir "$build" --output-on-failure -L lab --timeout 900
# ctest keeps passing tests' output to itself; show rdma-core's figures.
echo "=== soft-RoCE lab: perftest and rdma-core figures ==="
for log in "$build"/lab-work/lab_rdma_core_tools_*.logs/output.*.log; do
  [[ -f $log ]] || continue
  grep -h "lab figure" "$log" | sed "s|^|$(basename "${log%%.logs/*}"): |" || true
done

asan="$build-asan"
if [[ -z "${SKIP_SANITIZE:-}" ]]; then
  echo "=== tests under ASan + UBSan ==="
  rm -rf "$asan"
  # clang, because it compiles this code with ASan + UBSan in half the time
  # GCC takes (daemon.cc: 23 s against 45 s), and because the same tree then
  # builds the libFuzzer targets too (RDMAD_FUZZ): one sanitizer build where
  # there were two. Debug keeps assertions on; line tables (-g1) are all the
  # sanitizers' reports need. Benchmarks no test runs, and the lab's
  # programs (its tests run in the plain tree only), are left out.
  cmake -S "$here" -B "$asan" -G Ninja -DRDMAD_SANITIZE=ON -DRDMAD_FUZZ=ON \
    -DRDMAD_BENCH=OFF -DRDMAD_LAB_TESTS=OFF \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 "$RDMAD_CI_UNITY"
  start=$SECONDS
  cmake --build "$asan"
  echo "ASan+UBSan build took $((SECONDS - start)) s"
  # Not the package test: it packages and installs what the plain build
  # made, which the first pass tested; an ASan .deb is not what ships.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$asan" --output-on-failure -j "$jobs" \
      -L 'unit|integration' -E '^package_test$' --timeout 600
  # The fuzz targets were built with the tests: the hardening pass runs them.
  export FUZZ_BUILD_DIR="$asan"
fi
if [[ -z "${SKIP_HARDENING:-}" ]]; then
  # Fuzz targets for a bounded time, and a ThreadSanitizer build running the
  # unit and integration tests.
  "$here/scripts/hardening_ci.sh" "$build"
fi
echo "=== all tests passed ==="
