"""``python -m tfp_picklefix upstream-diff`` makes the same fix natively in a copy of TFP.

The diff is applied with ``patch -p1`` to a copy of the installed tensorflow_probability;
the cache conformance suite then runs against that copy in a fresh process that never
imports tfp_picklefix, with the same expectations as for the package's own cache.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, global_substrates, run_python


def test_upstream_diff_applies_and_passes_conformance(tmp_path):
    if not global_substrates():
        pytest.skip("needs TFP >= 0.12 (the global cache era)")
    if shutil.which("patch") is None:
        pytest.skip("the patch command is not installed")
    result = run_python("", args=["-m", "tfp_picklefix", "upstream-diff"])
    assert result.returncode == 0, result.stderr[-3000:]
    diff = result.stdout
    assert diff.startswith("--- a/tensorflow_probability/") and "+class PicklefixBijectorCache" in diff
    added = [line for line in diff.splitlines() if line.startswith("+")]
    assert not any("import tfp_picklefix" in l or "from tfp_picklefix" in l for l in added)

    import tensorflow_probability

    installed = os.path.dirname(os.path.dirname(tensorflow_probability.__file__))
    copy_root = tmp_path / "site"
    shutil.copytree(os.path.join(installed, "tensorflow_probability"),
                    copy_root / "tensorflow_probability",
                    ignore=shutil.ignore_patterns("__pycache__", "*_test.py"))
    applied = subprocess.run(["patch", "-p1", "--forward", "-d", str(copy_root)], input=diff,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr

    # The copy first; whatever else the stack's PYTHONPATH holds (on the GPU machine,
    # tfp-nightly's own needs are installed there) stays reachable.
    rest = os.environ.get("PYTHONPATH")
    pythonpath = str(copy_root) + (os.pathsep + rest if rest else "")
    env = dict(os.environ, PYTHONPATH=pythonpath, TFP_PICKLEFIX_CONFORMANCE_IMPL="native",
               TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TFP_PICKLEFIX_STACK", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
         "tests/cache_conformance.py",
         "-W", "ignore::DeprecationWarning"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-5000:]
    assert " passed" in out, out[-3000:]
    # It really ran against the copy, with the native cache, without the package.
    probe = subprocess.run(
        [sys.executable, "-c",
         "import sys, importlib; "
         "m = importlib.import_module('tensorflow_probability.substrates.numpy'); "
         "c = type(vars(m.bijectors.Bijector)['_cache']); "
         "print(c.__name__, c.__module__, 'tfp_picklefix' in sys.modules)"],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert probe.returncode == 0, probe.stderr[-3000:]
    name, module, imported = probe.stdout.split()[-3:]
    assert name == "PicklefixBijectorCache" and module.endswith("internal.cache_util"), probe.stdout
    assert imported == "False"
