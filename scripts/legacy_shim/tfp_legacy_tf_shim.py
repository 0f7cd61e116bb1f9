"""Lets TFP 0.9/0.10 import on TF 2.5.3 (the oldest TF that installs on Python 3.9).

TFP 0.9/0.10's ``tfp.experimental.auto_batching`` imports
``tensorflow.python.autograph.core.naming``, which TF 2.4 removed. This finder
supplies that one module, lazily, without importing TensorFlow itself. It is part
of the test stacks' setup (installed as a ``.pth`` into legacy-0.9/0.10 venvs),
not of tfp_picklefix; only auto_batching, which no test uses, would need more.
"""
import importlib.abc
import importlib.machinery
import sys

_NAME = "tensorflow.python.autograph.core.naming"


class _Namer(object):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("autograph naming is not available on this TF; "
                                  "tfp.experimental.auto_batching cannot run here")


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.Namer = _Namer


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _NAME:
            return None
        for finder in sys.meta_path:  # a real module wins, if TF has one
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            try:
                spec = finder.find_spec(fullname, path, target)
            except Exception:
                spec = None
            if spec is not None:
                return spec
        return importlib.machinery.ModuleSpec(fullname, _Loader())


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.append(_Finder())
