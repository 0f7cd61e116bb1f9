"""A/B benchmark runner: TFP without the package vs with it, in fresh processes.

    python -m benchmarks [--quick] [--python PY] [--tag TAG] [--repeats N] [--gpu]

Every variant (``none``: tfp_picklefix not imported; ``fixed``/``upstream``/``off``:
imported, with that cache mode) runs all cases in its own fresh process; variants
are interleaved A B A B for ``--repeats`` rounds (the order rotates each round).
For each case it reports the median time per call of every variant and the ratio
variant/none (median of the per-round ratios, with min and max), plus fixed/off
(the cache's overhead over no cache at all). Results: JSON, Markdown and a PNG in
``benchmarks/results/<tag>/``. ``--python`` runs the workers in another environment
(e.g. ``.venvs/legacy-0.11/bin/python``); there the variants are none/package.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIJECTORS = ["Exp", "Softplus", "Sigmoid", "ShiftScale", "Chain3", "FillScaleTriL", "RealNVP", "MAF"]
OPS = ["forward", "inverse", "fldj", "ildj"]


def probe(python: str) -> Dict[str, object]:
    code = ("import importlib.util as u, json; "
            "import sys; "
            "tfp = u.find_spec('tensorflow_probability') is not None; "
            "tf = u.find_spec('tensorflow') is not None; jax = u.find_spec('jax') is not None; "
            "gp = u.find_spec('gpflow') is not None; "
            "legacy = False\n"
            "if tfp:\n"
            "    import os\n"
            "    root = u.find_spec('tensorflow_probability').submodule_search_locations[0]\n"
            "    legacy = not os.path.exists(os.path.join(root, 'substrates'))\n"
            "print(json.dumps(dict(tf=tf, jax=jax, gpflow=gp, legacy=legacy, tfp=tfp)))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=_env(None))
    return json.loads(out.stdout.strip().splitlines()[-1])


def cases_for(info: Dict[str, object], quick: bool, gpu: bool) -> List[dict]:
    cases = []

    def add(**case):
        case.setdefault("kind", "bijector")
        case["id"] = "|".join(str(case[k]) for k in sorted(case) if k not in ("id", "kind", "seconds"))
        cases.append(case)

    sizes = [1, 1000] if quick else [1, 1000, 1000000]
    bijectors = ["Exp", "Chain3"] if quick else BIJECTORS
    ops = ["forward", "inverse"] if quick else OPS
    substrates = []
    if info["tf"]:
        substrates.append("tf")
    if not info["legacy"]:
        substrates.append("numpy")
        if info["jax"]:
            substrates.append("jax")
    if gpu:
        substrates = ["jax"]
        sizes = [1000, 1000000] if quick else [1000, 1000000, 100000000]
        bijectors = ["Exp", "Softplus", "Chain3"]
    for sub in substrates:
        for b in bijectors:
            if sub != "tf" and b in ("MAF",):
                continue  # Keras network: TF substrate only
            for size in sizes:
                if size > 1000 and b in ("RealNVP", "MAF", "FillScaleTriL", "Sigmoid", "ShiftScale"):
                    continue
                for op in ops:
                    execs = ["eager"]
                    if sub == "tf" and op == "forward":
                        execs += ["tf_function", "xla"]
                    if sub == "jax" and op == "forward":
                        execs += ["jit"]
                    for ex in execs:
                        caches = ["miss", "hit"] if ex == "eager" else ["miss"]
                        if quick and op in ("fldj", "ildj"):
                            caches = ["miss"]
                        for cache in caches:
                            add(substrate=sub, bijector=b, size=size, op=op, exec=ex, cache=cache)
    if info["tf"] and not gpu:
        add(kind="e2e", substrate="tf", name="transformed_sample_log_prob", exec="eager")
        add(kind="e2e", substrate="tf", name="transformed_sample_log_prob", exec="tf_function")
        if info["gpflow"] and not quick:
            add(kind="e2e", substrate="tf", name="svgp_train_step", exec="eager")
            add(kind="e2e", substrate="tf", name="svgp_train_step", exec="tf_function")
            add(kind="e2e", substrate="tf", name="svgp_predict_f", exec="eager")
    if not gpu:
        for k in ([1, 4] if quick else [1, 4, 16]):
            add(kind="threads", substrate=substrates[0], threads=k, seconds=1.0 if quick else 2.0)
    return cases


def _env(variant):
    env = dict(os.environ)
    env.pop("TFP_PICKLEFIX", None)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["TF_USE_LEGACY_KERAS"] = "1"
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if variant and variant not in ("none", "package"):
        env["TFP_PICKLEFIX_CACHE"] = variant
    return env


QUICK_CALLS = "150"  # per case and round in --quick runs (the full suite uses 300)


def run_round(python, variants, cases_file, workdir, round_no):
    out = {}
    order = variants[round_no % len(variants):] + variants[:round_no % len(variants)]
    for variant in order:
        path = os.path.join(workdir, f"r{round_no}-{variant}.json")
        proc = subprocess.run([python, os.path.join(ROOT, "benchmarks", "worker.py"), "--variant",
                               variant, "--cases", cases_file, "--out", path],
                              env=_env(variant), capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            raise RuntimeError(f"worker {variant} failed:\n{proc.stderr[-3000:]}")
        with open(path) as f:
            out[variant] = json.load(f)
    return out


def aggregate(cases, rounds, variants):
    rows = []
    for case in cases:
        cid = case["id"]
        per_variant = {}
        errors = {}
        for variant in variants:
            values = []
            for rnd in rounds:
                res = next(r for r in rnd[variant]["results"] if r["id"] == cid)
                if "error" in res:
                    errors[variant] = res["error"]
                else:
                    values.append(res["value"])
            per_variant[variant] = values
        row = {"case": case, "median": {}, "ratio": {}, "errors": errors}
        higher_better = case["kind"] == "threads"
        for variant, values in per_variant.items():
            if values:
                row["median"][variant] = statistics.median(values)
        base = per_variant.get("none")
        for variant, values in per_variant.items():
            if variant == "none" or not values or not base or len(base) != len(values):
                continue
            ratios = [(b / v if higher_better else v / b) for v, b in zip(values, base)]
            row["ratio"][variant] = {"median": statistics.median(ratios), "min": min(ratios),
                                     "max": max(ratios)}
        if per_variant.get("fixed") and per_variant.get("off") and not higher_better:
            ratios = [f / o for f, o in zip(per_variant["fixed"], per_variant["off"])]
            row["ratio"]["fixed_vs_off"] = {"median": statistics.median(ratios),
                                            "min": min(ratios), "max": max(ratios)}
        rows.append(row)
    return rows


def _fmt_case(case):
    if case["kind"] == "bijector":
        return (f"{case['substrate']} {case['bijector']} n={case['size']:g} {case['op']} "
                f"{case['exec']} {case['cache']}")
    if case["kind"] == "threads":
        return f"{case['substrate']} Chain3 fwd+inv, {case['threads']} threads (calls/s)"
    return f"{case['substrate']} {case['name']} {case['exec']}"


def write_report(outdir, meta, rows, variants, memory):
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "memory": memory}, f, indent=1)
    unit = lambda v, case: (f"{v:.0f}/s" if case["kind"] == "threads" else f"{v * 1e6:.1f}")  # noqa: E731
    ratio_cols = [v for v in variants if v != "none"] + (
        ["fixed_vs_off"] if "fixed" in variants and "off" in variants else [])
    lines = [f"# Benchmark results: {meta['tag']}", "",
             f"- when: {meta['when']}; machine: {meta['machine']}; python: {meta['python']}",
             f"- versions: {json.dumps(meta['versions'])}",
             f"- variants: {', '.join(variants)} (fresh process each, interleaved, "
             f"{meta['repeats']} rounds); times are median microseconds per call",
             "- ratio = variant / none (median of per-round ratios, [min, max]); "
             "fixed_vs_off = the cache's cost over no cache at all", ""]
    header = "| case | " + " | ".join(f"{v} (us)" for v in variants) + " | " + \
        " | ".join(f"ratio {c}" for c in ratio_cols) + " |"
    lines += [header, "|" + "---|" * (1 + len(variants) + len(ratio_cols))]
    for row in rows:
        case = row["case"]
        cells = [unit(row["median"][v], case) if v in row["median"] else
                 ("error" if v in row["errors"] else "-") for v in variants]
        rcells = []
        for c in ratio_cols:
            r = row["ratio"].get(c)
            rcells.append(f"{r['median']:.2f} [{r['min']:.2f}, {r['max']:.2f}]" if r else "-")
        lines.append(f"| {_fmt_case(case)} | " + " | ".join(cells) + " | " + " | ".join(rcells) + " |")
    errs = [(r["case"], r["errors"]) for r in rows if r["errors"]]
    if errs:
        lines += ["", "Cases that did not run (same error in every variant unless noted):"]
        for case, e in errs:
            lines.append(f"- {_fmt_case(case)}: {next(iter(e.values()))}")
    if memory:
        lines += ["", "## Memory: traced-and-discarded tf.functions", "",
                  "| scenario | variant | iterations | live FuncGraphs | RSS growth (MB) |",
                  "|---|---|---|---|---|"]
        for m in memory:
            lines.append(f"| {m['scenario']} | {m['variant']} | {m['n']} | {m['funcgraphs']} | "
                         f"{m['rss_growth_mb']} |")
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    plot_rows = [r for r in rows if r["case"]["kind"] == "bijector" and r["ratio"]]
    if not plot_rows:
        return
    fig, ax = plt.subplots(figsize=(10, max(4, 0.18 * len(plot_rows))))
    for i, variant in enumerate(v for v in variants if v != "none"):
        ys, xs, lo, hi = [], [], [], []
        for j, row in enumerate(plot_rows):
            r = row["ratio"].get(variant)
            if r:
                ys.append(j + 0.2 * i)
                xs.append(r["median"])
                lo.append(r["median"] - r["min"])
                hi.append(r["max"] - r["median"])
        ax.errorbar(xs, ys, xerr=[lo, hi], fmt="o", ms=3, label=variant)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(plot_rows)))
    ax.set_yticklabels([_fmt_case(r["case"]) for r in plot_rows], fontsize=6)
    ax.set_xlabel("time ratio vs TFP without tfp_picklefix (log scale; < 1 is faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "ratios.png"), dpi=110)


def memory_runs(python, n, variants):
    out = []
    for scenario in ("chain", "softplus"):
        for variant in variants:
            proc = subprocess.run([python, os.path.join(ROOT, "tests", "leak_traces.py"),
                                   "--scenario", scenario, "--n", str(n)]
                                  + (["--no-package"] if variant == "none" else []),
                                  env=_env(variant), capture_output=True, text=True, cwd=ROOT)
            if proc.returncode == 0:
                rec = json.loads(proc.stdout.strip().splitlines()[-1])
                rec["variant"] = variant
                out.append(rec)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~2-minute subset")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the stack to measure")
    parser.add_argument("--tag", default=None, help="results folder name (default: machine tag)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--gpu", action="store_true",
                        help="JAX-substrate GPU cases (sizes up to 1e8); with --allow-cpu, runs them on CPU")
    parser.add_argument("--allow-cpu", action="store_true")
    parser.add_argument("--out", default=None, help="results folder (default: benchmarks/results/<tag>)")
    parser.add_argument("--memory-n", type=int, default=None,
                        help="iterations of the traced-function memory scenarios (0: skip)")
    args = parser.parse_args(argv)

    info = probe(args.python)
    if not info["tfp"]:
        print("TFP is not installed for", args.python, file=sys.stderr)
        return 1
    variants = ["none", "package"] if info["legacy"] else ["none", "fixed", "upstream", "off"]
    if args.gpu and not args.allow_cpu:
        check = subprocess.run([args.python, "-c", "import jax; print(jax.devices()[0].platform)"],
                               capture_output=True, text=True)
        if "gpu" not in check.stdout and "cuda" not in check.stdout:
            print("no GPU visible to JAX (use --allow-cpu to run the GPU cases on the CPU)",
                  file=sys.stderr)
            return 2
    cases = cases_for(info, args.quick, args.gpu)
    if args.quick:
        os.environ.setdefault("TFP_PICKLEFIX_BENCH_CALLS", QUICK_CALLS)
    repeats = args.repeats or (2 if args.quick else 4)
    tag = args.tag or (("gpu-" if args.gpu else "cpu-") + f"{os.cpu_count()}core-{platform.machine()}"
                       + ("-legacy" if info["legacy"] else ""))
    outdir = args.out or os.path.join(ROOT, "benchmarks", "results", tag)
    start = time.time()
    with tempfile.TemporaryDirectory() as work:
        cases_file = os.path.join(work, "cases.json")
        with open(cases_file, "w") as f:
            json.dump(cases, f)
        rounds = []
        for r in range(repeats):
            print(f"[bench] round {r + 1}/{repeats}: {len(cases)} cases x {len(variants)} variants",
                  flush=True)
            rounds.append(run_round(args.python, variants, cases_file, work, r))
    rows = aggregate(cases, rounds, variants)
    memory = []
    memory_n = args.memory_n if args.memory_n is not None else (0 if args.quick or args.gpu else 300)
    if info["tf"] and not info["legacy"] and memory_n:
        print(f"[bench] memory scenarios, {memory_n} traces each", flush=True)
        memory = memory_runs(args.python, memory_n, ["none", "fixed", "off"])
    first = rounds[0][variants[0]]
    meta = {"tag": tag, "when": time.strftime("%Y-%m-%d %H:%M"), "python": first["python"],
            "versions": first["versions"], "repeats": repeats, "quick": args.quick,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
            "seconds": round(time.time() - start)}
    write_report(outdir, meta, rows, variants, memory)
    print(f"[bench] wrote {os.path.relpath(outdir, ROOT)}/results.md in {meta['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
