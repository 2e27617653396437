#!/usr/bin/env bash
# Builds the .deb from this build tree with cpack and checks it:
#   * dpkg-deb --info: name, version, dependencies found by dpkg-shlibdeps,
#     maintainer scripts and the conffile;
#   * dpkg-deb --contents: every file the package promises;
#   * lintian: no errors (warnings and notes are shown, not fatal);
#   * python3-rdmad (where the build has the Python package): its
#     dependencies and files in Debian's dist-packages; unpacked beside
#     librdmad-client0, Debian's python3 imports it and moves data through
#     a daemon with it;
#   * librdmad-client0 and rdmad-dev, unpacked: the shared library's soname
#     and exports (the public API only); examples/hello_transfer.cc, the
#     Example: block of rdmad/client.h and examples/queue_run.cc build
#     against them via pkg-config, queue_run under 1 MB and linked against
#     librdmad_client.so.0, and queue_run runs against a daemon;
#   * as root with CI set (what .ci/run does): installs the packages for
#     real with dpkg -i, runs the installed rdmad --help and rdmactl --help,
#     checks that the user, group and unit are there, builds queue_run with
#     the installed pkg-config file and runs it against the installed
#     rdmad, and purges them again.
#
#   package_test.sh BUILD_DIR [EXTRA_CXXFLAGS]
#
# EXTRA_CXXFLAGS: what an application needs on top of pkg-config's flags to
# link this build's library (-fsanitize=... for a sanitizer build).
set -euo pipefail
build="$(realpath "$1")"
extra_flags="${2:-}"
src_dir="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=tests/integration/client_program_lib.sh
source "$(dirname "$0")/client_program_lib.sh"
out="$(mktemp -d)"
trap 'stop_daemon; rm -rf "$out"' EXIT

(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) || {
  cat "$out/cpack.log"; echo "cpack failed"; exit 1; }
deb="$(ls "$out"/rdmad_*.deb)"
echo "built $deb ($(du -h "$deb" | cut -f1))"

fail() { echo "FAIL: $*"; exit 1; }

info="$(dpkg-deb --info "$deb")"
grep -q '^ Package: rdmad$' <<<"$info" || fail "package name"
grep -q '^ Version: ' <<<"$info" || fail "version"
# From dpkg-shlibdeps: the libraries the binaries link.
for dep in libgrpc++ libprotobuf libibverbs libsystemd libspdlog libprometheus-cpp-pull libc6; do
  depends="$(grep '^ Depends:' <<<"$info")"
  [[ "$depends" == *"$dep"* ]] || fail "Depends lacks $dep: $depends"
done
grep -q '^ Recommends:.*bash-completion' <<<"$info" ||
  fail "rdmad does not recommend bash-completion"
grep -q '^ Maintainer: .*<[^@ ]*@[^@ ]*\.[a-z]*>$' <<<"$info" ||
  fail "Maintainer is not NAME <EMAIL>: $(grep '^ Maintainer:' <<<"$info")"
for script in postinst prerm postrm conffiles; do
  grep -qw "$script" <<<"$info" || fail "no $script in the control archive"
done
conffiles="$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)"
grep -qx /etc/rdmad/rdmad.conf <<<"$conffiles" ||
  fail "/etc/rdmad/rdmad.conf is not a conffile"

contents="$(dpkg-deb --contents "$deb")"
for path in ./usr/sbin/rdmad ./usr/bin/rdmactl \
    ./usr/lib/systemd/system/rdmad.service ./usr/lib/sysusers.d/rdmad.conf \
    ./usr/lib/tmpfiles.d/rdmad.conf ./etc/rdmad/rdmad.conf \
    ./usr/share/man/man8/rdmad.8.gz ./usr/share/man/man8/rdmactl.8.gz \
    ./usr/share/bash-completion/completions/rdmactl \
    ./usr/share/doc/rdmad/copyright ./usr/share/doc/rdmad/changelog.gz \
    ./usr/share/doc/rdmad/README.md.gz ./usr/share/doc/rdmad/SECURITY.md.gz; do
  grep -q " $path\$" <<<"$contents" || fail "$path missing from the package"
