"""Feature detection: which cache era a TFP substrate is in, decided by what its classes do.

Versions are only *reported*; decisions come from the code objects themselves,
because the substrates carry their own copies of these classes and point releases
(e.g. 0.11.1) did not always carry the fixes their numbers suggest.
"""
from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional, Tuple

DICT = "dict"          # TFP 0.7-0.10: per-instance ``_from_x``/``_from_y`` weak-key dicts
INSTANCE = "instance"  # TFP 0.11: per-instance ``_cache = self._setup_cache()``
GLOBAL = "global"      # TFP >= 0.12: class-level ``Bijector._cache``
UNKNOWN = "unknown"


class Substrate(NamedTuple):
    name: str     # "tf", "numpy", "jax"
    module: str   # the module that defines ``Bijector`` for it


# Every module that defines a substrate's Bijector base class, across TFP's layouts.
SUBSTRATES: Tuple[Substrate, ...] = (
    Substrate("tf", "tensorflow_probability.python.bijectors.bijector"),
    # TFP >= 0.12: generated, lazily loaded packages.
    Substrate("numpy", "tensorflow_probability.substrates.numpy.bijectors.bijector"),
    Substrate("jax", "tensorflow_probability.substrates.jax.bijectors.bijector"),
    # TFP 0.8-0.11: reached as tensorflow_probability.python.experimental.substrates.*
    Substrate("numpy", "tensorflow_probability.python.bijectors._numpy.bijector"),
    Substrate("jax", "tensorflow_probability.python.bijectors._jax.bijector"),
)


# Modules that define further Bijector subclasses with a class-level cache of their
# own (global era), by substrate module: when one is imported, that substrate is
# patched again so that the new class gets the same treatment.
_PREFIXES = {
    "tensorflow_probability.python.bijectors.bijector": "tensorflow_probability.python",
    "tensorflow_probability.substrates.numpy.bijectors.bijector": "tensorflow_probability.substrates.numpy",
    "tensorflow_probability.substrates.jax.bijectors.bijector": "tensorflow_probability.substrates.jax",
}
# Also the modules whose classes get the pickling reducers (see ``_reducers.MODULES``;
# listed here so that importing this module stays free of the reducers' imports).
_REDUCER_MODULES = ("distributions.distribution", "math.psd_kernels.positive_semidefinite_kernel",
                    "internal.auto_composite_tensor", "util.deferred_tensor",
                    "internal.reparameterization", "internal.parameter_properties",
                    "bijectors.masked_autoregressive", "bijectors.glow", "distributions.pixel_cnn",
                    "mcmc.kernel", "glm.family", "sts.structural_time_series", "experimental.nn.layers",
                    "experimental.linalg.linear_operator_psd_kernel", "math.ode.base",
                    "experimental.util.jit_public_methods", "experimental.util.special_methods",
                    "layers.distribution_layer", "experimental.mcmc.reducer",
                    "experimental.mcmc.kernel_builder", "optimizer.variational_sgd", "optimizer.sgld")
# And TFP's packages that load lazily (``tfp.sts``, ``tfp.experimental``, ...): TFP deletes
# their submodules' names from them once they are imported, which F5 gives back.
_LATE_PACKAGES = ("debugging", "distributions", "experimental", "glm", "layers", "math", "mcmc",
                  "monte_carlo", "optimizer", "random", "stats", "sts", "util", "vi")
# The substrates of TFP 0.8-0.11 other than TF: each TF package has its generated copy
# in a subpackage (``distributions/_numpy/distribution.py``), by Bijector module.
_LEGACY_COPIES = {
    "tensorflow_probability.python.bijectors._numpy.bijector": "_numpy",
    "tensorflow_probability.python.bijectors._jax.bijector": "_jax",
}


def prefix_of(bijector_module: str) -> str:
    """The package below which a substrate's modules sit (for a legacy NumPy/JAX
    substrate, TF's: its copies sit beside TF's modules)."""
    return bijector_module.rsplit(".bijectors.", 1)[0]


