"""Post-import hooks (wrapt): patch each substrate when TFP imports it, never import it ourselves."""
from __future__ import annotations

import threading
from typing import Any, Callable

from . import _detect

_lock = threading.Lock()
_installed = False


def install(on_import: Callable[[_detect.Substrate, Any], None]) -> None:
    """Register ``on_import(substrate, module)`` for every known substrate module, once.

    wrapt calls a hook at once for a module that is already imported, and otherwise
    right after the import finishes (outside the import lock).
    """
    global _installed
    with _lock:
        if _installed:
            return
        import wrapt

        for substrate in _detect.SUBSTRATES:
            wrapt.register_post_import_hook(
                (lambda module, s=substrate: on_import(s, module)), substrate.module)
        _installed = True
