"""``tfp_picklefix.diagnose(obj)``: why an object would not pickle or deep-copy, and where.

Walks the object the way pickle does (instance ``__dict__``/state, list, tuple, dict
items) and reports, for each operation that fails, the deepest attribute paths whose
value fails by itself while everything below it succeeds, with the underlying error.
"""
from __future__ import annotations

import copy
import pickle
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

_OPERATIONS: Tuple[Tuple[str, Callable[[Any], Any]], ...] = (
    ("pickle", lambda o: pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL)),
    ("deepcopy", copy.deepcopy),
)
_MAX_DEPTH = 40


class Problem(NamedTuple):
    operation: str   # "pickle" or "deepcopy"
    path: str        # e.g. "model.kernel.lengthscales.bijector._from_x"
    type_name: str   # type of the value at that path
    error: str       # "TypeError: cannot pickle 'HashableWeakRef' object"


class Diagnosis(NamedTuple):
    root: str
    problems: Tuple[Problem, ...]

    def __bool__(self) -> bool:
        return bool(self.problems)

    def __str__(self) -> str:
        if not self.problems:
            return f"{self.root}: pickles and deep-copies"
        lines = [f"{self.root}: {len(self.problems)} problem(s)"]
        for p in self.problems:
            lines.append(f"  {p.operation:8s} {p.path} ({p.type_name}): {p.error}")
        return "\n".join(lines)


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _children(obj: Any) -> List[Tuple[str, Any]]:
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v) for k, v in list(obj.items())]
    if isinstance(obj, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    state = dict(getattr(obj, "__dict__", None) or {})
    for klass in type(obj).__mro__:  # __slots__ attributes, as pickle's copyreg reads them
        for slot in vars(klass).get("__slots__", ()) or ():
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") and \
                    hasattr(obj, slot):
                state.setdefault(slot, getattr(obj, slot))
    if not state:
        try:
            reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        except Exception:
            return []
        if isinstance(reduced, tuple) and len(reduced) > 2 and isinstance(reduced[2], dict):
            state = reduced[2]
    return [(f".{k}", v) for k, v in list(state.items())]


def _rank(item: Tuple[str, Any]) -> Tuple[int, str]:
    # Report user-facing paths: public attributes first, TF's tracking internals last.
    name = item[0]
    if name.startswith("._self_") or name.startswith("._TF"):
        return (2, name)
    return (1 if name.startswith("._") else 0, name)


def _walk(obj: Any, path: str, op: str, fn: Callable[[Any], Any], seen: dict, depth: int,
          out: List[Problem]) -> bool:
    """True when ``obj`` (or something below it) fails ``fn``."""
    if id(obj) in seen:
        return seen[id(obj)]
    if depth > _MAX_DEPTH:
        return False
    seen[id(obj)] = False
    try:
        fn(obj)
        return False
    except RecursionError:
        return False
    except Exception as exc:
        own = exc
    seen[id(obj)] = True
    found_below = False
    for suffix, child in sorted(_children(obj), key=_rank):
        found_below = _walk(child, path + suffix, op, fn, seen, depth + 1, out) or found_below
    if not found_below:  # nothing below fails on its own: this object is the culprit
        out.append(Problem(op, path, type(obj).__qualname__, _error(own)))
    return True


def diagnose(obj: Any, name: Optional[str] = None) -> Diagnosis:
    """Every reason ``obj`` would fail to pickle or deep-copy, with attribute paths.

    ``name`` is the root of the paths (default: the object's type name, lower-cased).
    An empty diagnosis (falsy) means both operations succeed.
    """
    root = name or type(obj).__name__.lower()
    problems: List[Problem] = []
    for op, fn in _OPERATIONS:
        _walk(obj, root, op, fn, {}, 0, problems)
    return Diagnosis(root, tuple(problems))
