"""The cache's own cost, in one process: ``fixed`` against a pass-through (``off``).

    python benchmarks/overhead.py --substrates tf,numpy [--pairs 15] [--quick]

Issue 3, point 8: "in eager mode the cache adds at most 15 % to the cost of the same
call with no cache (measured against forward/inverse/log-det with the cache swapped
for a pass-through)". The A/B runner compares fresh processes, and one process runs
the same code up to 2x faster than another here, steadily within each: that spread
swamps a 15 % effect. This script swaps the cache itself inside one process
(``tfp_picklefix.set_cache_mode``), so both sides share the process's state. For each
cache-miss case (Exp, Softplus and the Chain of 3; sizes 1 and 1000; forward,
inverse and both log-det-Jacobians), it times batches alternately with the cache and
with the pass-through (the order flips each pair), and reports every pair's ratio.
The last stdout line is a JSON record; ``benchmarks/run.py`` runs it in several fresh
processes and aggregates.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SIZES = (1, 1000)
OPS = ("forward", "inverse", "fldj", "ildj")


def cases(substrates, quick):
    from benchmarks.run import CORE

    out = []
    for sub in substrates:
        for b in CORE:
            for size in SIZES:
                for op in (OPS[:2] if quick else OPS):
                    out.append({"kind": "bijector", "substrate": sub, "bijector": b, "size": size,
                                "op": op, "exec": "eager", "cache": "miss"})
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substrates", required=True)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    import tfp_picklefix

    from benchmarks import worker

    tfp_picklefix.set_cache_mode("fixed")
    subs = {}
    for name in args.substrates.split(","):
        try:
            subs[name] = worker.Substrate(name)
        except ImportError as exc:
            subs[name] = f"{type(exc).__name__}: {exc}"[:300]
    gc.collect()
    gc.freeze()  # as the A/B workers do: collections walk only what the cases allocate
    rows = []
    for case in cases(args.substrates.split(","), args.quick):
        sub = subs[case["substrate"]]
        if isinstance(sub, str):
            rows.append({"case": case, "error": sub})
            continue
        bench = worker.bijector_case(sub, case)
        fixed, off = [], []
        caches = {}
        for mode in ("fixed", "off"):  # a first pair, not recorded: both modes warmed up
            tfp_picklefix.set_cache_mode(mode)
            bench.batch()
        for i in range(args.pairs):
            for mode in (("fixed", "off") if i % 2 == 0 else ("off", "fixed")):
                tfp_picklefix.set_cache_mode(mode)
                caches[mode] = type(vars(sub.tfb.Bijector)["_cache"]).__name__
                (fixed if mode == "fixed" else off).append(bench.batch())
        tfp_picklefix.set_cache_mode("fixed")
        # what was timed: this package's cache, and the pass-through
        rows.append({"case": case, "fixed": fixed, "off": off, "caches": caches})
    print(json.dumps({"rows": rows, "status": str(tfp_picklefix.status())}))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