done
echo "rdmad: info and contents OK"

# Debian policy as lintian checks it: zero errors.
command -v lintian >/dev/null ||
  fail "lintian is not installed (scripts/deps.sh test installs it)"
lint="$(lintian --allow-root --fail-on error "$out"/*.deb 2>&1)" || {
  echo "$lint"; fail "lintian reports errors"; }
[[ -z "$lint" ]] || echo "$lint"
echo "lintian: no errors"

# librdmad-client0: the shared library, with its ldconfig trigger and
# shlibs file.
multiarch="$(gcc -print-multiarch)"
libs="$(ls "$out"/librdmad-client0_*.deb)"
libs_info="$(dpkg-deb --info "$libs")"
grep -q '^ Package: librdmad-client0$' <<<"$libs_info" ||
  fail "librdmad-client0 name"
grep -q '^ Depends:.*libgrpc++' <<<"$libs_info" ||
  fail "librdmad-client0 does not depend on gRPC: $(grep '^ Depends:' <<<"$libs_info")"
for control in triggers shlibs; do
  grep -qw "$control" <<<"$libs_info" ||
    fail "no $control in librdmad-client0's control archive"
done
libs_contents="$(dpkg-deb --contents "$libs")"
for path in "./usr/lib/$multiarch/librdmad_client.so.0" \
    "./usr/lib/$multiarch/librdmad_client.so.0.1.0" \
    ./usr/share/doc/librdmad-client0/copyright; do
  grep -qE " $path( ->|\$)" <<<"$libs_contents" ||
    fail "$path missing from librdmad-client0"
done

# rdmad-dev: the client library, usable by an application through
# pkg-config. Unpacked (not installed) beside librdmad-client0, and
# examples compiled against them.
dev="$(ls "$out"/rdmad-dev_*.deb)"
dev_info="$(dpkg-deb --info "$dev")"
grep -q '^ Package: rdmad-dev$' <<<"$dev_info" || fail "rdmad-dev name"
grep -q '^ Depends: librdmad-client0 (= ' <<<"$dev_info" ||
  fail "rdmad-dev does not depend on its library: $(grep '^ Depends:' <<<"$dev_info")"
dev_contents="$(dpkg-deb --contents "$dev")"
for path in ./usr/include/rdmad/client.h ./usr/include/rdmad/info.h \
    ./usr/include/rdmad/queue.h \
    "./usr/lib/$multiarch/librdmad_client.a" \
    "./usr/lib/$multiarch/librdmad_client.so" \
    "./usr/lib/$multiarch/pkgconfig/rdmad-client.pc" \
    ./usr/share/rdmad/proto/rdmad/v1/rdmad.proto \
    ./usr/share/rdmad/proto/rdmad/v1/config.proto \
    ./usr/share/doc/rdmad-dev/copyright ./usr/share/doc/rdmad-dev/changelog.gz; do
  grep -qE " $path( ->|\$)" <<<"$dev_contents" ||
    fail "$path missing from rdmad-dev"
done
# The public headers stand alone: no generated protobuf code in them.
if grep -q '\.pb\.h' <<<"$dev_contents"; then
  fail "rdmad-dev ships generated protobuf headers"
fi
root="$out/dev-root"
dpkg-deb -x "$dev" "$root"
dpkg-deb -x "$libs" "$root"
check_library_exports "$root/usr/lib/$multiarch/librdmad_client.so.0" \
  "$root/usr/lib/$multiarch/librdmad_client.a"
flags="$(PKG_CONFIG_PATH="$root/usr/lib/$multiarch/pkgconfig" \
  pkg-config --define-variable=prefix="$root/usr" --cflags --libs rdmad-client)" ||
  fail "pkg-config rdmad-client"
