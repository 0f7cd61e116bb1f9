"""A/B inside one process, where the spread between processes cannot enter.

    python benchmarks/inprocess.py --kind overhead --substrates tf,numpy [--pairs 15] [--quick]
    python benchmarks/inprocess.py --kind compiled --substrates tf [--pairs 15] [--quick]
    python benchmarks/inprocess.py --kind package --substrates tf [--pairs 15] [--quick]
    python benchmarks/inprocess.py --kind control --cases CASES.json [--pairs 15]

On this shared machine one process runs the same code up to 2x faster than another,
steadily within each, which swamps small effects in the A/B runner's comparison of
fresh processes. Here both sides share one process, and their batches alternate (the
order flips each pair, after one pair of warm-up):

- ``overhead`` (issue 3, point 8: "in eager mode the cache adds at most 15 % to the
  cost of the same call with no cache, measured against forward/inverse/log-det with
  the cache swapped for a pass-through"): the same calls with this package's cache
  (``fixed``) and with the pass-through (``off``), swapped by
  ``tfp_picklefix.set_cache_mode``. Cache misses of Exp, Softplus and the Chain of 3
  at sizes 1 and 1000; forward, inverse and both log-det-Jacobians.
- ``compiled`` (issue 5: compiled paths within 2 % of upstream): every compiled case
  of the runner (``tf.function``, XLA, ``jax.jit``), traced once with this package's
  cache (``fixed``) and with TFP's own (``upstream``, whose graphs are those of TFP
  without the package: ``tests/test_compiled_parity.py``), all kept in the one process
  and called in turn. Each traced function object runs at its own speed, within a few
  percent (two traced under the same mode differ as much), so each mode gets several
  (``--functions``, default 2), traced in the order A B B A, then B A A B (B A A B first
  in odd-numbered processes), and a mode's time in a pair is the mean of its
  functions'.
- ``package`` (issue 5: on the legacy stacks, package / TFP as shipped within 0.98-1.02:
  "the legacy fix must not touch the hot path"): every case of the runner but the
  thread ones, with the package patched in (``package``: ``tfp_picklefix.patch()``)
  and taken out again (``none``: ``tfp_picklefix.unpatch()``, which puts back every
  attribute TFP had), in turn. Eager misses time one set of calls under both; eager hits
  make their input and kept output under each, and call once more after each switch
  (which empties the caches: else every call of the package's would be a miss);
  compiled cases trace their functions under each, as ``compiled`` does. After each switch three
  batches run untimed (``WARM_AFTER_SWITCH``, ``--warm``).
- ``control``: the A/A control of ``package``, run on the cases that came out outside
  0.98-1.02 there: the same steps, cases and switches, but both modes (``none_a`` and
  ``none_b``) are TFP as shipped (each switch calls ``tfp_picklefix.patch()`` and then
  ``unpatch()``, so that both go through what a switch of ``package`` does). Its ratios
  are what the same code, traced or given its inputs separately, produces here.

With ``--cpu N`` the process runs on core N alone (``benchmarks/run.py`` asks for it where
every case is a ``jax.jit`` one on the CPU: see its ``pinned_core``).

A process's first case runs twice, the first time not recorded (a process's first case
came out biased whatever the modes compared).

The last stdout line is a JSON record; ``benchmarks/run.py`` runs this in several
fresh processes and aggregates.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SIZES = (1, 1000)
MODES = {"overhead": ("fixed", "off"), "compiled": ("fixed", "upstream"),
         "package": ("package", "none"), "control": ("none_a", "none_b")}
# The kinds that patch the package in and out (or, the control, go through the same
# switch and end where they began): each mode makes its own hit inputs and outputs.
SWITCHES_PATCH = ("package", "control")
FUNCTIONS = 2  # compiled: functions traced per mode in each process
# Untimed batches after each switch, by kind (``--warm`` overrides). patch() and
# unpatch() rewrite some 150 attributes and registry entries, and what follows a switch
# runs slower for a while: on TFP 0.11, with no untimed batch, every case came out 1-5 %
# slower in the mode switched to by patch(), compiled ones too; with one, XLA calls of
# FillScaleTriL and MAF (1000 elements, TF 2.21) still came out 2-3 % faster with the
# package (0.968-0.981 in two processes), and with three 0.995-1.001, as when the
# functions traced under both modes are all called in one state, with no switch between
# batches (0.993-0.997). A switch of the cache mode alone (``compiled``, ``overhead``)
# sets one class attribute: with two untimed batches after it, the compiled comparison
# came out no closer (25 of 28 TF cases within 0.98-1.02, against 28 of 28 without; the
# three at 1e6 elements, where single batches vary most).
WARM_AFTER_SWITCH = {"package": 3, "control": 3, "compiled": 0, "overhead": 0}


def trace_order(modes, functions, process):
    """The modes in the order their functions are traced: A B B A, then B A A B, and so
    on (starting with B A A B in odd-numbered processes): no mode is always first, and
    a drift over the sequence weighs on both alike."""
    a, b = modes if process % 2 == 0 else modes[::-1]
    order = []
    for i in range(max(1, functions // 2)):
        order += [a, b, b, a] if i % 2 == 0 else [b, a, a, b]
    return order


def select(kind, cases):
    """The cases of ``kind`` among the A/B runner's ``cases``."""
    from benchmarks.run import COMPILED, CORE

    if kind == "compiled":
        return [c for c in cases if c.get("exec") in COMPILED]
    if kind in SWITCHES_PATCH:
        return [c for c in cases if c["kind"] in ("bijector", "e2e")]
    return [c for c in cases if c["kind"] == "bijector" and c["exec"] == "eager"
            and c["cache"] == "miss" and c["bijector"] in CORE and c["size"] in SIZES]


