"""Issue 4, point 9 (stretch): tf-keras models with tfp.layers.

Keras pickles and copies a model through its own saving format (``get_config`` and
the registry of serializable classes), not through TFP's objects. What passes is
checked; what fails is checked to fail for the reason the README gives, so that the
README stays true when TFP or Keras change.
"""
from __future__ import annotations

import json

import pytest

from conftest import global_substrates, has_module, run_python

pytestmark = pytest.mark.skipif(not ("tf" in global_substrates() and has_module("tf_keras")),
                                reason="tf-keras with TFP >= 0.12 (the modern stacks)")

# layer -> text of the Keras-side error (README, "tfp.layers").
KERAS_SIDE = {
    "MultivariateNormalTriL": "must be an instance of class Layer",  # not registered with Keras
    "DenseFlipout": "must be an instance of class Layer",
    "DenseVariational": "non-serializable argument values",  # user functions in __init__
}


def test_tfp_layers_models():
    result = run_python("", args=["tests/layers_probe.py"])
    assert result.returncode == 0, result.stderr[-3000:]
    table = json.loads(result.stdout.strip().splitlines()[-1])
    for layer in ("DistributionLambda", "IndependentNormal"):
        assert set(table[layer].values()) == {"ok"}, (layer, table[layer])
    for layer, reason in KERAS_SIDE.items():
        for serializer, outcome in table[layer].items():
            assert reason in outcome, (layer, serializer, outcome)
