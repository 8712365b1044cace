"""Milliseconds per training step, split into forward, loss, backward and
update, for singa and (when ``import torch`` works) PyTorch in the same run,
with 1 and 2 CPU threads.

    PYTHONPATH=python python3 bench/train_step.py [--steps 30] [--threads 1 2]

Workloads:
  mlp: 784-256-256-10, ReLU, softmax cross-entropy, SGD momentum 0.9, batch 128
  cnn: 1x28x28, batch 64: conv 1->20 5x5, relu, maxpool 2, conv 20->50 5x5,
       relu, maxpool 2, linear 800->500, relu, linear 500->10
Each phase is timed on its own (singa's backward is drained into a list
before the optimizer runs) and the median over the timed steps is shown.
"""

import argparse
import statistics
import time

import numpy as np

import singa
from singa import autograd, layer, opt, tensor

PHASES = ("forward", "loss", "backward", "update")


def _data(workload, rng):
    if workload == "mlp":
        x = rng.standard_normal((128, 784)).astype(np.float32)
        y = rng.integers(0, 10, 128).astype(np.int32)
    else:
        x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
        y = rng.integers(0, 10, 64).astype(np.int32)
    return x, y


class _SingaMLP(layer.Layer):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = layer.Linear(256), layer.Linear(256), layer.Linear(10)
        self.relu = layer.ReLU()

    def forward(self, x):
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


class _SingaCNN(layer.Layer):
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


def bench_singa(workload, threads, steps, warmup, rng):
    singa.set_num_threads(threads)
    xn, yn = _data(workload, rng)
    x, y = tensor.from_numpy(xn), tensor.from_numpy(yn)
    x.requires_grad = y.requires_grad = False
    net = _SingaMLP() if workload == "mlp" else _SingaCNN()
    sgd = opt.SGD(lr=0.01, momentum=0.9)
    times = {p: [] for p in PHASES}
    with autograd.train_mode(True):
        for step in range(warmup + steps):
            t0 = time.perf_counter()
            out = net(x)
            t1 = time.perf_counter()
            loss = autograd.softmax_cross_entropy(out, y)
            loss.item()
            t2 = time.perf_counter()
            grads = list(autograd.backward(loss))
            t3 = time.perf_counter()
            for p, g in grads:
                sgd.apply(p.name, p, g)
            sgd.step()
            grads[0][0].data.device().Sync()
            t4 = time.perf_counter()
            if step >= warmup:
                for p, a, b in zip(PHASES, (t0, t1, t2, t3), (t1, t2, t3, t4)):
                    times[p].append(b - a)
    return {p: 1e3 * statistics.median(v) for p, v in times.items()}


def bench_torch(torch, workload, threads, steps, warmup, rng):
    torch.set_num_threads(threads)
    nn = torch.nn
    xn, yn = _data(workload, rng)
    x, y = torch.from_numpy(xn), torch.from_numpy(yn.astype(np.int64))
    if workload == "mlp":
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10))
    else:
        net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times = {p: [] for p in PHASES}
    for step in range(warmup + steps):
        t0 = time.perf_counter()
        out = net(x)
        t1 = time.perf_counter()
        loss = loss_fn(out, y)
        loss.item()
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        sgd.step()
        sgd.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        if step >= warmup:
            for p, a, b in zip(PHASES, (t0, t1, t2, t3), (t1, t2, t3, t4)):
                times[p].append(b - a)
    return {p: 1e3 * statistics.median(v) for p, v in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workloads", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn"])
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            print("(torch is not installed: singa only)")
    targets = {"mlp": 1.2, "cnn": 1.5}

    header = (f"{'workload':8} {'thr':>3} {'framework':9} " +
              " ".join(f"{p:>9}" for p in PHASES) + f" {'total':>9} {'ratio':>6}")
    print("ms per training step (median)")
    print(header)
    print("-" * len(header))
    rows = []
    for workload in args.workloads:
        for n in args.threads:
            rng = np.random.default_rng(0)
            s = bench_singa(workload, n, args.steps, args.warmup, rng)
            results = [("singa", s)]
            if torch is not None:
                results.append(("pytorch", bench_torch(torch, workload, n, args.steps,
                                                       args.warmup, np.random.default_rng(0))))
            s_total = sum(s.values())
            for name, r in results:
                total = sum(r.values())
                ratio = ""
                if name == "singa" and torch is not None:
                    t_total = sum(results[1][1].values())
                    ratio = f"{s_total / t_total:6.2f}"
                    rows.append((workload, n, s_total / t_total))
                print(f"{workload:8} {n:3d} {name:9} " +
                      " ".join(f"{r[p]:9.2f}" for p in PHASES) + f" {total:9.2f} {ratio:>6}",
                      flush=True)
    if rows:
        print()
        for workload, n, ratio in rows:
            verdict = "meets" if ratio <= targets[workload] else "misses"
            print(f"{workload} with {n} thread(s): singa/pytorch = {ratio:.2f} "
                  f"({verdict} the {targets[workload]}x target)")


if __name__ == "__main__":
    main()
