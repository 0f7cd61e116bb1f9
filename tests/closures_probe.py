"""TFP objects that hold closures TFP made (F11), through every serializer.

    python tests/closures_probe.py roundtrip SUBSTRATE   # one JSON line per case
    python tests/closures_probe.py dump SUBSTRATE PATH | load SUBSTRATE PATH
                                                      # the standard pickle, across processes
    python tests/closures_probe.py independent SUBSTRATE   # copies of closures over variables

``load`` never imports the package. ``TFP_PICKLEFIX_PROBE_F11=0``: the package without F11.
"""
from __future__ import annotations

import json
import os
import pickle
import sys
import warnings

warnings.simplefilter("ignore")

import types  # noqa: E402

import numpy as np  # noqa: E402
from roundtrips import SERIALIZERS  # noqa: E402

if os.environ.get("TFP_PICKLEFIX_PROBE_IMPORT", "1") == "1" and sys.argv[1] != "load":
    import tfp_picklefix  # noqa: F401

    if os.environ.get("TFP_PICKLEFIX_PROBE_F11") == "0":
        from tfp_picklefix import _reducers

        _reducers.written_by_reference = lambda *args, **kwargs: None

SUBSTRATE = sys.argv[2]
if SUBSTRATE == "tf":
    import tensorflow as tf
    import tensorflow_probability as tfp
elif SUBSTRATE == "jax":
    from tensorflow_probability.substrates import jax as tfp
    from tensorflow_probability.substrates.jax import tf2jax as tf
else:
    from tensorflow_probability.substrates import numpy as tfp
    from tensorflow_probability.substrates.numpy import tf2numpy as tf

tfb, tfd, psd = tfp.bijectors, tfp.distributions, tfp.math.psd_kernels
X = np.linspace(-1.0, 1.0, 6).reshape(3, 2).astype(np.float32)
Y = np.float32([0.3, -0.2, 0.9])


def seed(a, b):  # a stateless seed in the substrate's own form (a PRNG key in JAX)
    if SUBSTRATE == "jax":
        import jax

        return jax.random.PRNGKey(1000 * a + b)
    return tfp.random.sanitize_seed((a, b))



def target_log_prob(x):  # module level: the standard pickle writes it by name
    return tfd.Normal(np.float32(0.5), np.float32(2.0)).log_prob(x)


def gprm_precompute():
    return tfd.GaussianProcessRegressionModel.precompute_regression_model(
        psd.ExponentiatedQuadratic(np.float32(1.2)), index_points=X + 0.1,
        observation_index_points=X, observations=Y, observation_noise_variance=np.float32(0.1))


def gprm_values(model):
    return [model.mean(), model.stddev(), model.log_prob(Y), model.sample(seed=seed(1, 2))]


def schur_precompute():
    return psd.SchurComplement.with_precomputed_divisor(
        psd.ExponentiatedQuadratic(np.float32(1.2)), fixed_inputs=X, diag_shift=np.float32(0.1))


def kernel_values(kernel):
    return [kernel.matrix(X + 0.2, X - 0.3), kernel.apply(X, X + 0.5)]


def inner_kernel():
    if SUBSTRATE == "numpy":  # no gradients there: no HMC
        return tfp.mcmc.RandomWalkMetropolis(target_log_prob)
    return tfp.mcmc.HamiltonianMonteCarlo(target_log_prob, np.float32(0.3), 3)


def transformed_kernel():
    return tfp.mcmc.TransformedTransitionKernel(inner_kernel(), tfb.Exp())


def random_walk():
    return tfp.mcmc.RandomWalkMetropolis(target_log_prob)


def mcmc_values(kernel):
    state = np.float32([1.0, 2.0])
    results = kernel.bootstrap_results(state)
    steps = []
    for i in range(3):
        state, results = kernel.one_step(state, results, seed=seed(i, 7))
        steps.append(state)
    return steps


def parameter_properties():
    return tfd.Normal.parameter_properties()


