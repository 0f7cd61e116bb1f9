"""Coverage table: every public TFP class x mode x serializer, round-tripped and checked.

    python scripts/coverage.py --substrate tf [--out coverage] [--only tfd.Normal,...] [--jobs 2]
    python scripts/coverage.py --summary [coverage]     # the README's table

For each class of tfp.bijectors / distributions / math.psd_kernels / util (found by
introspection, built by ``tests/coverage_cases.py``), in each mode (``eager``; ``function``:
after use inside ``tf.function``; ``variable``: float parameters are ``tf.Variable``s,
assigned new values before the round trip; in JAX, distributions are evaluated through
``jax.jit`` with the object as a pytree argument), and
for each serializer (pickle protocols 0-5, copy, deepcopy, cloudpickle, dill; or
``--serializers pickle0,pickle1,...``), one cell
passes when the round trip works and the copy gives the same values: ``sample`` with
the same seed, ``log_prob``, ``mean``; ``forward``/``inverse``/log-dets; kernel
matrices; tensor values; and the same variables (current values, names, trainability).
In ``variable`` mode a deep copy must also compute with variables of its own: changed,
they leave the original as it was, and the original given their values computes what
the copy does.
Writes ``<out>/<stack>-<substrate>.json`` and ``.md``. Exit status 0 (the test decides).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import pickle
import platform
import sys
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

MODES = {"tf": ("eager", "function", "variable"), "jax": ("eager",), "numpy": ("eager",)}


def serializers(names: str = "") -> List[Tuple[str, Callable[[Any], Any]]]:
    """(name, round trip) of every serializer, or of the comma-separated ``names``."""
    import cloudpickle
    import dill

    out = [(f"pickle{n}", (lambda o, n=n: pickle.loads(pickle.dumps(o, protocol=n))))
           for n in range(pickle.HIGHEST_PROTOCOL + 1)]
    out += [("copy", copy.copy), ("deepcopy", copy.deepcopy),
            ("cloudpickle", lambda o: cloudpickle.loads(cloudpickle.dumps(o))),
            ("dill", lambda o: dill.loads(dill.dumps(o)))]
    wanted = [name for name in names.split(",") if name]
    unknown = set(wanted) - {name for name, _ in out}
    if unknown:
        raise SystemExit(f"unknown serializers: {sorted(unknown)}")
    return [item for item in out if not wanted or item[0] in wanted]


def _np(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_np(v) for v in value]
    if isinstance(value, dict):
        return {k: _np(v) for k, v in sorted(value.items())}
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    return np.asarray(value)


_SEEDS: Dict[str, Any] = {}


def _seed(ns: Any) -> Any:
    """One stateless seed per substrate (made once: sanitizing an int can be stateful)."""
    if ns.name not in _SEEDS:
        import coverage_cases as cc

        _SEEDS[ns.name] = cc.stateless_seed(42)
    return _SEEDS[ns.name]


_JAX_FNS: Dict[str, Any] = {}


def _jax_distribution_values(key: str, obj: Any, seed: Any) -> Any:
    """sample/log_prob/mean through one ``jax.jit`` per class, with the distribution as
    its argument (TFP's JAX distributions are pytrees): eager JAX re-compiles every
    sampler's loops on each call, which made this table take many minutes. A copy with
    another structure or other leaves gives another result. None: not a pytree."""
    import jax

    def arrays(dist: Any, seed: Any) -> Dict[str, Any]:
        found = {"sample": dist.sample(seed=seed)}
        found["log_prob"] = dist.log_prob(found["sample"])
        try:
            found["mean"] = dist.mean()
        except Exception:  # no mean: the eager path reports how it raises
            pass
        return found

    fn = _JAX_FNS.setdefault(key, jax.jit(arrays))
    try:
        return fn(obj, seed)
    except TypeError:  # not a pytree: evaluate eagerly
        return None


def values(key: str, obj: Any, cc: Any) -> Dict[str, Any]:
    """What the object computes, by kind (errors become values, to be compared too)."""
    ns = cc.NS
    out: Dict[str, Any] = {}

    def put(name: str, fn: Callable[[], Any]) -> None:
        try:
            out[name] = fn()
        except Exception as exc:  # e.g. no mean: the copy must raise the same way
            out[name] = f"raises {type(exc).__name__}"

    if isinstance(obj, ns.tfb.Bijector):
        x = cc.bijector_input(key, obj)
        nd = obj.forward_min_event_ndims
        put("forward", lambda: obj.forward(x))
        y = out.get("forward")
        put("inverse", lambda: obj.inverse(y))
        put("fldj", lambda: obj.forward_log_det_jacobian(x, event_ndims=nd))
        put("ildj", lambda: obj.inverse_log_det_jacobian(y, event_ndims=obj.inverse_min_event_ndims))
    elif isinstance(obj, ns.tfd.Distribution):
        seed = _seed(ns)
        compiled = _jax_distribution_values(key, obj, seed) if ns.name == "jax" else None
        if compiled is not None:
            out.update(compiled)
        else:
            put("sample", lambda: cc.sample(obj, seed))
            s = out.get("sample")
            put("log_prob", lambda: obj.log_prob(s))
            put("mean", lambda: obj.mean())
        put("fully_reparameterized",  # TFP compares these constants by identity
            lambda: obj.reparameterization_type == ns.tfd.FULLY_REPARAMETERIZED)
    elif isinstance(obj, ns.psd.PositiveSemidefiniteKernel):
        x = np.array([[0.1], [0.5], [0.9]], np.float32)
        put("matrix", lambda: obj.matrix(x, x))
    elif key in ("util.DeferredTensor", "util.TransformedVariable"):
        put("value", lambda: ns.tf.convert_to_tensor(obj))
    elif key == "util.SeedStream":
        put("state", lambda: repr(sorted(vars(obj).items())))
    else:
        put("fields", lambda: [v for v in tuple(obj) if not callable(v)])
    return out


def variables_of(obj: Any) -> List[Tuple[str, Any, bool]]:
    found = getattr(obj, "trainable_variables", None)
    if found is None:
        return []
    return [(v.name, np.asarray(v.numpy()), bool(v.trainable)) for v in found]


def _leaves(value: Any) -> List[Any]:
    value = _np(value)
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for _, v in sorted(value.items()) for leaf in _leaves(v)]
    return [value]


def compare(ref: Dict[str, Any], got: Dict[str, Any]) -> None:
    assert ref.keys() == got.keys(), (sorted(ref), sorted(got))
    for name in ref:
        a, b = ref[name], got[name]
        if isinstance(a, str) or isinstance(b, str):
            assert a == b, f"{name}: {a!r} vs {b!r}"
            continue
        a, b = _leaves(a), _leaves(b)
        assert len(a) == len(b), name
        for x, y in zip(a, b):
            if x.dtype.kind in "fc":
                np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=name)
            else:
                assert np.array_equal(x, y), name


def make_param(mode: str, ns: Any) -> Callable[[Any], Any]:
    if mode == "variable":
        return lambda v: ns.tf.Variable(np.asarray(v, np.float32))
    return lambda v: np.asarray(v, np.float32) if isinstance(v, (float, list)) else v


_JITTED: List[str] = []


def prepare(key: str, mode: str, build: Callable, cc: Any) -> Any:
    """A fresh object in ``mode``, used as that mode says."""
    ns = cc.NS
    obj = build(make_param(mode, ns))
    if mode == "variable":
        for v in getattr(obj, "trainable_variables", ()):
            v.assign(v * 1.1)  # current values must survive, not initial ones
    elif mode == "function":
        ns.tf.function(lambda: values(key, obj, cc))()
    elif mode == "jit":
        import jax

        jax.jit(lambda: {k: v for k, v in values(key, obj, cc).items() if not isinstance(v, str)})()
        _JITTED.append(key)
        if len(_JITTED) % 40 == 0:
            # Each compiled program maps code pages; ~170 of them exhaust the mappings.
            # (Clearing after every class would also drop the eager op cache: slow.)
            jax.clear_caches()
    return obj


def independent(key: str, obj: Any, clone: Any, ref: Dict[str, Any], cc: Any) -> None:
    """A deep copy computes with its own variables: changed, they leave the original as
    it was, and the original given the same values computes what the copy does (a copy
    that shares a closure over the original's state fails the second check)."""
    mine, theirs = list(obj.trainable_variables), list(clone.trainable_variables)
    assert not {id(v) for v in mine} & {id(v) for v in theirs}, "the deep copy shares variables"
    for v in theirs:
        v.assign(v * 1.25)
    changed = values(key, clone, cc)
    compare(ref, values(key, obj, cc))
    saved = [v.numpy() for v in mine]
    try:
        for v, w in zip(mine, theirs):
            v.assign(w)
        try:
            compare(changed, values(key, obj, cc))
        except AssertionError as exc:
            raise AssertionError(f"the deep copy does not compute with its own variables: {exc}")
    finally:
        for v, s in zip(mine, saved):
            v.assign(s)


def short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:160]


def run(substrate: str, only: List[str], shard: Tuple[int, int] = (0, 1),
        names: str = "") -> Dict[str, Any]:
    """The cells of every class (or of ``only``); ``shard`` (k, n): every n-th class,
    from the k-th."""
    import coverage_cases as cc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ns = cc.use(substrate)
        import tfp_picklefix

        tfp_picklefix.patch()
        sers = serializers(names)
        keys = (only or cc.class_names(ns))[shard[0]::shard[1]]
        classes: Dict[str, Any] = {}
        for key in keys:
            build = cc.builder(key)
            if build is None:
                classes[key] = {"built": False,
                                "reason": cc.NOT_BUILT.get(key, "no builder: add it to tests/coverage_cases.py")}
                continue
            cells: Dict[str, Dict[str, str]] = {}
            for mode in MODES[substrate]:
                if mode == "variable" and not _has_float_params(build):
                    continue
                try:
                    obj = prepare(key, mode, build, cc)
                    ref = values(key, obj, cc)
                    if all(isinstance(v, str) and v.startswith("raises ") for v in ref.values()):
                        raise RuntimeError(f"every quantity raises: {ref}")
                    ref_vars = variables_of(obj)
                    ref_type = type(obj)
                except Exception as exc:  # the class cannot be used this way: not a cell
                    cells[mode] = {"error": "not built: " + short(exc)}
                    continue
                row: Dict[str, str] = {}
                for name, roundtrip in sers:
                    try:
                        clone = roundtrip(obj)
                        assert type(clone) is ref_type, f"type {type(clone)} vs {ref_type}"
                        compare(ref, values(key, clone, cc))
                        got_vars = variables_of(clone)
                        assert [(n, t) for n, _, t in got_vars] == [(n, t) for n, _, t in ref_vars], \
                            "variables (names, trainable) differ"
                        for (_, a, _), (_, b, _) in zip(ref_vars, got_vars):
                            np.testing.assert_array_equal(a, b)
                        if mode == "variable" and name == "deepcopy":
                            independent(key, obj, clone, ref, cc)
                        row[name] = "ok"
                    except Exception as exc:
                        row[name] = short(exc)
                        if os.environ.get("COVERAGE_TRACEBACK"):
                            traceback.print_exc()
                cells[mode] = row
            classes[key] = {"built": True, "cells": cells}
    return classes


def _shard_path(stem: str, k: int) -> str:
    """Where shard ``k`` (``--shard k/n``) writes its cells for :func:`run_jobs`."""
    return f"{stem}.shard{k}.json"


def run_jobs(args: Any, stem: str) -> Dict[str, Any]:
    """:func:`run` shared out to ``args.jobs`` processes of this script (``--shard
    k/jobs``, each writing :func:`_shard_path`), side by side; their cells merged.
    A process that fails fails the whole run."""
    import subprocess

    jobs = args.jobs
    base = [sys.executable, os.path.abspath(__file__), "--substrate", args.substrate,
            "--stack", args.stack, "--out", args.out] + (["--only", args.only] if args.only else []) + (
                ["--serializers", args.serializers] if args.serializers else [])
    procs = [subprocess.Popen(base + ["--shard", f"{k}/{jobs}"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for k in range(jobs)]
    outputs = [proc.communicate()[0] for proc in procs]
    classes: Dict[str, Any] = {}
    for k, (proc, output) in enumerate(zip(procs, outputs)):
        if proc.returncode != 0:
            raise SystemExit(f"coverage shard {k}/{jobs} failed (exit {proc.returncode}):\n"
                             + output[-4000:])
        path = _shard_path(stem, k)
        with open(path) as f:
            classes.update(json.load(f))
        os.remove(path)
    return classes


def _has_float_params(build: Callable) -> bool:
    seen: List[Any] = []

    def p(v: Any) -> Any:
        seen.append(v)
        return np.asarray(v, np.float32) if isinstance(v, (float, list)) else v

    try:
        build(p)
    except Exception:
        return False
    return bool(seen)


def versions() -> Dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("tensorflow", "tf-nightly", "tensorflow-probability", "tfp-nightly", "jax",
                 "numpy", "cloudpickle", "dill"):
        try:
            out[dist] = metadata.version(dist)
        except Exception:
            pass
    return out


def summarize(classes: Dict[str, Any]) -> Tuple[int, int, List[Tuple[str, str, str, str]]]:
    total = passed = 0
    failures = []
    for key, info in sorted(classes.items()):
        for mode, row in info.get("cells", {}).items():
            for ser, result in row.items():
                if ser == "error":
                    continue
                total += 1
                if result == "ok":
                    passed += 1
                else:
                    failures.append((key, mode, ser, result))
    return passed, total, failures


def markdown(report: Dict[str, Any]) -> str:
    classes = report["classes"]
    passed, total, failures = summarize(classes)
    sers = report["serializers"]
    lines = [f"# Coverage: {report['stack']} stack, {report['substrate']} substrate", "",
             f"Generated by `python scripts/coverage.py --substrate {report['substrate']}`; "
             f"versions: {json.dumps(report['versions'])}.", "",
             f"**{passed} of {total} cells pass ({100.0 * passed / max(total, 1):.1f} %)**: "
             f"{sum(1 for c in classes.values() if c['built'])} classes built, modes "
             f"{', '.join(report['modes'])}, serializers {', '.join(sers)}.", ""]
    if failures:
        lines += ["## Failing cells", "", "| class | mode | serializer | error |", "|---|---|---|---|"]
        lines += [f"| {k} | {m} | {s} | {e.replace('|', '/')} |" for k, m, s, e in failures]
        lines.append("")
    unusable = [(k, m, row["error"]) for k, info in sorted(classes.items())
                for m, row in info.get("cells", {}).items() if "error" in row]
    if unusable:
        lines += ["## Modes a class could not be built or used in (no cells)", "",
                  "| class | mode | error |", "|---|---|---|"]
        lines += [f"| {k} | {m} | {e.replace('|', '/')} |" for k, m, e in unusable]
        lines.append("")
    lines += ["## Classes not built", "", "| class | reason |", "|---|---|"]
    lines += [f"| {k} | {info['reason']} |" for k, info in sorted(classes.items()) if not info["built"]]
    lines += ["", "## All cells", "", "One mark per serializer (" + ", ".join(sers) +
              "): `.` passes, `X` fails.", "", "| class | " + " | ".join(report["modes"]) + " |",
              "|---|" + "---|" * len(report["modes"])]
    for key, info in sorted(classes.items()):
        if not info["built"]:
            continue
        marks = []
        for mode in report["modes"]:
            row = info["cells"].get(mode)
            if row is None:
                marks.append("-")
            elif "error" in row:
                marks.append("not built")
            else:
                marks.append("`" + "".join("." if row.get(s) == "ok" else "X" for s in sers) + "`")
        lines.append(f"| {key} | " + " | ".join(marks) + " |")
    return "\n".join(lines) + "\n"


def summary_table(directory: str) -> str:
    """One Markdown row per committed table (for the README)."""
    rows = ["| stack | substrate | TFP | classes built | cells passing | table |",
            "|---|---|---|---|---|---|"]
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(directory, name)) as f:
            report = json.load(f)
        passed, total, _ = summarize(report["classes"])
        versions = report["versions"]
        tfp = versions.get("tensorflow-probability") or versions.get("tfp-nightly", "?")
        built = sum(1 for c in report["classes"].values() if c["built"])
        rows.append(f"| {report['stack']} | {report['substrate']} | {tfp} | {built} | "
                    f"{passed}/{total} ({100.0 * passed / max(total, 1):.1f} %) | "
                    f"[{name[:-5]}.md](coverage/{name[:-5]}.md) |")
    return "\n".join(rows)


def main(argv: List[str]) -> int:
    if argv[:1] == ["--summary"]:
        print(summary_table(argv[1] if len(argv) > 1 else os.path.join(ROOT, "coverage")))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substrate", choices=sorted(MODES), required=True)
    parser.add_argument("--out", default=os.path.join(ROOT, "coverage"))
    parser.add_argument("--stack", default=os.environ.get("TFP_PICKLEFIX_STACK", "local"))
    parser.add_argument("--only", default="", help="comma-separated class keys, e.g. tfd.Normal")
    parser.add_argument("--jobs", type=int, default=1,
                        help="share the classes out to this many processes (default 1)")
    parser.add_argument("--serializers", default="",
                        help="comma-separated, e.g. pickle0,pickle1 (default: all)")
    parser.add_argument("--shard", default="", help=argparse.SUPPRESS)  # "k/n": one of --jobs
    args = parser.parse_args(argv)
    started = time.time()
    only = [k for k in args.only.split(",") if k]
    stem = os.path.join(args.out, f"{args.stack}-{args.substrate}")
    os.makedirs(args.out, exist_ok=True)
    if args.shard:
        k, n = (int(p) for p in args.shard.split("/"))
        with open(_shard_path(stem, k), "w") as f:
            json.dump(run(args.substrate, only, (k, n), args.serializers), f)
        return 0
    classes = (run_jobs(args, stem) if args.jobs > 1
               else run(args.substrate, only, names=args.serializers))
    report = {"stack": args.stack, "substrate": args.substrate, "modes": list(MODES[args.substrate]),
              "serializers": [name for name, _ in serializers(args.serializers)], "versions": versions(),
              "python": platform.python_version(), "classes": classes}
    passed, total, failures = summarize(classes)
    with open(stem + ".json", "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    with open(stem + ".md", "w") as f:
        f.write(markdown(report))
    print(f"coverage {args.stack}/{args.substrate}: {passed}/{total} cells pass "
          f"({100.0 * passed / max(total, 1):.1f} %), {len(failures)} fail; "
          f"{time.time() - started:.0f} s; written {stem}.json/.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
