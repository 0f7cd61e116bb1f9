"""patch()/unpatch() are idempotent and exact; patched() scopes; failures roll back one substrate."""
from __future__ import annotations

import copy
import json
import pickle
import warnings

import pytest

import tfp_picklefix
from tfp_picklefix import _detect, _manager
from tfp_picklefix._record import RECORD

from conftest import (LEGACY_ERAS, bijector_module, era, global_substrates, import_substrates_code,
                      run_python, substrates)


def _legacy_subs():
    return [s for s in substrates() if era(s) in LEGACY_ERAS]


def _patched_attr(sub):
    """The attribute the package replaces on that substrate's Bijector."""
    return "__getstate__" if era(sub) in LEGACY_ERAS else "_cache"


def _snapshot(cls):
    return dict(vars(cls))


def test_patch_twice_equals_once(restore_patch_state):
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    tfp_picklefix.patch()
    entries = [(e.owner, e.name, e.original, e.replacement) for e in RECORD.entries()]
    classes = [bijector_module(s).Bijector for s in substrates()]
    snaps = [_snapshot(c) for c in classes]
    status = tfp_picklefix.patch()
    assert [(e.owner, e.name, e.original, e.replacement) for e in RECORD.entries()] == entries
    for cls, snap in zip(classes, snaps):
        after = _snapshot(cls)
        assert after.keys() == snap.keys()
        assert all(after[k] is snap[k] for k in snap)
    assert status == tfp_picklefix.status()


