"""Keras models compiled with ``tfp.optimizer.VariationalSGD`` through pickle, copy,
deepcopy and Keras's own saving (F23), beside the same models compiled with Keras's own
Adam (the control: what Keras keeps of an optimizer in each format).

    python tests/optimizers_probe.py
        -> one JSON line {"MODEL/OPTIMIZER": {serializer: outcome}}

Models: ``dense``, one ``Dense`` layer in float64, and ``distribution``, a ``Dense`` layer
and a TFP ``DistributionLambda`` (float32; on TF 2.5's Keras it is pickled by F17).
VariationalSGD is given its arguments as Python numbers (float32 tensors) in
``distribution``, and in ``dense`` its two learning rates as NumPy float64 values
(written as Python numbers alone, they would come back as float32; TFP's own checks
refuse its other arguments in other dtypes than those of Python numbers), and a
``clipnorm`` (Keras's base optimizer's setting, which its constructor does not take);
the control, Adam, too.
``keras`` loads ``distribution`` with ``safe_mode=False`` where Keras has a safe mode
(its DistributionLambda's function is written as a Lambda's), ``dense`` in safe mode. Each model is
trained 3 epochs, copied, and then the original and the copy are trained one more
epoch. Outcome: ``ok (state kept)`` when the copy's optimizer is of the same class and
config, its arguments have the same dtypes and values, its variables (step count,
slots) equal the original's, and the copy's weights after that epoch are bitwise those
of the original; ``ok (state dropped)`` when the copy's optimizer has no variables yet
(Keras writes none in that format) and its weights after that epoch are bitwise those
of the original's weights trained by a new optimizer made with the original's
arguments; ``ok (the same optimizer)`` when the copy shares it (Python's shallow copy
of a model on TF 2.5's Keras, which defines no copy of its own); otherwise the
difference or the error.
"""
from __future__ import annotations

import copy
import inspect
import json
import os
import pickle
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402

import tfp_picklefix  # noqa: E402,F401

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from tensorflow_probability.python.optimizer import variational_sgd  # noqa: E402

# The Keras TFP's optimizer subclasses: tf-keras (TFP >= 0.24), else TF's own.
keras = getattr(variational_sgd, "tf_keras", None) or tf.keras
# The control: Keras's own Adam of the same base as TFP's optimizer (Keras 2.11 on: the
# legacy one; Keras 2.9 has a ``legacy`` Adam too, but loads its ``optimizers.Adam``).
ADAM = next(cls for cls in (keras.optimizers.Adam, getattr(keras.optimizers, "legacy", None)
                            and keras.optimizers.legacy.Adam)
            if cls is not None and issubclass(cls, variational_sgd.VariationalSGD.__mro__[1]))
tfd = tfp.distributions

RNG = np.random.RandomState(0)
X = RNG.normal(size=(8, 2))
Y = X.sum(axis=1, keepdims=True) * 0.3 + 0.1
ARGUMENTS = ("batch_size", "total_num_examples", "max_learning_rate",
             "preconditioner_decay_rate", "burnin", "burnin_max_learning_rate")


def normal_mean(t):
    return tfd.Normal(t[..., :1], tf.nn.softplus(t[..., 1:]) + 0.1)


def make_model(name):
    if name == "dense":
        return keras.Sequential([keras.layers.Dense(1, input_shape=(2,), dtype="float64",
                                                    kernel_initializer="ones")])
    return keras.Sequential([
        keras.layers.Dense(2, input_shape=(2,), kernel_initializer="ones"),
        tfp.layers.DistributionLambda(normal_mean, convert_to_tensor_fn=tfd.Distribution.mean)])


