"""Reducers for TFP >= 0.12 (and the TF and NumPy substrates of TFP 0.9-0.11, beside
their cache fix, without F15 and F16): how bijectors, distributions, kernels and type
specs pickle.

Installed as ``__reduce_ex__`` on each substrate's ``Bijector``, ``Distribution`` and
``PositiveSemidefiniteKernel`` (so every subclass, including ones a later release or
the user adds, inherits it unless it defines its own), and as ``__reduce__`` on the
TF substrate's auto-composite and ``DeferredTensor`` type specs. Each fix applies
only when its cause is present on the object being reduced; otherwise the result is
exactly what Python's default reduction gives. Pickles never name this package.

F1  Classes whose ``__new__`` dispatches on its arguments (``Invert``,
    ``TransformedDistribution``, ``Independent``, ``Sample``, the joint
    distributions, ...): the default ``copyreg.__newobj__(cls)`` calls
    ``cls.__new__(cls)`` without arguments and fails at load time. They are
    rebuilt with ``copyreg._reconstructor(cls, object, None)`` (``object.__new__``),
    which is what the protocols 0 and 1 do, and then get their state as usual.
F2  Joint distributions keep the distributions of a single model run in a cache
    keyed by graph id; entries made inside ``tf.function`` hold graph tensors (and
    in JAX the "eager" entry can hold tracers). The state handed out has it empty.
User functions: when the standard pickle (not cloudpickle, dill or ``copy``) meets a
    user lambda or closure inside a TFP object, the error names its attribute path.
F1b Classes made by factories (``tfd.ZeroInflatedNegativeBinomial``) say they live
    in module ``abc``; their ``__module__`` is set to the TFP module that holds them.
F4  Objects whose constructor makes TFP-internal closures (``SoftClip``,
    ``GaussianProcess``, ``JointDistributionSequential``, ``Inflated``, ...):
    the standard pickle cannot write those. Such an object is rebuilt by calling
    its class with its own ``parameters`` (which recreates the closures), and then
    gets the rest of its state (everything that does not lead to such a closure).
    This is done only when that loses nothing: the closures' subtrees may hold no
    variable that the parameters do not also hold; the constructor (built once to
    check) must make again every attribute that is dropped (STS sets one on its
    priors after construction); and an argument replaced by None (so that the
    constructor makes its default closure again) must come back as the same
    closure (a caller's closure made by the same TFP code with other values, or a
    list of bijectors that hold closures, is never replaced).
F5  dill finds a class by importing its module as an attribute of the parent
    package; TFP deletes most submodule attributes from its packages
    (``remove_undocumented``), so dill's defaults write those classes by value, and
    loading them fails (``NameError: name 'tf' is not defined``). The submodules
    are attached to their packages again (only where the name is free).
F6  ``ReparameterizationType`` constants compare by identity; they pickle and copy
    by name, as the constants they are.
F7  The JAX/NumPy substrates' ``tf.Variable`` stand-in (a ``wrapt.ObjectProxy``)
    refuses pickling and copying; it is rebuilt from its value, trainability, name.
F8  TF's ``_DictWrapper`` (a tf.Module's tracked dict) pickles as a plain dict, so a
    checkpoint could not be restored into an unpickled TFP object; it pickles as
    itself. So does ``_TupleWrapper`` (a tracked tuple: ``tfb.Chain((a, b))``), whose
    ``__getattribute__`` hands out the tuple's own ``__reduce_ex__``, so that no
    method of its class can be found by pickle: it is registered in
    ``copyreg.dispatch_table``, which pickle consults by type first (protocols 0
    and 1 failed outright: ``cannot pickle 'tuple' object``). ``copy`` is unchanged
    (its ``__copy__``/``__deepcopy__`` come first).
F3  The type spec of a ``TransformedVariable``/``DeferredTensor`` (and of every
    auto-composite TFP object) is written through TF's own structure coder
    (``nested_structure_coder``), because its class is made inside a function and
    cannot be found by name; upstream's ``__reduce__`` also forgot to return.
F9  ``ParameterProperties`` (``tfp.util``) and its subclasses are namedtuples. The
    plain class's default ``shape_fn`` is a lambda in TFP's signature, which the
    standard pickle cannot write; the subclasses (``BatchedComponentProperties``,
    ``ShapeParameterProperties``) fix some fields in a ``__new__`` that takes fewer
    arguments than there are fields, so every copy and unpickling failed
    (``__new__() takes from 1 to 5 positional arguments but 8 were given``). Such a
    tuple is rebuilt by calling ``__new__`` with the fields it takes, leaving out
    those that are its own defaults, when that gives back the same fields.
F10 ``AutoregressiveNetwork`` (TFP's Keras layer for ``MaskedAutoregressiveFlow``) holds,
    once built, a Keras model whose dense layers have TFP-made mask closures as
    kernel initializer and constraint. Keras pickles and copies a model through its
    own saving format, which cannot load those (``Unknown initializer:
    'masked_initializer'``), so no MAF with a built network could be pickled, deep-
    copied or sent through cloudpickle/dill. The layer is written without its model
    and rebuilt on load: its own ``build`` makes the model again (same masks, same
    closures; a random input order is passed as the order it drew) and then gets
    the weights. With ``hidden_degrees='random'`` it is built with ``'equal'`` (no
    draw), then given the masks it drew, in the layer and in its mask closures' cells.
    The same for ``PixelCNN``'s network layer, whose functional Keras model Keras
    cannot make again from its config (``'str' object is not callable``).
F11 Closures TFP made that F4 cannot avoid (a precomputed GP regression model's mean
    function and Cholesky, ``TransformedTransitionKernel``'s log prob, the default
    proposal of ``RandomWalkMetropolis``, the lambdas of ``_parameter_properties``, STS
    joint distributions, ``tfp.experimental.nn`` layers, ...): for the standard pickle
    only, each is written as a call that makes it again from its code object, found
    in TFP by name (``_closures``); a lambda in a TFP signature, as that default.
    Also on transition kernels, GLM families, STS models, ``tfp.experimental.nn``
    layers, ``LinearOperatorPSDKernel`` and ODE solvers, whose reduction is otherwise
    Python's default. For ``deepcopy`` (which shares functions), the closures whose
    cells hold state (variables, modules, Keras networks: ``holds_state``) are made
    again over the copied state, or the copy would compute with the original's.
F12 Glow's default networks (``GlowDefaultNetwork``, ``GlowDefaultExitNetwork``) are
    Keras ``Sequential`` models whose constructors Keras cannot call when it loads
    them (``name=``), so every pickle and deep copy of a Glow failed. Each is written
    as a blank instance of its class, Keras's ``Sequential.__init__`` with its name and
    the layers made again from their configs, then its weights.
F13 ``tfp.experimental.util.JitPublicMethods`` keeps the compiled methods it makes on
    first use (a traced ``tf.function`` holds its graphs), and its ``__getattr__``
    recurses without end before its state is set, so no copy could be made once a
    method had run. It is written as its constructor's call, without them.
F14 TF's ``TrackableReference`` (a named checkpoint dependency, which a ``tf.Module``
    keeps for each trackable it tracks: a variable, a module, a dict) has ``__slots__`` and no
    ``__getstate__``. Pickle protocols 0 and 1 refuse such a class (``a class that
    defines __slots__ without defining __getstate__ cannot be pickled``), so no TF
    substrate TFP object, not even ``tfd.Normal(0., 1.)``, pickled with them. So does
    TFP's ``SpecialMethods``, a base of ``DeferredModule`` (the surrogate posteriors of
    ``tfp.experimental.vi``), and so do Keras's and TF's ``_ObjectIdentityWrapper``, the
    keys of a Keras layer's reference counts (``tfb.BatchNormalization`` holds a layer).
    For protocols 0 and 1 they are written as protocol 2 writes them; protocols 2 and up
    and ``copy`` are left as they are.
F15 ``tfp.layers`` distribution layers with no Keras config of their own and no entry in
    Keras's registry (``MultivariateNormalTriL``, ...), and ``VariableLayer``, of which
    Keras makes a config only when its arguments are plain values (never on Keras <=
    2.10): Keras writes a model through its layers' configs, so no model holding one
    pickled, copied or loaded (``_keras_layers``).
F16 ``tfp.layers`` variational layers (``DenseFlipout``, ...): not registered with Keras,
    and their configs write their functions as bytecode with their closures' values,
    which cannot carry TFP's default posterior (a closure over functions): they are
    registered and their functions written with TFP's cloudpickle helper; and
    ``DenseVariational``, of whose user functions Keras makes no config, gets one so
    (``_keras_layers``).
F17 Keras 2.7-2.11 models holding a ``tfp.layers`` distribution layer: Keras pickles and
    copies a model as a SavedModel, which cannot trace those layers' calls (2.7-2.10), or
    in a format that refuses the lambdas in their configs (2.11); such a model is written
    in Keras's HDF5 format instead, read back by Keras's ``load_model``
    (``_keras_models``).
F18 ``tfp.layers.KLDivergenceRegularizer`` as a distribution layer's
    ``activity_regularizer``: TFP's layer configs leave it out, so a copy lost its KL loss
    silently; the configs write it, and it and ``KLDivergenceAddLoss`` get configs of
    their own (``_keras_layers``).
F19 TF's lazily loaded modules (``tf.keras`` from TF 2.15: ``KerasLazyLoader``) had no
    reduction before TF 2.16, so a function that cloudpickle writes by value over a
    global bound to one (``tfk = tf.keras`` in ``__main__``: a posterior for
    ``DenseVariational``) did not pickle; they get TF 2.16's (the module, by name).
F20 GPflow's ``HeteroskedasticTFPConditional``: a closure over the likelihood made in its
    constructor; written as the call that makes it again (``_gpflow``).
F21 ``tfp.layers.VariationalGaussianProcess``: TFP's config pickles a lambda over the
    layer itself, with Keras's graph tensors, so no model holding one pickled, copied
    or saved; it gets a config of its constructor's arguments, a ``from_config``, its
    registry entry and a ``build_from_config`` that builds it once (``_keras_layers``).
F22 ``tfp.layers.AutoregressiveTransform``: TFP's config pickles the layer's own bound
    method, so the layer itself; it gets a config that writes its network by cloudpickle
    (F10's reduction keeps its masks), F16's ``from_config`` and its registry entry
    (``_keras_layers``).
F23 ``tfp.optimizer.VariationalSGD`` (and SGLD): TFP's ``get_config`` returns None, so
    Keras wrote no model compiled with it; it gets a config of its arguments (with their
    dtypes), a ``from_config`` and its registry entry (``_keras_optimizers``).
"""
from __future__ import annotations

