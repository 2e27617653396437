#!/usr/bin/env bash
# Builds the Debian package of rdmad (CPack DEB, cmake/RdmadPackaging.cmake).
#
#   scripts/package.sh [BUILD_DIR]      default: build-pkg
#
# Configures a release build without tests, builds it, runs cpack and prints
# the path of the .deb. Then, for example:
#   dpkg-deb --info build-pkg/rdmad_*.deb
#   sudo apt install ./build-pkg/rdmad_*.deb
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build-pkg}"

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRDMAD_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target rdmad rdmactl rdmad_man_pages
(cd "$build" && cpack -G DEB >/dev/null)
deb="$(ls -t "$build"/rdmad_*.deb | head -n1)"
echo "package: $deb"