src="$src_dir/examples/hello_transfer.cc"
# shellcheck disable=SC2086 # flag lists, split on purpose
g++ -std=c++20 $extra_flags -o "$out/hello_transfer" "$src" $flags >"$out/cc.log" 2>&1 || {
  cat "$out/cc.log"; fail "examples/hello_transfer.cc does not build against rdmad-dev"; }
echo "rdmad-dev: builds examples/hello_transfer.cc via pkg-config OK"
# The example a user copies from the installed header, wrapped in a
# function that gives it what it names (payload, n).
{
  echo '#include <cstring>'
  echo '#include "rdmad/client.h"'
  echo 'absl::Status Example(const char* payload, size_t n) {'
  awk '/^\/\/ Example/ {on = 1; next}
       on && /^\/\/   / {sub(/^\/\/   /, ""); print; seen = 1; next}
       on && seen {exit}' "$root/usr/include/rdmad/client.h"
  echo '  return absl::OkStatus();'
  echo '}'
  echo 'int main() { return 0; }'
} >"$out/header_example.cc"
grep -q 'Write(' "$out/header_example.cc" ||
  fail "no Example: block found in rdmad/client.h"
# shellcheck disable=SC2086 # flag lists, split on purpose
g++ -std=c++20 $extra_flags -o "$out/header_example" "$out/header_example.cc" \
    $flags >"$out/cc.log" 2>&1 || {
  cat "$out/header_example.cc" "$out/cc.log"
  fail "the Example: of rdmad/client.h does not build against rdmad-dev"; }
echo "rdmad-dev: the Example: of rdmad/client.h builds OK"
# A program of the queue's, against the unpacked library, run against a
# daemon of this build tree.
build_client_program "$src_dir/examples/queue_run.cc" "$out/queue_run" \
  "$extra_flags $flags"
mkdir "$out/run"
start_test_daemon "$build/daemon/rdmad" "$build/client/rdmactl/rdmactl" "$out/run"
"$build/client/rdmactl/rdmactl" --socket "$out/run/rdmad.sock" alloc target 256K >/dev/null
run_client_program "$out/queue_run" "$out/run/rdmad.sock" target \
  "$root/usr/lib/$multiarch"
echo "librdmad-client0 + rdmad-dev: queue_run built via pkg-config and ran OK"

# python3-rdmad: Debian's python3 finds it in dist-packages, its extension
# finds librdmad_client.so.0 where the system keeps libraries (no rpath to
# this build tree), and it writes through the daemon.
python_deb="$(ls "$out"/python3-rdmad_*.deb 2>/dev/null || true)"
python_check='
import sys, numpy as np, rdmad, rdmad.aio, rdmad.compat.mooncake, rdmad.cuda
client = rdmad.Client.connect(sys.argv[1])
buf = client.allocate(4096)
np.frombuffer(buf, np.uint8)[:] = 7
done = client.open_queue().run(rdmad.make_ops(rdmad.WRITE, buf, 0,
                                              client.open_remote("target"), 0, 4096))
print(rdmad.__file__, int(done["bytes"][0]))
'
if [[ -n "$python_deb" ]]; then
  python_info="$(dpkg-deb --info "$python_deb")"
  grep -q '^ Package: python3-rdmad$' <<<"$python_info" || fail "python3-rdmad name"
  for dep in "librdmad-client0 (= " "python3 (>= 3.11)" "python3 (<< 3.12)" python3-numpy; do
    [[ "$(grep '^ Depends:' <<<"$python_info")" == *"$dep"* ]] ||
      fail "python3-rdmad does not depend on $dep: $(grep '^ Depends:' <<<"$python_info")"
  done
  python_contents="$(dpkg-deb --contents "$python_deb")"
  dist=./usr/lib/python3/dist-packages/rdmad
  for path in $dist/__init__.py $dist/aio.py $dist/cuda.py $dist/errors.py \
      $dist/compat/mooncake.py "$dist/_rdmad\.cpython-[0-9]*-$multiarch\.so" \
      ./usr/share/doc/python3-rdmad/copyright; do
    grep -qE " $path\$" <<<"$python_contents" || fail "$path missing from python3-rdmad"
  done
  dpkg-deb -x "$python_deb" "$root"
  if readelf -d "$root"/usr/lib/python3/dist-packages/rdmad/_rdmad.*.so | grep -q 'R.*PATH'; then
    fail "python3-rdmad's extension carries an rpath"
  fi
  got="$(cd / && LD_LIBRARY_PATH="$root/usr/lib/$multiarch" \
    PYTHONPATH="$root/usr/lib/python3/dist-packages" \
    /usr/bin/python3 -c "$python_check" "$out/run/rdmad.sock" 2>&1)" ||
    fail "python3-rdmad, unpacked: $got"
  [[ "$got" == "$root/usr/lib/python3/dist-packages/rdmad/__init__.py 4096" ]] ||
    fail "python3-rdmad, unpacked: $got"
  echo "python3-rdmad: imported from dist-packages and wrote through rdmad OK"
