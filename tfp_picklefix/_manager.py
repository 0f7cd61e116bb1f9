"""Applies and reverts the patches for each substrate, one group per module."""
from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Any, Dict

from . import _detect, _global, _hooks, _legacy, _native, _reducers
from ._record import RECORD
from ._status import Status, SubstrateStatus

ENV_VAR = "TFP_PICKLEFIX"
CACHE_ENV_VAR = "TFP_PICKLEFIX_CACHE"
_OFF_VALUES = ("off", "0", "false", "no", "disabled")

_lock = threading.RLock()
_active = False
_reports: Dict[str, SubstrateStatus] = {}
_warned_unknown: set = set()
_cache_mode: Any = None  # set from the environment on first use, then by set_cache_mode()


def cache_mode() -> str:
    """The global-era cache mode: "fixed" (default), "upstream" or "off"."""
    global _cache_mode
    if _cache_mode is None:
        value = os.environ.get(CACHE_ENV_VAR, _global.FIXED).strip().lower() or _global.FIXED
        if value not in _global.MODES:
            warnings.warn(f"tfp_picklefix: {CACHE_ENV_VAR}={value!r} is not one of "
                          f"{', '.join(_global.MODES)}; using {_global.FIXED!r}",
                          RuntimeWarning, stacklevel=3)
            value = _global.FIXED
        _cache_mode = value
    return _cache_mode


def set_cache_mode(mode: str) -> None:
    """Switch the global-era cache at run time; patched substrates are re-patched."""
    global _cache_mode
    if mode not in _global.MODES:
        raise ValueError(f"cache mode must be one of {', '.join(_global.MODES)}, not {mode!r}")
    with _lock:
        cache_mode()
        if mode == _cache_mode:
            return
        _cache_mode = mode
        for group, report in list(_reports.items()):
            if report.era == _detect.GLOBAL:
                RECORD.restore(group)
                module = sys.modules.get(group)
                if _active and module is not None:
                    substrate = next(s for s in _detect.SUBSTRATES if s.module == group)
                    patch_module(substrate, module)


def env_disabled() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() in _OFF_VALUES


def _apply(owner: Any, name: str, value: Any, group: str) -> None:
    """One replacement; a separate function so that a test can make it fail midway."""
    RECORD.replace(owner, name, value, group)


def patch_module(substrate: _detect.Substrate, module: Any) -> SubstrateStatus:
    """Detect the era of ``module`` and patch it; idempotent; rolls back on failure."""
    with _lock:
        group = module.__name__
        detection = _detect.detect_module(module)
        version = _detect.tfp_version()
        base = dict(substrate=substrate.name, module=group, tfp_version=version,
                    era=detection.era, detail=detection.reason)
        if detection.era == _detect.UNKNOWN:
            report = SubstrateStatus(action="not patched", **base)
            if group not in _warned_unknown:
                _warned_unknown.add(group)
                warnings.warn(
                    f"tfp_picklefix: TensorFlow Probability {version} ({group}) was not "
                    f"recognised: {detection.reason}. Nothing was patched in this substrate.",
                    RuntimeWarning, stacklevel=2)
            _reports[group] = report
            return report
        if detection.era == _detect.GLOBAL:
            steps = (_global.plan(module, cache_mode(),
                                  lambda cls, group=group: _adopt_cache(group, cls))
                     + _reducers.plan(group))
        else:
            steps = _legacy.plan(module, detection.era)
            if group in _detect.REDUCED_LEGACY:
                steps = steps + _reducers.plan(group)  # the reducers, by feature
        if not steps and not RECORD.entries(group):
            report = SubstrateStatus(action="nothing to patch", **base)
            _reports[group] = report
            return report
        try:
            for owner, name, value in steps:
                if not RECORD.is_patched(owner, name):  # idempotent: keep what is installed
                    _apply(owner, name, value, group)
        except Exception as exc:  # roll this substrate back fully; others stay patched
            RECORD.restore(group)
            report = SubstrateStatus(action=f"failed: {type(exc).__name__}: {exc}", **base)
            _reports[group] = report
            warnings.warn(
                f"tfp_picklefix: patching {group} (TFP {version}, {detection.era} era) "
                f"failed and was rolled back: {type(exc).__name__}: {exc}",
                RuntimeWarning, stacklevel=2)
            return report
        labels = _labels(RECORD.entries(group))
        report = SubstrateStatus(action="patched", patched=labels, **base)
        _reports[group] = report
        return report


