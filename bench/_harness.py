"""Fair speed comparisons: every side runs in a fresh process of its own.

Two frameworks timed in one process disturb each other: the idle OpenMP
and BLAS threads of the first keep spinning while the second runs, and the
caches and allocator hold the first one's state. So each measurement here
is one subprocess that imports only what its side needs. The sides
alternate (A B, B A, A B, ...) over several rounds, so a burst of load from
elsewhere hits both sides alike, and the caller reports the median (and
minimum) over the rounds.

A side is a function ``fn(threads, **kwargs) -> {metric: float}`` in a
module of the bench directory (or anywhere on ``sys.path``), named as
``"module:function"``. It does its own warm-up and timing (for instance the
median of 20 steps) and returns plain numbers. The child process gets
``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to
``threads`` before anything is imported; the function should still set its
framework's thread count (``singa.set_num_threads``,
``torch.set_num_threads``).

    import _harness

    sides = [_harness.Side("singa", "train_step:singa_step", {"workload": "cnn"}),
             _harness.Side("pytorch", "train_step:torch_step", {"workload": "cnn"},
                           needs="torch")]
    res = _harness.compare(sides, threads=2, rounds=5)
    res["singa"].median("total_ms"), res["pytorch"].min("total_ms")
    print(_harness.describe(rounds=5))

Sides time themselves with ``_harness.clock()``: wall-clock time, or the
process's CPU time when the environment has ``BENCH_CLOCK=cpu`` (the
benches' ``--cpu-time`` flag sets it for their children). CPU time keeps
1-thread figures meaningful on a busy machine, where a descheduled process
loses wall-clock time it did not use; with several threads it adds the
threads up, spinning included, so it is no measure there.

A side whose ``needs`` module cannot be imported is left out of the result
(``res`` has no entry for it), so benches run without PyTorch or
onnxruntime. A side that fails raises ``SideError`` with the child's output.
Workers are started with the running interpreter and the current
environment (``PYTHONPATH=python`` reaches them).
"""

import dataclasses
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
_MARK = "@@harness-result@@"
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class SideError(RuntimeError):
    """A side's process failed; the message holds the end of its output."""


@dataclasses.dataclass
class Side:
    """One side of a comparison.

    name:   the label in the results ("singa", "pytorch", ...).
    target: "module:function"; the function takes (threads, **kwargs) and
            returns a dict of floats.
    kwargs: JSON-serialisable keyword arguments for the function.
    needs:  a module name; the side is skipped where it cannot be imported.
    env:    extra environment variables for the child process.
    """
    name: str
    target: str
    kwargs: dict = dataclasses.field(default_factory=dict)
    needs: str = None
    env: dict = dataclasses.field(default_factory=dict)

    def available(self):
        return self.needs is None or importlib.util.find_spec(self.needs) is not None


class Samples:
    """The values one side returned over the rounds, per metric."""

    def __init__(self):
        self.rounds = []

    def add(self, result):
        self.rounds.append(result)

    def values(self, metric):
        return [r[metric] for r in self.rounds if metric in r]

    def median(self, metric):
        return statistics.median(self.values(metric))

    def min(self, metric):
        return min(self.values(metric))

    def max(self, metric):
        return max(self.values(metric))

    def metrics(self):
        names = []
        for r in self.rounds:
            names.extend(k for k in r if k not in names)
        return names


def clock():
    """The timer sides use: time.perf_counter, or time.process_time under
    BENCH_CLOCK=cpu (see the module doc)."""
    return time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter


def use_cpu_time(on):
    """Makes sides started from now on time with CPU time (or wall time)."""
    os.environ["BENCH_CLOCK"] = "cpu" if on else "wall"


def clock_name():
    return "CPU time" if os.environ.get("BENCH_CLOCK") == "cpu" else "wall-clock time"


def run_side(side, threads, timeout=900):
    """Runs one side once in a new process and returns its dict."""
    env = dict(os.environ)
    if threads is not None:
        for var in _THREAD_VARS:
            env[var] = str(threads)
    env.update({k: str(v) for k, v in side.env.items()})
    job = json.dumps({"target": side.target, "kwargs": side.kwargs, "threads": threads})
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker"],
                          input=job, capture_output=True, text=True, env=env,
                          timeout=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    tail = (proc.stdout + proc.stderr)[-4000:]
    raise SideError(f"{side.name} ({side.target}, threads={threads}) exited with "
                    f"{proc.returncode}:\n{tail}")


def compare(sides, threads=None, rounds=3, timeout=900, progress=None):
    """Runs the available sides `rounds` times each, alternating their order
    from round to round; returns {side name: Samples}. `progress`, if given,
    is called with (round, side name) before each run."""
    live = [s for s in sides if s.available()]
    out = {s.name: Samples() for s in live}
    for r in range(rounds):
        order = live if r % 2 == 0 else list(reversed(live))
        for side in order:
            if progress is not None:
                progress(r, side.name)
            out[side.name].add(run_side(side, threads, timeout))
    return out


def ratios(a, b, metric):
    """(paired, best) ratios of side a's metric to side b's: the median over
    rounds of a's value over b's in the same round, and a's minimum over
    b's. The host's speed drifts over minutes, and the runs of one round
    are the closest in time, so the paired ratio compares the two sides
    under the most alike conditions; the best-round ratio compares each
    side at its quietest."""
    pairs = [x / y for x, y in zip(a.values(metric), b.values(metric))]
    return statistics.median(pairs), a.min(metric) / b.min(metric)


PAIRED_NOTE = ("paired: median over rounds of the ratio within a round; best: singa's "
               "fastest round over the other side's fastest")


def describe(rounds, stat="median", clock=None):
    """One line saying how the figures were obtained, for a bench's output;
    clock names what a bench timed with other than the harness's clock."""
    return (f"each framework ran in a process of its own, sides alternating, "
            f"{rounds} round(s); figures are the {stat} over rounds, in "
            f"{clock or clock_name()}")


def _worker():
    job = json.loads(sys.stdin.read())
    if BENCH_DIR not in sys.path:
        sys.path.insert(0, BENCH_DIR)
    module, func = job["target"].split(":")
    fn = getattr(importlib.import_module(module), func)
    result = fn(job["threads"], **job["kwargs"])
    sys.stdout.flush()
    print(_MARK + json.dumps({k: float(v) for k, v in result.items()}), flush=True)


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _worker()
