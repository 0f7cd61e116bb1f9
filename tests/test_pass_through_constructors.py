"""Objects whose class's constructor only hands ``*args, **kwargs`` on are rebuilt from
the constructor it hands them to, with every setting kept.

TFP 0.10's ``JointDistributionSequentialAutoBatched`` has such a constructor (its
sample-path mixin takes ``batch_ndims`` out of ``**kwargs``, ``JointDistributionSequential``
records the rest) and keeps a TFP lambda per model function, which the standard pickle
refuses. Every substrate that gets the pickling reducers, on every stack that has the
class (not TFP 0.9).
"""
from __future__ import annotations

import copy
import pickle

import cloudpickle
import numpy as np
import pytest

import coverage_cases as cc
from conftest import reduced_substrates

SERIALIZERS = [
    ("pickle0", lambda o: pickle.loads(pickle.dumps(o, protocol=0))),
    ("pickle5", lambda o: pickle.loads(pickle.dumps(o, protocol=5))),
    ("copy", copy.copy),
    ("deepcopy", copy.deepcopy),
    ("cloudpickle", lambda o: cloudpickle.loads(cloudpickle.dumps(o))),
]


@pytest.mark.parametrize("sub", reduced_substrates() or ["none"])
def test_auto_batched_joint_distribution_keeps_its_settings(sub):
    if sub == "none":
        pytest.skip("no substrate with the pickling reducers on this stack")
    ns = cc.use(sub)
    tfd = ns.tfd
    if not hasattr(tfd, "JointDistributionSequentialAutoBatched"):
        pytest.skip("TFP 0.9 has no auto-batched joint distributions")
    import tfp_picklefix

    tfp_picklefix.patch()
    # A model function by name (picklable as user code must be), and settings that
    # are not the constructor's defaults: batch_ndims is not among `parameters`.
    try:
        dist = tfd.JointDistributionSequentialAutoBatched(
            [tfd.Normal(np.zeros(3, np.float32), 1.), cc.normal_given],
            batch_ndims=1, validate_args=True, name="joint")
    except AttributeError as exc:
        if "collections" not in str(exc):
            raise
        pytest.skip(f"TFP 0.11 on Python >= 3.10 builds no joint distribution: {exc}")
    x = [np.ones(3, np.float32), np.array([0.5, 1.5, 2.5], np.float32)]
    expected = np.asarray(dist.log_prob(x))
    assert expected.shape == (3,)  # batch_ndims=1: one log_prob per batch member
    failures = []
    for name, roundtrip in SERIALIZERS:
        try:
            clone = roundtrip(dist)
            assert type(clone) is type(dist)
            assert (clone.batch_ndims, clone.validate_args, clone.name) == (1, True, "joint")
            np.testing.assert_allclose(np.asarray(clone.log_prob(x)), expected, rtol=1e-6)
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
    assert not failures, failures
