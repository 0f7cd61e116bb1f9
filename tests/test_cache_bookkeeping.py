"""What this package's cache does to its own storage: work counted, not timed.

Issue 3, point 7: a bound ``clear()`` costs time proportional to that bijector's own
entries. Here a cache object of the package's own class (not installed: bound to real
TFP bijectors by hand) gets an ``entries`` dict that counts how often it is walked
whole and how many keys are read, written or deleted; the count of a bound ``clear()``
must not depend on how many entries other bijectors have (TFP's own bound ``clear()``
walks its whole storage, and drops other objects' entries on the way:
``cache_conformance.test_defect_bound_clear_spares_other_bijector_objects``).
"""
from __future__ import annotations

import gc

import pytest

from tfp_picklefix import _cache

from conftest import global_substrates, make_value, substrates


@pytest.fixture(params=global_substrates() or [pytest.param(None, marks=pytest.mark.skip(
    reason="needs TFP >= 0.12 (the global cache era)"))])
def sub(request):
    return request.param


class CountingDict(dict):
    """A dict that counts whole walks and per-key accesses (of the calls the cache makes)."""

    def reset(self):
        self.walks = 0
        self.keyed = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()

    def items(self):
        self.walks += 1
        return super().items()

    def values(self):
        self.walks += 1
        return super().values()

    def keys(self):
        self.walks += 1
        return super().keys()

    def get(self, key, default=None):
        self.keyed += 1
        return super().get(key, default)

    def pop(self, key, *default):
        self.keyed += 1
        return super().pop(key, *default)

    def __getitem__(self, key):
        self.keyed += 1
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        self.keyed += 1
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self.keyed += 1
        super().__delitem__(key)

    def __contains__(self, key):
        self.keyed += 1
        return super().__contains__(key)


def _counting_cache():
    cache = _cache.PicklefixBijectorCache()
    storage = cache._s.eager
    storage.entries = CountingDict()
    storage.callback = _cache._death_callback(storage)  # it binds the entries dict
    storage.entries.reset()
    return cache, storage.entries


def _bind(cache, bijector):
    return cache.__get__(bijector, type(bijector))


def _clear_one_among(sub, others):
    """(walks, keyed) of a bound clear() of a bijector with 3 entries, while
    ``others`` other bijector objects have one entry each."""
    tfb = substrates()[sub].bijectors
    cache, entries = _counting_cache()
    kept = []
    for i in range(others):
        b = tfb.Shift(float(i))
        x = make_value(sub, [0.5])
        kept.append((b, x, _bind(cache, b).forward(x)))
    mine = tfb.Exp()
    xs = [make_value(sub, [v]) for v in (0.25, 0.5, 0.75)]
    ys = [_bind(cache, mine).forward(x) for x in xs]
    assert all(_bind(cache, mine).inverse(y) is x for x, y in zip(xs, ys))
    assert len(entries) == 2 * (others + 3)
    entries.reset()
    _bind(cache, mine).clear()
    counts = (entries.walks, entries.keyed)
    # Its own entries are gone, the others' are all there.
    assert len(entries) == 2 * others
    assert all(_bind(cache, mine).inverse(y) is not x for x, y in zip(xs, ys))
    assert all(_bind(cache, b).inverse(y) is x for b, x, y in kept)
    return counts


def test_bound_clear_touches_only_its_own_entries(sub):
    few = _clear_one_among(sub, 5)
    many = _clear_one_among(sub, 500)
    assert few[0] == 0 and many[0] == 0, "a bound clear() walked the whole storage"
    assert few[1] == many[1], (few, many)
    assert few[1] <= 4 * 3  # a few accesses per own entry (both directions of 3 edges)


def test_bookkeeping_of_dead_bijectors_is_dropped(sub):
    """Per-bijector records (tokens, per-owner sets) do not outlive their bijectors."""
    tfb = substrates()[sub].bijectors
    cache, entries = _counting_cache()
    for i in range(300):
        b = tfb.Shift(float(i) if i % 2 else 7.0)  # distinct ones, and equal ones
        y = _bind(cache, b).forward(make_value(sub, [0.5]))
        del b, y
    gc.collect()
    last = tfb.Scale(2.0)
    y = _bind(cache, last).forward(make_value(sub, [0.5]))
    shared = cache._s
    assert len(shared.tokens.by_id) == 1
    # The equality index too: one token, one live bijector.
    assert [len(m) for bucket in shared.tokens.by_hash.values() for m in bucket.values()] == [1]
    assert len(shared.eager.by_owner) == 1
    assert len(entries) == 2
    del y
    gc.collect()
    assert len(entries) == 0 and not shared.eager.held


def test_a_storage_that_is_not_another_caches_is_refused():
    # Upstream's caches share a storage through ``storage=``; this cache shares another
    # cache's (tests/cache_conformance.py), and refuses anything else rather than ignore it.
    cache = _cache.PicklefixBijectorCache()
    shared = _cache.PicklefixBijectorCache(storage=cache.storage)
    assert shared.storage is cache.storage
    with pytest.raises(ValueError, match="storage"):
        _cache.PicklefixBijectorCache(storage={})
    with pytest.raises(ValueError, match="same forward and inverse names"):
        _cache.PicklefixBijectorCache("_fwd", "_inv", storage=cache.storage)