def properties_values(properties):
    return [properties[name].default_constraining_bijector_fn().forward(np.float32(0.3))
            for name in ("loc", "scale")]


def sts_surrogate():
    y = np.arange(8.0, dtype=np.float32)
    return tfp.sts.build_factored_surrogate_posterior(tfp.sts.LocalLevel(observed_time_series=y))


def surrogate_values(posterior):
    draw = posterior.sample(seed=seed(3, 4))
    return list(tf.nest.flatten(draw)) + [posterior.log_prob(draw)]


def ode_derivative(_time, state):  # module level, as the standard pickle needs
    return -0.5 * state


def ode_solver():
    return tfp.math.ode.DormandPrince()


def ode_values(solver):
    return [solver.solve(ode_derivative, 0.0, np.float32([1.0, 2.0]),
                         solution_times=[0.5, 1.0]).states]


def with_reductions():  # its default adjust_kr_fn is a lambda in its signature
    return tfp.experimental.mcmc.WithReductions(inner_kernel(),
                                                tfp.experimental.mcmc.ExpectationsReducer())


def progress_bar():  # its default progress bar is a closure TFP made (tqdm's, in TF)
    return tfp.experimental.mcmc.ProgressBarReducer(5)


def progress_bar_values(reducer):
    # Not run (tqdm is not installed here): its code and cells must be the default's.
    fn, default = reducer.progress_bar_fn, tfp.experimental.mcmc.make_tqdm_progress_bar_fn()
    cells = [c.cell_contents for c in fn.__closure__]
    return [reducer.num_results, fn.__code__ == default.__code__,
            cells == [c.cell_contents for c in default.__closure__]]


def kernel_builder():  # a namedtuple keeping the closure of set_tracing (make sets it)
    builder = tfp.experimental.mcmc.KernelBuilder.make(target_log_prob)
    return builder.hmc(num_leapfrog_steps=3).set_step_size(np.float32(0.3))


def kernel_builder_values(builder):
    return mcmc_values(builder.build(3))


def sts_joint():
    y = np.arange(8.0, dtype=np.float32)
    model = tfp.sts.Sum([tfp.sts.LocalLinearTrend(observed_time_series=y),
                         tfp.sts.Seasonal(4, observed_time_series=y)], observed_time_series=y)
    return model.joint_distribution(observed_time_series=y)


def sts_values(jd):  # pinned to the observations
    draw = jd.sample_unpinned(seed=seed(1, 2))
    return list(tf.nest.flatten(draw)) + [jd.unnormalized_log_prob(draw)]


def sts_components():  # a model of most of tfp.sts's component kinds
    y = np.sin(np.arange(16, dtype=np.float32) / 2.0)
    design = np.linspace(0.0, 1.0, 32).reshape(16, 2).astype(np.float32)
    return tfp.sts.Sum([
        tfp.sts.LocalLinearTrend(observed_time_series=y),
        tfp.sts.SemiLocalLinearTrend(observed_time_series=y),
        tfp.sts.Seasonal(4, observed_time_series=y),
        tfp.sts.SmoothSeasonal(8, [1, 2], observed_time_series=y),
        tfp.sts.Autoregressive(2, observed_time_series=y),
        tfp.sts.LinearRegression(design_matrix=design),
        tfp.sts.DynamicLinearRegression(design_matrix=design),
    ], observed_time_series=y)


def sts_components_values(model):
    # Each parameter drawn from its prior, then four steps of the state space model.
    draws = [p.prior.sample(seed=seed(3, i)) for i, p in enumerate(model.parameters)]
    ssm = model.make_state_space_model(num_timesteps=4, param_vals=draws)
    return draws + [sum(p.prior.log_prob(d) for p, d in zip(model.parameters, draws)),
                    ssm.log_prob(np.float32([[0.1], [0.4], [0.2], [-0.3]]))]


def affine_layer():
    tf.random.set_seed(5)
    return tfp.experimental.nn.Affine(2, 3)


def affine_values(layer):
    return [layer(X)]


