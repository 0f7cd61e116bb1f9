#!/usr/bin/env python3
"""The test matrix: one virtual environment per pinned stack, the test-suite run in each.

    python3 scripts/matrix.py test [--stacks modern,legacy-0.11,...]   # make test
    python3 scripts/matrix.py setup --stacks modern                   # environments only
    python3 scripts/matrix.py demo [--stack modern]                   # make demo

Each stack is installed from its file in constraints/ (re-installed when that file,
its package list or its shims change). A stack that cannot be installed here prints
``SKIP <stack>: <reason>``; the required default stack counts as a failure instead.
The run ends with one summary line per stack and exits non-zero on any FAIL.
Standard library only: this runs before any environment exists.
"""
from __future__ import annotations

import argparse
import functools
import glob
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENVS = os.path.join(ROOT, ".venvs")
LOGS = os.path.join(ROOT, ".matrix")
PY39_PREFIX = os.path.join(VENVS, "py39-prefix")
SHIMS = os.path.join(ROOT, "scripts", "legacy_shim")
TEST_TOOLS = ["cloudpickle", "dill", "pytest", "wrapt"]
# The heavy stacks' tests run in parallel processes (pytest-xdist): on 2 cores the
# modern stack's took 13 minutes, against 18 in one process.
# TFP_PICKLEFIX_TEST_WORKERS=0 runs them in one process; any other number sets how many.
PARALLEL_TOOLS = ["pytest-xdist"]
LEGACY_PACKAGES = ["tensorflow", "tensorflow-probability", "gpflow"] + TEST_TOOLS
# pytest-xdist for the Python 3.9 stacks: pure-Python wheels that the host's pip fetches
# (the py39 pip reaches only the local indexes); it took mid-0.12's tests from 6 to 2.5
# minutes, legacy-0.11's from 1.7 to 1.1.
PY39_PARALLEL_WHEELS = ["pytest-xdist==3.8.0", "execnet==2.1.2"]

# The stacks issue 3 does not name (it names TF 2.21 + TFP 0.25, tfp-nightly, and the
# JAX/NumPy substrates: modern and jax-nightly, which keep its 30 s and 2000 traces):
# the thread-stress tests run 10 s each, the FuncGraph leak tests 200 traces (TFP 0.25's
# own cache, which keeps every graph, shows 201 graphs there, against the 2 allowed, and
# 107 MB of RSS growth against 23 MB with no cache, where the test allows 20 MB more). This
# keeps CI in bounds: the 2000 traces took 4-5 minutes of both cores on each stack, 500
# about 2 (80-136 s of the chain test on mid-0.12, mid-0.17, mid-0.23 and modern-py313 in
# a CI run of a7c436f).
# The coverage test runs 5 of its 10 serializers there (the committed tables have them
# all): pickle protocol 0 (copyreg's protocol-0/1 path), 5 (object.__reduce_ex__'s
# __newobj__ path, the one of protocols 2-4 too, and NumPy's pickle-5 arrays), copy,
# deepcopy and cloudpickle; not 1-4, nor dill (a Pickler subclass as cloudpickle's, which
# asks the package's reducers the same way). Each serializer costs about the same (a
# round trip, then the object's values again): half the time of all ten.
_LIGHT_ENV = {"TFP_PICKLEFIX_THREAD_SECONDS": "10", "TFP_PICKLEFIX_LEAK_TRACES": "200",
              "TFP_PICKLEFIX_COVERAGE_SERIALIZERS": "pickle0,pickle5,copy,deepcopy,cloudpickle"}
# modern and modern-py313 (the same TF, TFP and tf-keras) share the ten: modern runs those
# five, modern-py313 the other five (pickle protocols 1-4 and dill), so that each commit
# has every cell of TFP 0.25's table checked, at half the cost on each.
_OTHER_SERIALIZERS = "pickle1,pickle2,pickle3,pickle4,dill"
# The legacy stacks (TFP 0.9-0.11) run the coverage test with the same 5 serializers.
_LEGACY_ENV = {"TFP_PICKLEFIX_COVERAGE_SERIALIZERS": _LIGHT_ENV["TFP_PICKLEFIX_COVERAGE_SERIALIZERS"]}
# Nor do those stacks run the benchmark runner's tests (test_benchmarks.py): `make bench`
# runs on modern and jax-nightly, `make bench-legacy` on the legacy stacks, where they
# run (but for legacy-0.9: below). Its tests took 10 minutes of a core on each (about 5 of CI's).
_LIGHT_TESTS = ["tests", "--ignore", "tests/test_benchmarks.py"]


def _mid_py39(constraints: str, tests: List[str], frozen_model_saves: bool = False) -> dict:
    """A stack of TFP >= 0.12 on Python 3.9 (TF 2.5-2.11): joblib and pytest-xdist from
    the host's pip, the lighter load tests, ``tests`` as its selection. Left out unless
    ``frozen_model_saves``: GPflow's frozen model does not save as a SavedModel on the
    older TFs (GPflow 2.2 on TF 2.5, 2.5 on 2.9, 2.11 on TF 2.6), with or without the
    package (GPflow 2.11's does on TF 2.10 and 2.11)."""
    deselect = [] if frozen_model_saves else [
        "--deselect", "tests/test_models_modern.py::test_checkpoint_of_the_original_restores_into_the_unpickled_copy"]
    return dict(python="py39", constraints=constraints, packages=LEGACY_PACKAGES,
                host_wheels=["joblib==1.5.3"] + PY39_PARALLEL_WHEELS, parallel=True,
                env=_LIGHT_ENV, tests=tests + deselect)