def _adopt_cache(group: str, cls: type) -> None:
    """``cls`` was just defined with an upstream class-level ``_cache`` of its own: it
    gets this mode's cache, as the classes patched before it did (recorded, so that
    ``unpatch()`` and mode switches put the class's own cache back)."""
    with _lock:
        report = _reports.get(group)
        mode = cache_mode()
        if not _active or report is None or report.action != "patched" or mode == _global.UPSTREAM:
            return
        try:
            _apply(cls, "_cache", _global.replacement(vars(cls)["_cache"], cls, mode), group)
        except Exception as exc:  # never break the definition of the user's class
            warnings.warn(f"tfp_picklefix: {cls.__qualname__}._cache was left as it is: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)
            return
        _reports[group] = report._replace(patched=_labels(RECORD.entries(group)))


def _labels(entries: Any) -> tuple:
    """Status labels: one per patched class attribute, one line for re-attached submodules."""
    patched = [e for e in entries if isinstance(e.owner, type) and e.name != "__module__"]
    names = [f"{e.owner.__name__}.{e.name}" for e in patched]
    # Classes of one name in several modules (TF, Keras 2 and tf_keras each have an
    # _ObjectIdentityWrapper): those labels name the module too. A class of one module
    # defined again (a notebook cell run twice) keeps its plain label, once per class.
    modules: dict = {}
    for e, name in zip(patched, names):
        modules.setdefault(name, set()).add(e.owner.__module__)
    labels = [f"{e.owner.__module__}.{name}" if len(modules[name]) > 1 else name
              for e, name in zip(patched, names)]
    labels += [f"pickle's registry: {e.name.__name__}" if isinstance(e.name, type)
               else f"Keras's registry: {e.name}" for e in entries if type(e.owner) is dict]
    renamed = sum(1 for e in entries if isinstance(e.owner, type) and e.name == "__module__")
    if renamed:
        labels.append(f"{renamed} factory-made classes' __module__")
    submodules = sum(1 for e in entries if not isinstance(e.owner, (type, dict)))
    if submodules:
        labels.append(f"{submodules} submodule attributes (for dill)")
    return tuple(labels)


def _on_import(substrate: _detect.Substrate, module: Any) -> None:
    """The import hook's callback. It runs inside the user's ``import``: nothing it
    raises may reach that import, which would then fail although TFP is fine."""
    with _lock:
        if _active and module is not None:
            try:
                patch_module(substrate, module)
            except Exception as exc:
                warnings.warn(
                    f"tfp_picklefix: patching {getattr(module, '__name__', module)} failed: "
                    f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)


def patch() -> Status:
    """Patch every imported substrate now and every other one when it is imported."""
    global _active
    if env_disabled():
        return status()
    with _lock:
        _active = True
        _native.enable_unless_off()  # the fixed cache's C path, if built (before any cache)
        _hooks.install(_on_import)
        for substrate in _detect.SUBSTRATES:
            module = sys.modules.get(substrate.module)
            if module is not None:
                patch_module(substrate, module)
    return status()


def unpatch() -> Status:
    """Put every replaced attribute back (identity-equal); hooks stop patching."""
    global _active
    with _lock:
        _active = False
        for group in list(_reports):
            RECORD.restore(group)
            old = _reports[group]
            if old.action == "patched":
                _reports[group] = SubstrateStatus(
                    substrate=old.substrate, module=old.module, tfp_version=old.tfp_version,
                    era=old.era, detail=old.detail, action="unpatched")
        RECORD.restore()
    return status()


def is_active() -> bool:
    return _active


def status() -> Status:
    with _lock:
        disabled = env_disabled()
        mode = f"off ({ENV_VAR}={os.environ.get(ENV_VAR)})" if disabled else "on"
        return Status(enabled=not disabled, active=_active, mode=mode, cache_mode=cache_mode(),
                      substrates=tuple(_reports[k] for k in sorted(_reports)),
                      speedups=_native.state())
