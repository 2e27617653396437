#!/usr/bin/env bash
# Many small remote operations, the tail under load and large local
# copies, each beside its reference measured in the same round:
#
#   rate        two daemons on 127.0.0.1 over TCP: 8-byte WRITEs through
#               the shared-memory queue in batches of 64, BENCH_RATE_WINDOW
#               (default 32) batches in flight (`rdmactl bench --batch 64
#               --window 32`), next to `ucx_perftest -t ucp_put_bw -s 8`
#               over UCX's TCP transport on the same loopback; the two
#               daemons' CPU per operation (utime + stime of both from
#               /proc/PID/stat, over the operations); and, for the cost of
#               waiting, 8 batches in flight and one batch at a time.
#               ucp_put_bw's puts complete once UCX has buffered them, so
#               it keeps as many in flight as its sockets hold (its -O 64,
#               512 and 4096 outstanding give the same rate); an rdmad
#               WRITE completes when the peer has acknowledged it, so what
#               it keeps in flight must cover the round trip, which beside
#               the burners is milliseconds (every hand-off waits for a CPU)
#   tail        8-byte remote WRITE one at a time (qd 1), p50 and p99, next
#               to `sockperf ping-pong --tcp` (14 bytes)
#   copy        1 MiB WRITEs to a region of the same daemon with 4 in
#               flight (`rdmactl bench --local --qd 4`), next to memcpy of
#               1 MiB in one thread (libc's, through Python's ctypes)
#
# Rate and tail run twice per round: on the machine as it is, and with
# BENCH_BURNERS (default 4) CPU-burning processes running beside both
# daemons and the references alike.
#
#   bench/remote_ops.sh [BUILD_DIR]
#
# Every measurement runs BENCH_RUNS times (default 3), interleaved so that
# each reference ran in the same load as what it is compared with; the
# table shows the median and [min..max]. Checks these targets and exits 3
# when one is missed (BENCH_NO_TARGETS=1: only print):
#   remote 8 B WRITE rate at batch 64 (BENCH_RATE_WINDOW of them in
#   flight) >= 1.0x ucx_perftest ucp_put_bw;
#   the same with the burners running >= 0.8x ucx_perftest with them;
#   the daemons' CPU per remote op at batch 64 (both sides) <= 2.7 us;
#   remote 8 B p99 at qd 1 with the burners <= 5x sockperf's p99 with them;
#   local 1 MiB copies at qd 4 >= 0.8x memcpy of 1 MiB.
#
# Environment: BENCH_RUNS (3), BENCH_SECONDS (3), BENCH_BURNERS (4),
# BENCH_RATE_WINDOW (32), BENCH_TAIL_ITERS (5000), BENCH_UCX_ITERS (400000),
# BENCH_NO_BUILD=1.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
RUNS=${BENCH_RUNS:-3}
SECS=${BENCH_SECONDS:-3}
BURNERS=${BENCH_BURNERS:-4}
RATE_WINDOW=${BENCH_RATE_WINDOW:-32}
TAIL_ITERS=${BENCH_TAIL_ITERS:-5000}
UCX_ITERS=${BENCH_UCX_ITERS:-400000}

RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl

if [[ -z ${BENCH_NO_BUILD:-} ]]; then
  cmake --build "$BUILD" --target rdmad rdmactl >/dev/null
fi
for tool in ucx_perftest sockperf; do
  command -v "$tool" >/dev/null || {
    echo "remote_ops.sh: $tool is missing (apt-get install ucx-utils sockperf)" >&2
    exit 2
  }
done

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

start_daemon a --peer_listen 127.0.0.1:0 --transport tcp
start_daemon b --peer_listen 127.0.0.1:0 --transport tcp
A_PID=${PIDS[0]}
B_PID=${PIDS[1]}
B_PEER=$(peer_address b)
"$RDMACTL" --socket "$TMP/a.sock" alloc small-ops 64K --export rw >/dev/null
"$RDMACTL" --socket "$TMP/b.sock" alloc small-ops 64K --export rw >/dev/null
"$RDMACTL" --socket "$TMP/a.sock" alloc copy 1M --export rw >/dev/null