def switch(kind, mode):
    """Put the process in ``mode``: a cache mode, or for ``package`` the package patched
    in or taken out; for ``control``, patched in and taken out again (either mode)."""
    import tfp_picklefix

    if kind not in SWITCHES_PATCH:
        tfp_picklefix.set_cache_mode(mode)
        return
    if kind == "control":
        tfp_picklefix.patch()
        tfp_picklefix.unpatch()
    elif mode == "package":
        tfp_picklefix.patch()
    else:
        tfp_picklefix.unpatch()
    # What patch() and unpatch() leave for the garbage collector, collected now rather
    # than in whichever batch next crosses its threshold, which can be a timed one. (On
    # TFP 0.10, the eager forward of Exp on 1e6 elements, the first 17 cases of a run:
    # 1.065, 1.053 and 1.039 with the package in three processes without this, 0.984,
    # 1.025 and 0.931 with it. In whole runs, with it, that case still came out 1.045
    # [1.016, 1.070], against its A/A control's 1.000: the collection is not the whole
    # story.)
    gc.collect()


def what_runs(kind, sub):
    """What a mode changes, as it stands now: the class-level cache (TFP >= 0.12), or on
    TFP <= 0.11, whether ``Bijector.__getstate__`` is the package's."""
    import tfp_picklefix

    cache = vars(sub.tfb.Bijector).get("_cache")
    if cache is not None:
        return type(cache).__name__
    return "patched" if tfp_picklefix.is_patched(sub.tfb.Bijector, "__getstate__") else "TFP's"


