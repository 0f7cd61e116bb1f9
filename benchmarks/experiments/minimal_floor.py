"""The floor of issue 3, point 8: what the least cache that keeps TFP's contract costs.

    python benchmarks/experiments/minimal_floor.py [--substrates numpy,jax,tf]
                                                   [--sizes 1,1000] [--rounds 20]

Point 8 asks that the cache add at most 15 % to an eager call. This script asks how
much of that a cache needs just to be a cache. In one process it times batches of fresh
inputs (cache misses whose outputs are dropped at once, as ``cache_cost.py`` does)
through the public ``Exp().forward``, with ``Bijector._cache`` in turn:

- ``off``: the package's pass-through (``TFP_PICKLEFIX_CACHE=off``);
- ``fixed``: the package's cache (with its common miss in C where
  ``tfp_picklefix._speedups`` is built, the default);
- ``python``: where ``fixed`` runs in C, the same cache on its pure-Python path;
- ``minimal``: :class:`MinimalCache` below, which keeps only the contract's core
  (``b.inverse(b.forward(x)) is x``, the input held while the output lives, both
  entries dropped when the output dies) and none of the rest: no lock (not thread-safe),
  no NumPy snapshots (a changed array gives stale results), no per-bijector index (a
  bound ``clear()`` would have to walk everything), no graph storages, no ``**kwargs``
  or structured inputs, no attributes.

Batches alternate in a random order each round. It prints the medians of each, and
the medians over rounds of ``fixed / off`` and ``minimal / off`` within a round: the
second is the least any pure-Python cache with TFP's contract adds here. Diagnostic
only, not part of the package or its tests.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import time
import weakref

import numpy as _np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks.cache_cost import substrate  # noqa: E402  (the same inputs as there)

BATCH = 2000
_NAMES = ("_forward", "_inverse")


class _Ref(weakref.ref):
    """The weak reference to an output; its death drops both entries."""

    __slots__ = ("keys",)


class MinimalCache(object):
    """``Bijector._cache`` with TFP's contract and nothing else (see the module)."""

    def __init__(self):
        self.entries = {}  # (id(bijector), direction, id(value)) -> (output ref, input)

        entries = self.entries

        def died(ref):
            for key in ref.keys:
                entries.pop(key, None)
        self._died = died

    def __get__(self, bijector, cls=None):
        return _Bound(self, bijector)


class _Bound(object):
    __slots__ = ("cache", "bijector")

    def __init__(self, cache, bijector):
        self.cache = cache
        self.bijector = bijector

    def forward(self, x, **kwargs):
        return self._lookup(x, 0, kwargs)

    def inverse(self, y, **kwargs):
        return self._lookup(y, 1, kwargs)

    def forward_attributes(self, x, **kwargs):
        return {}

    def inverse_attributes(self, y, **kwargs):
        return {}

    def _lookup(self, value, d, kwargs):
        bijector = self.bijector
        if kwargs:
            return getattr(bijector, _NAMES[d])(value, **kwargs)
        entries = self.cache.entries
        key = (id(bijector), d, id(value))
        found = entries.get(key)
        if found is not None:
            ref, held = found
            out = ref() if ref is not None else held
            if out is not None:
                return out
        output = getattr(bijector, _NAMES[d])(value)
        if isinstance(output, _np.generic):
            output = _np.array(output)  # a NumPy scalar: a 0-d array, as TFP's cache makes it
        ref = _Ref(output, self.cache._died)
        out_key = (id(bijector), 1 - d, id(output))
        ref.keys = (key, out_key)
        entries[key] = (ref, None)
        entries[out_key] = (None, value)  # the input, held while the output lives
        return output


def python_cache():
    """The package's cache on its pure-Python path (``_cache.py`` as written), in a
    process where the C path (``tfp_picklefix._speedups``) is on for the class."""
    from tfp_picklefix import _cache, _native

    class PythonPath(_cache.PicklefixBijectorCache):
        __slots__ = ()
        forward = _native._PY_FORWARD
        inverse = _native._PY_INVERSE

    cache = PythonPath()
    storage = cache._s.eager
    storage.callback = _native._PY_DEATH_CALLBACK(storage)
    return cache


