"""Issue 4, points 5, 6, 8: checkpoints, gradients and worker processes (TF 2.x + GPflow).

Run in fresh processes (``tests/model_scenarios.py``) on the stacks with GPflow and
TFP >= 0.12.
"""
from __future__ import annotations

import json
import os

import pytest

from conftest import STACK, ROOT, global_substrates, has_gpflow, run_script

pytestmark = pytest.mark.skipif(
    not (has_gpflow() and "tf" in global_substrates()),
    reason="needs GPflow on TFP >= 0.12 (the modern stack)")

ENV = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tests"), ROOT])}


def _scenario(*args, env=None, expect_ok=True):
    result = run_script(["tests/model_scenarios.py", *args], env=dict(ENV, **(env or {})),
                        timeout=900)
    if not expect_ok:
        return result
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.long(40)
def test_checkpoint_keys_identical_with_and_without_the_package(tmp_path):
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    with_package = _scenario("checkpoint-keys", str(tmp_path / "on"))
    without = _scenario("checkpoint-keys", str(tmp_path / "off"), env={"TFP_PICKLEFIX": "off"})
    assert with_package == without
    assert all(len(keys) > 3 for keys in with_package.values())


def test_checkpoint_of_the_original_restores_into_the_unpickled_copy(tmp_path):
    table = _scenario("checkpoint-restore", str(tmp_path))
    for name, row in table.items():
        assert row == {"n": row["n"], "restored": True, "changed": True, "saved_model": True}, name
        assert row["n"] >= 5


@pytest.mark.without_fix
def test_checkpoint_restore_needs_the_package(tmp_path):
    result = _scenario("checkpoint-restore", str(tmp_path), env={"TFP_PICKLEFIX": "off"},
                       expect_ok=False)
    assert result.returncode != 0


def test_gradients_equal_after_round_trips():
    table = _scenario("gradients")
    assert set(table) == {"gpr", "svgp", "vgp", "transformed_distribution"}
    for model, row in table.items():
        for serializer, cell in row.items():
            assert cell["n"] >= 2 and cell["none"] == 0 and cell["same"], (model, serializer, cell)


def test_training_resumed_from_a_pickle_matches_uninterrupted_training():
    table = _scenario("resume")
    for model, row in table.items():
        assert row["same"], (model, row)


@pytest.mark.long(60)
def test_models_predict_the_same_in_worker_processes():
    if STACK != "modern":
        pytest.importorskip("joblib")
        pytest.importorskip("distributed")
    table = _scenario("workers")
    assert set(table) == {"spawn", "loky", "dask"}
    for backend, row in table.items():
        assert row["in_another_process"], backend
        assert row["svgp"] < 1e-9 and row["td"] < 1e-5, (backend, row)
