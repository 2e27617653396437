#!/usr/bin/env bash
# Builds the .deb from this build tree with cpack and checks it:
#   * dpkg-deb --info: name, version, dependencies found by dpkg-shlibdeps,
#     maintainer scripts and the conffile;
#   * dpkg-deb --contents: every file the package promises;
#   * as root with CI set (what .ci/run does): installs it for real with
#     dpkg -i, runs the installed rdmad --help and rdmactl --help, checks
#     that the user, group and unit are there, and purges it again.
#
#   package_test.sh BUILD_DIR [EXTRA_CXXFLAGS]
#
# EXTRA_CXXFLAGS: what an application needs on top of pkg-config's flags to
# link this build's library (-fsanitize=... for a sanitizer build).
set -euo pipefail
build="$1"
extra_flags="${2:-}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

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
    ./usr/share/bash-completion/completions/rdmactl; do
  grep -q " $path\$" <<<"$contents" || fail "$path missing from the package"
done
echo "rdmad: info and contents OK"

# rdmad-dev: the client library, usable by an application through
# pkg-config. Unpacked (not installed) and an example compiled against it.
dev="$(ls "$out"/rdmad-dev_*.deb)"
dev_info="$(dpkg-deb --info "$dev")"
grep -q '^ Package: rdmad-dev$' <<<"$dev_info" || fail "rdmad-dev name"
dev_contents="$(dpkg-deb --contents "$dev")"
for path in ./usr/include/rdmad/client.h ./usr/include/rdmad/v1/rdmad.pb.h \
    "./usr/lib/$(gcc -print-multiarch)/librdmad_client.a" \
    "./usr/lib/$(gcc -print-multiarch)/pkgconfig/rdmad-client.pc"; do
  grep -q " $path\$" <<<"$dev_contents" || fail "$path missing from rdmad-dev"
done
root="$out/dev-root"
dpkg-deb -x "$dev" "$root"
flags="$(PKG_CONFIG_PATH="$root/usr/lib/$(gcc -print-multiarch)/pkgconfig" \
  pkg-config --define-variable=prefix="$root/usr" --cflags --libs rdmad-client)" ||
  fail "pkg-config rdmad-client"
src="$(cd "$(dirname "$0")/../.." && pwd)/examples/hello_transfer.cc"
# shellcheck disable=SC2086 # flag lists, split on purpose
g++ -std=c++20 $extra_flags -o "$out/hello_transfer" "$src" $flags >"$out/cc.log" 2>&1 || {
  cat "$out/cc.log"; fail "examples/hello_transfer.cc does not build against rdmad-dev"; }
echo "rdmad-dev: builds examples/hello_transfer.cc via pkg-config OK"

if [[ "$(id -u)" -ne 0 || -z "${CI:-}" ]]; then
  echo "not installing: that is done as root in CI only (CI=${CI:-unset}, uid $(id -u))"
  exit 0
fi
if [[ "$(dpkg-query -W -f='${Status}' rdmad 2>/dev/null || true)" == "install ok installed" ]]; then
  echo "rdmad is already installed on this machine; not touching it"
  exit 0
fi
trap 'dpkg --purge rdmad >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
dpkg -i "$deb"
# absl's --help exits 1; what matters is that the installed binary runs and
# finds its libraries.
# A sanitizer build (scripts/test.sh's second pass) packages instrumented
# binaries: leak reports at exit are not what this checks.
export ASAN_OPTIONS=detect_leaks=0
help="$(/usr/sbin/rdmad --help 2>&1 || true)"
[[ "$help" == *"Usage: rdmad"* ]] || fail "installed rdmad --help: $help"
help="$(/usr/bin/rdmactl --help 2>&1)" || fail "installed rdmactl --help: $help"
[[ "$help" == *rdmactl* ]] || fail "installed rdmactl --help: $help"
getent group rdma >/dev/null || fail "group rdma not created"
getent passwd rdmad >/dev/null || fail "user rdmad not created"
[[ -f /usr/lib/systemd/system/rdmad.service ]] || fail "unit not installed"
dpkg --purge rdmad
[[ ! -e /usr/sbin/rdmad ]] || fail "rdmad left behind after purge"
echo "installed, ran and purged OK"