def psd_operator():
    return tfp.experimental.linalg.LinearOperatorPSDKernel(
        psd.ExponentiatedQuadratic(np.float32(1.2)), X)


def operator_values(operator):
    return [operator.to_dense(), operator.matvec(Y)]


def batch_normalization():  # TFP's default Keras layer has a TFP lambda as gamma constraint
    bijector = tfb.BatchNormalization(training=False)
    bijector.inverse(X)  # builds the layer
    rng = np.random.RandomState(3)
    for v in bijector.batchnorm.variables:
        v.assign(v + rng.uniform(0.1, 0.5, v.shape).astype(np.float32))
    return bijector


def batch_normalization_values(bijector):
    return [bijector.forward(X), bijector.inverse(X), bijector.forward_log_det_jacobian(X, 1),
            bijector.batchnorm.gamma.constraint(tf.constant([-1.0, 2.0]))]


CASES = {
    "GaussianProcessRegressionModel.precompute_regression_model": (gprm_precompute, gprm_values),
    "SchurComplement.with_precomputed_divisor": (schur_precompute, kernel_values),
    "TransformedTransitionKernel": (transformed_kernel, mcmc_values),
    "RandomWalkMetropolis": (random_walk, mcmc_values),
    "Normal.parameter_properties": (parameter_properties, properties_values),
    "experimental.mcmc.WithReductions": (with_reductions, mcmc_values),
}
if SUBSTRATE != "numpy":  # its ODE solvers need gradients
    CASES["math.ode.DormandPrince"] = (ode_solver, ode_values)
if SUBSTRATE == "tf":  # TF only in TFP: STS pinning, nn, linalg, KernelBuilder
    CASES.update({
        "StructuralTimeSeries.joint_distribution": (sts_joint, sts_values),
        "sts.Sum of components": (sts_components, sts_components_values),
        "sts.build_factored_surrogate_posterior": (sts_surrogate, surrogate_values),
        "experimental.nn.Affine": (affine_layer, affine_values),
        "LinearOperatorPSDKernel": (psd_operator, operator_values),
        "bijectors.BatchNormalization": (batch_normalization, batch_normalization_values),
        "experimental.mcmc.ProgressBarReducer": (progress_bar, progress_bar_values),
        "experimental.mcmc.KernelBuilder": (kernel_builder, kernel_builder_values),
    })


# Objects whose TFP closures hold a variable (through the bijector or kernel they
# captured): a copy's closure must follow the copy's variable, not the original's.
def _variable(value):
    return tf.Variable(np.float32(value))


def kernel_over_variable():
    scale = _variable(2.0)
    return tfp.mcmc.TransformedTransitionKernel(inner_kernel(), tfb.Scale(scale)), scale


def gprm_over_variable():
    amplitude = _variable(1.5)
    return tfd.GaussianProcessRegressionModel.precompute_regression_model(
        psd.ExponentiatedQuadratic(amplitude, np.float32(1.2)), index_points=X + 0.1,
        observation_index_points=X, observations=Y,
        observation_noise_variance=np.float32(0.1)), amplitude


STATEFUL = {
    "TransformedTransitionKernel(Scale(variable))": (kernel_over_variable, mcmc_values),
    "GaussianProcessRegressionModel.precompute_regression_model(variable amplitude)":
        (gprm_over_variable, lambda model: [model.mean(), model.stddev()]),
}


def _missing(exc):
    """Whether ``exc`` says that this TFP release lacks what a case builds (an older
    release: ``experimental.mcmc.WithReductions``, ...): the case does not apply."""
    text = str(exc)
    return isinstance(exc, (AttributeError, ImportError)) and "tensorflow_probability" in text and (
        "has no attribute" in text or "No module named" in text)


def _built(build):
    """``(build(), None)``, or ``(None, why)`` where this TFP release lacks what the case
    builds (any other error is the case's own, and raised)."""
    try:
        return build(), None
    except Exception as exc:
        if _missing(exc):
            return None, f"{type(exc).__name__}: {exc}"[:200]
        raise