def make_optimizer(name):
    if name == "Adam":
        optimizer = ADAM(0.05)
        optimizer.clipnorm = 1.0
        return optimizer
    if name == "VariationalSGD-float64":
        optimizer = tfp.optimizer.VariationalSGD(
            batch_size=4, total_num_examples=16,
            max_learning_rate=np.float64(0.3), burnin=2,
            burnin_max_learning_rate=np.float64(0.1), preconditioner_decay_rate=0.9)
        optimizer.clipnorm = 1.0  # a setting of Keras's base optimizer, not an argument
        return optimizer
    return tfp.optimizer.VariationalSGD(batch_size=4, total_num_examples=16, burnin=2,
                                        burnin_max_learning_rate=0.1)


CASES = (("dense", "Adam"), ("dense", "VariationalSGD-float64"),
         ("distribution", "Adam"), ("distribution", "VariationalSGD"))


def fit(model, epochs):
    model.fit(X, Y.astype(model.dtype), epochs=epochs, batch_size=4, shuffle=False, verbose=0)


def _arguments(optimizer):
    """VariationalSGD's arguments, as (dtype, value) (none for Keras's own)."""
    return {key: (tf.as_dtype(getattr(optimizer, f"_{key}").dtype).name,
                  np.asarray(getattr(optimizer, f"_{key}")).tolist())
            for key in ARGUMENTS if hasattr(optimizer, f"_{key}")}


def _saved(suffix):
    def roundtrip(model):
        path = os.path.join(tempfile.mkdtemp(), "model" + suffix)
        model.save(path)
        # The DistributionLambda's function is written as Keras writes a Lambda's, which
        # Keras's safe mode refuses (Keras >= 2.13); the optimizer writes no code.
        trusted = {"safe_mode": False} if _has_safe_mode() and len(model.layers) > 1 else {}
        return keras.models.load_model(path, **trusted)
    return roundtrip


def _has_safe_mode():
    return "safe_mode" in inspect.signature(keras.models.load_model).parameters


SERIALIZERS = [("pickle", lambda o: pickle.loads(pickle.dumps(o))), ("copy", copy.copy),
               ("deepcopy", copy.deepcopy), ("keras", _saved(".keras")), ("h5", _saved(".h5"))]


def cell(model_name, optimizer_name, roundtrip):
    tf.random.set_seed(0)
    model = make_model(model_name)
    model.compile(optimizer=make_optimizer(optimizer_name), loss="mse")
    fit(model, 3)
    weights = model.get_weights()
    clone = roundtrip(model)
    original, copied = model.optimizer, clone.optimizer
    if copied is original:  # Python's shallow copy of a model where Keras defines none
        return "ok (the same optimizer)"
    if type(copied) is not type(original):
        return f"another optimizer: {type(copied).__name__}"
    if copied.get_config() != original.get_config():
        return f"another config: {copied.get_config()} != {original.get_config()}"
    if _arguments(copied) != _arguments(original):
        return f"other arguments: {_arguments(copied)} != {_arguments(original)}"
    kept = len(copied.weights) > 0
    if kept:
        if [w.shape for w in copied.weights] != [w.shape for w in original.weights] or not all(
                np.array_equal(a.numpy(), b.numpy())
                for a, b in zip(copied.weights, original.weights)):
            return "other optimizer variables"
        reference = model
    else:  # Keras wrote no optimizer variables: as a new optimizer of the same arguments
        reference = make_model(model_name)
        reference.set_weights(weights)
        reference.compile(optimizer=make_optimizer(optimizer_name), loss="mse")
    fit(reference, 1)
    fit(clone, 1)
    if not all(np.array_equal(a, b) for a, b in zip(clone.get_weights(), reference.get_weights())):
        return "trains on otherwise"
    return "ok (state kept)" if kept else "ok (state dropped)"


def main():
    table = {}
    for model_name, optimizer_name in CASES:
        row = {}
        for ser, roundtrip in SERIALIZERS:
            try:
                row[ser] = cell(model_name, optimizer_name, roundtrip)
            except Exception as exc:
                row[ser] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
        table[f"{model_name}/{optimizer_name}"] = row
    print(json.dumps(table))


if __name__ == "__main__":
    main()
