#!/usr/bin/env bash
# Small operations through rdmad's shared-memory ring, side by side with
# the floors measured in the same run on the same machine:
#
#   floor        rdmad_shm_pingpong: two processes bounce 8 bytes through a
#                memfd with the ring's wake-up (spin, then eventfd)
#   local        8-byte WRITE to a region of the same daemon:
#                `rdmactl bench --local --path ring`, and `--path grpc`
#   batched      the ring with --batch 16 and 64: ops/s per engine thread,
#                and the daemon's CPU per operation (utime+stime of rdmad
#                from /proc/PID/stat before and after, over the operations)
#   remote       two daemons on 127.0.0.1 over TCP: 8-byte WRITE p50 via the
#                ring and via gRPC, next to `sockperf ping-pong --tcp
#                --full-rtt` on the same loopback (14-byte messages,
#                sockperf's smallest); and rdmad_write_pingpong: two
#                clients WRITE into each other's regions in turn and poll
#                their memory, half of each round trip (one way, as
#                ib_write_lat measures), next to half sockperf's round trip
#
#   bench/small_ops.sh [BUILD_DIR]
#
# Every measurement runs BENCH_RUNS times (default 3), interleaved so that
# each reference ran in the same load as what it is compared with; the
# table shows the median and [min..max]. Checks these targets and
# exits 3 when one is missed (BENCH_NO_TARGETS=1: only print):
#   ring local p50 <= 5 us, p99 <= 25 us, p50 <= 3x the floor's p50;
#   >= 1M ops/s per engine thread with batches of 16 or more;
#   remote TCP ring p50 <= 2x the sockperf round trip;
#   daemon CPU per batched op <= 2 us.
#
# Environment: BENCH_RUNS (3), BENCH_ITERS (20000: local latency runs),
# BENCH_GRPC_ITERS (2000), BENCH_REMOTE_ITERS (5000), BENCH_SECONDS (3:
# batched runs and sockperf), BENCH_BATCH_QD (1: client threads of the
# batched runs), BENCH_ENGINE_THREADS (1), BENCH_ENGINE_SPIN_US (the
# daemon's default, 50), BENCH_NO_BUILD=1 (measure BUILD_DIR's binaries as
# they are, e.g. an older build to compare with).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
RUNS=${BENCH_RUNS:-3}
ITERS=${BENCH_ITERS:-20000}
GRPC_ITERS=${BENCH_GRPC_ITERS:-2000}
REMOTE_ITERS=${BENCH_REMOTE_ITERS:-5000}
SECS=${BENCH_SECONDS:-3}
BATCH_QD=${BENCH_BATCH_QD:-1}
ENGINES=${BENCH_ENGINE_THREADS:-1}

RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl
PINGPONG=$BUILD/bench/rdmad_shm_pingpong
WRITE_PINGPONG=$BUILD/bench/rdmad_write_pingpong

if [[ -z ${RDMAD_LAB:-} && -z ${BENCH_NO_BUILD:-} ]]; then
  cmake --build "$BUILD" --target rdmad rdmactl rdmad_shm_pingpong \
    rdmad_write_pingpong >/dev/null
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# Engine settings for both daemons (the config file lib.sh wrote).
echo "engine_threads: $ENGINES" >>"$TMP/rdmad.conf"
if [[ -n ${BENCH_ENGINE_SPIN_US:-} ]]; then
  echo "engine_spin_us: $BENCH_ENGINE_SPIN_US" >>"$TMP/rdmad.conf"
fi

start_daemon a --peer_listen 127.0.0.1:0 --transport tcp
start_daemon b --peer_listen 127.0.0.1:0 --transport tcp
A_PID=${PIDS[0]}
A_PEER=$(peer_address a)
B_PEER=$(peer_address b)
"$RDMACTL" --socket "$TMP/a.sock" alloc small-ops 64K --export rw >/dev/null
"$RDMACTL" --socket "$TMP/b.sock" alloc small-ops 64K --export rw >/dev/null

# bench_json OUT SOCKET ARGS...: one `rdmactl --json bench` run.
bench_json() {
  local out=$1 sock=$2
  shift 2
  bench_run "$out" "$sock" --region small-ops --sizes 8 "$@"
}

HAVE_SOCKPERF=1
command -v sockperf >/dev/null || HAVE_SOCKPERF=0
[[ $HAVE_SOCKPERF == 1 ]] ||
  echo "# sockperf missing (apt-get install sockperf): no TCP reference" >&2

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for run in $(seq "$RUNS"); do
  echo "# run $run/$RUNS" >&2
  timeout 120 "$PINGPONG" --json --iters "$ITERS" >"$TMP/floor-$run.json"
  bench_json "$TMP/ring-$run.json" "$TMP/a.sock" --local --path ring \
    --iters "$ITERS"
  bench_json "$TMP/grpc-$run.json" "$TMP/a.sock" --local --path grpc \
    --iters "$GRPC_ITERS"
  for batch in 16 64; do
    before=$(cpu_ticks "$A_PID")
    bench_json "$TMP/batch$batch-$run.json" "$TMP/a.sock" --local \
      --path ring --batch "$batch" --qd "$BATCH_QD" --duration "$SECS"
    echo $(( $(cpu_ticks "$A_PID") - before )) >"$TMP/batch$batch-$run.ticks"
  done
  bench_json "$TMP/remote-ring-$run.json" "$TMP/a.sock" --peer "$B_PEER" \
    --path ring --iters "$REMOTE_ITERS"
  bench_json "$TMP/remote-grpc-$run.json" "$TMP/a.sock" --peer "$B_PEER" \
    --path grpc --iters "$GRPC_ITERS"
  if ! timeout 120 "$WRITE_PINGPONG" --socket-a "$TMP/a.sock" \
       --socket-b "$TMP/b.sock" --peer-a "$A_PEER" --peer-b "$B_PEER" \
       --iters "$REMOTE_ITERS" --json >"$TMP/oneway-$run.json"; then
    echo "rdmad_write_pingpong failed" >&2
    exit 1
  fi
  if [[ $HAVE_SOCKPERF == 1 ]]; then
    sockperf_rtt "$TMP/sockperf-$run.txt" "$SECS"
  fi
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

