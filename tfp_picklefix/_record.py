"""Record of originals: every attribute this package replaces, and how to put it back.

Modelled on pytest's MonkeyPatch undo stack and gevent's ``saved`` dict: the first
value seen for ``(owner, name)`` is kept as the original, so patching twice never
records a patched object as "original", and restoring an attribute that the owner
did not define itself (an inherited one) deletes it instead of copying it down.
An owner that is a dict (a registry: ``copyreg.dispatch_table``) has its item
``name`` replaced instead of an attribute, and an item it did not have is deleted.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

_MISSING = object()


def _own(owner: Any, name: Any) -> Any:
    """What ``owner`` holds itself under ``name`` (_MISSING if nothing)."""
    if type(owner) is dict:
        return owner.get(name, _MISSING)
    return vars(owner).get(name, _MISSING)


def _set(owner: Any, name: Any, value: Any) -> None:
    if type(owner) is dict:
        owner[name] = value
    else:
        setattr(owner, name, value)


def _delete(owner: Any, name: Any) -> None:
    if type(owner) is dict:
        owner.pop(name, None)
    elif name in vars(owner):
        delattr(owner, name)


class Saved(NamedTuple):
    owner: Any
    name: Any  # an attribute name; for a dict owner, the key
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
        """Set ``owner.name = value``, remembering the original once.

        Nothing is recorded when the owner refuses the value (an immutable type): a
        record of it would make the rollback that follows fail the same way.
        """
        with self.lock:
            key = (id(owner), name)
            original = _own(owner, name)
            _set(owner, name, value)  # first: what could not be set is not recorded
            if key not in self._saved:
                self._saved[key] = Saved(owner, name, original, value, group)
                self._order.append(key)
            else:
                old = self._saved[key]
                self._saved[key] = old._replace(replacement=value)

    def restore(self, group: Optional[str] = None) -> List[Saved]:
        """Undo every replacement (of ``group`` only, if given), newest first."""
        with self.lock:
            undone = []
            for key in reversed(list(self._order)):
                saved = self._saved[key]
                if group is not None and saved.group != group:
                    continue
                if saved.original is _MISSING:
                    _delete(saved.owner, saved.name)
                else:
                    _set(saved.owner, saved.name, saved.original)
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
        (it was inherited) and none is inherited now; for a dict owner, the item
        (KeyError when it had none).
        """
        with self.lock:
            saved = self._saved.get((id(owner), name))
        if type(owner) is dict:
            if saved is None:
                return owner[name]
            if saved.original is _MISSING:
                raise KeyError(name)
            return saved.original
        if saved is None:
            return getattr(owner, name)
        if saved.original is _MISSING:
            for klass in getattr(owner, "__mro__", (owner,))[1:]:
                if name in vars(klass):
                    return vars(klass)[name]
            raise AttributeError(f"{owner!r} had no attribute {name!r} of its own")
        return saved.original


RECORD = Record()
