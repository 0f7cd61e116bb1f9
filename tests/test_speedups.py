"""The cache's optional C path (``tfp_picklefix._speedups``, switched by ``_native``).

Where the extension was built (``scripts/matrix.py`` copies the one the stack's install
built into the checkout), the whole suite runs the cache with it; these tests check that
it is on there, that ``TFP_PICKLEFIX_SPEEDUPS=off`` and ``_native.disable()`` bring
back the pure-Python cache of ``_cache.py`` (and that the conformance suite passes on
it too), and that both paths leave the same entries behind for the same calls.
"""
from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import random
import subprocess
import sys

import pytest

import tfp_picklefix
from tfp_picklefix import _cache, _native

from conftest import ROOT, global_substrates, make_value, substrates

BUILT = importlib.util.find_spec("tfp_picklefix._speedups") is not None
needs_extension = pytest.mark.skipif(
    not BUILT, reason="tfp_picklefix._speedups is not built for this Python (no compiler or "
                      "no Python headers where the stack was installed, or "
                      "TFP_PICKLEFIX_SPEEDUPS=off at install): the pure-Python cache runs, and "
                      "the rest of the suite tests it")


@pytest.fixture(params=global_substrates() or [pytest.param(None, marks=pytest.mark.skip(
    reason="needs TFP >= 0.12 (the global cache era)"))])
def sub(request):
    return request.param


@pytest.fixture
def python_path():
    """The pure-Python cache for one test, then the C path again where it was on."""
    was = _native.enabled()
    _native.disable()
    yield
    if was:
        _native.enable()


def _state(code, env=None):
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, text=True,
                          env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_status_says_which_code_runs_the_miss():
    speedups = tfp_picklefix.status().speedups
    if os.environ.get(_native.ENV_VAR, "").strip().lower() in _native._OFF_VALUES:
        assert speedups == f"Python ({_native.ENV_VAR}=off)"
    elif BUILT:
        assert speedups == "C"
    else:
        assert speedups == "Python (extension not built)"
    first_line = str(tfp_picklefix.status()).splitlines()[0]
    assert (f"(miss path: {speedups})" in first_line) == (tfp_picklefix.cache_mode() == "fixed")
    before = tfp_picklefix.cache_mode()
    tfp_picklefix.set_cache_mode("upstream")  # the miss path is the fixed cache's only
    try:
        assert "miss path" not in str(tfp_picklefix.status()).splitlines()[0]
        assert tfp_picklefix.status().speedups == speedups
    finally:
        tfp_picklefix.set_cache_mode(before)


@needs_extension
def test_the_c_path_is_on_where_it_was_built():
    assert _native.enabled()
    assert _cache.PicklefixBijectorCache.forward is not _native._PY_FORWARD
    assert _cache._death_callback is not _native._PY_DEATH_CALLBACK
    # The pass-through (what the benchmarks measure the cache against) and the greedy
    # caches keep _cache.py's own methods.
    for cls in _native._PYTHON_CLASSES:
        assert cls.forward is _native._PY_FORWARD and cls.inverse is _native._PY_INVERSE


@needs_extension
def test_off_in_the_environment_keeps_the_python_cache():
    code = ("import tfp_picklefix\n"
            "from tfp_picklefix import _cache, _native\n"
            "assert _cache.PicklefixBijectorCache.forward is _native._PY_FORWARD\n"
            "assert _cache._death_callback is _native._PY_DEATH_CALLBACK\n"
            "print(tfp_picklefix.status().speedups)\n")
    assert _state(code, {_native.ENV_VAR: "off"}) == f"Python ({_native.ENV_VAR}=off)"
    assert _state(code.replace(" is _", " is not _"), {_native.ENV_VAR: "on"}) == "C"


@needs_extension
def test_disable_and_enable_are_idempotent_and_reversible(python_path):
    for _ in range(2):
        _native.disable()
        assert not _native.enabled()
        assert _cache.PicklefixBijectorCache.forward is _native._PY_FORWARD
        assert _cache._death_callback is _native._PY_DEATH_CALLBACK
        for cls in _native._PYTHON_CLASSES:
            assert "forward" not in vars(cls) and "inverse" not in vars(cls)
        assert tfp_picklefix.status().speedups == "Python (disabled)"
    for _ in range(2):
        assert _native.enable()
        assert _native.enabled() and tfp_picklefix.status().speedups == "C"
    _native.disable()


