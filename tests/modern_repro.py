"""The failures F1-F7, F9, F13 and F14, one object each, and objects of tfp.experimental
and tfp.sts, through every serializer.

    python tests/modern_repro.py SUBSTRATE [dump PATH | load PATH]

Prints one JSON line {case: {serializer: "ok" | error}}: a cell is "ok" when the round
trip works and the copy computes what the original does. ``dump`` writes the objects
with the standard pickle; ``load`` (meant for a process without the package) loads
them and checks their values against freshly built ones.
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402

import coverage_cases as cc  # noqa: E402

SUB = sys.argv[1]
ns = cc.use(SUB)
tfd, tfb, psd = ns.tfd, ns.tfb, ns.psd
SEED = cc.stateless_seed(7)


def used_in_compiled(obj, fn):
    if SUB == "tf":
        ns.tf.function(lambda: fn(obj))()
    elif SUB == "jax":
        import jax

        jax.jit(lambda: fn(obj))()
    return obj


def dist_values(d):
    s = d.sample(seed=SEED)
    return [s, d.log_prob(s), d.reparameterization_type == tfd.FULLY_REPARAMETERIZED]


def bij_values(b, x=np.float32(0.3), event_ndims=0):
    return [b.forward(x), b.inverse(b.forward(x)),
            b.forward_log_det_jacobian(x, event_ndims=event_ndims)]


CASES = {
    "F1 Invert": (lambda: tfb.Invert(tfb.Exp()), bij_values),
    "F1 Independent": (lambda: tfd.Independent(tfd.Normal([0.0, 1.0], 1.0), 1), dist_values),
    "F1 MultivariateNormalDiag": (lambda: tfd.MultivariateNormalDiag([0.0, 1.0], [1.0, 2.0]), dist_values),
    "F1 TransformedDistribution": (lambda: tfd.TransformedDistribution(tfd.Normal(0.5, 1.0), tfb.Exp()),
                                   dist_values),
    "F1b ZeroInflatedNegativeBinomial": (lambda: tfd.ZeroInflatedNegativeBinomial(
        total_count=5.0, probs=0.3, inflated_loc_probs=0.2), dist_values),
    "F4 SoftClip": (lambda: tfb.SoftClip(-1.0, 1.0), bij_values),
    "F4 GaussianProcessRegressionModel": (lambda: tfd.GaussianProcessRegressionModel(
        psd.ExponentiatedQuadratic(), index_points=[[0.0], [1.0]], observation_index_points=[[0.5]],
        observations=[1.0], observation_noise_variance=0.1), dist_values),
    "F6 Normal (reparameterization type)": (lambda: tfd.Normal(0.0, 1.0), dist_values),
}
if SUB == "tf":
    tf = ns.tf
    CASES["F3 TransformedVariable type spec"] = (
        lambda: ns.util.TransformedVariable(1.5, tfb.Softplus())._type_spec,
        lambda spec: [spec == ns.util.TransformedVariable(1.5, tfb.Softplus())._type_spec])
    CASES["F5 TransformedVariable (dill)"] = (
        lambda: ns.util.TransformedVariable(1.5, tfb.Softplus()), lambda v: [tf.convert_to_tensor(v)])
if SUB != "numpy":  # nothing is compiled in the NumPy substrate
    CASES["F2 JointDistributionCoroutine used compiled"] = (lambda: used_in_compiled(
        tfd.JointDistributionCoroutine(cc.coroutine_model), dist_values), dist_values)
if SUB != "tf":  # the JAX/NumPy tf.Variable stand-in
    CASES["F7 TransformedVariable"] = (lambda: ns.util.TransformedVariable(1.5, tfb.Softplus()),
                                       lambda v: [ns.tf.convert_to_tensor(v)])
if SUB == "tf":
    # Pickle protocols 0 and 1: TF's TrackableReference, which a tf.Module keeps for
    # each trackable it tracks (a variable, a module, a dict), has slots and no
    # __getstate__ (the other cases check protocols 0 and 1 too).
    CASES["F14 Scale(Variable) (pickle 0 and 1)"] = (lambda: tfb.Scale(ns.tf.Variable(2.0)),
                                                     bij_values)


def batch_normalization_used_compiled():
    """A Keras layer inside a bijector, its variables made in a trace: F14 for the keys of
    the layer's reference counts (Keras's object-identity wrappers), and gamma's
    constraint, a TFP lambda, held by a variable of TF's function code. Its statistics
    and gamma are changed after the trace: a copy must carry them."""
    b = tfb.BatchNormalization(training=False)
    ns.tf.function(lambda: b.forward(np.float32([[0.3, 0.7]])))()
    b.batchnorm.moving_mean.assign([0.5, -0.2])
    b.batchnorm.moving_variance.assign([2.0, 0.5])
    b.batchnorm.gamma.assign([1.5, 0.8])
    return b


def batch_normalization_values(b):
    x = np.float32([[0.3, 0.7]])
    return [b.forward(x), b.inverse(x), b.batchnorm.gamma.constraint(ns.tf.constant([-1.0, 2.0]))]


if SUB == "tf":
    CASES["F14 BatchNormalization used compiled (Keras layer)"] = (
        batch_normalization_used_compiled, batch_normalization_values)
CASES["F5 GaussianProcess (dill)"] = (lambda: tfd.GaussianProcess(
    psd.ExponentiatedQuadratic(), index_points=[[0.0], [1.0]], observation_noise_variance=0.1), dist_values)

if SUB == "tf":  # the JAX/NumPy substrates have no DeferredModule
    CASES["F5 DeferredModule (dill; tfp.experimental loads late)"] = (
        lambda: ns.tfp.experimental.util.DeferredModule(cc.normal_given,
                                                        ns.tf.Variable(np.float32(0.5))),
        dist_values)
if not hasattr(tfd, "ZeroInflatedNegativeBinomial"):  # TFP 0.12 and 0.17 have none
    del CASES["F1b ZeroInflatedNegativeBinomial"]
CASES["F4 Chain of MaskedAutoregressiveFlows"] = (lambda: tfb.Chain([
    tfb.MaskedAutoregressiveFlow(shift_and_log_scale_fn=cc.maf_shift_and_log_scale),
    tfb.Permute([1, 0]),
    tfb.MaskedAutoregressiveFlow(shift_and_log_scale_fn=cc.maf_shift_and_log_scale)]),
    lambda b: bij_values(b, np.float32([0.3, 0.6]), event_ndims=1))


# tfp.experimental and tfp.sts objects, built from simple arguments (F1, F4/F11 for
# their TFP closures, F5, F14), where the release has them: each failed somewhere
# without the package. An STS model is compared through its state space model's
# log_prob for the same parameters (drawn from its priors with one seed).
_Y = np.float32(np.sin(np.arange(12.0)))
_X = np.float32(np.linspace(0.0, 1.0, 24).reshape(12, 2))


def _structural(model):
    params = [p.prior.sample(seed=SEED) for p in model.parameters]
    ssm = model.make_state_space_model(num_timesteps=12, param_vals=params)
    return [ssm.log_prob(_Y[:, None])] + params


def _resampled(d):  # its log_prob is an estimate: seeded
    s = d.sample(seed=SEED)
    return [s, d.log_prob(s, seed=SEED)]


_xd, _xb = ns.tfp.experimental.distributions, ns.tfp.experimental.bijectors
_MORE = {
    "IncrementLogProb": (lambda: _xd.IncrementLogProb(np.float32(1.5)),
                         lambda d: [d.unnormalized_log_prob(())]),
    "MultiTaskGaussianProcess": (lambda: _xd.MultiTaskGaussianProcess(
        ns.tfp.experimental.psd_kernels.Independent(2, psd.ExponentiatedQuadratic()),
        index_points=np.float32([[0.1], [0.5]]), observation_noise_variance=np.float32(0.1)),
        dist_values),
    "MultivariateNormalPrecisionFactorLinearOperator": (
        lambda: _xd.MultivariateNormalPrecisionFactorLinearOperator(
            np.float32([0.0, 1.0]), precision_factor=ns.tf.linalg.LinearOperatorLowerTriangular(
                np.float32([[1.0, 0.0], [0.5, 2.0]]))), dist_values),
    "ScalarFunctionWithInferredInverse": (
        lambda: _xb.ScalarFunctionWithInferredInverse(cc.cube),  # its log-dets need a tape
        lambda b: [b.forward(np.float32([0.3, 0.6])), b.inverse(np.float32([0.3, 0.6]))]),
}
if SUB == "tf":  # F14; it pickles without the package in the JAX and NumPy substrates
    _MORE["ImportanceResample"] = (lambda: _xd.ImportanceResample(
        tfd.Normal(np.float32(0.0), 2.0), cc.standard_normal_log_prob, importance_sample_size=3),
        _resampled)
if SUB != "numpy":
    _MORE["HighwayFlow"] = (lambda: _xb.build_trainable_highway_flow(
        2, 0.5, activation_fn=ns.tf.nn.softplus, gate_first_n=1, seed=SEED),
        lambda b: bij_values(b, np.float32([0.3, 0.6]), event_ndims=1))


def _runs(case):
    """False where TFP's own code cannot run the object on this NumPy: TFP 0.25 calls
    ``np.reshape(..., newshape=)``, which NumPy 2.5 removed (HighwayFlow on modern-py313)."""
    build, values = case
    try:
        values(build())
    except TypeError as exc:
        if "newshape" in str(exc):
            return False
        raise
    return True


for _name, _case in _MORE.items():
    if (hasattr(_xd, _name) or hasattr(_xb, _name) or _name == "HighwayFlow" and hasattr(
            _xb, "build_trainable_highway_flow")) and _runs(_case):
        CASES[f"experimental {_name}"] = _case
if SUB == "tf":
    _sts = ns.tfp.sts
    CASES.update({f"sts.{name}": (build, _structural) for name, build in {
        "LocalLevel": lambda: _sts.LocalLevel(observed_time_series=_Y),
        "Seasonal": lambda: _sts.Seasonal(num_seasons=4, observed_time_series=_Y),
        "LinearRegression": lambda: _sts.LinearRegression(design_matrix=_X),
        "AutoregressiveIntegratedMovingAverage": lambda: _sts.AutoregressiveIntegratedMovingAverage(
            1, 1, observed_time_series=_Y),
        "Sum": lambda: _sts.Sum([_sts.LocalLevel(observed_time_series=_Y),
                                 _sts.SmoothSeasonal(6.0, [1.0, 2.0], observed_time_series=_Y)],
                                observed_time_series=_Y),
    }.items() if hasattr(_sts, name)})


# F13: a JitPublicMethods wrapper after its methods ran (they keep their compiled form,
# which holds traced graphs in TF), as tfp.sts.forecast returns its components.
def jit_wrapped():
    wrapper = ns.tfp.experimental.util.JitPublicMethods(
        tfd.Normal(np.float32([0.0, 1.0]), np.float32(2.0)), trace_only=SUB == "tf")
    jit_values(wrapper)
    return wrapper


def jit_values(d):
    return [d.mean(), d.log_prob(np.float32(0.3))]


def sts_forecast():
    y = np.float32(np.sin(np.arange(16) / 3.0))
    model = ns.tfp.sts.LocalLevel(observed_time_series=y)
    draws = [p.prior.sample(2, seed=(1, i)) for i, p in enumerate(model.parameters)]
    forecast = ns.tfp.sts.forecast(model, y, draws, num_steps_forecast=3)
    forecast_values(forecast)
    return forecast


def forecast_values(d):
    mean = d.mean()
    return [mean, d.stddev(), d.log_prob(mean)]


if SUB != "numpy":  # the NumPy substrate's JitPublicMethods returns the object itself
    CASES["F13 JitPublicMethods (used)"] = (jit_wrapped, jit_values)
if SUB == "tf":  # STS is TF only
    CASES["F13 sts.forecast (used)"] = (sts_forecast, forecast_values)


def properties_values(p):
    """A ParameterProperties namedtuple's class and fields; a function field (TFP's
    own defaults and constants), by name and code (by-value picklers copy lambdas)."""
    return [type(p).__name__] + [f"{f.__qualname__}: {f.__code__.co_code.hex()}"
                                 if callable(f) else f for f in p]


_properties = sys.modules[ns.tfp.util.ParameterProperties.__module__]
for _name in ("ParameterProperties", "BatchedComponentProperties", "ShapeParameterProperties"):
    CASES[f"F9 {_name}"] = (getattr(_properties, _name), properties_values)
CASES["F9 BatchedComponentProperties (arguments)"] = (lambda: _properties.BatchedComponentProperties(
    event_ndims=1, is_preferred=False), properties_values)


def serializers():
    import cloudpickle
    import dill

    return {"pickle": lambda o: pickle.loads(pickle.dumps(o, protocol=4)),
            "pickle2": lambda o: pickle.loads(pickle.dumps(o, protocol=2)),
            "pickle1": lambda o: pickle.loads(pickle.dumps(o, protocol=1)),
            "pickle0": lambda o: pickle.loads(pickle.dumps(o, protocol=0)),
            "copy": copy.copy, "deepcopy": copy.deepcopy,
            "cloudpickle": lambda o: cloudpickle.loads(cloudpickle.dumps(o)),
            "dill": lambda o: dill.loads(dill.dumps(o))}


def same(a, b):
    for x, y in zip(a, b):
        x = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
        y = np.asarray(y.numpy() if hasattr(y, "numpy") else y)
        if x.dtype.kind in "fc":
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
        else:
            assert np.array_equal(x, y), (x, y)


def main():
    action = sys.argv[2] if len(sys.argv) > 2 else "roundtrip"
    if action == "dump":
        import tfp_picklefix  # noqa: F401
        objs = {}
        for name, (build, _) in CASES.items():
            try:
                objs[name] = pickle.dumps(build(), protocol=4)
            except Exception as exc:
                objs[name] = f"{type(exc).__name__}: {exc}"
        with open(sys.argv[3], "wb") as f:
            pickle.dump(objs, f)
        print(json.dumps({n: "ok" if isinstance(v, bytes) else v for n, v in objs.items()}))
        return
    if action == "load":
        assert "tfp_picklefix" not in sys.modules
        with open(sys.argv[3], "rb") as f:
            objs = pickle.load(f)
        out = {}
        for name, (build, fn) in CASES.items():
            try:
                same(fn(build()), fn(pickle.loads(objs[name])))
                out[name] = "ok"
            except Exception as exc:
                out[name] = f"{type(exc).__name__}: {exc}"[:200]
        assert "tfp_picklefix" not in sys.modules
        print(json.dumps(out))
        return
    import tfp_picklefix  # noqa: F401  (TFP_PICKLEFIX=off turns it off)
    out = {}
    for name, (build, fn) in CASES.items():
        row = {}
        for ser, roundtrip in serializers().items():
            try:
                obj = build()
                ref = fn(obj)
                same(ref, fn(roundtrip(obj)))
                row[ser] = "ok"
            except Exception as exc:
                row[ser] = f"{type(exc).__name__}: {exc}"[:200]
        out[name] = row
    print(json.dumps(out))


if __name__ == "__main__":
    main()
