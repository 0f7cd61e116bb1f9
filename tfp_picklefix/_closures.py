"""F11: TFP's own closures, written for the standard pickle by reference to TFP's code.

The standard pickle writes a function by its module and name. A closure that TFP's
code makes (``make_cholesky_with_jitter_fn(0.1)``, the mean function of a
``precompute_regression_model``, ``TransformedTransitionKernel``'s transformed log
prob, ``random_walk_normal_fn()``, ...) has no name to be found by, so every object
that holds one failed ``pickle.dumps`` (cloudpickle and dill write such functions by
value; ``copy`` and ``deepcopy`` share them).

Here a closure is written as the call that makes the same function again: Python's
function type applied to the code object, which is found *in TFP*, by the name of the
function that defines it and the position of its code among that function's
constants; the module's globals; the defaults; and new cells holding the (pickled)
values of its closure cells. Only the standard library and TFP are named, so such a
pickle loads without this package, like every other one it makes. The path to the
code is followed once when the pickle is written and must lead to the closure's own
code object, or the closure is left alone (and pickle fails, as before). A lambda
that is no closure but a default argument in a TFP signature (``adjust_kr_fn=lambda
x: x``) is written as that very default, by its path. Functions defined in user code
are never written this way.

``deepcopy`` treats functions as atoms: a copy shares its closures with the original.
For the TFP closures whose cells hold state, the same writer makes, for deepcopy, a
call that makes the closure again from its own code with deep-copied cells, so that
the copy's closure refers to the copied state.
"""
from __future__ import annotations

import collections
import functools
import sys
import types
from typing import Any, Dict, List, Optional, Set, Tuple

try:
    from operator import call as _CALL  # Python >= 3.11
except ImportError:  # pragma: no cover - older Pythons: partial.__call__ pickles by name
    _CALL = functools.partial.__call__

_LOCALS = "<locals>"
_MAX_DEPTH = 4  # functions nested in functions


class _Call:
    """A stand-in that pickles and deep-copies as ``func(*args)`` (then ``state``); only
    what its reduction names is written. Callable only so that pickle accepts it in
    the place of a reduction's function (F11); F10 uses it too."""

    __slots__ = ("reduced",)

    def __init__(self, reduced: Tuple[Any, ...]) -> None:
        self.reduced = reduced

    def __reduce__(self) -> Tuple[Any, ...]:
        return self.reduced

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - never called
        raise TypeError("a pickling stand-in is not meant to be called")


def _module(name: str) -> _Call:
    import importlib

    return _Call((importlib.import_module, (name,)))


def _attribute(path: str, of: Any) -> _Call:
    import operator

    return _Call((operator.attrgetter(path), (of,)))


def _item(index: int, of: Any) -> _Call:
    import operator

    return _Call((operator.itemgetter(index), (of,)))


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _code_indices(code: Any, target: Any, depth: int) -> Optional[List[int]]:
    """The positions, constant within constant, that lead from ``code`` to ``target``."""
    if code is target:
        return []
    if depth >= _MAX_DEPTH:
        return None
    for index, const in enumerate(code.co_consts):
        if isinstance(const, types.CodeType):
            found = _code_indices(const, target, depth + 1)
            if found is not None:
                return [index] + found
    return None


def _home_module(fn: Any) -> Tuple[Optional[str], Any]:
    """(name, module) of the imported module whose globals ``fn`` runs in, or (name,
    None): a function's ``__module__`` can be set to anything, its globals cannot."""
    module_name = fn.__globals__.get("__name__")
    module = sys.modules.get(module_name or "")
    if module is None or vars(module) is not fn.__globals__:
        return module_name, None
    return module_name, module


# Where a function's code is, behind its decorators: TFP 0.20's GaussianProcess.__init__
# is wrapped twice (a deprecation decorator, then the distribution metaclass's wrapper).
_CODE_SUFFIXES = tuple(f"{method}{'__wrapped__.' * depth}__code__"
                       for method in ("", "__func__.") for depth in range(4))


def _code_path(fn: Any) -> Optional[Tuple[str, str, List[int]]]:
    """(module, attribute path of the enclosing function's code, constant positions) by
    which ``fn.__code__`` is found again in TFP's modules; None when it is not."""
    module_name, module = _home_module(fn)
    if module is None:
        return None
    parts = fn.__qualname__.split(".")
    if _LOCALS not in parts:
        return None
    outer = ".".join(parts[:parts.index(_LOCALS)])
    for suffix in _CODE_SUFFIXES:
        path = f"{outer}.{suffix}"
        try:
            code = _get(module, path)
        except AttributeError:
            continue
        if not isinstance(code, types.CodeType):
            continue
        indices = _code_indices(code, fn.__code__, 0)
        if indices:
            return module_name, path, indices
    return None


