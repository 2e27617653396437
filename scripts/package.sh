#!/usr/bin/env bash
# Builds the Debian package of rdmad (CPack DEB, cmake/RdmadPackaging.cmake).
#
#   scripts/package.sh [BUILD_DIR]      default: build-pkg
#
# Configures a release build without tests, builds it, runs cpack and prints
# the paths of the .debs (rdmad; librdmad-client0, the client library;
# rdmad-dev, what building against it takes; python3-rdmad, the Python
# package, where pybind11-dev is installed).
# Then, for example:
#   dpkg-deb --info build-pkg/rdmad_*.deb
#   sudo apt install ./build-pkg/rdmad_*.deb
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build-pkg}"

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRDMAD_BUILD_TESTS=OFF >/dev/null
targets=(rdmad rdmactl rdmad_man_pages rdmad_package_docs rdmad_client
  rdmad_client_shared)
names=(rdmad librdmad-client0 rdmad-dev)
# The Python package, where the configuration found pybind11.
if ninja -C "$build" -t targets all | grep -q '^rdmad_python:'; then
  targets+=(rdmad_python)
  names+=(python3-rdmad)
fi
cmake --build "$build" --target "${targets[@]}"
(cd "$build" && cpack -G DEB >/dev/null)
for name in "${names[@]}"; do
  echo "package: $(ls -t "$build"/${name}_*.deb | head -n1)"
done