PYTHONPATH="$ROOT/bench" python3 - "$TMP" "$RUNS" "$ENGINES" \
  "$(getconf CLK_TCK)" "${BENCH_NO_TARGETS:-}" <<'PY'
import json, os, sys
from report import Targets, med, print_table, ratios, sockperf_percentile, spread

tmp, runs, engines, clk_tck, no_targets = sys.argv[1:6]
runs, engines, clk_tck = int(runs), int(engines), int(clk_tck)

def load(name, run):
    path = os.path.join(tmp, "%s-%d.json" % (name, run))
    d = json.load(open(path))
    return d["results"][0] if "results" in d else d

def series(name, key):
    return [load(name, r)[key] for r in range(1, runs + 1)]

def sockperf(run, pct):
    return sockperf_percentile(os.path.join(tmp, "sockperf-%d.txt" % run), pct)

def cpu_per_op(batch):
    out = []
    for r in range(1, runs + 1):
        ticks = int(open(os.path.join(tmp, "batch%d-%d.ticks" % (batch, r))).read())
        ops = load("batch%d" % batch, r)["ops"] + 1  # + the warm-up
        out.append(ticks / clk_tck / ops * 1e6)
    return out

floor50, floor99 = series("floor", "p50_us"), series("floor", "p99_us")
ring50, ring99 = series("ring", "p50_us"), series("ring", "p99_us")
grpc50, grpc99 = series("grpc", "p50_us"), series("grpc", "p99_us")
rring50, rring99 = series("remote-ring", "p50_us"), series("remote-ring", "p99_us")
rgrpc50, rgrpc99 = series("remote-grpc", "p50_us"), series("remote-grpc", "p99_us")
oneway50, oneway99 = series("oneway", "p50_us"), series("oneway", "p99_us")
sp50 = [sockperf(r, "50.000") for r in range(1, runs + 1)]
sp99 = [sockperf(r, "99.000") for r in range(1, runs + 1)]

rows = []
def row(what, p50, p99, extra, ratio=None, ratio_of=""):
    rows.append((what, spread(p50, "%.2f"), spread(p99, "%.2f"), extra,
                 "" if ratio is None else spread(ratio, "%.2fx") + ratio_of))

row("floor: shm ping-pong (2 processes)", floor50, floor99,
    "%.2fM rtt/s" % (med(series("floor", "rtt_per_s")) / 1e6))
row("rdmad ring, local region", ring50, ring99,
    "%.0fk ops/s" % (med(series("ring", "ops_per_s")) / 1e3),
    ratios(ring50, floor50), " floor")
row("rdmad gRPC, local region", grpc50, grpc99,
    "%.1fk ops/s" % (med(series("grpc", "ops_per_s")) / 1e3),
    ratios(grpc50, floor50), " floor")
batched = {}
for b in (16, 64):
    per_engine = [x / engines for x in series("batch%d" % b, "ops_per_s")]
    cpu = cpu_per_op(b)
    batched[b] = (per_engine, cpu)
    row("rdmad ring, local, batch %d (per batch)" % b,
        series("batch%d" % b, "p50_us"), series("batch%d" % b, "p99_us"),
        "%s Mops/s/engine, CPU %s us/op" % (
            spread([x / 1e6 for x in per_engine], "%.2f"),
            spread(cpu, "%.2f")))
if any(x is not None for x in sp50):
    row("remote: sockperf TCP ping-pong RTT", sp50, sp99, "14 B")
row("remote: rdmad ring WRITE over TCP", rring50, rring99, "2 daemons",
    ratios(rring50, sp50) if any(sp50) else None, " sockperf")
row("remote: rdmad gRPC WRITE over TCP", rgrpc50, rgrpc99, "2 daemons",
    ratios(rgrpc50, sp50) if any(sp50) else None, " sockperf")
half_sp50 = [x / 2 if x is not None else None for x in sp50]
row("remote: rdmad WRITE one way (ping-pong / 2)", oneway50, oneway99,
    "2 daemons", ratios(oneway50, half_sp50) if any(sp50) else None,
    " sockperf/2")

print("8-byte operations, %d runs each: median [min..max]; latency in us"
      % runs)
print_table(("what", "p50 us", "p99 us", "throughput / CPU", "p50 ratio"),
            rows)

targets = Targets()
check = targets.check
check("ring local p50 (us)", med(ring50), 5.0, "%.2f")
check("ring local p99 (us)", med(ring99), 25.0, "%.2f")
check("ring local p50 / floor p50", med(ratios(ring50, floor50)), 3.0, "%.2fx")
best = max(med(batched[b][0]) for b in batched)
targets.add("batched ops/s per engine thread (best of 16, 64)",
            best >= 1e6, "%.2fM" % (best / 1e6), ">= 1.00M")
check("daemon CPU per op, batch 16 (us)", med(batched[16][1]), 2.0, "%.2f")
check("remote ring p50 / sockperf RTT p50",
      med(ratios(rring50, sp50)) if any(sp50) else None, 2.0, "%.2fx")
targets.finish(no_targets)
PY