# TF's tracking package (tf.Module's tracked structures): since TF 2.13, and before.
TF_TRACKING = ("tensorflow.python.trackable", "tensorflow.python.training.tracking")
# The object-identity wrappers of Keras 2 (tf-keras, the keras package, TF <= 2.5's own)
# and of TF: the keys of a Keras layer's reference counts, which hold its attributes.
OBJECT_IDENTITY = tuple(f"{package}.object_identity" for package in (
    "tf_keras.src.utils", "keras.src.utils", "keras.utils", "tensorflow.python.keras.utils",
    "tensorflow.python.util"))
_WRITTEN_AS_ITSELF = tuple(p + "." for p in TF_TRACKING) + OBJECT_IDENTITY

# Where Keras 2 lives: tf-keras (TF >= 2.16), the keras package (TF 2.6-2.15), TF itself
# (TF <= 2.5).
_KERAS_2 = ("tf_keras.", "keras.", "tensorflow.python.keras.")


def module_name(kind: Any) -> str:
    """``kind.__module__`` where it is a string; "" otherwise (wrapt's pure-Python proxy
    classes, TFP's NumPy ``Variable`` among them, make it a property)."""
    module = getattr(kind, "__module__", None)
    return module if isinstance(module, str) else ""


def class_module(kind: type) -> str:
    """The module that defines class ``kind``: ``module_name(kind)``, or, where wrapt's
    pure-Python proxy type hides it behind a property (TF <= 2.6's ``_DictWrapper`` with
    wrapt 1.12), the globals of the functions its own class body defines; "" if none."""
    module = module_name(kind)
    if module:
        return module
    for value in list(vars(kind).values()):
        if type(value) is types.FunctionType:
            name = value.__globals__.get("__name__")
            if isinstance(name, str):
                return name
    return ""


def in_keras(kind: Any) -> bool:
    """Whether ``kind`` (a class or a function) is Keras's own: tf-keras, the ``keras``
    package, or TF's copy (``tensorflow.python.keras``, TF <= 2.5). TF's other modules
    are not Keras: Keras finds none of their functions by name."""
    name = module_name(kind)
    return name.split(".")[0] in ("tf_keras", "keras") or name.startswith(_KERAS_2[-1])


def keras_layer(kind: type) -> bool:
    """A Keras 2 class (tf-keras; before TF 2.16, the ``keras`` package or TF's own) that pickles by
    Python's default reduction (a layer, not a model: Keras writes models in its own
    format)."""
    return (in_keras(kind)
            and kind.__reduce_ex__ is object.__reduce_ex__ and kind.__reduce__ is object.__reduce__)


def _written_as_itself(kind: type) -> bool:
    """The objects whose reduction the writer rewrites around closures' stand-ins."""
    module = class_module(kind)
    if module.startswith(_WRITTEN_AS_ITSELF):
        return True  # a tf.Module's tracked structures; Keras's reference counts
    if module.startswith("tensorflow.") and hasattr(kind, "constraint") and hasattr(kind, "assign"):
        # A variable: its reduction names its constraint. Made inside a tf.function, it
        # is of a class of TF's function code (UnliftedInitializerVariable).
        return True
    return keras_layer(kind)


def _own_reduction(obj: Any) -> Any:
    """How an object pickles that can hold a TFP closure on the way to it: TF's tracking
    structures (``_DictWrapper``, ``ListWrapper``, ``_TupleWrapper``,
    ``TrackableReference``), Keras's reference counts (object-identity dictionaries),
    variables (their constraint), Keras layers, ``functools.partial`` and
    ``OrderedDict``: (callable, args, state...) with no ``__newobj__`` (a stand-in
    cannot be its own class), or None for other objects."""
    import copyreg

    kind = type(obj)
    if kind is collections.OrderedDict:
        return (kind, (list(obj.items()),))
    if kind is not functools.partial and not _written_as_itself(kind):
        return None
    try:
        reduced = obj.__reduce_ex__(4)
    except Exception:
        return None
    if not isinstance(reduced, tuple):
        return None
    while len(reduced) > 2 and reduced[-1] is None:  # no list or dict items
        reduced = reduced[:-1]
    if len(reduced) not in (2, 3):
        return None
    if reduced[0] is copyreg.__newobj__:  # cls.__new__(cls, *args), said without NEWOBJ
        new = reduced[1][0].__new__
        if type(new) is types.FunctionType and new.__module__ not in sys.modules:
            # A namedtuple's __new__ (TF <= 2.7's TrackableReference) has no module to be
            # found in: the same call through copyreg's, which pickle names.
            new = functools.partial(copyreg.__newobj__)
        reduced = (new,) + reduced[1:]
    elif type(reduced[0]) is functools.partial:  # a variable: partial(cls, **kwargs)()
        reduced = (_CALL, (reduced[0],) + tuple(reduced[1])) + reduced[2:]
    return reduced


