#!/bin/sh
# two_vm_transfer.sh: rdmad's verbs transport between two hosts (two lab VMs,
# each with rxe0 on its own virtio NIC, linked only to each other).
#
# VM 1 runs daemon B, which exports regions (and shows its notices' shared
# receive queue in `rdmactl devices`); VM 0 runs daemon A and moves data
# into and out of B's regions with rdmactl (the client library underneath):
#   - patterns of 1 B, 4 KiB-1, 64 KiB, 1 MiB+7 and 64 MiB written at unaligned
#     offsets and read back byte-identical;
#   - three clients at once;
#   - a write to a read-only export and one past the end fail with a clear
#     message, and the next transfer works;
#   - B SIGKILLed while A writes 64 MiB after 64 MiB: the write in flight
#     fails within its deadline; B restarted on the same address: A (never
#     restarted) transfers again.
# The VMs pace each other with marker files in $LAB_SHARE. Every wait is
# bounded (LAB_STEP_TIMEOUT, default 180 s; each transfer's deadline is
# 120 s: two emulated hosts on a busy machine move a few MB/s).
#
# Run by ctest (lab_verbs_transfer_two_vms) through labvm, with the build
# tree's binaries as arguments: two_vm_transfer.sh RDMAD RDMACTL
set -u

rdmad=$1
rdmactl=$2
step_timeout=${LAB_STEP_TIMEOUT:-180}
vm=$LAB_VM_INDEX
dir=$LAB_SHARE/two_vm_transfer
mark=$dir/$LAB_RUN_ID
port=7471
mkdir -p "$dir" || exit 1
t0=$(date +%s)
log() { echo "two_vm_transfer[vm$vm +$(($(date +%s) - t0))s]: $*"; }
failures=0
pass() { log "PASS: $*"; }
fail() { failures=$((failures + 1)); log "FAIL: $*"; }

# The regions count against the memlock budget; lift it for the test.
conf=$dir/rdmad.vm$vm.conf
echo "max_pinned_bytes: 4294967296" >"$conf"
. "$(dirname "$0")/two_vm_lib.sh"
trap 'stop_daemon' EXIT

if [ "$vm" = 1 ]; then
  # ---- B: the exporting host.
  start_daemon --config "$conf" || { fail "daemon B did not start"; : >"$mark.b-failed"; exit 1; }
  ctl alloc dst 80M --export rw && ctl alloc ro 1M --export r ||
    { fail "B cannot allocate its regions"; : >"$mark.b-failed"; exit 1; }
  # The shared receive queue peers' notices arrive on, as operators see it.
  srq=$(ctl --json devices | python3 -c 'import json, sys
d = json.load(sys.stdin)["devices"][0]["notice_receives"]
print("%d of %d" % (d["posted"], d["depth"]))' 2>&1)
  if [ "$srq" = "1024 of 1024" ]; then
    pass "rdmactl devices shows the notice receive queue: $srq posted"
  else
    fail "rdmactl devices: notice receive queue '$srq', expected 1024 of 1024 posted"
  fi
  : >"$mark.b-ready"
  log "B ready on $LAB_IP:$port"
  wait_file "$mark.kill-b" || { fail "A never asked to kill B"; exit 1; }
  kill -KILL "$daemon_pid"
  wait "$daemon_pid" 2>/dev/null
  daemon_pid=""
  log "B killed"
  : >"$mark.b-killed"
  wait_file "$mark.restart-b" || { fail "A never asked to restart B"; exit 1; }
  start_daemon --config "$conf" || { fail "daemon B did not restart"; : >"$mark.b-failed"; exit 1; }
  ctl alloc dst 80M --export rw || { fail "B cannot allocate after restart"; exit 1; }
  : >"$mark.b-restarted"
  log "B restarted"
  wait_file "$mark.a-done" || { fail "A did not finish"; exit 1; }
  ctl qps
  exit 0
fi

# ---- A: the host that moves data.
start_daemon --config "$conf" || { fail "daemon A did not start"; exit 1; }
peer=$LAB_PEER_IP:$port
wait_file "$mark.b-ready" || { fail "B did not get ready"; exit 1; }
[ -e "$mark.b-failed" ] && { fail "B failed to start"; exit 1; }

data=/tmp/data.vm0
roundtrip() {  # size offset label
  head -c "$1" /dev/urandom >"$data.in"
  if ! ctl put "$data.in" "$peer/dst@$2" >/dev/null; then
    fail "$3: put of $1 bytes at $2"
    return
  fi
  if ! ctl get "$peer/dst@$2" --length "$1" -o "$data.out" >/dev/null; then
    fail "$3: get of $1 bytes at $2"
    return
  fi
  if cmp -s "$data.in" "$data.out"; then
    pass "$3: $1 bytes at offset $2 written and read back byte-identical"
  else
    fail "$3: data read back differs ($1 bytes at $2)"
  fi
}

k=0
for size in 1 4095 65536 1048583 67108864; do
  k=$((k + 1))
  roundtrip "$size" $((4097 * k + 3)) "pattern"
done

if ctl peers --json | grep -q '"TRANSPORT_VERBS"\|"verbs"'; then
  pass "peer B is reached over the verbs transport"
else
  fail "peer B is not on the verbs transport:"
  ctl peers
fi

# Several clients at once, each in its own slice.
pids=""
for c in 1 2 3; do
  (
    head -c 3000007 /dev/urandom >"$data.c$c.in"
    off=$((c * 16777216 + c))
    ctl put "$data.c$c.in" "$peer/dst@$off" >/dev/null &&
      ctl get "$peer/dst@$off" --length 3000007 -o "$data.c$c.out" >/dev/null &&
      cmp -s "$data.c$c.in" "$data.c$c.out"
  ) &
  pids="$pids $!"
done
ok=0
for p in $pids; do wait "$p" && ok=$((ok + 1)); done
[ $ok = 3 ] && pass "3 concurrent clients" || fail "concurrent clients: $ok of 3 ok"

# Violations fail clearly, and the pool keeps working.
head -c 4096 /dev/urandom >"$data.small"
if out=$(ctl put "$data.small" "$peer/ro@0" 2>&1); then
  fail "a write to a read-only export succeeded"
else
  case "$out" in
    *PERMISSION_DENIED*read-only*) pass "write to read-only export: $out" ;;
    *) fail "write to read-only export, unclear error: $out" ;;
  esac
