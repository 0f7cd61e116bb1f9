"""tf-keras models with tfp.layers through pickle, copy, deepcopy and Keras's own saving
(issue 4, point 9; F15).

    python tests/layers_probe.py [NAME ...] [-NAME ...]
        -> one JSON line {layer: {serializer: "ok" | error}} (the layers named, or all
           but those after "-")

Serializers: pickle, copy, deepcopy (Keras writes the model in its ``.keras`` format
and loads it with ``safe_mode=False``), ``model.save`` + ``load_model`` in the
``.keras`` format (``keras``: safe mode, the default; ``keras-trusted``:
``safe_mode=False``) and in HDF5. A cell passes when the copy's
last layer is of the same class and the copy gives the same distribution (mean and
standard deviation, or the same weights for the layers whose outputs are random draws).
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402

import tfp_picklefix  # noqa: E402,F401

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
try:
    import tf_keras as keras  # noqa: E402
except ImportError:  # TF <= 2.15: its own Keras 2
    from tensorflow import keras  # noqa: E402

tfl, tfd = tfp.layers, tfp.distributions
X = np.random.RandomState(0).randn(8, 3).astype(np.float32)


def normal_from(t):
    return tfd.Normal(t[..., :1], tf.nn.softplus(t[..., 1:]) + 0.1)


def standard_normal_4(t):
    return tfd.MultivariateNormalDiag(loc=tf.zeros(tf.concat([tf.shape(t)[:-1], [4]], axis=0)),
                                      scale_diag=tf.ones(4))


def standard_normal_2(t):
    return tfd.MultivariateNormalDiag(loc=tf.zeros(tf.concat([tf.shape(t)[:-1], [2]], axis=0)),
                                      scale_diag=tf.ones(2))


# A user's layer: Keras finds its class by its registration (HDF5, Keras <= 2.12's
# formats), as for any custom layer; tf-keras's ``.keras`` format also by its module.
@keras.utils.register_keras_serializable(package="layers_probe")
class KernelProvider(keras.layers.Layer):
    """A kernel with a trainable amplitude, as TFP's VariationalGaussianProcess takes one."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._amplitude = self.add_weight(initializer="zeros", dtype=tf.float32,
                                          name="amplitude")

    def call(self, x):
        return x

    @property
    def kernel(self):
        return tfp.math.psd_kernels.ExponentiatedQuadratic(
            amplitude=tf.nn.softplus(self._amplitude))