def _default_path(fn: Any) -> Optional[Tuple[str, str, Any]]:
    """(module, attribute path, default key) of a TFP lambda that is no closure but has
    no name pickle can find: a default argument of a function or method (``adjust_kr_fn=
    lambda x: x``) or a module attribute; the key is None for the attribute itself, a
    position in ``__defaults__`` or a name in ``__kwdefaults__``. Checked by identity."""
    module_name, module = _home_module(fn)
    if module is None or _LOCALS in fn.__qualname__:
        return None
    owner_path = fn.__qualname__.rpartition(".")[0]
    try:
        owner = _get(module, owner_path) if owner_path else module
    except AttributeError:
        return None
    prefix = owner_path + "." if owner_path else ""
    for name, value in list(vars(owner).items()):
        if value is fn and not owner_path:
            return module_name, name, None
        func = getattr(value, "__func__", value)  # staticmethod, classmethod
        if not isinstance(func, types.FunctionType) or getattr(owner, name, None) is None:
            continue
        for index, default in enumerate(func.__defaults__ or ()):
            if default is fn:
                return module_name, f"{prefix}{name}.__defaults__", index
        for key, default in (func.__kwdefaults__ or {}).items():
            if default is fn:
                return module_name, f"{prefix}{name}.__kwdefaults__", key
    return None


