"""Importing the package is cheap, imports no ML library, and hooks patch TFP whenever it comes."""
from __future__ import annotations

import json

import pytest

from conftest import EXPECTED_ERA, LEGACY_ERAS, STACK, has_tf, run_python, substrates, era

HEAVY = ("tensorflow", "tensorflow_probability", "gpflow", "jax", "jaxlib")


def test_import_pulls_in_no_ml_library():
    result = run_python(
        "import sys, json; import tfp_picklefix; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


# What `import tfp_picklefix` adds to sys.modules, in a fresh interpreter, split into the
# package's own modules, the standard library's, and any other (JSON). Standard library:
# built-in, frozen, or a file under the interpreter's stdlib directories but not under
# site-packages (sys.stdlib_module_names is 3.10+; the legacy stacks run 3.9).
_IMPORTED = """
import json, os, sys, sysconfig
before = set(sys.modules)
import tfp_picklefix
new = sorted(set(sys.modules) - before)
paths = sysconfig.get_paths()
std_dirs = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib")}
site_dirs = {os.path.realpath(paths[k]) for k in ("purelib", "platlib")}
def inside(path, dirs):
    return any(os.path.realpath(path).startswith(d + os.sep) for d in dirs)
def is_std(name):
    module = sys.modules[name]
    if getattr(getattr(module, "__spec__", None), "origin", None) in ("built-in", "frozen"):
        return True
    path = getattr(module, "__file__", None)
    files = [path] if path else list(getattr(module, "__path__", []))
    if not files and "." in name:  # a module its package makes (typing.io)
        return is_std(name.rsplit(".", 1)[0])
    return bool(files) and all(inside(f, std_dirs) and not inside(f, site_dirs) for f in files)
own = [m for m in new if m.split(".")[0] == "tfp_picklefix"]
std = [m for m in new if m not in own and is_std(m)]
print(json.dumps({"own": own, "std": std,
                  "other": [m for m in new if m not in own and m not in std]}))
"""


def test_import_loads_only_the_package_and_the_standard_library():
    # The package's import loads its own modules (the cache's C path among them, where
    # it was built) and the standard library's, and no third-party module: not even
    # wrapt or NumPy, which load when TFP is patched. What it loads sets its cost; a
    # bound on its time here would assert on the shared machine's load instead (CPU
    # time of the import, best of 7 fresh interpreters: 18 ms on a quiet day, 52 ms in
    # a CI run on 2026-12-07, where the whole suite ran 2.5 times slower).
    result = run_python(_IMPORTED)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["other"] == [], loaded
    assert "tfp_picklefix" in loaded["own"] and loaded["std"], loaded


def test_stack_has_the_expected_era():
    """Guards the matrix: a stack that lost its TFP, or got another one, fails loudly."""
    if not STACK:
        pytest.skip("not run by scripts/matrix.py (TFP_PICKLEFIX_STACK unset)")
    eras = {name: era(name) for name in substrates()}
    assert eras, "no TFP substrate could be imported on this stack"
    assert set(eras.values()) == {EXPECTED_ERA[STACK]}, eras


_STATUS_JSON = (
    "import json, tfp_picklefix; "
    "print(json.dumps([[s.substrate, s.era, s.action, list(s.patched)] "
    "for s in tfp_picklefix.status().substrates]))")


def _import_order_code(first: str, second: str) -> str:
    # Modern TFP loads its modules lazily: touching tfp.bijectors.Bijector imports them.
    touch = "tensorflow_probability.bijectors.Bijector; "
    return (f"import {first}; " + (touch if first == "tensorflow_probability" else "")
            + f"import {second}; " + touch + _STATUS_JSON)


@pytest.mark.parametrize("order", ["package-first", "tfp-first"])
def test_substrate_patched_whichever_is_imported_first(order):
    if not has_tf():
        pytest.skip("this stack has no TensorFlow substrate")
    first, second = ("tfp_picklefix", "tensorflow_probability")
    if order == "tfp-first":
        first, second = second, first
    result = run_python(_import_order_code(first, second))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {row[0]: row for row in json.loads(result.stdout.strip().splitlines()[-1])}
    tf_row = rows["tf"]
    assert tf_row[2] == "patched", tf_row
    if tf_row[1] in LEGACY_ERAS:
        assert "Bijector.__getstate__" in tf_row[3], tf_row
    else:
        assert "Bijector._cache" in tf_row[3], tf_row


def test_lazily_loaded_numpy_substrate_is_patched_when_imported():
    if "numpy" not in substrates():
        pytest.skip("this stack has no NumPy substrate")
    package = substrates()["numpy"].__name__
    result = run_python(
        "import tfp_picklefix; before = [s.substrate for s in tfp_picklefix.status().substrates]; "
        f"import {package}; import json; "
        "rows = [[s.substrate, s.era, s.action] for s in tfp_picklefix.status().substrates]; "
        "print(json.dumps([before, rows]))")
    assert result.returncode == 0, result.stderr[-3000:]
    before, rows = json.loads(result.stdout.strip().splitlines()[-1])
    assert "numpy" not in before
    numpy_rows = [r for r in rows if r[0] == "numpy"]
    assert numpy_rows, rows
    assert numpy_rows[0][2] == "patched", rows


def test_env_off_disables_everything():
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    sub, module = next(iter(substrates().items()))
    result = run_python(
        f"import tfp_picklefix, {module.__name__}; s = tfp_picklefix.status(); "
        "import json; print(json.dumps([s.enabled, s.active, s.mode, len(s.substrates)]))",
        env={"TFP_PICKLEFIX": "off"})
    assert result.returncode == 0, result.stderr[-3000:]
    enabled, active, mode, count = json.loads(result.stdout.strip().splitlines()[-1])
    assert (enabled, active, count) == (False, False, 0)
    assert "off" in mode


def _bound_names(target):
    """The names an assignment target binds (not ``f.attr = ...`` nor ``d[k] = ...``)."""
    import ast

    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    return []


def test_no_module_level_name_is_bound_twice():
    """A second top-level binding of a name silently replaces the first for every
    function that reads it (a table's helper once took the name of a reducer's
    attribute constant and broke F10): each module binds each top-level name once."""
    import ast
    import pathlib

    import tfp_picklefix

    twice = []
    for path in sorted(pathlib.Path(tfp_picklefix.__file__).parent.glob("*.py")):
        seen = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [name for t in targets for name in _bound_names(t)]
            else:
                continue
            twice += [f"{path.name}: {name}" for name in names if name in seen]
            seen.update(names)
    assert twice == []
