"""What the bench/ scripts' reports share: spreads over runs, ratios to a
reference measured in the same runs, an aligned table, and targets that
decide the script's exit status.

Imported by the Python the scripts run (`PYTHONPATH=bench`); every helper
takes None for a run whose figure is missing, and leaves it out.
"""

import re
import statistics
import sys


def present(xs):
    return [x for x in xs if x is not None]


def med(xs):
    """The median of the runs that have a figure, or None."""
    xs = present(xs)
    return statistics.median(xs) if xs else None


def spread(xs, fmt="%.1f"):
    """`median [min..max]` of the runs, each printed with `fmt`."""
    xs = present(xs)
    if not xs:
        return "n/a"
    return ("%s [%s..%s]" % (fmt, fmt, fmt)) % (med(xs), min(xs), max(xs))


def ratios(xs, refs):
    """Run by run, each figure over its reference of the same run."""
    return [x / y if x is not None and y else None for x, y in zip(xs, refs)]


def sockperf_percentile(path, pct):
    """A percentile ("50.000", "99.000", "99.900") from sockperf's output in
    `path`, in microseconds; None when the file or the line is missing."""
    try:
        text = open(path, errors="replace").read()
    except FileNotFoundError:
        return None
    m = re.search(r"percentile %s =\s*([0-9.]+)" % re.escape(pct), text)
    return float(m.group(1)) if m else None


def print_table(cols, rows):
    """Rows of strings under `cols`, each column as wide as its widest."""
    widths = [max(len(c), *(len(r[i]) for r in rows))
              for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


class Targets:
    """Targets checked against medians; `finish` prints them and exits 3
    when one is missed (unless only printing was asked for)."""

    def __init__(self):
        self.checks = []

    def check(self, name, value, limit, fmt, at_least=False):
        ok = value is not None and (value >= limit if at_least
                                    else value <= limit)
        self.add(name, ok, "n/a" if value is None else fmt % value,
                 ("%s " + fmt) % (">=" if at_least else "<=", limit))

    def add(self, name, ok, value, limit):
        """A target judged by the caller: `value` and `limit` as printed."""
        self.checks.append((name, ok, value, limit))

    def finish(self, no_targets=False):
        width = max(len(c[0]) for c in self.checks)
        print("\ntargets:")
        for name, ok, value, limit in self.checks:
            print("  %-*s %10s  %-9s %s" % (width, name, value, limit,
                                            "met" if ok else "MISSED"))
        missed = [c[0] for c in self.checks if not c[1]]
        if missed and not no_targets:
            print("TARGETS MISSED: " + "; ".join(missed))
            sys.exit(3)
