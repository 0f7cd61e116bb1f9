"""Adapter for the global cache era (TFP >= 0.12): install this package's cache.

TFP keeps one class-level cache object per class that defines ``_cache``
(``Bijector._cache``; ``FFJORD._cache`` and ``HighwayFlow._cache`` with greedy
attributes). Each one found on ``Bijector`` or a subclass is replaced, per mode:
``fixed`` by :class:`~tfp_picklefix._cache.PicklefixBijectorCache`, ``off`` by a
pass-through, ``upstream`` not at all. A subclass defined later with a cache of its
own (a user's flow written like FFJORD) gets the same, through
``Bijector.__init_subclass__``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Tuple

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


def _own_upstream_cache(klass: type) -> Any:
    """``klass``'s own class-level upstream ``_cache`` (not an inherited one), or None."""
    value = vars(klass).get("_cache")
    return value if value is not None and _is_upstream_cache(value) else None


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


def subclass_hook(bijector: type, on_cache: Callable[[type], None]) -> classmethod:
    """A ``bijector.__init_subclass__`` that hands ``on_cache`` every subclass defined
    from now on with an upstream class-level ``_cache`` of its own."""
    original = vars(bijector).get("__init_subclass__")

    def __init_subclass__(cls, **kwargs):
        if original is not None:  # a future TFP's own hook runs first
            original.__get__(None, cls)(**kwargs)
        else:
            super(bijector, cls).__init_subclass__(**kwargs)
        if _own_upstream_cache(cls) is not None:
            on_cache(cls)

    return classmethod(__init_subclass__)


def plan(module: Any, mode: str, on_cache: Optional[Callable[[type], None]] = None) -> List[Step]:
    """Replacements of every upstream class-level ``_cache`` below ``module.Bijector``
    and, given ``on_cache``, the hook that reports subclasses defined later."""
    if mode == UPSTREAM:
        return []
    steps = []
    for klass in _subclasses(module.Bijector):
        value = _own_upstream_cache(klass)
        if value is not None:
            steps.append((klass, "_cache", replacement(value, klass, mode)))
    if on_cache is not None:
        steps.append((module.Bijector, "__init_subclass__",
                      subclass_hook(module.Bijector, on_cache)))
    return steps
