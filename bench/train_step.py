"""Milliseconds per training step, split into forward, loss, backward and
update, for singa and (when ``import torch`` works) PyTorch, with 1 and 2
CPU threads.

    PYTHONPATH=python python bench/train_step.py [--workloads mlp cnn resnet]
        [--threads 1 2] [--rounds 3] [--steps 20]

Each framework runs in a process of its own (bench/_harness.py), the two
alternating over the rounds; a round reports the median over its timed
steps and the table shows the median over rounds.

Workloads:
  mlp:    784-256-256-10, ReLU, softmax cross-entropy, SGD momentum 0.9,
          batch 128
  cnn:    LeNet, 1x28x28, batch 64: conv 1->20 5x5, relu, maxpool 2,
          conv 20->50 5x5, relu, maxpool 2, linear 800->500, relu,
          linear 500->10
  resnet: ResNet-18 for 3x32x32 images, batch 32: 3x3 stem (64), four
          stages of two basic blocks (64, 128, 256, 512 channels, stride 2
          from the second stage, 1x1 projection shortcuts), batch norm,
          global average pooling, linear 512->10
Each phase is timed on its own (singa's backward is drained into a list
before the optimizer runs).
"""

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

PHASES = ("forward", "loss", "backward", "update")
# The targets: singa's step time at most this fraction of PyTorch's.
TARGETS = {"mlp": 0.8, "cnn": 0.5, "resnet": 0.7}
DEFAULT_STEPS = {"mlp": 30, "cnn": 20, "resnet": 4}
DEFAULT_WARMUP = {"mlp": 3, "cnn": 3, "resnet": 1}
RESNET_WIDTHS = (64, 128, 256, 512)


def data(workload, seed=0):
    rng = np.random.default_rng(seed)
    if workload == "mlp":
        x = rng.standard_normal((128, 784)).astype(np.float32)
        n = 128
    elif workload == "cnn":
        x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
        n = 64
    else:
        x = rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
        n = 32
    return x, rng.integers(0, 10, n).astype(np.int32)


# ---------------------------------------------------------------- singa side

def singa_model(workload):
    """The workload's network as a singa Layer."""
    from singa import autograd, layer

    class MLP(layer.Layer):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = layer.Linear(256), layer.Linear(256), layer.Linear(10)
            self.relu = layer.ReLU()

        def forward(self, x):
            return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))

    class LeNet(layer.Layer):
        def __init__(self):
            super().__init__()
            self.conv1 = layer.Conv2d(20, 5)
            self.conv2 = layer.Conv2d(50, 5)
            self.pool = layer.MaxPool2d(2)
            self.relu = layer.ReLU()
            self.flatten = layer.Flatten()
            self.fc1, self.fc2 = layer.Linear(500), layer.Linear(10)

        def forward(self, x):
            y = self.pool(self.relu(self.conv1(x)))
            y = self.pool(self.relu(self.conv2(y)))
            return self.fc2(self.relu(self.fc1(self.flatten(y))))

    class Block(layer.Layer):
        def __init__(self, channels, stride):
            super().__init__()
            self.conv1 = layer.Conv2d(channels, 3, stride=stride, padding=1, bias=False)
            self.bn1 = layer.BatchNorm2d()
            self.conv2 = layer.Conv2d(channels, 3, padding=1, bias=False)
            self.bn2 = layer.BatchNorm2d()
            self.relu = layer.ReLU()
            self.add = layer.Add()
            self.short = None
            if stride != 1:
                self.short = layer.Sequential(
                    layer.Conv2d(channels, 1, stride=stride, bias=False), layer.BatchNorm2d())

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(self.add(y, x if self.short is None else self.short(x)))

    class ResNet18(layer.Layer):
        def __init__(self):
            super().__init__()
            self.stem = layer.Sequential(
                layer.Conv2d(RESNET_WIDTHS[0], 3, padding=1, bias=False),
                layer.BatchNorm2d(), layer.ReLU())
            self.blocks = [Block(w, 2 if i > 0 and j == 0 else 1)
                           for i, w in enumerate(RESNET_WIDTHS) for j in range(2)]
            self.flatten = layer.Flatten()
            self.fc = layer.Linear(10)

        def forward(self, x):
            y = self.stem(x)
            for b in self.blocks:
                y = b(y)
            return self.fc(self.flatten(autograd.globalaveragepool(y)))

    return {"mlp": MLP, "cnn": LeNet, "resnet": ResNet18}[workload]()


def singa_step(threads, workload, steps, warmup=3):
    """Side function: median ms per phase of singa's training step."""
    import singa
    from singa import autograd, opt, tensor

    singa.set_num_threads(threads)
    now = _harness.clock()
    xn, yn = data(workload)
    x, y = tensor.from_numpy(xn), tensor.from_numpy(yn)
    x.requires_grad = y.requires_grad = False
    net = singa_model(workload)
    sgd = opt.SGD(lr=0.01, momentum=0.9)
    times = {p: [] for p in PHASES}
    with autograd.train_mode(True):
        for step in range(warmup + steps):
            t0 = now()
            out = net(x)
            t1 = now()
            loss = autograd.softmax_cross_entropy(out, y)
            loss.item()
            t2 = now()
            grads = list(autograd.backward(loss))
            t3 = now()
            for p, g in grads:
                sgd.apply(p.name, p, g)
            sgd.step()
            grads[0][0].data.device().Sync()
            t4 = now()
            if step >= warmup:
                for p, a, b in zip(PHASES, (t0, t1, t2, t3), (t1, t2, t3, t4)):
                    times[p].append(b - a)
    return _summary(times)


