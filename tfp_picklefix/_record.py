"""Record of originals: every attribute this package replaces, and how to put it back.

Modelled on pytest's MonkeyPatch undo stack and gevent's ``saved`` dict: the first
value seen for ``(owner, name)`` is kept as the original, so patching twice never
records a patched object as "original", and restoring an attribute that the owner
did not define itself (an inherited one) deletes it instead of copying it down.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

_MISSING = object()


class Saved(NamedTuple):
    owner: Any
    name: str
    original: Any  # _MISSING when ``owner`` had no attribute of its own
    replacement: Any
    group: str


class Record:
    """Undo stack of replaced attributes, grouped (one group per patched module)."""

    def __init__(self) -> None:
        self._saved: Dict[Tuple[int, str], Saved] = {}
        self._order: List[Tuple[int, str]] = []
        self.lock = threading.RLock()

    def replace(self, owner: Any, name: str, value: Any, group: str) -> None:
        """Set ``owner.name = value``, remembering the original once."""
        with self.lock:
            key = (id(owner), name)
            if key not in self._saved:
                original = vars(owner).get(name, _MISSING)
                self._saved[key] = Saved(owner, name, original, value, group)
                self._order.append(key)
            else:
                old = self._saved[key]
                self._saved[key] = old._replace(replacement=value)
            setattr(owner, name, value)

    def restore(self, group: Optional[str] = None) -> List[Saved]:
        """Undo every replacement (of ``group`` only, if given), newest first."""
        with self.lock:
            undone = []
            for key in reversed(list(self._order)):
                saved = self._saved[key]
                if group is not None and saved.group != group:
                    continue
                if saved.original is _MISSING:
                    if saved.name in vars(saved.owner):
                        delattr(saved.owner, saved.name)
                else:
                    setattr(saved.owner, saved.name, saved.original)
                del self._saved[key]
                self._order.remove(key)
                undone.append(saved)
            return undone

    def entries(self, group: Optional[str] = None) -> List[Saved]:
        with self.lock:
            return [self._saved[k] for k in self._order
                    if group is None or self._saved[k].group == group]

    def is_patched(self, owner: Any, name: str) -> bool:
        with self.lock:
            return (id(owner), name) in self._saved

    def get_original(self, owner: Any, name: str) -> Any:
        """The value ``owner`` had before this package; ``owner.name`` if unpatched.

        Raises AttributeError when the owner had no attribute of its own
        (it was inherited) and none is inherited now.
        """
        with self.lock:
            saved = self._saved.get((id(owner), name))
        if saved is None:
            return getattr(owner, name)
        if saved.original is _MISSING:
            for klass in getattr(owner, "__mro__", (owner,))[1:]:
                if name in vars(klass):
                    return vars(klass)[name]
            raise AttributeError(f"{owner!r} had no attribute {name!r} of its own")
        return saved.original


RECORD = Record()
