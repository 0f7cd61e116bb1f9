"""F11: TFP objects holding closures that TFP made, under the standard pickle (TFP >= 0.12).

``tests/closures_probe.py`` builds them (GP regression models and Schur complements with
a precomputed divisor, transition kernels, a distribution's parameter properties, STS
joint distributions, surrogate posteriors and an STS model of seven component kinds
(which fails without the package: F1's cause, in its priors), ``tfp.experimental.nn``
layers, ``LinearOperatorPSDKernel``, ODE solvers, ``WithReductions`` with its default
lambda, ``ProgressBarReducer`` with its default tqdm progress bar, ``KernelBuilder``,
``tfb.BatchNormalization`` with its default Keras layer) and sends each through pickle,
copy, deepcopy, cloudpickle and dill; a copy must compute the same values (samples and
MCMC steps for the same seeds). Without F11 the standard pickle fails on each of the
cases that hold a TFP closure.
"""
from __future__ import annotations

import pickle
import types

import pytest

from conftest import global_substrates, probe_rows

SCRIPT = "tests/closures_probe.py"
SERIALIZERS = ("pickle", "copy", "deepcopy", "cloudpickle", "dill")

pytestmark = pytest.mark.skipif(not global_substrates(), reason="TFP >= 0.12 (global cache era)")


# Cases that every TFP release from 0.14 builds (0.12 and 0.13 have no
# precompute_regression_model; older releases lack some of the other cases, which the
# probe reports as absent).
CORE = ("GaussianProcessRegressionModel.precompute_regression_model",
        "SchurComplement.with_precomputed_divisor", "TransformedTransitionKernel",
        "RandomWalkMetropolis", "Normal.parameter_properties")


def _rows(*args, env=None):
    return probe_rows(SCRIPT, *args, env=env)


def _present(rows):
    """The rows of the cases this TFP release builds; every core case must be there."""
    present = {case: row for case, row in rows.items() if "absent" not in row}
    assert set(CORE) <= set(present), rows
    return present


@pytest.mark.long(40)
@pytest.mark.parametrize("substrate", global_substrates())
def test_objects_holding_tfp_closures_round_trip(substrate):
    rows = _present(_rows("roundtrip", substrate))
    for case, row in rows.items():
        assert row == dict.fromkeys(SERIALIZERS, "same"), (case, row)


@pytest.mark.without_fix
@pytest.mark.long(40)
@pytest.mark.parametrize("substrate", global_substrates())
def test_without_f11_the_standard_pickle_fails_on_each(substrate):
    """Each case that holds a function TFP made fails the standard pickle without F11
    (the probe counts them on its own; in TFP 0.14 a Schur complement with a
    precomputed divisor holds none, and pickles by itself)."""
    rows = _present(_rows("roundtrip", substrate, env={"TFP_PICKLEFIX_PROBE_F11": "0"}))
    assert sum(row["tfp closures"] > 0 for row in rows.values()) >= 4, rows
    for case, row in rows.items():
        error = row.pop("pickle")  # Python 3.13 says "Can't get local object"
        if row.pop("tfp closures"):
            assert "Can't pickle" in error or "Can't get local object" in error, (case, error)
        else:
            assert error == "same", (case, error)
        assert row == dict.fromkeys(SERIALIZERS[1:], "same"), (case, row)


@pytest.mark.parametrize("substrate", global_substrates())
def test_a_copy_s_tfp_closures_follow_the_copy_s_variables(substrate):
    """A TFP closure that captured a bijector or kernel holding a variable: after a
    deep round trip, changing the original's variable leaves the copy as it was.
    ``deepcopy`` used to share such closures, so the copy followed the original's
    variable; F11 makes them again over the copied state (closures without state are
    still shared)."""
    rows = _rows("independent", substrate)
    assert len(rows) == 2, rows
    for case, row in rows.items():
        assert row == dict.fromkeys(("pickle", "deepcopy", "cloudpickle", "dill"),
                                    "independent"), (case, row)
    without = _rows("independent", substrate, env={"TFP_PICKLEFIX_PROBE_F11": "0"})
    for case, row in without.items():
        assert row["deepcopy"] == "follows the original's variable", (case, row)


@pytest.mark.parametrize("substrate", global_substrates())
def test_the_pickle_loads_without_the_package(substrate, tmp_path):
    path = str(tmp_path / "closures.pkl")
    dumped = _rows("dump", substrate, path)["dumped"]
    loaded = _rows("load", substrate, path, env={"TFP_PICKLEFIX": "off"})
    assert loaded == {"same": dict.fromkeys(dumped, True), "package": False}


def _jitter_closure():
    """A closure made by a TFP factory (the first substrate's)."""
    from importlib import import_module

    from conftest import substrates

    tfp = substrates()[global_substrates()[0]]
    prefix = tfp.bijectors.Bijector.__module__.rsplit(".bijectors.", 1)[0]
    try:
        module = import_module(prefix + ".distributions.cholesky_util")
    except ImportError:
        pytest.skip("this TFP has no distributions.cholesky_util")
    return module.make_cholesky_with_jitter_fn(0.25)


