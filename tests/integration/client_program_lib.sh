# shellcheck shell=bash
# Helpers of the tests that use librdmad_client.so as an application
# outside this build would (shared_library_test.sh from the build tree,
# package_test.sh from the packages). Sourced; the caller defines fail()
# and calls stop_daemon on exit.

daemon=""  # the daemon start_test_daemon started, if any

# Stops that daemon (if it runs) and waits for it.
stop_daemon() {
  if [[ -n "$daemon" ]]; then
    kill "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
  fi
  daemon=""
}

# Fails unless the shared library LIB has the soname librdmad_client.so.0
# and exports the public API of include/rdmad/ and nothing else: every
# rdmad:: function the client's own objects define (ARCHIVE, the static
# librdmad_client.a) but none of its internals (rdmad::client_internal, the
# Impl classes), and nothing of what it links (protobuf, gRPC, abseil, the
# generated code).
check_library_exports() {
  local lib="$1" archive="$2"
  readelf -d "$lib" | grep -q 'SONAME.*\[librdmad_client\.so\.0\]' ||
    fail "$lib has not the soname librdmad_client.so.0: $(readelf -d "$lib" | grep SONAME)"
  # nm -C: "ADDRESS TYPE NAME"; type A is the version node (RDMAD_CLIENT_0).
  local exported public foreign internal missing
  exported="$(nm -D --defined-only -C "$lib" |
    awk '$2 != "A" { sub(/^[^ ]* [^ ]* /, ""); sub(/@@?RDMAD_CLIENT_0$/, ""); print }' |
    sort -u)"
  foreign="$(grep -v '^rdmad::' <<<"$exported" || true)"
  [[ -z "$foreign" ]] ||
    fail "$lib exports what is not rdmad's API: $(head -5 <<<"$foreign")"
  internal="$(grep -E '^rdmad::client_internal::|::Impl::' <<<"$exported" || true)"
  [[ -z "$internal" ]] ||
    fail "$lib exports internals: $(head -5 <<<"$internal")"
  public="$(nm --defined-only -C "$archive" 2>/dev/null |
    awk '$2 == "T" { sub(/^[^ ]* [^ ]* /, ""); print }' |
    grep '^rdmad::' | grep -Ev '^rdmad::client_internal::|::Impl::' | sort -u)"
  [[ "$(wc -l <<<"$public")" -gt 50 ]] ||
    fail "found too few functions of the public API in $archive"
  missing="$(comm -23 <(echo "$public") <(echo "$exported"))"
  [[ -z "$missing" ]] ||
    fail "$lib does not export (add to client/librdmad_client.map): $(head -5 <<<"$missing")"
  echo "$(basename "$lib"): soname and exports OK ($(wc -l <<<"$exported") symbols, all of rdmad's public API)"
}

# Builds the program SRC into OUT with FLAGS (pkg-config's and any extra),
# as an application would, and checks what it became: linked against
# librdmad_client.so.0, not against what the library keeps inside (gRPC,
# protobuf), and under 1 MB.
build_client_program() {
  local src="$1" out="$2" flags="$3"
  # shellcheck disable=SC2086 # flag lists, split on purpose
  g++ -std=c++20 -O2 -o "$out" "$src" $flags >"$out.log" 2>&1 || {
    cat "$out.log"; fail "$(basename "$src") does not build with: $flags"; }
  local needed size
  needed="$(readelf -d "$out" | grep NEEDED)"
  grep -q 'librdmad_client\.so\.0' <<<"$needed" ||
    fail "$(basename "$out") is not linked against librdmad_client.so.0: $needed"
  if grep -Eq 'libgrpc|libprotobuf' <<<"$needed"; then
    fail "$(basename "$out") links gRPC or protobuf itself: $needed"
  fi
  size="$(stat -c %s "$out")"
  [[ "$size" -lt 1000000 ]] || fail "$(basename "$out") is $size bytes, not under 1 MB"
  echo "$(basename "$src"): built with pkg-config, $size bytes, linked against librdmad_client.so.0"
}

# Starts RDMAD on DIR/rdmad.sock (TCP transport, loopback) into $daemon and
# waits until it answers RDMACTL.
start_test_daemon() {
  local rdmad="$1" rdmactl="$2" dir="$3"
  "$rdmad" --socket "$dir/rdmad.sock" --peer_listen 127.0.0.1:0 \
    --transport tcp >"$dir/rdmad.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 200); do
    "$rdmactl" --socket "$dir/rdmad.sock" --timeout 1s status >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  cat "$dir/rdmad.log"
  fail "rdmad did not answer on $dir/rdmad.sock"
}

# Runs the queue_run program PROG against the daemon on SOCKET and region
# REGION (with LIBRARY_PATH as LD_LIBRARY_PATH, if given): it must report
# its bytes read back identical.
run_client_program() {
  local prog="$1" socket="$2" region="$3" library_path="${4:-}"
  local out
  out="$(LD_LIBRARY_PATH="$library_path" timeout 60 "$prog" "$socket" "$region" 2>&1)" ||
    fail "$(basename "$prog") failed: $out"
  [[ "$out" == *"read back: identical"* ]] || fail "$(basename "$prog"): $out"
  echo "$(basename "$prog") against a daemon: $out"
}
