#!/usr/bin/env bash
# Installs everything the test suite needs from Debian's packages
# (scripts/deps.sh build demo test) and builds the whole tree.
#
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
#
# Safe to run again: apt-get skips what is installed, the build is
# incremental. Needs root (or sudo) for apt-get. scripts/demo.sh installs
# and builds only what the demo needs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
shift || true

"$here/scripts/deps.sh" build demo test
cmake -S "$here" -B "$build" -G Ninja "$@"
cmake --build "$build"
echo "setup: built in $build"
