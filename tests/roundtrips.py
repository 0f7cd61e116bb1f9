"""The five ways the probe scripts copy or ship an object (they run as
``python tests/<probe>.py``, which puts ``tests/`` on the path)."""
from __future__ import annotations

import copy
import pickle
from typing import Any


def _cloudpickle(obj: Any) -> Any:
    import cloudpickle

    return cloudpickle.loads(cloudpickle.dumps(obj))


def _dill(obj: Any) -> Any:
    import dill

    return dill.loads(dill.dumps(obj))


SERIALIZERS = {
    "pickle": lambda obj: pickle.loads(pickle.dumps(obj)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "cloudpickle": _cloudpickle,
    "dill": _dill,
}


def run_probe(action: str, build: Any, check: Any, values: Any, path: str = "") -> None:
    """What a model probe does (``flows_probe``, ``networks_probe``), one JSON line each:
    ``roundtrip`` (a fresh ``build()`` through each serializer, then ``check(original,
    copy, shallow)``), ``dump`` (a model and its ``values`` to ``path``, standard pickle)
    or ``load`` (the same values again, in a process that may lack the package)."""
    import json
    import sys

    import numpy as np

    if action == "roundtrip":
        for name, roundtrip in SERIALIZERS.items():
            try:
                original = build()
                result = check(original, roundtrip(original), shallow=name == "copy")
            except Exception as exc:
                result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(json.dumps({name: result}), flush=True)
    elif action == "dump":
        model = build()
        with open(path, "wb") as f:
            pickle.dump([model, [np.asarray(v) for v in values(model)]], f)
        print(json.dumps({"dumped": True}))
    elif action == "load":
        with open(path, "rb") as f:
            clone, expected = pickle.load(f)
        for a, b in zip(expected, values(clone)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        print(json.dumps({"loaded": True, "package": "tfp_picklefix" in sys.modules}))


def adam_step(loss_fn: Any, variables: Any, learning_rate: float) -> None:
    """One step of tf-keras's Adam on ``variables`` (Keras applies their constraints)."""
    import tensorflow as tf
    try:
        from tensorflow_probability.python.internal import tf_keras
    except ImportError:  # TFP <= 0.23 uses TF's own Keras
        tf_keras = tf.keras

    opt = tf_keras.optimizers.Adam(learning_rate)
    with tf.GradientTape() as tape:
        loss = loss_fn()
    opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