def cases(kind, substrates, quick):
    """The cases of ``kind`` of the A/B runner's suite for ``substrates``."""
    from benchmarks.run import cases_for

    info = {"tf": "tf" in substrates, "jax": "jax" in substrates, "legacy": False,
            "gpflow": False}
    return [c for c in select(kind, cases_for(info, quick, False)) if c["substrate"] in substrates]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=sorted(MODES), default="overhead")
    parser.add_argument("--substrates", default=None, help="all cases of these substrates")
    parser.add_argument("--cases", default=None,
                        help="a JSON file of the A/B runner's cases: the ones of --kind among them")
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--functions", type=int, default=FUNCTIONS,
                        help="compiled: functions traced per mode (an even number)")
    parser.add_argument("--warm", type=int, default=None,
                        help="untimed batches after each switch (default: WARM_AFTER_SWITCH)")
    parser.add_argument("--cpu", type=int, default=None,
                        help="run this process on this core alone (before anything is imported)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--process", type=int, default=0,
                        help="this process's number in the runner's series (sets the order)")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        # before JAX or TF is imported: their thread pools are sized on the cores they see
        os.sched_setaffinity(0, {args.cpu})
    import tfp_picklefix

    from benchmarks import worker
    from benchmarks.run import COMPILED

    modes = MODES[args.kind]
    warm = WARM_AFTER_SWITCH[args.kind] if args.warm is None else args.warm
    switch(args.kind, modes[0])
    if args.cases:
        with open(args.cases) as f:
            todo = select(args.kind, json.load(f))
        names = sorted({c["substrate"] for c in todo})
    else:
        names = args.substrates.split(",")
        todo = cases(args.kind, names, args.quick)
    subs = {}
    for name in names:
        try:
            subs[name] = worker.Substrate(name)
        except ImportError as exc:
            subs[name] = f"{type(exc).__name__}: {exc}"[:300]
    gc.collect()
    gc.freeze()  # as the A/B workers do: collections walk only what the cases allocate
    rows = []
    # The first case runs twice, the first time not recorded: a process's first case came
    # out biased whatever the kind (Exp on one element in tf.function: 1.084 and 1.017
    # package/none in two processes, then 0.993-1.007 for the same case later in each).
    settle = todo[:1]
    for index, case in enumerate(settle + todo):
        record = rows.append if index >= len(settle) else (lambda row: None)
        sub = subs[case["substrate"]]
        if isinstance(sub, str):
            record({"case": case, "error": sub})
            continue
        caches = {}
        for mode in modes:
            switch(args.kind, mode)
            caches[mode] = what_runs(args.kind, sub)
        make = worker.bijector_case if case["kind"] == "bijector" else worker.e2e_case
        try:
            if case.get("exec") in COMPILED:
                # Each traced function runs at its own speed, within a few percent,
                # whatever the mode (two traced under one mode differ as much): several
                # per mode.
                order = trace_order(modes, args.functions, args.process)
                benches = []
                for mode in order:
                    switch(args.kind, mode)
                    benches.append((mode, make(sub, case)))
            elif case.get("cache") == "hit" and args.kind in SWITCHES_PATCH:
                # A hit's input and kept output, made under each mode: TFP's cache makes
                # the arrays it sees read-only, and the package's cache starts empty after
                # each patch() (so each switch refills it: Timed.refill).
                benches = []
                for mode in modes:
                    switch(args.kind, mode)
                    benches.append((mode, make(sub, case)))
            else:  # one set of calls, timed under both modes
                bench = make(sub, case)
                benches = [(mode, bench) for mode in modes]
        except Exception as exc:  # a case this stack cannot run: recorded, as the workers do
            switch(args.kind, modes[0])
            record({"case": case, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        times = {mode: [] for mode in modes}
        for mode, bench in benches:  # a first round, not recorded: all warmed up
            switch(args.kind, mode)
            bench.refill()
            bench.batch()
        for i in range(args.pairs):
            got = {mode: [] for mode in modes}
            for mode, bench in (benches if i % 2 == 0 else benches[::-1]):
                switch(args.kind, mode)
                bench.refill()
                for _ in range(warm):
                    bench.batch()  # not recorded: see WARM_AFTER_SWITCH
                got[mode].append(bench.batch())
            for mode in modes:
                times[mode].append(sum(got[mode]) / len(got[mode]))
        switch(args.kind, modes[0])
        # what was timed: the class-level cache (or the patch) under each mode
        record(dict(times, case=case, caches=caches))
    print(json.dumps({"kind": args.kind, "modes": list(modes), "rows": rows,
                      "functions": args.functions if args.kind != "overhead" else None,
                      "warm": warm, "cpu": args.cpu, "cpus": worker.cores(),
                      # a garbage collection after each switch (see switch)
                      "collect": args.kind in SWITCHES_PATCH,
                      "status": str(tfp_picklefix.status())}))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