# What the stacks of TFP 0.12-0.16 run (on TF 2.5-2.8): the cache, the patching
# machinery, GPflow models, and the reducers' tests written for them; the other tests
# build objects and use functions that those releases do not have.
_MID_SELECTION = [
    "tests/test_import.py", "tests/test_lifecycle.py", "tests/test_cli.py",
    "tests/test_hot_path.py", "tests/test_cache_conformance.py",
    "tests/test_cache_defects.py", "tests/test_cache_modes.py",
    "tests/test_cache_bookkeeping.py", "tests/test_upstream_diff.py",
    "tests/test_seed.py", "tests/test_fresh_process.py",
    "tests/test_models_modern.py", "tests/test_coverage.py", "tests/test_diagnose.py",
    "tests/test_keras_models_tf25.py", "tests/test_gpflow_likelihoods.py",
    "tests/test_layers_pickled_whole.py", "tests/test_optimizers.py",
    "tests/test_keras_models_compiled.py",
    "tests/test_modern_pickling.py::test_checkpoint_restores_into_an_unpickled_module_tracking_a_dict_or_a_tuple",
    "tests/test_modern_pickling.py::test_a_rebuild_never_loses_the_weights_of_a_keras_model",
    "tests/test_modern_pickling.py::test_jax_and_numpy_objects_ship_to_worker_processes",
    "tests/test_closures_modern.py::test_a_closure_over_a_module_is_written_with_the_module_by_name",
    "tests/test_closures_modern.py::test_a_tfp_kernel_with_a_closure_over_a_module_round_trips"]
# TFP 0.14-0.16 build every core case of the closure tests (TFP 0.12 and 0.13 have no
# precompute_regression_model): all of them run there.
_MID_SELECTION_CLOSURES = [t for t in _MID_SELECTION if not t.startswith(
    "tests/test_closures_modern.py::")] + ["tests/test_closures_modern.py"]


# The tests marked ``without_fix`` show a defect with the fix turned off: TFP as shipped
# (or the package without the fix a test is about) fails. What they check is the pinned
# release, not this package's code, and a stack's pins do not change from one commit to
# the next. They run on the stacks the issues name (modern, jax-nightly, and the legacy
# ones: the original bug) and on every opt-in stack (where a release is first checked);
# the other default stacks (mid-0.12, mid-0.17, mid-0.23, modern-py313) leave them out:
# what they showed there is in the README. (In mid-0.23's run of 2026-12-07 they took 480
# of its 2255 test-seconds.)
_WITH_THE_FIX = ["-m", "not without_fix"]

# mid-0.23 (TF 2.15 and its own Keras 2.15, TFP 0.23, GPflow 2.9, Python 3.11): what is its
# own there, the Keras fixes with Keras 2.15 (the `keras` package, where tf-keras has
# `tf_keras`), F19 (TF 2.15's lazily loaded `tf.keras`), TFP 0.23's classes (coverage,
# closures, reducers), GPflow 2.9's models, and the cache's contract on TFP 0.23. Not
# what repeats another stack's checks of the same code: the C extension's tests and the
# cache's load tests (threads, discarded traces; modern has the same Python and build,
# and the load tests run on TFP 0.12 and 0.25), the upstream diff (written for the
# newest TFP; mid-0.12 applies it to an older one), and the worker pools
# (modern's and legacy-0.11's tests send the same pickles through them): 479 more of its 2255
# test-seconds on 2026-12-07.
_MID_023_TESTS = _LIGHT_TESTS + [
    "--ignore", "tests/test_speedups.py", "--ignore", "tests/test_cache_defects.py",
    "--ignore", "tests/test_upstream_diff.py",
    "--deselect", "tests/test_modern_pickling.py::test_jax_and_numpy_objects_ship_to_worker_processes",
    "--deselect", "tests/test_models_modern.py::test_models_predict_the_same_in_worker_processes",
] + _WITH_THE_FIX


# modern-py313 (TF 2.21, TFP 0.25 and tf-keras 2.21 as modern, on Python 3.13 and NumPy
# 2.5): what the interpreter and NumPy 2 can change, the cache (its C extension built for
# 3.13, its pure-Python path, threads), the import hooks and patching, the reducers and the
# closures they rebuild from code objects, the coverage table (the five serializers modern
# does not run), pickles read in fresh processes, the traced graphs. Not what repeats
# modern's checks of the same TF, TFP and Keras: the Keras model tests (layers, flows,
# optimizers, compiled and subclassed models), the discarded-trace leak tests (graph
# lifetimes are TF's), the upstream diff, and the worker pools. Of its 1823 test-seconds
# on 2026-12-07, the without_fix tests took 382 and those 559: 881 remain.
_PY313_TESTS = _LIGHT_TESTS + [
    "--ignore", "tests/test_flows_modern.py", "--ignore", "tests/test_layers.py",
    "--ignore", "tests/test_layers_pickled_whole.py", "--ignore", "tests/test_optimizers.py",
    "--ignore", "tests/test_keras_models_compiled.py", "--ignore", "tests/test_keras_subclassed.py",
    "--ignore", "tests/test_upstream_diff.py",
    "--deselect", "tests/test_cache_defects.py::test_no_funcgraph_leak",
    "--deselect", "tests/test_modern_pickling.py::test_jax_and_numpy_objects_ship_to_worker_processes",
] + _WITH_THE_FIX


# What mid-0.17 leaves to mid-0.12 (the same Python 3.9, on TFP 0.12, with the cache's
# pure-Python path) and to modern (its C path, on 3.11): the cache's load tests (threads,
# discarded traces), the upstream diff, and the worker pools (both send the same pickles
# through them).
_REPEATED_ON_MID_012 = [
    "--ignore", "tests/test_cache_defects.py", "--ignore", "tests/test_upstream_diff.py",
    "--deselect", "tests/test_modern_pickling.py::test_jax_and_numpy_objects_ship_to_worker_processes",
    "--deselect", "tests/test_models_modern.py::test_models_predict_the_same_in_worker_processes"]


def _mid_host(constraints: str, **extra: object) -> dict:
    """A stack of TFP on the host's Python with TF's own Keras 2 (TF 2.13-2.15): the
    lighter load tests, the whole suite but the benchmark runner's tests."""
    return dict(python="host", constraints=constraints,
                packages=["tensorflow", "tensorflow-probability", "gpflow"] + TEST_TOOLS
                + ["joblib", "dask[distributed]"] + PARALLEL_TOOLS,
                parallel=True, tests=_LIGHT_TESTS, env=_LIGHT_ENV, **extra)


