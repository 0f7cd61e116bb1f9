"""The five ways the probe scripts copy or ship an object (they run as
``python tests/<probe>.py``, which puts ``tests/`` on the path)."""
from __future__ import annotations

import copy
import pickle
from typing import Any


def _cloudpickle(obj: Any) -> Any:
    import cloudpickle

    return cloudpickle.loads(cloudpickle.dumps(obj))


def _dill(obj: Any) -> Any:
    import dill

    return dill.loads(dill.dumps(obj))


SERIALIZERS = {
    "pickle": lambda obj: pickle.loads(pickle.dumps(obj)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "cloudpickle": _cloudpickle,
    "dill": _dill,
}
