"""F10: normalizing flows built on TFP's Keras ``AutoregressiveNetwork`` (TFP >= 0.12, TF).

A ``TransformedDistribution`` of a ``Chain`` holding a ``MaskedAutoregressiveFlow`` with
a built network (``tests/flows_probe.py``) goes through pickle, copy, deepcopy,
cloudpickle and dill: the copy computes the same values, has variables of its own
with the same values (shared only by ``copy.copy``), writes the same checkpoint keys,
restores the original's checkpoint, and trains on like the original with its masks
kept. Without the package every serializer but ``copy.copy`` fails.
"""
from __future__ import annotations


import pytest

from conftest import global_substrates, has_module, probe_rows

pytestmark = pytest.mark.skipif(not ("tf" in global_substrates() and has_module("tf_keras")),
                                reason="TFP >= 0.12 with TF and tf-keras (the modern stacks)")

SCRIPT = "tests/flows_probe.py"
DEEP = {"variables": [4, 4], "shared": 0, "equal": True, "same_attributes": True,
        "same_checkpoint_keys": True,
        "restored": True, "trained_equal": True, "masked_kernels_zero": True}
SHALLOW = {"variables": [4, 4], "shared": 4, "equal": True, "same_attributes": True,
           "same_checkpoint_keys": True,
           "restored": True}


def _rows(*args, env=None):
    return probe_rows(SCRIPT, *args, env=env)


@pytest.mark.parametrize("order", ["left-to-right", "random"])
def test_a_flow_with_a_keras_network_round_trips(order):
    rows = _rows("roundtrip", order)
    expected = {name: SHALLOW if name == "copy" else DEEP
                for name in ("pickle", "copy", "deepcopy", "cloudpickle", "dill")}
    assert rows == expected


def test_without_the_package_only_the_shallow_copy_works():
    rows = _rows("roundtrip", env={"TFP_PICKLEFIX": "off"})
    assert rows.pop("copy") == SHALLOW
    assert all("error" in row for row in rows.values()), rows


def test_the_package_without_f10_fails_on_the_keras_side():
    """The Keras model inside the layer is what fails: its saving format cannot load
    TFP's mask closures (with the package's other fixes in place)."""
    rows = _rows("roundtrip", env={"TFP_PICKLEFIX_PROBE_F10": "0"})
    assert rows.pop("copy") == SHALLOW
    for name, row in rows.items():
        assert "Unknown initializer: 'masked_initializer'" in row.get("error", ""), (name, row)


def test_the_pickle_loads_without_the_package(tmp_path):
    path = str(tmp_path / "flow.pkl")
    assert _rows("dump", path) == {"dumped": True}
    assert _rows("load", path, env={"TFP_PICKLEFIX": "off"}) == {"loaded": True,
                                                                 "package": False}
