"""Every public class of tfp.bijectors, tfp.distributions, tfp.math.psd_kernels and
tfp.util, found by introspection, with how to build it from simple arguments.

A class that a new TFP release adds is picked up automatically: it is built with
no arguments, or from ``DEFAULTS`` by the names of its required arguments, unless
``BUILD`` says how. ``p(v)`` wraps a float parameter: the value itself, or a
``tf.Variable`` of it in the "variable" mode. Functions that models need are
module-level functions here, so that every serializer can find them by name.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from bijector_cases import PARAMS as BIJECTOR_PARAMS, Case as BijectorCase

NS: Any = None  # the substrate's namespace (set by ``use``): .tfp .tfb .tfd .psd .util .tf .name


class Namespace:
    def __init__(self, name: str, tfp: Any, tf: Any):
        self.name, self.tfp, self.tf = name, tfp, tf
        self.tfb, self.tfd = tfp.bijectors, tfp.distributions
        self.psd, self.util = tfp.math.psd_kernels, tfp.util


def use(name: str) -> Namespace:
    """Load the substrate ``name`` ("tf", "jax", "numpy") and make it the current one."""
    global NS
    if name == "tf":
        import tensorflow as tf
        import tensorflow_probability as tfp
    elif name == "jax":
        from tensorflow_probability.substrates import jax as tfp
        from tensorflow_probability.substrates.jax import tf2jax as tf
    else:
        try:
            from tensorflow_probability.substrates import numpy as tfp
            from tensorflow_probability.substrates.numpy import tf2numpy as tf
        except ImportError:  # TFP 0.8-0.11: an experimental substrate, its own layout
            from tensorflow_probability.python.experimental.substrates import numpy as tfp

            tf = tfp.tf2numpy
    NS = Namespace(name, tfp, tf)
    return NS


def stateless_seed(value: int) -> Any:
    """A stateless seed in the current substrate: a JAX key, or TFP's sanitized seed
    (TFP 0.12 has ``sanitize_seed`` only in its internal samplers)."""
    if NS.name == "jax":
        import jax

        return jax.random.PRNGKey(value)
    if hasattr(getattr(NS.tfp, "random", None), "sanitize_seed"):
        return NS.tfp.random.sanitize_seed(value)
    import importlib

    samplers = ".python.internal.samplers" if NS.name == "tf" else ".internal.samplers"
    try:
        return importlib.import_module(NS.tfp.__name__ + samplers).sanitize_seed(value)
    except ImportError:  # TFP <= 0.10 samples statefully only: see ``sample``
        return value


def sample(dist: Any, seed: Any) -> Any:
    """``dist.sample(seed=seed)``, repeatable: an int seed (TFP <= 0.10, which has no
    stateless sampling) is used with TF's global seed set to it first."""
    if isinstance(seed, int):
        NS.tf.random.set_seed(seed)
    return dist.sample(seed=seed)


# Model functions (module level: picklable by name, as user code must be for pickle).
def normal_given(x: Any) -> Any:
    return NS.tfd.Normal(x, 1.0)


def normal_given_named(a: Any) -> Any:
    return NS.tfd.Normal(a, 1.0)


def coroutine_model() -> Any:
    root = NS.tfd.JointDistributionCoroutine.Root
    a = yield root(NS.tfd.Normal(0.0, 1.0))
    yield NS.tfd.Normal(a, 1.0)


def autoregressive_fn(x: Any) -> Any:
    return NS.tfd.Independent(NS.tfd.Normal(loc=0.5 * x, scale=1.0), 1)


def maf_shift_and_log_scale(x: Any) -> Any:
    """A MaskedAutoregressiveFlow's network: element i depends on the elements before it."""
    before = NS.tf.math.cumsum(x, axis=-1, exclusive=True)
    return 0.5 * before, 0.1 * before


def realnvp_shift_and_log_scale(x0: Any, output_units: int) -> Any:
    """A RealNVP's network: the masked part's sum, spread over the other part."""
    total = NS.tf.reduce_sum(x0, axis=-1, keepdims=True) * NS.tf.ones([output_units])
    return 0.5 * total, 0.1 * total


def ffjord_derivative(_time: Any, state: Any) -> Any:
    """FFJORD's state-time derivative: a linear ODE (decay)."""
    return -0.5 * state


