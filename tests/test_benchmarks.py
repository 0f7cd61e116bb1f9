"""The benchmark runner's GPU path, exercised on the CPU (--gpu --allow-cpu), end to end.

Checks the runner works (fresh processes per variant, ratios, files written), not
performance: timings are never asserted in tests.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import LEGACY_ERAS, ROOT, era, run_child, run_script, substrates


@pytest.mark.long(40)
def test_gpu_case_list_runs_on_cpu(tmp_path):
    if "jax" not in substrates():
        pytest.skip("needs TFP's JAX substrate (the jax-nightly stack)")
    out = tmp_path / "bench"
    result = run_script(["-m", "benchmarks", "--gpu", "--allow-cpu", "--quick", "--repeats", "2",
                         "--out", str(out)], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(out / "results.json") as f:
        data = json.load(f)
    assert data["meta"]["repeats"] == 2 and "JAX device cpu" in data["meta"]["machine"]
    rows = data["rows"]
    assert rows and all(r["case"]["substrate"] == "jax" for r in rows)
    assert {r["case"]["exec"] for r in rows} == {"eager", "jit"}
    assert not [r for r in rows if r["errors"]], [r["errors"] for r in rows if r["errors"]][:3]
    assert all({"fixed", "upstream", "off"} <= set(r["ratio"]) for r in rows)
    assert os.path.exists(out / "results.md")


@pytest.mark.long(70)
def test_compiled_run_keeps_only_compiled_cases(tmp_path):
    """``--compiled``: the compiled cases alone, for the many-round run (make bench-compiled)."""
    if "tf" not in substrates():
        pytest.skip("needs TFP's TF substrate")
    out = tmp_path / "bench"
    legacy = era("tf") in LEGACY_ERAS
    # + an end-to-end case (TransformedDistribution sample + log_prob) on TFP >= 0.12 only:
    # TFP 0.9/0.10 cannot sample with its stateless seed, and on the legacy stacks the
    # package has no modes, so no in-process part to check it in
    # (one element only: the runner handles every size alike, and the cases on 1000 and
    # 1e6 elements made this test take 258 s of a CI run on the default stack)
    match = "Exp|miss|tf_function|forward|1|,Exp|miss|xla|forward|1|"
    match += "" if legacy else ",transformed"
    result = run_script(["-m", "benchmarks", "--compiled", "--substrates", "tf", "--repeats", "2",
                         "--batches", "1", "--match", match, "--inprocess-processes", "2",
                         "--out", str(out)], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(out / "results.json") as f:
        data = json.load(f)
    rows = data["rows"]
    assert rows and {r["case"]["exec"] for r in rows} == {"tf_function", "xla"}
    assert {r["case"]["kind"] for r in rows} == ({"bijector"} if legacy else {"bijector", "e2e"})
    assert not [r for r in rows if r["errors"]], [r["errors"] for r in rows if r["errors"]][:3]
    # one list of batches per round, for every variant (none/fixed/upstream/off, or
    # none/package on the legacy stacks)
    assert all(len(per_round) == 2 for r in rows for per_round in r["batches"].values())
    assert data["memory"] == [] and data["eager_memory"] == [] and data["overhead"] == []
    # TF's cases: every process on all the cores it may use (pinned_core)
    assert data["meta"]["cpu"] is None and data["meta"]["cpus"] == sorted(os.sched_getaffinity(0))
    if legacy:
        assert data["compiled_inprocess"] == []  # one mode only: no cache to alternate
        # but the package itself, patched in and taken out in turn inside one process
        _check_inprocess(data["package_inprocess"], rows, {"package": "patched", "none": "TFP's"},
                         warm=3)
        report = (out / "results.md").read_text()
        assert "## The package in one process: package / none" in report
        assert "After each switch the garbage collector runs (" in report
        assert ") and 3 batches run untimed" in report
        summary = run_script(["-m", "benchmarks.summary", str(out)], timeout=120)
        assert summary.returncode == 0, summary.stderr[-2000:]
        assert "legacy, in one process: package / none (patched in and out in turn) within " \
            "0.98-1.02 (2 processes)" in summary.stdout, summary.stdout
        return
    # The same cases, each traced with this package's cache and with TFP's, both called
    # in turn inside one process (two processes here); and with the package patched in
    # (its cache, fixed) and taken out (TFP's as shipped)
    _check_inprocess(data["compiled_inprocess"], rows,
                     {"fixed": "PicklefixBijectorCache", "upstream": "BijectorCache"}, warm=0)
    _check_inprocess(data["package_inprocess"], rows,
                     {"package": "PicklefixBijectorCache", "none": "BijectorCache"}, warm=3)
    assert "## Compiled paths in one process" in (out / "results.md").read_text()
    summary = run_script(["-m", "benchmarks.summary", str(out)], timeout=120)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert "compiled, in one process: fixed / upstream within 0.98-1.02 (2 processes)" in summary.stdout
    assert "compiled, in one process: package / TFP as shipped (patched in and out in turn) " \
        "within 0.98-1.02 (2 processes)" in summary.stdout, summary.stdout


@pytest.mark.long(40)
def test_compiled_jax_cases_run_on_one_core_in_one_process(tmp_path):
    """``--compiled`` on JAX's cases: every process, the A/B workers and those comparing
    inside one process, runs on one core alone (``pinned_core``), and the results say
    so; ``--cpu -1`` leaves them on all."""
    if "jax" not in substrates():
        pytest.skip("needs TFP's JAX substrate (the jax-nightly stack)")
    cores = sorted(os.sched_getaffinity(0))
    for asked, pinned in (None, cores[0]), (-1, None):
        out = tmp_path / f"bench{asked}"
        result = run_script(["-m", "benchmarks", "--compiled", "--substrates", "jax",
                             "--repeats", "1", "--batches", "1", "--match", "Exp|miss|jit|forward|1|",
                             "--inprocess-processes", "2", "--out", str(out)]
                            + ([] if asked is None else ["--cpu", str(asked)]),
                            timeout=600)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        with open(out / "results.json") as f:
            data = json.load(f)
        rows = data["rows"]
        assert [r["case"]["exec"] for r in rows] == ["jit"]
        assert data["meta"]["cpu"] == pinned
        assert data["meta"]["cpus"] == ([pinned] if pinned is not None else cores)
        for kind, caches in (("compiled_inprocess", {"fixed": "PicklefixBijectorCache",
                                                     "upstream": "BijectorCache"}),
                             ("package_inprocess", {"package": "PicklefixBijectorCache",
                                                    "none": "BijectorCache"})):
            _check_inprocess(data[kind], rows, caches, warm=3 if kind == "package_inprocess" else 0,
                             cpu=pinned)
        report = (out / "results.md").read_text()
        assert (f"Each process ran on core {pinned} alone" in report) == (pinned is not None)
        assert (f"every worker ran on core {pinned} alone" in report) == (pinned is not None)


def _check_inprocess(entries, rows, caches, warm, cpu=None):
    """An in-process comparison of a --compiled run covers its cases, each traced twice
    per mode (``caches``: what each mode ran) and timed 15 times in both processes, with
    ``warm`` untimed batches after each switch of mode, on core ``cpu`` alone (None: on
    every core this process may use)."""
    assert sorted(o["case"]["id"] for o in entries) == sorted(r["case"]["id"] for r in rows)
    for o in entries:
        assert o["caches"] == caches, o
        assert len(o["processes"]) == 2 and all(len(p[m]) == 15 for p in o["processes"]
                                                for m in caches), o
        assert o["functions"] == 2 and o["warm"] == warm and o["median"] > 0, o
        # a garbage collection after each patch() or unpatch() (not after a cache-mode switch)
        assert o.get("collect", False) == ("package" in caches), o
        assert o["process_min"] <= o["process_max"], o
        # the core asked for, and the cores the process found it could run on
        assert o["cpu"] == cpu, o
        assert o["cpus"] == ([cpu] if cpu is not None else sorted(os.sched_getaffinity(0))), o


def test_gpu_script_dry_run_on_cpu(tmp_path):
    """``benchmarks/gpu.sh``, the one-command GPU check, end to end on the CPU: the
    benchmark (``--allow-cpu``) and a test file, with results and logs in ``$OUT``."""
    if "jax" not in substrates():
        pytest.skip("needs TFP's JAX substrate (the jax-nightly stack)")
    out = tmp_path / "gpu"
    env = {"OUT": str(out), "PYTHON": sys.executable, "WHEELS": str(tmp_path / "no-wheels"),
           "BENCH_FLAGS": "--allow-cpu --quick --repeats 1 --match Exp|miss|eager|forward",
           "TESTS": "tests/test_import.py", "TEST_SECONDS": "300", "PYTEST_FLAGS": "-n 2"}
    script = os.path.join(ROOT, "benchmarks", "gpu.sh")
    result = run_child(["bash", script], env, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    with open(out / "bench" / "results.json") as f:
        rows = json.load(f)["rows"]
    assert [r["case"]["bijector"] for r in rows] == ["Exp"] * len(rows) and rows
    log = (out / "tests.log").read_text()
    assert " passed" in log and "bringing up nodes" in log, log[-2000:]  # -n 2 reached xdist
    assert "jax" in (out / "device.txt").read_text()
    # TEST_SECONDS=0: the benchmark alone (a second run in the same lease); its failure
    # (no case selected) is the script's exit status
    env.update(OUT=str(tmp_path / "bench-only"), TEST_SECONDS="0",
               BENCH_FLAGS="--allow-cpu --match no-such-case")
    result = run_child(["bash", script], env, timeout=300)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert not (tmp_path / "bench-only" / "tests.log").exists()
    # BENCH_SECONDS=0: the tests alone (no benchmark is started, not even one without a
    # time limit, which is what ``timeout 0`` would run)
    env.update(OUT=str(tmp_path / "tests-only"), TEST_SECONDS="300", BENCH_SECONDS="0",
               BENCH_FLAGS="--allow-cpu --match no-such-case")
    result = run_child(["bash", script], env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert not (tmp_path / "tests-only" / "bench").exists()
    assert not (tmp_path / "tests-only" / "bench.log").exists()
    assert " passed" in (tmp_path / "tests-only" / "tests.log").read_text()


def test_match_that_selects_nothing_is_an_error(tmp_path):
    result = run_script(["-m", "benchmarks", "--quick", "--match", "no-such-case",
                         "--out", str(tmp_path / "bench")], timeout=300)
    assert result.returncode == 2 and "no benchmark case to run" in result.stderr
    assert not (tmp_path / "bench").exists()



def _control_run(tmp_path, *flags):
    """A one-case quick run (Exp forward, one element, a miss): (results.json, legacy?)."""
    sub = "tf" if "tf" in substrates() else "numpy"
    legacy = era(sub) in LEGACY_ERAS
    if legacy and sub != "tf":
        pytest.skip("the legacy NumPy-only stack has no benchmark cases")
    out = tmp_path / "bench"
    result = run_script(["-m", "benchmarks", "--quick", *flags, "--substrates", sub,
                         "--batches", "1", "--match", "Exp|miss|eager|forward|1|",
                         "--inprocess-processes", "0", "--out", str(out)], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(out / "results.json") as f:
        return json.load(f), legacy, out


@pytest.mark.long(35)
def test_control_is_tfp_as_shipped_in_a_second_process(tmp_path):
    """``--control``: an A/A variant (TFP without the package, its own processes) whose
    ratio to ``none`` shows the noise; it is reported beside the package's ratios."""
    data, legacy, out = _control_run(tmp_path, "--control", "--repeats", "2")
    status = data["meta"]["status"]
    assert status["control"] == "not imported" == status["none"], status
    package = ["package"] if legacy else ["fixed", "upstream", "off"]
    assert all(status[v] != "not imported" for v in package), status
    if not legacy:
        assert "fixed" in status["fixed"] and "upstream" in status["upstream"], status
    rows = data["rows"]
    assert rows and all({package[0], "control"} <= set(r["ratio"]) for r in rows)
    assert all(len(r["batches"]["control"]) == 2 for r in rows)
    md = (out / "results.md").read_text()
    assert "## Noise: the A/A control" in md and "| eager | control | " in md
    summary = run_script(["-m", "benchmarks.summary", str(out)], timeout=120)
    assert summary.returncode == 0 and "(control)" in summary.stdout, summary.stdout