fi
if out=$(ctl put "$data.small" "$peer/dst@$((80 * 1048576 - 100))" 2>&1); then
  fail "a write past the end succeeded"
else
  case "$out" in
    *OUT_OF_RANGE*) pass "write past the end: $out" ;;
    *) fail "write past the end, unclear error: $out" ;;
  esac
fi
roundtrip 65536 12345 "after the violations"

# B killed while A writes 64 MiB after 64 MiB (each several seconds between
# the VMs), each with a 60 s deadline: the write in flight when B dies (or,
# if one just finished, the next) must fail, within its deadline.
head -c 67108864 /dev/urandom >"$data.big"
deadline=60
(
  while :; do
    s=$(date +%s)
    if ! timeout -k 5 "$step_timeout" "$rdmactl" --socket "$sock" \
         --timeout "${deadline}s" put "$data.big" "$peer/dst@0" \
         >"$data.big.log" 2>&1; then
      echo $(($(date +%s) - s)) >"$data.big.took"
      exit 0
    fi
    [ -e "$mark.b-killed" ] && [ -e "$data.big.once" ] && exit 1
    [ -e "$mark.b-killed" ] && : >"$data.big.once"
  done
) &
loop_pid=$!
sleep 2
: >"$mark.kill-b"
wait_file "$mark.b-killed"
wait "$loop_pid"
rc=$?
took=$(cat "$data.big.took" 2>/dev/null || echo "?")
if [ $rc -eq 0 ] && [ "$took" != "?" ] && [ "$took" -le $((deadline + 5)) ]; then
  pass "write during B's death failed after ${took}s: $(cat "$data.big.log")"
else
  fail "write during B's death: loop exit $rc, last write took ${took}s: $(cat "$data.big.log")"
fi
: >"$mark.restart-b"
wait_file "$mark.b-restarted" || { fail "B did not restart"; exit 1; }
# 4 MiB+3: several chunks over the new pool (64 MiB took 18 s more and
# proved nothing the first pattern run did not).
roundtrip 4194307 0 "after B restarted (A not restarted)"
ctl peers
ctl qps
: >"$mark.a-done"
log "$failures failure(s)"
[ $failures -eq 0 ]
