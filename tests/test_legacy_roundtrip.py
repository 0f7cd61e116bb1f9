"""Legacy eras (TFP 0.9-0.11): every simply-built bijector round-trips after use.

For each bijector class (found by introspection), after forward, inverse and both
log-det-Jacobians ran in eager mode, inside ``tf.function``, or with ``tf.Variable``
parameters: pickle (protocols 0-5), copy.copy, copy.deepcopy, cloudpickle and dill
give an equal bijector whose cache works and is its own, and the original's cache
is left exactly as it was.
"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import tfp_picklefix
from tfp_picklefix import _detect

from bijector_cases import NEEDS_USER_CODE, Case, assert_close, bijector_class_names
from conftest import LEGACY_ERAS, cache_len, era, substrates

import cloudpickle
import dill


def _pickler(protocol):
    def roundtrip(obj):
        payload = pickle.dumps(obj, protocol=protocol)
        # A pickle must load where tfp_picklefix is not installed.
        assert b"tfp_picklefix" not in payload
        return pickle.loads(payload)
    return roundtrip


SERIALIZERS = [(f"pickle-p{p}", _pickler(p)) for p in (0, 1, 2, 3, 4, 5)] + [
    ("copy", copy.copy),
    ("deepcopy", copy.deepcopy),
    ("cloudpickle", lambda o: cloudpickle.loads(cloudpickle.dumps(o))),
    ("dill", lambda o: dill.loads(dill.dumps(o))),
]


def _legacy_substrates():
    return [name for name in substrates() if era(name) in LEGACY_ERAS]


def _cases():
    cases = []
    for sub in _legacy_substrates():
        tfb = substrates()[sub].bijectors
        modes = ["eager", "tf_function", "variable"] if sub == "tf" else ["eager"]
        for name in bijector_class_names(tfb):
            for mode in modes:
                if mode == "variable" and (name in NEEDS_USER_CODE
                                           or not Case(name, tfb).has_float_params()):
                    continue  # nothing to make a tf.Variable of
                cases.append(pytest.param(sub, name, mode, id=f"{sub}-{name}-{mode}"))
    return cases or [pytest.param(None, None, None, id="no-legacy-substrate")]


def _fresh(sub, value):
    if sub == "tf":
        import tensorflow as tf

        return tf.constant(value)
    return np.array(value)


def _cache_owners(bij):
    """Bijectors the instance-era cache's functions call (should be just ``bij``)."""
    owners = []
    cache = bij.__dict__.get("_cache")
    for direction in (cache.forward, cache.inverse):
        func = direction._func
        bound = getattr(func, "__self__", None)
        if bound is not None:
            owners.append(bound)
        for cell in getattr(func, "__closure__", None) or ():
            owners.append(cell.cell_contents)
    return owners


def _use(sub, bij, x, mode):
    """Run all four directions; in tf_function mode also trace them into a graph."""
    y = bij.forward(x)
    x_ref = bij.inverse(y)
    fldj, ildj = _log_dets(bij, x, y)
    keep = None
    if mode == "tf_function":
        import tensorflow as tf

        keep = tf.function(lambda: (bij.forward(x), bij.inverse(y)) + _log_dets(bij, x, y))
        keep()
    return y, x_ref, fldj, ildj, keep


def _describe(exc):
    try:
        text = str(exc).strip().splitlines()[-1][:200]
    except Exception:  # some TFP 0.10 NumPy-substrate errors cannot even be printed
        text = "(message could not be printed)"
    return f"{type(exc).__name__}: {text}"


def _log_dets(bij, x, y):
    if not getattr(bij, "_is_injective", True):
        return (None, None)  # non-injective bijectors have no log-det-Jacobian
    return (bij.forward_log_det_jacobian(x, event_ndims=bij.forward_min_event_ndims),
            bij.inverse_log_det_jacobian(y, event_ndims=bij.inverse_min_event_ndims))


