"""Load the SVGP pickled by svgp_pickle.py, in a process that never imports tfp_picklefix.

Checks that the loaded model predicts exactly what the original predicted, and that
it can be trained further with a gradient for every trainable variable.
"""
from __future__ import annotations

import pickle
import sys


def main(path: str) -> int:
    import numpy as np
    import tensorflow as tf

    with open(path, "rb") as f:
        model = pickle.load(f)
    assert "tfp_picklefix" not in sys.modules, "the pickle imported tfp_picklefix"

    ref = np.load(path + ".npz")
    mean, var = model.predict_f(ref["Xtest"])
    np.testing.assert_allclose(mean.numpy(), ref["mean"], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(var.numpy(), ref["var"], rtol=1e-6, atol=1e-9)
    print("loaded model predicts the same mean and variance")

    batch = (tf.constant(ref["X"][:100]), tf.constant(ref["Y"][:100]))
    optimizer = tf.optimizers.Adam(0.01)
    before = model.training_loss(batch).numpy()
    for step in range(5):
        with tf.GradientTape() as tape:
            loss = model.training_loss(batch)
        grads = tape.gradient(loss, model.trainable_variables)
        missing = [v.name for v, g in zip(model.trainable_variables, grads) if g is None]
        assert not missing, f"no gradient for {missing}"
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    after = model.training_loss(batch).numpy()
    assert after < before, (before, after)
    print(f"trained further: every one of {len(model.trainable_variables)} trainable variables "
          f"has a gradient; loss {before:.4f} -> {after:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
