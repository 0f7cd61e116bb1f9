"""Applies and reverts the patches for each substrate, one group per module."""
from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Any, Dict, Iterable, Tuple

from . import _detect, _hooks, _legacy
from ._record import RECORD
from ._status import Status, SubstrateStatus

ENV_VAR = "TFP_PICKLEFIX"
_OFF_VALUES = ("off", "0", "false", "no", "disabled")

_lock = threading.RLock()
_active = False
_reports: Dict[str, SubstrateStatus] = {}
_warned_unknown: set = set()


def env_disabled() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() in _OFF_VALUES


def _apply(owner: Any, name: str, value: Any, group: str) -> None:
    """One replacement; a separate function so that a test can make it fail midway."""
    RECORD.replace(owner, name, value, group)


def _labels(steps: Iterable[Tuple[Any, str, Any]]) -> Tuple[str, ...]:
    return tuple(f"{owner.__name__}.{name}" for owner, name, _ in steps)


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
        steps = _legacy.plan(module, detection.era)
        if not steps:
            report = SubstrateStatus(action="nothing to patch", **base)
            _reports[group] = report
            return report
        try:
            for owner, name, value in steps:
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
        report = SubstrateStatus(action="patched", patched=_labels(steps), **base)
        _reports[group] = report
        return report


def _on_import(substrate: _detect.Substrate, module: Any) -> None:
    with _lock:
        if _active:
            patch_module(substrate, module)


def patch() -> Status:
    """Patch every imported substrate now and every other one when it is imported."""
    global _active
    if env_disabled():
        return status()
    with _lock:
        _active = True
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
        return Status(enabled=not disabled, active=_active, mode=mode,
                      substrates=tuple(_reports[k] for k in sorted(_reports)))