def legacy_copy(bijector_module: str) -> bool:
    """Whether ``bijector_module`` is that of a TFP 0.8-0.11 NumPy/JAX substrate."""
    return bijector_module in _LEGACY_COPIES


def module_of(bijector_module: str, relative: str) -> str:
    """The name of module ``relative`` (``"distributions.distribution"``) in the substrate
    whose Bijector module is ``bijector_module``: below the substrate's prefix, or, in a
    legacy NumPy/JAX substrate, in its copy beside the TF module."""
    copy = _LEGACY_COPIES.get(bijector_module)
    if copy is None:
        return prefix_of(bijector_module) + "." + relative
    package, _, name = relative.rpartition(".")
    return f"tensorflow_probability.python.{package}.{copy}.{name}"


EXTRA_MODULES = {
    module: (prefix + ".bijectors.ffjord", prefix + ".experimental.bijectors.highway_flow")
    + tuple(f"{prefix}.{name}" for name in _REDUCER_MODULES + _LATE_PACKAGES)
    for module, prefix in _PREFIXES.items()
}
# GPflow's module whose likelihood F20 patches (GPflow imports TFP first): the TF
# substrate is planned again when it is imported.
GPFLOW_LIKELIHOODS = "gpflow.likelihoods.multilatent"
EXTRA_MODULES[SUBSTRATES[0].module] += (GPFLOW_LIKELIHOODS,)
# The legacy NumPy substrate: only its reducers' modules (it loads nothing lazily).
_LEGACY_NUMPY = "tensorflow_probability.python.bijectors._numpy.bijector"
EXTRA_MODULES[_LEGACY_NUMPY] = tuple(module_of(_LEGACY_NUMPY, name) for name in _REDUCER_MODULES)


# Legacy-era substrates that get the pickling reducers: TF's, whose modules sit where
# they do in later releases, and the NumPy substrate of TFP 0.8-0.11, through
# ``module_of``. (Not the legacy JAX substrate: no stack here runs it.)
REDUCED_LEGACY = ("tensorflow_probability.python.bijectors.bijector", _LEGACY_NUMPY)


class Detection(NamedTuple):
    era: str
    reason: str  # what was (or was not) recognised, for status() and warnings


def _init_names(cls: type) -> Tuple[str, ...]:
    import inspect  # not at import time: keeps `import tfp_picklefix` cheap

    init = inspect.unwrap(vars(cls).get("__init__", cls.__init__))
    code = getattr(init, "__code__", None)
    return tuple(code.co_names) if code is not None else ()


def detect_bijector_class(cls: Any) -> Detection:
    """Classify a Bijector base class by the cache it sets up."""
    if not isinstance(cls, type):
        return Detection(UNKNOWN, "no Bijector class found")
    own = vars(cls)
    cache = own.get("_cache")
    if cache is not None and hasattr(cache, "forward") and hasattr(cache, "inverse"):
        return Detection(GLOBAL, "Bijector._cache is a class-level cache shared by all bijectors")
    names = _init_names(cls)
    if "_setup_cache" in own and "_setup_cache" in names and "_cache" in names:
        return Detection(INSTANCE, "Bijector.__init__ sets self._cache = self._setup_cache()")
    if "_from_x" in names and "_from_y" in names:
        return Detection(DICT, "Bijector.__init__ sets weak-key dicts self._from_x/_from_y")
    return Detection(UNKNOWN, "Bijector has neither a class-level _cache, nor _setup_cache, "
                              "nor _from_x/_from_y caches")


def detect_module(module: Any) -> Detection:
    return detect_bijector_class(getattr(module, "Bijector", None))


def tfp_version(module_name: Optional[str] = None) -> str:
    """The installed TFP release, read without importing TFP (for reports only)."""
    mod = sys.modules.get("tensorflow_probability.python.version")
    version = getattr(mod, "__version__", None)
    if version:
        return str(version)
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return "unknown"
    for dist in ("tensorflow-probability", "tfp-nightly"):
        try:
            return metadata.version(dist)
        except Exception:  # PackageNotFoundError
            continue
    return "unknown"
