"""F15, F16, F18, F21, F22: ``tfp.layers`` layers Keras cannot make again from a config.

Keras pickles, copies, deep-copies and saves a model through each layer's
``get_config`` and its registry of serializable classes (``get_custom_objects()``).
TFP registers some of its distribution layers and gives them a config of their own
(``IndependentNormal``, ``MixtureNormal``, ...). Others got neither
(``MultivariateNormalTriL``, ``OneHotCategorical``, ``CategoricalMixtureOfOneHotCategorical``,
``MixtureSameFamily`` in TFP 0.25): their config is ``DistributionLambda``'s, which omits
their constructor's arguments, and on load Keras cannot find the class by its name, so
``pickle``, ``copy``, ``deepcopy`` and ``load_model`` of any model holding one fail
(``The added layer must be an instance of class Layer. Received: layer=... of type
<class 'str'>``).

Which classes, by feature: a ``DistributionLambda`` subclass without a config of its
own whose ``__init__`` hands ``DistributionLambda`` a lambda over every one of its
named arguments (so that the arguments can be read back from the lambda's closure).
Such a class gets the config its constructor takes (its arguments and Keras's base
layer config: no pickled function, so ``load_model`` works in Keras's safe mode), a
``from_config`` that calls the constructor with it, and its entry in Keras's registry,
under its class name as TFP registers the others. A layer whose config is Keras's own
(its constructor's arguments, recorded by Keras: ``VariableLayer``) lacks that entry,
and gets it; Keras records them only when each is a plain value (tf-keras, Keras
2.11-2.15: not ``dtype=tf.float64`` nor an initializer object, as in TFP's own
example), and never on Keras <= 2.10 and TF 2.5's Keras, so ``VariableLayer`` also gets
a config of its own, read from the layer (its variable's shape and dtype, and the
Keras objects it keeps, written as Keras writes a ``Dense``'s). ``weight_norm.WeightNorm``,
whose config is Keras's ``Wrapper``'s, lacks the entry too, and that config leaves out
its ``data_init``: it gets both. Nothing else changes: no weights,
no checkpoint keys, no ``forward`` path. A model written this way loads where this
package is imported (or where TFP gives the class a config and a registration itself).

F16: TFP's variational layers (``DenseFlipout``, ``Conv2DReparameterization``, ...) have
a config and a ``from_config``, but no entry in the registry, and their config writes
each function (posterior, prior, divergence) as Keras writes a Lambda's: bytecode and
its closure's values, which Keras writes as dicts when they are functions themselves
(TFP's default posterior is a closure over two), so the functions cannot be read back
(``'dict' object is not callable``). They get the registry entry, and a config that
writes the functions with TFP's own cloudpickle helper for layer functions (the one
``DistributionLambda`` uses for ``make_distribution_fn``), read back by a ``from_config``
that is otherwise TFP's. Keras's safe mode refuses them, as it refuses a Lambda.
``DenseVariational``, whose arguments are user functions (its posterior's and prior's
makers), has no config of its own, and Keras makes none of such arguments: it gets one
(its functions written the same way, ``kl_weight`` and ``kl_use_exact`` read from the
closure of the KL penalty its constructor makes) and F16's ``from_config``.

F18: TFP's KL penalty towards a prior, ``KLDivergenceRegularizer``, given to a
distribution layer as its ``activity_regularizer`` (as TFP's VAE example does): TFP's
configs of ``DistributionLambda`` and its subclasses (and F15's) leave that argument out,
so a copy of such a model computed without its KL loss, and no error said so. They now
write it, as Keras writes a ``Dense``'s; the regularizer (a Keras regularizer without
a config) and ``KLDivergenceAddLoss`` (of whose prior Keras makes no config) get
configs of their constructor's arguments, the prior and the test points' function
pickled as F16's functions are, F16's ``from_config``, and their registry entries.

F21: ``VariationalGaussianProcess`` has no config of its own either, and
``DistributionLambda``'s pickles its distribution function, a lambda over the layer
itself, and with it the tensors of Keras's graph (``Cannot pickle Tensor``). It gets a
config of its constructor's arguments read from the layer (the user's kernel provider
written as Keras writes a layer, the initializers as Keras writes them, a user's mean
function as F16 writes functions), a ``from_config``, its registry entry and, where
Keras builds a layer from its config before the model calls it, a
``build_from_config`` that builds it once (TFP's ``build`` does not mark the layer
built). F22: ``AutoregressiveTransform`` hands ``DistributionLambda`` its own bound
method, so TFP's config pickles the layer too. Its config writes its network (TFP's
``AutoregressiveNetwork``) by cloudpickle, as F16 writes functions, through F10's
reduction (the masks it drew, at random too, its closures and weights); F16's
``from_config`` reads it back, and the class gets its registry entry.
"""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Tuple

from ._closures import in_keras, module_name as _module_name

_MODULE = "layers.distribution_layer"  # relative to the TF substrate's prefix
_SKIP = frozenset(("self", "convert_to_tensor_fn"))


