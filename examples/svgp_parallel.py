"""The seed's trained SVGP predicts in worker processes (multiprocessing spawn, joblib loky).

    python examples/svgp_parallel.py [--steps 20] [--without-fix]

Prints one line per backend and exits non-zero if a worker's predictions differ from
the local ones (or if the model cannot be sent: the failure this package fixes).
"""
from __future__ import annotations

import argparse
import sys


def predict(model, x):
    mean, var = model.predict_f(x)
    return mean.numpy(), var.numpy()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--without-fix", action="store_true", help="do not import tfp_picklefix")
    args = parser.parse_args(argv)
    if not args.without_fix:
        import tfp_picklefix  # noqa: F401

    import multiprocessing

    import gpflow
    import numpy as np
    import tensorflow as tf
    from joblib import Parallel, delayed

    N = 2000
    rng = np.random.RandomState(123)
    X = rng.rand(N, 1) * 10
    Y = (np.sin(X) + 0.5 * rng.randn(N, 1) > 0).astype(float)
    model = gpflow.models.SVGP(gpflow.kernels.Matern12(), gpflow.likelihoods.Bernoulli(),
                               inducing_variable=X[:50].copy(), num_data=N)
    loss = model.training_loss_closure((X, Y), compile=True)
    optimizer = tf.optimizers.Adam(0.01)
    for _ in range(args.steps):
        optimizer.minimize(loss, model.trainable_variables)

    chunks = np.array_split(np.linspace(-1, 11, 60)[:, None], 3)
    local = [predict(model, c) for c in chunks]
    results = {}
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results["multiprocessing spawn"] = pool.starmap(predict, [(model, c) for c in chunks])
    results["joblib loky"] = Parallel(n_jobs=2, backend="loky")(
        delayed(predict)(model, c) for c in chunks)
    ok = True
    for backend, got in results.items():
        diff = max(float(np.max(np.abs(a - b))) for pair_l, pair_g in zip(local, got)
                   for a, b in zip(pair_l, pair_g))
        ok &= diff < 1e-9
        print(f"{backend}: {len(got)} chunks predicted in workers, max |difference| = {diff:.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
