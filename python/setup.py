"""Builds the rdmad extension module for pip (metadata: pyproject.toml).

It compiles python/src/*.cc against the rdmad client library that
pkg-config's rdmad-client names: the installed one (Debian's rdmad-dev),
or a build tree's with PKG_CONFIG_PATH=BUILD/pkgconfig (whose library is
then found through its rpath).
"""

import pathlib
import subprocess
import tomllib

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

HERE = pathlib.Path(__file__).resolve().parent
VERSION = tomllib.loads((HERE / "pyproject.toml").read_text())["project"][
    "version"]


def pkg_config(flag):
    found = subprocess.run(["pkg-config", flag, "rdmad-client"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(
            "pkg-config finds no rdmad-client: install rdmad-dev, or point "
            "PKG_CONFIG_PATH at a build tree's pkgconfig folder "
            f"(BUILD/pkgconfig). pkg-config said: {found.stderr.strip()}")
    return found.stdout.split()


setup(
    ext_modules=[
        Pybind11Extension(
            "rdmad._rdmad",
            sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.cc")),
            cxx_std=20,
            define_macros=[("RDMAD_VERSION", f'"{VERSION}"')],
            extra_compile_args=pkg_config("--cflags"),
            extra_link_args=pkg_config("--libs"),
        ),
    ],
    cmdclass={"build_ext": build_ext},
)
