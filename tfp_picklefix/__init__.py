"""tfp-picklefix: make TensorFlow Probability objects pickle, copy and deep-copy.

``import tfp_picklefix`` once at start-up. TFP's substrates (TF, NumPy, JAX) are
patched when they are imported, before or after this package; importing this
package imports none of TensorFlow, TFP or JAX. ``TFP_PICKLEFIX=off`` in the
environment turns everything off.

Public API: :func:`patch`, :func:`unpatch`, :func:`patched`, :func:`status`,
:func:`is_patched`, :func:`get_original`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from . import _manager
from ._record import RECORD as _RECORD
from ._status import Status, SubstrateStatus

__version__ = "0.1.0"
__all__ = ["patch", "unpatch", "patched", "status", "is_patched", "get_original",
           "set_cache_mode", "cache_mode", "diagnose", "Status", "SubstrateStatus",
           "__version__"]


def patch() -> Status:
    """Patch every imported TFP substrate and any imported later. Idempotent.

    Does nothing when ``TFP_PICKLEFIX=off`` is set. Returns :func:`status`.
    """
    return _manager.patch()


def unpatch() -> Status:
    """Restore every attribute this package replaced, identity-equal. Idempotent."""
    return _manager.unpatch()


@contextlib.contextmanager
def patched() -> Iterator[Status]:
    """Patch for the duration of a ``with`` block; restores the previous state after."""
    was_active = _manager.is_active()
    yield patch()
    if not was_active:
        unpatch()


def set_cache_mode(mode: str) -> None:
    """TFP >= 0.12: "fixed" (this package's cache), "upstream" (TFP's own) or "off" (none).

    Takes effect at once for every patched substrate; the default comes from
    ``TFP_PICKLEFIX_CACHE``. Cached entries are not carried across a switch.
    """
    _manager.set_cache_mode(mode)


def cache_mode() -> str:
    """The current global-era cache mode."""
    return _manager.cache_mode()


def diagnose(obj: Any, name: Any = None) -> Any:
    """Why ``obj`` would fail to pickle or deep-copy: each reason with its attribute path.

    Returns a ``Diagnosis`` (falsy when both succeed); ``print()`` it for a report.
    """
    from ._diagnose import diagnose as _diagnose

    return _diagnose(obj, name)


def status() -> Status:
    """What was detected and patched, per substrate; ``str()`` of it is a table."""
    return _manager.status()


def is_patched(owner: Any, name: str) -> bool:
    """Whether this package currently replaces ``owner.name``."""
    return _RECORD.is_patched(owner, name)


def get_original(owner: Any, name: str) -> Any:
    """What ``owner.name`` was before this package patched it."""
    return _RECORD.get_original(owner, name)


if not _manager.env_disabled():
    _manager.patch()
