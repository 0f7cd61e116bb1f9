"""Build the cache's C path in the checkout, for the running Python.

    python scripts/build_speedups.py

What imports the package from the checkout instead of an install (``python -m pytest``
from its root, ``benchmarks/gpu.sh`` on a device machine, the benchmark workers) finds
``tfp_picklefix/_speedups<EXT_SUFFIX>`` there only once it is built (it is ignored by
git). ``make test`` does not need this: it copies what each stack's install built. This
compiles ``tfp_picklefix/_speedups.c`` with the compiler and flags Python was built with
(``sysconfig``). Like the install, it never fails: without a compiler or Python's
headers it says so and the package runs its pure-Python cache.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    source = os.path.join(ROOT, "tfp_picklefix", "_speedups.c")
    target = os.path.join(ROOT, "tfp_picklefix",
                          "_speedups" + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        print(f"build_speedups: no Python.h in {include}: the pure-Python cache runs")
        return 0
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    cmd = cc + ["-shared", "-fPIC", "-O2", "-I" + include, source, "-o", target]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:
        print(f"build_speedups: {exc}: the pure-Python cache runs")
        return 0
    if proc.returncode != 0:
        print(f"build_speedups: {' '.join(cmd)} failed: the pure-Python cache runs\n"
              + proc.stdout[-2000:])
        return 0
    print(f"build_speedups: built {os.path.relpath(target, ROOT)} for Python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
