"""F20: a GPflow SVGP with GPflow's HeteroskedasticTFPConditional likelihood.

    python tests/gpflow_probe.py roundtrip   # one JSON line: serializer -> outcome
    python tests/gpflow_probe.py dump PATH   # pickles the trained model (and its values)
    python tests/gpflow_probe.py load PATH   # loads it: {"same": ..., "package": ...}

The likelihood's scale transform holds a variable (``Chain([Scale(v), Exp()])``), so a
copy whose closure still refers to the original likelihood is seen (a deep copy, or
``gpflow.utilities.freeze``, which deep-copies): after each round
trip the original's variable changes, and the copy must compute what it did before.
TFP_PICKLEFIX=off runs without the package; the probe imports it otherwise.
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import warnings

warnings.simplefilter("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

if os.environ.get("TFP_PICKLEFIX") != "off" and sys.argv[1] != "load":
    import tfp_picklefix  # noqa: F401

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import gpflow  # noqa: E402

rng = np.random.RandomState(0)
X = rng.rand(20, 1)
Y = np.sin(6 * X) + 0.1 * rng.randn(20, 1)
Z = X[::4].copy()


def model():
    """A heteroskedastic SVGP as in GPflow's notebook, trained three steps."""
    scale = tf.Variable(gpflow.utilities.to_default_float(1.5))
    likelihood = gpflow.likelihoods.HeteroskedasticTFPConditional(
        distribution_class=tfp.distributions.Normal,
        scale_transform=tfp.bijectors.Chain([tfp.bijectors.Scale(scale), tfp.bijectors.Exp()]))
    kernel = gpflow.kernels.SeparateIndependent(
        [gpflow.kernels.SquaredExponential(), gpflow.kernels.Matern32()])
    inducing = gpflow.inducing_variables.SeparateIndependentInducingVariables(
        [gpflow.inducing_variables.InducingPoints(Z.copy()),
         gpflow.inducing_variables.InducingPoints(Z.copy())])
    svgp = gpflow.models.SVGP(kernel, likelihood, inducing, num_latent_gps=2)
    opt = tf.optimizers.Adam(0.05)
    for _ in range(3):
        opt.minimize(svgp.training_loss_closure((X, Y)), svgp.trainable_variables)
    return svgp, scale


def values(svgp):
    mean, var = svgp.predict_y(X[:5])
    return [svgp.predict_log_density((X, Y)).numpy(), mean.numpy(), var.numpy()]


def _same(a, b):
    return all(np.allclose(x, y, rtol=1e-6, atol=1e-8) for x, y in zip(a, b))


SERIALIZERS = {
    "pickle": lambda m: pickle.loads(pickle.dumps(m)),
    "pickle0": lambda m: pickle.loads(pickle.dumps(m, protocol=0)),
    "deepcopy": copy.deepcopy,
}
try:
    import cloudpickle

    SERIALIZERS["cloudpickle"] = lambda m: cloudpickle.loads(cloudpickle.dumps(m))
except ImportError:  # pragma: no cover - every stack installs it
    pass
# GPflow's own: a deep copy with its parameters made constants. Last: on TFP <= 0.11 it
# clears the bijector caches of the original, which the serializers before must meet.
SERIALIZERS["freeze"] = gpflow.utilities.freeze


def roundtrip():
    """One trained model for every serializer (training costs seconds, a round trip
    less): before each, the original's variable is set back and its values computed
    again, which also fills the caches of its bijectors as training left them."""
    svgp, scale = model()
    trained_scale = scale.numpy()
    row = {}
    for name, serializer in SERIALIZERS.items():
        scale.assign(trained_scale)
        expected = values(svgp)
        try:
            clone = serializer(svgp)
        except Exception as exc:
            row[name] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        if not _same(expected, values(clone)):
            row[name] = "differ"
            continue
        scale.assign(scale * 3.0)  # the original's: the copy must not follow it
        row[name] = ("same" if _same(expected, values(clone))
                     else "follows the original's variable")
    return row


def main():
    action = sys.argv[1]
    if action == "roundtrip":
        print(json.dumps(roundtrip()))
    elif action == "dump":
        svgp, _ = model()
        with open(sys.argv[2], "wb") as f:
            pickle.dump((svgp, values(svgp)), f)
        print(json.dumps({"dumped": True}))
    elif action == "load":
        with open(sys.argv[2], "rb") as f:
            svgp, expected = pickle.load(f)
        print(json.dumps({"same": _same(expected, values(svgp)),
                          "package": "tfp_picklefix" in sys.modules}))


if __name__ == "__main__":
    main()