@pytest.mark.parametrize("sub,name,mode", _cases())
def test_bijector_roundtrip(sub, name, mode):
    if sub is None:
        pytest.skip("no substrate in a legacy cache era here (modern TFP: see the cache issue)")
    if name in NEEDS_USER_CODE:
        pytest.skip(f"{name}: {NEEDS_USER_CODE[name]}")
    case = Case(name, substrates()[sub].bijectors)
    if mode == "variable":
        import tensorflow as tf

        param = lambda v: tf.Variable(v, dtype=tf.float32)  # noqa: E731
    else:
        param = lambda v: v  # noqa: E731
    bij = case.build(param)
    x = _fresh(sub, case.make_input(bij))
    try:  # TFP itself must run this class on this TF/TFP pair (the package is not involved:
        # forward/inverse are TFP's own), cached and uncached (what a fresh copy computes)
        y, x_ref, fldj, ildj, keep = _use(sub, bij, x, mode)
        probe = case.build(param)
        probe.inverse(y)
        _log_dets(probe, x, y)
    except Exception as exc:
        pytest.skip(f"{name} does not run on this TF/TFP pair, with or without the package: "
                    f"{_describe(exc)}")
    hit = bij.inverse(y) is x

    failures = []
    for label, roundtrip in SERIALIZERS:
        try:
            before = cache_len(bij)
            clone = roundtrip(bij)
            # The original is untouched: same entries, same hits.
            assert cache_len(bij) == before, "serialization changed the original's cache"
            assert (bij.inverse(y) is x) == hit, "the original's cache lost its entry"
            # Equal values.
            assert_close(clone.forward(x), y, "forward")
            assert_close(clone.inverse(y), x_ref, "inverse")
            clone_fldj, clone_ildj = _log_dets(clone, x, y)
            if fldj is not None:
                assert_close(clone_fldj, fldj, "forward_log_det_jacobian")
                assert_close(clone_ildj, ildj, "inverse_log_det_jacobian")
            # The clone's cache works as the original's does, and is its own.
            x_orig, x_clone = _fresh(sub, case.make_input(bij)), _fresh(sub, case.make_input(bij))
            orig_hit = bij.inverse(bij.forward(x_orig)) is x_orig
            clone_hit = clone.inverse(clone.forward(x_clone)) is x_clone
            assert clone_hit == orig_hit, f"cache hit: original {orig_hit}, clone {clone_hit}"
            if clone is not bij:
                if era(sub) == _detect.DICT:
                    assert clone.__dict__["_from_x"] is not bij.__dict__["_from_x"]
                else:
                    assert clone.__dict__["_cache"] is not bij.__dict__["_cache"]
                    owners = _cache_owners(clone)
                    assert owners and all(o is clone for o in owners), \
                        "the clone's cache calls another bijector"
        except Exception as exc:  # collect, so one run shows every failing serializer
            failures.append(f"{label}: {type(exc).__name__}: {exc}")
    del keep
    assert not failures, f"{sub} {name} ({mode}):\n" + "\n".join(failures)


@pytest.mark.without_fix
@pytest.mark.parametrize("sub", _legacy_substrates() or [pytest.param(None, id="none")])
def test_bug_reproduces_without_the_fix(sub, restore_patch_state):
    """The round trips above fail on the same stack once the package is unpatched."""
    if sub is None:
        pytest.skip("no substrate in a legacy cache era here")
    tfb = substrates()[sub].bijectors
    tfp_picklefix.unpatch()
    bij = tfb.Chain([tfb.Exp(), tfb.Softplus()])
    x = _fresh(sub, [0.3, 0.6])
    y = bij.forward(x)
    with pytest.raises((TypeError, AttributeError, pickle.PicklingError)):
        pickle.loads(pickle.dumps(bij))
    with pytest.raises((TypeError, AttributeError)):
        copy.deepcopy(bij)
    tfp_picklefix.patch()
    assert_close(pickle.loads(pickle.dumps(bij)).forward(x), y, "forward after re-patching")


@pytest.mark.parametrize("sub", [s for s in _legacy_substrates() if s == "tf"]
                         or [pytest.param(None, id="none")])
def test_deepcopy_with_variables_calls_its_own_parameters(sub):
    """The 0.11 trap: a deep copy's cache must not compute with the original's variables."""
    if sub is None:
        pytest.skip("needs the TF substrate in a legacy cache era (tf.Variable parameters)")
    import tensorflow as tf

    tfb = substrates()[sub].bijectors
    scale = tf.Variable(2.0)
    bij = tfb.Scale(scale) if hasattr(tfb, "Scale") else tfb.AffineScalar(scale=scale)
    bij.forward(tf.constant([1.0]))
    clone = copy.deepcopy(bij)
    clone_vars = [v for v in clone.trainable_variables]
    assert len(clone_vars) == 1 and clone_vars[0] is not scale
    clone_vars[0].assign(3.0)
    np.testing.assert_allclose(clone.forward(tf.constant([1.0])).numpy(), [3.0])
    np.testing.assert_allclose(bij.forward(tf.constant([1.0])).numpy(), [2.0])
