"""What one eager cache miss costs, with and without TFP's own work around it.

    python -m benchmarks.cache_cost [--substrates tf,numpy,jax] [--sizes 1,1000]
                                    [--evict-kb 0,1024] [--rounds 20]

Issue 3, point 8 asks that the cache add at most 15 % to an eager call. For the
cheapest call (Exp) that leaves 3 us in the NumPy substrate, and measured inside TFP
the cache costs more than that (``inprocess.py --kind overhead``). This script says
where that cost comes from. For a real TFP ``Exp`` it times, in one process, batches
of fresh inputs (cache misses) through:

- ``cache``: the bound cache object alone (``bijector._cache.forward(x)``, which calls
  the bijector's ``_forward``), without TFP's ``Bijector.forward`` around it;
- ``bijector``: the public ``bijector.forward(x)``, as users call it;

each with this package's cache (``fixed``) and with the pass-through (``off``),
swapped by ``tfp_picklefix.set_cache_mode`` and alternated batch by batch (random
order each round). ``--evict-kb N`` copies an N KB buffer after every call (the same
work in both modes), which pushes the cache's data out of the CPU caches as a large
program does between calls.

It prints one row per substrate, size, eviction and call: the medians of ``off`` and
``fixed`` in microseconds per call, their difference (the cache's own cost) and their
ratio. The last line is a JSON record of every batch; ``--out DIR`` also writes it to
``DIR/cache_cost-<substrates>.json`` and the table to ``DIR/cache_cost-<substrates>.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BATCH = 2000
MODES = ("fixed", "off")


def substrate(name):
    import numpy as np

    if name == "tf":
        import tensorflow as tf
        import tensorflow_probability as tfp

        return tfp.bijectors, (lambda a: tf.constant(a))
    if name == "jax":
        import jax.numpy as jnp
        from tensorflow_probability.substrates import jax as tfp

        def make(a):
            return jnp.array(a, copy=True)
        return tfp.bijectors, make
    from tensorflow_probability.substrates import numpy as tfp

    return tfp.bijectors, (lambda a: np.array(a))


def measure(sub, size, evict_kb, rounds, calls_wanted=("cache", "bijector"), seed=0):
    import numpy as np

    import tfp_picklefix

    tfb, make = sub
    bij = tfb.Exp()
    base = np.full((size,), 0.5, np.float32) if size > 1 else np.float32(0.5)
    src = bytearray(evict_kb * 1024)
    dst = bytearray(evict_kb * 1024)

    def run(call):
        xs = [make(base) for _ in range(BATCH)]
        if evict_kb:
            t0 = time.perf_counter()
            for x in xs:
                call(x)
                dst[:] = src
        else:
            t0 = time.perf_counter()
            for x in xs:
                call(x)
        return (time.perf_counter() - t0) / BATCH * 1e6

    calls = {"cache": lambda: bij._cache.forward, "bijector": lambda: bij.forward}
    calls = {c: calls[c] for c in calls_wanted}
    times = {(c, m): [] for c in calls for m in MODES}
    caches = {}  # mode -> the class of the cache that served it
    rng = random.Random(seed)
    keys = list(times)
    before = tfp_picklefix.cache_mode()
    for r in range(rounds + 1):  # round 0 warms up
        rng.shuffle(keys)
        for c, m in keys:
            tfp_picklefix.set_cache_mode(m)
            caches[m] = type(bij._cache).__name__
            t = run(calls[c]())
            if r:
                times[(c, m)].append(t)
    tfp_picklefix.set_cache_mode(before)
    return times, caches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substrates", default="tf,numpy")
    parser.add_argument("--sizes", default="1,1000")
    parser.add_argument("--evict-kb", default="0,1024")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", default="cache,bijector")
    parser.add_argument("--out", help="a results folder to write the table and record to")
    args = parser.parse_args(argv)
    import tfp_picklefix  # noqa: F401  (patches the substrates as they are imported)

    record = []
    lines = [f"{'substrate':9s} {'size':>5s} {'evict':>6s} {'call':8s} {'off us':>8s} "
             f"{'fixed us':>8s} {'cost us':>7s} {'ratio':>6s}"]
    print(lines[0])
    calls = args.calls.split(",")
    for name in args.substrates.split(","):
        sub = substrate(name)
        for size in [int(s) for s in args.sizes.split(",")]:
            for kb in [int(k) for k in args.evict_kb.split(",")]:
                times, caches = measure(sub, size, kb, args.rounds, calls)
                for call in calls:
                    off = statistics.median(times[(call, "off")])
                    fixed = statistics.median(times[(call, "fixed")])
                    lines.append(f"{name:9s} {size:5d} {kb:5d}K {call:8s} {off:8.2f} "
                                 f"{fixed:8.2f} {fixed - off:7.2f} {fixed / off:6.3f}")
                    print(lines[-1], flush=True)
                    record.append({"substrate": name, "size": size, "evict_kb": kb,
                                   "call": call, "caches": caches,
                                   "off_us": times[(call, "off")],
                                   "fixed_us": times[(call, "fixed")]})
    out = {"kind": "cache_cost", "batch": BATCH, "rounds": args.rounds,
           "versions": versions(), "rows": record}
    print(json.dumps(out))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        stem = os.path.join(args.out, "cache_cost-" + args.substrates.replace(",", "-"))
        with open(stem + ".json", "w") as f:
            json.dump(out, f, indent=1)
        with open(stem + ".md", "w") as f:
            f.write("# The cost of one eager cache miss (`python -m benchmarks.cache_cost`)\n\n"
                    "Medians over {} rounds of {} fresh inputs each; microseconds per call; "
                    "`cost` = fixed - off.\n{}\n\n```\n{}\n```\n".format(
                        args.rounds, BATCH, ", ".join(f"{k} {v}" for k, v in out["versions"].items()),
                        "\n".join(lines)))
    return 0


def versions():
    import platform

    from benchmarks.worker import _versions

    return dict(python=platform.python_version(), **_versions())


if __name__ == "__main__":
    sys.exit(main())
