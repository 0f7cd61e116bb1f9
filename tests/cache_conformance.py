"""Conformance suite for the bijector-cache contract (TFP >= 0.12).

The same expectations run against three implementations:
- ``upstream``: TFP's own ``cache_util.BijectorCache`` (tfp_picklefix in mode "upstream");
- ``fixed``: this package's cache (mode "fixed", the default);
- ``native``: a copy of the installed TFP with ``python -m tfp_picklefix upstream-diff``
  applied, with tfp_picklefix not imported (``TFP_PICKLEFIX_CONFORMANCE_IMPL=native``).

Contract tests must pass everywhere. Defect tests (``defect`` in the name) show what
upstream gets wrong: they are expected to fail on ``upstream`` only.
This module is self-contained (no conftest), so it can run against the patched copy.
"""
from __future__ import annotations

import copy
import gc
import importlib
import os
import pickle
import random
import sys
import weakref

import numpy as np
import pytest

NATIVE = os.environ.get("TFP_PICKLEFIX_CONFORMANCE_IMPL") == "native"
IMPLS = ["native"] if NATIVE else ["upstream", "fixed"]
_PACKAGES = {
    "tf": "tensorflow_probability",
    "numpy": "tensorflow_probability.substrates.numpy",
    "jax": "tensorflow_probability.substrates.jax",
}
_NEEDS = {"tf": "tensorflow", "numpy": "numpy", "jax": "jax"}


def _available():
    import importlib.util

    out = []
    for sub, dep in _NEEDS.items():
        if importlib.util.find_spec(dep) is None:
            continue
        try:
            module = importlib.import_module(_PACKAGES[sub])
            cache = vars(module.bijectors.Bijector).get("_cache")
        except Exception:
            continue
        if cache is not None:  # the global cache era (TFP >= 0.12)
            out.append(sub)
    return out


SUBSTRATES = _available()


def api(sub):
    return importlib.import_module(_PACKAGES[sub])


def value(sub, v):
    if sub == "tf":
        import tensorflow as tf

        return tf.constant(v, dtype=tf.float32)
    if sub == "jax":
        import jax.numpy as jnp

        return jnp.array(v, dtype=jnp.float32)
    return np.array(v, dtype=np.float32)


