"""F17: Keras 2.6-2.11 models, and TF 2.5's Keras models, that hold TFP's layers.

Those Keras releases pickle, copy and deep-copy a built model through
``keras.saving.pickle_utils``, in a format that cannot hold TFP's distribution layers.
Keras 2.7-2.10 save it as a SavedModel, which traces each layer's call in a graph, and
a TFP distribution layer's call cannot be traced there
(``OperatorNotAllowedInGraphError: Iterating over a symbolic tf.Tensor is not
allowed``). Keras 2.11 writes it in the first (experimental) ``.keras`` format, whose
serializer refuses a Python lambda, and the config of most of TFP's distribution layers
holds one (``IndependentNormal``'s: ``TypeError: `lambda` objects cannot be
serialized``). So no model holding such a layer could be pickled or copied, with or
without the rest of this package. Keras's HDF5 format writes such a model (config,
weights, training configuration) and reads it back.

Which Keras, by feature: its ``Model.__reduce__`` writes the model through
``pickle_utils.serialize_model_as_bytecode``, and either that module has no
``saving_lib`` (a SavedModel), or its ``saving_lib``'s serializer raises on a lambda
(Keras 2.12 and later write a lambda in their ``.keras`` files, which works). Which models: built
ones holding a ``tfp.layers`` ``DistributionLambda``; a model Keras cannot write in
HDF5 (a subclassed ``Model``) keeps Keras's own reduction. Such a model is written as:
import ``tfp.layers`` (TFP's layers register with Keras on import), then Keras's own
``load_model`` of an HDF5 file in memory (``h5py`` over ``io.BytesIO``) holding what
Keras's ``model.save`` wrote, given the user's functions the model was compiled with
(its loss, its metrics), which that file names by their names alone, as its
``custom_objects``. The pickle names only Keras, h5py, io, importlib and those functions:
it loads without this package, but for the layers that only it registers (F15), as
their HDF5 files do. Nothing else changes: the model's ``__reduce__`` and ``__deepcopy__``
(which Keras's ``__copy__`` calls) on Keras's ``Model``, for those models only.

TF 2.5's Keras (``tensorflow.python.keras``) and Keras 2.6 define no pickling or copying
of a model: Python's deep copy copies a plain model attribute by attribute, but not one
holding a TFP distribution layer, whose graph nodes hold TFP's distribution over
tensors of Keras's scratch graph. There its ``Model`` gets a ``__reduce_ex__`` (which
``copy.deepcopy`` uses too) that writes those models the same way, and a ``__copy__``
that copies them as their deep copy does (as Keras 2.7-2.11's); a model holding a
variational layer (and no distribution layer) is pickled and deep-copied that way too
(its functions as F16 writes them), and shallow-copied by Python. Other models as Python
does. (Python cannot pickle any model of that Keras, with or without this package, and
its deep copy of a plain model cannot compute its outputs.)
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from ._closures import _Call, in_keras, module_name
from ._record import RECORD

_LAYERS = "layers.distribution_layer"  # relative to the TF substrate's prefix


def _original(cls: type, name: str) -> Any:
    """``cls``'s own ``name`` as Keras defined it (before this package), or None."""
    try:
        value = RECORD.get_original(cls, name)
    except AttributeError:
        return None
    return value if name in vars(cls) else None


# Keras's Model class (where F17 applies) -> Keras's ``load_model``, which reads HDF5.
_LOADERS: Dict[type, Any] = {}


def _refuses_lambdas(saving_lib: Any) -> bool:
    """Whether the serializer of Keras's ``saving_lib`` raises on a Python lambda (the
    experimental ``.keras`` format of Keras 2.11; later ones write it)."""
    serialize = getattr(saving_lib, "serialize_keras_object", None)
    if not callable(serialize):
        return False
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            serialize(lambda x: x)
    except TypeError:
        return True
    except Exception:
        return False
    return False


def hdf5_loader(model_cls: type) -> Any:
    """F17's cause: Keras's ``load_model`` (which reads Keras's HDF5 format) where
    ``model_cls.__reduce__`` writes a model, through ``pickle_utils``, as a SavedModel
    (Keras 2.7-2.10) or in a format that refuses lambdas (Keras 2.11); else None."""
    reduce = _original(model_cls, "__reduce__")
    code = getattr(reduce, "__code__", None)
    if code is None or "serialize_model_as_bytecode" not in code.co_names:
        return None
    utils = getattr(reduce, "__globals__", {}).get("pickle_utils")
    if utils is None:
        return None
    saving_lib = getattr(utils, "saving_lib", None)
    if saving_lib is None:  # a SavedModel, through Keras's save module
        load_model = getattr(getattr(utils, "save_module", None), "load_model", None)
    elif _refuses_lambdas(saving_lib):  # Keras's public load_model reads HDF5 too
        models = sys.modules.get(module_name(model_cls).split(".")[0] + ".models")
        load_model = getattr(models, "load_model", None)
    else:
        return None
    return load_model if callable(load_model) else None


