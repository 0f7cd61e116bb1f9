"""The seed scenario: train a GPflow SVGP a few steps, then pickle it.

On TFP 0.9-0.11 without tfp_picklefix, ``pickle.dump(model, f)`` fails with
``TypeError: cannot pickle 'HashableWeakRef' object`` (Python <= 3.7: ``can't
pickle HashableWeakRef objects``) or, on TFP 0.11, ``Can't pickle local object
'Bijector._setup_cache.<locals>.<lambda>'``. The one line ``import tfp_picklefix``
below is the whole fix.

    python examples/svgp_pickle.py --out model.pkl      # trains, pickles, checks copies
    python examples/svgp_load.py model.pkl              # loads it in a process without the package

``--without-fix`` skips the import (to see the original error).
"""
from __future__ import annotations

import argparse
import copy
import os
import pickle
import sys
import tempfile


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "svgp_model.pkl"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--without-fix", action="store_true", help="do not import tfp_picklefix")
    args = parser.parse_args(argv)

    if not args.without_fix:
        import tfp_picklefix  # noqa: F401  (the fix: patches TFP when it is imported)

    import numpy as np
    import tensorflow as tf
    import gpflow

    # --- the seed, as the user wrote it ------------------------------------------------
    N = 10000
    rng = np.random.RandomState(123)
    X = rng.rand(N, 1) * 10
    Y = (np.sin(X) + 0.5 * rng.randn(N, 1) > 0).astype(float)
    data = (X, Y)

    model = gpflow.models.SVGP(gpflow.kernels.Matern12(), gpflow.likelihoods.Bernoulli(),
                               inducing_variable=X[:100].copy(), num_data=N)
    tf.random.set_seed(123)
    train_dataset = tf.data.Dataset.from_tensor_slices(data).repeat().shuffle(N, seed=1)
    train_iter = iter(train_dataset.batch(100))
    training_loss = model.training_loss_closure(train_iter, compile=True)
    optimizer = tf.optimizers.Adam(0.01)

    @tf.function
    def optimization_step():
        optimizer.minimize(training_loss, model.trainable_variables)

    for _ in range(args.steps):
        optimization_step()

    with open(args.out, "wb") as f:
        pickle.dump(model, f)
    # ------------------------------------------------------------------------------------

    Xtest = np.linspace(-1, 11, 50)[:, None]
    mean, var = model.predict_f(Xtest)
    np.savez(args.out + ".npz", Xtest=Xtest, mean=mean.numpy(), var=var.numpy(),
             X=X[:500], Y=Y[:500])
    print(f"pickled the trained SVGP to {args.out} ({os.path.getsize(args.out)} bytes)")

    clone = copy.deepcopy(model)
    mean2, var2 = clone.predict_f(Xtest)
    np.testing.assert_allclose(mean2.numpy(), mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(var2.numpy(), var.numpy(), rtol=1e-6)
    print("copy.deepcopy(model) predicts the same")

    # GPflow's own helpers keep working alongside the package.
    frozen = gpflow.utilities.freeze(model)
    np.testing.assert_allclose(frozen.predict_f(Xtest)[0].numpy(), mean.numpy(), rtol=1e-6)
    gp_copy = gpflow.utilities.deepcopy(model)
    np.testing.assert_allclose(gp_copy.predict_f(Xtest)[0].numpy(), mean.numpy(), rtol=1e-6)
    gpflow.utilities.reset_cache_bijectors(model)
    np.testing.assert_allclose(model.predict_f(Xtest)[0].numpy(), mean.numpy(), rtol=1e-6)
    print("gpflow.utilities.freeze, deepcopy and reset_cache_bijectors still work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
