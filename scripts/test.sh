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

rm -rf "$build"
"$here/scripts/setup.sh" "$build" "$RDMAD_CI_FLAGS"
echo "setup and build took $SECONDS s"

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

if [[ -z "${SKIP_SANITIZE:-}" ]]; then
  echo "=== tests under ASan + UBSan ==="
  asan="$build-asan"
  rm -rf "$asan"
  # Debug keeps assertions on; line tables (-g1) are all the sanitizers'
  # reports need, and compile 5-10% faster than full debug info here.
  cmake -S "$here" -B "$asan" -G Ninja -DRDMAD_SANITIZE=ON \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1
  start=$SECONDS
  cmake --build "$asan"
  echo "ASan+UBSan build took $((SECONDS - start)) s"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$asan" --output-on-failure -j "$jobs" \
      -L 'unit|integration' --timeout 600
fi
if [[ -z "${SKIP_HARDENING:-}" ]]; then
  # Fuzz targets for a bounded time, and a ThreadSanitizer build running the
  # unit and integration tests.
  "$here/scripts/hardening_ci.sh" "$build"
fi
echo "=== all tests passed ==="
