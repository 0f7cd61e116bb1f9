"""TFP objects of the JAX and NumPy substrates shipped to worker processes.

    python tests/substrate_workers.py jax|numpy

Builds objects whose shipping needs the package (F1: dispatching ``__new__``; F4/F11:
TFP closures; F7: the substrates' ``tf.Variable`` stand-in, assigned a new value
first), uses them (JAX: inside ``jax.jit``),
then sends each, with standard pickle, to a ``multiprocessing`` spawn worker, and to
joblib's loky and a Dask ``LocalCluster`` where those are installed. The workers do
not import ``tfp_picklefix``. Last stdout line, JSON: backend -> object -> the largest
difference between the worker's log-probs (JAX: and samples, same key) and the
parent's, relative to their size, or the worker's error; plus whether the work ran in
another process.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import sys
from typing import Any, Dict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _namespace(substrate: str) -> Any:
    if substrate == "jax":
        from tensorflow_probability.substrates import jax as tfp
    else:
        from tensorflow_probability.substrates import numpy as tfp
    return tfp


def build(substrate: str) -> Dict[str, Any]:
    tfp = _namespace(substrate)
    tfd, tfb, tfk = tfp.distributions, tfp.bijectors, tfp.math.psd_kernels
    x = np.linspace(0.0, 1.0, 5, dtype=np.float32)[:, None]
    # Not 0-d: TFP 0.25's NumPy Softplus turns a 0-d float32 into float64 under NumPy 1.
    variable = tfp.util.TransformedVariable(np.float32([1.5, 0.5]), tfb.Softplus())
    variable.assign(np.float32([2.5, 0.25]))  # the worker must get the current value
    return {
        "MultivariateNormalDiag": tfd.MultivariateNormalDiag(
            np.zeros(2, np.float32), np.array([1.0, 2.0], np.float32)),
        "TransformedDistribution(Chain)": tfd.TransformedDistribution(
            tfd.Normal(np.float32(0.0), np.float32(1.0)),
            tfb.Chain([tfb.Exp(), tfb.Shift(np.float32(1.0))])),
        "SoftClip": tfd.TransformedDistribution(
            tfd.Normal(np.float32(0.0), np.float32(1.0)),
            tfb.SoftClip(np.float32(0.0), np.float32(1.0))),
        "GaussianProcessRegressionModel": tfd.GaussianProcessRegressionModel(
            tfk.ExponentiatedQuadratic(np.float32(1.5), np.float32(0.7)), index_points=x,
            observation_index_points=x, observations=np.sin(x[:, 0]),
            observation_noise_variance=np.float32(0.1)),
        "Normal(TransformedVariable)": tfd.Normal(np.float32(0.0), variable),
    }


def quantities(substrate: str, dist: Any, points: Any) -> Dict[str, np.ndarray]:
    """The log-probs of ``points`` (and, in JAX, a sample for a fixed key)."""
    out = {"log_prob": np.asarray(dist.log_prob(points))}
    if substrate == "jax":
        import jax

        out["sample"] = np.asarray(dist.sample(seed=jax.random.PRNGKey(7)))
    return out


def task(substrate: str, dist: Any, points: Any) -> Any:
    """What a worker runs (importable by name there): its results and its pid."""
    return {k: v.tolist() for k, v in quantities(substrate, dist, points).items()}, os.getpid()


def task_from_pickle(blob: bytes) -> Any:
    """:func:`task` on arguments the parent wrote with the standard pickle. Loaded here,
    so that a failure comes back as this task's error (a ``multiprocessing`` pool
    whose worker fails to load a task waits for it for ever)."""
    import pickle

    return task(*pickle.loads(blob))


def _points(substrate: str, dist: Any) -> np.ndarray:
    """Three samples, as a new array: the sample itself would be a cache hit here (its
    log-prob inverts it exactly) and a computation in the worker."""
    if substrate == "jax":
        import jax

        return np.array(dist.sample(3, seed=jax.random.PRNGKey(1)))
    return np.array(dist.sample(3, seed=1))


def main(substrate: str) -> Dict[str, Any]:
    import pickle

    sys.path.insert(0, HERE)
    import substrate_workers as me  # workers find ``task`` by this name

    objects = build(substrate)
    points = {name: _points(substrate, dist) for name, dist in objects.items()}
    if substrate == "jax":
        import jax

        for name, dist in objects.items():  # used inside jax.jit before shipping
            jax.jit(lambda p, d=dist: d.log_prob(p))(points[name])
    local = {name: quantities(substrate, dist, points[name]) for name, dist in objects.items()}
    calls = {name: (substrate, dist, points[name]) for name, dist in objects.items()}

    def compare(name: str, got: Any) -> Any:
        values, pid = got
        # Relative to the values' size: another process may run another BLAS path.
        return {"diff": max(float(np.max(np.abs(np.asarray(values[k]) - v))
                                  / max(1.0, float(np.max(np.abs(v)))))
                            for k, v in local[name].items()),
                "in_another_process": pid != os.getpid()}

    def through(run: Any) -> Dict[str, Any]:
        """Each object's row, ``run(args)`` giving the worker's (results, pid)."""
        rows = {}
        for name, args in calls.items():
            try:
                rows[name] = compare(name, run(args))
            except Exception as exc:
                rows[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        return rows

    results: Dict[str, Any] = {}
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        # The standard pickle, as the pool uses; loaded by the task itself.
        results["spawn"] = through(
            lambda args: pool.apply(me.task_from_pickle, (pickle.dumps(args),)))
    try:
        from joblib import Parallel, delayed
    except ImportError:
        pass
    else:  # n_jobs=1 would run it here, in this process
        results["loky"] = through(
            lambda args: Parallel(n_jobs=2, backend="loky")([delayed(me.task)(*args)])[0])
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        pass
    else:
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            results["dask"] = through(
                lambda args: client.submit(me.task, *args, pure=False).result())
    return results


if __name__ == "__main__":
    import tfp_picklefix  # noqa: F401  (TFP_PICKLEFIX=off: what fails without it)
    print(json.dumps(main(sys.argv[1])))
