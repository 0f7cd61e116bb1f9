"""F21: Keras models holding ``tfp.layers.VariationalGaussianProcess`` (TFP's own
example of a Keras GP regression, with a user's kernel provider layer).

TFP gives the layer no config of its own: ``DistributionLambda``'s pickles its
distribution function, a lambda over the layer itself, and so the tensors of Keras's
graph (``Cannot pickle Tensor``), and Keras's pickle, copy, deep copy and
``model.save`` fail with or without any other fix. With the package the layer gets a
config of its constructor's arguments, a ``from_config``, a registry entry and (Keras >=
2.13) a ``build_from_config`` that builds it once. ``tests/layers_probe.py`` moves the
model's weights off their constant initializers before each round trip, and compares
the copy's class, config, mean and spread.
"""
from __future__ import annotations

import pytest

from conftest import has_module, has_tf, keras_2_version, probe_rows

F21 = ("VariationalGaussianProcess", "VariationalGaussianProcess-mean")
# Keras's safe mode (Keras >= 2.13) refuses a user's mean function, which the config
# writes with cloudpickle, as it refuses F16's functions.
SAFE_MODE_REFUSES = (keras_2_version() or (0, 0)) >= (2, 13)
UNSAFE = "written with cloudpickle (mean_fn)"


def _keras_2() -> bool:
    """Keras 2 with TFP's layers: tf-keras, or TF's own Keras 2 (TF 2.5 on)."""
    if not has_tf():
        return False
    if has_module("tf_keras"):
        return True
    import tensorflow as tf

    return str(getattr(tf.keras, "__version__", "2.")).startswith("2.")


pytestmark = pytest.mark.skipif(not _keras_2(), reason="TFP's TF substrate with Keras 2")


def test_a_variational_gaussian_process_model_round_trips():
    table = probe_rows("tests/layers_probe.py", *F21)
    assert set(table) == set(F21)
    for layer, row in table.items():
        row = dict(row)
        if layer.endswith("-mean"):
            outcome = row.pop("keras")
            assert (UNSAFE in outcome) if SAFE_MODE_REFUSES else outcome == "ok", (layer, outcome)
        assert set(row.values()) == {"ok"}, (layer, table[layer])


def test_without_the_package_no_such_model_is_written():
    """TFP's config pickles the layer, and so what Keras's graph holds: its tensors, or
    (TF 2.5's Keras, TFP 0.9 and 0.10) its lock or operations. Python's shallow copy of
    a model on TF 2.5's Keras, which shares every layer, is the one cell that passes
    there."""
    table = probe_rows("tests/layers_probe.py", *F21, env={"TFP_PICKLEFIX": "off"})
    assert set(table) == set(F21)
    for layer, row in table.items():
        assert any(cause in row["h5"] for cause in (
            "Cannot pickle Tensor", "cannot pickle '_thread.RLock' object",
            "cannot pickle 'tensorflow.python._pywrap_tf_session.TF_Operation' object")), (
                layer, row)
        for serializer, outcome in row.items():
            if serializer != "copy":
                assert outcome != "ok", (layer, serializer)


def test_patched_by_feature_reversibly_and_once(restore_patch_state):
    import tensorflow_probability as tfp
    import tfp_picklefix
    from tfp_picklefix import _keras_layers

    cls = tfp.layers.VariationalGaussianProcess
    registry = _keras_layers._keras(cls).utils.get_custom_objects()
    assert vars(cls).get("get_config") is _keras_layers.vgp_get_config
    assert vars(cls).get("from_config") is _keras_layers.VGP_FROM_CONFIG
    assert registry.get("VariationalGaussianProcess") is cls
    tfp_picklefix.unpatch()
    assert not {"get_config", "from_config", "build_from_config"} & set(vars(cls))
    assert "VariationalGaussianProcess" not in registry
    assert _keras_layers.config_in_layer(cls)
    tfp_picklefix.patch()
    tfp_picklefix.patch()
    assert vars(cls).get("get_config") is _keras_layers.vgp_get_config
    assert registry.get("VariationalGaussianProcess") is cls


def test_a_subclass_with_a_constructor_of_its_own_keeps_tfp_s_config():
    """The package cannot know how to call such a constructor: TFP's own config (its
    pickled distribution function), as without the package."""
    import tensorflow_probability as tfp
    from tfp_picklefix import _keras_layers

    keras = _keras_layers._keras(tfp.layers.VariationalGaussianProcess)

    class Provider(keras.layers.Layer):
        @property
        def kernel(self):
            return tfp.math.psd_kernels.ExponentiatedQuadratic(amplitude=1.0)

    class Mine(tfp.layers.VariationalGaussianProcess):
        def __init__(self, kernel_provider):
            super().__init__(3, kernel_provider)

    config = Mine(Provider()).get_config()  # not built: TFP's pickles the lambda over it
    assert "make_distribution_fn" in config and "num_inducing_points" not in config
    assert not {"get_config", "from_config"} & set(vars(Mine))
    assert "num_inducing_points" in tfp.layers.VariationalGaussianProcess(
        3, Provider()).get_config()
