"""Adapter for the global cache era (TFP >= 0.12): install this package's cache.

TFP keeps one class-level cache object per class that defines ``_cache``
(``Bijector._cache``; ``FFJORD._cache`` and ``HighwayFlow._cache`` with greedy
attributes). Each one found on ``Bijector`` or a subclass is replaced, per mode:
``fixed`` by :class:`~tfp_picklefix._cache.PicklefixBijectorCache`, ``off`` by a
pass-through, ``upstream`` not at all.
"""
from __future__ import annotations

from typing import Any, Iterator, List, Tuple

from . import _cache

FIXED, UPSTREAM, OFF = "fixed", "upstream", "off"
MODES = (FIXED, UPSTREAM, OFF)

Step = Tuple[Any, str, Any]


def _subclasses(cls: type) -> Iterator[type]:
    seen = set()
    stack = [cls]
    while stack:
        klass = stack.pop()
        if klass in seen:
            continue
        seen.add(klass)
        yield klass
        try:
            stack.extend(klass.__subclasses__())
        except TypeError:  # type.__subclasses__ needs an argument
            continue


def _is_upstream_cache(value: Any) -> bool:
    return (not isinstance(value, _cache.PicklefixBijectorCache)
            and hasattr(value, "forward") and hasattr(value, "inverse")
            and hasattr(value, "clear") and hasattr(value, "_forward_name"))


def replacement(upstream_cache: Any, owner: type, mode: str) -> Any:
    greedy = type(upstream_cache).__name__.endswith("WithGreedyAttrs")
    if mode == FIXED:
        cls = (_cache.PicklefixBijectorCacheWithGreedyAttrs if greedy
               else _cache.PicklefixBijectorCache)
    else:
        cls = _cache.NoBijectorCacheWithGreedyAttrs if greedy else _cache.NoBijectorCache
    new = cls(forward_name=upstream_cache._forward_name,
              inverse_name=upstream_cache._inverse_name)
    new._defining_class = owner
    return new


def plan(module: Any, mode: str) -> List[Step]:
    """Replacements of every upstream class-level ``_cache`` below ``module.Bijector``."""
    if mode == UPSTREAM:
        return []
    steps = []
    for klass in _subclasses(module.Bijector):
        value = vars(klass).get("_cache")
        if value is not None and _is_upstream_cache(value):
            steps.append((klass, "_cache", replacement(value, klass, mode)))
    return steps
