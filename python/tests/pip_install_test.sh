#!/usr/bin/env bash
# `pip install --no-build-isolation ./python` as a user does it: offline,
# in a venv of Debian's python3 that sees Debian's setuptools, pybind11 and
# numpy (--system-site-packages), against the client library of a build
# tree (PKG_CONFIG_PATH=BUILD/pkgconfig). The installed package, imported
# from the venv, moves data through a daemon of the build tree.
#
#   pip_install_test.sh SOURCE_DIR BUILD_DIR PYTHON
#
# The copy of python/ keeps the build's files out of the source tree; -O0
# keeps the compile short (what is checked is that it builds and works).
set -euo pipefail
src="$(realpath "$1")"
build="$(realpath "$2")"
python="$3"
# shellcheck source=tests/integration/client_program_lib.sh
source "$src/tests/integration/client_program_lib.sh"
tmp="$(mktemp -d)"
trap 'stop_daemon; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cp -r "$src/python" "$tmp/rdmad-python"
"$python" -m venv --system-site-packages "$tmp/venv"
start=$SECONDS
PKG_CONFIG_PATH="$build/pkgconfig" CFLAGS="-O0 -g0" PIP_NO_INDEX=1 \
  "$tmp/venv/bin/pip" install --no-build-isolation --no-cache-dir \
  "$tmp/rdmad-python" >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log"; fail "pip install --no-build-isolation ./python"; }
echo "pip install: built and installed in $((SECONDS - start)) s"

start_test_daemon "$build/daemon/rdmad" "$build/client/rdmactl/rdmactl" "$tmp"
"$build/client/rdmactl/rdmactl" --socket "$tmp/rdmad.sock" alloc target 64K >/dev/null
got="$(cd "$tmp" && env -u PYTHONPATH "$tmp/venv/bin/python" -c '
import sys, numpy as np, rdmad, rdmad.aio, rdmad.compat.mooncake, rdmad.cuda
client = rdmad.Client.connect(sys.argv[1])
buf = client.allocate(65536)
np.frombuffer(buf, np.uint8)[:] = 9
done = client.open_queue().run(rdmad.make_ops(rdmad.WRITE, buf, 0,
                                              client.open_remote("target"), 0, 65536))
print(rdmad.__file__, rdmad.__version__, int(done["bytes"][0]))
' "$tmp/rdmad.sock" 2>&1)" || fail "the pip-installed package: $got"
site="$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
[[ "$got" == "$site/rdmad/__init__.py "*" 65536" ]] ||
  fail "not the venv's package, or the write failed: $got"
echo "pip-installed rdmad: $got"
