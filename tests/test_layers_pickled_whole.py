"""F21, F22: Keras models holding ``tfp.layers.VariationalGaussianProcess`` (TFP's Keras GP
regression, given a user's kernel provider layer) or ``tfp.layers.AutoregressiveTransform``
(a MADE flow as a layer), on every Keras 2 from TF 2.5's own.

TFP gives neither layer a config of its own, and ``DistributionLambda``'s pickles its
distribution function: a lambda over the layer itself (VGP), the layer's own bound method
(AutoregressiveTransform). That pickles the layer, with what Keras's graph holds, and
Keras's pickle, copy, deep copy and ``model.save`` failed with or without any other fix.
With the package VGP gets a config of its constructor's arguments, a ``from_config``, a
registry entry and (Keras >= 2.13) a ``build_from_config`` that builds it once;
AutoregressiveTransform a config that writes its network by cloudpickle (F10's reduction
of ``AutoregressiveNetwork``: masks drawn at random are kept), F16's ``from_config`` and a
registry entry. ``tests/layers_probe.py`` moves the model's weights off their
initial values before each round trip, and compares the copy's class, config and output
distribution (mean and spread, or a flow's log density at a fixed point).
"""
from __future__ import annotations

import pytest

from conftest import LAYERS_PICKLED_WHOLE, keras_2_version, probe_rows, tf_with_keras_2

# Keras's safe mode (Keras >= 2.13) refuses what the configs write with cloudpickle, as
# it refuses F16's functions: a user's mean function, the flow's network; and, before
# the flow, the probe's DistributionLambda (TFP pickles its function).
SAFE_MODE_REFUSES = (keras_2_version() or (0, 0)) >= (2, 13)
REFUSED = {"VariationalGaussianProcess-mean": "written with cloudpickle (mean_fn)",
           "AutoregressiveTransform": "deserialization of a Lambda layer",
           "AutoregressiveTransform-random": "deserialization of a Lambda layer"}
# What pickling the layer met without the package: Keras's graph tensors (TF 2.5's Keras
# with TFP 0.9, 0.10 and 0.12: its lock, operations or weak references), or a layer of
# tf-keras that refuses to be pickled (NotImplementedError).
CAUSES = ("Cannot pickle Tensor", "cannot pickle '_thread.RLock' object",
          "cannot pickle 'tensorflow.python._pywrap_tf_session.TF_Operation' object",
          "cannot pickle 'weakref' object", "NotImplementedError")


pytestmark = pytest.mark.skipif(not tf_with_keras_2(), reason="TFP's TF substrate with Keras 2")


def test_models_holding_them_round_trip():
    table = probe_rows("tests/layers_probe.py", *LAYERS_PICKLED_WHOLE)
    assert set(table) == set(LAYERS_PICKLED_WHOLE)
    for layer, row in table.items():
        row = dict(row)
        if layer in REFUSED:
            outcome = row.pop("keras")
            assert (REFUSED[layer] in outcome) if SAFE_MODE_REFUSES else outcome == "ok", (
                layer, outcome)
        assert set(row.values()) == {"ok"}, (layer, table[layer])


@pytest.mark.without_fix
def test_without_the_package_no_such_model_is_written():
    """Python's shallow copy of a model on TF 2.5's Keras, which shares every layer, is the
    one cell that passes there."""
    table = probe_rows("tests/layers_probe.py", *LAYERS_PICKLED_WHOLE,
                       env={"TFP_PICKLEFIX": "off"})
    assert set(table) == set(LAYERS_PICKLED_WHOLE)
    for layer, row in table.items():
        assert any(cause in row["h5"] for cause in CAUSES), (layer, row)
        for serializer, outcome in row.items():
            if serializer != "copy":
                assert outcome != "ok", (layer, serializer)


def _registry(cls):
    from tfp_picklefix import _keras_layers

    return _keras_layers._keras(cls).utils.get_custom_objects()


def test_patched_by_feature_reversibly_and_once(restore_patch_state):
    import tensorflow_probability as tfp
    import tfp_picklefix
    from tfp_picklefix import _keras_layers as kl

    vgp, flow = tfp.layers.VariationalGaussianProcess, tfp.layers.AutoregressiveTransform
    expected = {vgp: (kl.vgp_get_config, kl.VGP_FROM_CONFIG),
                flow: (kl.autoregressive_transform_get_config, kl.VARIATIONAL_FROM_CONFIG)}

    def patched():
        for cls, (get_config, from_config) in expected.items():
            assert vars(cls).get("get_config") is get_config
            assert vars(cls).get("from_config") is from_config
            assert _registry(cls).get(cls.__name__) is cls

    patched()
    tfp_picklefix.unpatch()
    for cls in expected:
        assert not {"get_config", "from_config", "build_from_config"} & set(vars(cls))
        assert cls.__name__ not in _registry(cls)
    assert kl.config_in_layer(vgp) and kl.config_in_bound_method(flow)
    assert not kl.config_in_layer(flow) and not kl.config_in_bound_method(vgp)
    tfp_picklefix.patch()
    tfp_picklefix.patch()
    patched()


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

    class MyFlow(tfp.layers.AutoregressiveTransform):
        def __init__(self, hidden):
            super().__init__(tfp.bijectors.AutoregressiveNetwork(params=2, hidden_units=[hidden]))

    for layer, ours in ((Mine(Provider()), tfp.layers.VariationalGaussianProcess(3, Provider())),
                        (MyFlow(4), tfp.layers.AutoregressiveTransform(
                            tfp.bijectors.AutoregressiveNetwork(params=2, hidden_units=[4])))):
        # Not built: TFP's config pickles the function over the layer.
        config = layer.get_config()
        assert "make_distribution_fn" in config, config
        assert not {"get_config", "from_config"} & set(vars(type(layer)))
        assert "make_distribution_fn" not in ours.get_config()
