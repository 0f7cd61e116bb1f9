"""tfp_picklefix.diagnose() names the attribute path and the error of each real failure."""
from __future__ import annotations

import pickle

import pytest

import tfp_picklefix

from conftest import LEGACY_ERAS, era, has_gpflow, has_tf, substrates


def test_user_lambda_is_found_with_its_path():
    if not has_tf():
        pytest.skip("needs TensorFlow")
    import tensorflow as tf
    import tensorflow_probability as tfp

    bij = tfp.bijectors.Exp()
    holder = tf.Module()
    holder.scale = tfp.util.DeferredTensor(tf.Variable(1.0), lambda v: 2.0 * v)
    holder.bijector = bij
    with pytest.raises(Exception):
        pickle.dumps(holder)
    report = tfp_picklefix.diagnose(holder, name="holder")
    pickle_problems = [p for p in report.problems if p.operation == "pickle"]
    assert pickle_problems, str(report)
    assert any(p.path.startswith("holder.scale") and "lambda" in p.error for p in pickle_problems), \
        str(report)
    assert "holder.scale" in str(report)


def test_clean_object_has_no_problems():
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    tfb = next(iter(substrates().values())).bijectors
    report = tfp_picklefix.diagnose(tfb.Exp())
    assert not report and "pickles and deep-copies" in str(report)


def test_graph_tensor_in_a_joint_distribution_cache():
    if not has_tf() or era("tf") in LEGACY_ERAS:
        pytest.skip("needs TFP >= 0.12 with TensorFlow")
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfd = tfp.distributions

    def model():
        m = yield tfd.JointDistributionCoroutine.Root(tfd.Normal(0.0, 1.0))
        yield tfd.Normal(m, 1.0)

    jd = tfd.JointDistributionCoroutine(model)
    tf.function(lambda: jd.log_prob(jd.sample(seed=(1, 2))))()
    report = tfp_picklefix.diagnose(jd, name="jd")
    # The graph tensor itself (TF >= 2.14: a SymbolicTensor; TF 2.6-2.13: a plain
    # `Tensor`, which eager tensors are not), or the handle inside it (TF 2.5: a
    # Tensor's TF_Output).
    assert any(p.path.startswith("jd._single_sample_distributions")
               and ("SymbolicTensor" in p.error + p.type_name or "TF_Output" in p.error + p.type_name
                    or p.type_name == "Tensor")
               for p in report.problems), str(report)


def test_unpatched_legacy_cache_is_found(restore_patch_state):
    if not has_gpflow() or era("tf") not in LEGACY_ERAS:
        pytest.skip("needs GPflow on TFP 0.9-0.11")
    import gpflow
    import numpy as np
    import tensorflow as tf

    tfp_picklefix.unpatch()
    X = np.linspace(0, 1, 10)[:, None]
    model = gpflow.models.GPR((X, np.sin(X)), kernel=gpflow.kernels.Matern12())
    x = tf.constant([0.5], dtype=tf.float64)
    y = model.kernel.lengthscales.transform.forward(x)  # x and y alive: the entry stays
    report = tfp_picklefix.diagnose(model, name="model")
    assert any(p.path.startswith("model.kernel") and ("HashableWeakRef" in p.error or "lambda" in p.error)
               for p in report.problems), str(report)
    tfp_picklefix.patch()
    assert not [p for p in tfp_picklefix.diagnose(model).problems if p.operation == "pickle"]
    del x, y
