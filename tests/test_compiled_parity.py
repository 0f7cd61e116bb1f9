"""Compiled paths run exactly what they ran without the package.

Inside ``tf.function``, XLA and ``jax.jit`` the bijector cache only runs while tracing:
if the traced graph (jaxpr) is identical with and without the package, in every
caching mode, the compiled run time cannot depend on it. The benchmark runner measures
the same (benchmarks/results); this test shows it without timing anything.
"""
from __future__ import annotations

import json

import pytest

from conftest import LEGACY_ERAS, era, run_script, substrates

# Not "off": with no cache at all a round trip inverse(forward(x)) recomputes instead of
# returning x, so its graphs differ by design (that mode is a diagnostic baseline).
MODES = ["fixed", "upstream"]


def _graphs(sub, package, mode=None):
    env = {"TFP_PICKLEFIX_CACHE": mode} if mode else {}
    result = run_script(["tests/compiled_graphs.py", "--substrate", sub]
                        + ([] if package else ["--no-package"]), env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("sub", ["tf", "jax"])
def test_traced_graphs_are_identical_with_and_without_the_package(sub):
    if sub not in substrates():
        pytest.skip(f"TFP's {sub} substrate is not installed in this stack")
    baseline = _graphs(sub, package=False)
    assert len(baseline) >= 20
    modes = [None] if era(sub) in LEGACY_ERAS else MODES
    for mode in modes:
        with_package = _graphs(sub, package=True, mode=mode)
        differ = sorted(k for k in baseline if with_package.get(k) != baseline[k])
        assert not differ, f"mode {mode}: traced graphs differ for {differ}"