bench_json() {  # OUT ARGS...: one `rdmactl --json bench` through daemon a
  local out=$1
  shift
  bench_run "$out" "$TMP/a.sock" "$@"
}

ucx_put_bw() {  # OUT
  local out=$1 port server
  port=$(free_port)
  UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 120 ucx_perftest -p "$port" \
    >"$out.server" 2>&1 &
  server=$!
  sleep 0.5
  UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 100 ucx_perftest 127.0.0.1 \
    -p "$port" -t ucp_put_bw -s 8 -n "$UCX_ITERS" >"$out" 2>&1 || true
  wait "$server" 2>/dev/null || true
}

memcpy_rate() {  # OUT: MB/s of 1 MiB memcpy in one thread
  python3 - "$SECS" >"$1" <<'PY'
import ctypes, sys, time
size, secs = 1 << 20, float(sys.argv[1])
src, dst = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
ctypes.memset(src, 7, size)
n, start = 0, time.perf_counter()
while True:
    for _ in range(64):
        ctypes.memmove(dst, src, size)
    n += 64
    elapsed = time.perf_counter() - start
    if elapsed >= secs:
        break
print('{"mb_per_s": %.1f}' % (n * size / elapsed / 1e6))
PY
}

measure() {  # TAG: rate, CPU and tail, with the references
  local tag=$1 before
  ucx_put_bw "$TMP/ucx-$tag"
  before=$(cpu_ticks "$A_PID" "$B_PID")
  bench_json "$TMP/rate-$tag.json" --peer "$B_PEER" --region small-ops \
    --sizes 8 --path ring --batch 64 --window "$RATE_WINDOW" \
    --duration "$SECS"
  echo $(($(cpu_ticks "$A_PID" "$B_PID") - before)) >"$TMP/rate-$tag.ticks"
  bench_json "$TMP/rate8-$tag.json" --peer "$B_PEER" --region small-ops \
    --sizes 8 --path ring --batch 64 --window 8 --duration "$SECS"
  bench_json "$TMP/rate1-$tag.json" --peer "$B_PEER" --region small-ops \
    --sizes 8 --path ring --batch 64 --duration "$SECS"
  bench_json "$TMP/tail-$tag.json" --peer "$B_PEER" --region small-ops \
    --sizes 8 --path ring --iters "$TAIL_ITERS"
  sockperf_rtt "$TMP/sockperf-$tag" "$SECS"
}

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for run in $(seq "$RUNS"); do
  echo "# run $run/$RUNS" >&2
  measure "quiet-$run"
  burners_start "$BURNERS"
  measure "burn-$run"
  burners_stop
  bench_json "$TMP/copy-$run.json" --local --region copy --sizes 1M --qd 4 \
    --duration "$SECS"
  memcpy_rate "$TMP/memcpy-$run.json"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

PYTHONPATH="$ROOT/bench" python3 - "$TMP" "$RUNS" "$(getconf CLK_TCK)" \
  "$BURNERS" "${BENCH_NO_TARGETS:-}" "$RATE_WINDOW" <<'PY'
import json, os, re, sys
from report import Targets, med, print_table, ratios, sockperf_percentile, spread

tmp, runs, clk_tck, burners, no_targets, window = sys.argv[1:7]
runs, clk_tck = int(runs), int(clk_tck)
R = range(1, runs + 1)

def bench(name):
    d = json.load(open(os.path.join(tmp, name)))
    return d["results"][0] if "results" in d else d

def ucx_rate(tag):
    text = open(os.path.join(tmp, "ucx-" + tag), errors="replace").read()
    m = re.search(r"Final:\s+\d+(?:\s+[0-9.]+){5}\s+([0-9.]+)\s+([0-9.]+)", text)
    return float(m.group(2)) if m else None

def sockperf(tag, pct):
    return sockperf_percentile(os.path.join(tmp, "sockperf-" + tag), pct)

def cpu_per_op(tag):
    ticks = int(open(os.path.join(tmp, "rate-%s.ticks" % tag)).read())
    ops = bench("rate-%s.json" % tag)["ops"] + 1  # + the warm-up
    return ticks / clk_tck / ops * 1e6

rows, notes, targets = [], [], Targets()
def row(what, value, ref, r):
    rows.append((what, value, ref, r))