@contextlib.contextmanager
def package_caches(tfb):
    """{"fixed": ..., "off": ...}: the package's own cache objects for ``tfb``'s
    ``Bijector._cache``, as ``set_cache_mode`` installs them, and, where ``fixed`` runs
    its common miss in C, ``python``: the same cache on its pure-Python path. On exit
    the mode that was set before is installed again (whatever object was swapped in
    meanwhile)."""
    import tfp_picklefix
    from tfp_picklefix import _native

    assert "_cache" not in vars(tfb.Exp), "Exp defines its own _cache: patch that instead"
    before = tfp_picklefix.cache_mode()
    objects = {}
    try:
        for mode in ("fixed", "off"):
            tfp_picklefix.set_cache_mode(mode)
            objects[mode] = vars(tfb.Bijector)["_cache"]
        if _native.enabled():
            objects["python"] = python_cache()
        yield objects
    finally:
        if "off" in objects:
            tfb.Bijector._cache = objects["off"]  # what the package last installed
        tfp_picklefix.set_cache_mode(before)


def time_caches(sub, size, objects, rounds, seed=0):
    """{name: [us per Exp miss through ``Bijector.forward``, one per round]} for each
    cache object of ``objects`` (name -> object, ``off`` the pass-through among them),
    swapped on ``Bijector._cache`` batch by batch in a random order each round, after
    checking the contract (``b.inverse(b.forward(x)) is x``) under each but ``off``
    (within ``package_caches``, which installs the package's cache again)."""
    tfb, make = sub
    bij = tfb.Exp()
    base = _np.full((size,), 0.5, _np.float32) if size > 1 else _np.float32(0.5)
    x = make(base)

    def use(name):
        tfb.Bijector._cache = objects[name]

    def run():
        xs = [make(base) for _ in range(BATCH)]
        forward = bij.forward
        t0 = time.perf_counter()
        for v in xs:
            forward(v)
        return (time.perf_counter() - t0) / BATCH * 1e6

    order = list(objects)
    times = {name: [] for name in order}
    rng = random.Random(seed)
    for name in order:
        if name != "off":
            use(name)
            y = bij.forward(x)
            assert bij.inverse(y) is x and bij.forward(x) is y, name
            del y
    for r in range(rounds + 1):  # round 0 warms up
        rng.shuffle(order)
        for name in order:
            use(name)
            t = run()
            if r:
                times[name].append(t)
    return times


def ratios(times, name):
    """The median over rounds of ``name``'s time over ``off``'s in the same round (the
    load of this shared machine drifts between rounds)."""
    return statistics.median(a / b for a, b in zip(times[name], times["off"]))


def measure(sub, size, rounds, seed=0):
    """Medians (us per call) of each variant on ``sub`` (``substrate()``'s pair)."""
    minimal = MinimalCache()
    with package_caches(sub[0]) as objects:
        times = time_caches(sub, size, dict(objects, minimal=minimal), rounds, seed)
    assert not minimal.entries, len(minimal.entries)  # the minimal cache empties itself
    med = {v: statistics.median(ts) for v, ts in times.items()}
    for v in times:
        med[v + "/off"] = ratios(times, v)
    return med


def cases(substrates, sizes):
    """(name, ``substrate(name)``, size) for each substrate of the comma-separated
    ``substrates`` installed here (the others are said to be missing) and each size."""
    for name in substrates.split(","):
        try:
            sub = substrate(name)
        except ImportError as exc:
            print(f"{name}: not installed here ({exc})")
            continue
        for size in [int(s) for s in sizes.split(",")]:
            yield name, sub, size


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substrates", default="numpy,jax,tf")
    parser.add_argument("--sizes", default="1,1000")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    import tfp_picklefix

    from tfp_picklefix import _native

    columns = ["off", "fixed"] + (["python"] if _native.enabled() else []) + ["minimal"]
    print(f"fixed: the package's cache (miss path: {tfp_picklefix.status().speedups})")
    print(f"{'substrate':9s} {'size':>5s} " + " ".join(f"{c:>14s}" for c in columns))
    print("(us per miss, and the median per-round ratio to off)")
    for name, sub, size in cases(args.substrates, args.sizes):
        med = measure(sub, size, args.rounds)
        print(f"{name:9s} {size:5d} " + " ".join(
            f"{med[c]:6.2f} ({med[c + '/off']:.3f})" for c in columns), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
