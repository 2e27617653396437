# Shared by the bench/ scripts (sourced, not run): temporary daemons that
# are always stopped, free ports, and their work directory.
#
# Needs RDMAD and RDMACTL set to the binaries. Sets TMP and PIDS.

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rdmad-bench.XXXXXX")
PIDS=()
bench_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap bench_cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Benchmarks pin more than a login shell's RLIMIT_MEMLOCK allows; the
# regions' budget is set explicitly instead.
echo 'max_pinned_bytes: 17179869184' > "$TMP/rdmad.conf"

# start_daemon NAME [rdmad flags...]: starts rdmad with its socket at
# $TMP/NAME.sock (and its config $TMP/NAME.conf where there is one, else
# $TMP/rdmad.conf) and waits until it answers.
start_daemon() {
  local name=$1 conf=$TMP/rdmad.conf
  shift
  [[ -e $TMP/$name.conf ]] && conf=$TMP/$name.conf
  "$RDMAD" --socket "$TMP/$name.sock" --config "$conf" \
    --log_level warn "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 200); do
    if "$RDMACTL" --socket "$TMP/$name.sock" --timeout 1s status >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.05
  done
  echo "rdmad $name did not start:" >&2
  cat "$TMP/$name.log" >&2
  exit 1
}

# peer_address NAME: the HOST:PORT other daemons reach daemon NAME at
# (`rdmactl --json status` calls it peer_address; older builds peer_listen).
peer_address() {
  "$RDMACTL" --socket "$TMP/$1.sock" --json status |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("peer_address") or d["peer_listen"])'
}

# sockperf_rtt OUT SECONDS: `sockperf ping-pong --tcp --full-rtt` with
# 14-byte messages (its smallest) on loopback for SECONDS; its output in
# OUT.
sockperf_rtt() {
  local out=$1 secs=$2 port server
  port=$(free_port)
  timeout $((secs + 30)) sockperf server --tcp -i 127.0.0.1 -p "$port" \
    >"$out.server" 2>&1 &
  server=$!
  PIDS+=("$server")
  sleep 0.3
  timeout $((secs + 20)) sockperf ping-pong --tcp --full-rtt -i 127.0.0.1 \
    -p "$port" -m 14 -t "$secs" >"$out" 2>&1 || true
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  unset 'PIDS[-1]'  # stopped: the cleanup must not signal a reused PID
}

# burners_start N: N processes that burn a CPU each, until burners_stop
# (or the cleanup) ends them.
BURNER_PIDS=()
burners_start() {
  for _ in $(seq "$1"); do
    ( while :; do :; done ) &
    BURNER_PIDS+=($!)
    PIDS+=($!)
  done
}
burners_stop() {
  kill "${BURNER_PIDS[@]}" 2>/dev/null || true
  wait "${BURNER_PIDS[@]}" 2>/dev/null || true
  BURNER_PIDS=()
}

# cpu_ticks PID...: the CPU time (clock ticks, user + system) the processes
# have used so far, summed.
cpu_ticks() {
  local sum=0 pid
  for pid in "$@"; do
    sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
  done
  echo "$sum"
}

# bench_run OUT SOCKET ARGS...: one `rdmactl --json bench ARGS` through the
# daemon at SOCKET, its JSON in OUT; a failed run ends the script.
bench_run() {
  local out=$1 sock=$2
  shift 2
  if ! timeout 300 "$RDMACTL" --socket "$sock" --json --timeout 120s \
       bench "$@" >"$out" 2>"$out.err"; then
    echo "rdmactl bench $* failed:" >&2
    tail -5 "$out.err" >&2
    exit 1
  fi
}