def _ffjord() -> Any:
    import sys

    exact = sys.modules[NS.tfb.FFJORD.__module__].trace_jacobian_exact  # deterministic
    return NS.tfb.FFJORD(ffjord_derivative, trace_augmentation_fn=exact)


def markov_transition(_step: Any, x: Any) -> Any:
    return NS.tfd.Normal(x, 1.0)


def feature_transform(x: Any, _feature_ndims: Any, _example_ndims: Any) -> Any:
    return 2.0 * x


def standard_normal_log_prob(x: Any) -> Any:
    return -0.5 * x * x


def cube(x: Any) -> Any:
    return x * x * x


def cube_root(y: Any) -> Any:
    return NS.tf.math.sign(y) * NS.tf.math.abs(y) ** (1.0 / 3.0)


def cube_fldj(x: Any) -> Any:
    return NS.tf.math.log(3.0 * x * x)


def cube_ildj(y: Any) -> Any:
    return -cube_fldj(cube_root(y))


def _linop(matrix: Any, p: Callable) -> Any:
    return NS.tf.linalg.LinearOperatorLowerTriangular(p(matrix))


def _mvn(p: Callable) -> Any:
    return NS.tfd.MultivariateNormalDiag(loc=p([0.0]), scale_diag=p([1.0]))


# Values for required arguments, by name (the most common parameterizations).
DEFAULTS: Dict[str, Callable[[Callable], Any]] = {
    "loc": lambda p: p(0.5), "scale": lambda p: p(1.5), "concentration": lambda p: p(2.0),
    "rate": lambda p: p(1.5), "df": lambda p: p(5.0), "skewness": lambda p: p(0.2),
    "tailweight": lambda p: p(1.3), "power": lambda p: p(2.0), "temperature": lambda p: p(0.5),
    "total_count": lambda p: p(5.0), "concentration1": lambda p: p(2.0),
    "concentration0": lambda p: p(3.0), "mixing_concentration": lambda p: p(2.0),
    "mixing_rate": lambda p: p(1.5), "noncentrality": lambda p: p(1.0),
}

_EQ = lambda: NS.psd.ExponentiatedQuadratic()  # noqa: E731
_IDX = [[0.1], [0.5], [0.9]]