for cond, label in (("quiet", "as is"), ("burn", "%s burners" % burners)):
    rate = [bench("rate-%s-%d.json" % (cond, r))["ops_per_s"] for r in R]
    ucx = [ucx_rate("%s-%d" % (cond, r)) for r in R]
    cpu = [cpu_per_op("%s-%d" % (cond, r)) for r in R]
    p50 = [bench("tail-%s-%d.json" % (cond, r))["p50_us"] for r in R]
    p99 = [bench("tail-%s-%d.json" % (cond, r))["p99_us"] for r in R]
    sp50 = [sockperf("%s-%d" % (cond, r), "50.000") for r in R]
    sp99 = [sockperf("%s-%d" % (cond, r), "99.000") for r in R]
    rate8 = [bench("rate8-%s-%d.json" % (cond, r))["ops_per_s"] for r in R]
    rate1 = [bench("rate1-%s-%d.json" % (cond, r))["ops_per_s"] for r in R]
    row("8 B WRITE batch 64 x %s, kops/s (%s)" % (window, label),
        spread([x / 1e3 for x in rate], "%.0f"),
        "ucx put_bw " + spread([x / 1e3 if x else None for x in ucx], "%.0f"),
        spread(ratios(rate, ucx), "%.2fx"))
    row("  8 batches in flight, kops/s (%s)" % label,
        spread([x / 1e3 for x in rate8], "%.0f"), "",
        spread(ratios(rate8, ucx), "%.2fx"))
    row("  one batch at a time, kops/s (%s)" % label,
        spread([x / 1e3 for x in rate1], "%.0f"), "",
        spread(ratios(rate1, ucx), "%.2fx"))
    row("  daemons' CPU per op, us (%s)" % label, spread(cpu, "%.2f"),
        "", "")
    row("8 B WRITE qd 1 p50, us (%s)" % label, spread(p50, "%.1f"),
        "sockperf " + spread(sp50, "%.1f"), spread(ratios(p50, sp50), "%.2fx"))
    row("8 B WRITE qd 1 p99, us (%s)" % label, spread(p99, "%.1f"),
        "sockperf " + spread(sp99, "%.1f"), spread(ratios(p99, sp99), "%.2fx"))
    if cond == "quiet":
        targets.check("rate / ucx_perftest, batch 64",
                      med(ratios(rate, ucx)), 1.0, "%.2fx", at_least=True)
        targets.check("daemons' CPU per op, batch 64 (us)", med(cpu), 2.7,
                      "%.2f")
    else:
        targets.check("rate / ucx_perftest, batch 64, burners",
                      med(ratios(rate, ucx)), 0.8, "%.2fx", at_least=True)
        targets.check("p99 / sockperf p99, qd 1, burners",
                      med(ratios(p99, sp99)), 5.0, "%.2fx")
        # The median ratio passes or fails with the reference's own tail,
        # which beside the burners is tens of microseconds in some runs
        # and a scheduler tick in others: show each run's pair.
        slow = lambda xs: sum(1 for x in xs if x is not None and x >= 1000)
        notes.append(
            "qd-1 p99 beside the burners, each run, rdmad / sockperf (us): "
            + ", ".join("%.0f / %s" % (a, "n/a" if b is None else "%.0f" % b)
                        for a, b in zip(p99, sp99))
            + "; 1 ms or more in %d of %d runs for rdmad, %d for sockperf"
            % (slow(p99), runs, slow(sp99)))

copy = [bench("copy-%d.json" % r)["mb_per_s"] for r in R]
mc = [json.load(open(os.path.join(tmp, "memcpy-%d.json" % r)))["mb_per_s"]
      for r in R]
row("1 MiB local WRITE qd 4, MB/s", spread(copy, "%.0f"),
    "memcpy " + spread(mc, "%.0f"), spread(ratios(copy, mc), "%.2fx"))
targets.check("1 MiB local copy / memcpy, qd 4", med(ratios(copy, mc)), 0.8,
              "%.2fx", at_least=True)

print("%d runs each: median [min..max]" % runs)
print_table(("what", "rdmad", "reference", "ratio"), rows)
for note in notes:
    print(note)
targets.finish(no_targets)
PY