import copyreg
import functools
import importlib
import pickle
import sys
import types
import warnings
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import _detect, _gpflow, _hooks, _keras_layers, _keras_models, _keras_optimizers, _legacy
from ._closures import (OBJECT_IDENTITY, TF_TRACKING, _CALL, _Call, class_module, keras_layer,
                        module_name, written_by_reference)

_TFP_PREFIX = "tensorflow_probability"
_TF_PREFIX = "tensorflow_probability.python"
_TF_BIJECTOR = _TF_PREFIX + ".bijectors.bijector"
_JD_CACHE = "_single_sample_distributions"
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by Python code, not a C type


def _defined_in(fn: Any) -> str:
    """The module whose code made ``fn`` (``functools.wraps`` rewrites ``__module__``)."""
    return str(getattr(fn, "__globals__", {}).get("__name__", "") or fn.__module__ or "")


def _findable(fn: Any) -> bool:
    """The standard pickle finds ``fn`` by ``__module__`` and ``__qualname__``."""
    found: Any = sys.modules.get(fn.__module__ or "")
    for part in fn.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is fn


def is_tfp_closure(fn: Any) -> bool:
    """A function TFP (or TF) made that no pickle can find by name (a closure, a lambda,
    a ``functools.wraps`` wrapper, an op that TF's dispatch wrapped after it was defined)."""
    if not isinstance(fn, types.FunctionType) or not _defined_in(fn).startswith(
            (_TFP_PREFIX, "tensorflow.")):  # TF's dispatch-wrapped ops, held by the NumPy substrate
        return False
    return "<locals>" in fn.__qualname__ or not _findable(fn)


def _is_variable(value: Any) -> bool:
    if not (hasattr(value, "assign") and hasattr(value, "dtype")):
        return False
    # TFP's NumPy/JAX Variable of some releases has no ``trainable`` (0.12, 0.17).
    return hasattr(value, "trainable") or _backend_variable(type(value))


def _backend_variable(kind: type) -> bool:
    # class_module: with wrapt 1.12's pure-Python proxy (TF 2.5/2.6 stacks) the class's
    # ``__module__`` is a property.
    return kind.__name__ == "NumpyVariable" and class_module(kind).startswith(_TFP_PREFIX)


_LEAVES = (str, bytes, int, float, complex, bool, type(None), type)


def _pickled_dict(obj: Any) -> Optional[Dict[str, Any]]:
    """The attributes of a TFP object as its pickle writes them: on TFP 0.9-0.11 a
    bijector's state has its cache emptied (``_legacy``), whose own closures (TFP 0.11's
    ``_setup_cache`` lambdas, bound to the bijector) never reach a pickle."""
    getstate = getattr(type(obj), "__getstate__", None)
    if getstate is not None and getstate in _legacy.GETSTATES:
        return getstate(obj)
    return getattr(obj, "__dict__", None)


class _Scan:
    """What a value leads to: TFP-made closures and variables (by id)."""

    __slots__ = ("closures", "variables", "_seen")

    def __init__(self) -> None:
        self.closures = 0
        self.variables: Set[int] = set()
        self._seen: Set[int] = set()

    def walk(self, value: Any) -> "_Scan":
        stack = [value]
        while stack:
            obj = stack.pop()
            if isinstance(obj, _LEAVES) or id(obj) in self._seen:
                continue
            self._seen.add(id(obj))
            if _is_variable(obj):
                self.variables.add(id(obj))
                continue
            if isinstance(obj, types.FunctionType):
                if is_tfp_closure(obj):
                    self.closures += 1
                continue
            if isinstance(obj, types.MethodType):  # FFJORD's default ode_solve_fn
                stack.append(obj.__func__)
                stack.append(obj.__self__)
                continue
            if isinstance(obj, functools.partial):
                stack.append(obj.func)
                stack.extend(obj.args)
                stack.extend(obj.keywords.values())
                continue
            if isinstance(obj, dict) or (hasattr(obj, "items") and hasattr(obj, "__wrapped__")):
                for key, item in list(obj.items()):
                    stack.append(key)
                    stack.append(item)
                continue
            if isinstance(obj, (list, tuple, set, frozenset)) or (
                    hasattr(obj, "__wrapped__") and hasattr(obj, "__iter__")):
                try:
                    stack.extend(list(obj))
                except TypeError:
                    pass
                continue
            if type(obj).__name__ == "TrackableReference":  # tf.Module's bookkeeping
                stack.append(getattr(obj, "ref", None))
                continue
            module = module_name(type(obj))
            if module.startswith(_TFP_PREFIX) or keras_layer(type(obj)):  # BatchNormalization
                attrs = _pickled_dict(obj)
                if attrs is not None:
                    stack.extend(attrs.values())
            elif _trackable(type(obj)):
                # A Keras model or a tf.Module of other code (PixelCNN's network): not
                # walked, but its variables count (a rebuild must not lose them).
                try:
                    self.variables.update(id(v) for v in obj.variables)
                except Exception:
                    pass
        return self


def _state_dict(state: Any) -> Tuple[Any, Any]:
    """Split a default state into (dict part, slots part)."""
    if isinstance(state, dict):
        return state, None
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
        return state
    return None, None


def _join(attrs: Dict[str, Any], slots: Any) -> Any:
    return attrs if slots is None else (attrs, slots)


def _without_graph_entries(cache: Any) -> Any:
    """An empty copy of a joint distribution's per-graph cache (TFP refills it on use).

    Even the "eager" entry (key -1) can hold values of a trace: the JAX substrate is
    "eager" inside ``jax.jit`` and keeps tracers there.
    """
    import copy

    try:
        fresh = copy.copy(cache)
    except Exception:  # an unexpected container
        return {}
    for key in list(fresh.keys()):
        del fresh[key]
    return fresh


_TRACKED_LIST = "_self_unconditional_checkpoint_dependencies"
_TRACKED_NAMES = "_self_unconditional_dependency_names"