# -------------------------------------------------------------- PyTorch side

def torch_model(workload):
    import torch
    nn = torch.nn
    if workload == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if workload == "cnn":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = None
            if stride != 1:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                           nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.short is None else self.short(x)))

    layers = [nn.Conv2d(3, RESNET_WIDTHS[0], 3, 1, 1, bias=False),
              nn.BatchNorm2d(RESNET_WIDTHS[0]), nn.ReLU()]
    prev = RESNET_WIDTHS[0]
    for i, w in enumerate(RESNET_WIDTHS):
        for j in range(2):
            layers.append(Block(prev, w, 2 if i > 0 and j == 0 else 1))
            prev = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(prev, 10)]
    return nn.Sequential(*layers)


def torch_step(threads, workload, steps, warmup=3):
    """Side function: median ms per phase of PyTorch's training step."""
    import torch

    torch.set_num_threads(threads)
    now = _harness.clock()
    xn, yn = data(workload)
    x, y = torch.from_numpy(xn), torch.from_numpy(yn.astype(np.int64))
    net = torch_model(workload)
    net.train()
    sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = {p: [] for p in PHASES}
    for step in range(warmup + steps):
        t0 = now()
        out = net(x)
        t1 = now()
        loss = loss_fn(out, y)
        loss.item()
        t2 = now()
        loss.backward()
        t3 = now()
        sgd.step()
        sgd.zero_grad(set_to_none=True)
        t4 = now()
        if step >= warmup:
            for p, a, b in zip(PHASES, (t0, t1, t2, t3), (t1, t2, t3, t4)):
                times[p].append(b - a)
    return _summary(times)


def _summary(times):
    totals = [sum(v) for v in zip(*times.values())]
    out = {p: 1e3 * statistics.median(v) for p, v in times.items()}
    out["total"] = 1e3 * statistics.median(totals)
    return out


# ------------------------------------------------------------------- table

def step_table(workloads, threads, rounds, steps=None, no_torch=False, out=print):
    """Runs the comparisons and prints the step table; returns
    [(workload, threads, singa/pytorch ratio)]."""
    header = (f"{'workload':8} {'thr':>3} {'framework':9} " +
              " ".join(f"{p:>9}" for p in PHASES) +
              f" {'total':>9} {'ratio':>6} {'paired':>6} {'best':>6} {'target':>6}")
    out("ms per training step: median over rounds of each process's median step")
    out("(" + _harness.describe(rounds) + "; ratio: singa's median over PyTorch's; " +
        _harness.PAIRED_NOTE + ")")
    out(header)
    out("-" * len(header))
    ratios = []
    for workload in workloads:
        n_steps = steps or DEFAULT_STEPS[workload]
        for n in threads:
            kw = {"workload": workload, "steps": n_steps, "warmup": DEFAULT_WARMUP[workload]}
            sides = [_harness.Side("singa", "train_step:singa_step", kw)]
            if not no_torch:
                sides.append(_harness.Side("pytorch", "train_step:torch_step", kw,
                                           needs="torch"))
            res = _harness.compare(sides, threads=n, rounds=rounds)
            s_total = res["singa"].median("total")
            for name, r in res.items():
                ratio = paired = best = target = ""
                if name == "singa" and "pytorch" in res:
                    ratio_v = s_total / res["pytorch"].median("total")
                    paired_v, best_v = _harness.ratios(r, res["pytorch"], "total")
                    ratio, target = f"{ratio_v:6.2f}", f"{TARGETS[workload]:6.2f}"
                    paired, best = f"{paired_v:6.2f}", f"{best_v:6.2f}"
                    ratios.append((workload, n, ratio_v, paired_v, best_v))
                out(f"{workload:8} {n:3d} {name:9} " +
                    " ".join(f"{r.median(p):9.2f}" for p in PHASES) +
                    f" {r.median('total'):9.2f} {ratio:>6} {paired:>6} {best:>6} {target:>6}")
    if not ratios and not no_torch:
        out("(torch is not installed: singa only)")
    for workload, n, ratio, paired, best in ratios:
        verdict = "meets" if ratio <= TARGETS[workload] else "misses"
        out(f"{workload} with {n} thread(s): singa/pytorch = {ratio:.2f} "
            f"({verdict} the {TARGETS[workload]}x target; paired {paired:.2f}, "
            f"best {best:.2f})")
    return [r[:3] for r in ratios]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=None,
                    help="timed steps per process (default: 30 mlp, 20 cnn, 4 resnet)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workloads", nargs="+", default=["mlp", "cnn"],
                    choices=["mlp", "cnn", "resnet"])
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with process CPU time (1-thread figures on a busy machine)")
    args = ap.parse_args(argv)
    _harness.use_cpu_time(args.cpu_time)
    step_table(args.workloads, args.threads, args.rounds, args.steps, args.no_torch)


if __name__ == "__main__":
    main()
