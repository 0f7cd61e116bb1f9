"""Post-import hooks: patch each substrate when TFP imports it, never import it ourselves.

The hooks are wrapt's (``register_post_import_hook``: run right after a module is
imported, or at once if it already is). wrapt itself is imported only when TFP is:
a tiny finder watches for the first import of ``tensorflow_probability`` (every
substrate module lives below it) and registers the hooks then, so that
``import tfp_picklefix`` stays cheap in programs that have not imported TFP yet.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Callable, List, Tuple

from . import _detect

_ROOT = "tensorflow_probability"
_lock = threading.RLock()
_installed = False
_callback: Any = None
# Per thread, the names of the modules whose post-import hook is running (innermost
# last). With wrapt < 1.14 (its loaders have no ``exec_module``) such a module is not
# marked as still initializing, yet its package does not hold its name until the hook
# returns.
_hooked = threading.local()


def importing() -> Tuple[str, ...]:
    """The modules whose import this thread is inside of, in this package's hooks."""
    return tuple(getattr(_hooked, "names", ()))


def _inside(module: Any, call: Callable[[], None]) -> None:
    names: List[str] = getattr(_hooked, "names", None)
    if names is None:
        names = _hooked.names = []
    names.append(getattr(module, "__name__", ""))
    try:
        call()
    finally:
        names.pop()


def _is_tfp(name: str) -> bool:
    return name == _ROOT or name.startswith(_ROOT + ".")


class _FirstTfpImport:
    """A meta-path finder that finds nothing; it notices TFP's first import."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if _is_tfp(fullname):
            _register_wrapt_hooks()
        return None

    # Python < 3.4-style finders (wrapt 1.12's own finder is one) get asked this way.
    def find_module(self, fullname: str, path: Any = None) -> None:
        return self.find_spec(fullname, path)


_sentinel = _FirstTfpImport()


def _register_wrapt_hooks() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        if _sentinel in sys.meta_path:
            sys.meta_path.remove(_sentinel)
        import wrapt

        for substrate in _detect.SUBSTRATES:
            wrapt.register_post_import_hook(
                (lambda module, s=substrate: _inside(module, lambda: _callback(s, module))),
                substrate.module)
            for extra in _detect.EXTRA_MODULES.get(substrate.module, ()):
                # A later module defining its own class-level cache: patch the substrate again.
                wrapt.register_post_import_hook(
                    (lambda m, s=substrate: _inside(m, lambda: _extra_imported(s))), extra)


def _extra_imported(substrate: _detect.Substrate) -> None:
    module = sys.modules.get(substrate.module)
    # Some of these modules are imported while the Bijector module itself is still
    # running (it imports them): its own hook patches it once it is complete.
    if module is not None and getattr(module, "Bijector", None) is not None:
        _callback(substrate, module)


def install(on_import: Callable[[_detect.Substrate, Any], None]) -> None:
    """Call ``on_import(substrate, module)`` for every known substrate module, once each."""
    global _callback
    with _lock:
        _callback = on_import
        if _installed:
            return
        if any(_is_tfp(name) for name in list(sys.modules)):
            _register_wrapt_hooks()  # TFP (and so wrapt, via TF) is already there
        elif _sentinel not in sys.meta_path:
            sys.meta_path.insert(0, _sentinel)