def _replace_attribute(attrs: Dict[str, Any], name: str, new: Any) -> Dict[str, Any]:
    """A copy of ``attrs`` with ``name`` set to ``new``, in tf.Module's bookkeeping too.

    tf.Module records each tracked attribute a second time (its checkpoint
    dependencies); those records must point at the new value, or the old one
    would still be written (and a checkpoint would name a different object).
    """
    old = attrs[name]
    attrs = dict(attrs)
    attrs[name] = new
    names = attrs.get(_TRACKED_NAMES)
    if isinstance(names, dict) and names.get(name) is old:
        names = dict(names)
        names[name] = new
        attrs[_TRACKED_NAMES] = names
    refs = attrs.get(_TRACKED_LIST)
    if isinstance(refs, list):
        fresh = []
        for ref in refs:
            if getattr(ref, "name", None) == name and getattr(ref, "ref", None) is old:
                ref = type(ref)(name, new)
            fresh.append(ref)
        attrs[_TRACKED_LIST] = fresh
    return attrs


def _closure_keys(attrs: Dict[str, Any]) -> Tuple[List[str], Set[int]]:
    """The attributes that lead to TFP-made closures, and the variables below them."""
    closure_keys = []
    lost_variables: Set[int] = set()
    for key, value in attrs.items():
        scan = _Scan().walk(value)
        if scan.closures:
            closure_keys.append(key)
            lost_variables |= scan.variables
    return closure_keys, lost_variables


def _rebuild_by_constructor(self: Any, attrs: Dict[str, Any], closure_keys: List[str],
                            lost_variables: Set[int]) -> Tuple[Any, Dict[str, Any]]:
    """(callable, state) rebuilding ``self`` from its parameters, when that loses nothing
    (``closure_keys``, ``lost_variables``: from :func:`_closure_keys`)."""
    try:
        parameters = dict(self.parameters)
    except Exception:
        return None, attrs
    kwargs = _constructor_kwargs(type(self), parameters)
    defaults = _defaults(type(self))
    nulled = []
    for key, value in list(kwargs.items()):
        if key not in defaults or not _Scan().walk(value).closures:
            continue
        if defaults[key] is value:
            del kwargs[key]  # the signature's own default: the constructor gives it again
        elif defaults[key] is None and isinstance(value, types.FunctionType):
            # TFP's pattern: ``fn=None`` in the signature, then ``fn = <TFP default>``
            # before recording ``parameters``; None again makes that default, which
            # is checked below (the same closure could come from the caller, made
            # with other values: ``make_cholesky_with_jitter_fn(0.5)``).
            kwargs[key] = None
            nulled.append(key)
    from_parameters = _Scan().walk(kwargs)
    if from_parameters.closures or not lost_variables <= from_parameters.variables:
        return None, attrs  # TFP-made closures were handed in, or state would be lost
    if not _constructor_remakes(self, kwargs, attrs, closure_keys, parameters, nulled):
        return None, attrs
    rest = {k: v for k, v in attrs.items() if k not in closure_keys}
    return _rebuild(type(self), kwargs), rest


def _constructor_remakes(self: Any, kwargs: Dict[str, Any], attrs: Dict[str, Any],
                         dropped: List[str], parameters: Dict[str, Any],
                         nulled: List[str]) -> bool:
    """``type(self)(**kwargs)`` makes again what the rebuild drops from the state.

    Built once, here: every dropped attribute must be there again, a function made by
    the same code (a bound method: of the same function), and every argument given as
    None must come back as the same closure. An attribute that other code set after
    construction (STS gives its priors a ``_default_event_space_bijector`` of their
    own) is not remade, and the object is then not rebuilt.
    """
    try:
        fresh = type(self)(**kwargs)
        made = vars(fresh)
        made_parameters = dict(fresh.parameters)
    except Exception:
        return False
    for key in dropped:
        if key not in made or not _same_kind(attrs[key], made[key]):
            return False
    return all(_same_function(made_parameters.get(key), parameters[key], 0) for key in nulled)


def _same_kind(old: Any, new: Any) -> bool:
    if isinstance(old, types.MethodType):
        return isinstance(new, types.MethodType) and _same_kind(old.__func__, new.__func__)
    if isinstance(old, types.FunctionType):
        return isinstance(new, types.FunctionType) and old.__code__ is new.__code__
    return type(old) is type(new)


def _same_function(a: Any, b: Any, depth: int) -> bool:
    """Two functions with the same code, defaults and closure values (the same closure
    made twice by the same TFP code with the same arguments)."""
    if a is b:
        return True
    if (depth > 4 or not isinstance(a, types.FunctionType)
            or not isinstance(b, types.FunctionType) or a.__code__ is not b.__code__):
        return False
    if not _same_value(a.__defaults__, b.__defaults__, depth):
        return False
    cells_a, cells_b = a.__closure__ or (), b.__closure__ or ()
    if len(cells_a) != len(cells_b):
        return False
    for cell_a, cell_b in zip(cells_a, cells_b):
        try:
            x, y = cell_a.cell_contents, cell_b.cell_contents
        except ValueError:  # an empty cell
            return False
        if not _same_value(x, y, depth):
            return False
    return True


def _same_value(x: Any, y: Any, depth: int) -> bool:
    if x is y:
        return True
    if isinstance(x, types.FunctionType):
        return _same_function(x, y, depth + 1)
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(_same_value(u, v, depth) for u, v in zip(x, y))
    if type(x) is not type(y) or not isinstance(x, _LEAVES) and type(x).__name__ != "DType":
        return False  # tensors, arrays, objects: only the very same one
    try:
        return bool(x == y) is True
    except Exception:
        return False


def _parameters_after_first(fn: Any) -> List[Any]:
    """The parameters of ``fn`` after its first (``self``, ``cls``); [] without a
    signature."""
    import inspect  # not at import time: keeps `import tfp_picklefix` cheap

    try:
        return list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return []


def _init_parameters(cls: type) -> List[Any]:
    """The parameters of ``cls.__init__`` after ``self``."""
    return _parameters_after_first(cls.__init__)


def _defaults(cls: type) -> Dict[str, Any]:
    return {p.name: p.default for p in _init_parameters(cls) if p.default is not p.empty}


