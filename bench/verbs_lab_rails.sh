#!/usr/bin/env bash
# One rail against two, in one run of two lab VMs linked twice (labvm
# --vms 2 --nics 2: rxe0 on eth0, rxe1 on eth1 in each): the second part of
# bench/verbs_lab.sh, which starts it; it runs in both VMs.
#
# VM 1 runs daemon B on both rails with region "bench" exported. VM 0 runs
# two daemons: A1 with `rails: "rxe0"` (one rail) and A2 with both, and
# measures each against B with rdmactl bench: WRITE bandwidth at 64 KiB,
# 1 MiB and 16 MiB (BENCH_QD in flight, fewer where that would exceed
# BENCH_INFLIGHT_BYTES, default 32 MiB; BENCH_SECONDS each), then 8-byte
# WRITE latency through the client library's queue, A1 and A2 in turn twice
# (the mean of the two p50s of each). Both rxe devices of a VM share its
# two emulated CPUs, and the two VMs share the host's cores: compare the
# ratio, never the absolute figures.
#
# Then perftest between the same VMs (ib_write_bw on rxe0 alone, then on
# rxe0 and rxe1 at once, summed) at 1 MiB and 16 MiB: the reference for
# what a second rail can give under the emulation at all.
#
# Targets: two rails at least 1.4x one rail's bandwidth at 1 MiB and 16 MiB
# (64 KiB operations go whole to one rail each: their gain comes from
# spreading the operations in flight, reported but not a target); 8-byte
# WRITE p50 on two rails within 5% of one rail's. Exits 3 when one is
# missed.
#
# Environment: as bench/verbs_lab.sh (BENCH_SECONDS, BENCH_QD,
# BENCH_LAT_ITERS, BENCH_SPIN), and BENCH_INFLIGHT_BYTES.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
[[ -n ${RDMAD_LAB:-} && ${LAB_NICS:-1} == 2 ]] || {
  echo "verbs_lab_rails.sh runs inside labvm --vms 2 --nics 2 (bench/verbs_lab.sh starts it)" >&2
  exit 2
}
SECS=${BENCH_SECONDS:-3}
QD=${BENCH_QD:-16}
INFLIGHT=${BENCH_INFLIGHT_BYTES:-33554432}
LAT_ITERS=${BENCH_LAT_ITERS:-2000}
SPIN=${BENCH_SPIN:-2ms}
SIZES=65536,1048576,16777216
RDMAD=$BUILD/daemon/rdmad
RDMACTL=$BUILD/client/rdmactl/rdmactl
mark=$LAB_SHARE/rails.$LAB_RUN_ID

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

wait_file() {  # file seconds
  for _ in $(seq $(($2 * 10))); do
    [[ -e $1 ]] && return 0
    sleep 0.1
  done
  echo "timed out waiting for $1" >&2
  return 1
}

# The perftest reference, one step per size and rail count: A asks for a
# step (.go), B starts its ib_write_bw servers and says so (.up). A count
# of WRITEs rather than a duration: the lab moves a 16 MiB WRITE in 2 s,
# and -D counts only those complete when time is up. 48 MiB a rail.
PT_PORT=18515
pt_iters() { local n=$((50331648 / $1)); echo $((n < 5 ? 5 : n)); }
PT_STEPS="one-1048576 two-1048576 one-16777216 two-16777216"

