"""F19: TF's lazily loaded modules (``tf.keras`` from TF 2.15: a ``KerasLazyLoader``).

Before TF 2.16 they had no reduction of their own, so no function that cloudpickle
writes by value (one defined in ``__main__`` or a notebook) pickled when it refers to
``tf.keras`` through a global bound to it (``tfk = tf.keras``, ``from tensorflow
import keras``), as TFP's tutorials write the posterior and prior functions of
``tfp.layers.DenseVariational``: ``cannot pickle 'KerasLazyLoader' object``. The
package gives them the reduction TF 2.16 added: the module it loads, by name.
"""
from __future__ import annotations

import pytest

from conftest import has_module, has_tf, run_python

pytestmark = pytest.mark.skipif(not (has_tf() and has_module("cloudpickle")),
                                reason="needs TensorFlow and cloudpickle")

WRITE = """
import sys
import cloudpickle
import tfp_picklefix  # noqa: F401  (applied when TFP is imported)
import tensorflow as tf
import tensorflow_probability  # noqa: F401
tfk = tf.keras
def make_layer():
    return tfk.layers.Dense(3)
print("lazy" if type(tfk).__name__.endswith("LazyLoader") else "module")
open(sys.argv[1], "wb").write(cloudpickle.dumps(make_layer))
"""
READ = """
import pickle, sys
make_layer = pickle.loads(open(sys.argv[1], "rb").read())
print(type(make_layer()).__name__)
"""
OWN_REDUCTION = """
from tensorflow.python.util import lazy_loader
print("own" if "__reduce__" in vars(lazy_loader.LazyLoader) else "none")
"""


def test_a_function_over_tf_keras_ships_and_loads_without_the_package(tmp_path):
    path = str(tmp_path / "make_layer.pkl")
    written = run_python(WRITE, args=[path])
    assert written.returncode == 0, written.stderr[-3000:]
    read = run_python(READ, args=[path], env={"TFP_PICKLEFIX": "off"})
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.strip().splitlines()[-1] == "Dense", read.stdout
    own = run_python(OWN_REDUCTION, env={"TFP_PICKLEFIX": "off"})
    assert own.returncode == 0, own.stderr[-3000:]
    lazy = written.stdout.strip().splitlines()[0] == "lazy"
    off = run_python(WRITE, args=[str(tmp_path / "off.pkl")], env={"TFP_PICKLEFIX": "off"})
    if lazy and own.stdout.strip() == "none":  # TF 2.15 (mid-0.23): the package's fix
        assert "cannot pickle 'KerasLazyLoader' object" in off.stderr, off.stderr[-3000:]
    else:  # TF's own reduction (TF >= 2.16), or tf.keras is a plain module (TF <= 2.14)
        assert off.returncode == 0, off.stderr[-3000:]
