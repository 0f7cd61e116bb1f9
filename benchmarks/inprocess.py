"""A/B inside one process, where the spread between processes cannot enter.

    python benchmarks/inprocess.py --kind overhead --substrates tf,numpy [--pairs 15] [--quick]
    python benchmarks/inprocess.py --kind compiled --substrates tf [--pairs 15] [--quick]

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
MODES = {"overhead": ("fixed", "off"), "compiled": ("fixed", "upstream")}
FUNCTIONS = 2  # compiled: functions traced per mode in each process


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
    return [c for c in cases if c["kind"] == "bijector" and c["exec"] == "eager"
            and c["cache"] == "miss" and c["bijector"] in CORE and c["size"] in SIZES]


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
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--process", type=int, default=0,
                        help="this process's number in the runner's series (sets the order)")
    args = parser.parse_args(argv)
    import tfp_picklefix

    from benchmarks import worker

    modes = MODES[args.kind]
    tfp_picklefix.set_cache_mode(modes[0])
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
    for case in todo:
        sub = subs[case["substrate"]]
        if isinstance(sub, str):
            rows.append({"case": case, "error": sub})
            continue
        caches = {}
        for mode in modes:
            tfp_picklefix.set_cache_mode(mode)
            caches[mode] = type(vars(sub.tfb.Bijector)["_cache"]).__name__
        if args.kind == "compiled":
            # Each traced function runs at its own speed, within a few percent, whatever
            # the mode (two traced under one mode differ as much): several per mode.
            order = trace_order(modes, args.functions, args.process)
            benches = []
            make = worker.bijector_case if case["kind"] == "bijector" else worker.e2e_case
            for mode in order:
                tfp_picklefix.set_cache_mode(mode)
                benches.append((mode, make(sub, case)))
        else:  # one set of calls, timed under both modes
            bench = worker.bijector_case(sub, case)
            benches = [(mode, bench) for mode in modes]
        times = {mode: [] for mode in modes}
        for mode, bench in benches:  # a first round, not recorded: all warmed up
            tfp_picklefix.set_cache_mode(mode)
            bench.batch()
        for i in range(args.pairs):
            got = {mode: [] for mode in modes}
            for mode, bench in (benches if i % 2 == 0 else benches[::-1]):
                tfp_picklefix.set_cache_mode(mode)
                got[mode].append(bench.batch())
            for mode in modes:
                times[mode].append(sum(got[mode]) / len(got[mode]))
        tfp_picklefix.set_cache_mode(modes[0])
        # what was timed: the class-level cache under each mode
        rows.append(dict(times, case=case, caches=caches))
    print(json.dumps({"kind": args.kind, "modes": list(modes), "rows": rows,
                      "functions": args.functions if args.kind == "compiled" else None,
                      "status": str(tfp_picklefix.status())}))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