if [[ $LAB_VM_INDEX == 1 ]]; then
  start_daemon b --peer_listen "$LAB_IP:7471" --transport verbs
  "$RDMACTL" --socket "$TMP/b.sock" alloc bench 16M --export rw >/dev/null
  : >"$mark.b-ready"
  for step in $PT_STEPS; do
    for _ in $(seq 18000); do
      [[ -e $mark.pt-$step.go || -e $mark.a-done ]] && break
      sleep 0.1
    done
    [[ -e $mark.pt-$step.go ]] || break
    size=${step#*-}
    servers=()
    timeout 120 ib_write_bw -d "$LAB_RXE_DEV" -x "$LAB_GID_INDEX" -F \
      -p "$PT_PORT" -s "$size" -n "$(pt_iters "$size")" >/dev/null 2>&1 &
    servers+=($!)
    if [[ $step == two-* ]]; then
      timeout 120 ib_write_bw -d "$LAB_RXE_DEV1" -x "$LAB_GID_INDEX1" -F \
        -p $((PT_PORT + 1)) -s "$size" -n "$(pt_iters "$size")" \
        >/dev/null 2>&1 &
      servers+=($!)
    fi
    sleep 1
    : >"$mark.pt-$step.up"
    wait "${servers[@]}" || true
  done
  wait_file "$mark.a-done" 1800
  exit 0
fi

wait_file "$mark.b-ready" 300
B_PEER=$LAB_PEER_IP:7471
cp "$TMP/rdmad.conf" "$TMP/a1.conf"
echo 'rails: "rxe0"' >>"$TMP/a1.conf"
start_daemon a1 --peer_listen "$LAB_IP:0" --transport verbs
start_daemon a2 --peer_listen "$LAB_IP:0" --transport verbs

bench() {  # DAEMON OUT ARGS...
  local daemon=$1 out=$2
  shift 2
  echo "# $daemon: rdmactl bench $*" >&2
  if ! timeout 900 "$RDMACTL" --socket "$TMP/$daemon.sock" --json \
       --timeout 850s bench --peer "$B_PEER" --region bench "$@" \
       >"$out" 2>"$out.err"; then
    tr '\r' '\n' <"$out.err" | grep -v '^.\[K' | tail -5 >&2
    : >"$mark.a-done"
    exit 1
  fi
}
# At most INFLIGHT bytes in flight: a rail of the lab moves 5-15 MB/s, and
# an operation queued behind 16 x 16 MiB on one rail outlived its 30 s
# deadline.
for size in ${SIZES//,/ }; do
  qd=$((INFLIGHT / size))
  ((qd > QD)) && qd=$QD
  ((qd < 1)) && qd=1
  for a in a1 a2; do
    bench "$a" "$TMP/$a-bw-$size.json" --op write --sizes "$size" --qd "$qd" \
      --duration "$SECS"
  done
done
for round in 1 2; do
  for a in a1 a2; do
    bench "$a" "$TMP/$a-lat$round.json" --op write --sizes 8 --qd 1 \
      --iters "$LAT_ITERS" --spin "$SPIN"
  done
done
"$RDMACTL" --socket "$TMP/a2.sock" peers >&2

# perftest between the same VMs: one ib_write_bw on rxe0, then one on each
# rail at once (the sum), at the sizes the targets name. What the lab's
# emulation gives a second rail at all, measured the same way.
for step in $PT_STEPS; do
  size=${step#*-}
  echo "# perftest ib_write_bw -s $size -n $(pt_iters "$size"), ${step%%-*} rail(s)" >&2
  : >"$mark.pt-$step.go"
  wait_file "$mark.pt-$step.up" 300 || break
  clients=()
  timeout 120 ib_write_bw -d "$LAB_RXE_DEV" -x "$LAB_GID_INDEX" -F \
    -p "$PT_PORT" -s "$size" -n "$(pt_iters "$size")" "$LAB_PEER_IP" \
    >"$TMP/pt-$step-0.txt" 2>&1 &
  clients+=($!)
  if [[ $step == two-* ]]; then
    timeout 120 ib_write_bw -d "$LAB_RXE_DEV1" -x "$LAB_GID_INDEX1" -F \
      -p $((PT_PORT + 1)) -s "$size" -n "$(pt_iters "$size")" \
      "$LAB_PEER_IP1" \
      >"$TMP/pt-$step-1.txt" 2>&1 &
    clients+=($!)
  fi
  wait "${clients[@]}" || true
done
: >"$mark.a-done"

python3 - "$TMP" "$SIZES" <<'PY'
import json, os, sys
tmp, sizes = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]

def load(name):
    return json.load(open(os.path.join(tmp, name + ".json")))

def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n

def run(daemon, size):
    return load("%s-bw-%d" % (daemon, size))

missed = []
print("\nrails: soft-RoCE between two lab VMs linked twice, WRITE, "
      "MB/s (10^6 bytes/s)")
print("%8s %4s %10s %10s %8s" % ("size", "qd", "one rail", "two rails",
                                 "ratio"))
for s in sizes:
    a = run("a1", s)["results"][0]["mb_per_s"]
    b = run("a2", s)["results"][0]["mb_per_s"]
    q = b / a if a else 0
    print("%8s %4d %10.1f %10.1f %7.2fx" % (human(s), run("a1", s)["qd"], a,
                                            b, q))
    if s >= (1 << 20) and q < 1.4:
        missed.append("two rails %.2fx one at %s (target 1.4x)" % (q, human(s)))
def perftest_bw(step):
    # ib_write_bw's result row: "#bytes #iterations BW peak BW average
    # MsgRate"; MB/sec as it reports them (2^20 bytes). The sum over rails.
    total, found = 0.0, False
    for rail in (0, 1):
        path = os.path.join(tmp, "pt-%s-%d.txt" % (step, rail))
        if not os.path.exists(path):
            continue
        for line in open(path, errors="replace"):
            f = line.split()
            if (len(f) >= 5 and f[0] == step.split("-")[1] and f[1].isdigit()
                    and int(f[1]) > 0):
                total += float(f[3]) * (1 << 20) / 1e6
                found = True
    return total if found else None

print("perftest ib_write_bw between the same VMs, MB/s: what a second rail "
      "gives under this emulation")
print("%8s %10s %10s %8s" % ("size", "one rail", "two rails", "ratio"))
for s in sizes:
    if s < (1 << 20):
        continue
    one, two = perftest_bw("one-%d" % s), perftest_bw("two-%d" % s)
    if one and two:
        print("%8s %10.1f %10.1f %7.2fx" % (human(s), one, two, two / one))
    else:
        print("%8s  (perftest gave no figure)" % human(s))
        for step in ("one-%d" % s, "two-%d" % s):
            for rail in (0, 1):
                path = os.path.join(tmp, "pt-%s-%d.txt" % (step, rail))
                if os.path.exists(path):
                    tail = open(path, errors="replace").read().splitlines()[-4:]
                    print("    %s rail %d: %s" % (step, rail, " | ".join(tail)))
p50 = {a: sum(load("%s-lat%d" % (a, r))["results"][0]["p50_us"]
              for r in (1, 2)) / 2 for a in ("a1", "a2")}
q = p50["a2"] / p50["a1"]
print("8-byte WRITE p50, us (mean of two runs each): one rail %.1f, two "
      "rails %.1f: %.3fx (target within 5%%)" % (p50["a1"], p50["a2"], q))
if q > 1.05:
    missed.append("8 B p50 on two rails %.3fx one rail's" % q)
if missed:
    print("RAIL TARGETS MISSED: " + "; ".join(missed))
    sys.exit(3)
print("rail targets met")
PY
