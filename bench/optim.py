"""Optimizer updates, one parameter at a time: singa's one-pass SGD with
momentum, Adam and RMSProp (SGDMomentumStep, AdamStep, RMSPropStep) against
the same steps as separate element-wise passes (the ops singa takes for
other dtypes and devices), NumPy's in-place ufuncs, and PyTorch's
optimizers.

    PYTHONPATH=python python bench/optim.py [--threads 1 2] [--rounds 3] [--quick]

Parameter sizes are those of bench/train_step.py's models: LeNet's conv2
(50x20x5x5) and first dense layer (800x500), the MLP's first layer (784x256)
and a ResNet-18 3x3 weight (512x512x3x3). Each side runs in a process of its
own (bench/_harness.py); one update's time is the best of repeated calls on
the same buffers (they stay in cache where they fit, and no other core
touches them between calls, unlike a training step), and the table shows
the median over rounds in microseconds, with singa's separate passes and
PyTorch over singa's one pass.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402
from common import best_time, load_line, per_op_args, print_table  # noqa: E402

SIZES = [("lenet conv2 50x20x5x5", 25000), ("mlp fc1 784x256", 200704),
         ("lenet fc1 800x500", 400000), ("r18 512x512x3x3", 2359296)]
LR, MOM, B1, B2, EPS, RHO = 0.01, 0.9, 0.9, 0.999, 1e-8, 0.9
# Adam's bias corrections at step 3, as the optimizers hold them then.
STEP_SIZE = LR / (1 - B1 ** 3)
V_SCALE = 1 / np.sqrt(1 - B2 ** 3)


def _arrays(n):
    rng = np.random.default_rng(0)
    p, g, m = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    return p, g, m, np.abs(rng.standard_normal(n)).astype(np.float32)


def singa_side(threads, quick=False):
    import singa
    from singa import singa_wrap as cw
    from singa import tensor
    singa.set_num_threads(threads)
    t = 0.05 if quick else 0.2

    def scalar(x):
        return tensor.from_numpy(np.array([x], np.float32)).data

    lr, ss, vs, none = scalar(LR), scalar(STEP_SIZE), scalar(V_SCALE), cw.Tensor()
    out = {}
    for label, n in SIZES:
        p, g, m, v = (tensor.from_numpy(a).data for a in _arrays(n))
        tmp = tensor.from_numpy(np.zeros(n, np.float32)).data

        def sgd_passes():
            cw.Axpby(1.0, g, MOM, m)
            cw.AxpyTensor(-1.0, lr, m, p)

        def adam_passes():
            cw.Axpby(1.0 - B1, g, B1, m)
            cw.SquareInto(g, tmp)
            cw.Axpby(1.0 - B2, tmp, B2, v)
            cw.SqrtInto(v, tmp)
            cw.MulInto(tmp, vs, tmp)
            cw.AddScalarInto(tmp, EPS, tmp)
            cw.DivInto(m, tmp, tmp)
            cw.AxpyTensor(-1.0, ss, tmp, p)

        out[f"{label}|sgd"] = best_time(
            lambda: cw.SGDMomentumStep(lr, MOM, 0.0, False, g, m, p), t)
        out[f"{label}|sgd passes"] = best_time(sgd_passes, t)
        out[f"{label}|adam"] = best_time(
            lambda: cw.AdamStep(ss, vs, none, B1, B2, EPS, 0.0, g, m, v, p), t)
        out[f"{label}|adam passes"] = best_time(adam_passes, t)

        def rmsprop_passes():
            cw.SquareInto(g, tmp)
            cw.Axpby(1.0 - RHO, tmp, RHO, v)
            cw.SqrtInto(v, tmp)
            cw.AddScalarInto(tmp, EPS, tmp)
            cw.DivInto(g, tmp, tmp)
            cw.AxpyTensor(-1.0, lr, tmp, p)

        out[f"{label}|rmsprop"] = best_time(
            lambda: cw.RMSPropStep(lr, RHO, EPS, 0.0, g, v, p), t)
        out[f"{label}|rmsprop passes"] = best_time(rmsprop_passes, t)
    return out


def numpy_side(threads, quick=False):
    t = 0.05 if quick else 0.2
    out = {}
    for label, n in SIZES:
        p, g, m, v = _arrays(n)
        tmp = np.empty_like(p)

        def sgd():
            np.multiply(m, np.float32(MOM), out=m)
            np.add(m, g, out=m)
            np.multiply(m, np.float32(LR), out=tmp)
            np.subtract(p, tmp, out=p)

        def average(acc, beta, x):
            # acc = beta * acc + (1 - beta) * x, through tmp (x may be tmp)
            np.multiply(acc, np.float32(beta), out=acc)
            np.multiply(x, np.float32(1 - beta), out=tmp)
            np.add(acc, tmp, out=acc)

        def adam():
            average(m, B1, g)
            np.multiply(g, g, out=tmp)
            average(v, B2, tmp)
            np.sqrt(v, out=tmp)
            np.multiply(tmp, np.float32(V_SCALE), out=tmp)
            np.add(tmp, np.float32(EPS), out=tmp)
            np.divide(m, tmp, out=tmp)
            np.multiply(tmp, np.float32(STEP_SIZE), out=tmp)
            np.subtract(p, tmp, out=p)

        def rmsprop():
            np.multiply(g, g, out=tmp)
            average(v, RHO, tmp)
            np.sqrt(v, out=tmp)
            np.add(tmp, np.float32(EPS), out=tmp)
            np.divide(g, tmp, out=tmp)
            np.multiply(tmp, np.float32(LR), out=tmp)
            np.subtract(p, tmp, out=p)

        out[f"{label}|sgd"] = best_time(sgd, t)
        out[f"{label}|adam"] = best_time(adam, t)
        out[f"{label}|rmsprop"] = best_time(rmsprop, t)
    return out


def torch_side(threads, quick=False):
    import torch
    torch.set_num_threads(threads)
    t = 0.05 if quick else 0.2
    out = {}
    for label, n in SIZES:
        p, g, _, _ = _arrays(n)
        for kind, make in (("sgd", lambda w: torch.optim.SGD([w], lr=LR, momentum=MOM)),
                           ("adam", lambda w: torch.optim.Adam([w], lr=LR)),
                           ("rmsprop", lambda w: torch.optim.RMSprop([w], lr=LR, alpha=RHO,
                                                                     eps=EPS))):
            w = torch.nn.Parameter(torch.from_numpy(p.copy()))
            w.grad = torch.from_numpy(g.copy())
            o = make(w)
            out[f"{label}|{kind}"] = best_time(o.step, t)
    return out


def main(argv=None):
    args = per_op_args(__doc__, argv)
    print(load_line("optimizer updates"))
    print(_harness.describe(args.rounds))
    sides = [_harness.Side("singa", "optim:singa_side", {"quick": args.quick}),
             _harness.Side("numpy", "optim:numpy_side", {"quick": args.quick}),
             _harness.Side("pytorch", "optim:torch_side", {"quick": args.quick},
                           needs="torch")]
    for threads in args.threads:
        res = _harness.compare(sides, threads=threads, rounds=args.rounds)
        rows = []
        for label, n in SIZES:
            for kind in ("sgd", "adam", "rmsprop"):
                one = res["singa"].median(f"{label}|{kind}")
                passes = res["singa"].median(f"{label}|{kind} passes")
                cells = [label, kind, f"{one * 1e6:.1f}", f"{passes * 1e6:.1f}",
                         f"{res['numpy'].median(f'{label}|{kind}') * 1e6:.1f}"]
                ratios = [f"{passes / one:.2f}"]
                if "pytorch" in res:
                    torch_t = res["pytorch"].median(f"{label}|{kind}")
                    cells.append(f"{torch_t * 1e6:.1f}")
                    ratios.append(f"{torch_t / one:.2f}")
                rows.append(cells + ratios)
        header = ["parameter", "step", "singa us", "passes us", "numpy us"]
        header += ["pytorch us"] if "pytorch" in res else []
        header += ["passes/singa"] + (["pytorch/singa"] if "pytorch" in res else [])
        print_table(f"{threads} thread(s), microseconds per update (median over rounds)",
                    header, rows)


if __name__ == "__main__":
    main()
