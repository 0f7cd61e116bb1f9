"""The cache's optional C path (the extension ``tfp_picklefix._speedups``).

``_cache.py`` is the reference: pure Python, self-contained, and what the upstream diff
proposes to TFP. Its common eager miss (one tensor or array, no ``**kwargs``, nothing
cached yet) and the drop when that output dies are most of what the cache adds to an
eager call; ``_speedups`` does the same steps in C, and hands everything else to the
same Python methods. It is built when the package is installed, where a C compiler and
Python's headers are found (``setup.py``: an optional extension, so an install without
them still succeeds, with the pure-Python cache).

:func:`enable` puts the C path on ``PicklefixBijectorCache.forward``/``inverse`` and on
the death callbacks of the storages made from then on; :func:`disable` puts the Python
back. The package enables it on import unless ``TFP_PICKLEFIX_SPEEDUPS=off``.
:func:`state` says which one runs and why; ``tfp_picklefix.status()`` reports it.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from . import _cache

ENV_VAR = "TFP_PICKLEFIX_SPEEDUPS"
_OFF_VALUES = ("0", "off", "false", "no")

# The pure-Python members that enable() replaces, as _cache.py defines them.
_PY_FORWARD = _cache.PicklefixBijectorCache.forward
_PY_INVERSE = _cache.PicklefixBijectorCache.inverse
_PY_DEATH_CALLBACK = _cache._death_callback
# The caches that keep the Python path: the pass-through (``off``; it is also what the
# benchmarks measure the cache against) and the greedy-attribute caches.
_PYTHON_CLASSES = (_cache.PicklefixBijectorCacheWithGreedyAttrs, _cache.NoBijectorCache,
                   _cache.NoBijectorCacheWithGreedyAttrs)

_module: Optional[Any] = None
_why_not = "not loaded yet"
_enabled = False


def off_by_env() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() in _OFF_VALUES


def _load() -> Optional[Any]:
    """The set-up extension, or None (``_why_not`` says why)."""
    global _module, _why_not
    if _module is not None:
        return _module
    import importlib.util

    if importlib.util.find_spec(__package__ + "._speedups") is None:
        _why_not = "not built"
        return None
    try:
        from . import _speedups
    except ImportError as exc:
        _why_not = f"not loadable ({exc})"
        return None
    try:
        _speedups.setup(_cache._Link, _cache.PicklefixBijectorCache, _cache._Shared,
                        _cache._Storage, _cache._kinds, _cache._EAGER, _cache._NDARRAY,
                        _cache._SCALAR, _cache._SMALL, _cache._containerize)
    except Exception as exc:  # a _cache.py the extension was not built for
        _why_not = f"does not match this _cache.py ({type(exc).__name__}: {exc})"
        return None
    _module = _speedups
    return _module


def enable() -> bool:
    """Run the cache's common miss and a Link's death in C, if the extension is built
    (idempotent). Storages made before keep their Python death callbacks (both drop a
    Link the same way). Returns whether the C path is on."""
    global _enabled
    if _enabled:
        return True
    speedups = _load()
    if speedups is None:
        return False
    lookup = speedups.lookup
    Callback = speedups.Callback

    def forward(self, x, **kwargs):
        if kwargs:
            return self._lookup(x, 0, kwargs)
        return lookup(self, x, 0)

    def inverse(self, y, **kwargs):
        if kwargs:
            return self._lookup(y, 1, kwargs)
        return lookup(self, y, 1)

    forward.__doc__ = _PY_FORWARD.__doc__
    inverse.__doc__ = _PY_INVERSE.__doc__
    for cls in _PYTHON_CLASSES:
        cls.forward = _PY_FORWARD
        cls.inverse = _PY_INVERSE
    _cache.PicklefixBijectorCache.forward = forward
    _cache.PicklefixBijectorCache.inverse = inverse
    _cache._death_callback = Callback
    _enabled = True
    return True


def disable() -> None:
    """The pure-Python cache again, as ``_cache.py`` defines it (idempotent)."""
    global _enabled
    _cache.PicklefixBijectorCache.forward = _PY_FORWARD
    _cache.PicklefixBijectorCache.inverse = _PY_INVERSE
    for cls in _PYTHON_CLASSES:
        for name in ("forward", "inverse"):
            if name in vars(cls):
                delattr(cls, name)
    _cache._death_callback = _PY_DEATH_CALLBACK
    _enabled = False


def enabled() -> bool:
    return _enabled


def state() -> str:
    """For ``status()``: "C" or "Python (why)"."""
    if _enabled:
        return "C"
    if off_by_env():
        return f"Python ({ENV_VAR}=off)"
    if _module is not None:
        return "Python (disabled)"
    return f"Python (extension {_why_not})"


def enable_unless_off() -> bool:
    """What the package does on import."""
    if off_by_env():
        return False
    return enable()