def _constructor_kwargs(cls: type, parameters: Dict[str, Any]) -> Dict[str, Any]:
    """``parameters`` as keyword arguments of ``cls``: the constructor's own names, and a
    recorded ``**kwargs`` dict spread out (factory-made classes record their closure's
    variables too, via ``dict(locals())``: those are not arguments)."""
    init = _init_parameters(cls)
    if not init:
        return parameters
    if _passes_through(init, parameters):
        # ``__init__(self, *args, **kwargs)`` handing its arguments on (TFP 0.10's
        # auto-batched joint distributions): the names are those of the constructor
        # it hands them to, the next one along the MRO that names its parameters.
        for owner in cls.__mro__[1:]:
            own = vars(owner).get("__init__")
            if own is not None and owner is not object:
                init = _parameters_after_first(own)
                if not _passes_through(init, parameters):
                    break
    named = {p.name for p in init if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    kwargs = {k: v for k, v in parameters.items() if k in named}
    for param in init:
        if param.kind is param.VAR_KEYWORD and isinstance(parameters.get(param.name), dict):
            kwargs.update(parameters[param.name])
    return kwargs


def _passes_through(init: List[Any], parameters: Dict[str, Any]) -> bool:
    """Whether a constructor's parameters are only ``*args, **kwargs``, and the recorded
    ``parameters`` are not that ``**kwargs`` dict (see :func:`_constructor_kwargs`)."""
    return bool(init) and all(
        p.kind is p.VAR_POSITIONAL or (p.kind is p.VAR_KEYWORD and not isinstance(
            parameters.get(p.name), dict)) for p in init)


def _rebuild(cls: type, kwargs: Dict[str, Any]) -> Tuple[Any, Tuple[Any, ...]]:
    """(callable, args) that call ``cls(**kwargs)``, with ``kwargs`` among the *args*.

    ``copy.deepcopy`` deep-copies the args of a reduction but not its callable, so
    the parameters (variables included) must not hide inside a ``partial`` callable.
    """
    return _CALL, (functools.partial(_by_name(cls), **kwargs),)


def _by_name(cls: type) -> Any:
    """``cls``, or where pickle cannot name it (wrapt's pure-Python proxy classes make
    ``__module__`` a property: TFP's NumPy ``Variable``, TF's tracking wrappers), a
    callable that pickles as ``cls``, found in the module that defines it."""
    return cls if module_name(cls) else _ByPath(cls, _defining_module(cls))


# Picklers that write functions by value (or copy them by reference): no check for them.
_BY_VALUE_PICKLERS = ("cloudpickle", "dill", "copy", "joblib", "loky", "distributed", "srsly")


def _serializer() -> str:
    """Who asks for the reduction: ``"pickle"`` (the standard pickle), ``"deepcopy"``,
    or ``"by value"`` (a pickler that copes with lambdas, or ``copy.copy``)."""
    frame = sys._getframe(1)
    depth = 0
    while frame is not None and depth < 60:
        name = frame.f_globals.get("__name__", "") or ""
        top = name.split(".", 1)[0]
        if top == "copy" and frame.f_code.co_name != "copy":
            return "deepcopy"
        if top in _BY_VALUE_PICKLERS:
            return "by value"
        frame = frame.f_back
        depth += 1
    return "pickle"


def _standard_pickle_running() -> bool:
    """True unless a pickler that copes with lambdas (or ``copy``) is on the stack."""
    return _serializer() == "pickle"


def _trackable(kind: type) -> bool:
    """A class of TF's object graph (``Trackable``: ``tf.Module``, Keras layers and
    models, variables); ``_trackable_children`` is TF >= 2.9's name for what TF 2.5's
    ``_checkpoint_dependencies`` lists (later TF has both)."""
    return hasattr(kind, "_trackable_children") or hasattr(kind, "_checkpoint_dependencies")


def holds_state(fn: Any) -> bool:
    """Whether the cells of closure ``fn`` lead to state that a deep copy copies: a
    variable, or a trackable object (``tf.Module``, a Keras layer, TFP's objects in the
    TF substrate), also through the TFP objects, functions and containers they hold."""
    stack: List[Any] = [fn]
    seen: Set[int] = set()
    while stack:
        obj = stack.pop()
        if isinstance(obj, _LEAVES) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if _is_variable(obj) or _trackable(type(obj)):
            return True
        if isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
            stack.extend(obj.__defaults__ or ())
        elif isinstance(obj, types.MethodType):
            stack.extend((obj.__func__, obj.__self__))
        elif isinstance(obj, functools.partial):
            stack.append(obj.func)
            stack.extend(obj.args)
            stack.extend(obj.keywords.values())
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif module_name(type(obj)).startswith(_TFP_PREFIX):
            stack.extend((_pickled_dict(obj) or {}).values())
    return False


def _written(value: Any) -> Any:
    """F11: ``value`` with its TFP closures written by reference, for the standard pickle
    (every closure) and for ``deepcopy`` (the closures whose cells hold state, so that
    the copy's closure refers to the copied state, not the original's), or None."""
    kind = _serializer()
    if kind == "by value":
        return None
    return written_by_reference(value, is_tfp_closure, holds_state if kind == "deepcopy" else None)


def _unpicklable_user_function(fn: Any) -> bool:
    """A user function that the standard pickle cannot find by name."""
    return (isinstance(fn, types.FunctionType) and not is_tfp_closure(fn)
            and not _findable(fn))


def _user_function_path(attrs: Dict[str, Any], root: str) -> Any:
    """The attribute path of the first user lambda/closure below ``attrs``, or None."""
    stack = [(f"{root}.{k}", v) for k, v in reversed(list(attrs.items()))]
    seen: Set[int] = set()
    while stack:
        path, obj = stack.pop()
        if isinstance(obj, _LEAVES) or id(obj) in seen or _is_variable(obj):
            continue
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):
            if _unpicklable_user_function(obj):
                return path, obj
            continue
        if isinstance(obj, dict):
            stack.extend((f"{path}[{k!r}]", v) for k, v in reversed(list(obj.items())))
        elif isinstance(obj, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(obj))))
        elif module_name(type(obj)).startswith(_TFP_PREFIX):
            inner = _pickled_dict(obj)
            if inner is not None:
                stack.extend((f"{path}.{k}", v) for k, v in reversed(list(inner.items()))
                             if not k.startswith("_self_"))
    return None


def _check_user_functions(self: Any, attrs: Dict[str, Any]) -> None:
    """Name the attribute path of a user lambda the standard pickle is about to fail on."""
    if not _standard_pickle_running():
        return
    found = _user_function_path(attrs, type(self).__name__)
    if found is not None:
        import pickle

        path, fn = found
        raise pickle.PicklingError(
            f"Can't pickle {fn.__qualname__} (from {fn.__module__}) at {path}: the standard "
            "pickle writes functions by name, and this one has none it can be found by. "
            "Define it at module level, or use cloudpickle/dill.")


def reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for TFP's Bijector, Distribution and PSD kernel classes."""
    reduced = object.__reduce_ex__(self, protocol)
    if not isinstance(reduced, tuple) or len(reduced) < 3:
        return reduced
    func, args, state = reduced[0], reduced[1], reduced[2]
    tail = tuple(reduced[3:])
    attrs, slots = _state_dict(state)
    if attrs is not None and _JD_CACHE in attrs:  # F2
        attrs = _replace_attribute(attrs, _JD_CACHE, _without_graph_entries(attrs[_JD_CACHE]))
        state = _join(attrs, slots)
    if attrs is not None:
        _check_user_functions(self, attrs)
    closure_keys, lost_variables = _closure_keys(attrs) if attrs is not None else ([], set())
    if closure_keys:  # F4
        constructor, rest = _rebuild_by_constructor(self, attrs, closure_keys, lost_variables)
        if constructor is not None:
            return constructor + (_join(rest, slots),) + tail
        written = _written({key: attrs[key] for key in closure_keys})  # F11
        if written is not None:
            state = _join(dict(attrs, **written), slots)
    cls = type(self)
    if func is copyreg.__newobj__ and tuple(args) == (cls,) and cls.__new__ is not object.__new__:
        func, args = copyreg._reconstructor, (cls, object, None)  # F1
    return (func, args, state) + tail


def closure_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for other TFP objects that hold TFP closures (transition kernels,
    GLM families, STS models, ``tfp.experimental.nn`` layers, ``LinearOperatorPSDKernel``,
    ODE solvers, ``DeferredTensor``, MCMC reducers and ``KernelBuilder``):
    Python's default reduction, with the closures written by reference (F11) for the
    standard pickle, and made again over the copied state for ``deepcopy`` where they
    hold state (cloudpickle and dill write them by value; shallow copies share them)."""
    reduced = object.__reduce_ex__(self, protocol)
    if isinstance(self, tuple) and hasattr(self, "_fields"):
        # A namedtuple (``tfp.experimental.mcmc.KernelBuilder``): its fields are the
        # arguments of its reduction, not its state.
        if not isinstance(reduced, tuple) or len(reduced) < 2:
            return reduced
        _check_user_functions(self, dict(zip(self._fields, self)))
        written = _written(reduced[1])
        return reduced if written is None else (reduced[0], written) + tuple(reduced[2:])
    if not isinstance(reduced, tuple) or len(reduced) < 3:
        return reduced
    attrs, slots = _state_dict(reduced[2])
    if attrs is None:
        return reduced
    _check_user_functions(self, attrs)
    written = _written(attrs)
    if written is None:
        return reduced
    return reduced[:2] + (_join(written, slots),) + tuple(reduced[3:])


def singleton_reduce(self: Any) -> Any:
    """``__reduce__`` for ReparameterizationType: its module-level constant, by name.

    TFP compares reparameterization types by identity (``__eq__`` is ``is``); a copy
    made by pickle or deepcopy would be equal to nothing, so that an unpickled
    distribution's ``reparameterization_type == tfd.FULLY_REPARAMETERIZED`` was False.
    """
    module = sys.modules.get(module_name(type(self)))
    for name, value in vars(module).items() if module is not None else ():
        if value is self:
            return name
    return object.__reduce_ex__(self, 2)


def _variable_kwargs(self: Any, value: Any) -> Dict[str, Any]:
    # TFP 0.12's NumPy variable keeps no trainability (its constructor drops it).
    return dict(initial_value=value, trainable=getattr(self, "_self_trainable", True),
                name=self._self_name,
                dtype=getattr(self.__wrapped__, "dtype", None))


def variable_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for the JAX/NumPy substrates' ``tf.Variable`` stand-in.

    It is a ``wrapt.ObjectProxy`` around an array, and proxies refuse to pickle or
    copy themselves; it is rebuilt from its current value, trainability and name.
    """
    return _rebuild(type(self), _variable_kwargs(self, self.__wrapped__))


