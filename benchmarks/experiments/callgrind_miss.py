"""Instructions, not seconds: what one eager cache miss costs, counted by callgrind.

    valgrind --tool=callgrind --collect-atstart=no --cache-sim=yes \
        --callgrind-out-file=/tmp/cg.out.%p python benchmarks/experiments/callgrind_miss.py [N]
    python benchmarks/experiments/callgrind_miss.py --report /tmp/cg.out.<pid>

Times on a shared machine move by tens of percent from day to day; callgrind's counts
do not. Under callgrind this script runs N fresh NumPy-substrate ``Exp().forward``
misses (default 2000) in each of five settings: the package's cache (``fixed``) and
the pass-through (``off``), each called as ``bijector._cache.forward(x)`` (``cache``)
and as ``bijector.forward(x)`` (``bijector``), and ``minimal_floor.MinimalCache``
(``minimal``: the contract's core alone) as ``bijector.forward(x)``; it dumps
callgrind's counts for each (client requests, through a small helper it compiles with
gcc from valgrind's ``callgrind.h``). ``--report`` prints instructions, first-level
instruction-cache misses and data-cache read misses per call, and fixed and minimal
minus off.

Diagnostic only: the acceptance criteria are in seconds (``benchmarks/inprocess.py``).
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

HELPER = r"""
#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_ZERO_STATS; CALLGRIND_TOGGLE_COLLECT; }
void cg_off(const char *label) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(label); }
"""
SETTINGS = [(mode, call) for mode in ("fixed", "off") for call in ("cache", "bijector")]
# minimal_floor.MinimalCache (the contract's core alone), through Bijector.forward.
SETTINGS.append(("minimal", "bijector"))


def helper():
    import ctypes

    folder = tempfile.mkdtemp(prefix="cg-helper-")
    src, lib = os.path.join(folder, "cg.c"), os.path.join(folder, "libcg.so")
    with open(src, "w") as f:
        f.write(HELPER)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", src, "-o", lib], check=True)
    return ctypes.CDLL(lib)


def measure(n):
    import numpy as np

    import tfp_picklefix
    from tensorflow_probability.substrates import numpy as tfp

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from minimal_floor import MinimalCache

    lib = helper()
    bij = tfp.bijectors.Exp()
    Bijector = tfp.bijectors.Bijector
    caches = {}
    for mode in ("fixed", "off"):
        tfp_picklefix.set_cache_mode(mode)
        caches[mode] = vars(Bijector)["_cache"]
    caches["minimal"] = MinimalCache()
    for mode, call in SETTINGS:
        Bijector._cache = caches[mode]  # swapped on the class, as minimal_floor.py does
        fn = bij.forward if call == "bijector" else bij._cache.forward
        xs = [np.array(np.float32(0.5)) for _ in range(n + 200)]
        for x in xs[:200]:  # warm up
            fn(x)
        xs = xs[200:]
        lib.cg_on()
        for x in xs:
            fn(x)
        lib.cg_off(f"{mode}-{call}-{n}".encode())


def report(stem):
    """Per-call counts of each dump ``<stem>.<k>`` that this script labelled."""
    rows = {}
    for path in sorted(glob.glob(stem + ".*")):
        label = events = summary = None
        with open(path) as f:
            for line in f:
                if line.startswith("desc: Trigger: Client Request: "):
                    label = line.split(": ")[-1].strip()
                elif line.startswith("events: "):
                    events = line.split()[1:]
                elif line.startswith("summary: "):
                    summary = [int(v) for v in line.split()[1:]]
        if label and events and summary and label.count("-") == 2:
            mode, call, n = label.split("-")
            per = dict(zip(events, (v / int(n) for v in summary)))
            rows[(mode, call)] = per
    print(f"{'call':9s} {'mode':8s} {'instr':>7s} {'I1 miss':>8s} {'D1 read miss':>12s}")
    for call in ("cache", "bijector"):
        for mode in ("fixed", "off", "minimal"):
            if (mode, call) in rows:
                r = rows[(mode, call)]
                print(f"{call:9s} {mode:8s} {r['Ir']:7.0f} {r.get('I1mr', 0):8.0f} "
                      f"{r.get('D1mr', 0):12.0f}")
        for mode in ("fixed", "minimal"):
            if (mode, call) in rows and ("off", call) in rows:
                f, o = rows[(mode, call)], rows[("off", call)]
                print(f"{call:9s} {mode[:3] + '-off':8s} {f['Ir'] - o['Ir']:7.0f} "
                      f"{f.get('I1mr', 0) - o.get('I1mr', 0):8.0f} "
                      f"{f.get('D1mr', 0) - o.get('D1mr', 0):12.0f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        report(sys.argv[2])
    else:
        measure(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
