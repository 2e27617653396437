#!/usr/bin/env bash
# The hardening pass of the CI (called by scripts/test.sh):
#   1. libFuzzer targets (fuzz/), built with clang, each run for a bounded
#      time from the seed corpus in fuzz/corpus (copied, so the repository
#      is not touched);
#   2. a ThreadSanitizer build running every unit and integration test.
# Budget: measured in docs/DEVELOPMENT.md (most of it is the TSan build).
#
#   scripts/hardening_ci.sh BUILD_PREFIX
#   FUZZ_SECONDS=45   seconds per fuzz target
#   SKIP_FUZZ=1 / SKIP_TSAN=1
#   FUZZ_BUILD_DIR=DIR  run the fuzz targets of DIR, a tree configured with
#                       RDMAD_FUZZ=ON, instead of building BUILD_PREFIX-fuzz
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$here/build-test}"
jobs="$(nproc)"
# 35 s: the fuzz targets scripts/test.sh builds are unoptimized (its ASan
# tree, -O0), which run about 2.5x fewer inputs a second than -O2 did;
# seven targets, two at a time, take four rounds (140 s).
fuzz_seconds="${FUZZ_SECONDS:-35}"
# Line tables only: all a sanitizer report needs (scripts/test.sh says why).
ci_flags="${RDMAD_CI_FLAGS:--DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG}"
# From-scratch builds: unity sources (scripts/test.sh says why).
ci_unity="${RDMAD_CI_UNITY:--DRDMAD_UNITY_BUILD=ON}"
start=$SECONDS

if [[ -z "${SKIP_FUZZ:-}" ]]; then
  echo "=== fuzzing: ${fuzz_seconds}s per target ==="
  if [[ -n "${FUZZ_BUILD_DIR:-}" ]]; then
    # A tree configured with RDMAD_FUZZ=ON (scripts/test.sh's ASan tree).
    fuzz="$FUZZ_BUILD_DIR"
  else
    fuzz="$prefix-fuzz"
    cmake -S "$here" -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DRDMAD_FUZZ=ON -DRDMAD_BUILD_TESTS=OFF \
      "$ci_flags" "$ci_unity" \
      > /dev/null
  fi
  cmake --build "$fuzz" --target rdmad_fuzzers
  # One fuzzer per core at a time; each reports after all have run.
  run_fuzzer() {
    local target=$1 corpus status=0
    corpus="$(mktemp -d)"
    cp "$here/fuzz/corpus/$target/"* "$corpus/"
    # -error_exitcode: any crash, leak, sanitizer report or abort() fails CI.
    "$fuzz/fuzz/fuzz_$target" -max_total_time="$fuzz_seconds" \
      -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -error_exitcode=77 -artifact_prefix="$fuzz/crash-$target-" \
      "$corpus" > "$fuzz/fuzz_$target.log" 2>&1 || status=$?
    rm -rf "$corpus"
    echo "$status" > "$fuzz/fuzz_$target.status"
  }
  targets=(tcp_frame tcp_stream descriptor request_validation ring_entry
           verbs_notice connect_request)
  for target in "${targets[@]}"; do
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
    run_fuzzer "$target" &
  done
  wait
  failed=0
  for target in "${targets[@]}"; do
    log="$fuzz/fuzz_$target.log"
    status="$(cat "$fuzz/fuzz_$target.status" 2>/dev/null || echo 1)"
    echo "--- fuzz_$target"
    grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" "$log" || true
    if [[ $status -ne 0 ]]; then
      tail -50 "$log"
      echo "fuzz_$target failed (exit $status); reproducer in $fuzz/crash-$target-*"
      failed=1
    fi
  done
  [[ $failed -eq 0 ]] || exit 1
  echo "fuzzing took $((SECONDS - start)) s"
fi

if [[ -z "${SKIP_TSAN:-}" ]]; then
  echo "=== ThreadSanitizer: every unit and integration test ==="
  tsan_start=$SECONDS
  tsan="$prefix-tsan"
  # clang: it builds this tree a fifth faster than GCC does.
  cmake -S "$here" -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DRDMAD_TSAN=ON -DRDMAD_BENCH=OFF -DRDMAD_LAB_TESTS=OFF \
    "$ci_flags" "$ci_unity" \
    > /dev/null
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