def variable_copy(self: Any) -> Any:
    return type(self)(**_variable_kwargs(self, self.__wrapped__))


def variable_deepcopy(self: Any, memo: Dict[int, Any]) -> Any:
    import copy

    return type(self)(**_variable_kwargs(self, copy.deepcopy(self.__wrapped__, memo)))


def wrapper_reduce_ex(self: Any, protocol: int = 2) -> Any:
    """How TF's tracking proxies pickle (F8): the wrapper again, around the same object.

    ``_DictWrapper`` (a tf.Module's tracked dicts; as its ``__reduce_ex__``): TF's own
    returns ``(self.__class__, ...)``, but the wrapper is a ``wrapt`` proxy whose
    ``__class__`` is ``dict``: an unpickled module then tracks a plain dict, and
    restoring a checkpoint into it fails (``cannot create weak reference to 'dict'
    object``). TFP distributions track their parameters this way. ``_TupleWrapper``
    (as its entry in ``copyreg.dispatch_table``, called without the protocol): its
    ``__getattribute__`` hands out the tuple's own ``__reduce_ex__``.
    """
    return _by_name(type(self)), (self.__wrapped__,)


class _ByPath(object):
    """Calls ``cls``; pickles as ``getattr(importlib.import_module(module), name)``,
    which gives ``cls`` back and needs nothing of this package to load (TF deletes
    ``tensorflow.python`` from its package, so a dotted path cannot be walked)."""

    def __init__(self, cls: type, module: str) -> None:
        self.cls, self.module = cls, module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.cls(*args, **kwargs)

    def __reduce__(self) -> Any:
        return getattr, (_Module(self.module), self.cls.__name__)


class _Module(object):
    """Pickles as ``importlib.import_module(name)``: the module, once loaded."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> Any:
        return importlib.import_module, (self.name,)


def _defining_module(cls: type) -> str:
    """The module whose code defines ``cls`` (that of a function in its body) and holds
    it by its name; wrapt < 1.14 without its C extension (as with TF 2.5) hides it."""
    for value in vars(cls).values():
        home = getattr(value, "__module__", None) if isinstance(value, types.FunctionType) else None
        if home and getattr(sys.modules.get(home), cls.__name__, None) is cls:
            return home
    raise pickle.PicklingError(f"Can't pickle {cls.__name__}: no module holds it by its name")


def slots_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for classes that protocols 0 and 1 refuse (F14: TF's
    ``TrackableReference``, TFP's ``SpecialMethods``): what protocol 2 writes (the
    class's ``__new__``, through ``copyreg.__newobj__``, then its state, slots
    included), which the older protocols write with their own opcodes; protocols 2
    and up, and ``copy``, unchanged."""
    return object.__reduce_ex__(self, max(protocol, 2))


def _slots_without_state(cls: type) -> bool:
    """Whether protocols 0 and 1 refuse ``cls``: it has slots, and neither its own
    ``__getstate__`` nor a reduction of its own (F14's cause)."""
    if not _has_slots(cls) or getattr(cls, "__getstate__", None) not in (
            None, getattr(object, "__getstate__", None)):
        return False
    return all(getattr(cls, name) is getattr(object, name)
               for name in ("__reduce_ex__", "__reduce__"))


def _has_slots(cls: type) -> bool:
    """Whether ``cls`` has slots that pickle writes, as ``copyreg._slotnames`` would say,
    without the ``__slotnames__`` that it leaves on the class (unpatch leaves TFP's
    classes as they were)."""
    for kind in cls.__mro__:
        slots = vars(kind).get("__slots__")
        if isinstance(slots, str):
            slots = (slots,)
        if any(name not in ("__dict__", "__weakref__") for name in slots or ()):
            return True
    return False


def _proxies_its_reduction(cls: type) -> bool:
    """Whether ``cls`` (a ``wrapt`` proxy) hands out its wrapped object's
    ``__reduce_ex__`` instead of its own, so that pickle cannot find its own (F8's
    cause for ``_TupleWrapper``), seen on one instance."""
    try:
        probe = cls(())
        return getattr(probe.__reduce_ex__, "__func__", None) is not vars(cls).get("__reduce_ex__")
    except Exception:
        return False


def type_spec_reduce(self: Any) -> Tuple[Any, Tuple[Any]]:
    """``__reduce__`` for TFP's type specs: through TF's structure coder (F3)."""
    if getattr(self, "_transform_is_composite", True) is False:
        raise ValueError(
            "Cannot serialize object with callable parameters that are not "
            f"`CompositeTensor`s: {self.transform_or_spec}.")
    from tensorflow.python.saved_model import nested_structure_coder

    if hasattr(nested_structure_coder, "decode_proto"):  # TF >= 2.8: module functions
        encode = nested_structure_coder.encode_structure
        decode = nested_structure_coder.decode_proto
    else:  # TF <= 2.7: the methods of a StructureCoder (which pickles by its class)
        coder = nested_structure_coder.StructureCoder()
        encode, decode = coder.encode_structure, coder.decode_proto
    with warnings.catch_warnings():
        # "loading this StructuredValue will require that this type be imported and
        # registered": true, and TFP registers it when imported.
        warnings.simplefilter("ignore", UserWarning)
        proto = encode(self)
    return decode, (proto,)


_NEW_PARAMETERS: Dict[type, Dict[str, Any]] = {}