def test_unpatch_restores_every_attribute_identity_equal():
    """In a fresh process: snapshot TFP's classes before the package, patch, unpatch, compare."""
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    code = import_substrates_code() + f"""
def classes():  # every class of every TFP module loaded, and the modules themselves
    out = {{}}
    for name, mod in list(sys.modules.items()):
        if name.startswith("tensorflow_probability") and mod is not None:
            out[id(mod)] = mod
            for v in list(vars(mod).values()):
                if isinstance(v, type) and str(vars(v).get("__module__", "")).startswith("tensorflow_probability"):
                    out[id(v)] = v
    return list(out.values())
keras_registry = {{}}
try:  # tfp.layers and Keras's registry of serializable classes (F15 adds to it)
    import tensorflow_probability as tfp
    tfp.layers.DistributionLambda
    layers = tfp.layers.distribution_layer  # its Keras: the tf_keras shim (TFP >= 0.24), or tf.keras
    keras_registry = getattr(layers, "tf_keras", None) or layers.tf.keras
    keras_registry = keras_registry.utils.get_custom_objects()
except Exception:
    pass
keras_before = dict(keras_registry)
before = {{id(c): dict(vars(c)) for c in classes()}}
import copyreg
registry = dict(copyreg.dispatch_table)  # pickle's registry: F8 adds TF's _TupleWrapper
import tfp_picklefix
patched = [[getattr(e.owner, "__name__", "a registry"), getattr(e.name, "__name__", e.name)]
           for e in tfp_picklefix._record.RECORD.entries()]
assert len({{(id(e.owner), e.name) for e in tfp_picklefix._record.RECORD.entries()}}) == len(patched)
changed_while_patched = sum(
    1 for c in classes() if id(c) in before for k in set(before[id(c)]) | set(vars(c))
    if vars(c).get(k, None) is not before[id(c)].get(k, None))
# Entries on objects outside the snapshot (TF's own classes) are counted apart.
outside = sum(1 for e in tfp_picklefix._record.RECORD.entries() if id(e.owner) not in before)
tfp_picklefix.unpatch()
bad = []
for c in classes():
    if id(c) not in before:
        continue
    now = dict(vars(c))
    if now.keys() != before[id(c)].keys():
        bad.append([c.__name__, sorted(set(now) ^ set(before[id(c)]))])
    bad += [[c.__name__, k] for k in now if now[k] is not before[id(c)].get(k)]
if copyreg.dispatch_table != registry:
    bad.append(["copyreg.dispatch_table", sorted(set(map(str, copyreg.dispatch_table.items()))
                                                 ^ set(map(str, registry.items())))])
if keras_registry != keras_before:
    bad.append(["Keras's registry", sorted(set(keras_registry) ^ set(keras_before))])
print(json.dumps([patched, changed_while_patched + outside, bad]))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    patched, changed, bad = json.loads(result.stdout.strip().splitlines()[-1])
    assert bad == []
    assert changed == len(patched)  # exactly the recorded attributes changed, nothing else
    if _legacy_subs():
        assert patched, "a legacy substrate should have been patched"


def test_patched_context_scopes_the_fix(restore_patch_state):
    subs = _legacy_subs()
    if not subs:
        pytest.skip("the pickling bug scoped here exists in TFP 0.9-0.11 only")
    tfb = substrates()[subs[0]].bijectors
    tfp_picklefix.unpatch()
    assert not tfp_picklefix.is_patched(tfb.Bijector, "__getstate__")
    with tfp_picklefix.patched() as status:
        assert tfp_picklefix.is_patched(tfb.Bijector, "__getstate__")
        assert any(s.action == "patched" for s in status.substrates)
        bij = tfb.Exp()
        x = _array(subs[0], [1.0, 2.0])
        y = bij.forward(x)  # x and y stay alive: the cache keeps its entry
        pickle.loads(pickle.dumps(bij))
    assert not tfp_picklefix.is_patched(tfb.Bijector, "__getstate__")
    assert bij.inverse(y) is x
    with pytest.raises((TypeError, AttributeError)):
        copy.deepcopy(bij)


def test_patched_context_keeps_an_active_patch(restore_patch_state):
    tfp_picklefix.patch()
    entries = RECORD.entries()
    with tfp_picklefix.patched():
        pass
    assert RECORD.entries() == entries and _manager.is_active()


def _array(sub, value):
    if sub == "tf":
        import tensorflow as tf

        return tf.constant(value)
    import numpy as np

    return np.array(value)


def test_failure_midway_rolls_back_that_substrate_only(monkeypatch, restore_patch_state):
    subs = list(substrates())
    if not subs:
        pytest.skip("no TFP substrate on this stack")
    attr = _patched_attr(subs[0])
    victim = bijector_module(subs[0])
    others = [bijector_module(s) for s in subs[1:]]
    tfp_picklefix.unpatch()
    original = vars(victim.Bijector).get(attr, "missing")
    real_apply = _manager._apply

    def apply_then_fail(owner, name, value, group):
        real_apply(owner, name, value, group)  # the replacement lands, then something breaks
        if group == victim.__name__ and owner is victim.Bijector:
            raise RuntimeError("simulated failure after a replacement")

    monkeypatch.setattr(_manager, "_apply", apply_then_fail)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tfp_picklefix.patch()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any(victim.__name__ in m and "rolled back" in m and "simulated failure" in m
               for m in messages), messages
    assert vars(victim.Bijector).get(attr, "missing") is original
    assert RECORD.entries(victim.__name__) == []
    report = {s.module: s for s in tfp_picklefix.status().substrates}
    assert report[victim.__name__].action.startswith("failed: RuntimeError")
    for sub, mod in zip(subs[1:], others):
        assert report[mod.__name__].action == "patched"
        assert tfp_picklefix.is_patched(mod.Bijector, _patched_attr(sub))
    monkeypatch.setattr(_manager, "_apply", real_apply)


def test_unknown_era_warns_exactly_once():
    """A module whose Bijector has none of the known cache features is left alone, loudly."""
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    import sys
    import types

    sub = next(iter(substrates()))
    tfb = substrates()[sub].bijectors
    # A real TFP class that is not a Bijector base: Exp has no cache of its own.
    module = types.ModuleType("tfp_like_module_for_detection")
    module.Bijector = tfb.Exp
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = _manager.patch_module(_detect.Substrate(sub, module.__name__), module)
        _manager.patch_module(_detect.Substrate(sub, module.__name__), module)
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1, [str(w.message) for w in runtime]
    message = str(runtime[0].message)
    assert _detect.tfp_version() in message and "not recognised" in message
    assert report.era == _detect.UNKNOWN and report.action == "not patched"
    assert not tfp_picklefix.is_patched(tfb.Exp, "__getstate__")
    _manager._reports.pop(module.__name__, None)
    sys.modules.pop(module.__name__, None)


def test_get_original_and_status_table():
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    table = str(tfp_picklefix.status())
    for sub in substrates():
        assert era(sub) in table
        cls = bijector_module(sub).Bijector
        if era(sub) not in LEGACY_ERAS:
            assert tfp_picklefix.is_patched(cls, "_cache")
            assert tfp_picklefix.get_original(cls, "_cache") is not vars(cls)["_cache"]
            assert type(tfp_picklefix.get_original(cls, "_cache")).__name__ == "BijectorCache"
        if tfp_picklefix.is_patched(cls, "__getstate__"):
            try:
                original = tfp_picklefix.get_original(cls, "__getstate__")
            except AttributeError:  # Python < 3.11: no class in the MRO had one
                assert not any("__getstate__" in vars(k) for k in cls.__mro__[1:])
            else:
                assert original is not vars(cls)["__getstate__"]
    assert _detect.tfp_version() in table


_BOUND_SUBMODULES = """
def bound():
    # The imported TFP submodules that their package has as an attribute.
    out = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("tensorflow_probability."):
            continue
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and child in vars(sys.modules[parent]):
            out.append(name)
    return out
"""


_LATE = """
for p in {packages!r}:
    top = importlib.import_module(p)
    for late in ("sts", "experimental", "vi", "mcmc"):
        try:
            getattr(top, late).__name__  # TFP loads these lazily
        except Exception:
            pass
