#!/usr/bin/env bash
# The daemon's TCP listeners (metrics, data, peers) never take a port that
# another of them is configured for (daemon/tcp_listeners.h).
#
# Each start runs in a network namespace of its own whose ephemeral port
# range is four ports, with one listener's fixed port inside that range and
# the others on port 0. A listener bound on port 0 before the fixed one
# would be handed the fixed port by the kernel in about one start of three,
# and the daemon would then fail to listen on a port it holds itself. Every
# port of the range is tried as the fixed one, for metrics and for peers.
#
#   listen_ports_test.sh RDMAD_BINARY
# Exit 77 (skipped) where a network namespace cannot be made (not root).
set -euo pipefail
rdmad="$1"

if ! unshare -n true 2>/dev/null || ! command -v ip >/dev/null; then
  echo "SKIPPED: cannot make a network namespace (needs root and iproute2)" >&2
  exit 77
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

first=40000
last=40003

# Runs inside the namespace: starts rdmad with the given listener flags,
# waits for it to be ready or to exit, prints its log, stops it.
# Exit status: 0 ready, 1 it exited or never became ready.
cat > "$tmp/start.sh" <<'INNER'
set -u
rdmad="$1"; dir="$2"; range="$3"; shift 3
ip link set lo up
echo "$range" > /proc/sys/net/ipv4/ip_local_port_range
"$rdmad" --socket "$dir/rdmad.sock" --transport tcp --log_level info \
  "$@" > "$dir/log" 2>&1 &
pid=$!
status=1
for _ in $(seq 300); do
  if grep -q " ready: " "$dir/log"; then status=0; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -TERM "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
exit "$status"
INNER

# The port a log line "... WHAT ADDRESS ..." names, e.g. "peers 127.0.0.1:40001,".
port_after() {
  grep -o "$1 [0-9.]*:[0-9]*" "$2" | head -1 | sed 's/.*://'
}

starts=0
check() {  # check NAME FLAGS...
  local name="$1"; shift
  local dir="$tmp/$name"
  mkdir -p "$dir"
  starts=$((starts + 1))
  if ! unshare -n bash "$tmp/start.sh" "$rdmad" "$dir" "$first $last" "$@"; then
    echo "FAIL $name: rdmad $* did not start:"; cat "$dir/log"; exit 1
  fi
  local peer data metrics
  peer="$(port_after peers "$dir/log")"
  data="$(port_after data "$dir/log")"
  metrics="$(grep -o 'metrics on http://[0-9.]*:[0-9]*' "$dir/log" | sed 's/.*://')"
  if [[ -z "$peer" || -z "$data" || -z "$metrics" ]]; then
    echo "FAIL $name: ports not found in the log:"; cat "$dir/log"; exit 1
  fi
  if [[ "$peer" == "$data" || "$peer" == "$metrics" || "$data" == "$metrics" ]]; then
    echo "FAIL $name: two listeners on one port (peers $peer, data $data, metrics $metrics)"
    exit 1
  fi
  echo "ok $name: peers $peer, data $data, metrics $metrics"
}

for port in $(seq "$first" "$last"); do
  for round in 1 2; do
    check "metrics-$port-$round" --peer_listen 127.0.0.1:0 \
      --metrics_listen "127.0.0.1:$port"
    check "peers-$port-$round" --peer_listen "127.0.0.1:$port" \
      --metrics_listen 127.0.0.1:0
  done
done
echo "all $starts starts kept their listeners apart"