def _lambda_code(cls: type) -> Any:
    """The code of the lambda that ``cls.__init__`` makes, or None."""
    init = vars(cls).get("__init__")
    code = getattr(init, "__code__", None)
    if code is None:
        return None
    lambdas = [c for c in code.co_consts if getattr(c, "co_name", None) == "<lambda>"]
    return lambdas[0] if len(lambdas) == 1 else None


def _parameters(cls: type) -> Optional[List[str]]:
    """The named parameters of ``cls.__init__`` that its config must give back."""
    import inspect  # not at import time: keeps `import tfp_picklefix` cheap

    try:
        parameters = list(inspect.signature(vars(cls)["__init__"]).parameters.values())
    except (KeyError, TypeError, ValueError):
        return None
    return [p.name for p in parameters if p.name not in _SKIP
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _distribution_lambda(cls: type) -> Any:
    for klass in cls.__mro__[1:]:
        if klass.__name__ == "DistributionLambda" and _module_name(klass).startswith(
                "tensorflow_probability."):
            return klass
    return None


def config_in_closure(cls: type) -> bool:
    """F15's cause: ``cls`` has no config of its own, and its constructor's arguments
    live only in the closure of the lambda it hands ``DistributionLambda``."""
    if _distribution_lambda(cls) is None or "get_config" in vars(cls):
        return False
    code = _lambda_code(cls)
    names = _parameters(cls)
    return code is not None and names is not None and set(names) <= set(code.co_freevars)


def _keras(cls: type) -> Any:
    """The Keras that TFP's layers use."""
    return _keras_of(_helpers(cls))


def _keras_of(module: Any) -> Any:
    """The Keras that TFP's ``distribution_layer`` uses: its ``tf_keras`` shim (TFP >=
    0.24: tf-keras or tf.keras), before that ``tf.keras``; None if neither is there."""
    keras = getattr(module, "tf_keras", None)
    if keras is None:
        keras = getattr(getattr(module, "tf", None), "keras", None)
    return keras


def _closure_values(fn: Any) -> Dict[str, Any]:
    """The values of ``fn``'s closure, by name (none for what is not a function)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    return dict(zip(code.co_freevars, [c.cell_contents for c in fn.__closure__ or ()]))


def layer_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for F15's classes: Keras's base layer config and the
    constructor's arguments, read from the closure of the layer's distribution
    function; a Keras layer among them (``MixtureSameFamily``'s component layer) is
    written as Keras writes a wrapped layer."""
    owner = _owner_of(type(self), "get_config", layer_get_config)
    keras = _keras(owner)
    values = _closure_values(self._make_distribution_fn)
    names = _parameters(owner) or ()
    if any(name not in values for name in names):
        # Not the lambda its constructor makes (a subclass's own): as without the package.
        return _distribution_lambda(owner).get_config(self)
    config = keras.layers.Layer.get_config(self)
    for name in names:
        value = values[name]
        config[name] = (keras.layers.serialize(value) if isinstance(value, keras.layers.Layer)
                        else value)
    config["convert_to_tensor_fn"] = _helpers(owner)._serialize(self._convert_to_tensor_fn)
    return _with_activity_regularizer(self, config, keras)


def _layer_from_config(cls: type, config: Dict[str, Any], custom_objects: Any = None) -> Any:
    """``from_config`` for F15's classes: the constructor, given its arguments back."""
    owner = _owner_of(cls, "get_config", layer_get_config)
    keras = _keras(owner)
    if "make_distribution_fn" in config:  # written by DistributionLambda's get_config
        return _distribution_lambda(owner).from_config.__func__(cls, config, custom_objects)
    config = dict(config)
    for name in _parameters(owner) or ():
        value = config.get(name)
        if isinstance(value, dict) and "class_name" in value and "config" in value:
            config[name] = keras.layers.deserialize(value, custom_objects=custom_objects)
    return cls(**config)


# One object, so that planning again finds it installed (``vars(cls)[...] is ...``).
LAYER_FROM_CONFIG = classmethod(_layer_from_config)

# F16: the variational layers' functions, written by TFP's own cloudpickle helper.
_CLOUDPICKLE = "cloudpickle"  # the function type that says so in the config


def functions_as_bytecode(cls: type) -> bool:
    """F16's cause: ``cls`` writes its functions (posteriors, priors, divergences) as
    Keras writes a Lambda's, as bytecode with its closure's values, which cannot carry
    a closure over other functions (TFP's default posterior is one), and reads them
    back so."""
    get_config = vars(cls).get("get_config")
    from_config = getattr(vars(cls).get("from_config"), "__func__", None)
    return (getattr(get_config, "__code__", None) is not None and from_config is not None
            and "serialize_function" in get_config.__code__.co_names
            and "deserialize_function" in from_config.__code__.co_names)


def _owner_of(cls: type, name: str, value: Any) -> type:
    """The class in ``cls``'s MRO that got ``value`` as ``name`` (``cls`` or a base)."""
    for klass in cls.__mro__:
        if vars(klass).get(name) is value:
            return klass
    return cls


def _function_keys(config: Dict[str, Any]) -> List[str]:
    return [key[:-len("_type")] for key in config
            if key.endswith("_type") and key[:-len("_type")] in config]


def _helpers(cls: type) -> Any:
    """TFP's ``distribution_layer``, for a class of ``tfp.layers`` (its Keras shim, and
    its helpers that write layer functions and ``convert_to_tensor_fn``)."""
    prefix = _module_name(cls).rsplit(".layers.", 1)[0]
    return sys.modules[f"{prefix}.{_MODULE}"]


def variational_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for F16's classes: TFP's own, with each function written by TFP's
    cloudpickle helper for layer functions (as ``DistributionLambda`` writes its
    ``make_distribution_fn``) under the function type ``"cloudpickle"``."""
    from ._record import RECORD

    owner = _owner_of(type(self), "get_config", variational_get_config)
    config = RECORD.get_original(owner, "get_config")(self)
    helpers = _helpers(owner)
    for key in _function_keys(config):
        function = getattr(self, key, None)
        if config[key] is not None and callable(function):
            config[key] = helpers._serialize_function(function)
            config[key + "_type"] = _CLOUDPICKLE
    return config


def _in_safe_mode(cls: type) -> bool:
    """Whether Keras loads in its safe mode now (``load_model``'s default), where it
    refuses to run code from a file; False where this Keras has no such mode."""
    for klass in cls.__mro__:
        root = _module_name(klass).split(".")[0]
        if root in ("tf_keras", "keras"):
            lib = sys.modules.get(f"{root}.src.saving.serialization_lib")
            return bool(lib is not None and lib.in_safe_mode())
    return False


def _refused_in_safe_mode(cls: type, keys: List[str]) -> None:
    """Keras's safe mode refuses what a config of ``cls`` wrote with cloudpickle under
    ``keys`` (none: nothing to refuse), as Keras refuses a Lambda's function."""
    if keys and _in_safe_mode(cls):
        raise ValueError(
            f"Requested the deserialization of a {cls.__name__}'s functions or objects written "
            f"with cloudpickle ({', '.join(keys)}). This carries a potential risk "
            "of arbitrary code execution and thus it is disallowed by default. If you "
            "trust the source of the saved model, you can pass `safe_mode=False` to the "
            "loading function in order to allow it.")


def _variational_from_config(cls: type, config: Dict[str, Any]) -> Any:
    """``from_config`` for F16's classes: TFP's own, for functions written by TFP's
    cloudpickle helper too; refused in Keras's safe mode, as Keras refuses a Lambda."""
    config = dict(config)
    _refused_in_safe_mode(cls, [key for key in _function_keys(config)
                                if config[key + "_type"] == _CLOUDPICKLE])
    # As TFP's own from_config: each function from its serial form, then the constructor.
    owner = _owner_of(cls, "from_config", VARIATIONAL_FROM_CONFIG)
    helpers = _helpers(owner)
    util = sys.modules[helpers.__name__.rsplit(".", 1)[0] + ".util"]
    for key in _function_keys(config):
        serial, kind = config[key], config.pop(key + "_type")
        if serial is None:
            continue
        config[key] = (helpers._deserialize_function(serial) if kind == _CLOUDPICKLE
                       else util.deserialize_function(serial, function_type=kind))
    return cls(**config)


VARIATIONAL_FROM_CONFIG = classmethod(_variational_from_config)


def keras_own_config(cls: type, keras: Any) -> bool:
    """Whether ``cls`` (a Keras layer) takes its config from Keras itself (the
    constructor's arguments, which Keras records when they can be written), so that
    only its entry in the registry is missing (``VariableLayer``)."""
    layer = keras.layers.Layer
    if not (isinstance(cls, type) and issubclass(cls, layer)):
        return False
    for klass in cls.__mro__:
        if klass is layer:
            return True
        if "get_config" in vars(klass) or "from_config" in vars(klass):
            return False
    return False


# VariableLayer's constructor: its variable's shape and dtype, then what it keeps as
# attributes of the same names (Keras objects, written as Keras writes a Dense's).
_VARIABLE_LAYER = ("shape", "dtype", "activation", "initializer", "regularizer", "constraint")
_KERAS_OBJECTS = {"activation": "activations", "initializer": "initializers",
                  "regularizer": "regularizers", "constraint": "constraints"}


def config_from_keras_arguments(cls: type, keras: Any) -> bool:
    """F15's cause for ``VariableLayer``: its config is Keras's own, which Keras makes
    of the constructor's arguments only when each is a plain value (tf-keras and Keras
    2.11-2.15: ``dtype=tf.float64``, an initializer object such as TFP's own
    ``BlockwiseInitializer`` raise "was created by passing non-serializable argument
    values") or never (Keras <= 2.10, TF 2.5's Keras: "has arguments [...] and
    therefore must override get_config()"); while its constructor takes exactly
    ``_VARIABLE_LAYER`` and keeps all but the first two as attributes, its variable
    holding those two."""
    return keras_own_config(cls, keras) and _constructor_is(
        cls, _VARIABLE_LAYER, ("_var", "add_weight") + tuple(_KERAS_OBJECTS))


def _constructor_is(cls: type, parameters: Tuple[str, ...], names: Tuple[str, ...]) -> bool:
    """``cls.__init__`` takes exactly the named ``parameters`` and its code names each of
    ``names`` (the attributes it keeps, the functions it calls)."""
    code = getattr(vars(cls).get("__init__"), "__code__", None)
    return (code is not None and tuple(_parameters(cls) or ()) == parameters
            and all(name in code.co_names for name in names))


def variable_layer_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for ``VariableLayer``: Keras's base layer config and the
    constructor's arguments, read from the layer (its variable's shape and dtype, the
    Keras objects it keeps), each written as Keras writes it for its own layers, so
    that Keras's ``from_config`` (the constructor) makes the same layer again, with or
    without the package."""
    owner = _owner_of(type(self), "get_config", variable_layer_get_config)
    keras = _keras(owner)
    # Keras's base config (name, trainable, input shape): a get_config of the class's
    # own, as a subclass that overrides it gets. Its "dtype" (the layer's policy) is
    # not VariableLayer's, which is the variable's.
    config = keras.layers.Layer.get_config(self)
    variable = self._var
    config["shape"] = [int(size) for size in variable.shape]
    config["dtype"] = variable.dtype.name
    for name, module in _KERAS_OBJECTS.items():
        value = getattr(self, name)
        config[name] = None if value is None else getattr(keras, module).serialize(value)
    return config


# DenseVariational's constructor: user functions that make its posterior and prior
# (Keras models), and a KL penalty it keeps only as a closure (weight, exact or not).
_DENSE_VARIATIONAL = ("units", "make_posterior_fn", "make_prior_fn", "kl_weight",
                      "kl_use_exact", "activation", "use_bias", "activity_regularizer")
_DENSE_VARIATIONAL_KEEPS = ("_make_posterior_fn", "_make_prior_fn", "_kl_divergence_fn")


def functions_as_arguments(cls: type, keras: Any) -> bool:
    """F16's cause for ``DenseVariational``: its config is Keras's own, which Keras
    makes of plain values only and its arguments are user functions ("was created by
    passing non-serializable argument values"; Keras <= 2.10: "has arguments [...] and
    therefore must override get_config()"); while its constructor takes exactly
    ``_DENSE_VARIATIONAL`` and keeps ``_DENSE_VARIATIONAL_KEEPS``."""
    return keras_own_config(cls, keras) and _constructor_is(
        cls, _DENSE_VARIATIONAL, _DENSE_VARIATIONAL_KEEPS)


def _plain_number(value: Any) -> Any:
    """A scalar weight (NumPy, a tensor) as a Python number, for Keras's JSON."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    try:
        import numpy as np

        array = np.asarray(value)
    except Exception:
        return value
    return array.item() if array.shape == () and array.dtype.kind in "biuf" else value


def dense_variational_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for ``DenseVariational``: Keras's base layer config and the
    constructor's arguments, its functions written by TFP's cloudpickle helper for
    layer functions (as F16 writes the other variational layers'), the KL weight and
    whether it is exact read from the closure of the penalty its constructor makes;
    read back by F16's ``from_config`` (refused in Keras's safe mode)."""
    owner = _owner_of(type(self), "get_config", dense_variational_get_config)
    keras = _keras(owner)
    helpers = _helpers(owner)
    cells = _closure_values(self._kl_divergence_fn)
    if not {"kl_divergence_fn", "weight"} <= set(cells):
        raise NotImplementedError(
            f"Layer {type(self).__name__}'s KL penalty is not the one its constructor makes "
            "(kl_weight and kl_use_exact cannot be read back): override `get_config()`.")
    config = keras.layers.Layer.get_config(self)
    config["units"] = self.units
    for key, function in (("make_posterior_fn", self._make_posterior_fn),
                          ("make_prior_fn", self._make_prior_fn)):
        config[key] = helpers._serialize_function(function)
        config[key + "_type"] = _CLOUDPICKLE
    config["kl_weight"] = _plain_number(cells["weight"])
    # Exact: TFP's kl_divergence itself; otherwise a function made in the penalty's maker.
    config["kl_use_exact"] = "<locals>" not in getattr(
        cells["kl_divergence_fn"], "__qualname__", "<locals>")
    config["activation"] = keras.activations.serialize(self.activation)
    config["use_bias"] = self.use_bias
    regularizer = self.activity_regularizer
    config["activity_regularizer"] = (None if regularizer is None
                                      else keras.regularizers.serialize(regularizer))
    return config


# The KL penalty of tfp.layers: KLDivergenceRegularizer's constructor (which it keeps as
# attributes of the same names, with a leading underscore), and KLDivergenceAddLoss's,
# which hands its arguments to such a regularizer (its ``_regularizer``).
_KL_ARGUMENTS = ("distribution_b", "use_exact_kl", "test_points_reduce_axis",
                 "test_points_fn", "weight")
_KL_OBJECTS = ("distribution_b", "test_points_fn")  # written by TFP's cloudpickle helper


def kl_regularizer_without_config(cls: type, keras: Any) -> bool:
    """F18's cause for ``KLDivergenceRegularizer``: a Keras regularizer without a config
    (Keras's base one raises ``NotImplementedError``), so that neither a layer given it
    as ``activity_regularizer`` nor ``KLDivergenceAddLoss`` (which holds one) can be
    written; while its constructor takes exactly ``_KL_ARGUMENTS`` and keeps them."""
    regularizer = getattr(getattr(keras, "regularizers", None), "Regularizer", None)
    if not (isinstance(regularizer, type) and isinstance(cls, type)
            and issubclass(cls, regularizer)):
        return False
    for klass in cls.__mro__:
        if klass is regularizer:
            break
        if "get_config" in vars(klass) or "from_config" in vars(klass):
            return False
    return _constructor_is(cls, _KL_ARGUMENTS, tuple("_" + name for name in _KL_ARGUMENTS))


def kl_add_loss_without_config(cls: type, keras: Any) -> bool:
    """F18's cause for ``KLDivergenceAddLoss``: its config is Keras's own, which Keras
    makes of plain values only (its prior distribution is none); while its constructor
    takes exactly ``_KL_ARGUMENTS`` and keeps a regularizer of them."""
    return keras_own_config(cls, keras) and _constructor_is(cls, _KL_ARGUMENTS, ("_regularizer",))


def _kl_config(regularizer: Any, helpers: Any) -> Dict[str, Any]:
    """The constructor's arguments of a ``KLDivergenceRegularizer``, read from it: the
    prior distribution and the test points' function written as TFP's cloudpickle
    helper for layer functions writes one (:func:`_serialize_object`), under
    ``<key>_type``, as F16 writes functions."""
    config: Dict[str, Any] = {}
    for name in _KL_ARGUMENTS:
        value = getattr(regularizer, "_" + name)
        if name in _KL_OBJECTS:
            config[name] = _serialize_object(value, helpers)
            config[name + "_type"] = _CLOUDPICKLE
        elif name == "weight":
            config[name] = _plain_number(value)
        elif name == "test_points_reduce_axis" and isinstance(value, tuple):
            config[name] = list(value)  # as JSON reads it back; TFP takes either
        else:
            config[name] = value
    return config


def _serialize_object(value: Any, helpers: Any) -> str:
    """``value`` as TFP's helper for layer functions writes one (base64 of a pickle,
    which its ``_deserialize_function`` reads), pickled by cloudpickle itself: TFP's
    pickler writes each tensor as a NumPy array, and a TFP 0.10 distribution made
    again of arrays fails (``'tuple' object has no attribute 'ndims'``). Where
    cloudpickle cannot (a graph tensor), TFP's pickler (a graph tensor of known value)."""
    import codecs

    try:
        import cloudpickle  # TFP's own dependency

        raw = cloudpickle.dumps(value)
    except Exception:
        return helpers._serialize_function(value)
    return codecs.encode(raw, "base64").decode("ascii")


def kl_regularizer_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for ``KLDivergenceRegularizer`` (F18): its constructor's
    arguments (:func:`_kl_config`), read back by F16's ``from_config``."""
    owner = _owner_of(type(self), "get_config", kl_regularizer_get_config)
    return _kl_config(self, _helpers(owner))


def kl_add_loss_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for ``KLDivergenceAddLoss`` (F18): Keras's base layer config and
    its constructor's arguments, read from the regularizer it holds."""
    owner = _owner_of(type(self), "get_config", kl_add_loss_get_config)
    config = _keras(owner).layers.Layer.get_config(self)
    config.update(_kl_config(self._regularizer, _helpers(owner)))
    return config


def distribution_lambda_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for ``DistributionLambda`` (and so for every TFP layer whose own
    calls it): TFP's, with the layer's ``activity_regularizer`` where it has one, as
    Keras writes a ``Dense``'s (F18: TFP's left it out, so a copy of a layer given
    ``KLDivergenceRegularizer`` lost its KL loss without a word)."""
    from ._record import RECORD

    owner = _owner_of(type(self), "get_config", distribution_lambda_get_config)
    config = RECORD.get_original(owner, "get_config")(self)
    return _with_activity_regularizer(self, config, _keras(owner))


def _with_activity_regularizer(self: Any, config: Dict[str, Any], keras: Any) -> Dict[str, Any]:
    regularizer = getattr(self, "activity_regularizer", None)
    if regularizer is not None and config.get("activity_regularizer") is None:
        config["activity_regularizer"] = keras.regularizers.serialize(regularizer)
    return config


def arguments_left_out(cls: type, keras: Any) -> List[str]:
    """F15's cause for ``WeightNorm``: a layer without a config of its own whose config
    is a Keras class's (``Wrapper``'s: the wrapped layer), which leaves out the
    constructor's other named arguments (``data_init``), each kept as an attribute of
    its name; those names (none where ``cls`` is not such a layer)."""
    layer = keras.layers.Layer
    if not (isinstance(cls, type) and issubclass(cls, layer)):
        return []
    base = next((klass for klass in cls.__mro__ if "get_config" in vars(klass)), None)
    if base is None or base is layer or not in_keras(base):
        return []
    init = vars(cls).get("__init__")
    code = getattr(init, "__code__", None)
    names = _parameters(cls)
    if code is None or names is None:
        return []
    import inspect

    try:
        taken = set(inspect.signature(base.__init__).parameters)
    except (TypeError, ValueError):
        return []
    left_out = [name for name in names if name not in taken]
    return left_out if left_out and all(n in code.co_names for n in left_out) else []


def keras_config_with_arguments(self: Any) -> Dict[str, Any]:
    """``get_config`` for F15's ``WeightNorm``: its Keras class's config (``Wrapper``'s),
    and the constructor's arguments that config leaves out, read from the layer."""
    owner = _owner_of(type(self), "get_config", keras_config_with_arguments)
    config = super(owner, self).get_config()
    for name in _LEFT_OUT.get(owner, ()):
        config[name] = getattr(self, name)
    return config


# The arguments left out, by class, as planned (once patched, the class has a config
# of its own, and arguments_left_out no longer sees the cause).
_LEFT_OUT: Dict[type, List[str]] = {}


def _kl_get_config(cls: type, keras: Any) -> Any:
    """F18's ``get_config`` for ``cls`` (patched already, or showing F18's cause), or None."""
    for get_config, without in ((kl_regularizer_get_config, kl_regularizer_without_config),
                                (kl_add_loss_get_config, kl_add_loss_without_config)):
        if vars(cls).get("get_config") is get_config or without(cls, keras):
            return get_config
    return None


# F21: VariationalGaussianProcess's constructor, whose distribution function is a lambda
# over the layer alone; it keeps each argument but ``name`` as ``_<argument>``.
_VGP = ("num_inducing_points", "kernel_provider", "event_shape",
        "inducing_index_points_initializer",
        "unconstrained_observation_noise_variance_initializer",
        "variational_inducing_observations_scale_initializer", "mean_fn", "jitter", "name")
_VGP_INITIALIZERS = _VGP[3:6]


def config_in_layer(cls: type) -> bool:
    """F21's cause (``VariationalGaussianProcess``): a ``DistributionLambda`` without a
    config of its own whose constructor hands ``DistributionLambda`` a lambda over the
    layer alone, so that TFP's config pickles the layer itself, with the tensors of
    Keras's graph ("Cannot pickle Tensor"); while its constructor takes exactly
    ``_VGP`` and keeps all but ``name``."""
    if _distribution_lambda(cls) is None or "get_config" in vars(cls):
        return False
    code = _lambda_code(cls)
    return (code is not None and code.co_freevars == ("self",)
            and _constructor_is(cls, _VGP, tuple("_" + name for name in _VGP[:-1])))


def _made_in_build(owner: type, layer: Any, function: Any) -> bool:
    """``function`` is the one ``owner.build`` makes over ``layer`` (the default mean
    function over the layer's own ``mean`` weight), which building the layer again
    makes again."""
    build = getattr(vars(owner).get("build"), "__code__", None)
    code = getattr(function, "__code__", None)
    return (build is not None and code is not None and code in build.co_consts
            and _closure_values(function).get("self") is layer)


def vgp_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for F21's class: Keras's base layer config and the constructor's
    arguments, read from the layer: the kernel provider as Keras writes a layer (a
    user's layer: Keras finds its class as it finds any custom layer's), the
    initializers as Keras writes them, a user's mean function by TFP's cloudpickle
    helper (as F16 writes functions; the default one, made by ``build``, as None)."""
    owner = _owner_of(type(self), "get_config", vgp_get_config)
    if _own_constructor_below(self, owner):
        return _distribution_lambda(owner).get_config(self)  # as without the package
    keras = _keras(owner)
    helpers = _helpers(owner)
    config = keras.layers.Layer.get_config(self)
    config["num_inducing_points"] = int(self._num_inducing_points)
    config["kernel_provider"] = keras.layers.serialize(self._kernel_provider)
    config["event_shape"] = [int(size) for size in self._event_shape]
    for name in _VGP_INITIALIZERS:
        value = getattr(self, "_" + name)
        config[name] = None if value is None else _json_values(
            keras.initializers.serialize(value))
    mean_fn = self._mean_fn
    if mean_fn is None or _made_in_build(owner, self, mean_fn):
        config["mean_fn"] = None
    else:
        config["mean_fn"] = helpers._serialize_function(mean_fn)
        config["mean_fn_type"] = _CLOUDPICKLE
    config["jitter"] = _plain_number(self._jitter)
    config["convert_to_tensor_fn"] = helpers._serialize(self._convert_to_tensor_fn)
    return _with_activity_regularizer(self, config, keras)


def _vgp_from_config(cls: type, config: Dict[str, Any], custom_objects: Any = None) -> Any:
    """``from_config`` for F21's class: the constructor, given its arguments back; a
    user's mean function refused in Keras's safe mode, as F16's functions are. Then the
    layer's name (TFP <= 0.23's constructor does not hand it to Keras), whether it
    trains, and its activity regularizer, as Keras's own ``from_config`` gives them."""
    owner = _owner_of(cls, "from_config", VGP_FROM_CONFIG)
    if "make_distribution_fn" in config:  # written by DistributionLambda's get_config
        return _distribution_lambda(owner).from_config.__func__(cls, config, custom_objects)
    keras = _keras(owner)
    helpers = _helpers(owner)
    _refused_in_safe_mode(cls, ["mean_fn"] if config.get("mean_fn_type") == _CLOUDPICKLE else [])
    arguments = {name: config[name] for name in _VGP if name in config}
    arguments["kernel_provider"] = keras.layers.deserialize(
        _by_registered_name(config["kernel_provider"]), custom_objects=custom_objects)
    for name in _VGP_INITIALIZERS:
        if arguments.get(name) is not None:
            arguments[name] = keras.initializers.deserialize(
                arguments[name], custom_objects=custom_objects)
    if config.get("mean_fn_type") == _CLOUDPICKLE:
        arguments["mean_fn"] = helpers._deserialize_function(config["mean_fn"])
    if "convert_to_tensor_fn" in config:
        arguments["convert_to_tensor_fn"] = config["convert_to_tensor_fn"]
    layer = cls(**arguments)
    if config.get("name") is not None and layer.name != config["name"]:
        layer._name = config["name"]
    layer.trainable = config.get("trainable", True)
    if config.get("activity_regularizer") is not None:
        layer.activity_regularizer = keras.regularizers.deserialize(
            config["activity_regularizer"], custom_objects=custom_objects)
    return layer


