"""A/B benchmark runner: TFP without the package vs with it, in fresh processes.

    python -m benchmarks [--quick] [--python PY] [--tag TAG] [--repeats N] [--gpu]

Every variant (``none``: tfp_picklefix not imported; ``fixed``/``upstream``/``off``:
imported, with that cache mode) runs in its own fresh process, all of them alive at
once; for each case their timed batches alternate A B C D A B C D ... (the order
rotates), and a variant's time in a round is its fastest batch. Rounds repeat with
fresh processes. For each case it reports the median over rounds of every variant's
time per call and the ratio variant/none (median of the per-round ratios, with min
and max), plus fixed/off (the cache's overhead over no cache at all). Results: JSON, Markdown and a PNG in
``benchmarks/results/<tag>/``. ``--python`` runs the workers in another environment
(e.g. ``.venvs/legacy-0.11/bin/python``); there the variants are none/package.

``--control`` (the default with ``--compiled`` and on the legacy stacks) adds
``control``: a second fresh process of TFP as shipped, timed like the others. Its
ratio to ``none`` is what the machine's noise alone produces: a package ratio is
only meaningful against it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIJECTORS = ["Exp", "Softplus", "Sigmoid", "ShiftScale", "Chain3", "FillScaleTriL", "RealNVP", "MAF"]
OPS = ["forward", "inverse", "fldj", "ildj"]
# The bijectors of the acceptance figures: every size, op and cache state (the others
# at 1000 elements).
CORE = ["Exp", "Softplus", "Chain3"]
COMPILED = ("tf_function", "xla", "jit")
# Variants that set no cache mode: ``none`` and ``control`` (TFP as shipped, the
# package not imported) and ``package`` (legacy stacks: the package has no modes).
NO_MODE = ("none", "control", "package")


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
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=_env(None, python))
    return json.loads(out.stdout.strip().splitlines()[-1])


def cases_for(info: Dict[str, object], quick: bool, gpu: bool) -> List[dict]:
    cases = []

    def add(**case):
        case.setdefault("kind", "bijector")
        case["id"] = "|".join(str(case[k]) for k in sorted(case) if k not in ("id", "kind", "seconds"))
        cases.append(case)

    sizes = [1, 1000] if quick else [1, 1000, 1000000]
    bijectors = CORE if quick else BIJECTORS
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
            core = b in CORE
            for size in (sizes if core else [1000]):
                for op in ops:
                    execs = ["eager"]
                    if sub == "tf" and op == "forward":
                        execs += ["tf_function", "xla"]
                    if sub == "jax" and op == "forward":
                        execs += ["jit"]
                    for ex in execs:
                        # A log-det hit is an attribute lookup: misses only.
                        hit = ex == "eager" and op in ("forward", "inverse") and (core or op == "forward")
                        for cache in (["miss", "hit"] if hit else ["miss"]):
                            add(substrate=sub, bijector=b, size=size, op=op, exec=ex, cache=cache)
    if info["tf"] and not gpu:
        add(kind="e2e", substrate="tf", name="transformed_sample_log_prob", exec="eager")
        add(kind="e2e", substrate="tf", name="transformed_sample_log_prob", exec="tf_function")
        if info["gpflow"] and not quick:
            add(kind="e2e", substrate="tf", name="svgp_train_step", exec="eager")
            add(kind="e2e", substrate="tf", name="svgp_train_step", exec="tf_function")
            add(kind="e2e", substrate="tf", name="svgp_predict_f", exec="eager")
    if not gpu and substrates:
        for k in ([1, 4] if quick else [1, 4, 16]):
            add(kind="threads", substrate=substrates[0], threads=k)
    return cases


_TF_KERAS: dict = {}  # python -> whether tf-keras is installed there


def _has_tf_keras(python):
    if python not in _TF_KERAS:
        probe = subprocess.run([python, "-c", "import importlib.util as u, sys; "
                                "sys.exit(u.find_spec('tf_keras') is None)"], capture_output=True)
        _TF_KERAS[python] = probe.returncode == 0
    return _TF_KERAS[python]


def _env(variant, python):
    env = dict(os.environ)
    env.pop("TFP_PICKLEFIX", None)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    # GPflow on TF >= 2.16 needs Keras 2 (tf-keras); before TF 2.16 there is no tf-keras,
    # and asking for it makes tf.keras fail to import.
    if "TF_USE_LEGACY_KERAS" not in env and _has_tf_keras(python):
        env["TF_USE_LEGACY_KERAS"] = "1"
    # Every variant's worker shares one GPU: JAX must not take 75 % of its memory each.
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if variant and variant not in NO_MODE:
        env["TFP_PICKLEFIX_CACHE"] = variant
    return env


# --quick: fewer and shorter batches per case (the full suite: 5 batches of ~15 ms
# per variant; thread cases 0.25 s).
EAGER_MEMORY_N = 1000  # calls per eager memory loop
QUICK_TIMING = {"TFP_PICKLEFIX_BENCH_BATCH_SECONDS": "0.01", "TFP_PICKLEFIX_BENCH_THREAD_SECONDS": "0.15"}


class Worker:
    """One fresh worker process of one variant, driven over its stdin/stdout."""

    def __init__(self, python, variant, workdir):
        self.variant = variant
        self.err_path = os.path.join(workdir, f"{variant}.stderr")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen(
            [python, os.path.join(ROOT, "benchmarks", "worker.py"), "--variant", variant],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
            env=_env(variant, python), cwd=ROOT, bufsize=1)

    def ask(self, msg):
        self.send(msg)
        return self.receive()

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def receive(self):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.err.flush()
                with open(self.err_path) as f:
                    tail = f.read()[-3000:]
                raise RuntimeError(f"worker {self.variant} exited:\n{tail}")
            if line.startswith("@@"):
                return json.loads(line[2:])

    def close(self):
        try:
            self.ask({"cmd": "quit"})
        except Exception:
            pass
        self.proc.wait(timeout=60)
        self.err.close()


def run_round(python, variants, cases, workdir, round_no, batches):
    """One round: a fresh process per variant, all alive at once; for each case, the
    variants' batches alternate (the order rotates), so that a slow spell on the
    machine hits every variant alike. A variant's value for the case is its fastest
    batch (calls per second: its highest)."""
    workers = {v: Worker(python, v, workdir) for v in variants}
    try:
        subs = sorted({c["substrate"] for c in cases})
        # Start-up and set-up (imports, tracing, compiling) run in all workers at
        # once; only the timed batches take turns.
        for v in variants:
            workers[v].send({"cmd": "hello", "substrates": subs})
        out = {v: dict(workers[v].receive(), results=[]) for v in variants}
        for i, case in enumerate(cases):
            ok = {}
            for v in variants:
                workers[v].send({"cmd": "setup", "case": case})
            for v in variants:
                answer = workers[v].receive()
                ok[v] = "error" not in answer
                if not ok[v]:
                    out[v]["results"].append({"id": case["id"], "error": answer["error"]})
            values = {v: [] for v in variants if ok[v]}
            for b in range(batches):
                shift = (b + round_no + i) % len(variants)
                for v in variants[shift:] + variants[:shift]:
                    if ok[v]:
                        values[v].append(workers[v].ask({"cmd": "batch"})["value"])
            best = max if case["kind"] == "threads" else min
            for v, vals in values.items():
                out[v]["results"].append({"id": case["id"], "value": best(vals), "batches": vals})
    finally:
        for w in workers.values():
            w.close()
    return out


def aggregate(cases, rounds, variants):
    rows = []
    for case in cases:
        cid = case["id"]
        per_variant = {}
        batches = {}
        errors = {}
        for variant in variants:
            values = []
            for rnd in rounds:
                res = next(r for r in rnd[variant]["results"] if r["id"] == cid)
                if "error" in res:
                    errors[variant] = res["error"]
                else:
                    values.append(res["value"])
                    batches.setdefault(variant, []).append(res.get("batches"))
            per_variant[variant] = values
        row = {"case": case, "median": {}, "ratio": {}, "errors": errors,
               "batches": batches}  # per variant: per round, every batch
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
        # Best of rounds (fastest process of each variant): a process's own state moves
        # compiled calls by up to 2x between processes (batches within one process
        # agree); the best of several fresh processes is the noise-robust estimate.
        row["ratio_best"] = {}
        if base:
            best = max if higher_better else min
            for variant, values in per_variant.items():
                if variant != "none" and values:
                    b, v = best(base), best(values)
                    row["ratio_best"][variant] = (b / v) if higher_better else (v / b)
        if per_variant.get("fixed") and per_variant.get("off") and not higher_better:
            ratios = [f / o for f, o in zip(per_variant["fixed"], per_variant["off"])]
            row["ratio"]["fixed_vs_off"] = {"median": statistics.median(ratios),
                                            "min": min(ratios), "max": max(ratios)}
        rows.append(row)
    return rows


# Fewer rounds than this give no interval: resampling 3 rounds has 10 distinct
# outcomes (on the legacy quick runs the A/A control's own interval excluded 1.00).
POOLED_MIN_ROUNDS = 8


def pooled_ratio(rows, variant, draws=2000):
    """(median, 2.5 %, 97.5 %) of the ratios ``variant``/none of every case and round of
    ``rows`` (the bounds None with fewer than POOLED_MIN_ROUNDS rounds), or None. A
    median: a slow process makes outliers, upward only. The interval resamples whole
    rounds (a round's cases share its processes, so their ratios move together); the
    seed is fixed, so the report is reproducible from the JSON."""
    per_round = {}
    for row in rows:
        base = [min(b) for b in row.get("batches", {}).get("none") or [] if b]
        vals = [min(b) for b in row.get("batches", {}).get(variant) or [] if b]
        if not base or len(base) != len(vals):
            continue
        for r, (b, v) in enumerate(zip(base, vals)):
            per_round.setdefault(r, []).append(math.log(v / b))
    rounds = list(per_round.values())
    if not rounds:
        return None
    middle = math.exp(statistics.median([x for r in rounds for x in r]))
    if len(rounds) < POOLED_MIN_ROUNDS:
        return middle, None, None
    rng = random.Random(0)
    medians = []
    for _ in range(draws):
        medians.append(statistics.median(
            [x for _ in rounds for x in rounds[rng.randrange(len(rounds))]]))
    medians.sort()
    return middle, math.exp(medians[int(0.025 * draws)]), math.exp(medians[int(0.975 * draws) - 1])


def fmt_pooled(pool):
    if pool is None:
        return "-"
    if pool[1] is None:
        return f"{pool[0]:.3f} [too few rounds for an interval]"
    return f"{pool[0]:.3f} [{pool[1]:.3f}, {pool[2]:.3f}]"


def noise_table(rows, variants):
    """Markdown lines: per group of cases (compiled, eager), how the ratios of each
    variant scatter around 1, beside those of ``control`` (TFP as shipped in a second
    process: what noise alone gives). Empty without a control."""
    if "control" not in variants:
        return []
    groups = [("compiled", [r for r in rows if r["case"].get("exec") in COMPILED]),
              ("eager", [r for r in rows if r["case"].get("exec") not in COMPILED
                         and r["case"]["kind"] != "threads"])]
    lines = ["", "## Noise: the A/A control", "",
             "`control` runs TFP as shipped, like `none`, in its own fresh processes: its ratio "
             "to `none` is what the machine's noise alone produces. A variant whose ratios "
             "scatter like the control's is not distinguishable from TFP as shipped by this run.",
             "The last column pools every case and round of the group: the median of all "
             f"per-round ratios, with a 95 % interval from resampling whole rounds (given from "
             f"{POOLED_MIN_ROUNDS} rounds on).",
             "", "| cases | variant | n | within 0.98-1.02 | within 0.95-1.05 | median over cases "
             "| median of abs(ratio - 1) | pooled [95 %] |", "|---|---|---|---|---|---|---|---|"]
    for name, group in groups:
        for v in [v for v in variants if v not in ("none", "off")]:
            meds = sorted(r["ratio"][v]["median"] for r in group if v in r["ratio"])
            if not meds:
                continue
            dev = sorted(abs(m - 1) for m in meds)
            pool = pooled_ratio(group, v)
            lines.append(f"| {name} | {v} | {len(meds)} | {sum(0.98 <= m <= 1.02 for m in meds)} | "
                         f"{sum(0.95 <= m <= 1.05 for m in meds)} | {statistics.median(meds):.3f} | "
                         f"{statistics.median(dev):.3f} | "
                         + fmt_pooled(pool) + " |")
    return lines


def _fmt_case(case):
    if case["kind"] == "bijector":
        return (f"{case['substrate']} {case['bijector']} n={case['size']:g} {case['op']} "
                f"{case['exec']} {case['cache']}")
    if case["kind"] == "threads":
        return f"{case['substrate']} Chain3 fwd+inv, {case['threads']} threads (calls/s)"
    return f"{case['substrate']} {case['name']} {case['exec']}"


def write_report(outdir, meta, rows, variants, memory, eager_memory=(), overhead=(),
                 compiled_inprocess=(), package_inprocess=(), eager_inprocess=(),
                 package_control=(), package_again=()):
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "memory": memory, "eager_memory": list(eager_memory),
                   "overhead": list(overhead), "compiled_inprocess": list(compiled_inprocess),
                   "package_inprocess": list(package_inprocess),
                   "eager_inprocess": list(eager_inprocess),
                   "package_control": list(package_control),
                   "package_again": list(package_again)},
                  f, indent=1)
    unit = lambda v, case: (f"{v:.0f}/s" if case["kind"] == "threads" else f"{v * 1e6:.1f}")  # noqa: E731
    ratio_cols = [v for v in variants if v != "none"] + (
        ["fixed_vs_off"] if "fixed" in variants and "off" in variants else [])
    lines = [f"# Benchmark results: {meta['tag']}", "",
             f"- when: {meta['when']}; machine: {meta['machine']}; python: {meta['python']}",
             f"- versions: {json.dumps(meta['versions'])}"]
    # added later by --inprocess-only (the latest run first, then earlier ones whose
    # comparisons are still those shown)
    for later in ([meta["inprocess"]] if meta.get("inprocess") else []) + meta.get("inprocess_before", []):
        lines.append(f"- the comparisons inside one process ({', '.join(later['kinds'])}): "
                     f"measured later, {later['when']} ({later['seconds']} s; "
                     f"{later.get('machine', meta['machine'])})")
    statuses = meta.get("status") or {}
    package_status = next((statuses[v] for v in ["fixed"] + sorted(statuses)
                           if statuses.get(v) not in (None, "", "not imported")), "")
    if package_status:  # which mode, and which code runs the fixed cache's miss (C or Python)
        lines.append(f"- the package: {package_status.splitlines()[0]}")
    if meta.get("cpu") is not None:
        lines.append(f"- every worker ran on core {meta['cpu']} alone ({PINNED_WHY})")
    lines += [f"- variants: {', '.join(variants)} (fresh process each, interleaved, "
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
    compiled = [r for r in rows if r["case"].get("exec") in COMPILED
                and r.get("ratio_best")]
    if compiled:
        cols = [v for v in variants if v != "none"]
        lines += ["", "## Compiled paths: best of rounds", "",
                  "Ratio of each variant's fastest process to TFP's fastest (the traced graphs "
                  "are identical: tests/test_compiled_parity.py).", "",
                  "| case | " + " | ".join(f"best ratio {v}" for v in cols) + " |",
                  "|" + "---|" * (1 + len(cols))]
        for row in compiled:
            lines.append(f"| {_fmt_case(row['case'])} | " + " | ".join(
                f"{row['ratio_best'][v]:.3f}" if v in row["ratio_best"] else "-" for v in cols) + " |")
    lines += noise_table(rows, variants)
    lines += compiled_inprocess_lines(compiled_inprocess)
    lines += package_inprocess_lines(package_inprocess)
    lines += package_control_lines(package_inprocess, package_control, package_again)
    lines += eager_inprocess_lines(eager_inprocess)
    lines += overhead_lines(overhead)
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
            if "error" in m:
                lines.append(f"| {m['scenario']} | {m['variant']} | {m['n']} | error: {m['error']} | |")
                continue
            lines.append(f"| {m['scenario']} | {m['variant']} | {m['n']} | {m['funcgraphs']} | "
                         f"{m['rss_growth_mb']} |")
    if eager_memory:
        lines += ["", "## Memory: long eager loops (Chain of 3, 1000-element inputs)", "",
                  "| substrate | variant | calls | entries after (outputs dropped) | RSS growth (MB) "
                  "| entries while all kept | RSS growth while kept (MB) | entries after release |",
                  "|---|---|---|---|---|---|---|---|"]
        for m in eager_memory:
            if "error" in m:
                lines.append(f"| {m['substrate']} | {m['variant']} | {m['n']} | error: {m['error']} |"
                             " | | | |")
                continue
            lines.append(f"| {m['substrate']} | {m['variant']} | {m['n']} | {m['drop_entries']} | "
                         f"{m['drop_rss_growth_mb']} | {m['keep_entries_while_kept']} | "
                         f"{m['keep_rss_growth_mb_while_kept']} | {m['keep_entries_after_release']} |")
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


def _json_run(python, script, args, variant):
    """Run ``script`` (a path under the repository) for ``variant``; its last stdout line
    is a JSON record. Returns it with the variant, or None and the error line."""
    proc = subprocess.run([python, os.path.join(ROOT, *script.split("/"))] + args
                          + (["--no-package"] if variant == "none" else []),
                          env=_env(variant, python), capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        err = proc.stderr.strip()
        return None, (err.splitlines()[-1][:300] if err else f"exit {proc.returncode}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    rec["variant"] = variant
    return rec, None


def memory_runs(python, n, variants):
    """Live FuncGraphs and RSS over traced-and-discarded tf.functions (``n`` traces with
    the package's cache, n/10 for the others: enough to show upstream's growth)."""
    out = []
    for scenario in ("chain", "softplus"):
        for variant in variants:
            count = n if variant == "fixed" else max(n // 10, 50)
            rec, err = _json_run(python, "tests/leak_traces.py",
                                 ["--scenario", scenario, "--n", str(count)], variant)
            out.append(rec if rec is not None else
                       {"scenario": scenario, "variant": variant, "n": count, "error": err})
    return out


def eager_memory_runs(python, n, variants, substrates):
    """Cache storage entries and RSS over long eager loops that drop or keep outputs."""
    out = []
    for substrate in substrates:
        for variant in variants:
            rec, err = _json_run(python, "benchmarks/eager_memory.py",
                                 ["--substrate", substrate, "--n", str(n)], variant)
            out.append(rec if rec is not None else
                       {"substrate": substrate, "variant": variant, "n": n, "error": err})
    return out


OVERHEAD_MAX = 1.15  # issue 3, point 8: the cache adds at most 15 % to a cache-free call


# results.md, where a run's processes ran on one core (pinned_core)
PINNED_WHY = ("`--cpu`; by default where every case is a `jax.jit` one on the CPU: on more "
              "cores, XLA's CPU runtime hands loops of 1000 elements to its thread pool, a "
              "hand-off that costs more than the call here and varies from batch to batch")


def pinned_core(cases, asked=None, gpu=False):
    """The core on which each process of a run measuring ``cases`` runs alone (the A/B
    workers and the comparisons inside one process), or None (on all of its cores).
    ``asked``: ``--cpu`` (None: decide here; a negative number: never).

    By default, where every case is a ``jax.jit`` one on the CPU (the JAX stack's
    ``--compiled`` run), on the lowest core the runner may use. XLA's CPU runtime hands
    an elementwise loop of 1000 elements to its thread pool, and on this shared 2-core
    machine the hand-off costs more than the call and varies from batch to batch
    (Softplus on 1000 elements: 46.5 us a call, 13.3 us on one core). Side by side on
    2026-12-05: across fresh processes (11 rounds, two runs each) fixed / none within
    0.98-1.02 in 6 and 8 of 13 cases on all cores, 10 and 9 on one (upstream: 5 and 5,
    10 and 11; the control: 6 and 6, 8 and 11); inside one process (3 processes each)
    package / none in 7 and 6 of 13 on all cores, 13 and 13 on one. TF stays on all
    cores: on one, TFP 0.11's compiled cases on 1e6 elements were no steadier, and the
    A/B workers' compiled TF cases came out noisier."""
    if asked is not None:
        return asked if asked >= 0 else None
    if (cases and not gpu and hasattr(os, "sched_getaffinity")
            and all(c["substrate"] == "jax" and c.get("exec") == "jit" for c in cases)):
        return min(os.sched_getaffinity(0))
    return None


def inprocess_runs(python, kind, cases, processes, quick, workdir, cpu=None):
    """A/B inside one process (``benchmarks/inprocess.py --kind KIND``), in ``processes``
    fresh processes: per case, the median over every pair of batches of the ratio of
    the first mode to the second (overhead: fixed/off; compiled: fixed/upstream;
    package: package/none; control: none_a/none_b), the range of the per-process medians, and each mode's
    median time (``<mode>_us``). ``cpu``: the core each process runs on alone (None:
    all)."""
    return inprocess_series(python, (kind,), cases, processes, quick, workdir, cpu)[kind]


def inprocess_series(python, kinds, cases, processes, quick, workdir, cpu=None):
    """``inprocess_runs`` of several kinds on the same cases, their processes in turn: for
    each process number one process of each kind, the order flipping from one number to
    the next (A B, B A, A B), so that a drift of the machine weighs on each alike.
    ``{kind: entries}``."""
    from benchmarks.inprocess import MODES

    path = os.path.join(workdir, f"{'-'.join(kinds)}-cases.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    got = {kind: ({}, []) for kind in kinds}  # per case, errors
    for p in range(processes):
        for kind in (kinds if p % 2 == 0 else kinds[::-1]):
            per_case, errors = got[kind]
            rec, err = _json_run(python, "benchmarks/inprocess.py",
                                 ["--kind", kind, "--cases", path, "--process", str(p)]
                                 + (["--pairs", "7"] if quick else [])
                                 + (["--cpu", str(cpu)] if cpu is not None else []),
                                 "package" if kind in ("package", "control") else "fixed")
            if rec is None:
                errors.append(err)
                continue
            _collect(per_case, rec)
    return {kind: _aggregate(*got[kind], MODES[kind]) for kind in kinds}


def _collect(per_case, rec):
    """Add one ``inprocess.py`` process's record to ``per_case`` (by case)."""
    for row in rec["rows"]:
        key = json.dumps(row["case"], sort_keys=True)
        entry = per_case.setdefault(key, {"case": row["case"], "processes": []})
        if rec.get("functions"):
            entry["functions"] = rec["functions"]  # traced per mode (compiled)
        if rec.get("warm") is not None:
            entry["warm"] = rec["warm"]  # untimed batches after each switch
        if rec.get("collect"):
            entry["collect"] = True  # a garbage collection after each switch
        # the core asked for, and the cores the process found it could run on
        entry["cpu"], entry["cpus"] = rec.get("cpu"), rec.get("cpus")
        if "error" in row:
            entry["error"] = row["error"]
        else:
            entry["processes"].append({m: row[m] for m in rec["modes"]})
            entry["caches"] = row["caches"]


def _aggregate(per_case, errors, modes):
    """``inprocess_runs``'s entries from what ``_collect`` gathered (``modes``: the
    kind's two, the ratio's numerator first)."""
    out = []
    for entry in per_case.values():
        procs = entry["processes"]
        if procs:
            a, b = modes
            ratios = [[x / y for x, y in zip(p[a], p[b])] for p in procs]
            per_process = [statistics.median(r) for r in ratios]
            entry.update(median=statistics.median([x for r in ratios for x in r]),
                         process_min=min(per_process), process_max=max(per_process))
            for m in modes:
                entry[f"{m}_us"] = statistics.median([x for p in procs for x in p[m]]) * 1e6
        out.append(entry)
    if errors and not out:
        out.append({"error": errors[0]})
    return out


def _inprocess_section(entries, title, intro, target, ok, cols):
    """Markdown of ``inprocess_runs`` entries: how many meet ``ok`` (``target``), and a
    row per case with ``cols`` ((header, entry -> cell)) and the ratio."""
    if not entries:
        return []
    rows = [o for o in entries if "median" in o]
    pinned = next((o["cpu"] for o in rows if o.get("cpu") is not None), None)
    if pinned is not None:
        intro += f" Each process ran on core {pinned} alone ({PINNED_WHY})."
    lines = ["", title, "", intro + " Ratio: median over every pair of batches of all "
             "processes; in brackets, the lowest and highest per-process median.", ""]
    if rows:
        within = sum(1 for o in rows if ok(o["median"]))
        lines += [f"{within} of {len(rows)} cases {target} "
                  f"({len(rows[0]['processes'])} processes).", "",
                  "| case | " + " | ".join(h for h, _ in cols) + " | ratio [process range] |",
                  "|---|" + "---|" * (len(cols) + 1)]
        for o in rows:
            lines.append(f"| {_fmt_case(o['case'])} | " + " | ".join(cell(o) for _, cell in cols)
                         + f" | {_ratio_cell(o)} |")
    return lines + [f"- {_fmt_case(o['case']) if 'case' in o else title}: did not run: {o['error']}"
                    for o in entries if "error" in o]


def compiled_inprocess_lines(entries):
    """Markdown: compiled cases traced under each mode, called in turn in one process."""
    k = next((o["functions"] for o in entries if o.get("functions")), 2)
    from benchmarks.inprocess import trace_order

    order = " ".join("AB"[m == "upstream"] for m in trace_order(("fixed", "upstream"), k, 0))
    return _inprocess_section(
        entries, "## Compiled paths in one process: fixed / upstream",
        "Each fresh process (`benchmarks/inprocess.py --kind compiled`) traces every compiled "
        f"case {2 * k} times, {k} times with this package's cache (`fixed`, A) and {k} times "
        "with TFP's own (`upstream`, B, whose graphs are those of TFP without the package: "
        f"tests/test_compiled_parity.py), in the order {order} (A and B swapped in every "
        "other process), and calls them in turn, batch by batch; a mode's time in a pair is "
        f"the mean of its {k} functions' (each traced function object runs at its own speed, "
        "within a few percent, whatever the mode).", "within 0.98-1.02", in_band,
        [("fixed (us)", lambda o: f"{o['fixed_us']:.1f}"),
         ("upstream (us)", lambda o: f"{o['upstream_us']:.1f}")])


def package_inprocess_lines(entries):
    """Markdown: the package patched in and taken out in turn, in one process (the legacy
    stacks: every case; elsewhere, with --compiled, the compiled ones)."""
    k = next((o["functions"] for o in entries if o.get("functions")), 2)
    # results measured before inprocess.py recorded it had one untimed batch
    warm = next((o["warm"] for o in entries if o.get("warm") is not None), 1)
    after = "one batch runs" if warm == 1 else f"{warm} batches run"
    if any(o.get("collect") for o in entries):
        after = f"the garbage collector runs ({COLLECT_WHY}) and {after}"
    return _inprocess_section(
        entries, "## The package in one process: package / none",
        "Each fresh process (`benchmarks/inprocess.py --kind package`) times every case with "
        "the package patched in (`tfp_picklefix.patch()`, `package`) and taken out again "
        "(`tfp_picklefix.unpatch()`, which puts back every attribute TFP had: `none`), batch "
        "by batch in turn: eager misses one set of calls under both, eager hits their own "
        "input and kept output under each (called once more after each switch, which empties "
        "the caches), compiled cases traced "
        f"{k} times under each (as in the compiled comparison). After each switch {after} "
        "untimed (what follows patch() or unpatch(), which rewrite some 150 attributes, runs "
        "slower for a while). Target (issue 5, compiled paths and the legacy "
        "stacks): 0.98-1.02.", "within 0.98-1.02", in_band,
        [("package (us)", lambda o: f"{o['package_us']:.1f}"),
         ("none (us)", lambda o: f"{o['none_us']:.1f}")])


def in_band(ratio):
    """Issue 5's target for the compiled paths and the legacy stacks: 0.98-1.02."""
    return 0.98 <= ratio <= 1.02


def outside_band(entries):
    """The cases of ``package_inprocess`` entries whose ratio came out outside
    0.98-1.02: measured again by the A/A control in one process (``--kind control``)."""
    return [o["case"] for o in entries if "median" in o and not in_band(o["median"])]


def control_pairs(package, control, again=()):
    """(package entry, its entry measured again or None, its control entry) for each case
    of ``package_inprocess`` outside 0.98-1.02 that ``package_control`` measured
    (``again``: ``package_again``, the same cases with the package patched in and out,
    in processes that ran just them, as the control's did)."""
    key = lambda o: json.dumps(o["case"], sort_keys=True)  # noqa: E731
    controls = {key(o): o for o in control if "median" in o}
    agains = {key(o): o for o in again if "median" in o}
    return [(o, agains.get(key(o)), controls[key(o)]) for o in package
            if "median" in o and not in_band(o["median"]) and key(o) in controls]


def _ratio_cell(entry):
    """An in-process entry's ratio and its range of per-process medians ("-": None)."""
    if entry is None:
        return "-"
    return f"{entry['median']:.3f} [{entry['process_min']:.3f}, {entry['process_max']:.3f}]"


def package_control_lines(package, control, again=()):
    """Markdown: the cases outside 0.98-1.02 with the package patched in and out, beside
    the same measured again, and the A/A control in one process (both modes TFP as
    shipped), in processes that ran just these cases."""
    triples = control_pairs(package, control, again)
    if not triples:
        return [f"- {_fmt_case(o['case']) if 'case' in o else 'the A/A control'}: did not run: "
                f"{o['error']}" for o in control if "error" in o]
    warm = next((o["warm"] for o in control if o.get("warm") is not None), 3)
    collect = "a garbage collection and " if any(o.get("collect") for o in control) else ""
    n = len(triples)
    also = sum(1 for _, _, c in triples if not in_band(c["median"]))
    wider = sum(1 for p, _, c in triples if abs(c["median"] - 1) >= abs(p["median"] - 1))
    lines = ["", "## The cases outside 0.98-1.02 in one process, beside an A/A control", "",
             "The cases whose ratio package / none came out outside 0.98-1.02 above, measured "
             "again by their A/A control (`benchmarks/inprocess.py --kind control`): the same "
             "steps, cases and switches, but both modes are TFP as shipped (`none_a`, `none_b`; "
             "each switch calls `tfp_picklefix.patch()` and then `unpatch()`, so both go through "
             f"what a switch does there; {collect}{warm} untimed batches after each). Compiled "
             "cases trace their functions under each mode, so the control's ratio is what two "
             "traced functions of the same code come out at here. The control's processes run "
             "just these cases; so do those of the column \"again\", the package patched in and "
             f"out once more, a process of each in turn ({AGAIN_WHY}). Ratio: median over every "
             "pair of batches of all processes; in brackets, the lowest and highest per-process "
             "median.",
             "", f"{also} of {n} cases: the control, identical code on both sides, "
             f"outside 0.98-1.02 too; in {wider} of {n} it is as far from 1 as the "
             f"package or further ({len(triples[0][2]['processes'])} processes)."]
    measured = [a for _, a, _ in triples if a is not None]
    if measured:
        inside = sum(1 for a in measured if in_band(a["median"]))
        lines.append(f"Measured again beside the control: {inside} of {len(measured)} within "
                     "0.98-1.02.")
    lines += ["", "| case | package / none [process range] | again, beside the control | "
              "none_a / none_b [process range] |", "|---|---|---|---|"]
    for p, a, c in triples:
        lines.append(f"| {_fmt_case(p['case'])} | {_ratio_cell(p)} | {_ratio_cell(a)} | "
                     f"{_ratio_cell(c)} |")
    return lines


# Why the cases outside 0.98-1.02 are measured again with the package, beside their control.
AGAIN_WHY = ("a case's ratio depends on the cases its process ran before it: "
             "benchmarks/README.md, Method")


# Why a garbage collection follows each patch() or unpatch() inside one process.
COLLECT_WHY = ("else what they leave for it is collected in whichever batch next crosses its "
               "threshold, which can be a timed one")
# The comparisons inside one process (--inprocess-kinds), each run where it applies.
INPROCESS_KINDS = ("compiled", "overhead", "package", "control", "eager")
EAGER_MAX = 1.02  # issue 5: no eager case slower than TFP as shipped (median ratio <= 1.02)


def over_eager_max(rows):
    """The eager bijector cases whose ratio ``fixed`` / TFP as shipped came out above
    EAGER_MAX across fresh processes: measured again inside one process, where the spread
    between processes cannot enter."""
    return [r["case"] for r in rows if r["case"]["kind"] == "bijector"
            and r["case"]["exec"] == "eager" and "fixed" in r["ratio"]
            and r["ratio"]["fixed"]["median"] > EAGER_MAX]


def eager_inprocess_lines(entries):
    """Markdown: the eager cases over EAGER_MAX across processes, the package patched in
    and taken out in turn inside one process."""
    warm = next((o["warm"] for o in entries if o.get("warm") is not None), 3)
    collect = (f"the garbage collector runs ({COLLECT_WHY}) and "
               if any(o.get("collect") for o in entries) else "")
    return _inprocess_section(
        entries, "## Eager cases over 1.02 across processes, again in one process: package / none",
        f"The eager cases whose ratio fixed / none came out above {EAGER_MAX:.2f} across fresh "
        "processes, measured again inside one process (`benchmarks/inprocess.py --kind "
        "package`), timed with the package patched in (`tfp_picklefix.patch()`, `package`) "
        "and taken out again (`tfp_picklefix.unpatch()`: TFP's own cache, `none`), batch by "
        "batch in turn: misses one set of calls under both, hits their own input and kept "
        "output under each (called once more after each switch, which empties the caches); "
        f"after each switch {collect}{warm} batches run untimed. Target (issue 5, eager paths): "
        f"<= {EAGER_MAX:.2f}.",
        f"at most {EAGER_MAX:.2f}", lambda m: m <= EAGER_MAX,
        [("package (us)", lambda o: f"{o['package_us']:.1f}"),
         ("none (us)", lambda o: f"{o['none_us']:.1f}")])


def overhead_lines(overhead):
    """Markdown: the cache's cost over a pass-through, measured in one process."""
    return _inprocess_section(
        overhead, "## Cache overhead in one process: fixed / pass-through",
        "Each fresh process (`benchmarks/inprocess.py --kind overhead`) swaps the cache for a "
        "pass-through (`set_cache_mode(\"off\")`) and back between batches of the same calls, "
        "so both sides share the process's state (across processes the same code can differ by "
        "up to 2x here). Cache misses (a fresh input per call, its output dropped). Target "
        f"(issue 3, point 8): <= {OVERHEAD_MAX:.2f}.", f"within {OVERHEAD_MAX:.2f}",
        lambda m: m <= OVERHEAD_MAX,
        [("fixed (us)", lambda o: f"{o['fixed_us']:.1f}"),
         ("pass-through (us)", lambda o: f"{o['off_us']:.1f}"),
         ("cache's cost (us)", lambda o: f"{o['fixed_us'] - o['off_us']:.1f}")])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~2-minute subset")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the stack to measure")
    parser.add_argument("--tag", default=None,
                        help="results folder name (default: machine tag, stack, -quick)")
    parser.add_argument("--stack", default=None, help="stack name for the default tag")
    parser.add_argument("--repeats", type=int, default=None,
                        help="rounds, each with fresh processes (default 3; --quick 2)")
    parser.add_argument("--batches", type=int, default=None,
                        help="interleaved batches per case and variant (default 5; --quick 4)")
    parser.add_argument("--gpu", action="store_true",
                        help="JAX-substrate GPU cases (sizes up to 1e8); with --allow-cpu, runs them on CPU")
    parser.add_argument("--allow-cpu", action="store_true")
    parser.add_argument("--compiled", action="store_true",
                        help="only the compiled cases (tf.function, XLA, jax.jit), 11 rounds by "
                             "default: their per-process spread needs more rounds than 3")
    parser.add_argument("--control", action=argparse.BooleanOptionalAction, default=None,
                        help="add the A/A control (a second process of TFP as shipped) to measure "
                             "the noise; default: on with --compiled and on the legacy stacks")
    parser.add_argument("--match", default=None,
                        help="comma-separated; keep the cases whose id contains any of them")
    parser.add_argument("--cpu", type=int, default=None,
                        help="run every process (the workers, and those comparing inside one "
                             "process) on this core alone; -1: on all cores. Default: the "
                             "lowest core where every case is a jax.jit one on the CPU, else "
                             "all (see pinned_core)")
    parser.add_argument("--substrates", default=None,
                        help="comma-separated subset of tf,numpy,jax (default: all installed)")
    parser.add_argument("--out", default=None, help="results folder (default: benchmarks/results/<tag>)")
    parser.add_argument("--inprocess-processes", type=int, default=None,
                        help="fresh processes for the A/B inside one process "
                             "(benchmarks/inprocess.py): the cache against a pass-through on "
                             "the eager misses, or with --compiled, the compiled cases traced "
                             "with each cache and with the package patched in and out; on the "
                             "legacy stacks every case with the package patched in and out; "
                             "default 3, --quick 1, --gpu 0; 0 skips it")
    parser.add_argument("--inprocess-only", action="store_true",
                        help="run only the comparisons inside one process and put them into the "
                             "results folder's existing results (its cross-process rounds kept)")
    parser.add_argument("--inprocess-kinds", default=",".join(INPROCESS_KINDS),
                        help="comma-separated: which comparisons inside one process to run, "
                             "where they apply (default: all of " + ", ".join(INPROCESS_KINDS)
                             + "); with --inprocess-only, the others are kept as they were")
    parser.add_argument("--memory-n", type=int, default=None,
                        help="iterations of the traced-function memory scenarios (0: skip)")
    args = parser.parse_args(argv)
    unknown = set(args.inprocess_kinds.split(",")) - set(INPROCESS_KINDS)
    if unknown:
        parser.error(f"--inprocess-kinds: unknown {', '.join(sorted(unknown))} "
                     f"(known: {', '.join(INPROCESS_KINDS)})")

    info = probe(args.python)
    if not info["tfp"]:
        print("TFP is not installed for", args.python, file=sys.stderr)
        return 1
    variants = ["none", "package"] if info["legacy"] else ["none", "fixed", "upstream", "off"]
    if args.control if args.control is not None else (args.compiled or info["legacy"]):
        variants.append("control")
    if args.gpu and not args.allow_cpu:
        check = subprocess.run([args.python, "-c", "import jax; print(jax.devices()[0].platform)"],
                               capture_output=True, text=True)
        if "gpu" not in check.stdout and "cuda" not in check.stdout:
            print("no GPU visible to JAX (use --allow-cpu to run the GPU cases on the CPU)",
                  file=sys.stderr)
            return 2
    cases = cases_for(info, args.quick, args.gpu)
    if args.compiled:
        cases = [c for c in cases if c.get("exec") in COMPILED]
    if args.match:
        cases = [c for c in cases if any(m in c["id"] for m in args.match.split(","))]
    if args.substrates:
        wanted = set(args.substrates.split(","))
        cases = [c for c in cases if c["substrate"] in wanted]
    cpu = pinned_core(cases, args.cpu, args.gpu)
    if cpu is not None:
        os.environ["TFP_PICKLEFIX_BENCH_CPU"] = str(cpu)  # read by each worker
    if not cases:
        print("no benchmark case to run: this stack has none (the legacy NumPy-only stack), or "
              "--match/--substrates/--compiled left none", file=sys.stderr)
        return 2
    if args.quick:
        for name, setting in QUICK_TIMING.items():
            os.environ.setdefault(name, setting)
    repeats = args.repeats or (11 if args.compiled else 2 if args.quick else 3)
    tag = args.tag or (("gpu-" if args.gpu else "cpu-") + f"{os.cpu_count()}core-{platform.machine()}"
                       + (f"-{args.stack}" if args.stack else ("-legacy" if info["legacy"] else ""))
                       + ("-quick" if args.quick else "") + ("-compiled" if args.compiled else ""))
    outdir = args.out or os.path.join(ROOT, "benchmarks", "results", tag)
    batches = args.batches or (4 if args.quick else 5)
    start = time.time()

    def meta_for(rounds):
        first = rounds[0][variants[0]]
        return {"tag": tag, "when": time.strftime("%Y-%m-%d %H:%M"), "python": first["python"],
                "versions": first["versions"], "repeats": len(rounds), "quick": args.quick,
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"
                + (f"; JAX device {first['jax_device']}" if first.get("jax_device") else ""),
                # what each variant's process reported: tfp_picklefix.status(), or "not imported"
                "status": {v: rounds[0][v].get("status") for v in variants},
                # the core every worker was asked to run on alone, and the cores the first
                # worker found it could use
                "cpu": cpu, "cpus": first.get("cpus"),
                "seconds": round(time.time() - start)}

    if args.inprocess_only:
        return _inprocess_only(args, info, cases, outdir)
    with tempfile.TemporaryDirectory() as work:
        rounds = []
        for r in range(repeats):
            print(f"[bench] round {r + 1}/{repeats}: {len(cases)} cases x {len(variants)} variants "
                  f"x {batches} batches", flush=True)
            rounds.append(run_round(args.python, variants, cases, work, r, batches))
            if r + 1 < repeats:
                # The rounds so far, in case the run is cut short (a device lease ends).
                write_report(outdir, meta_for(rounds), aggregate(cases, rounds, variants), variants, [])
    rows = aggregate(cases, rounds, variants)
    memory, eager_memory = [], []
    memory_n = args.memory_n if args.memory_n is not None else (
        0 if args.quick or args.gpu or args.compiled else 2000)
    if info["tf"] and not info["legacy"] and memory_n:
        print(f"[bench] memory: traced-and-discarded tf.functions ({memory_n} traces)", flush=True)
        memory = memory_runs(args.python, memory_n, ["none", "fixed", "off"])
    if not info["legacy"] and memory_n:
        subs = [s for s in ("tf", "numpy", "jax") if s in {c["substrate"] for c in cases}]
        print(f"[bench] memory: long eager loops ({EAGER_MEMORY_N} calls)", flush=True)
        eager_memory = eager_memory_runs(args.python, EAGER_MEMORY_N, ["none", "fixed", "off"], subs)
    inproc = inprocess_all(args, info, variants, cases, rows)
    meta = meta_for(rounds)
    write_report(outdir, meta, rows, variants, memory, eager_memory, **inproc)
    print(f"[bench] wrote {os.path.relpath(outdir, ROOT)}/results.md in {meta['seconds']} s")
    return 0


def inprocess_all(args, info, variants, cases, rows, earlier=None):
    """The comparisons inside one process that this run makes (``--inprocess-kinds``):
    write_report's ``overhead``, ``compiled_inprocess``, ``package_inprocess``,
    ``eager_inprocess``, ``package_control`` and ``package_again`` (``rows``: the A/B
    results, for ``eager_inprocess``; ``earlier``: the results being added to, whose
    ``package_inprocess`` the control follows when this run does not measure it)."""
    out = {"overhead": [], "compiled_inprocess": [], "package_inprocess": [],
           "eager_inprocess": [], "package_control": [], "package_again": []}
    processes = args.inprocess_processes if args.inprocess_processes is not None else (
        0 if args.gpu else 1 if args.quick else 3)
    kinds = set(args.inprocess_kinds.split(","))
    from benchmarks.inprocess import select

    with tempfile.TemporaryDirectory() as work:
        # (the compiled cases in one process with --compiled only: `make bench` stays
        # within its 15 minutes)
        if ("compiled" in kinds and args.compiled and "upstream" in variants
                and select("compiled", cases) and processes):
            print(f"[bench] compiled cases in one process ({processes} processes)", flush=True)
            out["compiled_inprocess"] = inprocess_runs(
                args.python, "compiled", cases, processes, args.quick, work,
                pinned_core(select("compiled", cases), args.cpu, args.gpu))
        if "overhead" in kinds and "off" in variants and select("overhead", cases) and processes:
            print(f"[bench] cache overhead in one process ({processes} processes)", flush=True)
            out["overhead"] = inprocess_runs(
                args.python, "overhead", cases, processes, args.quick, work,
                pinned_core(select("overhead", cases), args.cpu, args.gpu))
        # On the legacy stacks every case; elsewhere, with --compiled, the compiled ones:
        # the package against TFP as shipped, where the modes compare two caches.
        if ("package" in kinds and (info["legacy"] or args.compiled)
                and select("package", cases) and processes):
            print(f"[bench] the package patched in and out in one process ({processes} "
                  "processes)", flush=True)
            out["package_inprocess"] = inprocess_runs(
                args.python, "package", cases, processes, args.quick, work,
                pinned_core(select("package", cases), args.cpu, args.gpu))
        # The cases that came out outside 0.98-1.02 there, again with both modes TFP as
        # shipped: how far the same code alone comes out, in one process, on this machine;
        # and beside it, in processes that run just these cases as the control's do, the
        # package patched in and out again (a case's ratio depends on the cases its
        # process ran before it: see AGAIN_WHY).
        package = out["package_inprocess"] or (earlier or {}).get("package_inprocess", [])
        ids = {c["id"] for c in cases}  # (--match)
        again = [c for c in outside_band(package) if c["id"] in ids]
        if "control" in kinds and again and processes:
            print(f"[bench] {len(again)} cases outside 0.98-1.02 with the package patched in "
                  f"and out, again and beside an A/A control in one process ({processes} "
                  "processes of each, in turn)", flush=True)
            both = inprocess_series(args.python, ("package", "control"), again, processes,
                                    args.quick, work, pinned_core(again, args.cpu, args.gpu))
            out["package_again"], out["package_control"] = both["package"], both["control"]
        # Elsewhere, the eager cases that came out slower than TFP across processes (where
        # a process's own speed can differ by several percent from another's), again
        # with the package patched in and out in one process.
        again = [c for c in over_eager_max(rows) if c["id"] in ids] \
            if not info["legacy"] and not args.compiled else []
        if "eager" in kinds and again and processes:
            print(f"[bench] {len(again)} eager cases over {EAGER_MAX} across processes, again "
                  f"in one process ({processes} processes)", flush=True)
            out["eager_inprocess"] = inprocess_runs(
                args.python, "package", again, processes, args.quick, work,
                pinned_core(again, args.cpu, args.gpu))
    return out


def _inprocess_only(args, info, cases, outdir):
    """--inprocess-only: the comparisons inside one process, put into ``outdir``'s
    existing results (their rounds, memory figures and meta kept; meta notes when)."""
    path = os.path.join(outdir, "results.json")
    if not os.path.exists(path):
        print(f"--inprocess-only: no results to add to in {outdir}", file=sys.stderr)
        return 2
    with open(path) as f:
        data = json.load(f)
    variants = [v for v in ("none", "package", "fixed", "upstream", "off", "control")
                if any(v in r["median"] or v in r["errors"] for r in data["rows"])]
    start = time.time()
    inproc = inprocess_all(args, info, variants, cases, data["rows"], data)
    kept = {k: data.get(k, []) for k in inproc}
    kept.update({k: v for k, v in inproc.items() if v})  # what this run measured replaces
    if inproc["package_inprocess"]:  # the control follows the comparison it was run for
        kept["package_control"] = inproc["package_control"]
        kept["package_again"] = inproc["package_again"]
    if not any(inproc.values()):
        print(f"[bench] --inprocess-only: no comparison inside one process applies to these cases; "
              f"{os.path.relpath(outdir, ROOT)} left as it was")
        return 0
    meta = dict(data["meta"])
    # Earlier --inprocess-only runs stay on record for the comparisons this one kept.
    measured = {k for k, v in inproc.items() if v} | (
        {"package_control", "package_again"} if inproc["package_inprocess"] else set())
    before = []
    for earlier in ([meta["inprocess"]] if meta.get("inprocess") else []) + meta.get("inprocess_before", []):
        still = [k for k in earlier["kinds"] if k not in measured]
        if still:
            before.append(dict(earlier, kinds=still))
    meta["inprocess_before"] = before
    meta["inprocess"] = {"when": time.strftime("%Y-%m-%d %H:%M"),
                         "seconds": round(time.time() - start),
                         "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                                    f"{platform.platform()}",
                         "kinds": sorted(k for k, v in inproc.items() if v)}
    write_report(outdir, meta, data["rows"], variants, data.get("memory", []),
                 data.get("eager_memory", []), **kept)
    print(f"[bench] added the in-process comparisons to {os.path.relpath(outdir, ROOT)}/results.md "
          f"in {meta['inprocess']['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
