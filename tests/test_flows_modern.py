"""F10 and F12: flows and distributions built on TFP's Keras networks (TFP >= 0.12, TF).

F10, ``AutoregressiveNetwork``:
A ``TransformedDistribution`` of a ``Chain`` holding a ``MaskedAutoregressiveFlow`` with
a built network (``tests/flows_probe.py``) goes through pickle, copy, deepcopy,
cloudpickle and dill: the copy computes the same values, has variables of its own
with the same values (shared only by ``copy.copy``), writes the same checkpoint keys,
restores the original's checkpoint, and trains on like the original with its masks
kept. Without the package every serializer but ``copy.copy`` fails.

F12 (Glow's default networks) and F10 again (PixelCNN's network layer), through
``tests/networks_probe.py``: the same checks, and a deep copy that does not change
when the original does.
"""
from __future__ import annotations


import pytest

from conftest import global_substrates, has_keras_2, probe_rows

pytestmark = pytest.mark.skipif(not ("tf" in global_substrates() and has_keras_2()),
                                reason="TFP >= 0.12 with TF and Keras 2 (tf-keras, or TF <= 2.15's keras)")

SCRIPT = "tests/flows_probe.py"
DEEP = {"variables": [4, 4], "shared": 0, "equal": True, "same_attributes": True,
        "same_checkpoint_keys": True,
        "restored": True, "same_masks": True, "trained_equal": True, "masked_kernels_zero": True}
SHALLOW = {"variables": [4, 4], "shared": 4, "equal": True, "same_attributes": True,
           "same_checkpoint_keys": True,
           "restored": True}


def _rows(*args, env=None):
    return probe_rows(SCRIPT, *args, env=env)


@pytest.mark.parametrize("order,degrees", [("left-to-right", "equal"), ("random", "equal"),
                                           ("left-to-right", "random")])
def test_a_flow_with_a_keras_network_round_trips(order, degrees):
    """A random input order is kept as drawn; so are the masks random hidden degrees drew."""
    rows = _rows("roundtrip", order, degrees)
    expected = {name: SHALLOW if name == "copy" else DEEP
                for name in ("pickle", "copy", "deepcopy", "cloudpickle", "dill")}
    assert rows == expected


@pytest.mark.without_fix
def test_without_the_package_only_the_shallow_copy_works():
    rows = _rows("roundtrip", env={"TFP_PICKLEFIX": "off"})
    assert rows.pop("copy") == SHALLOW
    assert all("error" in row for row in rows.values()), rows


@pytest.mark.without_fix
def test_the_package_without_f10_fails_on_the_keras_side():
    """The Keras model inside the layer is what fails: its saving format cannot load
    TFP's mask closures (with the package's other fixes in place)."""
    rows = _rows("roundtrip", env={"TFP_PICKLEFIX_PROBE_F10": "0"})
    assert rows.pop("copy") == SHALLOW
    for name, row in rows.items():
        # Keras >= 2.13: "Unknown initializer: 'masked_initializer'"; Keras 2.12 names
        # it in the config it could not deserialize.
        assert "'masked_initializer'" in row.get("error", ""), (name, row)


def test_the_pickle_loads_without_the_package(tmp_path):
    path = str(tmp_path / "flow.pkl")
    assert _rows("dump", path) == {"dumped": True}
    assert _rows("load", path, env={"TFP_PICKLEFIX": "off"}) == {"loaded": True,
                                                                 "package": False}


# F12 and F10 again: a Glow with TFP's default Keras networks, each called by a TFP
# closure (F11) as well as tracked by the bijectors, and a PixelCNN, whose network layer
# holds a functional Keras model and a TFP closure (``tests/networks_probe.py``).
NETWORKS = "tests/networks_probe.py"
COUNTS = {"glow": {"variables": [24, 24], "networks": [3, 3]},
          "pixelcnn": {"variables": [60, 60], "networks": [1, 1]}}


