"""Traced-and-discarded tf.functions through bijectors: do FuncGraphs stay alive?

    python tests/leak_traces.py --scenario chain --n 2000

Prints one JSON line: live FuncGraphs and RSS growth (MB) after N iterations, each
building a new tf.function, tracing it once and dropping it. Scenarios:
``chain`` (Chain forward/inverse/log-dets, tensor made inside), ``chain-arg`` (input
passed as an argument), ``transformed`` (TransformedDistribution sample + log_prob),
``softplus`` (Softplus forward/log-det: TF's own custom_gradient registry holds its
graphs, with or without any cache), ``gpflow`` (GPflow training_loss_closure with
an exp positive transform + one Adam step per new closure).
The cache under test is chosen by TFP_PICKLEFIX_CACHE (with tfp_picklefix imported).
"""
from __future__ import annotations

import argparse
import gc
import json
import os


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def live_funcgraphs() -> int:
    gc.collect()
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "FuncGraph")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="chain",
                        choices=["chain", "chain-arg", "transformed", "softplus", "gpflow"])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--no-package", action="store_true")
    args = parser.parse_args()
    if not args.no_package:
        import tfp_picklefix  # noqa: F401
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfb, tfd = tfp.bijectors, tfp.distributions
    step = None
    if args.scenario in ("chain", "chain-arg"):
        bij = tfb.Chain([tfb.Exp(), tfb.Shift(1.0), tfb.Scale(2.0)])

        def body(x):
            y = bij.forward(x)
            return (bij.inverse(y) + bij.forward_log_det_jacobian(x, event_ndims=0)
                    + bij.inverse_log_det_jacobian(y, event_ndims=0))

        if args.scenario == "chain":
            step = lambda: tf.function(lambda: body(tf.constant([0.5, 1.5])))()  # noqa: E731
        else:
            arg = tf.constant([0.5, 1.5])
            step = lambda: tf.function(body)(arg)  # noqa: E731
    elif args.scenario == "softplus":
        bij = tfb.Softplus()
        step = lambda: tf.function(lambda: bij.forward(tf.constant([0.5])) +  # noqa: E731
                                   bij.forward_log_det_jacobian(tf.constant([0.5]), 0))()
    elif args.scenario == "transformed":
        dist = tfd.TransformedDistribution(tfd.Normal(0.0, 1.0), tfb.Exp())
        step = lambda: tf.function(  # noqa: E731
            lambda: dist.log_prob(dist.sample(3, seed=(1, 2))))()
    else:
        import gpflow

        gpflow.config.set_default_positive_bijector("exp")
        rng = np.random.RandomState(0)
        X = rng.rand(50, 1)
        Y = np.sin(6 * X) + 0.1 * rng.randn(50, 1)
        model = gpflow.models.GPR((X, Y), kernel=gpflow.kernels.SquaredExponential())
        opt = tf.optimizers.Adam(0.01)

        def step():
            opt.minimize(model.training_loss_closure(compile=True), model.trainable_variables)

    step()  # warm-up: one-off allocations (kernels, optimizer slots) are not a leak
    graphs0, rss0 = live_funcgraphs(), rss_mb()
    for _ in range(args.n):
        step()
    graphs, rss = live_funcgraphs(), rss_mb()
    print(json.dumps({"scenario": args.scenario, "n": args.n, "funcgraphs": graphs,
                      "funcgraphs_before": graphs0, "rss_growth_mb": round(rss - rss0, 1)}))


if __name__ == "__main__":
    main()
