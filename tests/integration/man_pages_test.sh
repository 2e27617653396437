#!/usr/bin/env bash
# The man pages (docs/man) against the binaries they document:
#   - both render without groff warnings;
#   - every rdmactl command's synopsis (rdmactl help COMMAND) is the tag of
#     its entry in rdmactl(8), whole and on one line (no stray quote, no
#     part of it pushed into the body);
#   - every flag of rdmad --help is in rdmad(8)'s SYNOPSIS;
#   - every key of rdmactl bench --json (run here against a daemon this
#     script starts) is in rdmactl(8)'s list of bench keys.
#
#   man_pages_test.sh SOURCE_DIR RDMAD RDMACTL
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

fail=0
# Plain ASCII, one very long line per paragraph and no hyphenation, so that
# a tag is on one line exactly when the source keeps it in one piece.
render() {
  groff -man -Tascii -rLL=1000n -rHY=0 -P-cbou "$1"
}
for page in rdmad.8 rdmactl.8; do
  warnings="$(groff -ww -z -man "$src/docs/man/$page" 2>&1)"
  if [[ -n "$warnings" ]]; then
    echo "FAIL: $page: groff warns: $warnings"; fail=1
  fi
done
render "$src/docs/man/rdmactl.8" >"$tmp/rdmactl.txt"
render "$src/docs/man/rdmad.8" >"$tmp/rdmad.txt"

# rdmactl: each command's synopsis, from its usage line(s) up to the blank
# line, with runs of spaces and newlines made one space.
commands="$("$rdmactl" help | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}')"
if [[ -z "$commands" ]]; then
  echo "FAIL: no commands in 'rdmactl help'"; fail=1
fi
for command in $commands; do
  [[ "$command" == help ]] && continue
  usage="$("$rdmactl" help "$command" | sed -n '1,/^$/p' | tr -s ' \n' '  ' | sed 's/ *$//')"
  synopsis="${usage#usage: rdmactl }"
  # The tag: 7 spaces and the synopsis, alone on its line; or a tag that
  # fits in the 7-column indent ("qps"), with the body after it.
  if awk -v synopsis="$synopsis" '
       $0 == "       " synopsis ||
       (length(synopsis) < 7 && index($0, "       " synopsis " ") == 1) {found = 1}
       END {exit !found}' "$tmp/rdmactl.txt"; then
    echo "ok: rdmactl(8) has '$synopsis'"
  else
    echo "FAIL: rdmactl(8) has no entry tagged '$synopsis' (rdmactl help $command):"
    grep -E "^       $command( |$)" "$tmp/rdmactl.txt" | head -3 | sed 's/^/    /'
    fail=1
  fi
done

# rdmad: the flags of its usage text, in the SYNOPSIS.
synopsis="$(sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' "$tmp/rdmad.txt")"
for flag in $("$rdmad" --help 2>&1 | sed -n '/^Usage:/,/^Flags given/p' | grep -oE -- '--[a-z_-]+' | sort -u); do
  if grep -qE -- "\\[$flag( |\\])" <<<"$synopsis"; then
    echo "ok: rdmad(8) SYNOPSIS has $flag"
  else
    echo "FAIL: rdmad(8) SYNOPSIS lacks $flag (rdmad --help has it)"; fail=1
  fi
done

# rdmactl bench --json: its keys in the man page's list for bench.
sock="$tmp/rdmad.sock"
"$rdmad" --socket "$sock" --peer_listen 127.0.0.1:0 --transport tcp \
  >"$tmp/rdmad.log" 2>&1 &
daemon=$!
for _ in $(seq 1 200); do
  "$rdmactl" --socket "$sock" --timeout 1s status >/dev/null 2>&1 && break
  sleep 0.05
done
"$rdmactl" --socket "$sock" bench --local --create-region --sizes 8 \
  --iters 1 --json >"$tmp/bench.json"
bench_keys="$(sed -n '/^       bench  *op,/,/^$/p' "$tmp/rdmactl.txt")"
if [[ -z "$bench_keys" ]]; then
  echo "FAIL: rdmactl(8) has no list of bench keys"; fail=1
fi
for key in $(python3 -c '
import json, sys
report = json.load(open(sys.argv[1]))
keys = set(report) | set(report["results"][0])
print("\n".join(sorted(keys)))' "$tmp/bench.json"); do
  if grep -qE "(^|[ (,])$key([,)]|$| )" <<<"$bench_keys"; then
    echo "ok: bench key $key documented"
  else
    echo "FAIL: rdmactl(8) does not list bench key '$key'"; fail=1
  fi
done
exit "$fail"
