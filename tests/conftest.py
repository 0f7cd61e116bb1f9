"""Shared helpers. Tests run against the real TF/TFP/GPflow of the stack they are in.

``TFP_PICKLEFIX_STACK`` (set by scripts/matrix.py) names that stack, so that a stack
which silently lost its TFP (or got another era) fails instead of skipping.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import pytest

import tfp_picklefix
from tfp_picklefix import _check, _detect

STACK = os.environ.get("TFP_PICKLEFIX_STACK", "")
# tests/layers_probe.py's layers whose TFP config pickled the layer itself (F21, F22):
# tests/test_layers_pickled_whole.py runs them on every Keras 2, test_layers.py the others.
LAYERS_PICKLED_WHOLE = ("VariationalGaussianProcess", "VariationalGaussianProcess-mean",
                        "AutoregressiveTransform", "AutoregressiveTransform-random")
EXPECTED_ERA = {
    "modern": _detect.GLOBAL,
    "modern-py313": _detect.GLOBAL,
    "mid-0.12": _detect.GLOBAL,
    "mid-0.13": _detect.GLOBAL,
    "mid-0.14": _detect.GLOBAL,
    "mid-0.15": _detect.GLOBAL,
    "mid-0.16": _detect.GLOBAL,
    "mid-0.17": _detect.GLOBAL,
    "mid-0.18": _detect.GLOBAL,
    "mid-0.19": _detect.GLOBAL,
    "mid-0.20": _detect.GLOBAL,
    "mid-0.21": _detect.GLOBAL,
    "mid-0.22": _detect.GLOBAL,
    "mid-0.23": _detect.GLOBAL,
    "mid-0.24": _detect.GLOBAL,
    "legacy-0.11": _detect.INSTANCE,
    "legacy-0.10": _detect.DICT,
    "legacy-0.9": _detect.DICT,
    "numpy-substrate-0.11": _detect.INSTANCE,
    "jax-nightly": _detect.GLOBAL,
    "jax-nightly-py313": _detect.GLOBAL,
    "tf-nightly": _detect.GLOBAL,
    "jax-0.21": _detect.GLOBAL,
    "jax-0.22": _detect.GLOBAL,
    "jax-0.23": _detect.GLOBAL,
    "jax-0.24": _detect.GLOBAL,
    "jax-0.25": _detect.GLOBAL,
}
LEGACY_ERAS = (_detect.DICT, _detect.INSTANCE)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SUBSTRATES: Optional[Dict[str, Any]] = None


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "long(seconds): takes about that long on 2 cores (only the order of a "
        "parallel run uses it)")
    config.addinivalue_line(
        "markers", "without_fix: shows a defect with the fix turned off (TFP as shipped, or "
        "the package without the fix the test is about); the stacks that repeat a release's "
        "checks leave these out (scripts/matrix.py)")


def _long_seconds(item) -> float:
    mark = item.get_closest_marker("long")
    return mark.args[0] if mark is not None else 0


def pytest_collection_modifyitems(config, items):
    """In a parallel run (pytest-xdist workers, as scripts/matrix.py starts them with
    ``--dist load --maxschedchunk 1``): the tests marked ``long`` first, the longest
    first, each followed by a short one. Every worker then starts on a long test with a
    short one queued behind it, and no long test waits behind another while a worker
    idles at the end. A run in one process keeps the order of the files."""
    if not hasattr(config, "workerinput"):
        return
    long_items = sorted((i for i in items if _long_seconds(i)), key=_long_seconds, reverse=True)
    short = [i for i in items if not _long_seconds(i)]
    ordered = []
    for item in long_items:
        ordered.append(item)
        if short:
            ordered.append(short.pop(0))
    items[:] = ordered + short


def substrates() -> Dict[str, Any]:
    """{"tf"|"numpy"|"jax": the substrate's tfp-like module} for what this stack has."""
    global _SUBSTRATES
    if _SUBSTRATES is None:
        _SUBSTRATES, _ = _check.load_substrates(want_jax=True)
    return _SUBSTRATES


def bijector_module(name: str) -> Any:
    """The module defining ``Bijector`` for substrate ``name``."""
    tfb = substrates()[name].bijectors
    return sys.modules[tfb.Bijector.__module__]


def era(name: str) -> str:
    return _detect.detect_module(bijector_module(name)).era


def has_tf() -> bool:
    return "tf" in substrates()


def has_gpflow() -> bool:
    if not has_tf():
        return False
    try:
        import gpflow  # noqa: F401
    except ImportError:
        return False
    return True


def has_keras_2() -> bool:
    """Keras 2 is here: tf-keras (TF >= 2.16), or the keras package 2.x (TF <= 2.15)."""
    return has_module("tf_keras") or keras_2_version() is not None


def keras_2_version() -> Optional[Tuple[int, int]]:
    """(major, minor) of tf-keras (or tf-keras-nightly), or else of the keras package
    where it is 2.x; None."""
    from importlib import metadata

    for dist in ("tf_keras", "tf-keras-nightly", "keras"):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        if version.startswith("2."):
            major, minor = version.split(".")[:2]
            return int(major), int(minor)
    return None


def tf_with_keras_2() -> bool:
    """TFP's TF substrate with a Keras 2: tf-keras, or TF's own Keras 2 (TF 2.5 on, whose
    Keras has no distribution of its own that ``has_keras_2`` would find)."""
    if not has_tf():
        return False
    if has_module("tf_keras"):
        return True
    import tensorflow as tf

    return str(getattr(tf.keras, "__version__", "2.")).startswith("2.")


def tfp_keras() -> Any:
    """The Keras that TFP's layers use here (tf-keras, or TF's own Keras)."""
    import tensorflow_probability as tfp

    from tfp_picklefix import _keras_layers

    return _keras_layers._keras(tfp.layers.DistributionLambda)


def has_module(name: str) -> bool:
    """Whether ``name`` can be found here (without importing it)."""
    import importlib.util

    return importlib.util.find_spec(name) is not None


def cache_len(bij: Any) -> Optional[int]:
    """Entries in a legacy bijector's own cache (None in the global era)."""
    d = bij.__dict__
    if "_from_x" in d:
        return len(d["_from_x"]) + len(d["_from_y"])
    if "_cache" in d:
        return len(d["_cache"].forward) + len(d["_cache"].inverse)
    return None


def run_child(cmd: List[str], env: Optional[Dict[str, str]],
               timeout: int) -> subprocess.CompletedProcess:
    """Run ``cmd`` (cwd: repo root) with ``TMPDIR`` set to a scratch folder of its own,
    removed once it exits: what the child writes with ``tempfile`` (checkpoints, saved
    Keras models) does not pile up in the system's temporary folder."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    scratch = full_env["TMPDIR"] = tempfile.mkdtemp(prefix="tfp-picklefix-test-")
    try:
        return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True,
                              timeout=timeout)
    finally:  # a worker the child left behind may still write there: never fail on it
        shutil.rmtree(scratch, ignore_errors=True)


def run_python(code: str, env: Optional[Dict[str, str]] = None, timeout: int = 600,
               args: Optional[List[str]] = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter of this stack (cwd: repo root)."""
    cmd = [sys.executable, "-c", code] if code else [sys.executable]
    return run_child(cmd + (args or []), env, timeout)


def probe_rows(script: str, *args: str, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Run a probe script (``tests/<probe>.py ARGS``) in a fresh interpreter; the union
    of the JSON objects it printed, one per line."""
    import json

    result = run_python("", env=env, args=[script, *args])
    assert result.returncode == 0, result.stderr[-4000:]
    rows: Dict[str, Any] = {}
    for line in result.stdout.strip().splitlines():
        if line.startswith("{"):
            rows.update(json.loads(line))
    return rows


def run_script(args: List[str], env: Optional[Dict[str, str]] = None,
               timeout: int = 900) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` (a script and its arguments) in a fresh interpreter of this
    stack (cwd: repo root)."""
    return run_child([sys.executable] + args, env, timeout)


@pytest.fixture
def restore_patch_state():
    """Leave the package patched (as at import) whatever a test did."""
    yield
    tfp_picklefix.patch()


def make_value(sub: str, value: Any) -> Any:
    """A fresh tensor/array of ``value`` in substrate ``sub``."""
    import numpy as np

    if sub == "tf":
        import tensorflow as tf

        return tf.constant(value, dtype=tf.float32)
    if sub == "jax":
        import jax.numpy as jnp

        return jnp.array(value, dtype=jnp.float32)
    return np.array(value, dtype=np.float32)


def global_substrates() -> List[str]:
    return [s for s in substrates() if era(s) == _detect.GLOBAL]


def reduced_substrates() -> List[str]:
    """The substrates that get the pickling reducers: every global-era one, and the TF
    substrate of TFP 0.9-0.11 (whose modules sit where later releases have them)."""
    return [s for s in substrates() if era(s) == _detect.GLOBAL
            or bijector_module(s).__name__ in _detect.REDUCED_LEGACY]


def import_substrates_code() -> str:
    """Source that imports this stack's substrates (modern TFP loads lazily: touch Bijector)."""
    packages = [substrates()[s].__name__ for s in substrates()]
    return ("import importlib, json, sys\n"
            f"for p in {packages!r}:\n"
            "    importlib.import_module(p).bijectors.Bijector\n")
