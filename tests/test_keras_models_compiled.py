"""F17 with the user's loss functions: Keras models holding TFP's layers, compiled with a
loss of the user's (``negloglik``, as in TFP's regression examples), on the Keras releases
where F17 writes them in Keras's HDF5 format (TF 2.5's own Keras, Keras 2.6-2.11).

That format names a function in the training configuration by its name alone, and
Keras's loader finds only its own and the registered ones: such a model was pickled or
copied, and the copy then failed to load (``Unknown loss function: negloglik``; with
TFP's ``lambda y, rv_y: -rv_y.log_prob(y)``: ``<lambda>``), or the pickle did. F17 hands
the functions to ``load_model`` as its ``custom_objects``. A lambda goes wherever the
serializer can write it (cloudpickle, ``copy``, ``deepcopy``); the standard pickle refuses
it when writing, as for any lambda; two different functions of one name are refused
when writing, with a message that says why.
"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from conftest import has_tf, tfp_keras
from roundtrips import SERIALIZERS as ALL_SERIALIZERS

X = np.linspace(-1.0, 1.0, 16, dtype=np.float32)[:, None]
Y = 2.0 * X + 0.3


def negloglik(y, rv_y):
    return -rv_y.log_prob(y)


def _f17_applies():
    """F17 writes models in HDF5 on this Keras (its steps were planned)."""
    if not has_tf():
        return False
    import tensorflow_probability as tfp

    import tfp_picklefix
    from tfp_picklefix import _keras_models

    tfp.layers.DistributionLambda  # noqa: B018 (TFP loads its layers lazily)
    tfp_picklefix.patch()
    return bool(_keras_models._LOADERS)


pytestmark = pytest.mark.skipif(not _f17_applies(),
                                reason="F17: TF 2.5's own Keras, Keras 2.6-2.11")


def _model(loss, metrics=None, **distribution_lambda):
    import tensorflow as tf
    import tensorflow_probability as tfp

    keras, tfd = tfp_keras(), tfp.distributions
    model = keras.Sequential([
        keras.layers.Dense(2, input_shape=(1,), kernel_initializer="ones"),
        tfp.layers.DistributionLambda(
            lambda t: tfd.Normal(t[..., :1], 1e-3 + tf.nn.softplus(t[..., 1:])),
            **distribution_lambda)])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=loss, metrics=metrics)
    model.fit(X, Y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return model


SERIALIZERS = {name: ALL_SERIALIZERS[name]
               for name in ("pickle", "cloudpickle", "copy", "deepcopy")}
_cloudpickle = ALL_SERIALIZERS["cloudpickle"]


def _trains_on_as_the_original(model, clone):
    """The copy has the loss, the optimizer's state (HDF5 keeps it) and the weights of
    the original, and one more epoch of each gives bitwise the same weights."""
    assert int(clone.optimizer.iterations) == int(model.optimizer.iterations) == 4
    for a, b in zip(clone.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    for each in (model, clone):
        each.fit(X, Y, epochs=1, batch_size=8, shuffle=False, verbose=0)
    for a, b in zip(clone.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("serializer", sorted(SERIALIZERS))
def test_a_model_compiled_with_a_loss_function_of_the_user_s_round_trips(serializer):
    model = _model(negloglik)
    clone = SERIALIZERS[serializer](model)
    assert clone.loss is negloglik
    _trains_on_as_the_original(model, clone)


@pytest.mark.parametrize("serializer", sorted(SERIALIZERS))
def test_a_loss_function_of_tf_round_trips(serializer):
    """A TF function that is not Keras's (Keras's loader finds only its own by name):
    the copy failed to load, ``Unknown loss function: squared_difference``."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    # The distribution's mean as the tensor the loss sees (by default it is a sample,
    # which differs from one call to the next).
    mean = tfp.distributions.Distribution.mean
    model = _model(tf.math.squared_difference, convert_to_tensor_fn=mean)
    clone = SERIALIZERS[serializer](model)
    assert clone.loss is tf.math.squared_difference
    _trains_on_as_the_original(model, clone)


@pytest.mark.parametrize("serializer", ["cloudpickle", "copy", "deepcopy"])
def test_a_lambda_loss_round_trips_where_the_serializer_writes_lambdas(serializer):
    loss = lambda y, rv_y: -rv_y.log_prob(y)  # noqa: E731 (TFP's examples do so)
    model = _model(loss)
    clone = SERIALIZERS[serializer](model)
    assert clone.loss.__code__.co_code == loss.__code__.co_code
    _trains_on_as_the_original(model, clone)


def test_the_standard_pickle_refuses_a_lambda_loss_when_writing():
    """As Python refuses any lambda: at ``dumps``, not in a later ``loads``."""
    model = _model(lambda y, rv_y: -rv_y.log_prob(y))
    with pytest.raises((pickle.PicklingError, AttributeError), match="lambda"):
        pickle.dumps(model)


def test_two_functions_of_one_name_are_refused_when_writing():
    import tensorflow as tf

    model = _model(lambda y, rv_y: -rv_y.log_prob(y),
                   metrics=[lambda y, rv_y: tf.reduce_mean(y - tf.convert_to_tensor(rv_y))])
    for roundtrip in (_cloudpickle, copy.deepcopy):
        with pytest.raises(ValueError, match="two different functions named '<lambda>'"):
            roundtrip(model)


def mean_error(y, rv_y):
    import tensorflow as tf

    return tf.reduce_mean(y - tf.convert_to_tensor(rv_y), axis=-1)


