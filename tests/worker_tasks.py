"""Models and the functions workers run on them (importable by name in any process)."""
from __future__ import annotations

import os
from typing import Any, List, Tuple

import numpy as np

RNG = np.random.default_rng(0)
X = np.linspace(0.0, 1.0, 24)[:, None]
Y = np.sin(6.0 * X) + 0.1 * RNG.standard_normal(X.shape)


def _gpflow() -> Any:
    import gpflow

    return gpflow


def _kernel() -> Any:
    gpflow = _gpflow()
    # exp positive transform on the lengthscale, GPflow's default Softplus elsewhere.
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.3)
    kernel.lengthscales = gpflow.Parameter(0.3, transform=__import__(
        "tensorflow_probability").bijectors.Exp())
    return kernel


def svgp() -> Any:
    gpflow = _gpflow()
    return gpflow.models.SVGP(_kernel(), gpflow.likelihoods.Gaussian(variance=0.1),
                              inducing_variable=X[::4].copy(), num_data=len(X))


def gpr() -> Any:
    gpflow = _gpflow()
    return gpflow.models.GPR((X, Y), kernel=_kernel(), noise_variance=0.1)


def vgp() -> Any:
    gpflow = _gpflow()
    return gpflow.models.VGP((X, Y), kernel=_kernel(), likelihood=gpflow.likelihoods.Gaussian(0.1))


def trained_svgp(steps: int = 5) -> Any:
    import tensorflow as tf

    model = svgp()
    loss = model.training_loss_closure((X, Y))
    opt = tf.keras.optimizers.Adam(0.05)
    for _ in range(steps):
        opt.minimize(loss, model.trainable_variables)
    return model


def svgp_predict(model: Any) -> np.ndarray:
    mean, var = model.predict_f(np.linspace(0.0, 1.0, 7)[:, None])
    return np.concatenate([mean.numpy(), var.numpy()], axis=1)


def transformed_distribution() -> Any:
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfb, tfd = tfp.bijectors, tfp.distributions
    return tfd.TransformedDistribution(
        tfd.MultivariateNormalDiag(tf.Variable([0.1, -0.2]), [1.0, 2.0]),
        tfb.Chain([tfb.Shift(tf.Variable([0.5, 1.0])), tfb.Invert(tfb.Log())]))


def td_log_prob(dist: Any) -> np.ndarray:
    return np.asarray(dist.log_prob(np.array([[1.2, 2.5], [0.7, 3.0]], np.float32)).numpy())


class TDModel:
    """A TransformedDistribution with trainable parameters, fitted by maximum likelihood."""

    def __init__(self) -> None:
        import tensorflow as tf
        import tensorflow_probability as tfp

        tfb, tfd = tfp.bijectors, tfp.distributions
        self.loc = tf.Variable(0.1, dtype=tf.float64, name="loc")
        self.scale = tfp.util.TransformedVariable(1.2, tfb.Softplus(), dtype=tf.float64, name="scale")
        self.dist = tfd.TransformedDistribution(tfd.Normal(self.loc, self.scale),
                                                tfb.Invert(tfb.Log()))

    @property
    def trainable_variables(self) -> Tuple[Any, ...]:
        return tuple(self.dist.trainable_variables)

    def training_loss(self, data: Any = None) -> Any:
        data = np.exp(Y[:, 0]) if data is None else data
        return -__import__("tensorflow").reduce_sum(self.dist.log_prob(data))


GRADIENT_MODELS = {"gpr": gpr, "svgp": svgp, "vgp": vgp, "transformed_distribution": TDModel}


def _loss(model: Any, batch: int = 0) -> Any:
    if hasattr(model, "training_loss_closure") and model.__class__.__name__ == "SVGP":
        idx = np.arange(len(X))[(batch * 8) % len(X):][:8]
        return model.training_loss((X[idx], Y[idx]))
    return model.training_loss()


def loss_gradients(model: Any) -> List[Tuple[str, Any]]:
    import tensorflow as tf

    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        loss = _loss(model)
    grads = tape.gradient(loss, variables)
    return [(v.name, g) for v, g in zip(variables, grads)]


def sgd_step(model: Any, batch: int) -> float:
    """One plain gradient step (no optimizer state): returns the loss before it."""
    import tensorflow as tf

    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        loss = _loss(model, batch)
    for v, g in zip(variables, tape.gradient(loss, variables)):
        v.assign_sub(0.01 * g)
    return float(loss.numpy())


def _holder_class() -> type:
    import tensorflow as tf

    class Holder(tf.Module):
        """A tf.Module holding bijectors, a distribution and TransformedVariables."""

        def __init__(self) -> None:
            import tensorflow_probability as tfp

            super().__init__()
            tfb, tfd = tfp.bijectors, tfp.distributions
            self.bij = tfb.Chain([tfb.Shift(tf.Variable(1.0, name="shift")),
                                  tfb.Scale(tf.Variable(2.0, name="scale"))])
            self.inv = tfb.Invert(tfb.Scale(tf.Variable(3.0, name="inv_scale")))
            self.dist = tfd.MultivariateNormalDiag(
                tf.Variable([0.0, 1.0], name="loc"),
                tfp.util.TransformedVariable([1.0, 2.0], tfb.Softplus(), name="scale_diag"))
            self.tv = tfp.util.TransformedVariable(1.5, tfb.Exp(), name="tv")

    Holder.__module__ = __name__
    Holder.__qualname__ = "Holder"
    return Holder


def __getattr__(name: str) -> Any:  # ``Holder`` is made on first use (imports TF)
    if name == "Holder":
        cls = _holder_class()
        globals()["Holder"] = cls
        return cls
    raise AttributeError(name)


def worker_pid(_: Any = None) -> int:
    return os.getpid()
