#!/bin/sh
# two_vm_rails.sh: rdmad's verbs transport over two rails between two hosts:
# two lab VMs linked twice (labvm --nics 2: rxe0 on eth0 and rxe1 on eth1 in
# each), so each daemon has two rails to the other. In one boot, in turn:
#   1. stripes: 16 MiB+3 written at an unaligned offset and read back
#      byte-identical, with both rails carrying bytes, each at least a fifth
#      (the two links are alike);
#   2. small operations: 101 WRITEs of 4 KiB, 4 at a time (rdmactl bench),
#      each whole on one rail: the rails' operation counts grow by exactly
#      101 and their bytes by 101 x 4 KiB;
#   3. striped WRITEs with an immediate: B's owner waits for 8
#      notifications of 4 MiB blocks, each split over both rails, and checks
#      that every byte of a block is in place when its notification arrives
#      (notice_client);
#   4. a link down in the middle of a 64 MiB write (eth1 set down in A's VM
#      once rail 1 sent 1 MiB of it, before it ends): the write completes OK
#      on rail 0 and reads back identical, rail 1 is shown PAUSED with its
#      port down;
#      eth1 up again: after the pause (3 s here) the next transfer brings
#      rail 1 back ACTIVE, carrying bytes;
#   5. a flapping link (eth1 down and up 8 times, 0.5 s each) while A writes
#      2 MiB after 2 MiB (each a new transfer that could ask for a rebuild):
#      every write succeeds, and A connects to B at most 3 more times (the
#      handshake generation of A's QPs), where a rebuild per flap would be 8.
# VM 1 runs daemon B, which exports; VM 0 runs daemon A and the clients. The
# VMs pace each other with marker files in $LAB_SHARE; every wait is bounded
# (LAB_STEP_TIMEOUT, default 180 s). LAB_RAIL_PAUSE and LAB_RAIL_PAUSE_MAX
# (seconds, default 3 and 300) set the rails' pauses.
#
# Run by ctest (verbs_rails_two_vms) through labvm, with the build tree's
# binaries as arguments: two_vm_rails.sh RDMAD RDMACTL NOTICE_CLIENT
set -u

rdmad=$1
rdmactl=$2
client=$3
step_timeout=${LAB_STEP_TIMEOUT:-180}
vm=$LAB_VM_INDEX
dir=$LAB_SHARE/two_vm_rails
mark=$dir/$LAB_RUN_ID
port=7471
pause=${LAB_RAIL_PAUSE:-3}
pause_max=${LAB_RAIL_PAUSE_MAX:-300}
blocks=8
block=4194304
mkdir -p "$dir" || exit 1
t0=$(date +%s)
log() { echo "two_vm_rails[vm$vm +$(($(date +%s) - t0))s]: $*"; }
failures=0
pass() { log "PASS: $*"; }
fail() { failures=$((failures + 1)); log "FAIL: $*"; }

[ "${LAB_NICS:-1}" = 2 ] || { log "FAIL: needs labvm --nics 2"; exit 1; }
# Regions count against the memlock budget; a failed rail rests $pause s.
conf=$dir/rdmad.vm$vm.conf
printf 'max_pinned_bytes: 4294967296\nrail_pause_seconds: %s\nrail_pause_max_seconds: %s\n' \
  "$pause" "$pause_max" >"$conf"
. "$(dirname "$0")/two_vm_lib.sh"
trap 'stop_daemon' EXIT

if [ "$vm" = 1 ]; then
  # ---- B: exports dst, and its owner of inbox waits for notifications.
  start_daemon --config "$conf" || { fail "daemon B did not start"; : >"$mark.b-failed"; exit 1; }
  ctl alloc dst 80M --export rw || { fail "B cannot allocate dst"; : >"$mark.b-failed"; exit 1; }
  : >"$mark.b-ready"
  # The owner waits (bounded) from when A is about to write.
  wait_file "$mark.inbox-wanted" || { fail "A never came to the notifications"; exit 1; }
  timeout -k 5 "$step_timeout" "$client" wait "$sock" inbox "$blocks" \
    "$mark.inbox-ready" "$block"
  rc=$?
  [ $rc -eq 0 ] && pass "B's owner got $blocks notifications, each after all of its 4 MiB" ||
    fail "B's owner of inbox (exit $rc)"
  echo $rc >"$mark.inbox-done"
  # A's five scenarios take a few minutes under emulation.
  wait_file "$mark.a-done" || wait_file "$mark.a-done" ||
    wait_file "$mark.a-done" || fail "A did not finish"
  ctl qps
  exit $failures
