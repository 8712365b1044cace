"""Core tensor op speed: singa against NumPy (and PyTorch when installed).

    PYTHONPATH=python python bench/tensor_ops.py [--threads 1 2] [--rounds 3] [--quick]

Prints, per thread count, each op's time for singa, NumPy and PyTorch and
the ratios NumPy/singa and PyTorch/singa (above 1.0 means singa is
faster). GEMM rows give GFLOP/s instead of time. Each library runs in a
process of its own (bench/_harness.py), the three alternating over the
rounds; within a process an op's time is the best of several timed
repeats, and the table shows the median over rounds.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402
from common import best_time, print_table  # noqa: E402

OPS = ("add 4M", "mul 4M", "exp 4M", "relu 4M", "sum axis0 2048^2", "sum axis1 2048^2",
       "transpose copy 2048^2", "a+b 4x4 (per call)", "cast f32->f16 4M", "cast f16->f32 4M")
GEMMS = (256, 1024)


def _inputs():
    rng = np.random.default_rng(0)
    n = 1 << 22  # 4M floats
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    m = rng.standard_normal((2048, 2048)).astype(np.float32)
    small = np.ones((4, 4), np.float32)
    gemm = {}
    for size in GEMMS:
        gemm[size] = (rng.standard_normal((size, size)).astype(np.float32),
                      rng.standard_normal((size, size)).astype(np.float32))
    return x, y, m, small, gemm


def _time_all(fns, gemm_fns, quick):
    min_time = 0.05 if quick else 0.3
    out = {name: best_time(fn, min_time) for name, fn in zip(OPS, fns)}
    for size, fn in gemm_fns.items():
        out[f"GEMM {size}^3"] = best_time(fn, min_time)
    return out


def singa_ops(threads, quick=False):
    import singa
    from singa import tensor
    singa.set_num_threads(threads)
    x, y, m, small, gemm = _inputs()
    sx, sy, sm, ss = (tensor.from_numpy(v) for v in (x, y, m, small))
    sh = sx.as_type(tensor.float16)
    fns = [lambda: sx + sy, lambda: sx * sy, lambda: tensor.exp(sx), lambda: tensor.relu(sx),
           lambda: tensor.sum(sm, 0), lambda: tensor.sum(sm, 1),
           lambda: sm.T.contiguous(), lambda: ss + ss,
           lambda: sx.as_type(tensor.float16), lambda: sh.as_type(tensor.float32)]
    g = {}
    for size, (a, b) in gemm.items():
        sa, sb = tensor.from_numpy(a), tensor.from_numpy(b)
        g[size] = lambda sa=sa, sb=sb: tensor.mult(sa, sb)
    return _time_all(fns, g, quick)


def numpy_ops(threads, quick=False):
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(threads)
    except ImportError:  # OPENBLAS_NUM_THREADS, set by the harness, still applies
        pass
    x, y, m, small, gemm = _inputs()
    h = x.astype(np.float16)
    fns = [lambda: x + y, lambda: x * y, lambda: np.exp(x), lambda: np.maximum(x, 0),
           lambda: m.sum(0), lambda: m.sum(1), lambda: np.ascontiguousarray(m.T),
           lambda: small + small, lambda: x.astype(np.float16), lambda: h.astype(np.float32)]
    g = {size: (lambda a=a, b=b: a @ b) for size, (a, b) in gemm.items()}
    return _time_all(fns, g, quick)


def torch_ops(threads, quick=False):
    import torch
    torch.set_num_threads(threads)
    x, y, m, small, gemm = _inputs()
    tx, ty, tm, ts = (torch.from_numpy(v) for v in (x, y, m, small))
    th = tx.half()
    fns = [lambda: tx + ty, lambda: tx * ty, lambda: torch.exp(tx), lambda: torch.relu(tx),
           lambda: tm.sum(0), lambda: tm.sum(1), lambda: tm.t().contiguous(),
           lambda: ts + ts, lambda: tx.half(), lambda: th.float()]
    g = {}
    for size, (a, b) in gemm.items():
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        g[size] = lambda ta=ta, tb=tb: ta @ tb
    return _time_all(fns, g, quick)


def fmt_time(sec):
    if sec < 1e-3:
        return f"{sec * 1e6:.2f} us"
    return f"{sec * 1e3:.3f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="shorter timing rounds")
    args = ap.parse_args()
    kw = {"quick": args.quick}
    sides = [_harness.Side("singa", "tensor_ops:singa_ops", kw),
             _harness.Side("numpy", "tensor_ops:numpy_ops", kw),
             _harness.Side("torch", "tensor_ops:torch_ops", kw, needs="torch")]
    print(f"numpy {np.__version__}; " + _harness.describe(args.rounds))
    for nth in args.threads:
        res = _harness.compare(sides, threads=nth, rounds=args.rounds)
        s, n, t = res["singa"], res["numpy"], res.get("torch")
        rows = []
        for name in OPS:
            ts, tn = s.median(name), n.median(name)
            tt = t.median(name) if t else None
            rows.append([name, fmt_time(ts), fmt_time(tn), fmt_time(tt) if tt else "-",
                         f"{tn / ts:.2f}", f"{tt / ts:.2f}" if tt else "-"])
        for size in GEMMS:
            name, flops = f"GEMM {size}^3", 2.0 * size ** 3
            ts, tn = s.median(name), n.median(name)
            tt = t.median(name) if t else None
            rows.append([name, f"{flops / ts / 1e9:.1f} GF/s", f"{flops / tn / 1e9:.1f} GF/s",
                         f"{flops / tt / 1e9:.1f} GF/s" if tt else "-", f"{tn / ts:.2f}",
                         f"{tt / ts:.2f}" if tt else "-"])
        print_table(f"threads = {nth}",
                    ["op", "singa", "numpy", "torch", "numpy/singa", "torch/singa"], rows)


if __name__ == "__main__":
    main()