# Keras 2.7-2.10 (which pickle a model as a SavedModel): TFP's Keras networks fail
# without the package there otherwise than with later Keras (the round trips with it run).
_KERAS_SAVED_MODEL_DESELECT = [
    "--deselect", "tests/test_flows_modern.py::test_the_package_without_f10_fails_on_the_keras_side",
    "--deselect", "tests/test_flows_modern.py::test_without_the_package_such_a_model_only_copies_shallowly[pixelcnn]",
    "--deselect", "tests/test_flows_modern.py::test_the_package_without_the_network_reducers_fails_on_the_keras_side"]


def _jax_release(constraints: str) -> dict:
    """An opt-in stack of a TFP release's JAX and NumPy substrates, without TF: the whole
    suite but the benchmark runner's tests, with the lighter load tests."""
    return dict(python="host", constraints=constraints, extended=True,
                packages=["tensorflow-probability", "jax", "jaxlib", "numpy", "scipy"]
                + TEST_TOOLS + PARALLEL_TOOLS,
                parallel=True, tests=_LIGHT_TESTS, env=_LIGHT_ENV)


_JAX_NIGHTLY = dict(
    python="host", constraints="jax-nightly.txt",
    packages=["tfp-nightly", "jax", "jaxlib", "numpy", "scipy"] + TEST_TOOLS + PARALLEL_TOOLS,
    parallel=True)


