"""One benchmark process: one variant (package or not, cache mode), every case; JSON out.

    python benchmarks/worker.py --variant fixed --cases cases.json --out out.json

Variants: ``none`` (tfp_picklefix not imported: TFP as shipped), ``fixed``,
``upstream``, ``off`` (the package imported with that TFP_PICKLEFIX_CACHE mode; set
by the runner in the environment before this process starts).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time

PACKAGES = {"tf": "tensorflow_probability", "numpy": "tensorflow_probability.substrates.numpy",
            "jax": "tensorflow_probability.substrates.jax"}


def _bijector(tfb, name):
    if name == "Exp":
        return tfb.Exp()
    if name == "Softplus":
        return tfb.Softplus()
    if name == "Sigmoid":
        return tfb.Sigmoid()
    if name == "ShiftScale":
        return tfb.Chain([tfb.Shift(1.0), tfb.Scale(2.0)]) if hasattr(tfb, "Shift") else \
            tfb.AffineScalar(shift=1.0, scale=2.0)
    if name == "Chain3":
        shift = tfb.Shift(1.0) if hasattr(tfb, "Shift") else tfb.AffineScalar(shift=1.0)
        scale = tfb.Scale(2.0) if hasattr(tfb, "Scale") else tfb.AffineScalar(scale=2.0)
        return tfb.Chain([tfb.Exp(), shift, scale])
    if name == "FillScaleTriL":
        return tfb.FillScaleTriL()
    if name == "MAF":
        return tfb.MaskedAutoregressiveFlow(
            shift_and_log_scale_fn=tfb.AutoregressiveNetwork(params=2, hidden_units=[8]))
    if name == "RealNVP":
        return tfb.RealNVP(num_masked=1, bijector_fn=lambda x, input_depth: tfb.Shift(0.5 * x))
    raise ValueError(name)


def _event_ndims(name):
    return 1 if name in ("FillScaleTriL", "MAF", "RealNVP") else 0


def _shape(name, size):
    if name == "FillScaleTriL":
        return (max(size // 3, 1), 3)  # size elements as rows of 3 (a 2x2 triangle each)
    if name in ("MAF", "RealNVP"):
        return (max(size // 4, 1), 4)
    return (size,) if size > 1 else ()


class Substrate:
    def __init__(self, name):
        import importlib

        import numpy as np

        self.name = name
        self.np = np
        self.tfp = importlib.import_module(PACKAGES[name])
        self.tfb = self.tfp.bijectors
        if name == "tf":
            import tensorflow as tf

            self.tf = tf
            self.make = lambda a: tf.constant(a)
            self.block = lambda v: v
        elif name == "jax":
            import jax
            import jax.numpy as jnp

            self.jax = jax
            self.make = lambda a: jnp.asarray(a)
            self.block = jax.block_until_ready
        else:
            self.make = lambda a: np.array(a)
            self.block = lambda v: v


def _time_calls(fn, inputs, block):
    """Median seconds per call over 5 rounds; ``inputs`` is consumed one per call."""
    per_round = max(len(inputs) // 5, 1)
    rounds = []
    for r in range(5):
        chunk = inputs[r * per_round:(r + 1) * per_round]
        t0 = time.perf_counter()
        for x in chunk:
            block(fn(x))
        rounds.append((time.perf_counter() - t0) / len(chunk))
    return statistics.median(rounds)


def _calls_for(size):
    return int(os.environ.get("TFP_PICKLEFIX_BENCH_CALLS", 300)) if size <= 1000 else 30


def run_bijector_case(sub, case):
    np = sub.np
    bij = _bijector(sub.tfb, case["bijector"])
    nd = _event_ndims(case["bijector"])
    rng = np.random.RandomState(0)
    shape = _shape(case["bijector"], case["size"])
    base = (rng.rand(*shape) * 0.8 + 0.1).astype(np.float32) if shape else np.float32(0.5)
    op, mode, hit = case["op"], case["exec"], case["cache"] == "hit"
    n = _calls_for(case["size"])
    make = sub.make
    if case["bijector"] == "MAF":
        bij.forward(make(base))  # builds the Keras network

    if op == "forward":
        call = bij.forward
    elif op == "inverse":
        call = bij.inverse
    elif op == "fldj":
        call = lambda x: bij.forward_log_det_jacobian(x, event_ndims=nd)  # noqa: E731
    else:
        call = lambda y: bij.inverse_log_det_jacobian(y, event_ndims=nd)  # noqa: E731
    if op in ("inverse", "ildj"):
        ys = bij.forward(make(base))
        base = np.asarray(ys)  # a valid output-space value

    if mode in ("tf_function", "xla"):
        fn = sub.tf.function(call, jit_compile=(mode == "xla"))
        x0 = make(base)
        fn(x0)  # trace/compile once
        inputs = [make(base) for _ in range(n)] if not hit else [x0] * n
        return _time_calls(fn, inputs, sub.block)
    if mode == "jit":
        fn = sub.jax.jit(call)
        x0 = make(base)
        sub.block(fn(x0))
        inputs = [x0] * n
        return _time_calls(fn, inputs, sub.block)
    # eager
    if hit:
        x0 = make(base)
        if op in ("inverse", "ildj"):
            y0 = bij.forward(make(np.asarray(bij.inverse(x0))))  # an output the cache knows
            x0 = y0
        keep = call(x0)  # first call fills the cache
        inputs = [x0] * n
        result = _time_calls(call, inputs, sub.block)
        del keep
        return result
    inputs = [make(base) for _ in range(n)]
    return _time_calls(call, inputs, sub.block)


def run_e2e_case(sub, case):
    np = sub.np
    if case["name"] == "transformed_sample_log_prob":
        tfd = sub.tfp.distributions
        dist = tfd.TransformedDistribution(tfd.Normal(0.0, 1.0), sub.tfb.Exp())
        seed = (1, 2)
        fn = lambda _: dist.log_prob(dist.sample(100, seed=seed))  # noqa: E731
        if case["exec"] == "tf_function":
            fn = sub.tf.function(fn)
        fn(0)
        return _time_calls(fn, [0] * 50, sub.block)
    import gpflow
    import tensorflow as tf

    rng = np.random.RandomState(0)
    X = rng.rand(2000, 1) * 10
    Y = (np.sin(X) + 0.5 * rng.randn(2000, 1) > 0).astype(float)
    model = gpflow.models.SVGP(gpflow.kernels.Matern12(), gpflow.likelihoods.Bernoulli(),
                               inducing_variable=X[:50].copy(), num_data=2000)
    batch = (tf.constant(X[:100]), tf.constant(Y[:100]))
    opt = tf.optimizers.Adam(0.01)
    if case["name"] == "svgp_predict_f":
        fn = lambda _: model.predict_f(X[:100])  # noqa: E731
    else:
        def fn(_):
            with tf.GradientTape() as tape:
                loss = model.training_loss(batch)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        if case["exec"] == "tf_function":
            fn = tf.function(fn)
    fn(0)
    return _time_calls(fn, [0] * 25, sub.block)


def run_threads_case(sub, case):
    """Calls per second with k threads, each on its own fresh inputs."""
    np = sub.np
    bij = _bijector(sub.tfb, "Chain3")
    stop = threading.Event()
    counts = [0] * case["threads"]

    def work(i):
        while not stop.is_set():
            y = bij.forward(sub.make(np.float32(0.5)))
            bij.inverse(y)
            counts[i] += 2

    ts = [threading.Thread(target=work, args=(i,)) for i in range(case["threads"])]
    for t in ts:
        t.start()
    time.sleep(case.get("seconds", 2.0))
    stop.set()
    for t in ts:
        t.join()
    return sum(counts) / case.get("seconds", 2.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", required=True)
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.variant != "none":
        import tfp_picklefix  # noqa: F401  (mode from TFP_PICKLEFIX_CACHE)
    with open(args.cases) as f:
        cases = json.load(f)
    subs = {}
    results = []
    for case in cases:
        name = case["substrate"]
        try:
            if name not in subs:
                subs[name] = Substrate(name)
            sub = subs[name]
            kind = case["kind"]
            gc.collect()
            if kind == "bijector":
                value = run_bijector_case(sub, case)
            elif kind == "e2e":
                value = run_e2e_case(sub, case)
            else:
                value = run_threads_case(sub, case)
            results.append({"id": case["id"], "value": value})
        except Exception as exc:  # a case this stack cannot run: recorded, not fatal
            results.append({"id": case["id"], "error": f"{type(exc).__name__}: {exc}"[:300]})
    versions = {}
    for dist in ("tensorflow", "tensorflow-probability", "tfp-nightly", "jax", "gpflow", "numpy"):
        try:
            from importlib import metadata

            versions[dist] = metadata.version(dist)
        except Exception:
            pass
    with open(args.out, "w") as f:
        json.dump({"variant": args.variant, "results": results, "versions": versions,
                   "python": sys.version.split()[0],
                   "status": str(sys.modules["tfp_picklefix"].status())
                   if "tfp_picklefix" in sys.modules else "not imported"}, f)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
