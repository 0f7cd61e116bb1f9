"""A MaskedAutoregressiveFlow with TFP's Keras AutoregressiveNetwork, through every
serializer (F10): values, variables, one training step, checkpoints.

    python tests/flows_probe.py roundtrip [INPUT_ORDER [HIDDEN_DEGREES]]   # a JSON line each
    python tests/flows_probe.py dump PATH | load PATH     # the standard pickle, across processes
"""
from __future__ import annotations

import os
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

tfb, tfd = tfp.bijectors, tfp.distributions
if os.environ.get("TFP_PICKLEFIX_PROBE_F10") == "0":  # the package without F10 alone
    for _attribute in ("__reduce_ex__", "__copy__"):
        if _attribute in vars(tfb.AutoregressiveNetwork):
            delattr(tfb.AutoregressiveNetwork, _attribute)
X = np.float32([[0.1, 0.2, 0.3], [-0.4, 0.5, 1.5]])


def build(order="left-to-right", degrees="equal"):
    tf.random.set_seed(3)
    made = tfb.AutoregressiveNetwork(params=2, hidden_units=[8], event_shape=[3],
                                     input_order=order, hidden_degrees=degrees,
                                     activation="relu")
    flow = tfb.Chain([tfb.MaskedAutoregressiveFlow(shift_and_log_scale_fn=made),
                      tfb.Permute([2, 0, 1])])
    dist = tfd.TransformedDistribution(tfd.Sample(tfd.Normal(0.0, 1.0), [3]), flow)
    dist.log_prob(X)  # builds the network
    return dist


def network(dist):
    return dist.bijector.bijectors[0].parameters["shift_and_log_scale_fn"]


def values(dist):
    y = dist.bijector.forward(X)
    return [y, dist.bijector.inverse(tf.identity(y)), dist.log_prob(X),
            dist.bijector.forward_log_det_jacobian(X, event_ndims=1)]


def train_step(dist):
    """One Adam step; Keras applies the masks' kernel constraints after it."""
    adam_step(lambda: -tf.reduce_mean(dist.log_prob(X)), dist.trainable_variables, 0.1)
    return [v.numpy() for v in network(dist).weights]


def checkpoint_keys(dist):
    path = tf.train.Checkpoint(flow=dist).write(os.path.join(tempfile.mkdtemp(), "ckpt"))
    return sorted(name for name, _ in tf.train.list_variables(path)), path




def check(original, clone, shallow):
    out = {}
    for a, b in zip(values(original), values(clone)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    old, new = network(original).weights, network(clone).weights
    out["variables"] = [len(old), len(new)]
    out["shared"] = sum(a is b for a, b in zip(old, new))
    out["equal"] = all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(old, new))
    mine, theirs = vars(network(original)), vars(network(clone))
    out["same_attributes"] = sorted(mine) == sorted(theirs) and all(
        type(mine[k]) is type(theirs[k]) for k in mine)  # nothing lost or changed in kind
    keys, path = checkpoint_keys(original)
    out["same_checkpoint_keys"] = keys == checkpoint_keys(clone)[0]
    tf.train.Checkpoint(flow=clone).read(path).assert_consumed()
    out["restored"] = True
    if not shallow:
        # Trained side by side, they stay equal: same gradients, same masks.
        masks = [np.asarray(m) for m in network(original)._masks]
        out["same_masks"] = all(np.array_equal(a, np.asarray(b)) for a, b in
                                zip(masks, network(clone)._masks))
        trained_a, trained_b = train_step(original), train_step(clone)
        out["trained_equal"] = all(np.allclose(a, b, rtol=1e-6, atol=1e-7)
                                   for a, b in zip(trained_a, trained_b))
        kernels = [w for w in trained_b if w.ndim == 2]
        out["masked_kernels_zero"] = all(not np.any(k[~m]) for k, m in zip(kernels, masks))
    return out


def main():
    action = sys.argv[1]
    if action == "roundtrip":
        order = sys.argv[2] if len(sys.argv) > 2 else "left-to-right"
        degrees = sys.argv[3] if len(sys.argv) > 3 else "equal"
        run_probe(action, lambda: build(order, degrees), check, values)
    else:
        run_probe(action, build, check, values, sys.argv[2])


if __name__ == "__main__":
    main()
