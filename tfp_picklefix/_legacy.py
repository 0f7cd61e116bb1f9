"""Adapters for the two per-instance cache eras (TFP 0.7-0.11).

Both eras keep forward/inverse results in the bijector's own ``__dict__``:
- ``dict`` era (<= 0.10): ``_from_x``/``_from_y``, ``WeakKeyDefaultDict``s keyed by
  ``HashableWeakRef`` (which cannot be pickled or deep-copied once filled);
- ``instance`` era (0.11): ``_cache``, a ``BijectorCache`` of lambdas bound to the
  bijector (which the standard pickle refuses even when empty, and which
  ``copy.deepcopy`` shares with the original, so a copy would call the original).

The fix touches only copying and pickling: ``Bijector.__getstate__`` hands out the
instance state with each cache replaced by an empty one of the same TFP class, so
``forward``/``inverse`` are left exactly as TFP wrote them. Nothing that ends up
in a pickle refers to this package: the instance era's empty cache is written as
"call ``<the new bijector>._setup_cache()``", which TFP itself can answer.
"""
from __future__ import annotations

from typing import Any, Callable, List, Tuple

from . import _detect

# (owner, attribute name, new value)
Step = Tuple[Any, str, Any]

_DICT_ERA_CACHES = ("_from_x", "_from_y")
_INSTANCE_ERA_CACHE = "_cache"
_INSTANCE_ERA_FACTORY = "_setup_cache"


class _FreshCache:
    """Stands in for an instance-era cache in a bijector's copied state.

    Pickled, it becomes a call of ``owner._setup_cache()``; ``owner`` is already in
    the pickle's memo, so on loading it is the *new* bijector, with or without this
    package in the loading process. Copied, it is replaced by ``__setstate__``.
    """

    __slots__ = ("owner",)

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    def __reduce__(self) -> Tuple[Callable[[], Any], Tuple[()]]:
        return getattr(self.owner, _INSTANCE_ERA_FACTORY), ()

    def __copy__(self) -> "_FreshCache":
        return self

    def __deepcopy__(self, memo: dict) -> "_FreshCache":
        return self


def _dict_era_getstate(self: Any) -> dict:
    """Instance state with empty ``_from_x``/``_from_y`` (the originals are untouched)."""
    state = self.__dict__.copy()
    for name in _DICT_ERA_CACHES:
        old = state.get(name)
        if old is not None:
            state[name] = type(old)()
    return state


def _instance_era_getstate(self: Any) -> dict:
    """Instance state with ``_cache`` replaced by a fresh-cache placeholder."""
    state = self.__dict__.copy()
    if _INSTANCE_ERA_CACHE in state:
        state[_INSTANCE_ERA_CACHE] = _FreshCache(self)
    return state


def _instance_era_setstate(self: Any, state: dict) -> None:
    """Restore state; a placeholder becomes a cache of *this* bijector's own."""
    self.__dict__.update(state)
    if type(state.get(_INSTANCE_ERA_CACHE)) is _FreshCache:
        self.__dict__[_INSTANCE_ERA_CACHE] = getattr(self, _INSTANCE_ERA_FACTORY)()


_dict_era_getstate.__qualname__ = "Bijector.__getstate__"
_instance_era_getstate.__qualname__ = "Bijector.__getstate__"
_instance_era_setstate.__qualname__ = "Bijector.__setstate__"
GETSTATES = (_dict_era_getstate, _instance_era_getstate)


def plan(module: Any, era: str) -> List[Step]:
    """The attribute replacements that fix copying/pickling for ``module.Bijector``."""
    bijector = module.Bijector
    if era == _detect.DICT:
        return [(bijector, "__getstate__", _dict_era_getstate)]
    if era == _detect.INSTANCE:
        return [(bijector, "__getstate__", _instance_era_getstate),
                (bijector, "__setstate__", _instance_era_setstate)]
    return []