else
  echo "no python3-rdmad: this build has no Python package (pybind11-dev)"
fi
stop_daemon

if [[ "$(id -u)" -ne 0 || -z "${CI:-}" ]]; then
  echo "not installing: that is done as root in CI only (CI=${CI:-unset}, uid $(id -u))"
  exit 0
fi
if [[ "$(dpkg-query -W -f='${Status}' rdmad 2>/dev/null || true)" == "install ok installed" ]]; then
  echo "rdmad is already installed on this machine; not touching it"
  exit 0
fi
trap 'stop_daemon; dpkg --purge python3-rdmad rdmad-dev librdmad-client0 rdmad >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
dpkg -i "$deb" "$libs" "$dev" $python_deb
# A sanitizer build (scripts/test.sh's second pass) packages instrumented
# binaries: leak reports at exit are not what this checks.
export ASAN_OPTIONS=detect_leaks=0
help="$(/usr/sbin/rdmad --help 2>&1)" || fail "installed rdmad --help: $help"
[[ "$help" == *"Usage: rdmad"* ]] || fail "installed rdmad --help: $help"
[[ -f /usr/share/doc/rdmad/copyright ]] || fail "no copyright file installed"
help="$(/usr/bin/rdmactl --help 2>&1)" || fail "installed rdmactl --help: $help"
[[ "$help" == *rdmactl* ]] || fail "installed rdmactl --help: $help"
getent group rdma >/dev/null || fail "group rdma not created"
getent passwd rdmad >/dev/null || fail "user rdmad not created"
[[ -f /usr/lib/systemd/system/rdmad.service ]] || fail "unit not installed"
# The installed library, as an application on this machine uses it.
build_client_program "$src_dir/examples/queue_run.cc" "$out/queue_installed" \
  "$extra_flags $(pkg-config --cflags --libs rdmad-client)"
mkdir "$out/installed"
start_test_daemon /usr/sbin/rdmad /usr/bin/rdmactl "$out/installed"
/usr/bin/rdmactl --socket "$out/installed/rdmad.sock" alloc target 256K >/dev/null
run_client_program "$out/queue_installed" "$out/installed/rdmad.sock" target
if [[ -n "$python_deb" ]]; then
  got="$(cd / && /usr/bin/python3 -c "$python_check" "$out/installed/rdmad.sock" 2>&1)" ||
    fail "installed python3-rdmad: $got"
  [[ "$got" == "/usr/lib/python3/dist-packages/rdmad/__init__.py 4096" ]] ||
    fail "installed python3-rdmad: $got"
  echo "installed python3-rdmad: OK"
fi
stop_daemon
dpkg --purge python3-rdmad rdmad-dev librdmad-client0 rdmad
[[ ! -e /usr/sbin/rdmad ]] || fail "rdmad left behind after purge"
[[ ! -e "/usr/lib/$multiarch/librdmad_client.so.0" ]] ||
  fail "librdmad_client.so.0 left behind after purge"
echo "installed, ran and purged OK"
