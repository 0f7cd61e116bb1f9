"""Subclassed Keras models (``class M(keras.Model)`` with its own ``call``) holding a
``tfp.layers`` distribution layer, through pickle, cloudpickle, ``copy`` and ``deepcopy``.

The claim: wherever Keras itself round-trips a subclassed model of its own layers, the
same model with TFP's layer round-trips too, with the same outputs. Where Keras does not
(TF 2.5's Keras and Keras 2.6 define no pickling of a model; tf-keras and Keras 2.15 need
the class registered, which both models here are), the test skips, saying so.

Known issue, asserted here so that the README changes when it does: Keras 2.7-2.11 write
a model as a SavedModel (2.7-2.10) or in their first ``.keras`` format (2.11) to pickle or
copy it. F17 writes Functional and Sequential models in HDF5 instead, which Keras cannot
do for a subclassed model; its SavedModel trace of TFP's layer fails (``Iterating over a
symbolic tf.Tensor``), and 2.11's serializer refuses the layer's lambda. The package
turns that error into one that says so and what works (the Functional API, Sequential).
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import has_tf, tfp_keras
from roundtrips import SERIALIZERS as ALL_SERIALIZERS

X = np.linspace(-1.0, 1.0, 16, dtype=np.float32)[:, None]
Y = 2.0 * X + 0.3


def _define():
    """The two model classes, at this module's top level (pickle finds classes by name),
    registered with Keras (once: older Keras refuses a second registration)."""
    if "TfpSubclassed" in globals():
        return
    import tensorflow as tf
    import tensorflow_probability as tfp

    keras, tfd = tfp_keras(), tfp.distributions
    register = keras.utils.register_keras_serializable(package="tfp_picklefix_tests")

    class PlainSubclassed(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(2, kernel_initializer="ones")
            self.head = keras.layers.Dense(1, kernel_initializer="ones")

        def call(self, x):
            return self.head(self.dense(x))

    class TfpSubclassed(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(2, kernel_initializer="ones")
            self.head = tfp.layers.DistributionLambda(
                lambda t: tfd.Normal(t[..., :1], 1e-3 + tf.nn.softplus(t[..., 1:])),
                convert_to_tensor_fn=tfd.Distribution.mean)

        def call(self, x):
            return self.head(self.dense(x))

    for cls in (PlainSubclassed, TfpSubclassed):
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = register(cls)
    register(negloglik)  # tf-keras and Keras 2.15 find a def loss by its registration


def negloglik(y, rv_y):
    return -rv_y.log_prob(y)


SERIALIZERS = {name: ALL_SERIALIZERS[name]
               for name in ("pickle", "cloudpickle", "copy", "deepcopy")}


def _trained(cls_name, loss):
    model = globals()[cls_name]()
    model.compile(optimizer=tfp_keras().optimizers.Adam(0.05), loss=loss)
    model.fit(X, Y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return model


def _mean(output):
    import tensorflow as tf

    return tf.convert_to_tensor(output).numpy()


def _keras_writes_subclassed_models_as_saved_model_or_keras_v1():
    """Keras 2.7-2.11, found as F17 finds them: the model class's ``__reduce__`` writes
    through ``pickle_utils`` into a SavedModel or a format that refuses lambdas."""
    from tfp_picklefix import _keras_models

    model_cls = tfp_keras().Model
    return any(_keras_models.hdf5_loader(klass) is not None for klass in model_cls.__mro__
               if "__reduce__" in vars(klass))


@pytest.mark.skipif(not has_tf(), reason="needs TF")
@pytest.mark.parametrize("serializer", sorted(SERIALIZERS))
def test_a_subclassed_model_with_a_distribution_layer_round_trips_where_keras_s_own_does(
        serializer):
    import tfp_picklefix

    tfp_picklefix.patch()
    _define()
    roundtrip = SERIALIZERS[serializer]
    plain = _trained("PlainSubclassed", "mse")
    try:
        plain_copy = roundtrip(plain)
        np.testing.assert_array_equal(_mean(plain_copy(X)), _mean(plain(X)))
    except Exception as error:  # Keras's own behaviour, with or without TFP
        pytest.skip(f"Keras does not {serializer} a subclassed model of its own layers "
                    f"here: {type(error).__name__}: {str(error)[:200]}")

    model = _trained("TfpSubclassed", negloglik)
    if _keras_writes_subclassed_models_as_saved_model_or_keras_v1():
        # The known issue: the error says why, and what works; Keras's own is its cause.
        with pytest.raises(TypeError, match="Functional API or Sequential") as raised:
            roundtrip(model)
        assert "DistributionLambda" in str(raised.value)
        assert "TfpSubclassed" in str(raised.value)
        assert "Iterating over a symbolic" in str(raised.value.__cause__)  # Keras 2.7-2.10
        return
    clone = roundtrip(model)
    assert type(clone) is type(model)
    out, expected = clone(X), model(X)
    np.testing.assert_array_equal(_mean(out.mean()), _mean(expected.mean()))
    np.testing.assert_array_equal(_mean(out.stddev()), _mean(expected.stddev()))