STACKS: Dict[str, dict] = {
    "modern": dict(
        python="host", constraints="modern.txt", required=True,
        # joblib and dask: the worker-process tests (issue 4).
        packages=["tensorflow", "tensorflow-probability", "tf-keras", "gpflow"] + TEST_TOOLS
        + ["joblib", "dask[distributed]"] + PARALLEL_TOOLS,
        parallel=True, env={"TF_USE_LEGACY_KERAS": "1", "TFP_PICKLEFIX_COVERAGE_SERIALIZERS":
                            _LIGHT_ENV["TFP_PICKLEFIX_COVERAGE_SERIALIZERS"]}),
    # joblib for the worker tests: the py39 pip reaches only the local indexes, which
    # hold no joblib for Python 3.9; the host's pip fetches the pure-Python wheel.
    "legacy-0.11": dict(python="py39", constraints="legacy-0.11.txt", packages=LEGACY_PACKAGES,
                        host_wheels=["joblib==1.5.3"] + PY39_PARALLEL_WHEELS, parallel=True,
                        env=_LEGACY_ENV),
    # The first release of the global-cache era (TFP 0.12), on the legacy stacks' TF 2.5
    # (its wrapt 1.12 builds here without its C extension). A selection: the cache, the
    # patching machinery, GPflow models, and the reducers' tests written for it; the
    # other modern tests build objects and use functions that TFP 0.12 does not have.
    # Installed as without a compiler (speedups=False: TFP_PICKLEFIX_SPEEDUPS=off at
    # install), its tests run the pure-Python cache, the load tests among them; the other
    # Python 3.9 stacks build the C extension (mid-0.17 tests it on 3.9, and there
    # test_speedups.py runs the conformance suite on the pure-Python path too).
    "mid-0.12": dict(_mid_py39("mid-0.12.txt", _MID_SELECTION + _WITH_THE_FIX), speedups=False),
    # The middle of the range (TF 2.9: Trackable with _trackable_children, still in
    # tensorflow.python.training.tracking; Keras 2.9, which pickles models as SavedModels:
    # F17; NumPy 1.26; wrapt 2). The suite but what it leaves to mid-0.12 and modern
    # (above), and the tests that TFP's Keras networks fail without the package with newer
    # Keras's errors (Keras 2.9 fails otherwise; the round trips with it run).
    "mid-0.17": _mid_py39("mid-0.17.txt", _LIGHT_TESTS + _KERAS_SAVED_MODEL_DESELECT
                          + _REPEATED_ON_MID_012 + _WITH_THE_FIX),
    "legacy-0.10": dict(python="py39", constraints="legacy-0.10.txt", packages=LEGACY_PACKAGES,
                        shims=["tfp_legacy_tf_shim"], host_wheels=PY39_PARALLEL_WHEELS,
                        parallel=True, env=_LEGACY_ENV),
    # The benchmark runner's tests run on legacy-0.10 and legacy-0.11 (one of each cache
    # era: TFP 0.9 and 0.10 keep the per-instance dicts, 0.11 a cache object), with the same
    # TF 2.5.3 and Python 3.9 as here (`make bench-legacy` runs the benchmarks on all
    # three): on 0.9 they took at least 190 of about 540 test-seconds (2 workers) in the
    # CI run of 1366a32.
    "legacy-0.9": dict(python="py39", constraints="legacy-0.9.txt", packages=LEGACY_PACKAGES,
                       shims=["tfp_legacy_tf_shim"], host_wheels=PY39_PARALLEL_WHEELS,
                       parallel=True, env=_LEGACY_ENV, tests=_LIGHT_TESTS),
    "numpy-substrate-0.11": dict(
        python="host", constraints="numpy-substrate-0.11.txt",
        nodeps=["tensorflow-probability"],
        packages=["numpy", "scipy", "six", "decorator", "gast", "dm-tree"] + TEST_TOOLS,
        shims=["tfp011_numpy_without_tf"]),
    # The last TFP before tf-keras (TF's own Keras 2.15), with the wrapt 1.x TF 2.15
    # requires (its C ObjectProxy sits in TFP's NumPy backend).
    "mid-0.23": dict(_mid_host("mid-0.23.txt"), tests=_MID_023_TESTS),
    # Opt-in stacks (``extended``, not in ``all``): each ran the whole suite (see the
    # README), but would add 10-15 minutes to `make test`. TFP 0.20 on TF 2.12 and its Keras 2.12 (whose safe
    # mode still loads TFP's pickled lambdas), with all three substrates: TF 2.12
    # requires jax (0.4.30).
    "mid-0.20": dict(
        python="host", constraints="mid-0.20.txt", extended=True,
        packages=["tensorflow", "tensorflow-probability", "gpflow", "jax", "jaxlib"] + TEST_TOOLS
        + ["joblib", "dask[distributed]"] + PARALLEL_TOOLS,
        parallel=True, tests=_LIGHT_TESTS, env=_LIGHT_ENV),
    # The first TFP on tf-keras (TF 2.16 ships Keras 3).
    "mid-0.24": dict(
        python="host", constraints="mid-0.24.txt", extended=True,
        packages=["tensorflow", "tensorflow-probability", "tf-keras", "gpflow"] + TEST_TOOLS
        + ["joblib", "dask[distributed]"] + PARALLEL_TOOLS,
        parallel=True, tests=_LIGHT_TESTS, env=dict(_LIGHT_ENV, TF_USE_LEGACY_KERAS="1")),
    # More opt-in stacks: the releases between the ones above, each with its own TF and
    # that TF's Keras, and the GPflow pip resolves for it (2.11.2 on all eight).
    # TFP 0.13 on TF 2.5 (as mid-0.12), TFP 0.14 on TF 2.6 (the first TF whose Keras is
    # the separate `keras` package, 2.6, which cannot pickle a model at all), TFP 0.15
    # on TF 2.7 (Keras 2.7, the first that pickles a model as a SavedModel: F17), 0.16
    # on 2.8, 0.18 on 2.10, and 0.19 on TF 2.11 (Keras 2.11, which pickles a model in
    # its first `.keras` format: F17 too).
    "mid-0.13": dict(_mid_py39("mid-0.13.txt", _MID_SELECTION), extended=True),
    "mid-0.14": dict(_mid_py39("mid-0.14.txt", _MID_SELECTION_CLOSURES), extended=True),
    "mid-0.15": dict(_mid_py39("mid-0.15.txt", _MID_SELECTION_CLOSURES), extended=True),
    "mid-0.16": dict(_mid_py39("mid-0.16.txt", _MID_SELECTION_CLOSURES), extended=True),
    "mid-0.18": dict(_mid_py39("mid-0.18.txt", _LIGHT_TESTS + _KERAS_SAVED_MODEL_DESELECT,
                               frozen_model_saves=True), extended=True),
    "mid-0.19": dict(_mid_py39("mid-0.19.txt", _LIGHT_TESTS, frozen_model_saves=True),
                     extended=True),
    # TFP 0.21 on TF 2.13 and TFP 0.22 on TF 2.14, with their Keras 2.13/2.14.
    "mid-0.21": _mid_host("mid-0.21.txt", extended=True),
    "mid-0.22": _mid_host("mid-0.22.txt", extended=True),
    # The same TF/TFP on the newest Python TF 2.21 supports, with NumPy 2 (the modern
    # stack has NumPy 1.26: GPflow 2.11 requires numpy < 2, which has no Python 3.13
    # wheels, so there is no GPflow here). scipy: TFP's NumPy substrate loads it lazily.
    "modern-py313": dict(
        python="3.13", constraints="modern-py313.txt",
        packages=["tensorflow", "tensorflow-probability", "tf-keras", "scipy"] + TEST_TOOLS
        + ["joblib", "dask[distributed]"] + PARALLEL_TOOLS,
        parallel=True, tests=_PY313_TESTS,
        env=dict(_LIGHT_ENV, TF_USE_LEGACY_KERAS="1",
                 TFP_PICKLEFIX_COVERAGE_SERIALIZERS=_OTHER_SERIALIZERS)),
    # Opt-in: the TF (and NumPy) substrate of tfp-nightly, on the tf-nightly and
    # tf-keras-nightly of the same days. tf-nightly's modules are built against NumPy 2
    # (with NumPy 1.26 some fail to import), and GPflow 2.11 requires numpy < 2: no GPflow.
    "tf-nightly": dict(
        python="host", constraints="tf-nightly.txt", extended=True,
        packages=["tf-nightly", "tfp-nightly", "tf-keras-nightly", "scipy"] + TEST_TOOLS
        + ["joblib", "dask[distributed]"] + PARALLEL_TOOLS,
        parallel=True, tests=_LIGHT_TESTS, env=dict(_LIGHT_ENV, TF_USE_LEGACY_KERAS="1")),
    # TFP's JAX and NumPy substrates need no TensorFlow (and jaxlib must not share a
    # process with TF 2.21: both bundle MLIR). tfp-nightly: TFP 0.25's JAX substrate
    # does not run on jax >= 0.5.
    "jax-nightly": _JAX_NIGHTLY,
    # Opt-in: the same tfp-nightly on the newest jax (0.12, which requires Python >= 3.12:
    # jax-nightly keeps 3.11 and jax 0.10), with Python 3.13 and NumPy 2.5.
    "jax-nightly-py313": dict(_JAX_NIGHTLY, python="3.13", constraints="jax-nightly-py313.txt",
                              extended=True, tests=_LIGHT_TESTS, env=_LIGHT_ENV),
    # Opt-in: the JAX substrates of the releases between 0.20 (mid-0.20) and 0.25, each
    # on the last jax released before it (0.23.0: the jax released with it), NumPy 1.26.
    "jax-0.21": _jax_release("jax-0.21.txt"),
    "jax-0.22": _jax_release("jax-0.22.txt"),
    "jax-0.23": _jax_release("jax-0.23.txt"),
    "jax-0.24": _jax_release("jax-0.24.txt"),
    # Opt-in: the JAX substrate of the release TFP 0.25.0 itself, on the last jax it runs
    # on (0.4.35; jax >= 0.5 removed xla.pytype_aval_mappings), with NumPy 2.4. The whole
    # suite but the benchmark runner's ran here: no failure.
    "jax-0.25": _jax_release("jax-0.25.txt"),
}
DEFAULT_STACK = "modern"

