"""Build script for the optional C extension; the package's metadata is in pyproject.toml.

``tfp_picklefix._speedups`` runs the bijector cache's common eager miss in C (see
``tfp_picklefix/_native.py``). It is optional: where it cannot be compiled (no C
compiler, no Python headers, not CPython) the package installs without it and runs the
same cache in pure Python. ``TFP_PICKLEFIX_SPEEDUPS=off`` at install time skips it; at
run time it keeps the pure-Python code.
"""
import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class optional_build_ext(build_ext):
    """Any failure to build the extension is a warning, never a failed install."""

    def run(self):
        try:
            build_ext.run(self)
        except Exception as exc:  # no compiler at all, among others
            self._skip(exc)

    def build_extension(self, ext):
        try:
            build_ext.build_extension(self, ext)
        except Exception as exc:  # no Python headers, a compiler error
            self._skip(exc)

    def _skip(self, exc):
        sys.stderr.write("WARNING: tfp_picklefix._speedups was not built ({}); the package "
                         "runs its pure-Python cache instead.\n".format(exc))


def _want_extension():
    if os.environ.get("TFP_PICKLEFIX_SPEEDUPS", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    return platform.python_implementation() == "CPython"


setup(
    ext_modules=[Extension("tfp_picklefix._speedups", ["tfp_picklefix/_speedups.c"],
                           optional=True)] if _want_extension() else [],
    cmdclass={"build_ext": optional_build_ext},
)
