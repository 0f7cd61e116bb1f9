"""Issue 4, point 9 (stretch), and F15: tf-keras models with tfp.layers.

Keras pickles, copies and saves a model through its own saving format (``get_config``
and the registry of serializable classes), not through TFP's objects. TFP's
distribution layers that have neither a config of their own nor a registration get
both from this package (F15); the variational layers get their registration and
functions written so that they can be read back (F16); what still fails is checked to
fail for the reason the README gives, so that the README stays true when TFP or Keras
change.
"""
from __future__ import annotations

import pickle

import pytest

from conftest import (LAYERS_PICKLED_WHOLE, global_substrates, has_keras_2, keras_2_version,
                      probe_rows, run_python)

pytestmark = pytest.mark.skipif(not ("tf" in global_substrates() and has_keras_2()),
                                reason="Keras 2 (tf-keras, or TF <= 2.15's keras) with TFP >= 0.12")

# Keras's safe mode (``load_model`` of a ``.keras`` file, by default) refuses the Python
# lambda that TFP's own configs pickle (``make_distribution_fn``, ``function``), from
# Keras 2.13. Keras 2.12's lets them through (measured with TFP 0.20): those cells pass.
UNSAFE = "deserialization of a Lambda layer with a Python `lambda`"

SAFE_MODE_REFUSES_LAMBDAS = (keras_2_version() or (0, 0)) >= (2, 13)
# Keras 2.7-2.10 pickle and copy a model by saving it as a SavedModel (F17), and their
# base layer makes no config of the constructor's arguments: a layer that takes
# arguments needs a get_config of its own, which VariableLayer (F15) and
# DenseVariational (F16) have only with the package (Keras 2.9, on mid-0.17).
SAVED_MODEL_KERAS = (2, 7) <= (keras_2_version() or (0, 0)) < (2, 11)
# Keras 2.11 pickles and copies a model in its first (experimental) `.keras` format,
# whose serializer refuses the Python lambdas in TFP's layer configs (F17 too).
LAMBDA_REFUSING_KERAS = (keras_2_version() or (0, 0))[:2] == (2, 11)
F17_KERAS = SAVED_MODEL_KERAS or LAMBDA_REFUSING_KERAS
# ("Layer VariableLayer has arguments ['self', ...] in `__init__` and therefore must
# override `get_config()`", which the probe cuts short; Keras 2.10 leaves out 'self')
NO_CONFIG = "has arguments ["
# The later Keras's: it makes a config of the constructor's arguments only when each is
# a plain value (not ``dtype=tf.float64``, nor an initializer object).
NOT_PLAIN = "non-serializable argument values"
# The layers of which Keras makes no config without the package: VariableLayer given
# objects, DenseVariational (whose arguments are user functions) on every Keras.
NO_KERAS_CONFIG = {layer: (NOT_PLAIN, NO_CONFIG) for layer in (
    "VariableLayer-objects", "DenseVariational", "DenseVariational-mc")}
# F17's cause: the SavedModel's trace of a TFP distribution layer's call (Keras
# 2.7-2.10), Keras 2.11's serializer meeting a lambda.
TRACE = "Iterating over a symbolic `tf.Tensor` is not allowed"
LAMBDA = "`lambda` objects cannot be serialized"


def _keras_cell(row, refused):
    """The ``.keras`` cell (safe mode): refused for ``refused`` where Keras's safe mode
    refuses pickled functions, loaded where it does not."""
    outcome = row.pop("keras")
    return refused in outcome if SAFE_MODE_REFUSES_LAMBDAS else outcome == "ok"


# F16: the variational layers' functions (DenseVariational's: its arguments), written
# with TFP's cloudpickle helper, which Keras's safe mode does not run.
F16 = ("DenseFlipout", "DenseFlipout-relu", "DenseReparameterization",
       "DenseLocalReparameterization", "Convolution2DFlipout", "Convolution1DReparameterization",
       "DenseVariational", "DenseVariational-mc")
UNSAFE_F16 = "written with cloudpickle"
# F18: TFP's KL penalty towards a prior, as a distribution layer's activity regularizer
# (TFP's own config, F15's) or a layer of its own: configs that hold it, and its own
# (its prior written with TFP's cloudpickle helper, which Keras's safe mode does not run).
F18 = ("KLDivergenceRegularizer", "MultivariateNormalTriL-kl", "KLDivergenceAddLoss")
# Without the package: the copy computes without its KL loss (the layer's config left
# the regularizer out), in Keras's HDF5 format on every Keras.
LOST = "values differ"
# F15: Keras's registry and a config that gives the constructor its arguments.
F15 = ("MultivariateNormalTriL", "MultivariateNormalTriL-mean", "OneHotCategorical",
       "CategoricalMixtureOfOneHotCategorical", "MixtureSameFamily", "VariableLayer",
       "VariableLayer-objects", "WeightNorm", "WeightNorm-no-data-init")
