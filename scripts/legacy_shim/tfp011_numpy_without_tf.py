"""Lets TFP 0.11.1's NumPy substrate import on Python 3.11 without TensorFlow.

TFP 0.11's NumPy substrate (``tensorflow_probability.python.experimental.substrates.numpy``)
is real, TF-free code, but it sits below package ``__init__`` files that import
TensorFlow. This finder stands in for those *package* ``__init__`` files only: each
such package gets a module with the real ``__path__`` and nothing executed, so the
substrate's own modules (``..._numpy``, ``...backend.numpy``) are loaded from TFP's
files as they are. Installed as a ``.pth`` into the numpy-substrate-0.11 test venv.
"""
import importlib.abc
import importlib.machinery
import sys

_ROOT = "tensorflow_probability"


def _real_code(fullname):
    parts = fullname.split(".")
    return any(p in ("_numpy", "numpy") for p in parts)


class _StubLoader(importlib.abc.Loader):
    def __init__(self, path):
        self._path = path

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = [self._path]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _ROOT and not fullname.startswith(_ROOT + "."):
            return None
        if _real_code(fullname):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations:
            return None  # a plain module: load it for real
        directory = list(spec.submodule_search_locations)[0]
        stub = importlib.machinery.ModuleSpec(fullname, _StubLoader(directory), is_package=True)
        stub.submodule_search_locations = [directory]
        return stub


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:  # with TF present, TFP imports normally
        sys.meta_path.insert(0, _Finder())
