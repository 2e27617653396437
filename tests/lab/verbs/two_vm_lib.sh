# two_vm_lib.sh: what the two-VM lab scripts (two_vm_transfer.sh,
# two_vm_queue.sh, two_vm_rails.sh) share, sourced by them. Expects $rdmad,
# $rdmactl, $vm, $dir, $port and $step_timeout to be set; sets $sock and
# $daemon_pid.

# Unix sockets cannot live on the 9p share: use the VM's own tmpfs.
sock=/tmp/rdmad-vm$vm.sock
daemon_pid=""

# start_daemon [RDMAD FLAGS...]: this VM's daemon on rxe0, over verbs;
# returns once it answers `rdmactl status` (bounded), 1 if it does not.
start_daemon() {
  "$rdmad" --socket "$sock" --peer_listen "$LAB_IP:$port" --transport verbs \
    --log_level info "$@" >>"$dir/rdmad.vm$vm.log" 2>&1 &
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

# ctl ARGS...: rdmactl against this VM's daemon, bounded.
ctl() {
  timeout -k 5 "$step_timeout" "$rdmactl" --socket "$sock" --timeout 120s "$@"
}
