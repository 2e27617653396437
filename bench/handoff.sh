#!/usr/bin/env bash
# What a thread's hand-off to another costs on CPUs kept busy by other
# processes, without rdmad: rdmad_handoff_pingpong sends one operation at
# a time through four cross-thread hand-offs over Unix socket pairs
# (client -> engine -> serving loop -> engine -> client, the hops of an
# rdmad remote operation), each hand-off either write() then read(), or
# the write and the next read in one io_uring submit-and-wait (the thread
# is asleep when the answer comes); each with the kernel's default slice
# and with the 100 us slice the daemon's loops ask for. Beside
# BENCH_BURNERS (default 4) CPU-burning processes, next to `sockperf
# ping-pong --tcp` (two hand-offs per round trip) in the same rounds.
#
#   bench/handoff.sh [BUILD_DIR]
#
# Prints the median and [min..max] of BENCH_RUNS (default 3) runs of
# BENCH_ITERS (default 20000) round trips. It checks no target: it tells
# which way of waiting the daemon's threads should use.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
RUNS=${BENCH_RUNS:-3}
ITERS=${BENCH_ITERS:-20000}
BURNERS=${BENCH_BURNERS:-4}
PINGPONG=$BUILD/bench/rdmad_handoff_pingpong

if [[ -z ${BENCH_NO_BUILD:-} ]]; then
  cmake --build "$BUILD" --target rdmad_handoff_pingpong >/dev/null || {
    echo "handoff.sh: rdmad_handoff_pingpong needs liburing-dev" >&2
    exit 2
  }
fi
command -v sockperf >/dev/null || {
  echo "handoff.sh: sockperf is missing (apt-get install sockperf)" >&2
  exit 2
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

burners_start "$BURNERS"
for run in $(seq "$RUNS"); do
  echo "# run $run/$RUNS" >&2
  for mode in write-read uring; do
    for slice in 0 100; do
      "$PINGPONG" "$mode" "$ITERS" "$slice" >"$TMP/$mode-$slice-$run.json"
    done
  done
  sockperf_rtt "$TMP/sockperf-$run" 3
done

PYTHONPATH="$ROOT/bench" python3 - "$TMP" "$RUNS" "$BURNERS" <<'PY'
import json, os, sys
from report import print_table, sockperf_percentile, spread
tmp, runs, burners = sys.argv[1], int(sys.argv[2]), sys.argv[3]
R = range(1, runs + 1)

def sockperf(run, pct):
    return sockperf_percentile(os.path.join(tmp, "sockperf-%d" % run), pct)

rows = []
for mode in ("write-read", "uring"):
    for slice_us in (0, 100):
        d = [json.load(open(os.path.join(tmp, "%s-%d-%d.json" % (mode, slice_us, r))))
             for r in R]
        rows.append(("%s, %s slice" % (mode, "default" if not slice_us else "100 us"),
                     spread([x["p50_us"] for x in d]),
                     spread([x["p99_us"] for x in d]),
                     spread([x["p999_us"] for x in d])))
rows.append(("sockperf ping-pong (2 hand-offs)",
             spread([sockperf(r, "50.000") for r in R]),
             spread([sockperf(r, "99.000") for r in R]),
             spread([sockperf(r, "99.900") for r in R])))
print("4 hand-offs per round trip beside %s burners, us, %d runs: "
      "median [min..max]" % (burners, runs))
print_table(("how", "p50", "p99", "p99.9"), rows)
PY