def _owner(model: Any) -> Optional[type]:
    """The class in ``model``'s MRO that holds F17's replacement."""
    for klass in type(model).__mro__:
        own = vars(klass)
        if own.get("__reduce__") is model_reduce or own.get("__reduce_ex__") is model_reduce_ex:
            return klass
    return None


_PICKLING = ("__reduce__", "__reduce_ex__", "__deepcopy__", "__copy__")


def python_pickles(model_cls: type) -> Optional[Any]:
    """F17's cause on TF 2.5's Keras and Keras 2.6 (found by feature alone; Keras 2.7 on
    defines a ``__reduce__``): no class of Keras's ``Model`` defines how a model
    pickles or copies, so Python does it attribute by attribute, and a model holding a
    TFP distribution layer cannot be deep-copied (its graph nodes hold TFP's
    distribution over Keras's scratch-graph tensors: ``cannot pickle '_thread.RLock'
    object``, ``__new__() missing 1 required positional argument: 'distribution'``),
    where a plain model can. Returns Keras's ``load_model`` (which reads HDF5), or None."""
    ours = (model_reduce_ex, model_copy)  # installed already: planning again keeps them
    for klass in model_cls.__mro__:
        if klass is not object and any(vars(klass).get(name, ours[0]) not in ours
                                       for name in _PICKLING):
            return None
    models = sys.modules.get(module_name(model_cls).split(".engine.")[0] + ".models")
    load_model = getattr(models, "load_model", None)
    return load_model if callable(load_model) else None


def _layer_modules() -> Dict[str, Any]:
    """The imported ``tfp.layers`` distribution-layer modules (of TFP and its substrates),
    by name."""
    return {name: module for name, module in list(sys.modules.items())
            if name.endswith("." + _LAYERS) and module is not None}


def _submodules(model: Any) -> Any:
    """``model.submodules``, or, where that fails, Keras's own list of the layers in it
    (tf.Module's walk sorts the keys of dicts it meets, and a trained subclassed model
    on Keras 2.9 holds a dict keyed by layers: ``'<' not supported between instances of
    'Dense' and ...``)."""
    try:
        return model.submodules
    except Exception:
        pass
    try:
        return list(model._flatten_layers(include_self=False))
    except Exception:
        return ()


def _distribution_layer_types() -> Tuple[type, ...]:
    return tuple(module.DistributionLambda for module in _layer_modules().values()
                 if hasattr(module, "DistributionLambda"))


def _holds_distribution_layer(model: Any) -> bool:
    layer_types = _distribution_layer_types()
    return bool(layer_types) and any(isinstance(m, layer_types) for m in _submodules(model))


def _holds_tfp_layer(model: Any) -> bool:
    """Whether ``model`` holds a TFP distribution layer, or another ``tfp.layers``
    layer with a config of TFP's own (the variational layers, ``DenseFlipout``, ...),
    which Keras's HDF5 format writes too (their functions as F16 writes them). One walk
    of the model's submodules."""
    layer_types = _distribution_layer_types()
    return any((layer_types and isinstance(m, layer_types)) or _tfp_config(type(m))
               for m in _submodules(model))


def _tfp_config(cls: type) -> bool:
    """A ``tfp.layers`` layer class whose config is TFP's (not Keras's base one)."""
    if not module_name(cls).startswith("tensorflow_probability.python.layers."):
        return False
    for klass in cls.__mro__:
        if "get_config" in vars(klass):
            return module_name(klass).startswith("tensorflow_probability.")
    return False


def _graph_network(model: Any) -> bool:
    """Whether Keras writes ``model`` in HDF5: a Functional model or a Sequential."""
    if getattr(model, "_is_graph_network", False):
        return True
    return any(klass.__qualname__ == "Sequential" and in_keras(klass)
               for klass in type(model).__mro__)


_Written = Tuple[Any, bytes, str, Dict[str, Any]]