def linear_mean(x):
    """A user's mean function for VariationalGaussianProcess (module level: picklable)."""
    return 0.5 * x[..., 0]


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
    "MultivariateNormalTriL-mean": lambda: [
        keras.layers.Dense(tfl.MultivariateNormalTriL.params_size(2), input_shape=(3,)),
        tfl.MultivariateNormalTriL(2, convert_to_tensor_fn=tfd.Distribution.mean, validate_args=True)],
    "OneHotCategorical": lambda: [keras.layers.Dense(tfl.OneHotCategorical.params_size(4), input_shape=(3,)),
                                  tfl.OneHotCategorical(4)],
    "CategoricalMixtureOfOneHotCategorical": lambda: [
        keras.layers.Dense(tfl.CategoricalMixtureOfOneHotCategorical.params_size(4, 2), input_shape=(3,)),
        tfl.CategoricalMixtureOfOneHotCategorical(4, 2)],
    "MixtureSameFamily": lambda: [
        keras.layers.Dense(tfl.MixtureSameFamily.params_size(2, tfl.IndependentNormal.params_size([3])),
                           input_shape=(3,)),
        tfl.MixtureSameFamily(2, tfl.IndependentNormal([3]))],
    "VariableLayer": lambda: [tfl.VariableLayer(4, input_shape=(3,)), tfl.IndependentNormal(2)],
    # As TFP's docstring builds one: arguments that are not plain values, of which
    # Keras makes no config (F15).
    "VariableLayer-objects": lambda: [
        tfl.VariableLayer(4, dtype=tf.float64, activation=keras.activations.softplus,
                          initializer=tfl.BlockwiseInitializer(
                              ["zeros", keras.initializers.Constant(0.54)], sizes=[2, 2]),
                          input_shape=(3,)),
        tfl.IndependentNormal(2)],
    # F18: a KL penalty towards a prior, as an activity regularizer (TFP's own config and
    # F15's) or a layer; the exact KL, weighted: a loss the copy must give the same.
    "KLDivergenceRegularizer": lambda: [
        keras.layers.Dense(tfl.IndependentNormal.params_size(2), input_shape=(3,)),
        tfl.IndependentNormal(2, activity_regularizer=tfl.KLDivergenceRegularizer(
            independent_prior(), use_exact_kl=True, weight=0.5))],
    "MultivariateNormalTriL-kl": lambda: [
        keras.layers.Dense(tfl.MultivariateNormalTriL.params_size(2), input_shape=(3,)),
        tfl.MultivariateNormalTriL(2, activity_regularizer=tfl.KLDivergenceRegularizer(
            tfd.MultivariateNormalDiag(loc=tf.zeros(2)), use_exact_kl=True, weight=0.5))],
    "KLDivergenceAddLoss": lambda: [
        keras.layers.Dense(tfl.IndependentNormal.params_size(2), input_shape=(3,)),
        tfl.IndependentNormal(2),
        tfl.KLDivergenceAddLoss(independent_prior(), use_exact_kl=True, weight=0.5)],
    # F15: a Keras Wrapper's config (the wrapped layer) without data_init, and no
    # registry entry.
    "WeightNorm": lambda: [tfl.weight_norm.WeightNorm(keras.layers.Dense(2), input_shape=(3,))],
    "WeightNorm-no-data-init": lambda: [tfl.weight_norm.WeightNorm(
        keras.layers.Dense(2), data_init=False, input_shape=(3,))],
    "DenseFlipout": lambda: [tfl.DenseFlipout(2, input_shape=(3,))],
    "DenseFlipout-relu": lambda: [tfl.DenseFlipout(2, activation="relu", input_shape=(3,), seed=7)],
    "DenseReparameterization": lambda: [tfl.DenseReparameterization(2, input_shape=(3,))],
    "DenseLocalReparameterization": lambda: [tfl.DenseLocalReparameterization(2, input_shape=(3,))],
    "Convolution2DFlipout": lambda: [tfl.Convolution2DFlipout(2, 3, input_shape=(6, 6, 3))],
    "Convolution1DReparameterization": lambda: [
        tfl.Convolution1DReparameterization(2, 3, input_shape=(6, 3))],
    # The exact KL, weighted: a loss that the copy must give the same.
    "DenseVariational": lambda: [tfl.DenseVariational(2, posterior, prior, kl_weight=0.25,
                                                      kl_use_exact=True, input_shape=(3,))],
    # The default, a Monte Carlo KL: a loss drawn anew on each call (not compared).
    "DenseVariational-mc": lambda: [tfl.DenseVariational(2, posterior, prior, input_shape=(3,))],
    "AutoregressiveTransform": lambda: [
        keras.layers.InputLayer(input_shape=(0,)), tfl.DistributionLambda(standard_normal_2),
        tfl.AutoregressiveTransform(tfp.bijectors.AutoregressiveNetwork(
            params=2, hidden_units=[4], activation="relu"))],
    # Masks drawn at random (input order and hidden degrees): a copy must keep them.
    "AutoregressiveTransform-random": lambda: [
        keras.layers.InputLayer(input_shape=(0,)), tfl.DistributionLambda(standard_normal_4),
        tfl.AutoregressiveTransform(tfp.bijectors.AutoregressiveNetwork(
            params=2, hidden_units=[6, 6], activation="tanh", input_order="random",
            hidden_degrees="random"))],
    "VariationalGaussianProcess": lambda: [
        keras.layers.InputLayer(input_shape=(1,)),
        tfl.VariationalGaussianProcess(
            num_inducing_points=3, kernel_provider=KernelProvider(), event_shape=[1],
            inducing_index_points_initializer=keras.initializers.Constant(
                np.linspace(-1.0, 1.0, 3)), convert_to_tensor_fn=tfd.Distribution.mean)],
    "VariationalGaussianProcess-mean": lambda: [
        keras.layers.InputLayer(input_shape=(1,)),
        tfl.VariationalGaussianProcess(
            num_inducing_points=3, kernel_provider=KernelProvider(), event_shape=[1],
            mean_fn=linear_mean, jitter=1e-5, convert_to_tensor_fn=tfd.Distribution.mean)],
}
# Built with constant initializers: their weights are moved off them before the copy,
# so that a copy made again without its weights differs.
MOVED = {"VariationalGaussianProcess", "VariationalGaussianProcess-mean",
         "AutoregressiveTransform", "AutoregressiveTransform-random"}
# Outputs are random draws: compare the weights and the KL terms they add as losses.
STOCHASTIC = {"DenseFlipout", "DenseFlipout-relu", "DenseReparameterization",
              "DenseLocalReparameterization", "Convolution2DFlipout",
              "Convolution1DReparameterization", "DenseVariational", "DenseVariational-mc"}
RANDOM_LOSS = {"DenseVariational-mc"}
# Distribution layers whose KL loss (F18) is compared too.
KL_LOSS = {"KLDivergenceRegularizer", "MultivariateNormalTriL-kl", "KLDivergenceAddLoss"}
INPUTS = {"AutoregressiveTransform": np.zeros((4, 0), np.float32),
          "AutoregressiveTransform-random": np.zeros((4, 0), np.float32),
          "VariationalGaussianProcess": np.random.RandomState(1).randn(4, 1).astype(np.float32),
          "VariationalGaussianProcess-mean": np.random.RandomState(1).randn(4, 1).astype(np.float32),
          "Convolution2DFlipout": np.random.RandomState(1).randn(4, 6, 6, 3).astype(np.float32),
          "Convolution1DReparameterization": np.random.RandomState(1).randn(4, 6, 3).astype(np.float32)}


