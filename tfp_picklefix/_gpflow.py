"""F20: GPflow's ``HeteroskedasticTFPConditional`` likelihood, for the standard pickle.

Its constructor (GPflow 2.1 on) defines ``conditional_distribution``, a closure over the
likelihood itself and the TFP distribution class it was given, and keeps it as an
attribute. No pickle can find such a function by name, so every GPflow model with that
likelihood (a heteroskedastic SVGP, as in GPflow's own notebook) failed ``pickle.dumps``
(``Can't pickle local object 'HeteroskedasticTFPConditional.__init__.<locals>.
conditional_distribution'``), and a ``deepcopy`` kept the original's closure, whose
``self`` is the original likelihood: the copy computed with the original's
``scale_transform`` (and kept the original alive).

Here such a likelihood is written as the call that makes it again, the class given its
distribution class (``functools.partial`` of the class: the pickle names only GPflow,
TFP and the standard library, and loads without this package), followed by its state
without the closure. The constructor makes the closure again over the new likelihood,
and the state gives it back its ``scale_transform`` and everything else. Only where the
class's constructor is the one that makes that closure, and the closure is the one it
made for this object; anything else is left to the default reduction, as before.
"""
from __future__ import annotations

import functools
import inspect
import sys
from typing import Any, List, Optional, Tuple

from ._detect import GPFLOW_LIKELIHOODS as MODULE
from ._keras_layers import _owner_of

_CLASS = "HeteroskedasticTFPConditional"
_CLOSURE = "conditional_distribution"
_FREE = ("distribution_class", "self")


def _closure_code(cls: type) -> Optional[Any]:
    """The code of the closure ``cls.__init__`` defines and keeps (F20's cause), or None."""
    init = vars(cls).get("__init__")
    if callable(init):
        init = inspect.unwrap(init)  # a decorated constructor: the function it wraps
    code = getattr(init, "__code__", None)
    if code is None or _CLOSURE not in code.co_varnames:
        return None
    for const in code.co_consts:
        if (inspect.iscode(const) and const.co_name == _CLOSURE
                and all(name in const.co_freevars for name in _FREE)):
            return const
    return None


def _cause(cls: type) -> bool:
    """The constructor keeps its closure, and no class below ``object`` pickles it."""
    return _closure_code(cls) is not None and not any(
        "__reduce__" in vars(klass) or "__reduce_ex__" in vars(klass)
        for klass in cls.__mro__ if klass is not object)


def heteroskedastic_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for ``HeteroskedasticTFPConditional`` (F20): the class called
    with the distribution class its closure holds, then its state without the closure."""
    reduced = object.__reduce_ex__(self, protocol)
    owner = _owner_of(type(self), "__reduce_ex__", heteroskedastic_reduce_ex)
    if (type(self).__init__ is not owner.__init__
            or not isinstance(reduced, tuple) or len(reduced) < 3
            or not isinstance(reduced[2], dict)):
        return reduced  # a subclass with a constructor of its own: as before
    fn = inspect.unwrap(reduced[2].get(_CLOSURE))  # GPflow >= 2.6 wraps it (check_shapes)
    code = _closure_code(owner)
    if getattr(fn, "__code__", None) is not code:
        return reduced
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    try:
        if cells["self"].cell_contents is not self:
            return reduced
        distribution_class = cells["distribution_class"].cell_contents
    except (KeyError, ValueError):  # an empty cell
        return reduced
    state = {key: value for key, value in reduced[2].items() if key != _CLOSURE}
    make = functools.partial(type(self), distribution_class=distribution_class)
    return (make, (), state) + tuple(reduced[3:])


def plan() -> List[Tuple[Any, str, Any]]:
    """F20's step, where GPflow's module is imported and the class shows the cause (or
    is patched already, so that planning again keeps it)."""
    cls = getattr(sys.modules.get(MODULE), _CLASS, None)
    if not isinstance(cls, type):
        return []
    if vars(cls).get("__reduce_ex__") is heteroskedastic_reduce_ex or _cause(cls):
        return [(cls, "__reduce_ex__", heteroskedastic_reduce_ex)]
    return []