def _hdf5(model: Any, holds: Any = _holds_distribution_layer) -> Optional[_Written]:
    """(Keras's ``load_model``, the model in Keras's HDF5 format, the ``tfp.layers``
    module to import first, the user's functions and classes that the file names:
    :func:`_custom_objects`), or None where Keras's own reduction is left to run: a
    model that is not built, or for which ``holds(model)`` is false."""
    owner = _owner(model)
    load_model = _LOADERS.get(owner) if owner is not None else None
    if load_model is None or not getattr(model, "built", False) or not holds(model):
        return None
    try:
        import io

        import h5py
    except ImportError:
        return None
    if not _graph_network(model):  # a subclassed Model: Keras writes no HDF5 of it
        return None
    functions = _custom_objects(model)
    buffer = io.BytesIO()
    with _distinct_weight_names(model), h5py.File(buffer, "w") as f:
        # Given an h5py.File, Keras writes its HDF5 format. Its errors are the model's
        # own (a layer without a config), which the other format hid behind its own.
        model.save(f)
    layers = [name for name in _layer_modules() if name.startswith("tensorflow_probability.")]
    package = (layers[0].rsplit(".", 1)[0] if layers else "tensorflow_probability.python.layers")
    return load_model, buffer.getvalue(), package, functions


def _users_keras_class(kind: type) -> bool:
    """A class that derives from one of Keras's (a layer, model, loss, metric or
    optimizer: what Keras's files name by class) and is neither Keras's own (its loader
    finds those by name) nor TFP's (``tfp.layers``, imported before the loader runs,
    registers its own; F15-F23 register the others)."""
    return (not in_keras(kind) and not module_name(kind).startswith("tensorflow_probability.")
            and any(in_keras(klass) for klass in kind.__mro__[1:]))


