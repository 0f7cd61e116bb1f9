"""A pickle written with the package loads, and caches, in a process that never imports it."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from conftest import LEGACY_ERAS, era, run_python, substrates


@pytest.mark.parametrize("sub", ["tf", "numpy"])
def test_used_bijectors_load_without_the_package(sub, tmp_path):
    if sub not in substrates():
        pytest.skip(f"no {sub} substrate on this stack")
    if era(sub) not in LEGACY_ERAS:
        pytest.skip("modern TFP: nothing patched by this release")
    api = substrates()[sub]
    tfb = api.bijectors
    x = np.array([0.3, 0.6], dtype=np.float32)
    if sub == "tf":
        import tensorflow as tf

        x_in = tf.constant(x)
    else:
        x_in = x
    bijectors = [tfb.Exp(), tfb.Softplus(), tfb.Chain([tfb.Exp(), tfb.Softplus()])]
    ys = [b.forward(x_in) for b in bijectors]  # caches filled (inputs and outputs alive)
    expected = [np.asarray(y.numpy() if hasattr(y, "numpy") else y).tolist() for y in ys]
    path = tmp_path / "bijectors.pkl"
    path.write_bytes(pickle.dumps(bijectors, protocol=pickle.HIGHEST_PROTOCOL))
    code = f"""
import importlib, json, pickle, sys
import numpy as np
importlib.import_module({api.__name__!r})
bijectors = pickle.loads(open({str(path)!r}, "rb").read())
assert "tfp_picklefix" not in sys.modules
x = np.array([0.3, 0.6], dtype=np.float32)
if {sub!r} == "tf":
    import tensorflow as tf
    x = tf.constant(x)
out, hits = [], []
for b in bijectors:
    y = b.forward(x)
    out.append(np.asarray(y.numpy() if hasattr(y, "numpy") else y).tolist())
    hits.append(b.inverse(y) is x)
print(json.dumps([out, hits]))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    out, hits = json.loads(result.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert all(hits), "the loaded bijectors' caches do not work"