# "module.Class" -> builder(p) for classes that DEFAULTS cannot build.
BUILD: Dict[str, Callable[[Callable], Any]] = {
    "tfd.Autoregressive": lambda p: NS.tfd.Autoregressive(
        autoregressive_fn, sample0=np.zeros([2], np.float32), num_steps=2),
    "tfd.BatchBroadcast": lambda p: NS.tfd.BatchBroadcast(NS.tfd.Normal(p(0.5), 1.0), with_shape=[2]),
    "tfd.BatchConcat": lambda p: NS.tfd.BatchConcat(
        [NS.tfd.Normal(p([0.0]), 1.0), NS.tfd.Normal(p([1.0]), 1.0)], axis=0),
    "tfd.BatchReshape": lambda p: NS.tfd.BatchReshape(NS.tfd.Normal(p([0.0, 1.0]), 1.0), [2, 1]),
    "tfd.Bates": lambda p: NS.tfd.Bates(total_count=3.0, low=p(0.0), high=p(2.0)),
    "tfd.Bernoulli": lambda p: NS.tfd.Bernoulli(probs=p(0.3)),
    "tfd.BetaQuotient": lambda p: NS.tfd.BetaQuotient(p(2.0), p(3.0), p(2.5), p(3.5)),
    "tfd.Binomial": lambda p: NS.tfd.Binomial(total_count=p(5.0), probs=p(0.3)),
    "tfd.BetaBinomial": lambda p: NS.tfd.BetaBinomial(p(5.0), p(2.0), p(3.0)),
    "tfd.Blockwise": lambda p: NS.tfd.Blockwise([NS.tfd.Normal(p(0.0), 1.0), NS.tfd.Normal(1.0, 1.0)]),
    "tfd.Categorical": lambda p: NS.tfd.Categorical(probs=p([0.3, 0.7])),
    "tfd.CholeskyLKJ": lambda p: NS.tfd.CholeskyLKJ(dimension=2, concentration=p(1.5)),
    "tfd.ContinuousBernoulli": lambda p: NS.tfd.ContinuousBernoulli(probs=p(0.3)),
    "tfd.DeterminantalPointProcess": lambda p: NS.tfd.DeterminantalPointProcess(
        eigenvalues=p([1.0, 2.0]), eigenvectors=p([[1.0, 0.0], [0.0, 1.0]])),
    "tfd.Dirichlet": lambda p: NS.tfd.Dirichlet(p([1.0, 2.0])),
    "tfd.DirichletMultinomial": lambda p: NS.tfd.DirichletMultinomial(p(5.0), p([1.0, 2.0])),
    "tfd.Empirical": lambda p: NS.tfd.Empirical(p([0.0, 1.0, 2.5])),
    "tfd.ExpRelaxedOneHotCategorical": lambda p: NS.tfd.ExpRelaxedOneHotCategorical(
        p(0.5), probs=p([0.3, 0.7])),
    "tfd.FiniteDiscrete": lambda p: NS.tfd.FiniteDiscrete([1.0, 2.0], probs=p([0.3, 0.7])),
    "tfd.FlatDirichlet": lambda p: NS.tfd.FlatDirichlet(concentration_shape=[2]),
    "tfd.GaussianProcess": lambda p: NS.tfd.GaussianProcess(
        NS.psd.ExponentiatedQuadratic(amplitude=p(1.2)), index_points=_IDX,
        observation_noise_variance=p(0.1)),
    "tfd.GaussianProcessRegressionModel": lambda p: NS.tfd.GaussianProcessRegressionModel(
        NS.psd.ExponentiatedQuadratic(amplitude=p(1.2)), index_points=_IDX,
        observation_index_points=[[0.3]], observations=[1.0], observation_noise_variance=p(0.1)),
    "tfd.Geometric": lambda p: NS.tfd.Geometric(probs=p(0.3)),
    "tfd.HiddenMarkovModel": lambda p: NS.tfd.HiddenMarkovModel(
        NS.tfd.Categorical(probs=p([0.5, 0.5])), NS.tfd.Categorical(probs=[[0.7, 0.3], [0.2, 0.8]]),
        NS.tfd.Normal(p([0.0, 1.0]), 1.0), num_steps=3),
    "tfd.Independent": lambda p: NS.tfd.Independent(NS.tfd.Normal(p([0.0, 1.0]), 1.0), 1),
    "tfd.Inflated": lambda p: NS.tfd.Inflated(NS.tfd.Poisson(rate=p(2.0)), inflated_loc_probs=p(0.2)),
    "tfd.InverseGamma": lambda p: NS.tfd.InverseGamma(p(2.0), scale=p(1.0)),
    "tfd.ExpInverseGamma": lambda p: NS.tfd.ExpInverseGamma(p(2.0), scale=p(1.0)),
    "tfd.Gamma": lambda p: NS.tfd.Gamma(p(2.0), rate=p(1.0)),
    "tfd.ExpGamma": lambda p: NS.tfd.ExpGamma(p(2.0), rate=p(1.0)),
    "tfd.JointDistributionCoroutine": lambda p: NS.tfd.JointDistributionCoroutine(coroutine_model),
    "tfd.JointDistributionCoroutineAutoBatched": lambda p: NS.tfd.JointDistributionCoroutineAutoBatched(
        coroutine_model),
    "tfd.JointDistributionNamed": lambda p: NS.tfd.JointDistributionNamed(
        dict(a=NS.tfd.Normal(p(0.0), 1.0), b=normal_given_named)),
    "tfd.JointDistributionNamedAutoBatched": lambda p: NS.tfd.JointDistributionNamedAutoBatched(
        dict(a=NS.tfd.Normal(p(0.0), 1.0), b=normal_given_named)),
    "tfd.JointDistributionSequential": lambda p: NS.tfd.JointDistributionSequential(
        [NS.tfd.Normal(p(0.0), 1.0), normal_given]),
    "tfd.JointDistributionSequentialAutoBatched": lambda p: NS.tfd.JointDistributionSequentialAutoBatched(
        [NS.tfd.Normal(p(0.0), 1.0), normal_given]),
    "tfd.Kumaraswamy": lambda p: NS.tfd.Kumaraswamy(p(2.0), p(3.0)),
    "tfd.LKJ": lambda p: NS.tfd.LKJ(dimension=2, concentration=p(1.5)),
    "tfd.LambertWDistribution": lambda p: NS.tfd.LambertWDistribution(
        NS.tfd.Normal(0.0, 1.0), shift=p(0.0), scale=p(1.0), tailweight=p(0.1)),
    "tfd.LambertWNormal": lambda p: NS.tfd.LambertWNormal(p(0.5), p(1.5), tailweight=p(0.1)),
    "tfd.LinearGaussianStateSpaceModel": lambda p: NS.tfd.LinearGaussianStateSpaceModel(
        num_timesteps=3, transition_matrix=_linop([[0.9]], p), transition_noise=_mvn(p),
        observation_matrix=_linop([[1.0]], p), observation_noise=_mvn(p),
        initial_state_prior=_mvn(p)),
    "tfd.MarkovChain": lambda p: NS.tfd.MarkovChain(NS.tfd.Normal(p(0.0), 1.0), markov_transition, 3),
    "tfd.Masked": lambda p: NS.tfd.Masked(NS.tfd.Normal(p([0.0, 1.0]), 1.0), validity_mask=[True, False]),
    "tfd.MatrixNormalLinearOperator": lambda p: NS.tfd.MatrixNormalLinearOperator(
        loc=p([[0.0, 1.0]]), scale_row=_linop([[1.0]], p), scale_column=_linop([[1.0, 0.0], [0.5, 2.0]], p)),
    "tfd.MatrixTLinearOperator": lambda p: NS.tfd.MatrixTLinearOperator(
        df=p(5.0), loc=p([[0.0, 1.0]]), scale_row=_linop([[1.0]], p),
        scale_column=_linop([[1.0, 0.0], [0.5, 2.0]], p)),
    "tfd.Mixture": lambda p: NS.tfd.Mixture(NS.tfd.Categorical(probs=p([0.3, 0.7])),
                                            [NS.tfd.Normal(0.0, 1.0), NS.tfd.Normal(p(1.0), 2.0)]),
    "tfd.MixtureSameFamily": lambda p: NS.tfd.MixtureSameFamily(
        NS.tfd.Categorical(probs=p([0.3, 0.7])), NS.tfd.Normal(p([0.0, 1.0]), 1.0)),
    "tfd.Multinomial": lambda p: NS.tfd.Multinomial(p(5.0), probs=p([0.3, 0.7])),
    "tfd.MultivariateNormalDiag": lambda p: NS.tfd.MultivariateNormalDiag(p([0.0, 1.0]), p([1.0, 2.0])),
    "tfd.MultivariateNormalDiagPlusLowRank": lambda p: NS.tfd.MultivariateNormalDiagPlusLowRank(
        p([0.0, 1.0]), p([1.0, 2.0]), scale_perturb_factor=p([[1.0], [0.5]])),
    "tfd.MultivariateNormalDiagPlusLowRankCovariance":
        lambda p: NS.tfd.MultivariateNormalDiagPlusLowRankCovariance(
            p([0.0, 1.0]), cov_diag_factor=p([1.0, 2.0]), cov_perturb_factor=p([[1.0], [0.5]])),
    "tfd.MultivariateNormalFullCovariance": lambda p: NS.tfd.MultivariateNormalFullCovariance(
        p([0.0, 1.0]), p([[2.0, 0.5], [0.5, 1.0]])),
    "tfd.MultivariateNormalLinearOperator": lambda p: NS.tfd.MultivariateNormalLinearOperator(
        p([0.0, 1.0]), _linop([[1.0, 0.0], [0.5, 2.0]], p)),
    "tfd.MultivariateNormalTriL": lambda p: NS.tfd.MultivariateNormalTriL(
        p([0.0, 1.0]), p([[1.0, 0.0], [0.5, 2.0]])),
    "tfd.MultivariateStudentTLinearOperator": lambda p: NS.tfd.MultivariateStudentTLinearOperator(
        p(5.0), p([0.0, 1.0]), _linop([[1.0, 0.0], [0.5, 2.0]], p)),
    "tfd.NegativeBinomial": lambda p: NS.tfd.NegativeBinomial(p(5.0), probs=p(0.3)),
    "tfd.OneHotCategorical": lambda p: NS.tfd.OneHotCategorical(probs=p([0.3, 0.7])),
    "tfd.OrderedLogistic": lambda p: NS.tfd.OrderedLogistic(p([-1.0, 1.0]), p(0.5)),
    "tfd.StoppingRatioLogistic": lambda p: NS.tfd.StoppingRatioLogistic(p([-1.0, 1.0]), p(0.5)),
    "tfd.PERT": lambda p: NS.tfd.PERT(p(0.0), p(1.0), p(3.0)),
    "tfd.Pareto": lambda p: NS.tfd.Pareto(p(2.0), scale=p(1.0)),
    "tfd.PlackettLuce": lambda p: NS.tfd.PlackettLuce(p([1.0, 2.0])),
    "tfd.Poisson": lambda p: NS.tfd.Poisson(rate=p(2.0)),
    "tfd.PowerSpherical": lambda p: NS.tfd.PowerSpherical(p([0.0, 1.0]), p(2.0)),
    "tfd.ProbitBernoulli": lambda p: NS.tfd.ProbitBernoulli(probs=p(0.3)),
    "tfd.QuantizedDistribution": lambda p: NS.tfd.QuantizedDistribution(NS.tfd.Normal(p(0.5), 2.0)),
    "tfd.RelaxedBernoulli": lambda p: NS.tfd.RelaxedBernoulli(p(0.5), probs=p(0.3)),
    "tfd.RelaxedOneHotCategorical": lambda p: NS.tfd.RelaxedOneHotCategorical(p(0.5), probs=p([0.3, 0.7])),
    "tfd.Sample": lambda p: NS.tfd.Sample(NS.tfd.Normal(p(0.5), 1.0), 3),
    "tfd.Skellam": lambda p: NS.tfd.Skellam(rate1=p(1.0), rate2=p(2.0)),
    "tfd.SphericalUniform": lambda p: NS.tfd.SphericalUniform(dimension=3),
    "tfd.StudentTProcess": lambda p: NS.tfd.StudentTProcess(
        p(5.0), NS.psd.ExponentiatedQuadratic(amplitude=p(1.2)), index_points=_IDX,
        observation_noise_variance=p(0.1)),
    "tfd.StudentTProcessRegressionModel": lambda p: NS.tfd.StudentTProcessRegressionModel(
        p(5.0), NS.psd.ExponentiatedQuadratic(amplitude=p(1.2)), index_points=_IDX,
        observation_index_points=[[0.3]], observations=[1.0], observation_noise_variance=p(0.1)),
    "tfd.TransformedDistribution": lambda p: NS.tfd.TransformedDistribution(
        NS.tfd.Normal(p(0.5), 1.0), NS.tfb.Exp()),
    "tfd.Triangular": lambda p: NS.tfd.Triangular(p(0.0), p(3.0), p(1.0)),
    "tfd.TruncatedCauchy": lambda p: NS.tfd.TruncatedCauchy(p(0.5), p(1.5), p(-1.0), p(2.0)),
    "tfd.TruncatedNormal": lambda p: NS.tfd.TruncatedNormal(p(0.5), p(1.5), p(-1.0), p(2.0)),
    "tfd.Uniform": lambda p: NS.tfd.Uniform(p(-1.0), p(2.0)),
    "tfd.VariationalGaussianProcess": lambda p: NS.tfd.VariationalGaussianProcess(
        NS.psd.ExponentiatedQuadratic(amplitude=p(1.2)), index_points=_IDX,
        inducing_index_points=[[0.2], [0.8]], variational_inducing_observations_loc=p([0.0, 1.0]),
        variational_inducing_observations_scale=p([[1.0, 0.0], [0.1, 1.0]]),
        observation_noise_variance=p(0.1)),
    "tfd.VectorDeterministic": lambda p: NS.tfd.VectorDeterministic(p([0.0, 1.0])),
    "tfd.VonMisesFisher": lambda p: NS.tfd.VonMisesFisher(p([0.0, 1.0]), p(2.0)),
    "tfd.WishartLinearOperator": lambda p: NS.tfd.WishartLinearOperator(
        p(5.0), _linop([[1.0, 0.0], [0.5, 2.0]], p)),
    "tfd.WishartTriL": lambda p: NS.tfd.WishartTriL(p(5.0), scale_tril=p([[1.0, 0.0], [0.5, 2.0]])),
    "tfd.ZeroInflatedNegativeBinomial": lambda p: NS.tfd.ZeroInflatedNegativeBinomial(
        total_count=p(5.0), probs=p(0.3), inflated_loc_probs=p(0.2)),
    "tfd.Zipf": lambda p: NS.tfd.Zipf(p(2.0)),
    "psd.ChangePoint": lambda p: NS.psd.ChangePoint([_EQ(), NS.psd.MaternOneHalf()], p([0.5]), p([2.0])),
    "psd.Constant": lambda p: NS.psd.Constant(p(1.5)),
    "psd.ExponentialCurve": lambda p: NS.psd.ExponentialCurve(p(2.0), p(1.5)),
    "psd.FeatureScaled": lambda p: NS.psd.FeatureScaled(_EQ(), scale_diag=p([1.5])),
    "psd.FeatureTransformed": lambda p: NS.psd.FeatureTransformed(_EQ(), feature_transform),
    "psd.GeneralizedMatern": lambda p: NS.psd.GeneralizedMatern(p(1.5)),
    "psd.KumaraswamyTransformed": lambda p: NS.psd.KumaraswamyTransformed(_EQ(), p(2.0), p(3.0)),
    "psd.PointwiseExponential": lambda p: NS.psd.PointwiseExponential(_EQ()),
    "psd.SchurComplement": lambda p: NS.psd.SchurComplement(_EQ(), fixed_inputs=p([[0.3]])),
    "psd.SpectralMixture": lambda p: NS.psd.SpectralMixture(p([0.0]), p([[1.0]]), p([[1.0]])),
    "psd.ExponentiatedQuadratic": lambda p: NS.psd.ExponentiatedQuadratic(p(1.2), p(0.7)),
    "psd.MaternFiveHalves": lambda p: NS.psd.MaternFiveHalves(p(1.2), p(0.7)),
    "util.DeferredTensor": lambda p: NS.util.DeferredTensor(
        NS.tf.Variable(np.float32(0.5)) if NS.name == "tf" else p(np.float32(0.5)), NS.tfb.Exp()),
    "util.TransformedVariable": lambda p: NS.util.TransformedVariable(np.float32(1.5), NS.tfb.Softplus()),
    "util.SeedStream": lambda p: NS.util.SeedStream(42, salt="coverage"),
    "tfb.MaskedAutoregressiveFlow": lambda p: NS.tfb.MaskedAutoregressiveFlow(
        shift_and_log_scale_fn=maf_shift_and_log_scale),
    "tfb.FFJORD": lambda p: _ffjord(),
    "tfb.RealNVP": lambda p: NS.tfb.RealNVP(
        num_masked=1, shift_and_log_scale_fn=realnvp_shift_and_log_scale),
    "tfb.Householder": lambda p: NS.tfb.Householder(p([0.6, 0.8])),
    "tfb.Inline": lambda p: NS.tfb.Inline(
        forward_fn=cube, inverse_fn=cube_root, forward_log_det_jacobian_fn=cube_fldj,
        inverse_log_det_jacobian_fn=cube_ildj, forward_min_event_ndims=0, name="cube"),
    "tfb.ScaleMatvecLinearOperator": lambda p: NS.tfb.ScaleMatvecLinearOperator(
        _linop([[1.0, 0.0], [0.5, 2.0]], p)),
    "tfb.ScaleMatvecLinearOperatorBlock": lambda p: NS.tfb.ScaleMatvecLinearOperatorBlock(
        NS.tf.linalg.LinearOperatorBlockDiag([
            NS.tf.linalg.LinearOperatorDiag(p([2.0])), _linop([[1.0, 0.0], [0.5, 2.0]], p)])),
    "tfb.Restructure": lambda p: NS.tfb.Restructure({"a": 0, "b": 1}),
    "tfb.JointMap": lambda p: NS.tfb.JointMap({"a": NS.tfb.Exp(), "b": NS.tfb.Scale(p(2.0))}),
    "tfb.Pad": lambda p: NS.tfb.Pad(paddings=[[1, 1]]),
    "tfb.BatchNormalization": lambda p: NS.tfb.BatchNormalization(training=False),
    "tfb.Glow": lambda p: NS.tfb.Glow(
        output_shape=(4, 4, 1), num_glow_blocks=1, num_steps_per_block=1,
        coupling_bijector_fn=NS.tfb.GlowDefaultNetwork, exit_bijector_fn=NS.tfb.GlowDefaultExitNetwork),
    "util.ParameterProperties": lambda p: NS.util.ParameterProperties(event_ndims=1),
    "util.BatchedComponentProperties": lambda p: NS.util.BatchedComponentProperties(event_ndims=1),
}

