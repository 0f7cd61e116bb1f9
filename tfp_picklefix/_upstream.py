"""``python -m tfp_picklefix upstream-diff``: the same cache fix, written natively into TFP.

Produces a unified diff against the installed TFP's ``cache_util.py`` of each
substrate (TF, and the generated NumPy/JAX copies): ``BijectorCache`` and
``BijectorCacheWithGreedyAttrs`` become this package's implementation
(``_cache.py`` is self-contained for that reason). The older helpers stay, since
other TFP modules use them (``hashable_structure`` for ``Bijector.__hash__``).
Apply it at the site-packages level with ``patch -p1``.
"""
from __future__ import annotations

import difflib
import importlib.util
import inspect
import os
from typing import Dict, List, Optional

from . import _cache

CACHE_UTIL = {
    "tf": "tensorflow_probability/python/internal/cache_util.py",
    "numpy": "tensorflow_probability/substrates/numpy/internal/cache_util.py",
    "jax": "tensorflow_probability/substrates/jax/internal/cache_util.py",
}
_MARKER = "class BijectorCache("


def site_root() -> Optional[str]:
    """The folder that holds the installed ``tensorflow_probability`` (not imported)."""
    spec = importlib.util.find_spec("tensorflow_probability")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def native_source() -> str:
    """This package's cache as a block of TFP source (no docstring, no __future__)."""
    lines = inspect.getsource(_cache).splitlines(keepends=True)
    body = "".join(lines)
    # Drop the module docstring and the __future__ import; keep the rest verbatim.
    start = body.index('"""', body.index('"""') + 3) + 3
    body = body[start:].replace("from __future__ import annotations\n", "", 1)
    return body.lstrip("\n")


def patched_source(original: str) -> str:
    if _MARKER not in original:
        raise ValueError("this cache_util.py has no BijectorCache class (not TFP >= 0.12)")
    head = original[:original.index(_MARKER)]
    return (head
            + "# BijectorCache: picklable, thread-safe and graph-scoped (from tfp-picklefix).\n"
            + native_source().rstrip("\n") + "\n\n\n"
            + "BijectorCache = PicklefixBijectorCache\n"
            + "BijectorCacheWithGreedyAttrs = PicklefixBijectorCacheWithGreedyAttrs\n")


def diffs(root: Optional[str] = None, substrates: Optional[List[str]] = None) -> Dict[str, str]:
    """{substrate: unified diff} for every installed substrate's cache_util.py."""
    root = root or site_root()
    if root is None:
        raise RuntimeError("tensorflow_probability is not installed")
    out = {}
    for name, rel in CACHE_UTIL.items():
        if substrates and name not in substrates:
            continue
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            original = f.read()
        new = patched_source(original)
        out[name] = "".join(difflib.unified_diff(
            original.splitlines(keepends=True), new.splitlines(keepends=True),
            fromfile="a/" + rel, tofile="b/" + rel))
    return out