# F15's cause: Keras finds no class by the name, or (Keras 2.12, MixtureSameFamily)
# cannot write the config that holds the component layer itself.
UNFIXED = ("must be an instance of class Layer", "Unknown layer",
           "Object of type IndependentNormal is not JSON serializable")
# Keras 2.7-2.11, without the package: pickle and copy fail in the SavedModel's trace
# (F17), or load F16's layers as another class (not registered), and VariableLayer and
# DenseVariational have no config (above); nor on any Keras with objects or functions
# as arguments (NO_KERAS_CONFIG).
UNFIXED_SAVED_MODEL = ((TRACE, "another class", NO_CONFIG) if SAVED_MODEL_KERAS
                       else (LAMBDA,) if LAMBDA_REFUSING_KERAS else ())


def test_tfp_layers_models():
    table = probe_rows("tests/layers_probe.py", *("-" + name for name in LAYERS_PICKLED_WHOLE))
    for layer in ("DistributionLambda", "IndependentNormal", "MixtureSameFamily", "VariableLayer",
                  "VariableLayer-objects"):
        # Their configs hold TFP's pickled lambdas (VariableLayer: the IndependentNormal
        # after it): not in Keras's safe mode.
        row = dict(table[layer])
        assert _keras_cell(row, UNSAFE), (layer, table[layer])
        assert set(row.values()) == {"ok"}, (layer, table[layer])
    for layer in F15:
        if layer not in ("MixtureSameFamily", "VariableLayer", "VariableLayer-objects"):
            assert set(table[layer].values()) == {"ok"}, (layer, table[layer])
    for layer in F16:
        row = dict(table[layer])
        assert _keras_cell(row, UNSAFE_F16), (layer, table[layer])
        assert set(row.values()) == {"ok"}, (layer, table[layer])
    for layer in F18:
        row = dict(table[layer])
        outcome = row.pop("keras")
        assert (any(reason in outcome for reason in (UNSAFE, UNSAFE_F16))
                if SAFE_MODE_REFUSES_LAMBDAS else outcome == "ok"), (layer, table[layer])
        assert set(row.values()) == {"ok"}, (layer, table[layer])


@pytest.mark.without_fix
def test_f18_without_the_package_a_copy_loses_its_kl_loss_or_fails():
    """The KL rows with the package off: no cell passes, and a model whose distribution
    layer has a KLDivergenceRegularizer comes back from Keras's HDF5 format without it,
    silently (its loss is gone)."""
    table = probe_rows("tests/layers_probe.py", *F18, env={"TFP_PICKLEFIX": "off"})
    assert set(table) == set(F18)
    for layer, row in table.items():
        assert "ok" not in row.values(), (layer, row)
    assert table["KLDivergenceRegularizer"]["h5"] == LOST, table


@pytest.mark.without_fix
def test_f15_f16_layers_fail_without_the_package():
    """The same models, with the package off: every F15 and F16 cell fails, Keras
    finding no class by the layer's name."""
    table = probe_rows("tests/layers_probe.py", *F15, *F16, env={"TFP_PICKLEFIX": "off"})
    assert set(table) == set(F15) | set(F16)
    for layer, row in table.items():
        reasons = UNFIXED + UNFIXED_SAVED_MODEL + NO_KERAS_CONFIG.get(layer, ())
        for serializer, outcome in row.items():
            assert any(reason in outcome for reason in reasons), (layer, serializer, outcome)


WRITE = """
import pickle, sys, numpy as np
import tfp_picklefix
import tensorflow_probability as tfp
try:
    import tf_keras as keras
except ImportError:  # TF <= 2.15: its own Keras 2
    from tensorflow import keras
cls = tfp.layers.MultivariateNormalTriL
model = keras.Sequential([keras.layers.Dense(cls.params_size(2), input_shape=(3,)), cls(2)])
x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
open(sys.argv[1], "wb").write(pickle.dumps(model))
np.save(sys.argv[1] + ".npy", np.asarray(model(x).mean()))
"""
READ = """
import pickle, sys, numpy as np
import tfp_picklefix
import tensorflow_probability as tfp
tfp.layers.DistributionLambda  # Keras finds TFP's layers once tfp.layers is imported
x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
try:
    model = pickle.loads(open(sys.argv[1], "rb").read())
except Exception as exc:
    print("ERROR", type(exc).__name__, exc)
else:
    print("SAME" if np.allclose(np.asarray(model(x).mean()), np.load(sys.argv[1] + ".npy"))
          else "DIFFERENT")
"""