# The order in which `make test` (``--stacks all``) runs the default stacks: the required
# one, the stack of the original bug, the JAX substrate, the other legacy releases
# (short), then the middle of the range, and last the stack that repeats modern's TF and
# TFP on another Python. On a machine slow enough for the time budget to run out, the
# stacks that would end past it are skipped, the shorter ones after them still run
# (``budget_verdict``).
DEFAULT_RUN = ["modern", "legacy-0.11", "jax-nightly", "legacy-0.10", "legacy-0.9",
               "numpy-substrate-0.11", "mid-0.12", "mid-0.17", "mid-0.23", "modern-py313"]
assert sorted(DEFAULT_RUN) == sorted(s for s in STACKS if not STACKS[s].get("extended"))

# Seconds each default stack takes (setup from uv's cache, then its tests) on 2 cores
# of this machine on 2026-12-07 (`python3 -m timeit "sum(range(10**6))"`: 16.6 ms), from
# that day's runs. (mid-0.23 and modern-py313 ran their old selections in 0.79 and 0.86
# of their times in stop 55's CI, of 131 minutes in all; stop 54's, of 47, ran on a
# machine about twice as fast.) A time budget (TFP_PICKLEFIX_TIME_BUDGET, minutes: CI
# sets it) scales them by how much slower than this the stacks run so far took, and
# skips, with a SKIP line, a stack that would not end within it (``budget_verdict``).
USUAL_SECONDS = {"modern": 1400, "legacy-0.11": 280, "jax-nightly": 540, "mid-0.12": 280,
                 "mid-0.17": 530, "legacy-0.10": 260, "legacy-0.9": 170,
                 "numpy-substrate-0.11": 45, "mid-0.23": 690, "modern-py313": 490}
assert sorted(USUAL_SECONDS) == sorted(DEFAULT_RUN)


class Skip(Exception):
    """The stack cannot be installed on this machine (reason in the message)."""


def log(msg: str) -> None:
    print(f"[matrix] {msg}", flush=True)


def venv_dir(stack: str) -> str:
    return os.path.join(VENVS, stack)


def stack_env(stack: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(STACKS[stack].get("env", {}))
    env["TFP_PICKLEFIX_STACK"] = stack
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop("TFP_PICKLEFIX", None)
    env.pop("PYTHONPATH", None)
    if STACKS[stack]["python"] == "py39":
        lib = os.path.join(PY39_PREFIX, "usr", "lib", "x86_64-linux-gnu")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def python_of(stack: str) -> str:
    return os.path.join(venv_dir(stack), "bin", "python")


def _stamp(stack: str) -> str:
    spec = STACKS[stack]
    h = hashlib.sha256(repr(sorted((k, v) for k, v in spec.items() if k not in ("env", "tests"))).encode())
    with open(os.path.join(ROOT, "constraints", spec["constraints"]), "rb") as f:
        h.update(f.read())
    for shim in spec.get("shims", []):
        with open(os.path.join(SHIMS, shim + ".py"), "rb") as f:
            h.update(f.read())
    if spec["python"] == "py39":  # what the interpreter is made of (its headers among it)
        with open(os.path.join(ROOT, "scripts", "bootstrap_py39.sh"), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def find_python(version: str) -> str:
    """An interpreter of Python ``version`` ("3.13"): ``python3.13`` on PATH, else one
    that pyenv installed, else /usr/bin's; raises Skip when there is none."""
    name = f"python{version}"
    candidates = [shutil.which(name) or ""]
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv, "versions", f"{version}.*", "bin", name)),
                         reverse=True)
    candidates.append(os.path.join("/usr/bin", name))
    for exe in candidates:
        if not exe or not os.path.exists(exe):
            continue
        try:  # a pyenv shim exists on PATH even where that version is not selected
            proc = subprocess.run([exe, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0 and proc.stdout.strip() == version:
            return exe
    raise Skip(f"no Python {version} interpreter here (looked for {name} on PATH, "
               f"in {os.path.join(pyenv, 'versions')} and in /usr/bin)")


def _run(cmd: List[str], env: Dict[str, str], what: str, timeout: int = 1800) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
        raise Skip(f"{what} failed (exit {proc.returncode}):\n{tail}")


def setup(stack: str) -> None:
    """Create or refresh the stack's venv and install the package in it; raises Skip
    when it cannot be installed."""
    make_venv(stack)
    install_package(stack)


# The installer: uv (pinned in constraints/tools.txt, put in .venvs/tools by the host's
# pip) installs the stacks' packages, else pip. Measured on 2 cores: the modern stack's
# packages took 67 s with pip, 35 s with uv from an empty cache and 17 s from its cache
# (the same versions: every stack is pinned). uv is told pip's indexes (pip.conf and
# PIP_* variables) and takes the best match across them, as pip does; both byte-compile
# what they install (these machines set PYTHONDONTWRITEBYTECODE: without it every TF
# process would compile TF again). TFP_PICKLEFIX_INSTALLER=pip: pip alone.
TOOLS_VENV = os.path.join(VENVS, "tools")


@functools.lru_cache(maxsize=None)
def uv() -> Optional[str]:
    """The uv executable to install with, or None (pip); decided and said once a run."""
    exe = None
    if _installer_choice() == "uv":
        try:
            exe = _install_uv()
            log(f"installer: uv ({os.path.relpath(exe, ROOT)})")
        except Skip as exc:
            log(f"installer: pip (uv could not be installed: {str(exc).splitlines()[0]})")
    else:
        log("installer: pip (TFP_PICKLEFIX_INSTALLER=pip)")
    return exe


def _installer_choice() -> str:
    choice = os.environ.get("TFP_PICKLEFIX_INSTALLER", "uv").strip().lower() or "uv"
    if choice not in ("uv", "pip"):
        raise SystemExit(f"TFP_PICKLEFIX_INSTALLER must be uv or pip, not {choice!r}")
    return choice


def _install_uv() -> str:
    exe = os.path.join(TOOLS_VENV, "bin", "uv")
    pins = os.path.join(ROOT, "constraints", "tools.txt")
    pin = next(line.strip() for line in open(pins) if line.startswith("uv=="))
    env = dict(os.environ)
    try:  # already there, at the pinned version
        probe = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and probe.stdout.split()[1:2] == [pin.split("==")[1]]:
            return exe
    except (OSError, subprocess.SubprocessError):
        pass
    shutil.rmtree(TOOLS_VENV, ignore_errors=True)
    _run([sys.executable, "-m", "venv", TOOLS_VENV], env, "python -m venv .venvs/tools")
    _run([os.path.join(TOOLS_VENV, "bin", "python"), "-m", "pip", "install", "-q",
          "--disable-pip-version-check", "-c", pins, "uv"], env, "pip install uv")
    return exe


@functools.lru_cache(maxsize=None)
def _pip_settings() -> Dict[str, str]:
    """pip's own settings here (its config files, then PIP_* variables over them):
    option name -> value."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                          text=True, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    files: Dict[str, str] = {}
    envs: Dict[str, str] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^([^=]*)\.([\w-]+)=(.*)$", line.strip())
        if not m:
            continue
        value = m.group(3)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        (envs if m.group(1) == ":env:" else files)[m.group(2)] = value
    files.update(envs)
    return files


def _uv_install(stack: str, args: List[str], what: str) -> None:
    """``uv pip install ARGS`` into the stack's venv, with pip's indexes."""
    settings = _pip_settings()
    cmd = [str(uv()), "pip", "install", "--quiet", "--python", python_of(stack),
           "--compile-bytecode", "--index-strategy", "unsafe-best-match"]
    if settings.get("index-url"):
        cmd += ["--index-url", settings["index-url"].split()[0]]
    for url in settings.get("extra-index-url", "").split():
        cmd += ["--extra-index-url", url]
    for place in settings.get("find-links", "").split():
        cmd += ["--find-links", place]
    for path in settings.get("constraint", "").split():
        cmd += ["-c", path]
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        cmd.append("--no-index")
    env = stack_env(stack)
    if settings.get("cert"):
        env.setdefault("SSL_CERT_FILE", settings["cert"])
    if settings.get("default-timeout"):
        env.setdefault("UV_HTTP_TIMEOUT", settings["default-timeout"].split(".")[0])
    _run(cmd + args, env, what)


def make_venv(stack: str) -> None:
    """Create or refresh the stack's venv (not the package); raises Skip."""
    spec = STACKS[stack]
    vdir = venv_dir(stack)
    stamp_file = os.path.join(vdir, ".picklefix-stamp")
    stamp = _stamp(stack)
    env = stack_env(stack)
    fresh = not (os.path.exists(stamp_file) and open(stamp_file).read() == stamp)
    if fresh:
        log(f"{stack}: creating {os.path.relpath(vdir, ROOT)}")
        shutil.rmtree(vdir, ignore_errors=True)
        os.makedirs(VENVS, exist_ok=True)
        if spec["python"] == "py39":
            proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "bootstrap_py39.sh"),
                                   PY39_PREFIX, vdir], cwd=ROOT, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if proc.returncode != 0:
                reason = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "unknown"
                raise Skip(f"Python 3.9 could not be set up: {reason}")
        else:
            base = sys.executable if spec["python"] == "host" else find_python(spec["python"])
            _run([base, "-m", "venv", vdir], env, "python -m venv")
        py = python_of(stack)
        constraints = os.path.join(ROOT, "constraints", spec["constraints"])
        installed = False
        if uv() is not None:
            try:
                install_with_uv(stack, constraints)
                installed = True
            except Skip as exc:  # pip's verdict is the one that counts
                lines = str(exc).strip().splitlines()
                why = lines[0] + (" ... " + lines[-1].strip() if len(lines) > 1 else "")
                log(f"{stack}: uv could not install it ({why}); pip instead")
        if not installed:
            install_with_pip(stack, constraints, env)
        if spec.get("shims"):
            site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  env=env, capture_output=True, text=True).stdout.strip()
            for shim in spec["shims"]:
                for ext in (".py", ".pth"):
                    shutil.copy(os.path.join(SHIMS, shim + ext), site)
        with open(stamp_file, "w") as f:
            f.write(stamp)
    else:
        log(f"{stack}: {os.path.relpath(vdir, ROOT)} is up to date")