def test_control_by_default_only_with_compiled_or_legacy(tmp_path):
    data, legacy, _ = _control_run(tmp_path, "--repeats", "1")
    assert ("control" in data["meta"]["status"]) == legacy


def test_inprocess_only_adds_to_existing_results(tmp_path):
    """``--inprocess-only``: the comparisons inside one process are measured and put into
    a results folder's existing results, whose rounds stay as they were (how the legacy
    folders got theirs without rerunning 8 rounds); without results there, an error."""
    data, legacy, out = _control_run(tmp_path, "--repeats", "1")
    sub = data["rows"][0]["case"]["substrate"]
    kind = "package_inprocess" if legacy else "overhead"
    assert data[kind] == []
    args = ["-m", "benchmarks", "--quick", "--substrates", sub, "--match",
            "Exp|miss|eager|forward|1|", "--inprocess-processes", "1", "--inprocess-only"]
    result = run_script(args + ["--out", str(out)], timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(out / "results.json") as f:
        after = json.load(f)
    assert after["rows"] == data["rows"] and after["memory"] == data["memory"]
    assert after["meta"]["when"] == data["meta"]["when"]
    # (on the legacy stacks, with the A/A control where this one case came out outside
    # 0.98-1.02)
    assert after["meta"]["inprocess"]["kinds"] in (
        [kind], ["package_again", "package_control", kind]), after["meta"]
    [entry] = after[kind]
    assert entry["case"]["id"] == data["rows"][0]["case"]["id"] and entry["median"] > 0, entry
    assert len(entry["processes"]) == 1, entry
    assert "measured later" in (out / "results.md").read_text()
    missing = run_script(args + ["--out", str(tmp_path / "nothing-here")], timeout=300)
    assert missing.returncode == 2 and "no results to add to" in missing.stderr


@pytest.mark.long(60)
def test_cases_outside_0_98_1_02_get_an_aa_control_in_one_process(tmp_path):
    """The cases whose ratio package / none came out outside 0.98-1.02 inside one process
    are measured again by their A/A control (``inprocess.py --kind control``): the same
    switches, both modes TFP as shipped; and, in processes that run just those cases as
    the control's do, again with the package patched in and out. ``--inprocess-only
    --inprocess-kinds control`` adds both to existing results, for the cases outside
    only, and keeps the record of when the comparison they follow was measured."""
    sub = "tf" if "tf" in substrates() else "jax"
    if sub not in substrates():
        pytest.skip("needs TFP's TF or JAX substrate (compiled cases)")
    legacy = era(sub) in LEGACY_ERAS
    case = f"Exp|miss|{'jit' if sub == 'jax' else 'tf_function'}|forward|1|{sub}"
    out = tmp_path / "bench"
    common = ["-m", "benchmarks", "--compiled", "--substrates", sub, "--match", case,
              "--inprocess-processes", "1", "--out", str(out)]
    result = run_script(common + ["--repeats", "1", "--batches", "1", "--memory-n", "0",
                                  "--inprocess-kinds", "package"], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    path = out / "results.json"

    def set_ratio(ratio):
        with open(path) as f:
            data = json.load(f)
        [entry] = data["package_inprocess"]
        assert entry["case"]["id"] == case and data["package_control"] == [], data
        assert data["package_again"] == [], data
        entry["median"] = ratio  # the runner's input: a result inside or outside the band
        with open(path, "w") as f:
            json.dump(data, f)
        return data

    set_ratio(1.0)
    again = run_script(common + ["--inprocess-only", "--inprocess-kinds", "control"], timeout=600)
    assert again.returncode == 0 and "left as it was" in again.stdout, again.stdout + again.stderr
    before = set_ratio(1.5)
    again = run_script(common + ["--inprocess-only", "--inprocess-kinds", "control"], timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    with open(path) as f:
        data = json.load(f)
    assert data["rows"] == before["rows"] and data["package_inprocess"] == before["package_inprocess"]
    [entry] = data["package_control"]
    tfp_cache = "TFP's" if legacy else "BijectorCache"
    assert entry["case"]["id"] == case and entry["caches"] == {"none_a": tfp_cache,
                                                                "none_b": tfp_cache}, entry
    assert len(entry["processes"]) == 1 and entry["functions"] == 2 and entry["warm"] == 3, entry
    assert entry["collect"] is True, entry
    assert entry["median"] > 0 and entry["none_a_us"] > 0 and entry["none_b_us"] > 0, entry
    [again_entry] = data["package_again"]  # the package patched in and out, beside the control
    assert again_entry["case"]["id"] == case and len(again_entry["processes"]) == 1, again_entry
    assert again_entry["caches"] == {
        "package": "patched" if legacy else "Picklefix" + tfp_cache, "none": tfp_cache}, again_entry
    assert again_entry["median"] > 0 and again_entry["package_us"] > 0, again_entry
    meta = data["meta"]
    assert meta["inprocess"]["kinds"] == ["package_again", "package_control"], meta
    assert meta["inprocess_before"] == [] and "inprocess" not in before["meta"], meta
    md = (out / "results.md").read_text()
    assert "## The cases outside 0.98-1.02 in one process, beside an A/A control" in md
    row = f"| {sub} Exp n=1 forward {case.split('|')[2]} miss | 1.500 ["
    assert row in md, md[-2000:]
    [line] = [x for x in md.splitlines() if x.startswith(row)]
    assert line.split(" | ")[2] == (f"{again_entry['median']:.3f} [{again_entry['process_min']:.3f}, "
                                    f"{again_entry['process_max']:.3f}]"), line
    assert "Measured again beside the control: " in md
    summary = run_script(["-m", "benchmarks.summary", str(out)], timeout=120)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert "the A/A control in one process (TFP as shipped on both sides) for those 1:" \
        in summary.stdout, summary.stdout
    assert "the package measured again beside that control: " in summary.stdout, summary.stdout
    bad = run_script(common + ["--inprocess-only", "--inprocess-kinds", "contrl"], timeout=120)
    assert bad.returncode == 2 and "unknown contrl" in bad.stderr, bad.stderr


def test_overhead_swaps_the_cache_for_a_pass_through_in_one_process(tmp_path):
    """The cache's cost over no cache (issue 3, point 8) is measured inside one process:
    ``benchmarks/inprocess.py --kind overhead`` alternates this package's cache and the
    pass-through between batches of the same calls; the runner aggregates fresh
    processes and reports it (``--inprocess-processes``)."""
    sub = "numpy" if "numpy" in substrates() else "jax"
    if sub not in substrates() or era(sub) in LEGACY_ERAS:
        pytest.skip("needs a TFP >= 0.12 substrate (the package's cache has no modes before)")
    out = tmp_path / "bench"
    result = run_script(["-m", "benchmarks", "--quick", "--substrates", sub, "--batches", "1",
                         "--repeats", "1", "--match", "miss|eager|",
                         "--inprocess-processes", "2", "--memory-n", "0", "--out", str(out)],
                        timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(out / "results.json") as f:
        data = json.load(f)
    overhead = data["overhead"]
    # the run's cache-miss cases of Exp, Softplus and the Chain of 3 at sizes 1 and 1000
    # (--quick: forward and inverse), each from both processes
    assert sorted(o["case"]["id"] for o in overhead) == sorted(r["case"]["id"] for r in data["rows"])
    assert len(overhead) == 12, overhead
    for o in overhead:
        assert o["case"]["substrate"] == sub and o["case"]["cache"] == "miss", o
        assert o["caches"] == {"fixed": "PicklefixBijectorCache", "off": "NoBijectorCache"}, o
        assert len(o["processes"]) == 2 and all(len(p["fixed"]) == len(p["off"]) == 7
                                                for p in o["processes"]), o
        assert o["median"] > 0 and o["process_min"] <= o["process_max"], o
    md = (out / "results.md").read_text()
    assert "## Cache overhead in one process" in md
    assert f"| {sub} Chain3 n=1000 inverse eager miss |" in md
    summary = run_script(["-m", "benchmarks.summary", str(out)], timeout=120)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert "cache cost over no cache <= 1.15, in one process (2 processes)" in summary.stdout


def test_eager_cases_over_1_02_are_measured_again_in_one_process(tmp_path):
    """Issue 5's eager target (no case slower than TFP, median <= 1.02): the eager cases
    over it across fresh processes are measured again inside one process, the package
    patched in and taken out in turn; the others are not. A NumPy hit on 1e6 elements
    costs several times TFP's (its bitwise check of input and output), a miss on one
    element a fraction of it."""
    sub = "numpy" if "numpy" in substrates() else "jax"
    if sub not in substrates() or era(sub) in LEGACY_ERAS:
        pytest.skip("needs a TFP >= 0.12 substrate (on the legacy stacks every case is)")
    out = tmp_path / "bench"
    slow, fast = f"Exp|hit|eager|forward|1000000|{sub}", f"Exp|miss|eager|forward|1|{sub}"
    result = run_script(["-m", "benchmarks", "--substrates", sub, "--batches", "1",
                         "--repeats", "1", "--match", f"{slow},{fast}",
                         "--inprocess-processes", "1", "--memory-n", "0", "--out", str(out)],
                        timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(out / "results.json") as f:
        data = json.load(f)
    ratios = {r["case"]["id"]: r["ratio"]["fixed"]["median"] for r in data["rows"]}
    assert set(ratios) == {slow, fast}
    over = sorted(i for i, m in ratios.items() if m > 1.02)
    assert sorted(o["case"]["id"] for o in data["eager_inprocess"]) == over, ratios
    if sub == "numpy":  # the snapshot check's cost: several times TFP's
        assert over == [slow], ratios
    for o in data["eager_inprocess"]:
        assert o["caches"] == {"package": "PicklefixBijectorCache", "none": "BijectorCache"}, o
        assert len(o["processes"]) == 1 and o["median"] > 0 and o["warm"] == 3, o
    md = (out / "results.md").read_text()
    assert ("## Eager cases over 1.02 across processes, again in one process" in md) == bool(over)
    summary = run_script(["-m", "benchmarks.summary", str(out)], timeout=120)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert ("eager, over 1.02 across processes, again in one process: package / none <= 1.02 "
            "(1 processes)" in summary.stdout) == bool(over), summary.stdout


_HIT_ACROSS_SWITCHES = """
import sys
import tfp_picklefix
from benchmarks import worker

sub = worker.Substrate(sys.argv[1])
case = {"kind": "bijector", "substrate": sys.argv[1], "bijector": "Exp", "size": 1000,
        "op": sys.argv[2], "exec": "eager", "cache": "hit"}
hits = []
for mode in ("package", "none"):
    (tfp_picklefix.patch if mode == "package" else tfp_picklefix.unpatch)()
    bench = worker.bijector_case(sub, case)
    for again in ("none", "package", "none", "package")[mode == "none":]:
        (tfp_picklefix.patch if again == "package" else tfp_picklefix.unpatch)()
    # back in ``mode``, as inprocess.py is before each batch
    bench.refill()
    hits.append(bench.fn(bench.x0) is bench.keep)
print(hits)
"""


def test_a_hit_stays_a_hit_when_the_package_is_patched_in_and_out():
    """Inside one process (``benchmarks/inprocess.py --kind package``) a hit case's call
    is a hit under each mode, after any number of switches: the package's cache starts
    empty after ``patch()``, and ``Timed.refill`` (after each switch) puts the case's kept
    output back in the cache that runs; without it every call of the package's would be a
    miss (a NumPy Softplus "hit" on 1e6 elements measured 48x TFP's: its arithmetic)."""
    sub = "numpy" if "numpy" in substrates() else "jax"
    if sub not in substrates() or era(sub) in LEGACY_ERAS:
        pytest.skip("needs a TFP >= 0.12 substrate (the legacy caches are TFP's in both modes)")
    for op in ("forward", "inverse"):
        result = run_script(["-c", _HIT_ACROSS_SWITCHES, sub, op], timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip().splitlines()[-1] == "[True, True]", result.stdout


def test_cache_cost_swaps_the_cache_for_a_pass_through(tmp_path):
    """``benchmarks/cache_cost.py`` (where the cache's cost comes from: the cache object
    alone and inside ``Bijector.forward``, with and without the CPU caches evicted)
    alternates this package's cache and the pass-through in one process and writes its
    table and record."""
    sub = "numpy" if "numpy" in substrates() else "jax"
    if sub not in substrates() or era(sub) in LEGACY_ERAS:
        pytest.skip("needs a TFP >= 0.12 substrate (the package's cache has no modes before)")
    out = tmp_path / "bench"
    result = run_script(["-m", "benchmarks.cache_cost", "--substrates", sub, "--sizes", "1",
                         "--evict-kb", "0,64", "--rounds", "2", "--out", str(out)], timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(out / f"cache_cost-{sub}.json") as f:
        data = json.load(f)
    rows = data["rows"]
    assert sorted((r["evict_kb"], r["call"]) for r in rows) == [
        (0, "bijector"), (0, "cache"), (64, "bijector"), (64, "cache")], rows
    for r in rows:
        assert r["substrate"] == sub and r["size"] == 1, r
        assert r["caches"] == {"fixed": "PicklefixBijectorCache", "off": "NoBijectorCache"}, r
        assert len(r["fixed_us"]) == len(r["off_us"]) == 2, r
        assert min(r["fixed_us"] + r["off_us"]) > 0, r
    table = (out / f"cache_cost-{sub}.md").read_text()
    assert f"{sub:9s}     1    64K cache" in table, table


def _miss_row(substrate, bijector, size, op, fixed, off):
    case = {"kind": "bijector", "substrate": substrate, "bijector": bijector, "size": size,
            "op": op, "exec": "eager", "cache": "miss"}
    ratio = {"fixed": {"median": fixed, "min": fixed, "max": fixed},
             "off": {"median": off, "min": off, "max": off}}
    return {"case": case, "median": {}, "ratio": ratio, "errors": [], "batches": {}}


def test_the_summary_says_which_misses_over_half_no_cache_could_bring_under_it(tmp_path):
    """Issue 5's "eager misses at most half of TFP's": a miss over 0.5 whose call with no
    cache at all (``off``) takes more than 0.5 too is out of any cache's reach; the
    summary counts those apart and lists the others."""
    rows = [_miss_row("numpy", "Exp", 1, "forward", 0.12, 0.11),       # meets it
            _miss_row("tf", "Softplus", 1e6, "forward", 0.90, 0.91),   # out of reach
            _miss_row("tf", "Exp", 1, "fldj", 0.87, 0.92),             # out of reach
            _miss_row("numpy", "Chain3", 1e6, "inverse", 0.82, 0.35)]  # within reach
    meta = {"when": "now", "machine": "here", "python": "3", "versions": {}, "repeats": 1,
            "seconds": 1}
    (tmp_path / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}))
    result = run_script(["-m", "benchmarks.summary", str(tmp_path)], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "<= 0.5 of TFP as shipped (fixed): 1/4 cases meet it" in out, out
    assert ("of the 3 over 0.5, 2 take more than 0.5 with no cache at all too (off): "
            "out of any cache's reach") in out, out
    within = [line for line in out.splitlines() if "within reach:" in line]
    assert within == ["  - within reach: numpy Chain3 n=1e+06 inverse eager miss: "
                      "0.82 [0.82, 0.82], off 0.35 [0.35, 0.35]"], out
