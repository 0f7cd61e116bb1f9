"""What each of the cache's guarantees costs on an eager miss (issue 3, point 8).

    python benchmarks/experiments/ablation.py [--substrates numpy,tf,jax]
                                              [--sizes 1,1000] [--rounds 15]

``minimal_floor.py`` measures the package's cache against the least cache that keeps
TFP's contract. This script splits the difference: it builds variants of
``tfp_picklefix/_cache.py`` with one guarantee's bookkeeping taken out of the common
miss (the ``_Link`` path of ``_lookup`` and the death callback), each a copy of the
module's source with a few lines replaced, and times them, in one process and batch by
batch in a random order each round, against the pass-through (``off``) and the
minimal cache, on fresh inputs through the public ``Exp().forward`` (outputs dropped at
once, as in ``minimal_floor.py``):

- ``nosnap``: no snapshot of a NumPy input and output (an array changed in place
  would be served stale);
- ``nolock``: no lock on the miss and in the death callback (not thread-safe);
- ``noowned``: no per-bijector set of edges (a bound ``clear()`` would have to walk
  every entry);
- ``noheld``: no count of the inputs held strongly (an output that another edge holds
  could keep its own edge alive for good);
- ``none``: all four out.

Each variant still passes the contract check below (``b.inverse(b.forward(x)) is x``);
none is safe to ship. The edits are matched exactly: when ``_cache.py`` changes, the
script stops with the line it could not find. Diagnostic only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import types


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)

from minimal_floor import MinimalCache, cases, package_caches, ratios, time_caches  # noqa: E402

# variant -> [(text of _cache.py, its replacement)], each text found exactly once.
EDITS = {
    "nosnap": [
        ("edge.a_snaps = [(value.shape, value.dtype, value.tobytes())]", "edge.a_snaps = None"),
        ("edge.b_snaps = [(output.shape, output.dtype, output.tobytes())]", "edge.b_snaps = None")],
    "nolock": [
        ("        lock.acquire()\n        try:\n            if storage.pending",
         "        try:\n            if storage.pending"),
        ("            lock.release()\n        if simple:", "            pass\n        if simple:"),
        ("        if not lock.acquire(False):", "        if False:"),
        ("            pass\n        lock.release()\n    return callback",
         "            pass\n    return callback")],
    "noowned": [("                owned.add(edge)\n", ""), ("    link.owned.discard(link)\n", "")],
    "noheld": [
        ("                held[ident] = held.get(ident, 0) + 1\n", ""),
        ("    ident = link.a_held\n    if ident:", "    ident = link.a_held\n    if 0:")],
}
EDITS["none"] = [edit for name in ("nosnap", "nolock", "noowned", "noheld") for edit in EDITS[name]]


def variant(name):
    """The cache module with ``name``'s edits, as a new module object."""
    from tfp_picklefix import _cache

    with open(_cache.__file__) as f:
        source = f.read()
    for old, new in EDITS[name]:
        if source.count(old) != 1:
            raise SystemExit(f"{name}: _cache.py has changed; not found once: {old!r}")
        source = source.replace(old, new)
    module = types.ModuleType(f"_cache_{name}")
    module.__file__ = _cache.__file__
    exec(compile(source, f"<_cache {name}>", "exec"), module.__dict__)
    return module


def measure(sub, size, rounds, names, seed=0):
    """{name: (median us per miss, median per-round ratio to off)}."""
    with package_caches(sub[0]) as objects:
        objects = dict(objects, minimal=MinimalCache())
        for name in names:
            objects[name] = variant(name).PicklefixBijectorCache()
        times = time_caches(sub, size, objects, rounds, seed)
    return {name: (statistics.median(ts), ratios(times, name)) for name, ts in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substrates", default="numpy,tf")
    parser.add_argument("--sizes", default="1,1000")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    import tfp_picklefix  # noqa: F401

    from tfp_picklefix import _native

    names = list(EDITS)
    # The variants are copies of _cache.py, in Python: compare them with ``python``, the
    # package's cache on its pure-Python path, where ``fixed`` runs its miss in C.
    columns = ["off", "fixed"] + (["python"] if _native.enabled() else []) + names + ["minimal"]
    print(f"{'substrate':9s} {'size':>5s} " + " ".join(f"{c:>14s}" for c in columns))
    print("(us per miss, and the median per-round ratio to off)")
    for name, sub, size in cases(args.substrates, args.sizes):
        med = measure(sub, size, args.rounds, names)
        print(f"{name:9s} {size:5d} " + " ".join(
            f"{med[c][0]:6.2f} ({med[c][1]:.3f})" for c in columns), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