VGP_FROM_CONFIG = classmethod(_vgp_from_config)


def _by_registered_name(config: Any) -> Any:
    """A layer's config as Keras writes it (tf-keras: its class name, module and
    registered name), with the registered name as its class name: Keras's HDF5 loading
    reads nested configs by class name alone, and finds a user's registered layer
    (``register_keras_serializable(package=...)``) only by its registered name."""
    if isinstance(config, dict) and isinstance(config.get("registered_name"), str) \
            and config["registered_name"]:
        return dict(config, class_name=config["registered_name"])
    return config


def _json_values(config: Any) -> Any:
    """An initializer's config with its arrays as lists (a ``Constant`` of an array: the
    inducing points', TFP's default variational scale's), as Keras's JSON writes them
    in HDF5 and Keras <= 2.12's formats, where the copy's config then holds the list;
    tf-keras writes them as ``{"class_name": "__numpy__", ...}``, which its HDF5 loading
    cannot read (``Unknown object: '__numpy__'``). A ``Constant`` of a list makes the
    same values."""
    if isinstance(config, (list, tuple)):
        return [_json_values(value) for value in config]
    if isinstance(config, dict):
        if config.get("class_name") == "__numpy__" and isinstance(config.get("config"), dict):
            return _json_values(config["config"]["value"])
        return {key: _json_values(value) for key, value in config.items()}
    tolist = getattr(config, "tolist", None)  # a NumPy array or scalar
    return tolist() if callable(tolist) else config