class _Writer:
    """Replaces TFP closures by stand-ins in a state about to be pickled (one per pickled
    object: a closure or cell met twice is written once)."""

    def __init__(self, is_tfp_closure: Any, deep: Any = None) -> None:
        self._is_tfp_closure = is_tfp_closure
        # For deepcopy: which TFP closures to write (stand-ins made of real callables,
        # since deepcopy calls them in this process); None: for the standard pickle.
        self._deep = deep
        self._done: Dict[int, Any] = {}
        self._writing: Set[int] = set()  # functions whose cells are being written
        self._keep: List[Any] = []  # keeps ids valid while this writer lives
        self._modules: Dict[str, _Call] = {}  # one stand-in per module, written once
        self.missed = False  # a TFP closure that could not be written

    def _module(self, name: str) -> _Call:
        made = self._modules.get(name)
        if made is None:
            made = self._modules[name] = _module(name)
        return made

    def value(self, obj: Any) -> Any:
        """``obj`` with the TFP closures in it (and in its plain lists, tuples and dicts)
        replaced; ``obj`` itself when there are none."""
        kind = type(obj)
        if kind is types.FunctionType:
            return self._function(obj) if self._is_tfp_closure(obj) else obj
        if kind is types.MethodType and type(obj.__func__) is types.FunctionType:
            func = self.value(obj.__func__)
            if func is obj.__func__:
                return obj
            return _Call((self._types("MethodType"), (func, obj.__self__)))
        if kind is tuple or kind is list:
            items = [self.value(item) for item in obj]
            if all(new is old for new, old in zip(items, obj)):
                return obj
            return tuple(items) if kind is tuple else items
        if kind is dict:
            pairs = [(self.value(key), self.value(item)) for key, item in obj.items()]
            if all(k is key and v is item for (k, v), (key, item) in zip(pairs, obj.items())):
                return obj
            return dict(pairs)  # keys too: Keras counts references by object identity
        if kind is types.ModuleType:
            # A module in a closure's cell (TFP's delayed imports, made inside a
            # constructor to avoid an import cycle): by name, as pickle writes a module's
            # functions; deepcopy cannot copy a module, and would otherwise share the
            # closure, which then computes with the original's state.
            if sys.modules.get(obj.__name__) is obj:
                return self._module(obj.__name__)
            return obj
        done = self._done.get(id(obj))
        if done is not None:
            return done
        reduced = _own_reduction(obj)
        if reduced is None:
            return obj
        # A tf.Module's tracked dict, list or tuple, its record of a tracked attribute,
        # an OrderedDict: written as it writes itself, around the closures' stand-ins.
        fresh = self.value(reduced[1:])
        if all(new is old for new, old in zip(fresh, reduced[1:])):
            return obj
        self._keep.append(obj)
        done = self._done[id(obj)] = _Call((reduced[0],) + tuple(fresh))
        return done

    def _function(self, fn: Any) -> Any:
        if id(fn) in self._writing:
            # A function whose cells lead back to it (a recursive inner function): pickle
            # would recurse without end through the stand-ins' arguments.
            self.missed = True
            return fn
        done = self._done.get(id(fn))
        if done is not None:
            return done
        if self._deep is not None:
            if not self._deep(fn):
                return fn
            found = None  # no need: deepcopy shares what has no state
        else:
            found = _default_path(fn)
        if found is not None:  # the very function, where TFP keeps it
            module_name, path, key = found
            made = _attribute(path, self._module(module_name))
            if key is not None:
                made = _item(key, made)
            self._keep.append(fn)
            self._done[id(fn)] = made
            return made
        where = _code_path(fn) if self._deep is None else None  # deepcopy: its own code
        if where is None and self._deep is None:
            self.missed = True
            return fn
        self._writing.add(id(fn))
        self._keep.append(fn)
        cells = tuple(self._cell(cell) for cell in fn.__closure__ or ())
        defaults = self.value(fn.__defaults__)
        attributes = {"__qualname__": fn.__qualname__, "__module__": fn.__module__,
                      "__kwdefaults__": self.value(fn.__kwdefaults__), "__doc__": fn.__doc__}
        state = self.value(dict(vars(fn))) or None
        self._writing.discard(id(fn))
        if any(cell is None for cell in cells):
            self.missed = True
            return fn
        if self._deep is not None:
            made = self._done[id(fn)] = _DeepFunction(fn, (defaults, cells or None,
                                                           (state, attributes)))
            return made
        module_name, path, indices = where  # type: ignore[misc]
        module = self._module(module_name)
        code = _attribute(path, module)
        for index in indices:
            code = _item(index, _attribute("co_consts", code))
        made = self._done[id(fn)] = _Call((
            _attribute("FunctionType", self._module("types")),
            (code, _attribute("__dict__", module), fn.__name__, defaults, cells or None),
            (state, attributes)))
        return made

    def _cell(self, cell: Any) -> Any:
        done = self._done.get(id(cell))
        if done is not None:
            return done
        try:
            contents = cell.cell_contents
        except ValueError:  # empty: nothing to write it from
            return None
        self._keep.append(cell)
        made = self._done[id(cell)] = _Call((self._types("CellType"), (self.value(contents),)))
        return made

    def _types(self, name: str) -> Any:
        """``types.<name>``: itself for deepcopy, a stand-in that finds it for pickle."""
        if self._deep is not None:
            return getattr(types, name)
        return _attribute(name, self._module("types"))


class _DeepFunction:
    """A stand-in for deepcopy: ``fn`` made again from its own code with deep copies of
    its cells, defaults and attributes; ``fn`` itself, shared as deepcopy shares any
    function, when something in them cannot be deep-copied (never a new failure)."""

    __slots__ = ("fn", "parts")

    def __init__(self, fn: Any, parts: Tuple[Any, Any, Any]) -> None:
        self.fn = fn
        self.parts = parts  # defaults, cells (stand-ins), (attributes, special names)

    def __deepcopy__(self, memo: Dict[int, Any]) -> Any:
        import copy

        fn = self.fn
        try:
            defaults, cells, (attrs, attributes) = copy.deepcopy(self.parts, memo)
        except Exception:
            return fn
        new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, defaults, cells)
        new.__dict__.update(attrs or {})
        for name, value in attributes.items():
            setattr(new, name, value)
        return new


def written_by_reference(value: Any, is_tfp_closure: Any, deep: Any = None) -> Any:
    """``value`` (an object's state, or its constructor's arguments) with its TFP
    closures written by reference, or None when it holds none, or one that cannot be.
    With ``deep`` (a predicate), for deepcopy instead: those TFP closures for which it
    is true become calls that make them again with deep-copied cells."""
    writer = _Writer(is_tfp_closure, deep)
    fresh = writer.value(value)
    if writer.missed or fresh is value:
        return None
    return fresh
