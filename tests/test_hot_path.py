"""forward/inverse stay TFP's own functions; only pickling hooks (legacy) or the cache object change."""
from __future__ import annotations

import json

import pytest

from conftest import import_substrates_code, bijector_module, run_python, substrates

HOT = ("forward", "inverse", "forward_log_det_jacobian", "inverse_log_det_jacobian",
       "_call_forward", "_call_inverse", "_call_forward_log_det_jacobian",
       "_call_inverse_log_det_jacobian")


def test_forward_and_inverse_are_the_original_objects():
    if not substrates():
        pytest.skip("no TFP substrate on this stack")
    modules = [bijector_module(s).__name__ for s in substrates()]
    code = import_substrates_code() + f"""
bases = [sys.modules[m].Bijector for m in {modules!r}]
before = [{{k: v for k, v in vars(b).items()}} for b in bases]
import tfp_picklefix
out = []
for b, snap in zip(bases, before):
    hot = [k for k in {HOT!r} if k in snap]
    same = [k for k in hot if vars(b)[k] is snap[k]]
    changed = sorted(k for k in set(vars(b)) | set(snap) if vars(b).get(k) is not snap.get(k))
    out.append([b.__module__, hot, same, changed])
print(json.dumps(out))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    for module, hot, same, changed in json.loads(result.stdout.strip().splitlines()[-1]):
        assert {"forward", "inverse"} <= set(hot), module
        assert same == hot, module
        # Legacy eras: only pickling hooks. Global era: the class-level cache object,
        # the reducer (pickling only) and the hook that runs when a subclass is defined.
        assert set(changed) <= {"__getstate__", "__setstate__", "_cache", "__reduce_ex__",
                                "__init_subclass__"}, (module, changed)
        assert not ({"__getstate__", "__setstate__"} & set(changed) and "_cache" in changed)