def test_a_tfp_closure_is_written_as_its_code_and_cell_values():
    from tfp_picklefix import _closures, _reducers

    closure = _jitter_closure()
    written = _closures.written_by_reference({"fn": closure}, _reducers.is_tfp_closure)
    data = pickle.dumps(written)
    assert b"tfp_picklefix" not in data
    fn = pickle.loads(data)["fn"]
    assert isinstance(fn, types.FunctionType) and fn is not closure
    assert fn.__code__ is closure.__code__ and fn.__globals__ is closure.__globals__
    assert fn.__qualname__ == closure.__qualname__
    assert [c.cell_contents for c in fn.__closure__] == [c.cell_contents
                                                          for c in closure.__closure__]


def test_user_closures_and_values_without_closures_are_left_alone():
    from tfp_picklefix import _closures, _reducers

    def user_closure():
        return closure_value

    closure_value = 3.0
    assert _closures.written_by_reference({"fn": user_closure, "x": [1, (2,)]},
                                          _reducers.is_tfp_closure) is None
    assert _closures.written_by_reference({"x": [1, (2,)]}, _reducers.is_tfp_closure) is None


def _factory(scale):
    def inner(x):
        return scale * x

    def recursive(n):
        return 1 if n <= 1 else n * recursive(n - 1)

    return inner, recursive


def test_a_closure_whose_cells_lead_back_to_it_is_left_alone():
    """A recursive inner function holds itself in a cell; as calls built from calls,
    pickle would recurse without end. It is left as it is (the writer treats this test
    module's closures as TFP's here, to have one): the standard pickle then says it
    cannot pickle a local object, as without F11."""
    from tfp_picklefix import _closures

    inner, recursive = _factory(2.0)
    written = _closures.written_by_reference({"fn": inner}, lambda fn: True)
    assert pickle.loads(pickle.dumps(written))["fn"](3.0) == 6.0
    assert _closures.written_by_reference({"fn": recursive}, lambda fn: True) is None
    assert _closures.written_by_reference({"a": inner, "b": recursive}, lambda fn: True) is None


def _holder(value):
    def inner():
        return value

    return inner


def test_for_deepcopy_a_closure_is_made_again_over_copied_cells_or_else_shared():
    """The deepcopy side of F11 (the writer treats this test module's closures as TFP's
    here): a closure whose cells deepcopy can copy is made again from its own code over
    the copies; one whose cells it cannot copy (a lock) is shared, as deepcopy shares
    any function, so that a deep copy never fails where it worked without F11."""
    import copy
    import threading

    from tfp_picklefix import _closures

    state = [1.0]
    inner = _holder(state)
    written = _closures.written_by_reference({"fn": inner}, lambda fn: True, lambda fn: True)
    fn = copy.deepcopy(written)["fn"]
    assert fn is not inner and fn.__code__ is inner.__code__
    assert fn() == state and fn() is not state
    assert fn.__qualname__ == inner.__qualname__

    locked = _holder(threading.Lock())
    written = _closures.written_by_reference({"fn": locked}, lambda fn: True, lambda fn: True)
    assert copy.deepcopy(written)["fn"] is locked


def _over_a_module(state):
    import json as module  # a delayed import, as TFP's constructors make them

    def inner():
        return module.dumps(state)

    return inner


def test_a_closure_over_a_module_is_written_with_the_module_by_name():
    """TFP imports some modules inside a constructor (an import cycle), so a closure made
    there holds a module in a cell (``KumaraswamyTransformed``'s feature transform, on
    TFP 0.12). The standard pickle cannot write a module (``cannot pickle 'module'
    object``), and deepcopy cannot copy one, so it shared the closure, which then kept
    computing with the original's state. The module is written by name (the writer
    treats this test module's closures as TFP's here)."""
    import copy

    from tfp_picklefix import _closures

    state = [1.0]
    inner = _over_a_module(state)
    written = _closures.written_by_reference({"fn": inner}, lambda fn: True)
    fn = pickle.loads(pickle.dumps(written))["fn"]
    assert fn is not inner and fn() == "[1.0]"
    assert fn.__closure__[0].cell_contents is inner.__closure__[0].cell_contents
    written = _closures.written_by_reference({"fn": inner}, lambda fn: True, lambda fn: True)
    fn = copy.deepcopy(written)["fn"]
    assert fn is not inner and fn.__code__ is inner.__code__
    assert fn.__closure__[0].cell_contents is inner.__closure__[0].cell_contents
    state.append(2.0)
    assert fn() == "[1.0]" and inner() == "[1.0, 2.0]"


def test_a_tfp_kernel_with_a_closure_over_a_module_round_trips():
    """``KumaraswamyTransformed`` with a variable concentration: a pickled copy computes
    the same matrix, and a deep copy follows its own variable, not the original's (TFP
    0.12, which has no ``parameters`` property on kernels to rebuild it from, writes the
    closure; later TFPs rebuild it by its constructor, F4)."""
    import copy

    if "tf" not in global_substrates():
        pytest.skip("TF substrate of TFP >= 0.12")
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp

    psd = tfp.math.psd_kernels
    kernel = psd.KumaraswamyTransformed(psd.ExponentiatedQuadratic(), tf.Variable(2.0), 3.0)
    x = np.array([[0.2], [0.5], [0.7]], np.float32)
    want = kernel.matrix(x, x).numpy()
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(kernel)).matrix(x, x).numpy(), want)
    deep = copy.deepcopy(kernel)
    deep.concentration1.assign(5.0)
    fresh = psd.KumaraswamyTransformed(psd.ExponentiatedQuadratic(), 5.0, 3.0)
    np.testing.assert_allclose(deep.matrix(x, x).numpy(), fresh.matrix(x, x).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(kernel.matrix(x, x).numpy(), want)