def _new_parameters(cls: type) -> Dict[str, Any]:
    """name -> parameter of ``cls.__new__`` after ``cls`` (memoized per class)."""
    found = _NEW_PARAMETERS.get(cls)
    if found is None:
        found = _NEW_PARAMETERS[cls] = {
            p.name: p for p in _parameters_after_first(cls.__new__)
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return found


def _properties_kwargs(self: Any) -> Any:
    """The keyword arguments of ``type(self).__new__`` that rebuild the namedtuple
    ``self`` field for field (identical objects), leaving out the fields that are the
    constructor's own defaults; None when the default reduction already works, or when
    no such call gives the same fields back."""
    cls = type(self)
    params = _new_parameters(cls)
    kwargs = {}
    cause = False
    for name, value in zip(self._fields, self):
        param = params.get(name)
        if param is None:
            cause = True  # fixed by __new__: the default reduction passes it and fails
        elif param.default is value and isinstance(value, types.FunctionType):
            cause = cause or not _findable(value)  # TFP's default lambda
        else:
            kwargs[name] = value
    if not cause:
        return None
    try:
        rebuilt = cls.__new__(cls, **kwargs)
    except Exception:  # a subclass whose __new__ this cannot call: leave it alone
        return None
    if type(rebuilt) is not cls or any(a is not b for a, b in zip(rebuilt, self)):
        return None
    return kwargs


def properties_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for TFP's ``ParameterProperties`` namedtuples (F9; F11 for the
    lambdas of a distribution's ``_parameter_properties``)."""
    kwargs = _properties_kwargs(self)
    if kwargs is None:
        reduced = object.__reduce_ex__(self, protocol)
    else:
        reduced = copyreg.__newobj_ex__, (type(self), (), kwargs)
    if isinstance(reduced, tuple) and len(reduced) > 1 and _standard_pickle_running():
        written = written_by_reference(reduced[1], is_tfp_closure)
        if written is not None:
            reduced = (reduced[0], written) + tuple(reduced[2:])
    return reduced


_NETWORK = "_network"


def _without(container: Any, target: Any) -> Any:
    """A copy of a list/dict/identity-dict of ``container`` without ``target`` (as an
    item, a value, a key or a tracked reference's object)."""
    if isinstance(container, list):
        kept = [item for item in container
                if item is not target and getattr(item, "ref", None) is not target]
        return kept if len(kept) < len(container) else container  # keeps TF's ListWrapper
    if isinstance(container, dict):
        if not any(value is target for value in container.values()):
            return container
        return {key: value for key, value in container.items() if value is not target}
    if (hasattr(container, "items") and hasattr(container, "__setitem__")
            and any(key is target for key, _ in container.items())):
        try:  # TF's ObjectIdentityDictionary (Keras counts references to attributes)
            fresh = type(container)()
            for key, value in container.items():
                if key is not target:
                    fresh[key] = value
        except Exception:
            return container
        return fresh
    return container


def network_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for TFP's ``AutoregressiveNetwork`` Keras layer and ``PixelCNN``'s
    network layer (F10)."""
    reduced = object.__reduce_ex__(self, protocol)
    network = getattr(self, _NETWORK, None)
    state = reduced[2] if isinstance(reduced, tuple) and len(reduced) > 2 else None
    if (network is None or not isinstance(state, dict) or state.get(_NETWORK) is not network
            or state.get("_build_input_shape") is None):
        return reduced
    import operator

    random_degrees = str(getattr(self, "_hidden_degrees", "")) == "random"
    cells = _mask_cells(self, network) if random_degrees else []
    if cells is None:
        return reduced  # masks this cannot put back: leave it to Keras
    state = {key: _without(value, network) for key, value in state.items() if key != _NETWORK}
    state["built"] = False
    order = getattr(self, "_input_order", None)
    drawn = getattr(self, "_input_order_param", None)
    random_order = isinstance(drawn, str) and drawn == "random" and order is not None
    if random_order:
        state["_input_order_param"] = order  # build with the order it drew
    if random_degrees:
        state["_hidden_degrees"] = "equal"  # build without drawing (masks put back below)
    written = _written(state)  # F11: PixelCNN's weight-norm wrapper is a TFP closure
    if written is not None:
        state = written
    try:
        values = self.get_weights()
    except Exception:  # not eager (a trace): leave it to Keras
        return reduced
    # Memoized by pickle and deepcopy: these refer to one new layer, made from the
    # state, then built, then given the weights (then told its order was drawn),
    # in that order.
    blank = _Call((functools.partial(reduced[0], *reduced[1]), (), state))
    steps = [blank,
             _Call((operator.methodcaller("build", state["_build_input_shape"]), (blank,))),
             _Call((operator.methodcaller("set_weights", values), (blank,)))]
    if random_order:
        steps.append(_Call((setattr, (blank, "_input_order_param", drawn))))
    if random_degrees:
        # The masks it drew, in the layer and in the cells of its Keras layers' mask
        # closures (the constraints keep applying them in training), then its setting.
        masks = list(self._masks)
        steps.append(_Call((setattr, (blank, "_masks", masks))))
        layers = _Call((operator.attrgetter(_NETWORK + ".layers"), (blank,)))
        for index, attribute, position, k in cells:
            closure = _Call((operator.attrgetter(attribute + ".__closure__"),
                             (_Call((operator.itemgetter(index), (layers,))),)))
            cell = _Call((operator.itemgetter(position), (closure,)))
            steps.append(_Call((setattr, (cell, "cell_contents", masks[k]))))
        steps.append(_Call((setattr, (blank, "_hidden_degrees", "random"))))
    return operator.itemgetter(0), (tuple(steps),)


def _mask_cells(self: Any, network: Any) -> Any:
    """(Keras layer index, attribute, cell position, mask index) of every cell of the
    network's kernel initializers and constraints that holds one of ``self._masks``;
    None unless each mask is in some layer's constraint (then nothing could put the
    masks a random ``hidden_degrees`` drew back into a rebuilt network)."""
    masks = list(getattr(self, "_masks", None) or ())
    found = []
    for index, layer in enumerate(getattr(network, "layers", ())):
        for attribute in ("kernel_initializer", "kernel_constraint"):
            for position, cell in enumerate(getattr(getattr(layer, attribute, None),
                                                    "__closure__", None) or ()):
                try:
                    content = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                found += [(index, attribute, position, k)
                          for k, mask in enumerate(masks) if content is mask]
    constrained = {k for _, attribute, _, k in found if attribute == "kernel_constraint"}
    return found if masks and constrained == set(range(len(masks))) else None


def network_copy(self: Any) -> Any:
    """``__copy__`` for ``AutoregressiveNetwork``: Python's default shallow copy (its
    ``__reduce_ex__`` above is for pickles and deep copies)."""
    cls = type(self)
    new = cls.__new__(cls)
    new.__setstate__(self.__getstate__())
    return new


# Keras 2's Sequential, by the module that defines it, and the module of its layers'
# deserializer: tf-keras (TF >= 2.16), the keras package of TF 2.13-2.15, and older ones.
_SEQUENTIAL = {"tf_keras.src.engine.sequential": "tf_keras.src.layers.serialization",
               "keras.src.engine.sequential": "keras.src.layers.serialization",
               # Keras 2.6-2.12 (the keras package before its src/ layout): TFP 0.17 on TF 2.9
               "keras.engine.sequential": "keras.layers.serialization",
               # TF <= 2.5's own Keras: TFP 0.12 and 0.13 on TF 2.5
               "tensorflow.python.keras.engine.sequential":
                   "tensorflow.python.keras.layers.serialization"}


def _keras_sequential(cls: type) -> Tuple[Any, Optional[str]]:
    """Keras's ``Sequential.__init__`` above ``cls`` and its layers' serialization
    module, if the standard pickle finds that ``__init__`` by name (the pickle then names
    only Keras); else (None, None)."""
    for klass in cls.__mro__:
        module = module_name(klass)
        if klass.__qualname__ == "Sequential" and module in _SEQUENTIAL:
            init = vars(klass).get("__init__")
            if isinstance(init, types.FunctionType) and _findable(init):
                return init, _SEQUENTIAL[module]
            return None, None
    return None, None


def _sequential_steps(self: Any) -> Any:
    """The steps that make ``self`` again (F12), or None where Keras's own reduction
    is left to run (not built, not eager, or Keras moved)."""
    init, serialization = _keras_sequential(type(self))
    if init is None or not getattr(self, "built", False):
        return None
    try:
        deserialize = importlib.import_module(serialization).deserialize
        config = self.get_config()
        values = self.get_weights()
    except Exception:  # not eager (a trace), or Keras moved
        return None
    if not _findable(deserialize):
        return None
    import operator

    if "use_legacy_format" in _parameter_names(deserialize):  # Keras >= 2.13
        layers = [_Call((functools.partial(deserialize, use_legacy_format="module" not in layer),
                         (layer,))) for layer in config["layers"]]
    else:
        layers = [_Call((deserialize, (layer,))) for layer in config["layers"]]
    # Memoized by pickle and deepcopy: one new model, made blank, then given its
    # layers (as its constructor does), then its weights, in that order.
    # ``cls.__new__(cls)``: Keras's own ``__new__`` picks the layer's version (a partial
    # so that pickle does not take it for its protocol-2 ``__newobj__``).
    blank = _Call((functools.partial(copyreg.__newobj__, type(self)), ()))
    steps = [blank,
             _Call((functools.partial(init, name=config["name"]), (blank, layers))),
             _Call((operator.methodcaller("set_weights", values), (blank,)))]
    if not self.trainable:
        steps.append(_Call((setattr, (blank, "trainable", False))))
    return tuple(steps)


def _parameter_names(fn: Any) -> Set[str]:
    import inspect

    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def sequential_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for TFP's Keras ``Sequential`` networks whose constructor Keras
    cannot call (F12: Glow's default networks). Keras writes a model in its own
    saving format and makes it again with ``cls(name=...)``, which their constructors
    refuse. Written instead as: a blank instance of the class, Keras's own
    ``Sequential.__init__`` with the same name and the layers Keras makes again from
    their configs (same names, same settings), then the weights."""
    steps = _sequential_steps(self)
    if steps is None:
        return object.__reduce_ex__(self, protocol)  # Keras's own reduction
    import operator

    return operator.itemgetter(0), (steps,)


def sequential_deepcopy(self: Any, memo: Dict[int, Any]) -> Any:
    """``__deepcopy__`` for the same networks (Keras defines its own, through its
    saving format, which ``deepcopy`` would use first; its ``__copy__`` calls this)."""
    steps = _sequential_steps(self)
    if steps is None:
        for klass in type(self).__mro__:  # Keras's own
            own = vars(klass).get("__deepcopy__")
            if own is not None and own is not sequential_deepcopy:
                return own(self, memo)
    import copy

    new = copy.deepcopy(steps, memo)[0]
    memo[id(self)] = new
    return new


