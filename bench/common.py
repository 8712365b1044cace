"""Timing and table helpers shared by the benchmark scripts. Importing this
module imports no framework, so it is safe in every side's process."""

import argparse
import os
import time


def best_time(fn, min_time=0.2, repeat=5):
    """Best per-call seconds over `repeat` rounds of at least min_time each."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time / repeat:
            break
        n *= 2
    best = dt / n
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def print_table(title, header, rows, out=print):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    out(f"\n{title}")
    line = "  ".join(str(h).rjust(w) for h, w in zip(header, widths))
    out(line)
    out("-" * len(line))
    for r in rows:
        out("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


def per_op_args(doc, argv=None):
    """The options of the benches that time ops one by one: --threads,
    --rounds and --quick; the description is the first line of `doc`."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="shorter timing rounds")
    return ap.parse_args(argv)


def load_line(what):
    """`what`, then the machine's load averages."""
    return f"{what}, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