def vgp_build_from_config(self: Any, config: Dict[str, Any]) -> None:
    """``build_from_config`` for F21's class (Keras >= 2.13, which builds a layer read back
    from its config before its model calls it): TFP's ``build`` of the recorded input
    shape, in the layer's name scope as its first call builds it (the same weight
    names), then the layer marked built, as Keras marks it after a call's build. With
    Keras's own, the layer stayed unbuilt (TFP's ``build`` does not mark it), the
    model's first call built it again, and the copy had its weights twice (``expected 6
    variables, but received 5 variables during loading``)."""
    if self.built or config.get("input_shape") is None:
        return
    owner = _owner_of(type(self), "build_from_config", vgp_build_from_config)
    tf = _helpers(owner).tf
    # As a TensorShape, which TFP's build takes (Keras 2.15 passes the list it read).
    shape = tf.TensorShape(config["input_shape"])
    scope = getattr(self, "_name_scope", None)
    with tf.name_scope(scope() if callable(scope) else self.name):
        self.build(shape)
    _keras(owner).layers.Layer.build(self, shape)


def config_in_bound_method(cls: type) -> bool:
    """F22's cause (``AutoregressiveTransform``): a ``DistributionLambda`` without a
    config of its own whose constructor hands ``DistributionLambda`` the layer's own
    bound method (``self._transform``), so that TFP's config pickles the layer itself
    (``NotImplementedError``, ``Cannot pickle Tensor``); while its constructor takes
    exactly ``made`` (TFP's ``AutoregressiveNetwork``) and keeps it as ``_made``."""
    if _distribution_lambda(cls) is None or "get_config" in vars(cls):
        return False
    return _lambda_code(cls) is None and _constructor_is(cls, ("made",), ("_made", "_transform"))