def _made_on_use(wrapped: Any, name: str, value: Any) -> bool:
    """Whether attribute ``name`` of a ``JitPublicMethods`` is the compiled method it made
    on first use (``tf.function``/``jax.jit`` of ``wrapped``'s method of that name)."""
    if name.startswith("_") or not callable(value):
        return False
    method = getattr(wrapped, name, None)
    if method is None:
        return False
    inner = getattr(value, "python_function", None) or getattr(value, "__wrapped__", None)
    if inner is not None:  # tf.function
        return bool(inner == method)
    for cell in getattr(value, "__closure__", None) or ():  # the JAX substrate's jit wrapper
        try:
            if cell.cell_contents is method or cell.cell_contents == method:
                return True
        except (ValueError, TypeError):
            continue
    return False


_JIT_ARGUMENTS = ("_object_to_wrap", "_trace_only", "_methods_to_exclude")


def jit_methods_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for ``tfp.experimental.util.JitPublicMethods`` (what
    ``tfp.sts.forecast`` returns its components in). Once a method had run, every copy
    and pickle failed (``cannot pickle 'FuncGraph' object``: the compiled method it
    keeps holds its traced graphs); and no pickle or deep copy could be made again
    (its ``__getattr__`` recursed without end while its state was not set). It is
    written as its constructor's call, without the compiled methods, which it makes
    again on first use; other attributes are set after."""
    attrs = getattr(self, "__dict__", None)
    if not isinstance(attrs, dict) or any(name not in attrs for name in _JIT_ARGUMENTS):
        return object.__reduce_ex__(self, protocol)
    wrapped = attrs["_object_to_wrap"]
    rest = {k: v for k, v in attrs.items()
            if k not in _JIT_ARGUMENTS and not _made_on_use(wrapped, k, v)}
    made = functools.partial(type(self), trace_only=attrs["_trace_only"],
                             methods_to_exclude=attrs["_methods_to_exclude"])
    if not rest:
        return made, (wrapped,)
    import operator

    # Memoized by pickle and deepcopy: one new wrapper, then its other attributes.
    blank = _Call((made, (wrapped,)))
    steps = [blank] + [_Call((setattr, (blank, k, v))) for k, v in rest.items()]
    return operator.itemgetter(0), (tuple(steps),)


def jit_methods_copy(self: Any) -> Any:
    """``__copy__`` for ``JitPublicMethods``: a shallow copy sharing all it holds (its
    ``__getattr__`` made Python's recurse without end)."""
    new = object.__new__(type(self))
    new.__dict__.update(self.__dict__)
    return new


def _always(cls: type) -> bool:
    return True


def _no_reduction_of_its_own(cls: type) -> bool:
    """Whether ``cls`` leaves ``__reduce_ex__`` to its bases: where TFP defines its own
    reduction now, it is left alone."""
    return "__reduce_ex__" not in vars(cls)


def _keras_layer_class(cls: type) -> bool:
    """A Keras layer here (not in the JAX/NumPy substrates, where the class is plain)."""
    return all(hasattr(cls, name) for name in ("get_weights", "__getstate__", "__setstate__",
                                               "build"))


def _tf_keras_sequential(cls: type) -> bool:
    return _keras_sequential(cls)[0] is not None


def _is_tf_type_spec(cls: type) -> bool:
    """A TF ``TypeSpec`` here (the JAX/NumPy substrates have no TypeSpec machinery)."""
    for klass in cls.__mro__:
        if klass.__name__ == "TypeSpec" and module_name(klass).startswith("tensorflow."):
            return True
    # _DeferredTensorTransformedVariableSpecBase is a mixin: look at its subclasses.
    return any(_is_tf_type_spec(sub) for sub in cls.__subclasses__())


def _own_tf_type_spec_reduce(cls: type) -> bool:
    """A TF type spec mixin that defines ``__reduce__`` itself."""
    return "__reduce__" in vars(cls) and _is_tf_type_spec(cls)


_NETWORK_PAIRS = (("__reduce_ex__", network_reduce_ex), ("__copy__", network_copy))
_SEQUENTIAL_PAIRS = (("__reduce_ex__", sequential_reduce_ex),
                     ("__deepcopy__", sequential_deepcopy))
_JIT_METHODS_PAIRS = (("__reduce_ex__", jit_methods_reduce_ex), ("__copy__", jit_methods_copy))
_VARIABLE_PAIRS = (("__reduce_ex__", variable_reduce_ex), ("__copy__", variable_copy),
             ("__deepcopy__", variable_deepcopy))

# module (relative to the substrate prefix), class name, the cause (the class is patched
# where the predicate holds, or where it is patched already), (attribute, replacement)s.
_GROUPS: Tuple[Tuple[str, str, Callable[[type], bool], Tuple[Tuple[str, Any], ...]], ...] = (
    ("bijectors.bijector", "Bijector", _no_reduction_of_its_own, (("__reduce_ex__", reduce_ex),)),
    ("distributions.distribution", "Distribution", _no_reduction_of_its_own,
     (("__reduce_ex__", reduce_ex),)),
    ("math.psd_kernels.positive_semidefinite_kernel", "PositiveSemidefiniteKernel",
     _no_reduction_of_its_own, (("__reduce_ex__", reduce_ex),)),
    ("internal.auto_composite_tensor", "_AutoCompositeTensorTypeSpec", _is_tf_type_spec,
     (("__reduce__", type_spec_reduce),)),
    ("util.deferred_tensor", "_DeferredTensorTransformedVariableSpecBase", _is_tf_type_spec,
     (("__reduce__", type_spec_reduce),)),
    # Before TFP had that base (0.17): the spec mixin that holds the broken __reduce__.
    ("util.deferred_tensor", "_DeferredTensorSpecBase", _own_tf_type_spec_reduce,
     (("__reduce__", type_spec_reduce),)),
    ("internal.reparameterization", "ReparameterizationType", _always,
     (("__reduce__", singleton_reduce),)),
    ("internal.parameter_properties", "ParameterProperties", _no_reduction_of_its_own,
     (("__reduce_ex__", properties_reduce_ex),)),
    ("bijectors.masked_autoregressive", "AutoregressiveNetwork", _keras_layer_class,
     _NETWORK_PAIRS),
    ("distributions.pixel_cnn", "_PixelCNNNetwork", _keras_layer_class, _NETWORK_PAIRS),
    ("bijectors.glow", "GlowDefaultNetwork", _tf_keras_sequential, _SEQUENTIAL_PAIRS),
    ("bijectors.glow", "GlowDefaultExitNetwork", _tf_keras_sequential, _SEQUENTIAL_PAIRS),
) + tuple((module, name, _no_reduction_of_its_own, (("__reduce_ex__", closure_reduce_ex),))
          for module, name in (
              ("mcmc.kernel", "TransitionKernel"), ("glm.family", "ExponentialFamily"),
              # ProgressBarReducer's default progress bar is a TFP closure.
              ("experimental.mcmc.reducer", "Reducer"),
              # KernelBuilder (a namedtuple) keeps its tracing closure.
              ("experimental.mcmc.kernel_builder", "KernelBuilder"),
              ("sts.structural_time_series", "StructuralTimeSeries"),
              ("experimental.nn.layers", "Layer"),
              ("experimental.linalg.linear_operator_psd_kernel", "LinearOperatorPSDKernel"),
              ("math.ode.base", "Solver"),
              # TFP 0.10/0.11's SoftClip (no parameters to be rebuilt from) keeps its
              # lambdas over low and high in DeferredTensors.
              ("util.deferred_tensor", "DeferredTensor"))) + (
    ("experimental.util.jit_public_methods", "JitPublicMethods", _always, _JIT_METHODS_PAIRS),
    # Protocols 0 and 1 take it as it is where F14's cause is not there.
    ("experimental.util.special_methods", "SpecialMethods", _slots_without_state,
     (("__reduce_ex__", slots_reduce_ex),)),
) + tuple((f"internal.backend.{backend}.ops", "NumpyVariable", _always, _VARIABLE_PAIRS)
          for backend in ("numpy", "jax"))

# One row per attribute: module, class name, attribute, replacement, cause.
_TARGETS: Tuple[Tuple[str, str, str, Any, Callable[[type], bool]], ...] = tuple(
    (module, name, attribute, replacement, cause)
    for module, name, cause, pairs in _GROUPS for attribute, replacement in pairs)

# Absolute: TF classes that TFP objects carry (patched with the TF substrate), each
# where the cause it fixes is found: ``_DictWrapper`` defines its own ``__reduce_ex__``
# (F8), ``TrackableReference`` has slots and no state of its own (F14). Attribute
# ``None``: the class's entry in ``copyreg.dispatch_table`` (``_TupleWrapper`` hands out
# its tuple's ``__reduce_ex__``, F8).
# The module is named relative to TF's tracking package: ``tensorflow.python.trackable``
# since TF 2.13, ``tensorflow.python.training.tracking`` before (TF_TRACKING).
# F19: TF's lazily loaded modules (``tf.keras`` from TF 2.15 on: a ``KerasLazyLoader``).
LAZY_LOADER = "tensorflow.python.util.lazy_loader"


def lazy_module_reduce(self: Any) -> Any:
    """F19: a TF lazy module as the module it loads, imported by name when read back
    (what TF 2.16 made ``LazyLoader.__reduce__``: before, no lazy module pickled, so
    neither did a function that cloudpickle writes by value, in ``__main__`` or a
    notebook, over a global such as ``tfk = tf.keras``: ``cannot pickle
    'KerasLazyLoader' object``). Reading ``__name__`` loads it: the name is the
    loaded module's."""
    import importlib

    return importlib.import_module, (self.__name__,)


def _module_without_reduction(cls: type) -> bool:
    """F19's cause: a module type (TF's ``LazyLoader``) with no reduction of its own."""
    import types

    return (isinstance(cls, type) and issubclass(cls, types.ModuleType)
            and not any("__reduce__" in vars(klass) or "__reduce_ex__" in vars(klass)
                        for klass in cls.__mro__ if klass not in (types.ModuleType, object)))


_TF_TARGETS = (
    ("data_structures", "_DictWrapper", "__reduce_ex__",
     wrapper_reduce_ex, lambda cls: "__reduce_ex__" in vars(cls)),
    ("base", "TrackableReference", "__reduce_ex__", slots_reduce_ex, _slots_without_state),
    ("data_structures", "_TupleWrapper", None, wrapper_reduce_ex, _proxies_its_reduction),
)

_SHARED = (singleton_reduce, variable_reduce_ex, variable_copy, variable_deepcopy,
           properties_reduce_ex)

# Modules whose import re-plans a substrate (a hook each), relative to the prefix.
MODULES = tuple(dict.fromkeys(target[0] for target in _TARGETS))


def _step(cls: Any, attribute: Optional[str], replacement: Any,
          cause: Callable[[type], bool]) -> Optional[Tuple[Any, Any, Any]]:
    """The patch step for one target class, or None: where the class is patched
    already (so that planning again keeps it), or where its cause is found. Attribute
    None: the class's entry in ``copyreg.dispatch_table``."""
    if not isinstance(cls, type):
        return None
    if attribute is None:
        if (copyreg.dispatch_table.get(cls) is replacement
                or (cls not in copyreg.dispatch_table and cause(cls))):
            return copyreg.dispatch_table, cls, replacement
        return None
    if vars(cls).get(attribute) is replacement or cause(cls):
        return cls, attribute, replacement
    return None


def plan(bijector_module: str) -> List[Tuple[Any, Any, Any]]:
    """The reducers to install for the substrate of ``bijector_module``, by feature.

    Only modules already imported are looked at (a hook re-plans when another one
    is); a class is patched only if it exists there and shows the cause its fix is
    for (for instance no reduction of its own: where TFP defines one, it is left alone).
    """
    prefix = _detect.prefix_of(bijector_module)
    # The TF substrate (its prefix is also that of the legacy NumPy substrate's copies).
    tf = bijector_module == _TF_BIJECTOR
    targets = []
    for relative, class_name, attribute, replacement, cause in _TARGETS:
        module = sys.modules.get(_detect.module_of(bijector_module, relative))
        if module is None and replacement in _SHARED:
            # The generated substrates share some internals with the TF one.
            module = sys.modules.get(f"{_TF_PREFIX}.{relative}")
        if module is not None:
            targets.append((getattr(module, class_name, None), attribute, replacement, cause))
    if tf:
        for relative, class_name, attribute, replacement, cause in _TF_TARGETS:
            for package in TF_TRACKING:
                cls = getattr(sys.modules.get(f"{package}.{relative}"), class_name, None)
                if cls is not None:
                    targets.append((cls, attribute, replacement, cause))
                    break
        for module in OBJECT_IDENTITY:  # F14 for a TFP object that holds a Keras layer
            cls = getattr(sys.modules.get(module), "_ObjectIdentityWrapper", None)
            if cls is not None:
                targets.append((cls, "__reduce_ex__", slots_reduce_ex, _slots_without_state))
        cls = getattr(sys.modules.get(LAZY_LOADER), "LazyLoader", None)
        if cls is not None:  # F19
            targets.append((cls, "__reduce__", lazy_module_reduce, _module_without_reduction))
    steps = [step for step in (_step(*target) for target in targets) if step is not None]
    if tf:  # (on TFP 0.9-0.11 too: TF 2.5's Keras)
        steps.extend(_keras_layers.plan(prefix))  # F15, F16, F18, F21, F22
        steps.extend(_keras_models.plan(prefix))  # F17
        steps.extend(_keras_optimizers.plan(prefix))  # F23
        steps.extend(_gpflow.plan())  # F20
    if not _detect.legacy_copy(bijector_module):
        # Not for the legacy NumPy substrate: its copies sit below the TF prefix, which
        # the TF substrate's steps look through, and TFP 0.8-0.11 neither loads them
        # lazily (F5) nor makes classes by factories (F1b).
        steps.extend(_detached_submodules(prefix))  # F5
        steps.extend(_misnamed_classes(prefix))  # F1b
    return steps


def _misnamed_classes(prefix: str) -> List[Tuple[Any, str, Any]]:
    """(class, "__module__", module name) for TFP classes made by factories.

    ``tfd.ZeroInflatedNegativeBinomial`` is made by ``inflated_factory`` with
    ``__module__ == "abc"``, so no pickle can find it by name, although TFP's
    module defines it under that very name. Its ``__module__`` is set to the
    (innermost) TFP module that holds it.
    """
    found: Dict[int, Tuple[Any, str]] = {}
    for name, module in sorted(sys.modules.items()):
        if module is None or not name.startswith(prefix + "."):
            continue
        for attr, value in list(vars(module).items()):
            if not isinstance(value, type) or getattr(value, "__qualname__", None) != attr:
                continue
            if not _tfp_made(value, prefix):
                continue
            home = sys.modules.get(module_name(value))
            if home is not None and getattr(home, attr, None) is value:
                continue
            previous = found.get(id(value))
            if previous is None or name.count(".") > previous[1].count("."):
                found[id(value)] = (value, name)
    return [(cls, "__module__", name) for cls, name in found.values()]


def _tfp_made(cls: type, prefix: str) -> bool:
    """Whether ``cls`` is a Python class (not a C type, which cannot be renamed) derived
    from a TFP class: what TFP's factories make. Other classes TFP's modules import
    (TFP 0.23's NumPy backend holds wrapt's C ``ObjectProxy``) are never renamed."""
    if not cls.__flags__ & _HEAPTYPE:
        return False
    return any(module_name(base).startswith(prefix + ".") for base in cls.__mro__[1:])


def _initializing(module: Any) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _detached_submodules(prefix: str) -> List[Tuple[Any, str, Any]]:
    """(package, name, submodule) for each imported submodule its package lost.

    Not while the submodule is still being imported (the import system binds the
    name when it is done): recording it as missing then would make ``unpatch()``
    delete a name the package has (``tfp.substrates.numpy.bijectors``). Still being
    imported: marked so by the import system, or a module whose post-import hook is
    running (wrapt < 1.14 loads those without the mark: ``tfp.bijectors.bijector``
    was deleted by ``unpatch()`` with TF 2.5's wrapt 1.12). A package
    still importing is no reason to wait: its finished submodules are bound already,
    and those missing were taken away by TFP (``remove_undocumented``, at the end of
    the package's ``__init__``, where the hooks of ``tfp.sts`` and the like run).
    """
    steps = []
    importing = _hooks.importing()
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(prefix + ".") or name in importing:
            continue
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is not None and child not in vars(parent) and not _initializing(module):
            steps.append((parent, child, module))
    return steps