def _user_objects(value: Any, found: List[Any]) -> None:
    """The plain functions in ``value`` (nested in dicts, lists and tuples, or wrapped in
    Keras's metric and loss wrappers), and the classes of the other objects in it, that
    are not Keras's own nor TFP's: Keras's loader finds those by name, and no others (not
    TF's functions: ``loss=tf.math.squared_difference``; not a user's ``Loss`` class)."""
    import types

    if value is None or isinstance(value, (str, bytes, int, float, bool)):
        return
    if isinstance(value, dict):
        for item in value.values():
            _user_objects(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _user_objects(item, found)
    elif isinstance(value, types.FunctionType):
        if not in_keras(value) and value not in found:
            found.append(value)
    elif isinstance(getattr(value, "_fn", None), types.FunctionType) and in_keras(type(value)):
        _user_objects(value._fn, found)  # Keras's MeanMetricWrapper, LossFunctionWrapper
    elif _users_keras_class(type(value)) and type(value) not in found:
        found.append(type(value))


def _layers(model: Any) -> List[Any]:
    """The model and every layer in it, nested models' layers too (Keras's own walk)."""
    try:
        return list(model._flatten_layers(include_self=True, recursive=True))
    except Exception:
        return [model] + list(_submodules(model))


def _registry(model: Any) -> Optional[Any]:
    """A test of whether the Keras of ``model`` finds an object by the name it writes
    for it (registered with ``register_keras_serializable``, or in its global custom
    objects), from that Keras's ``generic_utils``; None where there is none."""
    keras = next((klass for klass in type(model).__mro__ if in_keras(klass)), None)
    if keras is None:
        return None
    name = module_name(keras)
    package = name.split(".keras.")[0] + ".keras" if name.startswith("tensorflow.") else "keras"
    utils = sys.modules.get(f"{package}.utils.generic_utils")
    get_name = getattr(utils, "get_registered_name", None)
    get_object = getattr(utils, "get_registered_object", None)
    if not (callable(get_name) and callable(get_object)):
        return None

    def finds(obj: Any) -> bool:
        try:
            return get_object(get_name(obj)) is obj
        except Exception:
            return False
    return finds


def _custom_objects(model: Any) -> Dict[str, Any]:
    """What Keras's HDF5 loader must be given to read ``model`` back, by name: the user's
    functions and classes that the file names and that the loader cannot find itself.

    Keras's HDF5 format names a function in the training configuration by its name
    alone (``negloglik``, ``<lambda>``: TFP's regression examples compile with
    ``loss=lambda y, rv_y: -rv_y.log_prob(y)``), a layer, a model, a loss, a metric or
    an optimizer by its class's name, and its loader finds only Keras's own and the
    registered ones: without them a pickle was written and then failed on load
    (``Unknown loss function: <lambda>``, ``Unknown layer: MyLayer``). They are handed
    to ``load_model`` as its ``custom_objects`` (not those Keras finds itself, registered:
    the pickle need not hold them); two different ones of one name cannot be told apart
    in the file, which is refused here, when the model is written."""
    found: List[Any] = []
    get_args = getattr(model, "_get_compile_args", None)
    if getattr(model, "optimizer", None) is not None and get_args is not None:
        try:
            args = get_args(user_metrics=True)
        except Exception:  # not compiled
            args = {}
        _user_objects([args.get(key) for key in ("loss", "metrics", "weighted_metrics")],
                      found)
        _user_objects(model.optimizer, found)
    for layer in _layers(model):
        if _users_keras_class(type(layer)) and type(layer) not in found:
            found.append(type(layer))
    registry = _registry(model)
    objects: Dict[str, Any] = {}
    for each in found:
        if registry is not None and registry(each):
            continue  # Keras finds it itself: the pickle need not hold it
        name = each.__name__
        if name in objects:
            kind = "classes" if isinstance(each, type) else "functions"
            raise ValueError(
                f"cannot write this Keras model in Keras's HDF5 format, which "
                f"tfp_picklefix uses to pickle and copy a model holding TFP's layers on "
                f"this Keras (F17): it holds two different {kind} named {name!r} (losses, "
                f"metrics, layers or the model's own), and the format names each by its "
                f"name alone. Give them distinct names (def ... instead of lambda).")
        objects[name] = each
    return objects


@contextlib.contextmanager
def _distinct_weight_names(model: Any) -> Iterator[None]:
    """While Keras writes ``model`` in its HDF5 format, the model's and its optimizer's
    variables that share a name with another have names of their own.

    The format writes each layer's weights, and the optimizer's, as datasets named by
    the variables' names, and h5py refuses a name twice ("Unable to create dataset (name
    already exists)"); its loader reads them back in their order, not by name. TF 2.5's
    Keras names the variables of a layer's inner models by that layer alone: a
    ``DenseVariational`` whose posterior and prior each hold a ``VariableLayer``, as in
    TFP's regression tutorial, has two ``dense_variational/constant:0`` (and its
    optimizer two slots of each kind). Those after the first are named
    ``dense_variational/constant_1:0`` and so on for the write only (TF's variables keep
    their name in ``_handle_name``); a variable whose name cannot be changed so is
    refused with an error that says why."""
    variables = list(getattr(model, "weights", ()))
    optimizer = getattr(model, "optimizer", None)
    variables += list(getattr(optimizer, "weights", ()) if optimizer is not None else ())
    taken = {variable.name for variable in variables}
    seen: Set[str] = set()
    visited: Set[int] = set()  # a variable listed twice is one dataset name
    renamed: List[Tuple[Any, str]] = []
    try:
        for variable in variables:
            if id(variable) in visited:
                continue
            visited.add(id(variable))
            name = variable.name
            if name not in seen:
                seen.add(name)
                continue
            handle_name = getattr(variable, "_handle_name", None)
            if isinstance(handle_name, str):
                base, colon, index = name.rpartition(":")
                if not colon:
                    base, index = name, ""
                number = 1
                while f"{base}_{number}{colon}{index}" in taken:
                    number += 1
                unique = f"{base}_{number}{colon}{index}"
                renamed.append((variable, handle_name))
                variable._handle_name = unique
            if not isinstance(handle_name, str) or variable.name != unique:
                raise ValueError(
                    f"cannot write this Keras model in Keras's HDF5 format, which "
                    f"tfp_picklefix uses to pickle and copy a model holding TFP's layers "
                    f"on this Keras (F17): it has more than one weight named {name!r}, "
                    f"and the format writes weights by name (this Keras names the "
                    f"variables of a layer's inner models, such as DenseVariational's "
                    f"posterior and prior, by the layer alone)")
            taken.add(unique)
            seen.add(unique)
        yield
    finally:
        for variable, handle_name in reversed(renamed):
            variable._handle_name = handle_name


def _load(load_model: Any, data: bytes, functions: Dict[str, Any]) -> Any:
    import io

    import h5py

    file = h5py.File(io.BytesIO(data), "r")
    return load_model(file, functions) if functions else load_model(file)


@contextlib.contextmanager
def _explained(model: Any) -> Iterator[None]:
    """Keras 2.7-2.11's own writing of a model that F17 leaves to it: where that fails
    for a built subclassed model holding a TFP distribution layer (a known issue: Keras
    cannot write a subclassed model in HDF5), the error says why and what works."""
    try:
        yield
    except TypeError as error:  # Keras 2.7-2.10: OperatorNotAllowedInGraphError; 2.11 too
        if not getattr(model, "built", False) or _graph_network(model):
            raise
        layer_types = _distribution_layer_types()
        layers = sorted({type(m).__name__ for m in _submodules(model)
                         if isinstance(m, layer_types)})
        if not layers:  # no TFP distribution layer in it: Keras's own error, as it was
            raise
        raise TypeError(
            f"tfp_picklefix: this Keras pickles and copies a model by writing it as a "
            f"SavedModel (Keras 2.7-2.10) or in its first .keras format (Keras 2.11), and "
            f"neither holds TFP's {', '.join(layers)} in a subclassed model such as "
            f"{type(model).__name__} ({type(error).__name__}: {error}). Build the model "
            f"with the Functional API or Sequential: those the package writes in Keras's "
            f"HDF5 format instead (F17); a subclassed model it cannot.") from error


def model_reduce(self: Any) -> Any:
    """``__reduce__`` for Keras 2.7-2.11's ``Model`` (F17): a model holding a TFP
    distribution layer is written as Keras's ``load_model`` of its HDF5 file, after
    ``tfp.layers`` is imported; other models as Keras writes them."""
    written = _hdf5(self)
    if written is None:
        with _explained(self):
            return _original(_owner(self) or type(self), "__reduce__")(self)
    return _reduction(written)


def _reduction(written: _Written) -> Any:
    """The reduction of a model that :func:`_hdf5` wrote: import ``tfp.layers``, then
    Keras's ``load_model`` of the HDF5 file in memory (given the user's functions that
    the file names as its ``custom_objects``, where there are any)."""
    load_model, data, package, functions = written
    import importlib
    import io
    import operator

    import h5py

    file = _Call((h5py.File, (_Call((io.BytesIO, (data,))), "r")))
    steps = (_Call((importlib.import_module, (package,))),
             _Call((load_model, (file, functions) if functions else (file,))))
    return operator.itemgetter(1), (steps,)


def model_reduce_ex(self: Any, protocol: int) -> Any:
    """``__reduce_ex__`` for the ``Model`` of TF 2.5's Keras and Keras 2.6 (F17;
    ``copy.deepcopy`` uses it too): a model holding a TFP distribution layer, or a
    variational one (:func:`_holds_tfp_layer`), is written as :func:`model_reduce`
    writes it; other models as Python does without it."""
    written = _hdf5(self, _holds_tfp_layer)
    if written is None:
        return object.__reduce_ex__(self, protocol)
    return _reduction(written)


def model_copy(self: Any) -> Any:
    """``__copy__`` for the ``Model`` of TF 2.5's Keras and Keras 2.6 (F17): a model
    holding a TFP distribution layer is copied through its HDF5 file, as Keras 2.7-2.11
    copy a model (their ``__copy__`` is their deep copy); other models as Python copies
    them without it."""
    written = _hdf5(self)
    if written is None:
        import copy

        return copy._reconstruct(self, None, *object.__reduce_ex__(self, 4))
    load_model, data, _, functions = written
    return _load(load_model, data, functions)


def model_deepcopy(self: Any, memo: Dict[int, Any]) -> Any:
    """``__deepcopy__`` for the same ``Model`` (Keras's ``__copy__`` calls it too): a
    model holding a TFP distribution layer is copied through its HDF5 file."""
    written = _hdf5(self)
    if written is None:
        with _explained(self):
            return _original(_owner(self) or type(self), "__deepcopy__")(self, memo)
    load_model, data, _, functions = written
    new = _load(load_model, data, functions)
    memo[id(self)] = new
    return new


def plan(prefix: str) -> List[Tuple[Any, Any, Any]]:
    """F17's steps for the TF substrate whose modules start with ``prefix``: Keras's
    ``Model.__reduce__`` and ``__deepcopy__``, where Keras writes a model in a format
    that cannot hold TFP's distribution layers to pickle or copy it."""
    from ._keras_layers import _keras_of

    keras = _keras_of(sys.modules.get(f"{prefix}.{_LAYERS}"))
    model_cls = getattr(keras, "Model", None)
    if not isinstance(model_cls, type):
        return []
    load_model = python_pickles(model_cls)
    if load_model is not None:
        _LOADERS[model_cls] = load_model
        return [(model_cls, "__reduce_ex__", model_reduce_ex), (model_cls, "__copy__", model_copy)]
    for klass in model_cls.__mro__:  # tf.keras.Model is Keras's training.Model
        if "__reduce__" in vars(klass) and module_name(klass).split(".")[0] == "keras":
            model_cls = klass
            break
    else:
        return []
    load_model = hdf5_loader(model_cls)
    if load_model is None or _original(model_cls, "__deepcopy__") is None:
        return []
    _LOADERS[model_cls] = load_model
    return [(model_cls, "__reduce__", model_reduce), (model_cls, "__deepcopy__", model_deepcopy)]
