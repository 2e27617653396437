#!/usr/bin/env bash
# The bash completion of rdmactl (deploy/bash-completion/rdmactl): commands,
# per-command options and values, and region names asked from a real
# daemon (started here on a socket in a temporary directory).
#
#   completion_test.sh SOURCE_DIR RDMAD RDMACTL
set -euo pipefail
src="$1"
rdmad="$(realpath "$2")"
rdmactl="$(realpath "$3")"
tmp="$(mktemp -d)"
daemon=""
cleanup() {
  if [[ -n "$daemon" ]]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

sock="$tmp/rdmad.sock"
"$rdmad" --socket "$sock" --peer_listen 127.0.0.1:0 --transport tcp \
  >"$tmp/rdmad.log" 2>&1 &
daemon=$!
for _ in $(seq 1 200); do
  "$rdmactl" --socket "$sock" --timeout 1s status >/dev/null 2>&1 && break
  sleep 0.05
done
"$rdmactl" --socket "$sock" alloc kv-cache 4K >/dev/null
"$rdmactl" --socket "$sock" alloc kv-index 4K >/dev/null

mkdir -p "$tmp/bin"
ln -s "$rdmactl" "$tmp/bin/rdmactl"
export PATH="$tmp/bin:$PATH"
# shellcheck source=/dev/null
source "$src/deploy/bash-completion/rdmactl"

# complete WORD... : the completions for the last word of the line.
complete_line() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _rdmactl
  echo "${COMPREPLY[*]}"
}
fail=0
expect() {
  local want="$1"; shift
  local got
  got="$(complete_line "$@")"
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: rdmactl ${*:2}: got '$got', want '$want'"; fail=1
  else
    echo "ok: rdmactl ${*:2} -> $got"
  fi
}
expect "export"                 rdmactl ex
expect "peers put"              rdmactl p
expect "--socket"               rdmactl --so
expect "--op"                   rdmactl bench --o
expect "write read"             rdmactl bench --op ""
expect "r w rw"                 rdmactl alloc x 1M --export ""
expect "--batch"                rdmactl bench --bat
expect "--window"               rdmactl bench --win
expect "--mode"                 rdmactl alloc x 1M --mo
expect "kv-cache kv-index"      rdmactl --socket "$sock" free kv
expect "kv-cache"               rdmactl --socket "$sock" export kv-c
expect "r w rw none"            rdmactl --socket "$sock" export kv-cache ""
expect "--allow"                rdmactl export kv-cache rw --al
expect "status stat"            rdmactl sta
expect "chmod chgrp"            rdmactl ch
expect "--peer"                 rdmactl regions --pe
expect "kv-cache kv-index"      rdmactl --socket "$sock" chmod kv
expect "kv-cache kv-index"      rdmactl --socket "$sock" stat kv
expect "kv-cache kv-index"      rdmactl --socket "$sock" put in.bin kv
expect "root"                   rdmactl --socket "$sock" chgrp kv-cache roo
expect "--path"                 rdmactl bench --pa
expect "ring grpc"              rdmactl bench --path ""
expect "--fresh"                rdmactl lookup --fr
expect "ls lookup"              rdmactl l
exit $fail
