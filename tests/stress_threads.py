"""Thread stress for the bijector cache: run as a script, prints one JSON line.

    python tests/stress_threads.py --substrate tf --threads 16 --seconds 30 [--switch-interval 1e-6]

16 threads push shared and fresh inputs through Chain, Exp and Softplus (forward,
inverse, both log-det-Jacobians) while another thread keeps calling clear(). Counts
None results, exceptions (by type), unraisable exceptions (what would print
"Exception ignored"), and the cache entries left once every reference is dropped.
The cache under test is chosen by TFP_PICKLEFIX_CACHE (with tfp_picklefix imported).
"""
from __future__ import annotations

import argparse
import collections
import gc
import importlib
import json
import random
import sys
import threading
import time

PACKAGES = {"tf": "tensorflow_probability", "numpy": "tensorflow_probability.substrates.numpy",
            "jax": "tensorflow_probability.substrates.jax"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--substrate", default="tf", choices=sorted(PACKAGES))
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--no-package", action="store_true")
    # Python switches threads every 5 ms by default; 1e-6 makes every call a run of
    # preemptions (fewer calls, far more interleavings of each).
    parser.add_argument("--switch-interval", type=float, default=None)
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)

    unraisable = []
    sys.unraisablehook = lambda info: unraisable.append(repr(info.exc_value))
    if not args.no_package:
        import tfp_picklefix  # noqa: F401
    tfp = importlib.import_module(PACKAGES[args.substrate])
    tfb = tfp.bijectors
    import numpy as np

    if args.substrate == "tf":
        import tensorflow as tf

        make = lambda v: tf.constant(v, dtype=tf.float32)  # noqa: E731
    elif args.substrate == "jax":
        import jax.numpy as jnp

        make = lambda v: jnp.asarray(v, dtype=jnp.float32)  # noqa: E731
    else:
        make = lambda v: np.asarray(v, dtype=np.float32)  # noqa: E731

    bijectors = [tfb.Chain([tfb.Exp(), tfb.Shift(1.0), tfb.Scale(2.0)]), tfb.Exp(), tfb.Softplus()]
    pool = [make([0.1 * i, 0.2 * i + 0.3]) for i in range(1, 9)]
    stop = threading.Event()
    counts = collections.Counter()
    errors = collections.Counter()
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        local = collections.Counter()
        local_err = collections.Counter()
        while not stop.is_set():
            bij = rnd.choice(bijectors)
            x = rnd.choice(pool) if rnd.random() < 0.5 else make([rnd.random(), rnd.random() + 0.5])
            try:
                y = bij.forward(x)
                x2 = bij.inverse(y)
                f = bij.forward_log_det_jacobian(x, event_ndims=0)
                i = bij.inverse_log_det_jacobian(y, event_ndims=0)
                results = (y, x2, f, i)
                local["calls"] += 4
                local["none"] += sum(r is None for r in results)
                # Float32 round trips of near-zero inputs (Softplus) lose relative precision:
                # an absolute tolerance too, so that only a wrong cache answer counts.
                if y is not None and x2 is not None and not np.allclose(
                        np.asarray(x2), np.asarray(x), rtol=1e-4, atol=1e-5):
                    local["wrong"] += 1
                    if local["wrong"] == 1:
                        print("wrong:", type(bij).__name__, np.asarray(x), np.asarray(x2),
                              file=sys.stderr)
            except Exception as exc:  # counted, not raised: the run reports them all
                if not local_err[type(exc).__name__]:
                    import traceback

                    traceback.print_exc()
                local_err[type(exc).__name__] += 1
        with lock:
            counts.update(local)
            errors.update(local_err)

    def clearer() -> None:
        rnd = random.Random(0)
        while not stop.is_set():
            try:
                rnd.choice(bijectors)._cache.clear()
                counts["clears"] += 1
            except Exception as exc:
                import traceback

                traceback.print_exc()
                with lock:
                    errors["clear:" + type(exc).__name__] += 1
            time.sleep(0.001)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.threads)]
    threads.append(threading.Thread(target=clearer))
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join()

    cache = tfb.Bijector._cache
    del bijectors, pool
    for _ in range(3):
        gc.collect()
    len(cache)  # lets a cache that defers cleanup do it now
    gc.collect()
    entries = len(cache.storage)
    print(json.dumps({"substrate": args.substrate, "calls": counts["calls"], "none": counts["none"],
                      "wrong": counts["wrong"], "clears": counts["clears"],
                      "exceptions": dict(errors), "unraisable": len(unraisable),
                      "unraisable_examples": unraisable[:3], "entries_left": entries}))


if __name__ == "__main__":
    main()
