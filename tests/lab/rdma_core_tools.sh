#!/bin/sh
# rdma_core_tools.sh: proves the soft-RoCE lab with rdma-core's own tools and perftest.
#
# Inside the lab (RDMAD_LAB=1, started by labvm) it runs ibv_devinfo, ibv_rc_pingpong,
# ib_write_bw, ib_read_bw and ib_write_lat over rxe0 between two endpoints:
#   one VM  (LAB_VMS=1): server in the background and client in the same VM, via LAB_IP;
#   two VMs (LAB_VMS=2): servers on VM 1, clients on VM 0 connecting to LAB_PEER_IP; the
#                        VMs pace each other with marker files in $LAB_SHARE.
# It prints the figures ("lab figure: ...") and exits nonzero if any tool failed.
#
# Outside the lab it starts the lab itself:  rdma_core_tools.sh [1|2]   (number of VMs)
#
# Tunables (environment): LAB_PP_ITERS (100), LAB_BW_ITERS (200), LAB_LAT_ITERS (300),
# LAB_STEP_TIMEOUT (60 s: the limit of every tool run and every wait); pass them into the VM
# with labvm --env NAME=VALUE.
# shellcheck disable=SC2016 # the awk programs are single-quoted on purpose
set -u

if [ -z "${RDMAD_LAB:-}" ]; then
  here=$(cd "$(dirname "$0")" && pwd -P)
  exec "$here/labvm" --vms "${1:-1}" --timeout 300 -- /bin/sh "$here/rdma_core_tools.sh"
fi

pp_iters=${LAB_PP_ITERS:-100}
bw_iters=${LAB_BW_ITERS:-200}
lat_iters=${LAB_LAT_ITERS:-300}
step_timeout=${LAB_STEP_TIMEOUT:-60}
dev=${LAB_RXE_DEV:-rxe0}
gid=$LAB_GID_INDEX
vm=$LAB_VM_INDEX
dir=$LAB_SHARE/rdma_core_tools
mark=$dir/$LAB_RUN_ID
mkdir -p "$dir" || exit 1

if [ "$LAB_VMS" = 1 ]; then
  role=both server_ip=$LAB_IP topology="one VM"
elif [ "$vm" = 1 ]; then
  role=server server_ip=$LAB_IP topology="two VMs"
else
  role=client server_ip=$LAB_PEER_IP topology="two VMs"
fi

failed=""
passed=0
figures=""
t0=$(date +%s)
log() { echo "rdma_core_tools[vm$vm +$(($(date +%s) - t0))s]: $*"; }
pass() { passed=$((passed + 1)); log "PASS: $1"; }
fail() { failed="$failed $1"; log "FAIL: $1${2:+: $2}"; }
figure() {
  figures="$figures
lab figure: $*"
}
run() { timeout -k 5 "$step_timeout" "$@"; }

# Is some socket listening on TCP port $1? (/proc/net/tcp{,6}: builtins only, no process)
listening() {
  hex=$(printf '%04X' "$1")
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    while read -r _sl local _rem st _rest; do
      case "$local" in *:"$hex") [ "$st" = 0A ] && return 0 ;; esac
    done <"$f"
  done
  return 1
}
wait_listening() { # port pid: until the server on port listens, bounded, and while it lives
  n=0
  until listening "$1"; do
    kill -0 "$2" 2>/dev/null || return 1
    n=$((n + 1))
    [ $n -le $((step_timeout * 10)) ] || return 1
    sleep 0.1
  done
}
wait_file() { # file...: until one of them exists, bounded; prints the one found
  n=0
  while :; do
    for f in "$@"; do
      if [ -e "$f" ]; then echo "$f"; return 0; fi
    done
    n=$((n + 1))
    [ $n -le $((step_timeout * 5)) ] || return 1
    sleep 0.2
  done
}
# perftest calibrates its cycle counter against gettimeofday first; when the host deschedules
# the VM during that, it gives up ("Correlation coefficient r^2 ... < 0.9") and reports 0.
calibration_failed() { grep -q 'Correlation coefficient' "$1"; }

# The parts of one attempt of a step; they use name, port and a (the attempt number).
start_server() { # tool and arguments: start it, wait until it listens, tell the client
  sout=$dir/$name.vm$vm.server.log
  run "$@" -p "$port" >"$sout" 2>&1 &
  spid=$!
  if wait_listening "$port" "$spid"; then
    : >"$mark.$name.$a.ready"
    return 0
  fi
  : >"$mark.$name.$a.failed"
  kill "$spid" 2>/dev/null
  wait "$spid"
  fail "$name server" "did not listen on port $port"
  cat "$sout"
  return 1
}
finish_server() { # wait for the server's end
  wait "$spid"
  src=$?
  [ $src -eq 0 ] && return 0
  fail "$name server" "exit $src"
  cat "$sout"
  return 1
}
run_client() { # tool and arguments (the server address is appended)
  cout=$dir/$name.vm$vm.client.log
  if [ "$role" = client ]; then
    found=$(wait_file "$mark.$name.$a.ready" "$mark.$name.$a.failed")
    if [ "$found" != "$mark.$name.$a.ready" ]; then
      fail "$name" "the server on vm1 did not get ready"
      return 1
    fi
  fi
  run "$@" -p "$port" "$server_ip" >"$cout" 2>&1
  crc=$?
  cat "$cout"
  [ $crc -eq 0 ] && return 0
  fail "$name" "client exit $crc"
  return 1
}

