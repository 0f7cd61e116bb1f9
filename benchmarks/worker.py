"""One benchmark process: one variant (package or not, cache mode), serving batches.

    python benchmarks/worker.py --variant fixed

The runner starts one worker per variant, all at once, and drives them over
stdin/stdout (one JSON object per line; replies start with ``@@``):
``{"cmd": "hello"}`` (versions, status), ``{"cmd": "setup", "case": {...}}`` (build the
case: bijector, input maker, traced function; calibrate the batch size),
``{"cmd": "batch"}`` (run one timed batch: seconds per call, or calls per second for
thread cases), ``{"cmd": "quit"}``. The runner alternates batches between the
variants, so that a slow spell on a shared machine hits every variant alike.

Variants: ``none`` and ``control`` (tfp_picklefix not imported: TFP as shipped), ``fixed``,
``upstream``, ``off`` (the package imported with that TFP_PICKLEFIX_CACHE mode; set
by the runner in the environment before this process starts).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
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
            self.jnp = jnp
            self.make = lambda a: jnp.asarray(a)
            self.block = jax.block_until_ready
        else:
            self.make = lambda a: np.array(a)
            self.block = lambda v: v


BATCH_SECONDS = float(os.environ.get("TFP_PICKLEFIX_BENCH_BATCH_SECONDS", 0.015))
THREAD_SECONDS = float(os.environ.get("TFP_PICKLEFIX_BENCH_THREAD_SECONDS", 0.25))
INPUT_BYTES = int(float(os.environ.get("TFP_PICKLEFIX_BENCH_INPUT_BYTES", 4e9)))


class Timed:
    """Batches of calls of ``fn``: ``make()`` gives each call a new input when ``fresh``
    (a cache miss), else one input serves every call (a hit)."""

    def __init__(self, fn, make, block, fresh=True, keep=None):
        self.fn, self.make, self.block, self.fresh = fn, make, block, fresh
        self.keep = keep  # what must stay alive for hits (the cached output)
        self.x0 = make()
        block(fn(self.x0))  # warm up (and fill the cache, for hits)
        t0 = time.perf_counter()
        block(fn(make() if fresh else self.x0))
        single = time.perf_counter() - t0
        self.n = max(2, min(5000, int(BATCH_SECONDS / max(single, 1e-7))))
        if fresh:
            # A batch's fresh inputs all exist at once: at most INPUT_BYTES of them (on a
            # GPU, 1e8-element inputs are 400 MB each and several workers share the card).
            size = getattr(self.x0, "nbytes", 0) or 1
            self.n = max(2, min(self.n, INPUT_BYTES // size))

    def refill(self):
        """For hits: the call once more, its output kept (after the cache was swapped, the
        kept output is no longer in the one that runs, and a hit would be a miss)."""
        if self.keep is not None:
            self.keep = self.fn(self.x0)

    def batch(self):
        """Seconds per call over one batch of about BATCH_SECONDS."""
        fn, block = self.fn, self.block
        inputs = [self.make() for _ in range(self.n)] if self.fresh else [self.x0] * self.n
        t0 = time.perf_counter()
        for x in inputs:
            block(fn(x))
        return (time.perf_counter() - t0) / self.n


def bijector_case(sub, case):
    np = sub.np
    bij = _bijector(sub.tfb, case["bijector"])
    nd = _event_ndims(case["bijector"])
    rng = np.random.RandomState(0)
    shape = _shape(case["bijector"], case["size"])
    base = (rng.rand(*shape) * 0.8 + 0.1).astype(np.float32) if shape else np.float32(0.5)
    op, mode, hit = case["op"], case["exec"], case["cache"] == "hit"
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
        nd_y = 2 if case["bijector"] == "FillScaleTriL" else nd  # its outputs are matrices
        call = lambda y: bij.inverse_log_det_jacobian(y, event_ndims=nd_y)  # noqa: E731
    if op in ("inverse", "ildj"):
        base = np.asarray(bij.forward(make(base)))  # a valid output-space value

    if sub.name == "jax":
        # Fresh inputs are copies made on the device (a GPU): not host-to-device
        # transfers of up to 400 MB each.
        on_device = make(base)
        fresh = lambda: sub.jnp.array(on_device, copy=True)  # noqa: E731
    else:
        fresh = lambda: make(base)  # noqa: E731
    if mode in ("tf_function", "xla"):
        fn = sub.tf.function(call, jit_compile=(mode == "xla"))
        return Timed(fn, fresh, sub.block)
    if mode == "jit":
        fn = sub.jax.jit(call)
        return Timed(fn, fresh, sub.block)
    if not hit:
        return Timed(call, fresh, sub.block)
    x0 = make(base)
    if op in ("inverse", "ildj"):
        x0 = bij.forward(make(np.asarray(bij.inverse(x0))))  # an output the cache knows
    return Timed(call, lambda: x0, sub.block, fresh=False, keep=call(x0))


def e2e_case(sub, case):
    np = sub.np
    if case["name"] == "transformed_sample_log_prob":
        tfd = sub.tfp.distributions
        dist = tfd.TransformedDistribution(tfd.Normal(0.0, 1.0), sub.tfb.Exp())
        seed = (1, 2)
        fn = lambda _: dist.log_prob(dist.sample(100, seed=seed))  # noqa: E731
        if case["exec"] == "tf_function":
            fn = sub.tf.function(fn)
        return Timed(fn, lambda: 0, sub.block, fresh=False)
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
    return Timed(fn, lambda: 0, sub.block, fresh=False)


class Threads:
    """Calls per second of a Chain's forward+inverse with k threads, each on its own
    fresh inputs (a batch runs THREAD_SECONDS)."""

    def __init__(self, sub, case):
        self.sub, self.k = sub, case["threads"]
        self.bij = _bijector(sub.tfb, "Chain3")

    def batch(self):
        sub, bij, np = self.sub, self.bij, self.sub.np
        stop = threading.Event()
        counts = [0] * self.k

        def work(i):
            while not stop.is_set():
                y = bij.forward(sub.make(np.float32(0.5)))
                bij.inverse(y)
                counts[i] += 2

        ts = [threading.Thread(target=work, args=(i,)) for i in range(self.k)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        time.sleep(THREAD_SECONDS)
        stop.set()
        for t in ts:
            t.join()
        return sum(counts) / (time.perf_counter() - t0)


def _versions():
    from importlib import metadata

    versions = {}
    for dist in ("tensorflow", "tf-nightly", "tensorflow-probability", "tfp-nightly", "jax",
                 "jaxlib", "gpflow", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except Exception:
            pass
    return versions


def cores():
    """The cores this process may run on (None where the platform cannot say)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def reply(obj):
    sys.stdout.write("@@" + json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(variant):
    cpu = os.environ.get("TFP_PICKLEFIX_BENCH_CPU")
    if cpu and hasattr(os, "sched_setaffinity"):
        # Every variant on the same core: batches take turns on it, so no variant runs
        # on a core whose hyperthread sibling happens to be busier.
        os.sched_setaffinity(0, {int(cpu)})
    if variant not in ("none", "control"):  # control: a second "none", for the noise
        import tfp_picklefix  # noqa: F401  (mode from TFP_PICKLEFIX_CACHE)
    subs = {}
    bench = None
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg["cmd"]
        if cmd == "hello":
            for name in msg.get("substrates", []):
                try:
                    subs[name] = Substrate(name)  # import everything before freezing
                except Exception:
                    pass
            # Imports leave a large heap: freeze it, so that collections only walk
            # what the benchmarks allocate.
            gc.collect()
            gc.freeze()
            device = None
            if "jax" in subs:
                try:
                    d = subs["jax"].jax.devices()[0]
                    device = f"{d.platform}: {getattr(d, 'device_kind', '?')}"
                except Exception as exc:  # reported, and the cases report their own errors
                    device = f"unavailable ({type(exc).__name__})"
            reply({"variant": variant, "versions": _versions(), "python": sys.version.split()[0],
                   "jax_device": device,
                   "cpus": cores(),  # (TFP_PICKLEFIX_BENCH_CPU: one)
                   "status": str(sys.modules["tfp_picklefix"].status())
                   if "tfp_picklefix" in sys.modules else "not imported"})
        elif cmd == "setup":
            case = msg["case"]
            bench = None
            gc.collect(1)  # young objects only: a full collection costs more each case
            try:
                sub = subs.get(case["substrate"]) or Substrate(case["substrate"])
                subs[case["substrate"]] = sub
                if case["kind"] == "bijector":
                    bench = bijector_case(sub, case)
                elif case["kind"] == "e2e":
                    bench = e2e_case(sub, case)
                else:
                    bench = Threads(sub, case)
                reply({"ok": True})
            except Exception as exc:  # a case this stack cannot run: recorded, not fatal
                reply({"error": f"{type(exc).__name__}: {exc}"[:300]})
        elif cmd == "batch":
            reply({"value": bench.batch()})
        elif cmd == "quit":
            reply({"bye": True})
            return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", required=True)
    args = parser.parse_args()
    serve(args.variant)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
