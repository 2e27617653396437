#!/bin/sh
# mesh_one_vm.sh: one rdmad reaching many peers over verbs, in one lab VM.
#
# rdmad_stand_in_peers stands in for MESH_PEERS (default 100) peer daemons,
# each on its own 127.0.x.y with its own verbs acceptor on rxe0; one real
# rdmad (verbs transport) WRITEs 4 KiB to every one of them at once
# (rdmad_mesh_bench reach: one Local.Batch). Passes when every WRITE
# completed, every peer is ready, and none of the daemon's QPs is in any
# state but RTS. Every wait is bounded.
#
# Run by ctest (lab_mesh_verbs_one_vm) through labvm:
#   mesh_one_vm.sh RDMAD RDMACTL STAND_IN MESH_BENCH
set -u

rdmad=$1
rdmactl=$2
stand_in=$3
bench=$4
n=${MESH_PEERS:-100}
dir=$PWD
t0=$(date +%s)
log() { echo "mesh_one_vm[+$(($(date +%s) - t0))s]: $*"; }
pids=""
cleanup() {
  for pid in $pids; do kill "$pid" 2>/dev/null; done
  for pid in $pids; do wait "$pid" 2>/dev/null; done
}
trap cleanup EXIT

"$stand_in" --count "$n" --transport verbs >"$dir/stand_in.log" 2>&1 &
pids="$pids $!"
i=0
until grep -q '^READY' "$dir/stand_in.log"; do
  i=$((i + 1))
  if [ "$i" -gt 1200 ]; then
    log "FAIL: the stand-in peers did not start"
    cat "$dir/stand_in.log"
    exit 1
  fi
  sleep 0.1
done
line=$(grep '^READY' "$dir/stand_in.log")
log "$line"
first=$(echo "$line" | sed 's/.*first=\([0-9.]*\).*/\1/')
port=$(echo "$line" | sed 's/.*port=\([0-9]*\).*/\1/')
# The stand-ins' addresses: from `first`, skipping .0 and .255.
peers=$(echo "$first" | awk -F. -v n="$n" -v port="$port" '{
  host = (($1 * 256 + $2) * 256 + $3) * 256 + $4
  out = ""
  for (k = 0; k < n; host++) {
    if (host % 256 == 0 || host % 256 == 255) continue
    out = out (k ? "," : "") sprintf("%d.%d.%d.%d:%d", int(host / 16777216),
        int(host / 65536) % 256, int(host / 256) % 256, host % 256, port)
    k++
  }
  print out
}')

echo "max_pinned_bytes: 4294967296" >"$dir/rdmad.conf"
# Unix sockets cannot live on the 9p share: use the VM's own tmpfs.
sock=/tmp/rdmad-mesh.sock
"$rdmad" --socket "$sock" --config "$dir/rdmad.conf" --transport verbs \
  --peer_listen 127.0.0.1:0 --log_level info >"$dir/a.log" 2>&1 &
apid=$!
pids="$pids $apid"
i=0
until "$rdmactl" --socket "$sock" --timeout 2s status >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 300 ]; then
    log "FAIL: rdmad did not start"
    tail -20 "$dir/a.log"
    exit 1
  fi
  sleep 0.2
done

failures=0
"$bench" reach --socket "$sock" --pid "$apid" --peers "$peers" \
  --stages "$n" >"$dir/reach.txt" 2>"$dir/reach.err"
cat "$dir/reach.txt"
failed=$(sed -n 's/^RESULT metric=failures value=//p' "$dir/reach.txt")
if [ "${failed:-x}" != 0 ]; then
  log "FAIL: ${failed:-?} of $n WRITEs failed"
  head -20 "$dir/reach.err"
  failures=$((failures + 1))
else
  log "PASS: $n peers reached over verbs, 0 failures"
fi
ready=$("$rdmactl" --socket "$sock" --json peers |
  grep -o '"state": *"[A-Za-z_]*"' | grep -ci 'ready')
qps=$("$rdmactl" --socket "$sock" --json qps | grep -o '"state": *"[A-Z]*"')
total=$(echo "$qps" | grep -c .)
rts=$(echo "$qps" | grep -c '"RTS"')
log "peers ready: $ready of $n; QPs: $total, $rts in RTS"
if [ "$ready" -ne "$n" ] || [ "$total" -eq 0 ] || [ "$rts" -ne "$total" ]; then
  log "FAIL: every peer ready and every QP in RTS"
  echo "$qps" | sort | uniq -c
  failures=$((failures + 1))
else
  log "PASS: 0 QPs in error"
fi
# One 4 KiB WRITE per peer never fills a send queue: each pool keeps the
# one QP it started with (it grows only under load, qp_growth.h).
if [ "$total" -ne "$n" ]; then
  log "FAIL: $total QPs for $n peers that each sent one small WRITE (want $n)"
  failures=$((failures + 1))
else
  log "PASS: one QP per peer"
fi
exit $((failures != 0))
