"""Command line: ``python -m tfp_picklefix [status|check]``."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tfp_picklefix",
        description="Report what tfp_picklefix patched, or self-test the installed stack.")
    parser.add_argument("command", nargs="?", default="status",
                        choices=("status", "check", "upstream-diff"),
                        help="status (default): print the status table; check: run round "
                             "trips on a few bijectors and, if installed, a GPflow model; "
                             "upstream-diff: print a patch that makes the cache fix natively "
                             "in the installed TFP (apply in site-packages with patch -p1)")
    parser.add_argument("--substrate", action="append", choices=("tf", "numpy", "jax"),
                        help="upstream-diff: only these substrates (default: all installed)")
    args = parser.parse_args(argv)

    if args.command == "upstream-diff":
        from tfp_picklefix import _upstream

        try:
            found = _upstream.diffs(substrates=args.substrate)
        except (RuntimeError, ValueError) as exc:
            print(f"upstream-diff: {exc}", file=sys.stderr)
            return 1
        if not found:
            print("upstream-diff: no cache_util.py found for the requested substrates",
                  file=sys.stderr)
            return 1
        for diff in found.values():
            sys.stdout.write(diff)
        return 0

    import tfp_picklefix
    from tfp_picklefix import _check

    if args.command == "status":
        _, problems = _check.load_substrates()
        print(tfp_picklefix.status())
        for problem in problems:
            print(f"note: {problem}")
        return 0
    failures = _check.run_checks()
    print(tfp_picklefix.status())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