# Classes that are not built, and why (the README lists them).
NOT_BUILT: Dict[str, str] = {
    "tfb.Bijector": "abstract base class", "tfb.AutoCompositeTensorBijector": "abstract base class",
    "tfb.Composition": "abstract base class",
    "tfd.Distribution": "abstract base class", "tfd.AutoCompositeTensorDistribution": "abstract base class",
    "tfd.JointDistribution": "abstract base class",
    "psd.PositiveSemidefiniteKernel": "abstract base class",
    "psd.AutoCompositeTensorPsdKernel": "abstract base class",
    "tfd.RegisterKL": "a decorator, not a distribution",
    "tfd.ReparameterizationType": "an enum-like marker, not a distribution",
    "tfd.PixelCNN": "builds a Keras network; round-tripped in tests/test_flows_modern.py",
    "tfb.AutoregressiveNetwork": "a Keras layer, not a bijector; round-tripped (in a "
                                 "MaskedAutoregressiveFlow) in tests/test_flows_modern.py",
    "tfb.GlowDefaultNetwork": "a Keras network, not a bijector (built inside tfb.Glow here)",
    "tfb.GlowDefaultExitNetwork": "a Keras network, not a bijector (built inside tfb.Glow here)",
}

# Inputs for bijectors whose input ``forward_min_event_ndims`` does not describe:
# structures, a batch (a Keras layer), a flattened image.
INPUTS: Dict[str, Callable[[], Any]] = {
    "tfb.ScaleMatvecLinearOperatorBlock": lambda: [np.array([0.3], np.float32),
                                                   np.array([0.5, 0.7], np.float32)],
    "tfb.Restructure": lambda: [np.array([0.3], np.float32), np.array([0.7], np.float32)],
    "tfb.JointMap": lambda: {"a": np.array([0.3], np.float32), "b": np.array([0.7], np.float32)},
    "tfb.BatchNormalization": lambda: np.array([[0.3, 0.7]], np.float32),
    "tfb.Glow": lambda: np.linspace(0.1, 0.9, 16, dtype=np.float32)[None],
}

