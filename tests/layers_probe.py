"""tf-keras models with tfp.layers through pickle, copy and deepcopy (issue 4, point 9).

    python tests/layers_probe.py        -> one JSON line {layer: {serializer: "ok" | error}}
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402

import tfp_picklefix  # noqa: E402,F401

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras as keras  # noqa: E402

tfl, tfd = tfp.layers, tfp.distributions
X = np.random.RandomState(0).randn(8, 3).astype(np.float32)


def normal_from(t):
    return tfd.Normal(t[..., :1], tf.nn.softplus(t[..., 1:]) + 0.1)


def posterior(kernel_size, bias_size=0, dtype=None):
    n = kernel_size + bias_size
    return keras.Sequential([tfl.VariableLayer(2 * n, dtype=dtype), tfl.DistributionLambda(
        lambda t: tfd.Independent(tfd.Normal(t[..., :n], 1e-3 + tf.nn.softplus(t[..., n:])), 1))])


def prior(kernel_size, bias_size=0, dtype=None):
    n = kernel_size + bias_size
    return keras.Sequential([tfl.VariableLayer(n, dtype=dtype), tfl.DistributionLambda(
        lambda t: tfd.Independent(tfd.Normal(t, 1.0), 1))])


BUILD = {
    "DistributionLambda": lambda: [keras.layers.Dense(2, input_shape=(3,)), tfl.DistributionLambda(normal_from)],
    "IndependentNormal": lambda: [keras.layers.Dense(tfl.IndependentNormal.params_size(1), input_shape=(3,)),
                                  tfl.IndependentNormal(1)],
    "MultivariateNormalTriL": lambda: [keras.layers.Dense(tfl.MultivariateNormalTriL.params_size(2),
                                                          input_shape=(3,)), tfl.MultivariateNormalTriL(2)],
    "DenseFlipout": lambda: [tfl.DenseFlipout(2, input_shape=(3,))],
    "DenseVariational": lambda: [tfl.DenseVariational(2, posterior, prior, input_shape=(3,))],
}
STOCHASTIC = {"DenseFlipout", "DenseVariational"}  # outputs are random draws: compare weights


def summary(model):
    out = model(X)
    if hasattr(out, "mean"):
        return [np.asarray(out.mean()), np.asarray(out.stddev())]
    return [np.asarray(w) for w in model.get_weights()]


def main():
    table = {}
    for name, layers in BUILD.items():
        row = {}
        for ser, roundtrip in [("pickle", lambda o: pickle.loads(pickle.dumps(o))),
                               ("copy", copy.copy), ("deepcopy", copy.deepcopy)]:
            try:
                model = keras.Sequential(layers())
                model(X)
                clone = roundtrip(model)
                a, b = summary(model), summary(clone)
                if name in STOCHASTIC:
                    a, b = model.get_weights(), clone.get_weights()
                ok = len(a) == len(b) and all(np.allclose(x, y) for x, y in zip(a, b))
                row[ser] = "ok" if ok else "values differ"
            except Exception as exc:
                row[ser] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
        table[name] = row
    print(json.dumps(table))


if __name__ == "__main__":
    main()
