"""TFP_PICKLEFIX_CACHE / set_cache_mode(): fixed (default), upstream, off; status reports it."""
from __future__ import annotations

import json

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