MODULES = ("tfb", "tfd", "psd", "util")


def class_names(ns: Namespace) -> List[str]:
    """"module.Class" for every public class, by introspection."""
    out = []
    for label in MODULES:
        module = getattr(ns, label)
        for name in sorted(dir(module)):
            obj = getattr(module, name, None)
            if isinstance(obj, type) and not name.startswith("_"):
                out.append(f"{label}.{name}")
    return out


def _required(cls: type) -> List[str]:
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    return [q.name for q in params if q.default is inspect.Parameter.empty
            and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]


def builder(key: str) -> Optional[Callable[[Callable], Any]]:
    """How to build ``key`` ("tfd.Normal"), or None when it is in NOT_BUILT / unknown."""
    if key in NOT_BUILT:
        return None
    if key in BUILD:
        return BUILD[key]
    label, name = key.split(".", 1)
    cls = getattr(getattr(NS, label), name)
    if label == "tfb":
        kwargs_fn = BIJECTOR_PARAMS.get(name, (None, None))[0]
        if kwargs_fn is not None:
            return lambda p: cls(**kwargs_fn(NS.tfb, p))
    required = _required(cls)
    if all(r in DEFAULTS for r in required):
        return lambda p: cls(**{r: DEFAULTS[r](p) for r in required})
    return None


def bijector_input(key: str, bijector: Any) -> Any:
    if key in INPUTS:
        return INPUTS[key]()
    return BijectorCase(key.split(".", 1)[1], NS.tfb).make_input(bijector)
