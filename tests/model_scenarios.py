"""GPflow models and TFP objects across processes, checkpoints and gradients (issue 4, 5/6/8).

    python tests/model_scenarios.py SCENARIO [ARGS]

Scenarios print one JSON line. Worker functions live in ``worker_tasks`` (importable
by name in every worker: PYTHONPATH must hold this directory).
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402

import worker_tasks as wt  # noqa: E402


def _np(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def workers() -> dict:
    """(a) multiprocessing spawn, (b) joblib loky, (c) Dask LocalCluster (processes)."""
    import multiprocessing

    svgp = wt.trained_svgp(steps=5)
    td = wt.transformed_distribution()
    local = {"svgp": _np(wt.svgp_predict(svgp)), "td": _np(wt.td_log_prob(td))}
    out = {}
    backends = os.environ.get("WORKER_BACKENDS", "spawn,loky,dask").split(",")
    if "spawn" in backends:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            out["spawn"] = {"svgp": pool.apply(wt.svgp_predict, (svgp,)),
                            "td": pool.apply(wt.td_log_prob, (td,)),
                            "pid": pool.apply(wt.worker_pid)}
    if "loky" in backends:
        from joblib import Parallel, delayed

        svgp_out, td_out, pid = Parallel(n_jobs=2, backend="loky")(
            [delayed(wt.svgp_predict)(svgp), delayed(wt.td_log_prob)(td), delayed(wt.worker_pid)()])
        out["loky"] = {"svgp": svgp_out, "td": td_out, "pid": pid}
    if "dask" in backends:
        from dask.distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            out["dask"] = {"svgp": client.submit(wt.svgp_predict, svgp, pure=False).result(),
                           "td": client.submit(wt.td_log_prob, td, pure=False).result(),
                           "pid": client.submit(wt.worker_pid, pure=False).result()}
    result = {}
    for backend, got in out.items():
        result[backend] = {k: float(np.max(np.abs(np.asarray(got[k]) - local[k]))) for k in local}
        result[backend]["in_another_process"] = got["pid"] != os.getpid()
    return result


def _modules():
    return {"holder": wt.Holder(), "gpflow": wt.trained_svgp(steps=2)}


def checkpoint_keys(directory: str) -> dict:
    import tensorflow as tf

    out = {}
    for name, module in _modules().items():
        path = tf.train.Checkpoint(model=module).write(os.path.join(directory, name))
        out[name] = sorted(k for k, _ in tf.train.list_variables(path))
    return out


def checkpoint_restore(directory: str) -> dict:
    """A checkpoint written from the original restores into its unpickled copy."""
    import tensorflow as tf

    out = {}
    for name, module in _modules().items():
        clone = pickle.loads(pickle.dumps(module))
        before = [_np(v) for v in module.trainable_variables]
        for v in module.trainable_variables:  # the checkpoint holds these new values
            v.assign(v * 1.5)
        path = tf.train.Checkpoint(model=module).write(os.path.join(directory, name))
        status = tf.train.Checkpoint(model=clone).read(path)
        status.assert_consumed()
        got = [_np(v) for v in clone.trainable_variables]
        want = [_np(v) for v in module.trainable_variables]
        out[name] = {"n": len(got),
                     "restored": all(np.allclose(a, b) for a, b in zip(got, want)),
                     "changed": not all(np.allclose(a, b) for a, b in zip(got, before))}
        if name == "gpflow":
            import gpflow

            frozen = gpflow.utilities.freeze(clone)
            frozen.predict = tf.function(lambda x: frozen.predict_f(x)[0],
                                         input_signature=[tf.TensorSpec([None, 1], tf.float64)])
            tf.saved_model.save(frozen, os.path.join(directory, "saved_gpflow"))
            loaded = tf.saved_model.load(os.path.join(directory, "saved_gpflow"))
            x = np.linspace(0, 1, 5)[:, None]
            out[name]["saved_model"] = bool(np.allclose(_np(loaded.predict(x)),
                                                         _np(clone.predict_f(x)[0])))
        else:
            tf.saved_model.save(clone, os.path.join(directory, "saved_" + name))
            out[name]["saved_model"] = True
    return out


def gradients() -> dict:
    """Gradients before and after a round trip, per model and serializer."""
    import cloudpickle
    import dill

    sers = {"pickle": lambda o: pickle.loads(pickle.dumps(o)), "deepcopy": copy.deepcopy,
            "cloudpickle": lambda o: cloudpickle.loads(cloudpickle.dumps(o)),
            "dill": lambda o: dill.loads(dill.dumps(o))}
    out = {}
    for name, build in wt.GRADIENT_MODELS.items():
        model = build()
        ref = wt.loss_gradients(model)
        out[name] = {}
        for ser, roundtrip in sers.items():
            got = wt.loss_gradients(roundtrip(model))
            out[name][ser] = {
                "n": len(got), "none": sum(g is None for _, g in got),
                "same": len(got) == len(ref) and all(
                    a == b and np.allclose(_np(x), _np(y), rtol=1e-6, atol=1e-9)
                    for (a, x), (b, y) in zip(ref, got))}
    return out


def resume() -> dict:
    """Unpickled mid-training and trained on with the same batches = uninterrupted."""
    out = {}
    for name, build in wt.GRADIENT_MODELS.items():
        straight = build()
        losses = [wt.sgd_step(straight, i) for i in range(6)]
        resumed = build()
        for i in range(3):
            wt.sgd_step(resumed, i)
        resumed = pickle.loads(pickle.dumps(resumed))
        tail = [wt.sgd_step(resumed, i) for i in range(3, 6)]
        out[name] = {"straight": losses[3:], "resumed": tail,
                     "same": bool(np.allclose(losses[3:], tail, rtol=1e-6))}
    return out


if __name__ == "__main__":
    import tfp_picklefix  # noqa: F401  (TFP_PICKLEFIX=off turns it off)

    scenario = sys.argv[1]
    args = sys.argv[2:]
    fn = {"workers": workers, "checkpoint-keys": checkpoint_keys,
          "checkpoint-restore": checkpoint_restore, "gradients": gradients, "resume": resume}[scenario]
    print(json.dumps(fn(*args), default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
