#!/usr/bin/env bash
# librdmad_client.so as an application outside this build uses it:
#   * its soname, and the symbols it exports: the public API of
#     include/rdmad/ and nothing else (no protobuf, gRPC, abseil or
#     generated code, no internals of the library);
#   * examples/queue_run.cc built with nothing but
#     `pkg-config --cflags --libs rdmad-client` from this build tree
#     (build/pkgconfig/rdmad-client-uninstalled.pc), linked against the
#     shared library and under 1 MB, run against a daemon started here.
# tests/integration/package_test.sh does the same from the packages.
#
#   shared_library_test.sh SOURCE_DIR BUILD_DIR RDMAD RDMACTL [EXTRA_CXXFLAGS]
#
# EXTRA_CXXFLAGS: what a program needs on top of pkg-config's flags to link
# this build's library (-fsanitize=... for a sanitizer build).
set -euo pipefail
src="$1"
build="$(realpath "$2")"
rdmad="$(realpath "$3")"
rdmactl="$(realpath "$4")"
extra_flags="${5:-}"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/integration/client_program_lib.sh
source "$here/client_program_lib.sh"
tmp="$(mktemp -d)"
trap 'stop_daemon; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

lib="$build/client/librdmad_client.so"
[[ -f "$lib" ]] || fail "$lib was not built (target rdmad_client_shared)"
check_library_exports "$lib" "$build/client/librdmad_client.a"

flags="$(PKG_CONFIG_PATH="$build/pkgconfig" pkg-config --cflags --libs rdmad-client)" ||
  fail "pkg-config rdmad-client from the build tree"
[[ "$flags" == *"-lrdmad_client"* && "$flags" != *"-lrdmad_proto"* ]] ||
  fail "pkg-config's flags are not those of the shared library: $flags"
build_client_program "$src/examples/queue_run.cc" "$tmp/queue_run" \
  "$extra_flags $flags"

start_test_daemon "$rdmad" "$rdmactl" "$tmp"
"$rdmactl" --socket "$tmp/rdmad.sock" alloc target 256K >/dev/null
run_client_program "$tmp/queue_run" "$tmp/rdmad.sock" target
echo "shared library from the build tree: OK"