@needs_extension
@pytest.mark.long(120)
def test_the_conformance_suite_passes_on_the_python_path():
    """Where the C path runs the rest of the suite, the pure-Python cache of
    ``_cache.py`` passes the cache's contract and defect tests too (the package's cache:
    not TFP's own, ``without_fix``, which the rest of the suite runs, neither path being
    in it)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not without_fix",
         "tests/test_cache_conformance.py", "tests/test_cache_bookkeeping.py",
         "tests/test_speedups.py::test_status_says_which_code_runs_the_miss"],
        cwd=ROOT, env=dict(os.environ, **{_native.ENV_VAR: "off"}), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert " passed" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]


@contextlib.contextmanager
def _installed(sub, cache):
    """``cache`` as the ``Bijector._cache`` of substrate ``sub`` for the block."""
    tfb = substrates()[sub].bijectors
    saved = vars(tfb.Bijector)["_cache"]
    tfb.Bijector._cache = cache
    try:
        yield tfb
    finally:
        tfb.Bijector._cache = saved


def _bijectors(sub):
    tfb = substrates()[sub].bijectors
    return [tfb.Exp(), tfb.Exp(), tfb.Softplus(),
            tfb.Chain([tfb.Exp(), tfb.Shift(1.0), tfb.Scale(2.0)]), tfb.Identity()]


def _plain(value):
    import numpy as np

    return np.nan_to_num(np.asarray(value, np.float64), nan=-999.0, posinf=999.0,
                         neginf=-999.0).round(5).tolist()


def _steps(sub, rng, bijectors, pool):
    """300 random calls, drops and clears; what each call returned (its values, and
    whether the other direction gave back the same object)."""
    seen = []
    for _ in range(300):
        op = rng.random()
        b = rng.randrange(len(bijectors))
        if op < 0.35 and pool:
            i = rng.randrange(len(pool))
            y = bijectors[b].forward(pool[i])
            seen.append(("f", b, i, bijectors[b].inverse(y) is pool[i], _plain(y)))
            pool.append(y)
        elif op < 0.6 and pool:
            i = rng.randrange(len(pool))
            x = bijectors[b].inverse(pool[i])
            seen.append(("i", b, i, bijectors[b].forward(x) is pool[i], _plain(x)))
            pool.append(x)
        elif op < 0.8 and pool:
            del pool[rng.randrange(len(pool))]
        elif op < 0.9:
            pool.append(make_value(sub, rng.choice([0.5, [0.25, 1.5]])))
        elif op < 0.95:
            bijectors[b]._cache.clear()
            seen.append(("clear", b))
        else:
            for v in [make_value(sub, 0.75) for _ in range(3)]:
                bijectors[b].forward(v)  # outputs dropped at once
        del pool[:-12]
    return seen


def _run_sequence(sub, seed):
    """:func:`_steps` on a fresh cache object of the current code path: what the calls
    returned, what the cache kept, and what it kept once everything was dropped."""
    cache = _cache.PicklefixBijectorCache()
    rng = random.Random(seed)
    with _installed(sub, cache):
        bijectors = _bijectors(sub)
        pool = [make_value(sub, rng.choice([0.5, [0.25, 1.5], 2.0])) for _ in range(4)]
        seen = _steps(sub, rng, bijectors, pool)
        gc.collect()
        storage = cache._s.eager
        kinds = sorted(type(edge).__name__ for edge, _ in storage.entries.values())
        kept = (len(storage.entries), sorted(storage.held.values()), kinds)
        del pool, bijectors
        gc.collect()
        return seen, kept, (len(storage.entries), len(storage.held), len(storage.pending))


@needs_extension
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_both_paths_leave_the_same_entries(sub, seed):
    """The same calls give the same results (``is`` included), keep the same entries and
    held inputs, and leave nothing once everything is dropped, with C and in Python."""
    c_run = _run_sequence(sub, seed)
    _native.disable()
    try:
        python_run = _run_sequence(sub, seed)
    finally:
        _native.enable()
    assert c_run[0] == python_run[0]
    assert c_run[1] == python_run[1]
    assert c_run[2] == python_run[2] == (0, 0, 0)
    assert any(kind == "_Link" for kind in c_run[1][2]) or not c_run[1][0]


@needs_extension
def test_outputs_dropped_at_once_release_everything(sub):
    """A Link whose output dies at once may hold the last references to itself (its two
    entries): the C death callback must keep it alive while it drops it."""
    cache = _cache.PicklefixBijectorCache()
    with _installed(sub, cache) as tfb:
        bij = tfb.Exp()
        xs = [make_value(sub, [0.5] * 3) for _ in range(200)]
        for x in xs:
            bij.forward(x)
        storage = cache._s.eager
        assert (len(storage.entries), len(storage.held), len(storage.pending)) == (0, 0, 0)
        ys = [bij.forward(x) for x in xs]
        assert len(storage.entries) == 400 and len(storage.held) == 200
        assert all(bij.inverse(y) is x for x, y in zip(xs, ys))
        del ys
        assert (len(storage.entries), len(storage.held)) == (0, 0)


@needs_extension
def test_a_subclass_keeps_its_own_lookup(sub):
    calls = []

    class Counting(_cache.PicklefixBijectorCache):
        __slots__ = ()

        def _lookup(self, value, d, kwargs):
            calls.append(d)
            return super()._lookup(value, d, kwargs)

    with _installed(sub, Counting()) as tfb:
        bij = tfb.Exp()
        x = make_value(sub, [0.5, 1.0])
        y = bij.forward(x)
        assert bij.inverse(y) is x and calls == [0, 1]
