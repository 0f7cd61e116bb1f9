"""``python -m tfp_picklefix check``: a round-trip self-test of the installed stack."""
from __future__ import annotations

import copy
import importlib
import importlib.util
import pickle
from typing import Any, Callable, Dict, List, Tuple

# substrate -> candidate package names of its public API, newest layout first
_SUBSTRATE_PACKAGES: Dict[str, Tuple[str, ...]] = {
    "tf": ("tensorflow_probability",),
    "numpy": ("tensorflow_probability.substrates.numpy",
              "tensorflow_probability.python.experimental.substrates.numpy"),
    "jax": ("tensorflow_probability.substrates.jax",
            "tensorflow_probability.python.experimental.substrates.jax"),
}


def _spec_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def load_substrates(want_jax: bool = True) -> Tuple[Dict[str, Any], List[str]]:
    """Import each installed TFP substrate; returns ({name: tfp-like module}, problems)."""
    loaded: Dict[str, Any] = {}
    problems: List[str] = []
    if not _spec_exists("tensorflow_probability"):
        return loaded, ["tensorflow_probability is not installed"]
    for name, candidates in _SUBSTRATE_PACKAGES.items():
        if name == "tf" and not _spec_exists("tensorflow"):
            problems.append("tf: TensorFlow is not installed")
            continue
        if name == "jax" and (not want_jax or not _spec_exists("jax")):
            problems.append("jax: JAX is not installed" if want_jax else "jax: skipped")
            continue
        errors = []
        for package in candidates:
            try:
                module = importlib.import_module(package)
                module.bijectors.Bijector  # modern TFP loads lazily: make it import the class
                loaded[name] = module
                break
            except Exception as exc:  # a missing or broken optional substrate
                errors.append(f"{package}: {type(exc).__name__}: {exc}")
        else:
            problems.append(f"{name}: could not import ({'; '.join(errors)})")
    return loaded, problems


def _serializers() -> List[Tuple[str, Callable[[Any], Any]]]:
    sers: List[Tuple[str, Callable[[Any], Any]]] = [
        ("pickle", lambda o: pickle.loads(pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL))),
        ("copy", copy.copy),
        ("deepcopy", copy.deepcopy),
    ]
    for modname in ("cloudpickle", "dill"):
        if _spec_exists(modname):
            mod = importlib.import_module(modname)
            sers.append((modname, lambda o, m=mod: m.loads(m.dumps(o))))
    return sers


def _to_numpy(value: Any) -> Any:
    import numpy as np

    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def _bijector_checks(name: str, tfp_mod: Any) -> List[Tuple[str, Callable[[], None]]]:
    import numpy as np

    tfb = tfp_mod.bijectors
    if name == "tf":
        import tensorflow as tf

        make_x: Callable[[], Any] = lambda: tf.constant([0.5, 1.0, 2.0])
    elif name == "jax":
        import jax.numpy as jnp

        make_x = lambda: jnp.array([0.5, 1.0, 2.0])
    else:
        make_x = lambda: np.array([0.5, 1.0, 2.0])

    builders = {
        "Exp": lambda: tfb.Exp(),
        "Softplus": lambda: tfb.Softplus(),
        "Chain(Shift, Scale)": lambda: tfb.Chain([tfb.Shift(1.0), tfb.Scale(2.0)])
        if hasattr(tfb, "Shift") else tfb.Chain([tfb.AffineScalar(shift=1.0, scale=2.0)]),
    }
    checks: List[Tuple[str, Callable[[], None]]] = []
    for bname, build in builders.items():
        for sname, ser in _serializers():
            def run(build=build, ser=ser) -> None:
                bij = build()
                x = make_x()
                y = bij.forward(x)
                bij.forward_log_det_jacobian(x, event_ndims=0)
                clone = ser(bij)
                np.testing.assert_allclose(_to_numpy(clone.forward(x)), _to_numpy(y), rtol=1e-6)
                np.testing.assert_allclose(_to_numpy(clone.inverse(y)), _to_numpy(x), rtol=1e-6)
                if bij.inverse(y) is not x:
                    raise AssertionError("the original's cache no longer maps y back to x")
            checks.append((f"{name} {bname} {sname}", run))
    return checks


def _keras_2_adam(tf: Any) -> Callable[..., Any]:
    """The Keras 2 ``Adam`` GPflow trains with. From TF 2.16, ``tf.optimizers`` is Keras
    3's unless ``TF_USE_LEGACY_KERAS=1``, and Keras 3's ``Adam`` has no ``minimize``;
    GPflow 2.9 and later name their Keras 2 in ``gpflow.keras``; older GPflow runs on
    TF's own Keras 2."""
    try:
        from gpflow.keras import tf_keras
    except ImportError:
        return tf.optimizers.Adam
    return tf_keras.optimizers.Adam


def _gpflow_checks() -> List[Tuple[str, Callable[[], None]]]:
    if not _spec_exists("gpflow"):
        return []

    def run() -> None:
        import numpy as np
        import gpflow
        import tensorflow as tf

        rng = np.random.RandomState(0)
        X = rng.rand(20, 1)
        Y = np.sin(6 * X) + 0.1 * rng.randn(20, 1)
        model = gpflow.models.GPR((X, Y), kernel=gpflow.kernels.Matern12())
        opt = _keras_2_adam(tf)(0.01)
        for _ in range(3):
            opt.minimize(model.training_loss, model.trainable_variables)
        mean, var = model.predict_f(X)
        for sname, ser in _serializers():
            clone = ser(model)
            mean2, var2 = clone.predict_f(X)
            np.testing.assert_allclose(mean2.numpy(), mean.numpy(), rtol=1e-6, err_msg=sname)
            np.testing.assert_allclose(var2.numpy(), var.numpy(), rtol=1e-6, err_msg=sname)

    return [("gpflow GPR (3 Adam steps) pickle/copy/deepcopy round trips", run)]


def run_checks(print_fn: Callable[[str], None] = print) -> int:
    """Run every check, print one line each; returns the number of failures."""
    loaded, problems = load_substrates()
    for problem in problems:
        print_fn(f"SKIP {problem}")
    checks: List[Tuple[str, Callable[[], None]]] = []
    for name, tfp_mod in loaded.items():
        checks.extend(_bijector_checks(name, tfp_mod))
    if "tf" in loaded:
        checks.extend(_gpflow_checks())
    failures = 0
    for label, fn in checks:
        try:
            fn()
        except Exception as exc:
            failures += 1
            print_fn(f"FAIL {label}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        else:
            print_fn(f"PASS {label}")
    if not checks:
        print_fn("FAIL no TFP substrate could be loaded: nothing was checked")
        return 1
    print_fn(f"{len(checks) - failures} passed, {failures} failed")
    return failures
