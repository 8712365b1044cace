"""Graph mode against eager mode and PyTorch: training-step time, per-op
cost and peak memory, with 1 and 2 CPU threads.

    PYTHONPATH=python python bench/graph_mode.py [--rounds 3] [--threads 1 2]
                                                 [--rows mlp lstm lenet add model memory]

Rows (singa eager, singa graph = Model.compile(use_graph=True), PyTorch
eager; each in a process of its own, see bench/_harness.py):
  mlp     MLP 784-256-256-10, batch 16, SGD momentum 0.9, softmax cross-entropy
  lstm    2-layer LSTM, hidden 128, sequence 32, batch 16, input 64, then a
          linear layer on the last step; SGD momentum 0.9
  lenet   the CNN of bench/train_step.py (batch 64, 1x28x28)
  add     a + b on 4x4 float32 tensors from Python, microseconds per call
  model   MLP 784-256-256-10 at batch 128, eager: the Model path (compile,
          train_one_batch, self.optimizer(loss)) against the autograd path of
          bench/train_step.py (layers called directly, backward, update)
  memory  peak bytes of a ResNet-18 training step (CIFAR layout, batch 32,
          3x32x32), singa eager and graph, from dev.memory_stats()
Times are medians over the timed steps of a run; the table shows the median
over rounds. Targets (issue 9): graph <= 0.5x eager and below PyTorch for
mlp and lstm; graph no slower than eager for lenet; add at most PyTorch's;
the Model path no costlier than the autograd path and at most PyTorch's;
graph peak <= 0.7x eager peak.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

WORKLOADS = {
    "mlp": dict(batch=16, steps=200, warmup=20),
    "lstm": dict(batch=16, steps=30, warmup=5),
    "lenet": dict(batch=64, steps=30, warmup=5),
    "model": dict(batch=128, steps=60, warmup=10),
}


def _data(workload, batch, rng):
    if workload in ("mlp", "model"):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
    elif workload == "lstm":
        x = rng.standard_normal((32, batch, 64)).astype(np.float32)
    elif workload == "lenet":
        x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    else:
        x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)
    return x, y


def _median_step_ms(step, steps, warmup):
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


# ---- singa ----

def _singa_models():
    from singa import autograd, layer, model

    class Net(model.Model):
        def __init__(self, body):
            super().__init__()
            self.body = body
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, x):
            return self.body(x)

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss(out, y)
            self.optimizer(loss)
            return out, loss

    def mlp():
        return layer.Sequential(layer.Linear(256), layer.ReLU(), layer.Linear(256),
                                layer.ReLU(), layer.Linear(10))

    class LSTMBody(layer.Layer):
        def __init__(self):
            super().__init__()
            self.lstm1, self.lstm2 = layer.LSTM(128), layer.LSTM(128)
            self.fc = layer.Linear(10)

        def forward(self, x):
            seq, _, _ = self.lstm1(x)   # outputs, last h, last c
            _, h, _ = self.lstm2(seq)
            return self.fc(h)

    def lenet():
        return layer.Sequential(layer.Conv2d(20, 5), layer.ReLU(), layer.MaxPool2d(2),
                                layer.Conv2d(50, 5), layer.ReLU(), layer.MaxPool2d(2),
                                layer.Flatten(), layer.Linear(500), layer.ReLU(),
                                layer.Linear(10))

    class Block(layer.Layer):
        def __init__(self, c, stride, project):
            super().__init__()
            self.conv1 = layer.Conv2d(c, 3, stride=stride, padding=1, bias=False)
            self.bn1 = layer.BatchNorm2d()
            self.conv2 = layer.Conv2d(c, 3, padding=1, bias=False)
            self.bn2 = layer.BatchNorm2d()
            self.relu = layer.ReLU()
            self.shortcut = layer.Sequential(layer.Conv2d(c, 1, stride=stride, bias=False),
                                             layer.BatchNorm2d()) if project else None

        def forward(self, x):
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(autograd.add(y, x if self.shortcut is None else self.shortcut(x)))

    class ResNet18(layer.Layer):
        def __init__(self):
            super().__init__()
            self.stem = layer.Sequential(layer.Conv2d(64, 3, padding=1, bias=False),
                                         layer.BatchNorm2d(), layer.ReLU())
            blocks, prev = [], 64
            for i, w in enumerate((64, 128, 256, 512)):
                for j in range(2):
                    s = 2 if i > 0 and j == 0 else 1
                    blocks.append(Block(w, s, s != 1 or w != prev))
                    prev = w
            self.blocks = blocks
            self.fc = layer.Linear(10)

        def forward(self, x):
            y = self.stem(x)
            for b in self.blocks:
                y = b(y)
            return self.fc(autograd.flatten(autograd.globalaveragepool(y)))

    bodies = {"mlp": mlp, "model": mlp, "lstm": LSTMBody, "lenet": lenet, "resnet18": ResNet18}
    return Net, bodies


def singa_step(threads, workload, mode):
    """ms per training step; mode is "eager", "graph" or, for the model
    row, "autograd" (the layers called directly, as bench/train_step.py)."""
    import singa
    from singa import autograd, opt, tensor
    singa.set_num_threads(threads)
    cfg = WORKLOADS[workload]
    xn, yn = _data(workload, cfg["batch"], np.random.default_rng(0))
    x, y = tensor.from_numpy(xn), tensor.from_numpy(yn)
    Net, bodies = _singa_models()
    sgd = opt.SGD(lr=0.01, momentum=0.9)
    if mode == "autograd":
        body = bodies[workload]()
        x.requires_grad = y.requires_grad = False

        def step():
            with autograd.train_mode(True):
                loss = autograd.softmax_cross_entropy(body(x), y)
                for p, g in autograd.backward(loss):
                    sgd.update(p, g)
                sgd.step()
    else:
        m = Net(bodies[workload]())
        m.set_optimizer(sgd)
        m.compile([x], is_train=True, use_graph=mode == "graph")

        def step():
            m(x, y)
    return {"ms": _median_step_ms(step, cfg["steps"], cfg["warmup"])}


def singa_add(threads):
    import singa
    from singa import tensor
    singa.set_num_threads(threads)
    a = tensor.from_numpy(np.ones((4, 4), np.float32))
    b = tensor.from_numpy(np.ones((4, 4), np.float32))
    return {"us": _per_call_us(lambda: a + b)}


def singa_memory(threads, mode):
    """Peak bytes of a ResNet-18 training step, after three warm-up steps
    (graph mode times its first two runs, then plans recomputation)."""
    import singa
    from singa import device, opt, tensor
    singa.set_num_threads(threads)
    dev = device.get_default_device()
    xn, yn = _data("resnet18", 32, np.random.default_rng(0))
    x, y = tensor.from_numpy(xn, dev), tensor.from_numpy(yn, dev)
    Net, bodies = _singa_models()
    m = Net(bodies["resnet18"]())
    m.set_optimizer(opt.SGD(lr=0.01, momentum=0.9))
    m.compile([x], is_train=True, use_graph=mode == "graph")
    for _ in range(3):
        m(x, y)
    dev.reset_peak_memory()
    t0 = time.perf_counter()
    m(x, y)
    return {"peak_mb": dev.memory_stats()["peak"] / 2 ** 20,
            "ms": 1e3 * (time.perf_counter() - t0)}


def _per_call_us(fn, calls=20000, repeat=7):
    for _ in range(calls // 10):
        fn()
    best = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best.append((time.perf_counter() - t0) / calls)
    return 1e6 * statistics.median(best)


# ---- PyTorch ----

def torch_step(threads, workload):
    import torch
    torch.set_num_threads(threads)
    nn = torch.nn
    cfg = WORKLOADS[workload]
    xn, yn = _data(workload, cfg["batch"], np.random.default_rng(0))
    x, y = torch.from_numpy(xn), torch.from_numpy(yn.astype(np.int64))
    if workload in ("mlp", "model"):
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10))
    elif workload == "lenet":
        net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    else:
        class LSTMNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(64, 128, num_layers=2)
                self.fc = nn.Linear(128, 10)

            def forward(self, x):
                _, (h, _) = self.lstm(x)
                return self.fc(h[-1])
        net = LSTMNet()
    sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        sgd.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        sgd.step()
    return {"ms": _median_step_ms(step, cfg["steps"], cfg["warmup"])}


def torch_add(threads):
    import torch
    torch.set_num_threads(threads)
    a, b = torch.ones(4, 4), torch.ones(4, 4)
    return {"us": _per_call_us(lambda: a + b)}


# ---- the table ----

def _sides(row):
    t = "torch"
    if row in ("mlp", "lstm", "lenet"):
        return [_harness.Side("singa eager", "graph_mode:singa_step",
                              {"workload": row, "mode": "eager"}),
                _harness.Side("singa graph", "graph_mode:singa_step",
                              {"workload": row, "mode": "graph"}),
                _harness.Side("pytorch", "graph_mode:torch_step", {"workload": row}, needs=t)]
    if row == "model":
        return [_harness.Side("singa Model", "graph_mode:singa_step",
                              {"workload": "model", "mode": "eager"}),
                _harness.Side("singa autograd", "graph_mode:singa_step",
                              {"workload": "model", "mode": "autograd"}),
                _harness.Side("pytorch", "graph_mode:torch_step", {"workload": "model"},
                              needs=t)]
    if row == "add":
        return [_harness.Side("singa", "graph_mode:singa_add"),
                _harness.Side("pytorch", "graph_mode:torch_add", needs=t)]
    return [_harness.Side("singa eager", "graph_mode:singa_memory", {"mode": "eager"}),
            _harness.Side("singa graph", "graph_mode:singa_memory", {"mode": "graph"})]


def _verdict(row, r):
    def med(name, metric):
        return r[name].median(metric) if name in r else None

    if row in ("mlp", "lstm", "lenet"):
        e, g, p = med("singa eager", "ms"), med("singa graph", "ms"), med("pytorch", "ms")
        text = f"graph/eager {g / e:.2f}"
        ok = g <= (0.5 if row != "lenet" else 1.0) * e
        if p is not None:
            text += f", graph/pytorch {g / p:.2f}, eager/pytorch {e / p:.2f}"
            ok = ok and (row == "lenet" or g < p)
        return text, ok
    if row == "model":
        mo, au, p = med("singa Model", "ms"), med("singa autograd", "ms"), med("pytorch", "ms")
        text, ok = f"Model/autograd {mo / au:.2f}", mo <= au * 1.02
        if p is not None:
            text += f", Model/pytorch {mo / p:.2f}"
            ok = ok and mo <= p
        return text, ok
    if row == "add":
        s, p = med("singa", "us"), med("pytorch", "us")
        return (f"singa/pytorch {s / p:.2f}", s <= p) if p is not None else ("", True)
    e, g = med("singa eager", "peak_mb"), med("singa graph", "peak_mb")
    return f"graph/eager peak {g / e:.2f}", g <= 0.7 * e


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rows", nargs="+", default=["mlp", "lstm", "lenet", "add", "model",
                                                  "memory"],
                    choices=["mlp", "lstm", "lenet", "add", "model", "memory"])
    args = ap.parse_args(argv)
    cpu = subprocess.run(["sh", "-c", "lscpu | grep 'Model name' | sed 's/.*: *//'"],
                         capture_output=True, text=True).stdout.strip()
    print(f"graph mode bench on {cpu or 'an unknown CPU'}, load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(_harness.describe(args.rounds))
    header = f"{'row':7} {'thr':>3}  {'side':15} {'value':>10}  {'min':>10}"
    for row in args.rows:
        for n in args.threads:
            rounds = 1 if row == "memory" else args.rounds
            res = _harness.compare(_sides(row), threads=n, rounds=rounds)
            print()
            print(header)
            print("-" * len(header))
            for name, samples in res.items():
                metric = samples.metrics()[0]
                unit = {"ms": "ms", "us": "us", "peak_mb": "MiB"}[metric]
                print(f"{row:7} {n:3d}  {name:15} {samples.median(metric):8.3f}{unit:>3} "
                      f"{samples.min(metric):8.3f}{unit:>3}")
            text, ok = _verdict(row, res)
            print(f"  {text}: {'meets' if ok else 'misses'} the target", flush=True)


if __name__ == "__main__":
    main()
