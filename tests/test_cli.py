"""``python -m tfp_picklefix`` prints the status table; ``check`` self-tests the stack."""
from __future__ import annotations

import pytest

import tfp_picklefix
from tfp_picklefix import Status, SubstrateStatus, _manager
from tfp_picklefix._record import Saved
from tfp_picklefix._status import WIDTH

from conftest import LEGACY_ERAS, era, has_module, run_python, substrates


def test_status_table():
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    result = run_python("", args=["-m", "tfp_picklefix"])
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "substrate" in out and "era" in out
    for sub in substrates():
        assert any(line.startswith(sub) and era(sub) in line for line in out.splitlines()), out
    _assert_readable(out, [])
    status = tfp_picklefix.status()  # this process's: what its tests have imported so far
    _assert_readable(str(status), [s.patched for s in status.substrates if s.patched])
    for sub in status.substrates:  # TF, Keras 2 and tf_keras each have a class
        # _ObjectIdentityWrapper (all three patched on modern): each label names its module
        wrappers = [label for label in sub.patched if "_ObjectIdentityWrapper." in label]
        assert len(set(wrappers)) == len(wrappers), wrappers


def test_labels_name_the_module_only_where_one_name_is_in_several():
    def made(name, module):
        return type(name, (), {"__module__": module})

    entries = [Saved(made("Wrapper", "tf.util"), "__reduce_ex__", None, None, "g"),
               Saved(made("Wrapper", "tf_keras.util"), "__reduce_ex__", None, None, "g"),
               Saved(made("Flow", "user"), "_cache", None, None, "g"),
               Saved(made("Flow", "user"), "_cache", None, None, "g"),  # the cell run again
               Saved(made("Exp", "tfb"), "__reduce_ex__", None, None, "g")]
    assert _manager._labels(entries) == (
        "tf.util.Wrapper.__reduce_ex__", "tf_keras.util.Wrapper.__reduce_ex__",
        "Flow._cache", "Flow._cache", "Exp.__reduce_ex__")


def _assert_readable(text, lists):
    """Each line fits the width, or holds one item alone; each item is whole on a line."""
    lines = text.splitlines()
    for line in lines:
        assert len(line) <= WIDTH or len(line.split(": ", 1)[-1].strip().split(", ")) == 1, line
    for items in lists:
        for i, item in enumerate(items):
            word = item + ("," if i < len(items) - 1 else "")
            assert any(word in line for line in lines), (item, text)


def test_status_text_wraps_and_keeps_everything():
    # The status text of a substrate with a long list of patches and a failure: before
    # the list and the message were wrapped below the table, every row was as wide as
    # the longest list (TF's, some eighty attributes, thousands of characters).
    patched = tuple(f"Class{i}.__reduce_ex__" for i in range(80)) + (
        "pickle's registry: _TupleWrapper", "36 submodule attributes (for dill)",
        "A" * 120 + ".__reduce__")
    failure = "failed: TypeError: " + "a long message " * 12 + "end"
    status = Status(enabled=True, active=True, mode="on", cache_mode="fixed", speedups="C",
                    substrates=(
                        SubstrateStatus("tf", "tensorflow_probability.python.bijectors.bijector",
                                        "0.25.0", "global", "a class-level cache", "patched",
                                        patched),
                        SubstrateStatus("numpy", "tfp.substrates.numpy.bijectors.bijector",
                                        "0.25.0", "global", "", failure)))
    text = str(status)
    _assert_readable(text, [patched])
    rows = [line.split() for line in text.splitlines()]
    assert ["tf", "0.25.0", "global", "patched"] in rows
    assert ["numpy", "0.25.0", "global", "failed"] in rows
    assert " ".join(text.split()).count(failure) == 1
    assert "tf: tensorflow_probability.python.bijectors.bijector" in text.splitlines()


def test_check_passes_with_the_package():
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    result = run_python("", args=["-m", "tfp_picklefix", "check"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert any(line.startswith("PASS ") for line in lines)
    assert not any(line.startswith("FAIL ") for line in lines)


def test_check_trains_gpflow_with_keras_2_where_tf_keras_is_keras_3():
    """From TF 2.16, ``tf.keras`` is Keras 3 unless ``TF_USE_LEGACY_KERAS=1``, whose
    ``Adam`` has no ``minimize``: the self-test's GPflow check trains with GPflow's
    Keras 2, so it does not fail for a reason that has nothing to do with pickling."""
    if not (has_module("gpflow") and has_module("tf_keras")):
        pytest.skip("needs GPflow and tf-keras (TF >= 2.16)")
    result = run_python("", args=["-m", "tfp_picklefix", "check"],
                        env={"TF_USE_LEGACY_KERAS": "0"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert any(line.startswith("PASS gpflow") for line in result.stdout.splitlines()), (
        result.stdout[-3000:])


def test_check_fails_when_turned_off_on_a_legacy_stack():
    """The self-test can fail: with TFP_PICKLEFIX=off it finds the original bug."""
    if not any(era(s) in LEGACY_ERAS for s in substrates()):
        pytest.skip("TFP >= 0.12 pickles these bijectors without the package")
    result = run_python("", args=["-m", "tfp_picklefix", "check"], env={"TFP_PICKLEFIX": "off"})
    assert result.returncode == 1, result.stdout[-3000:]
    assert any(line.startswith("FAIL ") and ("HashableWeakRef" in line or "lambda" in line)
               for line in result.stdout.splitlines()), result.stdout[-3000:]