def _tfp_closures(obj, max_depth=10):
    """How many functions that TFP's code made (closures, lambdas) ``obj`` holds, found
    breadth-first through attributes, containers and closure cells (the test's own look,
    not the package's). ``seen`` keeps what it visited alive, so that no id is reused
    by a later object during the walk, and breadth-first order reaches each object by
    its shortest path, so the depth limit does not depend on the order of the walk."""
    seen = {id(obj): obj}
    level, count = [obj], 0
    for _ in range(max_depth + 1):
        below = []
        for item in level:
            if isinstance(item, (str, bytes, int, float, bool, type(None), type)):
                continue
            if isinstance(item, types.FunctionType):
                if str(item.__module__).startswith("tensorflow_probability") and (
                        "<locals>" in item.__qualname__ or item.__name__ == "<lambda>"):
                    count += 1
                children = [c.cell_contents for c in item.__closure__ or () if _filled(c)]
            elif isinstance(item, dict):
                children = list(item.values())
            elif isinstance(item, (list, tuple, set, frozenset)):
                children = list(item)
            else:
                attrs = getattr(item, "__dict__", None)
                children = [attrs] if isinstance(attrs, dict) else []
            for child in children:
                if id(child) not in seen:
                    seen[id(child)] = child
                    below.append(child)
        level = below
    return count


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _same(expected, got):
    for a, b in zip(expected, got):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    return len(expected) == len(got)


def main():
    action = sys.argv[1]
    if action == "roundtrip":
        for case, (build, values) in CASES.items():
            try:
                made, absent = _built(build)
            except Exception:  # the case's own error: each serializer's cell records it
                made = absent = None
            if absent:
                print(json.dumps({case: {"absent": absent}}), flush=True)
                continue
            row = {"tfp closures": _tfp_closures(made)} if os.environ.get(
                "TFP_PICKLEFIX_PROBE_F11") == "0" else {}
            for name, roundtrip in SERIALIZERS.items():
                try:
                    original = build()
                    expected = values(original)
                    row[name] = "same" if _same(expected, values(roundtrip(original))) else "differ"
                except Exception as exc:
                    row[name] = f"{type(exc).__name__}: {exc}"[:200]
            print(json.dumps({case: row}), flush=True)
    elif action == "independent":
        # After each deep round trip, the original's variable changes: the copy must
        # still compute what it did (and the original must not).
        for case, (build, values) in STATEFUL.items():
            row = {}
            for name, roundtrip in SERIALIZERS.items():
                if name == "copy":
                    continue  # a shallow copy shares its variables by design
                try:
                    original, variable = build()
                    clone = roundtrip(original)
                    expected = values(clone)
                    variable.assign(variable * 3.0)
                    if _same(expected, values(clone)):
                        row[name] = "independent"
                except AssertionError:
                    row[name] = "follows the original's variable"
                except Exception as exc:
                    row[name] = f"{type(exc).__name__}: {exc}"[:200]
                else:
                    try:
                        _same(expected, values(original))
                        row[name] += ", but the original did not change"
                    except AssertionError:
                        pass
            print(json.dumps({case: row}), flush=True)
    elif action == "dump":
        built = {case: _built(build) for case, (build, _) in CASES.items()}
        made = {case: obj for case, (obj, absent) in built.items() if not absent}
        expected = {case: [np.asarray(v) for v in CASES[case][1](obj)] for case, obj in made.items()}
        with open(sys.argv[3], "wb") as f:
            pickle.dump([made, expected], f)
        print(json.dumps({"dumped": sorted(made)}))
    elif action == "load":
        with open(sys.argv[3], "rb") as f:
            made, expected = pickle.load(f)
        same = {case: _same(expected[case], CASES[case][1](obj)) for case, obj in made.items()}
        print(json.dumps({"same": same, "package": "tfp_picklefix" in sys.modules}))


if __name__ == "__main__":
    main()
