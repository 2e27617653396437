#!/bin/sh
# two_vm_notice.sh: WRITE with an immediate between two hosts over verbs (two
# lab VMs, each with rxe0 on its own virtio NIC, linked only to each other).
#
# VM 1 runs daemon B and a client that creates region "inbox" and waits on
# its notification queue; VM 0 runs daemon A and a client that writes 200
# blocks of 64 bytes into B's inbox through a queue, block i with immediate
# i+1. Each WRITE must complete OK over verbs, and B's client must get
# exactly the 200 notifications, each naming the right offset and arriving
# after its data (notice_client.cc checks both ends). The VMs pace each
# other with marker files in $LAB_SHARE; every wait is bounded
# (LAB_STEP_TIMEOUT, default 180 s).
#
# Run by ctest (verbs_notice_two_vms) through labvm, with the build tree's
# binaries as arguments: two_vm_notice.sh RDMAD RDMACTL NOTICE_CLIENT
set -u

rdmad=$1
rdmactl=$2
client=$3
count=200
step_timeout=${LAB_STEP_TIMEOUT:-180}
vm=$LAB_VM_INDEX
dir=$LAB_SHARE/two_vm_notice
mark=$dir/$LAB_RUN_ID
port=7471
mkdir -p "$dir" || exit 1
t0=$(date +%s)
log() { echo "two_vm_notice[vm$vm +$(($(date +%s) - t0))s]: $*"; }

# Unix sockets cannot live on the 9p share: use the VM's own tmpfs.
sock=/tmp/rdmad-vm$vm.sock
daemon_pid=""
start_daemon() {
  "$rdmad" --socket "$sock" --peer_listen "$LAB_IP:$port" --transport verbs \
    --log_level info >>"$dir/rdmad.vm$vm.log" 2>&1 &
  daemon_pid=$!
  n=0
  until timeout -k 5 10 "$rdmactl" --socket "$sock" status >/dev/null 2>&1; do
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$dir/rdmad.vm$vm.log"; return 1; }
    n=$((n + 1))
    [ $n -le $((step_timeout * 10)) ] || return 1
    sleep 0.1
  done
}
stop_daemon() {
  [ -n "$daemon_pid" ] || return 0
  kill -TERM "$daemon_pid" 2>/dev/null
  wait "$daemon_pid"
  daemon_pid=""
}
wait_file() {  # file: until it exists, bounded
  n=0
  until [ -e "$1" ]; do
    n=$((n + 1))
    [ $n -le $((step_timeout * 10)) ] || return 1
    sleep 0.1
  done
}
trap 'stop_daemon' EXIT

if [ "$vm" = 1 ]; then
  # ---- B: owns the inbox and waits for the notifications.
  start_daemon || { log "FAIL: daemon B did not start"; : >"$mark.b-failed"; exit 1; }
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
wait_file "$mark.b-done" || { log "FAIL: B's owner never finished"; rc=1; }
timeout -k 5 10 "$rdmactl" --socket "$sock" qps
: >"$mark.a-done"
exit $rc
