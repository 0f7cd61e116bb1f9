"""Issue 4, point 8 (legacy part): on TFP 0.11 the seed's trained SVGP predicts in worker
processes through multiprocessing (spawn) and joblib's loky backend."""
from __future__ import annotations

import pytest

from conftest import STACK, has_gpflow, run_script, substrates, era
from tfp_picklefix import _detect

pytestmark = pytest.mark.skipif(
    not (has_gpflow() and "tf" in substrates() and era("tf") == _detect.INSTANCE),
    reason="the TFP 0.11 stack with GPflow")


def test_trained_svgp_predicts_in_workers():
    if STACK != "legacy-0.11":
        pytest.importorskip("joblib")
    result = run_script(["examples/svgp_parallel.py", "--steps", "5"])
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "multiprocessing spawn: 3 chunks" in result.stdout
    assert "joblib loky: 3 chunks" in result.stdout


@pytest.mark.without_fix
def test_without_the_package_the_model_cannot_be_sent():
    result = run_script(["examples/svgp_parallel.py", "--steps", "5", "--without-fix"])
    assert result.returncode != 0
    assert "_setup_cache.<locals>.<lambda>" in result.stderr, result.stderr[-2000:]
