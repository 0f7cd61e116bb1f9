"""The structured report returned by ``tfp_picklefix.status()``."""
from __future__ import annotations

from typing import NamedTuple, Tuple


class SubstrateStatus(NamedTuple):
    substrate: str          # "tf", "numpy" or "jax"
    module: str             # the module defining that substrate's Bijector
    tfp_version: str        # reported, never used for decisions
    era: str                # "dict", "instance", "global" or "unknown"
    detail: str             # what detection recognised, or what it did not
    action: str             # "patched", "nothing to patch", "not patched", "failed: ..."
    patched: Tuple[str, ...] = ()  # "Bijector.__getstate__", ...


class Status(NamedTuple):
    enabled: bool           # False when TFP_PICKLEFIX=off
    active: bool            # patching is on (hooks will patch newly imported substrates)
    mode: str               # how the package was asked to run, e.g. "on" or "off (TFP_PICKLEFIX=off)"
    cache_mode: str         # TFP >= 0.12: "fixed" (this package's cache), "upstream" or "off"
    substrates: Tuple[SubstrateStatus, ...]
    speedups: str = ""      # which code runs the fixed cache's common miss: "C" or "Python (why)"

    def __str__(self) -> str:
        lines = [f"tfp_picklefix: {'active' if self.active else 'inactive'}; mode: {self.mode}; "
                 f"cache mode (TFP >= 0.12): {self.cache_mode}"
                 + (f" (miss path: {self.speedups})"
                    if self.speedups and self.cache_mode == "fixed" else "")]
        if not self.substrates:
            lines.append("no TFP substrate imported yet (substrates are patched when imported)")
            return "\n".join(lines)
        headers = ("substrate", "TFP", "era", "action")
        rows = [(s.substrate, s.tfp_version, s.era, s.action.split(":", 1)[0])
                for s in self.substrates]
        widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
        fmt = "  ".join("{:<%d}" % w for w in widths)
        lines.append(fmt.format(*headers).rstrip())
        lines.append(fmt.format(*("-" * w for w in widths)).rstrip())
        lines.extend(fmt.format(*row).rstrip() for row in rows)
        # Below the table, one block per substrate, wrapped: its Bijector's module, what
        # detection found, the whole action where it is more than a word (a failure's
        # message), and every patched attribute (TF's list has some eighty; as a column
        # of the table they made each of its lines thousands of characters wide).
        for s in self.substrates:
            lines.append(f"{s.substrate}: {s.module}")
            if s.detail:
                lines.extend(_wrap("  detected: ", s.detail.split()))
            if ":" in s.action:
                lines.extend(_wrap("  ", s.action.split()))
            if s.patched:
                items = [name + "," for name in s.patched[:-1]] + [s.patched[-1]]
                lines.extend(_wrap("  patched: ", items))
        return "\n".join(lines)


WIDTH = 88  # the status text's lines, but for a word longer than that alone


def _wrap(first, words, indent="    ", width=WIDTH):
    """``words`` after ``first``, filled into lines of at most ``width`` characters.

    A word is never split (a patched attribute such as "pickle's registry: _TupleWrapper"
    is one word here), so each stays whole on one line, to be found with grep.
    """
    lines, line, fresh = [], first, True
    for word in words:
        if not fresh and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent + word
        else:
            line = line + ("" if fresh else " ") + word
        fresh = False
    lines.append(line.rstrip())
    return lines
