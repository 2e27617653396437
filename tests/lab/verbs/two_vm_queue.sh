#!/bin/sh
# two_vm_queue.sh: the shared-memory queues between two hosts over verbs (two
# lab VMs, each with rxe0 on its own virtio NIC, linked only to each other).
#
# VM 1 runs daemon B; VM 0 runs daemon A and the writers.
#   - Notifications: B's client creates region "inbox" and waits on its
#     notification queue; A's client writes 200 blocks of 64 bytes into it
#     through a queue, block i with immediate i+1. Each WRITE must complete
#     OK over verbs, and B's client must get exactly the 200 notifications,
#     each naming the right offset and arriving after its data
#     (notice_client.cc checks both ends).
#   - Threads and processes: B exports region "threads"; two client
#     processes on A, four threads each with a queue of its own, write their
#     slices of it in batches and read them back byte-identical over verbs
#     (thread_queue_client.cc).
# The VMs pace each other with marker files in $LAB_SHARE; every wait is
# bounded (LAB_STEP_TIMEOUT, default 180 s).
#
# Run by ctest (verbs_queue_two_vms) through labvm, with the build tree's
# binaries as arguments:
#   two_vm_queue.sh RDMAD RDMACTL NOTICE_CLIENT THREAD_QUEUE_CLIENT
set -u

rdmad=$1
rdmactl=$2
client=$3
queue_client=$4
count=200
procs=2
threads=4
step_timeout=${LAB_STEP_TIMEOUT:-180}
vm=$LAB_VM_INDEX
dir=$LAB_SHARE/two_vm_queue
mark=$dir/$LAB_RUN_ID
port=7471
mkdir -p "$dir" || exit 1
t0=$(date +%s)
log() { echo "two_vm_queue[vm$vm +$(($(date +%s) - t0))s]: $*"; }

. "$(dirname "$0")/two_vm_lib.sh"
trap 'stop_daemon' EXIT

if [ "$vm" = 1 ]; then
  # ---- B: owns the inbox and waits for the notifications.
  start_daemon || { log "FAIL: daemon B did not start"; : >"$mark.b-failed"; exit 1; }
  # thread_queue_client's slices: 3001 * 32 bytes for each of procs * threads.
  timeout -k 5 30 "$rdmactl" --socket "$sock" alloc threads \
    $((3001 * 32 * procs * threads)) --export rw ||
    { log "FAIL: B cannot allocate region threads"; : >"$mark.b-failed"; exit 1; }
  timeout -k 5 "$step_timeout" "$client" wait "$sock" inbox "$count" "$mark.b-ready"
  rc=$?
  [ $rc -eq 0 ] && log "PASS: B's owner got $count notifications" ||
    log "FAIL: B's owner (exit $rc)"
  : >"$mark.b-done"
  wait_file "$mark.a-done"
  exit $rc
fi

# ---- A: writes with immediates.
start_daemon || { log "FAIL: daemon A did not start"; : >"$mark.a-done"; exit 1; }
wait_file "$mark.b-ready" || { log "FAIL: B did not get ready"; : >"$mark.a-done"; exit 1; }
[ -e "$mark.b-failed" ] && { log "FAIL: B failed to start"; : >"$mark.a-done"; exit 1; }
timeout -k 5 "$step_timeout" "$client" send "$sock" "$LAB_PEER_IP:$port/inbox" "$count" verbs
rc=$?
[ $rc -eq 0 ] && log "PASS: A's $count WRITEs with an immediate completed over verbs" ||
  log "FAIL: A's writer (exit $rc)"

# ---- A: $procs client processes at once, $threads threads each.
pids=""
p=0
while [ $p -lt $procs ]; do
  timeout -k 5 "$step_timeout" "$queue_client" "$sock" \
    "$LAB_PEER_IP:$port/threads" $p $threads verbs &
  pids="$pids $!"
  p=$((p + 1))
done
ok=0
for pid in $pids; do wait "$pid" && ok=$((ok + 1)); done
if [ $ok = $procs ]; then
  log "PASS: $procs processes of $threads threads, a queue each, read back byte-identical over verbs"
else
  log "FAIL: threads and processes: $ok of $procs processes ok"
  rc=1
fi
wait_file "$mark.b-done" || { log "FAIL: B's owner never finished"; rc=1; }
timeout -k 5 10 "$rdmactl" --socket "$sock" qps
: >"$mark.a-done"
exit $rc