def install_with_uv(stack: str, constraints: str) -> None:
    spec = STACKS[stack]
    if spec.get("nodeps"):
        _uv_install(stack, ["--no-deps", "-c", constraints] + spec["nodeps"],
                    f"uv pip install {' '.join(spec['nodeps'])}")
    # uv reaches every index for Python 3.9 too: the host wheels come with the rest.
    _uv_install(stack, ["-c", constraints] + spec["packages"] + spec.get("host_wheels", []),
                f"uv pip install -c constraints/{spec['constraints']}")


def install_with_pip(stack: str, constraints: str, env: Dict[str, str]) -> None:
    spec = STACKS[stack]
    pip = [python_of(stack), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if spec.get("nodeps"):
        _run(pip + ["--no-deps", "-c", constraints] + spec["nodeps"], env,
             f"pip install {' '.join(spec['nodeps'])}")
    _run(pip + ["-c", constraints] + spec["packages"], env,
         f"pip install -c constraints/{spec['constraints']}")
    if spec.get("host_wheels"):
        wheels = os.path.join(VENVS, f"wheels-{stack}")
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
              "--python-version", "3.9", "-d", wheels] + spec["host_wheels"], env,
             f"pip download {' '.join(spec['host_wheels'])}")
        _run(pip + ["--no-deps", "--no-index", "--find-links", wheels] + spec["host_wheels"],
             env, f"pip install {' '.join(spec['host_wheels'])}")


def install_package(stack: str) -> None:
    """The package itself, built and installed as a user would (no dependencies pulled)."""
    env = stack_env(stack)
    if STACKS[stack].get("speedups") is False:  # as a user's install without a compiler
        env["TFP_PICKLEFIX_SPEEDUPS"] = "off"
    elif STACKS[stack]["python"] == "py39":
        # Python 3.9's headers, where scripts/bootstrap_py39.sh could fetch them, for this
        # install alone (the stack's dependencies were installed without them).
        include = os.path.join(PY39_PREFIX, "dev", "usr", "include")
        if os.path.exists(os.path.join(include, "python3.9", "Python.h")):
            env["CFLAGS"] = " ".join(filter(None, [
                f"-I{include}/python3.9 -I{include}", env.get("CFLAGS", "")]))
    _run([python_of(stack), "-m", "pip", "install", "--disable-pip-version-check", "-q",
          "--no-deps", "--force-reinstall", ROOT], env, "pip install tfp-picklefix")
    copy_extension(stack, env)


