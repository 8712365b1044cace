"""Timing and thread control shared by the benchmark scripts."""

import time

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # the table then says NumPy's BLAS threads were not pinned
    threadpool_limits = None

try:
    import torch
except ImportError:
    torch = None


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


class Threads:
    """Sets singa's, NumPy's BLAS and (if present) PyTorch's threads."""

    def __init__(self, n):
        self.n = n
        self._limit = None

    def __enter__(self):
        import singa
        self._old = singa.get_num_threads()
        singa.set_num_threads(self.n)
        if threadpool_limits is not None:
            self._limit = threadpool_limits(self.n)
        if torch is not None:
            self._torch_old = torch.get_num_threads()
            torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        import singa
        singa.set_num_threads(self._old)
        if self._limit is not None:
            self._limit.restore_original_limits()
        if torch is not None:
            torch.set_num_threads(self._torch_old)


def print_table(title, header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print(f"\n{title}")
    line = "  ".join(str(h).rjust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
