"""TFP objects built on TFP's own Keras networks, through every serializer: ``glow`` (a
``tfb.Glow`` with ``GlowDefaultNetwork``/``GlowDefaultExitNetwork``, F12) and
``pixelcnn`` (``tfd.PixelCNN``, its network layer written as F10 writes
``AutoregressiveNetwork``): values, variables, networks, one training step, checkpoints.

    python tests/networks_probe.py roundtrip MODEL          # one JSON line per serializer
    python tests/networks_probe.py dump MODEL PATH | load MODEL PATH
                                                       # the standard pickle, across processes

``TFP_PICKLEFIX_PROBE_NETWORK=0`` / ``TFP_PICKLEFIX_PROBE_F11=0``: the package without
its reducers on the model's network classes, or without F11 (Glow's coupling functions
and PixelCNN's weight-norm wrapper are TFP closures).
"""
from __future__ import annotations

import os
import random
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")

import numpy as np  # noqa: E402
from roundtrips import adam_step, run_probe  # noqa: E402

if os.environ.get("TFP_PICKLEFIX_PROBE_IMPORT", "1") == "1" and sys.argv[1] != "load":
    import tfp_picklefix  # noqa: F401

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
from tensorflow_probability.python.distributions import pixel_cnn  # noqa: E402

tfb, tfd = tfp.bijectors, tfp.distributions
MODEL = sys.argv[2]
NETWORKS = {"glow": (tfb.GlowDefaultNetwork, tfb.GlowDefaultExitNetwork),
            "pixelcnn": (pixel_cnn._PixelCNNNetwork,)}[MODEL]
if os.environ.get("TFP_PICKLEFIX_PROBE_NETWORK") == "0":  # without the networks' reducers
    for _cls in NETWORKS:
        for _attribute in ("__reduce_ex__", "__deepcopy__", "__copy__"):
            if _attribute in vars(_cls):
                delattr(_cls, _attribute)
if os.environ.get("TFP_PICKLEFIX_PROBE_F11") == "0":  # the package without F11 alone
    from tfp_picklefix import _reducers

    _reducers.written_by_reference = lambda *args, **kwargs: None
X = np.random.RandomState(0).uniform(-1.0, 1.0, size=(2, 32)).astype(np.float32)
IMAGES = {"glow": np.random.RandomState(2).uniform(-1.0, 1.0, size=(2, 4, 4, 2)),
          "pixelcnn": np.random.RandomState(2).randint(0, 256, size=(2, 4, 4, 1))
          }[MODEL].astype(np.float32)


def build():
    # The same model in every run: Keras's initializers without a seed draw theirs from
    # Python's random module.
    random.seed(5)
    tf.random.set_seed(5)
    if MODEL == "glow":
        glow = tfb.Glow(output_shape=(4, 4, 2), num_glow_blocks=2, num_steps_per_block=1,
                        coupling_bijector_fn=tfb.GlowDefaultNetwork,
                        exit_bijector_fn=tfb.GlowDefaultExitNetwork)
        dist = tfd.TransformedDistribution(tfd.Sample(tfd.Normal(0.0, 1.0), [32]), glow)
    else:
        dist = tfd.PixelCNN(image_shape=(4, 4, 1), num_resnet=1, num_hierarchies=1,
                            num_filters=4, num_logistic_mix=2)
    dist.log_prob(IMAGES)  # initializes Glow's activation normalizations
    rng = np.random.RandomState(1)
    # Leave the zeros Glow starts its networks with; by little enough that its values stay
    # finite through the training step (by 0.1 they overflowed, and NaN compares unequal).
    for v in dist.trainable_variables:
        v.assign(v + 0.03 * rng.standard_normal(v.shape).astype(v.dtype.as_numpy_dtype))
    return dist


def networks(dist):
    return [m for m in dist.submodules if isinstance(m, NETWORKS)]


def values(dist):
    if MODEL == "pixelcnn":
        tf.random.set_seed(7)  # its sampler takes an int seed: the same draw again
        return [dist.log_prob(IMAGES), dist.sample(seed=3)]
    glow = dist.bijector
    y = glow.forward(X)
    return [y, glow.inverse(tf.identity(y)), dist.log_prob(IMAGES),
            glow.forward_log_det_jacobian(X, event_ndims=1)]


def finite(vals):
    """``vals``, which are compared as equal below: a NaN there would compare unequal,
    an infinity equal to any other."""
    if not all(np.all(np.isfinite(v)) for v in vals):
        raise FloatingPointError("the probe's model computed values that are not finite")
    return vals


def train_step(dist):
    adam_step(lambda: -tf.reduce_mean(dist.log_prob(IMAGES)), dist.trainable_variables, 0.01)
    return [v.numpy() for v in dist.trainable_variables]


def checkpoint_keys(dist):
    path = tf.train.Checkpoint(flow=dist).write(os.path.join(tempfile.mkdtemp(), "ckpt"))
    return sorted(name for name, _ in tf.train.list_variables(path)), path


def same_network(a, b):
    same = (type(a) is type(b) and sorted(vars(a)) == sorted(vars(b))
            and [w.shape for w in a.weights] == [w.shape for w in b.weights])
    if MODEL == "glow":  # made again from their layers' configs: the same names too
        same = same and a.name == b.name and a.get_config() == b.get_config()
    return same


def check(original, clone, shallow):
    out = {}
    for a, b in zip(finite(values(original)), values(clone)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    old, new = original.variables, clone.variables
    out["variables"] = [len(old), len(new)]
    out["shared"] = sum(a is b for a, b in zip(old, new))
    out["equal"] = all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(old, new))
    nets, new_nets = networks(original), networks(clone)
    out["networks"] = [len(nets), len(new_nets)]
    out["same_networks"] = all(same_network(a, b) for a, b in zip(nets, new_nets))
    keys, path = checkpoint_keys(original)
    out["same_checkpoint_keys"] = keys == checkpoint_keys(clone)[0]
    tf.train.Checkpoint(flow=clone).read(path).assert_consumed()
    out["restored"] = True
    if not shallow:
        # Trained side by side, they stay equal.
        trained_a, trained_b = train_step(original), train_step(clone)
        out["trained_equal"] = all(np.allclose(a, b, rtol=1e-5, atol=1e-6)
                                   for a, b in zip(trained_a, trained_b))
        # The copy computes with its own networks: changing the original's weights
        # leaves the copy's values as they were.
        before = finite(values(clone))
        for v in original.trainable_variables:
            v.assign(v * 2.0 + 0.5)
        out["independent"] = all(np.allclose(a, b, rtol=1e-6, atol=1e-6)
                                 for a, b in zip(before, values(clone)))
    return out


def main():
    run_probe(sys.argv[1], build, check, values, sys.argv[3] if len(sys.argv) > 3 else "")


if __name__ == "__main__":
    main()
