"""Per-operator cost of autograd on tiny tensors, where the Python engine
(recording, Dummy leaves, wrapping outputs) dominates the arithmetic, and
the same for whole layers (a 3x3 convolution, batch norm and 2x2 max
pooling on a (1, 8, 4, 4) input: the layer's checks on top).

    python bench/autograd_overhead.py [--rounds 3]

Prints microseconds per call for singa (the raw ``singa_wrap`` kernel, the
autograd function with ``training`` off and on) and, where installed,
PyTorch (``torch.no_grad()`` and with ``requires_grad``), each framework in
a process of its own (see _harness). Times are CPU time of the calling
thread (``time.thread_time``), best of several runs, so load from other
processes inflates them less than wall-clock time; one thread.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import _harness  # noqa: E402

CASES = ("add 4x4", "relu 4x4", "matmul 4x4", "mlp step", "conv layer", "bn layer",
         "maxpool layer")


def _best(fn, n=2000, repeat=7):
    """Best per-call CPU seconds of fn over repeat runs of n calls."""
    for _ in range(50):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time() - t0) / n)
    return best


def singa_side(threads):
    import numpy as np
    import singa
    from singa import autograd, singa_wrap, tensor
    singa.set_num_threads(1)
    rng = np.random.default_rng(0)
    a = tensor.from_numpy(rng.standard_normal((4, 4)).astype(np.float32))
    b = tensor.from_numpy(rng.standard_normal((4, 4)).astype(np.float32))
    b.stores_grad = True
    w1 = tensor.from_numpy(rng.standard_normal((4, 8)).astype(np.float32))
    w2 = tensor.from_numpy(rng.standard_normal((8, 4)).astype(np.float32))
    w1.stores_grad = w2.stores_grad = True

    def step():
        h = autograd.relu(autograd.matmul(a, w1))
        loss = autograd.reduce_mean(autograd.mul(autograd.matmul(h, w2), b))
        for _ in autograd.backward(loss):
            pass

    out = {
        "add 4x4/raw": _best(lambda: singa_wrap.Add(a.data, b.data)),
        "relu 4x4/raw": _best(lambda: singa_wrap.ReLU(a.data)),
        "matmul 4x4/raw": _best(lambda: singa_wrap.Mult(a.data, b.data)),
    }
    for mode, flag in (("off", False), ("on", True)):
        autograd.training = flag
        out[f"add 4x4/{mode}"] = _best(lambda: autograd.add(a, b))
        out[f"relu 4x4/{mode}"] = _best(lambda: autograd.relu(a))
        out[f"matmul 4x4/{mode}"] = _best(lambda: autograd.matmul(a, b))
    autograd.training = True
    out["mlp step/on"] = _best(step, n=500)
    autograd.training = False
    out.update(_singa_layers(rng))
    return {k: v * 1e6 for k, v in out.items()}


def _singa_layers(rng):
    """Layer rows: raw is the layer's C++ kernel on the same operands."""
    import numpy as np
    from singa import autograd, layer, singa_wrap, tensor
    x = tensor.from_numpy(rng.standard_normal((1, 8, 4, 4)).astype(np.float32))
    conv, bn, pool = layer.Conv2d(8, 3, padding=1, bias=False), layer.BatchNorm2d(), \
        layer.MaxPool2d(2)
    layers = {"conv layer": conv, "bn layer": bn, "maxpool layer": pool}
    for lay in layers.values():
        lay(x)
    none = singa_wrap.Tensor()
    out = {
        "conv layer/raw": _best(lambda: singa_wrap.Conv2dForward(
            x.data, conv.W.data, none, [1, 1], [1, 1, 1, 1], [1, 1], 1)),
        "bn layer/raw": _best(lambda: singa_wrap.BatchNormForwardInference(
            x.data, bn.scale.data, bn.bias.data, bn.running_mean.data, bn.running_var.data,
            bn.epsilon)),
        "maxpool layer/raw": _best(lambda: singa_wrap.MaxPool2dForward(
            x.data, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], False)),
    }
    for mode, flag in (("off", False), ("on", True)):
        with autograd.train_mode(flag):
            for name, lay in layers.items():
                out[f"{name}/{mode}"] = _best(lambda: lay(x))
    return out


def torch_side(threads):
    import torch
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 4, generator=g, requires_grad=True)
    b = torch.randn(4, 4, generator=g, requires_grad=True)
    w1 = torch.randn(4, 8, generator=g, requires_grad=True)
    w2 = torch.randn(8, 4, generator=g, requires_grad=True)

    def step():
        h = torch.relu(a @ w1)
        loss = ((h @ w2) * b).mean()
        loss.backward()

    out = {}
    with torch.no_grad():
        out["add 4x4/off"] = _best(lambda: a + b)
        out["relu 4x4/off"] = _best(lambda: torch.relu(a))
        out["matmul 4x4/off"] = _best(lambda: a @ b)
    out["add 4x4/on"] = _best(lambda: a + b)
    out["relu 4x4/on"] = _best(lambda: torch.relu(a))
    out["matmul 4x4/on"] = _best(lambda: a @ b)
    out["mlp step/on"] = _best(step, n=500)
    x = torch.randn(1, 8, 4, 4, generator=g)
    layers = {"conv layer": torch.nn.Conv2d(8, 8, 3, padding=1, bias=False),
              "bn layer": torch.nn.BatchNorm2d(8), "maxpool layer": torch.nn.MaxPool2d(2)}
    for name, lay in layers.items():
        lay.eval()
        with torch.no_grad():
            out[f"{name}/off"] = _best(lambda: lay(x))
        lay.train()
        out[f"{name}/on"] = _best(lambda: lay(x))
    return {k: v * 1e6 for k, v in out.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    sides = [_harness.Side("singa", "autograd_overhead:singa_side"),
             _harness.Side("pytorch", "autograd_overhead:torch_side", needs="torch")]
    res = _harness.compare(sides, threads=1, rounds=args.rounds)
    s = res["singa"]
    t = res.get("pytorch")
    header = ["op (us per call)", "singa raw", "singa off", "singa on", "torch off", "torch on"]
    rows = []
    for case in CASES:
        def cell(samples, mode):
            key = f"{case}/{mode}"
            if samples is None or key not in samples.metrics():
                return "-"
            return f"{samples.min(key):.2f}"
        rows.append([case, cell(s, "raw"), cell(s, "off"), cell(s, "on"), cell(t, "off"),
                     cell(t, "on")])
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print("\nautograd per-op cost (CPU time, one thread; 'off' = training off / no_grad, "
          "'on' = recording for backward; mlp step = forward + backward of 6 ops; a layer's "
          "raw cell is its C++ kernel, its 'off' row runs in evaluation mode, 'on' in "
          "training mode)")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
    print(_harness.describe(args.rounds, stat="minimum",
                            clock="CPU time of the calling thread"))


if __name__ == "__main__":
    main()
