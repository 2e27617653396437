#!/usr/bin/env bash
# The hardening pass of the CI (called by scripts/test.sh):
#   1. libFuzzer targets (fuzz/), built with clang, each run for a bounded
#      time from the seed corpus in fuzz/corpus (copied, so the repository
#      is not touched);
#   2. a ThreadSanitizer build running every unit and integration test.
# Budget: measured in docs/SECURITY.md (most of it is the TSan build).
#
#   scripts/hardening_ci.sh BUILD_PREFIX
#   FUZZ_SECONDS=30   seconds per fuzz target
#   SKIP_FUZZ=1 / SKIP_TSAN=1
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$here/build-test}"
jobs="$(nproc)"
fuzz_seconds="${FUZZ_SECONDS:-30}"
start=$SECONDS

if [[ -z "${SKIP_FUZZ:-}" ]]; then
  echo "=== fuzzing: ${fuzz_seconds}s per target ==="
  fuzz="$prefix-fuzz"
  cmake -S "$here" -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DRDMAD_FUZZ=ON -DRDMAD_BUILD_TESTS=OFF > /dev/null
  cmake --build "$fuzz" --target rdmad_fuzzers
  for target in tcp_frame descriptor request_validation ring_entry \
                verbs_notice; do
    corpus="$(mktemp -d)"
    cp "$here/fuzz/corpus/$target/"* "$corpus/"
    echo "--- fuzz_$target"
    # -error_exitcode: any crash, leak, sanitizer report or abort() fails CI.
    log="$fuzz/fuzz_$target.log"
    status=0
    "$fuzz/fuzz/fuzz_$target" -max_total_time="$fuzz_seconds" \
      -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -error_exitcode=77 -artifact_prefix="$fuzz/crash-$target-" \
      "$corpus" > "$log" 2>&1 || status=$?
    grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" "$log" || true
    rm -rf "$corpus"
    if [[ $status -ne 0 ]]; then
      tail -50 "$log"
      echo "fuzz_$target failed (exit $status); reproducer in $fuzz/crash-$target-*"
      exit 1
    fi
  done
  echo "fuzzing took $((SECONDS - start)) s"
fi

if [[ -z "${SKIP_TSAN:-}" ]]; then
  echo "=== ThreadSanitizer: every unit and integration test ==="
  tsan_start=$SECONDS
  tsan="$prefix-tsan"
  cmake -S "$here" -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRDMAD_TSAN=ON > /dev/null
  cmake --build "$tsan"
  echo "ThreadSanitizer build took $((SECONDS - tsan_start)) s"
  # The Debian abseil and gRPC libraries are not built with TSan, so it
  # cannot see their synchronization; fuzz/tsan.supp says what that forces
  # us to suppress and why.
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$here/fuzz/tsan.supp"
  # Everything but the package test, which builds and installs a .deb of
  # this tree (nothing of it runs threads that the others do not).
  ctest --test-dir "$tsan" --output-on-failure -j "$jobs" --timeout 900 \
    -L 'unit|integration' -E '^package_test$'
  echo "ThreadSanitizer pass took $((SECONDS - tsan_start)) s"
fi
echo "hardening pass took $((SECONDS - start)) s"
