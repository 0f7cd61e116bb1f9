"""F23: Keras models compiled with ``tfp.optimizer.VariationalSGD``, on every Keras 2
from TF 2.5's own.

TFP's ``get_config`` of that optimizer is ``pass`` (a TODO of TFP's), so Keras could
write no model compiled with it (``should return a dict. It returned: None``; Keras 2.9
and TF 2.5's Keras wrote it and then failed on load: ``Unknown optimizer:
VariationalSGD``). With the package it gets a config of its constructor's arguments
(their dtypes kept), a ``from_config`` and its entry in Keras's registry.
``tests/optimizers_probe.py`` runs the same models compiled with Keras's own Adam beside
it: whatever Keras keeps of an optimizer in a format (its variables in HDF5, none in a
pickle on tf-keras) it keeps of this one, and the copy trains on bitwise as the original
(or, where Keras keeps no optimizer variables, as the original's weights with a new
optimizer of the original's arguments).
"""
from __future__ import annotations

import sys

import pytest

from conftest import probe_rows, tf_with_keras_2

pytestmark = pytest.mark.skipif(not tf_with_keras_2(), reason="TFP's TF substrate with Keras 2")

OPTIMIZER = {"dense": "VariationalSGD-float64", "distribution": "VariationalSGD"}
# What Keras said without the package: the config it was handed (tf-keras, Keras 2.11 on),
# HDF5's writer, or its loader (Keras 2.9 and TF 2.5's Keras wrote the model).
CAUSES = ("should return a dict. It returned", "object of type 'NoneType' has no len()",
          "Unknown optimizer: VariationalSGD")


def _rows(table):
    """{model: (VariationalSGD's row, Adam's row)}."""
    assert set(table) == {f"{model}/{name}" for model, name in OPTIMIZER.items()} | {
        f"{model}/Adam" for model in OPTIMIZER}, table
    return {model: (table[f"{model}/{name}"], table[f"{model}/Adam"])
            for model, name in OPTIMIZER.items()}


def test_models_compiled_with_it_round_trip_as_with_keras_s_own_optimizer():
    """Every cell as Adam's (the same outcome, the same optimizer state kept or dropped,
    the same error where Keras cannot write the model: TF 2.5's Keras pickles no plain
    model), and HDF5, which keeps the optimizer's variables, everywhere."""
    for model, (ours, adam) in _rows(probe_rows("tests/optimizers_probe.py")).items():
        assert ours == adam, (model, ours, adam)
        assert ours["h5"] == "ok (state kept)", (model, ours)
        assert sum(outcome.startswith("ok") for outcome in ours.values()) >= 3, (model, ours)


@pytest.mark.without_fix
def test_without_the_package_no_such_model_is_written():
    """Python's shallow copy of a model on TF 2.5's Keras, which shares the optimizer, is
    the one cell that passes there."""
    rows = _rows(probe_rows("tests/optimizers_probe.py", env={"TFP_PICKLEFIX": "off"}))
    for model, (ours, adam) in rows.items():
        assert any(outcome.startswith("ok") for outcome in adam.values()), (model, adam)
        for serializer, outcome in ours.items():
            if adam[serializer].startswith("ok") and outcome != "ok (the same optimizer)":
                assert any(cause in outcome for cause in CAUSES), (model, serializer, outcome)


def _registry(cls):
    from tfp_picklefix import _keras_optimizers

    return _keras_optimizers._keras_of(sys.modules[cls.__module__]).utils.get_custom_objects()


def test_patched_by_feature_reversibly_and_once(restore_patch_state):
    import tensorflow_probability as tfp
    import tfp_picklefix
    from tfp_picklefix import _keras_optimizers as ko

    classes = (tfp.optimizer.VariationalSGD, tfp.optimizer.StochasticGradientLangevinDynamics)

    def patched():
        for cls in classes:
            assert vars(cls).get("get_config") is ko.optimizer_get_config
            assert vars(cls).get("from_config") is ko.OPTIMIZER_FROM_CONFIG
            assert _registry(cls).get(cls.__name__) is cls

    patched()
    tfp_picklefix.unpatch()
    for cls in classes:
        assert ko.config_returns_none(cls), cls
        assert vars(cls)["get_config"] is not ko.optimizer_get_config
        assert "from_config" not in vars(cls)
        assert cls.__name__ not in _registry(cls)
    assert tfp.optimizer.VariationalSGD(batch_size=4, total_num_examples=16).get_config() is None
    tfp_picklefix.patch()
    tfp_picklefix.patch()
    patched()
    # Keras's own optimizers, whose configs are their own, are left alone.
    keras = ko._keras_of(sys.modules[classes[0].__module__])
    assert not ko.config_returns_none(type(keras.optimizers.SGD()))


def test_sgld_in_a_tf1_graph_gets_its_arguments_back():
    """``StochasticGradientLangevinDynamics`` (TF1 graphs only: its constructor refuses
    eager execution) shows the same cause: its config is read from its constant tensors
    there, and an argument that is not a constant is refused with a clear error."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp

    sgld = tfp.optimizer.StochasticGradientLangevinDynamics
    with tf.Graph().as_default():
        optimizer = sgld(learning_rate=np.float64(0.01), burnin=3, data_size=7)
        config = optimizer.get_config()
        assert config["learning_rate"] == 0.01 and config["dtypes"]["learning_rate"] == "float64"
        assert (config["burnin"], config["data_size"]) == (3, 7), config
        again = sgld.from_config(config)
        assert again.get_config() == config
        assert again._learning_rate.dtype == tf.float64
        fed = sgld(learning_rate=tf.compat.v1.placeholder_with_default(
            np.float32(0.01), shape=[]))
        with pytest.raises(TypeError, match="'learning_rate' is not a constant"):
            fed.get_config()


def test_a_subclass_with_a_constructor_of_its_own_keeps_tfp_s_config():
    """The package cannot know how to call such a constructor: TFP's own config (None),
    as without the package; a subclass without one gets the class's."""
    import tensorflow_probability as tfp

    class Mine(tfp.optimizer.VariationalSGD):
        def __init__(self, size):
            super().__init__(batch_size=size, total_num_examples=4 * size)

    class Plain(tfp.optimizer.VariationalSGD):
        pass

    assert Mine(4).get_config() is None
    config = Plain(batch_size=4, total_num_examples=16).get_config()
    assert (config["batch_size"], config["total_num_examples"]) == (4, 16), config
    assert Plain.from_config(config).get_config() == config