def independent_prior():
    return tfd.Independent(tfd.Normal(tf.zeros(2), 1.0), 1)


def summary(model, x=X, stochastic=False, random_loss=False, kl_loss=False):
    out = model(x)
    if stochastic:
        return [np.asarray(w) for w in model.get_weights()] + [
            np.asarray(loss) for loss in model.losses if not random_loss]
    if hasattr(out, "mean"):
        # A model without its KL loss has fewer values: a difference.
        return _moments(out) + (
            [np.asarray(loss) for loss in model.losses] if kl_loss else [])
    return [np.asarray(w) for w in model.get_weights()] + [np.asarray(out)]


def _moments(out):
    """The output distribution's mean and standard deviation; where TFP has neither, its
    log density at the mean, or at a fixed point (a flow: AutoregressiveTransform)."""
    try:
        center = np.asarray(out.mean())
    except NotImplementedError:
        point = np.full(out.batch_shape.concatenate(out.event_shape), 0.5, np.float32)
        return [np.asarray(out.log_prob(point))]
    try:
        spread = np.asarray(out.stddev())
    except NotImplementedError:  # TFP <= 0.11: VariationalGaussianProcess's output
        spread = np.asarray(out.log_prob(center))
    return [center, spread]


def _config(layer):
    """A layer's config without its pickled functions (written again on each call)."""
    try:
        config = layer.get_config()
    except Exception as exc:  # the layer's own failure shows in the round trip
        return type(exc).__name__
    # As JSON (Keras's own format): a nested layer's build shape read back from JSON is
    # a list where the original's is a tuple (TF 2.15's Keras keeps that difference).
    return json.loads(json.dumps(_without_functions(config), default=repr))


def _without_functions(config):
    """Also in nested layers' configs: Keras 2.12 writes the function of a
    ``MixtureSameFamily``'s component layer, with the repr (address) of a lambda in it."""
    if isinstance(config, list):
        return [_without_functions(v) for v in config]
    if not isinstance(config, dict):
        return config
    functions = {"function", "make_distribution_fn"} | {k for k in config if k + "_type" in config}
    return {k: _without_functions(v) for k, v in config.items() if k not in functions}


def _saved(suffix, **load_options):
    def roundtrip(model):
        path = os.path.join(tempfile.mkdtemp(), "model" + suffix)
        model.save(path)
        return keras.models.load_model(path, **load_options)
    return roundtrip


def _has_safe_mode():
    import inspect

    return "safe_mode" in inspect.signature(keras.models.load_model).parameters


# Keras before 2.12 has no safe mode (and writes ``.keras`` as HDF5): no "keras-trusted".
SERIALIZERS = [("pickle", lambda o: pickle.loads(pickle.dumps(o))), ("copy", copy.copy),
               ("deepcopy", copy.deepcopy), ("keras", _saved(".keras"))] + (
    [("keras-trusted", _saved(".keras", safe_mode=False))] if _has_safe_mode() else []) + [
    ("h5", _saved(".h5"))]


def main():
    # Names to run (all when none), or to leave out: "-NAME".
    only = {arg for arg in sys.argv[1:] if not arg.startswith("-")}
    left_out = {arg[1:] for arg in sys.argv[1:] if arg.startswith("-")}
    table = {}
    for name, layers in BUILD.items():
        if only and name not in only or name in left_out:
            continue
        row = {}
        for ser, roundtrip in SERIALIZERS:
            try:
                model = keras.Sequential(layers())
                x = INPUTS.get(name, X)
                model(x)
                if name in MOVED:
                    model.set_weights([w * 1.1 + 0.05 for w in model.get_weights()])
                clone = roundtrip(model)
                if type(clone.layers[-1]) is not type(model.layers[-1]):
                    row[ser] = f"another class: {type(clone.layers[-1]).__name__}"
                    continue
                if _config(clone.layers[-1]) != _config(model.layers[-1]):
                    row[ser] = "another config"
                    continue
                stochastic = name in STOCHASTIC
                random_loss, kl_loss = name in RANDOM_LOSS, name in KL_LOSS
                a = summary(model, x, stochastic, random_loss, kl_loss)
                b = summary(clone, x, stochastic, random_loss, kl_loss)
                ok = len(a) == len(b) and all(np.allclose(x, y) for x, y in zip(a, b))
                row[ser] = "ok" if ok else "values differ"
            except Exception as exc:
                row[ser] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
        table[name] = row
    print(json.dumps(table))


if __name__ == "__main__":
    main()