def _deep(model):
    return dict(COUNTS[model], shared=0, equal=True, same_networks=True,
                same_checkpoint_keys=True, restored=True, trained_equal=True, independent=True)


def _shallow(model):
    return dict(COUNTS[model], shared=COUNTS[model]["variables"][0], equal=True,
                same_networks=True, same_checkpoint_keys=True, restored=True)


@pytest.mark.parametrize("model", ["glow", "pixelcnn"])
def test_a_model_on_tfp_s_keras_networks_round_trips(model):
    """Same values (samples for the same seed), variables of its own with the same
    values, the same networks (class, attributes, weights; Glow's also names and
    configs), the same checkpoint keys; restores the original's checkpoint, trains on
    like the original, and does not change when the original does."""
    rows = probe_rows(NETWORKS, "roundtrip", model)
    assert rows == {name: _shallow(model) if name == "copy" else _deep(model)
                    for name in ("pickle", "copy", "deepcopy", "cloudpickle", "dill")}


@pytest.mark.without_fix
@pytest.mark.parametrize("model", ["glow", "pixelcnn"])
def test_without_the_package_such_a_model_only_copies_shallowly(model):
    rows = probe_rows(NETWORKS, "roundtrip", model, env={"TFP_PICKLEFIX": "off"})
    assert rows.pop("copy") == _shallow(model)
    assert all("error" in row for row in rows.values()), rows


@pytest.mark.parametrize("model, errors", [
    # Keras writes the networks in its own format and calls their constructors with
    # ``name=``, which they do not take.
    ("glow", ("unexpected keyword argument 'name'",)),
    # Keras cannot make PixelCNN's functional model again from its config: it finds
    # TFP's weight-norm layer by its name only through F15 (before: "'str' object is not
    # callable"; Keras 2.12: "Unknown layer: 'WeightNorm'"), and then not the lambda that
    # PixelCNN gives its convolutions as their kernel constraint (the message, which the
    # probe cuts at 300 characters, ends "Unknown constraint: '__lambda__'").
    ("pixelcnn", ("'str' object is not callable", "Unknown layer: 'WeightNorm'",
                  "Error when deserializing class 'Conv2D'"))])
@pytest.mark.without_fix
def test_the_package_without_the_network_reducers_fails_on_the_keras_side(model, errors):
    rows = probe_rows(NETWORKS, "roundtrip", model, env={"TFP_PICKLEFIX_PROBE_NETWORK": "0"})
    assert rows.pop("copy") == _shallow(model)
    for name in ("deepcopy", "cloudpickle", "dill"):
        assert any(e in rows[name].get("error", "") for e in errors), (name, rows[name])
    assert "error" in rows["pickle"], rows["pickle"]


@pytest.mark.without_fix
def test_without_f11_a_deep_copy_of_a_glow_calls_the_original_networks():
    """Glow's coupling functions are TFP closures over the networks. A deep copy used to
    share them, so the copy computed with the original's networks (and trained
    nothing of its own); F11 makes them again over the copied networks."""
    rows = probe_rows(NETWORKS, "roundtrip", "glow", env={"TFP_PICKLEFIX_PROBE_F11": "0"})
    assert "Can't pickle local object" in rows["pickle"]["error"] or (
        "Can't get local object" in rows["pickle"]["error"])
    assert rows["deepcopy"] == dict(_deep("glow"), trained_equal=False, independent=False)
    assert rows["cloudpickle"] == rows["dill"] == _deep("glow")


@pytest.mark.parametrize("model", ["glow", "pixelcnn"])
def test_a_pickled_model_on_tfp_s_keras_networks_loads_without_the_package(model, tmp_path):
    path = str(tmp_path / f"{model}.pkl")
    assert probe_rows(NETWORKS, "dump", model, path) == {"dumped": True}
    assert probe_rows(NETWORKS, "load", model, path,
                      env={"TFP_PICKLEFIX": "off"}) == {"loaded": True, "package": False}