def copy_extension(stack: str, env: Dict[str, str]) -> None:
    """The tests import the package from the checkout (``python -m pytest`` from its
    root): give the checkout the C extension that the install built for this stack's
    Python (``_speedups.<its ABI tag>.so``, ignored by git), or else none, so that they
    run the code a user's install runs."""
    code = ("import sysconfig\n"
            "print(sysconfig.get_config_var('EXT_SUFFIX'))\n"
            "print(sysconfig.get_paths()['platlib'])\n")
    out = subprocess.run([python_of(stack), "-c", code], cwd="/", env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if out.returncode != 0:
        raise Skip(f"cannot ask {stack}'s Python where the package went: {out.stdout[-500:]}")
    suffix, platlib = out.stdout.split()[-2:]
    name = "_speedups" + suffix
    built = os.path.join(platlib, "tfp_picklefix", name)
    target = os.path.join(ROOT, "tfp_picklefix", name)
    if os.path.exists(target):
        os.remove(target)
    if os.path.exists(built):
        shutil.copyfile(built, target)
        log(f"{stack}: the cache's C path (tfp_picklefix/{name}) was built")
    elif env.get("TFP_PICKLEFIX_SPEEDUPS") == "off":
        log(f"{stack}: installed with TFP_PICKLEFIX_SPEEDUPS=off (as without a compiler): "
            "its tests run the pure-Python cache")
    else:
        log(f"{stack}: the cache's C path was not built here (no compiler or no Python "
            "headers): its tests run the pure-Python cache")


def parallel_args(stack: str) -> List[str]:
    """pytest-xdist's arguments for ``stack``: as many workers as cores, at most 4
    (each worker's tests start TF processes of their own), or
    ``TFP_PICKLEFIX_TEST_WORKERS``; none for the stacks without pytest-xdist."""
    if not STACKS[stack].get("parallel"):
        return []
    wanted = os.environ.get("TFP_PICKLEFIX_TEST_WORKERS", "").strip()
    workers = int(wanted) if wanted else min(os.cpu_count() or 1, 4)
    if workers <= 1:
        return []
    # One test at a time to whichever worker is free; tests/conftest.py puts the long
    # ones (minutes each) first, so that they do not end up queued behind each other.
    return ["-n", str(workers), "--dist", "load", "--maxschedchunk", "1"]


_SUMMARY = re.compile(
    r"^(?:=+ )?(\d+ (?:passed|failed|skipped|errors?|deselected).* in [\d.]+s.*?|no tests ran.*?)(?: =+)?\s*$")


def test(stack: str, deadline: Optional[float] = None) -> Tuple[str, str]:
    """Makes the stack's venv, installs the package, runs the tests: returns
    (PASS|FAIL|SKIP, detail). At ``deadline`` (a ``time.time()``) the tests still
    running are stopped, and the stack FAILs with that reason."""
    start = time.time()
    try:
        setup(stack)
    except Skip as exc:
        if STACKS[stack].get("required"):
            return "FAIL", f"could not install the required default stack: {exc}"
        return "SKIP", str(exc).splitlines()[0] + (
            "\n" + "\n".join("    " + l for l in str(exc).splitlines()[1:]) if "\n" in str(exc) else "")
    set_up = time.time()
    os.makedirs(LOGS, exist_ok=True)
    logfile = os.path.join(LOGS, f"{stack}.log")
    selection = STACKS[stack].get("tests", ["tests"])
    cmd = [python_of(stack), "-m", "pytest"] + selection + [
        "-p", "no:cacheprovider", "-q", "-ra", "--durations=20"] + parallel_args(stack)
    log(f"{stack}: {' '.join(cmd[1:])}")
    summary = ""
    with open(logfile, "w") as out:
        # A session of its own: at the deadline, pytest and every process it started
        # (xdist's workers, the tests' children) are stopped together.
        proc = subprocess.Popen(cmd, cwd=ROOT, env=stack_env(stack), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        stopped = threading.Event()

        def stop() -> None:
            stopped.set()
            log(f"{stack}: stopping its tests: the time budget's hard stop has come")
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(max(0.0, deadline - time.time()), stop) if deadline else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            sys.stdout.write(line)
            m = _SUMMARY.search(line)
            if m:
                summary = m.group(1)
        code = proc.wait()
        if timer is not None:
            timer.cancel()
    took = f"stack {time.time() - start:.0f}s: setup {set_up - start:.0f}s, tests {time.time() - set_up:.0f}s"
    if stopped.is_set() and code != 0:  # (not when its tests ended as the stop came)
        return "FAIL", (f"stopped at the time budget's hard stop, {HARD_STOP_GRACE // 60} min "
                        f"past TFP_PICKLEFIX_TIME_BUDGET, before its tests ended (log: "
                        f"{os.path.relpath(logfile, ROOT)}) ({took})")
    if code == 0:
        return "PASS", f"{summary} ({took})"
    if code == 5:
        return "FAIL", f"pytest collected no tests (exit 5) ({took})"
    return "FAIL", f"pytest exit {code}: {summary} (log: {os.path.relpath(logfile, ROOT)}) ({took})"


def time_budget() -> Optional[float]:
    """TFP_PICKLEFIX_TIME_BUDGET in seconds (it is given in minutes), or None: no budget."""
    raw = os.environ.get("TFP_PICKLEFIX_TIME_BUDGET", "").strip()
    if not raw:
        return None
    try:
        minutes = float(raw)
    except ValueError:
        raise SystemExit(f"TFP_PICKLEFIX_TIME_BUDGET must be a number of minutes, not {raw!r}")
    if minutes <= 0:
        raise SystemExit(f"TFP_PICKLEFIX_TIME_BUDGET must be positive, not {raw!r}")
    return minutes * 60


def budget_verdict(stack: str, elapsed: float, ran: List[Tuple[str, float]],
                   budget: Optional[float]) -> Optional[str]:
    """None when ``stack`` is to run, else why it is not (a SKIP line's reason).

    ``elapsed``: seconds since the run began; ``ran``: (stack, seconds it took) of the
    stacks that ran so far. The stack's usual time (``USUAL_SECONDS``) is scaled by the
    pace of those (their time over their usual time; 1 before any ran), and the stack
    is skipped when it would end past ``budget``. The required stack always runs, as
    does every stack without a budget or without a usual time (an extended one)."""
    if budget is None or STACKS[stack].get("required") or stack not in USUAL_SECONDS:
        return None
    known = [(s, took) for s, took in ran if s in USUAL_SECONDS]
    usual = sum(USUAL_SECONDS[s] for s, _ in known)
    pace = sum(took for _, took in known) / usual if usual else 1.0
    need = USUAL_SECONDS[stack] * pace
    if elapsed + need <= budget:
        return None
    return (f"not run: the time budget (TFP_PICKLEFIX_TIME_BUDGET={budget / 60:g} min) would "
            f"be exceeded: {elapsed / 60:.0f} min spent, and this stack takes about "
            f"{need / 60:.0f} min here now ({USUAL_SECONDS[stack] / 60:.0f} min at this "
            f"machine's usual speed, the stacks so far ran {pace:.1f}x that); "
            f"`make test STACKS={stack}` runs it")


# A stack still running HARD_STOP_GRACE seconds past the budget (one much slower than
# its pace foretold, or a test that hangs) is stopped and FAILs: the run still ends with
# its verdicts before CI's own limit (90 min; the budget CI sets is 80).
HARD_STOP_GRACE = 7 * 60


def run_stacks(stacks: List[str], budget: Optional[float],
               run: Optional[Callable[[str, Optional[float]], Tuple[str, str]]] = None,
               clock: Callable[[], float] = time.time) -> List[Tuple[str, str, str]]:
    """``run`` (:func:`test`) each stack in turn, but those that ``budget_verdict`` says
    not to: (stack, PASS|FAIL|SKIP, detail) for each."""
    run = run or test
    results = []
    began = clock()
    deadline = None if budget is None else began + budget + HARD_STOP_GRACE
    ran: List[Tuple[str, float]] = []
    # One stack at a time, its venv made just before its tests. (Stop 27 made the next
    # stack's venv during the tests: the tests beside it ran up to 3 times slower, and
    # CI took 82 minutes against 69.)
    for stack in stacks:
        log(f"===== {stack} =====")
        why = budget_verdict(stack, clock() - began, ran, budget)
        if why is not None:
            log(f"{stack}: {why}")
            results.append((stack, "SKIP", why))
            continue
        start = clock()
        verdict, detail = run(stack, deadline)
        if verdict != "SKIP":  # one that could not be installed says nothing of the pace
            ran.append((stack, clock() - start))
        results.append((stack, verdict, detail))
    return results


def demo(stack: str) -> int:
    try:
        setup(stack)
    except Skip as exc:
        print(f"SKIP {stack}: {exc}")
        return 1
    env = stack_env(stack)
    env.pop("TFP_PICKLEFIX_STACK", None)
    out = os.path.join(LOGS, "demo")
    os.makedirs(out, exist_ok=True)
    model = os.path.join(out, "svgp_model.pkl")
    py = python_of(stack)
    steps = [
        ([py, "-m", "tfp_picklefix", "check"], "self-test of the installed stack"),
        ([py, "examples/svgp_pickle.py", "--out", model], "the seed: train an SVGP, pickle it"),
        ([py, "examples/svgp_load.py", model], "load it in a process without tfp_picklefix"),
    ]
    for cmd, what in steps:
        log(f"demo ({stack}): {what}: {' '.join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)}")
        code = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        if code != 0:
            log(f"demo step failed (exit {code})")
            return code
    log(f"demo on {stack}: all steps passed")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("test", "setup", "demo", "list"))
    parser.add_argument("--stacks", default="all",
                        help="comma-separated stacks, 'all' (" + ", ".join(
                            s for s in STACKS if not STACKS[s].get("extended"))
                        + ") or 'extended' (all, and " + ", ".join(
                            s for s in STACKS if STACKS[s].get("extended")) + ")")
    parser.add_argument("--stack", default=DEFAULT_STACK, help="stack for demo")
    args = parser.parse_args(argv)
    _installer_choice()  # a wrong TFP_PICKLEFIX_INSTALLER stops the run before anything
    if args.command == "list":
        print("\n".join(s + (" (extended: not in 'all')" if STACKS[s].get("extended") else "")
                        for s in STACKS))
        return 0
    if args.command == "demo":
        return demo(args.stack)
    if args.stacks in ("all", ""):
        stacks = list(DEFAULT_RUN)
    elif args.stacks == "extended":
        stacks = DEFAULT_RUN + [s for s in STACKS if s not in DEFAULT_RUN]
    else:
        stacks = args.stacks.split(",")
    unknown = [s for s in stacks if s not in STACKS]
    if unknown:
        parser.error(f"unknown stacks: {unknown}")
    if args.command == "setup":
        for stack in stacks:
            try:
                setup(stack)
            except Skip as exc:
                print(f"SKIP {stack}: {exc}")
        return 0
    results = run_stacks(stacks, time_budget())
    print("\n==================== tfp-picklefix test matrix ====================")
    for stack, verdict, detail in results:
        sep = ":" if verdict == "SKIP" else ""
        print(f"{verdict} {stack}{sep} {detail}")
    failed = [s for s, v, _ in results if v == "FAIL"]
    skipped = [s for s, v, _ in results if v == "SKIP"]
    print(f"{len(results) - len(failed)} of {len(results)} stacks without failure"
          + (f"; skipped: {', '.join(skipped)}" if skipped else "")
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
