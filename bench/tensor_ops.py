"""Core tensor op speed: singa against NumPy (and PyTorch when installed).

    python bench/tensor_ops.py [--threads 1 2] [--quick]

Prints, per thread count, each op's time for singa, NumPy and PyTorch and
the ratio NumPy/singa (above 1.0 means singa is faster). GEMM rows give
GFLOP/s instead of time.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import Threads, best_time, print_table, torch, threadpool_limits  # noqa: E402

from singa import tensor  # noqa: E402


def cases(quick):
    rng = np.random.default_rng(0)
    n = 1 << 22  # 4M floats
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    m = rng.standard_normal((2048, 2048)).astype(np.float32)
    sx, sy, sm = (tensor.from_numpy(v) for v in (x, y, m))
    tx = ty = tm = None
    if torch is not None:
        tx, ty, tm = (torch.from_numpy(v) for v in (x, y, m))
    small_a = np.ones((4, 4), np.float32)
    s_small = tensor.from_numpy(small_a)
    t_small = torch.from_numpy(small_a) if torch is not None else None

    rows = [
        ("add 4M", lambda: sx + sy, lambda: x + y, lambda: tx + ty),
        ("mul 4M", lambda: sx * sy, lambda: x * y, lambda: tx * ty),
        ("exp 4M", lambda: tensor.exp(sx), lambda: np.exp(x), lambda: torch.exp(tx)),
        ("relu 4M", lambda: tensor.relu(sx), lambda: np.maximum(x, 0), lambda: torch.relu(tx)),
        ("sum axis0 2048^2", lambda: tensor.sum(sm, 0), lambda: m.sum(0), lambda: tm.sum(0)),
        ("sum axis1 2048^2", lambda: tensor.sum(sm, 1), lambda: m.sum(1), lambda: tm.sum(1)),
        ("transpose copy 2048^2", lambda: sm.T.contiguous(),
         lambda: np.ascontiguousarray(m.T), lambda: tm.t().contiguous()),
        ("a+b 4x4 (per call)", lambda: s_small + s_small, lambda: small_a + small_a,
         lambda: t_small + t_small),
    ]
    gemms = []
    for size in (256, 1024):
        a = rng.standard_normal((size, size)).astype(np.float32)
        b = rng.standard_normal((size, size)).astype(np.float32)
        sa, sb = tensor.from_numpy(a), tensor.from_numpy(b)
        ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch is not None else (None, None)
        gemms.append((f"GEMM {size}^3", 2.0 * size ** 3, lambda sa=sa, sb=sb: tensor.mult(sa, sb),
                      lambda a=a, b=b: a @ b, lambda ta=ta, tb=tb: ta @ tb))
    return rows, gemms


def fmt_time(sec):
    if sec < 1e-3:
        return f"{sec * 1e6:.2f} us"
    return f"{sec * 1e3:.3f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--quick", action="store_true", help="shorter timing rounds")
    args = ap.parse_args()
    min_time = 0.05 if args.quick else 0.3
    rows, gemms = cases(args.quick)
    print(f"numpy {np.__version__}; torch {torch.__version__ if torch else 'not installed'}; "
          f"NumPy BLAS threads {'pinned' if threadpool_limits else 'NOT pinned (no threadpoolctl)'}")
    for nth in args.threads:
        out = []
        with Threads(nth):
            for name, s_fn, n_fn, t_fn in rows:
                ts, tn = best_time(s_fn, min_time), best_time(n_fn, min_time)
                tt = best_time(t_fn, min_time) if torch is not None else None
                out.append([name, fmt_time(ts), fmt_time(tn), fmt_time(tt) if tt else "-",
                            f"{tn / ts:.2f}", f"{tt / ts:.2f}" if tt else "-"])
            for name, flops, s_fn, n_fn, t_fn in gemms:
                ts, tn = best_time(s_fn, min_time), best_time(n_fn, min_time)
                tt = best_time(t_fn, min_time) if torch is not None else None
                out.append([name, f"{flops / ts / 1e9:.1f} GF/s", f"{flops / tn / 1e9:.1f} GF/s",
                            f"{flops / tt / 1e9:.1f} GF/s" if tt else "-", f"{tn / ts:.2f}",
                            f"{tt / ts:.2f}" if tt else "-"])
        print_table(f"threads = {nth}",
                    ["op", "singa", "numpy", "torch", "numpy/singa", "torch/singa"], out)


if __name__ == "__main__":
    main()
