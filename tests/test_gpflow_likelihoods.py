"""F20: GPflow's HeteroskedasticTFPConditional (GPflow 2.1 on), whose constructor keeps a
closure over the likelihood and its TFP distribution class.

``tests/gpflow_probe.py`` trains a heteroskedastic SVGP whose scale transform holds a
variable, sends it through pickle (protocols 5 and 0), deepcopy, GPflow's ``freeze``
(which deep-copies) and cloudpickle, and checks that the copy computes the same log
density and predictions, also after the original's variable changed. Without the
package the standard pickle fails, and a deep copy (a frozen model too) computes with
the original's scale transform.
"""
from __future__ import annotations

import pickle

import pytest

from conftest import global_substrates, has_gpflow, probe_rows

SCRIPT = "tests/gpflow_probe.py"
SERIALIZERS = ("pickle", "pickle0", "deepcopy", "cloudpickle", "freeze")


def _has_likelihood() -> bool:
    if not has_gpflow():
        return False
    import gpflow

    return hasattr(gpflow.likelihoods, "HeteroskedasticTFPConditional")


pytestmark = pytest.mark.skipif(not _has_likelihood(),
                                reason="GPflow with HeteroskedasticTFPConditional (2.1 on)")


@pytest.mark.long(30)
def test_a_heteroskedastic_svgp_round_trips_and_its_copy_keeps_its_own_state():
    assert probe_rows(SCRIPT, "roundtrip") == dict.fromkeys(SERIALIZERS, "same")


@pytest.mark.without_fix
@pytest.mark.long(30)
def test_without_the_package_pickle_fails_and_a_deep_copy_is_not_its_own():
    """TFP 0.9-0.11 fail on the bijector cache first (the package's legacy fix: TFP 0.10's
    ``HashableWeakRef``, TFP 0.11's cache lambdas); later releases on the closure, and a
    deep copy silently follows the original's variable."""
    row = probe_rows(SCRIPT, "roundtrip", env={"TFP_PICKLEFIX": "off"})
    for name in ("pickle", "deepcopy", "freeze"):
        assert row[name] != "same", row
    if "tf" in global_substrates():
        assert "Can't pickle local object" in row["pickle"], row
        assert "conditional_distribution" in row["pickle"], row
        # gpflow.utilities.freeze deep-copies: its frozen model changed with the original.
        for name in ("deepcopy", "freeze"):
            assert row[name] == "follows the original's variable", row


def test_the_pickle_loads_without_the_package(tmp_path):
    path = str(tmp_path / "svgp.pkl")
    assert probe_rows(SCRIPT, "dump", path) == {"dumped": True}
    assert probe_rows(SCRIPT, "load", path, env={"TFP_PICKLEFIX": "off"}) == {
        "same": True, "package": False}


def test_patched_by_feature_reversibly_and_once(restore_patch_state):
    import gpflow
    import tfp_picklefix
    from tfp_picklefix import _gpflow

    cls = gpflow.likelihoods.HeteroskedasticTFPConditional
    assert vars(cls).get("__reduce_ex__") is _gpflow.heteroskedastic_reduce_ex
    tfp_picklefix.unpatch()
    assert "__reduce_ex__" not in vars(cls)
    assert _gpflow._cause(cls)
    tfp_picklefix.patch()
    tfp_picklefix.patch()
    assert vars(cls).get("__reduce_ex__") is _gpflow.heteroskedastic_reduce_ex
    assert _gpflow.plan() == [(cls, "__reduce_ex__", _gpflow.heteroskedastic_reduce_ex)]


def test_a_subclass_with_a_constructor_of_its_own_is_left_to_the_default():
    """The package cannot know how to call such a constructor: pickle fails as before."""
    import gpflow

    class Mine(gpflow.likelihoods.HeteroskedasticTFPConditional):
        def __init__(self, flag):
            super().__init__()
            self.flag = flag

    likelihood = Mine(True)
    reduced = likelihood.__reduce_ex__(4)
    assert "conditional_distribution" in reduced[2]
    with pytest.raises((AttributeError, pickle.PicklingError)):
        pickle.dumps(likelihood)