"""


def _late_code():
    return _LATE.format(packages=[substrates()[s].__name__ for s in substrates()])


def test_unpatch_keeps_the_submodules_that_packages_have():
    """Imported first, the package patches while TFP's packages are still importing:
    what it re-attaches then must not be deleted by unpatch() (it once deleted
    ``tfp.substrates.numpy.bijectors``)."""
    if not substrates():
        pytest.skip("no TFP substrate in this stack")
    code = import_substrates_code() + _late_code() + _BOUND_SUBMODULES
    without = run_python(code + "print(json.dumps(bound()))")
    assert without.returncode == 0, without.stderr[-3000:]
    unpatched = run_python("import tfp_picklefix\n" + code
                           + "tfp_picklefix.unpatch()\nprint(json.dumps(bound()))")
    assert unpatched.returncode == 0, unpatched.stderr[-3000:]
    lost = (set(json.loads(without.stdout.strip().splitlines()[-1]))
            - set(json.loads(unpatched.stdout.strip().splitlines()[-1])))
    assert not lost, sorted(lost)


def test_the_lazily_loaded_packages_get_their_submodules_back():
    """F5 for ``tfp.sts``, ``tfp.experimental``, ``tfp.vi``, ``tfp.mcmc``: TFP loads them
    after the Bijector module, and takes their submodules' names away when it does;
    dill then cannot find their classes (``tfp.experimental.util.DeferredModule``, the
    surrogate posteriors of ``tfp.sts`` and ``tfp.vi``: ``module
    'tensorflow_probability.python.experimental.util' has no attribute
    'special_methods'``). Each imported submodule must be its package's attribute."""
    if not global_substrates():
        pytest.skip("F5 is a fix for TFP >= 0.12 (the global cache era)")
    prefixes = tuple(substrates()[s].__name__ + "." for s in global_substrates())
    code = ("import tfp_picklefix\n" + import_substrates_code() + _late_code()
            + _DETACHED + f"print(json.dumps(detached({prefixes!r})))")
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
    without = run_python(code, env={"TFP_PICKLEFIX": "off"})
    assert json.loads(without.stdout.strip().splitlines()[-1]) != []  # TFP does take them


_DETACHED = """
def detached(prefixes):
    # The imported submodules of the substrates that their package lacks.
    out = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(prefixes):
            continue
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and child not in vars(sys.modules[parent]):
            out.append(name)
    return sorted(out)
"""


def test_a_value_the_owner_refuses_is_not_recorded():
    """An owner that refuses a replacement (an immutable C type) leaves no record, so the
    rollback that follows cannot fail on it (it did, and the failure escaped from the
    import hook: TFP's import then raised)."""
    from tfp_picklefix._record import Record

    record = Record()
    record.replace(copy, "_picklefix_probe", 1, "probe")
    with pytest.raises(TypeError):
        record.replace(type(iter([])), "__module__", "elsewhere", "probe")
    assert [(e.owner, e.name) for e in record.entries()] == [(copy, "_picklefix_probe")]
    record.restore("probe")
    assert not hasattr(copy, "_picklefix_probe")
    assert type(iter([])).__module__ == "builtins"


def test_c_types_in_tfp_modules_are_left_alone(restore_patch_state):
    """TFP's NumPy backend binds ``ObjectProxy = wrapt.ObjectProxy``; with wrapt 1.x that
    is a C type whose ``__module__`` ('builtins') does not hold it, as a factory-made
    TFP class's does not. Renaming it failed (immutable type) and, with the rollback
    failing too, importing TFP raised. Here a C type of the standard library stands in
    for it, in a real TFP module, whatever wrapt this stack has."""
    subs = global_substrates()
    if not subs:
        pytest.skip("no global-era substrate on this stack (F1b is a global-era fix)")
    c_type = type(iter([]))  # list_iterator: __module__ 'builtins', not found there
    module = bijector_module(subs[0])
    tfp_picklefix.unpatch()
    module.list_iterator = c_type
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            tfp_picklefix.patch()
        report = {s.module: s for s in tfp_picklefix.status().substrates}
        assert report[module.__name__].action == "patched", report[module.__name__]
        assert c_type.__module__ == "builtins"
        assert not tfp_picklefix.is_patched(c_type, "__module__")
    finally:
        del module.list_iterator


def test_a_failure_inside_the_import_hook_never_reaches_the_import(restore_patch_state, monkeypatch):
    """Whatever goes wrong while patching a substrate that is being imported (here: the
    rollback itself failing) is a warning; the user's ``import`` goes on."""
    subs = list(substrates())
    if not subs:
        pytest.skip("no TFP substrate on this stack")
    substrate = next(s for s in _detect.SUBSTRATES if s.module == bijector_module(subs[0]).__name__)

    def broken(*args, **kwargs):
        raise TypeError("simulated failure of the rollback")

    monkeypatch.setattr(_manager, "patch_module", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _manager._on_import(substrate, bijector_module(subs[0]))
    assert any("simulated failure of the rollback" in str(w.message) for w in caught)