fi

# ---- A: moves data into B's regions.
start_daemon --config "$conf" || { fail "daemon A did not start"; exit 1; }
peer=$LAB_PEER_IP:$port
wait_file "$mark.b-ready" || { fail "B did not get ready"; exit 1; }
[ -e "$mark.b-failed" ] && { fail "B failed to start"; exit 1; }

# snap: A's view of B (rdmactl peers --json) into $data.peers;
# rail N FIELD: a field of A's rail N to B in it.
snap() { ctl peers --json >"$data.peers"; }
rail() {
  jq -r --arg p "$peer" ".peers[] | select(.address == \$p) | .rails[$1].$2" \
    "$data.peers"
}
# The handshake generation of A's newest QPs to B: one more per Connect.
generation() {
  ctl qps --json |
    jq "[.qps[] | select(.role == \"initiator\") | .generation] | max"
}
data=/tmp/data.vm0
roundtrip() {  # size offset label
  head -c "$1" /dev/urandom >"$data.in"
  if ! ctl put "$data.in" "$peer/dst@$2" >/dev/null; then
    fail "$3: put of $1 bytes at $2"
    return 1
  fi
  if ! ctl get "$peer/dst@$2" --length "$1" -o "$data.out" >/dev/null; then
    fail "$3: get of $1 bytes at $2"
    return 1
  fi
  if cmp -s "$data.in" "$data.out"; then
    pass "$3: $1 bytes at offset $2 written and read back byte-identical"
  else
    fail "$3: data read back differs ($1 bytes at $2)"
    return 1
  fi
}

# 1. Stripes over both rails (a 64 MiB write comes in 4).
roundtrip 16777219 12345 "16 MiB+3"
snap
if [ "$(rail 1 device)" != rxe1 ]; then
  fail "A has no second rail to B:"
  ctl peers
else
  b0=$(rail 0 bytes)
  b1=$(rail 1 bytes)
  total=$((b0 + b1))
  if [ "$b0" -gt $((total / 5)) ] && [ "$b1" -gt $((total / 5)) ]; then
    pass "both rails carried the stripes: rail 0 $b0 bytes, rail 1 $b1 bytes"
  else
    fail "stripes not spread: rail 0 $b0 bytes, rail 1 $b1 bytes"
  fi
fi

# 2. Small operations go whole to one rail (bench: a warm-up and 100).
snap
o0=$(rail 0 ops) o1=$(rail 1 ops) y0=$(rail 0 bytes) y1=$(rail 1 bytes)
ctl bench --peer "$peer" --region dst --op write --sizes 4096 --qd 4 \
  --iters 100 >/dev/null || fail "bench of 4 KiB WRITEs"
snap
d0=$(($(rail 0 ops) - o0)) d1=$(($(rail 1 ops) - o1))
bytes=$(($(rail 0 bytes) + $(rail 1 bytes) - y0 - y1))
if [ $((d0 + d1)) = 101 ] && [ $bytes = $((101 * 4096)) ]; then
  pass "101 WRITEs of 4 KiB went whole, one rail each (rail 0 $d0, rail 1 $d1; $bytes bytes)"
else
  fail "small WRITEs: $((d0 + d1)) operations, $bytes bytes on the rails (want 101, $((101 * 4096)))"
fi

# 3. Striped WRITEs with an immediate: announced after every rail's bytes.
: >"$mark.inbox-wanted"
if wait_file "$mark.inbox-ready"; then
  timeout -k 5 "$step_timeout" "$client" send "$sock" "$peer/inbox" \
    "$blocks" verbs "$block" || fail "A's WRITEs of 4 MiB with an immediate"
else
  fail "B's owner of inbox did not get ready"
fi
wait_file "$mark.inbox-done" || fail "B's owner never finished"
[ "$(cat "$mark.inbox-done" 2>/dev/null)" = 0 ] &&
  pass "4 MiB WRITEs with an immediate, split over both rails, were notified after all their bytes" ||
  fail "B's owner saw a notification before its data (or none; see vm1)"