def to_np(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def collect():
    for _ in range(3):
        gc.collect()


@pytest.fixture(params=SUBSTRATES or [pytest.param(None, marks=pytest.mark.skip(
    reason="no substrate in the global cache era (TFP >= 0.12) here"))])
def sub(request):
    return request.param


# TFP's own cache ("upstream") is there to show its defects (and that the suite passes
# where TFP is right): the stacks that leave out such tests (``without_fix``) run the
# package's cache alone.
@pytest.fixture(params=[pytest.param(i, marks=pytest.mark.without_fix) if i == "upstream" else i
                        for i in IMPLS])
def impl(request):
    if request.param == "native":
        assert "tfp_picklefix" not in sys.modules, "the native run must not import the package"
        yield "native"
        return
    import tfp_picklefix

    before = tfp_picklefix.cache_mode()
    tfp_picklefix.set_cache_mode(request.param)
    try:
        yield request.param
    finally:
        tfp_picklefix.set_cache_mode(before)


def expect_defect_on_upstream(request, impl):
    if impl == "upstream":
        request.applymarker(pytest.mark.xfail(strict=True, reason="a defect of TFP's own cache"))


def tfp_release():
    """(major, minor) of the installed TFP (a nightly: the release it leads to), or None."""
    import re

    version = getattr(sys.modules.get("tensorflow_probability"), "__version__", "")
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def skip_unmeasured_upstream(what):
    """Where how TFP's own cache fares was not measured: skipped, said so, not guessed."""
    version = getattr(sys.modules.get("tensorflow_probability"), "__version__", "?")
    pytest.skip(f"TFP {version}'s own cache was not measured on {what} (the package's "
                f"cache, mode fixed, runs it here)")


# ---------------------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------------------

def test_inverse_of_forward_is_the_input(sub, impl):
    tfb = api(sub).bijectors
    for bij in (tfb.Exp(), tfb.Softplus(), tfb.Chain([tfb.Exp(), tfb.Shift(1.0), tfb.Scale(2.0)])):
        x = value(sub, [0.5, 1.5])
        y = bij.forward(x)
        assert bij.inverse(y) is x
        y2 = value(sub, [2.0, 3.0])
        x2 = bij.inverse(y2)
        assert bij.forward(x2) is y2
        np.testing.assert_allclose(to_np(y), to_np(bij.forward(value(sub, [0.5, 1.5]))), rtol=1e-6)


def test_log_det_attributes_are_shared_by_both_directions(sub, impl):
    tfb = api(sub).bijectors
    bij = tfb.Exp()
    x = value(sub, [0.5, 1.5])
    fldj = bij.forward_log_det_jacobian(x, event_ndims=1)
    y = bij.forward(x)
    assert bij._cache.forward_attributes(x) is bij._cache.inverse_attributes(y)
    ildj = bij.inverse_log_det_jacobian(y, event_ndims=1)
    np.testing.assert_allclose(to_np(ildj), -to_np(fldj), rtol=1e-6)
    assert "ildj" in bij._cache.inverse_attributes(y)


def _forward_of_fresh_input(bij, sub):
    x = value(sub, [0.25, 0.75])
    return weakref.ref(x), bij.forward(x)


def test_input_stays_retrievable_while_its_output_lives(sub, impl):
    bij = api(sub).bijectors.Exp()
    x_ref, y = _forward_of_fresh_input(bij, sub)
    collect()
    assert x_ref() is not None
    assert bij.inverse(y) is x_ref()


def test_both_directions_are_dropped_once_the_output_is_collected(sub, impl):
    tfb = api(sub).bijectors
    bij = tfb.Chain([tfb.Exp(), tfb.Shift(1.0)])
    x_ref, y = _forward_of_fresh_input(bij, sub)
    y_ref = weakref.ref(y)
    assert len(bij._cache) >= 1
    del y
    collect()
    assert y_ref() is None and x_ref() is None
    assert len(bij._cache) == 0
    assert bij._cache.weak_keys() == []
    assert bij._cache.items() == []


def test_a_bijector_that_returns_its_input_keeps_nothing_alive(sub, impl):
    tfb = api(sub).bijectors
    for bij in (tfb.Identity(), tfb.Chain([]), tfb.Invert(tfb.Identity())):
        x = value(sub, [0.5, 1.5])
        x_ref = weakref.ref(x)
        y = bij.forward(x)
        assert y is x and bij.inverse(y) is x
        del x, y
        collect()
        assert x_ref() is None, type(bij).__name__


def test_equal_bijectors_share_entries(sub, impl):
    tfb = api(sub).bijectors
    x = value(sub, [0.5, 1.5])
    y = tfb.Shift(1.0).forward(x)
    assert tfb.Shift(1.0).inverse(y) is x
    assert tfb.Shift(2.0).inverse(y) is not x


def test_equal_bijectors_share_entries_once_the_first_one_went(sub, impl):
    """Sharing does not hang on the first of equal bijectors: once it is gone, a new
    equal one (or a copy) still shares the entries of those that remain. (Found by the
    random test below, with bijectors replaced by their copies.)"""
    tfb = api(sub).bijectors
    first, second = tfb.Shift(1.5), tfb.Shift(1.5)
    x0 = value(sub, [0.5])
    first.forward(x0)
    second.forward(x0)  # both used; their outputs dropped at once
    del first
    collect()
    x = value(sub, [0.5, 1.0])
    y = second.forward(x)
    assert tfb.Shift(1.5).inverse(y) is x
    for clone in (copy.copy(second), copy.deepcopy(second), pickle.loads(pickle.dumps(second))):
        assert clone.inverse(y) is x and clone.forward(x) is y


def test_structured_inputs(sub, impl):
    tfb = api(sub).bijectors
    bij = tfb.JointMap([tfb.Exp(), tfb.Softplus()])
    x = [value(sub, [0.5]), value(sub, [1.5])]
    y = bij.forward(x)
    back = bij.inverse(y)
    assert all(a is b for a, b in zip(back, x))
    # A new container of the same tensors is the same key.
    assert all(a is b for a, b in zip(bij.inverse(list(y)), x))
    # The cache's views give the structures back.
    (key,) = bij._cache.weak_keys(direction="forward")
    assert type(key()) is list and all(a is b for a, b in zip(key(), x))
    ((given, made),) = bij._cache.items(direction="forward")
    assert type(given) is list and all(a is b for a, b in zip(given, x))
    assert all(a is b for a, b in zip(made, y))


class _Plain(object):
    """The least a cache needs of a bijector: ``_forward`` and ``_inverse`` (structured
    here), counting their calls."""

    def __init__(self, forward, inverse):
        self.calls = [0, 0]
        self._f, self._i = forward, inverse

    def _forward(self, x):
        self.calls[0] += 1
        return self._f(x)

    def _inverse(self, y):
        self.calls[1] += 1
        return self._i(y)


class _Unrelated(object):
    """A bijector of another class (not a subclass of _Plain)."""

    def _forward(self, s):
        return (s[0], s[1] + s[0])

    def _inverse(self, s):
        return (s[0], s[1] - s[0])


def _cache_of(sub, bij, **kwargs):
    """A cache of the kind installed on ``Bijector`` (whichever implementation runs)."""
    cls = type(vars(api(sub).bijectors.Bijector)["_cache"])
    return cls(bijector=bij, bijector_class=type(bij), **kwargs)


def _coupling():
    # (x, z) -> (x, z * x): the output reuses a leaf of the input, as a coupling layer does
    return _Plain(lambda s: (s[0], s[1] * s[0]), lambda s: (s[0], s[1] / s[0]))


def test_an_output_that_shares_a_leaf_with_its_input_keeps_the_input(sub, impl):
    bij = _coupling()
    cache = _cache_of(sub, bij)
    x = value(sub, [2.0, 3.0])
    z = value(sub, [0.1, 0.7])
    z_ref = weakref.ref(z)
    y = cache.forward((x, z))
    del z
    collect()
    assert z_ref() is not None  # retrievable while the output lives
    back = cache.inverse(y)
    assert back[0] is x and back[1] is z_ref()  # exactly the input, not z * x / x
    assert bij.calls == [1, 0]
    y_ref = weakref.ref(y[1])
    del y, back
    collect()
    assert y_ref() is None and z_ref() is None  # then both go
    assert cache.weak_keys() == []


def test_chains_of_such_outputs_are_released_from_the_end(sub, impl):
    bij = _coupling()
    cache = _cache_of(sub, bij)
    state = (value(sub, [2.0]), value(sub, [0.5]))
    first = weakref.ref(state[1])
    for _ in range(3):
        state = cache.forward(state)
    middle = state
    for _ in range(3):
        state = cache.forward(state)
    assert len(cache.weak_keys(direction="inverse")) == 6
    for _ in range(6):
        state = cache.inverse(state)
    assert state[1] is first() and bij.calls == [6, 0]
    collect()
    # The edges past the middle went with their outputs; the middle holds the rest.
    assert len(cache.weak_keys(direction="inverse")) == 3
    del state
    collect()
    assert len(cache.weak_keys(direction="inverse")) == 3
    del middle
    collect()
    assert first() is None and cache.weak_keys() == []


def test_an_output_made_only_of_input_leaves_keeps_nothing_alive(sub, impl):
    bij = _Plain(lambda s: (s[1], s[0]), lambda s: (s[1], s[0]))  # a swap, as Restructure
    cache = _cache_of(sub, bij)
    pair = (value(sub, [1.0]), value(sub, [2.0]))
    refs = [weakref.ref(leaf) for leaf in pair]
    out = cache.forward(pair)
    assert all(a is b for a, b in zip(cache.inverse(out), pair))
    del pair, out
    collect()
    assert [r() for r in refs] == [None, None]
    assert cache.weak_keys() == []


def test_caches_built_on_one_storage_share_it(sub, impl):
    first, second = _coupling(), _coupling()
    cache = _cache_of(sub, first)
    other = _cache_of(sub, second, storage=cache.storage)
    whole = type(cache)(bijector=None, bijector_class=_Plain, storage=cache.storage)
    x = (value(sub, [2.0]), value(sub, [0.5]))
    y1, y2 = cache.forward(x), other.forward(x)
    w = (value(sub, [3.0]), value(sub, [0.25]))
    y3 = cache.forward(w)
    stranger = type(cache)(bijector=_Unrelated(), bijector_class=_Unrelated, storage=cache.storage)
    y4 = stranger.forward(w)
    assert len(whole.weak_keys(direction="forward")) == 3
    other.clear()  # the second bijector's entries only
    assert len(whole.weak_keys(direction="forward")) == 2
    assert cache.inverse(y1)[1] is x[1] and cache.inverse(y3)[1] is w[1]
    assert other.inverse(y2)[1] is not x[1]  # recomputed
    whole.clear()  # the class's entries only
    assert whole.weak_keys(direction="forward") == []
    assert first.calls == [2, 0]
    assert stranger.inverse(y4)[1] is w[1]


def test_kwargs_are_part_of_the_key(sub, impl):
    tfb = api(sub).bijectors

    class ShiftBy(tfb.Bijector):  # a user bijector with a conditioning argument
        def __init__(self):
            super().__init__(forward_min_event_ndims=0, parameters=dict(locals()), name="shift_by")

        def _forward(self, x, amount=0.0):
            return x + amount

        def _inverse(self, y, amount=0.0):
            return y - amount

        def _forward_log_det_jacobian(self, x, amount=0.0):
            return 0.0 * x

    bij = ShiftBy()
    x = value(sub, [1.0])
    y1 = bij.forward(x, amount=1.0)
    y2 = bij.forward(x, amount=2.0)
    np.testing.assert_allclose(to_np(y1), [2.0])
    np.testing.assert_allclose(to_np(y2), [3.0])
    assert bij.forward(x, amount=1.0) is y1
    assert bij.inverse(y2, amount=2.0) is x
    assert bij.inverse(y2, amount=1.0) is not x


def test_cache_api_used_by_other_code(sub, impl):
    tfb = api(sub).bijectors
    collect()
    bij = tfb.Shift(7.25)  # a parameterization no other test uses: entries are its own
    cache = bij._cache  # __get__ binds it
    assert cache.bijector is bij
    x = value(sub, [0.5])
    y = bij.forward(x)
    assert len(cache) == 1
    assert len(cache.weak_keys(direction="forward")) == 1
    assert len(cache.weak_keys(direction="inverse")) == 1
    assert len(cache.items()) == 2
    # Weak references, as upstream's: called, they give the inputs.
    (key,) = cache.weak_keys(direction="forward")
    (back,) = cache.weak_keys(direction="inverse")
    assert key() is x and back() is y and key.alive
    assert cache.storage is not None
    with pytest.raises(ValueError):
        cache.weak_keys(direction="sideways")
    cache.clear()  # what gpflow.utilities.reset_cache_bijectors calls
    assert len(bij._cache) == 0
    assert bij.inverse(y) is not x  # recomputed
    np.testing.assert_allclose(to_np(bij.inverse(y)), to_np(x), rtol=1e-6)


def test_copies_do_not_copy_entries(sub, impl):
    tfb = api(sub).bijectors
    bij = tfb.Chain([tfb.Exp(), tfb.Scale(2.0)])
    x = value(sub, [0.5, 1.5])
    y = bij.forward(x)
    before = len(tfb.Bijector._cache.items())
    clone = copy.deepcopy(bij)
    loaded = pickle.loads(pickle.dumps(bij))
    assert len(tfb.Bijector._cache.items()) == before
    np.testing.assert_allclose(to_np(clone.forward(x)), to_np(y), rtol=1e-6)
    np.testing.assert_allclose(to_np(loaded.forward(x)), to_np(y), rtol=1e-6)
    assert bij.inverse(y) is x


# ---------------------------------------------------------------------------------------
# The contract under random sequences of calls
# ---------------------------------------------------------------------------------------

# What each bijector of the random test computes, in float64 from the values' contents:
# (forward, inverse, forward log-det-Jacobian at event_ndims=0), and where its forward and
# inverse may be called (no overflow in float32, inverse of a positive value).
_REFERENCE = {
    "exp": (np.exp, np.log, lambda x: x),
    "softplus": (lambda x: np.logaddexp(0.0, x), lambda y: np.log(np.expm1(y)),
                 lambda x: -np.logaddexp(0.0, -x)),
    "scale": (lambda x: 2.0 * x, lambda y: y / 2.0, lambda x: np.full_like(x, np.log(2.0))),
    "chain": (lambda x: np.exp(2.0 * x + 1.0), lambda y: (np.log(y) - 1.0) / 2.0,
              lambda x: np.log(2.0) + 2.0 * x + 1.0),
}
_FORWARD_MAX = {"exp": 4.0, "softplus": 30.0, "scale": 1e3, "chain": 3.0}


def _inverse_ok(kind, v):
    return (abs(v) < 1e4).all() and (kind == "scale" or (v > 0.05).all())


class _Expected(object):
    """What a correct cache must give back as the same object: for (kind, direction, input)
    the result of the last call, while input and result both live and neither changed.
    Weak references only, so that the model keeps nothing alive. Equal bijectors share
    a kind; a clear of any kind forgets everything (upstream's bound clear drops more
    than its own entries)."""

    def __init__(self):
        self.known = {}

    def get(self, kind, direction, v):
        found = self.known.get((kind, direction, id(v)))
        if found is None:
            return None
        given, made = found[0](), found[1]()
        if given is not v or made is None:
            del self.known[(kind, direction, id(v))]
            return None
        return made

    def record(self, kind, direction, v, result):
        self.known[(kind, direction, id(v))] = (weakref.ref(v), weakref.ref(result))
        self.known[(kind, 1 - direction, id(result))] = (weakref.ref(result), weakref.ref(v))

    def changed(self, v):
        """``v`` was modified in place: no entry with it on either side is sure any more."""
        for key, (given, made) in list(self.known.items()):
            if given() is v or made() is v:
                del self.known[key]


_COPIES = (copy.copy, copy.deepcopy, lambda b: pickle.loads(pickle.dumps(b)))
_STEPS = 300  # steps of each random sequence


def _random_calls(tfb, seed, make, contents, learn, check, mutable, copies=_COPIES,
                  leave_out=()):
    """The steps of the random tests below. ``make(numbers)`` makes a value,
    ``contents(v)`` gives a value's numbers in float64, ``learn(result, numbers)`` is
    told what a result holds, ``check(got, want, where)`` checks a result's numbers (at
    once in eager mode, after the run in a trace), ``copies`` are the ways to copy a
    bijector, ``leave_out`` the kinds of bijector not to use. Returns the number of
    checked calls, of predicted hits, and the (kind, bijector) pairs it ended with;
    every value it made or got is dropped by then."""
    rng = random.Random(seed)
    bijectors = [("exp", tfb.Exp()), ("exp", tfb.Exp()), ("softplus", tfb.Softplus()),
                 ("scale", tfb.Scale(2.0)), ("scale", tfb.Scale(2.0)),
                 ("chain", tfb.Chain([tfb.Exp(), tfb.Shift(1.0), tfb.Scale(2.0)]))]
    bijectors = [(kind, bij) for kind, bij in bijectors if kind not in leave_out]
    expected = _Expected()
    pool = [make([0.5, 1.0, 1.5])]
    recent = []  # (kind, inverse, weak reference to the result) of the last calls
    hits = checks = 0
    for step in range(_STEPS):
        op = rng.random()
        if op < 0.12 or not pool:
            pool.append(make([rng.uniform(-1.5, 2.5) for _ in range(3)]))
            continue
        if op < 0.2:
            del pool[rng.randrange(len(pool))]
            continue
        if op < 0.26:
            if mutable:
                v = pool[rng.randrange(len(pool))]
                v += np.float32(rng.choice([0.25, -0.25]))  # the same object, changed
                expected.changed(v)
            continue
        if op < 0.28:
            kind, bij = rng.choice(bijectors)
            bij._cache.clear()
            expected.known.clear()
            continue
        if op < 0.29:
            tfb.Bijector._cache.clear()
            expected.known.clear()
            continue
        if op < 0.305:
            gc.collect()
            continue
        if op < 0.325:  # a bijector replaced by its copy: equal, so it shares the entries
            i = rng.randrange(len(bijectors))
            how = rng.choice(copies)
            bijectors[i] = (bijectors[i][0], how(bijectors[i][1]))
            continue
        back = recent[-rng.randint(1, len(recent))] if recent and rng.random() < 0.4 else None
        v = back and back[2]()
        if v is not None:  # back through a recent result's edge, by an equal bijector
            kind, inverse = back[0], not back[1]
            bij = rng.choice([b for k, b in bijectors if k == kind])
        else:
            kind, bij = rng.choice(bijectors)
            v = pool[rng.randrange(len(pool))]
            inverse = rng.random() < 0.5
        f, f_inv, fldj = _REFERENCE[kind]
        now = contents(v)
        if inverse and not _inverse_ok(kind, now):
            continue
        if not inverse and not (abs(now) < _FORWARD_MAX[kind]).all():
            continue
        where = "step {} ({}): {} {}({})".format(step, seed, kind, "inverse" if inverse else
                                                 "forward", now)
        if rng.random() < 0.25:  # a log-det: checked against the formula, nothing kept
            if inverse:
                got, want = bij.inverse_log_det_jacobian(v, event_ndims=0), -fldj(f_inv(now))
            else:
                got, want = bij.forward_log_det_jacobian(v, event_ndims=0), fldj(now)
            check(got, want, where)
            continue
        predicted = expected.get(kind, int(inverse), v)
        result = bij.inverse(v) if inverse else bij.forward(v)
        want = (f_inv if inverse else f)(now)
        check(result, want, where)
        if mutable:
            assert v.flags.writeable, where
        if predicted is not None:
            assert result is predicted, where + ": not the cached object"
            hits += 1
        else:
            learn(result, want)
        checks += 1
        expected.record(kind, int(inverse), v, result)
        recent = recent[-4:] + [(kind, inverse, weakref.ref(result))]
        if rng.random() < 0.7:  # else dropped at once: its edge must go
            pool.append(result)
        del result, predicted
    return checks, hits, bijectors


# The seeds below on which TFP's own cache fails, by release and substrate, as every CI
# run of 2026-12 measured them (a seed gives the same calls, and TFP the same outcome, in
# every run: the failures are not timing-dependent). Seeds 0 and 1 pass there: a strict
# expectation either way, so that each run checks what it shows. Releases and substrates
# not listed (the opt-in stacks') skip TFP's own cache here.
_UPSTREAM_FAILING_SEEDS = {
    ((0, 25), "tf"): {2},
    ((0, 25), "numpy"): {2},
    ((0, 26), "numpy"): {2},  # tfp-nightly 0.26.0.dev20261027, on jax-nightly
    ((0, 26), "jax"): {2},
}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_contract_holds_under_random_sequences(request, sub, impl, seed):
    """Random calls (forward, inverse, both log-dets) of equal and distinct bijectors, on
    values made, returned, dropped and (NumPy, where inputs stay writeable) changed in
    place, with bound and unbound clears, bijectors replaced by their copies (copy,
    deepcopy, pickle) and collections between them. After every call: the result is
    right for the values' current contents, and it is the very object a correct cache
    must return (the input of a live edge, or its output). At the end, with every value
    dropped: no entries left, not even dead ones.

    TFP's own cache fails some seeds (2, 3 and 4 of the first 12 on TFP 0.25) by the two
    defects that have tests of their own below, distilled from such seeds, and passes
    the others: each seed is expected to do as measured (_UPSTREAM_FAILING_SEEDS). This
    package's cache passed the first 40 seeds in every substrate of TFP 0.20, 0.25 and
    nightly, and in the NumPy substrate of TFP 0.12."""
    if impl == "upstream":
        failing = _UPSTREAM_FAILING_SEEDS.get((tfp_release(), sub))
        if failing is None:
            skip_unmeasured_upstream(f"these random sequences ({sub} substrate)")
        if seed in failing:
            expect_defect_on_upstream(request, impl)
    tfb = api(sub).bijectors
    gc.collect()
    stored = len(tfb.Bijector._cache.storage)  # raw entries, dead or alive, of every test

    def check(got, want, where):
        np.testing.assert_allclose(to_np(got), want, rtol=1e-4, atol=1e-5, err_msg=where)

    # Upstream makes NumPy inputs read-only (a defect tested below): no in-place changes.
    checks, hits, bijectors = _random_calls(
        tfb, seed, lambda numbers: value(sub, numbers),
        lambda v: to_np(v).astype(np.float64), lambda v, numbers: None, check,
        mutable=sub == "numpy" and impl != "upstream")
    assert checks > 50 and hits > 10, (checks, hits)  # the sequence did exercise the cache
    collect()
    assert [len(bij._cache) for _, bij in bijectors] == [0] * len(bijectors)
    left = len(tfb.Bijector._cache.storage)
    assert left <= stored, (left, stored)  # nothing left behind, dead or alive


@pytest.mark.parametrize("seed", [0, 1])
def test_contract_holds_under_random_sequences_in_a_trace(request, impl, seed):
    """The same random calls inside one ``tf.function`` trace, on graph tensors (whose
    entries live on their graph), by bijectors made in the trace: the very objects the
    contract names at trace time, the right numbers when it runs, and once the function
    is dropped, neither the graph nor any entry left. (Bijectors are copied with
    ``copy.copy`` only: a deep copy or pickle in a trace is not what this is about. No
    Softplus: TF's gradient registry keeps every graph that traced it, with any cache or
    none; see the README.)"""
    if "tf" not in SUBSTRATES:
        pytest.skip("needs TF with TFP >= 0.12")
    if impl == "upstream":
        # TFP's cache keeps the graph (a defect), from TFP 0.23 on (measured with
        # tests/leak_traces.py: 0.12, 0.17 and 0.20 did not keep it; here, measured on 0.25,
        # both seeds fail by it). Before 0.23 this was not measured.
        if tfp_release() is None or tfp_release() < (0, 23):
            skip_unmeasured_upstream("random sequences in a trace")
        expect_defect_on_upstream(request, impl)
    import tensorflow as tf

    tfb = api("tf").bijectors
    numbers = {}  # id(tensor) -> (weak reference, float64 numbers it will hold)
    checked = []  # (tensor, want, where)
    counts = []

    def make(values):
        t = tf.constant(values, dtype=tf.float32)
        numbers[id(t)] = (weakref.ref(t), np.array(values, np.float64))
        return t

    def contents(t):
        ref, held = numbers[id(t)]
        assert ref() is t
        return held

    def learn(t, held):
        numbers[id(t)] = (weakref.ref(t), held)

    def body():
        counts.append(_random_calls(tfb, seed, make, contents, learn,
                                    lambda got, want, where: checked.append((got, want, where)),
                                    mutable=False, copies=(copy.copy,),
                                    leave_out=("softplus",)))
        return [got for got, _, _ in checked]

    gc.collect()
    stored = len(tfb.Bijector._cache.storage)
    function = tf.function(body, autograph=False)
    outputs = function()
    graph = weakref.ref(function.get_concrete_function().graph)
    for i, out in enumerate(outputs):  # (no loop variable may keep a graph tensor)
        np.testing.assert_allclose(out.numpy(), checked[i][1], rtol=1e-4, atol=1e-5,
                                   err_msg=checked[i][2])
    checks, hits = counts[0][:2]
    assert checks > 50 and hits > 10, (checks, hits)
    del function, outputs, checked[:], counts[:]  # and the bijectors, made in the trace
    numbers.clear()
    collect()
    assert graph() is None, "the traced graph is kept alive"  # with its entries
    left = len(tfb.Bijector._cache.storage)
    assert left <= stored, (left, stored)  # nor any in the process's storage


# ---------------------------------------------------------------------------------------
# Defects of the upstream cache (expected to fail there)
# ---------------------------------------------------------------------------------------

def _numpy_defect_bijectors(request, impl):
    """The NumPy substrate's bijectors, for a test of a defect of TFP's own cache."""
    expect_defect_on_upstream(request, impl)
    if "numpy" not in SUBSTRATES:
        pytest.skip("no NumPy substrate here")
    return api("numpy").bijectors


def test_defect_numpy_inputs_keep_writeable(request, impl):
    tfb = _numpy_defect_bijectors(request, impl)
    bij = tfb.Exp()
    a = np.array([1.0, 2.0])
    y = bij.forward(a)
    assert a.flags.writeable, "the caller's array was made read-only"
    assert bij.inverse(y) is a
    a[0] = 3.0  # the caller may change its own array ...
    np.testing.assert_allclose(bij.forward(a), np.exp([3.0, 2.0]))  # ... and gets no stale result


@pytest.mark.parametrize("n", [2, 100000])  # snapshots: bytes when small, arrays when large
def test_defect_numpy_arrays_changed_in_place_give_no_stale_results(request, impl, n):
    tfb = _numpy_defect_bijectors(request, impl)
    bij = tfb.Exp()
    a = np.linspace(-1.0, 1.0, n)
    y = bij.forward(a)
    assert bij.forward(a) is y and bij.inverse(y) is a  # cached while unchanged
    a[::-1].sort()  # a permutation of the same values
    np.testing.assert_allclose(bij.forward(a), np.exp(a))
    y = bij.forward(a)
    y[0] = 5.0  # the caller changes an output ...
    np.testing.assert_allclose(bij.inverse(y)[0], np.log(5.0))  # ... and inverting it sees that
    np.testing.assert_allclose(bij.forward(a), np.exp(a))
    y = bij.forward(a)
    a[0] = 7.0  # the caller changes an input whose output is cached ...
    np.testing.assert_allclose(bij.inverse(y)[0], np.log(y[0]))  # ... the inverse is not stale


@pytest.mark.parametrize("layout", ["c", "fortran", "strided"])
def test_defect_numpy_large_arrays_changed_anywhere_are_seen(request, impl, layout):
    """Large snapshots are compared whole, whatever the array's memory layout: a change
    to the last element of a 400 kB input or output is seen."""
    tfb = _numpy_defect_bijectors(request, impl)
    bij = tfb.Exp()
    base = np.linspace(-1.0, 1.0, 100000)
    if layout == "c":
        a = base.copy()
    elif layout == "fortran":
        a = np.asfortranarray(base.reshape(250, 400))
    else:
        a = np.linspace(-1.0, 1.0, 200000)[::2]
    y = bij.forward(a)
    assert bij.forward(a) is y and bij.inverse(y) is a  # cached while unchanged
    a[(-1,) * a.ndim] = 0.5
    np.testing.assert_allclose(bij.forward(a), np.exp(a))
    y = bij.forward(a)
    y[(-1,) * y.ndim] = 2.0
    np.testing.assert_allclose(bij.inverse(y), np.log(y))


@pytest.mark.parametrize("n", [3, 100000])
@pytest.mark.parametrize("how", ["view_of_writeable_base", "flag_set_back"])
def test_defect_numpy_read_only_arrays_that_change_give_no_stale_results(request, impl, how, n):
    """``flags.writeable`` is False says nothing about the memory: a read-only view
    changes with its writeable base, and an array that owns its data can be made
    writeable again. Such inputs and outputs are checked like any other."""
    tfb = _numpy_defect_bijectors(request, impl)
    bij = tfb.Exp()
    base = np.linspace(-1.0, 1.0, n)

    def read_only(array):
        if how == "view_of_writeable_base":
            view = array.view()
            view.flags.writeable = False
            return view, array  # (the read-only array, what the caller can still change)
        array.flags.writeable = False
        return array, array

    def change(target, index, value):
        target.flags.writeable = True  # a no-op for the writeable base
        target[index] = value
        if how == "flag_set_back":
            target.flags.writeable = False

    a, a_owner = read_only(base.copy())
    y = bij.forward(a)
    assert bij.forward(a) is y and bij.inverse(y) is a  # cached while unchanged
    change(a_owner, 0, 0.5)
    np.testing.assert_allclose(bij.forward(a), np.exp(a))  # the input changed: recomputed
    y = bij.forward(a)
    y_ro, y_owner = read_only(y)
    x = bij.inverse(y_ro)
    change(y_owner, -1, 2.0)
    np.testing.assert_allclose(bij.inverse(y_ro), np.log(y_ro))  # the output changed
    assert x is not None


def test_defect_numpy_large_snapshots_in_reused_memory_stay_apart(request, impl):
    """Large snapshots reuse the memory of dropped edges: live edges never share it."""
    tfb = _numpy_defect_bijectors(request, impl)
    bij = tfb.Chain([tfb.Exp(), tfb.Shift(1.0)])
    keep = []
    for i in range(10):
        a = np.full(100000, 0.1 * i)
        y = bij.forward(a)
        if i % 2:
            keep.append((a, y))
        del a, y  # every other edge dies: the next ones take over its snapshot memory
    for a, y in keep:
        assert bij.forward(a) is y and bij.inverse(y) is a  # unchanged arrays still hit
    for a, y in keep:
        a += 1.0  # changed in place: each is seen as changed, and only it
        np.testing.assert_allclose(bij.forward(a), np.exp(a + 1.0))
        np.testing.assert_allclose(bij.inverse(y), np.log(y) - 1.0)
        assert bij.inverse(y) is not a


def test_defect_bound_clear_raises_nothing_once_an_input_went(request, sub, impl):
    """TFP's own bound ``clear()`` (which ``gpflow.utilities.reset_cache_bijectors``,
    ``deepcopy`` and ``freeze`` call) raises ``KeyError`` here, in one thread: it walks a
    list of keys, and deleting one entry releases an input whose weakref callback
    deletes a key further down the list. Distilled from the random test above (TFP 0.12
    to nightly, every substrate)."""
    expect_defect_on_upstream(request, impl)
    bij = api(sub).bijectors.Exp()
    x = value(sub, [0.5])
    y = bij.forward(x)
    w = bij.inverse(x)
    del w, x  # x is now held only by the entry of y
    bij._cache.clear()
    assert len(bij._cache) == 0
    np.testing.assert_allclose(to_np(bij.inverse(y)), [0.5], rtol=1e-6)


def test_defect_values_through_a_chains_parts_then_the_chain_are_released(request, sub, impl):
    """Values passed through a Chain's parts and then back through the Chain: TFP's own
    cache keeps them, and its entries, for good. The Chain's inverse returns ``x``, which
    the parts' entries hold while ``y`` lives, so the Chain's entry holds ``y`` while
    ``x`` lives: each keeps the other. Distilled from the random test above (TFP 0.12 to
    nightly, every substrate)."""
    expect_defect_on_upstream(request, impl)
    tfb = api(sub).bijectors
    chain = tfb.Chain([tfb.Exp(), tfb.Scale(2.0)])
    x = value(sub, [0.5])
    y = tfb.Exp().forward(tfb.Scale(2.0).forward(x))
    assert chain.inverse(y) is x  # found through the parts' entries
    refs = [weakref.ref(x), weakref.ref(y)]
    del x, y
    collect()
    assert [r() for r in refs] == [None, None], "kept alive by the cache"
    assert len(chain._cache) == 0


def test_defect_unbound_clear_empties_the_cache(request, sub, impl):
    expect_defect_on_upstream(request, impl)
    tfb = api(sub).bijectors
    bijectors = [tfb.Exp(), tfb.Softplus(), tfb.Shift(3.0)]
    keep = [(b, b.forward(value(sub, [0.5]))) for b in bijectors]
    assert all(len(b._cache) == 1 for b in bijectors)
    tfb.Bijector._cache.clear()
    assert [len(b._cache) for b in bijectors] == [0, 0, 0]
    del keep


def test_defect_bound_clear_spares_other_bijector_objects(request, sub, impl):
    expect_defect_on_upstream(request, impl)
    tfb = api(sub).bijectors
    mine, other = tfb.Exp(), tfb.Exp()  # equal, distinct objects
    x1, x2 = value(sub, [0.5]), value(sub, [1.5])
    y1, y2 = mine.forward(x1), other.forward(x2)
    mine._cache.clear()
    assert other.inverse(y2) is x2, "clearing one bijector dropped another one's entries"
    assert mine.inverse(y1) is not x1


def test_defect_cache_object_pickles_and_copies_empty(request, sub, impl):
    expect_defect_on_upstream(request, impl)
    tfb = api(sub).bijectors
    bij = tfb.Exp()
    x = value(sub, [0.5])
    y = bij.forward(x)
    for clone in (pickle.loads(pickle.dumps(tfb.Bijector._cache)),
                  copy.deepcopy(tfb.Bijector._cache), copy.copy(tfb.Bijector._cache)):
        assert len(clone.items()) == 0
    assert bij.inverse(y) is x


# TFP's own cache keeps an input's entry, with the log-det-Jacobians computed for it,
# for as long as the input lives, also once the output it was made with died (TFP's own
# tests, cache_util_test.py and bijector_test.py, count such entries). Where a bijector
# holds a tf.Variable, those log-dets go stale when the variable changes. Measured on
# every release from TFP 0.12 to 0.25 and on tfp-nightly 0.26.dev (the default stacks and
# the opt-in ones: mid-0.13 to mid-0.24, tf-nightly; 2026-12-07): every kind below, from
# the second step on. (TFP 0.11's per-bijector cache does the same, and the package leaves
# it as it is there: the legacy fix does not touch the hot path; TFP 0.9 and 0.10 get
# these numbers right. See the README.)
_STALE_LOG_DETS_MEASURED = {(0, minor) for minor in range(12, 27)}
_WITH_A_VARIABLE = {
    "Scale": lambda tfb, v: tfb.Scale(v),
    "SinhArcsinh": lambda tfb, v: tfb.SinhArcsinh(skewness=v),
    "Softplus": lambda tfb, v: tfb.Softplus(hinge_softness=v),
}


@pytest.mark.parametrize("kind", sorted(_WITH_A_VARIABLE))
def test_defect_log_prob_of_kept_data_follows_the_bijector_s_variable(request, impl, kind):
    """An eager training loop on one data tensor: ``log_prob(data)`` of a
    ``TransformedDistribution`` whose bijector holds a ``tf.Variable``, and its gradient,
    step after step with the variable changed. Each step must give what the same step
    gives on a new tensor of the same numbers (which no cache can hold anything for).
    TFP's own cache answers from the second step on with the log-det-Jacobian of the
    first: a stale ``log_prob``, and a gradient without that term (for ``Scale`` its sign
    flips). This package drops an entry with its output, log-dets included."""
    if "tf" not in SUBSTRATES:
        pytest.skip("needs TF with TFP >= 0.12 (tf.Variable parameters)")
    if impl == "upstream":
        if tfp_release() not in _STALE_LOG_DETS_MEASURED:
            skip_unmeasured_upstream("log-dets of inputs whose outputs died")
        expect_defect_on_upstream(request, impl)
    import tensorflow as tf

    tfp = api("tf")

    def step(dist, variable, data):
        with tf.GradientTape() as tape:
            lp = tf.reduce_sum(dist.log_prob(data))
        return lp.numpy(), tape.gradient(lp, variable).numpy()

    def transformed(variable):
        return tfp.distributions.TransformedDistribution(
            tfp.distributions.Normal(0.0, 1.0), _WITH_A_VARIABLE[kind](tfp.bijectors, variable))

    v, w = tf.Variable(0.5), tf.Variable(0.5)
    kept, fresh = transformed(v), transformed(w)
    data = tf.constant([1.0, 2.0])
    for i in range(3):
        got = step(kept, v, data)
        want = step(fresh, w, tf.constant([1.0, 2.0]))
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{kind}, step {i}")
        v.assign_add(0.25)
        w.assign_add(0.25)