def _own_constructor_below(self: Any, owner: type) -> bool:
    """A subclass of ``owner`` with a constructor of its own: which arguments it takes
    is unknown here."""
    mro = type(self).__mro__
    return any("__init__" in vars(klass) for klass in mro[:mro.index(owner)])


def autoregressive_transform_get_config(self: Any) -> Dict[str, Any]:
    """``get_config`` for F22's class: Keras's base layer config and its network
    (``made``) pickled as F16 writes functions, by cloudpickle, with F10's reduction of
    TFP's ``AutoregressiveNetwork``: the same masks (also drawn at random), closures
    and weights; read back by F16's ``from_config`` (refused in Keras's safe mode)."""
    owner = _owner_of(type(self), "get_config", autoregressive_transform_get_config)
    if _own_constructor_below(self, owner):
        return _distribution_lambda(owner).get_config(self)  # as without the package
    keras = _keras(owner)
    config = keras.layers.Layer.get_config(self)
    config["made"] = _serialize_object(self._made, _helpers(owner))
    config["made_type"] = _CLOUDPICKLE
    return _with_activity_regularizer(self, config, keras)


def _tfp_distribution_lambda(cls: type) -> bool:
    """``cls`` is TFP's own ``DistributionLambda`` (with its ``get_config``)."""
    return (cls.__name__ == "DistributionLambda" and "get_config" in vars(cls)
            and _module_name(cls).startswith("tensorflow_probability."))


