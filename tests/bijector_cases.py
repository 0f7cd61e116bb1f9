"""Every bijector class of a TFP substrate, built with simple arguments, found by introspection.

A class added by a new TFP release is picked up automatically: it is built with no
arguments unless ``PARAMS`` says otherwise, and fed an input chosen by its
``forward_min_event_ndims``. ``PARAMS`` values are Python floats/lists; "variable"
mode wraps every float-valued parameter in a ``tf.Variable``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

# class name -> (constructor kwargs builder(tfb, param), explicit input or None)
# ``param(v)`` returns v (plain modes) or a tf.Variable of it (variable mode).
PARAMS: Dict[str, Tuple[Callable[[Any, Callable], dict], Optional[list]]] = {
    "Affine": (lambda tfb, p: dict(shift=p(1.0), scale_identity_multiplier=p(2.0)), None),
    "AffineScalar": (lambda tfb, p: dict(shift=p(1.0), scale=p(2.0)), None),
    "Blockwise": (lambda tfb, p: dict(bijectors=[tfb.Exp(), tfb.Softplus()], block_sizes=[1, 1]),
                  [0.3, 0.6]),
    "Chain": (lambda tfb, p: dict(bijectors=[tfb.Exp(), _shift(tfb, p(1.0))]), None),
    "GeneralizedPareto": (lambda tfb, p: dict(loc=p(0.0), scale=p(1.0), concentration=p(0.5)), None),
    "GompertzCDF": (lambda tfb, p: dict(concentration=p(1.0), rate=p(1.0)), None),
    "ShiftedGompertzCDF": (lambda tfb, p: dict(concentration=p(1.0), rate=p(1.0)), None),
    "GumbelCDF": (lambda tfb, p: dict(loc=p(0.0), scale=p(2.0)), None),
    "FrechetCDF": (lambda tfb, p: dict(loc=p(0.0), scale=p(1.0), concentration=p(2.0)), None),
    "MoyalCDF": (lambda tfb, p: dict(loc=p(0.0), scale=p(2.0)), None),
    "WeibullCDF": (lambda tfb, p: dict(scale=p(2.0), concentration=p(1.5)), None),
    "KumaraswamyCDF": (lambda tfb, p: dict(concentration1=p(2.0), concentration0=p(3.0)), None),
    "GeneralizedExtremeValueCDF": (lambda tfb, p: dict(loc=p(0.0), scale=p(1.0), concentration=p(0.2)), None),
    "Invert": (lambda tfb, p: dict(bijector=tfb.Exp()), None),
    "LambertWTail": (lambda tfb, p: dict(shift=p(0.0), scale=p(1.0), tailweight=p(0.2)), None),
    "MatvecLU": (lambda tfb, p: dict(lower_upper=p([[2.0, 0.0], [1.0, 3.0]]), permutation=[0, 1]), [0.3, 0.6]),
    "ScaleMatvecLU": (lambda tfb, p: dict(lower_upper=p([[2.0, 0.0], [1.0, 3.0]]), permutation=[0, 1]),
                      [0.3, 0.6]),
    "Permute": (lambda tfb, p: dict(permutation=[1, 0]), [0.3, 0.6]),
    "PowerTransform": (lambda tfb, p: dict(power=p(0.5)), None),
    "RationalQuadraticSpline": (lambda tfb, p: dict(bin_widths=p([1.0, 1.0]), bin_heights=p([1.0, 1.0]),
                                                    knot_slopes=p([1.0])), None),
    "Reshape": (lambda tfb, p: dict(event_shape_out=[1, 2], event_shape_in=[2]), [0.3, 0.6]),
    "Scale": (lambda tfb, p: dict(scale=p(2.0)), None),
    "ScaleMatvecDiag": (lambda tfb, p: dict(scale_diag=p([1.0, 2.0])), [0.3, 0.6]),
    "ScaleMatvecTriL": (lambda tfb, p: dict(scale_tril=p([[1.0, 0.0], [0.5, 2.0]])), [0.3, 0.6]),
    "Shift": (lambda tfb, p: dict(shift=p(1.0)), None),
    "Sigmoid": (lambda tfb, p: dict(low=p(-1.0), high=p(2.0)), None),
    "SinhArcsinh": (lambda tfb, p: dict(skewness=p(0.1), tailweight=p(1.2)), None),
    "SoftClip": (lambda tfb, p: dict(low=p(-1.0), high=p(2.0)), None),
    "Softfloor": (lambda tfb, p: dict(temperature=p(0.5)), None),
    "Softplus": (lambda tfb, p: dict(hinge_softness=p(1.5)), None),
    "Split": (lambda tfb, p: dict(num_or_size_splits=2), [0.3, 0.6]),
    "TransformDiagonal": (lambda tfb, p: dict(diag_bijector=tfb.Exp()), None),
    "Transpose": (lambda tfb, p: dict(perm=[1, 0]), None),
    "Ordered": (lambda tfb, p: dict(), [0.2, 0.3, 0.6]),
    "CorrelationCholesky": (lambda tfb, p: dict(), [0.3]),
}

# Classes that cannot be built from simple arguments: they need a user function or
# a Keras network, so they are outside this table (they belong to the issue on
# TFP-internal lambdas and tfp.layers). Reported in the README.
NEEDS_USER_CODE = {
    "FFJORD": "needs a user state_time_derivative_fn",
    "Inline": "needs user forward/inverse functions",
    "MaskedAutoregressiveFlow": "needs a user shift_and_log_scale_fn or Keras AutoregressiveNetwork",
    "RealNVP": "needs a user shift_and_log_scale_fn or Keras network",
    "Glow": "builds Keras networks",
    "AffineLinearOperator": "needs a tf.linalg.LinearOperator",
    "ScaleMatvecLinearOperator": "needs a tf.linalg.LinearOperator",
    "ScaleMatvecLinearOperatorBlock": "needs tf.linalg.LinearOperators",
    "Bijector": "abstract base class",
    "AutoCompositeTensorBijector": "abstract base class",
    "Composition": "abstract base class",
    "CategoricalToDiscrete": "maps integer categories; needs a map_values table (not a float bijection)",
    "BatchNormalization": "a stateful Keras layer: its outputs depend on batch statistics, "
                          "so a copy's values legitimately differ",
}

def _shift(tfb: Any, value: Any) -> Any:
    if hasattr(tfb, "Shift"):
        return tfb.Shift(value)
    return tfb.AffineScalar(shift=value)


def bijector_class_names(tfb: Any) -> List[str]:
    base = tfb.Bijector
    names = []
    for name in sorted(dir(tfb)):
        obj = getattr(tfb, name)
        if isinstance(obj, type) and issubclass(obj, base) and not name.startswith("_"):
            names.append(name)
    return names


def default_input(ndims: int) -> list:
    if ndims == 0:
        return [0.3, 0.6]
    if ndims == 1:
        return [0.2, 0.3, 0.6]
    return [[1.0, 0.0], [0.5, 1.0]]


class Case:
    """One bijector class: how to build it, and what to feed it."""

    def __init__(self, name: str, tfb: Any):
        self.name = name
        self.tfb = tfb
        self.cls = getattr(tfb, name)
        self.kwargs_fn, self.input = PARAMS.get(name, (lambda tfb, p: {}, None))

    def build(self, param: Callable[[Any], Any] = lambda v: v) -> Any:
        return self.cls(**self.kwargs_fn(self.tfb, param))

    def has_float_params(self) -> bool:
        seen = []
        self.kwargs_fn(self.tfb, lambda v: seen.append(v) or v)
        return bool(seen)

    def make_input(self, bijector: Any) -> np.ndarray:
        if self.input is not None:
            return np.asarray(self.input, dtype=np.float32)
        ndims = bijector.forward_min_event_ndims
        if not isinstance(ndims, int):
            ndims = int(np.max(np.asarray(_flatten(ndims))))
        return np.asarray(default_input(ndims), dtype=np.float32)


def _flatten(struct: Any) -> list:
    if isinstance(struct, (list, tuple)):
        return [y for x in struct for y in _flatten(x)]
    if isinstance(struct, dict):
        return [y for x in struct.values() for y in _flatten(x)]
    return [struct]


def to_numpy(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [to_numpy(v) for v in value]
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    return np.asarray(value)


def assert_close(a: Any, b: Any, what: str) -> None:
    a, b = to_numpy(a), to_numpy(b)
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), what
        for x, y in zip(a, b):
            assert_close(x, y, what)
        return
    # A fresh cache recomputes what the original's cache returned as given: float32 round-off.
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=what)
