"""F23: ``tfp.optimizer`` Keras optimizers whose ``get_config`` returns None.

Keras writes a compiled model (``pickle``, ``copy``, ``deepcopy``, ``model.save``) with
its optimizer's config. TFP's ``VariationalSGD`` (and ``StochasticGradientLangevinDynamics``,
which runs only in TF1 graphs) subclass Keras's optimizer but define ``get_config`` as
``pass`` (a TODO of TFP's), so no model compiled with one could be written (``The
get_config() method of <...VariationalSGD ...> should return a dict. It returned: None``;
HDF5: ``object of type 'NoneType' has no len()``; Keras 2.9 wrote the model and then
failed to load it: ``Unknown optimizer: VariationalSGD``).

Which classes, by feature: a Keras optimizer class of TFP whose own ``get_config``
does nothing but return None, and whose constructor keeps each of its arguments but
``name`` as the attribute of that name with a leading underscore (the tensors it made of
them). Such a class gets a ``get_config``: Keras's base optimizer config (its name and
clipping settings) and the constructor's arguments, each read from that attribute as
a Python number, with their dtypes; a ``from_config`` that gives the constructor those
values in those dtypes (so that a float64 argument stays float64) and sets the
clipping settings again; and its entry in Keras's registry under its class name. A
subclass with a constructor of its own keeps TFP's ``get_config``: which arguments it
takes is unknown here.
Nothing else changes: the optimizer's variables (its step count and slots) are
written and read back by Keras as for any of its optimizers.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any, Dict, List, Optional, Tuple

from ._closures import in_keras
from ._keras_layers import _keras_of, _own_constructor_below, _owner_of

_PACKAGE = "optimizer"  # relative to the TF substrate's prefix
_DTYPES = "dtypes"  # the config key under which the arguments' dtypes are written


def _does_nothing(fn: Any) -> bool:
    """Whether ``fn`` is a function whose body only returns None (``pass``)."""
    code = getattr(fn, "__code__", None)
    return (code is not None and code.co_names == () and code.co_varnames == ("self",)
            and all(const is None or isinstance(const, str) for const in code.co_consts))


def _arguments(cls: type) -> Optional[List[str]]:
    """The constructor's arguments but ``name``, if it keeps each as ``_<argument>``."""
    init = vars(cls).get("__init__")
    try:
        parameters = list(inspect.signature(init).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters):
        return None
    names = [p.name for p in parameters if p.name != "name"]
    stored = set(init.__code__.co_names)
    if not names or any(f"_{name}" not in stored for name in names):
        return None
    return names


def _keras_optimizer(cls: type) -> bool:
    """Whether ``cls`` derives from a Keras optimizer (one of Keras's classes that
    defines ``apply_gradients``: ``OptimizerV2``, or the legacy ``Optimizer``)."""
    return any("apply_gradients" in vars(klass) and in_keras(klass)
               for klass in cls.__mro__[1:])


def config_returns_none(cls: type) -> bool:
    """F23's cause: a Keras optimizer whose own ``get_config`` returns None, and whose
    arguments can be read back from the instance."""
    return (_does_nothing(vars(cls).get("get_config")) and _arguments(cls) is not None
            and _keras_optimizer(cls))


def _number(value: Any, key: str, cls: type) -> Tuple[Any, Optional[str]]:
    """A constructor argument kept as a tensor, as a Python value and its dtype's name."""
    import numpy as np

    if value is None or isinstance(value, (bool, int, float, str)):
        return value, None
    dtype = getattr(value, "dtype", None)
    static = None
    if hasattr(value, "numpy"):
        try:
            static = value.numpy()
        except Exception:
            static = None
    if static is None:
        from tensorflow import get_static_value

        static = get_static_value(value)
    if static is None:
        raise TypeError(
            f"{cls.__name__}.get_config(): its argument {key!r} is not a constant here "
            f"({value!r}), so it cannot be written in the optimizer's config.")
    array = np.asarray(static)
    if array.shape != () or array.dtype.kind not in "biuf":
        return array.tolist(), str(getattr(dtype, "name", array.dtype.name))
    return array.item(), str(getattr(dtype, "name", array.dtype.name))


def optimizer_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for F23's classes: Keras's base optimizer config and the
    constructor's arguments, read from the tensors the constructor made of them."""
    from ._record import RECORD

    owner = _owner_of(type(self), "get_config", optimizer_get_config)
    if _own_constructor_below(self, owner):  # its arguments are unknown here: TFP's own
        return RECORD.get_original(owner, "get_config")(self)
    config = super(owner, self).get_config()
    dtypes: Dict[str, str] = {}
    for key in _arguments(owner) or ():
        value, dtype = _number(getattr(self, f"_{key}"), key, owner)
        config[key] = value
        if dtype is not None:
            dtypes[key] = dtype
    if dtypes:
        config[_DTYPES] = dtypes
    return config


def _optimizer_from_config(cls: type, config: Dict[str, Any], custom_objects: Any = None) -> Any:
    """``from_config`` for F23's classes: the constructor, given each argument in the
    dtype it had; Keras's base settings it does not take (clipping) are set after."""
    import numpy as np

    owner = _owner_of(cls, "from_config", OPTIMIZER_FROM_CONFIG)
    config = dict(config)
    dtypes = config.pop(_DTYPES, None) or {}
    names = set(_arguments(owner) or ()) | {"name"}
    for key, dtype in dtypes.items():
        if key in config and config[key] is not None:
            config[key] = np.asarray(config[key], dtype=dtype)
    # Keras's base settings (``clipnorm``, ...: properties of Keras's optimizer); any other
    # key goes to the constructor, which refuses what it does not take.
    settings = {key: config.pop(key) for key in list(config)
                if key not in names and isinstance(getattr(cls, key, None), property)}
    optimizer = cls(**config)
    for key, value in settings.items():
        setattr(optimizer, key, value)
    return optimizer


OPTIMIZER_FROM_CONFIG = classmethod(_optimizer_from_config)


def plan(prefix: str) -> List[Tuple[Any, Any, Any]]:
    """The steps for F23 in the TF substrate whose modules start with ``prefix``:
    ``get_config``, ``from_config`` and a registry entry for each TFP optimizer class
    that shows its cause (where the name in Keras's registry is free, or this class)."""
    steps: List[Tuple[Any, Any, Any]] = []
    package = f"{prefix}.{_PACKAGE}."
    for module_name, module in sorted(sys.modules.items()):
        if module is None or not module_name.startswith(package):
            continue
        try:
            registry = _keras_of(module).utils.get_custom_objects()
        except Exception:
            continue
        for name, cls in sorted(vars(module).items()):
            if not isinstance(cls, type) or cls.__module__ != module_name or cls.__name__ != name:
                continue
            if registry.get(name, cls) is not cls:
                continue
            if vars(cls).get("get_config") is optimizer_get_config or config_returns_none(cls):
                steps += [(cls, "get_config", optimizer_get_config),
                          (cls, "from_config", OPTIMIZER_FROM_CONFIG),
                          (registry, name, cls)]
    return steps
