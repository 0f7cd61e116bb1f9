"""Cache storage size and RSS over a long eager loop that drops or keeps its outputs.

    python benchmarks/eager_memory.py --substrate tf --n 20000 [--no-package]

Prints one JSON line. ``drop``: N forward calls of a Chain of 3 on fresh 1000-element
inputs, each output dropped at once; reports the entries left in the cache's storage
and the RSS growth. ``keep``: the same N calls with every input and output kept alive,
then all released; reports the entries (and RSS growth) while kept and after release.
The cache under test is chosen by TFP_PICKLEFIX_CACHE (with tfp_picklefix imported);
``--no-package`` measures TFP as shipped.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys

PACKAGES = {"tf": "tensorflow_probability", "numpy": "tensorflow_probability.substrates.numpy",
            "jax": "tensorflow_probability.substrates.jax"}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--substrate", default="tf", choices=sorted(PACKAGES))
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--no-package", action="store_true")
    args = parser.parse_args()
    if not args.no_package:
        import tfp_picklefix  # noqa: F401
    import numpy as np

    tfp = importlib.import_module(PACKAGES[args.substrate])
    tfb = tfp.bijectors
    if args.substrate == "tf":
        import tensorflow as tf

        make = lambda a: tf.constant(a)  # noqa: E731
    elif args.substrate == "jax":
        import jax.numpy as jnp

        make = lambda a: jnp.asarray(a)  # noqa: E731
    else:
        make = lambda a: np.array(a)  # noqa: E731
    bij = tfb.Chain([tfb.Exp(), tfb.Shift(1.0), tfb.Scale(2.0)])
    base = np.linspace(0.1, 0.9, 1000, dtype=np.float32)
    storage = lambda: len(tfb.Bijector._cache.storage)  # noqa: E731
    for _ in range(50):  # warm up: TF's own caches, allocator pools
        bij.forward(make(base))
    gc.collect()
    out = {"substrate": args.substrate, "n": args.n}

    rss0 = rss_mb()
    for _ in range(args.n):
        bij.forward(make(base))
    gc.collect()
    out["drop_entries"] = storage()
    out["drop_rss_growth_mb"] = round(rss_mb() - rss0, 1)

    rss0 = rss_mb()
    kept = []
    for _ in range(args.n):
        x = make(base)
        kept.append((x, bij.forward(x)))
    gc.collect()
    out["keep_entries_while_kept"] = storage()
    out["keep_rss_growth_mb_while_kept"] = round(rss_mb() - rss0, 1)
    del kept, x
    gc.collect()
    out["keep_entries_after_release"] = storage()
    out["keep_rss_growth_mb_after_release"] = round(rss_mb() - rss0, 1)
    out["python"] = sys.version.split()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