def test_f15_model_loads_in_another_process(tmp_path):
    """A model pickled with the package loads in a fresh process that imports it (and
    tfp.layers, as TFP's own registered layers need); with the package off, it does not."""
    path = str(tmp_path / "model.pkl")
    written = run_python(WRITE, args=[path])
    assert written.returncode == 0, written.stderr[-3000:]
    read = run_python(READ, args=[path])
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.strip().splitlines()[-1] == "SAME", read.stdout
    off = run_python(READ, args=[path], env={"TFP_PICKLEFIX": "off"})
    assert any(reason in off.stdout for reason in UNFIXED), off.stdout


VARIABLE_WRITE = """
import sys, numpy as np
import tfp_picklefix
import tensorflow as tf
import tensorflow_probability as tfp
try:
    import tf_keras as keras
except ImportError:  # TF <= 2.15: its own Keras 2
    from tensorflow import keras
tfl = tfp.layers
layer = tfl.VariableLayer(4, dtype=tf.float64, activation=keras.activations.softplus,
                          initializer=tfl.BlockwiseInitializer(
                              ["zeros", keras.initializers.Constant(0.54)], sizes=[2, 2]),
                          input_shape=(3,))
model = keras.Sequential([layer])
model.save(sys.argv[1])
np.save(sys.argv[1] + ".npy", np.asarray(model(np.ones((2, 3), np.float32))))
"""
VARIABLE_READ = """
import sys, numpy as np
import tensorflow_probability as tfp
try:
    import tf_keras as keras
except ImportError:  # TF <= 2.15: its own Keras 2
    from tensorflow import keras
model = keras.models.load_model(sys.argv[1], custom_objects={"VariableLayer": tfp.layers.VariableLayer})
out = np.asarray(model(np.ones((2, 3), np.float32)))
want = np.load(sys.argv[1] + ".npy")
print("SAME" if out.dtype == want.dtype and np.array_equal(out, want) else f"DIFFERENT {out} {want}")
"""


def test_a_variable_layer_saved_with_the_package_loads_without_it(tmp_path):
    """F15's config of a VariableLayer holds only its constructor's arguments, as Keras
    writes them: Keras's own ``from_config`` reads it where the package is not there
    (given the class, which TFP does not register)."""
    path = str(tmp_path / "model.h5")
    written = run_python(VARIABLE_WRITE, args=[path])
    assert written.returncode == 0, written.stderr[-3000:]
    read = run_python(VARIABLE_READ, args=[path], env={"TFP_PICKLEFIX": "off"})
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.strip().splitlines()[-1] == "SAME", read.stdout


F17_WRITE = """
import pickle, sys, numpy as np
import tfp_picklefix
import tensorflow_probability as tfp
from tensorflow import keras
model = keras.Sequential([keras.layers.Dense(tfp.layers.IndependentNormal.params_size(2),
                                             input_shape=(3,)), tfp.layers.IndependentNormal(2)])
x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
data = pickle.dumps(model)
assert b"tfp_picklefix" not in data
open(sys.argv[1], "wb").write(data)
np.save(sys.argv[1] + ".npy", np.asarray(model(x).mean()))
"""


@pytest.mark.skipif(not F17_KERAS, reason="Keras 2.7-2.11 (pickle a model as a SavedModel, "
                    "or in a format that refuses lambdas)")
@pytest.mark.without_fix
def test_f17_without_the_package_such_models_fail_in_the_saved_model_trace(tmp_path):
    """F17: Keras 2.7-2.10 pickle, copy and deep-copy a model by saving it as a
    SavedModel, whose trace of a TFP distribution layer fails; Keras 2.11 in a format
    whose serializer refuses the lambda in most of TFP's layer configs. Without the
    package every such cell fails (with it they pass: test_tfp_layers_models). A pickle
    written with it names neither it nor anything of TFP's but ``tfp.layers``, and loads
    in a process without it (``IndependentNormal`` is registered by TFP itself)."""
    # Keras 2.11 writes DistributionLambda(normal_from), a named function, as it is.
    layers = ("IndependentNormal", "MixtureSameFamily") + (
        ("DistributionLambda",) if SAVED_MODEL_KERAS else ())
    table = probe_rows("tests/layers_probe.py", *layers, env={"TFP_PICKLEFIX": "off"})
    assert set(table) == set(layers)
    for layer, row in table.items():
        for serializer in ("pickle", "copy", "deepcopy"):
            assert (TRACE if SAVED_MODEL_KERAS else LAMBDA) in row[serializer], (
                layer, serializer, row[serializer])
    path = str(tmp_path / "model.pkl")
    written = run_python(F17_WRITE, args=[path])
    assert written.returncode == 0, written.stderr[-3000:]
    read = run_python(READ, args=[path], env={"TFP_PICKLEFIX": "off"})
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.strip().splitlines()[-1] == "SAME", read.stdout
