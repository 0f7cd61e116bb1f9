"""TFP_PICKLEFIX_CACHE / set_cache_mode(): fixed (default), upstream, off; status reports it."""
from __future__ import annotations

import importlib
import json
import math

import numpy as np
import pytest

import tfp_picklefix
from tfp_picklefix import _cache

from conftest import bijector_module, global_substrates, make_value, run_python, substrates


@pytest.fixture
def global_sub():
    subs = global_substrates()
    if not subs:
        pytest.skip("needs TFP >= 0.12 (the global cache era)")
    return subs[0]


def test_default_mode_is_fixed(global_sub):
    assert tfp_picklefix.cache_mode() == "fixed"
    assert tfp_picklefix.status().cache_mode == "fixed"
    cls = bijector_module(global_sub).Bijector
    assert isinstance(vars(cls)["_cache"], _cache.PicklefixBijectorCache)


def test_switching_modes_at_run_time_is_reversible(global_sub):
    cls = bijector_module(global_sub).Bijector
    tfb = substrates()[global_sub].bijectors
    original = tfp_picklefix.get_original(cls, "_cache")
    try:
        tfp_picklefix.set_cache_mode("upstream")
        assert vars(cls)["_cache"] is original
        assert tfp_picklefix.status().cache_mode == "upstream"
        tfp_picklefix.set_cache_mode("off")
        assert isinstance(vars(cls)["_cache"], _cache.NoBijectorCache)
        bij = tfb.Exp()
        x = make_value(global_sub, [0.5])
        y = bij.forward(x)
        assert bij.inverse(y) is not x  # no caching at all
        tfp_picklefix.set_cache_mode("fixed")
        assert isinstance(vars(cls)["_cache"], _cache.PicklefixBijectorCache)
        y = bij.forward(x)
        assert bij.inverse(y) is x
    finally:
        tfp_picklefix.set_cache_mode("fixed")
    with pytest.raises(ValueError):
        tfp_picklefix.set_cache_mode("fast")


@pytest.mark.parametrize("mode", ["fixed", "upstream", "off"])
def test_environment_variable_selects_the_mode(global_sub, mode):
    package = substrates()[global_sub].__name__
    result = run_python(
        f"import importlib, json, tfp_picklefix; m = importlib.import_module({package!r}); "
        "c = type(vars(m.bijectors.Bijector)['_cache']).__name__; "
        "print(json.dumps([tfp_picklefix.status().cache_mode, c]))",
        env={"TFP_PICKLEFIX_CACHE": mode})
    assert result.returncode == 0, result.stderr[-3000:]
    reported, cls = json.loads(result.stdout.strip().splitlines()[-1])
    assert reported == mode
    assert cls == {"fixed": "PicklefixBijectorCache", "upstream": "BijectorCache",
                   "off": "NoBijectorCache"}[mode]


def _define_flow(sub):
    """A user's flow written as FFJORD is: a class-level cache of its own (with greedy
    attributes), defined after the package patched TFP."""
    module = bijector_module(sub)
    cache_util = importlib.import_module(
        module.__name__.replace("bijectors.bijector", "internal.cache_util"))

    class DoublingFlow(module.Bijector):
        _cache = cache_util.BijectorCacheWithGreedyAttrs(
            forward_name="_augmented_forward", inverse_name="_augmented_inverse")

        def __init__(self):
            super().__init__(forward_min_event_ndims=0, parameters=dict(locals()),
                             name="doubling_flow")

        def _augmented_forward(self, x):
            ldj = 0.0 * x + math.log(2.0)
            return x * 2.0, {"fldj": ldj, "ildj": -ldj}

        def _augmented_inverse(self, y):
            ldj = 0.0 * y + math.log(2.0)
            return y / 2.0, {"fldj": ldj, "ildj": -ldj}

        def _forward_log_det_jacobian(self, x):
            cached = self._cache.forward_attributes(x)
            if "fldj" not in cached:
                cached.update(self._augmented_forward(x)[1])
            return cached["fldj"]

    return DoublingFlow


def test_a_flow_defined_after_patching_gets_the_same_cache(global_sub):
    flow_cls = _define_flow(global_sub)
    own = tfp_picklefix.get_original(flow_cls, "_cache")
    assert type(own).__name__ == "BijectorCacheWithGreedyAttrs"  # what the class body made
    assert isinstance(vars(flow_cls)["_cache"], _cache.PicklefixBijectorCacheWithGreedyAttrs)
    row = next(s for s in tfp_picklefix.status().substrates if s.substrate == global_sub)
    assert "DoublingFlow._cache" in row.patched
    flow = flow_cls()
    x = make_value(global_sub, [0.5, 1.5])
    y = flow.forward(x)
    assert flow.inverse(y) is x
    np.testing.assert_allclose(np.asarray(y), [1.0, 3.0])
    fldj = flow.forward_log_det_jacobian(x, event_ndims=1)
    np.testing.assert_allclose(np.asarray(fldj), 2 * math.log(2.0), rtol=1e-6)
    assert "ildj" in flow._cache.inverse_attributes(y)  # the greedy attributes, shared
    try:
        tfp_picklefix.set_cache_mode("upstream")
        assert vars(flow_cls)["_cache"] is own
        tfp_picklefix.set_cache_mode("off")
        assert isinstance(vars(flow_cls)["_cache"], _cache.NoBijectorCacheWithGreedyAttrs)
        tfp_picklefix.unpatch()
        assert vars(flow_cls)["_cache"] is own
        assert "__init_subclass__" not in vars(bijector_module(global_sub).Bijector)
    finally:
        tfp_picklefix.patch()
        tfp_picklefix.set_cache_mode("fixed")
    assert isinstance(vars(flow_cls)["_cache"], _cache.PicklefixBijectorCacheWithGreedyAttrs)


def test_a_flow_defined_in_upstream_mode_keeps_its_cache_until_the_mode_changes(global_sub):
    try:
        tfp_picklefix.set_cache_mode("upstream")
        flow_cls = _define_flow(global_sub)
        own = vars(flow_cls)["_cache"]
        assert type(own).__name__ == "BijectorCacheWithGreedyAttrs"
        tfp_picklefix.set_cache_mode("fixed")
        assert isinstance(vars(flow_cls)["_cache"], _cache.PicklefixBijectorCacheWithGreedyAttrs)
        tfp_picklefix.set_cache_mode("upstream")
        assert vars(flow_cls)["_cache"] is own
    finally:
        tfp_picklefix.set_cache_mode("fixed")