def test_a_metric_of_the_user_s_in_keras_s_wrapper_round_trips():
    """A function inside Keras's ``MeanMetricWrapper`` (public from Keras 2.6; TF 2.5's
    Keras keeps it private) is named by the file as a bare function is."""
    keras = tfp_keras()
    wrapper = getattr(keras.metrics, "MeanMetricWrapper", None)
    if wrapper is None:
        pytest.skip("this Keras has no public MeanMetricWrapper")
    model = _model(negloglik, metrics=[wrapper(mean_error, name="mean_error")])
    for roundtrip in (_cloudpickle, copy.deepcopy):
        clone = roundtrip(model)
        import tensorflow as tf

        (metric,) = tf.nest.flatten(clone.compiled_metrics._user_metrics)
        assert metric._fn is mean_error
        _trains_on_as_the_original(model, clone)
        assert clone.metrics_names == model.metrics_names
        model = _model(negloglik, metrics=[wrapper(mean_error, name="mean_error")])


def _define_classes():
    """The user's classes, at this module's top level (pickle finds classes by name),
    not registered with Keras: a layer, a Functional model's subclass, a loss and an
    optimizer."""
    if "Scale" in globals():
        return
    keras = tfp_keras()

    class Scale(keras.layers.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return dict(super().get_config(), factor=self.factor)

    class FunctionalSubclass(keras.Model):
        pass

    class NegLogLik(keras.losses.Loss):
        def call(self, y, rv_y):
            return -rv_y.log_prob(y)

    class MyAdam(keras.optimizers.Adam):
        pass

    for cls in (Scale, FunctionalSubclass, NegLogLik, MyAdam):
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls


def _functional(model_cls=None, scale=None, loss=negloglik, optimizer=None):
    import tensorflow as tf
    import tensorflow_probability as tfp

    keras, tfd = tfp_keras(), tfp.distributions
    inputs = keras.Input((1,))
    hidden = inputs if scale is None else Scale(scale)(inputs)
    hidden = keras.layers.Dense(2, kernel_initializer="ones")(hidden)
    outputs = tfp.layers.DistributionLambda(
        lambda t: tfd.Normal(t[..., :1], 1e-3 + tf.nn.softplus(t[..., 1:])))(hidden)
    model = (model_cls or keras.Model)(inputs, outputs)
    model.compile(optimizer=optimizer or keras.optimizers.Adam(0.05), loss=loss)
    model.fit(X, Y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return model


@pytest.mark.parametrize("serializer", sorted(SERIALIZERS))
def test_a_model_with_a_layer_of_the_user_s_round_trips(serializer):
    """Before: ``Unknown layer: Scale`` when the copy was read back."""
    _define_classes()
    model = _functional(scale=3.0)
    clone = SERIALIZERS[serializer](model)
    (scale,) = [layer for layer in clone.layers if isinstance(layer, Scale)]
    assert type(scale) is Scale and scale.factor == 3.0
    _trains_on_as_the_original(model, clone)


@pytest.mark.parametrize("serializer", sorted(SERIALIZERS))
def test_a_functional_model_of_the_user_s_model_class_round_trips(serializer):
    """Before: ``Unknown layer: FunctionalSubclass``."""
    _define_classes()
    model = _functional(model_cls=FunctionalSubclass)
    clone = SERIALIZERS[serializer](model)
    assert type(clone) is FunctionalSubclass
    _trains_on_as_the_original(model, clone)


@pytest.mark.parametrize("serializer", sorted(SERIALIZERS))
def test_a_loss_class_and_an_optimizer_class_of_the_user_s_round_trip(serializer):
    """Before: ``Unknown optimizer: MyAdam`` (and then ``Unknown loss function``)."""
    _define_classes()
    model = _functional(loss=NegLogLik(), optimizer=MyAdam(0.05))
    clone = SERIALIZERS[serializer](model)
    assert type(clone.optimizer) is MyAdam and type(clone.loss) is NegLogLik
    _trains_on_as_the_original(model, clone)


def test_two_classes_of_one_name_are_refused_when_writing():
    _define_classes()
    keras = tfp_keras()

    class Scale(keras.layers.Layer):  # another class of the same name as the module's
        def call(self, x):
            return x

    model = _functional(scale=3.0)
    inputs = keras.Input((1,))
    model = keras.Model(inputs, model(Scale()(inputs)))
    for roundtrip in (_cloudpickle, copy.deepcopy):
        with pytest.raises(ValueError, match="two different classes named 'Scale'"):
            roundtrip(model)


def test_a_registered_class_of_the_user_s_is_left_to_keras_s_registry():
    """Keras finds a registered class by its registered name: the pickle does not hold
    it, so a class that Python cannot pickle by reference (defined in a function) pickles
    as it did before F17 handed classes to the loader."""
    keras = tfp_keras()

    @keras.utils.register_keras_serializable(package="tfp_picklefix_tests")
    class LocalScale(keras.layers.Layer):  # a local class: the standard pickle refuses it
        def call(self, x):
            return 2.0 * x

    import tensorflow as tf
    import tensorflow_probability as tfp

    tfd = tfp.distributions
    inputs = keras.Input((1,))
    hidden = keras.layers.Dense(2, kernel_initializer="ones")(LocalScale()(inputs))
    outputs = tfp.layers.DistributionLambda(
        lambda t: tfd.Normal(t[..., :1], 1e-3 + tf.nn.softplus(t[..., 1:])))(hidden)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=negloglik)
    model.fit(X, Y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    data = pickle.dumps(model)
    assert b"LocalScale" in data  # in the HDF5 file, by its name; not as a class
    clone = pickle.loads(data)
    assert any(type(layer) is LocalScale for layer in clone.layers)
    _trains_on_as_the_original(model, clone)
