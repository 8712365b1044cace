"""GEMMs of small training steps, one by one: singa's small-GEMM kernel
against OpenBLAS (both inside singa, forced with SetCpuGemmPath), the path
singa picks by itself, and PyTorch, in GFLOP/s.

    PYTHONPATH=python python bench/small_gemm.py [--threads 1 2] [--rounds 3] [--quick]

Shapes are (m x k) * (k x n) as tensor.mult sees them, with the transposes
the layers pass: "fwd" x * W, "dX" dy * W^T, "dW" x^T * dy, for the MLP
784-256-256-10 at batch 16 and the LSTM step (hidden 128, batch 16) of
bench/graph_mode.py, and two shapes at the edge of the size rule. The last
line is the multiply-add peak of one thread (CpuFmaPeak). Each side runs in
a process of its own (bench/_harness.py); a GEMM's time is the best of
several timed repeats, the table shows the median over rounds.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402
from common import best_time, load_line, per_op_args, print_table  # noqa: E402

# (label, m, k, n, transpose A, transpose B)
SHAPES = [
    ("mlp fwd 1", 16, 784, 256, False, False),
    ("mlp dW 1", 784, 16, 256, True, False),
    ("mlp fwd 2", 16, 256, 256, False, False),
    ("mlp dX 2", 16, 256, 256, False, True),
    ("mlp dW 2", 256, 16, 256, True, False),
    ("mlp fwd 3", 16, 256, 10, False, False),
    ("mlp dX 3", 16, 10, 256, False, True),
    ("mlp dW 3", 256, 16, 10, True, False),
    ("lstm h*Wh", 16, 128, 512, False, False),
    ("lstm dz*Wh^T", 16, 512, 128, False, True),
    ("lstm h^T*dz", 128, 16, 512, True, False),
    ("edge 64x784x256", 64, 784, 256, False, False),
    ("edge 64x800x500", 64, 800, 500, False, False),
]


def _operands(m, k, n, ta, tb):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


def singa_gemm(threads, path, quick=False):
    import singa
    from singa import singa_wrap as cw
    from singa import tensor
    singa.set_num_threads(threads)
    cw.SetCpuGemmPath(path)
    out = {}
    for label, m, k, n, ta, tb in SHAPES:
        a, b = _operands(m, k, n, ta, tb)
        sa, sb = tensor.from_numpy(a), tensor.from_numpy(b)
        sa, sb = (sa.T if ta else sa), (sb.T if tb else sb)
        out[label] = best_time(lambda: tensor.mult(sa, sb), 0.05 if quick else 0.2)
    if path == "auto":
        out["fma peak"] = cw.CpuFmaPeak(1, 0.1 if quick else 0.3)
    return out


def torch_gemm(threads, quick=False):
    import torch
    torch.set_num_threads(threads)
    out = {}
    for label, m, k, n, ta, tb in SHAPES:
        a, b = _operands(m, k, n, ta, tb)
        ta_, tb_ = torch.from_numpy(a), torch.from_numpy(b)
        ta_, tb_ = (ta_.t() if ta else ta_), (tb_.t() if tb else tb_)
        out[label] = best_time(lambda: torch.mm(ta_, tb_), 0.05 if quick else 0.2)
    return out


def main(argv=None):
    args = per_op_args(__doc__, argv)
    print(load_line("small GEMMs"))
    print(_harness.describe(args.rounds))
    sides = [_harness.Side(name, "small_gemm:singa_gemm", {"path": path, "quick": args.quick})
             for name, path in (("blas", "blas"), ("small", "small"), ("auto", "auto"))]
    sides.append(_harness.Side("pytorch", "small_gemm:torch_gemm", {"quick": args.quick},
                               needs="torch"))
    for n in args.threads:
        res = _harness.compare(sides, threads=n, rounds=args.rounds)
        names = list(res)
        rows = []
        for label, m, k, n_, ta, tb in SHAPES:
            flop = 2.0 * m * n_ * k
            gf = {s: flop / res[s].median(label) / 1e9 for s in names}
            shape = f"{m}x{k}{'^T' if ta else ''}*{k}x{n_}{'^T' if tb else ''}"
            rows.append([label, shape] + [f"{gf[s]:.1f}" for s in names] +
                        [f"{gf['small'] / gf['blas']:.2f}"])
        print_table(f"{n} thread(s), GFLOP/s (one-thread FMA peak "
                    f"{res['auto'].median('fma peak'):.1f})",
                    ["gemm", "shape"] + names + ["small/blas"], rows)


if __name__ == "__main__":
    main()
