"""Command line: ``python -m tfp_picklefix [status|check]``."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tfp_picklefix",
        description="Report what tfp_picklefix patched, or self-test the installed stack.")
    parser.add_argument("command", nargs="?", default="status", choices=("status", "check"),
                        help="status (default): print the status table; check: run round "
                             "trips on a few bijectors and, if installed, a GPflow model")
    args = parser.parse_args(argv)

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
