"""F17 on TF 2.5's own Keras (``tensorflow.python.keras``: the legacy stacks, TFP 0.9-0.11,
and ``mid-0.12``) and on Keras 2.6 (``mid-0.14``): Keras models holding TFP's layers.

Those Keras releases define no pickling or copying of a model. Python deep-copies a plain model
attribute by attribute, but not one holding a TFP distribution layer (its graph nodes
hold TFP's distribution over tensors of Keras's scratch graph), and pickles no model
at all. With the package a built Sequential or Functional model holding such a layer
pickles, copies and deep-copies through Keras's HDF5 format; other models are left to
Python, as before. The same for models holding F15's layers (which Keras's HDF5 loader
finds only once F15 registers them, applied on TFP 0.9-0.11 too) and, for pickle and
deep copy, models holding a variational layer (F16's functions).
"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from conftest import has_tf, keras_2_version

pytestmark = pytest.mark.skipif(not has_tf(), reason="needs TensorFlow")


def _tf25_keras():
    """TF 2.5's own Keras, or Keras 2.6 (TF 2.6), the Keras releases whose ``Model``
    defines no pickling or copying of its own."""
    if not has_tf():
        return False
    import tensorflow as tf

    return (tf.keras.Model.__module__.startswith("tensorflow.python.keras.")
            or keras_2_version() == (2, 6))


def _pickler(protocol):
    def roundtrip(obj):
        data = pickle.dumps(obj, protocol=protocol)
        assert b"tfp_picklefix" not in data  # loads where the package is not installed
        return pickle.loads(data)
    return roundtrip


SERIALIZERS = [("pickle2", _pickler(2)), ("pickle5", _pickler(5)), ("copy", copy.copy),
               ("deepcopy", copy.deepcopy)]
X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _models():
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfpl = tfp.layers
    sequential = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,)),
                                      tfpl.IndependentNormal(1)])
    inputs = tf.keras.Input(shape=(3,))
    hidden = tf.keras.layers.Dense(tfpl.IndependentNormal.params_size(2))(inputs)
    functional = tf.keras.Model(inputs, tfpl.IndependentNormal(2)(hidden))
    return {"sequential": sequential, "functional": functional}


def _same_model(original, clone):
    assert type(clone) is type(original)
    got, want = clone(X), original(X)
    np.testing.assert_allclose(np.asarray(got.mean()), np.asarray(want.mean()), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got.stddev()), np.asarray(want.stddev()), rtol=1e-6)
    # Weights of its own: changing the copy's leaves the original as it was.
    before = [np.asarray(w) for w in original.weights]
    clone.weights[0].assign(clone.weights[0] + 1.0)
    for w, b in zip(original.weights, before):
        np.testing.assert_array_equal(np.asarray(w), b)


def _round_trip_failures(models, check):
    """"kind/serializer: error" for each model of ``models`` (kind -> model) and each
    serializer where ``check(kind, model, serializer name, copy)`` raises (or the
    round trip itself does), with the package patched."""
    import tfp_picklefix

    tfp_picklefix.patch()
    failures = []
    for kind, model in models.items():
        for name, roundtrip in SERIALIZERS:
            try:
                check(kind, model, name, roundtrip(model))
            except Exception as exc:
                failures.append(f"{kind}/{name}: {type(exc).__name__}: {exc}"[:300])
    return failures


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_models_holding_a_tfp_distribution_layer_pickle_and_copy():
    failures = _round_trip_failures(
        _models(), lambda kind, model, name, clone: _same_model(model, clone))
    assert not failures, failures


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_a_compiled_and_trained_model_keeps_its_training_state():
    """Keras's HDF5 file holds the training configuration and the optimizer's state (a
    loss of the user's: ``tests/test_keras_models_compiled.py``)."""
    import tfp_picklefix

    tfp_picklefix.patch()
    model = _models()["sequential"]
    model.compile(optimizer="adam", loss="mse")
    model.fit(X, np.ones((2, 1), np.float32), epochs=2, verbose=0)
    clone = copy.deepcopy(model)
    assert int(clone.optimizer.iterations) == int(model.optimizer.iterations) == 2
    import tensorflow as tf

    assert tf.keras.losses.get(clone.loss) is tf.keras.losses.get(model.loss)
    _same_model(model, clone)


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_other_models_are_copied_as_python_copies_them():
    """A plain model is copied and deep-copied attribute by attribute, as without the
    package (its deep copy then cannot compute its outputs, Keras's own: "Could not
    compute output"), and still does not pickle (Keras's own too)."""
    import tensorflow as tf

    import tfp_picklefix

    tfp_picklefix.patch()
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    model.compile(optimizer="adam", loss="mse")
    shallow = copy.copy(model)
    assert type(shallow) is type(model) and shallow.weights[0] is model.weights[0]
    np.testing.assert_allclose(np.asarray(shallow(X)), np.asarray(model(X)), rtol=1e-6)
    deep = copy.deepcopy(model)
    assert type(deep) is type(model) and deep.weights[0] is not model.weights[0]
    with pytest.raises(AssertionError, match="Could not compute output"):
        deep(X)
    with pytest.raises(TypeError, match="weakref"):
        pickle.dumps(model)


def _kl_models():
    """F18: TFP's KL penalty towards a prior, as a distribution layer's activity
    regularizer and as a layer of its own (the exact KL, weighted)."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfpl, tfd = tfp.layers, tfp.distributions
    prior = tfd.Independent(tfd.Normal(tf.zeros(2), 1.0), 1)
    regularizer = tfpl.KLDivergenceRegularizer(prior, use_exact_kl=True, weight=0.5)
    return {"regularizer": tf.keras.Sequential([
                tf.keras.layers.Dense(tfpl.IndependentNormal.params_size(2), input_shape=(3,)),
                tfpl.IndependentNormal(2, activity_regularizer=regularizer)]),
            "layer": tf.keras.Sequential([
                tf.keras.layers.Dense(tfpl.IndependentNormal.params_size(2), input_shape=(3,)),
                tfpl.IndependentNormal(2),
                tfpl.KLDivergenceAddLoss(prior, use_exact_kl=True, weight=0.5)])}


def _losses(model):
    model(X)
    return [float(np.asarray(loss)) for loss in model.losses]


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_a_kl_penalty_survives_the_copy():
    """F18 on TF 2.5's Keras: without it the HDF5 copy of the first model lost its KL
    loss (the layer's config left its regularizer out), and the second did not copy
    (``KLDivergenceAddLoss`` has arguments and no config)."""
    def check(kind, model, name, clone):
        assert _losses(clone) == _losses(model) != [], (kind, name)
        _same_model(model, clone)

    failures = _round_trip_failures(_kl_models(), check)
    assert not failures, failures


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_a_weight_norm_model_pickles_and_copies():
    """F15's ``WeightNorm`` on TF 2.5's Keras: registered, with its ``data_init`` in its
    config, a model of it is written through HDF5 (a layer with a config of TFP's);
    without it this Keras pickles no such model (a plain one)."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    def check(kind, model, name, clone):
        assert type(clone.layers[0]) is type(model.layers[0])
        assert clone.layers[0].data_init is model.layers[0].data_init
        np.testing.assert_allclose(np.asarray(clone(X)), np.asarray(model(X)), rtol=1e-6)

    models = {}
    for data_init in (True, False):
        models[f"data_init={data_init}"] = tf.keras.Sequential([tfp.layers.weight_norm.WeightNorm(
            tf.keras.layers.Dense(2), data_init=data_init, input_shape=(3,))])
        models[f"data_init={data_init}"](X)
    failures = _round_trip_failures(models, check)
    assert not failures, failures


def _f15_models():
    """Models holding the distribution layers that TFP 0.9-0.13 neither registers with
    Keras nor gives a config of their own (F15)."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfpl = tfp.layers
    layers = {"MultivariateNormalTriL": (tfpl.MultivariateNormalTriL(2),
                                         tfpl.MultivariateNormalTriL.params_size(2)),
              "OneHotCategorical": (tfpl.OneHotCategorical(3),
                                    tfpl.OneHotCategorical.params_size(3)),
              "MixtureSameFamily": (tfpl.MixtureSameFamily(2, tfpl.IndependentNormal(1)),
                                    tfpl.MixtureSameFamily.params_size(
                                        2, tfpl.IndependentNormal.params_size(1)))}
    models = {}
    for name, (layer, size) in layers.items():
        inputs = tf.keras.Input(shape=(3,))
        models[name] = tf.keras.Model(inputs, layer(tf.keras.layers.Dense(size)(inputs)))
    # VariableLayer, which this Keras makes no config of (its constructor takes
    # arguments), as TFP's docstring builds one.
    variable = tfpl.VariableLayer(4, dtype=tf.float64, activation=tf.keras.activations.softplus,
                                  initializer=tfpl.BlockwiseInitializer(
                                      ["zeros", tf.keras.initializers.Constant(0.54)],
                                      sizes=[2, 2]), input_shape=(3,))
    models["VariableLayer"] = tf.keras.Sequential([variable, tfpl.IndependentNormal(2)])
    return models


def _config(layer):
    """A layer's config, but for what is written anew on each call: a nested layer's,
    and the function of TFP's own configs (``IndependentNormal``'s), as bytecode."""
    config = dict(layer.get_config())
    config.pop("component_layer", None)
    config.pop("function", None)
    return config


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_models_holding_f15_layers_pickle_and_deep_copy():
    """F15 on TF 2.5's Keras (applied on TFP 0.9-0.11 too): without it Keras's HDF5
    loader finds no such class ("Unknown layer: MultivariateNormalTriL"), and cannot
    write a VariableLayer ("has arguments [...] and therefore must override
    get_config()")."""
    def check(kind, model, name, clone):
        assert [type(a) for a in clone.layers] == [type(b) for b in model.layers]
        # (but MixtureSameFamily's component layer, whose config is written anew)
        for got, expected in zip(clone.layers, model.layers):
            assert _config(got) == _config(expected)
        np.testing.assert_allclose(np.asarray(clone(X).mean()),
                                   np.asarray(model(X).mean()), rtol=1e-6)

    failures = _round_trip_failures(_f15_models(), check)
    assert not failures, failures


def _variational_models():
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfpl = tfp.layers
    models = {}
    for cls in (tfpl.DenseFlipout, tfpl.DenseReparameterization,
                tfpl.DenseLocalReparameterization):
        models[cls.__name__] = tf.keras.Sequential([cls(2, input_shape=(3,))])
    models["Convolution1DFlipout"] = tf.keras.Sequential([
        tfpl.Convolution1DFlipout(2, kernel_size=2, input_shape=(4, 3)),
        tf.keras.layers.Flatten()])
    # Its arguments are user functions, of which this Keras makes no config (F16); the
    # exact KL, weighted: a loss the copy must give the same. A fixed prior (a trainable
    # one, whose variable this Keras names as the posterior's: below).
    models["DenseVariational"] = tf.keras.Sequential([tfpl.DenseVariational(
        2, _posterior, _fixed_prior, kl_weight=0.25, kl_use_exact=True, input_shape=(3,))])
    return models


def _posterior(kernel_size, bias_size=0, dtype=None):
    import tensorflow as tf
    import tensorflow_probability as tfp

    n = kernel_size + bias_size
    return tf.keras.Sequential([
        tfp.layers.VariableLayer(2 * n, dtype=dtype, initializer=tf.keras.initializers.Constant(0.1)),
        tfp.layers.DistributionLambda(lambda t: tfp.distributions.Independent(
            tfp.distributions.Normal(t[..., :n], 1e-3 + tf.nn.softplus(t[..., n:])), 1))])


def _prior(kernel_size, bias_size=0, dtype=None):
    import tensorflow as tf
    import tensorflow_probability as tfp

    n = kernel_size + bias_size
    return tf.keras.Sequential([
        tfp.layers.VariableLayer(n, dtype=dtype),
        tfp.layers.DistributionLambda(lambda t: tfp.distributions.Independent(
            tfp.distributions.Normal(t, 1.0), 1))])


def _fixed_prior(kernel_size, bias_size=0, dtype=None):
    import tensorflow as tf
    import tensorflow_probability as tfp

    n = kernel_size + bias_size
    return tf.keras.Sequential([
        tfp.layers.DistributionLambda(lambda t: tfp.distributions.Independent(
            tfp.distributions.Normal(tf.zeros(n, dtype), 1.0), 1))])


def negloglik(y, rv_y):
    return -rv_y.log_prob(y)


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_a_model_whose_layer_has_two_weights_of_one_name_round_trips():
    """TF 2.5's Keras names the variables of a layer's inner models by the layer alone:
    a DenseVariational whose posterior and prior each hold a VariableLayer (TFP's
    regression tutorial) has two weights named ``dense_variational/constant:0``, and
    its optimizer two slots of each kind, which Keras's HDF5 format (F17's) writes by
    name: h5py refused the second ("Unable to create dataset (name already exists)").
    They are written under names of their own and read back in their order: the copy
    has the same weights and optimizer state, each in its place, and the original keeps
    its names."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    model = tf.keras.Sequential([
        tfp.layers.DenseVariational(2, _posterior, _prior, kl_weight=0.25, input_shape=(3,)),
        tfp.layers.DistributionLambda(lambda t: tfp.distributions.Normal(t[..., :1], 1.0))])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=negloglik)
    model.fit(X, np.ones((2, 1), np.float32), epochs=2, verbose=0)
    names = [w.name for w in model.weights + model.optimizer.weights]
    assert names.count("dense_variational/constant:0") == 2, names

    def check(kind, original, name, clone):
        assert [w.name for w in original.weights + original.optimizer.weights] == names
        for got, expected in ((clone.weights, original.weights),
                              (clone.optimizer.weights, original.optimizer.weights)):
            assert [w.shape for w in got] == [w.shape for w in expected]
            for a, b in zip(got, expected):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert clone.weights[0] is not original.weights[0]

    failures = _round_trip_failures({"DenseVariational": model}, check)
    assert not failures, failures


def _kl(model, x):
    """The KL loss of an eager call on ``x``, or None where the layer adds it in Keras's
    graph only (TFP 0.9's convolutional layers)."""
    model(x)
    losses = [loss for loss in model.losses if hasattr(loss, "numpy")]
    return float(sum(np.asarray(loss) for loss in losses)) if losses else None


@pytest.mark.skipif(not _tf25_keras(), reason="TF 2.5's own Keras or Keras 2.6")
def test_models_holding_variational_layers_pickle_and_deep_copy():
    """F16 and F17 on TF 2.5's Keras: a model holding a variational layer (no
    distribution layer) pickles and deep-copies through Keras's HDF5 format, its
    functions written as F16 writes them: same layer classes, weights and KL loss,
    weights of its own. Its shallow copy stays Python's (shared weights), as before,
    but for DenseVariational's (of which this Keras makes no config without F16), whose
    posterior and prior are distribution layers."""
    models = _variational_models()
    inputs, kl = {}, {}
    for kind, model in models.items():
        inputs[kind] = np.ones((2,) + tuple(model.input_shape[1:]), np.float32)
        kl[kind] = _kl(model, inputs[kind])
        assert kl[kind] is not None or kind == "Convolution1DFlipout", kind

    def check(kind, model, name, clone):
        assert [type(a) for a in clone.layers] == [type(b) for b in model.layers]
        assert len(clone.weights) == len(model.weights)
        for got, expected in zip(clone.weights, model.weights):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
            # DenseVariational's posterior and prior are distribution layers: a model
            # holding one is shallow-copied through HDF5 too (weights of its own).
            assert (got is expected) == (name == "copy" and kind != "DenseVariational"), name
        if kl[kind] is not None:
            np.testing.assert_allclose(_kl(clone, inputs[kind]), kl[kind], rtol=1e-6)

    failures = _round_trip_failures(models, check)
    assert not failures, failures