# 4. A link down in the middle of a 64 MiB write.
head -c 67108864 /dev/urandom >"$data.big"
tx_bytes=/sys/class/net/eth1/statistics/tx_bytes
read -r tx0 <"$tx_bytes"
(
  ctl put "$data.big" "$peer/dst@0" >"$data.big.log" 2>&1
  echo $? >"$data.big.rc"
) &
writer=$!
# Until rail 1 has sent 1 MiB of it on eth1 (a rail's share is posted at
# once and counts as in flight until its last byte: eth1's own counter
# tells that it is moving, and costs a file read, where a poll of rdmactl
# peers outlasted much of the write on a loaded host). Bounded; not after
# the write ended.
sent=0
n=0
while [ ! -e "$data.big.rc" ] && [ $n -lt 6000 ]; do
  read -r tx <"$tx_bytes"
  sent=$((tx - tx0))
  [ "$sent" -ge 1048576 ] && break
  sleep 0.01
  n=$((n + 1))
done
ip link set eth1 down
ended_first=no
[ -e "$data.big.rc" ] && ended_first=yes
log "eth1 set down after it sent $sent bytes of the write"
wait "$writer"
if [ "$sent" -lt 1048576 ]; then
  fail "never saw rail 1 carry part of the 64 MiB write (eth1 sent $sent bytes; write: $(cat "$data.big.rc") $(tail -c 300 "$data.big.log"))"
elif [ "$ended_first" = yes ]; then
  fail "the 64 MiB write ended before eth1 went down: nothing to fail over"
elif [ "$(cat "$data.big.rc")" = 0 ]; then
  pass "64 MiB write with eth1 set down in the middle completed OK"
else
  fail "64 MiB write with eth1 down: $(cat "$data.big.log")"
fi
if ctl get "$peer/dst@0" --length 67108864 -o "$data.big.out" >/dev/null &&
   cmp -s "$data.big" "$data.big.out"; then
  pass "... and reads back byte-identical"
else
  fail "64 MiB read back after the link went down differs"
fi
snap
state=$(rail 1 state) port_active=$(rail 1 port_active) pauses=$(rail 1 pauses)
if [ "$state" = PAUSED ] && [ "$port_active" = false ] && [ "$pauses" -ge 1 ]; then
  pass "rail 1 shown PAUSED, port down, $pauses pause(s): $(rail 1 last_error)"
else
  fail "rail 1 after its link went down: state $state, port_active $port_active, pauses $pauses"
  ctl peers
fi
ip link set eth1 up
n=0
until grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null; do
  n=$((n + 1))
  [ $n -le $((step_timeout * 10)) ] || break
  sleep 0.1
done
sleep $((pause + 1))
snap
before=$(rail 1 bytes)
roundtrip 16777216 0 "after eth1 came back"
snap
state=$(rail 1 state) after=$(rail 1 bytes)
if [ "$state" = ACTIVE ] && [ "$after" -gt "$before" ]; then
  pass "rail 1 back ACTIVE after eth1 came up and its pause ended ($((after - before)) bytes since)"
else
  fail "rail 1 did not come back: state $state, bytes $before -> $after"
  ctl peers
fi

# 5. A flapping link costs a reconnection per pause, not one per flap.
gen0=$(generation)
head -c 2097152 /dev/urandom >"$data.flap"
(
  while [ ! -e "$data.flap.stop" ]; do
    ctl put "$data.flap" "$peer/dst@0" >>"$data.flap.log" 2>&1 ||
      echo failed >>"$data.flap.failed"
  done
) &
writer=$!
k=0
while [ $k -lt 8 ]; do
  ip link set eth1 down
  sleep 0.5
  ip link set eth1 up
  sleep 0.5
  k=$((k + 1))
done
: >"$data.flap.stop"
wait "$writer"
gen1=$(generation)
if [ -e "$data.flap.failed" ]; then
  fail "a write failed while eth1 flapped: $(tail -3 "$data.flap.log")"
else
  pass "every write succeeded while eth1 flapped 8 times"
fi
snap
if [ $((gen1 - gen0)) -le 3 ]; then
  pass "8 flaps cost $((gen1 - gen0)) reconnection(s) (generation $gen0 -> $gen1), $(rail 1 pauses) pauses of rail 1 in all"
else
  fail "reconnect storm: generation $gen0 -> $gen1 over 8 flaps"
fi

ctl peers
ctl qps
: >"$mark.a-done"
log "$failures failure(s)"
[ $failures -eq 0 ]