def plan(prefix: str) -> List[Tuple[Any, Any, Any]]:
    """The steps for F15, F16, F18, F21 and F22 in the TF substrate whose modules start
    with ``prefix``: ``get_config`` and ``from_config`` on each class whose arguments live
    in its lambda's closure (F15), in the layer its lambda is over (F21) or whose bound
    method it hands over (F22), or that writes its functions as bytecode (F16), and an
    entry in Keras's registry for the public ones and for the layers whose config is
    Keras's own (where the name is free, or already this class)."""
    module = sys.modules.get(f"{prefix}.{_MODULE}")
    keras = _keras_of(module)
    if keras is None:
        return []
    try:
        registry = keras.utils.get_custom_objects()
    except Exception:
        return []
    steps: List[Tuple[Any, Any, Any]] = []
    package = f"{prefix}.layers."
    for module_name, layers_module in sorted(sys.modules.items()):
        if layers_module is None or not module_name.startswith(package):
            continue
        for name, cls in sorted(vars(layers_module).items()):
            if not isinstance(cls, type) or cls.__module__ != module_name or cls.__name__ != name:
                continue
            if registry.get(name, cls) is not cls:
                continue  # the name stands for something else: leave the class as it is
            if _f15(cls):
                steps += [(cls, "get_config", layer_get_config),
                          (cls, "from_config", LAYER_FROM_CONFIG),
                          (registry, name, cls)]
                continue
            if vars(cls).get("get_config") is vgp_get_config or config_in_layer(cls):
                steps += [(cls, "get_config", vgp_get_config),
                          (cls, "from_config", VGP_FROM_CONFIG),
                          (registry, name, cls)]
                if (hasattr(keras.layers.Layer, "build_from_config")
                        and "build_from_config" not in vars(cls)
                        or vars(cls).get("build_from_config") is vgp_build_from_config):
                    steps.append((cls, "build_from_config", vgp_build_from_config))
                continue
            if (vars(cls).get("get_config") is autoregressive_transform_get_config
                    or config_in_bound_method(cls)):
                steps += [(cls, "get_config", autoregressive_transform_get_config),
                          (cls, "from_config", VARIATIONAL_FROM_CONFIG),
                          (registry, name, cls)]
                continue
            if (vars(cls).get("get_config") is variable_layer_get_config
                    or config_from_keras_arguments(cls, keras)):
                steps += [(cls, "get_config", variable_layer_get_config),
                          (registry, name, cls)]
                continue
            if (vars(cls).get("get_config") is dense_variational_get_config
                    or functions_as_arguments(cls, keras)):
                steps += [(cls, "get_config", dense_variational_get_config),
                          (cls, "from_config", VARIATIONAL_FROM_CONFIG),
                          (registry, name, cls)]
                continue
            left_out = _LEFT_OUT.get(cls) if vars(cls).get(
                "get_config") is keras_config_with_arguments else arguments_left_out(cls, keras)
            if left_out:
                _LEFT_OUT[cls] = left_out
                steps += [(cls, "get_config", keras_config_with_arguments),
                          (registry, name, cls)]
                continue
            if _tfp_distribution_lambda(cls):
                steps.append((cls, "get_config", distribution_lambda_get_config))
            kl_get_config = _kl_get_config(cls, keras)
            if kl_get_config is not None:
                steps += [(cls, "get_config", kl_get_config),
                          (cls, "from_config", VARIATIONAL_FROM_CONFIG),
                          (registry, name, cls)]
                continue
            if _f16(cls):
                steps += [(cls, "get_config", variational_get_config),
                          (cls, "from_config", VARIATIONAL_FROM_CONFIG)]
            if name.startswith("_"):
                continue  # a private base: Keras never meets it by name
            if keras_own_config(cls, keras) or any(_f16(klass) for klass in cls.__mro__):
                steps.append((registry, name, cls))
    return steps


def _f15(cls: type) -> bool:
    """Patched for F15 already (planning again keeps it), or showing F15's cause."""
    return vars(cls).get("get_config") is layer_get_config or config_in_closure(cls)


def _f16(cls: type) -> bool:
    """Patched for F16 already, or showing F16's cause."""
    return vars(cls).get("get_config") is variational_get_config or functions_as_bytecode(cls)
