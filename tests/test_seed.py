"""The seed scenario (examples/svgp_pickle.py), verbatim, on the stack under test."""
from __future__ import annotations

import os

import pytest

from conftest import LEGACY_ERAS, era, has_gpflow, run_script


@pytest.fixture(scope="module")
def pickled_model(tmp_path_factory):
    if not has_gpflow():
        pytest.skip("this stack has no TensorFlow/GPflow")
    out = str(tmp_path_factory.mktemp("seed") / "model.pkl")
    result = run_script(["examples/svgp_pickle.py", "--out", out])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert "copy.deepcopy(model) predicts the same" in result.stdout
    assert "freeze, deepcopy and reset_cache_bijectors still work" in result.stdout
    return out


def test_trained_svgp_pickles(pickled_model):
    assert os.path.getsize(pickled_model) > 0
    with open(pickled_model, "rb") as f:
        assert b"tfp_picklefix" not in f.read()


def test_loads_in_a_process_without_the_package(pickled_model):
    # svgp_load.py asserts tfp_picklefix never got imported, compares predict_f with the
    # original's, and trains on, requiring a gradient for every trainable variable.
    result = run_script(["examples/svgp_load.py", pickled_model])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert "predicts the same mean and variance" in result.stdout
    assert "has a gradient" in result.stdout


@pytest.mark.without_fix
def test_seed_fails_without_the_package(tmp_path):
    if not has_gpflow():
        pytest.skip("this stack has no TensorFlow/GPflow")
    if era("tf") not in LEGACY_ERAS:
        pytest.skip("TFP >= 0.12 pickles a trained SVGP without the package")
    result = run_script(["examples/svgp_pickle.py", "--without-fix", "--out",
                         str(tmp_path / "m.pkl")])
    assert result.returncode != 0
    assert ("cannot pickle 'HashableWeakRef' object" in result.stderr
            or "Can't pickle local object 'Bijector._setup_cache" in result.stderr), \
        result.stderr[-3000:]
