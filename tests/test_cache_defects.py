"""The upstream cache's defects under load, in fresh processes (thread stress, graph leaks).

Each test runs with this package's cache ("fixed") and must pass; the same test with
TFP's own cache ("upstream") is expected to fail, which shows the test can fail.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import re

import pytest

from tfp_picklefix import _detect

from conftest import global_substrates, has_gpflow, run_script

# Issue 3's loads (16 threads for 30 s; 2000 discarded traces). The matrix lowers them on
# the stacks that issue 3 does not name (scripts/matrix.py), to keep CI's time in bounds.
THREAD_SECONDS = float(os.environ.get("TFP_PICKLEFIX_THREAD_SECONDS", "30"))
LEAK_TRACES = int(os.environ.get("TFP_PICKLEFIX_LEAK_TRACES", "2000"))


def _run(args, mode):
    result = run_script(args, env={"TFP_PICKLEFIX_CACHE": mode, "TF_CPP_MIN_LOG_LEVEL": "3"},
                        timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def _threads_ok(report, stderr):
    assert report["calls"] > 0 and report["clears"] > 0
    assert report["none"] == 0, report
    assert report["wrong"] == 0, report
    assert report["exceptions"] == {}, report
    assert report["unraisable"] == 0, report
    assert "Exception ignored" not in stderr
    assert report["entries_left"] == 0, report


# Python switches threads every 5 ms by default (the 16 threads for 30 s run so);
# at 1e-6 s every call is preempted many times over: fewer calls, far more interleavings
# of each. There TFP's own cache failed 19 of 20 runs of 10 s (2026-12-07, on a loaded
# machine; its TF and NumPy substrates on modern, NumPy and JAX on jax-nightly: KeyErrors
# in clear() and in weakref callbacks, entries left); at the default interval it fails
# most runs, not all (test_threads_upstream).
FAST_SWITCH = ["--switch-interval", "1e-6"]


@pytest.mark.long(40)
@pytest.mark.parametrize("switch", ["default", "fast"])
@pytest.mark.parametrize("sub", global_substrates() or [pytest.param(None, id="none")])
def test_threads_fixed(sub, switch):
    """16 threads x 30 s, shared and fresh inputs, Chain/Exp/Softplus, clear() racing;
    and 10 s with threads switched every microsecond."""
    if sub is None:
        pytest.skip("no substrate in the global cache era (TFP >= 0.12) here")
    seconds = THREAD_SECONDS if switch == "default" else min(THREAD_SECONDS, 10.0)
    report, stderr = _run(["tests/stress_threads.py", "--substrate", sub, "--threads", "16",
                           "--seconds", str(seconds)] + (FAST_SWITCH if switch == "fast" else []),
                          "fixed")
    _threads_ok(report, stderr)


# Not strict: in one CI run of 2026-12-07 TFP's own cache passed this (NumPy substrate,
# default interval), and in one of the 20 runs above (TF, 260 calls in 10 s) too.
@pytest.mark.parametrize("sub", global_substrates() or [pytest.param(None, id="none")])
@pytest.mark.xfail(strict=False, reason="TFP's own cache: None results, KeyErrors in clear() "
                                        "and weakref callbacks, entries left (timing-dependent)")
@pytest.mark.without_fix
def test_threads_upstream(sub):
    if sub is None:
        pytest.skip("no substrate in the global cache era (TFP >= 0.12) here")
    report, stderr = _run(["tests/stress_threads.py", "--substrate", sub, "--threads", "16",
                           "--seconds", "10"], "upstream")
    _threads_ok(report, stderr)


def _needs_tf_global():
    if "tf" not in global_substrates():
        pytest.skip("needs TF with TFP >= 0.12")


@pytest.mark.long(300)
def test_no_funcgraph_leak_chain_traces():
    """2000 (LEAK_TRACES) discarded tf.functions through a Chain: <= 2 live FuncGraphs,
    and no more RSS growth than the same loop with no cache at all plus 20 MB."""
    _needs_tf_global()
    args = ["tests/leak_traces.py", "--scenario", "chain", "--n", str(LEAK_TRACES)]
    # Two independent processes, each measuring its own graphs and RSS: side by side
    # (about 2 minutes each).
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(_run, args, mode) for mode in ("fixed", "off")]
        (fixed, _), (off, _) = [run.result() for run in runs]
    assert fixed["funcgraphs"] <= 2, fixed
    assert fixed["rss_growth_mb"] - off["rss_growth_mb"] < 20.0, (fixed, off)


@pytest.mark.long(40)
@pytest.mark.parametrize("scenario,n", [("chain-arg", 500), ("transformed", 300)])
def test_no_funcgraph_leak_other_scenarios(scenario, n):
    """No more traces than LEAK_TRACES (lowered on the stacks issue 3 does not name)."""
    _needs_tf_global()
    n = min(n, LEAK_TRACES)
    report, _ = _run(["tests/leak_traces.py", "--scenario", scenario, "--n", str(n)], "fixed")
    assert report["funcgraphs"] <= 2, report


@pytest.mark.long(40)
def test_no_funcgraph_leak_gpflow_training_closures():
    _needs_tf_global()
    if not has_gpflow():
        pytest.skip("GPflow is not installed")
    report, _ = _run(["tests/leak_traces.py", "--scenario", "gpflow", "--n", "100"], "fixed")
    assert report["funcgraphs"] <= 2, report


# Measured: TFP 0.12, 0.17 and 0.20 do not keep them in this test (at most 2 live
# FuncGraphs after 100 traces, on mid-0.12, mid-0.17 and mid-0.20); 0.23, 0.24, 0.25 and
# nightly do.
_RELEASE = re.match(r"(\d+)\.(\d+)", _detect.tfp_version())
_LEAKS_UPSTREAM = _RELEASE is None or (int(_RELEASE[1]), int(_RELEASE[2])) >= (0, 23)


@pytest.mark.without_fix
@pytest.mark.xfail(strict=_LEAKS_UPSTREAM, reason="TFP's own cache keeps every traced FuncGraph alive")
def test_funcgraph_leak_upstream():
    _needs_tf_global()
    report, _ = _run(["tests/leak_traces.py", "--scenario", "chain", "--n", "100"], "upstream")
    assert report["funcgraphs"] <= 2, report