# One step on this VM's role(s): the server, the client, or both. It is run again (3 attempts
# in all, on other ports) when perftest could not calibrate its clock, so that its figure is
# not a bogus 0; with two VMs the client tells the server with marker files whether to serve
# again. Arguments: step name, TCP port, tool and its arguments.
step() {
  name=$1 port=$2
  shift 2
  log "--- $name"
  a=1
  while :; do
    again=0
    case "$role" in
      both)
        start_server "$@" || return 1
        run_client "$@"
        ok=$?
        finish_server || ok=1
        [ $ok -eq 0 ] || return 1
        calibration_failed "$cout" && [ $a -lt 3 ] && again=1
        ;;
      client)
        run_client "$@"
        ok=$?
        [ $ok -eq 0 ] && calibration_failed "$cout" && [ $a -lt 3 ] && again=1
        if [ $again = 1 ]; then : >"$mark.$name.$a.again"; else : >"$mark.$name.$a.over"; fi
        [ $ok -eq 0 ] || return 1
        ;;
      server)
        start_server "$@" || return 1
        finish_server || return 1
        if ! found=$(wait_file "$mark.$name.$a.again" "$mark.$name.$a.over"); then
          fail "$name server" "no word from the client on vm0"
          return 1
        fi
        [ "$found" = "$mark.$name.$a.again" ] && again=1
        ;;
    esac
    [ $again = 1 ] || break
    log "perftest could not calibrate its clock (the host is busy): again"
    a=$((a + 1))
    port=$((port + 10))
  done
  [ "$role" = server ] && pass "$name server"
  return 0
}

# Record a figure from the client's output and count the step as passed, or fail it.
# Arguments: step name, label, awk program that prints the figure.
report() {
  if calibration_failed "$dir/$1.vm$vm.client.log"; then
    figure "$2: n/a (perftest could not calibrate its clock: the host was too busy)"
    pass "$1"
    return
  fi
  v=$(awk "$3" "$dir/$1.vm$vm.client.log")
  if [ -n "$v" ]; then
    figure "$2: $v"
    pass "$1"
  else
    fail "$1" "no result in its output"
  fi
}
# perftest's result line: "#bytes #iterations ..." columns, BW average 4th, t_typical 5th.
bw_result='$1 == 65536 && $2 ~ /^[0-9]+$/ && NF >= 4 { print $4 " MB/s"; exit }'
lat_result='$1 == 64 && $2 ~ /^[0-9]+$/ && NF >= 6 { print $5 " usec typical, " $6 " usec average"; exit }'

log "topology: $topology, role: $role, $dev on ${LAB_NETDEV:-?} $LAB_IP, GID index $gid, server $server_ip"

log "--- ibv_devinfo"
out=$(run ibv_devinfo -d "$dev" 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ]; then
  fail "ibv_devinfo" "exit status $rc"
else
  case "$out" in
    *PORT_ACTIVE*) pass "ibv_devinfo" ;;
    *) fail "ibv_devinfo" "port 1 of $dev is not PORT_ACTIVE" ;;
  esac
fi

perf="-d $dev -x $gid -F"
step ibv_rc_pingpong 18515 ibv_rc_pingpong -d "$dev" -g "$gid" -s 4096 -n "$pp_iters" &&
  [ "$role" != server ] &&
  report ibv_rc_pingpong "ibv_rc_pingpong 4096 B" '/iters in .* usec\/iter/ { print $(NF - 1) " usec/iter"; exit }'
# shellcheck disable=SC2086 # $perf is a list of options
step ib_write_bw 18516 ib_write_bw $perf -s 65536 -n "$bw_iters" &&
  [ "$role" != server ] && report ib_write_bw "ib_write_bw 65536 B" "$bw_result"
# shellcheck disable=SC2086
step ib_read_bw 18517 ib_read_bw $perf -s 65536 -n "$bw_iters" &&
  [ "$role" != server ] && report ib_read_bw "ib_read_bw 65536 B" "$bw_result"
# shellcheck disable=SC2086
step ib_write_lat 18518 ib_write_lat $perf -s 64 -n "$lat_iters" &&
  [ "$role" != server ] && report ib_write_lat "ib_write_lat 64 B" "$lat_result"

echo
log "summary ($topology, role $role):"
if [ -n "$figures" ]; then
  printf '%s\n' "$figures" | sed '/^$/d' | tee "$dir/figures.vm$vm.txt"
fi
if [ -n "$failed" ]; then
  log "FAILED:$failed ($passed checks passed)"
  exit 1
fi
log "all $passed checks passed"
exit 0
