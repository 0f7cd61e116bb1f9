"""What a compiled call runs: the traced TF graph, or the JAX jaxpr, of bijector calls.

    python tests/compiled_graphs.py --substrate tf [--no-package]

Prints one JSON object: case -> SHA-256 of the deterministic serialization of the
``tf.function`` graph (with its function library), or of the ``jax.make_jaxpr`` text.
The package's cache (TFP_PICKLEFIX_CACHE) only runs while tracing; when these agree
with and without the package, compiled run times cannot differ because of it.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re

PACKAGES = {"tf": "tensorflow_probability", "jax": "tensorflow_probability.substrates.jax"}


def bijectors(tfb):
    shift = tfb.Shift(1.0) if hasattr(tfb, "Shift") else tfb.AffineScalar(shift=1.0)
    scale = tfb.Scale(2.0) if hasattr(tfb, "Scale") else tfb.AffineScalar(scale=2.0)
    return {"Exp": (tfb.Exp(), 0), "Softplus": (tfb.Softplus(), 0), "Sigmoid": (tfb.Sigmoid(), 0),
            "Chain3": (tfb.Chain([tfb.Exp(), shift, scale]), 0),
            "FillScaleTriL": (tfb.FillScaleTriL(), 1)}


def calls(bij, nd):
    return {"forward": bij.forward, "inverse": bij.inverse,
            "fldj": lambda x: bij.forward_log_det_jacobian(x, event_ndims=nd),
            "ildj": lambda y: bij.inverse_log_det_jacobian(y, event_ndims=nd + 1 if nd else 0),
            # A round trip: the cache answers the inverse while tracing.
            "roundtrip": lambda x: bij.inverse(bij.forward(x))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--substrate", default="tf", choices=sorted(PACKAGES))
    parser.add_argument("--no-package", action="store_true")
    args = parser.parse_args()
    if not args.no_package:
        import tfp_picklefix  # noqa: F401
    tfb = importlib.import_module(PACKAGES[args.substrate]).bijectors
    out = {}
    for name, (bij, nd) in bijectors(tfb).items():
        for op, fn in calls(bij, nd).items():
            # FillScaleTriL maps 3 numbers to a 2x2 lower-triangular matrix.
            shape = ([2, 2] if op in ("inverse", "ildj") else [3]) if nd else [4]
            if args.substrate == "tf":
                import tensorflow as tf

                for jit in (False, True):
                    f = tf.function(fn, jit_compile=jit)
                    graph = f.get_concrete_function(tf.TensorSpec(shape, tf.float32)).graph
                    blob = graph.as_graph_def().SerializeToString(deterministic=True)
                    out[f"{name}.{op}.{'xla' if jit else 'graph'}"] = hashlib.sha256(blob).hexdigest()
            else:
                import jax
                import jax.numpy as jnp

                text = str(jax.make_jaxpr(fn)(jnp.full(shape, 0.5, jnp.float32)))
                # jax 0.4 prints a custom_jvp's thunk with its address, which differs
                # from one process to the next.
                text = re.sub(r" at 0x[0-9a-f]+>", " at 0x>", text)
                out[f"{name}.{op}.jaxpr"] = hashlib.sha256(text.encode()).hexdigest()
    print(json.dumps(out))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
